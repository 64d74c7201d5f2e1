"""Frozen features as part files (core.features): the layout classify --features writes and the
probe stage reads."""
import json

import numpy as np
import pandas as pd
import pytest

from core import features as F
from core.runstore import RunStore


def _index(images, wnid="n02123045"):
    return pd.DataFrame({"image": images, "true_wnid": wnid})


@pytest.fixture
def run():
    return RunStore().create_run(title="features")


def test_round_trip_sorted_by_image_and_last_part_wins(run):
    a = np.arange(6, dtype=np.float64).reshape(3, 2)
    F.write_feature_part(run, "timm/m", _index(["n1/c.jpg", "n1/a.jpg", "n1/b.jpg"]), a)
    F.write_feature_part(run, "timm/m", _index(["n1/b.jpg", "n2/d.jpg"], "n2"), np.array([[9, 9], [7, 7]]))
    index, array = F.read_features(run, "timm/m")
    assert list(index.columns) == ["image", "true_wnid"]
    assert list(index["image"]) == ["n1/a.jpg", "n1/b.jpg", "n1/c.jpg", "n2/d.jpg"]
    assert list(index["true_wnid"]) == ["n02123045", "n2", "n02123045", "n2"]  # b: the latest part
    assert array.dtype == np.float32 and array.shape == (4, 2)
    np.testing.assert_array_equal(array, [[2, 3], [9, 9], [0, 1], [7, 7]])
    folder = run.path / "features" / "timm_m"
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["model"] == "timm/m" and meta["dim"] == 2 and meta["kind"] == "pre-logit" and meta["normalised"] is False
    assert len(list(folder.glob("part-*.npy"))) == len(list(folder.glob("part-*.parquet"))) == 2
    assert F.feature_models(run) == ["timm/m"]
    F.compact_features(run, "timm/m")
    assert len(list(folder.glob("part-*.parquet"))) == 1
    index2, array2 = F.read_features(run, "timm/m")
    assert index2.equals(index) and np.array_equal(array2, array)


def test_empty_and_resume_set(run, tmp_path):
    index, array = F.read_features(run, "m")
    assert index.empty and array.shape == (0, 0)
    assert F.featured_images(run, "m") == set() and F.feature_models(run) == []
    F.write_feature_part(run, "m", _index(["x/1.jpg", "x/2.jpg"]), np.ones((2, 4)), kind="image-embedding")
    assert F.featured_images(run, "m") == {"x/1.jpg", "x/2.jpg"}
    # a plain folder works the same
    F.write_feature_part(tmp_path, "m", _index(["y.jpg"]), np.ones((1, 3)))
    assert F.featured_images(tmp_path, "m") == {"y.jpg"} and (tmp_path / "features" / "m" / "meta.json").exists()


def test_a_different_dim_or_kind_is_refused(run):
    F.write_feature_part(run, "m", _index(["a"]), np.ones((1, 4)))
    with pytest.raises(F.FeatureStoreError, match="dim 4"):
        F.write_feature_part(run, "m", _index(["b"]), np.ones((1, 5)))
    with pytest.raises(F.FeatureStoreError, match="image-embedding"):
        F.write_feature_part(run, "m", _index(["b"]), np.ones((1, 4)), kind="image-embedding")
    with pytest.raises(F.FeatureStoreError, match="index rows"):
        F.write_feature_part(run, "m", _index(["b", "c"]), np.ones((1, 4)))
    with pytest.raises(F.FeatureStoreError, match="not a usable model id"):
        F.feature_dir(run, "../x")


def test_leftovers_of_a_killed_writer_are_ignored_then_swept(run):
    F.write_feature_part(run, "m", _index(["a"]), np.ones((1, 2)))
    folder = run.path / "features" / "m"
    # killed between the two renames: an array without its index; killed mid-write: temp files
    (folder / "part-20991231235959000000-abcdef.npy").write_bytes(b"\x93NUMPY half")
    (folder / ".part-20991231235959000000-abcdef.parquet.0123456789ab.tmp").write_bytes(b"PAR1")
    (folder / ".part-20991231235959000000-abcdef.npy.0123456789ab.tmp").write_bytes(b"")
    index, array = F.read_features(run, "m")
    assert list(index["image"]) == ["a"] and array.shape == (1, 2)
    assert F.featured_images(run, "m") == {"a"}
    assert F.sweep_features(run) == 3
    assert sorted(p.suffix for p in folder.iterdir()) == [".json", ".npy", ".parquet"]


