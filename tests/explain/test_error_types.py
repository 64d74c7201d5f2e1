"""Error types (explain.error_types): each rule on planted images of a run, the precedence, the rows
the metric tables count, the per-model table's Wilson intervals against scipy, the stored
explanations fresh until an input changes, and hostile text kept as text (CSV neutralised)."""
from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from core.curation import record
from core.explained import (CURATED, EXPLAINED_SCHEMA, LABEL_ISSUES_SCHEMA, RAW, label_issues_path, read_explained)
from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, StoreError, conform, write_table
from explain import error_types
from explain.error_types import (ERROR_TYPE_COLOURS, ERROR_TYPE_INFO, ERROR_TYPE_TABLE, ERROR_TYPES, EXPLAINED_COLUMNS,
                                 ensure_explained, error_type_table, explain_predictions, image_flags)
from explain.export import table_to_csv_bytes
from explain.metrics import compute_metric_tables
from explain.vocabulary import RELATION_COLOURS

TABBY, TIGER_CAT, PERSIAN, EGYPTIAN = "n02123045", "n02123159", "n02123394", "n02124075"
CAR_WHEEL, SPORTS_CAR, CAR, ESPRESSO, JAGUAR = "n02974003", "n04285008", "n02958343", "n07920052", "n02128925"
LEOPARD_CAT, DOMESTIC_CAT = "n02126317", "n02121808"  # neither is an ImageNet-1k class
NEAR = 0x0123_4567_89AB_CDEF  # two images of different classes 3 bits apart
TWIN = 0xFEDC_BA98_7654_3210  # two tabbies 2 bits apart: same class, no duplicate mistake

# image -> (stored class, pHash, other_wnids, m1k's top-1, mwide's top-1 or None)
IMAGES = {
    "sib": (TABBY, None, None, TIGER_CAT, DOMESTIC_CAT),  # sibling; for mwide a hypernym
    "tag": (TABBY, None, None, TIGER_CAT, None),  # tagged not-a-photo: label, though a sibling
    "tag2": (TABBY, NEAR ^ 0b1_0000_0000, None, TIGER_CAT, None),  # tagged and a near duplicate: label
    "rel": (TABBY, None, None, PERSIAN, None),  # relabelled to tiger cat
    "probe": (TABBY, None, None, EGYPTIAN, None),  # flagged by the label-issue probe
    "dup_a": (TABBY, NEAR, None, TIGER_CAT, None),
    "dup_b": (EGYPTIAN, NEAR ^ 0b111, None, ESPRESSO, None),
    "twin_a": (TABBY, TWIN, None, TIGER_CAT, None),
    "twin_b": (TABBY, TWIN ^ 0b11, None, TIGER_CAT, None),
    "other": (PERSIAN, None, TABBY, TIGER_CAT, None),  # found for tabby too
    "whole": (CAR_WHEEL, None, None, SPORTS_CAR, CAR),  # part-whole
    "related": (TABBY, None, None, JAGUAR, None),
    "fail": (TABBY, None, None, ESPRESSO, None),
    "unseen": (LEOPARD_CAT, None, None, TABBY, LEOPARD_CAT),  # outside m1k's space; mwide is right
    "general": (DOMESTIC_CAT, None, None, TABBY, TABBY),  # unseen for m1k; a hyponym for mwide
    "right": (TABBY, None, None, TABBY, TABBY),
}
HOSTILE_NOTE = '<script>alert("x")</script> =HYPERLINK("http://e.vil","click")'
HOSTILE_TAG = '=HYPERLINK("http://e.vil")'


def _file(image: str) -> str:
    return f"{IMAGES[image][0]}/{image}.jpg"


def _hash(value) -> str | None:
    return None if value is None else f"{value:016x}"


