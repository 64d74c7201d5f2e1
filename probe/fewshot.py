"""Few-shot draws and the probe sweep: N images per class, several seeds, top-1/top-5 on the rest.

The draw (:func:`draw`), ImageNet-CoG's few-shot protocol on a run's images:

* per seed, ``numpy.random.default_rng(seed)`` permutes the images of each class, classes taken
  in wnid order and each class's images in name order (so the draw depends on the seed and the
  stored images only). The first ``n_c`` of a class's permutation are its training shots; every
  other image of the class is its test set. Train and test are disjoint by construction, and
  draws are nested: the 4 shots of a seed contain its 2 shots.
* ``n_c = min(N, images of the class - 1)``: a class never gives away its last image, so every
  class keeps at least one test image; a class with fewer than N + 1 images is *capped*, and the
  output says so (``per_class.n_train``; ``results.capped_classes``). A class with a single usable
  image cannot be probed and is left out (:mod:`probe.data` says which).
* **Near duplicates** (``groups``, :mod:`probe.duplicates`: pHash distance <= 8): a class's shots
  are the first images of its permutation that belong to *distinct* groups, and the test set is
  every image whose group has no training shot, so a group is never on both sides (a shot's near
  duplicates are tested nowhere; ``n_train + n_test`` is then below the images). Images count by
  group above: ``n_c = min(N, distinct images of the class - 1)``. Without groups (every image its
  own) the draw is the plain one, image for image.
* **N is capped at what the classes hold** (:func:`shot_limit`: the most distinct images of any
  class, minus the one it keeps for testing): every N above it would be the same probe as N =
  the limit again, so :func:`sweep` runs the limit in their place, once (:func:`capped_shots`),
  and ``results.shots_limit`` records it (the Probes page says so on the chart).
* validation (for the hyper-parameter search, :func:`probe.linear.search_probe`): the last
  ``v_c = clip(round(0.2 n_c), 1, n_c - 1)`` training shots of each class with at least two
  shots (CoG's 20 %; ELEVATER's rule of at least one image per class on each side); the search
  fits on the others, picks ``C`` on these, then refits on all ``n_c`` shots.
* **N = 1 is not validated**: one shot per class cannot be trained on and validated on at once,
  and borrowing a second labelled image would make it a 2-shot probe. N = 1 uses the grid's
  centre, :data:`probe.linear.DEFAULT_C`, and its rows say ``hp_source = 'default'``. (Likewise
  any draw where no class has two shots.)
* N = 0 (zero-shot models with a recorded text classifier): the zero-shot classifier itself, over
  the probe's classes, on every image (no draw, no seed): the start of the ``language-init`` curve.

Top-5 is NA when the probe has five classes or fewer (it would be 1 by construction).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pandas as pd

from .linear import SearchResult, l2_normalise, search_probe

SHOTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
SEEDS: tuple[int, ...] = (22, 37, 45, 77, 93)  # ImageNet-CoG's five seeds
VAL_FRACTION = 0.2
TOP_K = 5
VARIANT_LINEAR = "linear"  # the plain probe: W0 = 0
VARIANT_LANGUAGE = "language-init"  # ELEVATER's language-initialised head: W0 = the text classifier

RESULTS_SCHEMA: dict[str, str] = {
    "model": "string",
    "variant": "string",  # 'linear' or 'language-init'
    "shots": "Int64",  # N asked for (0: the zero-shot classifier)
    "seed": "Int64",  # NA for N = 0
    "n_classes": "Int64",
    "n_train": "Int64",  # training images drawn (all classes; <= N x classes when capped)
    "n_val": "Int64",  # of which held out to choose C
    "n_test": "Int64",
    "capped_classes": "Int64",  # classes with fewer than N training images (they had <= N images)
    "shots_limit": "Int64",  # the largest N the classes allow (most distinct images of a class - 1)
    "near_dup_groups": "Int64",  # groups of 2+ near-duplicate images among the probed ones (kept on one side)
    "C": "Float64",  # the inverse regularisation used (NA for N = 0)
    "hp_source": "string",  # 'validated', 'default' (no validation image: N = 1) or 'zero-shot'
    "val_top1": "Float64",  # the chosen C's validation top-1
    "top1": "Float64",
    "top5": "Float64",  # NA with five classes or fewer
}
PER_CLASS_SCHEMA: dict[str, str] = {
    "model": "string",
    "variant": "string",
    "shots": "Int64",
    "seed": "Int64",
    "wnid": "string",
    "n_images": "Int64",  # usable images of the class with features
    "n_train": "Int64",  # min(N, n_images - 1): below N means capped
    "n_val": "Int64",
    "n_test": "Int64",
    "top1": "Float64",
    "top5": "Float64",
}


def validation_count(n_shots: int) -> int:
    """Validation images among a class's ``n_shots`` training shots (see the module's doc)."""
    if n_shots < 2:
        return 0
    return int(min(n_shots - 1, max(1, np.floor(VAL_FRACTION * n_shots + 0.5))))


def class_permutations(labels: np.ndarray, classes: Sequence[str], seed: int) -> dict[str, np.ndarray]:
    """Per class (in the order given: wnid order), its rows of ``labels`` in a seeded random order."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    return {c: rng.permutation(np.flatnonzero(labels == c)) for c in classes}


