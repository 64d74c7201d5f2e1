"""Load any accepted image as an RGB picture for a model, without touching the file.

Web images come in every shape: CMYK JPEGs, palette PNGs with transparency, 16-bit PNGs,
animated GIF/WebP, EXIF-rotated phone photos. They are normalised here, at load time, so the
stored original stays byte-identical to what was fetched (its sha256 is its identity).
"""
from __future__ import annotations

import io
import os
import stat
import warnings
from pathlib import Path

from PIL import Image, ImageFile, ImageOps

from .errors import WildLensError

# Pillow's own bomb guard: more pixels than this is refused as a decompression bomb (it warns
# between 1x and 2x this value; we turn that warning into an error too).
MAX_IMAGE_PIXELS = 64_000_000
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS

# The most bytes read from one image file. Above every file that can hold an image Pillow accepts
# (MAX_IMAGE_PIXELS = 64 M pixels: 192 MB as uncompressed 8-bit RGB, 256 MB as RGBA),
# so no real image is refused, while a decode worker never holds more than this of one file.
MAX_IMAGE_BYTES = 256 * 1024 * 1024

# Images longer than this many times their width (or wider than this many times their height)
# are refused: a centre crop would show a twentieth of them or less, and they are strips, banners
# and bombs rather than photos. Refusing them bounds the resize of the shorter side, which is
# where the memory went: before, a 20000x1 PNG of 143 bytes took 5.0 GB and 3.4 s to preprocess
# for a 224 crop (torch resize; Pillow ran out of a 9 GB address space), a 64x400000 PNG 2.6 GB and
# 2.1 s (one core of this 2-core machine); now both are refused from their header (0.06 and
# 0.17 ms, no memory beyond the process's own), before any decoding, and no resize output exceeds
# MAX_ASPECT_RATIO * resize_size**2 pixels (256 x 5120 for a 224 crop: 3.9 MB, 26x the model
# input; a 12x240 image at the limit takes 2 ms). Computing only the crop of a long image
# instead (Pillow's resize of a source box) was tried and not kept: the Pillow here (13.0) orders
# its two passes by image size, so the crop alone differed from the full resize by up to 3/255 on
# up to 25% of the values, while within this limit the full resize is cheap and exact.
MAX_ASPECT_RATIO = 20


def ratio_text(long: int, short: int) -> str:
    """long/short to three decimals, trailing zeros dropped: '20.005' for 4001x200 (rounded to a whole
    number it read "(20:1) is beyond the 20:1 limit"), '20000' for a 20000x1 strip."""
    return f"{long / short:.3f}".rstrip("0").rstrip(".")


_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
               (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISLNK, "symbolic link"),
               (stat.S_ISREG, "regular file"))  # where a folder was expected (a '.FILE.parts' that is a file)


