"""JPEG decoding, resize and crop on the device (nvJPEG through torchvision), beside the CPU path.

Why: on an H200 ResNet-50 in bf16 computes ~15,000 images/s, but the pipeline fed it 2,030
images/s with 16 CPU decode workers (benchmarks/results/gpu-h200-2026-11-29.txt): decoding is the
bound. With this path the DataLoader workers only read and check a JPEG file and hand over its
bytes; the batch is decoded on the GPU (``torchvision.io.decode_jpeg(list, device=...)``, one
batched nvJPEG call), then each image is resized and centre-cropped there, and the uint8 crops go
to the same normaliser as the CPU path's crops (``classify.engine.preprocess.normalizer``).

What goes to the device (:func:`device_jpeg`, in the worker, after ``read_image_file`` and
``check_image_header`` as on the CPU path): a file that starts with the JPEG magic bytes
``FF D8 FF``, whose header Pillow reads (without decoding) as a JPEG in mode RGB or L, within
``core.imageio.MAX_IMAGE_PIXELS`` (the same bomb limit as ``load_rgb``, read from the header, so no
device decode ever allocates more than that), and that ends with the EOI marker ``FF D9``.
Everything else takes the CPU path unchanged, so its rows and reasons are the CPU path's:

* CMYK/YCCK and Adobe RGB-coded JPEGs: nvJPEG's RGB output does not reproduce Pillow's conversion;
* no EOI at the end: a truncated download, which Pillow refuses ('image file is truncated') but
  nvJPEG may decode into a grey half-image without an error (files with data appended after the
  EOI, such as motion photos, also take the CPU path: correct, only slower);
* a header beyond the pixel limit: ``load_rgb`` refuses it with its words ('decompression bomb
  refused: ...'), still from the header.

On the device (:class:`DeviceDecoder`): one batched decode per chunk of at most
:data:`MAX_DECODE_PIXELS` pixels (a batch of 64 MP images would otherwise ask for tens of GB at
once); if a batched call raises (it returns nothing partial), the chunk is decoded one image at a
time; an image the device decoder refuses is decoded by the CPU path (``load_rgb`` +
``crop_to_tensor``) in the calling process, and only if that fails too is it a failed row, with the
CPU path's reason. The images keep their order.

EXIF orientation is read from the header (``Image.getexif``, as ``ImageOps.exif_transpose`` does
in ``load_rgb``: EXIF, else XMP) and applied on the device with flips and transposes: torchvision's
``apply_exif_orientation`` is implemented for its CPU decoder only, so the same code path would
rotate on the CPU and silently not on CUDA.

Resize: the shorter side to ``Geometry.resize_size`` ('center') or both sides ('squash'), then the
centre crop, with ``torchvision.transforms.v2`` as ``crop_to_tensor``'s 'torch' resampler, bilinear
or bicubic with antialias. Images of the same size are resized together (one kernel launch for a
stack; the result per image is the same), and on a GPU the last rounding runs once per batch, so
the launches per image are what the sizes force (a conversion, two passes, two roundings). On the CPU, torchvision's uint8 kernel runs and the crops
equal ``crop_to_tensor``'s to the bit (torchvision's libjpeg decode equals Pillow's on the test
images). A GPU has no uint8 antialiased kernel, so there the resize runs in float32 as two 1-D
passes, each rounded half up and clipped to 0-255 as the uint8 kernel (and Pillow) do between and
after the passes (:func:`float_crop`, :func:`finish`; the columns outside the crop are dropped
between the passes, which changes nothing since each column's vertical pass is its own); what is left is the uint8 kernel's fixed-point weights:
on the packaged photos at most 2/255 on 0.25% of the values (0.6% of one crop at most), measured on
the CPU with ``float_resize`` (the tests pin it). torchvision's own float path for a CUDA uint8
tensor (one 2-D float resize, then round) was up to 10/255 off, on 15% of the values: a bicubic
overshoot at an edge is clipped between the passes on the CPU and not there. nvJPEG's IDCT and
chroma upsampling may add their own rounding; benchmarks/bench_inference.py measures the whole
difference on a GPU. Nearest/Lanczos geometries and ``resampler='pil'`` (Pillow's pixels
to the bit) keep the CPU path for the whole pass (:func:`device_geometries_reason`).

The choice (:func:`resolve_decode`, ``InferenceOptions.gpu_decode``): 'auto' turns the path on for
a CUDA device where a probe (a tiny JPEG decoded and resized on that device, once per device and
process) works, and reports why not otherwise; 'off' never uses it. torchvision deprecated its
image decoders in 0.29 in favour of TorchCodec; when ``decode_jpeg`` goes, the probe fails and the
CPU path runs, with the reason in the report.
"""
from __future__ import annotations

