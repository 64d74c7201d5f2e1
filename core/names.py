"""Class names beside class ids: every table WildLens exports with a wnid column also has the name.

Identity stays the wnid (names are not unique: two 'crane's); the name is for the reader. A name
is ImageNet's display name (its first lemma, ``core.labels.LabelSpace.display_name``), and for a
wnid outside the label space the WordNet 3.0 name of the same synset (ImageNet-21k's list, then
the synset's first lemma), so a prediction of an ImageNet-21k model is named too. A text that is
not a wnid (a stray value in an uploaded file) keeps itself as its name; NA stays NA.

:func:`with_names` adds, right after each wnid column, its name column::

    true_wnid -> true_name      pred_wnid -> pred_name      pred_wnid_2..5 -> pred_name_2..5
    lcs_wnid -> lcs_name        nearest_seen_wnid -> nearest_seen_name      wnid -> name

A name column that the table already has is left as it is. Names are looked up once per distinct
wnid of the table, not once per row (a per-class table over ImageNet-1k has 30,000 rows).
"""
from __future__ import annotations

import functools
import re

import pandas as pd

from .labels import DEFAULT_LABEL_SPACE, get_label_space

_WNID_COLUMN = re.compile(r"^(?:(?P<prefix>.+)_)?wnid(?P<suffix>_[0-9]+)?$")


def name_column(column: str) -> str | None:
    """The name column that goes with a wnid column ('pred_wnid_2' -> 'pred_name_2'), else None."""
    match = _WNID_COLUMN.match(str(column))
    if not match:
        return None
    prefix, suffix = match.group("prefix"), match.group("suffix") or ""
    return f"{prefix}_name{suffix}" if prefix else f"name{suffix}"


@functools.lru_cache(maxsize=65536)
def _name(wnid: str, label_space: str) -> str:
    try:
        space = get_label_space(label_space)
    except Exception:  # an unknown label space named in run.json: ImageNet-1k's names
        space = get_label_space(DEFAULT_LABEL_SPACE)
    try:
        # display_name reads ImageNet's lemma list (every ImageNet-21k synset), then WordNet.
        return space.display_name(wnid)
    except Exception:  # not a wnid, or an offset WordNet 3.0 lacks
        return wnid


def class_name(wnid, label_space: str = DEFAULT_LABEL_SPACE):
    """ImageNet's display name of a class ('tabby' for n02123045), falling back to WordNet for a wnid
    outside ``label_space``; the text itself for a non-wnid, NA for NA."""
    if wnid is None or (not isinstance(wnid, str) and pd.isna(wnid)):
        return pd.NA
    return _name(str(wnid), label_space or DEFAULT_LABEL_SPACE)


def names_of(values: pd.Series, label_space: str = DEFAULT_LABEL_SPACE) -> pd.Series:
    """The names of a column of wnids, as a 'string' series on the same index (one lookup per distinct wnid)."""
    text = values.astype("string")
    lookup = {w: class_name(w, label_space) for w in text.dropna().unique()}
    return text.map(lookup).astype("string")


def with_names(df: pd.DataFrame, label_space: str = DEFAULT_LABEL_SPACE) -> pd.DataFrame:
    """``df`` with a name column right after each wnid column (module docstring); ``df`` itself when
    there is nothing to add. The input is never modified."""
    present = {str(c) for c in df.columns}
    inserts = []  # (position after the wnid column, name column, its wnid column's position)
    for i, column in enumerate(df.columns):
        target = name_column(column)
        if target and target not in present:
            present.add(target)
            inserts.append((i + 1, target, i))
    if not inserts:
        return df
    out = df.copy(deep=False)
    for at, target, source in reversed(inserts):  # from the right: earlier positions stay valid
        out.insert(at, target, names_of(df.iloc[:, source], label_space))
    return out
