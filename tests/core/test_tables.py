"""core.tables helpers that the pages lean on at scale, against pandas as the reference."""
import os
import re

import numpy as np
import pandas as pd
import pytest

from core.tables import is_member


@pytest.mark.parametrize("values", [
    pd.Series(["a.jpg", "b.jpg", None, "a.jpg", "c.jpg"], dtype="string"),
    pd.Series(["a.jpg", "b.jpg", None, "a.jpg", float("nan")], dtype=object),
    pd.Series([1, 2, None, 3, 1], dtype="Int64"),
    pd.Series([1.0, np.nan, 2.5, 1.0]),
    pd.Series([], dtype="string"),
])
@pytest.mark.parametrize("members", [set(), {"a.jpg", "c.jpg"}, {"a.jpg", None}, {1, 2.5}, [1, pd.NA], ("b.jpg",),
                                     frozenset({float("nan")})])
def test_is_member_answers_as_series_isin(values, members):
    """Each distinct value looked up once: a present value as Series.isin answers; a missing value
    matches when the members hold a NA of any spelling (pandas' own answer for NA depends on the
    dtype; for the Arrow strings the pages pass it is this one, checked below)."""
    def missing(v):
        return v is None or v is pd.NA or (isinstance(v, float) and v != v)

    present = [m for m in members if not missing(m)]
    has_na = any(missing(m) for m in members)
    expected = np.where(values.isna().to_numpy(), has_na, values.isin(present).fillna(False).to_numpy(dtype=bool))
    assert is_member(values, members).tolist() == expected.tolist()
    if values.dtype == "string":
        assert is_member(values, members).tolist() == values.isin(members).fillna(False).tolist()


def test_is_member_refuses_one_str():
    with pytest.raises(TypeError, match="not the str"):
        is_member(pd.Series(["a"]), "a")


