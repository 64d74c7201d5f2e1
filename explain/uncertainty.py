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
the same bootstrap distribution (exactly, but for the lookup table that draws Poisson(c): each of its
probabilities to within 2^-16, :func:`_poisson_table`). A statistic is then sum(w * num) / sum(w * den) per
group: one sparse matrix product per block of cells gives every numerator and denominator
(:func:`group_sums`), never a loop over resamples or classes, and the percentile bounds are
order statistics found without sorting each row (:func:`order_statistics`). A per-model interval sums the same cell weights over the model's classes: the image
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
# Cells x resamples per block: 32 MB of float32 weights at a time per thread. Why 8M: the million-
# prediction intervals took 1.6-1.7 s (2 threads) at 8M and 4M, 2.3 s at 2M (per-block work and
# Poisson tables pulled into cache for small slabs) and no less at 16M (more memory).
BLOCK_WEIGHTS = 8_000_000
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
        # Elementwise, so looked up per whole n in a table computed once per level (or computed once
        # per distinct other n) and gathered: the same values bit for bit. Why: scipy's t.ppf costs
        # ~0.4 us an element plus ~0.3 ms a call, and the bootstrap asks for every block's counts.
        flat = n.ravel()
        whole = (flat >= 0) & (flat < _TAIL_TABLE_MAX) & (flat == np.floor(flat))
        if whole.all():
            size = max(_TAIL_TABLE_MIN, 1 << int(flat.max()).bit_length())
            return _tail_table(float(level), size)[flat.astype(np.int64)].reshape(n.shape)
        values, inverse = np.unique(n, return_inverse=True)  # NaNs fold into one value: NaN out, as before
        return _expanded_tail(level, values)[inverse.reshape(n.shape)]
    return _expanded_tail(level, n)


_TAIL_TABLE_MIN, _TAIL_TABLE_MAX = 256, 1 << 16


@functools.lru_cache(maxsize=32)
def _tail_table(level: float, size: int) -> np.ndarray:
    """expanded_tail(level, n) for n = 0 .. size - 1 (read-only)."""
    table = _expanded_tail(level, np.arange(size, dtype=np.float64))
    table.flags.writeable = False
    return table


def _expanded_tail(level: float, n: np.ndarray) -> np.ndarray:
    from scipy.stats import norm, t

    alpha = 1.0 - level
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = n >= 2
        safe = np.where(ok, n, 2.0)
        tail = norm.cdf(-np.sqrt(safe / (safe - 1)) * t.ppf(1 - alpha / 2, safe - 1))
    return np.where(ok, tail, np.nan)


