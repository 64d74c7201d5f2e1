"""The embedding map (issue 15 item 4): a 2-D projection of a model's stored features, one point
per image, joined with what the same model predicted for it.

Features are the pooled pre-logit features a classifier stored with ``python -m classify --run
RUN --models M --features`` (``core.features.read_features``: an index of image and true class,
sorted by image, and a float32 array, one row per image). Everything here is a pure function of
arrays and tables, so a page can cache it by the features files' fingerprint.

Projections (:func:`project`), both on **L2-normalised** features (each row divided by its
Euclidean norm; an all-zero row stays zero), the space a linear probe and a cosine similarity
work in, where Euclidean distance is a monotone function of the cosine:

- ``"pca"`` (the default): scikit-learn's ``PCA(n_components=2, svd_solver="full")``: exact,
  deterministic (scikit-learn fixes the signs of the components), fast, and global distances
  mean something; the share of variance the two axes explain is :func:`explained_variance`.
- ``"tsne"``: scikit-learn's ``TSNE(n_components=2, init="pca", learning_rate="auto",
  random_state=seed)``; perplexity 30 (scikit-learn's default) capped at ``(n - 1) / 3`` for small
  runs (scikit-learn requires perplexity < n; a third keeps about three neighbourhoods' worth of
  points per point), never below 1. The same features and seed give the same map. t-SNE keeps
  neighbourhoods, not distances: clusters' sizes and the gaps between them mean little.

The table (:func:`embedding_table`): the projection's x and y per image, its true class and name,
and the model's stored top-1 (``pred_wnid``, name, probability), ``correct`` and the WordNet
``relation`` of the top-1 to the truth ('same' when correct): the columns of
:func:`explain.browse.image_table`, the Browse page's per-image table, so a point says exactly
what Browse says of that image.
"""
from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from core.errors import WildLensError

METHODS = ("pca", "tsne")
METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE"}
TSNE_PERPLEXITY = 30.0  # scikit-learn's default, capped for small runs (tsne_perplexity)

# Column -> one-line meaning; embedding_table returns exactly these, in this order.
COLUMN_DOCS: dict[str, str] = {
    "image": "The image: its file in the run (relative to the images folder).",
    "true_wnid": "The true class (wnid).",
    "true_name": "ImageNet's name of the true class.",
    "x": "First coordinate of the 2-D projection of the image's L2-normalised features.",
    "y": "Second coordinate of the projection.",
    "pred_wnid": "The model's stored top-1 prediction (wnid); NA when the model has no usable prediction of the image.",
    "pred_name": "ImageNet's name of pred_wnid.",
    "prob_1": "The model's probability of pred_wnid.",
    "correct": "The top-1 prediction is the true class (strict); NA without a prediction.",
    "relation": "WordNet relation of the top-1 prediction to the true class ('same' when correct; explain.vocabulary).",
}
COLUMNS: tuple[str, ...] = tuple(COLUMN_DOCS)


class EmbeddingError(WildLensError, ValueError):
    """Features or a projection that cannot be used as asked; the message says what is allowed."""


