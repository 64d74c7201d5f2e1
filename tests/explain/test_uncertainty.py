"""explain.uncertainty's functional core against its references (scipy, numpy), and the Poisson
bootstrap's claim that one draw per cell of c images is the same bootstrap as one per image."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, false_discovery_control

from explain.uncertainty import (A_BETTER, B_BETTER, NO_EVIDENCE, TOO_FEW, IntervalOptions, RatioStatistic,
                                 bh_q_values, bootstrap_p, bootstrap_ratios, mcnemar_p, percentile_bounds, verdict)


def test_mcnemar_equals_binomtest_on_the_discordant_pairs():
    b, c = np.meshgrid(np.arange(0, 31), np.arange(0, 31))
    b, c = b.ravel(), c.ravel()
    want = [1.0 if bb + cc == 0 else binomtest(int(bb), int(bb + cc), 0.5).pvalue for bb, cc in zip(b, c)]
    np.testing.assert_allclose(mcnemar_p(b, c), want, rtol=1e-12, atol=1e-15)


def test_bh_equals_scipy_and_keeps_nan_out_of_the_family():
    rng = np.random.default_rng(3)
    p = rng.random(40) ** 3
    np.testing.assert_allclose(bh_q_values(p), false_discovery_control(p, method="bh"), rtol=0, atol=1e-15)
    with_nan = np.r_[p[:5], np.nan, p[5:10]]
    q = bh_q_values(with_nan)
    assert np.isnan(q[5])
    np.testing.assert_allclose(np.r_[q[:5], q[6:]], false_discovery_control(np.r_[p[:5], p[5:10]]), atol=1e-15)


def test_percentile_bounds_equal_numpy_quantile_over_defined_values():
    rng = np.random.default_rng(4)
    reps = rng.normal(size=(6, 501))
    reps[2, ::3] = np.nan
    reps[4] = np.nan
    low, high = percentile_bounds(reps, 0.9)
    for i, row in enumerate(reps):
        row = row[~np.isnan(row)]
        if not len(row):
            assert np.isnan(low[i]) and np.isnan(high[i])
            continue
        assert low[i] == pytest.approx(np.quantile(row, 0.05), abs=1e-12)
        assert high[i] == pytest.approx(np.quantile(row, 0.95), abs=1e-12)


def test_bootstrap_p_inverts_the_percentile_interval():
    rng = np.random.default_rng(5)
    reps = np.stack([rng.normal(3, 1, 1999), rng.normal(0, 1, 1999), rng.normal(-0.5, 1, 1999)])
    p = bootstrap_p(reps)
    assert p[0] < 0.01 and p[1] > 0.5 and 0.3 < p[2] < 0.8
    low, high = percentile_bounds(reps, 0.95)
    assert ((p < 0.05) == ((low > 0) | (high < 0))).all()


def test_verdict_words_from_one_rule():
    assert verdict(0.1, 0.01, 50) == A_BETTER and verdict(-0.1, 0.01, 50) == B_BETTER
    assert verdict(-0.1, 0.01, 50, higher_is_better=False) == A_BETTER  # severity: lower is better
    assert verdict(0.1, 0.05, 50) == NO_EVIDENCE
    assert verdict(0.1, float("nan"), 50) == TOO_FEW  # no test could be made (a mean over one mistake)
    assert verdict(0.5, 0.001, 5) == TOO_FEW


def test_options_refuse_what_makes_no_sense():
    for bad in ({"level": 1.5}, {"level": 0}, {"level": 0.015}, {"level": "0.95"}, {"level": True},
                {"resamples": 10}, {"resamples": 2.5}, {"resamples": float("inf")}, {"resamples": 10 ** 9},
                {"seed": -1}, {"seed": True}):
        with pytest.raises(ValueError):
            IntervalOptions(**bad)


def _one_group_bounds(values, counts, seed, resamples=20000):
    values, counts = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    stats = {"m": RatioStatistic(values, np.ones(len(values)))}
    result = bootstrap_ratios(np.zeros(len(values), dtype=np.int64), counts, stats, 1,
                              IntervalOptions(resamples=resamples, seed=seed), stream=1)
    return result.groups["m"][0][0], result.groups["m"][1][0]


def test_a_cell_of_c_images_is_the_same_bootstrap_as_c_images():
    """Poisson(c) = the sum of c independent Poisson(1) weights: the interval from 3 cells of
    (20, 7, 3) images equals, up to Monte Carlo error, the one from the 30 images one by one, and
    both equal the classic multinomial bootstrap's."""
    values, counts = [0.2, 0.6, 0.9], [20, 7, 3]
    cells = _one_group_bounds(values, counts, seed=1)
    images = _one_group_bounds(np.repeat(values, counts), np.ones(30), seed=2)
    rng = np.random.default_rng(7)
    x = np.repeat(values, counts)
    classic = x[rng.integers(0, 30, size=(20000, 30))].mean(axis=1)
    want = np.quantile(classic, [0.025, 0.975])
    for got in (cells, images):
        assert got == pytest.approx(tuple(want), abs=0.012)


