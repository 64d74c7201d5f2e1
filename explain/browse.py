"""The image browser's tables: one row per (image, model) with the true class, the top-5 with
names and probabilities, whether the top-1 is right and the WordNet relation of a mistake; filters
over it; and the per-image comparison of two models (issue 12 items 4b and 4c).

Which predictions: those the metrics count (:mod:`explain.metrics`, ``pages.reads.misclassified_images``):
status ``'ok'``, of images that are still usable (accepted in the manifest and not excluded by an
analyst). A run without a manifest (predictions uploaded from another tool) keeps every row, as
``core.runstore.Run.usable_predictions`` does.

Names: ImageNet's display name of each wnid (:mod:`core.names`, from :mod:`core.labels`: the first
lemma of ImageNet's list, WordNet's for a wnid outside it), looked up once per unique wnid. Every wnid column
has its name column beside it (``true_wnid``/``true_name``, ``pred_wnid_k``/``pred_name_k``).

Relations come from :mod:`explain.similarity` (the vocabulary of :mod:`explain.vocabulary`, the
same values as the ``relation`` column of the confusions table), looked up once per unique
(true, top-1) pair, never per row.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.errors import WildLensError
from core.runstore import TOP_K
from core.tables import is_member
from .similarity import similarities_of_codes
from .vocabulary import RELATIONS

OUTCOMES = ("all", "correct", "mistake")
GROUPS = ("both_wrong", "only_a_wrong", "only_b_wrong", "both_right")  # compare_models' groups, in this order
GROUP_LABELS = {"both_wrong": "Both wrong", "only_a_wrong": "Only A wrong", "only_b_wrong": "Only B wrong",
                "both_right": "Both right"}

# Column -> one-line meaning (the dashboard's column help); the table has exactly these, in this order.
_RANKED = {}
for _k in range(1, TOP_K + 1):
    _RANKED[f"pred_wnid_{_k}"] = f"The model's {'top-1' if _k == 1 else f'rank-{_k}'} prediction (wnid)."
    _RANKED[f"pred_name_{_k}"] = f"ImageNet's name of pred_wnid_{_k}."
    _RANKED[f"prob_{_k}"] = f"The model's probability of pred_wnid_{_k}."
COLUMN_DOCS: dict[str, str] = {
    "model": "The model's registry id.",
    "image": "The image: its file in the run (relative to the images folder), or the row id of uploaded predictions.",
    "true_wnid": "The true class (wnid).",
    "true_name": "ImageNet's name of the true class (WordNet's lemma for a class outside ImageNet's lists).",
    **_RANKED,
    "correct": "The top-1 prediction is the true class (strict).",
    "in_top5": "The true class is among the top-5 (NA when the predictions have no top-5).",
    "relation": "WordNet relation of the top-1 prediction to the true class: " + ", ".join(RELATIONS)
                + " ('same' when correct; explain.vocabulary).",
    "label_space": "The model's output label space.",
}
COLUMNS: tuple[str, ...] = tuple(COLUMN_DOCS)
_STORED_PRED = ["pred_wnid"] + [f"pred_wnid_{k}" for k in range(2, TOP_K + 1)]  # core.runstore's names


class BrowseError(WildLensError, ValueError):
    """A filter or a comparison that cannot be applied as asked; the message says what is allowed."""


# --------------------------------------------------------------------------- names
def class_names(wnids: Iterable[str], label_space: str = "imagenet-1k") -> dict[str, str]:
    """wnid -> ImageNet's display name ('tabby'), once per unique wnid (:func:`core.names.class_name`:
    WordNet's name for a wnid outside ImageNet's lists, the text itself for a value that is no
    WordNet 3.0 noun: a name is for reading, never an error)."""
    from core.names import class_name

    return {w: str(class_name(w, label_space)) for w in dict.fromkeys(w for w in wnids if isinstance(w, str))}


# --------------------------------------------------------------------------- the table
def usable_rows(predictions: pd.DataFrame, usable_images: Collection[str] | None = None) -> pd.DataFrame:
    """The rows the browser shows: status 'ok' (every row without a status column) and, unless
    ``usable_images`` is None (a run without a manifest), an image among ``usable_images``."""
    keep = np.ones(len(predictions), dtype=bool)
    if "status" in predictions.columns:
        keep &= (predictions["status"] == "ok").fillna(False).to_numpy(dtype=bool)
    if usable_images is not None:
        if isinstance(usable_images, str):
            raise TypeError(f"usable_images must be a collection of image names, not the str {usable_images!r}")
        keep &= is_member(predictions["image"], usable_images)  # each distinct image looked up once
    return predictions[keep]


def _relations(true, pred, cache_dir=None) -> np.ndarray:
    """Relation name per row (objects, None where unknown), looked up per unique (true, pred) pair; NA
    where either is missing or not a WordNet noun (uploaded predictions are validated, hand-made ones
    may not be). ``true`` and ``pred``: nullable string arrays of one length."""
    out = np.full(len(true), None, dtype=object)
    present = ~(np.asarray(true.isna()) | np.asarray(pred.isna()))
    if not present.any():
        return out
    idx = np.flatnonzero(present)
    true_codes, trues = pd.factorize(true.take(idx))
    pred_codes, preds = pd.factorize(pred.take(idx))
    wnids = list(dict.fromkeys([str(w) for w in trues] + [str(w) for w in preds]))
    position = {w: i for i, w in enumerate(wnids)}
    t_of = np.array([position[str(w)] for w in trues], dtype=np.int64)
    p_of = np.array([position[str(w)] for w in preds], dtype=np.int64)
    inverse, pairs = pd.factorize(t_of[true_codes] * len(wnids) + p_of[pred_codes])
    t, p = pairs // len(wnids), pairs % len(wnids)
    try:
        rel = similarities_of_codes(wnids, t, p, cache_dir=cache_dir).relation
        names = np.asarray(RELATIONS, dtype=object)[rel]
    except (KeyError, ValueError, LookupError):  # one bad wnid: look the pairs up one by one
        names = np.full(len(pairs), None, dtype=object)
        for i in range(len(pairs)):
            try:
                names[i] = RELATIONS[int(similarities_of_codes(wnids, t[i:i + 1], p[i:i + 1], cache_dir=cache_dir).relation[0])]
            except (KeyError, ValueError, LookupError):
                pass
    out[idx] = names[inverse]
    return out


def _sort_codes(values) -> np.ndarray:
    """Codes that order like ``sort_values`` orders the strings (NA last): for a stable lexsort."""
    return sorted_codes(values)[0]


def sorted_codes(values) -> tuple[np.ndarray, pd.Index]:
    """(codes, distinct values): the values' ranks among the sorted distinct values, NA after them all
    (code ``len(distinct)``), as ``sort_values`` orders them. Arrow strings are encoded and ranked by
    Arrow (UTF-8 byte order is code point order, as Python compares str). Why: pandas sorts the
    distinct values as Python objects (a true-class column of 1,000,000 rows: 0.12 s against 0.015 s)."""
    arrow = getattr(getattr(values, "array", values), "_pa_array", None)
    if arrow is not None and _pa_string(arrow.type):
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(arrow.combine_chunks())
        order = pc.array_sort_indices(encoded.dictionary).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes = encoded.indices.fill_null(len(rank)).to_numpy().astype(np.int64)  # NA after every value
        return np.append(rank, len(rank))[codes], pd.Index(encoded.dictionary.take(order).to_numpy(zero_copy_only=False),
                                                           dtype=object)
    codes, uniques = pd.factorize(values, sort=True)
    return np.where(codes < 0, len(uniques), codes), pd.Index(np.asarray(uniques, dtype=object), dtype=object)


@dataclass(frozen=True)
class TableCodes:
    """An image table's images and true classes as ranks among their sorted distinct values, row for row
    (:func:`sorted_codes`; NA: the rank after them all): what the dashboard pairs, finds and orders rows by
    instead of the names. Stored with the table (explain.browse_store): ranking 1,000,000 rows' images and
    classes was ~0.2 s of Browse's first load."""
    image: np.ndarray  # integer ranks of ``image`` (int32 as stored, int64 as made)
    images: pd.Index  # the sorted distinct images (object): ``images[image[i]]`` is row i's image
    true: np.ndarray  # integer ranks of ``true_wnid``

    def __post_init__(self):
        for name in ("image", "true"):  # read-only views, shared by every session; the caller's arrays untouched
            view = np.asarray(getattr(self, name)).view()
            view.flags.writeable = False
            object.__setattr__(self, name, view)


