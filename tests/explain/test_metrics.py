"""Metric tables on small hand-made prediction tables, against a per-row NLTK reference."""
import functools
import math
import threading
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explain.metrics import (CONFUSION_COLUMNS, PER_CLASS_COLUMNS, PER_MODEL_COLUMNS, PredictionsError,
                             compute_metric_tables, column_docs)
from core.labels import get_label_space
from core.runstore import RunStore
from explain.artefact import current_fingerprint, read_stored_metrics, write_metrics
from explain.schema import CONFUSION_SCHEMA, PER_CLASS_SCHEMA, PER_MODEL_SCHEMA
from core.wordnet import get_wordnet, synset_of, wnid_of
from tests.explain import nltk_reference as ref
from tests.explain.nltk_reference import nltk_noun_depth  # noqa: F401  (fixture)


def W(name: str) -> str:
    return wnid_of(get_wordnet().synset(name))


# The cat query's ImageNet-1k classes, and what models confuse them with: siblings, a hypernym
# (domestic_cat, an IN-21k class), a hyponym of the truth, a distant class, teddy bear (no Lin).
TABBY, TIGER_CAT, PERSIAN, SIAMESE, EGYPTIAN = "n02123045", "n02123159", "n02123394", "n02123597", "n02124075"
COUGAR, LYNX = "n02125311", "n02127052"


def _table() -> pd.DataFrame:
    dom, cat, teddy, lamp, mex = W("domestic_cat.n.01"), W("cat.n.01"), "n04399382", "n04380533", "n02113978"
    rows = []

    def add(model, true, preds, status="ok", count=1):
        for _ in range(count):
            top = list(preds) + [None] * (5 - len(preds))
            rows.append({"model": model, "image": f"img{len(rows)}.jpg", "true_wnid": true, "pred_wnid": top[0],
                         **{f"pred_wnid_{k}": top[k - 1] for k in range(2, 6)},
                         **{f"prob_{k}": 0.5 / k for k in range(1, 6)},
                         # vit: ImageNet-22k (Microsoft's list), the one large space that holds teddy bear
                         # too (every prediction is a class of its row's label space; Google's 21k lacks it)
                         "label_space": "imagenet-22k-ms" if model == "vit" else "imagenet-1k", "status": status})

    # resnet: mixed mistakes
    add("resnet", TABBY, [TABBY, TIGER_CAT, EGYPTIAN, PERSIAN, SIAMESE], count=3)
    add("resnet", TABBY, [TIGER_CAT, TABBY, EGYPTIAN, PERSIAN, SIAMESE], count=2)
    add("resnet", TABBY, [EGYPTIAN, TIGER_CAT, PERSIAN, SIAMESE, LYNX], count=2)
    add("resnet", TABBY, [lamp, mex, TIGER_CAT, EGYPTIAN, TABBY])
    add("resnet", TABBY, [None], status="failed")
    add("resnet", COUGAR, [LYNX, COUGAR, TABBY, PERSIAN, SIAMESE], count=2)
    add("resnet", COUGAR, [COUGAR, LYNX, TABBY, PERSIAN, SIAMESE])
    add("resnet", COUGAR, [teddy, lamp, mex, TABBY, PERSIAN])
    add("resnet", SIAMESE, [SIAMESE, PERSIAN, TABBY, EGYPTIAN, LYNX], count=4)  # no mistakes: NA means
    # vit (22k label space): predicts parents and the genus
    add("vit", TABBY, [dom, TABBY, TIGER_CAT, EGYPTIAN, PERSIAN], count=3)
    add("vit", TABBY, [cat, dom, TABBY, TIGER_CAT, EGYPTIAN])
    add("vit", TABBY, [TABBY, dom, TIGER_CAT, EGYPTIAN, PERSIAN], count=2)
    add("vit", dom, [TABBY, dom, cat, TIGER_CAT, EGYPTIAN], count=2)  # a hyponym: hierarchically correct
    add("vit", dom, [PERSIAN, dom, cat, TIGER_CAT, EGYPTIAN])
    add("vit", dom, [mex, lamp, teddy, cat, TABBY])
    add("vit", PERSIAN, [teddy, lamp, mex, cat, TABBY])  # the only mistake has no Lin
    add("vit", PERSIAN, [PERSIAN, lamp, mex, cat, TABBY])
    add("only_failed", TABBY, [None], status="failed", count=2)
    return pd.DataFrame(rows)