def test_fewer_than_ten_observations_get_no_interval():
    from explain.uncertainty import MIN_BOOTSTRAP_N

    low, high = _one_group_bounds([0.5, 0.9], [4, MIN_BOOTSTRAP_N - 5], seed=0, resamples=200)
    assert np.isnan(low) and np.isnan(high)
    low, high = _one_group_bounds([0.5, 0.9], [5, MIN_BOOTSTRAP_N - 5], seed=0, resamples=200)
    assert 0.5 <= low < high <= 0.9


def test_expanded_tails_and_their_p_agree():
    """Hesterberg's expanded tail at n: Phi(-sqrt(n/(n-1)) t_{0.975, n-1}); and p < 0.05 exactly when
    0 lies outside the expanded 95 % interval (up to the +1 of the p-value)."""
    from scipy.stats import norm, t

    from explain.uncertainty import expanded_tail

    for n in (2, 5, 30, 300, 10_000):
        assert expanded_tail(0.95, n) == pytest.approx(norm.cdf(-np.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1)), rel=1e-12)
    assert expanded_tail(0.95, 30) == pytest.approx(0.0188, abs=1e-4) and np.isnan(expanded_tail(0.95, 1))
    # Many counts (looked up per distinct value): the same as one at a time, NaN for n < 2 or NaN, any shape.
    many = np.random.default_rng(3).integers(0, 40, (7, 30)).astype(np.float64)
    many[0, :5] = np.nan
    one_by_one = np.vectorize(lambda v: float(expanded_tail(0.95, v)))(many)
    assert np.array_equal(expanded_tail(0.95, many), one_by_one, equal_nan=True)
    assert np.isnan(expanded_tail(0.95, many)[0, :5]).all() and np.isnan(expanded_tail(0.95, many)[many < 2]).all()
    rng = np.random.default_rng(12)
    reps = rng.normal(rng.uniform(-3, 3, (300, 1)), 1, (300, 1999))
    n = rng.integers(5, 200, 300)
    p = bootstrap_p(reps, n)
    low, high = percentile_bounds(reps, 0.95, n_obs=n)
    outside = (low > 0) | (high < 0)
    near = np.abs(p - 0.05) < 0.01  # the +1 moves p by about 1/2000 of its tail
    assert ((p < 0.05) == outside)[~near].all()


@pytest.mark.parametrize("count", [1, 3, 32, 33, 100, 1000])
def test_poisson_weights_have_poissons_moments(count):
    from scipy.stats import poisson

    from explain.uncertainty import poisson_weights

    w = poisson_weights(np.random.default_rng(count), np.full(50, float(count)), 2000)
    assert w.dtype == np.float32 and w.shape == (50, 2000)
    assert w.mean() == pytest.approx(count, rel=0.01) and w.var() == pytest.approx(count, rel=0.03)
    # the distribution, not only the moments: each probability within 0.003 of Poisson's
    values, freq = np.unique(w, return_counts=True)
    assert np.abs(freq / w.size - poisson.pmf(values, count)).max() < 0.003
    again = poisson_weights(np.random.default_rng(count), np.full(50, float(count)), 2000)
    assert np.array_equal(w, again)


