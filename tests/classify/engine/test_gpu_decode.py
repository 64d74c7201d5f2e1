"""JPEG decoding on the device (classify.engine.gpu_decode), tested on the CPU: the same code runs with
device='cpu' (torchvision's CPU decoder), a CUDA device is mocked where only the choice is tested,
and ``float_resize`` runs the GPU's resize arithmetic on the CPU."""
import dataclasses
import functools
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

import classify.engine.gpu_decode as gpu_decode
import classify.engine.pipeline as pipeline
from classify.engine.gpu_decode import DecodeChoice, DeviceDecoder, device_jpeg, resolve_decode
from classify.engine.types import DECODE_CPU, ImageTask, InferenceOptions
from classify.engine.pipeline import CollateCrops, DecodedCrops, decode_on_device
from classify.engine.dispatch import run_inference
from classify.engine.preprocess import crop_to_tensor
from classify.models.registry import Geometry
from classify.models.lookup import get_model
from core.errors import OptionError
from core.imageio import MAX_IMAGE_PIXELS, load_rgb
from tests.classify.doubles import make_test_double

SITE = Path(torch.__file__).resolve().parent.parent
PACKAGED_JPEGS = [SITE / p for p in ("skimage/data/rocket.jpg", "sklearn/datasets/images/china.jpg",
                                     "sklearn/datasets/images/flower.jpg",
                                     "matplotlib/mpl-data/sample_data/grace_hopper.jpg")]
CHELSEA, COFFEE = SITE / "skimage/data/chelsea.png", SITE / "skimage/data/coffee.png"
GEOMETRIES = [get_model("efficientnet_lite0").input_config().geometry,  # 224 of 256, bicubic
              Geometry(224, 256, "bilinear", "center"), Geometry(96, 96, "bicubic", "squash")]
CNN = make_test_double("test_efficientnet", "imagenet-1k")


def _jpeg(image: Image.Image, **kwargs) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=kwargs.pop("quality", 90), **kwargs)
    return buffer.getvalue()


def _small_jpegs() -> list[bytes]:
    """Small JPEGs of different sizes, shapes and subsamplings from two packaged photographs."""
    out = []
    for n, source in enumerate((CHELSEA, COFFEE)):
        image = load_rgb(source)
        for k, (w, h) in enumerate([(120, 90), (90, 130), (160, 100), (120, 90)]):
            out.append(_jpeg(image.crop((k * 9, k * 5, image.width - k * 7, image.height - k * 3)).resize((w, h)),
                             subsampling=(n + k) % 3))
    return out


def _cpu_crops(data: bytes, geometries=GEOMETRIES) -> tuple[torch.Tensor, ...]:
    image = load_rgb(data)
    return tuple(crop_to_tensor(image, g, "torch") for g in geometries)


def test_batched_decode_equals_one_by_one_and_chunks_by_pixels():
    raws = [device_jpeg(d) for d in _small_jpegs()]
    assert all(raw is not None for raw in raws)
    batched = DeviceDecoder(GEOMETRIES, "cpu").decode_images(raws)
    one_by_one = [DeviceDecoder(GEOMETRIES, "cpu").decode_images([raw])[0] for raw in raws]
    chunked = DeviceDecoder(GEOMETRIES, "cpu", max_pixels=30_000)  # 2-3 images per decode call
    assert len(chunked._chunks(raws)) > 2
    for a, b, c, data in zip(batched, one_by_one, chunked.decode_images(raws), _small_jpegs()):
        assert torch.equal(a, b) and torch.equal(a, c)
        assert torch.equal(a, torch.from_numpy(np.array(load_rgb(data))).permute(2, 0, 1))  # Pillow's pixels
    # crops are made chunk by chunk (the decoded images held at once stay within max_pixels): the same crops
    for (a, _), (b, _) in zip(chunked(raws), DeviceDecoder(GEOMETRIES, "cpu")(raws)):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_device_crops_match_the_cpu_path():
    """The crops of the device path against crop_to_tensor's (the CPU path's), packaged JPEGs
    (640x427, 512x600) and small ones. Measured here: with the CPU's uint8 resize, equal to the
    bit; with the GPU's float32 two-pass resize (float_resize), at most 2/255 on 0.25% of all
    values, 0.6% of one crop at most (a single float resize of both axes, torchvision's CUDA path,
    was up to 10/255 off on 15% of values)."""
    datas = [p.read_bytes() for p in PACKAGED_JPEGS] + _small_jpegs()[:3]
    raws = [device_jpeg(d) for d in datas]
    exact = DeviceDecoder(GEOMETRIES, "cpu")(raws)
    gpu_arithmetic = DeviceDecoder(GEOMETRIES, "cpu", float_resize=True)(raws)
    differing = total = 0
    for data, (crops, reason), (float_crops, _) in zip(datas, exact, gpu_arithmetic):
        assert reason is None
        for crop, float_crop, reference in zip(crops, float_crops, _cpu_crops(data)):
            assert crop.dtype == torch.uint8 and torch.equal(crop, reference)
            diff = (float_crop.int() - reference.int()).abs()
            assert float_crop.shape == reference.shape and diff.max() <= 2 and (diff > 0).float().mean() < 0.01
            differing, total = differing + int((diff > 0).sum()), total + diff.numel()
    assert differing / total < 0.004


