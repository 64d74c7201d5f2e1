"""The interval columns of the metric tables (issue 23 item 1): ``<column>_ci_low`` / ``_ci_high``
for every rate and mean of :mod:`explain.schema` (``interval_columns``).

Called by :func:`explain.metrics.compute_metric_tables` with the arrays it already holds: its
unique (model, true, pred) triples with their counts (the cells of the bootstrap over images,
:mod:`explain.uncertainty`) and, for the top-5 statistics, its per-row values. Rates are Wilson
intervals of k / n with k recovered from the point estimate (k = rate * n is exact in float64
for any n below 2^52), so a rate and its interval cannot disagree.
"""
from __future__ import annotations

import numpy as np

from core.intervals import wilson_interval
from .schema import BOOTSTRAP_COLUMNS, WILSON_DENOMINATORS, interval_columns
from .uncertainty import CellFamily, IntervalOptions, RatioStatistic, bootstrap_families

# Independent random streams for the two cell families (triples; top-5 rows).
_TRIPLE_STREAM, _TOP5_STREAM = 1, 2


def _float(columns: dict, column: str) -> np.ndarray:
    return np.asarray(columns[column], dtype=np.float64)


def wilson_bounds(frame: dict, table: str, options: IntervalOptions) -> dict[str, np.ndarray]:
    """Wilson bounds of every rate column of a per-class or per-model table's columns (name -> array)."""
    out = {}
    for column, den_column in WILSON_DENOMINATORS[table].items():
        n = _float(frame, den_column)
        rate = _float(frame, column)
        k = np.round(rate * n)
        low, high = wilson_interval(np.where(np.isnan(rate), 0, k), np.where(np.isnan(rate), 0, n), options.level)
        out[f"{column}_ci_low"], out[f"{column}_ci_high"] = low, high
    return out


def confusion_bounds(count: np.ndarray, n_mistakes: np.ndarray, n: np.ndarray, options: IntervalOptions) -> dict:
    low, high = wilson_interval(count, n_mistakes, options.level)
    out = {"mf_ci_low": low, "mf_ci_high": high}
    out["share_of_samples_ci_low"], out["share_of_samples_ci_high"] = wilson_interval(count, n, options.level)
    return out


def _triple_statistics(values, mistake: np.ndarray, seen: np.ndarray, lin_ratio: np.ndarray) -> dict:
    # Statistics that share a denominator share the array object: its product is computed once.
    miss = mistake.astype(np.float64)
    one = np.ones(len(mistake))
    lin_defined = (~np.isnan(values.lin)).astype(np.float64)
    lin = np.where(lin_defined > 0, values.lin, 0.0)
    lin_miss = miss * lin_defined
    ratio_defined = (~np.isnan(lin_ratio)).astype(np.float64)
    ratio = np.where(ratio_defined > 0, lin_ratio, 0.0)
    severity = values.severity.astype(np.float64)
    stats = {}
    for name in ("path", "lch", "wup"):
        v = getattr(values, name).astype(np.float64)
        stats[f"{name}_mistakes"] = RatioStatistic(v * miss, miss, seen)
        stats[f"{name}_all"] = RatioStatistic(v, one, seen)
    stats["lin_mistakes"] = RatioStatistic(lin * lin_miss, lin_miss, seen)
    stats["lin_all"] = RatioStatistic(lin * lin_defined, lin_defined, seen)
    stats["severity"] = RatioStatistic(severity * miss, miss, seen)
    stats["hdist_at_1"] = RatioStatistic(severity, one, seen)
    stats["lin_vs_best"] = RatioStatistic(ratio * ratio_defined, ratio_defined, ~seen)
    # The balanced accuracy's parts: a class's own accuracy interval is Wilson's (wilson_bounds), not this.
    stats["accuracy"] = RatioStatistic(1.0 - miss, one, per_group=False)
    return stats