def _predictions(model: str, column: int, label_space: str | None) -> pd.DataFrame:
    chosen = [(name, spec) for name, spec in IMAGES.items() if spec[column] is not None]
    rows = pd.DataFrame({"model": model, "image": [_file(n) for n, _ in chosen],
                         "true_wnid": [s[0] for _, s in chosen], "pred_wnid": [s[column] for _, s in chosen],
                         "prob_1": np.linspace(0.3, 0.9, len(chosen)), "label_space": label_space, "status": "ok",
                         "family": "CNN" if model == "m1k" else None})
    return conform(rows, PREDICTION_SCHEMA, table="predictions")


def _label_issues(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["model", "image", "true_wnid", "suggested_wnid", "label_quality", "is_issue"])


@pytest.fixture
def run():
    """A run of the planted images: two models (m1k in ImageNet-1k, mwide without a label space),
    a curation log, a label issue, near duplicates and an image found for two classes."""
    run = RunStore().create_run(RunInfo(run_id="errortypes", wnids=sorted({s[0] for s in IMAGES.values()})))
    run.write_manifest(pd.DataFrame({
        "wnid": [s[0] for s in IMAGES.values()], "file": [_file(n) for n in IMAGES],
        "phash": [_hash(s[1]) for s in IMAGES.values()], "other_wnids": [s[2] for s in IMAGES.values()],
        "status": "accepted", "excluded": False}))
    m1k = _predictions("m1k", 3, "imagenet-1k")
    failed = m1k.iloc[:1].assign(image="n02123045/failed.jpg", status="failed")  # counted nowhere
    run.append_predictions(pd.concat([m1k, failed], ignore_index=True))
    run.append_predictions(_predictions("mwide", 4, None))
    known = {_file(n) for n in IMAGES}
    record(run, "tag", _file("tag"), "not-a-photo", note=HOSTILE_NOTE, known_images=known)
    record(run, "tag", _file("tag"), HOSTILE_TAG, known_images=known)
    record(run, "tag", _file("tag2"), "wrong-class", known_images=known)
    record(run, "tag", _file("sib"), "several-objects", known_images=known)  # not a label tag
    record(run, "relabel", _file("rel"), TIGER_CAT, known_images=known)
    write_table(_label_issues([("m1k", _file("probe"), TABBY, EGYPTIAN, 0.03, True),
                               ("mwide", _file("probe"), TABBY, EGYPTIAN, 0.2, True),
                               ("m1k", _file("fail"), TABBY, TABBY, 0.9, False)]),
                label_issues_path(run), LABEL_ISSUES_SCHEMA, table="label issues")
    return run


def _by_image(explained: pd.DataFrame, model: str) -> dict[str, tuple]:
    rows = explained[explained["model"] == model]
    name = {_file(n): n for n in IMAGES}
    return {name[i]: (t if isinstance(t, str) else None, r if isinstance(r, str) else None)
            for i, t, r in zip(rows["image"], rows["error_type"].astype(object), rows["error_reason"].astype(object))}


