"""Label noise among a run's images: cleanlab's ``find_label_issues`` on out-of-fold probe
probabilities.

1. ``C`` is chosen as in a probe (:func:`probe.linear.search_probe`) on a seeded 20 % validation
   split of all the images of each class (:func:`probe.fewshot.validation_count` per class).
2. Out-of-fold probabilities: scikit-learn's ``cross_val_predict`` with ``StratifiedKFold``
   (``min(folds, smallest class)`` folds, shuffled with the seed) and the probe with that ``C``,
   over the run's classes: every image is scored by a probe that never saw its label.
3. ``cleanlab.filter.find_label_issues`` (its default, ``prune_by_noise_rate``) flags the images
   whose given class is unlikely under those probabilities; ``label_quality`` is
   ``cleanlab.rank.get_label_quality_scores`` (self-confidence: the out-of-fold probability of
   the given class, lower = more suspect); ``suggested_wnid`` is the most probable class.

Single-threaded (``n_jobs=1``) and seeded, so the same features give the same table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data import ProbeData
from .fewshot import SEEDS, class_permutations, validation_count
from .linear import SoftmaxProbe, search_probe

FOLDS = 5
ISSUES_SCHEMA: dict[str, str] = {
    "model": "string",
    "image": "string",  # the manifest's 'file'
    "true_wnid": "string",  # the class the image is stored under
    "suggested_wnid": "string",  # the class the out-of-fold probe finds most probable
    "label_quality": "Float64",  # out-of-fold probability of true_wnid (cleanlab self-confidence)
    "suggested_prob": "Float64",  # out-of-fold probability of suggested_wnid
    "is_issue": "boolean",  # flagged by cleanlab.filter.find_label_issues
    "C": "Float64",  # the probe's inverse regularisation
}


def out_of_fold_probabilities(data: ProbeData, *, folds: int = FOLDS, seed: int = SEEDS[0]) -> tuple[np.ndarray, float]:
    """``(probabilities [rows, classes], C)``: each row predicted by a probe fitted without it."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    classes = np.asarray(data.classes)
    val_mask = np.zeros(len(data.labels), dtype=bool)
    for rows in class_permutations(data.labels, data.classes, seed).values():
        val_mask[rows[:validation_count(len(rows))]] = True
    C = search_probe(data.features, data.labels, val_mask, classes).C
    smallest = int(pd.Series(data.labels).value_counts().min())
    cv = StratifiedKFold(n_splits=max(2, min(folds, smallest)), shuffle=True, random_state=seed)
    proba = cross_val_predict(SoftmaxProbe(C=C, classes=classes), data.features, data.labels, cv=cv,
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
