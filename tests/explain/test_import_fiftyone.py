"""Predictions from FiftyOne (issue 24 item 6): `python -m explain metrics DIR` reads a FiftyOne
export as it reads a predictions CSV, and gives the same tables as the equivalent CSV.

data/fiftyone_dataset/ is what FiftyOne 1.22.1 itself wrote (``dataset.export(DIR,
dataset_type=fo.types.FiftyOneDataset)``, images left out) for 4 images with a ``ground_truth``
field and two prediction fields: ``resnet50`` (wnids, with confidences) and ``clip`` (ImageNet class
names, missing on the third image)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from crawl.export import export_run
from explain.cli import main as explain_main
from core.runstore import RunStore
from explain.export import import_predictions_as_run, read_predictions_file
from explain.fiftyone_import import MAX_FIFTYONE_JSON_BYTES
from explain.metrics import PredictionsError, compute_metric_tables
from tests.crawl.test_export import _curate, _make_run

FIXTURE = Path(__file__).parent / "data" / "fiftyone_dataset"
TABBY, TIGER_CAT, EGYPTIAN = "n02123045", "n02123159", "n02124075"
# The fixture's content, written out by hand: (model, image, truth, top-1, confidence).
EXPECTED = [("resnet50", "data/cat0.jpg", TABBY, TABBY, 0.91), ("clip", "data/cat0.jpg", TABBY, TABBY, 0.5),
            ("resnet50", "data/cat1.jpg", TABBY, TIGER_CAT, 0.55), ("clip", "data/cat1.jpg", TABBY, TIGER_CAT, 0.5),
            ("resnet50", "data/cat2.jpg", TIGER_CAT, TIGER_CAT, 0.72),
            ("resnet50", "data/cat3.jpg", EGYPTIAN, TABBY, 0.40), ("clip", "data/cat3.jpg", EGYPTIAN, EGYPTIAN, 0.5)]


def _expected_csv(path: Path) -> Path:
    """The fixture as a predictions CSV: model by model, the models in the order of their ids (the
    order the import gives: FiftyOne keeps none)."""
    rows = sorted(EXPECTED, key=lambda row: row[0])  # stable: each model's rows in sample order
    pd.DataFrame(rows, columns=["model", "image", "true_wnid", "pred_wnid", "prob_1"]).to_csv(path, index=False)
    return path


def _assert_same_tables(left, right):
    for name, df in left.as_dict().items():
        pd.testing.assert_frame_equal(df, right.as_dict()[name], obj=name)


def test_fiftyones_own_dataset_export_reads_as_its_predictions():
    df, line_of_row = read_predictions_file(FIXTURE)
    got = sorted(zip(df["model"], df["image"], df["true_wnid"], df["pred_wnid"], df["prob_1"].round(6)))
    assert got == sorted(EXPECTED)
    assert list(df["model"]) == ["clip"] * 3 + ["resnet50"] * 4  # models in the order of their ids
    assert line_of_row(0) == "sample 1 ('data/cat0.jpg') (model 'clip')"
    assert line_of_row(3) == "sample 1 ('data/cat0.jpg') (model 'resnet50')"
    same, _ = read_predictions_file(FIXTURE / "samples.json")  # the file itself too
    pd.testing.assert_frame_equal(df, same)


def test_a_fiftyone_export_becomes_a_run_like_a_predictions_file(tmp_path):
    run, tables = import_predictions_as_run(FIXTURE, RunStore(), title="from FiftyOne")
    expected = compute_metric_tables(read_predictions_file(_expected_csv(tmp_path / "same.csv"))[0])
    _assert_same_tables(tables, expected)
    assert run.info.models == ["clip", "resnet50"] and run.info.wnids == sorted({TABBY, TIGER_CAT, EGYPTIAN})


def test_explain_metrics_on_the_folder_writes_the_tables_of_the_equivalent_csv(tmp_path, capsys):
    csv = _expected_csv(tmp_path / "same.csv")
    assert explain_main(["metrics", str(FIXTURE), "--out", str(tmp_path / "from_fo"), "--no-ci"]) == 0
    from_fo = capsys.readouterr().out
    assert explain_main(["metrics", str(csv), "--out", str(tmp_path / "from_csv"), "--no-ci"]) == 0
    from_csv = capsys.readouterr().out
    assert from_fo.split("wrote")[0] == from_csv.split("wrote")[0]  # the printed per-model summary
    for name in ("per_model.csv", "per_class.csv", "confusions.csv"):
        assert (tmp_path / "from_fo" / name).read_bytes() == (tmp_path / "from_csv" / name).read_bytes(), name


def _export(tmp_path, raw=False):
    run, files = _make_run()
    _curate(run, files)
    out = tmp_path / "fo"
    export_run(run, out, "fiftyone", view="raw" if raw else "curated")
    return run, files, out


def _curated_predictions(run, files):
    """The run's predictions with the curation of tests.crawl.test_export._curate applied by hand."""
    rows = run.read_predictions()
    rows = rows[rows["image"] != files[3]].copy()
    rows.loc[rows["image"].isin(files[:2]), "true_wnid"] = TIGER_CAT
    rows.loc[rows["image"] == files[4], "true_wnid"] = "n02123394"
    return rows