def test_each_rule_on_planted_images_raw_view(run):
    explained = ensure_explained(run, RAW)
    assert list(explained.columns) == list(EXPLAINED_SCHEMA)
    assert {c: str(t) for c, t in explained.dtypes.items()} == EXPLAINED_SCHEMA
    got = _by_image(explained, "m1k")
    assert got["right"] == (None, None)
    assert got["sib"] == ("fine-grained", "sibling: both domestic cats")  # the tag several-objects is no label tag
    assert got["tag"][0] == "label" and got["tag"][1].startswith("tagged not-a-photo (also =HYPERLINK(")
    assert got["tag2"] == ("label", "tagged wrong-class")  # before its near duplicate and its sibling
    assert got["rel"] == ("label", "relabelled to tiger cat (n02123159)")
    assert got["probe"] == ("label", "flagged by the label-issue probe on m1k (label quality 0.03) and 1 more model")
    assert got["dup_a"] == ("duplicate", f"near duplicate of {_file('dup_b')}, an Egyptian cat (3 bits apart)")
    assert got["dup_b"][0] == "duplicate" and got["dup_b"][1].startswith(f"near duplicate of {_file('dup_a')}, a tabby")
    assert got["twin_a"][0] == got["twin_b"][0] == "fine-grained"  # twins of one class: no ambiguity
    assert got["other"] == ("duplicate", "also found for tabby (n02123045)")
    assert got["whole"] == ("part-whole", "car wheel is a part of motor vehicle, 2 steps above sports car")
    assert got["related"] == ("related", "related: both felines, 3 steps up from tabby")
    assert got["fail"][0] == "model-failure" and got["fail"][1].startswith("distant: ")
    assert got["unseen"] == ("unseen", "leopard cat (n02126317) is not a class of imagenet-1k, the model's label space")
    assert got["general"][0] == "unseen"
    wide = _by_image(explained, "mwide")
    assert wide["sib"] == ("hierarchy", "hypernym: domestic cat is an ancestor of tabby (too general)")
    assert wide["general"] == ("hierarchy", "hyponym: tabby is a kind of domestic cat (too specific)")
    assert wide["whole"] == ("part-whole", "car wheel is a part of motor vehicle, 1 step above car (motor vehicle)")
    assert wide["unseen"] == wide["right"] == (None, None)  # no label space named: nothing is unseen
    row = explained[(explained["model"] == "m1k") & (explained["image"] == _file("sib"))].iloc[0]
    assert (row["relation"], row["severity"], bool(row["correct"])) == ("sibling", 1, False)
    right = explained[explained["image"] == _file("right")]
    assert (right["relation"] == "same").all() and (right["severity"] == 0).all() and right["correct"].all()
    assert right["error_type"].isna().all() and right["error_reason"].isna().all()


def test_the_curated_view_takes_the_relabel_as_truth(run):
    record(run, "relabel", _file("dup_b"), TABBY)  # now both near duplicates are tabbies: no ambiguity
    record(run, "relabel", _file("probe"), EGYPTIAN)  # what the probe suggested: the doubt is settled
    record(run, "exclude", _file("fail"))
    raw, curated = _by_image(ensure_explained(run, RAW), "m1k"), _by_image(ensure_explained(run, CURATED), "m1k")
    assert raw["rel"][0] == "label" and curated["rel"] == ("fine-grained", "sibling: both domestic cats")
    assert raw["dup_a"][0] == "duplicate" and curated["dup_a"][0] == "fine-grained"
    assert curated["dup_b"][0] == "model-failure"  # truth tabby now, predicted espresso
    assert raw["probe"][0] == "label" and curated["probe"] == (None, None)  # relabelled to its prediction: right
    assert "fail" in raw and "fail" not in curated  # excluded
    assert curated["tag"][0] == "label"  # a tag decides in both views
    flags = image_flags(run, CURATED).set_index("image")
    assert _file("rel") not in flags.index or pd.isna(flags.loc[_file("rel"), "label_reason"])


def test_precedence_label_before_duplicate_before_unseen_before_the_relation():
    rows = pd.DataFrame({"model": "m", "image": ["a", "b", "c", "d"], "true_wnid": [TABBY, TABBY, LEOPARD_CAT, TABBY],
                         "pred_wnid": [TIGER_CAT, TIGER_CAT, TABBY, TABBY], "label_space": "imagenet-1k"})
    flags = pd.DataFrame({"image": ["a", "b", "c", "d"], "label_reason": ["tagged wrong-class", None, None, "x"],
                          "duplicate_reason": ["near duplicate of z", "near duplicate of z", "also found for q", "y"]})
    out = explain_predictions(rows, flags)
    assert out["error_type"].tolist()[:3] == ["label", "duplicate", "duplicate"]
    assert out["error_reason"].tolist()[:3] == ["tagged wrong-class", "near duplicate of z", "also found for q"]
    assert pd.isna(out["error_type"].iloc[3]) and pd.isna(out["error_reason"].iloc[3])  # correct: flags do not matter
    plain = explain_predictions(rows)  # without flags: the relation decides
    assert plain["error_type"].tolist()[:3] == ["fine-grained", "fine-grained", "unseen"]


