"""Issue 22 item 10: predictions that would give a silently wrong number are refused in one line
naming the row (the file's line) and the column; the legal look-alikes are counted as documented."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.labels import get_label_space, store_label_set
from explain.cli import main
from explain.export import import_predictions_as_run, metrics_from_file
from explain.metrics import PredictionsError, compute_metric_tables

IN1K = get_label_space("imagenet-1k").wnids
TABBY, TIGER_CAT, PERSIAN, SIAMESE, EGYPTIAN = "n02123045", "n02123159", "n02123394", "n02123597", "n02124075"
LAMP = "n04380533"
ARABIC_TABBY = "n" + "".join(chr(0x0660 + int(d)) for d in "02123045")  # n٠٢١٢٣٠٤٥: \d matched it


def _frame(n: int = 32) -> pd.DataFrame:
    """n predictions of 2 models over 4 cat classes, a full top-5 each, label space imagenet-1k."""
    cats = [TABBY, TIGER_CAT, PERSIAN, SIAMESE, EGYPTIAN]
    rows = []
    for i in range(n):
        true = cats[i % 4]
        top = [true] + [c for c in cats if c != true] if i % 3 else [c for c in cats if c != true] + [true]
        rows.append({"model": "m1" if i < n // 2 else "m2", "image": f"{i}.jpg", "true_wnid": true,
                     "pred_wnid": top[0], **{f"pred_wnid_{k}": top[k - 1] for k in range(2, 6)},
                     **{f"prob_{k}": 0.5 / k for k in range(1, 6)}, "label_space": "imagenet-1k", "status": "ok"})
    return pd.DataFrame(rows)


def _refused(df, tmp_path, *needles, name="p.csv"):
    """The CLI's one line for ``df`` written as a CSV; each needle must be in it."""
    path = tmp_path / name
    df.to_csv(path, index=False)
    with pytest.raises(PredictionsError) as caught:
        metrics_from_file(path, tmp_path / "out", cache_dir=False)
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ---------------------------------------------------------------- repeated (model, image) rows
def test_identical_repeated_rows_count_once():
    df = _frame(32)
    doubled = pd.concat([df, df.iloc[:8]], ignore_index=True)  # a file concatenated with part of itself
    tables = compute_metric_tables(doubled, cache_dir=False)
    assert int(tables.per_model["n"].sum()) == 32  # was 40
    pd.testing.assert_frame_equal(tables.per_class, compute_metric_tables(df, cache_dir=False).per_class)


def test_conflicting_repeated_rows_are_refused_naming_both_lines(tmp_path):
    df = _frame(32)
    other = df.iloc[[5]].assign(pred_wnid=LAMP)
    _refused(pd.concat([df, other], ignore_index=True), tmp_path, "row 33 (line 34)", "column 'pred_wnid'",
             "'m1'", "'5.jpg'", "row 6 (line 7)")


# ---------------------------------------------------------------- the top-5
def test_a_top5_holding_a_class_twice_is_refused(tmp_path):
    df = _frame(32)
    df.loc[4, "pred_wnid_3"] = df.loc[4, "pred_wnid"]
    _refused(df, tmp_path, "row 5 (line 6)", "column 'pred_wnid_3'", "twice")


def test_a_top5_of_the_truth_repeated_scored_one_before(tmp_path):
    df = _frame(32)
    for k in range(2, 6):
        df[f"pred_wnid_{k}"] = df["true_wnid"]  # top-5 accuracy was 1.0
    _refused(df, tmp_path, "row 1 (line 2)", "column 'pred_wnid_3'", "also in pred_wnid_2")


def test_an_empty_pred_wnid_3_is_no_top5(tmp_path):
    df = _frame(32)
    df["pred_wnid_3"] = pd.NA
    _refused(df, tmp_path, "row 1 (line 2)", "column 'pred_wnid_3'", "empty")


def test_a_short_top5_is_refused_in_a_large_label_space(tmp_path):
    df = _frame(32)
    df.loc[7, ["pred_wnid_4", "pred_wnid_5"]] = pd.NA
    _refused(df, tmp_path, "row 8 (line 9)", "column 'pred_wnid_4'", "5 classes")


def test_a_short_top_k_is_legal_when_the_label_space_is_smaller_than_5():
    three = store_label_set([TABBY, TIGER_CAT, PERSIAN])
    rows = [{"model": "zs", "image": f"{i}.jpg", "true_wnid": t, "pred_wnid": p, "pred_wnid_2": q, "pred_wnid_3": r,
             "pred_wnid_4": None, "pred_wnid_5": None, "label_space": three}
            for i, (t, p, q, r) in enumerate([(TABBY, TABBY, TIGER_CAT, PERSIAN), (TABBY, TIGER_CAT, PERSIAN, TABBY),
                                              (PERSIAN, TIGER_CAT, TABBY, PERSIAN)])]
    tables = compute_metric_tables(pd.DataFrame(rows), cache_dir=False)
    row = tables.per_model.iloc[0]
    assert row["accuracy_top5"] == 1.0 and abs(row["accuracy"] - 1 / 3) < 1e-12
    assert not pd.isna(row["hdist_at_5"])


