"""CPU precisions (issue 13 item 5): bf16 where the CPU has it, int8 through ONNX Runtime static
quantization calibrated on a fixed packaged set, each stored under its own model id.

Real EfficientNet-Lite0 weights on the sample run's 30 views (crawl.sample_photos: five packaged
photographs, six views each). One module-wide run holds fp32, bf16 and int8 rows; one quantized
model is made per session (shared cache folder) and reused.
"""
import hashlib

import numpy as np
import pytest
import torch

import classify.engine.device as device_mod
from classify.cli import main
from classify.engine.device import check_backend, cpu_bf16_instructions, cpu_int8_dot_instructions, resolve_precision
from classify.engine.options import PLAIN_INT8, PRECISIONS, precision_model_id, split_model_id
from classify.engine.types import InferenceOptions
from classify.engine.dispatch import result_entries, run_inference
from classify.models.registry import DEFAULT_MODEL
from classify.targets import predict_run
from core.errors import OptionError
from core.runstore import RunInfo, RunStore

pytestmark = pytest.mark.xdist_group("precisions")  # its module fixtures built once (tests/conftest.py)

pytest.importorskip("onnxruntime")

CPU = torch.device("cpu")
HAS_BF16 = bool(cpu_bf16_instructions())
# bf16 agreement with fp32 on the 30 sample views: 30/30 measured here (AMX-BF16 Xeon); the issue's
# target is >= 99 %. On the benchmark's 324 harder views (crops of nine photos, 5 % of them with a
# top-2 margin under 1 point in fp32) it is 96-97.5 %: every disagreement there is such a near-tie.
BF16_MIN_AGREEMENT = 0.99
# int8 (QDQ, per-channel, MinMax on the packaged calibration set, head in fp32): 28-30/30 here over
# calibration settings; 92 % (Lite0), 88 % (Lite1), 94 % (Lite2) on the benchmark's 324 views, and
# 95.7 / 92.0 / 96.9 % with the biases corrected (classify.engine.quantize.correct_biases) and every
# calibration view setting the activation ranges.
# 0.85 leaves room for other CPUs' integer kernels while catching a broken quantization (65 %
# with the logits quantized too, below 10 % with a wrong scale). A CPU without 8-bit dot products
# gets 7-bit weights (classify.engine.quantize.reduce_range): 25/30 on an AVX2-only AMD EPYC
# (2026-12-02; 8-bit weights gave 39 % on the calibration views there), so its floor is 0.80.
HAS_INT8_DOT = bool(cpu_int8_dot_instructions())
INT8_MIN_AGREEMENT = 0.85 if HAS_INT8_DOT else 0.80


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory, shared_cache):
    """A run with the sample views, classified by Lite0 in fp32, bf16 (where the CPU has it) and int8."""
    from crawl.sample_photos import write_sample_images

    store = RunStore(tmp_path_factory.mktemp("precision-store"))
    run = store.create_run(RunInfo(run_id="precisions", label_space="imagenet-1k"))
    write_sample_images(run)
    reports = {}
    for precision in ("fp32", "bf16", "int8", PLAIN_INT8):
        if precision == "bf16" and not HAS_BF16:
            continue
        options = InferenceOptions(device="cpu", precision=precision.split("-")[0], num_workers=0,
                                   cache_dir=str(shared_cache), int8_recheck="none" if precision == PLAIN_INT8 else "auto")
        reports[precision] = predict_run(run, DEFAULT_MODEL, options)
    return run, reports


def _top1(run, model):
    table = run.read_predictions([model])
    assert len(table) == 30 and (table["status"] == "ok").all()
    return table.set_index("image")["pred_wnid"].sort_index()


def _agreement(run, precision):
    fp32, other = _top1(run, DEFAULT_MODEL), _top1(run, precision_model_id(DEFAULT_MODEL, precision))
    return float((fp32 == other.reindex(fp32.index)).mean())


