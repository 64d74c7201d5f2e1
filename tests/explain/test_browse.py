"""The image browser's tables (explain.browse) on hand-made predictions, against a plain per-row
pandas / NLTK reference: columns and names, relations, filters alone and combined, the two-model
comparison, and which rows count (status 'ok', usable images only)."""
import itertools

import numpy as np
import pandas as pd
import pytest

from core.labels import get_label_space
from core.runstore import RunStore
from core.wordnet import synset_of
from explain.browse import (COLUMNS, GROUPS, BrowseError, card_rows, class_names, compare_models, filter_images,
                            image_table, run_image_table)
from explain.vocabulary import RELATIONS
from tests.explain import nltk_reference as ref

TABBY, TIGER_CAT, PERSIAN, SIAMESE, EGYPTIAN = "n02123045", "n02123159", "n02123394", "n02123597", "n02124075"
COUGAR, LYNX, LAMP, TEDDY = "n02125311", "n02127052", "n04380533", "n04399382"
DOMESTIC_CAT = "n02121808"  # domestic_cat.n.01: an ImageNet-21k class, outside ImageNet-1k


def _predictions() -> pd.DataFrame:
    rows = []

    def add(model, image, true, preds, status="ok", probs=None):
        top = list(preds) + [None] * (5 - len(preds))
        probs = probs or [0.6, 0.2, 0.1, 0.05, 0.05]
        rows.append({"model": model, "image": image, "true_wnid": true, "pred_wnid": top[0],
                     **{f"pred_wnid_{k}": top[k - 1] for k in range(2, 6)},
                     **{f"prob_{k}": probs[k - 1] for k in range(1, 6)},
                     "label_space": "imagenet-1k", "status": status, "reason": None if status == "ok" else "bad"})

    five = [TIGER_CAT, PERSIAN, SIAMESE, EGYPTIAN]
    # resnet: right, sibling, hypernym (21k class), distant, a failed row
    add("resnet", f"{TABBY}/a.jpg", TABBY, [TABBY, *five], probs=[0.9, 0.05, 0.03, 0.01, 0.01])
    add("resnet", f"{TABBY}/b.jpg", TABBY, [TIGER_CAT, TABBY, PERSIAN, SIAMESE, EGYPTIAN], probs=[0.4, 0.3, 0.1, 0.1, 0.1])
    add("resnet", f"{TABBY}/c.jpg", TABBY, [DOMESTIC_CAT, TABBY, PERSIAN, SIAMESE, EGYPTIAN], probs=[0.55, 0.2, 0.1, 0.1, 0.05])
    add("resnet", f"{COUGAR}/a.jpg", COUGAR, [LAMP, TEDDY, LYNX, TABBY, PERSIAN], probs=[0.3, 0.2, 0.2, 0.2, 0.1])
    add("resnet", f"{COUGAR}/b.jpg", COUGAR, [COUGAR, LYNX, TABBY, PERSIAN, SIAMESE], probs=[0.8, 0.1, 0.05, 0.03, 0.02])
    add("resnet", f"{COUGAR}/c.jpg", COUGAR, [None], status="failed")
    add("resnet", f"{LYNX}/a.jpg", LYNX, [COUGAR, LYNX, TABBY, PERSIAN, SIAMESE], probs=[0.5, 0.4, 0.05, 0.03, 0.02])
    # vit: other mistakes on the same images; one image only it has (LYNX/b), one resnet failed on (COUGAR/c)
    add("vit", f"{TABBY}/a.jpg", TABBY, [PERSIAN, TABBY, TIGER_CAT, SIAMESE, EGYPTIAN], probs=[0.35, 0.3, 0.2, 0.1, 0.05])
    add("vit", f"{TABBY}/b.jpg", TABBY, [TIGER_CAT, TABBY, PERSIAN, SIAMESE, EGYPTIAN], probs=[0.7, 0.2, 0.05, 0.03, 0.02])
    add("vit", f"{TABBY}/c.jpg", TABBY, [TABBY, *five], probs=[0.95, 0.02, 0.01, 0.01, 0.01])
    add("vit", f"{COUGAR}/a.jpg", COUGAR, [COUGAR, LYNX, TABBY, PERSIAN, SIAMESE], probs=[0.6, 0.2, 0.1, 0.05, 0.05])
    add("vit", f"{COUGAR}/b.jpg", COUGAR, [COUGAR, LYNX, TABBY, PERSIAN, SIAMESE], probs=[0.7, 0.2, 0.05, 0.03, 0.02])
    add("vit", f"{COUGAR}/c.jpg", COUGAR, [LYNX, COUGAR, TABBY, PERSIAN, SIAMESE], probs=[0.45, 0.4, 0.1, 0.03, 0.02])
    add("vit", f"{LYNX}/a.jpg", LYNX, [LYNX, COUGAR, TABBY, PERSIAN, SIAMESE], probs=[0.99, 0.01, 0.0, 0.0, 0.0])
    add("vit", f"{LYNX}/b.jpg", LYNX, [TEDDY, LYNX, TABBY, PERSIAN, SIAMESE], probs=[0.2, 0.19, 0.18, 0.17, 0.16])
    return pd.DataFrame(rows)


