"""pages.tables's table helpers: readable labels with the raw name in the help, one number format
(percent with one decimal, like the charts), missing values as an en dash; plurals; the run label."""
import numpy as np
import pandas as pd
import pytest

from explain.metrics import compute_metric_tables
from explain.schema import labels_of
from pages.tables import NA_DASH, PERCENT_D3, RATE_COLUMNS, styled, table_column_config
from pages.text import plural
from pages.run_state import run_details, run_label, short_run_id

TABBY, TIGER_CAT, EGYPTIAN_CAT = "n02123045", "n02123159", "n02124075"


@pytest.fixture(scope="module")
def tables():
    return compute_metric_tables(pd.DataFrame({
        "model": ["m"] * 6, "image": list("abcdef"), "true_wnid": [TABBY] * 3 + [TIGER_CAT] * 3,
        "pred_wnid": [TABBY, TABBY, EGYPTIAN_CAT, TIGER_CAT, TIGER_CAT, TIGER_CAT],
        "label_space": "imagenet-1k", "status": "ok"}))


def test_labels_help_and_formats(tables):
    config = table_column_config("per_class", tables.per_class.columns, tables.per_class)
    labels = labels_of("per_class")
    for column, entry in config.items():
        assert entry["label"] == labels[column]
        assert entry["help"].startswith(f"`{column}`: ")
    assert config["sibling_rate"]["label"] == "Sibling %"
    assert config["sibling_rate"]["type_config"]["format"] == "percent"
    assert config["lch_mistakes"]["type_config"]["format"] == "%.3f"
    assert config["severity"]["type_config"]["format"] == "%.2f"
    assert NA_DASH in config["sibling_rate"]["help"] and "not defined" in config["sibling_rate"]["help"]
    plain = table_column_config("per_class", tables.per_class.columns, tables.per_class, formats=False)
    assert "format" not in plain["sibling_rate"].get("type_config", {}) or \
        plain["sibling_rate"]["type_config"].get("format") is None


def test_styled_rounds_like_the_charts_and_dashes_na(tables):
    styler = styled(tables.per_class)
    text = styler.to_string()
    # 2/3 accuracy of tabby; one decimal, rounded, with its interval in the same cell (issue 23)
    assert "66.7% [" in text and "100.0% [" in text
    assert NA_DASH in text  # tiger cat has no mistakes: sibling_rate and the means over mistakes are NA
    assert PERCENT_D3 == ".1%"
    # the numbers themselves (what st.dataframe sorts by) are kept; the bounds live in their column's cells
    assert styler.data.equals(tables.per_class[list(styler.data.columns)])
    assert not any(str(c).endswith(("_ci_low", "_ci_high")) for c in styler.data.columns)
    plain = tables.per_class.drop(columns=[c for c in tables.per_class.columns if "_ci_" in c])
    assert styled(plain).data is plain  # a table without bounds is styled as it is
    big = pd.DataFrame({"accuracy": [0.640803] * 30_000, "n": 7})
    shown = styled(big)  # large tables: Streamlit's own column formats, on shares rounded as "{:.1%}" rounds
    assert isinstance(shown, pd.DataFrame) and (shown["accuracy"] == 0.641).all() and (shown["n"] == 7).all()
    assert (big["accuracy"] == 0.640803).all(), "the caller's frame is left as it is"


def test_rate_columns_are_shares():
    from explain.schema import METRIC_TABLES

    known = set().union(*map(set, METRIC_TABLES.values()))
    assert RATE_COLUMNS <= known
    assert all(METRIC_TABLES[t][c].dtype == "Float64" for t in METRIC_TABLES for c in RATE_COLUMNS
               if c in METRIC_TABLES[t])


def test_probabilities_and_margins_read_in_percent_as_under_the_pictures():
    """Browse's table read 0.4134 under a thumbnail captioned 41.3 % (a UI review); the compare table too."""
    frame = pd.DataFrame({"prob_1": [0.41344], "prob_5": [0.012], "margin": [0.0571], "a_prob": [0.9], "n": [3]})
    text = styled(frame).to_string()
    assert "41.3%" in text and "1.2%" in text and "5.7%" in text and "90.0%" in text, text
    assert "0.4134" not in text


