"""Bring your own predictions (issue 12 item 10): a predictions file becomes a run whose tables
equal what `python -m explain metrics` computes from the file; a bad file creates nothing."""
from __future__ import annotations

import pandas as pd
import pytest

from core.runstore import RunStore
from explain.artefact import read_stored_metrics
from explain.export import import_predictions_as_run, read_predictions_file
from explain.metrics import PredictionsError, compute_metric_tables

TABBY, TIGER_CAT, LYNX = "n02123045", "n02123159", "n02127052"


def test_a_predictions_file_becomes_a_run_with_its_tables(tmp_path):
    path = tmp_path / "mine.csv"
    pd.DataFrame({"model": ["m1", "m1", "m2"], "true_wnid": [TABBY, LYNX, TABBY],
                  "pred_wnid": [TIGER_CAT, LYNX, TABBY]}).to_csv(path, index=False)
    store = RunStore(tmp_path / "home")
    run, tables = import_predictions_as_run(path, store, title="my model")
    info = store.open_run(run.run_id).info
    assert (info.source, info.models, info.wnids, info.title) == ("upload", ["m1", "m2"], [TABBY, LYNX], "my model")
    expected = compute_metric_tables(read_predictions_file(path)[0])
    pd.testing.assert_frame_equal(tables.per_model, expected.per_model)
    stored = read_stored_metrics(run)
    assert stored is not None, "the metrics artefact is written with the run"
    pd.testing.assert_frame_equal(stored.per_class, expected.per_class)
    assert sorted(run.read_predictions()["image"]) == ["row-2", "row-3", "row-4"]  # file lines


@pytest.mark.parametrize("content, message", [
    ("model,true_wnid,pred_wnid\nm,tabby cat,n02123045\n", "line 2"),
    ("model,true_wnid,pred_wnid\nm,n02123045,n02123045,extra\n", "line 2 has 4 fields"),
    ("", "is empty"),
])
def test_a_bad_file_is_one_line_and_creates_no_run(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    store = RunStore(tmp_path / "home")
    with pytest.raises(PredictionsError, match=message) as info:
        import_predictions_as_run(path, store)
    assert "\n" not in str(info.value)
    assert store.list_runs() == []


def test_a_model_id_that_cannot_name_a_folder_leaves_no_half_run(tmp_path):
    """A UI review: the refusal said neither the row nor the rule; now one line with both, and nothing made."""
    path = tmp_path / "odd.csv"
    pd.DataFrame({"model": ["ok_model", "hf-hub:org/m1"], "true_wnid": [TABBY] * 2,
                  "pred_wnid": [TABBY] * 2}).to_csv(path, index=False)
    store = RunStore(tmp_path / "home")
    with pytest.raises(PredictionsError, match="not a usable model id") as info:
        import_predictions_as_run(path, store)
    said = str(info.value)
    assert "\n" not in said and "line 3" in said and "'model'" in said and "rename the model" in said, said
    assert store.list_runs() == [] and not list((tmp_path / "home" / "runs").glob("*"))


def test_rows_without_an_image_never_take_the_name_of_another_row(tmp_path):
    """Second campaign: a row without an image got the identity 'row-<line>', which another row's
    image could already be: 'row-3' at line 2 and an empty image at line 3 became one (model, image)
    and the run kept 2 of the 3 predictions (accuracy 0.5 stored, 0.667 returned; exit 0)."""
    path = tmp_path / "p.csv"
    path.write_text("model,image,true_wnid,pred_wnid\n"
                    "m,row-3,n02123045,n02123045\n"
                    "m,,n02123045,n02123159\n"
                    "m,a.jpg,n02123159,n02123159\n")
    run, tables = import_predictions_as_run(path, RunStore())
    stored = run.read_predictions()
    assert len(stored) == 3 and stored["image"].is_unique, stored
    assert "row-3" in set(stored["image"])  # the file's own image keeps its name
    again = compute_metric_tables(run.usable_predictions(), cache_dir=False).per_model
    assert int(again["n"].iloc[0]) == int(tables.per_model["n"].iloc[0]) == 3
    assert read_stored_metrics(run).per_model["accuracy"].iloc[0] == pytest.approx(2 / 3)
