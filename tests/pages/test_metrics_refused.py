"""A stored run whose predictions the metrics refuse (issue 22 item 10: a probability of 7.5 in a
copied run) shows the one-line reason on every page that reads the metric tables, not a traceback."""
import pandas as pd
import pytest

from tests.pages.test_app import open_page

TABBY, TIGER_CAT = "n02123045", "n02123159"


@pytest.mark.parametrize("page", ["results", "confusions"])
def test_refused_predictions_are_one_line_on_the_page(app, app_home, page):
    from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, write_table

    store = RunStore(app_home)
    if not (store.runs_dir / "badprob").exists():
        run = store.create_run(RunInfo(run_id="badprob", title="bad", wnids=[TABBY, TIGER_CAT], models=["m"]))
        preds = pd.DataFrame({"model": "m", "image": ["a", "b"], "true_wnid": [TABBY, TIGER_CAT],
                              "pred_wnid": [TABBY, TABBY], "prob_1": [7.5, 0.5], "label_space": "imagenet-1k",
                              "status": "ok"})
        write_table(preds, run.path / "predictions" / "m" / "part-0.parquet", PREDICTION_SCHEMA)
    app.session_state["_next_run_id"] = "badprob"
    at = open_page(app, page)  # no exception
    errors = [e.value for e in at.error]
    assert any("column 'prob\\_1'" in e or "column 'prob_1'" in e for e in errors), errors
    assert any("not a probability" in e for e in errors), errors