@pytest.mark.skipif(not HAS_BF16, reason="this CPU has no native bf16 (AVX-512 BF16, AMX-BF16 or Arm BF16)")
def test_bf16_on_this_cpu_agrees_with_fp32(sample_run):
    run, reports = sample_run
    assert reports["bf16"].precision == "bfloat16"
    backend = reports["bf16"].backends[precision_model_id(DEFAULT_MODEL, "bf16")]
    assert backend.startswith("torch (bf16 autocast")
    assert _agreement(run, "bf16") >= BF16_MIN_AGREEMENT


def test_int8_agrees_with_fp32_and_runs_on_a_quantized_model(sample_run):
    run, reports = sample_run
    assert reports[PLAIN_INT8].precision == "int8"
    assert reports[PLAIN_INT8].backends[precision_model_id(DEFAULT_MODEL, PLAIN_INT8)].startswith(
        "onnxruntime int8 alone (--int8-recheck none)")
    assert _agreement(run, PLAIN_INT8) >= INT8_MIN_AGREEMENT
    assert run.read_predictions([precision_model_id(DEFAULT_MODEL, PLAIN_INT8)])["int8_rechecked"].isna().all()


def test_the_int8_cascade_re_checks_in_fp32_exactly_the_images_under_its_gate(sample_run, shared_cache):
    """--precision int8 (issue 26 item 5): int8 on every image, fp32 again where the int8 top-1
    probability margin is at or below the gate from the gate set; each row says which it was."""
    import classify.engine.quantize as quantize
    from classify.engine.onnx_backend import ExportKey, OnnxCache
    from classify.models.lookup import get_model
    from classify.models.weights import weights_status

    run, reports = sample_run
    entry = get_model(DEFAULT_MODEL)
    key = ExportKey.for_model(entry.id, weights_status(entry).path, entry.input_config().size)
    gate = quantize.int8_classifier(key, OnnxCache(shared_cache), entry.input_config(), 1,
                                    lambda: pytest.fail("no reload")).gate
    assert gate.views == len(quantize.CALIBRATION_PHOTOS) * len(quantize.GATE_VIEWS) and gate.disagreements > 0

    def rows(precision):
        model = DEFAULT_MODEL if precision == "fp32" else precision_model_id(DEFAULT_MODEL, precision)
        return run.read_predictions([model]).set_index("image").sort_index()

    fp32, plain, cascade = rows("fp32"), rows(PLAIN_INT8), rows("int8")
    assert fp32["int8_rechecked"].isna().all() and cascade["int8_rechecked"].notna().all()
    again = cascade["int8_rechecked"].astype(bool)
    margin = plain["prob_1"].astype(float) - plain["prob_2"].astype(float)
    assert (again == (margin <= gate.threshold + 1e-6)).all()  # stored probabilities are the float32 ones
    assert 0 < again.sum() < len(again)  # both kinds on the sample: the test would catch either path's bug
    top5 = [f"pred_wnid_{k}" if k > 1 else "pred_wnid" for k in range(1, 6)]
    probs = [f"prob_{k}" for k in range(1, 6)]
    # Not re-checked: the int8 rows themselves. Re-checked: fp32's (its ONNX export: within 1e-3 of PyTorch).
    assert cascade.loc[~again, top5 + probs].equals(plain.loc[~again, top5 + probs])
    assert (cascade.loc[again, "pred_wnid"] == fp32.loc[again[again].index, "pred_wnid"]).all()
    assert np.allclose(cascade.loc[again, probs].astype(float), fp32.loc[again[again].index, probs].astype(float),
                       atol=2e-3)
    assert _agreement(run, "int8") >= max(_agreement(run, PLAIN_INT8), 29 / 30)
    backend = reports["int8"].backends[precision_model_id(DEFAULT_MODEL, "int8")]
    assert backend.startswith("onnxruntime int8 -> fp32 cascade") and f"<= {gate.threshold:.4f}" in backend
    assert backend.endswith(f"fp32 re-checked {int(again.sum())} of 30 images")
    assert reports["int8"].models[precision_model_id(DEFAULT_MODEL, "int8")].rechecked == int(again.sum())
    assert reports[PLAIN_INT8].models[precision_model_id(DEFAULT_MODEL, PLAIN_INT8)].rechecked is None


