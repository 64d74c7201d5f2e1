"""Batched inference with small randomly initialised timm models (test doubles, never results):
batching, the transformer path, the 21k/22k label spaces, corrupt files, resuming, workers."""
import hashlib
import io
from pathlib import Path

import pandas as pd
import pytest
import torch
from PIL import Image

import classify.engine.device as device
import classify.engine.pipeline as pipeline
from classify.engine.device import autocast_dtype, default_num_workers, full_fp32, select_device
from classify.engine.types import ImageTask, InferenceOptions
from classify.engine.pipeline import plan_passes
from classify.engine.dispatch import run_inference
from classify.models.registry import class_wnids
from classify.models.lookup import get_model
from classify.targets import FolderError, check_output_path, predict_folder, predict_run, scan_folder
from classify.models.weights import WeightsError
from core.labels import get_label_space
from core.runstore import RunInfo, RunStore
from tests.classify.doubles import make_test_double

SITE = Path(torch.__file__).resolve().parent.parent
SOURCES = {"n02123045": SITE / "skimage/data/chelsea.png", "n07920052": SITE / "skimage/data/coffee.png"}

CNN = make_test_double("test_efficientnet", "imagenet-1k")
VIT_21K = make_test_double("test_vit", "imagenet-21k", family="transformer")
RESNET_22K = make_test_double("test_resnet", "imagenet-22k")
DOUBLES = [CNN, VIT_21K, RESNET_22K]


@pytest.fixture(scope="module")
def seeded_models():
    """One fixed random-init module per test double, so separate calls see the same weights."""
    from classify.models.weights import load_model

    torch.manual_seed(0)
    return {entry.id: load_model(entry) for entry in DOUBLES}


@pytest.fixture()
def fixed_weights(monkeypatch, seeded_models):
    monkeypatch.setattr(pipeline, "load_model", lambda entry, *a, **k: seeded_models[entry.id])
    return seeded_models


def _views(path: Path, n: int) -> list[bytes]:
    """n different small PNG/JPEG files from one photograph (crops and sizes vary)."""
    image = Image.open(path).convert("RGB")
    out = []
    for i in range(n):
        w, h = image.size
        box = (i * 7, i * 5, w - i * 11, h - i * 3)
        view = image.crop(box).resize((180 + 10 * i, 140 + 7 * i))
        buffer = io.BytesIO()
        view.save(buffer, format="JPEG" if i % 2 else "PNG")
        out.append(buffer.getvalue())
    return out


