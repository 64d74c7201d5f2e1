"""explain.browse_store: Browse's per-image table stored after a build and read back equal, only while
the run is as it was (predictions, manifest, curation, label space) and the file is the one written;
special files and linked folders are never read or written through; a run that cannot be written
still gets its table. Also explain.browse.selection_images against the way it was computed before."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from core.runstore import RunStore, StoreError
from core.tables import read_stored_buffer
from explain import browse_store
from explain.browse import run_image_table, selection_images
from explain.browse_store import ensure_browse_table, read_browse_table, write_browse_table

from tests.explain.test_artefact import CATS, _predictions
from core.runstore import RunInfo

SPACE = "imagenet-1k"


@pytest.fixture
def run():
    run = RunStore().create_run(RunInfo(run_id="browse-store", wnids=CATS))
    true = np.repeat(CATS, 5)
    files = [f"{w}/{i:04d}.jpg" for i, w in enumerate(true)]
    run.write_manifest(pd.DataFrame({"wnid": true, "file": files, "status": "accepted", "excluded": False}))
    for m, model in enumerate(["model_a", "model_b"]):
        run.append_predictions(_predictions(files, true, model, seed=m))
    return run


def _counting_build(run, calls: list):
    def build():
        calls.append(1)
        return run_image_table(run, "raw")
    return build


def test_a_build_is_stored_and_read_back_equal_until_the_run_changes(run):
    from core.curation import record

    calls = []
    first = ensure_browse_table(run, "raw", SPACE, _counting_build(run, calls))
    assert calls == [1] and (run.metrics_dir / "browse.arrow").is_file()
    again = ensure_browse_table(run, "raw", SPACE, _counting_build(run, calls))
    assert calls == [1], "the stored table is read, not built again"
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(again, run_image_table(run, "raw"))
    assert read_browse_table(run, "raw", "imagenet-21k") is None, "other names: another table"
    # a tag changes the table (its tags column, and error types may follow the curation): built again
    image = first["image"].iloc[0]
    record(run, "tag", [image], "blurry")
    tagged = ensure_browse_table(run, "raw", SPACE, _counting_build(run, calls))
    assert calls == [1, 1] and set(tagged.loc[tagged["image"] == image, "tags"]) == {"blurry"}
    assert ensure_browse_table(run, "raw", SPACE, _counting_build(run, calls))["tags"].equals(tagged["tags"])
    assert calls == [1, 1]
    # a part file more: built again
    run.append_predictions(_predictions([f"{CATS[0]}/extra.jpg"], [CATS[0]], "model_c", seed=5))
    assert read_browse_table(run, "raw", SPACE) is None


def test_damage_and_hand_edits_are_built_again_never_an_error(run):
    import pyarrow as pa

    ensure_browse_table(run, "raw", SPACE)
    path, claim = run.metrics_dir / "browse.arrow", run.metrics_dir / "browse.json"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert read_browse_table(run, "raw", SPACE) is None, "a flipped byte: its sha256 differs"
    # a well-formed file with other columns, its hash written into the fingerprint by hand
    other = pa.table({"model": ["m"]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, other.schema) as writer:
        writer.write_table(other)
    path.write_bytes(sink.getvalue().to_pybytes())
    import hashlib

    stored = json.loads(claim.read_text())
    claim.write_text(json.dumps({**stored, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}))
    assert read_browse_table(run, "raw", SPACE) is None, "columns that are not the table's"
    path.write_bytes(b"not arrow at all")
    claim.write_text(json.dumps({**stored, "sha256": hashlib.sha256(b"not arrow at all").hexdigest()}))
    assert read_browse_table(run, "raw", SPACE) is None
    claim.write_text("{not json")
    assert read_browse_table(run, "raw", SPACE) is None
    pd.testing.assert_frame_equal(ensure_browse_table(run, "raw", SPACE), run_image_table(run, "raw"))
    assert read_browse_table(run, "raw", SPACE) is not None, "built and stored again"


def test_special_files_and_links_are_never_read_or_written_through(run, tmp_path):
    ensure_browse_table(run, "raw", SPACE)
    path = run.metrics_dir / "browse.arrow"
    path.unlink()
    os.mkfifo(path)
    assert read_browse_table(run, "raw", SPACE) is None  # at once: a FIFO is never waited on
    path.unlink()
    outside = tmp_path / "outside.arrow"
    outside.write_bytes(b"x" * 100)
    path.symlink_to(outside)
    assert read_browse_table(run, "raw", SPACE) is None
    assert read_stored_buffer(path) is None and read_stored_buffer(outside) == bytearray(b"x" * 100)
    assert read_stored_buffer(outside, max_bytes=99) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.metrics_dir / "curated").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="is a link or a file"):
        write_browse_table(run, "curated", run_image_table(run, "raw"), browse_store.browse_fingerprint(run, "curated",
                                                                                                      SPACE))
    assert list(elsewhere.iterdir()) == [] and outside.read_bytes() == b"x" * 100


def test_a_run_that_cannot_be_written_still_gets_its_table(run, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(browse_store, "write_bytes_atomic", refuse)
    table = ensure_browse_table(run, "raw", SPACE)
    pd.testing.assert_frame_equal(table, run_image_table(run, "raw"))
    assert not (run.metrics_dir / "browse.json").exists()
    with pytest.raises(StoreError, match="No space left on device; check the folder"):
        write_browse_table(run, "raw", table, browse_store.browse_fingerprint(run, "raw", SPACE))


def _selection_before(rows: pd.DataFrame, sort: str) -> pd.DataFrame:
    """selection_images as it was (every row's strings taken in order, then drop_duplicates)."""
    from explain.browse import _sort_codes

    frame = rows[["image", "true_wnid"]].copy()
    if sort == "class":
        order = np.lexsort((_sort_codes(frame["image"]), _sort_codes(frame["true_wnid"])))
    else:
        column = "margin" if sort == "margin" else "prob_1"
        values = rows[column].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        key = -values if sort == "confident" else values
        key = np.where(np.isnan(key), np.inf, key)
        order = np.lexsort((_sort_codes(frame["image"]), _sort_codes(frame["true_wnid"]), key))
    return frame.take(order).drop_duplicates("image").reset_index(drop=True)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sort", ["class", "confident", "unsure", "margin"])
def test_selection_images_orders_as_before(seed, sort):
    rng = np.random.default_rng(seed)
    n = 300
    images = np.array([f"img{i}.jpg" for i in rng.integers(0, 60, n)], dtype=object)
    images[rng.random(n) < 0.05] = None  # images without a name are one image, as drop_duplicates counts them
    true = np.array(CATS, dtype=object)[rng.integers(0, len(CATS), n)]
    probs = rng.choice([0.1, 0.5, 0.9, np.nan], n)  # ties and unknowns
    rows = pd.DataFrame({"image": pd.array(images, dtype="string"), "true_wnid": pd.array(true, dtype="string"),
                         "prob_1": pd.array(probs, dtype="Float64"), "margin": pd.array(probs / 2, dtype="Float64")})
    pd.testing.assert_frame_equal(selection_images(rows, sort), _selection_before(rows, sort))


@pytest.mark.parametrize("storage", ["pyarrow", "python"])
def test_sort_codes_and_last_rows_are_pandas_own(storage):
    """The integer shortcuts behind the first load (Arrow's ranks, codes for drop_duplicates) order and
    pick as pandas does, NA and characters outside ASCII included."""
    from explain.browse import _last_of_each, _sort_codes

    rng = np.random.default_rng(0)
    words = np.array(["tabby", "Tabby", "é", "z", "😀", "a b", "", "ß", "n02123045"], dtype=object)
    values = words[rng.integers(0, len(words), 500)]
    values[rng.random(500) < 0.1] = None
    series = pd.Series(pd.array(values, dtype=pd.StringDtype(storage)))
    expected, _ = pd.factorize(series, sort=True)
    expected = np.where(expected < 0, expected.max() + 1, expected)
    np.testing.assert_array_equal(_sort_codes(series), expected)
    frame = pd.DataFrame({"image": series, "n": np.arange(500)})
    pd.testing.assert_frame_equal(frame.take(_last_of_each(frame["image"])), frame.drop_duplicates("image", keep="last"))