def percentile_bounds(replicates: np.ndarray, level: float, *, n_obs=None, all_defined: bool = False) -> tuple:
    """Per row of ``replicates`` (groups x resamples, NaN = undefined in that resample): the
    lower and upper percentile bounds over the defined values, NumPy's default 'linear' quantile
    (tested equal to ``np.quantile``). Without ``n_obs`` at (1 -+ level) / 2; with ``n_obs`` (per row:
    observations behind the statistic) the expanded percentile interval's tails
    (:func:`expanded_tail`). NaN for a row with no defined value or fewer than 2 observations.

    The four order statistics each row needs come from :func:`order_statistics` (the values a full
    sort of the row puts there, found without sorting the row). ``all_defined``: the caller knows
    no replicate is NaN (the pass that counts them is skipped)."""
    reps = np.asarray(replicates)
    if reps.dtype not in (np.float32, np.float64):
        reps = reps.astype(np.float64)
    rows, resamples = reps.shape
    if n_obs is None:
        tail = np.full(rows, (1 - level) / 2)
    else:
        tail = np.broadcast_to(expanded_tail(level, n_obs), (rows,))
    low, high = np.full(rows, np.nan), np.full(rows, np.nan)
    # In chunks of rows that stay in cache through every pass over them (and whose temporaries are
    # small enough for malloc to reuse: a fresh page cost ~2 us in faults here).
    chunk = max(1, _CHUNK_BYTES // max(1, resamples * reps.dtype.itemsize))
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        low[start:stop], high[start:stop] = _percentile_chunk(reps[start:stop], tail[start:stop], all_defined)
    return low, high


_CHUNK_BYTES = 1 << 21  # rows per percentile pass: 2 MB measured better than 1 or 4


def _percentile_chunk(reps: np.ndarray, tail: np.ndarray, all_defined: bool) -> tuple[np.ndarray, np.ndarray]:
    rows, resamples = reps.shape
    m = np.full(rows, resamples) if all_defined else resamples - np.count_nonzero(np.isnan(reps), axis=1)
    low, high = np.full(rows, np.nan), np.full(rows, np.nan)
    valid = (m > 0) & ~np.isnan(tail)
    if not valid.any():
        return low, high
    if not valid.all():
        reps, m, tail = reps[valid], m[valid], tail[valid]
    ks, fracs = [], []
    for q in (tail, 1 - tail):
        pos = (m - 1) * q
        lo = np.floor(pos).astype(np.int64)
        ks += [lo, np.minimum(lo + 1, m - 1)]
        fracs.append(pos - lo)
    values = order_statistics(reps, np.stack(ks, axis=1), m).astype(np.float64)
    for j, out in enumerate((low, high)):
        a, b = values[:, 2 * j], values[:, 2 * j + 1]
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, as np.quantile gives
            out[valid] = a + (b - a) * fracs[j]
    return low, high


SELECT_FROM = 512  # resamples below which a row is simply sorted
SUBSAMPLE_STEP = 8  # every 8th resample brackets the tails: a sort of 1/8 of the row
TAIL_SHARE = 0.125  # order statistics further in than this share of the row: the row is sorted
_BRACKET_SD = 2.5  # the bracket's margin in standard deviations of the subsample's count (rows missed or
# too tied, then sorted whole: 2.7 % in the million-prediction benchmark)


def order_statistics(values: np.ndarray, ks: np.ndarray, m=None) -> np.ndarray:
    """``np.sort(values, axis=1)`` at the positions ``ks`` (rows x 4: two positions in the lower
    tail, then two in the upper tail, each below ``m``, the row's count of defined values; NaN sorts
    last), the same values a full sort gives.

    Why not a sort: the percentile bounds need four order statistics of each row of 2000
    replicates, and NumPy's row sort (8.5 ns an element on this 2-core AVX-512 EPYC) was 2.1 of
    the 7.3 CPU-seconds the intervals of 1M predictions took. Here every 8th resample is sorted,
    which brackets each tail (its ~2.5 % plus a margin of 2.5 standard deviations of the
    subsample's count); one comparison per element finds the ~120 values of each bracket, and only
    those are sorted. A row whose bracket misses its order statistic (checked by counting), holds
    NaN, has heavy ties or asks for a quantile far from the tails is sorted whole: the answer is
    exact either way. 161 -> 50 ms for 10,000 rows of 2000 float32."""
    values = np.asarray(values)
    ks = np.asarray(ks, dtype=np.int64)
    rows, width = values.shape
    m = np.full(rows, width) if m is None else np.asarray(m)
    out = np.empty(ks.shape, dtype=values.dtype)
    if not rows:
        return out
    slow = np.ones(rows, dtype=bool)
    if width >= SELECT_FROM and ks.shape[1] == 4:
        fast = (m == width) & (ks[:, :2].max(axis=1) < TAIL_SHARE * width) & \
               (ks[:, 2:].min(axis=1) >= width - TAIL_SHARE * width)
        if fast.any():
            every = fast.all()
            found, ok = _tail_order_statistics(values if every else values[fast], ks if every else ks[fast])
            rows_fast = np.flatnonzero(fast)
            out[rows_fast[ok]] = found[ok]
            slow[rows_fast[ok]] = False
    if slow.any():
        everything = slow.all()
        ordered = np.sort(values if everything else values[slow], axis=1)
        out[slow] = np.take_along_axis(ordered, ks if everything else ks[slow], axis=1)
    return out


def _tail_order_statistics(values: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order statistics, ok) of rows without NaN whose positions ``ks`` lie in the tails; where
    ``ok`` is False the row's answer is unknown (to be sorted whole)."""
    values = np.ascontiguousarray(values)
    rows, width = values.shape
    r = np.arange(rows)
    sample = np.sort(values[:, ::SUBSAMPLE_STEP], axis=1)
    size = sample.shape[1]
    scale = size / width
    need_low = ks[:, 1] + 1  # values at or below the lower tail's larger position
    need_high = width - ks[:, 2]  # values at or above the upper tail's smaller position
    picks = []
    for need in (need_low, need_high):
        expected = need * scale
        picks.append(np.minimum(np.ceil(expected + _BRACKET_SD * np.sqrt(expected) + 1).astype(np.int64), size - 1))
    upper = sample[r, picks[0]]  # the lower tail's bracket: every value <= upper
    lower = sample[r, size - 1 - picks[1]]  # the upper tail's bracket: every value >= lower
    taken = values <= upper[:, None]
    taken |= values >= lower[:, None]
    flat = np.flatnonzero(taken)
    begin = np.searchsorted(flat, r * width)
    n_taken = np.diff(np.r_[begin, len(flat)])
    # Heavy ties (a statistic equal in most resamples) put most of the row in a bracket: sorted whole.
    cap = (picks[0] + picks[1] + 2) * SUBSAMPLE_STEP * 5 // 4 + 32  # the pad is as wide as its widest row
    wide = n_taken > cap
    if wide.any():
        keep = np.repeat(~wide, n_taken)
        flat = flat[keep]
        n_taken = np.where(wide, 0, n_taken)
    pad_width = max(int(n_taken.max()), 1)
    pad = np.full((rows, pad_width), np.inf, dtype=values.dtype)
    offset = r * pad_width - (np.cumsum(n_taken) - n_taken)
    pad.ravel()[np.arange(len(flat)) + np.repeat(offset, n_taken)] = values.ravel()[flat]
    pad.sort(axis=1)  # each row: its lower bracket ascending, then its upper bracket, then padding
    n_below = np.count_nonzero(pad <= upper[:, None], axis=1)
    n_above = n_taken - n_below
    ok = ~wide & (upper < lower) & (n_below >= need_low) & (n_above >= need_high)
    positions = np.empty_like(ks)
    positions[:, :2] = ks[:, :2]
    positions[:, 2:] = (n_below - (width - n_above))[:, None] + ks[:, 2:]
    positions = np.where(ok[:, None], positions, 0)
    return np.take_along_axis(pad, positions, axis=1), ok


# --------------------------------------------------------------------------- ratio statistics
@dataclass
class RatioStatistic:
    """sum(w * num) / sum(w * den) per group over cells (num, den, n_obs: per cell); ``model_mask``
    (per group) marks the groups that also count in their model's statistic (None: no per-model
    interval); ``per_group``: whether each group gets its own interval (False: the statistic only
    feeds a per-model one, such as the class accuracies of the balanced accuracy)."""

    num: np.ndarray
    den: np.ndarray
    model_mask: np.ndarray | None = None
    n_obs: np.ndarray | None = None  # per cell: observations (images) in the denominator; default count * (den > 0)
    per_group: bool = True


@dataclass
class BootstrapResult:
    groups: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    models: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


# Cells of at most this many images draw from a lookup table in one step; larger ones sum parts of it.
# Why 256: a table costs ~0.8 ms to build (cached), and parts cost a draw each plus a reduceat: with
# at most 32 images a part, the ~100 correct predictions of each class took 1.2e8 extra draws and
# 0.4 s of reduceat for the million-prediction benchmark.
POISSON_TABLE_MAX = 256
_TABLE_BITS = 16


@functools.lru_cache(maxsize=None)
def _poisson_table(c: int) -> np.ndarray:
    """Poisson(c) by inversion on a 2^16 grid: slot s holds the k whose CDF interval contains
    (s + 1/2) / 2^16, so each probability is represented to within 2^-16 and the CDF everywhere to
    within 2^-16 (total variation below 1e-3 for c <= 32 and about 1e-3 at 256; far below the Monte
    Carlo error of 2000 resamples, whose tail quantiles are uncertain by ~3e-3 in probability)."""
    from scipy.stats import poisson

    k = np.arange(int(c + 12 * np.sqrt(c) + 30))
    grid = (np.arange(1 << _TABLE_BITS) + 0.5) / (1 << _TABLE_BITS)
    table = np.searchsorted(poisson.cdf(k, c), grid, side="right").astype(np.float32)
    table.flags.writeable = False
    return table


def poisson_weights(rng: np.random.Generator, count: np.ndarray, resamples: int) -> np.ndarray:
    """(cells x resamples) float32 Poisson(count) weights, one row per cell in the order given
    (:func:`weights_by_count` without its order)."""
    weights, row = weights_by_count(rng, count, resamples)
    return weights[row]


class _ThreadBuffers:
    """One float32 buffer of ``size`` per thread, for the life of one bootstrap: each block's weights
    go into its thread's buffer instead of fresh memory. Why: a fresh 16 MB array a block cost
    ~2 us a page in faults here (0.6 of 4 CPU-seconds for the million-prediction intervals)."""

    def __init__(self, size: int):
        import threading

        self.size, self._local = int(size), threading.local()

    def get(self) -> np.ndarray:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._local.buffer = np.empty(self.size, dtype=np.float32)
        return buffer


_RAW_PIECE = 1 << 18  # uint16 draws per random_raw call: 512 KB at a time, memory malloc reuses


def weights_by_count(rng: np.random.Generator, count: np.ndarray, resamples: int, *,
                     buffer: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(weights, row): (cells x resamples) float32 Poisson(count) weights with the cells' rows in
    order of their counts, and ``row[j]``, cell j's row. Reproducible for the same counts and seed.

    Why a table: ``rng.poisson`` costs about 36 ns a draw on this 2-core machine, a 16-bit lookup
    from ``random_raw`` about 2 ns (0.55 to draw, 1.5 to look up), and a million predictions need
    ~4e8 draws for 2000 resamples. Why in order of counts: each count's rows are one slab filled by
    one lookup (the rows of a count gathered and scattered, count by count, was 3 of the 7.3
    CPU-seconds of the million-prediction intervals). A cell of more than :data:`POISSON_TABLE_MAX`
    images sums table draws of parts of at most that many (a sum of independent Poissons is
    Poisson); a fractional count (not images) draws from ``rng.poisson``. ``buffer``: float32 memory
    of at least cells x resamples for the weights (a view of it is returned)."""
    count = np.asarray(count, dtype=np.float64)
    n = len(count)
    order = np.argsort(count, kind="stable")
    row = np.empty(n, dtype=np.int64)
    row[order] = np.arange(n)
    if buffer is None or buffer.size < n * resamples:
        out = np.empty((n, resamples), dtype=np.float32)
    else:
        out = buffer[:n * resamples].reshape(n, resamples)
    if not n:
        return out, row
    by_count = count[order]
    edges = np.flatnonzero(np.r_[True, by_count[1:] != by_count[:-1], True])
    large, fractional = [], []
    piece = max(1, _RAW_PIECE // resamples)  # rows per draw
    for start, stop in zip(edges[:-1].tolist(), edges[1:].tolist()):
        c = float(by_count[start])
        if c == 0:
            out[start:stop] = 0
        elif c > 0 and c == round(c) and c <= POISSON_TABLE_MAX:
            table = _poisson_table(int(c))
            for at in range(start, stop, piece):
                to = min(stop, at + piece)
                raw = rng.bit_generator.random_raw(-(-(to - at) * resamples // 4)).view(np.uint16)
                np.take(table, raw[:(to - at) * resamples].reshape(to - at, resamples), out=out[at:to],
                        mode="wrap")  # every index is in range: no check
        elif c > 0 and c == round(c):
            large.append((start, stop, int(c)))
        elif c > 0:
            fractional.append((start, stop, c))
        else:
            raise ValueError(f"a cell of {c} images: counts must be >= 0")
    if large:  # Poisson(c) = the sum of Poisson(256) parts and one of the rest: every part from a table
        rows = np.concatenate([np.arange(a, b) for a, b, _ in large])
        sizes_of = np.concatenate([np.full(b - a, c) for a, b, c in large])
        parts = -(-sizes_of // POISSON_TABLE_MAX)
        sizes = np.full(int(parts.sum()), POISSON_TABLE_MAX, dtype=np.int64)
        ends = np.cumsum(parts) - 1
        sizes[ends] = sizes_of - (parts - 1) * POISSON_TABLE_MAX
        extra = rng.bit_generator.random_raw(-(-len(sizes) * resamples // 4)).view(np.uint16)
        extra = extra[:len(sizes) * resamples].reshape(len(sizes), resamples)
        drawn = np.empty(extra.shape, dtype=np.float32)
        for c in np.unique(sizes).tolist():
            at = np.flatnonzero(sizes == c)
            drawn[at] = _poisson_table(int(c))[extra[at]]
        out[rows] = np.add.reduceat(drawn, np.r_[0, ends[:-1] + 1], axis=0)
    for start, stop, c in fractional:
        out[start:stop] = rng.poisson(c, size=(stop - start, resamples))
    return out, row


def group_sums(local: np.ndarray, n_groups: int, columns: list[np.ndarray], weights: np.ndarray,
               row: np.ndarray, base: np.ndarray | None = None) -> list[np.ndarray]:
    """For each of ``columns`` (per cell values), the (n_groups x resamples) float32 sums over each
    group's cells of value x weight: ``local`` is each cell's group (non-decreasing, from 0),
    ``weights``/``row`` as :func:`weights_by_count` gives them; ``base`` (per cell, optional) marks
    at most one cell per group whose weight row is added apart (a second one in a group is summed
    with the rest).

    Why: one sparse product per column read every weight row once per column. Here the columns'
    values on the cells that are not a base, deduplicated by content, go through one sparse
    product whose rows are (group, column) pairs, so each weight row is read once per group while
    in cache; a base cell's row is added once per column that is not zero there. In the metric
    tables the base is a class's correct predictions, so the mean over the mistakes and the mean
    over all images share their product (17 products of 140,000 cells became one of 9 columns)."""
    from scipy.sparse import csr_matrix

    local = np.asarray(local, dtype=np.int64)
    n, resamples = len(local), weights.shape[1]
    if base is None:
        starts = np.zeros(0, dtype=np.int64)
    else:
        marked = np.flatnonzero(base)
        starts = marked[np.r_[True, local[marked][1:] != local[marked][:-1]]] if len(marked) else marked
    firsts = local[starts]
    first_weights = np.zeros((n_groups, resamples), dtype=np.float32)
    first_weights[firsts] = weights[row[starts]]
    rest = np.ones(n, dtype=bool)
    rest[starts] = False
    rest_cells = np.flatnonzero(rest)
    unique: dict[bytes, int] = {}
    rest_columns, which = [], []
    for values in columns:
        part = np.asarray(values, dtype=np.float32)[rest_cells]
        if not part.any():
            which.append(None)
            continue
        key = part.tobytes()
        if key not in unique:
            unique[key] = len(rest_columns)
            rest_columns.append(part)
        which.append(unique[key])
    products = None
    if rest_columns:
        k = len(rest_columns)
        rest_group = local[rest_cells]
        size = np.bincount(rest_group, minlength=n_groups)
        begin = np.cumsum(size) - size
        rank = np.arange(len(rest_cells)) - begin[rest_group]
        # Entry (cell, column j) of row (group, j): rows in order, a row's cells in order.
        at = (k * begin[rest_group] + rank)[:, None] + np.arange(k)[None, :] * size[rest_group][:, None]
        data = np.empty(len(rest_cells) * k, dtype=np.float32)
        data[at] = np.stack(rest_columns, axis=1)
        indices = np.empty(len(rest_cells) * k, dtype=np.int64)
        indices[at] = row[rest_cells][:, None]
        indptr = np.r_[(k * begin[:, None] + np.arange(k)[None, :] * size[:, None]).ravel(), len(data)]
        matrix = csr_matrix((data, indices, indptr), shape=(n_groups * k, n))
        matrix.eliminate_zeros()
        products = (matrix @ weights).reshape(n_groups, k, resamples)
    out = []
    for values, j in zip(columns, which):
        at_base = np.asarray(values, dtype=np.float32)[starts]
        rest_sums = products[:, j, :] if j is not None else None
        if not at_base.any():
            total = rest_sums if j is not None else np.zeros((n_groups, resamples), dtype=np.float32)
        elif (at_base == 1).all():  # a count, or a similarity of a class to itself: the base row as it is
            total = first_weights.copy() if j is None else np.add(rest_sums, first_weights)
        else:
            first = np.zeros(n_groups, dtype=np.float32)
            first[firsts] = at_base
            total = np.multiply(first[:, None], first_weights)
            if j is not None:
                total += rest_sums
        out.append(total)
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


def _keyed_blocks(group: np.ndarray, resamples: int, model_of_group: np.ndarray | None,
                  model_keys: np.ndarray | None) -> list[tuple[tuple, tuple[int, int]]]:
    """:func:`_blocks` with each block's random stream key: ``(block,)``, or with ``model_keys`` the
    blocks of each model's cells (contiguous: groups are sorted by model) keyed ``(model key, block
    within the model)``, so a model's draws are its own."""
    if model_keys is None or model_of_group is None or not len(group):
        return [((b,), span) for b, span in enumerate(_blocks(group, resamples))]
    models = np.asarray(model_of_group)[group]
    starts = np.flatnonzero(np.r_[True, models[1:] != models[:-1]])
    out = []
    for begin, end in zip(starts.tolist(), starts[1:].tolist() + [len(group)]):
        key = int(model_keys[models[begin]])
        out += [((key, b), (begin + a, begin + z)) for b, (a, z) in enumerate(_blocks(group[begin:end], resamples))]
    return out


def _csr(rows: np.ndarray, values: np.ndarray, n_rows: int):
    """The (n_rows x cells) matrix summing cells into their rows, weighted by ``values``: rows are
    non-decreasing, so CSR's arrays are built directly (scipy's COO conversion sorted them again)."""
    from scipy.sparse import csr_matrix

    values = np.asarray(values, dtype=np.float32)
    indptr = np.searchsorted(rows, np.arange(n_rows + 1))
    return csr_matrix((values, np.arange(len(rows)), indptr), shape=(n_rows, len(rows)))


def _model_sums(models: np.ndarray, mask: np.ndarray, values: np.ndarray, n_models: int) -> np.ndarray:
    """(n_models x resamples): each model's sum of ``mask`` x ``values`` over its groups' rows.
    A model's groups are one run of rows (``models`` non-decreasing, as the metric tables' groups
    sorted by model are): one sum over the rows as they lie per model, where a sparse product
    copied every strided column of the block's sums first (0.09 CPU-s). (A BLAS product here
    started OpenBLAS's own threads beside the bootstrap's: 3 -> 4.8 CPU-s.)"""
    mask = np.asarray(mask)
    if mask.dtype != bool or (len(models) > 1 and (np.diff(models) < 0).any()):
        return _csr(models, mask, n_models) @ np.ascontiguousarray(values)
    out = np.zeros((n_models, values.shape[1]), dtype=values.dtype)
    bounds = np.searchsorted(models, np.arange(n_models + 1))
    for m in range(n_models):
        rows = slice(bounds[m], bounds[m + 1])
        if mask[rows].all():
            out[m] = values[rows].sum(axis=0)
        elif mask[rows].any():
            out[m] = values[rows][mask[rows]].sum(axis=0)
    return out


def _replicate_ratios(num: np.ndarray, den: np.ndarray, *, defined: bool = False):
    """num / den, NaN where den is 0 (the statistic is undefined in that resample); with ``defined``,
    also whether every ratio is defined (so no pass looks for NaN again)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.divide(num, den)
    undefined = den <= 0
    none = not undefined.any()
    if not none:
        out[undefined] = np.nan
    return (out, none) if defined else out


MAX_THREADS = 4  # blocks in flight: each holds ~32 MB of weights and its products
# Cells x resamples from which a block is worth a thread. Why: a run of many models keys each model's cells
# as blocks of their own (model_stream_key), and a model of few classes has a few cells, so its block is
# ~0.5 ms of short NumPy calls that take and drop the GIL; two threads of them took twice the wall of one.
# Metric tables with 2,000 resamples, 1 -> 2 threads (2026-12-06, 2-core Xeon): 400 models x 1 class
# (~12k weights a block) 1.64 -> 2.80 s, 100 x 10 classes (~80k) 0.54 -> 0.94, 20 x 100 (~800k)
# 0.38 -> 0.35, 10 x 1,000 (8M, BLOCK_WEIGHTS) 2.01 -> 1.42.
THREADED_BLOCK_WEIGHTS = 1_000_000


def worker_threads() -> int:
    """Threads for the bootstrap's blocks where they are large enough (:func:`block_threads`): the cores
    this process may use (detected, not assumed), at most MAX_THREADS."""
    from core.machine import available_cores

    return max(1, min(MAX_THREADS, available_cores()))


def block_threads(items: list[tuple], resamples: int) -> int | None:
    """Threads for the blocks ``items`` (…, start, stop): None (:func:`worker_threads`) where at least
    half the work (cells x resamples) is in blocks of THREADED_BLOCK_WEIGHTS or more, else one. By the
    share of the work, not the mean block: a few large blocks beside hundreds of one-class models'
    tiny ones are most of the time, and they gain from the cores (code review)."""
    weights = [(item[-1] - item[-2]) * max(1, resamples) for item in items]
    large = sum(w for w in weights if w >= THREADED_BLOCK_WEIGHTS)
    return None if large and 2 * large >= sum(weights) else 1


def ordered_map(func, items: list[tuple], threads: int | None = None):
    """Yield func(*item) for each item, in order, computing up to ``threads`` at a time (at most
    2 x threads results waiting), or inline with one thread or one item; from the first item whose thread
    could not be started on, the items no thread has taken run here (each item once)."""
    threads = worker_threads() if threads is None else threads
    if threads <= 1 or len(items) <= 1:
        for item in items:
            yield func(*item)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def result(job):
        future, item = job
        return func(*item) if future is None else future.result()

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bootstrap") as pool:
        pending, threaded = deque(), True
        for item in items:
            future = None
            if threaded:
                try:
                    future = pool.submit(func, *item)
                except RuntimeError:  # "can't start new thread" (an address-space limit): the rest computed here
                    threaded = False
                    pool.shutdown(wait=False, cancel_futures=True)  # queued and not taken: computed here, once
                    pending = deque((None if f is None or f.cancel() else f, queued) for f, queued in pending)
            pending.append((future, item))
            if len(pending) >= 2 * threads:
                yield result(pending.popleft())
        while pending:
            yield result(pending.popleft())


def model_stream_key(model: str) -> int:
    """A model's own random stream within a family: 64 bits of sha256 of its id. Why: the weights a
    model's cells draw must not depend on which other models are in the table (their order, their
    cell counts), so that its intervals are the same computed alone, beside others, or a chunk of
    models at a time (explain.streaming); adding a model to a run no longer moves another's bounds."""
    import hashlib

    return int.from_bytes(hashlib.sha256(str(model).encode("utf-8")).digest()[:8], "big")


