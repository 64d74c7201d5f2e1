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
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pandas as pd

from core.explained import inputs_fingerprint, view_folder
from core.runstore import Run, StoreError, write_bytes_atomic, write_json_atomic
from core.tables import read_stored_buffer, read_stored_bytes, real_folder
from .browse import ANNOTATION_DOCS, COLUMNS

BROWSE_FILE, BROWSE_FINGERPRINT = "browse.arrow", "browse.json"
BROWSE_CODE_VERSION = 1  # bump when a column's values change for the same inputs
TABLE_COLUMNS: tuple[str, ...] = COLUMNS + tuple(ANNOTATION_DOCS)
_FLOATS = {f"prob_{k}" for k in range(1, 6)} | {"margin"}
_BOOLEANS = {"correct", "in_top5"}
DTYPES = {c: "Float64" if c in _FLOATS else "boolean" if c in _BOOLEANS else "string" for c in TABLE_COLUMNS}


def browse_fingerprint(run: Run, view: str, label_space: str) -> dict:
    """What a fresh stored table of ``view`` must claim (JSON-ready); take it before reading the inputs."""
    from .error_types import explained_versions

    versions = {**explained_versions(), "browse": BROWSE_CODE_VERSION}
    return {**inputs_fingerprint(run, view, versions), "label_space": str(label_space),
            "columns": [f"{c}:{DTYPES[c]}" for c in TABLE_COLUMNS]}


def read_browse_table(run: Run, view: str, label_space: str, expected: dict | None = None) -> pd.DataFrame | None:
    """The stored table of ``view`` while it is fresh and intact (see the module docstring), else None."""
    folder = view_folder(run, view)
    raw = read_stored_bytes(folder / BROWSE_FINGERPRINT, 1 << 20)
    try:
        stored = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    expected = browse_fingerprint(run, view, label_space) if expected is None else expected
    if not isinstance(stored, dict) or any(stored.get(k) != v for k, v in expected.items()):
        return None
    data = read_stored_buffer(folder / BROWSE_FILE)
    if data is None:
        return None
    # The hash on a second thread while Arrow parses (hashlib releases the GIL): 0.2 s each at 350 MB.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wildlens-browse") as pool:
        digest = pool.submit(lambda: hashlib.sha256(data).hexdigest())
        table = _parse(data)
        if digest.result() != stored.get("sha256"):
            return None
    return table


def _parse(data: bytearray) -> pd.DataFrame | None:
    import pyarrow as pa

    try:
        arrow = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        if arrow.column_names != list(TABLE_COLUMNS):
            return None
        table = arrow.to_pandas()
    except Exception:  # pyarrow raises several types for damaged bytes; a hand-made file: rebuilt
        return None
    if any(str(table[c].dtype) != DTYPES[c] for c in TABLE_COLUMNS):
        return None
    return table


def write_browse_table(run: Run, view: str, table: pd.DataFrame, fingerprint: dict) -> None:
    """Store ``table`` (:func:`explain.browse.run_image_table`'s columns) claiming ``fingerprint``
    (:func:`browse_fingerprint`, taken before its inputs were read). Raises StoreError when it
    cannot be written (a read-only run, a full disk, the run deleted meanwhile)."""
    import pyarrow as pa

    from core.locking import RunGone, run_presence_lock

    if list(table.columns) != list(TABLE_COLUMNS):
        raise StoreError(f"the Browse table has columns {list(table.columns)[:5]}…, not the stored table's.")
    folder = view_folder(run, view)
    for place in (run.metrics_dir, folder):
        if not real_folder(place):  # a link would have the table written wherever it leads
            raise StoreError(f"cannot store the Browse table of run {run.run_id}: {place} is a link or a file, not a "
                             "folder; move it away.")
    # One chunk per column: a built table's columns come in pieces (a part file each), and Arrow's take
    # on a column of 10 chunks cost 3 ms against 0.1 ms on one (1,000 rows of the 1M table: 0.22 s).
    arrow = pa.Table.from_pandas(table.astype(DTYPES), preserve_index=False).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, arrow.schema) as writer:
        writer.write_table(arrow)
    data = sink.getvalue()
    try:
        with run_presence_lock(run.path, f"Run {run.run_id} was deleted meanwhile; nothing was written."):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / BROWSE_FINGERPRINT).unlink(missing_ok=True)
            write_bytes_atomic(folder / BROWSE_FILE, data)
            write_json_atomic(folder / BROWSE_FINGERPRINT, {**fingerprint, "rows": len(table),
                                                            "sha256": hashlib.sha256(data).hexdigest()})
    except RunGone as exc:
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(f"cannot store the Browse table of run {run.run_id} in {folder}: {exc.strerror or exc}; "
                         "check the folder's permissions and free space.") from None


def ensure_browse_table(run: Run, view: str, label_space: str,
                        build: Callable[[], pd.DataFrame] | None = None) -> pd.DataFrame:
    """The stored table of ``view`` when fresh, else ``build()`` (default
    :func:`explain.browse.run_image_table`) stored for the next reader; a run that cannot be written
    still gets its table."""
    fingerprint = browse_fingerprint(run, view, label_space)  # before reading: a change meanwhile leaves it stale
    stored = read_browse_table(run, view, label_space, fingerprint)
    if stored is not None:
        return stored
    if build is None:
        from .browse import run_image_table

        table = run_image_table(run, view)
    else:
        table = build()
    try:
        write_browse_table(run, view, table, fingerprint)
    except StoreError:  # read-only, full or deleted meanwhile: the table is still right
        pass
    return table
