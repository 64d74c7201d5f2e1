"""The run store: where a run's artefacts live and what their tables look like.

Every stage reads and writes through this module, so the folder layout is defined once, here,
and the table schemas once, in ``core.tables`` (which this module re-exports)::

    $WILDLENS_HOME/                       (default ~/.wildlens)
      runs/<run_id>/
        run.json                          the run's description (RunInfo), schema_version inside
        images/<wnid>/<sha256[:16]>.<ext> accepted images, named by content hash
        manifest.parquet                  one row per image seen (accepted, rejected, duplicate)
        predictions/<model>/part-*.parquet  top-5 predictions, one row per (model, image)
        metrics/<table>.parquet           derived tables (per_model, per_class, confusions) and
        metrics/fingerprint.json          the inputs they came from: written by explain/artefact.py
      cache/                              derived data shared by runs (similarity matrices)

Writes are atomic (a temporary file in the same folder, fsync, then ``os.replace``), so a killed
process leaves either the old file or the new one, never half of one. Predictions are stored as
part files so a long inference run can be interrupted and resumed without rewriting what it did.
Tables carry ``wildlens.schema_version`` in their Parquet metadata; a newer version is refused
with a message rather than misread.
"""
from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import os
import re
import secrets
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pandas as pd

from .errors import WildLensError, printable
from .userfile import expand_user
# The schemas and atomic writers live in core.tables (which imports nothing of this module); callers
# keep reading them from here.
from .tables import (SCHEMA_VERSION, _META_KEY, _RUN_ID_RE, RUN_ID_RULE, TOP_K, StoreError, MANIFEST_SCHEMA,
                     MANIFEST_STATUSES, PREDICTION_SCHEMA, PREDICTION_STATUSES, MODEL_STAMP_COLUMNS, empty_table, conform, probe_writable,
                     atomic_path, write_bytes_atomic, write_json_atomic, write_table, _versioned_arrow,
                     table_to_parquet_bytes, read_table, read_parquet_bytes, _from_arrow)  # noqa: F401

if TYPE_CHECKING:
    from .parts import PredictionParts

HOME_ENV = "WILDLENS_HOME"


def default_root() -> Path:
    env = os.environ.get(HOME_ENV)
    if env:
        return expand_user(env, f"{HOME_ENV}=")
    try:
        return Path.home() / ".wildlens"
    except RuntimeError:  # HOME unset and no passwd entry (docker run --user 12345): a traceback on every command
        raise StoreError(f"no home folder to keep runs in (HOME is unset and user {os.getuid()} has none); set "
                         f"{HOME_ENV} (or HOME) to a folder you can write.") from None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def valid_run_id(run_id: str) -> bool:
    """Letters, digits, '-', '_', '.', starting with a letter or digit: a run id is a folder name
    that cannot climb out of the runs folder, and names starting with '.' are the store's own."""
    return isinstance(run_id, str) and bool(_RUN_ID_RE.match(run_id))


def new_run_id(title: str = "run") -> str:
    """'20261129-161500-cat-3f2a': sortable by time, readable, unique; only safe characters."""
    stem = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:32] or "run"
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}-{stem}-{secrets.token_hex(2)}"


@dataclass
class RunInfo:
    """run.json: what a run is about. Unknown keys from newer versions are kept in ``extra``."""

    run_id: str
    title: str = ""
    created: str = field(default_factory=now_iso)
    query: str = ""  # what the analyst typed
    sense: str = ""  # chosen synset, e.g. 'cat.n.01'
    label_space: str = "imagenet-1k"
    wnids: list[str] = field(default_factory=list)  # the classes of the run, label-space order
    images_per_class: int = 0  # k
    source: str = ""  # 'crawl:<engine>', 'import', 'sample'
    models: list[str] = field(default_factory=list)  # models run so far
    notes: str = ""
    is_sample: bool = False  # the embedded default sample run
    schema_version: int = SCHEMA_VERSION
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> "RunInfo":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.setdefault("extra", {}).update({k: v for k, v in data.items() if k not in known})
        return cls(**kwargs)