def _expected(df: pd.DataFrame, top_k=3):
    """Per-row reference: NLTK's own similarity calls, plain Python sums, Counters."""
    counted = df[df["status"] == "ok"]
    groups = defaultdict(list)
    for row in counted.itertuples(index=False):
        groups[(row.model, row.true_wnid)].append(row)
    failed = Counter((r.model, r.true_wnid) for r in df[df["status"] != "ok"].itertuples(index=False))

    def stats(rows, n_failed):
        n = len(rows)
        mistakes = [r for r in rows if r.pred_wnid != r.true_wnid]

        def mean(values):
            values = [v for v in values if not math.isnan(v)]
            return sum(values) / len(values) if values else np.nan

        def sim(r, name):
            g, p = synset_of(r.true_wnid), synset_of(r.pred_wnid)
            return {"path": g.path_similarity, "lch": g.lch_similarity, "wup": g.wup_similarity,
                    "lin": lambda other: ref.lin(g, other)}[name](p)

        def relation(r):
            return ref.relation(synset_of(r.true_wnid), synset_of(r.pred_wnid))

        out = {"n": n, "n_mistakes": len(mistakes),
               "accuracy": (n - len(mistakes)) / n if n else np.nan,
               "accuracy_hier": sum(r.pred_wnid == r.true_wnid or synset_of(r.true_wnid) in ref.ancestors(synset_of(r.pred_wnid))
                                    for r in rows) / n if n else np.nan,
               "accuracy_top5": sum(r.true_wnid in (r.pred_wnid, r.pred_wnid_2, r.pred_wnid_3, r.pred_wnid_4, r.pred_wnid_5)
                                    for r in rows) / n if n else np.nan,
               "sibling_count": sum(ref.is_sibling(synset_of(r.true_wnid), synset_of(r.pred_wnid)) for r in mistakes)}
        out["sibling_rate"] = out["sibling_count"] / len(mistakes) if mistakes else np.nan
        for name in ("path", "lch", "wup", "lin"):
            out[f"{name}_mistakes"] = mean([sim(r, name) for r in mistakes])
        for name in ("path", "lch", "wup", "lin"):
            out[f"{name}_all"] = mean([sim(r, name) for r in rows])
        out["severity"] = mean([ref.severity(synset_of(r.true_wnid), synset_of(r.pred_wnid)) for r in mistakes])
        for kind in ("hypernym", "hyponym", "cousin", "distant"):
            out[f"{kind}_count"] = sum(relation(r) == kind for r in mistakes)
        out["n_failed"] = n_failed
        # Making Better Mistakes over the top-k, one sample at a time with NLTK (every fixture row of a
        # model has one label space; the unseen-class tests are in test_unseen_classes).
        top5 = [[r.pred_wnid, r.pred_wnid_2, r.pred_wnid_3, r.pred_wnid_4, r.pred_wnid_5] for r in rows]
        sev = [[ref.severity(synset_of(r.true_wnid), synset_of(p)) for p in top] for r, top in zip(rows, top5)]
        out["hdist_at_1"] = sum(s[0] for s in sev) / n if n else np.nan
        out["hdist_at_5"] = sum(sum(s) / 5 for s in sev) / n if n else np.nan
        if n and all(r.label_space == "imagenet-1k" for r in rows):
            big = _in1k_severity_profile()[1]
            num = sum(1 - d / big for s in sev for d in s)
            out["hprec_at_5"] = num / sum(_in1k_severity_profile()[0][r.true_wnid] for r in rows)
        else:
            out["hprec_at_5"] = np.nan
        return out

    per_class = {key: stats(groups.get(key, []), failed.get(key, 0)) for key in set(groups) | set(failed)}
    for out in per_class.values():
        out["accuracy_balanced"] = out["accuracy"]
    per_model = {}
    for model in df["model"].unique():
        rows = [r for (m, _), rs in groups.items() if m == model for r in rs]
        per_model[model] = stats(rows, sum(c for (m, _), c in failed.items() if m == model))
        recalls = [per_class[k]["accuracy"] for k in per_class if k[0] == model and per_class[k]["n"]]
        per_model[model]["accuracy_balanced"] = sum(recalls) / len(recalls) if recalls else np.nan
    confusions = []
    for (model, true), rows in groups.items():
        mistakes = Counter(r.pred_wnid for r in rows if r.pred_wnid != true)
        ranked = sorted(mistakes.items(), key=lambda item: (-item[1], item[0]))
        for rank, (pred, count) in enumerate(ranked[:top_k] if top_k else ranked, start=1):
            g, p = synset_of(true), synset_of(pred)
            confusions.append({"model": model, "true_wnid": true, "pred_wnid": pred, "count": count,
                               "mf": count / sum(mistakes.values()), "rank": rank, "relation": ref.relation(g, p),
                               "share_of_samples": count / len(rows), "is_sibling": ref.is_sibling(g, p),
                               "path_distance": g.shortest_path_distance(p), "path": g.path_similarity(p),
                               "lch": g.lch_similarity(p), "wup": g.wup_similarity(p), "lin": ref.lin(g, p),
                               "severity": ref.severity(g, p)})
    return per_model, per_class, confusions


@functools.lru_cache(maxsize=1)
def _in1k_severity_profile():
    """For hprec@5, from NLTK's hypernym_distances only: per ImageNet-1k class g, the sum over its 5
    nearest classes (by d = severity, g first) of 1 - d/D, and D = max d over ordered pairs.
    d(g, p) = the distance of g's nearest ancestor (itself included) that p lies under, so walking
    g's ancestors by distance and collecting the classes under each gives g's sorted distances."""
    wnids = get_label_space("imagenet-1k").wnids
    ups = {w: ref.upward_distances(synset_of(w)) for w in wnids}
    under = defaultdict(set)
    for w, up in ups.items():
        for node in up:
            under[node].add(w)
    rows = {}
    for w, up in ups.items():
        covered, distances = set(), []
        for node, d in sorted(up.items(), key=lambda item: item[1]):
            new = under[node] - covered
            distances += [d] * len(new)
            covered |= new
        rows[w] = distances  # ascending; len 1000
    big = max(max(d) for d in rows.values())
    return {w: sum(1 - d / big for d in ds[:5]) for w, ds in rows.items()}, big