def test_threads_do_not_change_a_bit(monkeypatch):
    """Blocks run on several threads and are added in block order: the same bounds with 1 or 3."""
    import explain.uncertainty as uncertainty
    from explain.metrics import compute_metric_tables

    monkeypatch.setattr(uncertainty, "BLOCK_WEIGHTS", 20_000)  # many small blocks: 10 cells each at 2000
    monkeypatch.setattr(uncertainty, "THREADED_BLOCK_WEIGHTS", 0)  # and threads for them all the same
    used = []
    real_map = uncertainty.ordered_map

    def spy(func, items, threads=None):
        used.append(uncertainty.worker_threads() if threads is None else threads)
        return real_map(func, items, threads)

    monkeypatch.setattr(uncertainty, "ordered_map", spy)
    rng = np.random.default_rng(8)
    wnids = np.array(["n02123045", "n02123159", "n02124075", "n02127052", "n02129604"])
    df = pd.DataFrame({"model": np.repeat(["a", "b", "c"], 200), "image": [f"{i}.jpg" for i in range(600)],
                       "true_wnid": wnids[rng.integers(0, 5, 600)], "pred_wnid": wnids[rng.integers(0, 5, 600)]})
    results = []
    for threads in (1, 3):
        monkeypatch.setattr(uncertainty, "worker_threads", lambda threads=threads: threads)
        results.append(compute_metric_tables(df, cache_dir=False))
    assert set(used) == {1, 3}, "the blocks ran on one thread, then on three"
    for name in ("per_model", "per_class", "confusions"):
        pd.testing.assert_frame_equal(getattr(results[0], name), getattr(results[1], name), check_exact=True)
    assert results[0].per_model["wup_all_ci_low"].notna().all()