def _name(wnid):
    if wnid is None or (not isinstance(wnid, str) and pd.isna(wnid)):
        return None
    space = get_label_space("imagenet-1k")
    if wnid in space:
        return space.display_name(wnid)
    return ", ".join(lemma.replace("_", " ") for lemma in synset_of(wnid).lemma_names()).split(",")[0].strip() \
        if wnid not in get_label_space("imagenet-21k") else get_label_space("imagenet-21k").display_name(wnid)


def _reference(df: pd.DataFrame, usable=None) -> pd.DataFrame:
    """Row by row, in plain Python: what the browser's table must hold."""
    out = []
    for row in df.to_dict("records"):
        if row["status"] != "ok" or (usable is not None and row["image"] not in usable):
            continue
        preds = [row["pred_wnid"]] + [row[f"pred_wnid_{k}"] for k in range(2, 6)]
        record = {"model": row["model"], "image": row["image"], "true_wnid": row["true_wnid"],
                  "true_name": _name(row["true_wnid"])}
        for k in range(1, 6):
            record[f"pred_wnid_{k}"] = preds[k - 1]
            record[f"pred_name_{k}"] = _name(preds[k - 1])
            record[f"prob_{k}"] = row[f"prob_{k}"]
        record["correct"] = preds[0] == row["true_wnid"]
        record["in_top5"] = row["true_wnid"] in preds
        record["relation"] = ref.relation(synset_of(row["true_wnid"]), synset_of(preds[0]))
        record["label_space"] = row["label_space"]
        out.append(record)
    models = list(dict.fromkeys(r["model"] for r in out))
    out.sort(key=lambda r: (models.index(r["model"]), r["true_wnid"], r["image"]))
    return pd.DataFrame(out, columns=list(COLUMNS))


def _plain(df: pd.DataFrame) -> list[dict]:
    return [{k: (None if (not isinstance(v, (list, tuple)) and pd.isna(v)) else v) for k, v in r.items()}
            for r in df.astype(object).to_dict("records")]


@pytest.fixture(scope="module")
def predictions():
    return _predictions()


@pytest.fixture(scope="module")
def table(predictions):
    return image_table(predictions, cache_dir=False)


def test_table_equals_the_row_by_row_reference(predictions, table):
    assert list(table.columns) == list(COLUMNS)
    assert _plain(table) == _plain(_reference(predictions))
    assert len(table) == 14  # 15 rows, one failed


def test_every_wnid_column_has_its_name(table):
    for column in [c for c in table.columns if "wnid" in c]:
        named = column.replace("wnid", "name")
        assert named in table.columns
        has = table[column].notna()
        assert table.loc[has, named].notna().all() and (table.loc[has, named] != table.loc[has, column]).all()
    row = table[(table["model"] == "resnet") & (table["image"] == f"{TABBY}/c.jpg")].iloc[0]
    assert row["true_name"] == "tabby" and row["pred_name_1"] == "domestic cat"  # 21k fallback
    assert row["relation"] == "hypernym"
    assert class_names([LAMP, "n99999999"]) == {LAMP: "table lamp", "n99999999": "n99999999"}


def test_relations_use_the_vocabulary(table):
    assert set(table["relation"]) <= set(RELATIONS)
    assert (table.loc[table["correct"], "relation"] == "same").all()
    assert set(table.loc[~table["correct"], "relation"]) >= {"sibling", "hypernym", "distant"}


def test_excluded_and_failed_images_are_left_out(predictions):
    usable = set(predictions["image"]) - {f"{TABBY}/b.jpg"}
    table = image_table(predictions, usable, cache_dir=False)
    assert f"{TABBY}/b.jpg" not in set(table["image"])
    assert f"{COUGAR}/c.jpg" in set(table["image"])  # vit's ok row stays, resnet's failed row does not
    assert not ((table["model"] == "resnet") & (table["image"] == f"{COUGAR}/c.jpg")).any()
    assert _plain(table) == _plain(_reference(predictions, usable))