@dataclass
class CellFamily:
    """The cells of one bootstrap (the arguments of :func:`bootstrap_ratios`). With ``model_keys``
    (one :func:`model_stream_key` per model code) each model's cells are blocked and drawn on their
    own: its bounds do not depend on the other models'."""

    group: np.ndarray
    count: np.ndarray
    stats: dict[str, RatioStatistic]
    n_groups: int
    stream: int
    model_of_group: np.ndarray | None = None
    n_models: int = 0
    balanced: np.ndarray | None = None
    base_cells: np.ndarray | None = None
    model_keys: np.ndarray | None = None


def bootstrap_ratios(group: np.ndarray, count: np.ndarray, stats: dict[str, RatioStatistic], n_groups: int,
                     options: IntervalOptions, *, stream: int, model_of_group: np.ndarray | None = None,
                     n_models: int = 0, balanced: np.ndarray | None = None,
                     base_cells: np.ndarray | None = None) -> BootstrapResult:
    """Percentile intervals of each ratio statistic per group and (where ``model_mask``) per model.

    ``group``: per cell, its group code (non-decreasing); ``count``: images in the cell (its weight
    is Poisson(count)). ``balanced``: per group, whether it counts in its model's balanced accuracy
    (the unweighted mean over classes of sum(w * correct) / sum(w * n): needs 'accuracy' in stats).
    ``stream`` separates the random streams of independent cell families. ``base_cells`` (per cell,
    optional): at most one cell per group that many statistics count alike in their numerators
    and denominators, such as a class's correct predictions (:func:`group_sums`: a speed hint, the
    bounds are the same without it up to float32 rounding).

    Cost: one Poisson draw per cell and resample, one sparse product per block for every distinct
    numerator and denominator (:func:`group_sums`; statistics sharing an array share its sums), and
    the percentile bounds of the groups with at least MIN_BOOTSTRAP_N observations."""
    family = CellFamily(group, count, stats, n_groups, stream, model_of_group, n_models, balanced, base_cells)
    return bootstrap_families([family], options)[0]


