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

from core.runstore import StoreError
from core.tables import read_stored_buffer
from explain import browse_store
from explain.browse import run_image_table, selection_images
from explain.browse_store import ensure_browse_table, read_browse_table, write_browse_table

from tests.explain.test_artefact import CATS, _predictions, make_run

SPACE = "imagenet-1k"


@pytest.fixture
def run():
    return make_run("browse-store", 5)


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
    assert read_stored_buffer(path, 100) is None and read_stored_buffer(outside, 100) == bytearray(b"x" * 100)
    assert read_stored_buffer(outside, 99) is None and read_stored_buffer(outside, 101) is None, "exactly its size"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.metrics_dir / "curated").symlink_to(elsewhere)
    # Nor read through: a curated table and its claim moved out of the run and linked back are no table
    # (hostile campaign: the linked folder's table was read as the run's).
    ensure_browse_table(run, "raw", SPACE)
    for name in ("browse.arrow", "browse.json"):
        (elsewhere / name).write_bytes((run.metrics_dir / name).read_bytes())
    claim = json.loads((elsewhere / "browse.json").read_text())
    claim.update(browse_store.browse_fingerprint(run, "curated", SPACE))
    (elsewhere / "browse.json").write_text(json.dumps(claim))
    assert read_browse_table(run, "curated", SPACE) is None
    (elsewhere / "browse.arrow").unlink()
    (elsewhere / "browse.json").unlink()
    with pytest.raises(StoreError, match="is a link or a file"):
        write_browse_table(run, "curated", run_image_table(run, "raw"), browse_store.browse_fingerprint(run, "curated",
                                                                                                      SPACE))
    assert list(elsewhere.iterdir()) == [] and outside.read_bytes() == b"x" * 100


def test_a_file_put_in_its_place_is_refused_before_arrow_reads_it(run, monkeypatch):
    """Hostile campaign: a sparse 8 GiB file or a small compressed bomb in browse.arrow took 42-52 s and
    8 GiB of memory to refuse; now the size claimed in browse.json and the checksum come first."""
    import pyarrow as pa

    ensure_browse_table(run, "raw", SPACE)
    path = run.metrics_dir / "browse.arrow"
    path.unlink()
    with open(path, "wb") as handle:
        handle.truncate(8 << 30)  # sparse: no disk used
    assert read_browse_table(run, "raw", SPACE) is None
    path.unlink()
    arrow = pa.Table.from_pandas(run_image_table(run, "raw").astype(browse_store.DTYPES), preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, arrow.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(arrow)
    bomb = sink.getvalue().to_pybytes()
    path.write_bytes(bomb)
    parsed = []
    monkeypatch.setattr(browse_store, "_parse", lambda data: parsed.append(1))
    claim = run.metrics_dir / "browse.json"
    claim.write_text(json.dumps({**json.loads(claim.read_text()), "bytes": len(bomb)}))
    assert read_browse_table(run, "raw", SPACE) is None and parsed == [], "its checksum is checked before Arrow reads it"


def test_arrow_types_other_than_the_writers_are_refused_even_with_their_checksum(run):
    import pyarrow as pa

    table = run_image_table(run, "raw")
    ensure_browse_table(run, "raw", SPACE)
    claim = run.metrics_dir / "browse.json"
    for column, arrow_type in (("prob_1", pa.int64()), ("true_name", pa.string()), ("correct", pa.int8())):
        arrow = pa.Table.from_pandas(table.astype(browse_store.DTYPES), preserve_index=False)
        fields = [pa.field(c, arrow_type if c == column else arrow.schema.field(c).type) for c in arrow.column_names]
        values = table.astype(browse_store.DTYPES)
        if column == "prob_1":
            values[column] = values[column].fillna(0).astype("int64")
        elif column == "correct":
            values[column] = values[column].fillna(False).astype("int8")
        arrow = pa.Table.from_pandas(values, preserve_index=False).cast(pa.schema(fields, metadata=arrow.schema.metadata))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, arrow.schema) as writer:
            writer.write_table(arrow)
        data = sink.getvalue().to_pybytes()
        (run.metrics_dir / "browse.arrow").write_bytes(data)
        claim.write_text(json.dumps({**json.loads(claim.read_text()), "bytes": len(data),
                                     "sha256": browse_store.digest(data)}))
        assert read_browse_table(run, "raw", SPACE) is None, column


