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

**Ambiguous names carry their sense** (issue 22 item 21). ImageNet-1k names two classes 'crane'
(n02012849 the bird, n03126707 the machine), two 'maillot' and, but for the capital, two 'cardigan'
(the corgi and the sweater); ImageNet-21k has 1,470 such names. :func:`class_name` is the one place
that tells them apart, so every page, table and CSV reads the same string. The rule:

1. A name is *ambiguous* when another wnid has the same name, compared without case: another class
   of the label space, or, for a wnid outside it (named from ImageNet-21k's lists or WordNet), another
   class of the label space or of ImageNet-21k.
2. An ambiguous name is followed by its sense in brackets: the first lemma of its WordNet hypernym
   (the deepest one when it has several, ties in synset-name order, as classify.zeroshot.prompts orders them):
   'crane (wading bird)', 'crane (lifting device)', 'maillot (tights)', 'maillot (swimsuit)',
   'Cardigan (corgi)', 'cardigan (sweater)'. These are the zero-shot prompts' names too.
3. Where that does not tell the wnids apart (two of them under the same hypernym, or none), the
   wnid is the sense: 'name (n01234567)'.

A name nobody else has stays as it is ('tabby'). Identity is still the wnid; the sense is for the
reader. :func:`ambiguous_names` lists a label space's ambiguous names.
"""
from __future__ import annotations

import functools
import re

import pandas as pd

# Bump when a rule above changes a name for the same wnid: tables stored with names baked in
# (explain.browse_store) are then stale.
NAMES_VERSION = 1

from .labels import DEFAULT_LABEL_SPACE, get_label_space

_WNID_COLUMN = re.compile(r"^(?:(?P<prefix>.+)_)?wnid(?P<suffix>_[0-9]+)?$")


def name_column(column: str) -> str | None:
    """The name column that goes with a wnid column ('pred_wnid_2' -> 'pred_name_2'), else None."""
    match = _WNID_COLUMN.match(str(column))
    if not match:
        return None
    prefix, suffix = match.group("prefix"), match.group("suffix") or ""
    return f"{prefix}_name{suffix}" if prefix else f"name{suffix}"


WIDE_SPACE = "imagenet-21k"  # where a wnid outside the label space is named from (ImageNet's lemma list)


def _space(label_space: str):
    try:
        return get_label_space(label_space)
    except Exception:  # an unknown label space named in run.json: ImageNet-1k's names
        return get_label_space(DEFAULT_LABEL_SPACE)


def _plain_name(wnid: str, space) -> str:
    try:
        # display_name reads ImageNet's lemma list (every ImageNet-21k synset), then WordNet.
        return space.display_name(wnid)
    except Exception:  # not a wnid, or an offset WordNet 3.0 lacks
        return wnid


@functools.lru_cache(maxsize=16)
def _by_name(label_space: str) -> dict[str, tuple[str, ...]]:
    """Case-folded display name -> the wnids of the label space that bear it, in the space's order."""
    space = _space(label_space)
    out: dict[str, list[str]] = {}
    for wnid in space.wnids:
        out.setdefault(_plain_name(wnid, space).casefold(), []).append(wnid)
    return {name: tuple(wnids) for name, wnids in out.items()}


def _bearers(wnid: str, name: str, label_space: str) -> tuple[str, ...]:
    """Every wnid that a reader could take ``name`` for (rule 1 of the module docstring), ``wnid`` first."""
    key = name.casefold()
    space = _space(label_space)
    found = list(_by_name(space.name).get(key, ()))
    if wnid not in space:
        found += _by_name(WIDE_SPACE).get(key, ())
    return tuple(dict.fromkeys([wnid, *found]))


@functools.lru_cache(maxsize=65536)
def _hypernym_name(wnid: str) -> str | None:
    """The first lemma of the wnid's most specific WordNet hypernym (rule 2), None without one."""
    from .wordgraph import noun_graph

    graph = noun_graph()  # NLTK's relations and depths as arrays (no NLTK start for a table's names)
    try:
        row = graph.from_wnid(wnid).row
    except Exception:
        return None
    up = graph.parent_rows(row)  # hypernyms and instance hypernyms
    if not up:
        return None
    best = min(up, key=lambda r: (-graph.max_depth(r), graph.names[r]))
    return graph.lemma_names(best)[0].replace("_", " ")


def _sense(wnid: str, name: str, bearers: tuple[str, ...]) -> str:
    """What follows an ambiguous name: its hypernym's name, or the wnid where that is not enough."""
    mine = _hypernym_name(wnid)
    if mine is None or mine.casefold() == name.casefold():
        return wnid
    if any(_hypernym_name(other) is not None and _hypernym_name(other).casefold() == mine.casefold()
           for other in bearers if other != wnid):
        return wnid
    return mine


@functools.lru_cache(maxsize=65536)
def _name(wnid: str, label_space: str) -> str:
    space = _space(label_space)
    name = _plain_name(wnid, space)
    if name == wnid:  # no wnid: nothing to tell apart
        return name
    bearers = _bearers(wnid, name, space.name)
    return name if len(bearers) < 2 else f"{name} ({_sense(wnid, name, bearers)})"


def ambiguous_names(label_space: str = DEFAULT_LABEL_SPACE) -> dict[str, tuple[str, ...]]:
    """Display name -> its wnids, for every name two or more classes of ``label_space`` share
    (without case: 'Cardigan' and 'cardigan' are one), in the space's order."""
    space = _space(label_space)
    return {_plain_name(wnids[0], space): wnids for wnids in _by_name(space.name).values() if len(wnids) > 1}


def class_name(wnid, label_space: str = DEFAULT_LABEL_SPACE):
    """ImageNet's display name of a class ('tabby' for n02123045), falling back to WordNet for a wnid
    outside ``label_space``, with its sense when the name is ambiguous ('crane (wading bird)'; the
    module docstring's rule); the text itself for a non-wnid, NA for NA."""
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