def _checked_info(data) -> tuple[dict, str]:
    """(run.json's fields with null read as the default, the first field of the wrong type or '')."""
    if not isinstance(data, dict):
        return {}, f"not a JSON object but {type(data).__name__}"
    out = dict(data)
    for f in fields(RunInfo):
        if f.name not in out or f.name in ("extra", "run_id"):  # the id is the folder's name
            continue
        value, kind = out[f.name], str(f.type)
        if value is None:  # null: the field's default
            out.pop(f.name)
        elif kind == "str" and not isinstance(value, str):
            return out, f"'{f.name}' should be text, not {type(value).__name__}"
        elif kind == "list[str]" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return out, f"'{f.name}' should be a list of texts"
        elif kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            return out, f"'{f.name}' should be a whole number, not {type(value).__name__}"
        elif kind == "bool" and not isinstance(value, bool):
            return out, f"'{f.name}' should be true or false, not {type(value).__name__}"
    return out, ""


RUN_INFO_MAX_BYTES = 1 << 20  # a run.json is a few kB (title, classes, provenance); 1 MiB leaves room for 21k classes


class Run:
    """One run folder. Paths and table I/O; no business logic."""

    def __init__(self, path: Path):
        self.path = Path(path)

    # layout -----------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def info_path(self) -> Path:
        return self.path / "run.json"

    @property
    def images_dir(self) -> Path:
        return self.path / "images"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.parquet"

    @property
    def predictions_dir(self) -> Path:
        return self.path / "predictions"

    @property
    def metrics_dir(self) -> Path:
        return self.path / "metrics"

    def image_path(self, file: str) -> Path:
        """Absolute path of a manifest 'file'; refuses anything that escapes the images folder."""
        path = (self.images_dir / file).resolve()
        if self.images_dir.resolve() not in path.parents:
            raise StoreError(f"{file!r} is not inside the run's images folder.")
        return path

    # description -------------------------------------------------------------
    @property
    def info(self) -> RunInfo:
        from .userfile import UserFileError, read_user_bytes

        try:
            # Read as a file a person handed us: a FIFO in its place opens at once and is refused, a link to a
            # device is refused, a huge file is not read (a hostile campaign: a FIFO there hung every run list,
            # and with it the dashboard; a link to /dev/zero read without end).
            data = json.loads(read_user_bytes(self.info_path, what=str(self.info_path), max_bytes=RUN_INFO_MAX_BYTES))
        except UserFileError as exc:
            if not os.path.lexists(self.info_path):
                raise StoreError(f"{self.path} is not a WildLens run (no run.json).") from None
            # Its own advice instead of core.userfile's (a code review), and a file that cannot be read for its
            # permissions is made readable.
            reason = exc.problem
            if "permission denied" in reason:
                raise StoreError(f"{reason}; make it readable to this user.") from None
            raise StoreError(f"{reason}; move it away and restore the run's run.json (a backup, or a copy of "
                             "another run's with this run's id).") from None
        except (ValueError, OSError) as exc:  # not JSON, not UTF-8 (JSONDecodeError is a ValueError), unreadable
            raise StoreError(f"{self.info_path} is damaged ({exc}).") from None
        except RecursionError:  # '[' x 5000: one such run.json ended the whole run list (hostile check, 2026-12-07)
            raise StoreError(f"{self.info_path} is damaged (nested too deeply to be a run's description).") from None
        # Fields of the wrong type (a hand edit, a damaged copy) are refused here, in one line, instead
        # of breaking whatever reads them later: a title that is a list failed every page's sidebar.
        data, problem = _checked_info(data)
        if problem:
            raise StoreError(f"{self.info_path} is damaged ({problem}); fix that field or restore the file.")
        if data.get("schema_version", 0) > SCHEMA_VERSION:
            raise StoreError(f"Run {self.run_id} was written by a newer WildLens; upgrade WildLens.")
        # The folder's name is the run's id: a run folder copied under another name (a backup, a
        # colleague's run) is its own run, never a second entry with the original's id.
        return RunInfo.from_dict({**data, "run_id": self.run_id})

    def save_info(self, info: RunInfo) -> None:
        data = asdict(info)
        data.update(data.pop("extra", {}) or {})
        write_json_atomic(self.info_path, data)

    def update_info(self, **changes) -> RunInfo:
        # Read, change, write under the run's info lock: a rename on the Runs page and an inference
        # recording its model at the same moment would otherwise each write back what they read,
        # and one of the two changes would be lost.
        with _info_lock(self.path):
            info = self.info
            for key, value in changes.items():
                if not hasattr(info, key):
                    raise StoreError(f"RunInfo has no field {key!r}.")
                setattr(info, key, value)
            self.save_info(info)
        return info

    # manifest ------------------------------------------------------------------
    def read_manifest(self) -> pd.DataFrame:
        if not self.manifest_path.exists():
            return empty_table(MANIFEST_SCHEMA)
        df = read_table(self.manifest_path, MANIFEST_SCHEMA, table="manifest")
        df["excluded"] = df["excluded"].fillna(False)
        return df

    def manifest_lock(self):
        """Hold the run's manifest lock (waiting for it) for one read-change-write of the manifest.

        Every writer of ``manifest.parquet`` holds it: :meth:`write_manifest`, :meth:`set_excluded`
        (the Images page, a label issue) and crawl's collector, whose saves re-read the exclusions
        made since under it. Without it an import or crawl that kept the manifest in memory wrote
        back what it had read, undoing every exclusion made meanwhile (issue 22 item 2). Re-entrant
        within a thread; the OS releases it when the process dies."""
        return waiting_lock(self.path, MANIFEST_LOCK_NAME)

    def write_manifest(self, df: pd.DataFrame) -> None:
        """Replace the whole manifest (atomically, under :meth:`manifest_lock`). A change to some
        rows reads and writes within one ``with run.manifest_lock():`` (see :meth:`set_excluded`)."""
        bad = set(df["status"].dropna()) - set(MANIFEST_STATUSES) if "status" in df else set()
        if bad:
            raise StoreError(f"manifest: unknown status {sorted(bad)}; allowed {MANIFEST_STATUSES}.")
        with self.manifest_lock():
            write_table(df, self.manifest_path, MANIFEST_SCHEMA, table="manifest")

    def set_excluded(self, files: list[str], excluded: bool = True, reason: str = "") -> int:
        """Mark images as excluded (or back). Rows and files are never deleted. See :meth:`set_exclusions`."""
        return self.set_exclusions({file: (reason if excluded else None) for file in files})

    def set_exclusions(self, changes: dict[str, str | None]) -> int:
        """Exclude each file of ``changes`` with its reason (None: include it again), in one read-change-write of
        the manifest: all or nothing (the Images page saves a table's edits at once: a failure part-way had saved
        some rows and said nothing was). Rows and files are never deleted; returns the rows changed.

        Under the manifest lock, so a concurrent import or crawl keeps the change, and under the run's presence
        lock (:func:`core.locking.run_presence_lock`): a run deleted meanwhile is StoreError, never made again (a
        hostile campaign: its folder came back with an empty manifest, unlisted, and blocked its id). A write that
        fails (a full disk, a read-only folder) is StoreError too, one line; nothing changed."""
        from .locking import RunGone, run_presence_lock

        try:
            with run_presence_lock(self.path, f"Run {self.run_id} is gone (deleted meanwhile); nothing was changed."):
                with self.manifest_lock():
                    df = self.read_manifest()
                    # One pass over the manifest for all the changes (a comparison per change was rows x changes).
                    # (A row without a file is no change's: isin matches any missing key to it.)
                    hit = (df["file"].notna() & df["file"].isin(list(changes))).fillna(False).to_numpy(dtype=bool)
                    reasons = [changes[file] for file in df.loc[hit, "file"]]
                    df.loc[hit, "excluded"] = [reason is not None for reason in reasons]
                    df.loc[hit, "excluded_reason"] = [pd.NA if reason is None else reason for reason in reasons]
                    changed = int(hit.sum())
                    self.write_manifest(df)
        except RunGone as exc:
            raise StoreError(str(exc)) from None
        except OSError as exc:
            why = exc.strerror or str(exc)
            fix = ("free space on its disk" if exc.errno == errno.ENOSPC else f"check that {self.path} and its manifest "
                   "are writable folders and files of yours" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
                   else f"check {self.path} (its manifest and lock files must be regular files)")
            raise StoreError(f"cannot save the exclusion in run {self.run_id} ({why}); nothing was changed: "
                             f"{fix}.") from None
        return changed

    def usable_images(self) -> pd.DataFrame:
        """Accepted, not excluded: the images a model should see."""
        df = self.read_manifest()
        return df[(df["status"] == "accepted") & ~df["excluded"].astype(bool)].reset_index(drop=True)

    # predictions ------------------------------------------------------------------
    @property
    def prediction_parts(self) -> PredictionParts:
        """The ``predictions/`` folder as part files (:class:`core.parts.PredictionParts`)."""
        from .parts import PredictionParts

        return PredictionParts(self.predictions_dir)

    def _model_dir(self, model: str) -> Path:
        return self.prediction_parts.model_dir(model)

    def append_predictions(self, df: pd.DataFrame) -> list[Path]:
        """Store a batch of predictions as new part files (one per model), atomically."""
        return self.prediction_parts.append(df)

    def read_predictions(self, models: list[str] | None = None) -> pd.DataFrame:
        """All stored predictions; the latest row wins where an image was predicted twice."""
        return self.prediction_parts.read(models)

    def usable_predictions(self) -> pd.DataFrame:
        """Predictions of images that are still usable: an image an analyst excluded after
        inference keeps its stored rows but leaves the metrics. Runs without a manifest (predictions
        imported from elsewhere) keep every row."""
        df = self.read_predictions()
        usable = self.usable_files()
        return df if usable is None else df[df["image"].isin(usable)].reset_index(drop=True)

    def usable_files(self) -> set[str] | None:
        """Files of the accepted, not excluded images, whose predictions count; None for a run without a
        manifest (predictions imported from elsewhere), where every prediction counts."""
        # to_numpy first: iterating an Arrow string column in Python took 0.07 s of 100,000 files (a page's first load)
        return set(self.usable_images()["file"].dropna().to_numpy(dtype=object)) if self.manifest_path.exists() else None

    def predicted_images(self, model: str, include_failed: bool = False) -> set[str]:
        return self.prediction_parts.predicted_images(model, include_failed)

    def compact_predictions(self, model: str) -> None:
        """Merge a model's part files into one (:meth:`core.parts.PredictionParts.compact`: a kill
        at any point loses nothing)."""
        self.prediction_parts.compact(model)