def test_the_rows_are_those_the_metric_tables_count(run):
    predictions = run.usable_predictions()
    explained = explain_predictions(predictions)
    tables = compute_metric_tables(predictions, confusion_top_k=None, ci=None)
    per_model = tables.per_model.set_index("model")
    counts = explained["model"].value_counts()
    for model in ("m1k", "mwide"):
        assert counts[model] == per_model.loc[model, "n"] + per_model.loc[model, "n_unseen"]
    mistakes = explained[~explained["correct"]].merge(tables.confusions, on=["model", "true_wnid", "pred_wnid"])
    assert len(mistakes) == int((~explained["correct"]).sum())
    assert (mistakes["relation_x"] == mistakes["relation_y"]).all()
    assert (mistakes["severity_x"] == mistakes["severity_y"]).all()
    assert "n02123045/failed.jpg" not in set(explained["image"])


def test_the_table_per_model_and_its_wilson_intervals_equal_scipys(run):
    predictions = run.usable_predictions()
    explained = ensure_explained(run, RAW)
    table = error_type_table(explained, families=predictions).set_index("model")
    assert list(table.reset_index().columns) == list(ERROR_TYPE_TABLE)
    assert table.loc["m1k", "family"] == "CNN" and pd.isna(table.loc["mwide", "family"])
    # a larger table too: random types over 3 models, some without mistakes of a type
    rng = np.random.default_rng(0)
    n = 3000
    kinds = np.asarray([*ERROR_TYPES, None], dtype=object)[rng.integers(0, len(ERROR_TYPES) + 1, n)]
    big = pd.DataFrame({"model": np.asarray(["a", "b", "c"], dtype=object)[rng.integers(0, 3, n)],
                        "correct": pd.array([k is None for k in kinds], dtype="boolean"),
                        "error_type": pd.array(kinds, dtype="string")})
    for frame, source, level in ((table.reset_index(), explained, 0.95), (error_type_table(big, level=0.9), big, 0.9)):
        for _, row in frame.iterrows():
            rows = source[source["model"] == row["model"]]
            seen = (rows["in_label_space"].fillna(True).astype(bool) if "in_label_space" in rows.columns
                    else pd.Series(True, index=rows.index))
            correct = int((rows["correct"].astype(bool) & seen).sum())
            clean = int(seen.sum() - (seen & rows["error_type"].isin(["label", "duplicate"]).fillna(False)).sum())
            assert (row["n"], row["n_unseen"]) == (int(seen.sum()), int((~seen).sum()))
            assert sum(row[f"{t}_count"] for t in ERROR_TYPES) == row["n_mistakes"]
            assert sum(row[f"{t}_share"] for t in ERROR_TYPES) == pytest.approx(1.0, abs=1e-12)
            for name in ERROR_TYPES:
                ci = binomtest(int(row[f"{name}_count"]), int(row["n_mistakes"])).proportion_ci(
                    confidence_level=level, method="wilson")
                assert row[f"{name}_share_ci_low"] == pytest.approx(ci.low, abs=1e-12)
                assert row[f"{name}_share_ci_high"] == pytest.approx(ci.high, abs=1e-12)
            assert row["accuracy_clean"] == pytest.approx(correct / clean, abs=1e-15)
            ci = binomtest(correct, int(seen.sum())).proportion_ci(confidence_level=level, method="wilson")
            assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == (
                pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))
            ci = binomtest(correct, clean).proportion_ci(confidence_level=level, method="wilson")
            assert (row["accuracy_clean_ci_low"], row["accuracy_clean_ci_high"]) == (
                pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))
    m1k = table.loc["m1k"]
    assert (m1k["label_count"], m1k["duplicate_count"], m1k["unseen_count"], m1k["part-whole_count"]) == (4, 3, 2, 1)
    # The accuracy is the metric tables' per-model accuracy (over the in-space classes: an unseen class's is NA,
    # never a 0 counted in), and n and n_unseen theirs too (code review).
    from explain.metrics import compute_metric_tables

    per_model = compute_metric_tables(predictions, cache_dir=False).per_model.set_index("model")
    for model in table.index:
        for column in ("accuracy", "accuracy_ci_low", "accuracy_ci_high"):  # the same number, the same interval
            assert table.loc[model, column] == pytest.approx(float(per_model.loc[model, column]), abs=1e-15)
        assert (table.loc[model, "n"], table.loc[model, "n_unseen"]) == (per_model.loc[model, "n"],
                                                                         per_model.loc[model, "n_unseen"])