def normalise(features: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm, in float64; a row of zeros stays zeros."""
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise EmbeddingError(f"Features must be a 2-D array (images x dimensions), got shape {x.shape}.")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def tsne_perplexity(n: int, perplexity: float = TSNE_PERPLEXITY) -> float:
    """The perplexity t-SNE uses for ``n`` points: ``perplexity`` capped at (n - 1) / 3, at least 1."""
    return float(max(1.0, min(float(perplexity), (n - 1) / 3.0)))


def _pca(x: np.ndarray, seed: int):
    from sklearn.decomposition import PCA

    pca = PCA(n_components=min(2, x.shape[0], x.shape[1]), svd_solver="full", random_state=seed)
    return pca, pca.fit_transform(x)


def project(features: np.ndarray, method: str = "pca", seed: int = 0, *,
            perplexity: float = TSNE_PERPLEXITY) -> np.ndarray:
    """``features`` (n x dim) -> an n x 2 float64 array: ``method`` 'pca' (default) or 'tsne' on the
    L2-normalised rows (see the module's docstring). Fewer than 2 dimensions or components (one
    image, one feature) leave the missing coordinate 0; no image gives a 0 x 2 array."""
    if method not in METHODS:
        raise EmbeddingError(f"Unknown projection {method!r}; allowed: {', '.join(METHODS)}.")
    x = normalise(features)
    n = x.shape[0]
    out = np.zeros((n, 2), dtype=np.float64)
    if n < 2 or x.shape[1] == 0:
        return out
    if method == "pca":
        _, coords = _pca(x, seed)
        out[:, :coords.shape[1]] = coords
        return out
    if n < 3:  # t-SNE needs a neighbourhood: two points are a line either way
        _, coords = _pca(x, seed)
        out[:, :coords.shape[1]] = coords
        return out
    from sklearn.manifold import TSNE

    tsne = TSNE(n_components=2, perplexity=tsne_perplexity(n, perplexity), init="pca", learning_rate="auto",
                random_state=seed)
    return tsne.fit_transform(x).astype(np.float64)


def explained_variance(features: np.ndarray) -> tuple[float, float]:
    """The share of the normalised features' variance along PCA's two axes (the second 0.0 when
    there is only one)."""
    x = normalise(features)
    if x.shape[0] < 2 or x.shape[1] == 0:
        return (0.0, 0.0)
    pca, _ = _pca(x, 0)
    ratios = list(pca.explained_variance_ratio_) + [0.0, 0.0]
    return float(ratios[0]), float(ratios[1])


def select_images(index: pd.DataFrame, features: np.ndarray,
                  images: Collection[str] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of ``index`` (with their feature rows) whose image is in ``images``; all of them
    for None (a run without a manifest). The index is renumbered from 0, row i still feature row i."""
    if len(index) != len(features):
        raise EmbeddingError(f"The features index has {len(index)} rows but the array {len(features)}.")
    if images is None:
        return index.reset_index(drop=True), np.asarray(features)
    keep = index["image"].isin(images).to_numpy(dtype=bool)
    return index[keep].reset_index(drop=True), np.asarray(features)[keep]


def embedding_table(index: pd.DataFrame, coords: np.ndarray, predictions: pd.DataFrame, model: str, *,
                    label_space: str = "imagenet-1k", cache_dir=None) -> pd.DataFrame:
    """One row per image of ``index`` (``image``, ``true_wnid``; row i at ``coords[i]``) with the
    columns of :data:`COLUMN_DOCS`, in the index's order: the point, and ``model``'s usable stored
    prediction of the image (:func:`explain.browse.image_table`: status 'ok'; the last row wins).
    An image the model has no usable prediction of keeps its point with NA prediction columns.
    The true class is the features index's (the one stored beside the features)."""
    from .browse import class_names, image_table

    coords = np.asarray(coords, dtype=np.float64)
    if coords.shape != (len(index), 2):
        raise EmbeddingError(f"Expected {len(index)} x 2 coordinates for {len(index)} images, got {coords.shape}.")
    points = pd.DataFrame({"image": index["image"].astype("string").to_numpy(),
                           "true_wnid": index["true_wnid"].astype("string").to_numpy(),
                           "x": coords[:, 0], "y": coords[:, 1]})
    rows = predictions[predictions["model"] == model] if "model" in predictions.columns else predictions.iloc[:0]
    truth = dict(zip(points["image"].dropna(), points.loc[points["image"].notna(), "true_wnid"]))
    rows = rows[rows["image"].isin(set(truth))]
    if len(rows):
        # Judged against the truth stored beside the features, the one the point is coloured by.
        table = image_table(rows.assign(true_wnid=rows["image"].map(truth)), None, label_space=label_space,
                            cache_dir=cache_dir)
        mine = table[["image", "pred_wnid_1", "pred_name_1", "prob_1", "correct", "relation"]]
        mine = mine.rename(columns={"pred_wnid_1": "pred_wnid", "pred_name_1": "pred_name"})
        out = points.merge(mine, on="image", how="left", validate="many_to_one")
    else:
        out = points.assign(pred_wnid=pd.NA, pred_name=pd.NA, prob_1=np.nan, correct=pd.NA, relation=pd.NA)
    names = class_names(out["true_wnid"].dropna(), label_space)
    out["true_name"] = out["true_wnid"].map(names)
    for column in ("image", "true_wnid", "true_name", "pred_wnid", "pred_name", "relation"):
        out[column] = out[column].astype("string")
    out["prob_1"] = out["prob_1"].astype("Float64")
    out["correct"] = out["correct"].astype("boolean")
    return out[list(COLUMNS)].reset_index(drop=True)