def _store_with_claim(run, arrow, options=None) -> None:
    """Write ``arrow`` as the Browse table with a claim rewritten to match it (a forged claim)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, arrow.schema, options=options) as writer:
        writer.write_table(arrow)
    data = sink.getvalue().to_pybytes()
    claim = run.metrics_dir / "browse.json"
    (run.metrics_dir / "browse.arrow").write_bytes(data)
    claim.write_text(json.dumps({**json.loads(claim.read_text()), "bytes": len(data), "sha256": browse_store.digest(data)}))


def _with_ranks(written, table):
    """``written`` (the table's Arrow columns) with the rank columns write_browse_table adds."""
    import pyarrow as pa

    from explain.browse import table_codes

    codes = table_codes(table)
    for column, ranks in (("image_rank", codes.image), ("true_rank", codes.true)):
        written = written.append_column(column, pa.array(ranks.astype(np.int32)))
    return written


def test_the_stored_ranks_are_the_tables_and_forged_ones_are_refused(run):
    """The ranks stored with the table (browse_store.CODE_COLUMNS) are explain.browse.table_codes' of it; ranks
    made to match a forged claim are refused where one row of each rank shows they cannot be: out of range,
    a rank unused, values out of order, a missing value before the last rank."""
    import pyarrow as pa

    from explain.browse import table_codes

    table = run_image_table(run, "raw")
    ensure_browse_table(run, "raw", SPACE)
    stored, codes = browse_store.ensure_browse(run, "raw", SPACE, lambda: pytest.fail("read, not built"))
    want = table_codes(table)
    np.testing.assert_array_equal(codes.image, want.image)
    np.testing.assert_array_equal(codes.true, want.true)
    assert list(codes.images) == list(want.images) == sorted(set(table["image"]))
    assert not codes.image.flags.writeable and not codes.true.flags.writeable, "shared by every session"
    built, built_codes = browse_store.ensure_browse(run, "raw", SPACE, lambda: table, force=True)
    assert list(built_codes.images) == list(want.images)

    written = _with_ranks(pa.Table.from_pandas(table.astype(browse_store.DTYPES), preserve_index=False)
                          .combine_chunks(), table)
    written = written.cast(pa.schema([pa.field(c, pa.large_string() if browse_store.DTYPES.get(c) == "string"
                                               else written.schema.field(c).type) for c in written.column_names],
                                     metadata=written.schema.metadata))
    _store_with_claim(run, written)
    assert read_browse_table(run, "raw", SPACE) is not None, "the forger's file, ranks right: read"
    ranks = want.image.astype(np.int32)
    forged = {"out of range": np.where(ranks == ranks.max(), len(ranks), ranks),
              "negative": np.where(ranks == 0, -1, ranks),
              "a rank unused": np.where(ranks == 1, 2, ranks),
              "out of order": np.where(ranks == 0, 1, np.where(ranks == 1, 0, ranks))}
    for what, bad in forged.items():
        at = written.column_names.index("image_rank")
        _store_with_claim(run, written.set_column(at, "image_rank", pa.array(bad.astype(np.int32))))
        assert read_browse_table(run, "raw", SPACE) is None, what
    at = written.column_names.index("true_rank")
    _store_with_claim(run, written.set_column(at, "true_rank", pa.array(want.true.astype(np.int64))))
    assert read_browse_table(run, "raw", SPACE) is None, "ranks of another type"
    _store_with_claim(run, written.drop_columns(["true_rank"]))
    assert read_browse_table(run, "raw", SPACE) is None, "a table of the last version: built again"


def test_a_table_made_to_match_a_forged_claim_is_refused_not_used(run):
    """Hostile check: with a claim rewritten to match, a compressed file (a 53 KB one unpacked to 1 GiB) and a
    string column whose offsets go backwards (the process crashed when the column was used) are refused (the
    table is built again); pandas metadata naming another index (a KeyError on the page) is not read."""
    import pyarrow as pa

    table = run_image_table(run, "raw")
    ensure_browse_table(run, "raw", SPACE)
    written = pa.Table.from_pandas(table.astype(browse_store.DTYPES), preserve_index=False).combine_chunks()
    written = written.cast(pa.schema([pa.field(c, pa.large_string() if browse_store.DTYPES[c] == "string"
                                               else written.schema.field(c).type) for c in written.column_names],
                                     metadata=written.schema.metadata))
    written = _with_ranks(written, table)
    _store_with_claim(run, written)
    pd.testing.assert_frame_equal(read_browse_table(run, "raw", SPACE), table.astype(browse_store.DTYPES))

    _store_with_claim(run, written, pa.ipc.IpcWriteOptions(compression="zstd"))
    assert read_browse_table(run, "raw", SPACE) is None, "compressed: not read in place"

    metadata = json.loads(written.schema.metadata[b"pandas"])
    metadata["index_columns"] = ["image"]
    _store_with_claim(run, written.replace_schema_metadata({b"pandas": json.dumps(metadata).encode()}))
    pd.testing.assert_frame_equal(read_browse_table(run, "raw", SPACE), table.astype(browse_store.DTYPES),
                                  obj="pandas metadata is not read")

    # A column's null count raised from 0 in the file's own bytes (its FieldNode: length, null count), the
    # column having no validity buffer: pandas read one outside the file (a review). Arrow's validation refuses.
    import struct

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, written.schema) as writer:
        writer.write_table(written)
    data = sink.getvalue().to_pybytes()
    node = struct.pack("<qq", written.num_rows, 0)
    assert written.num_rows % 8 and data.count(node) >= 1, "the first match is a FieldNode (no buffer offset is odd)"
    forged = data.replace(node, struct.pack("<qq", written.num_rows, 7), 1)
    claim = run.metrics_dir / "browse.json"
    (run.metrics_dir / "browse.arrow").write_bytes(forged)
    claim.write_text(json.dumps({**json.loads(claim.read_text()), "bytes": len(forged),
                                 "sha256": browse_store.digest(forged)}))
    assert read_browse_table(run, "raw", SPACE) is None, "a null count with no validity buffer"

    image = written.column("image").chunk(0)
    _, offsets, values = image.buffers()
    backwards = np.frombuffer(offsets, dtype=np.int64).copy()
    backwards[2] = backwards[1] - 5
    broken = pa.Array.from_buffers(pa.large_string(), len(image), [None, pa.py_buffer(backwards.tobytes()), values])
    _store_with_claim(run, written.set_column(written.column_names.index("image"), "image", broken))
    assert read_browse_table(run, "raw", SPACE) is None, "offsets that go backwards"
    pd.testing.assert_frame_equal(ensure_browse_table(run, "raw", SPACE).reset_index(drop=True),
                                  table.astype(browse_store.DTYPES))