def test_a_run_leaves_out_its_excluded_images(tmp_path, predictions):
    store = RunStore(tmp_path)
    run = store.create_run(run_id="browse", wnids=[TABBY, COUGAR, LYNX])
    files = sorted(set(predictions["image"]))
    run.write_manifest(pd.DataFrame({"wnid": [f.split("/")[0] for f in files], "file": files, "status": "accepted",
                                     "excluded": [f == f"{LYNX}/b.jpg" for f in files]}))
    run.append_predictions(predictions)
    table = run_image_table(run)
    assert f"{LYNX}/b.jpg" not in set(table["image"])
    assert len(table) == 13
    # A run without a manifest (uploaded predictions) keeps every 'ok' row.
    run.manifest_path.unlink()
    assert len(run_image_table(run)) == 14


@pytest.mark.parametrize("outcome", ["all", "correct", "mistake"])
def test_filters_combine_like_pandas(table, outcome):
    models = [None, "resnet", ["vit"], ["resnet", "vit"]]
    trues = [None, TABBY, [COUGAR, LYNX]]
    preds = [None, TIGER_CAT, [COUGAR, LYNX, TABBY]]
    relations = [None, ["sibling"], ["same", "distant", "hypernym"]]
    bounds = [(None, None), (0.5, None), (None, 0.5), (0.4, 0.6)]
    checked = 0
    for m, t, p, r, (lo, hi) in itertools.product(models, trues, preds, relations, bounds):
        got = filter_images(table, models=m, true=t, pred=p, outcome=outcome, relations=r, conf_min=lo, conf_max=hi)
        want = table
        as_list = lambda v: [v] if isinstance(v, str) else v  # noqa: E731
        if m is not None:
            want = want[want["model"].isin(as_list(m))]
        if t is not None:
            want = want[want["true_wnid"].isin(as_list(t))]
        if p is not None:
            want = want[want["pred_wnid_1"].isin(as_list(p))]
        if r is not None:
            want = want[want["relation"].isin(r)]
        if outcome == "correct":
            want = want[want["pred_wnid_1"] == want["true_wnid"]]
        elif outcome == "mistake":
            want = want[want["pred_wnid_1"] != want["true_wnid"]]
        if lo is not None:
            want = want[want["prob_1"] >= lo]
        if hi is not None:
            want = want[want["prob_1"] <= hi]
        pd.testing.assert_frame_equal(got, want.reset_index(drop=True))
        checked += len(got)
    assert checked > 100  # the combinations are not all empty


def test_filter_edges(table):
    assert filter_images(table).equals(table)
    assert filter_images(table, models=[]).empty
    assert len(filter_images(table, conf_min=0.99, conf_max=0.99)) == 1  # inclusive bounds
    with pytest.raises(BrowseError, match="outcome"):
        filter_images(table, outcome="wrong")
    with pytest.raises(BrowseError, match="relation"):
        filter_images(table, relations=["uncle"])


def test_compare_counts_add_up_to_the_images_both_predicted(table):
    cmp = compare_models(table, "resnet", "vit")
    a = table[table["model"] == "resnet"].set_index("image")
    b = table[table["model"] == "vit"].set_index("image")
    shared = sorted(set(a.index) & set(b.index))
    assert cmp.n_images == len(shared) == sum(cmp.counts.values()) == 6
    want = {g: [] for g in GROUPS}
    for image in shared:
        wrong_a, wrong_b = not a.loc[image, "correct"], not b.loc[image, "correct"]
        group = ("both_wrong" if wrong_a and wrong_b else "only_a_wrong" if wrong_a else
                 "only_b_wrong" if wrong_b else "both_right")
        want[group].append(image)
    assert {g: sorted(cmp.group(g)["image"]) for g in GROUPS} == want
    assert cmp.counts == {g: len(v) for g, v in want.items()}
    assert cmp.counts == {"both_wrong": 1, "only_a_wrong": 3, "only_b_wrong": 1, "both_right": 1}
    row = cmp.group("only_b_wrong").iloc[0]
    assert row["image"] == f"{TABBY}/a.jpg" and row["b_pred_name"] == "Persian cat" and row["true_name"] == "tabby"
    assert row["a_prob"] == pytest.approx(0.9) and row["b_relation"] == "sibling"
    for column in [c for c in cmp.images.columns if c.endswith("wnid")]:
        assert column.replace("wnid", "name") in cmp.images.columns
    # swapping the models swaps the one-sided groups
    swapped = compare_models(table, "vit", "resnet").counts
    assert swapped["only_a_wrong"] == cmp.counts["only_b_wrong"] and swapped["only_b_wrong"] == cmp.counts["only_a_wrong"]


