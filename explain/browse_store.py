"""The Browse page's per-image table, stored beside the metric tables (issue 26 item 2).

:func:`explain.browse.run_image_table` of a view (one row per (model, image): names, top-5, relation,
margin, error type and reason, curation tags) is written once as an uncompressed Arrow IPC file and
read back on a dashboard's first load::

    runs/<run_id>/metrics/browse.arrow           (raw view)     the table
    runs/<run_id>/metrics/browse.json            what it was built from, and the file's sha256
    runs/<run_id>/metrics/curated/browse.arrow   (curated view)
    runs/<run_id>/metrics/curated/browse.json

Why: building the table reads every prediction and explanation and names and relates every row:
5-7 s at 1,000,000 predictions on this 2-core machine, on each new server. Reading the stored one
is one read of the file and a zero-copy parse (Arrow's strings are the pandas columns' own). Why
uncompressed: LZ4 made the file 3x smaller and its read 3-8x slower (0.8-1.9 s against 0.24 s for
the parse, 350 MB for 1,000,000 rows); the table is derived data, rebuilt whenever it is missing.

Beside the table's columns the file holds :data:`CODE_COLUMNS`, the ranks of its images and true classes
among their sorted distinct values (:class:`explain.browse.TableCodes`), which the dashboard pairs, finds and
orders rows by: ranking them on a first load was ~0.2 s at 1,000,000 rows; read, 4 bytes a row each.

Memory: the table's strings stay in the buffer read from the file (zero copy); its probabilities,
margins and booleans are copied out of it (about 50 bytes a row held twice, 50 MB at 1,000,000).

Cost: storing it after inference adds the table's build and write to ``python -m classify``'s refresh
(9.6 s -> 20.6 s for 1,000,000 predictions in ``bench_app.py``, a loaded machine); a fresh table is
known by its claim alone. The page stores a table it had to build on a background thread, after
drawing it.

Fresh while ``browse.json`` matches the run now: the explanations' inputs
(``core.explained.inputs_fingerprint``: predictions, manifest, curation log, label issues, the
error types' code), the label space whose names are shown, :data:`BROWSE_CODE_VERSION` and the
columns. A tag added changes the curation log: the next load rebuilds and stores it again. Anything
else (no file, a damaged or hand-edited one whose sha256 differs, columns or types that are not the
table's) means "build it", never an error. Written as the explanations are: the fingerprint removed
first and written last, holding the run in place (:func:`core.locking.run_presence_lock`).
"""
from __future__ import annotations

import hashlib
import threading
from typing import Callable

import pandas as pd

from core.explained import inputs_fingerprint, read_claim, view_folder, write_claimed
from core.runstore import Run, StoreError
from core.tables import read_stored_hashed, sha256_of_halves
from .browse import ANNOTATION_DOCS, COLUMNS, TableCodes, table_codes

BROWSE_FILE, BROWSE_FINGERPRINT = "browse.arrow", "browse.json"
BROWSE_CODE_VERSION = 2  # bump when a column's values change for the same inputs (2: the rank columns)
TABLE_COLUMNS: tuple[str, ...] = COLUMNS + tuple(ANNOTATION_DOCS)
CODE_COLUMNS = {"image_rank": "image", "true_rank": "true_wnid"}  # stored after the table's: the ranks of these
_FLOATS = {f"prob_{k}" for k in range(1, 6)} | {"margin"}
_BOOLEANS = {"correct", "in_top5"}
DTYPES = {c: "Float64" if c in _FLOATS else "boolean" if c in _BOOLEANS else "string" for c in TABLE_COLUMNS}


def browse_fingerprint(run: Run, view: str, label_space: str) -> dict:
    """What a fresh stored table of ``view`` must claim (JSON-ready); take it before reading the inputs."""
    from core.names import NAMES_VERSION

    from .error_types import explained_versions
    from .vocabulary import RELATIONS

    # The names and relation words are stored as text: their rules' versions are part of what the table is.
    versions = {**explained_versions(), "browse": BROWSE_CODE_VERSION, "names": NAMES_VERSION,
                "relations": list(RELATIONS)}
    return {**inputs_fingerprint(run, view, versions), "label_space": str(label_space),
            "columns": [f"{c}:{DTYPES[c]}" for c in TABLE_COLUMNS] + [f"{c}:int32" for c in CODE_COLUMNS]}


