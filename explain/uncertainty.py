"""How sure each number is: bootstrap intervals over images, paired tests, q-values, verdicts.

The functional core of issue 23 (SPEC "Uncertainty"); :mod:`explain.metrics` puts its intervals
beside every point estimate, :mod:`explain.compare` compares two models and two families. Rates
get Wilson score intervals (:func:`core.intervals.wilson_interval`, also used by crawl); means get
percentile intervals from a **Poisson bootstrap with the image as the unit**.

Why Poisson and why it is exact here: a Poisson bootstrap gives every image an independent
weight w ~ Poisson(1) per resample (Hanley & MacGibbon 2006; the multinomial bootstrap's weights
converge to it). The images of one (model, true, predicted) triple share every value a mean over
them uses, so the sum of their c weights, w ~ Poisson(c), is all a resample needs of them: one draw
per *cell* (a triple, or a (class, value) pair for the top-5 statistics) instead of one per image,
the same bootstrap distribution, exactly. A statistic is then sum(w * num) / sum(w * den) per
group, one sparse matrix product per statistic over a block of cells, never a loop over resamples
or classes. A per-model interval sums the same cell weights over the model's classes: the image
stays the unit, so a class with many images weighs as it does in the point estimate.

Reproducible: the weights come from ``numpy.random.default_rng([seed, stream, block])`` with
cells cut into blocks at fixed group boundaries, so the same predictions, seed and resamples give
the same bounds bit for bit in the CLI, the stored artefact and the pages.

The bounds are those of the *expanded* percentile interval (:func:`expanded_tail`: the percentile
interval widened for small samples, Hesterberg 2015), taken over the resamples where the statistic is defined (a class with one
mistake loses it in about e^-1 of the resamples; those resamples say nothing about the mean of the
mistakes). A group with fewer than :data:`MIN_BOOTSTRAP_N` (10) observations gets no interval (NA):
so few images have too little spread to resample (the coverage measured there was 41-82 %).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field

import numpy as np

from core.intervals import DEFAULT_LEVEL, check_level, format_level

DEFAULT_RESAMPLES = 2000  # SPEC default
DEFAULT_SEED = 0
# Observations (images, or mistakes for a mean over them) below which a mean gets no interval. Why 10:
# at 3 and 5 mistakes the "95 %" interval of the mean WUP of the mistakes covered the truth in 61 % and
# 82 % of 400 simulated classes (code review); at 10-20, 79-97 % depending on the statistic, and 95 % +- 3 %
# from 30 (tests/explain/test_interval_coverage.py). Between 10 and 30 the interval is shown, and the
# column docs say it may fall short of its level.
MIN_BOOTSTRAP_N = 10
BLOCK_WEIGHTS = 4_000_000  # cells x resamples per block: 16 MB of float32 weights at a time
SIGNIFICANCE = 0.05  # q below it: a difference an analyst may report (SPEC)

# Verdict words, from one place (issue 23 item 2): the CLI, the CSV and the pages use these.
A_BETTER, B_BETTER = "A better", "B better"
NO_EVIDENCE = "no evidence of a difference"
TOO_FEW = "too few images"
VERDICTS = (A_BETTER, B_BETTER, NO_EVIDENCE, TOO_FEW)
MIN_PAIRED_IMAGES = 6  # fewer paired images: no test of them can reach p < 0.05 (2 * 0.5^5 = 0.0625)


MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000  # 100,000 resamples of 10,000 classes: 8 GB of bounds per statistic
MIN_LEVEL = 0.5  # a lower "confidence" level is a typo (--ci 1.5 read as 1.5 %), not a question


def _whole(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class IntervalOptions:
    """Interval settings: the level, bootstrap resamples and seed (stored in the artefact's
    fingerprint as ``parameters.ci``)."""

    level: float = DEFAULT_LEVEL
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def __post_init__(self):
        if check_level(self.level) < MIN_LEVEL:
            raise ValueError(f"confidence level {format_level(self.level)} is below {format_level(MIN_LEVEL)}: give e.g. "
                             "95 (or 0.95) for 95 % intervals")
        if not _whole(self.resamples) or not MIN_RESAMPLES <= self.resamples <= MAX_RESAMPLES:
            raise ValueError(f"resamples {self.resamples!r}: give a whole number from {MIN_RESAMPLES} to "
                             f"{MAX_RESAMPLES:,} (default {DEFAULT_RESAMPLES}); fewer make the bounds noisy, more "
                             "only take memory and time")
        if not _whole(self.seed) or self.seed < 0:
            raise ValueError(f"seed {self.seed!r}: give a whole number >= 0")

    def as_dict(self) -> dict:
        return {"level": float(self.level), "resamples": int(self.resamples), "seed": int(self.seed),
                "rates": "wilson", "means": "poisson bootstrap over images, expanded percentile",
                "min_observations": MIN_BOOTSTRAP_N}

    def describe(self) -> str:
        return (f"{format_level(self.level)} intervals: Wilson for rates, bootstrap over images for means "
                f"({self.resamples} resamples, seed {self.seed})")


# --------------------------------------------------------------------------- percentiles
def expanded_tail(level: float, n) -> np.ndarray:
    """The lower tail probability at which the *expanded* percentile interval (Hesterberg 2015,
    "What teachers should know about the bootstrap", section 5.3) takes its bounds, per n.

    Why: the plain percentile interval is too narrow for small samples (it uses the plug-in standard
    error, sqrt((n - 1) / n) of the usual one, and normal rather than t quantiles): on 30 images of a
    class half right, its "95 %" interval of the mean WUP covered the truth in 91 % of 400
    repetitions (tests/explain/test_interval_coverage.py). The expanded interval takes the percentile
    bounds at tail Phi(-sqrt(n / (n - 1)) t_{alpha/2, n-1}) instead of alpha / 2: 1.88 % instead of
    2.5 % at n = 30, 2.43 % at n = 300, 2.50 % at n = 10,000. NaN for n < 2."""
    n = np.asarray(n, dtype=np.float64)
    if n.ndim and n.size > 64:
        # Elementwise, so computed once per distinct n and gathered: the same values bit for bit.
        # Why: scipy's t.ppf costs ~0.4 us an element, and the bootstrap asks for 10,000 classes'
        # counts (a few hundred distinct) per statistic and block: 4.4 -> 0.7 ms a call.
        values, inverse = np.unique(n, return_inverse=True)  # NaNs fold into one value: NaN out, as before
        return _expanded_tail(level, values)[inverse.reshape(n.shape)]
    return _expanded_tail(level, n)


def _expanded_tail(level: float, n: np.ndarray) -> np.ndarray:
    from scipy.stats import norm, t

    alpha = 1.0 - level
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = n >= 2
        safe = np.where(ok, n, 2.0)
        tail = norm.cdf(-np.sqrt(safe / (safe - 1)) * t.ppf(1 - alpha / 2, safe - 1))
    return np.where(ok, tail, np.nan)


def percentile_bounds(replicates: np.ndarray, level: float, *, n_obs=None) -> tuple:
    """Per row of ``replicates`` (groups x resamples, NaN = undefined in that resample): the
    lower and upper percentile bounds over the defined values, NumPy's default 'linear' quantile
    (tested equal to ``np.quantile``). Without ``n_obs`` at (1 -+ level) / 2; with ``n_obs`` (per row:
    observations behind the statistic) the expanded percentile interval's tails
    (:func:`expanded_tail`). NaN for a row with no defined value or fewer than 2 observations.

    A full sort per row, not ``np.partition`` around the tails: NumPy's SIMD sort of float32 took
    0.78 s on 10,000 x 2000 here, partitioning 1.24 s (AVX2, 2 cores)."""
    reps = np.sort(replicates, axis=1)  # NaN sorts last
    rows = len(reps)
    m = (~np.isnan(reps)).sum(axis=1)
    if n_obs is None:
        tail = np.full(rows, (1 - level) / 2)
    else:
        tail = np.broadcast_to(expanded_tail(level, n_obs), (rows,))
    out = []
    for q in (tail, 1 - tail):
        pos = (np.maximum(m, 1) - 1) * np.nan_to_num(q)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(m - 1, 0))
        frac = pos - lo
        a = np.take_along_axis(reps, lo[:, None], axis=1)[:, 0].astype(np.float64)
        b = np.take_along_axis(reps, hi[:, None], axis=1)[:, 0].astype(np.float64)
        out.append(np.where((m > 0) & ~np.isnan(q), a + (b - a) * frac, np.nan))
    return out[0], out[1]


# --------------------------------------------------------------------------- ratio statistics
@dataclass
class RatioStatistic:
    """sum(w * num) / sum(w * den) per group over cells (num, den, n_obs: per cell); ``model_mask``
    (per group) marks the groups that also count in their model's statistic (None: no per-model
    interval)."""

    num: np.ndarray
    den: np.ndarray
    model_mask: np.ndarray | None = None
    n_obs: np.ndarray | None = None  # per cell: observations (images) in the denominator; default count * (den > 0)


@dataclass
class BootstrapResult:
    groups: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    models: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


POISSON_TABLE_MAX = 32  # cells of at most this many images draw from a lookup table; larger ones from rng.poisson
_TABLE_BITS = 16


@functools.lru_cache(maxsize=None)
def _poisson_table(c: int) -> np.ndarray:
    """Poisson(c) by inversion on a 2^16 grid: slot s holds the k whose CDF interval contains
    (s + 1/2) / 2^16, so each probability is represented to within 2^-16 (total variation below
    1e-3 for c <= 32; far below the Monte Carlo error of 2000 resamples)."""
    from scipy.stats import poisson

    k = np.arange(int(c + 12 * np.sqrt(c) + 30))
    grid = (np.arange(1 << _TABLE_BITS) + 0.5) / (1 << _TABLE_BITS)
    return np.searchsorted(poisson.cdf(k, c), grid, side="right").astype(np.float32)


def poisson_weights(rng: np.random.Generator, count: np.ndarray, resamples: int) -> np.ndarray:
    """(cells x resamples) float32 Poisson(count) weights.

    Why a table: ``rng.poisson`` costs about 36 ns a draw on this 2-core machine, a 16-bit lookup
    from ``random_raw`` about 3.5 ns (measured on 2e8 draws), and a million predictions need ~1e9
    draws for 2000 resamples. A cell of more than :data:`POISSON_TABLE_MAX` images (typically one per
    class: its correct predictions) sums table draws of parts of at most 32 images (a sum of
    independent Poissons is Poisson): ``rng.poisson`` for those 20,000 cells of the million-prediction
    benchmark took 1.4 s, the parts 0.3 s. Reproducible for the same cells and seed."""
    count = np.asarray(count, dtype=np.float64)
    n = len(count)
    if not n:
        return np.zeros((0, resamples), dtype=np.float32)
    raw = rng.bit_generator.random_raw(-(-n * resamples // 4)).view(np.uint16)[:n * resamples].reshape(n, resamples)
    small = (count > 0) & (count <= POISSON_TABLE_MAX) & (count == np.round(count))
    values, frequency = np.unique(count[small], return_counts=True)
    common = int(values[np.argmax(frequency)]) if len(values) else 1
    out = _poisson_table(common)[raw]  # the most frequent count (1: a mistake seen once) in one pass, no gather
    for c in values.tolist():
        if c != common:
            rows = np.flatnonzero(count == c)
            out[rows] = _poisson_table(int(c))[raw[rows]]
    out[count == 0] = 0
    large = np.flatnonzero(count > POISSON_TABLE_MAX)
    if len(large):  # Poisson(c) = the sum of Poisson(32) parts and one of the rest: every part from a table
        parts = np.ceil(count[large] / POISSON_TABLE_MAX).astype(np.int64)
        sizes = np.full(int(parts.sum()), POISSON_TABLE_MAX, dtype=np.int64)
        ends = np.cumsum(parts) - 1
        sizes[ends] = count[large].astype(np.int64) - (parts - 1) * POISSON_TABLE_MAX
        extra = rng.bit_generator.random_raw(-(-len(sizes) * resamples // 4)).view(np.uint16)
        extra = extra[:len(sizes) * resamples].reshape(len(sizes), resamples)
        drawn = np.empty(extra.shape, dtype=np.float32)
        for c in np.unique(sizes).tolist():
            rows = np.flatnonzero(sizes == c)
            drawn[rows] = _poisson_table(int(c))[extra[rows]]
        out[large] = np.add.reduceat(drawn, np.r_[0, ends[:-1] + 1], axis=0)
    other = np.flatnonzero(~small & (count > 0) & (count <= POISSON_TABLE_MAX))  # a fractional count: not images
    if len(other):
        out[other] = rng.poisson(count[other, None], size=(len(other), resamples))
    return out


def _blocks(group: np.ndarray, resamples: int) -> list[tuple[int, int]]:
    """[start, stop) cell ranges cut at group boundaries, each about BLOCK_WEIGHTS / resamples cells
    (a group larger than that is a block of its own). Depends only on the groups: reproducible."""
    if not len(group):
        return []
    target = max(1, BLOCK_WEIGHTS // resamples)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    blocks, begin = [], 0
    cut = np.searchsorted(starts, np.arange(target, len(group), target))
    for c in np.unique(cut):
        stop = int(starts[c]) if c < len(starts) else len(group)
        if stop > begin:
            blocks.append((begin, stop))
            begin = stop
    blocks.append((begin, len(group)))
    return [b for b in blocks if b[1] > b[0]]


def _csr(rows: np.ndarray, values: np.ndarray, n_rows: int):
    """The (n_rows x cells) matrix summing cells into their rows, weighted by ``values``: rows are
    non-decreasing, so CSR's arrays are built directly (scipy's COO conversion sorted them again)."""
    from scipy.sparse import csr_matrix

    values = np.asarray(values, dtype=np.float32)
    indptr = np.searchsorted(rows, np.arange(n_rows + 1))
    return csr_matrix((values, np.arange(len(rows)), indptr), shape=(n_rows, len(rows)))


def _replicate_ratios(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0 (the statistic is undefined in that resample); one pass."""
    out = np.full(np.shape(num), np.nan, dtype=np.result_type(num, den))
    np.divide(num, den, out=out, where=den > 0)
    return out