def _make_run(tmp_path, per_class=4):
    store = RunStore(tmp_path / "store")
    run = store.create_run(RunInfo(run_id="t", title="test", wnids=sorted(SOURCES)))
    rows = []

    def add(wnid, data, ext):
        name = f"{wnid}/{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        (run.images_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run.images_dir / name).write_bytes(data)
        rows.append({"wnid": wnid, "file": name, "status": "accepted", "excluded": False})

    for wnid, path in SOURCES.items():
        for data in _views(path, per_class):
            add(wnid, data, "jpg" if data[:2] == b"\xff\xd8" else "png")
    add("n02123045", b"this is not an image", "jpg")  # corrupt
    truncated = _views(SOURCES["n07920052"], 2)[1]
    add("n07920052", truncated[: len(truncated) // 2], "jpg")  # a half-downloaded JPEG
    rows.append({"wnid": "n02123045", "file": "n02123045/rejected.png", "status": "rejected", "excluded": False})
    run.write_manifest(pd.DataFrame(rows))
    return run


def _naive_top5(model, entry, path):
    """The reference: timm's own eval transform, one image per forward pass."""
    from timm.data import create_transform

    from core.imageio import load_rgb

    cfg = entry.input_config()
    transform = create_transform(input_size=(3, cfg.size, cfg.size), interpolation=cfg.interpolation,
                                 mean=cfg.mean, std=cfg.std, crop_pct=cfg.crop_pct)
    with torch.no_grad():
        probs = model(transform(load_rgb(path))[None]).softmax(1)[0]
    top = probs.topk(5)
    return [class_wnids(entry)[i] for i in top.indices.tolist()], top.values.tolist()


def test_batched_multi_model_run_matches_per_image_reference(tmp_path, fixed_weights):
    run = _make_run(tmp_path)
    # The reference below runs fp32 on the CPU with timm's (Pillow) eval transform: so does this run,
    # for top-5 equality (on a GPU the default would be bf16, and near-ties could swap).
    options = InferenceOptions(batch_size=3, num_workers=0, compact=False, device="cpu", resampler="pil")
    result = predict_run(run, DOUBLES, options)
    table = run.read_predictions()
    usable = run.usable_images()
    assert len(table) == len(DOUBLES) * len(usable) == 3 * 10
    for entry in DOUBLES:
        rows = table[table["model"] == entry.id]
        assert (rows["label_space"] == entry.label_space).all()
        assert result.models[entry.id].predicted == 8 and result.models[entry.id].failed == 2
        # one part file per batch of 3 (10 images -> 4 batches): a kill loses at most one batch
        assert len(list(run._model_dir(entry.id).glob("part-*.parquet"))) == 4
        space = get_label_space(entry.label_space)
        ok = rows[rows["status"] == "ok"]
        for row in ok.itertuples():
            wnids, probs = _naive_top5(fixed_weights[entry.id], entry, run.image_path(row.image))
            assert [row.pred_wnid, row.pred_wnid_2, row.pred_wnid_3, row.pred_wnid_4, row.pred_wnid_5] == wnids
            assert row.prob_1 == pytest.approx(probs[0], abs=1e-4) and all(w in space for w in wnids)
            assert row.true_wnid == usable.set_index("file").loc[row.image, "wnid"]
    failed = table[table["status"] == "failed"]
    assert set(failed["reason"]) >= {"not an image (unidentified format)"}
    assert any(r.startswith("cannot decode") for r in failed["reason"])
    assert failed["pred_wnid"].isna().all()
    beyond_1k = set(table[table["model"] == VIT_21K.id]["pred_wnid"].dropna()) - set(get_label_space("imagenet-1k").wnids)
    assert beyond_1k, "a 21k head predicts classes outside ImageNet-1k and they are stored as wnids"
    assert run.info.models == []  # test doubles never become a run's models


def test_models_sharing_a_geometry_share_one_crop(fixed_weights):
    assert CNN.input_config().geometry == VIT_21K.input_config().geometry
    assert CNN.input_config().mean != VIT_21K.input_config().mean
    assert RESNET_22K.input_config().geometry != CNN.input_config().geometry
    passes = plan_passes([CNN, RESNET_22K, VIT_21K], max_params=10**9)
    assert [[e.id for e in p] for p in passes] == [[CNN.id, VIT_21K.id, RESNET_22K.id]]
    small = plan_passes([CNN, RESNET_22K, VIT_21K], max_params=VIT_21K.num_params)
    assert all(len(p) == 1 for p in small) and len(small) == 3
    real = plan_passes([get_model(m) for m in ("vgg16", "efficientnet_b7", "resnet50", "vit")], 300_000_000)
    assert [e.id for e in real[0]][:2] == ["vgg16.tv_in1k", "resnet50.tv_in1k"]


class _Killed(RuntimeError):
    pass


def test_interrupted_run_resumes_without_recomputing(tmp_path, fixed_weights):
    run = _make_run(tmp_path)
    options = InferenceOptions(batch_size=4, num_workers=0, compact=False)

    def kill_after_first_batch(event):
        if event.done > 0:
            raise _Killed("simulated kill")

    with pytest.raises(_Killed):
        predict_run(run, [CNN, VIT_21K], options, progress=kill_after_first_batch)
    first = run.read_predictions()
    assert len(first) == 2 * 4  # exactly the first batch, for both models
    events = []
    result = predict_run(run, [CNN, VIT_21K], options, progress=events.append)
    for entry in (CNN, VIT_21K):
        counts = result.models[entry.id]
        assert counts.skipped == 4 and counts.predicted + counts.failed == 6
    assert events[-1].done == events[-1].total == 6
    parts = pd.concat([pd.read_parquet(p) for p in run.predictions_dir.rglob("part-*.parquet")])
    assert parts.groupby(["model", "image"]).size().max() == 1  # nothing was computed twice
    again = predict_run(run, [CNN, VIT_21K], options)  # only the 2 unreadable images are retried
    assert all(m.predicted == 0 and m.failed == 2 and m.skipped == 8 for m in again.models.values())


def test_excluded_images_are_not_classified(tmp_path, fixed_weights):
    run = _make_run(tmp_path, per_class=1)
    excluded = run.usable_images()["file"].iloc[0]
    run.set_excluded([excluded], reason="blurry")
    predict_run(run, [CNN], InferenceOptions(num_workers=0))
    table = run.read_predictions()
    assert excluded not in set(table["image"]) and len(table) == 3
    assert len(list(run._model_dir(CNN.id).glob("part-*.parquet"))) == 1  # compacted after the run


def test_worker_processes_give_the_same_predictions(tmp_path, fixed_weights):
    folder = tmp_path / "images"
    for wnid, path in SOURCES.items():
        (folder / wnid).mkdir(parents=True)
        for i, data in enumerate(_views(path, 3)):
            (folder / wnid / f"view{i}.png").write_bytes(data)
    (folder / "n02123045" / "broken.jpg").write_bytes(b"\x00" * 50)
    (folder / "n02123045" / "notes.txt").write_text("not an image, skipped")
    serial, _ = predict_folder(folder, [CNN, RESNET_22K], options=InferenceOptions(batch_size=4, num_workers=0))
    parallel, result = predict_folder(folder, [CNN, RESNET_22K], options=InferenceOptions(batch_size=4, num_workers=2))
    assert len(parallel) == 2 * 7 and result.images == 7
    pd.testing.assert_frame_equal(serial.drop(columns="prob_1"), parallel.drop(columns="prob_1"))
    assert (serial["prob_1"] - parallel["prob_1"]).abs().max() < 1e-5
    assert set(parallel.loc[parallel["status"] == "failed", "image"]) == {"n02123045/broken.jpg"}


def test_a_model_whose_head_does_not_fit_its_label_space_is_refused(monkeypatch, tmp_path):
    import timm

    monkeypatch.setattr(pipeline, "load_model",
                        lambda entry, *a, **k: timm.create_model("test_efficientnet", num_classes=10).eval())
    tasks = [ImageTask("a.png", str(SOURCES["n02123045"]), "n02123045")]
    with pytest.raises(WeightsError, match="outputs \\(10,\\) scores"):
        run_inference(tasks, [CNN], sink=lambda df: None, options=InferenceOptions(num_workers=0))


def test_folder_layout_errors(tmp_path):
    with pytest.raises(FolderError, match="does not exist"):
        scan_folder(tmp_path / "nope")
    (tmp_path / "a").mkdir()
    with pytest.raises(FolderError, match="no class sub-folders"):
        scan_folder(tmp_path / "a")
    (tmp_path / "a" / "cats").mkdir()
    (tmp_path / "a" / "n02123045").mkdir()
    with pytest.raises(FolderError, match="not: cats"):
        scan_folder(tmp_path / "a")
    (tmp_path / "a" / "cats").rmdir()
    with pytest.raises(FolderError, match="No images"):
        scan_folder(tmp_path / "a")
    with pytest.raises(FolderError, match=".csv or .parquet"):
        check_output_path(tmp_path / "out.json")


def test_device_and_precision_choices():
    if not torch.cuda.is_available():
        assert select_device("auto").type in ("cpu", "mps")
        with pytest.raises(ValueError, match="no CUDA GPU"):
            select_device("cuda")
    cpu = torch.device("cpu")
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("fp32", cpu) is None
    with pytest.raises(ValueError, match="needs a GPU"):  # bf16 runs on CPUs with native bf16; fp16 never
        autocast_dtype("fp16", cpu)
    assert autocast_dtype("fp16", torch.device("cuda")) == torch.float16
    with pytest.raises(ValueError, match="choose one of"):
        autocast_dtype("int4", cpu)


def test_fp32_on_cuda_turns_tf32_off_and_restores_the_flags():
    """The flags are process-wide and need no GPU to read, so this runs everywhere."""
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    try:
        with full_fp32(torch.device("cuda")):
            assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
        with full_fp32(torch.device("cpu")):  # nothing to change on the CPU
            assert torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def test_decode_workers_per_device(monkeypatch):
    monkeypatch.setattr(device, "available_cores", lambda: 16)
    assert default_num_workers(torch.device("cpu")) == 4  # the cores are shared with the forward pass
    assert default_num_workers(torch.device("cuda")) == 16  # decoding is the bound with a GPU
    monkeypatch.setattr(device, "available_cores", lambda: 2)
    assert default_num_workers(torch.device("cpu")) == 1 and default_num_workers(torch.device("cuda")) == 2


def test_jpeg_draft_decodes_big_jpegs_smaller_and_keeps_the_guards(tmp_path):
    from classify.engine.preprocess import load_rgb_draft
    from core.imageio import ImageLoadError, load_rgb

    retina = SITE / "skimage/data/retina.jpg"  # 1411 x 1411
    assert load_rgb_draft(retina, 256).size == (353, 353)  # 1/4: the smallest scale that keeps 256
    assert load_rgb_draft(retina, 400).size == (706, 706)
    small = SITE / "sklearn/datasets/images/china.jpg"  # 640 x 427: no reduction keeps 256
    assert load_rgb_draft(small, 256).tobytes() == load_rgb(small).tobytes()
    png = SOURCES["n02123045"]
    assert load_rgb_draft(png, 256).tobytes() == load_rgb(png).tobytes()
    data = retina.read_bytes()
    (tmp_path / "half.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageLoadError, match="cannot decode"):
        load_rgb_draft(tmp_path / "half.jpg", 256)
    (tmp_path / "fake.jpg").write_bytes(b"\xff\xd8\xff not really")
    with pytest.raises(ImageLoadError):
        load_rgb_draft(tmp_path / "fake.jpg", 256)
    with pytest.raises(ImageLoadError, match="file not found"):
        load_rgb_draft(tmp_path / "missing.jpg", 256)


def test_jpeg_draft_option_reaches_the_workers(tmp_path, fixed_weights):
    folder = tmp_path / "images" / "n02123045"
    folder.mkdir(parents=True)
    (folder / "retina.jpg").write_bytes((SITE / "skimage/data/retina.jpg").read_bytes())
    full, _ = predict_folder(tmp_path / "images", [CNN], options=InferenceOptions(num_workers=0))
    draft, _ = predict_folder(tmp_path / "images", [CNN], options=InferenceOptions(num_workers=0, jpeg_draft=True))
    assert (draft["status"] == "ok").all()
    assert draft["prob_1"].iloc[0] != full["prob_1"].iloc[0]  # other pixels: that is why it is opt-in