def bootstrap_families(families: list[CellFamily], options: IntervalOptions) -> list[BootstrapResult]:
    """:func:`bootstrap_ratios` of several independent cell families at once: their blocks share
    one pool of threads (where they are large enough: :func:`block_threads`), so no core waits for the
    last block of one family before the next starts (the metric tables' triple and top-5 families:
    0.1 s of 1.8 on 2 cores). Each family's bounds are those it gets alone, bit for bit."""
    runs = [_FamilyRun(family, options) for family in families]
    buffers = _ThreadBuffers(max([run.buffer_size for run in runs], default=0))
    items = [(i, key, start, stop) for i, run in enumerate(runs) for key, (start, stop) in run.blocks]

    def work(i: int, key: tuple, start: int, stop: int):
        return i, runs[i].work(key, start, stop, buffers.get())

    # Blocks run on the machine's cores (NumPy's sort, table lookups and scipy's sparse products release
    # the GIL) where they are large enough; results are added in block order, so the bounds are the same
    # bit for bit whatever the threads.
    for i, out in ordered_map(work, items, threads=block_threads(items, int(options.resamples))):
        runs[i].absorb(out)
    return [run.result() for run in runs]


class _FamilyRun:
    """One family's bootstrap: its blocks' work (any thread) and their sums, added in block order."""

    def __init__(self, family: CellFamily, options: IntervalOptions):
        self.family, self.options = family, options
        self.level, resamples = options.level, int(options.resamples)
        self.resamples = resamples
        n_groups, n_models, stats = family.n_groups, family.n_models, family.stats
        self.group = group = np.asarray(family.group, dtype=np.int64)
        self.count = count = np.asarray(family.count, dtype=np.float64)
        # (random stream key, (start, stop)) per block: the block's number in the family, or with
        # model_keys the model's key and the block's number within the model (blocks never span models).
        self.blocks = _keyed_blocks(group, resamples, family.model_of_group, family.model_keys) if n_groups else []
        self.buffer_size = BLOCK_WEIGHTS + resamples * int(np.bincount(group).max(initial=0)) if n_groups else 0
        self.observations = {name: np.bincount(group, weights=s.n_obs if s.n_obs is not None else count * (s.den > 0),
                                               minlength=n_groups) for name, s in stats.items()}
        self.enough = {name: (obs >= MIN_BOOTSTRAP_N) & stats[name].per_group
                       for name, obs in self.observations.items()}
        # Per model: the observations behind each model-level value, and the images of its balanced
        # classes (result() gives no bound below MIN_BOOTSTRAP_N, or below 2 images: expanded_tail).
        self.model_obs, self.balanced_images = {}, None
        if family.model_of_group is not None and n_models:
            models_of_cell = family.model_of_group[group]
            for name, s in stats.items():
                if s.model_mask is not None:
                    n_obs = s.n_obs if s.n_obs is not None else count * (s.den > 0)
                    self.model_obs[name] = np.bincount(models_of_cell, weights=n_obs * s.model_mask[group],
                                                       minlength=n_models)
            if family.balanced is not None:
                self.balanced_images = np.bincount(models_of_cell, weights=count * family.balanced[group],
                                                   minlength=n_models)
        self.blocks = [block for block, answers in zip(self.blocks, self._answering(self.blocks)) if answers]
        self.group_low = {name: np.full(n_groups, np.nan) for name in stats}
        self.group_high = {name: np.full(n_groups, np.nan) for name in stats}
        self.model_num = {name: np.zeros((n_models, resamples)) for name, s in stats.items()
                          if s.model_mask is not None}
        self.model_den = {name: np.zeros((n_models, resamples)) for name in self.model_num}
        balanced = family.balanced is not None
        self.bal_sum = np.zeros((n_models, resamples)) if balanced else None
        self.bal_n = np.zeros((n_models, resamples)) if balanced else None
        self.arrays = list({id(a): a for st in stats.values() for a in (st.num, st.den)}.values())  # shared once

    def _answering(self, blocks: list) -> np.ndarray:
        """Per block: whether any bound depends on it. A block whose groups each have fewer than
        MIN_BOOTSTRAP_N observations in every statistic, and whose models have too few for every
        model-level bound, would be drawn for bounds that come out NA: it is not drawn. Why: a table of
        2,000 one-image models (an upload of per-model samples) spent 3.3 of its 3.3 s drawing them (0.27 s
        now). Every other block keeps its random stream (keyed before this): the bounds are the same bit
        for bit."""
        family, n_groups, n_models = self.family, self.family.n_groups, self.family.n_models
        if not blocks:
            return np.zeros(0, dtype=bool)
        group_answers = np.zeros(n_groups, dtype=bool)
        for enough in self.enough.values():
            group_answers |= enough
        if self.model_obs or self.balanced_images is not None:
            model_answers = np.zeros(n_models, dtype=bool)
            for obs in self.model_obs.values():
                model_answers |= obs >= MIN_BOOTSTRAP_N
            if self.balanced_images is not None:
                has_class = np.bincount(family.model_of_group[family.balanced], minlength=n_models) >= 1
                model_answers |= has_class & ~np.isnan(expanded_tail(self.level, self.balanced_images))
            group_answers |= model_answers[family.model_of_group]
        first = self.group[np.array([start for _, (start, _) in blocks])]
        last = self.group[np.array([stop - 1 for _, (_, stop) in blocks])] + 1
        answered_before = np.r_[0, np.cumsum(group_answers)]
        return answered_before[last] > answered_before[first]

    def work(self, key: tuple, start: int, stop: int, buffer: np.ndarray) -> dict:
        """One block's group bounds and its contributions to its models' sums (a contiguous model range)."""
        family, level, resamples = self.family, self.level, self.resamples
        model_of_group, balanced = family.model_of_group, family.balanced
        rng = np.random.default_rng([int(self.options.seed), int(family.stream), *key])
        weights, row = weights_by_count(rng, self.count[start:stop], resamples, buffer=buffer)
        g = self.group[start:stop]
        first, last = int(g[0]), int(g[-1]) + 1
        base = None if family.base_cells is None else family.base_cells[start:stop]
        sums = group_sums(g - first, last - first, [a[start:stop] for a in self.arrays], weights, row, base)
        products = {id(a): total for a, total in zip(self.arrays, sums)}
        out = {"first": first, "bounds": {}, "models": {}}
        if model_of_group is not None and family.n_models:
            m_first = int(model_of_group[first:last].min())
            m_last = int(model_of_group[first:last].max()) + 1
            models = model_of_group[first:last] - m_first
            out["m_first"], out["m_last"] = m_first, m_last
        for name, s in family.stats.items():
            use = np.flatnonzero(self.enough[name][first:last])
            keep_all = name == "accuracy" and balanced is not None
            if not len(use) and not keep_all and s.model_mask is None:
                continue
            num, den = products[id(s.num)], products[id(s.den)]
            if len(use):
                every = len(use) == last - first
                reps, all_defined = _replicate_ratios(num if every else num[use], den if every else den[use],
                                                      defined=True)
                out["bounds"][name] = (use, *percentile_bounds(reps, level, all_defined=all_defined,
                                                              n_obs=self.observations[name][first + use]))
            if keep_all:
                reps = _replicate_ratios(num, den)
                use_bal = balanced[first:last]
                defined = use_bal[:, None] & ~np.isnan(reps)
                size = m_last - m_first
                out["balanced"] = (_csr(models, use_bal.astype(np.float64), size) @ np.where(defined, reps, 0.0),
                                   _csr(models, np.ones(len(models)), size) @ defined.astype(np.float64))
            if s.model_mask is not None:  # a model's sums are its counted groups' sums: groups x R, not cells x R
                mask = s.model_mask[first:last]
                out["models"][name] = (_model_sums(models, mask, num, m_last - m_first),
                                       _model_sums(models, mask, den, m_last - m_first))
        return out

    def absorb(self, out: dict) -> None:
        first = out["first"]
        for name, (use, low, high) in out["bounds"].items():
            self.group_low[name][first + use], self.group_high[name][first + use] = low, high
        for name, (num, den) in out["models"].items():
            self.model_num[name][out["m_first"]:out["m_last"]] += num
            self.model_den[name][out["m_first"]:out["m_last"]] += den
        if "balanced" in out:
            self.bal_sum[out["m_first"]:out["m_last"]] += out["balanced"][0]
            self.bal_n[out["m_first"]:out["m_last"]] += out["balanced"][1]

    def result(self) -> BootstrapResult:
        family, level = self.family, self.level
        model_of_group, n_models, balanced = family.model_of_group, family.n_models, family.balanced
        result = BootstrapResult()
        if family.n_groups == 0:
            return result
        for name, s in family.stats.items():
            result.groups[name] = (self.group_low[name], self.group_high[name])
            if name in self.model_num:
                obs = self.model_obs[name]
                ok = np.flatnonzero(obs >= MIN_BOOTSTRAP_N)  # only these get a bound: only these are computed
                low, high = np.full(n_models, np.nan), np.full(n_models, np.nan)
                low[ok], high[ok] = percentile_bounds(_replicate_ratios(self.model_num[name][ok],
                                                                        self.model_den[name][ok]), level, n_obs=obs[ok])
                result.models[name] = (low, high)
        if balanced is not None:  # expanded by the model's images in its balanced classes
            images = self.balanced_images
            ok = np.flatnonzero(np.bincount(model_of_group[balanced], minlength=n_models) >= 1)
            low, high = np.full(n_models, np.nan), np.full(n_models, np.nan)
            low[ok], high[ok] = percentile_bounds(_replicate_ratios(self.bal_sum[ok], self.bal_n[ok]), level,
                                                  n_obs=images[ok])
            result.models["accuracy_balanced"] = (low, high)
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
    names = list(columns)
    for block, (start, stop) in enumerate(_blocks(group, resamples)):
        rng = np.random.default_rng([int(options.seed), int(stream), block])
        weights, row = weights_by_count(rng, count[start:stop], resamples)
        g = group[start:stop]
        first, last = int(g[0]), int(g[-1]) + 1
        sums = group_sums(g - first, last - first, [columns[name][start:stop] for name in names], weights, row)
        yield first, last, {name: total.astype(np.float64) for name, total in zip(names, sums)}


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
