"""ONNX Runtime on the CPU: the same predictions as PyTorch, a safe cache, and a clean fallback.

One real export of EfficientNet-Lite0 (packaged weights) is shared by the module; the pipeline
tests reuse it through the cache, as a second run would.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import classify.engine.onnx_backend as backend
import classify.engine.pipeline as pipeline
from classify.engine.device import check_backend
from classify.engine.types import InferenceOptions
from classify.engine.onnx_backend import ExportKey, OnnxBackendError, OnnxCache, onnx_classifier
from classify.engine.preprocess import crop_to_tensor, normalizer
from classify.models.registry import DEFAULT_MODEL
from classify.models.lookup import get_model
from classify.models.sources.package_source import load_efficientnet_lite0_package
from classify.targets import predict_folder
from classify.models.weights import weights_status
from core.imageio import load_rgb

pytest.importorskip("onnxruntime")

SITE = Path(torch.__file__).resolve().parent.parent
PHOTOS = {  # packaged photographs and the class of their main subject
    "n02123045": SITE / "skimage/data/chelsea.png",
    "n07920052": SITE / "skimage/data/coffee.png",
    "n03877845": SITE / "sklearn/datasets/images/china.jpg",
    "n03763968": SITE / "matplotlib/mpl-data/sample_data/grace_hopper.jpg",
    "n04266014": SITE / "skimage/data/rocket.jpg",
}
TOP5 = ["pred_wnid"] + [f"pred_wnid_{k}" for k in range(2, 6)]


@pytest.fixture(scope="module")
def lite0_key():
    entry = get_model(DEFAULT_MODEL)
    return ExportKey.for_model(entry.id, weights_status(entry).path, entry.input_config().size)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory, lite0_key):
    """A cache holding the one real export of this module."""
    cache = OnnxCache(tmp_path_factory.mktemp("onnx-cache"))
    onnx_classifier(lite0_key, cache, threads=1, load_model=load_efficientnet_lite0_package, allow_export=True)
    return cache


@pytest.fixture()
def photo_folder(tmp_path):
    for wnid, path in PHOTOS.items():
        (tmp_path / "photos" / wnid).mkdir(parents=True)
        (tmp_path / "photos" / wnid / path.name).write_bytes(path.read_bytes())
    return tmp_path / "photos"


def test_onnx_runtime_gives_the_same_logits_on_packaged_photos(shared_cache, lite0_key):
    config = get_model(DEFAULT_MODEL).input_config()
    crops = torch.stack([crop_to_tensor(load_rgb(p), config.geometry) for p in PHOTOS.values()])
    batch = normalizer(config, torch.device("cpu"))(crops)
    classifier, loaded = onnx_classifier(lite0_key, shared_cache, 1, load_model=None, allow_export=False)
    assert loaded is None and classifier.note == "cached export"  # no PyTorch model was needed
    with torch.inference_mode():
        expected = load_efficientnet_lite0_package()(batch)
    got = classifier(batch)
    assert (got - expected).abs().max() < 1e-3
    assert torch.equal(got.topk(5).indices, expected.topk(5).indices)
    channels_last = batch.contiguous(memory_format=torch.channels_last)
    assert torch.equal(classifier(channels_last), got)  # the wrapper hands ONNX Runtime plain NCHW
    meta = json.loads(shared_cache.paths(lite0_key)[1].read_text())
    assert meta["model_id"] == DEFAULT_MODEL and meta["max_abs_logit_difference"] < 1e-3


def test_every_pad_is_folded_into_its_convolution(shared_cache, lite0_key, tmp_path):
    """The point of static padding: after ONNX Runtime's optimisations the graph is convolutions
    only (a Pad left in would cost a quarter of the run time in layout re-ordering)."""
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(str(shared_cache.paths(lite0_key)[0]), options, providers=["CPUExecutionProvider"])
    ops = [node.op_type for node in onnx.load(str(tmp_path / "optimized.onnx")).graph.node]
    assert "Pad" not in ops and ops.count("Conv") == 49


def test_the_cache_key_covers_weights_size_and_versions(lite0_key):
    assert lite0_key.weights_sha256 == backend.file_sha256(weights_status(get_model(DEFAULT_MODEL)).path)
    assert lite0_key.torch == torch.__version__ and lite0_key.opset == backend.ONNX_OPSET
    variants = [ExportKey(**{**lite0_key.__dict__, field: value}) for field, value in
                [("weights_sha256", "0" * 64), ("input_size", 240), ("torch", "0.0"), ("timm", "0.0"),
                 ("onnx", "0.0"), ("export_format", -1)]]
    assert len({k.stem for k in [lite0_key, *variants]}) == 7
    odd = ExportKey(**{**lite0_key.__dict__, "model_id": "torchvision/../evil.name"})
    assert "/" not in odd.stem and not odd.stem.startswith(".")


def test_a_cached_export_loads_without_importing_timm_or_onnx(shared_cache, lite0_key, monkeypatch):
    """The key's versions are the libraries' own (caches made before keep their names), read without
    importing them: a model whose export is cached loads in a fresh process (a Ray actor) with neither
    timm nor onnx imported (2.1 s of each load before)."""
    import subprocess
    import sys

    import onnx
    import timm

    from tests.conftest import ROOT

    assert (lite0_key.timm, lite0_key.onnx) == (timm.__version__, onnx.__version__)
    # read without importing: timm's version.py, onnx's metadata (what onnx.__version__ itself reads)
    for name in ("timm", "onnx"):
        monkeypatch.delitem(sys.modules, name)
        assert backend._version(name) == {"timm": timm.__version__, "onnx": onnx.__version__}[name]
        assert name not in sys.modules
    code = f"""