def test_a_model_without_a_top5_beside_one_with_it_has_no_top5_accuracy():
    df = _frame(32)
    df.loc[df["model"] == "m2", [f"pred_wnid_{k}" for k in range(2, 6)]] = pd.NA  # m2: top-1 only
    per_model = compute_metric_tables(df, cache_dir=False).per_model.set_index("model")
    assert pd.isna(per_model.loc["m2", "accuracy_top5"])  # was m2's top-1 accuracy
    assert per_model.loc["m1", "accuracy_top5"] == 1.0


# ---------------------------------------------------------------- probabilities
@pytest.mark.parametrize("value", ["7.5", "-3", "inf", "-inf", "nan"])
def test_a_probability_outside_0_1_is_refused(tmp_path, value):
    df = _frame(32).astype({"prob_2": object})
    df.loc[9, "prob_2"] = value
    _refused(df, tmp_path, "row 10 (line 11)", "column 'prob_2'", "between 0 and 1")


def test_probabilities_are_checked_in_a_dataframe_too():
    df = _frame(32)
    df.loc[3, "prob_1"] = np.inf
    with pytest.raises(PredictionsError, match=r"row 4, column 'prob_1'"):
        compute_metric_tables(df, cache_dir=False)


def test_the_refused_probability_is_written_as_the_user_wrote_it(tmp_path):
    df = _frame(32)
    df.loc[5, "prob_1"] = 7.5  # a float column: read back as numpy's float64
    _refused(df, tmp_path, "row 6 (line 7)", "column 'prob_1'", "7.5 is not a probability")
    with pytest.raises(PredictionsError) as caught:
        compute_metric_tables(df, cache_dir=False)
    assert "np.float64" not in str(caught.value) and "7.5 is not a probability" in str(caught.value)


@pytest.mark.parametrize("values, row, said", [
    (pd.Series([True] * 32), 0, "True"),
    (pd.Series([0.5] * 31 + [pd.NA], dtype="object").where(lambda s: s.index != 4, True), 4, "True"),
    (pd.Series([pd.NA] + [True] * 31, dtype="boolean"), 1, "True"),  # the first cell empty: allowed
    (pd.Series([0.5 + 0j] * 32), 0, "(0.5+0j)"),
    (pd.Series([pd.Timestamp(0)] * 32), 0, "Timestamp('1970-01-01 00:00:00')"),
    (pd.Series([pd.Timedelta(0)] * 32), 0, "Timedelta('0 days 00:00:00')"),
    (pd.Series([True] * 32, dtype="bool[pyarrow]"), 0, "True"),
])
def test_a_bool_complex_date_or_duration_is_no_probability(values, row, said):
    """A hostile check: True (1.0), a complex number, Timestamp(0) or Timedelta(0) (0) were taken as probabilities:
    each converts to a number. Refused at the first such cell, written as the user wrote it; text such as '0.25'
    and numbers of any numeric dtype are still read."""
    df = _frame(32)
    with pytest.raises(PredictionsError) as caught:
        compute_metric_tables(df.assign(prob_3=values), cache_dir=False)
    assert caught.value.column == "prob_3" and caught.value.row == row
    assert str(caught.value).endswith(f"{said} is not a probability (a number between 0 and 1); fix it or leave the "
                                      "cell empty."), str(caught.value)
    for fine in (pd.Series(["0.25"] * 32, dtype=object), pd.Series([0.25] * 32, dtype="category"),
                 pd.Series([0.25] * 32, dtype="float64[pyarrow]"), pd.Series([0] * 32, dtype="Int64")):
        compute_metric_tables(df.assign(prob_3=fine), cache_dir=False, ci=None)


# ---------------------------------------------------------------- ASCII digits only
@pytest.mark.parametrize("column", ["true_wnid", "pred_wnid", "pred_wnid_4"])
def test_a_wnid_with_non_ascii_digits_is_refused(tmp_path, column):
    df = _frame(32)
    df.loc[2, column] = ARABIC_TABBY
    _refused(df, tmp_path, "row 3 (line 4)", f"column '{column}'", "is not a wnid")


def test_core_wnid_checks_take_ascii_digits_only():
    from core.labels import checked_wnids
    from core.wordnet import is_wnid, synset_of
    from core.errors import WildLensError

    assert is_wnid(TABBY) and not is_wnid(ARABIC_TABBY) and not is_wnid("n０２１２３０４５")  # fullwidth digits
    with pytest.raises((KeyError, ValueError)):
        synset_of(ARABIC_TABBY)
    with pytest.raises(WildLensError, match="is not a wnid"):
        checked_wnids([ARABIC_TABBY])