def bootstrap_bounds(*, group_of_triple, count, values, mistake, seen_triple, lin_ratio, group_model, n_models,
                     balanced, top_group, top_count, top_hdist, top_num, top_den, top_seen,
                     options: IntervalOptions, model_keys=None) -> tuple[dict, dict]:
    """(per-class bounds, per-model bounds): column -> array, for the bootstrap columns of the schema.

    Triple cells: ``group_of_triple`` (non-decreasing), ``count``, the pairs' ``values``, ``mistake``,
    ``seen_triple`` (counts in its model's row), ``lin_ratio`` (Lin / sim-to-seen, NaN but for unseen
    classes). Top-5 cells (one per (class, hdist@5 value, hprec numerator, denominator), made here from
    the counted rows with a complete top-5): ``top_group``, ``top_count`` ... ``top_seen``."""
    n_groups = len(group_model)
    seen_group = np.ones(n_groups, dtype=bool)  # seen is a property of the (model, class) group
    seen_group[group_of_triple] = seen_triple
    stats = _triple_statistics(values, mistake, seen_group, lin_ratio)
    top = _top5_cells(top_group, top_count, top_hdist, top_num, top_den)
    top_seen_group = seen_group.copy()
    top_seen_group[top_group] = top_seen
    top_stats = {"hdist_at_5": RatioStatistic(top["hdist"], np.ones(len(top["hdist"])), top_seen_group),
                 "hprec_at_5": RatioStatistic(np.nan_to_num(top["num"]), np.nan_to_num(top["den"]), top_seen_group)}
    triple, top_result = bootstrap_families([
        CellFamily(group_of_triple, count, stats, n_groups, _TRIPLE_STREAM, group_model, n_models, balanced,
                   base_cells=~np.asarray(mistake, dtype=bool),  # a class's correct predictions
                   model_keys=model_keys),
        CellFamily(top["group"], top["count"], top_stats, n_groups, _TOP5_STREAM, group_model, n_models,
                   model_keys=model_keys)], options)
    per_class, per_model = {}, {}
    for column in BOOTSTRAP_COLUMNS["per_class"]:
        source = top_result if column in top_stats else triple
        per_class[f"{column}_ci_low"], per_class[f"{column}_ci_high"] = source.groups[column]
    for column in BOOTSTRAP_COLUMNS["per_model"]:
        key = "lin_vs_best" if column == "lin_vs_best_unseen" else column
        source = top_result if key in top_stats else triple
        per_model[f"{column}_ci_low"], per_model[f"{column}_ci_high"] = source.models[key]
    return per_class, per_model


HDIST_SCALE = 60  # hdist@5 is a sum of integer severities over k <= 5 classes divided by k: x 60 (lcm 1..5) is whole


def _top5_cells(group, count, hdist, num, den) -> dict[str, np.ndarray]:
    """Rows with the same class and hdist@5 are one cell (their weights add): within a class, the
    hprec@5 numerator is a function of the same top-5 severity sum and the denominator of the truth,
    both NaN together where hprec@5 is not computed (a third key part). An integer key, not
    ``np.unique(axis=0)`` over floats: 1.7 s -> 0.1 s on a million rows."""
    if not len(group):
        return {k: np.zeros(0) for k in ("hdist", "num", "den", "count")} | {"group": np.zeros(0, np.int64)}
    import pandas as pd

    scaled = np.round(hdist * HDIST_SCALE).astype(np.int64)
    defined = ~np.isnan(num) & ~np.isnan(den)
    key = (group.astype(np.int64) * (scaled.max() + 1) + scaled) * 2 + defined
    # Hashed, not np.unique's sort of every row (0.085 -> 0.03 s on a million rows); the cells come
    # out sorted by key all the same (sort=True sorts the uniques), so by group.
    inverse, cells = pd.factorize(key, sort=True)
    weight = np.bincount(inverse, weights=count, minlength=len(cells))
    member = np.empty(len(cells), dtype=np.int64)
    member[inverse] = np.arange(len(key))  # any row of a cell: its values are the cell's (see above)
    return {"group": group[member].astype(np.int64), "hdist": hdist[member], "num": num[member],
            "den": den[member], "count": weight}