def test_a_column_whose_type_contradicts_its_pandas_metadata_is_a_one_line_store_error():
    """A hand-edited file (a boolean column rewritten as text, its pandas metadata kept) made pyarrow's
    to_pandas raise TypeError past every reader's StoreError handling (Results and Browse showed an
    exception; hostile campaign); now it reads as damaged, in one line."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.tables import StoreError, read_parquet_bytes

    table = pa.Table.from_pandas(pd.DataFrame({"correct": pd.array([True, False], dtype="boolean")}))
    table = table.set_column(0, "correct", pa.array(["True", "False"]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    with pytest.raises(StoreError, match="does not read as the explained table") as caught:
        read_parquet_bytes(buffer.getvalue(), {"correct": "boolean"}, table="explained", source="x.parquet")
    assert "\n" not in str(caught.value)


def test_read_stored_hashed_reads_the_bytes_and_hashes_each_half(tmp_path, monkeypatch):
    """The buffer read_stored_buffer gives and SHA-256 of its two halves, read and hashed a chunk at a time
    (a chunk smaller than each half here, an odd size so the halves differ in length)."""
    import hashlib

    import core.tables as tables
    from core.tables import read_stored_buffer, read_stored_hashed

    monkeypatch.setattr(tables, "HALF_CHUNK", 7)
    data = bytes(range(256)) * 3 + b"odd"
    path = tmp_path / "t.arrow"
    path.write_bytes(data)
    buffer, first, second = read_stored_hashed(path, len(data))
    half = len(data) // 2
    assert bytes(buffer) == read_stored_buffer(path, len(data)) == bytearray(data)
    assert (first, second) == (hashlib.sha256(data[:half]).digest(), hashlib.sha256(data[half:]).digest())
    for size in (len(data) - 1, len(data) + 1, 0):
        assert read_stored_hashed(path, size) is None, "exactly its size"
    link = tmp_path / "link.arrow"
    link.symlink_to(path)
    fifo = tmp_path / "fifo.arrow"
    os.mkfifo(fifo)
    assert read_stored_hashed(link, len(data)) is None and read_stored_hashed(fifo, 0) is None
    assert read_stored_hashed(tmp_path / "missing", 1) is None and read_stored_hashed(tmp_path, 4096) is None


def test_read_stored_hashed_takes_no_zero_filled_bytearray(tmp_path, monkeypatch):
    """bytearray(size) zeroes every byte in a pass of its own before the read writes it again (the 370 MB
    Browse table's read and hash: 0.407 s against 0.285 s): the hashed read takes a private anonymous map,
    which the kernel zeroes page by page as the read touches it."""
    import core.tables as tables

    data = bytes(range(256)) * 40
    path = tmp_path / "t.arrow"
    path.write_bytes(data)

    def zero_filled(size):
        raise AssertionError("a zero-filled buffer")

    monkeypatch.setattr(tables, "bytearray", zero_filled, raising=False)
    buffer, first, second = tables.read_stored_hashed(path, len(data))
    assert bytes(buffer) == data


def test_read_stored_hashed_without_a_thread_reads_in_one_pass(tmp_path, monkeypatch):
    """Hostile check: under an address-space limit the map fitted but the hashing thread's stack did not, and
    'can't start new thread' escaped the reader; it now reads both halves itself."""
    import concurrent.futures
    import hashlib

    import core.tables as tables

    data = bytes(range(256)) * 9 + b"x"
    path = tmp_path / "t.arrow"
    path.write_bytes(data)

    def no_thread(self, *args, **kwargs):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", no_thread)
    buffer, first, second = tables.read_stored_hashed(path, len(data))
    half = len(data) // 2
    assert bytes(buffer) == data
    assert (first, second) == (hashlib.sha256(data[:half]).digest(), hashlib.sha256(data[half:]).digest())
    assert tables.sha256_of_halves(data) == (first, second), "the writer's digest too (a review)"


def test_read_stored_hashed_refuses_a_file_that_shrinks_or_grows_while_read(tmp_path, monkeypatch):
    import core.tables as tables
    from core.tables import read_stored_hashed

    data = b"x" * 1000
    path = tmp_path / "t.arrow"
    path.write_bytes(data)
    monkeypatch.setattr(tables, "HALF_CHUNK", 100)
    real = os.preadv
    monkeypatch.setattr(tables.os, "preadv", lambda fd, views, at: 0 if at >= 600 else real(fd, views, at))
    assert read_stored_hashed(path, len(data)) is None, "the second half came back short: it shrank"
    monkeypatch.setattr(tables.os, "preadv", real)
    monkeypatch.setattr(tables.os, "pread", lambda fd, n, at: b"y")
    assert read_stored_hashed(path, len(data)) is None, "a byte past its size: it grew"


def test_a_sparse_file_of_the_claimed_size_is_refused_before_its_buffer(tmp_path):
    """Hostile campaign: a hand-edited claim naming the size of a sparse file (no disk) had the readers
    allocate that size (2 GiB: 2.7 GB of memory; MemoryError under a memory limit). A hole refuses it."""
    from core.tables import read_stored_buffer, read_stored_hashed

    path = tmp_path / "sparse.arrow"
    with open(path, "wb") as handle:
        handle.write(b"ARROW1")
        handle.truncate(64 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        if not hasattr(os, "SEEK_HOLE") or os.lseek(fd, 0, os.SEEK_HOLE) >= 64 << 20:
            pytest.skip("this file system does not report holes")
    finally:
        os.close(fd)
    assert read_stored_buffer(path, 64 << 20) is None and read_stored_hashed(path, 64 << 20) is None
    dense = tmp_path / "dense.arrow"
    dense.write_bytes(b"\0" * (1 << 20))  # zeros written are data, not a hole
    assert read_stored_buffer(dense, 1 << 20) == bytearray(1 << 20)
    assert bytes(read_stored_hashed(dense, 1 << 20)[0]) == bytes(1 << 20)


def test_no_memory_for_the_buffer_is_a_stale_file_not_an_error(tmp_path, monkeypatch):
    import core.tables as tables
    from core.tables import read_stored_buffer, read_stored_hashed

    path = tmp_path / "t.arrow"
    path.write_bytes(b"x" * 100)

    def no_memory(size, *args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(tables, "bytearray", no_memory, raising=False)  # the module's name before the builtin
    import mmap

    monkeypatch.setattr(mmap, "mmap", no_memory)  # read_stored_hashed's unfilled buffer (tables._unfilled)
    assert read_stored_buffer(path, 100) is None and read_stored_hashed(path, 100) is None


def _conform_column_by_column(df, schema, *, table="table", extra="keep"):
    """conform as it was written before it built one frame (the reference: same columns, dtypes, values)."""
    from core.tables import StoreError

    out = pd.DataFrame(index=df.index)
    for col, dtype in schema.items():
        if col in df.columns:
            try:
                out[col] = df[col].astype(dtype)
            except (TypeError, ValueError) as exc:
                raise StoreError(f"{table}: column {col!r} cannot be read as {dtype}: {exc}") from None
        else:
            out[col] = pd.Series(pd.NA, index=df.index, dtype=dtype)
    if extra == "keep":
        for col in df.columns:
            if col not in schema:
                out[col] = df[col]
    return out.reset_index(drop=True)


def _prediction_frames():
    import pyarrow as pa

    from core.tables import PREDICTION_SCHEMA

    n = 7
    raw = pa.table({"model": ["m"] * n, "image": [f"{i}.jpg" for i in range(n)], "true_wnid": ["n1", None] * 3 + ["n2"],
                    "pred_wnid": ["n2"] * n, "prob_1": np.linspace(0, 1, n), "status": ["ok"] * n,
                    "reason": [None] * n, "int8_rechecked": [True, False, None, True, False, None, True],
                    "extra": np.arange(n)}).to_pandas()  # as read from Arrow: NaN-backed 'str', float64, object
    conformed = _conform_column_by_column(raw, PREDICTION_SCHEMA)
    odd_index = raw.set_axis([3] * n)  # duplicate labels
    return {"raw": raw, "conformed": conformed, "odd index": odd_index, "empty": raw.iloc[:0],
            "no columns": pd.DataFrame(index=[4, 5])}


@pytest.mark.parametrize("name", ["raw", "conformed", "odd index", "empty", "no columns"])
@pytest.mark.parametrize("extra", ["keep", "drop"])
def test_conform_gives_what_converting_column_by_column_gave(name, extra):
    from core.tables import PREDICTION_SCHEMA, conform

    df = _prediction_frames()[name]
    before = df.copy()
    got, want = conform(df, PREDICTION_SCHEMA, extra=extra), _conform_column_by_column(df, PREDICTION_SCHEMA, extra=extra)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert [str(t) for t in got.dtypes] == [str(t) for t in want.dtypes]  # 'string' (NA) is not 'str' (NaN)
    if got.shape[0] and got.shape[1] and df.shape[1]:
        kept = got.copy()
        df.iloc[0, 0] = "theirs"  # neither frame writes through to the other (they share columns until then)
        pd.testing.assert_frame_equal(got, kept)
        df.iloc[0, 0] = before.iloc[0, 0]
        got.iloc[0, 0] = "changed"
    pd.testing.assert_frame_equal(df, before)


def test_conform_refuses_a_column_it_cannot_convert_in_one_line():
    from core.tables import StoreError, conform

    with pytest.raises(StoreError, match=r"^predictions: column 'prob_1' cannot be read as Float64: "):
        conform(pd.DataFrame({"prob_1": ["not a number"]}), {"prob_1": "Float64"}, table="predictions")


def test_a_parquet_file_naming_a_column_twice_is_a_store_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.tables import PREDICTION_SCHEMA, StoreError, read_table

    pq.write_table(pa.table([pa.array(["m"]), pa.array(["x"]), pa.array(["a.jpg"])], names=["model", "image", "image"]),
                   tmp_path / "twice.parquet")
    with pytest.raises(StoreError) as info:
        read_table(tmp_path / "twice.parquet", PREDICTION_SCHEMA, table="predictions")
    # The file, what is wrong in it and the fix, in one line (conform alone named neither the file nor the fix).
    assert str(info.value) == (f"{tmp_path / 'twice.parquet'}: predictions: column 'image' cannot be read as string: "
                               "the table has 2 columns of that name; WildLens did not write it so: restore it, or "
                               "move it away and re-run.")


def test_a_parquet_column_of_another_type_names_the_file_and_the_fix(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.tables import PREDICTION_SCHEMA, StoreError, read_table

    pq.write_table(pa.table({"model": ["m"], "image": ["a.jpg"], "prob_1": ["high"]}), tmp_path / "typed.parquet")
    with pytest.raises(StoreError, match=rf"^{re.escape(str(tmp_path / 'typed.parquet'))}: predictions: column "
                                         r"'prob_1' cannot be read as Float64: .*; WildLens did not write it so: "
                                         r"restore it, or move it away and re-run\.$"):
        read_table(tmp_path / "typed.parquet", PREDICTION_SCHEMA, table="predictions")


def test_conform_follows_the_string_storage_option_as_astype_does():
    from core.tables import conform

    df = pd.DataFrame({"a": ["x"]}).astype("string")  # read once under the default storage
    with pd.option_context("mode.string_storage", "python"):
        got = conform(df, {"a": "string", "b": "string"})
        assert str(got["a"].dtype.storage) == str(got["b"].dtype.storage) == "python"
