"""Frozen features from classify (classify.features, stored by core.features): the real
EfficientNet-Lite0 on the packaged sample photos, resumable, and the right layer."""
import json

import numpy as np
import pytest
import torch

from classify.features import FeatureError, FeatureTap, feature_options, feature_throughput
from classify.targets import extract_features
from classify.engine.types import InferenceOptions
from classify.models.registry import DEFAULT_MODEL, class_wnids
from classify.models.lookup import get_model
from classify.targets import predict_run
from classify.models.weights import load_model
from core.errors import OptionError
from core.features import featured_images, read_features, read_feature_meta
from core.runstore import RunInfo, RunStore

pytestmark = pytest.mark.xdist_group("features")  # its module fixtures built once (tests/conftest.py)

OPTIONS = InferenceOptions(device="cpu", num_workers=0, batch_size=8)


class Stop(Exception):
    pass


def _sample_run(store_root, run_id="features"):
    from crawl.sample_photos import write_sample_images

    run = RunStore(store_root).create_run(RunInfo(run_id=run_id, label_space="imagenet-1k"))
    write_sample_images(run)
    return run


@pytest.fixture(scope="module")
def featured_run(tmp_path_factory):
    """The sample run: a first --features run killed after its first stored batch (leaving a
    killed writer's debris too), then resumed."""
    run = _sample_run(tmp_path_factory.mktemp("features-store"))

    def stop_after_first_batch(event):
        if event.done > 0:
            raise Stop()

    with pytest.raises(Stop):
        extract_features(run, DEFAULT_MODEL, OPTIONS, stop_after_first_batch)
    folder = run.path / "features" / DEFAULT_MODEL
    after_kill = (featured_images(run, DEFAULT_MODEL), set(run.read_predictions()["image"]))
    # what a writer killed between its two renames, or mid-write, leaves behind
    (folder / "part-20991231235959000000-abcdef.npy").write_bytes(b"\x93NUMPY")
    (folder / ".part-20991231235959000000-abcdef.parquet.0123456789ab.tmp").write_bytes(b"PAR1")
    resumed = extract_features(run, DEFAULT_MODEL, OPTIONS)
    return run, after_kill, resumed


def test_real_lite0_features_have_the_documented_shape(featured_run):
    run, _, _ = featured_run
    usable = run.usable_images()
    index, array = read_features(run, DEFAULT_MODEL)
    assert array.shape == (len(usable), 1280) and array.dtype == np.float32 and len(usable) == 30
    assert list(index["image"]) == sorted(usable["file"])
    assert dict(zip(index["image"], index["true_wnid"])) == dict(zip(usable["file"], usable["wnid"]))
    meta = json.loads((run.path / "features" / DEFAULT_MODEL / "meta.json").read_text())
    assert meta["model"] == DEFAULT_MODEL and meta["dim"] == 1280 and meta["kind"] == "pre-logit"
    assert meta["normalised"] is False and meta["classify_version"]
    assert np.isfinite(array).all() and (array.std(axis=0) > 0).any()
    # compacted at the end: one part, no debris of the killed writer
    names = sorted(p.name for p in (run.path / "features" / DEFAULT_MODEL).iterdir())
    assert len(names) == 3 and names[0] == "meta.json" and names[1].endswith(".npy") and names[2].endswith(".parquet")


def test_the_linear_head_on_stored_features_gives_the_stored_top1(featured_run):
    """The stored vectors are the classifier's input: its weights applied to them reproduce the
    stored predictions' top-1 on every photo."""
    run, _, _ = featured_run
    index, array = read_features(run, DEFAULT_MODEL)
    head = load_model(get_model(DEFAULT_MODEL)).get_classifier()
    assert isinstance(head, torch.nn.Linear) and head.in_features == 1280
    with torch.no_grad():
        logits = torch.from_numpy(array) @ head.weight.T + head.bias
        probs = logits.softmax(dim=1)
    wnids = np.asarray(class_wnids(get_model(DEFAULT_MODEL)))
    preds = run.read_predictions([DEFAULT_MODEL]).set_index("image").loc[list(index["image"])]
    assert list(wnids[logits.argmax(dim=1).numpy()]) == list(preds["pred_wnid"])
    np.testing.assert_allclose(probs.max(dim=1).values.numpy(), preds["prob_1"].to_numpy(dtype=float), atol=1e-3)


