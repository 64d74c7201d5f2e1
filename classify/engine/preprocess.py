"""Image -> model input, split where it saves work.

Worker processes do the pixel work that depends only on a :class:`~classify.models.registry.Geometry`
(resize the shorter side, centre-crop) and hand over uint8 tensors, a quarter of the bytes of
float32; the main process normalises on the device, per model, because models that share a
geometry often differ in mean/std.

Two resamplers compute the same antialiased resize (bicubic with a = -0.5, or bilinear, the
filter widened by the scale factor, as Pillow does):

* ``"torch"`` (the default for bilinear and bicubic): torchvision's resize of a uint8 tensor, whose
  AVX2 kernel is 4-8x faster than Pillow's (0.5-1.0 ms against 3-5 ms for a 640x427 photo; resize
  and crop with the conversions 1.5-2.9 ms against 3.3-6.7 ms, one core). Its
  fixed-point rounding differs from Pillow's: on the packaged photographs up to 0.64% of the
  values of a crop differ, by 1/255 (2/255 when enlarging noise). The top-1 of EfficientNet-
  Lite0/1/2 on those photos stayed the same and no probability moved by more than 1.3e-3; near-
  ties lower in the top-5 can swap, as they do between ONNX Runtime and PyTorch (tests pin this).
  The AVX2 kernel is x86's; elsewhere torch's generic kernel may round differently again.
* ``"pil"``: Pillow, through ``torchvision.transforms.functional`` as timm's eval transform
  (``timm.data.create_transform(..., is_training=False)``) does it; equal to that transform to
  the bit (the tests compare), and the same on every platform. Nearest and Lanczos always use it.

The batched pipeline uses ``"torch"`` unless ``InferenceOptions.resampler`` says ``"pil"``.

The work is bounded by the output, whatever the image's shape: an image whose aspect ratio is
beyond :data:`MAX_ASPECT_RATIO` is refused with its reason, from the file's header before it is
decoded (:func:`check_image_header`, and :func:`crop_to_tensor` for a decoded image), so a resize
of the shorter side never makes more than ``MAX_ASPECT_RATIO * resize_size**2`` pixels. Every image
within the limit takes the path it always took, to the bit.

Files are read through :func:`read_image_file`: regular files only (checked on the open file, so
a FIFO or a device swapped in after the folder scan is refused too, and opening never waits for a
FIFO's writer) and at most :data:`MAX_IMAGE_BYTES`, so a link to ``/dev/zero`` or a huge file is a
failed row, not a MemoryError.
"""
from __future__ import annotations

import functools
import io
import os
import stat
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from core.errors import OptionError
from core.imageio import ImageLoadError, detached, load_error, load_rgb, to_rgb
# The file limits live in core.imageio, without PyTorch: the command line's checks before inference use them.
from core import imageio
from core.imageio import MAX_ASPECT_RATIO, MAX_IMAGE_BYTES, file_kind, oversize_reason, ratio_text  # noqa: F401
from core.imageio import read_image_file  # noqa: F401  (it lives in core: the dashboard reads images without torch)

from classify.engine.options import DEFAULT_RESAMPLER, RESAMPLERS  # noqa: F401  (the option lists live there)
from classify.models.registry import Geometry, InputConfig

# MAX_ASPECT_RATIO: images beyond it are refused (why and the measurements: core.imageio, where crawl's
# import checks it too, so that an import never accepts what classify will not read).

INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")  # torchvision's InterpolationMode values we take