def _assert_close(got, want, where):
    if isinstance(want, float) and math.isnan(want) or want is None:
        assert got is None or pd.isna(got), f"{where}: {got!r}, expected NA"
    elif isinstance(want, float):
        assert got is not None and not pd.isna(got) and abs(got - want) <= 1e-12 * max(1.0, abs(want)), \
            f"{where}: {got!r} != {want!r}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.fixture(scope="module")
def table():
    return _table()


@pytest.fixture(scope="module")
def tables(table):
    return compute_metric_tables(table, cache_dir=False)


@pytest.fixture(scope="module")
def expected(table, nltk_noun_depth):
    return _expected(table)


def test_per_model_equals_reference(tables, expected):
    per_model, _, _ = expected
    assert list(tables.per_model["model"]) == ["resnet", "vit", "only_failed"]  # input order
    for row in tables.per_model.to_dict("records"):
        for column, want in per_model[row["model"]].items():
            _assert_close(row[column], want, f"{row['model']}.{column}")


def test_per_class_equals_reference(tables, expected):
    _, per_class, _ = expected
    got = {(r["model"], r["true_wnid"]): r for r in tables.per_class.to_dict("records")}
    assert set(got) == set(per_class)
    for key, want_row in per_class.items():
        for column, want in want_row.items():
            _assert_close(got[key][column], want, f"{key}.{column}")


def test_confusions_equal_reference(tables, expected):
    _, _, confusions = expected
    got = tables.confusions.to_dict("records")
    assert [(r["model"], r["true_wnid"], r["rank"]) for r in got] == sorted(
        [(c["model"], c["true_wnid"], c["rank"]) for c in confusions],
        key=lambda k: (["resnet", "vit"].index(k[0]), k[1], k[2]))
    want = {(c["model"], c["true_wnid"], c["rank"]): c for c in confusions}
    for row in got:
        for column, value in want[(row["model"], row["true_wnid"], row["rank"])].items():
            _assert_close(row[column], value, f"{row['model']}/{row['true_wnid']}#{row['rank']}.{column}")


def test_the_fixture_exercises_what_it_claims(tables):
    pc = tables.per_class.set_index(["model", "true_wnid"])
    assert pc.loc[("vit", W("domestic_cat.n.01")), "accuracy_hier"] > pc.loc[("vit", W("domestic_cat.n.01")), "accuracy"]
    assert pc.loc[("vit", TABBY), "hypernym_count"] == 4
    assert set(tables.confusions["relation"]) >= {"sibling", "hypernym", "hyponym", "distant"}
    assert pd.isna(pc.loc[("vit", PERSIAN), "lin_mistakes"])  # teddy bear: Lin undefined
    assert not pd.isna(pc.loc[("vit", PERSIAN), "lin_all"])  # the correct row still counts


def test_means_over_no_mistakes_are_na_not_zero(tables):
    row = tables.per_class.set_index(["model", "true_wnid"]).loc[("resnet", SIAMESE)]
    assert row["n_mistakes"] == 0 and row["accuracy"] == 1.0
    for column in ("sibling_rate", "path_mistakes", "lch_mistakes", "wup_mistakes", "lin_mistakes", "severity"):
        assert pd.isna(row[column]), column
    only_failed = tables.per_model.set_index("model").loc["only_failed"]
    assert only_failed["n"] == 0 and only_failed["n_failed"] == 2 and pd.isna(only_failed["accuracy"])


def test_schemas_rates_and_docs(tables):
    assert list(tables.per_model.columns) == list(PER_MODEL_SCHEMA)
    assert list(tables.per_class.columns) == list(PER_CLASS_SCHEMA)
    assert list(tables.confusions.columns) == list(CONFUSION_SCHEMA)
    for df, schema in ((tables.per_model, PER_MODEL_SCHEMA), (tables.per_class, PER_CLASS_SCHEMA),
                       (tables.confusions, CONFUSION_SCHEMA)):
        assert {c: str(t) for c, t in df.dtypes.items()} == schema
    for df in (tables.per_model, tables.per_class):
        for column in ("accuracy", "accuracy_hier", "accuracy_top5", "sibling_rate"):
            values = df[column].dropna()
            assert ((values >= 0) & (values <= 1)).all(), column
        assert (df["accuracy_hier"].dropna() >= df["accuracy"].dropna()).all()
    assert ((tables.confusions["mf"] > 0) & (tables.confusions["mf"] <= 1)).all()
    assert column_docs("per_class") == PER_CLASS_COLUMNS and all(PER_MODEL_COLUMNS.values())
    assert "sibling_rate" in compute_metric_tables.__doc__ and all(CONFUSION_COLUMNS.values())


def test_all_confusions_share_sums_to_one(table):
    confusions = compute_metric_tables(table, confusion_top_k=None, cache_dir=False).confusions
    sums = confusions.groupby(["model", "true_wnid"])["mf"].sum()
    assert np.allclose(sums.to_numpy(dtype=float), 1.0)
    assert len(confusions) > len(compute_metric_tables(table, confusion_top_k=1, cache_dir=False).confusions)