def file_kind(mode: int) -> str:
    """What a file is, for a reason: 'FIFO', 'character device', ..., 'regular file' where a folder was expected."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "special file")


def oversize_reason(size: int) -> str | None:
    """The reason a file of ``size`` bytes is not read, or None when it is within the limit."""
    limit = MAX_IMAGE_BYTES
    return f"file is {size} bytes, over the {limit}-byte limit for an image: not read" if size > limit else None


class ImageLoadError(WildLensError, ValueError):
    """The file is not a usable image; the message is the reason to record."""


def _flatten_alpha(img: Image.Image, background=(255, 255, 255)) -> Image.Image:
    rgba = img.convert("RGBA")
    canvas = Image.new("RGB", rgba.size, background)
    canvas.paste(rgba, mask=rgba.getchannel("A"))
    return canvas


def to_rgb(img: Image.Image) -> Image.Image:
    """Any Pillow image -> 8-bit RGB, EXIF orientation applied, transparency on white."""
    if getattr(img, "is_animated", False):
        img.seek(0)  # first frame of an animation
    img = ImageOps.exif_transpose(img)
    mode = img.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        # 16/32-bit greyscale: scale to 8 bits instead of clipping (clipping turns it white).
        import numpy as np

        arr = np.asarray(img, dtype=np.float64)
        top = 65535.0 if mode.startswith("I;16") or arr.max() > 255 else 255.0
        img = Image.fromarray((arr / top * 255.0).clip(0, 255).astype("uint8"), "L")
        mode = "L"
    if mode == "F":
        import numpy as np

        arr = np.asarray(img, dtype=np.float64)
        span = float(arr.max() - arr.min()) or 1.0
        img = Image.fromarray(((arr - arr.min()) / span * 255.0).astype("uint8"), "L")
        mode = "L"
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in img.info) or (
            mode in ("RGB", "L") and "transparency" in img.info):
        return _flatten_alpha(img)
    if mode == "CMYK":
        return img.convert("RGB")  # Pillow's conversion handles Adobe-inverted CMYK JPEGs
    return img.convert("RGB") if mode != "RGB" else img


def detached(rgb: Image.Image, opened: Image.Image) -> Image.Image:
    """``rgb`` (what :func:`to_rgb` made of ``opened``) as an image that outlives the file ``opened``
    was read from. Why not always ``.copy()``: ``to_rgb`` already returns a new image on every path
    (``exif_transpose`` copies even when there is nothing to turn), so a second copy of every
    decoded picture was pure cost (load_rgb on the packaged photographs, best of 8: 4.03 -> 3.98 ms)."""
    return rgb.copy() if rgb is opened else rgb


def load_error(exc: BaseException) -> ImageLoadError:
    """The rejection of an image whose loading raised ``exc``, with its reason on one line.

    Any exception counts, not only the ones a decoder is documented to raise: a hostile or damaged
    file reaches code paths that fail in their own way (an ``IndexError`` from ``is_animated`` on a
    GIF whose second frame is cut short, a ``struct.error`` or ``TypeError`` from
    ``exif_transpose`` on a corrupt EXIF block), and each of those used to abort a whole import
    or classify run instead of rejecting one image (issue 22 item 7)."""
    if isinstance(exc, ImageLoadError):
        return exc
    if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        return ImageLoadError(f"decompression bomb refused: {_flat(exc)}")
    if isinstance(exc, FileNotFoundError):
        return ImageLoadError("file not found")
    if isinstance(exc, Image.UnidentifiedImageError):
        return ImageLoadError("not an image (unidentified format)")
    if isinstance(exc, MemoryError):
        return ImageLoadError("cannot decode: out of memory while decoding")
    if isinstance(exc, (OSError, SyntaxError, ValueError)):
        return ImageLoadError(f"cannot decode: {_flat(exc)}")
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return ImageLoadError(f"cannot decode: {name}: {_flat(exc)}")  # IndexError, struct.error (not a bare 'error'), ...


def _flat(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


def read_image_file(path: str | Path) -> bytes:
    """The bytes of an image file: a regular file of at most :data:`core.MAX_IMAGE_BYTES`, checked on
    the opened file (``fstat``). Raises ImageLoadError with the reason otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer
    except FileNotFoundError:
        raise ImageLoadError("file not found") from None
    except OSError as exc:
        raise ImageLoadError(f"cannot open: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ImageLoadError(f"not a regular file ({file_kind(info.st_mode)}): not read")
        reason = oversize_reason(info.st_size)
        if reason:
            raise ImageLoadError(reason)
        try:
            data = handle.read(MAX_IMAGE_BYTES + 1)
        except OSError as exc:
            raise ImageLoadError(f"cannot read: {exc.strerror or exc}") from None
    reason = oversize_reason(len(data))  # grew while being read
    if reason:
        raise ImageLoadError(reason)
    return data


def refuse_bomb(img: Image.Image) -> None:
    """Raise ImageLoadError when ``img`` (opened, not decoded) has more than MAX_IMAGE_PIXELS pixels. Why
    not only Pillow's DecompressionBombWarning turned into an error: ``warnings.catch_warnings`` swaps the
    process's one filter list, so two images opened at once on two threads (a grid's thumbnails) could each
    undo the other's filter and a 64-128 Mpx image was decoded (a hostile check). Same words as before."""
    pixels = img.width * img.height
    if pixels > MAX_IMAGE_PIXELS:
        raise ImageLoadError(f"decompression bomb refused: Image size ({pixels} pixels) exceeds limit of "
                             f"{MAX_IMAGE_PIXELS} pixels, could be decompression bomb DOS attack.")


def open_rgb(source) -> tuple[Image.Image, str, str]:
    """(RGB picture, the file's format, its own mode) from one full decode of a path or bytes.
    Raises ImageLoadError with a reason for any failure (:func:`load_error`)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
            with Image.open(io.BytesIO(data)) as img:
                refuse_bomb(img)
                fmt, mode = img.format or "", img.mode  # as stored: before a GIF's frames change it
                img.load()  # full decode: a truncated file fails here, not later in a worker
                return detached(to_rgb(img), img), fmt, mode
    except Exception as exc:  # noqa: BLE001 - every failure is this image's rejection, with its reason
        raise load_error(exc) from None


def load_rgb(source) -> Image.Image:
    """Decode a path or bytes fully and return RGB. Raises ImageLoadError with a reason."""
    return open_rgb(source)[0]


ImageFile.LOAD_TRUNCATED_IMAGES = False  # a truncated download is an error, never a grey half-image
