"""Label noise among a run's images: cleanlab's ``find_label_issues`` on out-of-fold probe
probabilities.

1. Folds: ``StratifiedKFold`` with ``min(5, smallest class)`` folds, shuffled with the seed (22).
   When the images hold near-duplicate groups (:mod:`probe.duplicates`), ``StratifiedGroupKFold``
   instead (``min(5, smallest class's distinct images)`` folds): a group is never both fitted and
   scored, or an image's twin would vouch for its label.
2. ``C``: scikit-learn's ``GridSearchCV`` over :data:`probe.linear.C_GRID` on those folds, scored
   by held-out **log-loss**, not top-1: cleanlab reads the probabilities themselves (its per-class
   thresholds are mean self-confidences), and an over-confident probe (the largest C fits near
   duplicates perfectly) made it flag the correct twin of a planted image as well.
3. Out-of-fold probabilities: ``cross_val_predict`` with the same folds and that ``C``, over the
   run's classes: every image is scored by a probe that never saw its label.
4. ``cleanlab.filter.find_label_issues`` (its default, ``prune_by_noise_rate``) flags the images
   whose given class is unlikely under those probabilities; ``label_quality`` is
   ``cleanlab.rank.get_label_quality_scores`` (self-confidence: the out-of-fold probability of
   the given class, lower = more suspect); ``suggested_wnid`` is the most probable class.

A limit of cleanlab's default on small sets: an image is counted as "confidently another class"
only when its probability of that class reaches the class's *mean* self-confidence; a mislabelled
image that looks less typical than that class's own images (in the packaged photos, the 60 %
centre crop of the cat filed as espresso) gets a very low ``label_quality`` but is not flagged.
Sort by ``label_quality`` to see those.

Single-threaded (``n_jobs=1``) and seeded, so the same features give the same table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.explained import LABEL_ISSUES_SCHEMA

from .data import ProbeData
from .fewshot import SEEDS
from .linear import C_GRID, SoftmaxProbe, _validation_scores

FOLDS = 5
ISSUES_SCHEMA = LABEL_ISSUES_SCHEMA  # core.explained: explain's error types read the table too


def _neg_log_loss(estimator, X, y) -> float:
    return _validation_scores(estimator, X, y)["neg_log_loss"]


def issue_folds(data: ProbeData, *, folds: int = FOLDS, seed: int = SEEDS[0]):
    """``(cv, groups)`` for the out-of-fold probabilities: stratified folds, by near-duplicate
    group when the images hold any (``groups`` is then passed to the splitter; None otherwise)."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    groups = data.groups
    if groups is None or len(np.unique(groups)) == len(groups):
        smallest = int(pd.Series(data.labels).value_counts().min())
        return StratifiedKFold(n_splits=max(2, min(folds, smallest)), shuffle=True, random_state=seed), None
    smallest = int(pd.Series(groups).groupby(data.labels).nunique().min())
    return StratifiedGroupKFold(n_splits=max(2, min(folds, smallest)), shuffle=True, random_state=seed), groups


def out_of_fold_probabilities(data: ProbeData, *, folds: int = FOLDS, seed: int = SEEDS[0]) -> tuple[np.ndarray, float]:
    """``(probabilities [rows, classes], C)``: each row predicted by a probe fitted without it
    (nor its near duplicates)."""
    from sklearn.model_selection import GridSearchCV, cross_val_predict

    cv, groups = issue_folds(data, folds=folds, seed=seed)
    # class codes, not wnids: cross_val_predict label-encodes y for predict_proba (columns = codes)
    lookup = {c: i for i, c in enumerate(data.classes)}
    codes = np.array([lookup[c] for c in data.labels.tolist()], dtype=np.int64)
    probe = SoftmaxProbe(classes=np.arange(len(data.classes)))
    search = GridSearchCV(probe, {"C": list(C_GRID)}, scoring=_neg_log_loss, cv=cv, refit=False, n_jobs=1,
                          error_score="raise").fit(data.features, codes, groups=groups)
    C = float(search.best_params_["C"])
    proba = cross_val_predict(probe.set_params(C=C), data.features, codes, groups=groups, cv=cv,
                              method="predict_proba", n_jobs=1)
    return proba, C


def label_issues(data: ProbeData, *, folds: int = FOLDS, seed: int = SEEDS[0]) -> pd.DataFrame:
    """One row per image (schema :data:`ISSUES_SCHEMA`), most suspect first."""
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores

    proba, C = out_of_fold_probabilities(data, folds=folds, seed=seed)
    lookup = {c: i for i, c in enumerate(data.classes)}
    codes = np.array([lookup[c] for c in data.labels.tolist()], dtype=np.int64)
    flagged = find_label_issues(codes, proba, n_jobs=1)
    quality = get_label_quality_scores(codes, proba)
    best = np.argmax(proba, axis=1)
    table = pd.DataFrame({
        "model": data.model, "image": data.images, "true_wnid": data.labels,
        "suggested_wnid": np.asarray(data.classes)[best], "label_quality": quality,
        "suggested_prob": proba[np.arange(len(best)), best], "is_issue": flagged, "C": C,
    }).astype(ISSUES_SCHEMA)
    return table.sort_values(["model", "label_quality", "image"], kind="stable").reset_index(drop=True)