# --------------------------------------------------------------------------- fingerprints
def _files_fingerprint(root: Path, files: list[Path]) -> str:
    """16 hex digits of sha256 over each file's path (relative to ``root``), size, mtime and inode.
    Why stat and not content: a page asks on every rerun, and hashing a 1M-prediction run's parts
    would cost a read of ~50 MB each time; the store only ever writes by atomic rename (a new inode
    and mtime) or a new part name, so any change shows. A file removed while listing counts as absent."""
    digest = hashlib.sha256()
    for path in files:
        try:
            st = path.stat()
        except OSError:  # a dangling link or a loop still counts: adding one changes what reading the folder says
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
        digest.update(f"{path.relative_to(root).as_posix()}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}\n".encode())
    return digest.hexdigest()[:16]


def predictions_fingerprint(run: "Run") -> str:
    """Changes whenever a prediction part file is added, replaced or removed; stays the same while
    nothing is written. Derived tables (explain's metrics artefact, the dashboard's caches) key on it."""
    if not run.predictions_dir.exists():
        return "none"
    return _files_fingerprint(run.path, sorted(run.predictions_dir.glob("*/part-*.parquet")))


def manifest_fingerprint(run: "Run") -> str:
    """Changes whenever the manifest is rewritten (an import, a crawl, an exclusion)."""
    if not run.manifest_path.exists():
        return "none"
    return _files_fingerprint(run.path, [run.manifest_path])