def test_the_gate_re_checks_every_gate_view_on_which_int8_and_fp32_disagree():
    from classify.engine.quantize import Gate, Int8Cascade

    fp32 = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 5.0], [1.0, 1.1, 0.0]])
    int8 = torch.tensor([[2.9, 0.1, 0.0], [2.1, 2.0, 0.0], [0.0, 0.0, 4.0], [1.0, 0.0, 1.3]])
    gate = Gate.choose(int8, fp32)
    top = int8.softmax(1).topk(2, 1).values
    margins = top[:, 0] - top[:, 1]
    assert gate.disagreements == 2 and gate.views == 4 and gate.threshold == pytest.approx(float(margins[[1, 3]].max()))
    assert gate.rechecked == float((margins <= gate.threshold).float().mean())
    assert Gate.choose(fp32, fp32).threshold == -1.0  # no disagreement: nothing is re-checked
    # 400 views: 99.5 % agreement leaves 2 disagreements, so the gate is the third largest margin among them.
    logits = torch.zeros(400, 3)
    logits[:, 0] = torch.linspace(0.5, 6.0, 400)
    truth = logits.argmax(1).clone()
    disagree = torch.tensor([10, 50, 90, 200, 300])
    wrong = logits.clone()
    wrong[disagree, 1] = wrong[disagree, 0] + 0.01  # int8's top-1 is class 1 there, by a hair
    wrong[disagree, 0] = 0.0
    wrong[disagree, 1] += torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5])
    m = wrong.softmax(1).topk(2, 1).values
    m = m[:, 0] - m[:, 1]
    many = Gate.choose(wrong, logits)
    assert truth.tolist() == [0] * 400 and many.disagreements == 5
    assert many.threshold == pytest.approx(float(torch.sort(m[disagree], descending=True).values[2]))
    assert Gate.from_meta({"gate": {"threshold": gate.threshold, "views": 4, "disagreements": 2,
                                    "rechecked": gate.rechecked}}) == gate
    good = {"threshold": 0.1, "views": 4, "disagreements": 2, "rechecked": 0.5}
    assert Gate.from_meta({"gate": good}) == Gate(0.1, 4, 2, 0.5)
    # The hostile campaign's cache files: nothing coerced ("0.5" and true changed what was re-checked).
    for bad in (None, {}, {"gate": "x"}, {"gate": [0.1, 4, 2, 0.5]}, {"gate": {**good, "threshold": 2.0}},
                {"gate": {**good, "views": 1}}, {"gate": {**good, "threshold": "0.5"}},
                {"gate": {**good, "threshold": True}}, {"gate": {**good, "threshold": float("nan")}},
                {"gate": {**good, "views": float("inf")}}, {"gate": {**good, "views": 4.0}},
                {"gate": {k: v for k, v in good.items() if k != "threshold"}}):
        assert Gate.from_meta(bad) is None, bad

    class Fixed:  # a classifier that answers from a table by the input's first value
        def __init__(self, table):
            self.table, self.note = table, "fixed"

        def __call__(self, x):
            return self.table[x[:, 0, 0, 0].long()].clone()

    cascade = Int8Cascade(Fixed(int8), Fixed(fp32), gate)
    x = torch.arange(4, dtype=torch.float32).view(4, 1, 1, 1).expand(4, 3, 2, 2)
    out = cascade(x)
    again = cascade.last_rechecked()
    assert again.tolist() == (margins <= gate.threshold).tolist()
    assert torch.equal(out[again], fp32[again]) and torch.equal(out[~again], int8[~again])
    assert out.argmax(1).tolist() == fp32.argmax(1).tolist()
    # Per call: the rows of the last call (the run counts them from the stored rows, pipeline.mark_stored).
    cascade(x[:2])
    assert cascade.last_rechecked().tolist() == again[:2].tolist()