def test_a_killed_run_resumes_and_a_finished_one_skips(featured_run):
    run, (featured_then, predicted_then), resumed = featured_run
    assert len(featured_then) == 8 and featured_then <= predicted_then  # the first batch: features, then predictions
    report = resumed.models[DEFAULT_MODEL]
    assert report.skipped == 8 and report.predicted == 22
    assert "torch" in resumed.backends[DEFAULT_MODEL]
    again = extract_features(run, DEFAULT_MODEL, OPTIONS).models[DEFAULT_MODEL]
    assert again.skipped == 30 and again.predicted == 0
    assert len(run.read_predictions([DEFAULT_MODEL])) == 30
    assert DEFAULT_MODEL in run.info.models


def test_features_for_a_run_that_already_has_predictions(tmp_path):
    """Predictions alone do not count as featured: the images run again, predictions keep one row each."""
    run = _sample_run(tmp_path, "predicted-first")
    predict_run(run, DEFAULT_MODEL, InferenceOptions(device="cpu", num_workers=0, backend="torch"))
    assert read_feature_meta(run, DEFAULT_MODEL) is None
    report = extract_features(run, DEFAULT_MODEL, OPTIONS).models[DEFAULT_MODEL]
    assert report.predicted == 30 and report.skipped == 0
    assert len(featured_images(run, DEFAULT_MODEL)) == 30 and len(run.read_predictions()) == 30


def test_onnx_only_choices_are_refused():
    assert feature_options(InferenceOptions()).backend == "torch" and feature_options().features
    with pytest.raises(OptionError, match="onnxruntime"):
        feature_options(InferenceOptions(backend="onnxruntime"))
    with pytest.raises(OptionError, match="int8"):
        feature_options(InferenceOptions(precision="int8"))


def test_tap_takes_the_last_linear_layers_input_and_checks_it():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(4, 5)).eval()
    tap = FeatureTap(net, "double")
    x = torch.randn(2, 3, 8, 8)
    with torch.inference_mode():
        logits = net(x)
        features = tap.take()
        expected = net[:3](x)
    assert tap.kind == "pre-logit" and features.shape == (2, 4) and features.dtype == np.float32
    np.testing.assert_allclose(features, expected.numpy(), rtol=1e-6)
    np.testing.assert_allclose(features @ net[3].weight.detach().numpy().T + net[3].bias.detach().numpy(),
                               logits.numpy(), rtol=1e-5, atol=1e-6)
    # a model whose output is not its last linear layer's output: refused, never wrong features
    odd = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3), torch.nn.Tanh()).eval()
    tap = FeatureTap(odd, "odd")
    with torch.inference_mode():
        odd(torch.randn(2, 3, 2, 2) * 10)
    with pytest.raises(FeatureError, match="not its last linear layer"):
        tap.take()


def test_tap_on_a_zero_shot_head_stores_the_unnormalised_image_embedding():
    from classify.zeroshot.classifier import ZeroShotHead

    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 6)).eval()
    head = ZeroShotHead(encoder, torch.nn.functional.normalize(torch.randn(6, 4), dim=0), 100.0).eval()
    tap = FeatureTap(head, "clip:double")
    x = torch.randn(3, 3, 2, 2)
    with torch.inference_mode():
        head(x)
        embedding = tap.take()
        expected = encoder(x)
    assert tap.kind == "image-embedding"
    np.testing.assert_allclose(embedding, expected.numpy(), rtol=1e-6)
    assert not np.allclose(np.linalg.norm(embedding, axis=1), 1.0)


def test_throughput_helper(tmp_path):
    from crawl.sample_photos import SAMPLE_PHOTOS, photo_path

    images = [(str(photo_path(p)), p.wnid) for p in SAMPLE_PHOTOS][:4]
    result = feature_throughput(images, DEFAULT_MODEL, OPTIONS, out_dir=tmp_path)
    assert result["images"] == 4 and result["dim"] == 1280
    assert result["plain_images_per_s"] > 0 and result["features_images_per_s"] > 0 and result["ratio"] > 0
    assert list(tmp_path.iterdir()) == []  # its temporary folder is gone


def test_a_folder_classified_with_features_on_gives_its_rows_and_stores_no_features(tmp_path):
    """Features belong to a run (``features/`` beside its predictions); a plain folder classified with
    ``feature_options`` runs on PyTorch with the tap and keeps only the prediction rows, as before the
    engine was given its tap (issue 25: the tap was imported by the pipeline, now the target gives it)."""
    from classify.targets import predict_folder
    from tests.classify.doubles import write_photo_folder

    folder = write_photo_folder(tmp_path / "photos")
    table, report = predict_folder(folder, DEFAULT_MODEL, tmp_path / "out.parquet",
                                   feature_options(InferenceOptions(batch_size=4, num_workers=0)))
    assert len(table) and (table["status"] == "ok").all() and "features" not in table.columns
    assert report.backends[DEFAULT_MODEL].startswith("torch")
    assert not list(tmp_path.rglob("features"))