@functools.lru_cache(maxsize=None)
def torchvision_transforms():
    """(InterpolationMode, transforms.functional, transforms.v2.functional), imported at the first
    resize. Why not at the top: importing torchvision took 1.4 s of CPU here (its ops import
    torch._dynamo), which a run that stops at a check before inference, or a page that only
    lists models, need not pay."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as TF
    from torchvision.transforms.v2 import functional as TF2

    return InterpolationMode, TF, TF2

# torchvision's tensor resize has no Lanczos, and its "nearest" picks other pixels than Pillow's.
_TENSOR_INTERPOLATIONS = frozenset({"bilinear", "bicubic"})


def check_aspect(width: int, height: int) -> None:
    """Refuse an image beyond :data:`MAX_ASPECT_RATIO` (ImageLoadError: the pipeline's failed row)."""
    long, short = max(width, height), min(width, height)
    if short < 1 or long > MAX_ASPECT_RATIO * short:
        ratio = f"{ratio_text(long, short)}:1" if short >= 1 else "no area"
        raise ImageLoadError(f"aspect ratio of {width}x{height} ({ratio}) is beyond the {MAX_ASPECT_RATIO}:1 limit: "
                             "not classified")


def check_image_header(data: bytes) -> None:
    """:func:`check_aspect` from the file's header, before anything is decoded. A header Pillow
    cannot read passes: decoding then says what is wrong, with the usual messages."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as img:
                width, height = img.size
    except Exception:  # noqa: BLE001 - core.imageio.load_rgb reports it
        return
    check_aspect(width, height)


def check_resampler(resampler: str) -> str:
    if resampler not in RESAMPLERS:
        raise OptionError(f"resampler {resampler!r}: choose one of {', '.join(RESAMPLERS)}.")
    return resampler


def crop_to_tensor(image: Image.Image, geometry: Geometry, resampler: str = DEFAULT_RESAMPLER) -> torch.Tensor:
    """An image -> uint8 tensor (channels, size, size): resize, then the centred crop. The tensor
    kernel takes RGB (what ``load_rgb`` gives); any other mode goes through Pillow. An image
    beyond MAX_ASPECT_RATIO raises ImageLoadError (the pipeline's failed row)."""
    check_aspect(*image.size)
    InterpolationMode, TF, TF2 = torchvision_transforms()
    if geometry.interpolation not in INTERPOLATIONS:
        raise KeyError(geometry.interpolation)
    mode = InterpolationMode(geometry.interpolation)
    if geometry.crop_mode == "squash":
        size = [geometry.resize_size, geometry.resize_size]
    elif geometry.crop_mode == "center":
        size = geometry.resize_size  # an int: the shorter side, the longer one keeps the aspect ratio
    else:
        raise ValueError(f"crop mode {geometry.crop_mode!r} is not supported")
    crop = [geometry.size, geometry.size]
    use_tensor = geometry.interpolation in _TENSOR_INTERPOLATIONS and image.mode == "RGB"  # load_rgb's output
    if check_resampler(resampler) == "torch" and use_tensor:
        # HWC bytes viewed as a channels-last NCHW tensor: the layout torch's uint8 AVX2 kernel takes.
        # transforms.v2, not v1: v1 resizes uint8 in float32 without Pillow's rounding between the
        # horizontal and vertical passes (up to 7/255 off); v2's uint8 kernel rounds as Pillow does.
        pixels = torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1).unsqueeze(0)
        resized = TF2.resize(pixels, size, interpolation=mode, antialias=True)
        return TF2.center_crop(resized, crop)[0]  # a view, as pil_to_tensor returns; collate stacks it
    resized = TF.resize(image, size, interpolation=mode)
    return TF.pil_to_tensor(TF.center_crop(resized, crop))


def normalizer(config: InputConfig, device: torch.device):
    """A function uint8 batch (N, 3, H, W) on any device -> normalised float32 on ``device``.
    ``(x / 255 - mean) / std`` is computed as ``(x - 255 mean) / (255 std)``: one pass less."""
    mean = torch.tensor([255.0 * m for m in config.mean], device=device).view(1, 3, 1, 1)
    std = torch.tensor([255.0 * s for s in config.std], device=device).view(1, 3, 1, 1)

    def normalize(batch: torch.Tensor) -> torch.Tensor:
        x = batch.to(device, non_blocking=True).float()
        return x.sub_(mean).div_(std)

    return normalize


def load_rgb_draft(source, min_side: int) -> Image.Image:
    """``core.imageio.load_rgb``, except that a JPEG is decoded at a reduced scale (libjpeg's DCT
    scaling, 1/2, 1/4 or 1/8 through ``Image.draft``), the smallest that keeps both sides at least
    ``min_side``, so the resize that follows still shrinks. A 1411 px JPEG decodes and crops ~4x
    faster (28 -> 7 ms), but the pixels are not those of a full decode: on the packaged large
    JPEGs the top-5 stayed the same and the logits moved by up to 0.3, so this is an option
    (``InferenceOptions.jpeg_draft``), never the default. Other formats go to ``load_rgb``; the
    same guards apply (bombs, truncation, EXIF orientation, odd modes) with the same messages."""
    try:
        data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    except FileNotFoundError:
        raise ImageLoadError("file not found") from None
    if data[:3] != b"\xff\xd8\xff":  # not a JPEG: nothing to gain
        return load_rgb(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                imageio.refuse_bomb(img)
                if img.format == "JPEG" and img.mode in ("RGB", "L"):  # CMYK/YCCK: full decode, as load_rgb
                    img.draft(img.mode, (min_side, min_side))
                img.load()  # full decode of the (reduced) image: a truncated file fails here
                return detached(to_rgb(img), img)
    except Exception as exc:  # noqa: BLE001 - any failure is this image's, with load_rgb's words
        raise load_error(exc) from None