@pytest.mark.parametrize("count, noun, expected", [(1, "class", "1 class"), (2, "class", "2 classes"),
                                                   (0, "image", "0 images"), (1, "model", "1 model"),
                                                   (1200, "image", "1,200 images")])
def test_plural(count, noun, expected):
    assert plural(count, noun) == expected


def test_run_label_keeps_title_and_short_id():
    from core.runstore import RunInfo

    info = RunInfo(run_id="20261129-161500-cats-3f2a", title="A very long title about domestic cats and their wild "
                                                              "relatives", wnids=[TABBY], models=["m1", "m2"])
    assert short_run_id(info.run_id) == "3f2a" and short_run_id("sample") == "sample"
    label = run_label(info)
    assert label.endswith(" · 3f2a") and label.startswith("A very long") and len(label) <= 30
    assert run_label(RunInfo(run_id="sample", title="cats")) == "cats · sample"
    assert run_label(RunInfo(run_id="sample")) == "sample"
    details = run_details(info)
    assert "domestic cats and their wild relatives" in details and "`20261129-161500-cats-3f2a`" in details
    assert "1 class" in details and "2 models" in details


@pytest.mark.parametrize("digits", [1, 2, 3])
def test_fixed_texts_are_pythons_format_to_the_character(digits):
    """The Arrow-built texts equal f"{v + 0.0:.{digits}f}" on random values, values on and near a
    rounding half (0.125 at two digits is a binary tie that Python rounds to even), negatives, -0.0,
    infinities, NaN (null) and values too large for int64."""
    from pages.tables import fixed_texts

    rng = np.random.default_rng(digits)
    edges = [0.125, 0.375, 0.625, 2.5, 0.05, 0.15, 0.25, 0.35, 99.95, 0.0005, 0.0015, 1.005, 2.675, -0.04, -0.0,
             0.0, -1.25, float("inf"), float("-inf"), float("nan"), 1e20, -3e18, 1e-12, 0.9999999999,
             # products that float64 rounds onto a half the exact value is below (rint alone is wrong here)
             473.15, 511.85, 758.535, 296.135, 928.5255, 289.6485]
    values = np.concatenate([edges, rng.random(20_000), rng.random(20_000) * 100, -rng.random(2_000),
                             np.round(rng.random(20_000), digits + 1), rng.integers(0, 10_000, 20_000) / 8,
                             np.nextafter(np.round(rng.random(5_000), digits + 1), 2.0),
                             np.nextafter(np.round(rng.random(5_000), digits + 1), -2.0)])
    expected = [None if v != v else f"{v + 0.0:.{digits}f}" for v in values.tolist()]
    assert fixed_texts(values, digits).to_pylist() == expected


def test_bound_texts_are_the_per_cell_rule_on_arrays():
    """bound_texts formats whole columns at once; each cell is what finite_or_none and the one format give."""
    from core.intervals import finite_or_none
    from pages.tables import bound_texts

    lows = [0.4551, None, pd.NA, float("nan"), float("inf"), 0.0, 1e-9, -0.0, 0.99995, 2]
    highs = [0.7813, 0.5, 0.5, 0.5, 0.5, -0.0, 0.5, 0.0, 1.0, float("-inf")]
    for column, scale, digits in (("accuracy", 100.0, 1), ("severity", 1.0, 2), ("wup_mistakes", 1.0, 3)):
        df = pd.DataFrame({f"{column}_ci_low": pd.array(lows, dtype="Float64") if column == "accuracy" else lows,
                           f"{column}_ci_high": highs})
        expected = []
        for low, high in zip(lows, highs):
            low, high = finite_or_none(low), finite_or_none(high)
            expected.append(None if low is None or high is None else
                            f"[{low * scale + 0.0:.{digits}f}, {high * scale + 0.0:.{digits}f}]")
        assert bound_texts(df, column) == expected
        assert not any(t is not None and ("nan" in t or "-0.0" in t) for t in expected)