class RunStore:
    """The root folder that holds every run (``$WILDLENS_HOME``, default ``~/.wildlens``)."""

    def __init__(self, root: Path | str | None = None):
        self.root = expand_user(root) if root else default_root()

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    def create_run(self, info: RunInfo | None = None, **kwargs) -> Run:
        info = info or RunInfo(run_id=kwargs.pop("run_id", None) or new_run_id(kwargs.get("title") or kwargs.get("query") or "run"), **kwargs)
        if not _RUN_ID_RE.match(info.run_id):
            raise StoreError(f"{info.run_id!r} is not a valid run id: {RUN_ID_RULE}.")
        run = Run(self.runs_dir / info.run_id)
        if run.info_path.exists():
            raise StoreError(f"Run {info.run_id} already exists.")
        run.path.mkdir(parents=True, exist_ok=True)
        run.save_info(info)
        return run

    def open_run(self, run_id: str) -> Run:
        if not _RUN_ID_RE.match(run_id):
            raise StoreError(f"{run_id!r} is not a valid run id: {RUN_ID_RULE}.")
        run = Run(self.runs_dir / run_id)
        if not run.info_path.exists():
            known = ", ".join(i.run_id for i in self.list_runs()[:5]) or "none yet"
            raise StoreError(f"No run {run_id!r} in {self.runs_dir} (recent runs: {known}).")
        return run

    def list_runs(self) -> list[RunInfo]:
        """Every readable run, newest first. Damaged folders are skipped, not fatal, and so are
        folders whose name is no run id (``.import-*`` staging, ``.deleting-*``: the store's own)."""
        if not self.runs_dir.exists():
            return []
        infos = []
        for folder in self.runs_dir.iterdir():
            if valid_run_id(folder.name) and (folder / "run.json").exists():
                try:
                    infos.append(Run(folder).info)
                except StoreError:
                    continue
        return sorted(infos, key=lambda i: (i.created, i.run_id), reverse=True)

    def damaged_runs(self) -> list[tuple[str, str]]:
        """(run id, the one-line reason) of each run folder ``list_runs`` skips because its run.json
        cannot be read (a page says so, instead of the run silently missing from every list)."""
        if not self.runs_dir.exists():
            return []
        damaged = []
        for folder in sorted(self.runs_dir.iterdir()):
            if not valid_run_id(folder.name):
                # A run folder copied under a name that is no run id ("sample copy") was left out of every list
                # without a word (a hostile campaign); the store's own hidden folders (.import-*, .deleting-*) stay
                # unsaid.
                if not folder.name.startswith(".") and os.path.lexists(folder / "run.json"):
                    shown = printable(folder.name[:80])
                    damaged.append((shown, f"{printable(str(self.runs_dir))}/{shown} has a name that is no run id "
                                    f"({RUN_ID_RULE}); rename the folder to open it as a run."))
                continue
            if (folder / "run.json").exists():
                try:
                    Run(folder).info
                except StoreError as exc:
                    damaged.append((folder.name, str(exc)))
        return damaged

    # administration ---------------------------------------------------------------
    def rename_run(self, run_id: str, title: str) -> RunInfo:
        """Give a run a new title (what pages and lists show); its id, folder and files stay. The
        title is one line (runs of white space become one space), at most 200 characters, not
        empty. run.json is rewritten atomically."""
        run = self.open_run(run_id)
        text = " ".join(str(title).split())[:200]
        if not text:
            raise StoreError(f"A run needs a title to be renamed to; type one (the run id {run_id} stays).")
        return run.update_info(title=text)

    def delete_run(self, run_id: str) -> None:
        """Delete a run: its folder under ``runs/`` and every file in it (images, manifest,
        predictions, metrics). Nothing outside the runs folder is touched: the id cannot name
        another folder, links inside the run are removed as links (never followed), and a run
        folder that is itself a link loses only the link.

        Refused (:class:`core.locking.FolderBusy`, one line) while a crawl, an import, an
        inference or a metrics refresh (``core.locking.run_presence_lock``) holds one of the run's locks (``.wildlens*.lock`` files, ``core.locking``):
        the locks are taken for the moment the folder is renamed to ``runs/.deleting-<id>-<token>``
        (so it leaves the run list at once, in one step), then the renamed folder is removed.

        The sample run may be deleted like any other: ``wildlens.sample.ensure_sample_run``
        builds it again when it is missing, which the dashboard does once per server process
        (``pages.server.ensure_sample_run``), so it comes back on the dashboard's next start,
        not in the running one."""
        import shutil

        run = self.open_run(run_id)
        runs = self.runs_dir.resolve()
        if run.path.is_symlink():
            run.path.unlink()
            return
        if run.path.resolve().parent != runs:
            raise StoreError(f"Run {run_id} is not a folder of {self.runs_dir}; nothing was deleted.")
        trash = self.runs_dir / f".deleting-{run_id}-{secrets.token_hex(3)}"
        with _run_locks(run.path, run_id):
            try:
                os.rename(run.path, trash)
            except OSError as exc:
                raise StoreError(f"Cannot delete run {run_id}: {exc.strerror or exc}; check that {self.runs_dir} "
                                 "is writable.") from None
        errors = []
        # A file already gone is not an error: another delete may be sweeping this folder (below).
        shutil.rmtree(trash, onerror=lambda func, path, info: None if isinstance(info[1], FileNotFoundError)
                      else errors.append(f"{path}: {info[1]}"))
        # Deletes killed half-way (a server stopped while a big run was being removed) left their
        # .deleting-* folder behind, out of every list, holding the disk: runs already deleted.
        for left in self.runs_dir.glob(".deleting-*"):
            if _DELETING_RE.match(left.name) and left.is_dir() and not left.is_symlink():
                shutil.rmtree(left, ignore_errors=True)
        if errors:
            raise StoreError(f"Run {run_id} is gone from the run list, but {len(errors)} of its files could not be "
                             f"deleted ({errors[0]}); remove {trash} by hand.")