MAX_THREADS = 4  # blocks in flight: each holds ~32 MB of weights and its products


def worker_threads() -> int:
    """Threads for the bootstrap's blocks: the cores this process may use (detected, not assumed),
    at most MAX_THREADS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cores))


def ordered_map(func, items: list[tuple], threads: int | None = None):
    """Yield func(*item) for each item, in order, computing up to ``threads`` at a time (at most
    2 x threads results waiting), or inline with one thread or one item."""
    threads = worker_threads() if threads is None else threads
    if threads <= 1 or len(items) <= 1:
        for item in items:
            yield func(*item)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bootstrap") as pool:
        pending = deque()
        for item in items:
            pending.append(pool.submit(func, *item))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def bootstrap_ratios(group: np.ndarray, count: np.ndarray, stats: dict[str, RatioStatistic], n_groups: int,
                     options: IntervalOptions, *, stream: int, model_of_group: np.ndarray | None = None,
                     n_models: int = 0, balanced: np.ndarray | None = None) -> BootstrapResult:
    """Percentile intervals of each ratio statistic per group and (where ``model_mask``) per model.

    ``group``: per cell, its group code (non-decreasing); ``count``: images in the cell (its weight
    is Poisson(count)). ``balanced``: per group, whether it counts in its model's balanced accuracy
    (the unweighted mean over classes of sum(w * correct) / sum(w * n): needs 'accuracy' in stats).
    ``stream`` separates the random streams of independent cell families.

    Cost: one Poisson draw per cell and resample, and one sparse product per distinct numerator and
    denominator per block (statistics sharing a denominator array share its product); the quantiles
    are taken only for the groups with at least MIN_BOOTSTRAP_N observations."""
    level, resamples = options.level, int(options.resamples)
    result = BootstrapResult()
    if n_groups == 0:
        return result
    group = np.asarray(group, dtype=np.int64)
    count = np.asarray(count, dtype=np.float64)
    observations = {name: np.bincount(group, weights=s.n_obs if s.n_obs is not None else count * (s.den > 0),
                                      minlength=n_groups) for name, s in stats.items()}
    enough = {name: obs >= MIN_BOOTSTRAP_N for name, obs in observations.items()}
    group_low = {name: np.full(n_groups, np.nan) for name in stats}
    group_high = {name: np.full(n_groups, np.nan) for name in stats}
    model_num = {name: np.zeros((n_models, resamples)) for name, s in stats.items() if s.model_mask is not None}
    model_den = {name: np.zeros((n_models, resamples)) for name in model_num}
    bal_sum = np.zeros((n_models, resamples)) if balanced is not None else None
    bal_n = np.zeros((n_models, resamples)) if balanced is not None else None

    def work(block: int, start: int, stop: int) -> dict:
        """One block's group bounds and its contributions to its models' sums (a contiguous model range)."""
        rng = np.random.default_rng([int(options.seed), int(stream), block])
        weights = poisson_weights(rng, count[start:stop], resamples)
        g = group[start:stop]
        first, last = int(g[0]), int(g[-1]) + 1
        local = g - first
        products: dict[int, np.ndarray] = {}  # id(array) -> its product: shared denominators once
        out = {"first": first, "bounds": {}, "models": {}}
        if model_of_group is not None and n_models:
            m_first = int(model_of_group[first:last].min())
            m_last = int(model_of_group[first:last].max()) + 1
            models = model_of_group[first:last] - m_first
            out["m_first"], out["m_last"] = m_first, m_last

        def product(values: np.ndarray) -> np.ndarray:
            key = id(values)
            if key not in products:
                products[key] = _csr(local, values[start:stop], last - first) @ weights
            return products[key]

        for name, s in stats.items():
            use = np.flatnonzero(enough[name][first:last])
            keep_all = name == "accuracy" and balanced is not None
            if not len(use) and not keep_all and s.model_mask is None:
                continue
            num, den = product(s.num), product(s.den)
            if len(use):
                out["bounds"][name] = (use, *percentile_bounds(_replicate_ratios(num[use], den[use]), level,
                                                              n_obs=observations[name][first + use]))
            if keep_all:
                reps = _replicate_ratios(num, den)
                use_bal = balanced[first:last]
                defined = use_bal[:, None] & ~np.isnan(reps)
                size = m_last - m_first
                out["balanced"] = (_csr(models, use_bal.astype(np.float64), size) @ np.where(defined, reps, 0.0),
                                   _csr(models, np.ones(len(models)), size) @ defined.astype(np.float64))
            if s.model_mask is not None:  # a model's sums are its counted groups' sums: groups x R, not cells x R
                into = _csr(models, s.model_mask[first:last], m_last - m_first)
                out["models"][name] = (into @ num, into @ den)
        return out

    # Blocks run on the machine's cores (NumPy's sort, table lookups and scipy's sparse products release
    # the GIL); results are added in block order, so the bounds are the same bit for bit whatever the threads.
    for out in ordered_map(work, [(b, start, stop) for b, (start, stop) in enumerate(_blocks(group, resamples))]):
        first = out["first"]
        for name, (use, low, high) in out["bounds"].items():
            group_low[name][first + use], group_high[name][first + use] = low, high
        for name, (num, den) in out["models"].items():
            model_num[name][out["m_first"]:out["m_last"]] += num
            model_den[name][out["m_first"]:out["m_last"]] += den
        if "balanced" in out:
            bal_sum[out["m_first"]:out["m_last"]] += out["balanced"][0]
            bal_n[out["m_first"]:out["m_last"]] += out["balanced"][1]
    for name, s in stats.items():
        result.groups[name] = (group_low[name], group_high[name])
        if name in model_num:
            n_obs = s.n_obs if s.n_obs is not None else count * (s.den > 0)
            obs = np.bincount(model_of_group[group], weights=n_obs * s.model_mask[group], minlength=n_models)
            low, high = percentile_bounds(_replicate_ratios(model_num[name], model_den[name]), level, n_obs=obs)
            ok = obs >= MIN_BOOTSTRAP_N
            result.models[name] = (np.where(ok, low, np.nan), np.where(ok, high, np.nan))
    if balanced is not None:  # expanded by the model's images in its balanced classes
        images = np.bincount(model_of_group[group], weights=count * balanced[group], minlength=n_models)
        low, high = percentile_bounds(_replicate_ratios(bal_sum, bal_n), level, n_obs=images)
        ok = np.bincount(model_of_group[balanced], minlength=n_models) >= 1
        result.models["accuracy_balanced"] = (np.where(ok, low, np.nan), np.where(ok, high, np.nan))
    return result


def block_sums(group: np.ndarray, count: np.ndarray, columns: dict[str, np.ndarray], options: IntervalOptions, *,
               stream: int):
    """Yield (first_group, stop_group, {name: sums}) per block of cells: ``sums[name]`` is
    (groups of the block x resamples), each group's sum over its cells of w * column with the same
    Poisson weights w for every column (what a paired or joint statistic needs). ``group`` is
    non-decreasing; the blocks and weights are those of :func:`bootstrap_ratios` for the stream."""
    group = np.asarray(group, dtype=np.int64)
    count = np.asarray(count, dtype=np.float64)
    resamples = int(options.resamples)
    for block, (start, stop) in enumerate(_blocks(group, resamples)):
        rng = np.random.default_rng([int(options.seed), int(stream), block])
        weights = poisson_weights(rng, count[start:stop], resamples)
        g = group[start:stop]
        first, last = int(g[0]), int(g[-1]) + 1
        local = g - first
        yield first, last, {name: (_csr(local, values[start:stop], last - first) @ weights).astype(np.float64)
                            for name, values in columns.items()}


# --------------------------------------------------------------------------- tests of a difference
def mcnemar_p(b, c) -> np.ndarray:
    """Exact McNemar p, elementwise: the two-sided binomial test of b against b + c at 1/2
    (``scipy.stats.binomtest(b, b + c, 0.5).pvalue``, tested equal); 1 where b + c == 0. With p = 1/2
    the binomial is symmetric, so scipy's "outcomes no more likely than the one seen" is
    2 * P(X <= min(b, c)), capped at 1."""
    from scipy.stats import binom

    b = np.asarray(b, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    n = b + c
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b, c), np.maximum(n, 1), 0.5))
    return np.where((n == 0) | (b == c), 1.0, p)


def mcnemar_interval(b, c, n, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval of an accuracy difference (b - c) / n that agrees with the exact McNemar test:
    conditional on the b + c discordant images, b ~ Binomial(b + c, theta) and the difference is
    (b + c) / n * (2 theta - 1); the central Clopper-Pearson interval of theta turned into it. It
    excludes 0 exactly when McNemar's p < 1 - level (both are twice the smaller binomial tail at
    1/2). Why: the paired bootstrap gave b = 5, c = 0 on 30 images [+3.8, +33.3] points beside
    McNemar's p = 0.0625, "no evidence" (code review). [0, 0] without discordant images."""
    from scipy.stats import beta

    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m = b + c
    alpha = 1.0 - level
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(b > 0, beta.ppf(alpha / 2, b, c + 1), 0.0)
        hi = np.where(c > 0, beta.ppf(1 - alpha / 2, b + 1, c), 1.0)
        scale = np.where(n > 0, m / np.where(n > 0, n, 1), np.nan)
    low, high = scale * (2 * lo - 1), scale * (2 * hi - 1)
    none = m == 0
    return np.where(none, 0.0, low), np.where(none, 0.0, high)


