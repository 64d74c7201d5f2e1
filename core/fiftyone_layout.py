"""How WildLens lays a run's images and predictions out for FiftyOne, and reads FiftyOne's files
back: the names both sides use, on the ground floor, so that crawl's export writes them and
explain's import reads them without importing each other (issue 24 item 6).

Two of FiftyOne's documented on-disk formats are involved:

``FiftyOneImageClassificationDataset`` (what ``python -m crawl export --format fiftyone`` writes;
``fiftyone.Dataset.from_dir(DIR, dataset_type=fiftyone.types.FiftyOneImageClassificationDataset)``
loads it)::

    DIR/data/<uuid>.<ext>           the images (uuid: the image's content hash, 16 hex digits)
    DIR/labels.json                 {"classes": null, "labels": {"<uuid>": <target>, ...}}

where a target is ``{"label": <wnid>, "attributes": {...}}``. FiftyOne's importer
(``FiftyOneImageClassificationDatasetImporter`` with ``FiftyOneImageClassificationSampleParser``)
turns it into ``Classification(label=..., confidence=..., **attributes)`` in the sample field
``ground_truth``: the attributes become the ground truth's own fields. The format carries one
classification field per sample, so everything else a sample has in WildLens rides on the ground
truth as attributes (:data:`SAMPLE_ATTRIBUTES`, and per model the :data:`MODEL_SUFFIXES` after the
model's key): ``ground_truth.resnet50_label``, ``ground_truth.resnet50_relation`` and so on,
which FiftyOne's App shows and filters. Why this format and not ``FiftyOneDataset`` (one
``Classification`` field per model): ``FiftyOneDataset`` is FiftyOne's database dump
(``samples.json`` of ``{"_id": {"$oid": ...}, "_cls": ...}`` documents and a ``metadata.json``
tied to the FiftyOne version that wrote it), which FiftyOne migrates between versions; the
classification format is the documented, stable one for image classification.

``FiftyOneDataset`` (what a FiftyOne user exports a dataset with ground truth *and* prediction
fields as: ``dataset.export(DIR, dataset_type=fiftyone.types.FiftyOneDataset)``; the
classification format would keep one field)::

    DIR/data/<file>.<ext>
    DIR/metadata.json               the dataset's description and field schema
    DIR/samples.json                {"samples": [{"filepath": "data/x.jpg", "ground_truth":
                                      {"_cls": "Classification", "label": ..., <attributes>},
                                      "resnet50": {"_cls": "Classification", "label": ...,
                                      "confidence": 0.9}, ...}, ...]}

``python -m explain metrics DIR`` reads both: the field :data:`GROUND_TRUTH_FIELD` is the truth,
every other ``Classification`` field a model's top-1, and WildLens's own attributes on the ground
truth (an export of ours, loaded into FiftyOne and exported again in either format) give the
models they hold.
"""
from __future__ import annotations

import re

LABELS_FILE = "labels.json"  # FiftyOneImageClassificationDataset
DATA_DIR = "data"
SAMPLES_FILE = "samples.json"  # FiftyOneDataset
METADATA_FILE = "metadata.json"
GROUND_TRUTH_FIELD = "ground_truth"  # FiftyOne's default label field of an import
CLASSIFICATION_CLS = "Classification"

# Attributes of the ground truth that describe the sample (the image, where it came from).
CLASS_NAME_ATTR = "class_name"  # the truth's display name (core.names.class_name)
IMAGE_ATTR = "wildlens_image"  # the run's name of the image (the manifest's file)
SAMPLE_ATTRIBUTES = (CLASS_NAME_ATTR, IMAGE_ATTR, "collected_wnid", "relabelled", "url", "search_term", "rank",
                     "engine", "curation_tags")
# Per model, '<key>_<suffix>'. 'model' holds the model's id as WildLens stores it (the key is the id
# made a valid FiftyOne field name: '.', '/' and '-' become '_').
MODEL_SUFFIXES = ("model", "label", "name", "confidence", "top5", "top5_confidence", "label_space", "status",
                  "reason", "relation", "severity", "error_type")
# A Classification's own fields in samples.json; every other key of it is an attribute.
CLASSIFICATION_FIELDS = ("_id", "_cls", "id", "tags", "label", "confidence", "logits")

_NOT_FIELD_CHARACTER = re.compile(r"[^0-9A-Za-z_]")


def model_attribute(key: str, suffix: str) -> str:
    return f"{key}_{suffix}"


def model_keys(models) -> dict[str, str]:
    """Model id -> the key its attributes start with: the id with every character a FiftyOne
    field name cannot hold ('.', '$' end a MongoDB key; '/', '-' are awkward) made '_', never
    starting with '_' (FiftyOne's private fields) or a digit. Two ids whose attributes would share a
    name ('a' with suffix 'top5_confidence' and 'a_top5' with suffix 'confidence', or 'r.1' and
    'r_1') get 'model<i>' instead, so no attribute is written twice; the '_model' attribute keeps
    the id either way."""
    taken = set(SAMPLE_ATTRIBUTES)
    keys: dict[str, str] = {}
    for i, model in enumerate(dict.fromkeys(models), start=1):
        key = _NOT_FIELD_CHARACTER.sub("_", str(model)).strip("_") or "model"
        if key[0].isdigit():
            key = "m" + key
        names = {model_attribute(key, s) for s in MODEL_SUFFIXES}
        if names & taken:
            key = f"model{i}"
            while {model_attribute(key, s) for s in MODEL_SUFFIXES} & taken:
                key += "_"
            names = {model_attribute(key, s) for s in MODEL_SUFFIXES}
        taken |= names
        keys[model] = key
    return keys


def models_in(attributes: dict) -> list[tuple[str, str]]:
    """(key, model id) of each model a ground truth's attributes hold, in their order: a key whose
    '_model' attribute is text and whose '_label' attribute is there (a user's own 'car_model'
    attribute names no model of ours)."""
    found = []
    for name, value in attributes.items():
        if isinstance(name, str) and name.endswith("_model") and isinstance(value, str) and value:
            key = name[: -len("_model")]
            if key and model_attribute(key, "label") in attributes:
                found.append((key, value))
    return found