def test_without_status_or_top5_columns(table):
    ok = table[table["status"] == "ok"]
    bare = ok[["model", "true_wnid", "pred_wnid"]]
    result = compute_metric_tables(bare, cache_dir=False)
    full = compute_metric_tables(ok, cache_dir=False)
    assert result.per_model["accuracy_top5"].isna().all()  # unknown, not 0
    pd.testing.assert_series_equal(result.per_model["accuracy"], full.per_model["accuracy"])
    assert (result.per_model["n_failed"] == 0).all()


def test_empty_table_gives_empty_tables():
    empty = pd.DataFrame({"model": pd.Series(dtype="string"), "true_wnid": pd.Series(dtype="string"),
                          "pred_wnid": pd.Series(dtype="string")})
    result = compute_metric_tables(empty, cache_dir=False)
    assert all(len(df) == 0 for df in result.as_dict().values())
    assert list(result.per_class.columns) == list(PER_CLASS_SCHEMA)


def test_tables_round_trip_through_the_run_store(tables):
    run = RunStore().create_run(run_id="metrics-test")
    write_metrics(run, tables, current_fingerprint(run))
    stored = read_stored_metrics(run).as_dict()
    for name, df in tables.as_dict().items():
        pd.testing.assert_frame_equal(stored[name], df)


@pytest.mark.parametrize("mutate,column,row,needle", [
    (lambda df: df.drop(columns="true_wnid"), "true_wnid", None, "missing"),
    (lambda df: df.assign(pred_wnid=df["pred_wnid"].where(df.index != 4, "tabby cat")), "pred_wnid", 4, "not a wnid"),
    (lambda df: df.assign(true_wnid=df["true_wnid"].where(df.index != 6, "n99999999")), "true_wnid", 6, "not a noun synset"),
    (lambda df: df.assign(model=df["model"].where(df.index != 2, None)), "model", 2, "empty"),
    (lambda df: df.assign(status=df["status"].where(df.index != 3, "done")), "status", 3, "unknown status"),
    (lambda df: df.assign(pred_wnid_3=df["pred_wnid_3"].where(df.index != 5, "n0212")), "pred_wnid_3", 5, "not a wnid"),
])
def test_malformed_input_names_row_and_column(table, mutate, column, row, needle):
    with pytest.raises(PredictionsError) as info:
        compute_metric_tables(mutate(table.copy()), cache_dir=False)
    error = info.value
    assert error.column == column and error.row == row and needle in str(error)
    assert f"column {column!r}" in str(error) and (row is None or f"row {row + 1}" in str(error))


def test_failed_rows_are_not_validated_as_predictions(table):
    # a failed row has no prediction: NA pred_wnid there is fine (the fixture has some)
    assert table.loc[table["status"] == "failed", "pred_wnid"].isna().all()
    compute_metric_tables(table, cache_dir=False)


def test_categorical_and_object_columns_give_the_same_tables(table):
    ok = table[table["status"] == "ok"].drop(columns="status")
    wnid_columns = ["true_wnid", "pred_wnid", "pred_wnid_2", "pred_wnid_3", "pred_wnid_4", "pred_wnid_5"]
    as_category = ok.astype({c: "category" for c in wnid_columns})
    as_object = ok.astype({c: object for c in wnid_columns})
    base = compute_metric_tables(ok, cache_dir=False)
    for variant in (as_category, as_object):
        other = compute_metric_tables(variant, cache_dir=False)
        for name, df in base.as_dict().items():
            pd.testing.assert_frame_equal(other.as_dict()[name], df, obj=name)


@pytest.mark.parametrize("column", ["model", "true_wnid", "pred_wnid", "pred_wnid_4", "status"])
def test_a_column_of_lists_is_named_with_its_type(table, column):
    """Issue 11 item 7, for a DataFrame from anywhere (not only a file): a value that is a list
    (pandas cannot hash it) was a TypeError traceback."""
    df = table.copy()
    df[column] = df[column].astype(object)
    df.at[3, column] = ["n02123045"]
    with pytest.raises(PredictionsError) as info:
        compute_metric_tables(df, cache_dir=False)
    error = info.value
    assert error.column == column and error.row == 3 and "a list" in str(error), str(error)


# --------------------------------------------------------------------------- issue 16: unseen classes
LEOPARD_CAT, ANGORA = "n02126317", "n02123478"  # ImageNet-21k classes no ImageNet-1k model can name


def _unseen_table() -> pd.DataFrame:
    rows = []

    def add(true, preds, count=1):
        for _ in range(count):
            rows.append({"model": "resnet", "true_wnid": true, "pred_wnid": preds[0],
                         **{f"pred_wnid_{k}": preds[k - 1] for k in range(2, 6)}, "label_space": "imagenet-1k",
                         "status": "ok"})

    add(LEOPARD_CAT, [LYNX, TABBY, EGYPTIAN, COUGAR, PERSIAN], count=3)  # lynx: the nearest seen class
    add(LEOPARD_CAT, [EGYPTIAN, LYNX, TABBY, COUGAR, PERSIAN])
    add(LEOPARD_CAT, ["n04380533", LYNX, TABBY, COUGAR, PERSIAN])  # a table lamp
    add(TABBY, [TABBY, TIGER_CAT, EGYPTIAN, PERSIAN, SIAMESE], count=2)
    add(TABBY, [TIGER_CAT, TABBY, EGYPTIAN, PERSIAN, SIAMESE])
    add(SIAMESE, [SIAMESE, PERSIAN, TABBY, EGYPTIAN, LYNX])
    return pd.DataFrame(rows)


