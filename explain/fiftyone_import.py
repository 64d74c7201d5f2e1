"""Predictions from FiftyOne (issue 24 item 6): ``python -m explain metrics DIR`` (and every reader of
a predictions file, ``explain.export.read_predictions_file``) accepts a FiftyOne export wherever it
accepts a predictions file, and reads it into the predictions schema (model, image, true_wnid,
pred_wnid, prob_1, ...).

What is read (the layouts, and why two, are in :mod:`core.fiftyone_layout`):

- a ``FiftyOneDataset`` export, the format FiftyOne writes a dataset with ground truth and
  prediction fields in (``dataset.export(DIR, dataset_type=fo.types.FiftyOneDataset)``): its folder
  or its ``samples.json``. The field ``ground_truth`` is the truth; every other ``Classification``
  field is a model (the field's name is the model's id) whose top-1 is its ``label`` and whose
  ``prob_1`` is its ``confidence``;
- a ``FiftyOneImageClassificationDataset``: its folder or its ``labels.json``. Its targets are the
  truth (a label, a class index into ``classes``, or ``{"label", "confidence", "attributes"}``); the
  format holds one field, so the predictions come from the ground truth's attributes that
  ``python -m crawl export --format fiftyone`` writes (each model's top-1, confidence and top-5).
  A ``labels.json`` with ground truth alone is refused with what to export instead.

In both, WildLens's attributes on the ground truth (an export of ours, loaded into FiftyOne and
exported again in either format) give their models too, and ``wildlens_image`` the image's name
in its run. Without it, a sample's image is its key (the uuid) or its ``filepath``. Rows come
model by model, the models in the order of their ids (FiftyOne keeps no order of fields or
attributes: two exports of one dataset list them differently), each in the file's sample order.

Labels are wnids ('n02123045') or ImageNet-1k class names: a lemma of exactly one class ('tabby',
'tabby cat'), or WildLens's name of a class whose plain name is ambiguous ('crane (wading bird)').
'crane' alone names two classes and is refused, as is any text that names no class: the sample
and the label are named, with what to write instead. A multilabel target (a list) is refused (one
true class per image). An unlabeled sample (no ground truth) has nothing to measure and is left out.

Bad input is one line (:class:`explain.metrics.PredictionsError`): not JSON, nested too deep,
neither layout, a file above :data:`MAX_FIFTYONE_JSON_BYTES` (a JSON file is parsed whole, at about
ten times its size in memory), a FIFO or device (read through ``core.userfile``).
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pandas as pd

from core.fiftyone_layout import (CLASSIFICATION_CLS, CLASSIFICATION_FIELDS, GROUND_TRUTH_FIELD, IMAGE_ATTR,
                                  LABELS_FILE, SAMPLES_FILE, model_attribute, models_in)
from core.labels import DEFAULT_LABEL_SPACE, get_label_space
from core.runstore import TOP_K
from core.wordnet import is_wnid

from .metrics import PredictionsError

MAX_FIFTYONE_JSON_BYTES = 512 << 20
_PROB_COLUMNS = tuple(f"prob_{k}" for k in range(1, TOP_K + 1))
_TOP_COLUMNS = ("pred_wnid", *(f"pred_wnid_{k}" for k in range(2, TOP_K + 1)))


def is_fiftyone_source(path: Path | str) -> bool:
    """Whether ``path`` is read as a FiftyOne export: a folder, or a .json file."""
    path = Path(path)
    return path.is_dir() or path.suffix.lower() == ".json"


def _normalise(text: str) -> str:
    return " ".join(re.sub(r"[_\-]+", " ", text).split()).casefold()


@functools.lru_cache(maxsize=4)
def _name_index(label_space: str) -> dict[str, tuple[str, ...]]:
    """Normalised class name -> the wnids of the label space it names: every ImageNet lemma, the
    lemma line ('tabby, tabby cat') and WildLens's name with its sense ('crane (wading bird)')."""
    from core.names import class_name

    space = get_label_space(label_space)
    index: dict[str, list[str]] = {}
    for wnid in space.wnids:
        lemmas = space.lemmas(wnid)
        for name in (str(class_name(wnid, label_space)), lemmas, *lemmas.split(",")):
            key = _normalise(name)
            if key and wnid not in index.setdefault(key, []):
                index[key].append(wnid)
    return {key: tuple(wnids) for key, wnids in index.items()}


