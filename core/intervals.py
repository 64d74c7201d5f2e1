"""Wilson score intervals for a rate k/n, and how many images a rate needs (SPEC "Uncertainty").

On the ground floor because two stages need it: ``explain`` puts an interval on every rate of
the metric tables, and ``crawl`` says what half-width the chosen images per class will give
before anything is downloaded. Vectorised (NumPy arrays in, arrays out); the reference is
``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``, equal to 1e-12
(tests/core/test_intervals.py).
"""
from __future__ import annotations

import math

import numpy as np

DEFAULT_LEVEL = 0.95  # SPEC: every interval at 95 % unless asked
DEFAULT_HALF_WIDTH = 0.10  # issue 23 item 4: +-10 points on accuracy


def check_level(level: float) -> float:
    """The confidence level as a float in (0, 1), or ValueError naming the fix."""
    if isinstance(level, (bool, str, bytes)):
        raise ValueError(f"confidence level {level!r} is not a number; give one between 0 and 1, e.g. 0.95")
    try:
        value = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"confidence level {level!r} is not a number; give one between 0 and 1, e.g. 0.95") from None
    if not 0.0 < value < 1.0 or math.isnan(value):
        raise ValueError(f"confidence level {level!r} is outside (0, 1); give e.g. 0.95 for 95 %")
    return value


def finite_or_none(value) -> float | None:
    """A number as a float, or None for None, pandas' NA, NaN and anything that is no number (what a
    sentence or a cell shows as 'not defined'). One rule for explain.claims and pages.tables."""
    try:
        value = float(value)  # float(pd.NA) and float(None) raise TypeError
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def format_share(value, low=None, high=None) -> str:
    """'63.3% [45.5, 78.1]': a share and its bounds in percent, one decimal, as the dashboard's tables write
    them (pages.tables.interval_texts, the same digits); the share alone where a bound is not defined,
    'NA' where the share is not. For a sentence that carries a number (explain.error_types)."""
    value, low, high = finite_or_none(value), finite_or_none(low), finite_or_none(high)
    if value is None:
        return "NA"
    bounds = f" [{low * 100:.1f}, {high * 100:.1f}]" if low is not None and high is not None else ""
    return f"{value * 100:.1f}%{bounds}"  # no space: as '{:.1%}' and Plotly write it beside it (a UI review)


def format_level(level: float) -> str:
    """'95%', '99.9%', '97.5%': the level as typed, never rounded to a whole percent ('{:.0%}' printed
    99.9 % as '100%')."""
    return f"{round(float(level) * 100, 6):g}%"


def z_of(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.959964 for 95 %), as scipy's Wilson uses it."""
    from scipy.special import ndtri

    return float(ndtri(0.5 + 0.5 * check_level(level)))


def wilson_interval(k, n, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of k successes in n trials, elementwise; NaN where n == 0 (no rate).

    Newcombe (1998)'s formula as scipy writes it (``_binom_wilson_conf_int`` without continuity
    correction), with its two clamps: the lower bound is exactly 0 when k == 0, the upper exactly 1
    when k == n (the formula gives 1e-17 off there)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any((k < 0) | (k > n)):
        raise ValueError("wilson_interval: every k must be between 0 and its n (k successes of n trials)")
    z = z_of(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 2 * (n + z ** 2)
        center = (2 * n * p + z ** 2) / denom
        delta = z / denom * np.sqrt(4 * n * p * (1 - p) + z ** 2)
        low = np.where(k == 0, 0.0, center - delta)
        high = np.where(k == n, 1.0, center + delta)
    empty = ~(n > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def wilson_half_width(n, p: float | np.ndarray = 0.5, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Half the Wilson interval's width for a rate p observed on n images (the width does not depend
    on where the interval sits, only on n, p and the level). NaN for n == 0."""
    n = np.asarray(n, dtype=np.float64)
    z = z_of(level)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = z / (2 * (n + z ** 2)) * np.sqrt(4 * n * p * (1 - p) + z ** 2)
    return np.where(n > 0, half, np.nan)


def images_needed(half_width: float = DEFAULT_HALF_WIDTH, p: float = 0.5, level: float = DEFAULT_LEVEL) -> int:
    """The fewest images n whose Wilson interval for a rate p is at most +-half_width wide.

    p = 0.5 is the worst case (the widest interval for a given n). At 95 %: 93 images for +-10 points,
    381 for +-5. The SPEC's "about 96" (384) is the normal approximation 1.96^2 / (4 h^2); Wilson's
    half-width at p = 0.5 is z / (2 sqrt(n + z^2)), so it needs z^2 = 3.84 images fewer."""
    h = float(half_width)
    if not 0.0 < h < 0.5:
        raise ValueError(f"half-width {half_width!r} must be between 0 and 0.5 (e.g. 0.1 for +-10 points)")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"rate {p!r} must be between 0 and 1")
    z = z_of(level)
    # The half-width falls monotonically in n: bracket from the normal approximation, then bisect.
    hi = max(1, math.ceil(z * z * max(p * (1 - p), 1e-12) / (h * h)) + 1)
    while float(wilson_half_width(hi, p, level)) > h:
        hi *= 2
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if float(wilson_half_width(mid, p, level)) <= h:
            hi = mid
        else:
            lo = mid + 1
    return lo


def format_half_width(n: int, level: float = DEFAULT_LEVEL) -> str:
    """One phrase for a crawl budget: 'k = 50 images per class: accuracy to +-13.4 points (95 %, worst case)'."""
    images = "image" if n == 1 else "images"  # a UI review: "k = 1 images per class"
    if n <= 0:
        return f"k = {n} images per class: no interval (no images)"
    half = float(wilson_half_width(n, 0.5, level)) * 100
    return f"k = {n} {images} per class: accuracy to \u00b1{half:.1f} points ({format_level(level)}, worst case p = 0.5)"


def images_needed_at(rates, half_width: float = DEFAULT_HALF_WIDTH, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """:func:`images_needed` for each observed rate (NaN -> the worst case p = 0.5): how many images a
    class needs for +-half_width at the rate it shows now. Vectorised: the half-width falls with n,
    and h(n) <= h is a quadratic in n, 4h^2 n^2 + (8 h^2 z^2 - 4 z^2 p q) n + (4 h^2 - 1) z^4 >= 0; its
    larger root, rounded up and checked one step either way, is the answer (tested equal to the
    bisection of :func:`images_needed` on a grid of rates)."""
    h = float(half_width)
    if not 0.0 < h < 0.5:
        raise ValueError(f"half-width {half_width!r} must be between 0 and 0.5 (e.g. 0.1 for +-10 points)")
    rates = np.asarray(rates, dtype=np.float64)
    p = np.where(np.isnan(rates), 0.5, np.clip(rates, 0.0, 1.0))
    z = z_of(level)
    pq = p * (1 - p)
    a, b, c = 4 * h * h, 8 * h * h * z * z - 4 * z * z * pq, (4 * h * h - 1) * z ** 4
    root = (-b + np.sqrt(np.maximum(b * b - 4 * a * c, 0.0))) / (2 * a)
    n = np.maximum(1, np.ceil(root - 1e-9)).astype(np.int64)
    n = np.where(wilson_half_width(n, p, level) > h, n + 1, n)
    n = np.where((n > 1) & (wilson_half_width(np.maximum(n - 1, 1), p, level) <= h), n - 1, n)
    return n
