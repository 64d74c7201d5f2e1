"""explain.matrix: the WordNet tree order on real WordNet 3.0, and confusion matrices equal to a
pandas crosstab of the usable predictions."""
import numpy as np
import pandas as pd
import pytest

from core.labels import hyponym_classes
from core.wordnet import synset_of
from explain.matrix import (OTHER, OTHER_RUN, cell_images, column_of, confusion_matrix, most_confused, outside_label,
                            row_normalise, tree_order, tree_path)

CATS = [c.wnid for c in hyponym_classes("cat.n.01", "imagenet-1k")]  # the 7 ImageNet-1k cats
DOMESTIC = {"n02123045", "n02123159", "n02123394", "n02123597", "n02124075"}  # tabby ... Egyptian cat
WILD = {"n02125311", "n02127052"}  # cougar, lynx
GOLDEN, TIGER, BEAGLE = "n02099601", "n02129604", "n02088364"  # golden retriever, tiger, beagle
BALL = "n04254680"  # soccer ball: far from every animal


def names(wnids):
    return [synset_of(w).name() for w in wnids]


def contiguous(order, group) -> bool:
    positions = sorted(order.index(w) for w in group)
    return positions == list(range(positions[0], positions[0] + len(group)))


def test_seven_cats():
    assert len(CATS) == 7 and set(CATS) == DOMESTIC | WILD


def test_tree_order_keeps_siblings_together_on_real_wordnet():
    order = tree_order([GOLDEN, *reversed(CATS), BEAGLE])
    assert sorted(order) == sorted([GOLDEN, *CATS, BEAGLE])
    assert contiguous(order, CATS), names(order)  # the cat.n.01 block
    assert contiguous(order, DOMESTIC) and contiguous(order, WILD), names(order)  # its two sub-blocks
    assert contiguous(order, {GOLDEN, BEAGLE}), names(order)  # the dogs, apart from the cats
    # Children by synset name: canine.n.02 < feline.n.01, domestic_cat < wildcat, and the five
    # domestic cats are siblings under domestic_cat.n.01, by name.
    assert names(order[2:7]) == ["egyptian_cat.n.01", "persian_cat.n.01", "siamese_cat.n.01", "tabby.n.01",
                                 "tiger_cat.n.02"]
    assert names(order[7:]) == ["cougar.n.01", "lynx.n.02"]


def test_tree_follows_the_taxonomy_not_the_shortest_path():
    # domestic_cat.n.01 is also a domestic_animal.n.01 (a shorter way up): the tree goes through cat.n.01.
    assert "cat.n.01" in names(tree_path("n02123045"))
    assert "domestic_animal.n.01" not in names(tree_path("n02123045"))
    assert names(tree_path("n02123045"))[0] == "entity.n.01"


def test_tree_order_is_deterministic_and_puts_ancestors_first():
    shuffled = list(CATS + [TIGER, GOLDEN])
    first = tree_order(shuffled)
    for seed in range(5):
        np.random.default_rng(seed).shuffle(shuffled)
        assert tree_order(shuffled) == first
    cat = "n02121620"  # cat.n.01 itself, before all seven
    assert tree_order([*CATS, cat])[0] == cat


def test_unknown_wnids_come_last():
    assert tree_order(["n99999999", CATS[0], "not-a-wnid"]) == [CATS[0], "n99999999", "not-a-wnid"]


def test_outside_predictions_are_grouped_by_their_common_ancestor_with_the_row():
    tabby = CATS[0]
    columns = column_of([(tabby, w) for w in (TIGER, GOLDEN, BALL, CATS[0], "n99999999")], CATS)
    assert columns[tabby, CATS[0]] == CATS[0]
    assert columns[tabby, TIGER] == outside_label("n02120997") == "other: under feline.n.01"  # big cat, a feline
    assert columns[tabby, GOLDEN] == "other: under carnivore.n.01"
    assert columns[tabby, BALL].startswith("other: under ") and "carnivore" not in columns[tabby, BALL]
    assert columns[tabby, "n99999999"] == OTHER
    assert set(column_of([(tabby, TIGER), (tabby, GOLDEN)], CATS, outside="other").values()) == {OTHER}
    with pytest.raises(ValueError):
        column_of([(tabby, TIGER)], CATS, outside="nearest")


