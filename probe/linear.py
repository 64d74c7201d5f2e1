"""The linear probe: multinomial logistic regression on L2-normalised frozen features.

Model and objective (ImageNet-CoG's probe: a softmax linear classifier on L2-normalised
features; the regulariser as scikit-learn's ``LogisticRegression``)::

    minimise over W [classes, dim], b [classes]:
        mean_i  CE(softmax(W x_i + b), y_i)  +  1 / (2 C n) * ||W - W0||^2

with ``x_i`` L2-normalised, the intercept ``b`` unpenalised and ``W0`` the **prior head**: zero
for the plain probe (then this is exactly scikit-learn's ``LogisticRegression(C=C)`` with the
lbfgs multinomial solver, which ``tests/probe/test_linear.py`` checks), or the zero-shot text
classifier for the language-initialised variant (below). It is solved to convergence with
L-BFGS (SciPy), in float64, from ``W0``: the problem is convex, so the answer depends on the data,
``C`` and ``W0`` only, never on a learning rate, a batch order or a random seed.

Why not CoG's SGD with a searched learning rate and weight decay: on a convex objective solved
to its optimum, the learning rate is a property of the optimiser, not of the classifier it
returns; the one hyper-parameter that changes the classifier is the regularisation strength
(weight decay = ``1 / (C n)`` here). Searching it alone, on a log scale, is ELEVATER's and CLIP's
choice for logistic-regression probes, deterministic, and fast enough for the whole few-shot
sweep on a CPU (``benchmarks/bench_probe.py``).

The language-initialised head (ELEVATER, Sec. 4): ELEVATER starts SGD from the text classifier,
so that training for zero steps is the zero-shot model. With a solver that runs to the optimum the
starting point alone would be forgotten, so the text classifier is also the centre of the L2
penalty (L2-SP, Li et al. 2018): ``W0 = logit_scale * T`` (``T`` the normalised class text
embeddings), and no intercept (the zero-shot head has none; CLIP's scalar logit bias changes no
ranking). The property ELEVATER relies on is kept: as ``C -> 0`` (no trust in the shots) the
probe *is* the zero-shot classifier, and N = 0 is the zero-shot result itself.

The search (:func:`search_probe`): scikit-learn's ``GridSearchCV`` over ``C`` on the log grid
:data:`C_GRID` with one predefined validation split of the training shots (``PredefinedSplit``;
the split is drawn by :mod:`probe.fewshot`), scored by validation top-1 with ties broken by the
lower validation log-loss, then refitted on all the training shots with the chosen ``C`` (CoG's
protocol: choose on 20 % of the training set, retrain on all of it). A draw with no validation
image (N = 1: one shot per class cannot be both trained on and validated on) uses
:data:`DEFAULT_C`, the centre of the grid, and says so (``hp_source = 'default'``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassifierMixin

# C from 10^-2 to 10^4, one value per decade (7 values; CLIP's sweep starts the same way). Weight
# decay = 1 / (C n): with L2-normalised features a confident class score needs ||w|| in the tens,
# which the upper half of the grid allows; the lower end keeps a language-initialised head close to
# the zero-shot one. Neighbouring half-decades changed test top-1 by under a point in our sweeps,
# and each value is a full fit: one per decade keeps the whole few-shot sweep within a minute.
C_GRID: tuple[float, ...] = tuple(float(10.0 ** e) for e in range(-2, 5))
DEFAULT_C: float = C_GRID[len(C_GRID) // 2]  # 10^1: the grid's centre (log scale), used for N = 1
MAX_ITER = 1000
TOL = 1e-5  # L-BFGS-B's gtol: the largest gradient component of the (mean) loss at the answer


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64); an all-zero row stays zero."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


class SoftmaxProbe(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression on L2-normalised features with an L2 penalty towards a
    prior head (zero by default). A scikit-learn estimator, so ``GridSearchCV`` and
    ``cross_val_predict`` drive it.

    ``classes``: every label the probe scores, in column order (default: the labels seen in
    ``fit``); give it when a fold may miss a class, so probabilities keep one column per class.
    ``prior_coef`` [len(classes), dim] and ``prior_intercept`` [len(classes)]: the head the penalty
    pulls towards and the solver starts from (the language-initialised variant); rows follow
    ``classes``, which is then required. ``fit_intercept=False`` keeps the intercept at
    ``prior_intercept`` (zero by default): the language-initialised head has the zero-shot head's
    form, scale x cosine, without a per-class bias, so that ``C -> 0`` is exactly zero-shot."""

    def __init__(self, C: float = DEFAULT_C, classes=None, prior_coef=None, prior_intercept=None,
                 normalise: bool = True, fit_intercept: bool = True, max_iter: int = MAX_ITER, tol: float = TOL,
                 dtype: str = "float32"):
        self.C = C
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.classes = classes
        self.prior_coef = prior_coef
        self.prior_intercept = prior_intercept
        self.normalise = normalise
        self.max_iter = max_iter
        self.tol = tol

    def _features(self, X) -> np.ndarray:
        x = l2_normalise(X) if self.normalise else np.asarray(X, dtype=np.float64)
        return np.ascontiguousarray(x, dtype=self.dtype)

    def fit(self, X, y):
        X = self._features(X)
        y = np.asarray(y)
        if self.classes is not None:
            classes = np.asarray(self.classes)
        elif self.prior_coef is not None:
            raise ValueError("a prior head needs `classes` (its rows' labels, in order)")
        else:
            classes = np.unique(y)
        lookup = {label: i for i, label in enumerate(classes.tolist())}
        try:
            codes = np.fromiter((lookup[label] for label in y.tolist()), dtype=np.int64, count=len(y))
        except KeyError as exc:
            raise ValueError(f"label {exc.args[0]!r} is not one of the probe's classes") from None
        n, dim = X.shape
        k = len(classes)
        w0 = np.zeros((k, dim)) if self.prior_coef is None else np.asarray(self.prior_coef, dtype=np.float64)
        b0 = np.zeros(k) if self.prior_intercept is None else np.asarray(self.prior_intercept, dtype=np.float64)
        if w0.shape != (k, dim) or b0.shape != (k,):
            raise ValueError(f"prior head {w0.shape}/{b0.shape} does not match {k} classes x {dim} features")
        onehot = np.zeros((n, k))
        onehot[np.arange(n), codes] = 1.0
        strength = 1.0 / (float(self.C) * n)

        def loss_and_grad(params: np.ndarray):
            w = params[: k * dim].reshape(k, dim)
            b = params[k * dim:]
            # the two products with X in the features' dtype (float32: half the memory traffic,
            # the bulk of the time); everything of size classes x dim or n x classes in float64
            logp = _log_softmax((X @ w.T.astype(X.dtype)).astype(np.float64) + b)
            delta = w - w0
            loss = -(onehot * logp).sum() / n + 0.5 * strength * float(np.vdot(delta, delta))
            residual = (np.exp(logp) - onehot) / n
            grad_w = (residual.T.astype(X.dtype) @ X).astype(np.float64) + strength * delta
            grad_b = residual.sum(axis=0) if self.fit_intercept else np.zeros(k)
            return loss, np.concatenate([grad_w.ravel(), grad_b])

        result = minimize(loss_and_grad, np.concatenate([w0.ravel(), b0]), jac=True, method="L-BFGS-B",
                          options={"maxiter": int(self.max_iter), "gtol": float(self.tol), "maxls": 50,
                                   "ftol": 64 * np.finfo(float).eps})
        self.coef_ = result.x[: k * dim].reshape(k, dim)
        self.intercept_ = result.x[k * dim:]
        self.classes_ = classes
        self.n_iter_ = int(result.nit)
        self.n_features_in_ = dim
        return self

    def decision_function(self, X) -> np.ndarray:
        return self._features(X).astype(np.float64) @ self.coef_.T + self.intercept_

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(_log_softmax(self.decision_function(X)))

    def predict(self, X) -> np.ndarray:
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]


