"""explain compare and the metric tables' interval columns: references, reproducibility, the CLI,
CSV safety."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest, false_discovery_control

from core.csvsafe import read_csv
from explain.compare import COMPARE_SCHEMA, CompareError, compare_models, family_claims
from explain.metrics import PredictionsError, compute_metric_tables
from explain.schema import METRIC_TABLES, interval_columns
from explain.uncertainty import A_BETTER, NO_EVIDENCE, TOO_FEW, IntervalOptions

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
CLASSES = ["n02123045", "n02123159", "n02124075", "n02127052", "n02129604", "n02085620"]


def _predictions(accuracies: dict[str, float], n_per_class: int = 40, seed: int = 0, families=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    wnids = np.array(CLASSES)
    true = np.repeat(np.arange(len(CLASSES)), n_per_class)
    frames = []
    for model, accuracy in accuracies.items():
        right = rng.random(len(true)) < accuracy
        pred = np.where(right, true, (true + rng.integers(1, len(CLASSES), len(true))) % len(CLASSES))
        frames.append(pd.DataFrame({"model": model, "image": [f"img{i}.jpg" for i in range(len(true))],
                                    "true_wnid": wnids[true], "pred_wnid": wnids[pred],
                                    "family": (families or {}).get(model), "label_space": "imagenet-1k"}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def df():
    return _predictions({"good": 0.85, "poor": 0.45, "twin": 0.45})


@pytest.fixture(scope="module")
def comparison(df):
    return compare_models(df, "good", "poor")


def test_mcnemar_and_q_equal_scipy(comparison):
    table = comparison.table
    classes = table[table["scope"] == "class"]
    for row in classes.itertuples(index=False):
        b, c = int(row.a_only_correct), int(row.b_only_correct)
        want = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
        assert row.p == pytest.approx(want, rel=1e-12)
    p = classes["p"].astype("float64").to_numpy()
    np.testing.assert_allclose(classes["q"].astype("float64"), false_discovery_control(p), atol=1e-15)
    overall = comparison.overall
    b, c = int(overall["a_only_correct"]), int(overall["b_only_correct"])
    assert overall["p"] == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    assert overall["verdict"] == A_BETTER and overall["accuracy_diff"] > 0.3
    assert overall["accuracy_diff_ci_low"] < overall["accuracy_diff"] < overall["accuracy_diff_ci_high"]
    assert list(table.columns) == list(COMPARE_SCHEMA) and int(overall["n"]) == 6 * 40


def test_equal_models_give_no_evidence(df):
    overall = compare_models(df, "poor", "twin").overall
    assert overall["verdict"] == NO_EVIDENCE and overall["q"] >= 0.05


def test_too_few_images_is_said(df):
    small = df[df["image"].isin(["img0.jpg", "img1.jpg", "img2.jpg"])]
    table = compare_models(small, "good", "poor").table
    assert set(table["verdict"]) == {TOO_FEW}


def test_same_seed_same_numbers_bit_for_bit(df, comparison):
    again = compare_models(df, "good", "poor")
    pd.testing.assert_frame_equal(comparison.table, again.table, check_exact=True)
    other = compare_models(df, "good", "poor", options=IntervalOptions(seed=1))
    assert not other.table["wup_all_diff_ci_low"].equals(comparison.table["wup_all_diff_ci_low"])


def test_metric_intervals_reproducible_and_off_with_no_ci(df):
    a, b = compute_metric_tables(df, cache_dir=False), compute_metric_tables(df, cache_dir=False)
    for name in METRIC_TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    c = compute_metric_tables(df, cache_dir=False, ci=IntervalOptions(seed=7))
    assert not c.per_model["wup_all_ci_low"].equals(a.per_model["wup_all_ci_low"])
    assert c.per_model["accuracy_ci_low"].equals(a.per_model["accuracy_ci_low"])  # Wilson: no seed
    none = compute_metric_tables(df, cache_dir=False, ci=None)
    for table in METRIC_TABLES:
        frame = getattr(none, table)
        assert all(frame[f"{col}_ci_{side}"].isna().all() for col in interval_columns(table) for side in ("low", "high"))
    model = a.per_model.set_index("model")
    for column in interval_columns("per_model"):
        defined = model[column].notna() & model[f"{column}_ci_low"].notna()
        assert (model.loc[defined, f"{column}_ci_low"] <= model.loc[defined, column] + 1e-12).all(), column
        assert (model.loc[defined, column] <= model.loc[defined, f"{column}_ci_high"] + 1e-12).all(), column


def test_refusals_say_the_fix(df):
    with pytest.raises(CompareError, match="has no predictions here"):
        compare_models(df, "good", "nope")
    with pytest.raises(CompareError, match="two different models"):
        compare_models(df, "good", "good")
    with pytest.raises(PredictionsError, match="pairs their predictions by image"):
        compare_models(df.drop(columns="image"), "good", "poor")


def test_family_claims_need_two_models_per_family():
    fam = {"a1": "CNN", "a2": "CNN", "t1": "transformer"}
    df = _predictions({"a1": 0.5, "a2": 0.55, "t1": 0.9}, families=fam)
    claims = family_claims(df, "transformer", "CNN")
    assert not claims.possible and "at least 2 models" in claims.reason and "transformer: 1 model" in claims.reason
    fam["t2"] = "transformer"
    df = _predictions({"a1": 0.5, "a2": 0.55, "t1": 0.9, "t2": 0.92}, families=fam)
    claims = family_claims(df, "transformer", "CNN")
    row = claims.table.set_index("statistic").loc["accuracy"]
    assert claims.possible and (row["n_models_a"], row["n_models_b"]) == (2, 2)
    assert row["diff"] > 0.3 and row["diff_ci_low"] < row["diff"] < row["diff_ci_high"]


@pytest.mark.long
def test_cli_compare_writes_a_safe_csv(tmp_path, df):
    hostile = df.replace({"model": {"good": "=HYPERLINK(\"http://x\")"}})
    source = tmp_path / "p.csv"
    hostile.to_csv(source, index=False)
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run([sys.executable, "-m", "explain", "compare", str(source), "--models",
                             '=HYPERLINK("http://x"),poor', "--out", str(out), "--resamples", "500"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "overall accuracy" in result.stdout and "A better" in result.stdout
    text = (out / "compare.csv").read_text()
    assert "p" in read_csv(out / "compare.csv").columns and "q" in read_csv(out / "compare.csv").columns
    assert ",=" not in text and not text.startswith("=")
    result = subprocess.run([sys.executable, "-m", "explain", "compare", str(source), "--models", "good"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and result.stderr.startswith("error: --models A,B")


def test_cli_metrics_interval_flags(tmp_path, df):
    source = tmp_path / "p.csv"
    df.to_csv(source, index=False)
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run([sys.executable, "-m", "explain", "metrics", str(source), "--out", str(out),
                             "--ci", "90", "--resamples", "300", "--seed", "3"], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "90% intervals" in result.stderr and "300 resamples, seed 3" in result.stderr
    per_model = read_csv(out / "per_model.csv")
    assert {"accuracy_ci_low", "wup_all_ci_high", "hdist_at_1_ci_low"} <= set(per_model.columns)
    want = compute_metric_tables(df, cache_dir=False, ci=IntervalOptions(level=0.9, resamples=300, seed=3))
    np.testing.assert_allclose(per_model["wup_all_ci_low"].astype(float),
                               want.per_model["wup_all_ci_low"].astype(float), rtol=1e-12)
    bad = subprocess.run([sys.executable, "-m", "explain", "metrics", str(source), "--out", str(out), "--ci", "150"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "error: --ci" in bad.stderr and "Traceback" not in bad.stderr


def _cli(*argv) -> tuple[int, str, str]:
    import contextlib
    import io

    from explain.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", *map(str, argv)])
    return code, out.getvalue(), err.getvalue()


def test_model_ids_with_commas_are_named_by_the_cut_that_fits_or_by_model_a_and_b(tmp_path, df):
    """An uploaded table's model id may hold a comma ("resnet50,ft"): --models cut at every comma made
    such a model impossible to compare (found reading the change again, 2026-12-06)."""
    renamed = df.replace({"model": {"good": "resnet50,ft", "twin": "vit=b,16"}})
    source = tmp_path / "p.csv"
    renamed.to_csv(source, index=False)
    code, out, err = _cli(source, "--models", "resnet50,ft,poor", "--resamples", "200")
    assert code == 0, err
    assert out.startswith("A = resnet50,ft, B = poor:") and "A better" in out
    code, out, err = _cli(source, "--model-a", "vit=b,16", "--model-b", "resnet50,ft", "--resamples", "200")
    assert code == 0, err
    assert out.startswith("A = vit=b,16, B = resnet50,ft:")
    # Both cuts name models: ambiguous, said in one line with the way out.
    four = {"resnet50": 0.8, "ft,poor": 0.5, "resnet50,ft": 0.7, "poor": 0.4}
    _predictions(four, n_per_class=5).to_csv(source, index=False)
    code, out, err = _cli(source, "--models", "resnet50,ft,poor")
    assert code == 2 and err.count("\n") == 1
    assert "can be read as 'resnet50' and 'ft,poor'; 'resnet50,ft' and 'poor': give --model-a A --model-b B." in err
    code, _, err = _cli(source, "--models", "x,y,z")
    assert code == 2 and ("none of its 2 commas leaves a model of these predictions on both sides (the models are: "
                          "resnet50, 'ft,poor', 'resnet50,ft', poor); give --model-a A --model-b B.") in err
    # A reading of a model against itself is none (reviewer: 'a,b' and 'a,b' made this ambiguous).
    _predictions({"a": 0.8, "b": 0.5, "a,b": 0.6, "a,b,a": 0.4}, n_per_class=5).to_csv(source, index=False)
    code, out, err = _cli(source, "--models", "a,b,a,b", "--resamples", "200")
    assert code == 0 and out.startswith("A = a,b,a, B = b:"), err
    _predictions(four, n_per_class=5).to_csv(source, index=False)
    code, _, err = _cli(source, "--models", "nope,poor")  # one comma: the comparison names the unknown model
    assert code == 2 and "model A 'nope' has no predictions here" in err
    # Hostile campaign: the models are compared in name order, and the unknown one was called B here;
    # the list of models quotes the ids a comma-separated list would misread.
    code, _, err = _cli(source, "--models", "zz,poor")
    assert code == 2 and "model A 'zz' has no predictions here; the models are: resnet50, 'ft,poor'" in err
    code, _, err = _cli(source, "--model-a", "poor", "--model-b", "aa")
    assert code == 2 and "model B 'aa' has no predictions here" in err
    # ... and a --models of 100,000 commas took memory in the square of its length (17 GB at Linux's
    # longest argument): refused at once.
    code, _, err = _cli(source, "--models", "," * 100_000)
    assert code == 2 and "--models holds 100,000 commas; give --model-a A --model-b B." in err
    for empty in (",", "poor,", ", poor"):
        code, _, err = _cli(source, "--models", empty)
        assert code == 2 and "one side of the comma is empty; give two model ids." in err
    code, _, err = _cli(source, "--model-a", "resnet50")
    assert code == 2 and "give both --model-a and --model-b" in err
    code, _, err = _cli(source, "--models", "a,b", "--model-a", "resnet50", "--model-b", "ft,poor")
    assert code == 2 and "not both" in err


def test_family_options_take_model_ids_with_commas_and_equals_signs():
    from core.errors import OptionError
    from explain.cli import _parse_families

    assert _parse_families(["resnet50,ft=CNN,vit=b=transformer", "a=CNN", "a=CNN"]) == {
        "resnet50,ft": "CNN", "vit=b": "transformer", "a": "CNN"}
    # With the predictions' models: the one cut into known models (reviewer: 'vit=b,16=ViT' was cut into
    # models 'vit' and '16'); without one, the plain rule, whose unknown model the comparison names.
    assert _parse_families(["vit=b,16=ViT,a=CNN"], ["vit=b,16", "a"]) == {"vit=b,16": "ViT", "a": "CNN"}
    assert _parse_families(["vit=b,16=ViT"], ["x"]) == {"vit": "b", "16": "ViT"}
    with pytest.raises(OptionError, match="can be cut into models of these predictions in more than one way; write "
                                          "the families in the predictions' family column instead."):
        _parse_families(["a=x,b=CNN"], ["a", "b", "a=x,b"])
    with pytest.raises(OptionError, match="--family holds 300 commas"):
        _parse_families(["," * 300 + "a=CNN"], ["a"])
    # An empty piece belongs to the next model like any piece without '=' (hostile campaign: a blank
    # piece did and an empty one did not, so ", ,b" and ",,b" named two different models).
    assert _parse_families(["m1=CNN,,b=vit"]) == _parse_families(["m1=CNN, ,b=vit"]) == {"m1": "CNN", ",b": "vit"}
    for bad in (["a,b"], ["=CNN"], ["a="], [","], ["a=CNN,"]):
        with pytest.raises(OptionError, match="give MODEL=FAMILY"):
            _parse_families(bad)
    with pytest.raises(OptionError, match="--family gives 'a' two families \\(CNN, vit\\); give one."):
        _parse_families(["a=CNN,a=vit"])


def test_model_ids_in_compare_messages_are_escaped(tmp_path):
    """Hostile campaign: an escape sequence in a model id reached the terminal raw in the list of models,
    and a newline in one cut the message short."""
    df = _predictions({"ok": 0.8, "esc\x1b[31mred": 0.5, "new\nline": 0.5}, n_per_class=5)
    source = tmp_path / "p.parquet"
    df.to_parquet(source)
    code, out, err = _cli(source, "--models", "ok,nope")
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err
    assert "the models are: ok, esc\\x1b[31mred, new\\nline." in err