def test_an_outside_column_reads_back_to_its_node():
    from explain.matrix import outside_anchor

    assert outside_anchor(outside_label("n02120997")) == "n02120997"  # 'other: under feline.n.01'
    assert outside_anchor("other: under n99999999") == "n99999999"  # a node WordNet lacks keeps its wnid
    assert outside_anchor(OTHER) is None and outside_anchor(CATS[0]) is None
    assert outside_anchor("other: under no_such.n.01") is None


def test_the_matrix_names_the_common_ancestor_the_confusions_table_names():
    """Issue 22 item 15: wall clock -> Petri dish was "other: under artifact.n.01" (the nearest node of
    the run's tree on Petri dish's tree path, through crockery), while the Confusions table named
    instrumentality.n.03 (Petri dish is also a container): one rule, the lowest common subsumer."""
    from explain.metrics import compute_metric_tables
    from explain.similarity import lowest_common_subsumer

    wall_clock, petri_dish, tabby = "n04548280", "n03920288", CATS[0]
    df = pd.DataFrame({"model": "m", "image": ["a.jpg", "b.jpg", "c.jpg"], "true_wnid": [wall_clock, wall_clock, tabby],
                       "pred_wnid": [petri_dish, wall_clock, TIGER], "label_space": "imagenet-1k", "status": "ok"})
    lcs = compute_metric_tables(df, cache_dir=False).confusions.set_index("pred_wnid").loc[petri_dish, "lcs_wnid"]
    assert synset_of(lcs).name() == "instrumentality.n.03" == synset_of(lowest_common_subsumer(wall_clock,
                                                                                              petri_dish)).name()
    matrix = confusion_matrix(df, "m", [wall_clock, tabby])
    assert matrix.loc[wall_clock, "other: under instrumentality.n.03"] == 1
    assert "other: under artifact.n.01" not in matrix.columns
    assert matrix.loc[tabby, "other: under feline.n.01"] == 1
    cell = cell_images(df, "m", wall_clock, "other: under instrumentality.n.03", [wall_clock, tabby])
    assert cell["image"].tolist() == ["a.jpg"]


