"""Table schemas and atomic files: what every table of the run store looks like, and how any file
is written so that a killed process leaves the old file or the new one, never half of one.

The ground floor of ``core``: the run store (``core.runstore``), the part files
(``core.parts``) and the folder locks (``core.locking``) all build on it, and it imports none of
them. Writes go to a temporary file in the same folder, are fsynced, then ``os.replace``d;
tables carry ``wildlens.schema_version`` in their Parquet metadata, and a newer version is
refused with a message rather than misread.
"""
from __future__ import annotations

import errno
import functools
import io
import json
import os
import re
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from .errors import WildLensError

SCHEMA_VERSION = 1
_META_KEY = b"wildlens.schema_version"
# \Z, not $: '$' also matches before a final newline ('x\n' made a run folder of that name; a review, 2026-12-06).
_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}\Z")
RUN_ID_RULE = "up to 80 ASCII letters, digits, '-', '_' and '.', starting with a letter or digit"  # the rule, in words
# A model id names its folder with '/' as '_' (torchvision/resnet50 -> torchvision_resnet50): the run id's rule otherwise.
MODEL_ID_RULE = ("up to 80 ASCII letters, digits, '-', '_', '.' and '/', starting with a letter or digit; "
                 "rename the model")
TOP_K = 5


class StoreError(WildLensError, RuntimeError):
    """A run or table that cannot be read or written as asked; the message says why."""


# --------------------------------------------------------------------------- schemas
# Column -> pandas dtype. Nullable dtypes ("string", "Int64", "Float64", "boolean") so a
# missing value is NA rather than a sentinel.
MANIFEST_SCHEMA: dict[str, str] = {
    "wnid": "string",  # the class this image was collected or imported for
    "file": "string",  # path relative to the images root: '<wnid>/<sha256[:16]>.<ext>'; NA if not stored
    "sha256": "string",
    "phash": "string",  # 64-bit perceptual hash, hex
    "width": "Int64",
    "height": "Int64",
    "format": "string",  # Pillow format name: JPEG, PNG, WEBP, ...
    "mode": "string",  # Pillow mode as stored: RGB, CMYK, P, I;16, ...
    "bytes": "Int64",
    "source": "string",  # 'bing', 'google', 'baidu', 'flickr', 'import', 'sample'
    "search_term": "string",
    "url": "string",  # where a crawled image came from (data only: never a file name)
    "rank": "Int64",  # position in the engine's results
    "original_name": "string",  # an imported file's path inside the source folder
    "fetched_at": "string",  # ISO 8601, UTC
    "status": "string",  # 'accepted', 'rejected' or 'duplicate'
    "reason": "string",  # why rejected / what it duplicates
    "duplicate_of": "string",  # 'file' of the kept copy, for exact and near duplicates
    "other_wnids": "string",  # other classes the same image was found for: its label is ambiguous
    "excluded": "boolean",  # excluded by an analyst; the row and the file are kept
    "excluded_reason": "string",
}
MANIFEST_STATUSES = ("accepted", "rejected", "duplicate")

PREDICTION_SCHEMA: dict[str, str] = {
    "model": "string",  # registry id
    "image": "string",  # the manifest's 'file' (relative to the images root)
    "true_wnid": "string",
    "pred_wnid": "string",  # top-1
    **{f"pred_wnid_{k}": "string" for k in range(2, TOP_K + 1)},
    **{f"prob_{k}": "Float64" for k in range(1, TOP_K + 1)},
    "label_space": "string",  # the model's output space, e.g. 'imagenet-1k', 'imagenet-21k'
    "status": "string",  # 'ok' or 'failed'
    "reason": "string",  # why an image failed (decode error, ...)
    # Which model made the row, beyond its id (issue 22): a re-run resumes only rows of the same
    # model (classify.targets.check_stored_models). Added after schema version 1 was fixed, so
    # optional: rows stored before them read as NA ('not recorded'), and they still load and resume.
    "weights_sha256": "string",  # sha256 of the weights file (package, cache or --checkpoint); NA: none
    "class_order": "string",  # how output i maps to a wnid: 'label-space' or a named order ('swin-22k')
    "family": "string",  # the family it ran as: CNN, transformer, hybrid, language-augmented
    # MODEL--int8 rows (the int8 -> fp32 cascade, classify.engine.quantize.Int8Cascade): whether the fp32
    # model classified this image again (its int8 margin was at or below the gate); NA in other rows. Optional.
    "int8_rechecked": "boolean",
}
PREDICTION_STATUSES = ("ok", "failed")
# The columns above that say which model made a row (NA in rows stored before they existed).
MODEL_STAMP_COLUMNS = ("weights_sha256", "class_order", "family")

