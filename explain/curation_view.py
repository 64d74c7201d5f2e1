"""The raw and the curated view of a run's predictions (issue 24 item 3).

*Raw*: the run's usable predictions as stored (``core.runstore.Run.usable_predictions``: status
kept, images the manifest excludes left out). *Curated*: the same rows after the analyst's
curation log (:mod:`core.curation`) is applied: an excluded image's rows are dropped, a
relabelled image's rows get the new class as their ``true_wnid`` (every model's row of that
image); tags change no row (they decide error types, :mod:`explain.error_types`). A relabel to
the class an image already has changes nothing and is not counted.

Every metric table exists for both views (:mod:`explain.artefact` stores the curated tables apart,
keyed by the log's fingerprint). With a log that changes nothing (no entry, or every entry
undone) the curated view is the raw one, row for row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.curation import Curation, read_curation
from core.explained import CURATED, RAW, VIEWS
from core.runstore import Run

__all__ = ["CURATED", "RAW", "VIEWS", "VIEW_LABELS", "ViewChange", "apply_curation", "check_view", "default_view",
           "view_predictions"]
VIEW_LABELS = {RAW: "Raw", CURATED: "Curated"}


@dataclass(frozen=True)
class ViewChange:
    """What the curated view changed in a set of predictions: images relabelled (to another class
    than the one they had) and images excluded, with their rows."""

    relabelled_images: int = 0
    excluded_images: int = 0
    relabelled_rows: int = 0
    excluded_rows: int = 0

    @property
    def any(self) -> bool:
        return bool(self.relabelled_rows or self.excluded_rows)

    def describe(self) -> str:
        """'4 relabelled, 3 excluded' (images), or 'no change'."""
        parts = [f"{self.relabelled_images} relabelled" if self.relabelled_images else "",
                 f"{self.excluded_images} excluded" if self.excluded_images else ""]
        return ", ".join(p for p in parts if p) or "no change"


def check_view(view: str) -> str:
    from core.errors import OptionError

    if view not in VIEWS:
        raise OptionError(f"unknown view {str(view)[:20]!r}; one of {', '.join(VIEWS)}.")
    return view


def apply_curation(predictions: pd.DataFrame, curation: Curation) -> tuple[pd.DataFrame, ViewChange]:
    """(the curated rows, what changed): ``predictions`` without the excluded images' rows, with
    each relabelled image's ``true_wnid`` replaced. Rows keep their order; the input is not changed.
    Each distinct image is looked up once."""
    if not curation.excluded and not curation.relabels or predictions.empty or "image" not in predictions:
        return predictions, ViewChange()
    codes, images = pd.factorize(predictions["image"])
    names = [str(i) for i in images]
    excluded = np.fromiter((n in curation.excluded for n in names), dtype=bool, count=len(names))
    new_truth = [curation.relabels.get(n) for n in names]
    has = codes >= 0
    drop = np.zeros(len(predictions), dtype=bool)
    drop[has] = excluded[codes[has]]
    # Rows whose image was relabelled (usually few): compared with their stored class one by one.
    relabelled_code = np.fromiter((t is not None for t in new_truth), dtype=bool, count=len(names))
    candidates = np.flatnonzero(has & ~drop & relabelled_code[np.where(has, codes, 0)])
    truth = predictions["true_wnid"]
    changed_rows = [i for i in candidates.tolist()
                    if not (isinstance(truth.iat[i], str) and truth.iat[i] == new_truth[codes[i]])]
    changed = np.zeros(len(predictions), dtype=bool)
    changed[changed_rows] = True
    out = predictions[~drop]
    if changed_rows:
        column = truth.astype(object).to_numpy().copy()
        column[changed_rows] = [new_truth[codes[i]] for i in changed_rows]
        out = out.copy()
        out["true_wnid"] = pd.array(column[~drop], dtype=truth.dtype)
    change = ViewChange(relabelled_images=int(pd.unique(codes[changed]).size),
                        excluded_images=int(pd.unique(codes[drop]).size),
                        relabelled_rows=int(changed.sum()), excluded_rows=int(drop.sum()))
    return out.reset_index(drop=True), change


def view_predictions(run: Run, view: str = RAW, curation: Curation | None = None) -> tuple[pd.DataFrame, ViewChange]:
    """The run's usable predictions in ``view`` and what the curation changed (nothing for raw)."""
    check_view(view)
    rows = run.usable_predictions()
    if view == RAW:
        return rows, ViewChange()
    return apply_curation(rows, curation if curation is not None else read_curation(run))


def default_view(run: Run) -> str:
    """Curated once the run has a curation log (with an entry), else raw: what ``explain metrics
    --run`` and the dashboard show unless told otherwise."""
    from core.curation import log_path

    try:
        return CURATED if log_path(run).stat().st_size > 0 else RAW
    except OSError:
        return RAW


VIEW_COMPARED = ("accuracy", "accuracy_top5", "sibling_rate", "wup_mistakes", "severity")
COMPARISON_DOCS = {
    "model": "The model's registry id.",
    "n_raw": "Images counted in the raw view.",
    "n_curated": "Images counted in the curated view (excluded images leave it).",
    **{f"{c}_{side}": f"{c} in the {side} view (explain.metrics; with its interval in the *_ci_* columns)."
       for c in VIEW_COMPARED for side in ("raw", "curated")},
    **{f"{c}_change": f"{c} curated minus raw." for c in VIEW_COMPARED},
}


def compare_views(raw, curated, columns=VIEW_COMPARED) -> pd.DataFrame:
    """Per model, each of ``columns`` of the per-model metric tables in the raw and the curated view
    (``raw`` / ``curated``: explain.metrics.MetricTables) with their interval bounds, and the
    change (curated - raw): what the curation moved. A model in one view only has NA on the other side."""
    def side(tables, name: str) -> pd.DataFrame:
        keep = ["model", "n"] + [c for c in columns if c in tables.per_model.columns]
        keep += [f"{c}_ci_{b}" for c in columns for b in ("low", "high") if f"{c}_ci_{b}" in tables.per_model.columns]
        frame = tables.per_model[keep].copy()
        return frame.rename(columns={c: f"{c}_{name}" if not c.endswith(("_ci_low", "_ci_high")) else
                                     c.replace("_ci_", f"_{name}_ci_") for c in keep if c != "model"})

    out = side(raw, "raw").merge(side(curated, "curated"), on="model", how="outer", sort=False)
    for c in columns:
        if f"{c}_raw" in out and f"{c}_curated" in out:
            out[f"{c}_change"] = (out[f"{c}_curated"].astype("Float64") - out[f"{c}_raw"].astype("Float64"))
    return out.reset_index(drop=True)


def change_sentence(row, change: ViewChange, metric: str = "accuracy") -> str:
    """'efficientnet_lite0: accuracy 63.3% raw -> 70.1% curated (4 relabelled, 3 excluded)' for a
    row of :func:`compare_views` (outside text: escape it where Markdown is read)."""
    def pct(value) -> str:
        return "NA" if value is None or pd.isna(value) else f"{float(value):.1%}"

    return (f"{row['model']}: {metric} {pct(row.get(f'{metric}_raw'))} raw -> {pct(row.get(f'{metric}_curated'))} "
            f"curated ({change.describe()})")