import dataclasses
import io
import sys
import warnings
from dataclasses import dataclass
from typing import Sequence

import torch
from PIL import Image

from core.imageio import MAX_IMAGE_PIXELS, ImageLoadError, load_rgb

from classify.engine.options import GPU_DECODE
from classify.engine.preprocess import torchvision_transforms
from classify.models.registry import Geometry

JPEG_MAGIC = b"\xff\xd8\xff"
JPEG_EOI = b"\xff\xd9"
DEVICE_MODES = ("RGB", "L")  # Pillow modes whose JPEGs decode to the same RGB on the device
DEVICE_INTERPOLATIONS = ("bilinear", "bicubic")  # torchvision InterpolationMode values
DEVICE_CROP_MODES = ("center", "squash")
# Pixels one batched decode call may produce (uint8 RGB: 3 bytes each, 768 MB): a chunk of a batch.
MAX_DECODE_PIXELS = 256_000_000
EXIF_ORIENTATION = 0x0112


_LAZY = ("decode_jpeg", "ImageReadMode")


def _import_torchvision_io() -> None:
    """torchvision's JPEG decoder into this module's globals, at first use (a name a test has set
    already is kept). Why lazily: importing torchvision took 1.4 s of CPU here (its ops import
    torch._dynamo), which a process that never decodes on a device need not pay; its transforms come
    from :func:`classify.engine.preprocess.torchvision_transforms` alike."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError:  # a torchvision without its image decoders (deprecated in 0.29 for TorchCodec)
        ImageReadMode = decode_jpeg = None
    globals().setdefault("decode_jpeg", decode_jpeg)
    globals().setdefault("ImageReadMode", ImageReadMode)


def __getattr__(name: str):
    """``gpu_decode.decode_jpeg`` and ``ImageReadMode``, imported on first access (PEP 562)."""
    if name in _LAZY:
        _import_torchvision_io()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tv(name: str):
    """A lazy torchvision name as this module holds it now (what a test set, else torchvision's)."""
    return getattr(sys.modules[__name__], name)


def check_gpu_decode(value: str) -> str:
    if value not in GPU_DECODE:
        from core.errors import OptionError

        raise OptionError(f"gpu_decode {value!r}: choose one of {', '.join(GPU_DECODE)}.")
    return value


@dataclass
class RawJpeg:
    """A JPEG file's bytes for the device decoder, and what its header says (picklable: a
    DataLoader worker hands it to the main process)."""

    data: torch.Tensor  # uint8, 1-D: the file
    width: int  # as stored, before the EXIF orientation
    height: int
    orientation: int = 1  # EXIF orientation, 1-8

    @property
    def pixels(self) -> int:
        return self.width * self.height

    def tobytes(self) -> bytes:
        return self.data.numpy().tobytes()


def one_buffer(raws: Sequence[RawJpeg]) -> list[RawJpeg]:
    """The files as views of one uint8 tensor. A batch's collate does this in the worker: a
    DataLoader sends each tensor storage through its own shared-memory file descriptor, so 128
    separate files per batch, times the batches in flight of every worker, could run into the
    open-file limit (1024 on many systems); views of one storage travel as one."""
    if len(raws) < 2:
        return list(raws)
    buffer = torch.cat([raw.data for raw in raws])
    out, start = [], 0
    for raw in raws:
        end = start + raw.data.numel()
        out.append(dataclasses.replace(raw, data=buffer[start:end]))
        start = end
    return out


def device_jpeg(data: bytes) -> RawJpeg | None:
    """The file as a :class:`RawJpeg` when the device may decode it; None: the CPU path decodes it
    (see the module docstring for what and why). Reads the header only."""
    if data[:3] != JPEG_MAGIC or not data.endswith(JPEG_EOI):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                if img.format != "JPEG" or img.mode not in DEVICE_MODES:
                    return None
                if img.info.get("adobe") is not None and img.info.get("adobe_transform") == 0 and img.mode == "RGB":
                    return None  # RGB-coded (no YCbCr transform): Pillow/libjpeg only
                width, height = img.size
                orientation = img.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - bombs, odd headers: the CPU path says what is wrong
        return None
    if width < 1 or height < 1 or width * height > MAX_IMAGE_PIXELS:
        return None
    if orientation not in range(1, 9):
        orientation = 1  # exif_transpose ignores other values too
    return RawJpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), width, height, int(orientation))