def test_float_crops_without_a_resize_or_with_padding_follow_the_cpu_path():
    """The GPU arithmetic where a pass is skipped (the shorter side already at resize_size) or the
    crop is larger than the resize (centre_crop pads): the same shapes, within 2/255."""
    data = _jpeg(load_rgb(CHELSEA))  # 451 x 300
    geometries = [Geometry(224, 300, "bicubic"), Geometry(320, 300, "bilinear"), Geometry(320, 300, "bicubic"),
                  Geometry(256, 240, "bicubic", "squash"), Geometry(300, 300, "bilinear", "squash")]
    crops, reason = DeviceDecoder(geometries, "cpu", float_resize=True)([device_jpeg(data)])[0]
    for crop, reference in zip(crops, _cpu_crops(data, geometries)):
        assert crop.shape == reference.shape and (crop.int() - reference.int()).abs().max() <= 2


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_as_load_rgb_applies_it(orientation):
    image = load_rgb(CHELSEA).resize((60, 40))
    exif = Image.Exif()
    exif[gpu_decode.EXIF_ORIENTATION] = orientation
    data = _jpeg(image, exif=exif)
    raw = device_jpeg(data)
    assert raw.orientation == orientation and (raw.width, raw.height) == (60, 40)
    decoded = DeviceDecoder(GEOMETRIES, "cpu").decode_images([raw])[0]
    assert torch.equal(decoded, torch.from_numpy(np.array(load_rgb(data))).permute(2, 0, 1))
    crops, _ = DeviceDecoder(GEOMETRIES, "cpu")([raw])[0]
    assert all(torch.equal(a, b) for a, b in zip(crops, _cpu_crops(data)))