def _key(df):
    columns = ["model", "image", "true_wnid", "pred_wnid", *(f"pred_wnid_{k}" for k in range(2, 6)),
               *(f"prob_{k}" for k in range(1, 6)), "label_space", "status"]
    return df[columns].astype({c: "string" for c in columns if not c.startswith("prob")}) \
        .astype({f"prob_{k}": "Float64" for k in range(1, 6)}).sort_values(["model", "image"]).reset_index(drop=True)


def test_a_wildlens_export_reads_back_as_the_runs_curated_predictions(tmp_path):
    run, files, out = _export(tmp_path)
    df, _ = read_predictions_file(out)
    expected = _curated_predictions(run, files)
    pd.testing.assert_frame_equal(_key(df), _key(expected))
    _assert_same_tables(compute_metric_tables(df, cache_dir=False, ci=None),
                        compute_metric_tables(expected, cache_dir=False, ci=None))
    # the labels.json alone reads the same
    pd.testing.assert_frame_equal(read_predictions_file(out / "labels.json")[0], df)


def test_a_wildlens_export_loaded_into_fiftyone_and_exported_again_reads_the_same(tmp_path):
    """FiftyOne turns labels.json's attributes into the ground truth's own fields, and its
    FiftyOneDataset export writes them inside the ground_truth document (checked with FiftyOne
    1.22.1); samples.json here is built the same way from our labels.json."""
    _, _, out = _export(tmp_path)
    labels = json.loads((out / "labels.json").read_text())
    samples = [{"_id": {"$oid": f"{i:024x}"}, "filepath": f"data/{uuid}.png", "tags": [], "_media_type": "image",
                "ground_truth": {"_id": {"$oid": f"{i + 100:024x}"}, "_cls": "Classification", "tags": [],
                                 "label": target["label"], **target["attributes"]}}
               for i, (uuid, target) in enumerate(labels["labels"].items())]
    again = tmp_path / "again"
    again.mkdir()
    (again / "samples.json").write_text(json.dumps({"samples": samples}))
    pd.testing.assert_frame_equal(_key(read_predictions_file(again)[0]), _key(read_predictions_file(out)[0]))


def test_class_names_resolve_exactly_and_ambiguous_ones_are_refused(tmp_path):
    labels = {"classes": None, "labels": {
        "a": {"label": "tabby cat", "attributes": {"m_model": "m", "m_label": "crane (wading bird)"}},
        "b": {"label": "Egyptian_cat", "attributes": {"m_model": "m", "m_label": "n02123045"}}}}
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(labels))
    df, _ = read_predictions_file(path)
    assert list(zip(df["true_wnid"], df["pred_wnid"])) == [(TABBY, "n02012849"), (EGYPTIAN, TABBY)]
    labels["labels"]["b"]["attributes"]["m_label"] = "crane"
    path.write_text(json.dumps(labels))
    with pytest.raises(PredictionsError, match=r"sample 'b', model 'm': label 'crane' names 2 classes .*n02012849 "
                                               r"'crane \(wading bird\)'"):
        read_predictions_file(path)