def device_geometries_reason(geometries: Sequence[Geometry], resampler: str) -> str | None:
    """Why a pass with these geometries keeps the CPU path; None: the device can crop them all."""
    if resampler != "torch":
        return f"resampler {resampler} (Pillow's pixels) runs on the CPU"
    for g in geometries:
        if g.interpolation not in DEVICE_INTERPOLATIONS:
            return f"{g.interpolation} interpolation runs on the CPU"
        if g.crop_mode not in DEVICE_CROP_MODES:
            return f"crop mode {g.crop_mode} runs on the CPU"
    return None


def orient(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """A (C, H, W) image turned as ``ImageOps.exif_transpose`` turns it for this EXIF orientation."""
    if orientation == 2:
        return image.flip(-1)
    if orientation == 3:
        return image.flip(-2, -1)
    if orientation == 4:
        return image.flip(-2)
    if orientation == 5:  # transpose
        return image.transpose(-2, -1)
    if orientation == 6:  # 90 degrees clockwise
        return image.transpose(-2, -1).flip(-1)
    if orientation == 7:  # transverse
        return image.transpose(-2, -1).flip(-2, -1)
    if orientation == 8:  # 90 degrees counter-clockwise
        return image.transpose(-2, -1).flip(-2)
    return image


def resize_crop(images: torch.Tensor, geometry: Geometry, float_resize: bool) -> torch.Tensor:
    """A stack (N, 3, H, W) of same-size uint8 images -> uint8 crops (N, 3, size, size), as
    ``classify.engine.preprocess.crop_to_tensor`` with the 'torch' resampler. ``float_resize``: in float32,
    as on a GPU (there is no uint8 antialiased kernel there): :func:`float_crop` then :func:`finish`."""
    if float_resize:
        return finish(float_crop(images, geometry), geometry.interpolation)
    size = [geometry.resize_size, geometry.resize_size] if geometry.crop_mode == "squash" else geometry.resize_size
    InterpolationMode, _, TF2 = torchvision_transforms()
    resized = TF2.resize(images, size, interpolation=InterpolationMode(geometry.interpolation), antialias=True)
    return TF2.center_crop(resized, [geometry.size, geometry.size])


def _resized_size(height: int, width: int, geometry: Geometry) -> tuple[int, int]:
    """(height, width) after the resize, as torchvision computes it (the shorter side, or both)."""
    if geometry.crop_mode == "squash":
        return geometry.resize_size, geometry.resize_size
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = geometry.resize_size, int(geometry.resize_size * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def _centre(length: int, size: int) -> int:
    return int(round((length - size) / 2.0))  # TF2.center_crop's offset (Python's round, half to even)


def float_crop(images: torch.Tensor, geometry: Geometry) -> torch.Tensor:
    """The uint8 resize of ``TF2.resize`` on the CPU (and Pillow's), in float32, and the centre
    crop: horizontal pass, round and clip to 0-255, vertical pass; the crop, still float32 and not
    yet rounded (:func:`finish` rounds a whole batch at once: one launch instead of one per image).
    One float32 resize of both axes at once (what ``TF2.resize`` does with a CUDA uint8 tensor)
    skips the rounding and the clipping between the passes, where a bicubic overshoot at a sharp
    edge is cut: it was up to 10/255 off the CPU crops, on 15% of values of the test photos; these
    two passes leave the fixed-point rounding of the weights: at most 2/255 on 0.25% of values
    (tests/classify/engine/test_gpu_decode.py). Rounding is half up (``floor(x + 0.5)``), as the fixed-point
    kernel's; ``round`` (half to even) put 12% of the values of an exact 2:1 bilinear resize 1-2/255
    off. The columns outside the crop are dropped between the passes (each column's vertical pass
    is its own, so the crop is the same), which saves the vertical pass 30-40% of its work."""
    height, width = images.shape[-2:]
    new_h, new_w = _resized_size(height, width, geometry)
    size, mode = geometry.size, geometry.interpolation
    x = images.float()
    if new_w != width:
        x = torch.nn.functional.interpolate(x, size=(height, new_w), mode=mode, align_corners=False,
                                            antialias=True).add_(0.5).floor_()
        if mode == "bicubic":  # bilinear weights are positive: no overshoot to clip
            x = x.clamp_(0, 255)
    inside = new_w >= size and new_h >= size  # else center_crop pads: crop the whole resize below
    if inside:
        x = x[..., _centre(new_w, size):_centre(new_w, size) + size]
    if new_h != height:
        x = torch.nn.functional.interpolate(x, size=(new_h, x.shape[-1]), mode=mode, align_corners=False,
                                            antialias=True)
    if inside:
        return x[..., _centre(new_h, size):_centre(new_h, size) + size, :]
    return torchvision_transforms()[2].center_crop(finish(x, mode).float(), [size, size])


def finish(crops: torch.Tensor, interpolation: str) -> torch.Tensor:
    """Float crops of :func:`float_crop` -> uint8: rounded half up (and clipped after bicubic)."""
    crops = crops.add(0.5).floor_()
    if interpolation == "bicubic":
        crops = crops.clamp_(0, 255)
    return crops.to(torch.uint8)


@dataclass
class DecodeCounts:
    on_device: int = 0  # decoded, resized and cropped on the device
    refused: int = 0  # the device decoder refused them: decoded by the CPU path in this process
    failed: int = 0  # refused by the CPU path too: failed rows
    workers: int = 0  # decoded by the CPU workers (other formats, JPEGs the header check kept there)


class DeviceDecoder:
    """Decode :class:`RawJpeg` files on ``device`` and crop them per geometry (see the module
    docstring). ``device='cpu'`` runs the same code with torchvision's CPU decoder (the tests)."""

    def __init__(self, geometries: Sequence[Geometry], device: torch.device | str, resampler: str = "torch",
                 float_resize: bool | None = None, max_pixels: int = MAX_DECODE_PIXELS):
        self.geometries = tuple(geometries)
        self.device = torch.device(device)
        self.resampler = resampler
        self.float_resize = self.device.type != "cpu" if float_resize is None else float_resize
        self.max_pixels = max_pixels
        self.counts = DecodeCounts()

    # ------------------------------------------------------------------ decoding
    def _decode(self, data: list[torch.Tensor]) -> list[torch.Tensor]:
        decode_jpeg = _tv("decode_jpeg")
        if decode_jpeg is None:
            raise RuntimeError("this torchvision has no torchvision.io.decode_jpeg")
        with warnings.catch_warnings():  # torchvision 0.29 warns on every call: deprecated for TorchCodec
            warnings.simplefilter("ignore")
            return decode_jpeg(data, mode=_tv("ImageReadMode").RGB, device=self.device, apply_exif_orientation=False)

    def _chunks(self, raws: Sequence[RawJpeg]) -> list[list[int]]:
        chunks: list[list[int]] = []
        budget = 0
        for k, raw in enumerate(raws):
            if not chunks or budget + raw.pixels > self.max_pixels:
                chunks.append([])
                budget = 0
            chunks[-1].append(k)
            budget += raw.pixels
        return chunks

    def decode_images(self, raws: Sequence[RawJpeg]) -> list[torch.Tensor | None]:
        """Per file the oriented (3, H, W) uint8 image on the device, or None where the device
        decoder refused it. Batched per chunk of at most ``max_pixels``; a chunk that raises is
        decoded one by one."""
        return [image for chunk in self._chunks(raws) for image in self._decode_chunk([raws[k] for k in chunk])]

    def _decode_chunk(self, raws: Sequence[RawJpeg]) -> list[torch.Tensor | None]:
        try:
            images = self._decode([raw.data for raw in raws])
        except Exception:  # noqa: BLE001 - nothing partial comes back: find the bad ones
            images = []
            for raw in raws:
                try:
                    images.append(self._decode([raw.data])[0])
                except Exception:  # noqa: BLE001 - the CPU path decides, and says why
                    images.append(None)
        out: list[torch.Tensor | None] = []
        for raw, image in zip(raws, images):
            if image is not None and (image.ndim != 3 or image.shape[0] != 3
                                      or tuple(image.shape[1:]) != (raw.height, raw.width)):
                image = None  # not what the header promised: let the CPU path decode it
            out.append(None if image is None else orient(image, raw.orientation))
        return out

    # ------------------------------------------------------------------ cropping
    def _device_crops(self, images: list[torch.Tensor | None]) -> list[tuple[torch.Tensor, ...] | None]:
        """Crops per geometry for each decoded image. Same-size images are resized as one stack;
        with ``float_resize`` the last rounding runs once over the whole batch (:func:`finish`):
        the per-image work is what the sizes force, a few launches each."""
        groups: dict[tuple[int, int], list[int]] = {}
        for k, image in enumerate(images):
            if image is not None:
                groups.setdefault(tuple(image.shape[1:]), []).append(k)
        if not groups:
            return [None] * len(images)
        stacks = [torch.stack([images[k] for k in members]) if len(members) > 1 else images[members[0]][None]
                  for members in groups.values()]
        order = [k for members in groups.values() for k in members]
        position = {k: j for j, k in enumerate(order)}
        batches = []
        for geometry in self.geometries:
            if self.float_resize:
                parts = [float_crop(stack, geometry) for stack in stacks]
                batches.append(finish(torch.cat(parts) if len(parts) > 1 else parts[0], geometry.interpolation))
            else:
                parts = [resize_crop(stack, geometry, False) for stack in stacks]
                batches.append(torch.cat(parts) if len(parts) > 1 else parts[0])
        return [None if image is None else tuple(batch[position[k]] for batch in batches)
                for k, image in enumerate(images)]

    def _cpu_crops(self, raw: RawJpeg) -> tuple[tuple[torch.Tensor, ...] | None, str | None]:
        """The CPU path for one file (as ``pipeline.DecodedCrops``: same guards, same reasons)."""
        from classify.engine.preprocess import crop_to_tensor

        try:
            image = load_rgb(raw.tobytes())
            crops = tuple(crop_to_tensor(image, g, self.resampler).to(self.device) for g in self.geometries)
        except ImageLoadError as exc:
            return None, str(exc)
        except (OSError, ValueError) as exc:
            return None, f"cannot preprocess: {exc}"
        return crops, None

    def __call__(self, raws: Sequence[RawJpeg]) -> list[tuple[tuple[torch.Tensor, ...] | None, str | None]]:
        """Per file, in order: (crops per geometry on the device, None) or (None, reason)."""
        if not raws:
            return []
        # Chunk by chunk, so the decoded images held at once stay within max_pixels (a batch of
        # 128 photos of 64 MP would otherwise hold 24 GB); web images fit a batch in one chunk.
        device_crops = [crops for chunk in self._chunks(raws)
                        for crops in self._device_crops(self._decode_chunk([raws[k] for k in chunk]))]
        out = []
        for raw, crops in zip(raws, device_crops):
            if crops is not None:
                self.counts.on_device += 1
                out.append((crops, None))
                continue
            self.counts.refused += 1
            crops, reason = self._cpu_crops(raw)
            if crops is None:
                self.counts.failed += 1
            out.append((crops, reason))
        return out


# --------------------------------------------------------------------------- the choice
@dataclass(frozen=True)
class DecodeChoice:
    on: bool
    reason: str  # why on, or why not


_PROBED: dict[str, str | None] = {}  # device -> None (the probe worked) or why it failed


def _probe_jpeg() -> bytes:
    import numpy as np

    ramp = np.add.outer(np.arange(16) * 12, np.arange(24) * 8).astype(np.uint8)
    image = Image.fromarray(np.stack([ramp, ramp[::-1], 255 - ramp], axis=-1), "RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def probe(device: torch.device) -> str | None:
    """None when a tiny JPEG decodes, resizes and crops on ``device`` (once per device and
    process), else why not."""
    key = str(device)
    if key not in _PROBED:
        try:
            raw = device_jpeg(_probe_jpeg())
            if raw is None:
                raise RuntimeError("the probe image was not taken for the device")
            decoder = DeviceDecoder([Geometry(8, 10, "bilinear")], device)
            image = decoder._decode([raw.data])[0]  # not decode_images: its fallback would hide the error
            if tuple(image.shape) != (3, raw.height, raw.width):
                raise RuntimeError(f"decode_jpeg gave a {tuple(image.shape)} image for a 3x{raw.height}x{raw.width} one")
            crop = decoder._device_crops([image])[0][0]
            if tuple(crop.shape) != (3, 8, 8) or crop.dtype != torch.uint8:
                raise RuntimeError(f"the probe gave a {tuple(crop.shape)} {crop.dtype} crop")
            _PROBED[key] = None
        except Exception as exc:  # noqa: BLE001 - any failure means: use the CPU path, and say why
            _PROBED[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}"
    return _PROBED[key]


def resolve_decode(option: str, device: torch.device) -> DecodeChoice:
    """Whether JPEGs decode on ``device`` (``InferenceOptions.gpu_decode``): 'off' never; 'auto'
    on a CUDA device whose probe works. The reason goes into the report."""
    if check_gpu_decode(option) == "off":
        return DecodeChoice(False, "gpu_decode off")
    if device.type != "cuda":
        return DecodeChoice(False, f"{device.type} device")
    failure = probe(device)
    if failure is not None:
        return DecodeChoice(False, f"decode_jpeg on {device} failed its probe: {failure}")
    return DecodeChoice(True, f"nvJPEG on {device}")
