"""pages.reads's view of a run's usable predictions: a run without a manifest (made from an uploaded
predictions file, explain.export.import_predictions_as_run) counts every status-ok prediction, as
core.runstore.Run.usable_predictions and the metrics do; a run with a manifest only its accepted,
not excluded images. And the Confusions page's cached matrix is explain.matrix's."""
import pandas as pd
import pytest
import streamlit as st

from core.runstore import RunInfo, RunStore

TABBY, TIGER_CAT, EGYPTIAN_CAT, LYNX = "n02123045", "n02123159", "n02124075", "n02127052"
MODEL = "efficientnet_lite0"


@pytest.fixture(autouse=True)
def _fresh_caches():
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _predictions(images: list[str]) -> pd.DataFrame:
    """Two tabbies and two tiger cats; one tabby and one tiger cat wrong; the last row failed."""
    return pd.DataFrame({"model": MODEL, "image": images, "true_wnid": [TABBY, TABBY, TIGER_CAT, TIGER_CAT, TABBY],
                         "pred_wnid": [TABBY, EGYPTIAN_CAT, LYNX, TIGER_CAT, LYNX],
                         "prob_1": [0.9, 0.6, 0.4, 0.8, None], "label_space": "imagenet-1k",
                         "status": ["ok", "ok", "ok", "ok", "failed"]})


def test_a_run_without_a_manifest_counts_every_ok_prediction(tmp_path):
    from explain.export import import_predictions_as_run
    from pages.reads import misclassified_images, usable_files

    file = tmp_path / "theirs.csv"
    _predictions(["a", "b", "c", "d", "e"]).drop(columns="status").iloc[:4].to_csv(file, index=False)
    run, _ = import_predictions_as_run(file, RunStore(tmp_path / "home"), title="theirs")
    assert not run.manifest_path.exists()
    assert usable_files(run) is None  # no manifest: nothing filters the predictions
    wrong = misclassified_images(run, MODEL, TABBY)
    assert wrong["image"].tolist() == ["b"] and wrong["pred_wnid"].tolist() == [EGYPTIAN_CAT]
    assert misclassified_images(run, MODEL, TIGER_CAT)["image"].tolist() == ["c"]
    usable = run.usable_predictions()
    expected = usable[(usable["status"] == "ok") & (usable["pred_wnid"] != usable["true_wnid"])]
    assert sorted(expected["image"]) == ["b", "c"]


def test_a_run_with_a_manifest_counts_its_usable_images_only(tmp_path):
    from pages.reads import misclassified_images, usable_files

    run = RunStore(tmp_path / "home").create_run(RunInfo(run_id="mine", wnids=[TABBY, TIGER_CAT]))
    files = [f"{w}/{i}.jpg" for i, w in enumerate([TABBY, TABBY, TIGER_CAT, TIGER_CAT, TABBY])]
    run.write_manifest(pd.DataFrame({"wnid": [TABBY, TABBY, TIGER_CAT, TIGER_CAT, TABBY], "file": files,
                                     "sha256": [f"{i:064x}" for i in range(5)],
                                     "status": ["accepted", "accepted", "accepted", "accepted", "accepted"],
                                     "excluded": [False, True, False, False, False], "source": "import"}))
    run.append_predictions(_predictions(files))
    assert usable_files(run) == frozenset(files) - {files[1]}
    assert misclassified_images(run, MODEL, TABBY).empty  # its one mistake is an excluded image; the failure is not one
    assert misclassified_images(run, MODEL, TIGER_CAT)["image"].tolist() == [files[2]]