class _Labels:
    """Label -> wnid, each distinct label resolved once; PredictionsError naming where it was met."""

    def __init__(self, name: str, label_space: str = DEFAULT_LABEL_SPACE):
        self.name, self.label_space, self.known = name, label_space, {}

    def wnid(self, label, where: str) -> str:
        if isinstance(label, str) and label in self.known:
            return self.known[label]
        if isinstance(label, str) and is_wnid(label.strip()):
            wnid = label.strip()
        elif isinstance(label, str) and label.strip():
            from core.names import class_name

            found = _name_index(self.label_space).get(_normalise(label), ())
            if len(found) > 1:
                options = ", ".join(f"{w} '{class_name(w, self.label_space)}'" for w in found)
                raise PredictionsError(f"{self.name}: {where}: label {label[:60]!r} names {len(found)} classes of "
                                       f"{self.label_space} ({options}); relabel it in FiftyOne to the wnid or that "
                                       "name (e.g. dataset.map_labels) and export again.")
            if not found:
                raise PredictionsError(f"{self.name}: {where}: label {label[:60]!r} is no wnid and no class name of "
                                       f"{self.label_space}; labels are wnids (n02123045) or ImageNet class names "
                                       "('tabby'): map them in FiftyOne (dataset.map_labels) and export again.")
            wnid = found[0]
        else:
            raise PredictionsError(f"{self.name}: {where}: label {str(label)[:60]!r} is not a class name or wnid "
                                   "(text such as n02123045 or 'tabby').")
        self.known[label] = wnid
        return wnid