def test_unseen_class_has_na_accuracy_and_lin_vs_best(nltk_noun_depth):
    df = _unseen_table()
    tables = compute_metric_tables(df, cache_dir=False)
    pc = tables.per_class.set_index("true_wnid")
    leopard = pc.loc[LEOPARD_CAT]
    assert leopard["in_label_space"] is False or leopard["in_label_space"] == False  # noqa: E712
    assert bool(pc.loc[TABBY, "in_label_space"]) and leopard["n"] == 5 and leopard["n_mistakes"] == 5
    for column in ("accuracy", "accuracy_top5", "accuracy_balanced", "hprec_at_5"):
        assert pd.isna(leopard[column]), column  # the model cannot name it: unknown, never 0
    # Hierarchical accuracy is defined for any truth (issue 22 item 13; it was NA here): a hyponym is right.
    leopard_preds = [synset_of(p) for p in df.loc[df["true_wnid"] == LEOPARD_CAT, "pred_wnid"]]
    hier = sum(synset_of(LEOPARD_CAT) in ref.ancestors(p) for p in leopard_preds) / len(leopard_preds)
    _assert_close(leopard["accuracy_hier"], hier, "accuracy_hier")
    assert leopard["n_mistakes_hier"] == round(len(leopard_preds) * (1 - hier))
    # Direct: sim(S, truth) = max over the 1000 IN-1k classes of NLTK-reference Lin.
    truth = synset_of(LEOPARD_CAT)
    lins = {w: ref.lin(synset_of(w), truth) for w in get_label_space("imagenet-1k").wnids}
    best = max(v for v in lins.values() if not math.isnan(v))
    nearest = {w for w, v in lins.items() if v == best}
    preds = list(df.loc[df["true_wnid"] == LEOPARD_CAT, "pred_wnid"])
    want = sum(ref.lin(truth, synset_of(p)) / best for p in preds) / len(preds)
    _assert_close(leopard["lin_vs_best"], want, "lin_vs_best")
    _assert_close(leopard["sim_to_seen"], best, "sim_to_seen")
    assert pd.isna(pc.loc[TABBY, "sim_to_seen"])
    assert 0 < leopard["lin_vs_best"] <= 1
    share = sum(p in nearest or bool(nearest & {wnid_of(a) for a in ref.ancestors(synset_of(p))}) for p in preds)
    _assert_close(leopard["share_nearest"], share / len(preds), "share_nearest")
    assert LYNX in nearest and leopard["share_nearest"] >= 3 / 5
    _assert_close(leopard["hdist_at_5"], sum(ref.severity(truth, synset_of(p)) for p in
                                             df.loc[df["true_wnid"] == LEOPARD_CAT, ["pred_wnid", "pred_wnid_2",
                                                    "pred_wnid_3", "pred_wnid_4", "pred_wnid_5"]].to_numpy().ravel())
                  / 25, "hdist_at_5")
    assert pd.isna(pc.loc[TABBY, "lin_vs_best"]) and pd.isna(pc.loc[TABBY, "share_nearest"])
    # Per model: every column over the in-space classes only (issue 22 item 12: n was 9, the 5 unseen
    # predictions included, beside an accuracy over the 4 others); the unseen class reported apart.
    pm = tables.per_model.set_index("model").loc["resnet"]
    assert pm["n"] == 4 and pm["n_unseen"] == 5 and pm["n_mistakes"] == 1
    _assert_close(pm["accuracy"], 3 / 4, "accuracy")
    _assert_close(pm["accuracy_balanced"], (2 / 3 + 1) / 2, "accuracy_balanced")
    _assert_close(pm["lin_vs_best_unseen"], want, "lin_vs_best_unseen")
    _assert_close(pm["share_nearest_unseen"], share / len(preds), "share_nearest_unseen")
    assert not pd.isna(pm["hprec_at_5"]) and pm["hdist_at_1"] == pc.loc[[TABBY, SIAMESE], "hdist_at_1"].mul(
        pc.loc[[TABBY, SIAMESE], "n"]).sum() / 4
    # Without a label_space column nothing is unseen, and in_label_space is unknown.
    bare = compute_metric_tables(df.drop(columns="label_space"), cache_dir=False).per_class
    assert bare["in_label_space"].isna().all() and bare["accuracy"].notna().all()


