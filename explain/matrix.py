"""Confusion matrices whose rows and columns follow the WordNet hyponym tree.

What a matrix is (one model):

- a **row** is a true class, a **column** a predicted class, a **cell** counts the images of the row's
  class whose top-1 prediction (``pred_wnid``) falls in the column. The diagonal is the correct
  predictions; rows and the run's columns are in the same order, so the in-run block is square;
- the **usable** predictions only: ``status == 'ok'`` (every row when there is no ``status`` column,
  as in :mod:`explain.metrics`), of the chosen model, with both wnids present, and, when ``usable``
  is given (the run's accepted, not excluded image files, ``core.runstore.Run.usable_images``), of
  those images only: the images behind ``explain.metrics``'s tables and the Confusions page's lists;
- the **classes** are the run's classes plus any true class found in the predictions (an imported
  table may hold one the run does not list): each is a row, and a column, even with no image;
- a prediction outside those classes goes to an **outside column** after them: with
  ``outside="ancestor"`` one column per common ancestor, "other: under feline.n.01" holding the
  predictions whose lowest common subsumer with the row's class is feline.n.01 (the one rule of
  ``explain.similarity.lowest_common_subsumer``: the Confusions table's ``lcs_wnid`` and the Explain
  page's path name the same node; wall clock -> Petri dish is "under instrumentality.n.03" in all
  three); with ``outside="other"`` a single "other" column; a wnid WordNet does not know is always
  "other";
- **row-normalised** (:func:`row_normalise`): each cell divided by its row's total, so a row sums to 1;
  a row without images is NA (NaN), never 0/0 nor 0: "no evidence" differs from "never confused".

The tree: WordNet's noun hierarchy is a DAG (domestic_cat.n.01 is both a cat.n.01 and a
domestic_animal.n.01), so each synset is given one **tree parent**: among its hypernyms and instance
hypernyms, the one with the largest ``max_depth`` (ties: the smaller synset name), the order by which
the lowest common subsumer is picked too. The tree only orders rows and columns; the outside columns
are named by the lowest common subsumer, which may sit off a class's tree path (Petri dish's tree
parent is crockery's dish, its common ancestor with a wall clock instrumentality.n.03): such a
column comes after those whose node is on the tree. The deepest parent
follows the taxonomic chain (cat.n.01, canine.n.02) instead of the shallow role categories
(domestic_animal.n.01) that a shortest path would take, which would put house cats beside dogs and
away from lynx. The run's tree is the union of its classes' tree paths up to entity.n.01, walked
depth first with children in synset-name order: siblings sit together, each subtree is one block,
and a class that is an ancestor of another comes right before its subtree (pre-order).
"""
from __future__ import annotations

import functools
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from core.tables import is_member
from core.wordgraph import noun_of

OTHER = "other"  # predictions outside the run's classes, not grouped (or not in WordNet)
OTHER_RUN = "other classes of the run"  # predictions of run classes left out of a capped view
OUTSIDE_PREFIX = "other: under "  # + a synset name: outside predictions grouped by their nearest tree node
OUTSIDE_MODES = ("ancestor", "other")
CELL_COLUMNS = ["image", "true_wnid", "pred_wnid", "prob_1"]


# --------------------------------------------------------------------------- the tree
@functools.lru_cache(maxsize=None)
def _synset_name(wnid: str) -> str | None:
    try:
        return noun_of(wnid).name()
    except (KeyError, ValueError):  # not a wnid, or not a WordNet 3.0 noun
        return None


@functools.lru_cache(maxsize=None)
def tree_path(wnid: str) -> tuple[str, ...]:
    """The wnids from the root (entity.n.01) down to ``wnid`` through tree parents (see the module
    docstring), ``wnid`` last; () when WordNet 3.0 has no such noun."""
    if _synset_name(wnid) is None:
        return ()
    path, synset = [], noun_of(wnid)
    while synset is not None:
        path.append(f"n{synset.offset():08d}")
        parents = synset.hypernyms() + synset.instance_hypernyms()
        # Deepest parent first, then by name: the taxonomic chain, and the same choice on every run.
        synset = min(parents, key=lambda s: (-s.max_depth(), s.name())) if parents else None
    return tuple(reversed(path))


def _preorder(wnids: Iterable[str]) -> list[str]:
    """Every node of the tree spanning ``wnids`` (known to WordNet), depth first, pre-order."""
    children: dict[str | None, set[str]] = {}
    for wnid in wnids:
        path = tree_path(wnid)
        for parent, child in zip((None,) + path[:-1], path):  # None: above the root(s)
            children.setdefault(parent, set()).add(child)
    order, stack = [], sorted(children.get(None, ()), key=_synset_name, reverse=True)
    while stack:
        node = stack.pop()
        order.append(node)
        # Pushed in reverse name order so they pop in name order: the walk is deterministic.
        stack.extend(sorted(children.get(node, ()), key=_synset_name, reverse=True))
    return order