import sys
from classify.engine.pipeline import _Settings, _load_pass
from classify.engine.types import InferenceOptions
from classify.engine.device import select_device
from classify.models.lookup import resolve_models
entry = resolve_models({DEFAULT_MODEL!r})[0]
options = InferenceOptions(cache_dir={str(shared_cache.folder)!r})
device = select_device("cpu")
settings = _Settings(device, None, 2, 0, 1, options)
loaded = _load_pass([entry], [entry.input_config().geometry], {{entry.id: 1}}, settings)
print(loaded[0].backend, "timm" in sys.modules, "onnx" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ["export)", "False", "False"], out.stdout


def test_pipeline_on_onnx_runtime_equals_the_pipeline_on_pytorch(photo_folder, shared_cache):
    """Two batches in flight at once (num_threads=2), stored in order, same rows as PyTorch."""
    options = dict(num_workers=0, device="cpu", cache_dir=str(shared_cache.folder), batch_size=2, num_threads=2)
    events = []
    fast, fast_report = predict_folder(photo_folder, DEFAULT_MODEL, options=InferenceOptions(**options),
                                       progress=events.append)
    assert [e.done for e in events if e.total == len(PHOTOS)][-3:] == [2, 4, 5]
    slow, slow_report = predict_folder(photo_folder, DEFAULT_MODEL, options=InferenceOptions(backend="torch", **options))
    assert fast_report.backends[DEFAULT_MODEL] == "onnxruntime (cached export)"
    assert slow_report.backends[DEFAULT_MODEL] == "torch (asked for)"
    assert "efficientnet_lite0 on onnxruntime (cached export)" in fast_report.summary()
    assert (fast["status"] == "ok").all() and len(fast) == len(PHOTOS)
    pd_equal = fast[["image", *TOP5]].reset_index(drop=True).equals(slow[["image", *TOP5]].reset_index(drop=True))
    assert pd_equal, "top-5 must be identical on both backends"
    probs = [f"prob_{k}" for k in range(1, 6)]
    assert np.abs(fast[probs].to_numpy(float) - slow[probs].to_numpy(float)).max() < 1e-4
    assert fast.set_index("image").loc["n07920052/coffee.png", "pred_wnid"] == "n07920052"  # espresso: real weights


def test_few_images_and_no_cached_export_stay_on_pytorch(photo_folder, tmp_path):
    """Exporting costs more than it saves on a handful of images; nothing is written then."""
    _, report = predict_folder(photo_folder, DEFAULT_MODEL,
                               options=InferenceOptions(num_workers=0, device="cpu", cache_dir=str(tmp_path / "c")))
    assert report.backends[DEFAULT_MODEL].startswith("torch (no cached export and too few images")
    assert not (tmp_path / "c").exists()


def test_missing_onnxruntime_falls_back_and_forcing_it_says_why(photo_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(backend, "onnxruntime_version", lambda: None)
    options = dict(num_workers=0, device="cpu", cache_dir=str(tmp_path / "c"), onnx_export_min_images=1)
    table, report = predict_folder(photo_folder, DEFAULT_MODEL, options=InferenceOptions(**options))
    assert report.backends[DEFAULT_MODEL].startswith("torch (onnxruntime/onnx are not installed")
    assert (table["status"] == "ok").all()
    with pytest.raises(ValueError, match="cannot run on ONNX Runtime: onnxruntime/onnx are not installed"):
        predict_folder(photo_folder, DEFAULT_MODEL, options=InferenceOptions(backend="onnxruntime", **options))


def test_a_failed_export_is_recorded_and_not_retried(photo_folder, tmp_path, monkeypatch):
    calls = []

    def broken_export(model, size):
        calls.append(size)
        raise RuntimeError("Unsupported: ONNX export of operator foo\nmore detail")

    monkeypatch.setattr(backend, "export_onnx_bytes", broken_export)
    options = InferenceOptions(num_workers=0, device="cpu", cache_dir=str(tmp_path / "c"), onnx_export_min_images=1)
    for _ in range(2):
        table, report = predict_folder(photo_folder, DEFAULT_MODEL, options=options)
        assert (table["status"] == "ok").all()
    assert calls == [224], "the second run must read the failure record, not export again"
    assert "RuntimeError: Unsupported: ONNX export of operator foo" in report.backends[DEFAULT_MODEL]
    assert list((tmp_path / "c").glob("*.onnx")) == [] and len(list((tmp_path / "c").glob("*.failed.json"))) == 1


def test_an_onnx_that_cannot_be_imported_is_not_remembered_as_a_failed_export(lite0_key, tmp_path, monkeypatch):
    """Found but not importable (a protobuf mismatch): said, and tried again once it is mended (code review:
    the failure was recorded under a key that does not change when onnx is repaired)."""
    def broken(model, size):
        raise ImportError("cannot import name 'x' from 'google.protobuf'")

    monkeypatch.setattr(backend, "export_onnx_bytes", broken)
    cache = OnnxCache(tmp_path / "c")
    with pytest.raises(OnnxBackendError, match="onnx cannot be imported .*pip install -r requirements.txt"):
        onnx_classifier(lite0_key, cache, threads=1, load_model=load_efficientnet_lite0_package, allow_export=True)
    assert cache.failure(lite0_key) is None and not list((tmp_path / "c").glob("*.failed.json"))


def test_an_export_that_disagrees_with_pytorch_is_refused(lite0_key, tmp_path, monkeypatch):
    monkeypatch.setattr(backend, "logit_difference", lambda *args: 0.5)
    cache = OnnxCache(tmp_path)
    with pytest.raises(OnnxBackendError, match="differ by 0.5"):
        onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=True)
    assert not cache.has(lite0_key) and "differ by 0.5" in cache.failure(lite0_key)


def test_a_damaged_cache_file_is_exported_again(lite0_key, shared_cache, tmp_path):
    cache = OnnxCache(tmp_path)
    model_path = cache.paths(lite0_key)[0]
    model_path.write_bytes(b"not a protobuf")
    with pytest.raises(OnnxBackendError, match="no checksum to verify it by; too few images to export it again"):
        onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=False)
    assert not model_path.exists()
    model_path.write_bytes(b"not a protobuf")
    classifier, loaded = onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=True)
    assert loaded is not None and classifier.note.startswith("exported now")
    assert model_path.read_bytes() == shared_cache.paths(lite0_key)[0].read_bytes()  # the export is deterministic