def _confidence(value, name: str, where: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PredictionsError(f"{name}: {where}: confidence {str(value)[:40]!r} is not a number.")
    try:
        return float(value)
    except OverflowError:  # an integer of 400 digits: no probability (hostile campaign: a traceback)
        raise PredictionsError(f"{name}: {where}: confidence is a number out of range; give a probability from 0 "
                               "to 1.") from None


def _attribute_rows(attributes: dict, truth: str, image: str, labels: _Labels, where: str) -> list[dict]:
    """The rows of the models whose top-1 WildLens's attributes on a ground truth hold."""
    rows = []
    for key, model in models_in(attributes):
        at = f"{where}, model {model!r}"
        status = attributes.get(model_attribute(key, "status")) or "ok"
        label = attributes.get(model_attribute(key, "label"))
        row = {"model": model, "image": image, "true_wnid": truth, "status": str(status)}
        if label is None and status == "ok":
            continue  # no prediction of this image by this model
        if label is not None:
            row["pred_wnid"] = labels.wnid(label, at)
        row["prob_1"] = _confidence(attributes.get(model_attribute(key, "confidence")), labels.name, at)
        top = attributes.get(model_attribute(key, "top5"))
        top_conf = attributes.get(model_attribute(key, "top5_confidence"))
        if isinstance(top, list) and len(top) > 1:
            for k, value in enumerate(top[1:TOP_K], start=2):
                row[f"pred_wnid_{k}"] = None if value is None else labels.wnid(value, at)
            if isinstance(top_conf, list):
                for k, value in enumerate(top_conf[1:TOP_K], start=2):
                    row[f"prob_{k}"] = _confidence(value, labels.name, at)
        space = attributes.get(model_attribute(key, "label_space"))
        if isinstance(space, str) and space:
            row["label_space"] = space
        reason = attributes.get(model_attribute(key, "reason"))
        if isinstance(reason, str):
            row["reason"] = reason
        rows.append(row)
    return rows


def _target_truth(target, classes, labels: _Labels, where: str):
    """(truth wnid or None for an unlabeled sample, the target's attributes)."""
    if target is None:
        return None, {}
    if isinstance(target, list):
        raise PredictionsError(f"{labels.name}: {where}: a multilabel target ({len(target)} classes); WildLens "
                               "measures one true class per image: export a Classification field, not Classifications.")
    attributes = {}
    if isinstance(target, dict):
        attributes = target.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise PredictionsError(f"{labels.name}: {where}: 'attributes' is not an object.")
        target = target.get("label")
        if target is None:
            return None, attributes
    if isinstance(target, int) and not isinstance(target, bool) and classes is not None:
        if not 0 <= target < len(classes):
            raise PredictionsError(f"{labels.name}: {where}: class index {target} is outside 'classes' "
                                   f"({len(classes)} classes).")
        target = classes[target]
    return labels.wnid(target, where), attributes


def _from_labels_json(obj: dict, labels: _Labels) -> tuple[list[dict], list[str]]:
    classes = obj.get("classes")
    if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
        raise PredictionsError(f"{labels.name}: 'classes' is neither null nor a list of class names.")
    rows, where_of = [], []
    labelled = 0
    for key, target in obj["labels"].items():
        where = f"sample {str(key)[:60]!r}"
        truth, attributes = _target_truth(target, classes, labels, where)
        if truth is None:
            continue
        labelled += 1
        image = attributes.get(IMAGE_ATTR)
        found = _attribute_rows(attributes, truth, image if isinstance(image, str) and image else str(key), labels,
                                where)
        rows += found
        where_of += [f"{where} (model {r['model']!r})" for r in found]
    if labelled and not rows:
        raise PredictionsError(f"{labels.name} holds the ground truth of {labelled} samples but no predictions (a "
                               "FiftyOneImageClassificationDataset keeps one field); export the dataset with its "
                               "prediction fields as fiftyone.types.FiftyOneDataset and give that folder.")
    return rows, where_of


def _from_samples_json(obj: dict, labels: _Labels) -> tuple[list[dict], list[str]]:
    rows, where_of = [], []
    fields_seen: set[str] = set()
    truths = 0
    for number, sample in enumerate(obj["samples"], start=1):
        if not isinstance(sample, dict):
            raise PredictionsError(f"{labels.name}: sample {number} is not an object.")
        filepath = sample.get("filepath")
        where = f"sample {number} ({str(filepath)[:60]!r})"
        classifications = {name: value for name, value in sample.items()
                           if isinstance(name, str) and not name.startswith("_") and isinstance(value, dict)
                           and value.get("_cls") == CLASSIFICATION_CLS}
        fields_seen |= set(classifications)
        truth_field = classifications.pop(GROUND_TRUTH_FIELD, None)
        if truth_field is None or truth_field.get("label") is None:
            continue  # unlabeled: nothing to measure
        truths += 1
        truth = labels.wnid(truth_field.get("label"), f"{where}, field {GROUND_TRUTH_FIELD!r}")
        attributes = {k: v for k, v in truth_field.items() if k not in CLASSIFICATION_FIELDS}
        image = attributes.get(IMAGE_ATTR)
        image = image if isinstance(image, str) and image else str(filepath if filepath is not None else number)
        found = _attribute_rows(attributes, truth, image, labels, where)
        for name, value in classifications.items():
            if value.get("label") is None:
                continue  # this field holds no prediction for this sample
            at = f"{where}, field {name!r}"
            found.append({"model": name, "image": image, "true_wnid": truth, "status": "ok",
                          "pred_wnid": labels.wnid(value.get("label"), at),
                          "prob_1": _confidence(value.get("confidence"), labels.name, at)})
        rows += found
        where_of += [f"{where} (model {r['model']!r})" for r in found]
    if not truths:
        others = ", ".join(sorted(fields_seen)) or "none"
        raise PredictionsError(f"{labels.name}: no sample has a {GROUND_TRUTH_FIELD!r} Classification field (the "
                               f"truth; Classification fields found: {others}); rename the truth field in FiftyOne "
                               "(dataset.rename_sample_field(..., 'ground_truth')) and export again.")
    if not rows:
        raise PredictionsError(f"{labels.name}: {truths} samples have a ground truth but no prediction field (a "
                               "Classification field beside ground_truth); add your model's predictions and export "
                               "again.")
    return rows, where_of


def _source_file(path: Path) -> Path:
    if not path.is_dir():
        return path
    for name in (SAMPLES_FILE, LABELS_FILE):  # samples.json first: it holds every field
        candidate = path / name
        if candidate.exists() or candidate.is_symlink():
            return candidate
    raise PredictionsError(f"{path} is a folder without {SAMPLES_FILE} or {LABELS_FILE}; give a predictions file "
                           "(.csv, .tsv, .parquet) or a FiftyOne export folder (FiftyOneDataset or "
                           "FiftyOneImageClassificationDataset).")


def read_fiftyone_predictions(path: Path | str) -> tuple[pd.DataFrame, callable]:
    """A FiftyOne export (its folder, ``labels.json`` or ``samples.json``) as predictions, plus a
    function naming a row by its sample and model (see the module docstring)."""
    from core.userfile import UserFileError, read_user_bytes

    source = _source_file(Path(path))
    name = f"{Path(path).name}/{source.name}" if Path(path).is_dir() else source.name
    try:
        data = read_user_bytes(source, what=str(source), max_bytes=MAX_FIFTYONE_JSON_BYTES)
    except UserFileError as exc:
        raise PredictionsError(str(exc)) from None
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise PredictionsError(f"{name} is not UTF-8 text; give the JSON file FiftyOne wrote.") from None
    except json.JSONDecodeError as exc:
        raise PredictionsError(f"{name} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); give the "
                               f"{LABELS_FILE} or {SAMPLES_FILE} FiftyOne wrote.") from None
    except RecursionError:
        raise PredictionsError(f"{name} is nested too deeply to be a FiftyOne export.") from None
    except ValueError as exc:  # Python's 4,300-digit limit on integer literals
        raise PredictionsError(f"{name} holds a number that cannot be read ({str(exc)[:60]}); give the JSON file "
                               "FiftyOne wrote.") from None
    del data
    labels = _Labels(name)
    if isinstance(obj, dict) and isinstance(obj.get("samples"), list):
        rows, where_of = _from_samples_json(obj, labels)
    elif isinstance(obj, dict) and isinstance(obj.get("labels"), dict):
        rows, where_of = _from_labels_json(obj, labels)
    else:
        raise PredictionsError(f"{name} is not a FiftyOne export: neither a {LABELS_FILE} ({{\"classes\": ..., "
                               f"\"labels\": {{...}}}}) nor a {SAMPLES_FILE} ({{\"samples\": [...]}}).")
    # Models in the order of their ids, each model's rows in the file's sample order: FiftyOne keeps
    # no order of fields or attributes (its exports of one dataset list them in different orders),
    # and the tables list models in the order their rows come.
    order = sorted(range(len(rows)), key=lambda i: rows[i]["model"])
    rows, where_of = [rows[i] for i in order], [where_of[i] for i in order]
    df = pd.DataFrame(rows)
    for column in ("model", "image", "true_wnid", *_TOP_COLUMNS, "label_space", "status", "reason"):
        if column in df.columns:
            df[column] = df[column].astype("string")
    for column in _PROB_COLUMNS:
        if column in df.columns:
            df[column] = df[column].astype("Float64")
    order = ["model", "image", "true_wnid", *[c for c in (*_TOP_COLUMNS, *_PROB_COLUMNS, "label_space", "status",
                                                          "reason") if c in df.columns]]
    df = df[order]

    def line_of_row(row: int) -> str:
        return where_of[row] if 0 <= row < len(where_of) else f"row {row + 1}"

    return df, line_of_row
