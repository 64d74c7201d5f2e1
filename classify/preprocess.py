"""Image -> model input, split where it saves work.

Worker processes do the pixel work that depends only on a :class:`~classify.registry.Geometry`
(resize the shorter side, centre-crop) and hand over uint8 tensors, a quarter of the bytes of
float32; the main process normalises on the device, per model, because models that share a
geometry often differ in mean/std. The result equals timm's eval transform
(``timm.data.create_transform(..., is_training=False)``): the tests compare the two.
"""
from __future__ import annotations

import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

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