def test_rows_read_before_the_run_changed_are_never_stored_as_fresh(run):
    """Hostile campaign: the dashboard's rows, cached under its key, were built after another process
    excluded images and stored under the new fingerprint: the excluded images stayed, shown as fresh."""
    from core.curation import record

    images = list(dict.fromkeys(run_image_table(run, "raw")["image"]))
    record(run, "relabel", images[:1], CATS[1])
    before = browse_store.browse_fingerprint(run, "curated", SPACE)
    old_rows = run_image_table(run, "curated")
    record(run, "exclude", images[1:4], by="cli")  # another process, after the page read its key
    keys = ("view", "predictions", "manifest", "curation", "label_issues")
    got = ensure_browse_table(run, "curated", SPACE, lambda: old_rows, inputs={k: before[k] for k in keys})
    assert got is old_rows, "the page still gets the rows of its own key"
    assert read_browse_table(run, "curated", SPACE) is None, "but they are not stored under the run's new fingerprint"
    fresh = ensure_browse_table(run, "curated", SPACE)
    assert not set(images[1:4]) & set(fresh["image"]) and read_browse_table(run, "curated", SPACE) is not None


def test_a_forced_refresh_builds_the_table_again(run, monkeypatch):
    from explain import artefact

    artefact.refresh_metrics(run)
    calls = []
    real = browse_store._run_table
    monkeypatch.setattr(browse_store, "_run_table", lambda *a: calls.append(1) or real(*a))
    artefact.refresh_metrics(run)
    assert calls == []
    artefact.refresh_metrics(run, force=True)
    assert calls == [1]


def test_what_a_killed_writer_left_is_swept_and_nothing_else(run):
    import time

    ensure_browse_table(run, "raw", SPACE)
    folder = run.metrics_dir
    old_temp, new_temp = folder / ".browse.arrow.0123456789ab.tmp", folder / ".browse.arrow.ba9876543210.tmp"
    mine = [folder / ".browse.arrow.0123456789ab.tmp.keep", folder / "browse.arrow.0123456789ab.tmp",
            folder / ".browse.arrow.0123456789AB.tmp", folder / ".images.parquet.xyz.tmp"]
    for path in (old_temp, new_temp, *mine):
        path.write_bytes(b"x")
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    os.utime(new_temp, None)  # a live writer's: just written
    (folder / "browse.json").unlink()
    ensure_browse_table(run, "raw", SPACE)
    assert not old_temp.exists() and new_temp.exists() and all(p.exists() for p in mine)