def _claim(run: Run, view: str) -> dict | None:
    return read_claim(run, view, BROWSE_FINGERPRINT)


def _matches(stored: dict | None, expected: dict) -> bool:
    return stored is not None and all(stored.get(k) == v for k, v in expected.items())


def browse_fresh(run: Run, view: str, label_space: str) -> bool:
    """Whether ``browse.json`` claims the run as it is now (the table itself is checked by its reader):
    what refresh_metrics asks before building, without reading a 370 MB file to throw it away."""
    return _matches(_claim(run, view), browse_fingerprint(run, view, label_space))


def read_browse_table(run: Run, view: str, label_space: str, expected: dict | None = None) -> pd.DataFrame | None:
    """The stored table of ``view`` while it is fresh and intact (see the module docstring), else None."""
    stored = _read_stored(run, view, label_space, expected)
    return None if stored is None else stored[0]


def _read_stored(run: Run, view: str, label_space: str,
                 expected: dict | None = None) -> tuple[pd.DataFrame, TableCodes] | None:
    folder = view_folder(run, view)
    stored = _claim(run, view)
    if not _matches(stored, browse_fingerprint(run, view, label_space) if expected is None else expected):
        return None
    size = stored.get("bytes")
    if type(size) is not int or not 0 < size <= MAX_BYTES:
        return None
    read = read_stored_hashed(folder / BROWSE_FILE, size)
    # The bytes are the ones written before Arrow reads any of them: a compressed file put in its place
    # unpacked 8 GiB before its hash was checked (hostile campaign).
    if read is None or _of_halves(read[1], read[2]) != stored.get("sha256"):
        return None
    return _parse(read[0])


MAX_BYTES = 1 << 34  # a claimed size above this is no table this code wrote (2,000,000 rows are ~0.75 GB)


def digest(data) -> str:
    """The stored table's checksum: SHA-256 of the SHA-256 digests of its two halves
    (``core.tables.sha256_of_halves``; the reader hashes them as it reads them, ``read_stored_hashed``)."""
    return _of_halves(*sha256_of_halves(data))


def _of_halves(first: bytes, second: bytes) -> str:
    return hashlib.sha256(first + second).hexdigest()


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    return {pa.large_string(): "string", pa.float64(): "Float64", pa.bool_(): "boolean"}.get(arrow_type,
                                                                                          f"arrow {arrow_type}")


def _parse(data) -> tuple[pd.DataFrame, TableCodes] | None:
    """The table in ``data`` (a writable buffer: core.tables.read_stored_hashed's map), Arrow's columns over
    its bytes, and its ranks (:data:`CODE_COLUMNS`), or None where it is not what write_browse_table writes. Its checksum only tells damage from
    the table written; a file made to match a claim rewritten with it (a hostile check) is refused here
    too: columns, types and order; Arrow's validation of each buffer's length (a forged null count
    with no validity buffer read outside the file); no pandas metadata read (a forged index raised on the
    page); every buffer inside ``data`` (a compressed file's are not: decompressed, up to Arrow's own limits, then
    refused); string offsets that never decrease and stay inside their data (a bad one crashed the process
    when the column was used)."""
    import pyarrow as pa

    try:
        reader = pa.ipc.open_file(pa.py_buffer(data))
        schema = reader.schema
        if schema.names != list(TABLE_COLUMNS) + list(CODE_COLUMNS) \
                or any(_arrow_kind(schema.field(c).type) != DTYPES[c] for c in TABLE_COLUMNS) \
                or any(schema.field(c).type != pa.int32() for c in CODE_COLUMNS):
            return None  # what write_browse_table writes: large strings, doubles, booleans, then int32 ranks
        arrow = reader.read_all()
        arrow.validate()  # each buffer as long as its row count and null count need (a forged null count: a read
        # outside the file, a review); per buffer, not per row: the offsets' order is _offsets_sound's
        if not _inside(arrow, data) or not _offsets_sound(arrow):
            return None
        ranks = {c: _ranks(arrow.column(c), arrow.column(of)) for c, of in CODE_COLUMNS.items()}
        if any(r is None for r in ranks.values()):
            return None
        table = arrow.select(list(TABLE_COLUMNS)).to_pandas(ignore_metadata=True, types_mapper=_pandas_types().get)
        if list(table.columns) != list(TABLE_COLUMNS) or any(str(table[c].dtype) != DTYPES[c] for c in TABLE_COLUMNS):
            return None
    except Exception:  # pyarrow raises several types for damaged bytes; a hand-made file: rebuilt
        return None
    (image, images), (true, _) = ranks["image_rank"], ranks["true_rank"]
    return table, TableCodes(image, images, true)