_DELETING_RE = re.compile(r"^\.deleting-[A-Za-z0-9][A-Za-z0-9_.-]{0,79}-[0-9a-f]{6}\Z")  # RunStore.delete_run's
INFO_LOCK_NAME = ".wildlens-info.lock"  # held for each read-change-write of run.json (Run.update_info)
MANIFEST_LOCK_NAME = ".wildlens-manifest.lock"  # held by every writer of the manifest (Run.manifest_lock)
_held_locks = threading.local()  # per thread: lock file path -> depth (waiting_lock is re-entrant)


@contextmanager
def waiting_lock(folder: Path, name: str, *, required: bool = False) -> Iterator[None]:
    """Wait for, then hold, ``folder/name`` (an advisory ``flock``, released by the OS if the
    process dies). Re-entrant within a thread: a holder may call code that takes it again. Two
    threads of one process exclude each other like two processes (each opens its own handle).
    A folder that is missing or read-only is not locked: the read or write that follows says what
    is wrong. With ``required`` a lock that cannot be opened (a folder, a dangling link or another
    user's file in its place) is refused with one line instead: a writer that read-changes-writes
    a file shared with others (the curation log, saved views) must never run unlocked, where
    360 acknowledged entries of 6 processes kept 42 (hostile campaign)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks
        yield
        return
    path = str(Path(folder) / name)
    depth = getattr(_held_locks, "depth", None)
    if depth is None:
        depth = _held_locks.depth = {}
    if depth.get(path):
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
        handle = os.fdopen(fd, "a+")
    except OSError as exc:
        if required:
            raise StoreError(f"cannot take the lock {path} ({exc.strerror or exc}); move away whatever is at that "
                             "path, or make the folder writable, and try again.") from None
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        depth[path] = 1
        try:
            yield
        finally:
            depth[path] = 0
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def _info_lock(folder: Path) -> Iterator[None]:
    """Wait for, then hold, the run's info lock (released by the OS if the process dies)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks
        yield
        return
    try:
        handle = open(Path(folder) / INFO_LOCK_NAME, "a+")
    except OSError:  # a vanished or read-only run folder: reading or writing run.json says what is wrong
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def _run_locks(folder: Path, run_id: str) -> Iterator[None]:
    """Hold every WildLens lock file inside a run folder (``.wildlens*.lock``, see core.locking),
    or raise FolderBusy at once when a crawl, import or inference holds one."""
    from .locking import FolderBusy

    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks to ask
        yield
        return
    from .locking import PRESENCE_LOCK_NAME

    handles = []
    try:
        # The presence lock is made if missing, so a writer that opens it at the same moment opens
        # the same file (core.locking.run_presence_lock): one of the two then waits for the other.
        try:
            os.close(os.open(Path(folder) / PRESENCE_LOCK_NAME, os.O_RDONLY | os.O_CREAT
                             | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except OSError:
            pass  # a read-only run: nobody can write into it either
        for parent, dirs, files in os.walk(folder):  # links are not followed
            for name in files:
                if not (name.startswith(".wildlens") and name.endswith(".lock")):
                    continue
                try:
                    fd = os.open(Path(parent) / name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
                except OSError:
                    continue
                handles.append(fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise FolderBusy(f"Run {run_id} is in use: a crawl, import, inference or metrics refresh is writing to it; wait "
                                     "for it to finish (or stop it), then delete the run.") from None
        yield
    finally:
        for fd in handles:
            os.close(fd)