def bootstrap_p(replicates: np.ndarray, n_obs=None) -> np.ndarray:
    """Two-sided p of "the difference is 0" from its bootstrap replicates (rows: tests), by inverting
    the percentile interval: twice the smaller share s of replicates on either side of 0, with the
    usual +1 so that p is never 0 from finitely many resamples; NaN for a row with no defined value.
    With ``n_obs`` the expanded percentile interval is inverted instead (:func:`expanded_tail`):
    p = 2 T_{n-1}(-Phi^-1(1 - s) / sqrt(n / (n - 1))), the level at which that interval's bound
    reaches 0. Either way p < alpha exactly when 0 lies outside the (1 - alpha) interval, up to the +1."""
    from scipy.stats import norm, t

    defined = ~np.isnan(replicates)
    m = defined.sum(axis=1)
    below = (np.where(defined, replicates, np.inf) <= 0).sum(axis=1)
    above = (np.where(defined, replicates, -np.inf) >= 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.minimum(0.5, (np.minimum(below, above) + 1) / (m + 1))
        if n_obs is None:
            p = 2.0 * share
        else:
            n = np.broadcast_to(np.asarray(n_obs, dtype=np.float64), share.shape)
            safe = np.where(n >= 2, n, 2.0)
            p = np.where(n >= 2, 2.0 * t.cdf(-norm.ppf(1 - share) / np.sqrt(safe / (safe - 1)), safe - 1), np.nan)
    return np.where(m > 0, np.minimum(1.0, p), np.nan)


def bh_q_values(p) -> np.ndarray:
    """Benjamini-Hochberg q-values over one family of tests (``scipy.stats.false_discovery_control``,
    method 'bh'); NaN p-values (tests that could not be made) stay NaN and do not count in the family."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p, dtype=np.float64)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = false_discovery_control(p[ok], method="bh")
    return q


def verdict(diff: float, q: float, n: int, *, higher_is_better: bool = True) -> str:
    """The one verdict rule: too few images (fewer than MIN_PAIRED_IMAGES, or a test that could not
    be made: q undefined, e.g. a mean over one mistake), else no evidence when q >= SIGNIFICANCE,
    else the better model by the sign of the difference (A - B)."""
    if n < MIN_PAIRED_IMAGES or q is None or np.isnan(q) or diff is None or np.isnan(diff):
        return TOO_FEW
    if q >= SIGNIFICANCE or diff == 0:
        return NO_EVIDENCE
    return A_BETTER if (diff > 0) == higher_is_better else B_BETTER


def verdicts(diff, q, n, *, higher_is_better: bool = True) -> list[str]:
    return [verdict(float(d), float(qq), int(k), higher_is_better=higher_is_better)
            for d, qq, k in zip(np.asarray(diff, dtype=np.float64), np.asarray(q, dtype=np.float64), np.asarray(n))]