def test_each_precision_is_its_own_model_id_in_the_run(sample_run, shared_cache):
    run, _ = sample_run
    ids = [DEFAULT_MODEL] + [precision_model_id(DEFAULT_MODEL, p)
                             for p in (["bf16"] if HAS_BF16 else []) + ["int8", PLAIN_INT8]]
    assert set(run.read_predictions()["model"]) == set(ids)
    assert run.info.models == ids  # run.json lists them, fp32 under the plain id as before
    for model_id in ids:
        assert split_model_id(model_id)[0] == DEFAULT_MODEL
    # Resuming is per precision: a second int8 call finds everything stored and reuses the cached model.
    options = InferenceOptions(device="cpu", precision="int8", num_workers=0, cache_dir=str(shared_cache))
    again = predict_run(run, DEFAULT_MODEL, options)
    model = precision_model_id(DEFAULT_MODEL, "int8")
    assert again.models[model].predicted == 0 and again.models[model].skipped == 30


def test_model_ids_round_trip():
    assert precision_model_id("efficientnet_lite0", "fp32") == "efficientnet_lite0"
    assert precision_model_id("efficientnet_lite0", "int8") == "efficientnet_lite0--int8"
    assert precision_model_id("efficientnet_lite0--int8", "bf16") == "efficientnet_lite0--bf16"
    # On a GPU the default is autocast (plain id, as stored before); fp32 there is the one set apart.
    assert precision_model_id("resnet50.tv_in1k", "bf16", default="bf16") == "resnet50.tv_in1k"
    assert precision_model_id("resnet50.tv_in1k", "fp32", default="bf16") == "resnet50.tv_in1k--fp32"
    assert split_model_id("resnet50.tv_in1k--bf16") == ("resnet50.tv_in1k", "bf16")
    assert split_model_id("hf-hub/org/name-int8") == ("hf-hub/org/name-int8", None)  # a name, not a suffix
    assert split_model_id("resnet50.tv_in1k") == ("resnet50.tv_in1k", None)
    assert [e.id for e in result_entries(DEFAULT_MODEL, InferenceOptions(device="cpu", precision="int8"))] == [
        "efficientnet_lite0--int8"]
    # int8 alone is another model beside the cascade, never resumed as its rows.
    plain = InferenceOptions(device="cpu", precision="int8", int8_recheck="none")
    assert [e.id for e in result_entries(DEFAULT_MODEL, plain)] == ["efficientnet_lite0--int8-plain"]
    assert split_model_id("efficientnet_lite0--int8-plain") == ("efficientnet_lite0", PLAIN_INT8)
    with pytest.raises(OptionError, match=r"--int8-recheck 'sometimes': choose one of auto, none"):
        result_entries(DEFAULT_MODEL, InferenceOptions(device="cpu", precision="int8", int8_recheck="sometimes"))


def test_int8_recheck_without_int8_is_one_line(tmp_path, capsys):
    """Hostile campaign: --int8-recheck none with --precision fp32 was silently ignored."""
    (tmp_path / "photos" / "n02123045").mkdir(parents=True)
    with pytest.raises(SystemExit) as exited:
        main(["--images", str(tmp_path / "photos"), "--out", str(tmp_path / "x.csv"), "--precision", "fp32",
              "--int8-recheck", "none", "--no-progress"])
    assert exited.value.code == 2
    assert "--int8-recheck is for --precision int8" in capsys.readouterr().err
    assert "int8" in PRECISIONS