def predictions(seed: int = 0, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    true = rng.choice(CATS[:6], n)  # lynx has no image: an empty row
    pred = np.where(rng.random(n) < 0.5, true, rng.choice(CATS + [TIGER, GOLDEN, BALL], n))
    return pd.DataFrame({"model": rng.choice(["a", "b"], n), "image": [f"{t}/{i}.jpg" for i, t in enumerate(true)],
                         "true_wnid": true, "pred_wnid": pred, "prob_1": rng.random(n),
                         "status": np.where(rng.random(n) < 0.1, "failed", "ok")})


def usable_reference(df: pd.DataFrame, model: str, usable=None) -> pd.DataFrame:
    keep = (df["model"] == model) & (df["status"] == "ok")
    if usable is not None:
        keep &= df["image"].isin(usable)
    return df[keep]


@pytest.mark.parametrize("outside", ["ancestor", "other"])
def test_counts_equal_a_crosstab(outside):
    df = predictions()
    usable = set(df["image"].iloc[::3])  # some images excluded on the Images page
    matrix = confusion_matrix(df, "a", CATS, usable=usable, outside=outside)
    ref_rows = usable_reference(df, "a", usable)
    pairs = list(zip(ref_rows["true_wnid"], ref_rows["pred_wnid"]))
    columns = column_of(pairs, CATS, outside=outside)
    column = pd.Series([columns[pair] for pair in pairs], index=ref_rows.index)
    reference = pd.crosstab(ref_rows["true_wnid"], column)
    assert list(matrix.index) == tree_order(CATS)
    assert list(matrix.columns[:7]) == tree_order(CATS)  # the square in-run block, same order as the rows
    assert matrix.dtypes.eq(np.int64).all()
    assert set(matrix.columns[7:]) == set(reference.columns) - set(CATS)
    aligned = reference.reindex(index=matrix.index, columns=matrix.columns, fill_value=0)
    pd.testing.assert_frame_equal(matrix, aligned, check_names=False, check_dtype=False)
    assert matrix.to_numpy().sum() == len(ref_rows)


def test_outside_columns_follow_the_tree_walk():
    df = predictions()
    columns = list(confusion_matrix(df, "a", CATS).columns[7:])
    # carnivore.n.01 comes before feline.n.01 in the walk (an ancestor first); the ball's group
    # (a node far above) before both.
    assert columns.index("other: under carnivore.n.01") < columns.index("other: under feline.n.01")
    ball = column_of([(CATS[0], BALL)], CATS)[CATS[0], BALL]
    assert columns.index(ball) < columns.index("other: under carnivore.n.01")
    assert columns[-1] == "other: under feline.n.01"


def test_row_normalised_rows_sum_to_one_and_empty_rows_are_na():
    df = predictions()
    shares = confusion_matrix(df, "b", CATS, normalise=True)
    lynx = "n02127052"
    assert shares.loc[lynx].isna().all()  # no image of lynx: NA, not 0/0 nor 0
    full = shares.drop(index=lynx)
    assert np.allclose(full.sum(axis=1), 1.0)
    counts = confusion_matrix(df, "b", CATS)
    pd.testing.assert_frame_equal(row_normalise(counts), shares)
    assert counts.loc[lynx].eq(0).all()


def test_true_classes_outside_the_run_get_a_row():
    df = predictions().assign(true_wnid=lambda d: d["true_wnid"].where(d.index != 0, GOLDEN), status="ok")
    matrix = confusion_matrix(df, df["model"].iloc[0], CATS)
    assert GOLDEN in matrix.index and GOLDEN in matrix.columns


def test_cells_list_what_they_count():
    df = predictions(seed=3)
    usable = set(df["image"].iloc[::2])
    for outside in ("ancestor", "other"):
        matrix = confusion_matrix(df, "a", CATS, usable=usable, outside=outside)
        for true in matrix.index:
            for column in matrix.columns:
                images = cell_images(df, "a", true, column, CATS, usable=usable, outside=outside)
                assert len(images) == matrix.loc[true, column], (true, column)
                assert images["image"].isin(usable).all() and (images["true_wnid"] == true).all()
                assert images["prob_1"].is_monotonic_decreasing
    assert list(cell_images(df, "a", CATS[0], CATS[0], CATS).columns) == ["image", "true_wnid", "pred_wnid", "prob_1"]


def test_a_capped_view_keeps_row_totals():
    df = predictions(seed=5)
    full = confusion_matrix(df, "a", CATS)
    shown = most_confused(df, "a", CATS, 3)
    assert len(shown) == 3 and shown == tree_order(shown)
    view = confusion_matrix(df, "a", CATS, shown=shown)
    assert list(view.index) == shown and list(view.columns[:3]) == shown
    assert OTHER_RUN in view.columns
    pd.testing.assert_series_equal(view.sum(axis=1), full.loc[shown].sum(axis=1))
    images = cell_images(df, "a", shown[0], OTHER_RUN, CATS, shown=shown)
    assert len(images) == view.loc[shown[0], OTHER_RUN]
    assert not images["pred_wnid"].isin(shown).any() and images["pred_wnid"].isin(CATS).all()


def test_most_confused_ranks_mistakes():
    rows = [(CATS[0], CATS[1])] * 5 + [(CATS[2], CATS[2])] * 9 + [(CATS[3], TIGER)] * 2
    df = pd.DataFrame({"model": "m", "image": [f"{i}.jpg" for i in range(len(rows))],
                       "true_wnid": [t for t, _ in rows], "pred_wnid": [p for _, p in rows], "prob_1": 0.5})
    assert set(most_confused(df, "m", CATS, 3)) == {CATS[0], CATS[1], CATS[3]}  # no status column: all count


def test_empty_model():
    matrix = confusion_matrix(predictions(), "nobody", CATS, normalise=True)
    assert list(matrix.index) == tree_order(CATS) and matrix.isna().all().all()


def test_sibling_blocks_outline_the_tree():
    from explain.matrix import sibling_blocks

    order = tree_order([GOLDEN, BEAGLE, *CATS])
    blocks = sibling_blocks(order)
    assert [(a, b) for a, b, _ in blocks] == [(2, 6), (7, 8)]  # domestic cats, wildcats; two dogs of different parents
    assert [synset_of(p).name() for _, _, p in blocks] == ["domestic_cat.n.01", "wildcat.n.03"]
    assert sibling_blocks([]) == [] and sibling_blocks([CATS[0]]) == []


def test_the_long_export_has_a_name_beside_every_wnid():
    from explain.export import table_to_csv_bytes
    from explain.matrix import OTHER, OUTSIDE_PREFIX, matrix_long

    under = OUTSIDE_PREFIX + "clothing.n.01"
    counts = pd.DataFrame([[2, 1, 0, 1], [0, 0, 0, 0]], index=pd.Index(["n02123045", "n02123159"], name="true_wnid"),
                          columns=pd.Index(["n02123045", "n02124075", OTHER, under], name="predicted"))
    long = matrix_long(counts)
    assert long[["true_wnid", "predicted", "count"]].values.tolist() == [
        ["n02123045", "n02123045", 2], ["n02123045", "n02124075", 1], ["n02123045", under, 1]]
    assert long["row_share"].tolist() == [2 / 4, 1 / 4, 1 / 4]
    text = table_to_csv_bytes(long).decode()
    header = text.splitlines()[0].split(",")
    assert header[:7] == ["true_wnid", "true_name", "predicted", "predicted_wnid", "predicted_name",
                          "predicted_under_wnid", "predicted_under_name"]
    assert "Egyptian cat" in text
    # A grouped column names the node it groups under, by id and name (a UI review: the CSV could not be joined).
    assert long["predicted_under_wnid"].fillna("").tolist() == ["", "", "n03051540"]
    assert text.splitlines()[-1].split(",")[5:7] == ["n03051540", "clothing"]


def _most_confused_by_the_matrix(df, model, classes, n, usable=None):
    """The ranking as it was computed before: from the whole matrix (outside predictions in OTHER)."""
    counts = confusion_matrix(df, model, classes, usable=usable, outside="other")
    block = counts[counts.index].to_numpy()
    diagonal = np.diag(block)
    mistakes = (counts.sum(axis=1).to_numpy() - diagonal) + (block.sum(axis=0) - diagonal)
    return tree_order([counts.index[i] for i in np.argsort(-mistakes, kind="stable")[:n]])


@pytest.mark.parametrize("seed", range(6))
def test_most_confused_equals_the_ranking_of_the_whole_matrix(seed):
    """most_confused counts mistakes without building the matrix: the same classes as the matrix's counts
    give, ties included, with predictions outside the run, a class WordNet lacks, failed rows, classes
    with no image and an image filter."""
    rng = np.random.default_rng(seed)
    inside = CATS + ["n99999999"]  # a class of the run WordNet 3.0 does not know
    preds = inside + [TIGER, "n07920052"]  # and predictions outside the run
    size = 300
    df = pd.DataFrame({"model": rng.choice(["a", "b"], size), "image": [f"{i}.jpg" for i in range(size)],
                       "true_wnid": rng.choice(inside[:-2] + inside[-1:], size), "pred_wnid": rng.choice(preds, size),
                       "prob_1": rng.random(size), "status": rng.choice(["ok", "ok", "ok", "failed"], size)})
    usable = None if seed % 2 else set(df["image"].sample(frac=0.7, random_state=seed))
    for n in (1, 2, 3, len(inside), 50):
        assert most_confused(df, "a", inside, n, usable=usable) == _most_confused_by_the_matrix(df, "a", inside, n,
                                                                                                usable=usable)
