"""The embedding map's projection and table (explain.embedding): PCA equals scikit-learn's on the
L2-normalised features, t-SNE is the same for the same seed, small inputs work, and the table joins
each point with its own image's stored prediction, name and WordNet relation."""
import numpy as np
import pandas as pd
import pytest

from explain.embedding import (COLUMNS, EmbeddingError, embedding_table, explained_variance, normalise, project,
                               select_images, tsne_perplexity)

TABBY, TIGER_CAT, PERSIAN, COUGAR, LAMP = "n02123045", "n02123159", "n02123394", "n02125311", "n04380533"


def _features(n=40, dim=16, seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, dim)) * 3
    return (centres[np.arange(n) % 4] + rng.normal(size=(n, dim))).astype(np.float32)


def test_normalise_rows_and_zero_rows():
    x = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]], dtype=np.float32)
    out = normalise(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]])
    with pytest.raises(EmbeddingError):
        normalise(np.zeros(3))


def test_pca_is_scikit_learns_on_normalised_features():
    from sklearn.decomposition import PCA

    x = _features()
    expected = PCA(n_components=2, svd_solver="full").fit_transform(
        x.astype(np.float64) / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True))
    got = project(x)  # pca is the default
    assert got.shape == (40, 2) and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, atol=1e-10)
    np.testing.assert_array_equal(project(x, "pca"), got)
    # scale does not matter: each row is normalised first
    np.testing.assert_allclose(project(x * np.arange(1, 41, dtype=np.float32)[:, None]), got, atol=1e-5)
    first, second = explained_variance(x)
    assert 0 < second <= first <= 1


def test_tsne_same_seed_same_map_and_keeps_clusters():
    x = _features()
    a = project(x, "tsne", seed=3)
    b = project(x, "tsne", seed=3)
    assert a.shape == (40, 2)
    np.testing.assert_array_equal(a, b)
    # four well separated clusters stay together: each point's nearest neighbour is of its cluster
    d = np.linalg.norm(a[:, None] - a[None], axis=2)
    np.fill_diagonal(d, np.inf)
    assert (d.argmin(axis=1) % 4 == np.arange(40) % 4).mean() > 0.9


def test_tsne_perplexity_capped_for_small_runs():
    assert tsne_perplexity(1000) == 30.0
    assert tsne_perplexity(30) == pytest.approx(29 / 3)
    assert tsne_perplexity(3) == 1.0
    out = project(_features(n=5), "tsne")
    assert out.shape == (5, 2) and np.isfinite(out).all()


def test_tiny_inputs_and_unknown_method():
    assert project(np.zeros((0, 8)), "pca").shape == (0, 2)
    np.testing.assert_array_equal(project(np.ones((1, 8))), [[0.0, 0.0]])
    two = project(np.array([[1.0, 0.0], [0.0, 1.0]]), "tsne")
    assert two.shape == (2, 2) and two[0, 0] == pytest.approx(-two[1, 0])  # PCA's line for two points
    assert project(np.array([[1.0], [2.0], [-1.0]])).shape == (3, 2)  # one dimension: y is 0
    with pytest.raises(EmbeddingError, match="allowed: pca, tsne"):
        project(_features(), "umap")


def _prediction_rows() -> pd.DataFrame:
    rows = []

    def add(model, image, true, pred, prob, status="ok"):
        rows.append({"model": model, "image": image, "true_wnid": true, "pred_wnid": pred,
                     **{f"pred_wnid_{k}": None for k in range(2, 6)}, "prob_1": prob,
                     **{f"prob_{k}": None for k in range(2, 6)}, "label_space": "imagenet-1k",
                     "status": status, "reason": None})

    add("lite0", f"{TABBY}/a.png", TABBY, TABBY, 0.9)           # correct
    add("lite0", f"{TABBY}/b.png", TABBY, TIGER_CAT, 0.5)       # sibling
    add("lite0", f"{COUGAR}/a.png", COUGAR, LAMP, 0.3)          # distant
    add("lite0", f"{PERSIAN}/a.png", PERSIAN, TABBY, 0.2, status="failed")  # not usable: no prediction
    add("lite1", f"{TABBY}/a.png", TABBY, LAMP, 0.8)            # another model: never joined to lite0's points
    add("lite1", f"{COUGAR}/a.png", COUGAR, COUGAR, 0.7)
    return pd.DataFrame(rows)