def test_a_run_folder_of_an_unseen_class_reaches_the_tables(tmp_path):
    """classify --images accepts any WordNet noun wnid as a folder; its rows carry the model's
    label space, so the per-class table marks the class unseen."""
    import torch

    from classify.engine.types import InferenceOptions
    from classify.targets import predict_folder
    from tests.classify.doubles import make_test_double

    chelsea = Path(torch.__file__).resolve().parent.parent / "skimage/data/chelsea.png"
    for wnid in (LEOPARD_CAT, TABBY):
        (tmp_path / wnid).mkdir()
        (tmp_path / wnid / "chelsea.png").write_bytes(chelsea.read_bytes())
    model = make_test_double("test_efficientnet", "imagenet-1k")
    predictions, _ = predict_folder(tmp_path, [model], options=InferenceOptions(num_workers=0, backend="torch"))
    assert set(predictions["true_wnid"]) == {LEOPARD_CAT, TABBY} and (predictions["status"] == "ok").all()
    pc = compute_metric_tables(predictions, cache_dir=False).per_class.set_index("true_wnid")
    assert pc.loc[LEOPARD_CAT, "in_label_space"] == False and pd.isna(pc.loc[LEOPARD_CAT, "accuracy"])  # noqa: E712
    assert pc.loc[TABBY, "in_label_space"] == True and not pd.isna(pc.loc[TABBY, "accuracy"])  # noqa: E712
    assert 0 < pc.loc[LEOPARD_CAT, "lin_vs_best"] <= 1 and not pd.isna(pc.loc[LEOPARD_CAT, "share_nearest"])


# --------------------------------------------------------------------------- issue 26 item 3: fast paths
@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("keys", [np.zeros(0, np.int64), np.array([5, 3, 5, 9, 3, 3], np.int64),
                                  np.random.default_rng(1).integers(0, 1 << 40, 20_000),
                                  # hashed as uint32 (metrics._NARROW_FROM set to 0 below): up to 2^32 - 1,
                                  # and just over it, where narrowing would wrap around
                                  np.array([(1 << 32) - 1, 0, 70_000, (1 << 32) - 1, 65_536, 1], np.int64),
                                  np.array([1 << 32, 0, 1 << 32, 5], np.int64),
                                  np.array([-1, 3, -1, 3], np.int64),
                                  np.random.default_rng(2).integers(0, 1 << 32, 20_000, dtype=np.int64)])
def test_unique_equals_numpy(keys, sort, monkeypatch):
    from explain import metrics
    from explain.metrics import _unique

    monkeypatch.setattr(metrics, "_NARROW_FROM", 0)  # the narrow path for every size here

    uniques, inverse, counts = _unique(keys, inverse=True, counts=True, sort=sort)
    assert uniques.dtype == keys.dtype
    np.testing.assert_array_equal(uniques[inverse], keys)  # the inverse rebuilds the keys
    np.testing.assert_array_equal(counts, np.bincount(inverse, minlength=len(uniques)))
    if sort:
        want, want_inverse, want_counts = np.unique(keys, return_inverse=True, return_counts=True)
        for got, ref_ in ((uniques, want), (inverse, want_inverse), (counts, want_counts)):
            np.testing.assert_array_equal(got, ref_)
    else:
        np.testing.assert_array_equal(np.sort(uniques), np.unique(keys))


def test_the_threaded_path_gives_the_same_tables_bit_for_bit(table, monkeypatch):
    """The wnid columns are factorised on two threads, and the top-5 severities and the confusions table
    run beside the other sums from 200,000 rows on a machine with a second core; force that path on the fixture (and on
    its 22k rows, whose pairs are computed on demand) and compare with the serial one."""
    from explain import metrics

    big = pd.concat([table] * 3, ignore_index=True).assign(image=lambda d: [f"i{k}" for k in range(len(d))])
    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 10**12)
    serial = compute_metric_tables(big, cache_dir=False)
    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(metrics, "_cores", lambda: 2)
    import core.machine

    monkeypatch.setattr(core.machine, "available_cores", lambda: 2)  # the wnid columns' pool too, on one core
    factorised_on, factorize = [], metrics._factorize
    monkeypatch.setattr(metrics, "_factorize", lambda *a: factorised_on.append(threading.current_thread().name)
                        or factorize(*a))
    ran_on, top_k_sums = [], metrics._top_k_sums
    monkeypatch.setattr(metrics, "_top_k_sums", lambda *a: ran_on.append(threading.current_thread().name)
                        or top_k_sums(*a))
    confusions_on, confusions = [], metrics._confusions
    monkeypatch.setattr(metrics, "_confusions", lambda *a: confusions_on.append(threading.current_thread().name)
                        or confusions(*a))
    threaded = compute_metric_tables(big, cache_dir=False)
    assert ran_on and ran_on[0].startswith("wildlens-metrics")  # the path under test was taken
    assert confusions_on and confusions_on[0].startswith("wildlens-metrics")
    assert factorised_on and all(name.startswith("wildlens-metrics") for name in factorised_on), factorised_on
    for name, df in serial.as_dict().items():
        pd.testing.assert_frame_equal(threaded.as_dict()[name], df, check_exact=True, obj=name)
    # and an error raised on the second thread reaches the caller as the serial path's
    bad = big.assign(pred_wnid_3=big["pred_wnid_3"].where(big.index != 5, "n0212"))
    with pytest.raises(PredictionsError, match="not a wnid") as info:
        compute_metric_tables(bad, cache_dir=False)
    assert info.value.column == "pred_wnid_3" and info.value.row == 5