def _distinct(order: np.ndarray, groups: np.ndarray | None) -> np.ndarray:
    """The rows of ``order`` whose group is not met earlier in it (all of them without groups)."""
    if groups is None:
        return order
    _, first = np.unique(groups[order], return_index=True)
    return order[np.sort(first)]


def shot_limit(labels: np.ndarray, classes: Sequence[str], groups: np.ndarray | None = None) -> int:
    """The largest N any class can give: its distinct images (near-duplicate groups counted once)
    minus the one it keeps for testing, over the classes; N above it changes no draw."""
    labels = np.asarray(labels)
    counts = [len(_distinct(np.flatnonzero(labels == c), groups)) for c in classes]
    return max(0, max(counts, default=0) - 1)


def capped_shots(shots: Sequence[int], limit: int) -> list[int]:
    """``shots`` with every N above ``limit`` replaced by ``limit`` (once), ascending."""
    return sorted({min(int(n), int(limit)) for n in shots if min(int(n), int(limit)) >= 1})


@dataclass(frozen=True)
class Draw:
    seed: int
    shots: int
    train: np.ndarray  # row numbers, ascending
    val_mask: np.ndarray  # aligned with train: True for the validation shots
    test: np.ndarray  # row numbers, ascending: every row of the probe's classes whose group is not in train
    per_class: pd.DataFrame  # wnid, n_images, n_train, n_val, n_test


def draw(labels: np.ndarray, classes: Sequence[str], shots: int, seed: int,
         permutations: dict[str, np.ndarray] | None = None, groups: np.ndarray | None = None) -> Draw:
    """The ``shots``-shot draw of ``seed`` over ``classes`` (rows of ``labels`` outside them are in
    neither set). ``permutations`` (from :func:`class_permutations` with the same seed) saves
    recomputing them for each N. ``groups`` (one id per row of ``labels``, e.g.
    :func:`probe.duplicates.near_duplicate_groups`) keeps each group on one side."""
    if shots < 1:
        raise ValueError("shots must be at least 1")
    labels = np.asarray(labels)
    groups = None if groups is None else np.asarray(groups)
    perms = permutations if permutations is not None else class_permutations(labels, classes, seed)
    train, val, counts = [], [], []
    for c in classes:
        order = perms[c]
        distinct = _distinct(order, groups)
        n = min(shots, len(distinct) - 1)
        v = validation_count(n)
        train.append(distinct[:n])
        val.append(distinct[n - v:n])
        counts.append((c, len(order), n, v))
    train_rows = np.sort(np.concatenate(train)) if train else np.zeros(0, dtype=np.int64)
    val_rows = np.concatenate(val) if val else np.zeros(0, dtype=np.int64)
    tested = np.isin(labels, list(classes))
    tested[train_rows] = False
    if groups is not None:  # a training shot's near duplicates (in any class) are tested nowhere
        tested &= ~np.isin(groups, groups[train_rows])
    test_rows = np.flatnonzero(tested)
    n_test = pd.Series(labels[test_rows]).value_counts()
    per_class = pd.DataFrame([(c, k, n, v, int(n_test.get(c, 0))) for c, k, n, v in counts],
                             columns=["wnid", "n_images", "n_train", "n_val", "n_test"])
    return Draw(seed, shots, train_rows, np.isin(train_rows, val_rows), test_rows, per_class)