def test_the_mistake_index_equals_a_groupby_of_the_mistakes(tmp_path):
    """misclassified_images is indexed by one sort and the bounds of each (model, true class) run of
    rows: every group equals what groupby(sort=False) gave, rows in stored order, and a class
    without mistakes (or a model without rows) is empty."""
    import numpy as np

    from explain.export import import_predictions_as_run
    from pages.reads import misclassified_images

    rng = np.random.default_rng(3)
    classes = [TABBY, TIGER_CAT, EGYPTIAN_CAT, LYNX]
    n = 400
    df = pd.DataFrame({"model": rng.choice(["m_b", "m_a", "m_c"], n), "image": [f"i{k % 150}" for k in range(n)],
                       "true_wnid": rng.choice(classes, n), "pred_wnid": rng.choice(classes, n),
                       "prob_1": rng.random(n), "label_space": "imagenet-1k"})
    df = df.drop_duplicates(["model", "image"]).reset_index(drop=True)
    file = tmp_path / "theirs.csv"
    df.to_csv(file, index=False)
    run, _ = import_predictions_as_run(file, RunStore(tmp_path / "home"), title="theirs")
    stored = run.read_predictions()
    wrong = stored[stored["pred_wnid"] != stored["true_wnid"]][["model", "true_wnid", "image", "pred_wnid", "prob_1"]]
    groups = {key: g.reset_index(drop=True) for key, g in wrong.groupby(["model", "true_wnid"], sort=False)}
    assert len(groups) == 12
    for model in ("m_a", "m_b", "m_c", "nobody"):
        for true in classes:
            got = misclassified_images(run, model, true)
            if (model, true) in groups:
                pd.testing.assert_frame_equal(got, groups[(model, true)])
            else:
                assert got.empty


def test_the_cached_matrix_is_the_library_matrix_and_follows_new_predictions(tmp_path):
    from explain.matrix import confusion_matrix as library, most_confused
    from explain.export import import_predictions_as_run
    from pages.reads import confusion_matrix

    file = tmp_path / "theirs.csv"
    _predictions(["a", "b", "c", "d", "e"]).drop(columns="status").iloc[:4].to_csv(file, index=False)
    run, _ = import_predictions_as_run(file, RunStore(tmp_path / "home"), title="theirs")
    classes = list(run.info.wnids)
    preds = run.read_predictions()
    for outside in ("ancestor", "other"):
        counts, shown = confusion_matrix(run, MODEL, classes, outside=outside)
        assert shown is None
        pd.testing.assert_frame_equal(counts, library(preds, MODEL, classes, outside=outside))
    counts, shown = confusion_matrix(run, MODEL, classes, cap=1)
    assert shown == most_confused(preds, MODEL, classes, 1)
    pd.testing.assert_frame_equal(counts, library(preds, MODEL, classes, shown=shown))
    counts.iloc[0, 0] = 99  # what the page gets is its own copy: the cache is not changed
    assert confusion_matrix(run, MODEL, classes, cap=1)[0].iloc[0, 0] != 99
    # New predictions change the fingerprint: the matrix is counted again.
    before = int(confusion_matrix(run, MODEL, classes)[0].to_numpy().sum())
    run.append_predictions(pd.DataFrame({"model": MODEL, "image": ["z"], "true_wnid": [TABBY], "pred_wnid": [TABBY],
                                         "prob_1": [0.7], "label_space": "imagenet-1k", "status": "ok"}))
    assert int(confusion_matrix(run, MODEL, classes)[0].to_numpy().sum()) == before + 1
    # The classes are keyed by a digest (pages.reads.classes_key), not hashed one by one: other classes, or
    # the same in another order, are another matrix.
    fewer = classes[:-1]
    pd.testing.assert_frame_equal(confusion_matrix(run, MODEL, fewer)[0],
                                  library(run.read_predictions(), MODEL, fewer))
    reordered = classes[::-1]
    pd.testing.assert_frame_equal(confusion_matrix(run, MODEL, reordered)[0],
                                  library(run.read_predictions(), MODEL, reordered))


def test_the_classes_key_tells_every_list_of_classes_apart():
    from pages.reads import classes_key

    lists = [(), ("a",), ("a", "b"), ("b", "a"), ("ab",), ("a", "bc"), ("ab", "c"), ("a", "b", ""), ("",),
             ("a\0", "b"), ("a", "\0b"), ('a", "b',), ("a\\", "b")]
    assert len({classes_key(c) for c in lists}) == len(lists)
    assert classes_key(("a", "b")) == classes_key(("a", "b"))