def test_table_joins_each_point_with_its_models_prediction():
    index = pd.DataFrame({"image": [f"{COUGAR}/a.png", f"{PERSIAN}/a.png", f"{TABBY}/a.png", f"{TABBY}/b.png"],
                          "true_wnid": [COUGAR, PERSIAN, TABBY, TABBY]})
    coords = np.arange(8, dtype=np.float64).reshape(4, 2)
    table = embedding_table(index, coords, _prediction_rows(), "lite0", cache_dir=False)
    assert list(table.columns) == list(COLUMNS)
    assert table["image"].tolist() == index["image"].tolist()  # the index's order, point i at coords[i]
    np.testing.assert_array_equal(table[["x", "y"]].to_numpy(), coords)
    by = table.set_index("image")
    assert by.loc[f"{TABBY}/a.png", "pred_wnid"] == TABBY and bool(by.loc[f"{TABBY}/a.png", "correct"])
    assert by.loc[f"{TABBY}/a.png", "relation"] == "same" and by.loc[f"{TABBY}/a.png", "prob_1"] == 0.9
    assert by.loc[f"{TABBY}/b.png", "pred_name"] == "tiger cat" and by.loc[f"{TABBY}/b.png", "relation"] == "sibling"
    assert not by.loc[f"{TABBY}/b.png", "correct"]
    assert by.loc[f"{COUGAR}/a.png", "pred_name"] == "table lamp" and by.loc[f"{COUGAR}/a.png", "relation"] == "distant"
    assert by.loc[f"{COUGAR}/a.png", "true_name"] == "cougar"
    persian = by.loc[f"{PERSIAN}/a.png"]  # a failed prediction: the point stays, its prediction is NA
    assert pd.isna(persian["pred_wnid"]) and pd.isna(persian["correct"]) and pd.isna(persian["relation"])
    assert persian["true_name"] == "Persian cat"
    # the relation is the Browse table's (explain.browse.image_table), same vocabulary
    from explain.browse import image_table

    browse = image_table(_prediction_rows(), None, cache_dir=False)
    browse = browse[browse["model"] == "lite0"].set_index("image")
    for image in (f"{TABBY}/a.png", f"{TABBY}/b.png", f"{COUGAR}/a.png"):
        assert by.loc[image, "relation"] == browse.loc[image, "relation"]
        assert by.loc[image, "pred_wnid"] == browse.loc[image, "pred_wnid_1"]


def test_table_of_a_model_without_predictions_keeps_every_point():
    index = pd.DataFrame({"image": [f"{TABBY}/a.png"], "true_wnid": [TABBY]})
    table = embedding_table(index, np.zeros((1, 2)), _prediction_rows(), "lite9", cache_dir=False)
    assert len(table) == 1 and pd.isna(table["pred_wnid"].iloc[0]) and table["true_name"].iloc[0] == "tabby"
    with pytest.raises(EmbeddingError, match="coordinates"):
        embedding_table(index, np.zeros((2, 2)), _prediction_rows(), "lite0")


def test_select_images_keeps_rows_and_features_together():
    index = pd.DataFrame({"image": ["a", "b", "c"], "true_wnid": [TABBY, TABBY, COUGAR]})
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    kept, feats = select_images(index, x, {"a", "c"})
    assert kept["image"].tolist() == ["a", "c"] and kept.index.tolist() == [0, 1]
    np.testing.assert_array_equal(feats, x[[0, 2]])
    all_index, all_feats = select_images(index, x, None)
    assert len(all_index) == 3 and all_feats.shape == (3, 2)
    with pytest.raises(EmbeddingError):
        select_images(index, x[:2], None)