def test_bf16_is_refused_in_one_line_on_a_cpu_without_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(device_mod, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    with pytest.raises(OptionError, match=r"precision bf16 needs .*AVX-512 BF16.*use fp32 \(the default\) or int8"):
        resolve_precision("bf16", CPU)
    assert resolve_precision("int8", CPU) == "int8" and resolve_precision("auto", CPU) == "fp32"
    (tmp_path / "photos" / "n02123045").mkdir(parents=True)
    assert main(["--images", str(tmp_path / "photos"), "--out", str(tmp_path / "x.csv"), "--precision", "bf16",
                 "--device", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: precision bf16 needs") and "\n" not in err


def test_bf16_follows_the_cpu_flags(monkeypatch):
    monkeypatch.setattr(device_mod, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
    assert cpu_bf16_instructions() == ["AMX-BF16", "AVX-512 BF16"]
    assert resolve_precision("bf16", CPU) == "bf16"
    assert device_mod.autocast_dtype("bf16", CPU) == torch.bfloat16
    assert device_mod.autocast_dtype("int8", CPU) is None


@pytest.mark.parametrize("flags, dot, reduced", [
    ({"avx2", "avx512f", "avx512_vnni"}, ["AVX-512 VNNI"], False),
    ({"avx2", "avx_vnni"}, ["AVX-VNNI"], False),
    ({"asimd", "asimddp"}, ["Arm dot product"], False),
    ({"avx", "avx2", "fma"}, [], True),  # the AVX2-only EPYC of 2026-12-02: 7-bit weights
    (set(), [], True),  # flags unreadable: the safe side
])
def test_int8_weights_are_7_bit_where_the_cpu_has_no_8_bit_dot_product(monkeypatch, flags, dot, reduced):
    import classify.engine.quantize as quantize
    from classify.engine.onnx_backend import ExportKey

    monkeypatch.setattr(device_mod, "cpu_flags", lambda: frozenset(flags))
    assert cpu_int8_dot_instructions() == dot and quantize.reduce_range() is reduced
    key = quantize.QuantKey.for_export(ExportKey("m", "0" * 64, 224, "1", "2", "3"))
    assert key.reduce_range is reduced  # a cached int8 model of the other kind is not reused
    monkeypatch.setattr(device_mod, "cpu_flags", lambda: frozenset({"avx512_vnni"} if reduced else ()))
    assert quantize.QuantKey.for_export(ExportKey("m", "0" * 64, 224, "1", "2", "3")).digest != key.digest


def test_precisions_a_device_or_model_cannot_take_are_one_line_errors():
    with pytest.raises(OptionError, match="fp16 needs a GPU"):
        resolve_precision("fp16", CPU)
    with pytest.raises(OptionError, match="int8 runs on the CPU"):
        resolve_precision("int8", torch.device("cuda"))
    with pytest.raises(OptionError, match="int8 runs on ONNX Runtime"):
        check_backend("torch", CPU, "int8")
    with pytest.raises(OptionError, match="bf16 runs on PyTorch"):
        check_backend("onnxruntime", CPU, "bf16")
    with pytest.raises(OptionError, match=r"int8 is for CNNs, not vit_base_patch16_224.* \(transformer\)"):
        run_inference([], ["vit"], lambda frame: None, options=InferenceOptions(device="cpu", precision="int8"))


def _view_hashes(images):
    return {hashlib.sha256(np.asarray(image.convert("RGB")).tobytes()).hexdigest() for image in images}


def test_calibration_set_is_packaged_fixed_and_disjoint_from_the_evaluated_images():
    from crawl.sample_photos import SAMPLE_PHOTOS, VIEWS, photo_path
    from classify.engine.quantize import (CALIBRATION_PHOTOS, calibration_digest, calibration_files, calibration_images,
                                          gate_images)
    from core.imageio import load_rgb

    sys_path = __import__("sys").path
    sys_path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "benchmarks"))
    try:
        from bench_inference import PRECISION_PHOTOS
    finally:
        sys_path.pop(0)
    calibration = {hashlib.sha256(p.read_bytes()).hexdigest() for p in calibration_files()}
    sample = {hashlib.sha256(photo_path(p).read_bytes()).hexdigest() for p in SAMPLE_PHOTOS}
    site = __import__("pathlib").Path(torch.__file__).resolve().parent.parent
    bench = {hashlib.sha256((site / rel).read_bytes()).hexdigest() for rel in PRECISION_PHOTOS}
    assert len(calibration) == len(CALIBRATION_PHOTOS)
    assert not calibration & sample and not calibration & bench
    # The pixels too: no calibration view is one of the sample run's views.
    sample_views = _view_hashes(view(load_rgb(photo_path(p))) for p in SAMPLE_PHOTOS for _, view in VIEWS)
    assert not _view_hashes(image for _, image in calibration_images()) & sample_views
    assert not _view_hashes(image for _, image in gate_images()) & sample_views  # the int8 cascade's gate set
    assert calibration_digest() == calibration_digest()  # fixed: part of the quantized model's cache key


def test_quantized_model_is_cached_and_keyed_by_the_calibration(shared_cache, sample_run, monkeypatch):
    import classify.engine.quantize as quantize
    from classify.engine.onnx_backend import ExportKey, OnnxCache
    from classify.models.lookup import get_model
    from classify.models.weights import weights_status

    entry = get_model(DEFAULT_MODEL)
    key = ExportKey.for_model(entry.id, weights_status(entry).path, entry.input_config().size)
    cache = OnnxCache(shared_cache)
    first = quantize.int8_classifier(key, cache, entry.input_config(), 1, lambda: pytest.fail("no reload"))
    assert first.note == "cached int8 model" and first.path.parent == shared_cache / quantize.CACHE_SUBDIR
    assert not list(first.path.parent.glob("*.tmp"))
    other = quantize.QuantKey(key.digest, key.model_id, "x", "another calibration set")
    assert other.digest != quantize.QuantKey.for_export(key).digest


def test_rows_int8_alone_stored_before_the_cascade_are_not_resumed_as_its_rows(tmp_path):
    """MODEL--int8 rows without int8_rechecked were made by int8 alone (before the cascade): resuming
    --precision int8 there would mix two models under one id, so it is refused in one line."""
    import pandas as pd

    from classify.targets import StoredModelError, check_stored_models
    from core.parts import PredictionParts

    parts = PredictionParts(tmp_path / "parts")
    model = precision_model_id(DEFAULT_MODEL, "int8")
    parts.append(pd.DataFrame({"model": model, "image": ["a.jpg"], "true_wnid": "n02123045", "pred_wnid": "n02123045",
                               "label_space": "imagenet-1k", "status": "ok", "family": "CNN"}))
    entries = result_entries(DEFAULT_MODEL, InferenceOptions(device="cpu", precision="int8"))
    with pytest.raises(StoredModelError, match=r"holds efficientnet_lite0--int8 predictions made by int8 alone.*"
                                               r"MODEL--int8-plain.*another run"):
        check_stored_models(parts, entries, None, "Run r", lambda m: "Classify into another run.")
    parts.append(pd.DataFrame({"model": model, "image": ["b.jpg"], "true_wnid": "n02123045", "pred_wnid": "n02123045",
                               "label_space": "imagenet-1k", "status": "ok", "family": "CNN", "int8_rechecked": True}))
    fresh = PredictionParts(tmp_path / "fresh")
    fresh.append(pd.DataFrame({"model": model, "image": ["b.jpg"], "true_wnid": "n02123045", "pred_wnid": "n02123045",
                               "label_space": "imagenet-1k", "status": "ok", "family": "CNN", "int8_rechecked": False}))
    check_stored_models(fresh, entries, None, "Run r", lambda m: "")  # the cascade's own rows resume
