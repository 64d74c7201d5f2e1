"""The curated view (explain.curation_view) and its stored tables (explain.artefact, view='curated'):
a log replayed equals hand-made predictions with the same relabels and exclusions, undoing every
entry gives the raw tables exactly, and the command line says which view it shows."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core.curation import record, undo
from explain.artefact import current_fingerprint, ensure_metrics, fingerprint_path, refresh_metrics, staleness
from explain.cli import main as explain_main
from explain.curation_view import CURATED, RAW, apply_curation, default_view, view_predictions
from explain.metrics import compute_metric_tables
from tests.explain.test_artefact import CATS, run  # noqa: F401  (fixture: 24 images, 2 models)

TIGER = "n02129604"


def _assert_tables_equal(got, expected):
    for name, df in expected.as_dict().items():
        pd.testing.assert_frame_equal(got.as_dict()[name], df, obj=name)


def _curate(run):
    files = sorted(run.read_manifest()["file"])
    record(run, "relabel", files[:2], CATS[1])  # two tabby images are tiger cats
    record(run, "relabel", files[2], TIGER)  # a class outside the run, any noun
    record(run, "relabel", files[7], CATS[1])  # already a tiger cat: no change
    record(run, "exclude", files[10:13])
    record(run, "tag", files[20], "not-a-photo")  # a tag changes no row
    return files


def _by_hand(run, files):
    rows = run.usable_predictions().copy()
    rows = rows[~rows["image"].isin(files[10:13])]
    rows.loc[rows["image"].isin(files[:2]), "true_wnid"] = CATS[1]
    rows.loc[rows["image"] == files[2], "true_wnid"] = TIGER
    return rows.reset_index(drop=True)


def test_the_curated_tables_equal_hand_made_predictions(run):
    files = _curate(run)
    assert default_view(run) == CURATED
    rows, change = view_predictions(run, CURATED)
    pd.testing.assert_frame_equal(rows, _by_hand(run, files))
    assert (change.relabelled_images, change.excluded_images) == (3, 3)
    assert change.describe() == "3 relabelled, 3 excluded"
    result = ensure_metrics(run, view=CURATED)
    assert result.recomputed and result.stored and result.change == change
    _assert_tables_equal(result.tables, compute_metric_tables(_by_hand(run, files)))
    assert fingerprint_path(run, CURATED).parent == run.metrics_dir / "curated"
    again = ensure_metrics(run, view=CURATED)
    assert not again.recomputed and again.change == change  # read back, with what changed
    _assert_tables_equal(again.tables, result.tables)
    raw = ensure_metrics(run, view=RAW)
    _assert_tables_equal(raw.tables, compute_metric_tables(run.usable_predictions()))


def test_undo_restores_the_raw_tables_exactly(run):
    _curate(run)
    curated = ensure_metrics(run, view=CURATED).tables
    raw = ensure_metrics(run, view=RAW).tables
    assert not curated.per_model.equals(raw.per_model)
    for seq in range(1, 6):  # the five entries _curate made
        undo(run, seq)
    result = ensure_metrics(run, view=CURATED)
    assert not result.change.any
    _assert_tables_equal(result.tables, compute_metric_tables(run.usable_predictions()))


def test_a_new_entry_makes_the_curated_tables_stale_not_the_raw_ones(run):
    files = _curate(run)
    refresh_metrics(run)
    assert staleness(run, view=CURATED) is None and staleness(run, view=RAW) is None
    stored = json.loads(fingerprint_path(run, CURATED).read_text())
    assert stored["curation"] == current_fingerprint(run, CURATED)["curation"] != "none"
    record(run, "exclude", files[15])
    assert staleness(run, view=CURATED) == "the curation log changed"
    assert staleness(run, view=RAW) is None


def test_apply_curation_leaves_its_input_alone_and_keeps_missing_truths():
    from core.curation import Curation

    rows = pd.DataFrame({"model": ["a", "a", "b"], "image": ["x", "y", "x"],
                         "true_wnid": pd.array([CATS[0], pd.NA, CATS[0]], dtype="string")})
    state = Curation(relabels={"x": CATS[1], "y": CATS[2]}, excluded=frozenset())
    out, change = apply_curation(rows, state)
    assert rows["true_wnid"].tolist()[0] == CATS[0]  # the input is not changed
    assert out["true_wnid"].tolist() == [CATS[1], CATS[2], CATS[1]] and change.relabelled_rows == 3
    assert out["true_wnid"].dtype == rows["true_wnid"].dtype


def test_the_command_line_says_which_view(run, capsys):
    assert explain_main(["metrics", "--run", "artefact"]) == 0
    assert "raw view" in capsys.readouterr().err
    _curate(run)
    assert explain_main(["metrics", "--run", "artefact"]) == 0
    err = capsys.readouterr().err
    assert "has a curation log: the curated view" in err and "curated view (3 relabelled, 3 excluded)" in err
    assert explain_main(["metrics", "--run", "artefact", "--raw"]) == 0
    assert "raw view" in capsys.readouterr().err
    assert explain_main(["metrics", "--run", "artefact", "--curated", "--no-ci"]) == 0
    assert "curated view (3 relabelled, 3 excluded): computed" in capsys.readouterr().err
    assert explain_main(["metrics", "x.csv", "--raw", "--out", "/tmp/x"]) == 2
    assert "--raw and --curated" in capsys.readouterr().err


def test_a_linked_curated_folder_is_never_written_through_and_a_fifo_never_waited_on(run, tmp_path):
    """Hostile campaign: a link at metrics/curated had the tables written wherever it led, and a FIFO
    at a fingerprint hung every reader."""
    import os

    _curate(run)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "fingerprint.json").write_text("DATA")
    run.metrics_dir.mkdir(exist_ok=True)
    (run.metrics_dir / "curated").symlink_to(victim)
    result = ensure_metrics(run, view=CURATED)
    assert result.recomputed and not result.stored and "is a link or a file" in result.store_error
    assert sorted(p.name for p in victim.iterdir()) == ["fingerprint.json"]
    assert (victim / "fingerprint.json").read_text() == "DATA"
    (run.metrics_dir / "curated").unlink()
    refresh_metrics(run)
    os.unlink(fingerprint_path(run, RAW))
    os.mkfifo(fingerprint_path(run, RAW))
    assert staleness(run, view=RAW) is not None  # at once, never a wait on the FIFO
