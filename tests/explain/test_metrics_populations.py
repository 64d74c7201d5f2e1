"""Issue 22 items 12 and 13: one population per per-model row, and hierarchical accuracy for any truth.

12. A per-model row read "18 images, 13 mistakes, accuracy 83.3 %" when the run had an unseen class:
    accuracy over the in-space classes, images, mistakes and sibling % over all. Now every column of
    a per-model row is over its in-space classes' predictions (n of them); the unseen ones are the
    n_unseen / *_unseen columns, and n_failed counts rows whatever their class (documented).
13. An unseen class (coffee, outside ImageNet-1k) predicted as its hyponym (espresso, an ImageNet-1k
    class) showed 6 mistakes and hierarchical accuracy NA: a hyponym prediction is hierarchically right
    whatever the truth, so accuracy_hier is defined for it and n_mistakes_hier counts it as no mistake.
"""
import pandas as pd
import pytest

from explain.metrics import column_docs, compute_metric_tables

TABBY, TIGER_CAT, EGYPTIAN, PERSIAN, SIAMESE = "n02123045", "n02123159", "n02124075", "n02123394", "n02123597"
COFFEE, ESPRESSO = "n07929519", "n07920052"  # coffee.n.01 (not in ImageNet-1k) and espresso.n.01, a kind of coffee


def _run() -> pd.DataFrame:
    rows = []

    def add(true, pred, count):
        for _ in range(count):
            others = [w for w in (TABBY, TIGER_CAT, EGYPTIAN, PERSIAN, SIAMESE, ESPRESSO) if w != pred][:4]
            rows.append({"model": "resnet", "image": f"{len(rows)}.jpg", "true_wnid": true, "pred_wnid": pred,
                         **{f"pred_wnid_{k}": others[k - 2] for k in range(2, 6)}, "label_space": "imagenet-1k",
                         "status": "ok"})

    add(TABBY, TABBY, 10)
    add(TABBY, TIGER_CAT, 1)  # a sibling
    add(TABBY, EGYPTIAN, 1)  # a sibling
    add(COFFEE, ESPRESSO, 6)  # the unseen class, always predicted as its hyponym
    rows.append({**rows[0], "image": "broken.jpg", "pred_wnid": None, "status": "failed",
                 **{f"pred_wnid_{k}": None for k in range(2, 6)}})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tables():
    return compute_metric_tables(_run(), cache_dir=False)


def test_a_per_model_row_is_over_its_in_space_classes_only(tables):
    row = tables.per_model.iloc[0]
    assert (row["n"], row["n_mistakes"], row["n_unseen"]) == (12, 2, 6)  # was n 18, n_mistakes 8
    assert row["accuracy"] == pytest.approx(10 / 12)
    assert row["sibling_count"] == 2 and row["sibling_rate"] == 1.0  # was 2 of 8 mistakes
    assert row["severity"] == pytest.approx(1.0)  # the two siblings, not the unseen class's rows
    assert row["path_all"] == pytest.approx((10 * 1.0 + 2 * (1 / 3)) / 12)
    assert row["n_failed"] == 1
    per_class = tables.per_class.set_index("true_wnid")
    assert row["n"] + row["n_unseen"] == per_class["n"].sum()


def test_the_column_help_states_the_population():
    docs = column_docs("per_model")
    for column in ("n", "n_mistakes", "accuracy", "sibling_rate", "path_mistakes", "severity", "hypernym_count"):
        assert "in-space" in docs[column], (column, docs[column])
    assert "whatever their class" in docs["n_failed"]
    assert "n_unseen" in docs["n"]


def test_hierarchical_accuracy_is_defined_for_an_unseen_truth(tables):
    coffee = tables.per_class.set_index("true_wnid").loc[COFFEE]
    assert coffee["in_label_space"] == False  # noqa: E712
    assert pd.isna(coffee["accuracy"])  # strict accuracy: NA, the model cannot name coffee
    assert coffee["accuracy_hier"] == 1.0  # was NA: espresso is a kind of coffee
    assert coffee["n_mistakes"] == 6 and coffee["n_mistakes_hier"] == 0
    assert coffee["hyponym_count"] == 6


def test_hierarchical_mistakes_per_model_and_class(tables):
    tabby = tables.per_class.set_index("true_wnid").loc[TABBY]
    assert tabby["n_mistakes_hier"] == 2 and tabby["accuracy_hier"] == pytest.approx(10 / 12)
    row = tables.per_model.iloc[0]
    assert row["n_mistakes_hier"] == 2 and row["accuracy_hier"] == pytest.approx(10 / 12)