def test_a_cached_export_that_still_loads_but_changed_is_never_used(lite0_key, shared_cache, tmp_path):
    """Flipped bits inside a weight tensor leave a graph ONNX Runtime opens and runs, with wrong
    logits: the sha256 recorded when the export was checked refuses it, and it is exported again."""
    import shutil

    cache = OnnxCache(tmp_path)
    for source, target in zip(shared_cache.paths(lite0_key)[:2], cache.paths(lite0_key)[:2]):
        shutil.copy(source, target)
    model_path = cache.paths(lite0_key)[0]
    data = bytearray(model_path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096:7] = bytes(b ^ 0x40 for b in data[middle:middle + 4096:7])
    model_path.write_bytes(bytes(data))
    backend.make_session(model_path)  # the damage is invisible to ONNX Runtime: it opens the graph
    with pytest.raises(OnnxBackendError, match="cached export damaged"):
        onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=False)
    classifier, loaded = onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=True)
    assert classifier.note.startswith("exported now") and loaded is not None
    assert model_path.read_bytes() == shared_cache.paths(lite0_key)[0].read_bytes()
    again, _ = onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=False)
    assert again.note == "cached export"


def test_a_failure_of_this_run_is_not_remembered_and_a_store_that_fails_falls_back(photo_folder, tmp_path, monkeypatch):
    """Out of memory while exporting, or a full disk while storing, is this run's: the model runs on
    PyTorch with the reason, nothing is recorded, and the next run exports."""
    real_export, real_write = backend.export_onnx_bytes, backend._atomic_write
    options = InferenceOptions(num_workers=0, device="cpu", cache_dir=str(tmp_path / "c"), onnx_export_min_images=1)
    monkeypatch.setattr(backend, "export_onnx_bytes", lambda *a: (_ for _ in ()).throw(MemoryError("transient")))
    _, report = predict_folder(photo_folder, DEFAULT_MODEL, options=options)
    assert report.backends[DEFAULT_MODEL].startswith("torch (MemoryError: transient")
    assert not list((tmp_path / "c").glob("*.failed.json"))
    monkeypatch.setattr(backend, "export_onnx_bytes", real_export)

    def full(target, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(backend, "_atomic_write", full)
    table, report = predict_folder(photo_folder, DEFAULT_MODEL, options=options)
    assert "the checked export cannot be stored in" in report.backends[DEFAULT_MODEL] and (table["status"] == "ok").all()
    monkeypatch.setattr(backend, "_atomic_write", real_write)
    _, report = predict_folder(photo_folder, DEFAULT_MODEL, options=options)
    assert report.backends[DEFAULT_MODEL].startswith("onnxruntime (exported now")


@pytest.mark.parametrize("content", ["[1]", '"x"', '{"reason": "ok\u001b[2J\u001b[31m FAKE\nsecond"}', "{" * 70000])
def test_a_hostile_failure_record_gives_one_line_and_names_the_file_to_delete(lite0_key, tmp_path, content):
    cache = OnnxCache(tmp_path)
    failed = cache.paths(lite0_key)[2]
    failed.write_text(content)
    with pytest.raises(OnnxBackendError) as caught:
        onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=True)
    message = str(caught.value)
    assert message.isprintable() and "\x1b" not in message and len(message) < 600
    assert message.startswith("export failed before with these versions: ") and f"delete {failed} to try again" in message