def _ranks(ranks, values) -> tuple["np.ndarray", pd.Index] | None:
    """(``ranks``, int32 over the file's buffer, the sorted distinct ``values``) where the stored ranks are ranks of ``values`` as
    :func:`explain.browse.sorted_codes` gives them, else None. Checked on one row of each rank: every rank from
    0 up is used, the values of those rows rise strictly, and a missing value (only there) takes the last rank.
    Every row is not compared (that is what the stored ranks save: 30-40 ms a column at 1,000,000 rows against
    the ranking's 0.1-0.2 s): a damaged file fails its checksum, and a file forged together with its claim can
    make these ranks misname images (a review: two ranks merged) as it can make any text column say anything;
    what is checked here is what keeps the page from crashing on it (every rank in bounds and named)."""
    import numpy as np
    import pyarrow.compute as pc

    if ranks.null_count:
        return None
    at = ranks.combine_chunks().to_numpy()  # int32 over the file's buffer (read-only, no copy)
    if len(at) == 0:
        return at, pd.Index([], dtype=object)
    top = int(at.max())
    if int(at.min()) < 0 or top >= len(at):
        return None
    row_of = np.full(top + 1, -1, dtype=np.int64)
    row_of[at] = np.arange(len(at))  # a row of each rank (whichever write NumPy keeps: any of them will do)
    if (row_of < 0).any():
        return None
    distinct = values.combine_chunks().take(row_of)
    missing = distinct.is_null().to_numpy(zero_copy_only=False)
    if missing[:-1].any():
        return None
    named = distinct.slice(0, len(distinct) - int(missing[-1]))
    if len(named) > 1 and not pc.all(pc.less(named.slice(0, len(named) - 1), named.slice(1))).as_py():
        return None
    return at, pd.Index(named.to_numpy(zero_copy_only=False), dtype=object)


def _pandas_types() -> dict:
    """The pandas type of each Arrow type the table has (DTYPES): what its pandas metadata said, not read."""
    import pyarrow as pa

    return {pa.large_string(): pd.StringDtype("pyarrow"), pa.float64(): pd.Float64Dtype(), pa.bool_(): pd.BooleanDtype()}


def _inside(arrow, data) -> bool:
    """Every buffer of ``arrow`` lies inside ``data``'s bytes: the file was read in place (uncompressed)."""
    import numpy as np

    start = np.frombuffer(data, dtype=np.uint8).ctypes.data if len(data) else 0
    stop = start + len(data)
    for column in arrow.columns:
        for chunk in column.chunks:
            for buffer in chunk.buffers():
                if buffer is not None and buffer.size and not (start <= buffer.address and
                                                               buffer.address + buffer.size <= stop):
                    return False
    return True


def _offsets_sound(arrow) -> bool:
    """Every large-string chunk's offsets start at 0 or more, never decrease, and end inside its data. The
    columns are checked on the cores this process may use (NumPy compares without the GIL): 19 columns of
    1,000,000 rows are 152 MB of offsets, 42-74 ms on one core here."""
    import pyarrow as pa

    from core.machine import threaded_map

    chunks = [chunk for column in arrow.columns if column.type == pa.large_string() for chunk in column.chunks]
    return all(threaded_map(_chunk_offsets_sound, chunks, limit=4, name="wildlens-offsets"))


def _chunk_offsets_sound(chunk) -> bool:
    import numpy as np

    _, offsets, values = chunk.buffers()
    if offsets is None:
        return len(chunk) == 0
    at = np.frombuffer(offsets, dtype=np.int64)[chunk.offset:chunk.offset + len(chunk) + 1]
    if len(at) != len(chunk) + 1:
        return False
    size = 0 if values is None else values.size
    return not (len(at) and (at[0] < 0 or at[-1] > size or bool((at[1:] < at[:-1]).any())))


