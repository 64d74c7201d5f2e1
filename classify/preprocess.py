"""Image -> model input, split where it saves work.

Worker processes do the pixel work that depends only on a :class:`~classify.registry.Geometry`
(resize the shorter side, centre-crop) and hand over uint8 tensors, a quarter of the bytes of
float32; the main process normalises on the device, per model, because models that share a
geometry often differ in mean/std. The result equals timm's eval transform
(``timm.data.create_transform(..., is_training=False)``): the tests compare the two.
"""
from __future__ import annotations

import io
import warnings
from pathlib import Path

import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from crawl.imageio import ImageLoadError, load_rgb, to_rgb

from .registry import Geometry, InputConfig

_INTERPOLATION = {
    "nearest": InterpolationMode.NEAREST,
    "bilinear": InterpolationMode.BILINEAR,
    "bicubic": InterpolationMode.BICUBIC,
    "lanczos": InterpolationMode.LANCZOS,
}


def crop_to_tensor(image: Image.Image, geometry: Geometry) -> torch.Tensor:
    """An RGB image -> uint8 tensor (3, size, size): resize, then the centred crop."""
    mode = _INTERPOLATION[geometry.interpolation]
    if geometry.crop_mode == "squash":
        resized = TF.resize(image, [geometry.resize_size, geometry.resize_size], interpolation=mode)
    elif geometry.crop_mode == "center":
        resized = TF.resize(image, geometry.resize_size, interpolation=mode)  # shorter side
    else:
        raise ValueError(f"crop mode {geometry.crop_mode!r} is not supported")
    return TF.pil_to_tensor(TF.center_crop(resized, [geometry.size, geometry.size]))


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
    """``crawl.imageio.load_rgb``, except that a JPEG is decoded at a reduced scale (libjpeg's DCT
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
                if img.format == "JPEG" and img.mode in ("RGB", "L"):  # CMYK/YCCK: full decode, as load_rgb
                    img.draft(img.mode, (min_side, min_side))
                img.load()  # full decode of the (reduced) image: a truncated file fails here
                return to_rgb(img).copy()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageLoadError(f"decompression bomb refused: {exc}") from None
    except Image.UnidentifiedImageError:
        raise ImageLoadError("not an image (unidentified format)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageLoadError(f"cannot decode: {exc}") from None