def test_compare_on_a_filtered_table_and_errors(table):
    cmp = compare_models(filter_images(table, true=TABBY), "resnet", "vit")
    assert sum(cmp.counts.values()) == 3 and set(cmp.images["true_wnid"]) == {TABBY}
    assert compare_models(table, "resnet", "nobody").n_images == 0
    assert set(compare_models(table, "resnet", "nobody").counts.values()) == {0}
    with pytest.raises(BrowseError):
        compare_models(table, "vit", "vit")
    with pytest.raises(BrowseError):
        cmp.group("neither")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compare_by_image_codes_is_the_same_table(table, seed):
    """compare_models with the images' sorted codes (what the dashboard holds per table) pairs, keeps and
    orders by integers: the same table as by the names, on the rows shuffled, an image a model predicted
    twice (its last row counts), an image without a name, one without a true class, one a model gives two
    truths (paired only where its last row has the other model's truth), a filtered table with the whole
    table's codes (not dense: what the page passes) and an empty one."""
    from explain.browse import image_mask, sorted_codes

    rng = np.random.default_rng(seed)
    again = table[(table["model"] == "vit") & (table["image"] == f"{TABBY}/a.jpg")].assign(
        pred_wnid_1=TABBY, correct=True, relation="correct")
    nameless = table[table["image"] == f"{COUGAR}/b.jpg"].assign(image=pd.NA)
    untrue = table[table["image"] == f"{COUGAR}/a.jpg"].assign(image="untrue.jpg", true_wnid=pd.NA)
    other_truth = table[(table["model"] == "vit") & (table["image"] == f"{LYNX}/a.jpg")].assign(true_wnid=COUGAR)
    rows = pd.concat([table, again, nameless, untrue, other_truth], ignore_index=True)
    rows = rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)
    codes = sorted_codes(rows["image"])[0]
    cases = [(rows, codes), (rows.iloc[0:0], codes[:0]), (rows, codes + 2 ** 40)]  # huge ranks: renumbered
    for true in dict.fromkeys(rows["true_wnid"].dropna()):  # every class: a later one's ranks exceed its rows
        keep = image_mask(rows, true=true)  # (a hostile campaign: Browse stopped for most classes)
        cases.append((rows[keep].reset_index(drop=True), codes[keep]))
    for frame, frame_codes in cases:
        for a, b in (("resnet", "vit"), ("vit", "resnet"), ("resnet", "nobody")):
            by_names = compare_models(frame, a, b).images
            pd.testing.assert_frame_equal(compare_models(frame, a, b, image_codes=frame_codes).images, by_names)
            pd.testing.assert_frame_equal(
                compare_models(frame, a, b, image_codes=sorted_codes(frame["image"])[0]).images, by_names)
    paired = compare_models(rows, "resnet", "vit")
    vit_last = bool(rows[(rows["model"] == "vit") & (rows["image"] == f"{TABBY}/a.jpg")]["correct"].iloc[-1])
    assert (f"{TABBY}/a.jpg" in paired.group("both_right")["image"].dropna().tolist()) == vit_last, \
        "vit's last row of the image counts"
    last_truth = rows[(rows["model"] == "vit") & (rows["image"] == f"{LYNX}/a.jpg")]["true_wnid"].iloc[-1]
    assert (f"{LYNX}/a.jpg" in paired.images["image"].dropna().tolist()) == (last_truth == LYNX), \
        "paired only where vit's last row of the image has resnet's truth"
    assert paired.images["image"].isna().sum() == 1, "the images without a name are one image, as merge pairs NA"
    assert "untrue.jpg" in paired.images["image"].dropna().tolist(), "no true class on both sides: paired, as merge"
    for wrong in (np.zeros(3, dtype=np.int64), np.where(codes == 0, -1, codes)):
        # another table's, negative (paired wrong rows): a hostile check
        with pytest.raises(BrowseError, match="image codes"):
            compare_models(rows, "resnet", "vit", image_codes=wrong)