def test_small_blocks_run_on_one_thread_and_large_ones_on_the_cores():
    """Many models of a few classes are many blocks of a few cells (each model its own random stream):
    two threads of them took twice the wall of one, so they run on one; where at least half the work is
    in blocks of ~1M weights and more, on worker_threads(), also beside hundreds of tiny blocks."""
    from explain.uncertainty import THREADED_BLOCK_WEIGHTS, block_threads

    small = [(0, (m, 0), 6 * m, 6 * m + 6) for m in range(400)]  # 400 models of 6 cells each
    assert block_threads(small, 2000) == 1
    large = [(0, (b,), 4000 * b, 4000 * (b + 1)) for b in range(3)]  # 4,000 cells a block: 8M weights
    assert block_threads(large, 2000) is None
    edge = [(0, (0,), 0, THREADED_BLOCK_WEIGHTS // 1000)]
    assert block_threads(edge, 1000) is None and block_threads(edge, 999) == 1
    assert block_threads([], 2000) == 1
    assert block_threads(large + small, 2000) is None, "3 blocks of 8M beside 400 of 12k: most of the work is large"
    assert block_threads(large[:1] + small * 2, 2000) == 1, "8M beside 9.6M of tiny blocks"


def test_rankable_marks_wide_classes_and_the_images_they_need():
    from scipy.stats import binomtest

    from core.intervals import images_needed
    from explain.metric_intervals import rankable

    per_class = pd.DataFrame({"n": pd.array([6, 400, 5], dtype="Int64"),
                              "accuracy": pd.array([0.0, 0.5, pd.NA], dtype="Float64")})
    low = binomtest(0, 6).proportion_ci(method="wilson")
    per_class["accuracy_ci_low"] = pd.array([low.low, 0.45, pd.NA], dtype="Float64")
    per_class["accuracy_ci_high"] = pd.array([low.high, 0.55, pd.NA], dtype="Float64")
    got = rankable(per_class)
    assert got["half_width"].iloc[0] == pytest.approx((low.high - low.low) / 2, abs=1e-12)
    assert got["too_wide"].tolist() == [True, False, False] and np.isnan(got["half_width"].iloc[2])
    # 0 of 6: planned at its interval's value nearest 50 % (its upper bound), not at 0
    assert got["images_needed"].iloc[0] == images_needed(0.1, low.high) > images_needed(0.1, 0.0)
    assert got["images_needed"].iloc[2] == images_needed(0.1, 0.5)  # no accuracy: the worst case


def test_mcnemar_interval_agrees_with_the_exact_test():
    from explain.uncertainty import mcnemar_interval

    for b in range(0, 16):
        for c in range(0, 16):
            low, high = mcnemar_interval([b], [c], [40], 0.95)
            excludes = low[0] > 0 or high[0] < 0
            assert excludes == (mcnemar_p([b], [c])[0] < 0.05), (b, c)
            assert low[0] <= (b - c) / 40 <= high[0]
    low, high = mcnemar_interval([5], [0], [30], 0.95)  # the review's case: p = 0.0625, so 0 is inside
    assert low[0] < 0 < high[0]


# --------------------------------------------------------------------------- the fast paths, against the plain ones
def _matrix(rng, kind: int, rows: int, width: int, dtype) -> np.ndarray:
    if kind == 0:
        a = rng.normal(size=(rows, width))
    elif kind == 1:  # heavy ties: most of a row in one bracket
        a = rng.integers(0, 5, size=(rows, width)).astype(float)
    elif kind == 2:  # skewed
        a = rng.exponential(size=(rows, width)) ** 3
    elif kind == 3:  # light ties
        a = np.round(rng.normal(size=(rows, width)), 2)
    elif kind == 4:  # undefined resamples, and a row with none defined
        a = rng.normal(size=(rows, width))
        a[rng.random((rows, width)) < 0.01] = np.nan
        a[0] = np.nan
    else:  # infinities and a constant row
        a = rng.normal(size=(rows, width))
        a[:, :5], a[:, 5:9] = np.inf, -np.inf
        a[1] = 0.0
    return a.astype(dtype)


@pytest.mark.parametrize("kind", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_order_statistics_equal_a_full_sort(kind, dtype):
    """The bracketed selection gives the very values np.sort puts at each position, whatever the
    rows hold (ties, NaN, infinities) and wherever the positions are (tails, near the middle)."""
    from explain.uncertainty import order_statistics

    rng = np.random.default_rng(kind)
    for width in (100, 512, 2000, 4001):
        a = _matrix(rng, kind, 40, width, dtype)
        m = width - np.isnan(a).sum(axis=1)
        for tail in (0.005, 0.025, 0.1, 0.3):
            low = np.floor((np.maximum(m, 1) - 1) * tail).astype(np.int64)
            high = np.floor((np.maximum(m, 1) - 1) * (1 - tail)).astype(np.int64)
            ks = np.stack([low, np.minimum(low + 1, np.maximum(m - 1, 0)), high,
                           np.minimum(high + 1, np.maximum(m - 1, 0))], axis=1)
            want = np.take_along_axis(np.sort(a, axis=1), ks, axis=1)
            assert np.array_equal(order_statistics(a, ks, m), want, equal_nan=True), (width, tail)


def test_percentile_bounds_take_the_fast_path_and_match_numpy_quantile():
    """Rows of 2000 resamples, the case the metric tables run: the bounds equal np.quantile, and
    almost every row was answered without sorting it."""
    import explain.uncertainty as uncertainty

    rng = np.random.default_rng(5)
    reps = (rng.normal(size=(300, 1)) + rng.gamma(2.0, size=(300, 2000))).astype(np.float32)
    sorted_rows = []
    real_sort = np.sort

    def counting_sort(a, *args, **kwargs):
        if np.ndim(a) == 2 and np.shape(a)[1] == 2000:
            sorted_rows.append(len(a))
        return real_sort(a, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uncertainty.np, "sort", counting_sort)
        low, high = percentile_bounds(reps, 0.95)
    assert sum(sorted_rows) < 0.05 * len(reps)
    want = np.quantile(reps.astype(np.float64), [0.025, 0.975], axis=1)
    np.testing.assert_allclose(low, want[0], rtol=1e-12)
    np.testing.assert_allclose(high, want[1], rtol=1e-12)


@pytest.mark.parametrize("with_base", [False, True])
def test_group_sums_equal_the_dense_sums(with_base):
    """Each column's sum of value x weight over each group's cells, as a dense product gives it,
    with shared, equal and all-zero columns, groups without cells, and two base cells in a group."""
    from explain.uncertainty import group_sums, weights_by_count

    rng = np.random.default_rng(3)
    local = np.sort(rng.choice([0, 1, 2, 4, 5, 7], size=60))  # groups 3 and 6 have no cell
    count = rng.integers(0, 40, size=60).astype(np.float64)
    weights, row = weights_by_count(rng, count, 300)
    v = rng.random(60)
    miss = (rng.random(60) < 0.7).astype(np.float64)
    columns = [v, v * miss, miss, np.ones(60), np.zeros(60), v.copy()]
    base = None
    if with_base:
        base = np.zeros(60, dtype=bool)
        for g in np.unique(local)[:-1]:
            base[np.flatnonzero(local == g)[:1]] = True
        base[np.flatnonzero(local == 0)[:2]] = True  # a second base cell in a group: summed with the rest
    got = group_sums(local, 8, columns, weights, row, base)
    for values, sums in zip(columns, got):
        want = np.zeros((8, 300))
        np.add.at(want, local, values[:, None] * weights[row].astype(np.float64))
        np.testing.assert_allclose(sums, want, rtol=2e-6, atol=1e-4)


def test_weights_by_count_rows_and_odd_counts():
    """Row j is cell j's: zero counts weigh 0, counts above the table (sums of parts) and
    fractional counts have Poisson's mean; the same seed gives the same weights."""
    from explain.uncertainty import POISSON_TABLE_MAX, poisson_weights, weights_by_count

    count = np.array([0, 1, 300, 1, 2.5, 0, 1000, 7], dtype=np.float64)
    weights, row = weights_by_count(np.random.default_rng(1), count, 4000)
    assert sorted(row.tolist()) == list(range(len(count)))
    by_cell = weights[row]
    assert (by_cell[[0, 5]] == 0).all() and count.max() > POISSON_TABLE_MAX
    np.testing.assert_allclose(by_cell.mean(axis=1), count, rtol=0.05, atol=0.05)
    np.testing.assert_allclose(by_cell.var(axis=1), count, rtol=0.1, atol=0.05)  # Poisson: variance = mean
    again = poisson_weights(np.random.default_rng(1), count, 4000)  # the same seed: the same weights, cell by cell
    assert np.array_equal(again, by_cell) and not np.array_equal(again[1], again[3])  # two cells of 1: independent
    buffer = np.empty(len(count) * 4000 + 7, dtype=np.float32)
    again, again_row = weights_by_count(np.random.default_rng(1), count, 4000, buffer=buffer)
    assert np.shares_memory(again, buffer) and np.array_equal(again[again_row], by_cell)


def test_model_sums_equal_the_sparse_product():
    from explain.uncertainty import _csr, _model_sums

    rng = np.random.default_rng(2)
    values = rng.random((30, 3, 50)).astype(np.float32)[:, 1, :]  # a strided view, as the block's sums are
    models = np.sort(rng.integers(0, 4, 30))
    for mask in (rng.random(30) < 0.6, np.ones(30, dtype=bool), rng.random(30)):
        want = _csr(models, mask, 5) @ np.ascontiguousarray(values)
        np.testing.assert_allclose(_model_sums(models, mask, values, 5), want, rtol=1e-5)
    shuffled = rng.permutation(models)  # not in model order: the sparse product
    np.testing.assert_allclose(_model_sums(shuffled, mask, values, 5),
                               _csr(shuffled, mask, 5) @ np.ascontiguousarray(values), rtol=1e-5)


def test_families_at_once_equal_each_alone():
    from explain.uncertainty import CellFamily, bootstrap_families

    rng = np.random.default_rng(9)
    options = IntervalOptions(resamples=500, seed=3)
    families = []
    for stream in (1, 2):
        group = np.sort(rng.integers(0, 40, 400))
        count = rng.integers(1, 6, 400).astype(np.float64)
        stats = {"m": RatioStatistic(rng.random(400), np.ones(400), np.ones(40, dtype=bool))}
        families.append(CellFamily(group, count, stats, 40, stream, np.arange(40) // 10, 4))
    together = bootstrap_families(families, options)
    for family, got in zip(families, together):
        alone = bootstrap_ratios(family.group, family.count, family.stats, 40, options, stream=family.stream,
                                 model_of_group=family.model_of_group, n_models=4)
        for side in (0, 1):
            assert np.array_equal(got.groups["m"][side], alone.groups["m"][side], equal_nan=True)
            assert np.array_equal(got.models["m"][side], alone.models["m"][side], equal_nan=True)


def test_expanded_tail_table_equals_the_direct_computation():
    from explain.uncertainty import _expanded_tail, expanded_tail

    n = np.random.default_rng(4).integers(0, 5000, (20, 40)).astype(np.float64)  # whole: the table path
    assert np.array_equal(expanded_tail(0.95, n), _expanded_tail(0.95, n), equal_nan=True)
    assert np.array_equal(expanded_tail(0.9, n[0]), _expanded_tail(0.9, n[0]), equal_nan=True)


@pytest.mark.parametrize("keyed", [True, False])
def test_blocks_whose_bounds_would_be_na_are_not_drawn_and_the_rest_keep_every_bit(monkeypatch, keyed):
    """A table of many models with a few images each (2,000 one-image models: 3.3 s, nearly all of it
    drawing bounds that come out NA): only blocks on which a bound depends are drawn, and every bound is the
    same bit for bit as when every block is drawn; with per-model streams and with block-numbered ones
    (a block spanning several models is drawn when one of them has a bound)."""
    import explain.uncertainty as uncertainty
    from explain.metrics import compute_metric_tables

    rng = np.random.default_rng(5)
    wnids = np.array(["n02123045", "n02123159", "n02124075", "n02127052", "n02129604", "n02085620"])
    # one-image models, 9-image models (no group or model bound, but a balanced-accuracy bound from 2
    # images on), models of 1 class x 1 image beside 12-image ones, and two large models
    sizes = [1] * 60 + [9] * 5 + [12, 1, 1, 12] + [300, 250]
    true = rng.integers(0, 6, sum(sizes))
    df = pd.DataFrame({"model": np.repeat([f"m{i}" for i in range(len(sizes))], sizes),
                       "image": [f"{i}.jpg" for i in range(sum(sizes))], "true_wnid": wnids[true],
                       "pred_wnid": np.where(rng.random(len(true)) < 0.6, wnids[true],
                                             wnids[rng.integers(0, 6, len(true))]),
                       "label_space": "imagenet-1k"})
    if not keyed:
        real_blocks = uncertainty._keyed_blocks
        monkeypatch.setattr(uncertainty, "_keyed_blocks", lambda group, resamples, model_of_group, model_keys:
                            real_blocks(group, resamples, model_of_group, None))
        monkeypatch.setattr(uncertainty, "BLOCK_WEIGHTS", 40_000)  # blocks of ~20 cells: several models each
    drawn = []
    real_work = uncertainty._FamilyRun.work
    monkeypatch.setattr(uncertainty._FamilyRun, "work", lambda self, key, start, stop, buffer:
                        drawn.append(key) or real_work(self, key, start, stop, buffer))
    options = IntervalOptions(resamples=2000, seed=3)
    skipped = compute_metric_tables(df, cache_dir=False, ci=options)
    some = len(drawn)
    drawn.clear()
    monkeypatch.setattr(uncertainty._FamilyRun, "_answering", lambda self, blocks: np.ones(len(blocks), dtype=bool))
    every = compute_metric_tables(df, cache_dir=False, ci=options)
    assert some < len(drawn), (some, len(drawn))
    if keyed:
        assert (some, len(drawn)) == (9, 71), "one block a model; the 62 one-image models' not drawn"
    for name in ("per_model", "per_class", "confusions"):
        pd.testing.assert_frame_equal(getattr(skipped, name), getattr(every, name), check_exact=True)
    per_model = skipped.per_model.set_index("model")
    assert per_model.loc["m0", "wup_all_ci_low"] is pd.NA
    assert per_model.loc["m0", "accuracy_balanced_ci_low"] is pd.NA
    assert pd.notna(per_model.loc["m60", "accuracy_balanced_ci_low"]), "9 images: a balanced-accuracy bound"
    assert pd.notna(per_model.loc["m65", "wup_all_ci_low"])
    assert pd.notna(per_model.loc["m70", "accuracy_balanced_ci_low"])
    assert per_model.loc["m66", "accuracy_ci_low"] is not pd.NA, "Wilson's bound needs no bootstrap"