def test_a_run_that_cannot_be_written_still_gets_its_table(run, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    import core.explained

    monkeypatch.setattr(core.explained, "write_bytes_atomic", refuse)
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
    true = np.array(CATS, dtype=object)[rng.integers(0, len(CATS), n)]  # an image under several classes too
    true[rng.random(n) < 0.05] = None
    probs = rng.choice([0.1, 0.5, 0.9, np.nan], n)  # ties and unknowns
    rows = pd.DataFrame({"image": pd.array(images, dtype="string"), "true_wnid": pd.array(true, dtype="string"),
                         "prob_1": pd.array(probs, dtype="Float64"), "margin": pd.array(probs / 2, dtype="Float64")})
    pd.testing.assert_frame_equal(selection_images(rows, sort), _selection_before(rows, sort))
    from explain.browse import table_codes

    codes = table_codes(rows)  # the ranks the dashboard passes (stored with the table), any subset of rows
    keep = np.flatnonzero(rng.random(n) < 0.7)
    pd.testing.assert_frame_equal(
        selection_images(rows.take(keep), sort, image_codes=codes.image[keep], true_codes=codes.true[keep]),
        _selection_before(rows.take(keep).reset_index(drop=True), sort))
    # any integer codes in the values' order (a review: a negative code wrapped around, a huge one overflowed)
    shifted = {"negative": (codes.image.astype(np.int64) - 1, codes.true.astype(np.int64) - 1),
               "huge": (codes.image.astype(np.int64) * 2**40, codes.true.astype(np.int64) * 2**40)}
    for what, (image, true) in shifted.items():
        pd.testing.assert_frame_equal(selection_images(rows, sort, image_codes=image, true_codes=true),
                                      _selection_before(rows, sort), obj=what)


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
    from explain.browse import sorted_codes

    codes, uniques = sorted_codes(series)
    assert list(uniques) == sorted(set(series.dropna())) and (codes[series.isna().to_numpy()] == len(uniques)).all()
    assert [uniques[c] for c in codes[series.notna().to_numpy()]] == list(series.dropna())
    frame = pd.DataFrame({"image": series, "n": np.arange(500)})
    pd.testing.assert_frame_equal(frame.take(_last_of_each(frame["image"])), frame.drop_duplicates("image", keep="last"))


def test_the_page_never_stores_rows_read_before_the_run_changed(run):
    """The review's reproduction through pages.reads: the rows cached under the page's key, a model's part
    added by another process, the rerun under the old key: shown, never stored as fresh."""
    from pages import reads

    key = reads.image_table_key(run, "raw")
    reads._view_rows(*key[:4], "")  # cached by another page
    run.append_predictions(_predictions([f"{CATS[0]}/0000.jpg"], [CATS[0]], "model_c", seed=7))
    reads._image_table(*key)
    browse_store.wait_for_writes(60)
    assert read_browse_table(run, "raw", SPACE) is None
    fresh = reads._image_table(*reads.image_table_key(run, "raw"))
    browse_store.wait_for_writes(60)
    pd.testing.assert_frame_equal(read_browse_table(run, "raw", SPACE), fresh)
    assert "model_c" in set(fresh["model"])


def test_refresh_compares_the_claim_and_stores_the_curated_table_of_a_log_of_tags(run, monkeypatch):
    from core.curation import record
    from explain import artefact

    artefact.refresh_metrics(run)
    monkeypatch.setattr(browse_store, "read_browse_table", lambda *a, **k: pytest.fail("the file was read"))
    artefact.refresh_metrics(run)  # fresh: browse.json compared, the 370 MB-at-1M file not read
    monkeypatch.undo()
    record(run, "tag", [run_image_table(run, "raw")["image"].iloc[0]], "blurry")
    artefact.refresh_metrics(run)
    stored = read_browse_table(run, "curated", SPACE)
    assert stored is not None and "blurry" in set(stored["tags"].dropna())
    pd.testing.assert_frame_equal(stored, run_image_table(run, "curated"))


def test_the_names_and_relations_rules_are_part_of_the_fingerprint(run, monkeypatch):
    import core.names
    from explain import vocabulary

    ensure_browse_table(run, "raw", SPACE)
    assert read_browse_table(run, "raw", SPACE) is not None
    monkeypatch.setattr(core.names, "NAMES_VERSION", core.names.NAMES_VERSION + 1)
    assert read_browse_table(run, "raw", SPACE) is None
    monkeypatch.undo()
    monkeypatch.setattr(vocabulary, "RELATIONS", tuple(vocabulary.RELATIONS) + ("renamed",))
    assert read_browse_table(run, "raw", SPACE) is None


def test_without_a_thread_the_page_stores_its_table_itself(run, monkeypatch):
    """A review: "can't start new thread" (an address-space limit) escaped the page's background store of a
    table it had built; the table is then stored before the page goes on, and read back equal."""
    import threading

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    built = ensure_browse_table(run, "raw", SPACE, background=True)
    assert not browse_store._WRITERS or all(t.is_alive() is False for t in browse_store._WRITERS)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(read_browse_table(run, "raw", SPACE), built)