def test_a_damaged_part_is_one_line_error(run):
    F.write_feature_part(run, "m", _index(["a", "b"]), np.ones((2, 3)))
    npy = next((run.path / "features" / "m").glob("part-*.npy"))
    np.save(npy, np.ones((2, 4), dtype=np.float32))  # wrong dim
    with pytest.raises(F.FeatureStoreError, match=r"not float32 \[rows, 3\]") as exc:
        F.read_features(run, "m")
    assert "\n" not in str(exc.value) and "--features" in str(exc.value)
    np.save(npy, np.ones((1, 3), dtype=np.float32))  # fewer vectors than index rows
    with pytest.raises(F.FeatureStoreError, match="out-of-range rows"):
        F.read_features(run, "m")
    npy.write_bytes(npy.read_bytes()[:40])  # truncated
    with pytest.raises(F.FeatureStoreError, match="damaged"):
        F.read_features(run, "m")
    npy.unlink()
    with pytest.raises(F.FeatureStoreError, match="has no"):
        F.read_features(run, "m")
    parquet = next((run.path / "features" / "m").glob("part-*.parquet"))
    parquet.write_bytes(b"not parquet")
    with pytest.raises(F.FeatureStoreError, match="damaged"):
        F.featured_images(run, "m")


def test_never_pickle(run):
    F.write_feature_part(run, "m", _index(["a"]), np.ones((1, 2)))
    npy = next((run.path / "features" / "m").glob("part-*.npy"))
    assert np.load(npy, allow_pickle=False).dtype == np.float32  # what is written loads without pickle
    np.save(npy, np.array([[{"x": 1}, None]], dtype=object), allow_pickle=True)  # a pickled object array
    with pytest.raises(F.FeatureStoreError, match="damaged"):
        F.read_features(run, "m")
    with pytest.raises(F.FeatureStoreError, match="2-D numeric"):
        F.write_feature_part(run, "m", _index(["b"]), np.array([[object(), 1]], dtype=object))


# ---------------------------------------------------------------- issue 22 item 18: confined reads
def _finishes(fn, timeout: float = 10.0):
    """Run ``fn`` in a thread: its result or exception; AssertionError when it is still blocked."""
    import threading

    box = {}

    def target():
        try:
            box["value"] = fn()
        except Exception as exc:  # handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked (reading a FIFO?)"
    return box


def _unblock(fifo) -> None:
    """A reader still blocked on ``fifo`` (the defect) gets end-of-file."""
    import os

    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize("what", ["meta.json", "part.npy"])
def test_a_fifo_in_a_features_folder_is_refused_not_waited_on(run, what):
    import os

    F.write_feature_part(run, "m", _index(["a"]), np.ones((1, 2)))
    folder = run.path / "features" / "m"
    target = folder / "meta.json" if what == "meta.json" else next(folder.glob("part-*.npy"))
    target.unlink()
    os.mkfifo(target)
    try:
        box = _finishes(lambda: F.read_features(run, "m"))
        assert isinstance(box.get("error"), F.FeatureStoreError), box
        message = str(box["error"])
        assert "not a regular file" in message and str(target) in message and "\n" not in message
        assert _finishes(lambda: F.feature_models(run)).get("value") == ([] if what == "meta.json" else ["m"])
    finally:
        _unblock(target)


def test_a_meta_json_or_part_linked_out_of_the_run_is_refused(run, tmp_path):
    F.write_feature_part(run, "m", _index(["a"]), np.ones((1, 2)))
    folder = run.path / "features" / "m"
    outside = tmp_path / "outside.json"
    outside.write_text((folder / "meta.json").read_text())
    (folder / "meta.json").unlink()
    (folder / "meta.json").symlink_to(outside)
    with pytest.raises(F.FeatureStoreError, match="outside the run's features folder") as exc:
        F.read_feature_meta(run, "m")
    assert str(folder / "meta.json") in str(exc.value)
    assert F.feature_models(run) == []  # not listed either
    (folder / "meta.json").unlink()
    outside.rename(folder / "meta.json")
    npy = next(folder.glob("part-*.npy"))
    moved = tmp_path / "outside.npy"
    npy.rename(moved)
    npy.symlink_to(moved)
    with pytest.raises(F.FeatureStoreError, match="outside the run's features folder"):
        F.read_features(run, "m")
    # a features folder that is itself a link out of the run
    other = F.write_feature_part(tmp_path / "elsewhere", "m2", _index(["a"]), np.ones((1, 2))).parent
    (run.path / "features" / "m2").symlink_to(other)
    with pytest.raises(F.FeatureStoreError, match="outside the run's features folder"):
        F.read_features(run, "m2")
