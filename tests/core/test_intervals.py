"""core.intervals against scipy: Wilson bounds to 1e-12, half-widths, images needed per class."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from core.intervals import format_half_width, images_needed, wilson_half_width, wilson_interval


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_wilson_equals_scipy_to_1e12(level):
    ks, ns, want_low, want_high = [], [], [], []
    for n in (1, 2, 3, 7, 10, 30, 57, 100, 213):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
            ks.append(k), ns.append(n), want_low.append(ci.low), want_high.append(ci.high)
    low, high = wilson_interval(np.array(ks), np.array(ns), level)
    np.testing.assert_allclose(low, want_low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(high, want_high, rtol=0, atol=1e-12)
    assert (low[np.array(ks) == 0] == 0).all() and (high[np.array(ks) == np.array(ns)] == 1).all()


def test_no_images_no_interval():
    low, high = wilson_interval([0, 3], [0, 5])
    assert np.isnan(low[0]) and np.isnan(high[0]) and 0 < low[1] < 0.6 < high[1] < 1


def test_half_width_is_half_of_scipys_width():
    for n, k in ((10, 5), (50, 20), (97, 48)):
        ci = binomtest(k, n).proportion_ci(method="wilson")
        assert float(wilson_half_width(n, k / n)) == pytest.approx((ci.high - ci.low) / 2, abs=1e-12)


@pytest.mark.parametrize("half_width, level", [(0.10, 0.95), (0.05, 0.95), (0.10, 0.99), (0.15, 0.9)])
def test_images_needed_is_the_fewest(half_width, level):
    k = images_needed(half_width, level=level)
    assert wilson_half_width(k, 0.5, level) <= half_width < wilson_half_width(k - 1, 0.5, level)


def test_images_needed_figures_and_observed_rate():
    # Wilson at p = 0.5: z / (2 sqrt(n + z^2)) <= h, i.e. n >= z^2 / (4 h^2) - z^2 (the SPEC's 96 less 3.84).
    assert images_needed(0.10) == 93 and images_needed(0.05) == 381
    assert images_needed(0.10, p=0.9) < images_needed(0.10)  # a rate near 1 needs fewer images
    with pytest.raises(ValueError, match="half-width"):
        images_needed(0.7)


def test_format_half_width():
    assert format_half_width(50) == "k = 50 images per class: accuracy to \u00b113.4 points (95%, worst case p = 0.5)"
    assert format_half_width(1).startswith("k = 1 image per class: ")  # a UI review: "k = 1 images per class"
    assert "no interval" in format_half_width(0)


def test_images_needed_at_observed_rates():
    from core.intervals import images_needed_at

    got = images_needed_at([0.5, 0.9, float("nan"), 1.0, 0.9])
    assert got.tolist() == [images_needed(0.1, 0.5), images_needed(0.1, 0.9), images_needed(0.1, 0.5),
                            images_needed(0.1, 1.0), images_needed(0.1, 0.9)]
    assert got[1] < got[0] and got[3] >= 1


@pytest.mark.parametrize("half_width, level", [(0.10, 0.95), (0.05, 0.99), (0.2, 0.9)])
def test_images_needed_at_equals_the_bisection_on_a_grid(half_width, level):
    from core.intervals import images_needed_at

    rates = np.linspace(0, 1, 101)
    want = [images_needed(half_width, float(p), level) for p in rates]
    assert images_needed_at(rates, half_width, level).tolist() == want