@pytest.mark.parametrize("threaded", [False, True])
def test_the_checks_keep_their_order_when_later_columns_are_read_early(monkeypatch, threaded):
    """model, label_space and image are factorised on the wnid columns' threads; what one of them raises
    (a list in a cell) is still raised after the wnid checks, where the column was read before: a file
    with both problems names the wnid first, and the list once the wnid is fixed."""
    from explain import metrics
    import core.machine

    if threaded:
        monkeypatch.setattr(metrics, "_PARALLEL_FROM", 0)
        monkeypatch.setattr(metrics, "_cores", lambda: 2)
        monkeypatch.setattr(core.machine, "available_cores", lambda: 2)
    df = pd.DataFrame({"model": ["m", "m", "m"], "image": ["a", "b", "c"],
                       "true_wnid": ["n02123045", "n02123159", "n02123045"],
                       "pred_wnid": ["n02123045", "n0212", "n02123045"], "status": "ok"})
    for column in ("model", "image", "label_space"):
        bad = df.assign(**{column: pd.Series(["x", ["a", "list"], "y"], dtype=object)})
        with pytest.raises(PredictionsError, match="not a wnid") as first:
            compute_metric_tables(bad, cache_dir=False)
        assert first.value.column == "pred_wnid" and first.value.row == 1
        fixed = bad.assign(pred_wnid=bad["true_wnid"])
        if column == "label_space":
            fixed["label_space"] = pd.Series(["imagenet-1k", ["a", "list"], "imagenet-1k"], dtype=object)
        with pytest.raises(PredictionsError, match="holds a list") as second:
            compute_metric_tables(fixed, cache_dir=False)
        assert second.value.column == column and second.value.row == 1
        # Any error, not only a refusal: a tuple holding a list cannot be hashed (a TypeError, as before this
        # column was read early) and still comes after the wnid's refusal (a hostile check).
        unhashable = df.assign(**{column: pd.Series(["x", ("b", ["x"]), "y"], dtype=object)})
        with pytest.raises(PredictionsError, match="not a wnid"):
            compute_metric_tables(unhashable, cache_dir=False)
        with pytest.raises(TypeError, match="unhashable"):
            compute_metric_tables(unhashable.assign(pred_wnid=df["true_wnid"]), cache_dir=False)


def test_a_refused_table_leaves_no_thread_running(monkeypatch):
    """A hostile check: the top-5 severities started on a second core before the last checks, so a table those
    refused (a class outside its label space, a conflicting repeat) left the thread building and caching the
    ImageNet-1k matrices for it. They start once every check has passed."""
    from explain import metrics
    import core.machine

    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(metrics, "_cores", lambda: 2)
    monkeypatch.setattr(core.machine, "available_cores", lambda: 2)
    started, start = [], metrics._start
    monkeypatch.setattr(metrics, "_start", lambda func, *a, **k: started.append(func.__name__) or start(func, *a, **k))
    top = {"pred_wnid_2": ["n02123159"] * 2, "pred_wnid_3": ["n02123394"] * 2, "pred_wnid_4": ["n02123597"] * 2,
           "pred_wnid_5": ["n02124075"] * 2}
    outside = pd.DataFrame({"model": ["m", "m"], "image": ["a", "b"], "true_wnid": ["n02123045"] * 2,
                            "pred_wnid": ["n02084071", "n02123045"], **top, "label_space": "imagenet-1k"})
    with pytest.raises(PredictionsError, match="not a class of this row's label space"):
        compute_metric_tables(outside, cache_dir=False, ci=None)
    clash = outside.assign(image="a", pred_wnid="n02123045", label_space=pd.NA)
    clash.loc[1, "pred_wnid_5"] = "n02127808"  # another top-5: the same model and image twice, differing
    with pytest.raises(PredictionsError, match="again, with another"):
        compute_metric_tables(clash, cache_dir=False, ci=None)
    assert started == []


def test_rows_without_model_or_image_are_predictions_of_their_own_beside_repeats():
    """The repeat check hashes the (model, image) keys of rows that have both; a row without an image (or
    without a model: not counted) is never taken for a repeat, and an identical repeat counts once."""
    df = pd.DataFrame({"model": ["m", "m", "m", "m", None],
                       "image": ["a", "a", None, None, "a"],
                       "true_wnid": ["n02123045"] * 5,
                       "pred_wnid": ["n02123045", "n02123045", "n02123159", "n02123159", "n02123045"],
                       "status": ["ok", "ok", "ok", "ok", "failed"]})
    per_model = compute_metric_tables(df, cache_dir=False).per_model
    row = per_model.set_index("model").loc["m"]
    assert row["n"] == 3 and row["n_mistakes"] == 2  # rows 0 and 1 once; rows 2 and 3 each their own


def test_an_error_after_the_jobs_start_leaves_no_thread_running(table, monkeypatch):
    """A review: the confusions job (and the top-5 one) ran on past an error raised after they started, holding the
    process's exit and losing their own errors. Each started job is waited for before the error goes up."""
    import time

    from explain import metrics
    import core.machine

    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(metrics, "_cores", lambda: 2)
    monkeypatch.setattr(core.machine, "available_cores", lambda: 2)
    finished = []

    def slow_confusions(*args):
        time.sleep(1.0)
        finished.append("confusions")
        raise RuntimeError("the confusions' own error, dropped")

    def failing(*args):
        raise OSError("the top-5 severities failed")

    monkeypatch.setattr(metrics, "_confusions", slow_confusions)
    monkeypatch.setattr(metrics, "_top_k_sums", failing)
    with pytest.raises(OSError, match="the top-5 severities failed"):
        compute_metric_tables(table, cache_dir=False, ci=None)
    assert finished == ["confusions"]  # waited for, not left running
    assert not [t for t in threading.enumerate() if t.name.startswith("wildlens-metrics") and t.is_alive()]