@pytest.mark.parametrize("rows", [1, 3, 64, 65, 500])
def test_a_small_tables_texts_are_the_arrow_built_ones(rows, monkeypatch):
    """Tables of up to SMALL_TEXTS rows are formatted by Python (Arrow's per-call cost dominated them): the
    same texts as the Arrow path, cell for cell, for shares, means and steps, with undefined bounds and values
    (each size through both paths, whatever SMALL_TEXTS is)."""
    import pages.tables as tables

    rng = np.random.default_rng(rows)
    values = np.r_[[0.28745, 0.0005, 0.9995, 0.125, -0.0, np.nan, np.inf, 2.675], rng.random(rows)][:rows]
    lows, highs = values * rng.random(rows), values + rng.random(rows)
    lows[2::4], highs[1::5] = np.nan, np.inf
    for column in ("accuracy", "severity", "wup_mistakes"):
        frame = pd.DataFrame({column: pd.array(values, dtype="Float64"), f"{column}_ci_low": lows,
                              f"{column}_ci_high": highs})
        frame.loc[frame.index[3::7], column] = pd.NA
        texts = {}
        for path, small in (("python", 10 ** 9), ("arrow", -1)):
            with monkeypatch.context() as patched:
                patched.setattr(tables, "SMALL_TEXTS", small)
                texts[path] = (tables.interval_texts(frame, column), tables.bound_texts(frame, column),
                               tables._bound_array(frame, column).to_pylist())
        assert texts["python"] == texts["arrow"], column
        assert texts["python"][0][0] is not None, "the first value is a number: its text is compared too"


def test_percent_columns_are_rounded_for_streamlits_percent_format():
    """Streamlit's "percent" format cuts the last digit: Browse's table read 64.0 % where its cards read
    64.1 % (a UI review); shown columns are rounded to 3 decimals first, missing values kept."""
    from pages.tables import percent_rounded

    df = pd.DataFrame({"prob_1": pd.array([0.640803, None, 0.43249], dtype="Float64"), "image": ["a", "b", "c"]})
    out = percent_rounded(df, ["prob_1", "image", "absent"])
    assert out["prob_1"].tolist()[0] == 0.641 and out["prob_1"].isna().tolist() == [False, True, False]
    assert out["prob_1"].tolist()[2] == 0.432 and out["image"].tolist() == ["a", "b", "c"]
    assert percent_rounded(df, ["image"]) is df
    # Ties as Python's format rounds them (hostile check: 23/80 read 28.8 % here, 28.7 % in the styled tables)
    fractions = np.array([k / n for n in range(1, 400) for k in range(n + 1)] + [-0.0, 0.0005, -0.2875, 1e300])
    out = percent_rounded(pd.DataFrame({"share": fractions}), ["share"])["share"].to_numpy()
    assert [f"{v:.1%}" for v in out] == [f"{v:.1%}" for v in fractions]
    assert out[fractions.tolist().index(23 / 80)] == 0.287


def test_a_sentences_share_reads_as_the_tables_cell():
    """core.intervals.format_share (explain's sentences) and pages.tables.interval_texts (the tables) write a
    share with its bounds alike, rounding ties included (a code review: two hand-written formats could drift)."""
    from core.intervals import format_share
    from pages.tables import interval_texts

    rng = np.random.default_rng(0)
    values = np.r_[rng.random(2000), [0.28745, 0.0005, 0.9995, 0.125, 1.0, 0.0]]
    lows, highs = values * rng.random(len(values)), values + (1 - values) * rng.random(len(values))
    lows[:50] = np.nan  # no bounds: the value alone
    frame = pd.DataFrame({"x_share": values, "x_share_ci_low": lows, "x_share_ci_high": highs})
    assert [format_share(v, lo, hi) for v, lo, hi in zip(values, lows, highs)] == interval_texts(frame, "x_share")
    assert format_share(pd.NA) == "NA" and format_share(0.5, pd.NA, 0.6) == "50.0%"


def test_a_change_of_a_share_reads_in_points():
    """A UI review: the raw-and-curated table wrote an accuracy's change as '+0.0%'; differences of shares read in
    points everywhere, as the claims write them ('+6.7 points [1.2, 12.0]')."""
    import pandas as pd

    from pages.tables import styled

    html = styled(pd.DataFrame({"model": ["m", "n"], "accuracy_change": [0.0667, -0.125]})).to_html()
    assert "+6.7 points" in html and "-12.5 points" in html and "%" not in html