def _validation_scores(estimator: SoftmaxProbe, X, y) -> dict[str, float]:
    """Top-1 accuracy and negative log-loss on a validation fold (GridSearchCV's multi-metric)."""
    proba = estimator.predict_proba(X)
    lookup = {label: i for i, label in enumerate(estimator.classes_.tolist())}
    codes = np.array([lookup[label] for label in np.asarray(y).tolist()])
    picked = proba[np.arange(len(codes)), codes]
    return {"accuracy": float(np.mean(np.argmax(proba, axis=1) == codes)),
            "neg_log_loss": float(np.mean(np.log(np.clip(picked, 1e-15, None))))}


def _best_index(cv_results: dict) -> int:
    """Highest validation top-1; ties: the lower validation log-loss; then the smaller C (grid order)."""
    accuracy = np.asarray(cv_results["mean_test_accuracy"])
    nll = np.asarray(cv_results["mean_test_neg_log_loss"])
    order = np.lexsort((np.arange(len(accuracy)), -nll, -accuracy))
    return int(order[0])


@dataclass
class SearchResult:
    estimator: SoftmaxProbe  # refitted on all the training shots with the chosen C
    C: float
    hp_source: str  # 'validated' (chosen on the validation split) or 'default' (no validation image)
    val_top1: float | None  # the chosen C's validation top-1 (None without validation)


def search_probe(X: np.ndarray, y: np.ndarray, val_mask: np.ndarray, classes, *, prior_coef=None,
                 prior_intercept=None, grid=C_GRID, default_c: float = DEFAULT_C) -> SearchResult:
    """Choose ``C`` on the validation rows (``val_mask``) of the training shots, then refit on all
    of them. Without validation rows, ``default_c``. With a prior head the intercept stays at
    ``prior_intercept`` (the zero-shot head has none)."""
    from sklearn.model_selection import GridSearchCV, PredefinedSplit

    base = SoftmaxProbe(classes=np.asarray(classes), prior_coef=prior_coef, prior_intercept=prior_intercept,
                        fit_intercept=prior_coef is None)
    val_mask = np.asarray(val_mask, dtype=bool)
    if not val_mask.any() or val_mask.all():
        return SearchResult(base.set_params(C=default_c).fit(X, y), float(default_c), "default", None)
    search = GridSearchCV(base, {"C": list(grid)}, scoring=_validation_scores, refit=_best_index,
                          cv=PredefinedSplit(np.where(val_mask, 0, -1)), n_jobs=1, error_score="raise")
    search.fit(X, y)
    best = search.best_index_
    return SearchResult(search.best_estimator_, float(grid[best]), "validated",
                        float(search.cv_results_["mean_test_accuracy"][best]))
