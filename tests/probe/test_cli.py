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
from tests.probe.synthetic import blobs, make_run, twin_phashes

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


# ---------------------------------------------------------------- issue 22: hardening
@pytest.mark.parametrize("label_issues", [False, True])
def test_non_finite_features_are_refused_naming_the_images(capsys, label_issues):
    """NaN in half the rows made every class fall to chance (the clean ones too), exit 0: now one
    line with the count and the first images, and nothing is written."""
    x, labels = blobs(10, n_classes=3, dim=8, seed=21)
    x[::2, 3] = np.nan
    x[5, 0] = np.inf
    run, files = make_run(x, labels, run_id="nans")
    args = ["--run", "nans", "--models", "synthnet", "--shots", "2", "--seeds", "22"]
    assert main(args + (["--label-issues"] if label_issues else [])) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert "16 images have non-finite features (NaN or Inf)" in err
    assert files[0] in err and files[2] in err and files[4] in err  # the first few, in name order
    assert "--features" in err  # the fix
    assert not (run.path / "probes").exists()


@pytest.mark.parametrize("seeds", ["99999999999999999999", "4294967296", "22,-1"])
def test_seeds_numpy_cannot_take_are_one_line(run, capsys, seeds):
    """--seeds 99999999999999999999 was an OverflowError traceback."""
    assert main(["--run", run.run_id, "--models", "synthnet", "--shots", "2", "--seeds", seeds]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: --seeds: ")
    assert "0 to 4294967295" in err


def test_the_largest_seed_numpy_takes_is_accepted(run, capsys):
    assert main(["--run", run.run_id, "--models", "synthnet", "--shots", "2", "--seeds", "4294967295"]) == 0
    assert _tables(run)[0]["seed"].tolist() == [4294967295]


def test_n_is_capped_at_what_the_classes_hold_and_said(capsys):
    """Each class holds 7 images: N = 8…128 were plotted, each one the 6-shot probe again."""
    x, labels = blobs(7, n_classes=3, dim=8, seed=23)
    run, files = make_run(x, labels, run_id="seven")
    assert main(["--run", "seven", "--models", "synthnet", "--seeds", "22,37"]) == 0
    out = capsys.readouterr().out
    assert "note: synthnet: N capped at 6 (asked 8, 16, 32, 64, 128): no class holds more than 7 distinct " in out
    results, per_class = _tables(run)[:2]
    assert sorted(set(results["shots"])) == [1, 2, 4, 6]
    assert (results["shots_limit"] == 6).all() and (results["capped_classes"] == 0).all()
    assert len(results) == 4 * 2 and (per_class[per_class["shots"] == 6]["n_train"] == 6).all()
    from probe.artefact import curve_notes

    cap, duplicates = curve_notes(results)
    assert cap == ("N stops at 6 (synthnet): no class holds more than 7 distinct images and each keeps one "
                   "for testing, so a larger N would repeat the N = 6 probe.") and duplicates == ""
    # asked within what the classes hold: nothing capped, nothing said
    assert main(["--run", "seven", "--models", "synthnet", "--shots", "1,2", "--seeds", "22"]) == 0
    assert "N capped" not in capsys.readouterr().out
    assert curve_notes(_tables(run)[0]) == ("", "")


def test_near_duplicates_never_straddle_a_split_and_are_warned(capsys):
    """Near duplicates (pHash distance <= 8) on both sides of a split made 100 % at N = 1: each
    class here is 3 pairs of twins (identical features, no class structure otherwise), so a twin
    of a training shot in the test set is a free hit. Now the twins of the shots are tested
    nowhere and the command warns."""
    rng = np.random.default_rng(5)
    group = np.repeat(np.arange(12), 2)  # 12 pairs, 3 per class
    labels = np.repeat(np.array(["n02123045", "n02123159", "n02123394", "n02123597"]), 6)
    x = rng.normal(size=(12, 16)).astype(np.float32)[group]
    run, files = make_run(x, labels, run_id="twins", phashes=twin_phashes(group))
    assert main(["--run", "twins", "--models", "synthnet", "--shots", "1,2", "--seeds", "22,37"]) == 0
    out = capsys.readouterr().out
    assert ("warning: synthnet: 12 groups of near-duplicate images (pHash distance <= 8) hold 24 of the 24 "
            "probed images; each group stays on one side of every split") in out
    results, per_class = _tables(run)[:2]
    one = results[results["shots"] == 1]
    assert (one["n_train"] == 4).all() and (one["n_test"] == 24 - 4 - 4).all()  # the shots' twins: not tested
    assert (results["near_dup_groups"] == 12).all()
    # three distinct images per class: N stops at 2
    assert sorted(set(results["shots"])) == [1, 2] and (results["shots_limit"] == 2).all()
    assert (per_class[per_class["shots"] == 2]["n_test"] == 2).all()  # 1 pair left per class
    from probe.artefact import curve_notes

    assert "12 groups of near-duplicate images" in curve_notes(results)[1]


def _run_with_text_classifier():
    x, labels = blobs(6, n_classes=3, dim=8, seed=31)
    run, files = make_run(x, labels, run_id="textc", kind="image-embedding")
    return run, feature_dir(run, "synthnet"), sorted(set(labels))


def _record(folder, wnids, path_value) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    write_json_atomic(folder / "meta.json", {**meta, "text_classifier": {
        "path": path_value, "wnids": wnids, "logit_scale": 100.0}})


def _finishes(fn, timeout: float = 10.0):
    """Run ``fn`` in a thread; the result, or AssertionError when it is still blocked (a FIFO read)."""
    import threading

    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked (reading a FIFO?)"
    return box.get("value")


@pytest.mark.parametrize("where", ["absolute", "relative", "symlink", "fifo", "folder"])
def test_a_text_classifier_path_outside_the_features_or_not_a_file_is_refused(tmp_path, capsys, where):
    """meta.json's text_classifier.path was loaded wherever it pointed (read without pickle, but
    anywhere on the machine; a FIFO blocked the probe for ever)."""
    import os

    outside = tmp_path / "elsewhere.npy"
    np.save(outside, np.ones((8, 3), np.float32))
    run, folder, wnids = _run_with_text_classifier()
    value = {"absolute": str(outside), "relative": os.path.relpath(outside, folder), "symlink": "link.npy",
             "fifo": "fifo.npy", "folder": "."}[where]
    _record(folder, wnids, value)
    if where == "symlink":
        (folder / "link.npy").symlink_to(outside)
    if where == "fifo":
        os.mkfifo(folder / "fifo.npy")
    try:
        code = _finishes(lambda: main(["--run", "textc", "--models", "synthnet", "--shots", "2", "--seeds", "22"]))
    finally:
        if where == "fifo":  # a reader still blocked on the FIFO (the defect) gets end-of-file
            try:
                os.close(os.open(folder / "fifo.npy", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert str(folder / "meta.json") in err
    assert ("outside" in err) if where in ("absolute", "relative", "symlink") else ("not a regular file" in err)
    assert not (run.path / "probes").exists()


def test_a_text_classifier_inside_the_features_folder_is_still_read(capsys):
    run, folder, wnids = _run_with_text_classifier()
    _record(folder, wnids, "text.npy")
    np.save(folder / "text.npy", np.ones((8, 3), np.float32))
    assert main(["--run", "textc", "--models", "synthnet", "--shots", "2", "--seeds", "22"]) == 0
    assert "language-init" in set(_tables(run)[0]["variant"])


def test_curves_drawn_on_top_of_each_other_are_named():
    """A leftover of a UI review: two models with the same probes drew one line on the Probes chart. The page now
    says which curves coincide (the same top-1 at every N and seed), from the stored results."""
    from probe.artefact import coinciding_curves

    def rows(model, variant, top1s, seeds=(22, 37)):
        return [{"model": model, "variant": variant, "shots": n, "seed": seed, "top1": t}
                for (n, t) in zip((1, 2, 4), top1s) for seed in seeds]

    same = [0.5, 0.625, 0.75]
    results = pd.DataFrame(rows("a", "linear", same) + rows("b", "linear", same) + rows("c", "linear", [0.5, 0.6, 0.7])
                           + rows("a", "language-init", same) + rows("d", "linear", same, seeds=(22,)))
    assert coinciding_curves(results) == ("a · linear, b · linear and a · language-init: the same top-1 at every N "
                                          "and seed, drawn on top of each other (the hover lists each).")
    # one seed's top-1 apart: no longer the same curve
    other = results.copy()
    other.loc[(other["model"] == "b") & (other["seed"] == 37) & (other["shots"] == 4), "top1"] = 0.8
    other = other[other["variant"] == "linear"]
    assert coinciding_curves(other) == ""
    assert coinciding_curves(results.iloc[0:0]) == "" and coinciding_curves(None) == ""