def test_a_classification_labels_json_with_indices_and_classes(tmp_path):
    labels = {"classes": ["tabby", TIGER_CAT], "labels": {
        "x": {"label": 0, "attributes": {"r_model": "r", "r_label": TIGER_CAT, "r_confidence": 0.7}},
        "y": {"label": 1, "attributes": {"r_model": "r", "r_label": TIGER_CAT, "r_confidence": 0.9}}}}
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    df, _ = read_predictions_file(tmp_path)
    assert list(df["true_wnid"]) == [TABBY, TIGER_CAT] and list(df["image"]) == ["x", "y"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, content, message", [
    ("labels.json", "{not json", "is not JSON"),
    ("labels.json", json.dumps({"classes": None, "labels": {"u1": "no such class"}}),
     "sample 'u1': label 'no such class' is no wnid and no class name of imagenet-1k"),
    ("labels.json", json.dumps({"classes": None, "labels": {"u1": "tabby"}}),
     "holds the ground truth of 1 samples but no predictions"),
    ("labels.json", json.dumps({"classes": None, "labels": {"u1": ["tabby", "lynx"]}}), "a multilabel target"),
    ("labels.json", json.dumps([1, 2]), "is not a FiftyOne export"),
    ("labels.json", "[" * 100000 + "]" * 100000, "nested too deeply"),
    ("samples.json", json.dumps({"samples": [{"filepath": "a.jpg", "gt": {"_cls": "Classification", "label": "tabby"},
                                              "m": {"_cls": "Classification", "label": "tabby"}}]}),
     "no sample has a 'ground_truth' Classification field .*found: gt, m"),
    ("samples.json", json.dumps({"samples": [{"filepath": "a.jpg", "ground_truth": {"_cls": "Classification",
                                                                                    "label": "tabby"},
                                              "m": {"_cls": "Classification", "label": "tabby",
                                                    "confidence": "high"}}]}),
     "confidence 'high' is not a number"),
])
def test_bad_fiftyone_input_is_one_line(tmp_path, capsys, name, content, message):
    folder = tmp_path / "export"
    folder.mkdir()
    _write(folder / name, content)
    with pytest.raises(PredictionsError, match=message) as info:
        read_predictions_file(folder)
    assert "\n" not in str(info.value)
    assert explain_main(["metrics", str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_huge_labels_json_is_refused_before_reading(tmp_path):
    path = tmp_path / "labels.json"
    with open(path, "wb") as handle:
        handle.truncate(2_000_000_000)  # 2 GB, sparse: refused by its size, never read
    assert MAX_FIFTYONE_JSON_BYTES < 2_000_000_000
    with pytest.raises(PredictionsError, match="more than the 512 MiB this reads"):
        read_predictions_file(path)


def test_a_fifo_and_an_empty_folder_are_refused(tmp_path):
    os.mkfifo(tmp_path / "labels.json")
    with pytest.raises(PredictionsError, match="FIFO"):
        read_predictions_file(tmp_path)  # the folder's labels.json is the FIFO: refused, never waited on
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PredictionsError, match="a folder without samples.json or labels.json"):
        read_predictions_file(empty)


@pytest.mark.parametrize("number", ["1" + "0" * 400, "1" + "0" * 5000])
def test_a_number_out_of_range_is_one_line(tmp_path, number):
    """An integer of 400 digits as a confidence (float() overflows) or of 5,000 (JSON's digit limit):
    one line naming the file, never a traceback (hostile campaign)."""
    from explain.fiftyone_import import read_fiftyone_predictions as read_fiftyone
    from explain.metrics import PredictionsError

    path = tmp_path / "labels.json"
    path.write_text('{"classes": null, "labels": {"a": {"label": "n02123045", "attributes": {'
                    '"wildlens_m0_model": "m", "wildlens_m0_label": "n02123045", "wildlens_m0_confidence": '
                    + number + '}}}}')
    with pytest.raises(PredictionsError) as info:
        read_fiftyone(path)
    assert "\n" not in str(info.value) and "labels.json" in str(info.value)