# The metric tables (metrics/*.parquet) are derived data: their columns, dtypes and docs live together
# in explain/schema.py, and explain/artefact.py writes and reads them.


def empty_table(schema: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({col: pd.Series(dtype=dtype) for col, dtype in schema.items()})


def conform(df: pd.DataFrame, schema: dict[str, str], *, table: str = "table", extra: str = "keep") -> pd.DataFrame:
    """Return ``df`` with the schema's columns in order and dtypes; missing optional columns
    become NA. ``extra='keep'`` keeps unknown columns after the schema's, ``'drop'`` drops them.

    Built as one frame from a dict, converting only the columns whose dtype differs (an equal dtype
    object: 'string' is not pandas' NaN-backed 'str'). Why: inserting the columns one by one and
    calling astype on each took 4.1 ms for a 30-row predictions table that was already conformed, now
    0.6 ms (benchmarks/bench_tables.py: 2.5-7x up to 10,000 rows; 1,000,000 rows: 6x conformed, 1.1x as
    Arrow gives them); every table read passes here, and the page tests spent ~14 % of their CPU in it
    (py-spy, 2026-12-07). Built without copying (copy=False; with copies a conformed 1,000,000-row
    table took 13 ms, not 0.7): the columns it keeps
    are the caller's until either side writes, and pandas 3 copies on write, so neither sees the
    other's change (a test writes into each)."""
    columns: dict[str, pd.Series] = {}
    storage = pd.get_option("mode.string_storage")
    for col, dtype in schema.items():
        if col in df.columns:
            values, want = df[col], _dtype(dtype, storage)
            if isinstance(values, pd.DataFrame):  # the name twice in the file (a hand-written Parquet can)
                raise StoreError(f"{table}: column {col!r} cannot be read as {dtype}: the table has "
                                 f"{values.shape[1]} columns of that name.")
            if values.dtype != want or type(values.dtype) is not type(want):
                try:
                    values = values.astype(want)
                except (TypeError, ValueError) as exc:
                    raise StoreError(f"{table}: column {col!r} cannot be read as {dtype}: {exc}") from None
            columns[col] = values
        else:
            columns[col] = pd.Series(pd.NA, index=df.index, dtype=dtype)
    if extra == "keep":
        for col in df.columns:
            if col not in schema:
                columns[col] = df[col]
    return pd.DataFrame(columns, index=df.index, copy=False).reset_index(drop=True)


@functools.lru_cache(maxsize=None)
def _dtype(name: str, string_storage: str):
    """pandas' dtype object for a schema's dtype name, resolved once per string storage ('string'
    follows pandas' mode.string_storage option, as astype('string') does)."""
    return pd.api.types.pandas_dtype(name)


# --------------------------------------------------------------------------- atomic files
def is_member(values: pd.Series, members) -> np.ndarray:
    """Per row, whether the value is one of ``members`` (a collection, not a str), as
    ``Series.isin`` answers it (a missing value matches when ``members`` holds a NA), with each
    distinct value looked up once. Why: isin on Arrow strings converted the whole collection on
    every call, 0.6 s on a million rows against 100,000 usable images (3 s with a million)."""
    if isinstance(members, str):  # Series.isin's refusal: one name is no collection of them
        raise TypeError(f"expected a collection of values, not the str {members!r}")
    allowed = members if isinstance(members, (set, frozenset)) else set(members)
    codes, uniques = pd.factorize(values)
    # .tolist(): iterating an Arrow-backed Index yields one value per Python call (0.25 s for Confusions'
    # 100,000 images at 1M predictions; the list, 4x faster: 0.072 -> 0.017 s in a microbenchmark).
    found = np.fromiter((value in allowed for value in uniques.tolist()), dtype=bool, count=len(uniques))
    missing = any(v is None or v is pd.NA or (isinstance(v, float) and v != v) for v in allowed)
    return np.append(found, missing)[codes]  # code -1 (a missing value): the appended answer


def probe_writable(folder: Path, probe_name: str) -> None:
    """Make ``folder`` if need be, create the file ``probe_name`` in it and remove it again:
    raises ``OSError`` whose ``filename`` is the folder when new files cannot be made there. The
    name is the caller's, so a kill between create and remove leaves a file its own sweep knows."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / probe_name
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(folder)) from None
    probe.unlink()


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success fsync it and rename it over
    ``target``. On error the temporary file is removed and ``target`` is untouched."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its files are always 0600; created like this they get the usual umask mode.
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _open_stored(path: Path) -> tuple[int, os.stat_result] | None:
    """(descriptor, stat) of a regular file at ``path`` opened without following a link or waiting on a
    FIFO, else None (the descriptor closed). The caller closes the one it gets."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info


def read_stored_bytes(path: Path, max_bytes: int = 1 << 30) -> bytes | None:
    """The bytes of a file WildLens itself stored (a fingerprint, a derived table), or None when it
    is missing, a link, not a regular file, or larger than ``max_bytes``: derived data read through
    here is recomputed, never waited on. Why: ``read_text()`` of a FIFO put at a fingerprint hung
    every reader (the dashboard 200 s and more), a link to /dev/zero ran out of memory, and a link
    out of the run was read as the run's own (hostile campaign)."""
    opened = _open_stored(path)
    if opened is None:
        return None
    fd, info = opened
    try:
        if info.st_size > max_bytes:
            return None
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stored_buffer(path: Path, size: int) -> bytearray | None:
    """:func:`read_stored_bytes` for a large derived file whose writer recorded its ``size``: the same
    refusals (missing, a link, not a regular file), and None unless the file has exactly that size,
    read in one pass into a buffer of it, which Arrow then uses in place. Why: the chunks joined by
    read_stored_bytes copy a 350 MB table twice (0.3 s of the Browse page's first load at 1,000,000
    predictions); the exact size refuses at once a sparse 8 GiB file put in its place, which took
    42 s and 8.5 GiB of memory to refuse by its checksum (hostile campaign). A file that grows or
    shrinks while it is read is None (recomputed), never a torn table."""
    try:
        with _stored_of_size(path, size) as fd:
            buffer = _zeroed(size) if fd is not None else None
            if buffer is None:
                return None
            view, done = memoryview(buffer), 0
            while done < size:
                got = os.readv(fd, [view[done:]])
                if got == 0:
                    return None  # shrank meanwhile
                done += got
            return buffer if os.read(fd, 1) == b"" else None  # grew meanwhile
    except OSError:
        return None


@contextmanager
def _stored_of_size(path: Path, size: int) -> Iterator[int | None]:
    """The descriptor of ``path`` opened as :func:`_open_stored` opens it when it is exactly ``size`` bytes
    long and has no hole, else None; closed on leaving. Why no hole: a sparse file of the size a
    hand-edited claim names costs no disk, and reading it into a buffer of that size took 2.7 GB for
    2 GiB and raised MemoryError under a memory limit (hostile campaign); WildLens writes its files whole."""
    opened = _open_stored(path)
    if opened is None:
        yield None
        return
    fd, info = opened
    try:
        yield fd if info.st_size == size and not _has_hole(fd, size) else None
    finally:
        os.close(fd)


def _has_hole(fd: int, size: int) -> bool:
    """Whether the file has a hole before ``size`` (SEEK_HOLE; False where the platform or the file
    system cannot tell). The file position is left at 0."""
    if not hasattr(os, "SEEK_HOLE") or size <= 0:
        return False
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < size
    except OSError:
        return False
    finally:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            pass


def _zeroed(size: int) -> bytearray | None:
    """A buffer of ``size`` bytes, or None where the memory is not there (the file is then read as stale)."""
    try:
        return bytearray(size)
    except MemoryError:
        return None


def _unfilled(size: int):
    """A writable buffer of ``size`` bytes for a reader that fills every byte of it (and returns None
    otherwise), or None where the memory is not there: a private anonymous memory map, whose pages the
    kernel zeroes one by one as the read first touches them. Why not ``bytearray(size)``: it zeroes the
    whole buffer in a pass of its own before the read writes it again. Why private: a shared map is
    shared memory (counted as such, shared with a forked child instead of copied). Why no huge pages:
    a NumPy buffer, which asks for them, made the Browse page's first load slower than bytearray (1.71
    against 1.38 s, median of 6 alternating), the kernel assembling them for every new table; a host
    whose kernel gives them unasked (``transparent_hugepage`` 'always') is told not to. Reading and
    hashing the 370 MB Browse table of 1,000,000 predictions, median of 10 alternating on this host:
    bytearray 0.407 s, a shared map 0.309 s, private 0.293 s, private without huge pages 0.285 s."""
    import mmap

    if size == 0:
        return bytearray(0)  # a map cannot be empty
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    try:
        buffer = mmap.mmap(-1, size, flags=flags) if flags else mmap.mmap(-1, size)
    except (MemoryError, OSError, ValueError, OverflowError):
        return None
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        try:
            buffer.madvise(mmap.MADV_NOHUGEPAGE)
        except OSError:  # a kernel without transparent huge pages: nothing to turn off
            pass
    return buffer


def sha256_of_halves(data) -> tuple[bytes, bytes]:
    """SHA-256 digests of ``data``'s first ``len // 2`` bytes and of the rest, hashed on two threads
    (hashlib releases the GIL): the halves :func:`read_stored_hashed` hashes as it reads them. Why two:
    one SHA-256 of a 370 MB table took 0.2 s of a first load."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    view = memoryview(data)
    half = len(view) // 2
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wildlens-hash") as pool:
            second = pool.submit(lambda: hashlib.sha256(view[half:]).digest())
            return hashlib.sha256(view[:half]).digest(), second.result()
    except RuntimeError:  # no thread to be had (an address-space limit): both halves here, as read_stored_hashed
        return hashlib.sha256(view[:half]).digest(), hashlib.sha256(view[half:]).digest()


HALF_CHUNK = 8 << 20  # bytes read and hashed at a time by each half's thread


def read_stored_hashed(path: Path, size: int) -> tuple[object, bytes, bytes] | None:
    """The file's bytes in a writable buffer (:func:`_unfilled`'s map, which Arrow then uses in place), as
    :func:`read_stored_buffer` reads them, with the SHA-256 digests of the buffer's two halves (the first
    ``size // 2`` bytes and the rest), each half read and hashed in chunks on its own thread (file
    reads and hashlib release the GIL). Why: reading 370 MB and then hashing its halves was two passes
    over memory (the Browse page's first load at 1,000,000 predictions); a chunk is hashed just after
    its read, while it is still in the cache. The same refusals: missing, a link, not a regular file,
    not exactly ``size`` bytes, a hole, shrinking or growing while read, no memory for it (None)."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    if not hasattr(os, "preadv"):  # a platform without positioned vector reads: one pass, then the halves
        buffer = read_stored_buffer(path, size)
        return None if buffer is None else (buffer, *sha256_of_halves(buffer))
    try:
        with _stored_of_size(path, size) as fd:
            buffer = _unfilled(size) if fd is not None else None
            if buffer is None:
                return None
            view = memoryview(buffer)

            def half(start: int, stop: int) -> bytes | None:
                digest, at = hashlib.sha256(), start
                while at < stop:
                    got = os.preadv(fd, [view[at:min(stop, at + HALF_CHUNK)]], at)
                    if got == 0:
                        return None  # shrank meanwhile
                    digest.update(view[at:at + got])
                    at += got
                return digest.digest()

            try:
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wildlens-read") as pool:
                    second = pool.submit(half, size // 2, size)
                    first = half(0, size // 2)
                    second = second.result()
            except RuntimeError:  # no thread to be had (its stack over an address-space limit): one pass
                first, second = half(0, size // 2), half(size // 2, size)
            if first is None or second is None or os.pread(fd, 1, size) != b"":  # shrank or grew meanwhile
                return None
            return buffer, first, second
    except OSError:
        return None


def real_folder(path: Path) -> bool:
    """Whether ``path`` is missing or a real folder: not a link (to anywhere) and not a file. A
    derived-data folder that is a link is written through by nobody (hostile campaign: a linked
    ``metrics/curated`` had WildLens overwrite files outside the run)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode)


def write_bytes_atomic(target: Path, data: bytes) -> None:
    """``atomic_path``'s write (same temporary name, fsync, rename) in one open: an import stores
    every accepted image through it, and the three opens and a stat it used to cost were a good
    part of an image's time."""
    target = Path(target)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(target: Path, obj) -> None:
    write_bytes_atomic(target, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_table(df: pd.DataFrame, target: Path, schema: dict[str, str] | None = None, table: str = "table") -> None:
    """Atomically write a Parquet table (conformed to ``schema`` when given), or a CSV when
    ``target`` ends in .csv (for export; CSV carries no schema version; written by
    ``core.csvsafe.to_csv_bytes``, so read it back with ``core.csvsafe.read_csv``)."""
    import pyarrow.parquet as pq

    if schema is not None:
        df = conform(df, schema, table=table)
    target = Path(target)
    with atomic_path(target) as tmp:
        if target.suffix.lower() == ".csv":
            from .csvsafe import to_csv_bytes  # spreadsheet-safe: formula-like text cells get a quote

            tmp.write_bytes(to_csv_bytes(df))
        else:
            pq.write_table(_versioned_arrow(df), tmp)


def _versioned_arrow(df: pd.DataFrame):
    import pyarrow as pa

    arrow = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(arrow.schema.metadata or {})
    meta[_META_KEY] = str(SCHEMA_VERSION).encode()
    return arrow.replace_schema_metadata(meta)


def table_to_parquet_bytes(df: pd.DataFrame, schema: dict[str, str] | None = None, table: str = "table") -> bytes:
    """The bytes ``write_table`` would store for a Parquet target: for a caller that must know
    exactly what it wrote (a checksum) before writing it with ``write_bytes_atomic``."""
    import pyarrow.parquet as pq

    if schema is not None:
        df = conform(df, schema, table=table)
    buffer = io.BytesIO()
    pq.write_table(_versioned_arrow(df), buffer)
    return buffer.getvalue()


def open_table_file(source: Path, *, follow_links: bool = True):
    """A binary file object of the regular file ``source``: StoreError for a folder, FIFO or device,
    FileNotFoundError when absent. Read a stored table through it, never through its path: given a
    path, pyarrow opens it again for the data pages, so a writer's atomic replace between the two
    opens paired one file's footer with the other's pages ("Deserializing page header failed"; 958 of
    8,670 reads against a writer replacing the file in a loop, 0 of 7,370 through one descriptor).
    An open file keeps its inode. O_NONBLOCK and fstat: a FIFO in the file's place opens at once and
    is refused, not waited on.

    ``follow_links=False`` (files WildLens itself writes, such as prediction parts, which are always
    regular files renamed into place): a symbolic link in the file's place is a one-line StoreError,
    not followed (O_NOFOLLOW: no check-then-open race). Why: a part linked to a file outside the run
    was read and counted as the run's predictions (hostile-input campaign). A folder above it may
    still be a link: that is how a user moves a run's predictions to another disk."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(source, flags)
    except OSError as exc:
        if not follow_links and exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(source):
            raise StoreError(f"{source} is a symbolic link, not a file WildLens wrote; move the link away (or put "
                             "the file itself there) and re-run.") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            from .userfile import describe_kind

            raise StoreError(f"{source} is {describe_kind(mode)}, not a regular file; move it away and re-run.")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_table(source: Path, schema: dict[str, str] | None = None, table: str = "table", *,
               follow_links: bool = True) -> pd.DataFrame:
    """A stored Parquet table, through :func:`open_table_file` (``follow_links`` as there)."""
    import pyarrow.parquet as pq

    source = Path(source)
    try:
        with open_table_file(source, follow_links=follow_links) as handle:
            # ParquetFile(...).read(), not pq.read_table(handle): after read_table on a file object and an
            # error raised on, the process aborted at exit now and then ("terminate called without an active
            # exception": 34 of 40 tries in a minimal script, 12 of 30 of `explain metrics` on a part of a
            # newer schema; 0 of 30 this way; apache/arrow #33975).
            arrow = pq.ParquetFile(handle).read()
    except (FileNotFoundError, StoreError):
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise StoreError(f"{source} is not a readable Parquet file ({exc}).") from None
    return _from_arrow(arrow, source, schema, table)


def ipc_bytes(table) -> bytes:
    """A pyarrow Table as one Arrow IPC stream: how rows and tables cross between Ray processes here
    (the classify engine's batches, the crawl actors' verdicts, the metric chunks), never a pickle."""
    import pyarrow as pa

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def ipc_table(data: bytes):
    """:func:`ipc_bytes`'s inverse."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def read_parquet_bytes(data: bytes, schema: dict[str, str] | None = None, table: str = "table",
                       source: Path | str = "table", *, columns: list[str] | None = None) -> pd.DataFrame:
    """``read_table`` of bytes already in memory (read once, checksummed, then parsed); ``source``
    names the file in messages. ``columns``: only these are decoded (those the file lacks come back
    empty, as ``conform`` adds them), in this order."""
    import pyarrow.parquet as pq

    try:
        if columns is None:
            arrow = pq.read_table(io.BytesIO(data))
        else:
            parquet = pq.ParquetFile(io.BytesIO(data))
            present = set(parquet.schema_arrow.names)
            arrow = parquet.read(columns=[c for c in columns if c in present])
    except Exception as exc:  # pyarrow raises several types for damaged bytes
        raise StoreError(f"{source} is not a readable Parquet file ({exc}).") from None
    if columns is not None and schema is not None:
        schema = {c: schema[c] for c in columns}
    return _from_arrow(arrow, source, schema, table)


def _from_arrow(arrow, source, schema: dict[str, str] | None, table: str) -> pd.DataFrame:
    version = int((arrow.schema.metadata or {}).get(_META_KEY, b"0") or 0)
    if version > SCHEMA_VERSION:
        raise StoreError(f"{source} was written by a newer WildLens (schema {version} > {SCHEMA_VERSION}); upgrade WildLens.")
    try:
        df = arrow.to_pandas()
        return conform(df, schema, table=table) if schema is not None else df
    except StoreError as exc:  # conform names the table and the column; the file and the fix are said here
        said = " ".join(str(exc).split()).rstrip(".")  # on one line, cut: the fix after it must survive one_line
        said = said if len(said) <= 240 else said[:239] + "…"
        raise StoreError(f"{source}: {said}; WildLens did not write it so: restore it, or move it away and re-run.") \
            from None
    except (TypeError, ValueError, ArithmeticError) as exc:  # a column whose type its pandas metadata contradicts
        # (a hand-edited file: TypeError "Expected array of boolean type" reached the pages; hostile campaign)
        raise StoreError(f"{source} does not read as the {table} table ({' '.join(str(exc).split())[:200]}).") \
            from None


# --------------------------------------------------------------------------- runs