def test_rows_read_without_their_top5_severities_do_not_pass_for_a_table_without_a_top5(table):
    """A review: rows read by explain compare, claims or error types (no top-5 severities asked) answered
    rows.top_k_sums() with NaN, as a table without a top-5; a caller that forgot would have shown NaN hdist@5."""
    from explain.metrics import _read_rows

    with pytest.raises(RuntimeError, match="without their top-5 severities"):
        _read_rows(table).top_k_sums()
    assert not np.isnan(_read_rows(table, top_k_sums=False).top_k_sums().hdist).all()


def test_no_thread_to_start_gives_the_same_tables(table, monkeypatch):
    """Leftover of a hostile check: under an address-space limit "can't start new thread" escaped the
    metric tables' threads (the wnid columns' factorising, the top-5 severities, the bootstrap's blocks);
    each now runs in the calling thread and the tables, intervals included, are the serial ones."""
    from explain import metrics, uncertainty

    big = pd.concat([table] * 3, ignore_index=True).assign(image=lambda d: [f"i{k}" for k in range(len(d))])
    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 10**12)
    monkeypatch.setattr(uncertainty, "block_threads", lambda items, resamples: 1)
    serial = compute_metric_tables(big, cache_dir=False)
    monkeypatch.setattr(metrics, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(metrics, "_cores", lambda: 2)
    monkeypatch.setattr(uncertainty, "block_threads", lambda items, resamples: 2)
    import core.machine

    monkeypatch.setattr(core.machine, "available_cores", lambda: 2)
    refused = []

    def no_thread(self):  # as CPython fails inside ThreadPoolExecutor.submit: the item queued, then no thread
        refused.append(self.name)
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    alone = compute_metric_tables(big, cache_dir=False)
    assert refused, "the threaded paths were tried"
    for name, df in serial.as_dict().items():
        pd.testing.assert_frame_equal(alone.as_dict()[name], df, check_exact=True, obj=name)


def test_shared_na_bounds_cannot_be_written():
    from explain.metric_intervals import na_array, no_bounds

    bounds = no_bounds("per_class", 4)
    first = next(iter(bounds.values()))
    assert all(v is first for v in bounds.values()) and np.isnan(first).all()
    with pytest.raises(ValueError):
        na_array(3)[0] = 1.0


def test_a_value_refused_cold_is_refused_warm_too(table):
    """The check that skips per-column validation once every distinct wnid was seen in this process
    compares exact str values: 'n02123045\\x00' (numpy's str would drop the NUL) and a non-str whose
    str() is a known wnid are refused on a warm call as on a cold one (review of the fast path)."""
    compute_metric_tables(table, cache_dir=False)  # every wnid of the fixture is known now

    class Lookalike:
        def __str__(self):
            return TABBY

        def __hash__(self):
            return hash(TABBY) + 1

        def __eq__(self, other):
            return self is other

    for bad in (TABBY + "\x00", Lookalike()):
        df = table.astype({"pred_wnid": object})
        df.at[2, "pred_wnid"] = bad
        with pytest.raises(PredictionsError) as info:
            compute_metric_tables(df, cache_dir=False)
        assert info.value.column == "pred_wnid" and info.value.row == 2, str(info.value)


def test_tables_without_intervals_can_be_written_to(table):
    """The NA bounds of --no-ci are one shared read-only array inside the computation; the tables
    handed out own their columns (a caller's loc assignment raised 'read-only')."""
    tables = compute_metric_tables(table, cache_dir=False, ci=None)
    for frame in (tables.per_model, tables.per_class, tables.confusions):
        column = next(c for c in frame.columns if c.endswith("_ci_low"))
        frame.loc[frame.index[0], column] = 0.5
        assert frame[column].iloc[0] == 0.5
    # accuracy_balanced per class is accuracy: equal values, not one buffer (hostile campaign)
    per_class = tables.per_class
    before = per_class["accuracy_balanced"].copy()
    per_class.loc[per_class.index[0], "accuracy"] = 0.123
    pd.testing.assert_series_equal(per_class["accuracy_balanced"], before)


def test_top5_cells_equal_np_unique_cells():
    """The hashed top-5 cells are np.unique's (sorted by key, the same weights and values)."""
    from explain.metric_intervals import HDIST_SCALE, _top5_cells

    rng = np.random.default_rng(6)
    group = rng.integers(0, 50, 5000)
    hdist = rng.integers(0, 40, 5000) / 5
    den = np.where(rng.random(5000) < 0.1, np.nan, (group % 7 + 1).astype(np.float64))
    num = np.where(np.isnan(den), np.nan, hdist * 5 + group)
    count = np.ones(5000)
    got = _top5_cells(group, count, hdist, num, den)
    scaled = np.round(hdist * HDIST_SCALE).astype(np.int64)
    key = (group * (scaled.max() + 1) + scaled) * 2 + (~np.isnan(num) & ~np.isnan(den))
    cells, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    assert np.array_equal(got["group"], group[first])
    assert np.array_equal(got["count"], np.bincount(inverse.ravel(), weights=count))
    for name, values in (("hdist", hdist), ("num", num), ("den", den)):
        assert np.array_equal(got[name], values[first], equal_nan=True)
