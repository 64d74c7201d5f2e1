"""What the hostile-input campaign on explain compare and the intervals found (issue 23), each
kept as a test: a model without mistakes, families built on one mistake or on a model whose every
row failed, the order the models are named in, huge resample counts, float32 bounds, levels that
are typos, tests that could not be made, unknown family members, what compare.csv says."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.intervals import format_half_width, format_level, wilson_interval
from explain.compare import CompareError, compare_models, family_claims
from explain.metrics import compute_metric_tables
from explain.uncertainty import A_BETTER, B_BETTER, TOO_FEW, IntervalOptions
from tests.explain.test_compare import _predictions


def _run(*args):
    """explain's command line in this process (a subprocess costs ~3 s of imports; the CLI's own error
    handling is main()'s, the same in both): returncode, stdout and stderr like subprocess.run's."""
    import contextlib
    import io
    from types import SimpleNamespace

    from explain.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_a_model_without_mistakes_prints_na_not_a_traceback(tmp_path):
    df = _predictions({"perfect": 1.0, "poor": 0.4}, n_per_class=10)
    source = tmp_path / "p.csv"
    df.to_csv(source, index=False)
    result = _run("compare", source, "--models", "perfect,poor", "--resamples", "200")
    assert result.returncode == 0, result.stderr
    sibling = next(line for line in result.stdout.splitlines() if line.startswith("overall sibling_rate"))
    assert "NA" in sibling and "<NA>" not in result.stdout and TOO_FEW in sibling


def test_naming_the_models_the_other_way_mirrors_every_number():
    df = _predictions({"mA": 0.7, "mB": 0.6}, n_per_class=30, seed=3)
    ab = compare_models(df, "mA", "mB", options=IntervalOptions(resamples=500)).table
    ba = compare_models(df, "mB", "mA", options=IntervalOptions(resamples=500)).table
    assert (ab["model_a"] == "mA").all() and (ba["model_a"] == "mB").all()
    for s in ("accuracy", "lin_all", "severity", "wup_mistakes"):
        np.testing.assert_array_equal(ab[f"{s}_diff"].to_numpy(float, na_value=np.nan),
                                      -ba[f"{s}_diff"].to_numpy(float, na_value=np.nan))
        np.testing.assert_array_equal(ab[f"{s}_diff_ci_low"].to_numpy(float, na_value=np.nan),
                                      -ba[f"{s}_diff_ci_high"].to_numpy(float, na_value=np.nan))
        np.testing.assert_array_equal(ab[f"{s}_p"].to_numpy(float, na_value=np.nan),
                                      ba[f"{s}_p"].to_numpy(float, na_value=np.nan))
    swap = {A_BETTER: B_BETTER, B_BETTER: A_BETTER}
    assert [swap.get(v, v) for v in ab["verdict"]] == list(ba["verdict"])
    assert (ab["a_only_correct"] == ba["b_only_correct"]).all()


def test_family_values_need_two_observations_and_members_need_counted_rows():
    fam = {"t1": "T", "t2": "T", "c1": "C", "c2": "C"}
    df = _predictions({"t1": 1.0, "t2": 1.0, "c1": 0.5, "c2": 0.55}, n_per_class=20, families=fam)
    # t2 makes exactly one mistake: no model of T has a sibling % (t1 has no mistakes)
    row = df.index[(df["model"] == "t2")][0]
    df.loc[row, "pred_wnid"] = "n02085620"
    claims = family_claims(df, "T", "C", options=IntervalOptions(resamples=300))
    table = claims.table.set_index("statistic")
    assert table.loc["sibling_rate", "verdict"] == TOO_FEW and pd.isna(table.loc["sibling_rate", "diff"])
    assert table.loc["sibling_rate", "n_models_a"] == 0
    assert table.loc["accuracy", "n_models_a"] == 2  # accuracy is over the images: both count
    failed = df.copy()
    failed["status"] = np.where(failed["model"] == "t2", "failed", "ok")
    claims = family_claims(failed, "T", "C")
    assert not claims.possible and "T: 1 model" in claims.reason


def test_family_arguments_that_cannot_be_meant():
    fam = {"t1": "T", "t2": "T", "c1": "C", "c2": "C"}
    df = _predictions({"t1": 0.9, "t2": 0.8, "c1": 0.5, "c2": 0.55}, n_per_class=5, families=fam)
    with pytest.raises(CompareError, match="both 'x'"):
        family_claims(df, "x", "x")
    with pytest.raises(CompareError, match="'zz', which has no predictions here"):
        family_claims(df, "T", "C", families={"zz": "T"})


@pytest.mark.parametrize("flags, words", [
    (["--resamples", "1000000000"], "--resamples"), (["--ci", "1.5"], "below 50%"), (["--ci", "1"], "below 50%"),
])
def test_option_values_that_are_typos_are_refused(tmp_path, flags, words):
    source = tmp_path / "p.csv"
    _predictions({"a": 0.6, "b": 0.5}, n_per_class=3).to_csv(source, index=False)
    result = _run("compare", source, "--models", "a,b", *flags)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and words in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_levels_print_as_given():
    assert format_level(0.999) == "99.9%" and format_level(0.975) == "97.5%" and format_level(0.95) == "95%"
    assert "99.9%" in IntervalOptions(level=0.999).describe() and "(99.9%," in format_half_width(20, 0.999)
    with pytest.raises(ValueError, match="between 0 and its n"):
        wilson_interval(5, 3)


def test_bounds_hold_their_point_when_every_image_has_one_value():
    df = pd.DataFrame({"model": "m", "image": [f"{i}.jpg" for i in range(40)], "true_wnid": "n02123045",
                       "pred_wnid": ["n02123045"] * 20 + ["n02123159"] * 20})
    tables = compute_metric_tables(df, cache_dir=False, ci=IntervalOptions(resamples=200))
    for frame in (tables.per_model, tables.per_class):
        for column in ("lch_all", "path_mistakes", "wup_mistakes", "severity", "lin_mistakes"):
            point = float(frame[column].iloc[0])
            assert float(frame[f"{column}_ci_low"].iloc[0]) <= point <= float(frame[f"{column}_ci_high"].iloc[0])


def test_what_was_not_paired_is_said_and_the_csv_names_a_and_b(tmp_path):
    df = _predictions({"a": 0.6, "b": 0.5}, n_per_class=10)
    moved = df.index[(df["model"] == "b")][:4]
    df.loc[moved, "true_wnid"] = "n04285008"  # b says these images are of another class
    comparison = compare_models(df, "a", "b", options=IntervalOptions(resamples=200))
    assert comparison.notes and "4 images not paired: their true class differs" in comparison.notes[0]
    assert int(comparison.overall["n"]) == 60 - 4
    source, out = tmp_path / "p.csv", tmp_path / "out"
    df.to_csv(source, index=False)
    out.mkdir()
    result = _run("compare", source, "--models", "a,b", "--out", out, "--resamples", "200")
    assert result.returncode == 0 and "note: 4 images not paired" in result.stderr
    written = pd.read_csv(out / "compare.csv")
    assert (written["model_a"] == "a").all() and (written["model_b"] == "b").all()
    assert (written["resamples"] == 200).all() and (written["level"] == 0.95).all()


@pytest.mark.parametrize("per_family", [2, 3, 4])
def test_families_that_do_not_differ_are_rarely_called_different(per_family):
    """The code review's null: every model's accuracy drawn from one distribution (sd 5 points),
    1000 images a model, families assigned at random; the share of 'better' verdicts on accuracy
    stays within 5 % + 5 % over 40 comparisons (the two-level percentile bootstrap gave 40 % at 2 v 2)."""
    rng = np.random.default_rng(per_family)
    called = 0
    for run in range(40):
        accuracies = {f"m{i}": float(np.clip(rng.normal(0.7, 0.05), 0.05, 0.95)) for i in range(2 * per_family)}
        families = {m: ("A" if i < per_family else "B") for i, m in enumerate(accuracies)}
        df = _predictions(accuracies, n_per_class=170, seed=run, families=families)  # 6 classes: ~1000 images
        row = family_claims(df, "A", "B", options=IntervalOptions(resamples=100)).table.set_index("statistic")
        called += row.loc["accuracy", "verdict"] in (A_BETTER, B_BETTER)
    assert called / 40 <= 0.10, f"{called} of 40 null family comparisons called different"