def test_gpu_and_test_doubles_keep_the_pytorch_path():
    with pytest.raises(ValueError, match="for the CPU"):
        check_backend("onnxruntime", torch.device("cuda"))
    with pytest.raises(ValueError, match="choose one of"):
        check_backend("tensorrt", torch.device("cpu"))
    cpu = torch.device("cpu")
    assert pipeline._onnx_excluded(get_model(DEFAULT_MODEL), torch.device("cuda"), InferenceOptions()) == "cuda device"
    from tests.classify.doubles import make_test_double

    double = make_test_double("test_efficientnet")
    assert "test double" in pipeline._onnx_excluded(double, cpu, InferenceOptions())
    assert pipeline._onnx_excluded(get_model(DEFAULT_MODEL), cpu, InferenceOptions()) is None


@pytest.mark.parametrize("error", [MemoryError("transient"), OSError(5, "I/O error")])
def test_a_model_that_cannot_be_loaded_is_not_remembered_as_one_that_cannot_be_exported(lite0_key, tmp_path, error):
    cache = OnnxCache(tmp_path)

    def broken():
        raise error

    with pytest.raises(type(error)):
        onnx_classifier(lite0_key, cache, 1, broken, allow_export=True)
    assert cache.failure(lite0_key) is None and not list(tmp_path.iterdir())
    classifier, _ = onnx_classifier(lite0_key, cache, 1, load_efficientnet_lite0_package, allow_export=True)
    assert classifier.note.startswith("exported now")