def write_browse_table(run: Run, view: str, table: pd.DataFrame, fingerprint: dict,
                       codes: TableCodes | None = None) -> None:
    """Store ``table`` (:func:`explain.browse.run_image_table`'s columns) and its ranks (``codes``, made here when
    not given) claiming ``fingerprint`` (:func:`browse_fingerprint`, taken before its inputs were read). Raises
    StoreError when it cannot be written (a read-only run, a full disk, the run deleted meanwhile)."""
    import numpy as np
    import pyarrow as pa

    if list(table.columns) != list(TABLE_COLUMNS):
        raise StoreError(f"the Browse table has columns {list(table.columns)[:5]}…, not the stored table's.")
    # One chunk per column: a built table's columns come in pieces (a part file each), and Arrow's take
    # on a column of 10 chunks cost 3 ms against 0.1 ms on one (1,000 rows of the 1M table: 0.22 s).
    arrow = pa.Table.from_pandas(table.astype(DTYPES), preserve_index=False).combine_chunks()
    # Large strings everywhere: the reader checks each column's Arrow type against this.
    arrow = arrow.cast(pa.schema([pa.field(c, pa.large_string() if DTYPES[c] == "string" else arrow.schema.field(c).type)
                                  for c in TABLE_COLUMNS], metadata=arrow.schema.metadata))
    codes = table_codes(table) if codes is None else codes
    if len(codes.image) != len(table) or len(codes.true) != len(table):
        raise StoreError(f"the Browse table's ranks are for {len(codes.image):,} rows, not its {len(table):,}.")
    for column, ranks in (("image_rank", codes.image), ("true_rank", codes.true)):
        arrow = arrow.append_column(column, pa.array(np.asarray(ranks, dtype=np.int32)))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, arrow.schema) as writer:
        writer.write_table(arrow)
    data = sink.getvalue()
    write_claimed(run, view, BROWSE_FILE, data, BROWSE_FINGERPRINT,
                  {**fingerprint, "rows": len(table), "bytes": len(data), "sha256": digest(data)}, "the Browse table")


_WRITERS: list[threading.Thread] = []  # background writes of this process (ensure_browse_table(background=True))


def wait_for_writes(timeout: float | None = None) -> None:
    """Wait for this process's background writes of Browse tables (tests; a clean shutdown)."""
    for thread in list(_WRITERS):
        thread.join(timeout)


def ensure_browse_table(run: Run, view: str, label_space: str, build: Callable[[], pd.DataFrame] | None = None, *,
                        inputs: dict | None = None, force: bool = False, background: bool = False) -> pd.DataFrame:
    """:func:`ensure_browse` without the ranks."""
    return ensure_browse(run, view, label_space, build, inputs=inputs, force=force, background=background)[0]


def ensure_browse(run: Run, view: str, label_space: str, build: Callable[[], pd.DataFrame] | None = None, *,
                  inputs: dict | None = None, force: bool = False,
                  background: bool = False) -> tuple[pd.DataFrame, TableCodes]:
    """(table, its ranks): the stored table of ``view`` when fresh (and not ``force``), else ``build()`` (default
    :func:`explain.browse.run_image_table`) stored for the next reader; a run that cannot be written
    still gets its table. ``inputs``: the fingerprints (``core.explained.inputs_fingerprint``'s keys)
    of the run as ``build`` will read it, when it reads rows cached earlier (the dashboard): where the
    run has changed since, the table is built and neither read nor stored. Why: rows cached before
    another process excluded images were stored under the new fingerprint and shown as fresh
    (hostile campaign)."""
    build = build or (lambda: _run_table(run, view))
    fingerprint = browse_fingerprint(run, view, label_space)  # before reading: a change meanwhile leaves it stale
    if inputs is not None and not _matches(fingerprint, inputs):
        table = build()
        return table, table_codes(table)
    stored = None if force else _read_stored(run, view, label_space, fingerprint)
    if stored is not None:
        return stored
    table = build()
    codes = table_codes(table)

    def store() -> None:
        try:
            write_browse_table(run, view, table, fingerprint, codes)
        except StoreError:  # read-only, full or deleted meanwhile: the table is still right
            pass

    if background:  # the page shows the table now; storing it (~2 s of fsync at 1,000,000 rows) follows
        thread = threading.Thread(target=store, name="wildlens-browse-store", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had (an address-space limit): stored now, the page waits for it
            store()
        else:
            _WRITERS[:] = [t for t in _WRITERS if t.is_alive()] + [thread]
    else:
        store()
    return table, codes


def _run_table(run: Run, view: str) -> pd.DataFrame:
    from .browse import run_image_table

    return run_image_table(run, view)
