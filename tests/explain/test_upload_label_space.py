"""An uploaded predictions file naming a label space WildLens does not know is refused in one line
and creates no run (before, the run was made and every page that names classes crashed on it)."""
import pytest

from core.runstore import RunStore
from explain.export import import_predictions_as_run
from explain.metrics import PredictionsError


def test_an_unknown_label_space_is_refused_and_no_run_is_made(tmp_path):
    path = tmp_path / "preds.csv"
    path.write_text("model,true_wnid,pred_wnid,label_space\nm1,n02123045,n02123159,=cmd\n"
                    "m1,n02123159,n02123159,=cmd\n")
    store = RunStore()
    with pytest.raises(PredictionsError, match=r"preds.csv: row 1 \(line 2\), column 'label_space': '=cmd' is not a "
                                                 r"label space .* No run was created"):
        import_predictions_as_run(path, store, title="x")
    assert store.list_runs() == []


def test_a_known_label_space_still_makes_a_run(tmp_path):
    path = tmp_path / "preds.csv"
    path.write_text("model,true_wnid,pred_wnid,label_space\nm1,n02123045,n02123159,imagenet-1k\n")
    run, _ = import_predictions_as_run(path, RunStore(), title="x")
    assert run.info.label_space == "imagenet-1k"
