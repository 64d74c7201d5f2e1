"""explain.claims: every pair of models and of families as one sentence, supported only where the
paired test says so (issue 23 item 5)."""
import numpy as np
import pandas as pd
import pytest

from explain.claims import FAMILIES, MODELS, claims_table, format_difference, run_claims, sentence
from explain.compare import STATISTICS, compare_models
from explain.uncertainty import A_BETTER, B_BETTER, NO_EVIDENCE, TOO_FEW, IntervalOptions

TABBY, TIGER_CAT, EGYPTIAN_CAT = "n02123045", "n02123159", "n02124075"
OPTIONS = IntervalOptions(resamples=400, seed=3)


def _predictions(accuracies: dict[str, float], n: int = 120, seed: int = 0, families: dict | None = None,
                 copy: dict | None = None) -> pd.DataFrame:
    """n images of tabby and tiger cat; each model right with its probability, wrong as Egyptian cat;
    ``copy``: model -> the model whose predictions it repeats exactly."""
    rng = np.random.default_rng(seed)
    true = np.array([TABBY, TIGER_CAT] * (n // 2))
    frames, by_model = [], {}
    for model, accuracy in accuracies.items():
        pred = by_model[copy[model]] if copy and model in copy else \
            np.where(rng.random(n) < accuracy, true, EGYPTIAN_CAT)
        by_model[model] = pred
        frames.append(pd.DataFrame({"model": model, "image": [f"img{i:03d}.jpg" for i in range(n)], "true_wnid": true,
                                    "pred_wnid": pred, "label_space": "imagenet-1k", "status": "ok",
                                    "family": (families or {}).get(model, "CNN")}))
    return pd.concat(frames, ignore_index=True)


def test_a_clearly_better_model_gives_a_supported_accuracy_claim():
    claims = run_claims(_predictions({"good": 0.95, "bad": 0.45}), options=OPTIONS)
    accuracy = [c for c in claims if c.kind == MODELS and c.statistic == "accuracy"]
    assert len(accuracy) == 1
    claim = accuracy[0]
    assert claim.supported and claim.verdict == A_BETTER and claim.better == "good"
    assert claim.q < 0.05 and claim.diff > 0.3 and claim.ci_low > 0
    assert claim.sentence.startswith("good more accurate than bad overall: +")
    assert " points [" in claim.sentence and ("q = " in claim.sentence or claim.sentence.endswith("q < 0.001"))
    # the numbers are the comparison's overall row, q included
    overall = compare_models(_predictions({"good": 0.95, "bad": 0.45}), "good", "bad", options=OPTIONS).overall
    assert claim.diff == pytest.approx(float(overall["accuracy_diff"]))
    assert claim.q == pytest.approx(float(overall["accuracy_q"]))
    assert claim.n == int(overall["n"]) == 120


def test_the_better_model_is_named_first_whatever_the_order():
    claims = run_claims(_predictions({"bad": 0.45, "good": 0.95}), options=OPTIONS)
    claim = [c for c in claims if c.statistic == "accuracy"][0]
    assert (claim.a, claim.b, claim.verdict) == ("bad", "good", B_BETTER)
    assert claim.sentence.startswith("good more accurate than bad overall: +")  # better - worse, positive
    assert claim.diff < 0  # the claim's own difference stays a - b


def test_two_identical_models_give_no_supported_claim():
    claims = run_claims(_predictions({"m1": 0.7, "m2": 0.7}, copy={"m2": "m1"}), options=OPTIONS)
    model_claims = [c for c in claims if c.kind == MODELS]
    assert len(model_claims) == len(STATISTICS)
    assert not any(c.supported for c in claims)
    accuracy = [c for c in model_claims if c.statistic == "accuracy"][0]
    assert accuracy.verdict == NO_EVIDENCE
    assert accuracy.sentence == "m1 and m2 do not differ in accuracy on any of their 120 paired images"
    assert (accuracy.diff, accuracy.ci_low, accuracy.ci_high) == (0.0, 0.0, 0.0), "the numbers stay in the table"


def test_every_pair_of_models_is_compared():
    claims = run_claims(_predictions({"a": 0.9, "b": 0.6, "c": 0.5}), options=OPTIONS, statistics=("accuracy",))
    pairs = [(c.a, c.b) for c in claims if c.kind == MODELS]
    assert pairs == [("a", "b"), ("a", "c"), ("b", "c")]
    chosen = run_claims(_predictions({"a": 0.9, "b": 0.6, "c": 0.5}), options=OPTIONS, statistics=("accuracy",),
                        models=["c", "a"])
    assert [(c.a, c.b) for c in chosen if c.kind == MODELS] == [("c", "a")]


def test_a_family_with_one_model_says_plainly_that_no_claim_can_be_made():
    claims = run_claims(_predictions({"a": 0.9, "b": 0.6, "c": 0.5}, families={"a": "CNN", "b": "transformer",
                                                                                 "c": "transformer"}),
                        options=OPTIONS, statistics=("accuracy",))
    family = [c for c in claims if c.kind == FAMILIES]
    assert len(family) == 1 and not family[0].possible and not family[0].supported
    assert family[0].statistic is None
    assert "CNN: 1 model" in family[0].reason
    assert family[0].sentence.startswith("no family claim CNN vs transformer can be made from this run: ")


def test_two_families_of_two_models_each_make_family_claims():
    families = {"g1": "CNN", "g2": "CNN", "b1": "transformer", "b2": "transformer"}
    claims = run_claims(_predictions({"g1": 0.95, "g2": 0.93, "b1": 0.4, "b2": 0.45}, n=200, families=families),
                        options=OPTIONS, statistics=("accuracy",))
    family = [c for c in claims if c.kind == FAMILIES]
    assert [c.statistic for c in family] == ["accuracy", "sibling_rate", "wup_mistakes", "severity"]
    accuracy = family[0]
    assert accuracy.possible and accuracy.n_models_a == 2 and accuracy.n_models_b == 2
    # Welch's t over 2 + 2 models has about one degree of freedom: a 50-point gap is not yet evidence
    assert accuracy.ci_low < 0 < accuracy.ci_high and not accuracy.supported
    five = {f"g{i}": "CNN" for i in range(5)} | {f"b{i}": "transformer" for i in range(5)}
    accuracies = {f"g{i}": 0.9 + 0.01 * i for i in range(5)} | {f"b{i}": 0.4 + 0.01 * i for i in range(5)}
    claims = run_claims(_predictions(accuracies, n=100, families=five), options=OPTIONS, statistics=("accuracy",),
                        models=list(accuracies))
    accuracy = [c for c in claims if c.kind == FAMILIES][0]
    assert accuracy.supported
    assert accuracy.sentence.startswith("CNN (5 models) more accurate than transformer (5 models): +")


def test_families_given_override_the_predictions_column():
    df = _predictions({"a": 0.9, "b": 0.6})  # both CNN in the file: no pair of families, and that is said
    one = [c for c in run_claims(df, options=OPTIONS, statistics=("accuracy",)) if c.kind == FAMILIES]
    assert len(one) == 1 and not one[0].possible and "every model here is CNN (2 models)" in one[0].sentence
    claims = run_claims(df, options=OPTIONS, statistics=("accuracy",), families={"b": "transformer"})
    assert [c.kind for c in claims].count(FAMILIES) == 1


def test_same_seed_same_claims():
    df = _predictions({"a": 0.8, "b": 0.7})
    assert claims_table(run_claims(df, options=OPTIONS)).equals(claims_table(run_claims(df, options=OPTIONS)))


def test_sentence_wording():
    assert sentence("accuracy", "lite2", "lite0", 0.067, 0.012, 0.12, 0.03, A_BETTER) == \
        "lite2 more accurate than lite0 overall: +6.7 points [1.2, 12.0], q = 0.03"
    assert sentence("sibling_rate", "X", "Y", 0.017, -0.046, 0.079, 0.63, NO_EVIDENCE) == \
        "no evidence that X and Y differ in sibling %: +1.7 points [-4.6, 7.9], q = 0.63"
    # B better: the better one first, the difference and its interval turned round
    assert sentence("severity", "X", "Y", 0.31, 0.10, 0.52, 0.01, B_BETTER) == \
        "Y makes less severe mistakes than X overall: -0.31 steps [-0.52, -0.10], q = 0.01"
    assert sentence("accuracy", "X", "Y", 0.5, 0.1, 0.9, 0.2, TOO_FEW, n=4).startswith("too few images")
    assert "cannot be compared" in sentence("wup_mistakes", "X", "Y", None, None, None, None, NO_EVIDENCE)
    # Two models alike on every paired image: said as such, not "+0.0 points [0.0, 0.0]" (a UI review).
    assert sentence("accuracy", "X", "Y", 0.0, 0.0, -0.0, 1.0, NO_EVIDENCE, n=30) == \
        "X and Y do not differ in accuracy on any of their 30 paired images"
    assert sentence("accuracy", "X", "Y", 0.0, -0.01, 0.01, 1.0, NO_EVIDENCE, n=30).startswith("no evidence that")
    assert sentence("accuracy", "X", "Y", 0.0, 0.0, 0.0, 1.0, NO_EVIDENCE, scope="").startswith("no evidence that"), \
        "families: their models' values, not paired images"
    assert format_difference("wup_all", 0.0123, -0.004, 0.03) == "+0.012 [-0.004, 0.030]"
    assert format_difference("accuracy", -0.00001, -0.00002, 0.1) == "+0.0 points [0.0, 10.0]"


def test_a_pairs_claims_are_those_of_its_own_comparison_on_the_whole_table():
    """run_claims compares each pair on the pair's rows only (one read of the table per pair was 45
    reads for 10 models); the numbers equal compare_models on the whole table, bit for bit."""
    from explain.compare import compare_models

    df = _predictions({"a": 0.9, "b": 0.6, "c": 0.75})
    claims = [c for c in run_claims(df, options=OPTIONS) if c.kind == "models" and (c.a, c.b) == ("a", "c")]
    overall = compare_models(df, "a", "c", options=OPTIONS).overall
    for claim in claims:
        for field, column in (("diff", "diff"), ("ci_low", "diff_ci_low"), ("ci_high", "diff_ci_high"), ("p", "p")):
            want = overall[f"{claim.statistic}_{column}"]
            got = getattr(claim, field)
            assert (got is None and pd.isna(want)) or got == float(want), (claim.statistic, field)
