"""Everything the Image page shows of one image (issue 24 item 1), computed here so the page only
draws it: every model's top-5 with names, probabilities and the WordNet relation of each guess to
the truth, the mistake's error type and reason, the image's provenance (URL, search term, rank,
engine), its near duplicates in the run and its curation history.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.curation import Curation
from core.phash import NEAR_DUPLICATE_DISTANCE, hamming, parse_phashes
from core.runstore import TOP_K
from .browse import _relations

PROVENANCE_FIELDS = {"source": "Engine or source", "search_term": "Search term", "rank": "Rank in the results",
                     "url": "URL", "fetched_at": "Fetched", "original_name": "Imported from", "wnid": "Stored under",
                     "width": "Width", "height": "Height", "format": "Format", "bytes": "Bytes",
                     "other_wnids": "Also found for", "duplicate_of": "Duplicate of"}


def model_rows(table: pd.DataFrame, image: str) -> pd.DataFrame:
    """The image's rows of an annotated image table (explain.browse.annotate), one per model in
    the table's order, with ``relation_k`` beside each ``pred_wnid_k``: the relation of that guess
    to the image's true class in this view (explain.vocabulary.RELATIONS; NA for an empty rank)."""
    rows = table[table["image"] == image].reset_index(drop=True)
    if rows.empty:
        return rows
    for k in range(1, TOP_K + 1):
        rows[f"relation_{k}"] = pd.array(_relations(rows["true_wnid"].astype("string").array,
                                                    rows[f"pred_wnid_{k}"].astype("string").array), dtype="string")
    return rows


def provenance(manifest: pd.DataFrame, image: str) -> dict[str, str]:
    """Where the image came from: the manifest's fields of :data:`PROVENANCE_FIELDS` that are set,
    as text (outside text: escape it where Markdown is read, never render it as a link target)."""
    rows = manifest[manifest["file"] == image]
    if rows.empty:
        return {}
    row = rows.iloc[-1]
    return {label: str(row[column]) for column, label in PROVENANCE_FIELDS.items()
            if column in row.index and not pd.isna(row[column]) and str(row[column]) != ""}


def near_duplicates(manifest: pd.DataFrame, image: str, threshold: int = NEAR_DUPLICATE_DISTANCE) -> pd.DataFrame:
    """The run's other stored images whose perceptual hash is at most ``threshold`` bits from the
    image's (core.phash: the same parsing and distance as the ``duplicate`` error type), closest
    first: ``file``, ``wnid``, ``distance``, ``status``; empty when the image has no pHash."""
    empty = pd.DataFrame({"file": pd.Series(dtype="string"), "wnid": pd.Series(dtype="string"),
                          "distance": pd.Series(dtype="int64"), "status": pd.Series(dtype="string")})
    mine = manifest[manifest["file"] == image]
    target, _ = parse_phashes(mine["phash"].tolist()[-1:] if len(mine) and "phash" in mine else [])
    if not len(target):
        return empty
    stored = manifest[manifest["file"].notna() & (manifest["file"] != image)]
    values, rows = parse_phashes(stored["phash"].tolist())
    if not len(values):
        return empty
    near = stored.iloc[rows].assign(distance=hamming(values, target[0]).astype(np.int64))
    near = near[near["distance"] <= threshold].sort_values(["distance", "file"], kind="stable")
    return near[["file", "wnid", "distance", "status"]].astype({"file": "string", "wnid": "string",
                                                                 "status": "string"}).reset_index(drop=True)


def history(curation: Curation, image: str) -> list[dict]:
    """The log's entries that named the image, oldest first: seq, time, what (one line), note, by,
    undone (taken back since), images (how many the entry named) — its curation history."""
    out = []
    for seq in curation.history.get(image, ()):
        entry = curation.entry(seq)
        if entry is None:
            continue
        out.append({"seq": seq, "time": entry.time, "what": entry.what,
                    "note": entry.note, "by": entry.by, "undone": seq in curation.undone,
                    "images": len(entry.images)})
    return out
