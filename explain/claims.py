"""What a run lets an analyst claim: every pair of models and every pair of families, one sentence
each, supported or not (issue 23 item 5: the Results page's "Claims" section; SPEC "Uncertainty").

:func:`run_claims` compares every pair of models by :func:`explain.compare.compare_models` (the
overall row: McNemar for accuracy, a paired bootstrap of the difference for the means, q over the
overall tests of one comparison) and every pair of families by :func:`explain.compare.family_claims`
(two-level bootstrap; a family with fewer than two models makes no claim, and the claim says why).
A claim is *supported* when its q is below :data:`explain.uncertainty.SIGNIFICANCE` and enough
images were paired (the verdict is 'A better' or 'B better'). q is Benjamini-Hochberg over every
model claim of the run (and, apart, over every family claim), not within one pair.

Every sentence is written here, by :func:`sentence` from the phrases in :data:`PHRASES`:

    efficientnet_lite2 more accurate than efficientnet_lite0 overall: +6.7 points [1.2, 12.0], q = 0.03
    no evidence that efficientnet_lite2 and efficientnet_lite0 differ in sibling %: +1.7 points [-4.6, 7.9], q = 0.63

A supported claim names the better one first and gives the difference better - worse (its interval
turned round with it); an unsupported one keeps the order asked (A - B).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from core.intervals import finite_or_none

from .compare import FAMILY_STATISTICS, STATISTICS, CompareError, compare_models, family_claims, model_families
from .uncertainty import A_BETTER, B_BETTER, TOO_FEW, IntervalOptions

MODELS, FAMILIES = "models", "families"  # Claim.kind


@dataclass(frozen=True)
class Phrase:
    """How a statistic reads in a sentence: its name, the verb of a supported claim (better first),
    and how its difference is written (``scale`` x the difference, ``digits`` decimals, ``unit``)."""

    label: str
    better: str  # '{better} <better> {worse}'
    scale: float = 1.0
    digits: int = 3
    unit: str = ""


_POINTS = dict(scale=100.0, digits=1, unit=" points")
_STEPS = dict(digits=2, unit=" steps")
PHRASES: dict[str, Phrase] = {
    "accuracy": Phrase("accuracy", "more accurate than", **_POINTS),
    "accuracy_hier": Phrase("hierarchical accuracy", "more accurate hierarchically than", **_POINTS),
    "sibling_rate": Phrase("sibling %", "has a higher sibling % than", **_POINTS),
    "wup_mistakes": Phrase("WUP of the mistakes", "makes mistakes closer in WordNet (WUP) than"),  # "differ in ..."
    "severity": Phrase("mistake severity", "makes less severe mistakes than", **_STEPS),
    "path_all": Phrase("path similarity (all images)", "has a higher path similarity (all images) than"),
    "wup_all": Phrase("WUP (all images)", "has a higher WUP (all images) than"),
    "lin_all": Phrase("Lin similarity (all images)", "has a higher Lin similarity (all images) than"),
    "hdist_at_1": Phrase("hDist@1", "has a lower hDist@1 than", **_STEPS),
}
assert set(PHRASES) >= {s.name for s in STATISTICS} | set(FAMILY_STATISTICS)


@dataclass(frozen=True)
class Claim:
    """One statement about two models (``kind`` 'models') or two families ('families').

    ``a``/``b`` are the two as asked; ``diff`` = value of a - value of b with its interval
    (``ci_low``, ``ci_high``), ``p`` and ``q``; ``verdict`` one of explain.uncertainty's words;
    ``supported``: q < 0.05 with enough images. A family claim that cannot be made from the run has
    ``statistic`` None, ``possible`` False and the ``reason``. ``n``: paired images (models) or
    None; ``n_models_a``/``n_models_b``: models per family (families)."""

    kind: str
    a: str
    b: str
    statistic: str | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None
    q: float | None
    verdict: str
    sentence: str
    n: int | None = None
    n_models_a: int | None = None
    n_models_b: int | None = None
    possible: bool = True
    reason: str = ""

    @property
    def supported(self) -> bool:
        return self.verdict in (A_BETTER, B_BETTER)

    @property
    def better(self) -> str | None:
        return self.a if self.verdict == A_BETTER else self.b if self.verdict == B_BETTER else None


# --------------------------------------------------------------------------- the sentences
_number = finite_or_none  # core.intervals: None, NA, NaN and non-numbers are 'not defined'


def format_difference(statistic: str, diff, low=None, high=None) -> str:
    """'+6.7 points [1.2, 12.0]' (rates in points), '+0.012 [-0.004, 0.030]' (similarities),
    '-0.31 steps [-0.52, -0.10]' (severity, hDist); the interval left out where it is undefined."""
    phrase = PHRASES[statistic]
    diff, low, high = _number(diff), _number(low), _number(high)
    if diff is None:
        return "not defined"
    d = phrase.digits

    def shown(value: float, sign: str = "") -> str:  # no '-0.0': a bound that rounds to zero reads 0.0
        value = round(value * phrase.scale, d)
        return f"{value + 0.0:{sign}.{d}f}"

    text = f"{shown(diff, '+')}{phrase.unit}"
    if low is not None and high is not None:
        text += f" [{shown(low)}, {shown(high)}]"
    return text


def format_q(q) -> str:
    q = _number(q)
    if q is None:
        return "q undefined"
    return f"q = {q:.3g}" if q >= 0.001 else "q < 0.001"  # .3g: .2g printed a supported 0.0496 as 0.05


def _who(name: str, n_models: int | None) -> str:
    return name if n_models is None else f"{name} ({n_models} model{'s' * (n_models != 1)})"


def sentence(statistic: str, a: str, b: str, diff, low, high, q, verdict: str, *, scope: str = "overall",
             n: int | None = None, n_models_a: int | None = None, n_models_b: int | None = None) -> str:
    """The one wording of a claim (module docstring). ``scope``: 'overall' for two models, '' for
    two families; ``n_models_*``: the family sizes, written beside the family names."""
    phrase = PHRASES[statistic]
    who_a, who_b = _who(a, n_models_a), _who(b, n_models_b)
    where = f" {scope}" if scope else ""
    if verdict in (A_BETTER, B_BETTER):
        flip = verdict == B_BETTER
        better, worse = (who_b, who_a) if flip else (who_a, who_b)
        d, lo, hi = _number(diff), _number(low), _number(high)
        if flip:
            d, lo, hi = (None if d is None else -d), (None if hi is None else -hi), (None if lo is None else -lo)
        return f"{better} {phrase.better} {worse}{where}: {format_difference(statistic, d, lo, hi)}, {format_q(q)}"
    if verdict == TOO_FEW:
        count = f" ({n} paired images)" if n is not None else ""
        return f"too few images to tell whether {who_a} and {who_b} differ in {phrase.label}{count}"
    if _number(diff) is None:
        return (f"{phrase.label} of {who_a} and {who_b} cannot be compared: not defined for one of them "
                "(e.g. no mistakes)")
    if scope and _number(diff) == 0 and _number(low) == 0 and _number(high) == 0:
        # Every resample's difference is 0: the two are alike on every paired image (two models that
        # agree everywhere); "+0.0 points [0.0, 0.0]" read as a broken interval (a UI review).
        count = f" {n}" if n is not None else ""
        return f"{who_a} and {who_b} do not differ in {phrase.label} on any of their{count} paired images"
    return (f"no evidence that {who_a} and {who_b} differ in {phrase.label}: "
            f"{format_difference(statistic, diff, low, high)}, {format_q(q)}")


def impossible_sentence(family_a: str, family_b: str, reason: str) -> str:
    return f"no family claim {family_a} vs {family_b} can be made from this run: {reason}"


# --------------------------------------------------------------------------- the claims
def model_claims(predictions: pd.DataFrame, model_a: str, model_b: str, *, options: IntervalOptions | None = None,
                 statistics=None, cache_dir=None) -> list[Claim]:
    """One claim per statistic of the overall row of ``compare_models(model_a, model_b)``."""
    overall = compare_models(predictions, model_a, model_b, options=options, cache_dir=cache_dir).overall
    n = int(overall["n"])
    out = []
    for s in STATISTICS:
        if statistics is not None and s.name not in statistics:
            continue
        values = {k: _number(overall[f"{s.name}_{k}"]) for k in ("diff", "diff_ci_low", "diff_ci_high", "p", "q")}
        verdict = str(overall[f"{s.name}_verdict"])
        out.append(Claim(MODELS, model_a, model_b, s.name, values["diff"], values["diff_ci_low"],
                         values["diff_ci_high"], values["p"], values["q"], verdict,
                         sentence(s.name, model_a, model_b, values["diff"], values["diff_ci_low"],
                                  values["diff_ci_high"], values["q"], verdict, n=n), n=n))
    return out


def family_pair_claims(predictions: pd.DataFrame, family_a: str, family_b: str, *,
                       families: dict[str, str] | None = None, options: IntervalOptions | None = None,
                       cache_dir=None) -> list[Claim]:
    """One claim per statistic of ``family_claims`` (explain.compare.FAMILY_STATISTICS), or one
    claim saying why none can be made."""
    result = family_claims(predictions, family_a, family_b, families=families, options=options, cache_dir=cache_dir)
    na, nb = len(result.models_a), len(result.models_b)
    if not result.possible:
        return [Claim(FAMILIES, family_a, family_b, None, None, None, None, None, None, TOO_FEW,
                      impossible_sentence(family_a, family_b, result.reason), n_models_a=na, n_models_b=nb,
                      possible=False, reason=result.reason)]
    out = []
    for row in result.table.to_dict("records"):
        values = {k: _number(row[k]) for k in ("diff", "diff_ci_low", "diff_ci_high", "p", "q")}
        verdict = str(row["verdict"])
        out.append(Claim(FAMILIES, family_a, family_b, str(row["statistic"]), values["diff"], values["diff_ci_low"],
                         values["diff_ci_high"], values["p"], values["q"], verdict,
                         sentence(str(row["statistic"]), family_a, family_b, values["diff"], values["diff_ci_low"],
                                  values["diff_ci_high"], values["q"], verdict, scope="", n_models_a=na,
                                  n_models_b=nb), n_models_a=na, n_models_b=nb))
    return out


def run_claims(predictions: pd.DataFrame, *, families: dict[str, str] | None = None,
               options: IntervalOptions | None = None, models: list[str] | None = None, statistics=None,
               cache_dir=None) -> list[Claim]:
    """Every claim the predictions allow: each pair of models (in first-appearance order, or the
    order of ``models``) on each statistic of explain.compare.STATISTICS (``statistics``: a subset),
    then each pair of families (``families``: model -> family, else the predictions' ``family``
    column; explain.compare.model_families). Deterministic for the same predictions and options.
    Two models that share no image make no model claim (they cannot be paired)."""
    from .metrics import _read_rows

    options = options or IntervalOptions()
    _read_rows(predictions)  # validated once, rows named as in the whole table; each pair reads its own rows
    present = list(dict.fromkeys(predictions["model"].dropna().astype(str)))
    chosen = [m for m in (models if models is not None else present) if m in present]
    model_of_row = predictions["model"].astype("string")
    out: list[Claim] = []
    for model_a, model_b in combinations(chosen, 2):
        # Why the pair's rows only: compare_models validates and encodes what it is given, and 45 pairs of
        # 10 models read the whole table 45 times. The pair's cells, blocks and so its bounds are the same
        # (wnid codes keep their order in a subset), tested in tests/explain/test_claims.py.
        pair = predictions[model_of_row.isin([model_a, model_b]).fillna(False).to_numpy()]
        try:
            out += model_claims(pair, model_a, model_b, options=options, statistics=statistics,
                                cache_dir=cache_dir)
        except CompareError:  # no shared image: nothing to pair
            continue
    family_of = model_families(predictions, families)
    names = list(dict.fromkeys(family_of[m] for m in chosen))
    subset = predictions[predictions["model"].astype(str).isin(chosen)] if models is not None else predictions
    for family_a, family_b in combinations(names, 2):
        out += family_pair_claims(subset, family_a, family_b, families=family_of, options=options,
                                  cache_dir=cache_dir)
    out = _one_family_of_tests(out)
    if len(names) == 1:  # nothing to pair: said, not left out
        members = sum(family_of[m] == names[0] for m in chosen)
        reason = (f"every model here is {names[0]} ({members} model{'s' * (members != 1)}); a family claim compares "
                  "two families of at least 2 models each: compare the models one by one instead.")
        out.append(Claim(FAMILIES, names[0], "", None, None, None, None, None, None, TOO_FEW,
                         f"no family claim can be made from this run: {reason}", n_models_a=members,
                         possible=False, reason=reason))
    return out


def _one_family_of_tests(claims: list[Claim]) -> list[Claim]:
    """q over every claim shown, not within one pair: the model claims form one Benjamini-Hochberg
    family, the family claims another, and each verdict and sentence follows its new q. Why: with 10
    models the Claims section lists 45 pairs x 9 statistics; BH within each pair expected about two
    false "supported" lines among equally good models (code review)."""
    from dataclasses import replace

    from .compare import _BY_NAME
    from .uncertainty import MIN_PAIRED_IMAGES, bh_q_values, verdict

    out = list(claims)
    for kind in (MODELS, FAMILIES):
        index = [i for i, c in enumerate(out) if c.kind == kind and c.possible and c.p is not None]
        q = bh_q_values(np.array([out[i].p for i in index], dtype=np.float64))
        for i, qq in zip(index, q.tolist()):
            c = out[i]
            v = verdict(np.nan if c.diff is None else c.diff, qq, c.n if c.n is not None else MIN_PAIRED_IMAGES,
                        higher_is_better=_BY_NAME[c.statistic].higher_is_better)
            text = sentence(c.statistic, c.a, c.b, c.diff, c.ci_low, c.ci_high, qq, v,
                            scope="overall" if kind == MODELS else "", n=c.n, n_models_a=c.n_models_a,
                            n_models_b=c.n_models_b)
            out[i] = replace(c, q=qq, verdict=v, sentence=text)
    return out


def claims_table(claims: list[Claim]) -> pd.DataFrame:
    """The claims as a table (one row each): what a CSV download holds."""
    rows = [{"kind": c.kind, "a": c.a, "b": c.b, "statistic": c.statistic, "diff": c.diff, "diff_ci_low": c.ci_low,
             "diff_ci_high": c.ci_high, "p": c.p, "q": c.q, "verdict": c.verdict, "supported": c.supported,
             "n": c.n, "n_models_a": c.n_models_a, "n_models_b": c.n_models_b, "sentence": c.sentence}
            for c in claims]
    return pd.DataFrame(rows, columns=["kind", "a", "b", "statistic", "diff", "diff_ci_low", "diff_ci_high", "p", "q",
                                       "verdict", "supported", "n", "n_models_a", "n_models_b", "sentence"])