def test_int8_never_exports_a_zero_shot_head():
    """The image tower alone is exported for fp32; int8 would need the whole head, keyed on nothing."""
    from classify.models.sources.openclip_source import clip_entry

    entry = clip_entry("clip:ViT-B-32.openai")
    cpu = torch.device("cpu")
    assert pipeline._onnx_excluded(entry, cpu, InferenceOptions()) is None
    assert "no weights file to key an export on" in pipeline._onnx_excluded(entry, cpu, InferenceOptions(), "int8")


def test_a_cache_json_that_is_a_fifo_is_no_cache_entry_and_never_blocks(tmp_path):
    """Hostile campaign: a FIFO in place of a cached model's .json hung the run at 'loading model'
    (a plain open() waits for a writer). It reads as no entry now, at once (read on a daemon thread,
    so a regression fails here instead of hanging the suite)."""
    import os
    import threading

    fifo = tmp_path / "model-int8-x.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(backend._read_meta(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert got == [None], "reading a FIFO as a cache .json blocked"


def test_a_huge_file_in_place_of_a_cached_export_is_refused_at_once(lite0_key, shared_cache, tmp_path):
    """Hostile campaign: a 3 GB sparse file at the export took 33 s and 3.8 GB to refuse by its hash; the size
    recorded beside it refuses it before a byte is read."""
    import shutil
    import time

    cache = OnnxCache(tmp_path / "c")
    model_path, meta_path, _ = cache.paths(lite0_key)
    model_path.parent.mkdir(parents=True)
    shutil.copy(shared_cache.paths(lite0_key)[1], meta_path)
    assert json.loads(meta_path.read_text())["onnx_bytes"] > 0
    with open(model_path, "wb") as handle:
        handle.truncate(3 << 30)
    start = time.perf_counter()
    with pytest.raises(OnnxBackendError, match="not the size recorded"):
        backend.read_verified(model_path, meta_path)
    assert time.perf_counter() - start < 1


def test_a_long_path_in_a_reason_is_kept_whole_or_marked_where_cut():
    """A folder in place of a cached export gave 'IsADirectoryError: ... /cache/onnx/<200 characters>' cut in
    the middle of the path; now the path is whole (under 600 characters) and a longer text ends with '…'."""
    from classify.engine.onnx_backend import _first_line

    path = "/home/" + "a" * 40 + "/.wildlens/cache/onnx/" + "efficientnet_lite0-" + "0123456789abcdef" * 10 + ".onnx"
    assert path in _first_line(IsADirectoryError(21, "Is a directory", path))
    long = _first_line(ValueError("x" * 2000 + "\nsecond line"))
    assert long.endswith("…") and len(long) <= len("ValueError: ") + 600 and "second" not in long