def table_codes(table: pd.DataFrame) -> TableCodes:
    """:class:`TableCodes` of an :func:`image_table` (or a table with its ``image`` and ``true_wnid`` columns)."""
    image, images = sorted_codes(table["image"])
    true, _ = sorted_codes(table["true_wnid"])
    return TableCodes(np.asarray(image, dtype=np.int64), images, np.asarray(true, dtype=np.int64))


def _pa_string(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def image_table(predictions: pd.DataFrame, usable_images: Collection[str] | None = None, *,
                label_space: str = "imagenet-1k", cache_dir=None) -> pd.DataFrame:
    """One row per (model, image) of the usable 'ok' predictions (:func:`usable_rows`), with the
    columns of :data:`COLUMN_DOCS`, sorted by model (first appearance), true class, image. Where a
    (model, image) appears twice the last row wins (the run store's rule). ``label_space`` chooses
    whose names come first (they agree for every ImageNet list); ``cache_dir``: where WordNet
    matrices are cached (:func:`explain.similarity.similarities_of_codes`; False: memory only).

    Built on the columns' string arrays, names and relations per distinct value: a million
    predictions took 5.5 s through Python objects (conversions both ways were half of it)."""
    rows = usable_rows(predictions, usable_images)
    if "image" not in rows.columns:
        rows = rows.assign(image=[f"row-{i + 1}" for i in range(len(rows))])
    rows = rows.drop_duplicates(["model", "image"], keep="last")
    n = len(rows)

    def column(name: str):  # pandas' nullable string array: no round trip through Python objects
        return rows[name].astype("string").array if name in rows.columns else pd.array([pd.NA] * n, dtype="string")

    model = column("model")
    true = column("true_wnid")
    preds = [column(c) for c in _STORED_PRED]
    factors = [pd.factorize(values) for values in (true, *preds)]
    names = class_names(dict.fromkeys(str(w) for _, uniques in factors for w in uniques), label_space)

    def name_of(codes: np.ndarray, uniques) -> pd.api.extensions.ExtensionArray:
        named = pd.array([names.get(str(u)) for u in uniques] + [None], dtype="string")
        return named.take(np.where(codes < 0, len(uniques), codes))  # a missing wnid (-1): NA

    out = {"model": model, "image": column("image"), "true_wnid": true, "true_name": name_of(*factors[0])}
    for k in range(1, TOP_K + 1):
        out[f"pred_wnid_{k}"] = preds[k - 1]
        out[f"pred_name_{k}"] = name_of(*factors[k])
        out[f"prob_{k}"] = rows[f"prob_{k}"].astype("Float64").array if f"prob_{k}" in rows.columns \
            else pd.array(np.full(n, np.nan), dtype="Float64")
    has_top = any(bool(np.asarray(~p.isna()).any()) for p in preds[1:])
    known = ~np.asarray(true.isna())

    def equal(a, b) -> np.ndarray:  # both present and the same text
        return np.asarray((a == b).fillna(False), dtype=bool)

    top1 = known & ~np.asarray(preds[0].isna())
    out["correct"] = pd.arrays.BooleanArray(top1 & equal(true, preds[0]), ~top1)
    if has_top:
        hit = np.zeros(n, dtype=bool)
        for p in preds:
            hit |= known & equal(p, true)
        out["in_top5"] = pd.arrays.BooleanArray(hit, ~known)
    else:
        out["in_top5"] = pd.arrays.BooleanArray(np.zeros(n, dtype=bool), np.ones(n, dtype=bool))
    out["relation"] = pd.array(_relations(true, preds[0], cache_dir), dtype="string")
    out["label_space"] = column("label_space")
    table = pd.DataFrame(out)
    for k in range(1, TOP_K + 1):
        table[f"prob_{k}"] = table[f"prob_{k}"].astype("Float64")
    # Model in first-appearance order (NA too), then true class and image as sort_values orders them (NA last):
    # one stable lexsort of integer codes instead of a three-key sort of strings.
    model_codes, _ = pd.factorize(model, use_na_sentinel=False)  # a NA model at its first appearance too
    order = np.lexsort((_sort_codes(table["image"]), _sort_codes(table["true_wnid"]), model_codes))
    return _one_chunk(table.take(order)[list(COLUMNS)].reset_index(drop=True))


def _one_chunk(table: pd.DataFrame) -> pd.DataFrame:
    """Each Arrow-backed column in one chunk. Why: the columns come in pieces (a part file each), and
    Arrow's take on a column of 10 chunks cost 3 ms against 0.1 ms on one: 1,000 rows of a
    1,000,000-row table took 0.22 s on every Browse rerun."""
    out = {}
    for name in table.columns:
        arrow = getattr(table[name].array, "_pa_array", None)
        if arrow is not None and arrow.num_chunks > 1:
            out[name] = type(table[name].array)(arrow.combine_chunks())
    return table.assign(**out) if out else table


def run_image_table(run, view: str = "raw", *, annotated: bool = True) -> pd.DataFrame:
    """:func:`image_table` of a ``core.runstore.Run`` in ``view`` (explain.curation_view: its usable
    predictions, raw or with the curation applied; every row when the run has no manifest), names
    in its label space, and (``annotated``) with :func:`annotate`'s columns from the view's stored
    explanations (explain.error_types.ensure_explained) and the curation's tags: the table the
    Browse page shows and downloads."""
    from core.curation import read_curation

    from .curation_view import view_predictions

    rows, _ = view_predictions(run, view)
    label_space = run.info.label_space or "imagenet-1k"
    if not annotated:
        return image_table(rows, None, label_space=label_space)
    from .error_types import ensure_explained

    return annotated_table(rows, lambda: ensure_explained(run, view), read_curation(run).tags, label_space)


def annotated_table(rows: pd.DataFrame, explained, tags: dict, label_space: str) -> pd.DataFrame:
    """:func:`annotate` of :func:`image_table` of a view's rows: ``explained()`` gives the view's
    explanations (a WildLensError, e.g. predictions the metrics refuse: shown without error types),
    ``tags`` the curation's. The one builder of the Browse table, for :func:`run_image_table` and
    the dashboard (which passes its cached rows), so both store the same table under one fingerprint."""
    table = image_table(rows, None, label_space=label_space)
    try:
        explained_rows = explained()
    except WildLensError:  # predictions the metrics refuse (a hand-made run): shown, without error types
        explained_rows = None
    return _one_chunk(annotate(table, explained_rows, tags))


# --------------------------------------------------------------------------- filters
def _as_set(value, what: str) -> set[str] | None:
    """None (no filter) for None; a set for a string or an iterable of them."""
    if value is None:
        return None
    if isinstance(value, str):
        return {value}
    try:
        return {str(v) for v in value}
    except TypeError:
        raise BrowseError(f"{what}: expected a value or a list of values, got {type(value).__name__}.") from None


def filter_images(table: pd.DataFrame, models=None, true=None, pred=None, outcome: str = "all", relations=None,
                  conf_min: float | None = None, conf_max: float | None = None) -> pd.DataFrame:
    """The rows of :func:`image_table` that pass every filter given (None: no filter; filters combine).

    ``models``, ``true`` (true wnid), ``pred`` (top-1 wnid), ``relations`` (names of
    :data:`explain.vocabulary.RELATIONS`): one value or a collection; an empty collection keeps
    nothing. ``outcome``: 'all', 'correct' or 'mistake' (top-1, strict). ``conf_min`` /
    ``conf_max``: bounds on ``prob_1``, inclusive; a row without ``prob_1`` fails any bound."""
    return table[image_mask(table, models, true, pred, outcome, relations, conf_min, conf_max)].reset_index(drop=True)


def image_mask(table: pd.DataFrame, models=None, true=None, pred=None, outcome: str = "all", relations=None,
               conf_min: float | None = None, conf_max: float | None = None) -> np.ndarray:
    """Per row of ``table``: it passes :func:`filter_images`'s filters (the same arguments)."""
    if outcome not in OUTCOMES:
        raise BrowseError(f"Unknown outcome {outcome!r}; allowed: {', '.join(OUTCOMES)}.")
    relation_set = _as_set(relations, "relations")
    if relation_set is not None and relation_set - set(RELATIONS):
        raise BrowseError(f"Unknown relation {sorted(relation_set - set(RELATIONS))[0]!r}; "
                          f"allowed: {', '.join(RELATIONS)}.")
    keep = np.ones(len(table), dtype=bool)
    for column, value, what in (("model", models, "models"), ("true_wnid", true, "true"),
                                ("pred_wnid_1", pred, "pred"), ("relation", relation_set, "relations")):
        wanted = _as_set(value, what)
        if wanted is not None:
            keep &= table[column].isin(wanted).fillna(False).to_numpy(dtype=bool)
    if outcome != "all":
        correct = table["correct"].fillna(False).to_numpy(dtype=bool)
        known = table["correct"].notna().to_numpy(dtype=bool)
        keep &= known & (correct if outcome == "correct" else ~correct)
    prob = table["prob_1"].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
    if conf_min is not None:
        keep &= prob >= float(conf_min)
    if conf_max is not None:
        keep &= prob <= float(conf_max)
    return keep


UNMATCHED = "not matched by the filters"  # how a card marks a row :func:`card_rows` did not match


def card_rows(table: pd.DataFrame, filtered: pd.DataFrame | None, images: Iterable[str],
              models: Iterable[str]) -> pd.DataFrame:
    """What an image's card shows (issue 22 item 16): the rows of ``table`` (an :func:`image_table`)
    of ``images`` by ``models``, with a boolean ``matched`` column: the row is one of ``filtered``
    (the rows :func:`filter_images` selected; None: every row is matched). Per image (in the order
    of ``images``) the matched rows come first, then the others, each part in the order of
    ``models``: a card filtered to "Mistakes, distant" leads with the distant mistake, and another
    model's right answer to the same image follows, marked as not matched by the filters.

    The decision is the selection's own: a row is matched when its (model, image) is among
    ``filtered``'s (one row per (model, image) in an image table), never by evaluating a filter again."""
    images = list(dict.fromkeys(str(i) for i in images))
    models = list(dict.fromkeys(str(m) for m in models))
    rows = table[table["image"].isin(images) & table["model"].isin(models)]
    if filtered is None:
        matched = np.ones(len(rows), dtype=bool)
    else:
        # Only the selection's rows of these images can match: a MultiIndex of all of a million-row
        # selection cost half a second per page of cards.
        filtered = filtered[filtered["image"].isin(images)]
        chosen = pd.MultiIndex.from_frame(filtered[["model", "image"]].astype(object))
        matched = pd.MultiIndex.from_frame(rows[["model", "image"]].astype(object)).isin(chosen)
    out = rows.assign(matched=matched)
    order = pd.DataFrame({"_i": out["image"].map({im: i for i, im in enumerate(images)}).to_numpy(),
                          "_u": ~matched, "_m": out["model"].map({m: i for i, m in enumerate(models)}).to_numpy()},
                         index=out.index)
    return out.loc[order.sort_values(["_i", "_u", "_m"], kind="stable").index].reset_index(drop=True)


# --------------------------------------------------------------------------- two models
_SIDE_COLUMNS = ("pred_wnid_1", "pred_name_1", "prob_1", "correct", "relation")


@dataclass(frozen=True)
class ModelComparison:
    """Two models on the images both predicted (an image one of them lacks is in neither group).

    ``images``: one row per such image: ``group`` (one of :data:`GROUPS`), ``image``,
    ``true_wnid``, ``true_name``, then ``a_pred_wnid``, ``a_pred_name``, ``a_prob``,
    ``a_correct``, ``a_relation`` and the same for ``b_``; sorted by group, true class, image."""

    a: str
    b: str
    images: pd.DataFrame

    @property
    def counts(self) -> dict[str, int]:
        """Images per group, every group of :data:`GROUPS` present (0 when empty); they add up to
        the images both models predicted."""
        found = self.images["group"].value_counts()
        return {g: int(found.get(g, 0)) for g in GROUPS}

    @property
    def n_images(self) -> int:
        return len(self.images)

    def group(self, name: str) -> pd.DataFrame:
        if name not in GROUPS:
            raise BrowseError(f"Unknown group {name!r}; allowed: {', '.join(GROUPS)}.")
        return self.images[self.images["group"] == name].reset_index(drop=True)


def _last_of_each(values) -> np.ndarray:
    """Positions of the last row of each distinct value (NA one value), in row order: drop_duplicates(keep='last')
    on integer codes. Why: pandas' drop_duplicates on Arrow strings took 0.19 s per model at 1,000,000 rows."""
    codes, _ = pd.factorize(values, use_na_sentinel=False)
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    return np.sort(len(codes) - 1 - first_from_end)


def compare_models(table: pd.DataFrame, a: str, b: str, *, image_codes: np.ndarray | None = None) -> ModelComparison:
    """Per image, how models ``a`` and ``b`` did (top-1, strict), on the images of ``table`` (an
    :func:`image_table`, possibly filtered) that both predicted: both wrong, only A wrong, only B
    wrong, both right. Images whose truth or correctness is unknown are left out. ``image_codes``:
    :func:`sorted_codes` of ``table["image"]`` (row for row), when the caller holds them (the dashboard
    keeps them per table): the images are then deduplicated, paired and ordered by integer codes, not
    by their names (1,000,000 rows: 0.16-0.2 s -> 0.08-0.11 s, :func:`_compare_by_codes`); the same table."""
    if a == b:
        raise BrowseError(f"Compare two different models (both are {a!r}).")
    if image_codes is not None:
        return _compare_by_codes(table, a, b, np.asarray(image_codes))
    keys = ["image", "true_wnid"]
    sides = []
    known = table["correct"].notna().to_numpy()
    for model, prefix in ((a, "a_"), (b, "b_")):
        # The columns first, then the rows: a whole-table selection took every column of a model's rows
        # (0.38 s of Browse's first load at 1,000,000 predictions).
        mine = (table["model"] == model).to_numpy(dtype=bool, na_value=False) & known
        rows = table[["image", "true_wnid", "true_name", *_SIDE_COLUMNS]].take(np.flatnonzero(mine))
        side = rows.rename(
            columns={c: prefix + c.removesuffix("_1") for c in _SIDE_COLUMNS})
        sides.append(side.take(_last_of_each(side["image"])))
    # Paired by image and true class: an image the two models' rows give different truths (it cannot be in a
    # run) is not paired.
    both = sides[0].merge(sides[1].drop(columns="true_name"), on=keys, how="inner")
    a_ok = both["a_correct"].to_numpy(dtype=bool)
    b_ok = both["b_correct"].to_numpy(dtype=bool)
    group = np.select([~a_ok & ~b_ok, ~a_ok & b_ok, a_ok & ~b_ok], list(GROUPS[:3]), default=GROUPS[3])
    both.insert(0, "group", pd.array(group, dtype="string"))
    rank = {g: i for i, g in enumerate(GROUPS)}
    both["_g"] = both["group"].map(rank)
    both = both.sort_values(["_g", "true_wnid", "image"], kind="stable").drop(columns="_g").reset_index(drop=True)
    return ModelComparison(a, b, both[_COMPARE_ORDER])


_COMPARE_ORDER = ["group", "image", "true_wnid", "true_name",
                  *[p + c.removesuffix("_1") for p in ("a_", "b_") for c in _SIDE_COLUMNS]]


def _compare_by_codes(table: pd.DataFrame, a: str, b: str, codes: np.ndarray) -> ModelComparison:
    """:func:`compare_models` with the images' :func:`sorted_codes` (ranks among the sorted names, NA
    after them): each model's last row of an image kept (as ``_last_of_each``), an A row paired with
    B's row of the same image code when their true classes are equal (NA equals NA, as ``merge``
    pairs keys), then ordered by group, true class and image rank (the names' order, NA last)."""
    if len(codes) != len(table) or (len(codes) and codes.min() < 0):
        raise BrowseError(f"{len(codes):,} image codes for {len(table):,} rows, not one rank each: give sorted_codes "
                          "of this table's images (or of the whole table's, taken at these rows).")
    if len(codes) and codes.max() > len(codes):
        # A filtered table's ranks in the whole table (what the page passes with a true class chosen): renumbered
        # in their order, so the lookup below is as long as this table. Why: a later class's ranks were refused,
        # and Browse stopped with an error for most classes (a hostile campaign).
        codes = np.unique(codes, return_inverse=True)[1]
    known = table["correct"].notna().to_numpy()
    kept = []
    for model in (a, b):
        positions = np.flatnonzero((table["model"] == model).to_numpy(dtype=bool, na_value=False) & known)
        mine = codes[positions]
        _, first_from_end = np.unique(mine[::-1], return_index=True)  # each image's last row
        kept.append(positions[np.sort(len(mine) - 1 - first_from_end)])
    at_a, at_b = kept
    where_b = np.full(int(codes.max(initial=-1)) + 2, -1, dtype=np.int64)  # image code -> B's row (codes are unique)
    where_b[codes[at_b]] = np.arange(len(at_b))
    partner = where_b[codes[at_a]]
    paired = np.flatnonzero(partner >= 0)
    at_a, at_b = at_a[paired], at_b[partner[paired]]
    truth_a, truth_b = table["true_wnid"].take(at_a), table["true_wnid"].take(at_b)
    same = (truth_a.to_numpy(dtype=object, na_value=None) == truth_b.to_numpy(dtype=object, na_value=None))
    at_a, at_b = at_a[same], at_b[same]
    side_a = table[["image", "true_wnid", "true_name", *_SIDE_COLUMNS]].take(at_a).rename(
        columns={c: "a_" + c.removesuffix("_1") for c in _SIDE_COLUMNS})
    side_b = table[list(_SIDE_COLUMNS)].take(at_b).rename(columns={c: "b_" + c.removesuffix("_1") for c in _SIDE_COLUMNS})
    both = pd.concat([side_a.reset_index(drop=True), side_b.reset_index(drop=True)], axis=1)
    a_ok = both["a_correct"].to_numpy(dtype=bool)
    b_ok = both["b_correct"].to_numpy(dtype=bool)
    group_codes = np.select([~a_ok & ~b_ok, ~a_ok & b_ok, a_ok & ~b_ok], [0, 1, 2], default=3)
    order = np.lexsort((codes[at_a], sorted_codes(both["true_wnid"])[0], group_codes))
    both = both.take(order).reset_index(drop=True)
    both.insert(0, "group", pd.array(np.asarray(GROUPS, dtype=object)[group_codes[order]], dtype="string"))
    return ModelComparison(a, b, both[_COMPARE_ORDER])


# --------------------------------------------------------------------------- curation, error types, order
ANNOTATION_DOCS: dict[str, str] = {
    "margin": "Top-1 probability minus top-2 probability: how sure the model was against its runner-up (NA "
              "without both).",
    "error_type": "The mistake's error type (explain.error_types; empty for a correct top-1 or before the "
                  "explanations are computed).",
    "error_reason": "Why the mistake has that error type, in one line.",
    "tags": "The image's curation tags ('; ' between them), from the run's curation log.",
}
SORTS = ("class", "confident", "unsure", "margin")
SORT_LABELS = {"class": "True class, then image", "confident": "Most confident first", "unsure": "Least confident first",
               "margin": "Smallest margin first (top-1 vs top-2)"}


def _matching_rows(left: pd.DataFrame, right: pd.DataFrame) -> np.ndarray:
    """Per row of ``left``, the position in ``right`` of the last row with the same (model, image),
    or -1 (none, or a missing key). Integer codes of both columns factorised together, one sort and
    one search: a MultiIndex of Python strings cost 1.2 s for 1,000,000 rows on each side."""
    n = len(left)
    codes = []
    for column in ("model", "image"):
        both = pd.concat([left[column].astype("string"), right[column].astype("string")], ignore_index=True)
        codes.append(pd.factorize(both)[0])
    width = int(codes[1].max(initial=-1)) + 2
    key = codes[0].astype(np.int64) * width + codes[1]
    key[(codes[0] < 0) | (codes[1] < 0)] = -1
    mine, theirs = key[:n], key[n:]
    order = np.argsort(theirs, kind="stable")  # equal keys keep their order: the last of a run is the last row
    ranked = theirs[order]
    last = np.searchsorted(ranked, mine, side="right") - 1
    hit = (last >= 0) & (mine >= 0)
    hit[hit] = ranked[last[hit]] == mine[hit]
    return np.where(hit, order[np.where(hit, last, 0)], -1)


def annotate(table: pd.DataFrame, explained: pd.DataFrame | None = None, tags: dict | None = None) -> pd.DataFrame:
    """:func:`image_table` rows with the columns of :data:`ANNOTATION_DOCS` after its own:
    ``margin`` from the stored probabilities, ``error_type`` / ``error_reason`` from the view's
    explanations (``core.explained`` rows: model, image, error_type, error_reason; NA where absent),
    ``tags`` from the curation (image -> tags). Each distinct image is looked up once."""
    out = table.copy()
    p1 = out["prob_1"].astype("Float64")
    p2 = out["prob_2"].astype("Float64") if "prob_2" in out else pd.Series(pd.NA, index=out.index, dtype="Float64")
    out["margin"] = (p1 - p2).astype("Float64")
    if explained is not None and len(explained) and len(out):
        row = _matching_rows(out, explained)  # explained's row of each (model, image), the last of a repeat; -1: none
        found = row >= 0
        for column in ("error_type", "error_reason"):
            values = explained[column].astype("string").array.take(np.where(found, row, 0))
            values[~found] = pd.NA
            out[column] = values
    else:
        out["error_type"] = pd.array([pd.NA] * len(out), dtype="string")
        out["error_reason"] = pd.array([pd.NA] * len(out), dtype="string")
    if tags and len(out):
        codes, images = pd.factorize(out["image"])
        joined = ["; ".join(sorted(tags.get(str(i), ()))) or None for i in images] + [None]
        out["tags"] = pd.array(np.asarray(joined, dtype=object)[np.where(codes < 0, len(images), codes)], dtype="string")
    else:
        out["tags"] = pd.array([pd.NA] * len(out), dtype="string")
    return out


def filter_annotated(table: pd.DataFrame, *, error_types=None, tags=None, margin_max: float | None = None) -> pd.DataFrame:
    """Rows of :func:`annotate`'s table with an error type among ``error_types``, a tag among
    ``tags`` (the image carries at least one of them) or a margin at most ``margin_max`` (None: no
    filter); filters combine, and with :func:`filter_images`'s."""
    return table[annotated_mask(table, error_types=error_types, tags=tags, margin_max=margin_max)].reset_index(drop=True)


def annotated_mask(table: pd.DataFrame, *, error_types=None, tags=None, margin_max: float | None = None) -> np.ndarray:
    """Per row of :func:`annotate`'s table: it passes :func:`filter_annotated`'s filters."""
    keep = np.ones(len(table), dtype=bool)
    wanted = _as_set(error_types, "error types")
    if wanted is not None:
        keep &= table["error_type"].isin(wanted).fillna(False).to_numpy(dtype=bool)
    wanted = _as_set(tags, "tags")
    if wanted is not None:
        codes, values = pd.factorize(table["tags"])
        has = np.array([bool(set(str(v).split("; ")) & wanted) for v in values] + [False], dtype=bool)
        keep &= has[np.where(codes < 0, len(values), codes)]
    if margin_max is not None:
        keep &= table["margin"].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) <= float(margin_max)
    return keep