def test_card_rows_lead_with_the_selection_and_mark_the_rest(table):
    """Issue 22 item 16: a card's rows are the chosen models' rows of its image, the filtered ones
    first; 'matched' is membership in the selection, not a filter evaluated again."""
    selected = filter_images(table, outcome="mistake", relations=["distant"])
    images = [f"{LYNX}/b.jpg", f"{COUGAR}/a.jpg"]
    cards = card_rows(table, selected, images, ["resnet", "vit"])
    assert list(zip(cards["image"], cards["model"], cards["matched"])) == [
        (f"{LYNX}/b.jpg", "vit", True),  # vit alone has this image
        (f"{COUGAR}/a.jpg", "resnet", True), (f"{COUGAR}/a.jpg", "vit", False)]  # vit was right there
    assert list(cards.columns) == [*COLUMNS, "matched"]
    keys = set(zip(selected["model"], selected["image"]))
    assert cards["matched"].tolist() == [(m, i) in keys for m, i in zip(cards["model"], cards["image"])]
    # matched rows first within an image, then models' order; None: every row matched
    picked = table[(table["model"] == "vit") & (table["image"] == f"{TABBY}/a.jpg")]
    first = card_rows(table, picked, [f"{TABBY}/a.jpg"], ["resnet", "vit"])
    assert first["model"].tolist() == ["vit", "resnet"] and first["matched"].tolist() == [True, False]
    everything = card_rows(table, None, [f"{TABBY}/a.jpg"], ["resnet", "vit"])
    assert everything["model"].tolist() == ["resnet", "vit"] and everything["matched"].all()
    assert card_rows(table, selected, [], ["resnet"]).empty


def test_top1_only_predictions_have_no_top5(predictions):
    top1 = predictions.drop(columns=[f"pred_wnid_{k}" for k in range(2, 6)])
    table = image_table(top1, cache_dir=False)
    assert table["in_top5"].isna().all() and table["pred_name_2"].isna().all()
    assert table["correct"].tolist() == image_table(predictions, cache_dir=False)["correct"].tolist()


def test_empty_predictions_give_an_empty_table(predictions):
    table = image_table(predictions.iloc[0:0], cache_dir=False)
    assert table.empty and list(table.columns) == list(COLUMNS)
    assert compare_models(table, "a", "b").counts == {g: 0 for g in GROUPS}
    assert np.all(filter_images(table, outcome="mistake").columns == table.columns)


def test_a_row_without_a_model_keeps_its_place_and_usable_images_must_be_a_collection():
    """Hostile campaign on the Arrow-based image table: models in first appearance, a missing one
    included (a, NA, b stays so), as before the rewrite; one file name given as usable_images is
    refused as Series.isin refused it, not read as a set of characters."""
    from explain.browse import image_table, usable_rows

    T, P = "n02123045", "n02123394"
    df = pd.DataFrame({"model": ["a", None, "b"], "image": ["i1", "i2", "i3"], "true_wnid": [T, T, T],
                       "pred_wnid": [T, P, T], "status": "ok"})
    got = image_table(df, cache_dir=False)
    assert got["model"].tolist() == ["a", pd.NA, "b"] and got["image"].tolist() == ["i1", "i2", "i3"]
    with pytest.raises(TypeError, match="collection of image names"):
        usable_rows(df, "i1")
    assert usable_rows(df, ["i1", "i3"])["image"].tolist() == ["i1", "i3"]


def test_annotations_join_by_model_and_image_as_a_reindex_does():
    """annotate's join (integer codes, one sort) equals the MultiIndex reindex it replaced, with
    repeated keys (the last row wins), missing models or images, and keys on one side only."""
    import numpy as np

    from explain.browse import _matching_rows

    rng = np.random.default_rng(7)
    models = np.array(["a", "b", "c--int8", None], dtype=object)
    images = np.array([f"n0/{i}.jpg" for i in range(40)] + [None], dtype=object)
    left = pd.DataFrame({"model": models[rng.integers(0, 4, 300)], "image": images[rng.integers(0, 41, 300)]})
    right = pd.DataFrame({"model": models[rng.integers(0, 4, 500)], "image": images[rng.integers(0, 41, 500)]})
    right["row"] = np.arange(len(right))
    got = _matching_rows(left.astype("string"), right.astype({"model": "string", "image": "string"}))
    keyed = right.dropna(subset=["model", "image"]).drop_duplicates(["model", "image"], keep="last")
    expected = keyed.set_index(["model", "image"])["row"].reindex(
        pd.MultiIndex.from_arrays([left["model"], left["image"]]))
    expected = np.where(left["model"].isna() | left["image"].isna(), -1, expected.fillna(-1).to_numpy()).astype(int)
    assert (got == expected).all() and (got >= 0).sum() > 100 and (got < 0).sum() > 10