def topk_hits(scores: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """Per row, whether the true class is among the ``k`` highest scores (ties: lower class first)."""
    k = min(k, scores.shape[1])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return (order == codes[:, None]).any(axis=1)


def _scores(scores: np.ndarray, codes: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray | None]:
    top1 = topk_hits(scores, codes, 1)
    top5 = topk_hits(scores, codes, TOP_K) if n_classes > TOP_K else None
    return top1, top5


def _per_class_rows(base: dict, classes: Sequence[str], codes: np.ndarray, top1, top5, counts: pd.DataFrame) -> list[dict]:
    rows = []
    for i, c in enumerate(classes):
        mask = codes == i
        count = counts.iloc[i]
        rows.append({**base, "wnid": c, "n_images": int(count["n_images"]), "n_train": int(count["n_train"]),
                     "n_val": int(count["n_val"]), "n_test": int(mask.sum()),
                     "top1": float(top1[mask].mean()) if mask.any() else np.nan,
                     "top5": float(top5[mask].mean()) if top5 is not None and mask.any() else np.nan})
    return rows


@dataclass(frozen=True)
class ProbeInputs:
    """What every fit of one model's sweep reads (sent once to a Ray cluster's object store)."""

    model: str
    features: np.ndarray  # [images, dim], the probe's classes only
    labels: np.ndarray  # wnid per row
    codes: np.ndarray  # class index per row
    classes: tuple[str, ...]
    groups: np.ndarray | None  # near-duplicate group per row, or None
    prior_coef: np.ndarray | None  # the language-initialised variant's W0, or None
    limit: int  # shot_limit
    dup_groups: int
    permutations: dict  # seed -> class_permutations(labels, classes, seed): drawn once per seed, not per fit


def probe_one(inputs: ProbeInputs, job: tuple[int, int, str]) -> tuple[dict, list[dict]]:
    """One (seed, N, variant) probe of a sweep: its results row and per-class rows. A pure function of
    its arguments (the draw is recomputed from the seed), so it runs the same in this process or as a
    Ray task (:mod:`probe.ray_fits`)."""
    seed, n, variant = job
    classes, codes, k = list(inputs.classes), inputs.codes, len(inputs.classes)
    d = draw(inputs.labels, classes, n, seed, inputs.permutations[seed], inputs.groups)
    prior = inputs.prior_coef if variant == VARIANT_LANGUAGE else None
    fit: SearchResult = search_probe(inputs.features[d.train], inputs.labels[d.train], d.val_mask, classes,
                                     prior_coef=prior)
    scores = fit.estimator.decision_function(inputs.features[d.test])
    top1, top5 = _scores(scores, codes[d.test], k)
    base = {"model": inputs.model, "variant": variant, "shots": n, "seed": seed}
    result = {**base, "n_classes": k, "n_train": len(d.train), "n_val": int(d.val_mask.sum()),
              "n_test": len(d.test), "capped_classes": int((d.per_class["n_train"] < n).sum()),
              "shots_limit": inputs.limit, "near_dup_groups": inputs.dup_groups, "C": fit.C, "hp_source": fit.hp_source,
              "val_top1": fit.val_top1 if fit.val_top1 is not None else np.nan,
              "top1": float(top1.mean()), "top5": float(top5.mean()) if top5 is not None else np.nan}
    return result, _per_class_rows(base, classes, codes[d.test], top1, top5, d.per_class)


def local_fits(fn, inputs: ProbeInputs, jobs: list[tuple]) -> Iterator[tuple[dict, list[dict]]]:
    """The fits one after another in this process (the default runner of :func:`sweep`)."""
    for job in jobs:
        yield fn(inputs, job)


def sweep(model: str, features: np.ndarray, labels: np.ndarray, classes: Sequence[str], *,
          shots: Sequence[int] = SHOTS, seeds: Sequence[int] = SEEDS, prior_coef: np.ndarray | None = None,
          groups: np.ndarray | None = None, progress=None, fits=local_fits) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every (variant, N, seed) probe of one model: ``(results, per_class)`` tables (schemas
    :data:`RESULTS_SCHEMA`, :data:`PER_CLASS_SCHEMA`), sorted. ``prior_coef`` [classes, dim] (the
    text classifier times its logit scale, rows in ``classes`` order) adds the language-initialised
    variant and its N = 0 row. ``groups`` (one near-duplicate group id per row) keeps each group on
    one side of every draw. N above :func:`shot_limit` is run once, as the limit
    (:func:`capped_shots`). ``progress(done, total, message)`` is called after each probe.
    ``fits(probe_one, inputs, jobs)`` runs the fits and yields their answers in the jobs' order:
    :func:`local_fits` here, :func:`probe.ray_fits.ray_fits` as Ray tasks (the same tables)."""
    from .duplicates import group_summary

    classes = list(classes)
    labels = np.asarray(labels)
    lookup = {c: i for i, c in enumerate(classes)}
    keep = np.flatnonzero(np.isin(labels, classes))
    features, labels = features[keep], labels[keep]
    groups = None if groups is None else np.asarray(groups)[keep]
    limit = shot_limit(labels, classes, groups)
    shots = capped_shots(shots, limit)
    dup_groups = group_summary(groups)[0] if groups is not None else 0
    codes = np.array([lookup[c] for c in labels.tolist()], dtype=np.int64)
    k = len(classes)
    variants = [VARIANT_LINEAR] + ([VARIANT_LANGUAGE] if prior_coef is not None else [])
    results, per_class = [], []
    total = len(variants) * len(shots) * len(seeds) + (prior_coef is not None)
    done = 0

    if prior_coef is not None:  # N = 0: the zero-shot classifier over the probe's classes, every image
        scores = l2_normalise(features) @ np.asarray(prior_coef, dtype=np.float64).T
        top1, top5 = _scores(scores, codes, k)
        base = {"model": model, "variant": VARIANT_LANGUAGE, "shots": 0, "seed": pd.NA}
        results.append({**base, "n_classes": k, "n_train": 0, "n_val": 0, "n_test": len(codes), "capped_classes": 0,
                        "shots_limit": limit, "near_dup_groups": dup_groups, "C": np.nan, "hp_source": "zero-shot", "val_top1": np.nan, "top1": float(top1.mean()),
                        "top5": float(top5.mean()) if top5 is not None else np.nan})
        counts = pd.DataFrame({"n_images": np.bincount(codes, minlength=k), "n_train": 0, "n_val": 0})
        per_class += _per_class_rows(base, classes, codes, top1, top5, counts)
        done += 1
        if progress:
            progress(done, total, f"{model} zero-shot")

    inputs = ProbeInputs(model, features, labels, codes, tuple(classes), groups,
                         None if prior_coef is None else np.asarray(prior_coef), limit, dup_groups,
                         {int(seed): class_permutations(labels, classes, int(seed)) for seed in seeds})
    jobs = [(int(seed), int(n), variant) for seed in seeds for n in shots for variant in variants]
    for (seed, n, variant), (result, rows) in zip(jobs, fits(probe_one, inputs, jobs), strict=True):
        results.append(result)
        per_class += rows
        done += 1
        if progress:
            progress(done, total, f"{model} {variant} N={n} seed={seed} top-1 {result['top1']:.3f}")
    return sort_results(pd.DataFrame(results), RESULTS_SCHEMA), sort_results(pd.DataFrame(per_class), PER_CLASS_SCHEMA)


def sort_results(df: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """Columns in schema order, dtypes conformed, rows in one stable order (model, variant, shots,
    seed[, wnid]): the same inputs always give the same table."""
    df = df.reindex(columns=list(schema)) if len(df) else pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()})
    df = df.astype(schema)
    keys = [c for c in ("model", "variant", "shots", "seed", "wnid") if c in df.columns]
    return df.sort_values(keys, kind="stable", na_position="first").reset_index(drop=True)