def tree_order(wnids: Iterable[str]) -> list[str]:
    """``wnids`` (duplicates dropped) in the depth-first order of the WordNet tree spanning them:
    siblings adjacent, children by synset name, an ancestor before its descendants. Wnids that
    WordNet 3.0 does not know come last, sorted."""
    wanted = set(wnids)
    known = {w for w in wanted if tree_path(w)}
    return [w for w in _preorder(known) if w in wanted] + sorted(wanted - known)


def outside_label(anchor_wnid: str) -> str:
    """The column of predictions outside the run whose nearest tree node is ``anchor_wnid``."""
    return OUTSIDE_PREFIX + (_synset_name(anchor_wnid) or anchor_wnid)


@functools.lru_cache(maxsize=1)
def _wnid_of_synset_name() -> dict[str, str]:
    from core.wordgraph import noun_graph

    graph = noun_graph()  # synset names are unique: 82,115 of them, ~80 ms once
    return {name: f"n{offset:08d}" for name, offset in zip(graph.names, graph.offsets.tolist())}


def outside_anchor(label: str) -> str | None:
    """The wnid of the tree node an outside column groups under (:func:`outside_label` read back, so a page
    can name it as it names classes: 'other: under clothing (n03051540)'); None for any other column."""
    from core.wordnet import is_wnid

    if not isinstance(label, str) or not label.startswith(OUTSIDE_PREFIX):
        return None
    rest = label[len(OUTSIDE_PREFIX):]
    return rest if is_wnid(rest) else _wnid_of_synset_name().get(rest)


def column_of(pairs: Iterable[tuple[str, str]], classes: Sequence[str], *, outside: str = "ancestor",
              shown: Sequence[str] | None = None) -> dict[tuple[str, str], str]:
    """(true wnid, pred wnid) -> the prediction's column in the true class's row: the prediction
    itself if it is one of ``classes`` (and of ``shown``, when a view shows only some: the others'
    predictions go to :data:`OTHER_RUN`); else :data:`OTHER`, or with ``outside="ancestor"`` the
    outside column of the pair's lowest common subsumer (``explain.similarity``: a 21k model
    predicting domestic_cat.n.01 for a tabby lands "under domestic_cat.n.01", an espresso for a
    tabby "under whole.n.02"; a wnid WordNet does not know: :data:`OTHER`)."""
    if outside not in OUTSIDE_MODES:
        raise ValueError(f"outside must be one of {OUTSIDE_MODES}, not {outside!r}")
    classes = set(classes)
    visible = classes if shown is None else set(shown)
    out, ancestral = {}, []
    for true, pred in set(pairs):
        if pred in visible:
            out[true, pred] = pred
        elif pred in classes:
            out[true, pred] = OTHER_RUN
        elif outside == "other" or _synset_name(pred) is None or _synset_name(true) is None:
            out[true, pred] = OTHER
        else:
            ancestral.append((true, pred))
    if ancestral:
        from .similarity import similarities, wnid_of_offset

        values = similarities([t for t, _ in ancestral], [p for _, p in ancestral])
        for pair, lcs in zip(ancestral, values.lcs.tolist()):
            out[pair] = outside_label(wnid_of_offset(lcs))
    return out


# --------------------------------------------------------------------------- the cells
def usable_rows(predictions: pd.DataFrame, model: str, usable: Iterable[str] | None = None) -> pd.DataFrame:
    """The predictions a matrix counts (see the module docstring), columns :data:`CELL_COLUMNS`."""
    keep = (predictions["model"] == model).to_numpy(dtype=bool, copy=True)  # a view may be read-only
    if "status" in predictions.columns:
        keep &= (predictions["status"] == "ok").fillna(False).to_numpy(dtype=bool)
    keep &= (predictions["true_wnid"].notna() & predictions["pred_wnid"].notna()).to_numpy(dtype=bool)
    rows = predictions.loc[keep]
    if usable is not None:
        rows = rows.loc[is_member(rows["image"], usable)]
    out = pd.DataFrame({c: rows[c] if c in rows.columns else pd.NA for c in CELL_COLUMNS})
    out["true_wnid"] = out["true_wnid"].astype(str)
    out["pred_wnid"] = out["pred_wnid"].astype(str)
    return out.reset_index(drop=True)