def _mixed_folder(tmp_path: Path) -> list[ImageTask]:
    jpegs = _small_jpegs()
    cmyk = _jpeg(load_rgb(COFFEE).resize((100, 80)).convert("CMYK"))
    truncated = jpegs[1][: len(jpegs[1]) // 2]
    # Ends like a JPEG but its data is cut in the middle: libjpeg decodes it with a warning, on
    # both paths (Pillow's check only catches a missing end).
    broken_inside = jpegs[2][: len(jpegs[2]) // 2] + b"\xff\xd9"
    no_scan = jpegs[5][: jpegs[5].index(b"\xff\xda")] + b"\xff\xd9"  # a header, no image data: both refuse it
    png = io.BytesIO()
    load_rgb(CHELSEA).resize((70, 50)).save(png, format="PNG")
    files = {"a.jpg": jpegs[0], "cmyk.jpg": cmyk, "b.jpg": jpegs[3], "truncated.jpg": truncated,
             "c.png": png.getvalue(), "text.jpg": b"this is not an image", "broken.jpg": broken_inside,
             "d.jpg": jpegs[4], "no-scan.jpg": no_scan}
    tasks = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        tasks.append(ImageTask(name, str(tmp_path / name)))
    return tasks + [ImageTask("gone.jpg", str(tmp_path / "gone.jpg")), ImageTask("x.jpg", "", error="rejected")]


def test_mixed_batch_keeps_order_uses_the_fallbacks_and_the_cpu_reasons(tmp_path):
    tasks = _mixed_folder(tmp_path)
    collate = CollateCrops(len(GEOMETRIES))
    cpu_items = DecodedCrops(tasks, GEOMETRIES)
    device_items = DecodedCrops(tasks, GEOMETRIES, device_jpeg=True)
    cpu = collate([cpu_items[i] for i in range(len(tasks))])
    raw_batch = collate([device_items[i] for i in range(len(tasks))])
    names = {tasks[i].image for i, _ in raw_batch.raw}
    # CMYK, truncated (no EOI), PNG and text stay on the CPU workers; a JPEG without image data
    # goes to the device, which refuses it: the CPU path then tries and says why.
    assert names == {"a.jpg", "b.jpg", "d.jpg", "broken.jpg", "no-scan.jpg"}
    # the files of a batch are views of one buffer: one shared-memory handle from a worker, not one per file
    assert len({raw.data.untyped_storage().data_ptr() for _, raw in raw_batch.raw}) == 1
    decoder = DeviceDecoder(GEOMETRIES, "cpu")
    merged = decode_on_device(raw_batch, decoder)
    assert merged.indices == cpu.indices == sorted(merged.indices)
    assert merged.failed == cpu.failed
    reasons = {tasks[i].image: reason for i, reason in merged.failed}
    assert reasons["text.jpg"] == "not an image (unidentified format)" and reasons["gone.jpg"] == "file not found"
    assert reasons["truncated.jpg"].startswith("cannot decode") and reasons["no-scan.jpg"].startswith("cannot decode")
    assert "broken.jpg" not in reasons and "cmyk.jpg" not in reasons and "c.png" not in reasons
    assert reasons["x.jpg"] == "rejected"
    for a, b in zip(merged.crops, cpu.crops):
        assert torch.equal(a, b)
    assert (decoder.counts.on_device, decoder.counts.refused, decoder.counts.failed, decoder.counts.workers) == (4, 1, 1, 2)


def test_a_batch_the_device_refuses_is_decoded_one_by_one_then_on_the_cpu(monkeypatch):
    jpegs = _small_jpegs()[:4]
    raws = [device_jpeg(d) for d in jpegs]
    refused = raws[1].data
    real = gpu_decode.decode_jpeg
    calls = []

    def picky(data, **kwargs):  # a device decoder that refuses one file (say, an odd subsampling)
        calls.append(len(data))
        if any(t is refused for t in data):
            raise RuntimeError("nvjpeg: unsupported")
        return real(data, **kwargs)

    monkeypatch.setattr(gpu_decode, "decode_jpeg", picky)
    decoder = DeviceDecoder(GEOMETRIES, "cpu")
    results = decoder(raws)
    assert calls == [4, 1, 1, 1, 1]  # the batch, then one by one
    assert decoder.counts.on_device == 3 and decoder.counts.refused == 1 and decoder.counts.failed == 0
    for data, (crops, reason) in zip(jpegs, results):
        assert reason is None and all(torch.equal(a, b) for a, b in zip(crops, _cpu_crops(data)))


def test_a_bomb_header_is_refused_before_any_decode(tmp_path, monkeypatch):
    data = bytearray(_jpeg(Image.new("RGB", (32, 32), (200, 30, 30))))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = (9000).to_bytes(2, "big") * 2  # the header now says 9000 x 9000: 81 M pixels
    assert 9000 * 9000 > MAX_IMAGE_PIXELS
    path = tmp_path / "bomb.jpg"
    path.write_bytes(bytes(data))

    def no_decode(*args, **kwargs):
        raise AssertionError("a bomb reached the device decoder")

    monkeypatch.setattr(gpu_decode, "decode_jpeg", no_decode)
    assert device_jpeg(bytes(data)) is None
    task = [ImageTask("bomb.jpg", str(path))]
    _, crops, reason = DecodedCrops(task, GEOMETRIES, device_jpeg=True)[0]
    assert crops is None and reason.startswith("decompression bomb refused")
    assert reason == DecodedCrops(task, GEOMETRIES)[0][2]


def test_the_choice_is_automatic_and_says_why(monkeypatch):
    assert resolve_decode("auto", torch.device("cpu")) == DecodeChoice(False, "cpu device")
    assert not resolve_decode("off", torch.device("cuda")).on
    with pytest.raises(OptionError, match="gpu_decode 'on'"):
        resolve_decode("on", torch.device("cpu"))
    real = gpu_decode.decode_jpeg
    seen = []

    def fake_cuda(data, mode, device, apply_exif_orientation):  # decodes on the CPU, as if on the GPU
        seen.append(torch.device(device).type)
        return real(data, mode=mode)

    monkeypatch.setattr(gpu_decode, "_PROBED", {})
    monkeypatch.setattr(gpu_decode, "decode_jpeg", fake_cuda)
    choice = resolve_decode("auto", torch.device("cuda"))
    assert choice.on and "cuda" in choice.reason and seen == ["cuda"]
    resolve_decode("auto", torch.device("cuda"))
    assert seen == ["cuda"]  # probed once per device and process

    def no_nvjpeg(*args, **kwargs):
        raise RuntimeError("decode_jpegs_cuda: torchvision not compiled with nvJPEG support")

    monkeypatch.setattr(gpu_decode, "_PROBED", {})
    monkeypatch.setattr(gpu_decode, "decode_jpeg", no_nvjpeg)
    choice = resolve_decode("auto", torch.device("cuda:1"))
    assert not choice.on and "failed its probe" in choice.reason and "not compiled with nvJPEG" in choice.reason
    monkeypatch.setattr(gpu_decode, "_PROBED", {})
    monkeypatch.setattr(gpu_decode, "decode_jpeg", None)  # a torchvision without its image decoders
    assert "has no torchvision.io.decode_jpeg" in resolve_decode("auto", torch.device("cuda")).reason
    # the report of a CUDA run that kept the CPU path says why
    log = pipeline._DecodeLog(choice, torch.device("cuda:1"))
    assert log.describe() == f"{DECODE_CPU} ({choice.reason})"
    assert gpu_decode.device_geometries_reason(GEOMETRIES, "pil") and gpu_decode.device_geometries_reason(
        [Geometry(224, 256, "lanczos")], "torch") and gpu_decode.device_geometries_reason(GEOMETRIES, "torch") is None


def test_run_inference_with_the_device_path_forced_on_the_cpu(tmp_path, monkeypatch):
    from classify.models.weights import load_model

    torch.manual_seed(0)
    model = load_model(CNN)
    monkeypatch.setattr(pipeline, "load_model", lambda entry, *a, **k: model)
    tasks = [ImageTask(p.name, str(p)) for p in PACKAGED_JPEGS] + _mixed_folder(tmp_path)
    options = InferenceOptions(device="cpu", batch_size=5, num_workers=0, num_threads=1)

    def run(**changes):
        rows = []
        result = run_inference(tasks, [CNN], rows.append, options=dataclasses.replace(options, **changes))
        return pd.concat(rows, ignore_index=True).set_index("image").sort_index(), result

    cpu, cpu_report = run()
    assert cpu_report.decode == DECODE_CPU and "decode" not in cpu_report.summary()
    monkeypatch.setattr(gpu_decode, "resolve_decode", lambda option, device: DecodeChoice(True, "decode_jpeg on cpu"))
    device, report = run()
    assert report.decode == ("decode_jpeg on cpu for 8 JPEGs, CPU workers for 2 other images, "
                             "1 JPEGs the device refused on the CPU")  # 4 packaged + 4 of the mixed folder; no-scan.jpg refused
    assert "decode: decode_jpeg on cpu for 8 JPEGs" in report.summary()
    assert list(device.index) == list(cpu.index) and (device["status"] == cpu["status"]).all()
    assert device["reason"].fillna("").tolist() == cpu["reason"].fillna("").tolist()
    ok = device["status"] == "ok"
    assert ok.sum() == 10 and (device.loc[ok, "pred_wnid"] == cpu.loc[ok, "pred_wnid"]).all()
    assert (device.loc[ok, "prob_1"] - cpu.loc[ok, "prob_1"]).abs().max() < 1e-5
    # a decode worker hands the JPEG bytes over (RawJpeg through the DataLoader), two forward threads
    workers, workers_report = run(num_workers=1, num_threads=2)
    assert workers_report.decode == report.decode
    pd.testing.assert_frame_equal(workers, device)


def test_the_gpu_arithmetic_keeps_the_top_1_of_the_packaged_model(tmp_path, monkeypatch):
    """EfficientNet-Lite0 with its packaged weights on the packaged photographs as JPEGs: the
    device path with the GPU's float resize (forced onto the CPU) against the CPU path. Measured
    here (x86, AVX-512): the same top-5 wnids on all six, top-1 probabilities within 7.0e-4; the
    test asserts the top-1 and 2e-3 (near-ties lower in the top-5 may swap on other CPUs)."""
    from classify.models.registry import DEFAULT_MODEL

    paths = list(PACKAGED_JPEGS)
    for source in (CHELSEA, COFFEE):
        paths.append(tmp_path / f"{source.stem}.jpg")
        paths[-1].write_bytes(_jpeg(load_rgb(source)))
    tasks = [ImageTask(p.name, str(p)) for p in paths]
    options = InferenceOptions(device="cpu", backend="torch", batch_size=8, num_workers=0, num_threads=1)

    def run():
        rows = []
        run_inference(tasks, [DEFAULT_MODEL], rows.append, options=options)
        return pd.concat(rows, ignore_index=True).set_index("image").sort_index()

    cpu = run()
    monkeypatch.setattr(gpu_decode, "resolve_decode", lambda option, device: DecodeChoice(True, "decode_jpeg on cpu"))
    monkeypatch.setattr(gpu_decode, "DeviceDecoder", functools.partial(DeviceDecoder, float_resize=True))
    device = run()
    top5 = ["pred_wnid"] + [f"pred_wnid_{k}" for k in range(2, 6)]
    assert (device["status"] == "ok").all() and (device["pred_wnid"] == cpu["pred_wnid"]).all()
    assert (device[top5] == cpu[top5]).to_numpy().mean() >= 0.9
    assert (device["prob_1"] - cpu["prob_1"]).abs().max() < 2e-3