def _first_rows_by_class(images: np.ndarray, trues: np.ndarray) -> np.ndarray:
    """Each image's first row in the (true class, image) order of a stable sort (ties: the earlier row), those
    rows in that order, from the ranks of the images and true classes: per image its least (true rank, position)
    in one pass, then only the distinct images sorted. The same rows as a lexsort of every row and the first
    of each image (121 -> 10 ms for 1,000,000 rows of 100,000 images)."""
    n = len(images)
    never = np.iinfo(np.int64).max
    key = np.asarray(trues, dtype=np.int64) * n + np.arange(n, dtype=np.int64)  # ranks <= n: fits for n < 3e9
    best = np.full(int(images.max()) + 1, never, dtype=np.int64)
    np.minimum.at(best, np.asarray(images, dtype=np.int64), key)
    found = np.flatnonzero(best != never)
    best = best[found]
    return (best % n)[np.lexsort((found, best // n))]


def selection_images(rows: pd.DataFrame, sort: str = "class", image_codes: np.ndarray | None = None,
                     true_codes: np.ndarray | None = None) -> pd.DataFrame:
    """The distinct images of ``rows`` (an :func:`image_table`, filtered) as the grid and the Image
    page page through them: ``image`` and ``true_wnid``, ordered by ``sort`` (:data:`SORTS`): true
    class then image; or the matched rows' top-1 probability, highest or lowest first; or the margin,
    smallest first (ties: true class, image; an image with several matched rows takes its first).
    ``image_codes``: :func:`sorted_codes` of ``rows["image"]``, when the caller holds them (the dashboard
    keeps them per table: ranking 1,000,000 image names took 0.15-0.3 s of Browse's first load); ``true_codes``
    likewise of ``rows["true_wnid"]`` (:class:`TableCodes`; any integer codes in the values' order will do: ranks
    from 0 to the row count take the one-pass path, others a sort of every row)."""
    if sort not in SORTS:
        raise BrowseError(f"Unknown order {sort!r}; allowed: {', '.join(SORTS)}.")
    if rows.empty:
        return pd.DataFrame({"image": pd.Series(dtype="string"), "true_wnid": pd.Series(dtype="string")})
    frame = rows[["image", "true_wnid"]]
    images = _sort_codes(frame["image"]) if image_codes is None else np.asarray(image_codes)
    trues = _sort_codes(frame["true_wnid"]) if true_codes is None else np.asarray(true_codes)
    if sort == "class":
        n = len(images)
        if images.min() >= 0 and trues.min() >= 0 and images.max() <= n and trues.max() <= n:  # ranks, as stored
            return frame.take(_first_rows_by_class(images, trues)).reset_index(drop=True)
        order = np.lexsort((images, trues))  # other codes (negative, or sparse and large): every row sorted
    else:
        column = "margin" if sort == "margin" else "prob_1"
        values = rows[column].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) if column in rows \
            else np.full(len(rows), np.nan)
        key = -values if sort == "confident" else values
        key = np.where(np.isnan(key), np.inf, key)  # unknown last
        order = np.lexsort((images, trues, key))
    # Each image's first row in that order, found on the integer codes (NA images are one code, as
    # drop_duplicates counts them), then only those rows taken. Why: taking every row's strings in
    # order and hashing them again was 0.36 s of Browse's first load at 1,000,000 predictions.
    _, first = np.unique(images[order], return_index=True)
    return frame.take(order[np.sort(first)]).reset_index(drop=True)