def _rows_and_classes(predictions: pd.DataFrame, model: str, classes: Sequence[str],
                      usable) -> tuple[pd.DataFrame, list[str]]:
    """(the usable rows, the matrix's classes: ``classes`` and every true class of the rows, in tree order)."""
    rows = usable_rows(predictions, model, usable)
    return rows, tree_order(set(classes) | set(rows["true_wnid"].unique()))


def _assigned(predictions: pd.DataFrame, model: str, classes: Sequence[str], usable, outside: str,
              shown: Sequence[str] | None) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(usable rows with their ``column``, all classes in tree order, the shown ones in tree order):
    the one assignment both the matrix and a cell's images use, so a cell lists what it counts."""
    rows, classes = _rows_and_classes(predictions, model, classes, usable)
    visible = classes if shown is None else tree_order(set(shown) & set(classes))
    # The column depends on the (true, pred) pair: each unique pair is looked up once.
    # Each column factorised, then their integer pair: a MultiIndex's tuples cost 0.7 s on a 1M run.
    true_codes, trues = pd.factorize(rows["true_wnid"])
    pred_codes, preds = pd.factorize(rows["pred_wnid"])
    width = max(len(preds), 1)
    codes, keys = pd.factorize(true_codes.astype(np.int64) * width + pred_codes)  # first appearance, as before
    # Plain lists: an Arrow-backed Index read element by element cost 0.25 s per 100,000 pairs.
    trues, preds = trues.tolist(), preds.tolist()
    pairs = [(trues[k // width], preds[k % width]) for k in keys.tolist()]
    columns = column_of(pairs, classes, outside=outside, shown=None if shown is None else visible)
    rows = rows.assign(column=np.array([columns[pair] for pair in pairs] or [OTHER], dtype=object)[codes]
                       if len(rows) else pd.Series([], dtype=object))
    return rows[rows["true_wnid"].isin(visible)], classes, visible


def _extra_order(labels: Iterable[str], classes: list[str]) -> list[str]:
    """Outside columns in the order of their nodes in the tree's walk, then those whose node is off
    the tree (by name), then OTHER_RUN, then OTHER."""
    anchors = {outside_label(node): i for i, node in enumerate(_preorder(classes))}
    rank = {OTHER_RUN: len(anchors) + 1, OTHER: len(anchors) + 2}
    return sorted(labels, key=lambda label: (anchors.get(label, rank.get(label, len(anchors))), label))


def confusion_matrix(predictions: pd.DataFrame, model: str, classes: Sequence[str], *,
                     usable: Iterable[str] | None = None, normalise: bool = False, outside: str = "ancestor",
                     shown: Sequence[str] | None = None) -> pd.DataFrame:
    """The confusion matrix of ``model`` (see the module docstring): index ``true_wnid`` (the classes,
    or only ``shown`` ones, in :func:`tree_order`), columns the same wnids, then the outside columns
    that hold a prediction of those rows (ordered by where their nearest node sits in the tree's
    walk), then :data:`OTHER_RUN` (a ``shown`` view's other classes) and :data:`OTHER`. Counts
    (int64), or with ``normalise`` each row's shares (:func:`row_normalise`)."""
    rows, classes, visible = _assigned(predictions, model, classes, usable, outside, shown)
    extra = _extra_order(set(rows["column"].to_numpy(dtype=object)) - set(visible), classes)  # not a Python loop over Arrow
    columns = visible + extra
    # Integer codes + one bincount: the same counts as pd.crosstab, with empty rows and columns kept.
    r = pd.Categorical(rows["true_wnid"], categories=visible).codes.astype(np.int64)
    c = pd.Categorical(rows["column"], categories=columns).codes.astype(np.int64)
    flat = np.bincount(r * len(columns) + c, minlength=len(visible) * len(columns))
    counts = pd.DataFrame(flat.reshape(len(visible), len(columns)).astype(np.int64),
                          index=pd.Index(visible, name="true_wnid"), columns=pd.Index(columns, name="predicted"))
    return row_normalise(counts) if normalise else counts


def row_normalise(counts: pd.DataFrame) -> pd.DataFrame:
    """Each row divided by its total (rows sum to 1); a row with no image is NaN throughout."""
    totals = counts.sum(axis=1).astype(float)
    return counts.astype(float).div(totals.where(totals > 0), axis=0)  # 0 total -> NaN divisor -> NaN row


def most_confused(predictions: pd.DataFrame, model: str, classes: Sequence[str], n: int, *,
                  usable: Iterable[str] | None = None) -> list[str]:
    """The ``n`` classes whose images ``model`` gets wrong most often (mistakes as a true class plus
    wrong predictions of it, so both ends of a confusion stay in view; ties: tree order), in tree
    order: what a capped view of a large run shows.

    The counts of :func:`confusion_matrix` (``outside="other"``) without building it: a row's mistakes
    are its images predicted as anything else, a column's the other rows' images predicted as it (a
    class of the run); two bincounts over the usable rows instead of the whole matrix and its column
    assignment (the Confusions page's first load built it twice at 1,000,000 predictions)."""
    rows, order = _rows_and_classes(predictions, model, classes, usable)
    index = pd.Index(order)
    true = index.get_indexer(rows["true_wnid"])
    pred = index.get_indexer(rows["pred_wnid"])  # -1: outside the run's classes (the matrix's OTHER)
    wrong = (rows["true_wnid"] != rows["pred_wnid"]).to_numpy(dtype=bool)
    mistakes = np.bincount(true[wrong], minlength=len(order)) + np.bincount(pred[wrong & (pred >= 0)],
                                                                            minlength=len(order))
    # A stable sort on -mistakes keeps tree order among ties: the same classes on every rerun.
    ranked = [order[i] for i in np.argsort(-mistakes, kind="stable")[:n]]
    return tree_order(ranked)


def cell_images(predictions: pd.DataFrame, model: str, true_wnid: str, column: str, classes: Sequence[str], *,
                usable: Iterable[str] | None = None, outside: str = "ancestor",
                shown: Sequence[str] | None = None) -> pd.DataFrame:
    """The predictions behind one cell of :func:`confusion_matrix` (same arguments; ``column`` is a
    column label): :data:`CELL_COLUMNS`, most confident first, then by image."""
    rows = _assigned(predictions, model, classes, usable, outside, shown)[0]
    rows = rows[(rows["true_wnid"] == true_wnid) & (rows["column"] == column)][CELL_COLUMNS]
    return rows.sort_values(["prob_1", "image"], ascending=[False, True], na_position="last").reset_index(drop=True)


def selected_cell(points, index: Sequence[str], columns: Sequence[str]) -> tuple[str, str] | None:
    """(true wnid, column label) of the first clicked point of a matrix chart, or None.

    Plotly heatmaps send no selection to Streamlit, so the chart lays one point over each non-empty
    cell with ``customdata = [row, column]``, positions into ``index`` and ``columns`` (``x`` and
    ``y`` hold the same positions: the axes are numbered, the names are tick labels). A point whose
    positions fall outside this matrix (a selection from an older chart) is None."""
    for point in points or ():
        where = point.get("customdata") or [point.get("y"), point.get("x")]
        try:
            row, column = int(where[0]), int(where[1])
        except (TypeError, ValueError, IndexError):
            continue
        # Positions, not labels, travel through the browser: bounds-check them against this matrix.
        if 0 <= row < len(index) and 0 <= column < len(columns):
            return str(index[row]), str(columns[column])
    return None


def sibling_blocks(order: Sequence[str]) -> list[tuple[int, int, str]]:
    """(first, last, parent wnid) of each run of two or more consecutive entries of ``order`` (a
    :func:`tree_order`) that share their tree parent: the sibling blocks a chart can outline."""
    parents = [tree_path(w)[-2] if len(tree_path(w)) > 1 else None for w in order]
    blocks, start = [], 0
    for i in range(1, len(order) + 1):
        # A block ends where the parent changes (or the list does); 'last' is inclusive.
        if i == len(order) or parents[i] != parents[start]:
            if i - start >= 2 and parents[start] is not None:
                blocks.append((start, i - 1, parents[start]))
            start = i
    return blocks


def matrix_long(counts: pd.DataFrame, label_space: str = "imagenet-1k") -> pd.DataFrame:
    """A matrix of :func:`confusion_matrix` counts as one row per non-empty cell, the exported form:
    ``true_wnid, predicted, predicted_wnid, predicted_under_wnid, count, row_share`` (``predicted`` is the
    column's key: a wnid, or an outside group such as "other: under feline.n.01", whose ``predicted_wnid`` is
    empty: no class was predicted as such; its ``predicted_under_wnid`` is the node it groups under,
    :func:`outside_anchor`, so the CSV can be joined on it: a UI review).
    A wide CSV would have bare wnids as headers; this one gets a name beside every wnid
    column (``explain.export.table_to_csv_bytes``)."""
    from core.wordnet import is_wnid

    long = counts.rename_axis(index="true_wnid", columns="predicted").stack().rename("count").reset_index()
    totals = long.groupby("true_wnid")["count"].transform("sum").astype(float)
    long["row_share"] = long["count"] / totals.where(totals > 0)  # a row with no image: NaN, not 0/0
    long = long[long["count"] > 0].reset_index(drop=True)
    long.insert(2, "predicted_wnid", [p if is_wnid(str(p)) else None for p in long["predicted"]])
    long.insert(3, "predicted_under_wnid", [outside_anchor(p) for p in long["predicted"]])
    return long
