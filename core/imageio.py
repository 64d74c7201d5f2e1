"""Load any accepted image as an RGB picture for a model, without touching the file.

Web images come in every shape: CMYK JPEGs, palette PNGs with transparency, 16-bit PNGs,
animated GIF/WebP, EXIF-rotated phone photos. They are normalised here, at load time, so the
stored original stays byte-identical to what was fetched (its sha256 is its identity).
"""
from __future__ import annotations

import io
import warnings
from pathlib import Path

from PIL import Image, ImageFile, ImageOps

from .errors import WildLensError

# Pillow's own bomb guard: more pixels than this is refused as a decompression bomb (it warns
# between 1x and 2x this value; we turn that warning into an error too).
MAX_IMAGE_PIXELS = 64_000_000
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS


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


def load_rgb(source) -> Image.Image:
    """Decode a path or bytes fully and return RGB. Raises ImageLoadError with a reason."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
            with Image.open(io.BytesIO(data)) as img:
                img.load()  # full decode: a truncated file fails here, not later in a worker
                return to_rgb(img).copy()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageLoadError(f"decompression bomb refused: {exc}") from None
    except FileNotFoundError:
        raise ImageLoadError("file not found") from None
    except Image.UnidentifiedImageError:
        raise ImageLoadError("not an image (unidentified format)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageLoadError(f"cannot decode: {exc}") from None


ImageFile.LOAD_TRUNCATED_IMAGES = False  # a truncated download is an error, never a grey half-image
