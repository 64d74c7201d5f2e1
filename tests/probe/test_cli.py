"""python -m probe on a run with stored features: the tables, re-runs, excluded images, the
language-initialised variant from a recorded text classifier, and one-line errors."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from core.features import feature_dir
from core.runstore import read_table, write_json_atomic
from probe.cli import main
from tests.conftest import ROOT
from tests.probe.synthetic import blobs, make_run

RESULT_COLUMNS = ["model", "variant", "shots", "seed", "n_train", "n_test", "top1", "top5"]


@pytest.fixture
def run():
    x, labels = blobs([12, 12, 12, 5, 12, 12], n_classes=6, dim=24, spread=1.0, seed=11)
    run, files = make_run(x, labels, excluded={0, 1, 2}, parts=3)
    return run


def _tables(run):
    folder = run.path / "probes"
    return (read_table(folder / "results.parquet"), read_table(folder / "per_class.parquet"),
            (folder / "results.parquet").read_bytes(), (folder / "per_class.parquet").read_bytes())


def test_the_sweep_writes_both_tables_and_a_rerun_is_identical(run, capsys):
    args = ["--run", run.run_id, "--models", "synthnet", "--shots", "1,2,4,8", "--seeds", "22,37"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "synthnet\tlinear\tN=8\tseeds=2" in out and "wrote" in out
    results, per_class, raw_r, raw_p = _tables(run)
    assert set(RESULT_COLUMNS) <= set(results.columns)
    assert len(results) == 4 * 2 and set(results["variant"]) == {"linear"}
    # excluded images are left out: 65 rows, 3 excluded -> 62 usable (the first class keeps 9)
    assert (results["n_train"] + results["n_test"] == 62).all()
    eight = per_class[(per_class["shots"] == 8)]
    assert sorted(set(eight["n_train"])) == [4, 8]  # the 5-image class is capped at 4, stated
    assert (results[results["shots"] == 8]["capped_classes"] == 1).all()
    assert main(args) == 0
    again = _tables(run)
    assert raw_r == again[2] and raw_p == again[3]  # byte for byte


def test_a_second_model_is_added_beside_the_first(run, capsys):
    x, labels = blobs([12, 12, 12, 5, 12, 12], n_classes=6, dim=8, spread=1.0, seed=12)
    from core.features import write_feature_part

    index = pd.DataFrame({"image": [f"{w}/img-{i:04d}.png" for i, w in enumerate(labels)], "true_wnid": labels})
    write_feature_part(run, "other/net", index, x)
    assert main(["--run", run.run_id, "--models", "synthnet", "--shots", "2", "--seeds", "22"]) == 0
    assert main(["--run", run.run_id, "--models", "other/net", "--shots", "2", "--seeds", "22"]) == 0
    results = _tables(run)[0]
    assert sorted(set(results["model"])) == ["other/net", "synthnet"]


def test_language_init_reads_the_recorded_text_classifier(run, capsys):
    """A zero-shot model whose features' meta.json records its text classifier gets the
    language-initialised curve, starting at N = 0 with the zero-shot result."""
    index_x, labels = blobs([12, 12, 12, 5, 12, 12], n_classes=6, dim=24, spread=1.0, seed=11)
    classes = sorted(set(labels))
    usable = np.arange(len(labels)) >= 3
    centres = np.stack([index_x[usable & (labels == c)].mean(axis=0) for c in classes])
    text = (centres / np.linalg.norm(centres, axis=1, keepdims=True)).T.astype(np.float32)  # [dim, classes]
    wnids = ["n01440764", *classes]  # a wider label set: columns are picked by wnid
    text = np.concatenate([np.ones((24, 1), np.float32) / np.sqrt(24), text], axis=1)
    folder = feature_dir(run, "synthnet")
    np.save(folder / "text.npy", text)
    meta = json.loads((folder / "meta.json").read_text())
    write_json_atomic(folder / "meta.json", {**meta, "kind": "image-embedding",
                                             "text_classifier": {"path": "text.npy", "wnids": wnids, "logit_scale": 100.0}})
    assert main(["--run", run.run_id, "--models", "synthnet", "--shots", "1,4", "--seeds", "22"]) == 0
    results = _tables(run)[0]
    lang = results[results["variant"] == "language-init"]
    assert lang["shots"].tolist() == [0, 1, 4]
    zero = lang.iloc[0]
    scores = (index_x[usable] / np.linalg.norm(index_x[usable], axis=1, keepdims=True)) @ text[:, 1:]
    expected = np.mean(np.asarray(classes)[scores.argmax(axis=1)] == labels[usable])
    assert zero["top1"] == pytest.approx(expected) and zero["n_test"] == 62 and pd.isna(zero["seed"])


def test_a_zero_shot_model_without_a_recorded_text_classifier_says_so(run, capsys):
    folder = feature_dir(run, "synthnet")
    meta = json.loads((folder / "meta.json").read_text())
    write_json_atomic(folder / "meta.json", {**meta, "kind": "image-embedding"})
    assert main(["--run", run.run_id, "--models", "synthnet", "--shots", "2", "--seeds", "22"]) == 0
    assert "language-init not run" in capsys.readouterr().out
    assert set(_tables(run)[0]["variant"]) == {"linear"}


@pytest.mark.parametrize("args, message", [
    (["--models", "nonet"], "no stored features of nonet"),
    (["--models", "synthnet", "--shots", "0,2"], "--shots: 0 is below 1"),
    (["--models", "synthnet", "--shots", "two"], "--shots: 'two' is not a whole number"),
    (["--models", " , "], "--models needs at least one model id"),
])
def test_bad_input_is_one_line_and_exit_2(run, capsys, args, message):
    assert main(["--run", run.run_id, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (run.path / "probes" / "results.parquet").exists()


def test_unknown_run_and_the_module_entry_point(run):
    proc = subprocess.run([sys.executable, "-m", "probe", "--run", "nope", "--models", "x"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: No run 'nope'")


def test_a_class_with_one_usable_image_is_left_out_and_named(capsys):
    x, labels = blobs([8, 8, 1], n_classes=3, dim=8, seed=13)
    run, files = make_run(x, labels, run_id="tiny")
    assert main(["--run", "tiny", "--models", "synthnet", "--shots", "2", "--seeds", "22"]) == 0
    out = capsys.readouterr().out
    assert f"note: synthnet: left out, fewer than 2 usable images with features: {labels[-1]} (1)" in out
    results, per_class = _tables(run)[:2]
    assert results["n_classes"].tolist() == [2] and labels[-1] not in set(per_class["wnid"])
