"""Preprocessing bounded by the model input (issue 11, item 4): extreme aspect ratios are refused
with a reason before decoding, so no resize output exceeds a fixed multiple of the resize size,
and every image within the limit keeps exactly the pixels it had (timm's transform for 'pil')."""
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import functional as TF
from torchvision.transforms.v2 import functional as TF2

from classify.engine.preprocess import MAX_ASPECT_RATIO, crop_to_tensor
from classify.models.registry import Geometry
from classify.models.lookup import get_model
from core.imageio import ImageLoadError, load_rgb

SITE = Path(torch.__file__).resolve().parent.parent
ROOT = Path(__file__).resolve().parents[3]
CHELSEA = SITE / "skimage/data/chelsea.png"  # 451 x 300
LITE0 = get_model("efficientnet_lite0").input_config().geometry  # 224 crop of a 256 resize, bicubic
GEOMETRIES = [LITE0, Geometry(224, 256, "bilinear", "center"), Geometry(224, 224, "bicubic", "center"),
              Geometry(384, 438, "bicubic", "center")]


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # before the fix these took 2.5-5 GB (torch maps ~2.5 GB)


MEASURE = """
import sys, time
from classify.engine.pipeline import DecodedCrops
from classify.engine.types import ImageTask
from classify.models.lookup import get_model
geometry = get_model("efficientnet_lite0").input_config().geometry
for path in sys.argv[1:]:
    for resampler in ("torch", "pil"):
        started = time.perf_counter()
        _, crops, reason = DecodedCrops([ImageTask("x", path)], [geometry], resampler=resampler)[0]
        print(f"{time.perf_counter() - started:.3f}", "ok" if crops is not None else reason, flush=True)
"""


def test_extreme_aspect_ratios_are_refused_with_a_reason_in_bounded_time_and_memory(tmp_path):
    """A 20000x1 PNG (143 bytes) took 5.0 GB and 3.4 s through the torch resize (Pillow: more than
    9 GB), a 64x400000 PNG 2.6 GB and 2.1 s: now each is a failed row, refused from the header."""
    strip, tall = tmp_path / "strip.png", tmp_path / "tall.png"
    Image.new("RGB", (20000, 1), (120, 80, 40)).save(strip)
    Image.new("RGB", (64, 400000), (120, 80, 40)).save(tall)
    assert strip.stat().st_size < 200
    done = subprocess.run([sys.executable, "-c", MEASURE, str(strip), str(tall)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit_memory)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    for line in lines:
        seconds, reason = line.split(" ", 1)
        assert float(seconds) < 1.0 and "aspect ratio" in reason and f"{MAX_ASPECT_RATIO}:1" in reason
    assert "20000x1" in lines[0] and "64x400000" in lines[2]


def test_the_aspect_limit_is_also_checked_on_a_decoded_image():
    with pytest.raises(ImageLoadError, match="aspect ratio"):
        crop_to_tensor(Image.new("RGB", (MAX_ASPECT_RATIO * 10 + 1, 10)), LITE0)
    crop_to_tensor(Image.new("RGB", (MAX_ASPECT_RATIO * 10, 10)), LITE0)  # at the limit: accepted


@pytest.fixture()
def resize_outputs(monkeypatch):
    """Pixels of every image the resizers produce."""
    sizes = []
    real_pil, real_v1, real_v2 = Image.Image.resize, TF.resize, TF2.resize

    def pil(self, size, *args, **kwargs):
        out = real_pil(self, size, *args, **kwargs)
        sizes.append(out.size[0] * out.size[1])
        return out

    def tensor(real):
        def resize(inpt, *args, **kwargs):
            out = real(inpt, *args, **kwargs)
            if isinstance(out, torch.Tensor):
                sizes.append(out.shape[-1] * out.shape[-2])
            return out
        return resize

    monkeypatch.setattr(Image.Image, "resize", pil)
    monkeypatch.setattr(TF, "resize", tensor(real_v1))
    monkeypatch.setattr(TF2, "resize", tensor(real_v2))
    return sizes


def _noise(width: int, height: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(width * height).integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.mark.parametrize("size", [(12 * MAX_ASPECT_RATIO, 12), (12, 12 * MAX_ASPECT_RATIO), (3000, 150),
                                  (1, MAX_ASPECT_RATIO)])
@pytest.mark.parametrize("resampler", ["torch", "pil"])
def test_no_resize_output_beyond_a_fixed_multiple_of_the_resize_size(size, resampler, resize_outputs):
    """At the aspect limit the resize of the shorter side makes at most MAX_ASPECT_RATIO times
    resize_size**2 pixels (a 12x240 image: 256x5120 for a 224 crop)."""
    image = _noise(*size)
    resize_outputs.clear()
    crop = crop_to_tensor(image, LITE0, resampler)
    assert tuple(crop.shape) == (3, 224, 224)
    assert resize_outputs and max(resize_outputs) <= MAX_ASPECT_RATIO * LITE0.resize_size ** 2


def _reference(image: Image.Image, geometry: Geometry) -> torch.Tensor:
    """timm's eval transform without normalisation: resize the shorter side, centre crop (Pillow)."""
    from timm.data import create_transform

    transform = create_transform(input_size=(3, geometry.size, geometry.size), interpolation=geometry.interpolation,
                                 crop_pct=geometry.size / geometry.resize_size)
    resize, crop = transform.transforms[0], transform.transforms[1]
    assert resize.size == geometry.resize_size and list(crop.size) == [geometry.size] * 2
    return TF.pil_to_tensor(crop(resize(image)))


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("size", [(451, 300), (300, 451), (1000, 250), (250, 1000), (224, 224), (640, 427),
                                  (2000, 150), (150, 2000), (12 * MAX_ASPECT_RATIO, 12), (40, 700)])
def test_images_within_the_limit_keep_exactly_their_pixels(geometry, size):
    """Ordinary photos and long images up to the limit: the path of before, to the bit (timm's
    transform for 'pil', torchvision's uint8 tensor resize for 'torch')."""
    image = load_rgb(CHELSEA).resize(size, Image.BICUBIC)
    assert torch.equal(crop_to_tensor(image, geometry, "pil"), _reference(image, geometry))
    pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1).unsqueeze(0)
    mode = TF.InterpolationMode(geometry.interpolation)
    fast = TF2.center_crop(TF2.resize(pixels, geometry.resize_size, interpolation=mode, antialias=True),
                           [geometry.size] * 2)[0]
    assert torch.equal(crop_to_tensor(image, geometry, "torch"), fast)