def test_a_label_set_file_with_non_ascii_digits_is_refused(tmp_path):
    from classify.zeroshot.labelsets import LabelSetError, read_wnid_file

    path = tmp_path / "set.txt"
    path.write_text(f"{TABBY}\n{ARABIC_TABBY}\n", encoding="utf-8")
    with pytest.raises(LabelSetError, match="line 2"):
        read_wnid_file(path)


# ---------------------------------------------------------------- label spaces
@pytest.mark.parametrize("value, words", [("foo", ["'foo'", "Unknown label space"]),
                                          ("sense:../../etc/passwd", ["'sense:../../etc/passwd'", "not in WordNet"]),
                                          ("file:0123456789ab", ["not stored on this machine"])])
def test_an_unknown_label_space_is_refused(tmp_path, value, words):
    df = _frame(32)
    df.loc[11, "label_space"] = value
    _refused(df, tmp_path, "row 12 (line 13)", "column 'label_space'", *words)


def test_a_label_set_whose_classes_do_not_hold_the_predictions_is_refused(tmp_path):
    df = _frame(32)
    df.loc[:, "label_space"] = "sense:cat.n.01"
    df.loc[13, "pred_wnid_2"] = LAMP
    _refused(df, tmp_path, "row 14 (line 15)", "column 'pred_wnid_2'", LAMP, "sense:cat.n.01")


def test_a_label_set_that_holds_the_predictions_is_accepted():
    df = _frame(32).assign(label_space="sense:cat.n.01")
    tables = compute_metric_tables(df, cache_dir=False)
    assert int(tables.per_model["n"].sum()) == 32


def test_the_upload_and_the_command_refuse_with_the_same_words(tmp_path, capsys):
    df = _frame(32)
    df.loc[11, "label_space"] = "foo"
    path = tmp_path / "p.csv"
    df.to_csv(path, index=False)
    assert main(["metrics", str(path), "--out", str(tmp_path / "out"), "--no-cache"]) == 2
    cli = capsys.readouterr().err.strip().removeprefix("error: ")
    from core.runstore import RunStore

    with pytest.raises(PredictionsError) as caught:
        import_predictions_as_run(path, RunStore(tmp_path / "home"))
    assert str(caught.value).startswith(cli.rstrip(".")) and "No run was created" in str(caught.value)


# ---------------------------------------------------------------- second campaign (issue 22)
def test_an_empty_status_beside_a_prediction_is_refused(tmp_path):
    """Was: exit 0 with the row read as 'failed': its prediction left every statistic (n 32 -> 31)."""
    df = _frame(32)
    df.loc[3, "status"] = None
    _refused(df, tmp_path, "row 4 (line 5)", "column 'status'", "empty", "ok or failed")
    with pytest.raises(PredictionsError, match="status"):
        compute_metric_tables(df, cache_dir=False)
    # a failed row may leave its status and its prediction empty: not counted, reported as failed
    df.loc[3, [c for c in df.columns if c.startswith("pred_wnid") or c.startswith("prob_")]] = None
    tables = compute_metric_tables(df, cache_dir=False)
    assert int(tables.per_model["n"].sum()) == 31 and int(tables.per_model["n_failed"].sum()) == 1


def test_a_column_named_twice_in_the_header_is_refused(tmp_path):
    """Was: exit 0, pandas read the first 'pred_wnid' and renamed the second 'pred_wnid.1'."""
    df = _frame(32)
    twice = df.assign(extra=LAMP).rename(columns={"extra": "pred_wnid"})
    path = tmp_path / "twice.csv"
    twice.to_csv(path, index=False)
    with pytest.raises(PredictionsError) as caught:
        metrics_from_file(path, tmp_path / "out", cache_dir=False)
    message = str(caught.value)
    assert "'pred_wnid' appears twice" in message and "columns 4 and 16" in message and "\n" not in message
    # the upload says the same and makes no run
    from core.runstore import RunStore
    with pytest.raises(PredictionsError, match="appears twice"):
        import_predictions_as_run(path, RunStore())
    assert RunStore().list_runs() == []


def test_one_model_in_two_label_spaces_is_refused(tmp_path):
    """Second campaign: rows of one model naming imagenet-1k and imagenet-21k were taken (exit 0),
    so a class could be unseen in some of a per-model row's rows and seen in others."""
    df = _frame(32)
    df.loc[20, "label_space"] = "imagenet-21k"  # a row of m2
    _refused(df, tmp_path, "row 21 (line 22)", "column 'label_space'", "'m2'", "imagenet-1k before",
             "imagenet-21k here")
    # two models, each in its own space, and empty cells beside a named space, stay legal
    df.loc[df["model"] == "m2", "label_space"] = "imagenet-21k"
    df.loc[3, "label_space"] = None
    assert int(compute_metric_tables(df, cache_dir=False).per_model["n"].sum()) == 32