def test_stored_explanations_are_fresh_until_an_input_changes(run, monkeypatch):
    calls = []
    real = error_types.explain_predictions
    monkeypatch.setattr(error_types, "explain_predictions", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = ensure_explained(run, RAW)
    assert len(calls) == 1 and read_explained(run, RAW) is not None
    pd.testing.assert_frame_equal(ensure_explained(run, RAW), first)
    assert len(calls) == 1  # read back
    record(run, "tag", _file("fail"), "wrong-class")
    assert read_explained(run, RAW) is None
    assert _by_image(ensure_explained(run, RAW), "m1k")["fail"][0] == "label" and len(calls) == 2
    extra = _predictions("m1k", 3, "imagenet-1k").iloc[:1].assign(model="m_new")
    run.append_predictions(extra)  # a new prediction part
    assert read_explained(run, RAW) is None
    assert "m_new" in set(ensure_explained(run, RAW)["model"]) and len(calls) == 3
    write_table(_label_issues([("m1k", _file("related"), TABBY, JAGUAR, 0.01, True)]), label_issues_path(run),
                LABEL_ISSUES_SCHEMA, table="label issues")  # the probe ran again
    assert read_explained(run, RAW) is None
    got = _by_image(ensure_explained(run, RAW), "m1k")
    assert got["related"][0] == "label" and got["probe"][0] == "fine-grained" and len(calls) == 4
    ensure_explained(run, RAW)
    assert len(calls) == 4
    # a run that cannot be written still gets its rows
    monkeypatch.setattr(error_types, "write_explained", lambda *a, **k: (_ for _ in ()).throw(StoreError("read-only")))
    rows = ensure_explained(run, CURATED)
    assert len(rows) and len(calls) == 5 and read_explained(run, CURATED) is None


@pytest.mark.parametrize("view", [RAW, CURATED])
def test_the_table_from_the_four_stored_columns_equals_the_table_from_every_row(run, monkeypatch, view):
    """explain.error_types.explained_for_table (what Results reads: four columns decoded, not every
    explanation) gives error_type_table the same table to the last bit: before anything is stored (cut
    from ensure_explained's rows, which it stores), then from the stored file without typing again."""
    from explain.error_types import TABLE_COLUMNS, explained_for_table

    predictions = run.usable_predictions()
    calls = []
    real = error_types.explain_predictions
    monkeypatch.setattr(error_types, "explain_predictions", lambda *a, **k: calls.append(1) or real(*a, **k))
    fresh = explained_for_table(run, view)
    assert list(fresh.columns) == list(TABLE_COLUMNS) and len(calls) == 1
    stored = explained_for_table(run, view)
    assert len(calls) == 1  # read back: four columns of the stored file
    expected = error_type_table(ensure_explained(run, view), families=predictions, level=0.9)
    for rows in (fresh, stored):
        pd.testing.assert_frame_equal(error_type_table(rows, families=predictions, level=0.9), expected,
                                      check_exact=True)
    record(run, "tag", _file("fail"), "wrong-class")  # an input changes: typed again, never the stale file
    after = explained_for_table(run, view)
    assert len(calls) == 2  # typed again (and stored), never the stale file
    pd.testing.assert_frame_equal(error_type_table(after, families=predictions),
                                  error_type_table(ensure_explained(run, view), families=predictions), check_exact=True)


def test_hostile_text_stays_text_and_the_csv_exports_are_neutralised():
    run = RunStore().create_run(RunInfo(run_id="hostile"))  # uploaded predictions: no manifest, any image id
    image = '=HYPERLINK("http://e.vil","x")'
    run.append_predictions(conform(pd.DataFrame({
        "model": "m", "image": [image, "plain"], "true_wnid": TABBY, "pred_wnid": [TIGER_CAT, ESPRESSO],
        "status": "ok"}), PREDICTION_SCHEMA, table="predictions"))
    record(run, "tag", image, "not-a-photo", note=HOSTILE_NOTE)
    record(run, "tag", image, HOSTILE_TAG)
    explained = ensure_explained(run, RAW)
    reason = explained.loc[explained["image"] == image, "error_reason"].iloc[0]
    assert reason == f"tagged not-a-photo (also {HOSTILE_TAG}): {HOSTILE_NOTE}"  # the text as typed: pages escape it
    # a predictions file made by hand (python -m explain metrics FILE) may name any model
    model = "@SUM(1+1)*cmd|' /C calc'!A0"
    by_hand = explain_predictions(run.usable_predictions().assign(model=model), image_flags(run, RAW))
    assert by_hand["error_reason"].iloc[0] == reason
    for table, expected in ((explained, f"'{image}"), (by_hand, f"'{model}"), (error_type_table(by_hand), f"'{model}")):
        cells = [c for row in csv.reader(io.StringIO(table_to_csv_bytes(table).decode("utf-8"))) for c in row]
        assert expected in cells and not [c for c in cells if c[:1] in ("=", "+", "-", "@")]


def test_the_vocabulary_of_types():
    assert ERROR_TYPES == ("label", "duplicate", "unseen", "fine-grained", "hierarchy", "part-whole", "related",
                           "model-failure")
    colours = list(ERROR_TYPE_COLOURS.values())
    assert all(c.startswith("#") and len(c) == 7 for c in colours) and len(set(colours)) == len(colours)
    assert not set(colours) & set(RELATION_COLOURS.values())  # distinct from the relation colours
    assert [t for t in ERROR_TYPES if ERROR_TYPE_INFO[t].blame == "data"] == ["label", "duplicate"]
    assert ERROR_TYPE_INFO["model-failure"].blame == "model"
    assert all(ERROR_TYPE_INFO[t].doc and "\n" not in ERROR_TYPE_INFO[t].doc for t in ERROR_TYPES)
    assert {c: col.dtype for c, col in EXPLAINED_COLUMNS.items()} == EXPLAINED_SCHEMA
    assert all(col.doc for col in ERROR_TYPE_TABLE.values())
    empty = explain_predictions(pd.DataFrame({"model": [], "true_wnid": [], "pred_wnid": []}))
    assert list(empty.columns) == list(EXPLAINED_SCHEMA) and empty.empty
    assert error_type_table(empty).empty


def test_the_data_problem_sentence_gives_each_accuracy_with_its_interval():
    row = {"model": "m", "label_count": 1, "duplicate_count": 1, "n_mistakes": 11, "accuracy": 19 / 30,
           "accuracy_ci_low": 0.4551, "accuracy_ci_high": 0.7812, "accuracy_clean": 19 / 28,
           "accuracy_clean_ci_low": pd.NA, "accuracy_clean_ci_high": pd.NA}
    assert error_types.data_problem_sentence(row) == ("m: 2 of 11 mistakes are label or duplicate problems; accuracy "
                                                      "63.3% [45.5, 78.1] -> 67.9% without them")
    row.update(accuracy=np.nan, accuracy_ci_low=np.nan, accuracy_ci_high=np.nan)
    assert error_types.data_problem_sentence(row).endswith("accuracy NA -> 67.9% without them")
    row.update(label_count=1, duplicate_count=0)  # one: singular; none: no arrow from a number to itself
    assert error_types.data_problem_sentence(row) == ("m: 1 of 11 mistakes is a label or duplicate problem; accuracy "
                                                      "NA -> 67.9% without it")
    row.update(label_count=0, accuracy=19 / 30, accuracy_ci_low=0.4551, accuracy_ci_high=0.7812)
    assert error_types.data_problem_sentence(row) == ("m: none of its 11 mistakes is a label or duplicate problem; "
                                                      "accuracy 63.3% [45.5, 78.1]")