def bound_names(table: str) -> list[str]:
    """The ``<column>_ci_low`` / ``_ci_high`` columns of a table, in schema order."""
    return [f"{c}_ci_{side}" for c in interval_columns(table) for side in ("low", "high")]


def na_array(n_rows: int) -> np.ndarray:
    """One read-only all-NaN array, shared by every bound column it fills (a write to it raises).
    Why: 40 fresh arrays per table were 0.18 s of a 2.3 s 21k table (210,000 classes)."""
    out = np.full(n_rows, np.nan)
    out.flags.writeable = False
    return out


def no_bounds(table: str, n_rows: int) -> dict[str, np.ndarray]:
    """NA bounds (``--no-ci``): the columns exist, the values are unknown."""
    return dict.fromkeys(bound_names(table), na_array(n_rows))


ROUNDING = 1e-6  # relative: the bootstrap sums in float32 (half the memory traffic; its sort is SIMD), ~1e-7 off


def mask_undefined(columns: dict, table: str) -> None:
    """No interval where the point estimate is NA (a mean over nothing), and no bound on the wrong
    side of its point by float32 rounding alone, in place. Why: a class whose every image has one
    value got lch_all 3.6375861597 in [3.6375858784, 3.6375861168] (hostile-input campaign): the
    replicates are float32 sums. A bound past the point by more than that rounding is the
    bootstrap's answer (a skewed ratio's percentile interval may exclude its estimate) and stays."""
    for c in interval_columns(table):
        point = np.asarray(columns[c], dtype=np.float64)
        slack = ROUNDING * np.maximum(np.abs(point), 1.0)
        low = np.asarray(columns[f"{c}_ci_low"], dtype=np.float64)
        high = np.asarray(columns[f"{c}_ci_high"], dtype=np.float64)
        low = np.where((low > point) & (low - point <= slack), point, low)
        high = np.where((high < point) & (point - high <= slack), point, high)
        columns[f"{c}_ci_low"] = np.where(np.isnan(point), np.nan, low)
        columns[f"{c}_ci_high"] = np.where(np.isnan(point), np.nan, high)


def rankable(per_class, *, half_width: float | None = None, level: float | None = None):
    """Per row of a per-class table: ``half_width`` of its accuracy's Wilson interval (NA where the
    accuracy is NA), ``too_wide`` (above ``half_width``, default core.intervals.DEFAULT_HALF_WIDTH:
    too few images to rank the class), and ``images_needed`` for +-half_width at the accuracy within
    its interval nearest 50 % (the widest it may be): at the observed rate itself 0 of 6 right would
    promise +-10 points from 16 images. The Results page's "Ranking" column and warning (issue 23 item 4)."""
    import pandas as pd

    from core.intervals import DEFAULT_HALF_WIDTH, DEFAULT_LEVEL, images_needed_at, wilson_half_width

    h = DEFAULT_HALF_WIDTH if half_width is None else float(half_width)
    level = DEFAULT_LEVEL if level is None else float(level)
    accuracy = per_class["accuracy"].astype("float64").to_numpy(na_value=np.nan)
    n = per_class["n"].astype("float64").fillna(0).to_numpy()
    half = wilson_half_width(n, np.nan_to_num(accuracy, nan=0.5), level)
    half = np.where(np.isnan(accuracy), np.nan, half)
    if "accuracy_ci_low" in per_class.columns:
        planning = np.clip(0.5, per_class["accuracy_ci_low"].astype("float64").to_numpy(na_value=np.nan),
                           per_class["accuracy_ci_high"].astype("float64").to_numpy(na_value=np.nan))
    else:
        planning = accuracy
    return pd.DataFrame({"half_width": half, "too_wide": np.nan_to_num(half, nan=0.0) > h,
                         "images_needed": images_needed_at(planning, h, level)}, index=per_class.index)
