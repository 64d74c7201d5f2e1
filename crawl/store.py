"""Where collected images go, and the bookkeeping that makes collection resumable.

A *destination* is either a run of the run store (``images/`` + ``manifest.parquet``) or a
plain folder (``DIR/<wnid>/`` + ``DIR/manifest.csv``, for ``python -m crawl import --out``).
Both hold the same manifest (``core.runstore.MANIFEST_SCHEMA``).

The ``Collector`` is the single collector of a destination during a crawl or an import: it keeps
the manifest in memory, decides accepted / duplicate for each validated image under a lock
(download threads call it concurrently), stores accepted files by content hash atomically,
and writes the manifest atomically now and then: after ``save_every`` new rows and a quarter of
the manifest, so an import of n files rewrites it O(log n) times (every 10 rows made an import
quadratic: 40,000 files took 420 s). It is not the manifest's only writer: an analyst's
exclusions (``core.runstore.Run.set_excluded``) land while it runs, so each save re-reads the
manifest under the manifest lock (``Destination.manifest_lock``, which ``set_excluded`` holds too)
and keeps the exclusions it finds there. Between two manifest writes every row is
also appended to a journal (``.wildlens-manifest.journal`` beside the manifest) *before* its
file is stored, so a killed process loses no row and leaves no stored file without a row: the
next collection replays the journal into the manifest and drops a replayed row whose file never
arrived. Nothing is ever deleted except temporary files that ``core.runstore.atomic_path``
itself names (``.<name>.<12 hex>.tmp``).

A URL rejected for a reason that may pass (``crawl.validate.retried_on_resume``: the connection
failed, a timeout, HTTP 408/425/429/5xx) is fetched again by the next run of the crawl, once per
run: its row is replaced in place (journalled at its own index like any change), so the manifest
keeps one row per (class, URL) and a kill mid-way leaves either the old verdict or the new one.

A manifest that is missing beside stored images, or that cannot be read, stops collection with
a one-line error saying how to rebuild it (re-import the stored images into a new destination):
treating every stored image as unrecorded would delete them all.

Duplicate policy (exact: same sha256; near: pHash distance <= threshold):
- the first copy seen is kept (accepted); later copies get status ``duplicate`` with
  ``duplicate_of`` = the kept file, and no file of their own (the bytes are already stored);
- when the copies belong to different classes the image's label is ambiguous: both rows name
  the other classes in ``other_wnids``. The kept copy stays accepted (an analyst may exclude
  it); the second class does not get a second copy, so one picture never carries two labels.
"""
from __future__ import annotations

import io
import json
import os
import re
import stat
import tempfile
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from core.errors import WildLensError, printable
from core.locking import FolderBusy, exclusive_lock
from core.userfile import UserFileError, broken_link_reason, expand_user, read_user_bytes
from core.parts import atomic_temp_re
from core.runstore import (MANIFEST_LOCK_NAME, MANIFEST_SCHEMA, Run, StoreError, conform, empty_table, now_iso,
                           waiting_lock, write_bytes_atomic, write_table)

from .config import FORMAT_EXTENSIONS, ValidationConfig
from .validate import (EXACT_DUPLICATE, NEAR_DUPLICATE, TRANSIENT_CODES, ImageFacts, Rejected, phash_int, retried_on_resume,
                       reason_code)

_EXTENSIONS = "|".join(sorted(set(FORMAT_EXTENSIONS.values())))
_STORED_NAME_RE = re.compile(r"^[0-9a-f]{16}\.(%s)$" % _EXTENSIONS)
# The temporary name core.runstore.atomic_path gives a stored image while it is written
# ('.<sha256[:16]>.<ext>.<secrets.token_hex(6)>.tmp'): the only files collection ever deletes.
_TEMP_NAME_RE = re.compile(r"^\.[0-9a-f]{16}\.(%s)\.[0-9a-f]{12}\.tmp$" % _EXTENSIONS)
LOCK_NAME = ".wildlens-collect.lock"
JOURNAL_NAME = ".wildlens-manifest.journal"
# A folder's manifest.csv and journal are read whole: 1 GiB is millions of rows (45,000 images: ~10 MB).
MANIFEST_MAX_BYTES = 1 << 30
# The columns without which a file is not a manifest (a CSV of something else reads as one
# column and would otherwise pass for an empty manifest).
_REQUIRED_COLUMNS = ("wnid", "file", "sha256", "status")


class CollectError(WildLensError, RuntimeError):
    """Collection cannot proceed; the message says why and what to do."""


class StoreFailure(CollectError):
    """A file could not be stored (a full disk, a folder made read-only mid-run): everything stored
    before it is recorded, and the same command run again resumes (an import into a new run keeps
    its staging folder for it: crawl.importer._kept_for_resume)."""


class ManifestEditError(CollectError):
    """A folder manifest as a person edited it cannot be used as it is (a cell, the header, the encoding,
    a column of their own): the fix is theirs, and no write may replace their edit (a collector that
    meets one mid-run stops instead of writing its rows over it: Collector._take_exclusions)."""


def record_failure(exc: OSError, path) -> StoreFailure:
    """A full disk (or a folder made read-only) met while recording rows, in one line. Why: the
    journal's write, or the manifest's at the save, is where a full disk usually shows first, and it
    ended the command in a 45-line OSError traceback (hostile check, 2026-12-07); what is recorded
    stays and the same command resumes."""
    return StoreFailure(f"Cannot record images in {path}: {exc.strerror or exc}; every image recorded before is "
                        "kept: make room (or fix the folder's permissions), then run the same command again to "
                        "resume.")


# --------------------------------------------------------------------------- destinations
class Destination:
    """Images folder + manifest. Subclasses say where the manifest lives and in which format."""

    images_dir: Path
    root: Path
    manifest_path: Path

    # Only a run's folder must still be there while it is written (RunDestination); `exclusive` holds the run's
    # presence lock for it.
    must_exist = False

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_NAME

    def locked(self) -> None:
        """Called by :func:`exclusive` once this writer holds the destination's lock (crawl.importer._StagedRun)."""

    def unlocking(self) -> None:
        """Called by :func:`exclusive` before the lock is released (not when the process is killed)."""

    def rebuild_command(self) -> str:
        """The command that re-imports this destination's stored images into a new manifest."""
        raise NotImplementedError

    def damaged(self, problem: str) -> CollectError:
        """The error for a manifest that cannot be used: nothing is changed; how to rebuild it."""
        return CollectError(f"{problem}; nothing was changed. Rebuild the manifest by re-importing the stored "
                            f"images into a new destination: {self.rebuild_command()}")

    def read_manifest(self) -> pd.DataFrame:
        raise NotImplementedError

    def write_manifest(self, df: pd.DataFrame) -> None:
        raise NotImplementedError

    def manifest_lock(self):
        """The lock every writer of the manifest holds (waits for) while it reads and writes it."""
        return waiting_lock(self.root, MANIFEST_LOCK_NAME)

    def describe(self) -> str:
        return str(self.root)


class RunDestination(Destination):
    # A run that must still be there while it is written (core.locking.run_presence_lock, held by `exclusive`): a
    # run deleted between its opening and the import's first write had its folder made again, unlisted, its id
    # blocked (a code review). A new run's staging folder is the import's own (crawl.importer._StagedRun: False).
    must_exist = True

    def __init__(self, run: Run):
        self.run = run
        self.root = run.path
        self.images_dir = run.images_dir
        self.manifest_path = run.manifest_path

    def rebuild_command(self) -> str:
        return f"python -m crawl import {self.images_dir} --run NEW_RUN"

    def read_manifest(self) -> pd.DataFrame:
        try:
            return self.run.read_manifest()
        except (StoreError, OSError) as exc:
            raise self.damaged(_flat(str(exc)).rstrip(".")) from None

    def write_manifest(self, df: pd.DataFrame) -> None:
        self.run.write_manifest(df)

    def manifest_lock(self):
        return self.run.manifest_lock()  # the one the Images page's exclusions take

    def describe(self) -> str:
        return f"run {self.run.run_id}"


class FolderDestination(Destination):
    """``DIR/<wnid>/<hash>.<ext>`` and ``DIR/manifest.csv`` (every schema column, 'file'
    relative to DIR)."""

    extra_columns: list[str] = []  # a person's own columns in the manifest last read (check_manifest)

    def __init__(self, root: Path | str):
        self.root = expand_user(root, "--out")
        self.images_dir = self.root
        self.manifest_path = self.root / "manifest.csv"

    def rebuild_command(self) -> str:
        return f"python -m crawl import {self.root} --out NEW_DIR"

    def read_manifest(self) -> pd.DataFrame:
        if not self.manifest_path.exists():
            broken = broken_link_reason(self.manifest_path)
            if broken:  # read as no manifest, it printed '(no classes)' and an import wrote a new one over it (review)
                raise CollectError(f"{broken}; move the link away, or put the manifest itself there, and run again; "
                                   "nothing was changed.")
            return empty_table(MANIFEST_SCHEMA)
        try:
            from core.csvsafe import read_csv  # gives back the cells write_table neutralised: resume sees the originals

            # Read as a file a person handed us (core.userfile): a FIFO in its place is refused at once instead of
            # hanging `crawl import` and `crawl summary` (a hostile campaign), a link to a device is refused.
            data = read_user_bytes(self.manifest_path, what=str(self.manifest_path), max_bytes=MANIFEST_MAX_BYTES)
            raw = read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""])
            _check_header(raw.columns)
            # A person's own columns (notes beside the rows): kept apart, for the writers' check (check_manifest).
            self.extra_columns = [str(c) for c in raw.columns if c not in MANIFEST_SCHEMA and not _pandas_index(raw[c])]
            missing = [col for col in _REQUIRED_COLUMNS if col not in raw.columns]
            if missing:
                raise ValueError(f"no column {', '.join(missing)}")
            if "excluded" in raw:
                raw["excluded"] = _read_flags(raw["excluded"], "excluded")
            df = conform(raw, MANIFEST_SCHEMA, table="manifest")
        except CellError as exc:  # the person's edit: that cell is the fix (a rebuild would drop their exclusions)
            line = _file_line(data, exc.row) if exc.row is not None else None
            said = str(exc).replace("(the rows after the header, counted from 1)", f"(line {line} of the file)") \
                if line is not None else str(exc)
            raise ManifestEditError(f"{self.manifest_path}: {said}, then run again; nothing was changed.") from None
        except UnicodeDecodeError:  # Excel's plain "CSV" on Windows is cp1252; a rebuild would drop the exclusions
            raise ManifestEditError(f"{self.manifest_path} is not UTF-8 text (a spreadsheet saved it in another encoding?); "
                               "save it as 'CSV UTF-8 (comma delimited)' and run again; nothing was changed.") from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, StoreError,
                OSError) as exc:
            raise self.damaged(f"{self.manifest_path} is not a readable manifest ({_flat(str(exc))})") from None
        df["excluded"] = df["excluded"].fillna(False)
        return df

    def write_manifest(self, df: pd.DataFrame) -> None:
        with self.manifest_lock():
            write_table(df, self.manifest_path, MANIFEST_SCHEMA, table="manifest")  # atomic CSV



# pandas' and R's missing-value words read as empty (R's write.csv writes NA; Excel shows a missing
# lookup as #N/A), 1.0/0.0 as a float column writes them.
_FLAGS = {"true": True, "1": True, "1.0": True, "yes": True, "false": False, "0": False, "0.0": False, "no": False,
          "": None, "na": None, "nan": None, "none": None, "null": None, "<na>": None, "#n/a": None, "n/a": None}


class CellError(ValueError):
    """One cell of a manifest a person edited holds what it may not: the fix is that cell, not a
    rebuild (re-importing makes a new manifest without the person's exclusions). ``row``: its data
    row, counted from 0 as pandas reads them (blank lines skipped), when the error is one cell's."""

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row


def _file_line(data: bytes, row: int) -> int | None:
    """The line of the file (from 1, as a spreadsheet or an editor numbers them) where data row ``row``
    (from 0, after the header, blank lines skipped as pandas skips them) starts. Why: 'data row 3'
    named another line than the one to fix when blank lines came before it (hostile check, 2026-12-07)."""
    import csv

    try:
        text = data.decode("utf-8-sig")
        lines = text.splitlines()
        reader = csv.reader(io.StringIO(text, newline=""))
        seen, start = -1, 1  # -1: the header comes first
        for _record in reader:
            # pandas skips a line that is empty or spaces only; ',,,' or '""' is a row (of empty cells)
            if start - 1 < len(lines) and lines[start - 1].strip():
                if seen == row:
                    return start
                seen += 1
            start = reader.line_num + 1
    except (UnicodeDecodeError, csv.Error):
        return None
    return None


_PANDAS_INDEX = re.compile(r"Unnamed: \d+")


def _pandas_index(column: pd.Series) -> bool:
    """The index column pandas' to_csv adds (its header cell empty, read as 'Unnamed: N'; its cells
    empty or the row numbers 0, 1, ...): no one's data. An empty header over a person's notes is read
    under the same name, and was dropped with them (hostile check, 2026-12-07)."""
    if not _PANDAS_INDEX.fullmatch(str(column.name)):
        return False
    cells = column.fillna("").astype(str).str.strip()
    return bool((cells == "").all() or (cells == pd.Series(range(len(cells)), index=cells.index).astype(str)).all())


def _header_word(name: str) -> str:
    """A header cell as the column name it was meant to be: NFKC, format characters dropped, stripped,
    lower case, spaces and dashes as underscores ('Excluded reason' -> 'excluded_reason')."""
    import unicodedata

    text = unicodedata.normalize("NFKC", str(name))
    text = "".join(c for c in text if unicodedata.category(c) != "Cf").strip().lower()
    return re.sub(r"[\s\-]+", "_", text)


def _check_header(columns) -> None:
    """Refuse (CellError: the fix is the header) a manifest a spreadsheet saved with ';' or tabs, or
    whose header spells one of WildLens's columns another way ('Excluded', 'excluded ', 'Excluded
    reason') and lacks the column itself: read as an unknown column, its values were dropped and the
    next import wrote the column back empty, so a person's exclusions were lost without a word
    (hostile check, 2026-12-07)."""
    names = [str(c) for c in columns]
    if len(names) == 1 and any(sep in names[0] for sep in (";", "\t")):
        sep = "';'" if ";" in names[0] else "tabs"
        raise CellError(f"its header is separated by {sep}, not commas (a spreadsheet's regional CSV?); save it as "
                        "comma-separated 'CSV UTF-8'")
    for name in names:
        twice = re.fullmatch(r"(.+)\.\d+", name)  # pandas renames a second 'file' to 'file.1'
        if twice and twice.group(1) in MANIFEST_SCHEMA and twice.group(1) in names:
            raise CellError(f"its header names {twice.group(1)} twice; keep one of the two columns")
        word = _header_word(name)
        # Only where WildLens's own column is missing: a person's extra 'Status' beside 'status' is theirs.
        if name not in MANIFEST_SCHEMA and word in MANIFEST_SCHEMA and word not in names:
            shown = printable(name)
            shown = shown if len(shown) <= 80 else shown[:79] + "…"
            raise CellError(f"its header names '{shown}' where WildLens writes '{word}'; rename that column back "
                            f"to {word}")


def _read_flags(column: pd.Series, name: str) -> pd.Series:
    """A yes/no column of a manifest a person may have edited: True/False in any letter case (Excel and
    LibreOffice write TRUE), 1/0, yes/no; empty is NA. Anything else is refused naming the row. Why:
    only 'True', 'true' and '1' were read as yes, so an Excel TRUE read as not excluded and the next
    import wrote False over it (hostile check, 2026-12-07)."""
    import unicodedata

    # Each distinct cell normalised once (a manifest holds ~100,000 rows and a handful of words).
    # Format characters (a byte-order mark or zero-width space a spreadsheet or a paste left) are invisible
    # and dropped; NFKC folds full-width letters.
    def word(cell: str) -> str:
        text = unicodedata.normalize("NFKC", cell)
        return "".join(c for c in text if unicodedata.category(c) != "Cf").strip().lower()

    words = column.map({v: word(v) for v in column.dropna().unique()})
    known = words.isin(list(_FLAGS)) | words.isna()
    if not known.all():
        row = int((~known).to_numpy().nonzero()[0][0])
        raise CellError(f"column {name} holds '{printable(str(column.iloc[row])[:20])}' in data row {row + 1} "
                        "(the rows after the header, counted from 1); write True or False there, or leave it empty",
                        row=row)
    return words.map(_FLAGS).astype("boolean")


def _flat(text: str, limit: int = 200) -> str:
    """An error text on one line, cut to ``limit`` characters (it goes inside a one-line message)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def as_destination(target) -> Destination:
    if isinstance(target, Destination):
        return target
    if isinstance(target, Run):
        return RunDestination(target)
    if isinstance(target, (str, os.PathLike)):
        return FolderDestination(target)
    raise TypeError(f"Expected a Run or a folder path, not {type(target).__name__}.")


def check_folder_outside_the_store(root: Path | str) -> None:
    """A folder destination (``--out DIR``) is never the store's ``runs/`` folder nor inside it (both
    resolved through links): `crawl import SRC --out $WILDLENS_HOME/runs/r1` wrote a folder manifest
    and class folders into run r1, and `--out runs/new` made a folder there that is no run. The rule
    of ``classify --out``. CollectError, one line, before any work."""
    from core.runstore import RunStore

    runs = RunStore().runs_dir.resolve()
    root = expand_user(root, "--out")
    where = root.resolve()
    if where == runs or runs in where.parents:
        raise CollectError(f"--out {root}: that is inside the run store's runs folder ({runs}), which holds WildLens's "
                           "runs only; give a folder outside it, or collect into a run with --run RUN_ID.")


def check_writable(dest: Destination, wnids=()) -> None:
    """Raise CollectError (one line) unless the destination's folders can be written, before any
    work: a read-only destination used to fail with a PermissionError traceback after the work.
    Folders that do not exist yet are judged by their nearest existing parent, and nothing is
    created: the probe is an unnamed temporary file."""
    if isinstance(dest, FolderDestination):
        check_folder_outside_the_store(dest.root)
    folders = [dest.root, dest.images_dir] + [dest.images_dir / w for w in wnids]
    probed: set[Path] = set()
    for folder in folders:
        existing = Path(folder)
        while not existing.exists() and existing != existing.parent:
            broken = broken_link_reason(existing)  # making the folder failed on it (FileExistsError)
            if broken:
                raise CollectError(f"Cannot write to {dest.describe()}: {broken}; give a folder that exists, or a new "
                                   "name.")
            existing = existing.parent
        if existing in probed:
            continue
        probed.add(existing)
        if not existing.is_dir():
            raise CollectError(f"Cannot write to {dest.describe()}: {existing} is not a folder; "
                               "choose another destination (--out DIR or --run RUN_ID).")
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            raise CollectError(f"Cannot write to {dest.describe()}: {existing}: {exc.strerror or exc}; choose a "
                               "destination you can write to (--out DIR, or --run with a writable $WILDLENS_HOME).") from None


@contextmanager
def exclusive(dest: Destination) -> Iterator[None]:
    """One writer per destination (core.locking): a second crawl or import into the same run fails
    at once instead of interleaving two manifests. The OS releases the lock when a process dies."""
    from core.locking import RunGone, run_presence_lock

    presence = (run_presence_lock(dest.root, f"Run {dest.run.run_id} is gone (deleted meanwhile); nothing was written.")
                if dest.must_exist else nullcontext())
    try:
        with presence, exclusive_lock(dest.root, name=LOCK_NAME):
            dest.locked()
            try:
                yield
            finally:
                dest.unlocking()
    except RunGone as exc:
        raise CollectError(str(exc)) from None
    except FolderBusy:
        raise CollectError(f"Another crawl or import is writing to {dest.describe()}; wait for it to finish.") from None
    except PermissionError as exc:  # the lock file itself (check_writable ran before, but a folder can change)
        raise CollectError(f"Cannot write to {dest.describe()}: {exc.filename}: {exc.strerror}; choose a "
                           "destination you can write to.") from None


def stored_files(dest: Destination, wnids=None) -> list[Path]:
    """Files under the class folders whose names WildLens gives stored images."""
    if not dest.images_dir.is_dir():
        return []
    folders = [dest.images_dir / w for w in wnids] if wnids is not None else \
        [p for p in dest.images_dir.iterdir() if p.is_dir() and not p.is_symlink()]
    return [p for folder in folders if folder.is_dir() for p in folder.iterdir()
            if _STORED_NAME_RE.match(p.name) and p.is_file()]


def _refuse_extra_columns(dest: Destination) -> None:
    """ManifestEditError when the manifest last read holds a column of a person's own (a writer would
    drop it); the names are cut so that the fix after them stays on the line."""
    extra = getattr(dest, "extra_columns", [])
    if not extra:
        return
    def shown(name: str) -> str:
        text = printable(name)
        return text if len(text) <= 80 else text[:79] + "…"

    names = ", ".join(f"'{shown(name)}'" for name in extra[:5]) + (" ..." if len(extra) > 5 else "")
    many = len(extra) > 1
    it = "them" if many else "it"
    raise ManifestEditError(f"{dest.manifest_path}: column{'s' if many else ''} {names} {'are' if many else 'is'} "
                            f"not WildLens's, and this run would write the manifest without {it}; copy {it} to a "
                            f"file of your own and delete {it} here (or collect into another --out), then run again; "
                            "nothing was changed.")


def check_manifest(dest: Destination) -> None:
    """Raise CollectError unless the manifest can be read, or is absent beside no stored image, and
    holds no column of a person's own: a crawl or import writes WildLens's columns only, and a 'Notes'
    column added in a spreadsheet was dropped at the next save without a word (review, 2026-12-07)."""
    if dest.manifest_path.exists():
        dest.read_manifest()
        _refuse_extra_columns(dest)
        return
    stored = stored_files(dest)
    if stored:
        raise dest.damaged(f"{dest.describe()} holds {len(stored)} stored image(s) but no manifest "
                           f"({dest.manifest_path} is missing)")


def sweep_leftovers(dest: Destination, manifest: pd.DataFrame, wnids) -> tuple[int, int]:
    """Tidy the class folders after a killed process: remove the temporary files of unfinished
    atomic writes (only names ``core.runstore.atomic_path`` gives, of stored images and of the
    manifest itself) and count stored-looking files
    that no manifest row names. Those are left where they are: with the journal a kill leaves
    none, so they come from elsewhere (a manifest restored from an older copy, a hand-made copy)
    and are nobody's to delete. Returns (temporaries removed, unrecorded files)."""
    referenced = set(manifest["file"].dropna())
    removed = unrecorded = 0
    with dest.manifest_lock():  # a manifest write in flight (an exclusion) keeps its temporary file
        temporary = atomic_temp_re(re.escape(dest.manifest_path.name))
        for path in dest.manifest_path.parent.iterdir():
            if temporary.match(path.name) and path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)  # a manifest write killed before its rename
                removed += 1
    for wnid in wnids:
        folder = dest.images_dir / wnid
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if not path.is_file() or path.is_symlink():
                continue
            if _TEMP_NAME_RE.match(path.name):
                path.unlink(missing_ok=True)
                removed += 1
            elif _STORED_NAME_RE.match(path.name) and f"{wnid}/{path.name}" not in referenced:
                unrecorded += 1
    return removed, unrecorded


def leftover_notes(removed: int, unrecorded: int, what: str) -> list[str]:
    notes = []
    if removed:
        notes.append(f"removed {removed} unfinished temporary file(s) left by an interrupted {what}")
    if unrecorded:
        notes.append(f"{unrecorded} file(s) in the class folders have no manifest row; left as they are "
                     "(not counted as images of the run)")
    return notes


# --------------------------------------------------------------------------- collector
@dataclass(frozen=True)
class Outcome:
    status: str  # 'accepted', 'duplicate', 'rejected', or 'surplus' (class already full: nothing recorded)
    row: dict | None = None


def _blank_row() -> dict:
    row = {col: None for col in MANIFEST_SCHEMA}
    row["excluded"] = False
    return row


def _plain(value):
    """A manifest cell as a plain Python value (None for a missing one)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _jsonable(value):
    """json.dumps fallback for the cells of a row (numpy scalars, pandas NA)."""
    value = _plain(value)
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _stamp(path: Path) -> tuple[int, int, int]:
    """What changes whenever a file is replaced (every manifest write is an atomic rename: a new inode)."""
    info = os.stat(path)
    return info.st_ino, info.st_mtime_ns, info.st_size


def _split_wnids(value) -> set[str]:
    return {w for w in str(value).split(",") if w} if isinstance(value, str) and value else set()


def _restore_replaced(rows: list[dict], lost: set[int], replaced: dict[int, dict]) -> set[int]:
    """Rows whose new verdict did not stick (its file never stored, or a copy of such a file): each one that
    replaced a row of an earlier run gets that old row back, in place (``replaced`` loses it); returns the
    others, appended rows to drop."""
    restored = lost & set(replaced)
    for i in restored:
        rows[i] = replaced.pop(i)
    return lost - restored


class Collector:
    """Thread-safe manifest + duplicate index of one destination (see the module docstring)."""

    def __init__(self, dest: Destination, validation: ValidationConfig, *, save_every: int = 10, writers: int = 0):
        """``writers``: threads that store accepted files (0: the calling thread stores each one
        inside :meth:`record`). An import uses a few: the fsync of each stored file is most of an
        imported image's time, and several in flight are committed together by the file system.
        Every accepted row is journaled before its file is handed to a writer, and every save waits
        for the files of the rows it writes, so a kill still leaves no row without its file in the
        manifest (the replay drops a journaled row whose file never arrived)."""
        self.dest = dest
        self.validation = validation
        self.save_every = max(1, save_every)
        self.writers = max(0, writers)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[tuple[int, Future]] = []  # (row index, its file's write) not yet waited for
        self._failed: set[int] = set()  # rows whose file could not be stored
        self._store_error: OSError | None = None
        self._written: tuple | None = None  # _stamp of the manifest this collector wrote last
        self._lock = threading.RLock()
        had_manifest = dest.manifest_path.exists()
        if not had_manifest:
            check_manifest(dest)  # no manifest beside stored images: an error, never a fresh start
        manifest = dest.read_manifest()
        self.rows: list[dict] = [{k: _plain(v) for k, v in rec.items()} for rec in manifest.to_dict("records")]
        self.replayed = self._replay_journal()
        self.initial_rows = len(self.rows)
        self._by_sha: dict[str, int] = {}  # accepted rows
        # pHashes of accepted rows, grown by doubling (rebuilding an array per row was quadratic)
        self._phash_rows = np.zeros(64, dtype=np.int64)
        self._phash_array = np.zeros(64, dtype=np.uint64)
        self._phash_count = 0
        self._journal_fd: int | None = None
        self._by_url: dict[str, list[int]] = {}
        self._seen: set[tuple] = set()  # (wnid, url) and (wnid, original_name, sha256)
        self._claimed: set[tuple] = set()  # URLs taken by a download thread in this session
        self.usable: Counter = Counter()  # accepted and not excluded, per class
        self._unsaved = 0
        self.closed = False
        # Rows of earlier runs whose URL is fetched again in this one (a failure that may pass), by
        # (class, URL) -> row index: not 'seen' for claim_url; the new verdict replaces the row.
        self._retry: dict[tuple, int] = {}
        for index, row in enumerate(self.rows):
            self._index(index, row)
            if row.get("status") == "rejected" and row.get("url") and retried_on_resume(row.get("reason")):
                self._retry[(row["wnid"], row["url"])] = index
                self._seen.discard((row["wnid"], row["url"]))
        self._replaced: dict[int, dict] = {}  # rows of earlier runs replaced in this one -> the row replaced
        if self.replayed or not had_manifest:
            self.save()  # the journal folded in; a new destination gets its manifest before its first file

    # journal -------------------------------------------------------------------
    def _journal(self, index: int, row: dict) -> None:
        """Append row ``index`` (new or changed) to the journal before anything else is done with it:
        one ``write`` on a handle opened in append mode (kept open until the next save), so the line
        is the kernel's once this returns, whatever kills the process next."""
        line = (json.dumps({"i": index, "row": row}, default=_jsonable, ensure_ascii=False) + "\n").encode("utf-8")
        if self._journal_fd is None:
            # Not blocking on a FIFO put in its place during the run, not following a link (rows appended to its
            # target); what was opened must be a regular file (a code review).
            flags = (os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
            try:
                fd = os.open(self.dest.journal_path, flags, 0o666)
            except OSError as exc:  # ELOOP: a link; ENXIO: a FIFO without a reader
                raise CollectError(f"{self.dest.journal_path} cannot be opened as WildLens's journal "
                                   f"({exc.strerror or exc}); move it away and run again.") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise CollectError(f"{self.dest.journal_path} is not a regular file, not WildLens's journal; move it "
                                   "away and run again.")
            os.set_blocking(fd, True)
            self._journal_fd = fd
        view = memoryview(line)
        size = os.fstat(self._journal_fd).st_size
        try:
            while view:
                view = view[os.write(self._journal_fd, view):]
        except OSError as exc:  # a full disk: the journal is usually the first write to meet it
            # Stop as a failed file stops (a crawl checks raise_if_store_failed between terms: it went on short,
            # never saying the disk was full), and cut a half-written line off: the next line glued onto it
            # would end the replay there, losing every row after it (review, 2026-12-07).
            self._store_error = self._store_error or exc
            try:
                os.ftruncate(self._journal_fd, size)
            except OSError:
                pass
            raise record_failure(exc, self.dest.journal_path) from None

    def _close_journal(self) -> None:
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None

    def _replay_journal(self) -> int:
        """Apply the rows journaled since the last manifest write (a killed process); returns how
        many were applied. A line cut short by the kill ends the replay; an accepted row whose
        file never arrived (killed between its journal line and its rename) is dropped, so the
        image is fetched or imported again."""
        path = self.dest.journal_path
        if not os.path.lexists(path):
            return 0
        try:  # a FIFO or a device in its place is refused at once (it hung the import: a hostile campaign)
            lines = read_user_bytes(path, what=str(path), max_bytes=MANIFEST_MAX_BYTES).splitlines()
        except UserFileError as exc:  # the manifest is whole: only the journal's place is taken (a code review)
            raise CollectError(f"{exc.problem}, not WildLens's journal of {self.dest.describe()}; move it away and run "
                               "again (the manifest is untouched).") from None
        applied, appended, replaced = 0, [], {}
        for line in lines:
            try:
                entry = json.loads(line)
                index, row = entry["i"], entry["row"]
            except (ValueError, KeyError, TypeError):
                break
            if not isinstance(index, int) or not isinstance(row, dict) or not 0 <= index <= len(self.rows):
                break  # a journal of another manifest (one restored from an older copy): stop there
            row = {col: row.get(col) for col in MANIFEST_SCHEMA}
            row["excluded"] = bool(row["excluded"])
            if index == len(self.rows):
                self.rows.append(row)
                appended.append(index)
            elif (self.rows[index].get("status") == "rejected" and row["url"]
                  and all(self.rows[index].get(col) == row[col] for col in ("wnid", "url"))):
                # a URL fetched again (a failure that may pass): the new verdict in place of the old. Any
                # rejection of the same class and URL qualifies, not only one whose reason still says it may
                # pass (a hand edit since): a rejected row has no file, so replacing it orphans nothing.
                replaced.setdefault(index, self.rows[index])
                self.rows[index] = row
            else:  # a row the manifest holds: only other_wnids is ever changed on a recorded row; an
                # exclusion made since (the dashboard) is kept
                known = self.rows[index]
                if any(known.get(col) != row[col] for col in ("wnid", "url", "original_name", "sha256")):
                    break  # not this manifest's row
                known["other_wnids"] = row["other_wnids"]
            applied += 1
        changed = appended + list(replaced)
        missing = {i for i in changed if self.rows[i]["status"] == "accepted"
                   and not (self.dest.images_dir / str(self.rows[i]["file"])).is_file()}
        lost = {self.rows[i]["file"] for i in missing}  # a copy journaled while its kept file was being stored
        missing |= {i for i in changed if self.rows[i]["status"] == "duplicate" and self.rows[i]["duplicate_of"] in lost}
        missing = _restore_replaced(self.rows, missing, replaced)  # the old verdict stands, fetched again later
        if missing:
            self.rows = [row for i, row in enumerate(self.rows) if i not in missing]
        return applied

    # indexes -------------------------------------------------------------------
    def _index(self, index: int, row: dict) -> None:
        wnid, url = row.get("wnid"), row.get("url")
        if url:
            self._seen.add((wnid, url))
            rows = self._by_url.setdefault(url, [])
            if index not in rows:  # (a row replaced in place keeps its index)
                rows.append(index)
        if row.get("original_name"):
            self._seen.add((wnid, row["original_name"], row.get("sha256")))
        if row.get("status") == "accepted" and row.get("sha256"):
            self._by_sha.setdefault(row["sha256"], index)
            if row.get("phash"):
                if self._phash_count == len(self._phash_array):
                    self._phash_array = np.concatenate([self._phash_array, np.zeros_like(self._phash_array)])
                    self._phash_rows = np.concatenate([self._phash_rows, np.zeros_like(self._phash_rows)])
                self._phash_array[self._phash_count] = phash_int(row["phash"])
                self._phash_rows[self._phash_count] = index
                self._phash_count += 1
            if not row.get("excluded"):
                self.usable[wnid] += 1

    def _nearest(self, phash: str) -> tuple[int, int] | None:
        """(row index, distance) of the closest accepted image within the threshold, or None."""
        if self.validation.phash_threshold < 0 or not self._phash_count:
            return None
        distances = np.bitwise_count(self._phash_array[:self._phash_count] ^ np.uint64(phash_int(phash)))
        best = int(np.argmin(distances))
        if int(distances[best]) > self.validation.phash_threshold:
            return None
        return int(self._phash_rows[best]), int(distances[best])

    # queries used by download threads ----------------------------------------------
    def claim_url(self, wnid: str, url: str) -> str | dict:
        """'seen' when this class already has a row for ``url`` (or a thread is fetching it:
        do not fetch again); a row of another class whose verdict can be reused without
        fetching; or 'new'."""
        with self._lock:
            key = (wnid, url)
            if key in self._seen or key in self._claimed:
                return "seen"
            self._claimed.add(key)
            for index in self._by_url.get(url, ()):
                row = self.rows[index]
                if row["wnid"] != wnid and (row["sha256"] or reason_code(row["reason"]) not in TRANSIENT_CODES):
                    return dict(row)
            return "new"

    def release_url(self, wnid: str, url: str) -> None:
        """A claimed URL that was not recorded (surplus): a later top-up may fetch it."""
        with self._lock:
            self._claimed.discard((wnid, url))

    def has_import(self, wnid: str, original_name: str, sha256: str) -> bool:
        with self._lock:
            return (wnid, original_name, sha256) in self._seen

    def usable_count(self, wnid: str) -> int:
        with self._lock:
            return self.usable[wnid]

    # recording ---------------------------------------------------------------------
    def record(self, wnid: str, provenance: dict, *, facts: ImageFacts | None = None, data: bytes | None = None,
               rejection: Rejected | None = None, target: int | None = None) -> Outcome:
        """Record one image for class ``wnid``: a rejection, or validated ``facts`` (with the
        ``data`` to store when accepted). ``target`` caps accepted images of the class."""
        row = _blank_row()
        row.update({k: v for k, v in provenance.items() if k in MANIFEST_SCHEMA})
        row["wnid"] = wnid
        row["fetched_at"] = row["fetched_at"] or now_iso()
        with self._lock:
            if self.closed:
                return Outcome("surplus")
            if rejection is not None or facts is None:
                rejection = rejection or Rejected("not-image", "no data")
                row.update(status="rejected", reason=rejection.reason)
                return Outcome("rejected", self._append(row))
            row.update(sha256=facts.sha256, phash=facts.phash, width=facts.width, height=facts.height,
                       format=facts.format, mode=facts.mode, bytes=facts.bytes)
            kept, reason = self._find_copy(facts)
            if kept is not None:
                kept_row = self.rows[kept]
                row.update(status="duplicate", reason=reason, duplicate_of=kept_row["file"])
                if kept_row["wnid"] != wnid:
                    row["other_wnids"] = ",".join(sorted(_split_wnids(kept_row["other_wnids"]) - {wnid} | {kept_row["wnid"]}))
                    kept_row["other_wnids"] = ",".join(sorted(_split_wnids(kept_row["other_wnids"]) | {wnid}))
                    self._journal(kept, kept_row)
                    self._unsaved += 1
                return Outcome("duplicate", self._append(row))
            if target is not None and self.usable[wnid] >= target:
                return Outcome("surplus")
            if data is None:
                raise ValueError("record(): the bytes of an accepted image are needed to store it")
            if self._store_error is not None:  # before the journal line: a row journalled but never
                raise self._store_failure()   # appended would share its index with the next one
            row["file"] = facts.stored_name(wnid)
            row.update(status="accepted", reason=None)
            index = self._slot(row)
            self._journal(index, row)  # first the row, then the file: a kill leaves no file without a row
            self._store(index, self.dest.images_dir / row["file"], data)  # temp + fsync + rename
            return Outcome("accepted", self._append(row, journaled=True))

    # storing files ----------------------------------------------------------------------
    def _store(self, index: int, path: Path, data: bytes) -> None:
        if self._store_error is not None:  # a file could not be stored: stop at once, one line
            raise self._store_failure()
        if not self.writers:
            try:
                write_bytes_atomic(path, data)
            except OSError as exc:  # one line; the row, journaled but not yet appended, is simply not recorded (it
                self._store_error = exc  # is no index of self.rows to leave out: review) and the next run imports it
                raise self._store_failure() from None
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.writers, thread_name_prefix="wildlens-store")
        self._pending.append((index, self._pool.submit(write_bytes_atomic, path, data)))
        while len(self._pending) > 4 * self.writers:  # a bounded number of files held in memory
            self._wait_one()

    def _wait_one(self) -> None:
        index, future = self._pending[0]  # taken off only once its outcome is known: a Ctrl-C while
        try:                               # waiting leaves it pending, so a later save waits again
            future.result()
        except BaseException as exc:
            # The wait itself was interrupted (Ctrl-C here): the write is still pending, or it finished meanwhile
            # and a later wait counts it. Why both: a Ctrl-C landing as the writer finished was taken for a failed
            # write and reported as a full disk, exit 2 (hostile check, 2026-12-07).
            if not future.done() or future.cancelled() or future.exception() is not exc:
                raise
            # The writer failed, whatever with (an OSError, or a KeyboardInterrupt / SystemExit raised in
            # its thread, which is no Ctrl-C of this process): the row is left out, the save says why.
            self._pending.pop(0)
            self._failed.add(index)
            self._store_error = self._store_error or (exc if isinstance(exc, OSError) else OSError(str(exc) or type(exc).__name__))
            return
        self._pending.pop(0)

    def _drain(self) -> None:
        """Wait for every file handed to a writer."""
        while self._pending:
            self._wait_one()

    def raise_if_store_failed(self) -> None:
        """The one-line error of a file that could not be stored, if one could not (a crawl stops
        there instead of trying its next search term)."""
        with self._lock:
            if self._store_error is not None:
                raise self._store_failure()

    def _store_failure(self) -> StoreFailure:
        exc = self._store_error
        return StoreFailure(f"Cannot store images in {self.dest.describe()}: {exc.strerror or exc} "
                            f"({exc.filename or self.dest.images_dir}); every image stored so far is recorded: "
                            "make room (or fix the folder's permissions), then run the same command again to resume.")

    def reuse(self, wnid: str, other: dict, provenance: dict, *, target: int | None = None) -> Outcome | None:
        """Record a URL that another class already fetched, without fetching it again: a copy
        of an accepted image becomes a cross-class duplicate, a lasting rejection is repeated.
        None when the earlier row does not say enough (then the caller fetches)."""
        if other.get("sha256") and other.get("phash") and other.get("format") in FORMAT_EXTENSIONS:
            facts = ImageFacts(other["sha256"], other["phash"], int(other["width"]), int(other["height"]),
                               other["format"], other["mode"] or "", int(other["bytes"] or 0))
            with self._lock:
                if self._find_copy(facts)[0] is None:
                    return None  # no kept copy to point to: fetch it
                return self.record(wnid, provenance, facts=facts, target=target)
        if other.get("status") == "rejected" and reason_code(other.get("reason")) not in TRANSIENT_CODES:
            code = reason_code(other["reason"])
            detail = other["reason"].split(":", 1)[-1].strip()
            return self.record(wnid, provenance, rejection=Rejected(code, f"{detail} (verdict of the same URL for {other['wnid']})"),
                               target=target)
        return None

    def close(self) -> None:
        """Stop recording: rows offered after this (by download threads still finishing after
        an interruption) are dropped, so the manifest written last is the final one."""
        with self._lock:
            self.closed = True

    def _find_copy(self, facts: ImageFacts) -> tuple[int | None, str | None]:
        if facts.sha256 in self._by_sha:
            index = self._by_sha[facts.sha256]
            return index, f"{EXACT_DUPLICATE}: same bytes as {self.rows[index]['file']}" + self._class_note(index)
        near = self._nearest(facts.phash)
        if near is not None:
            index, distance = near
            return index, (f"{NEAR_DUPLICATE}: pHash distance {distance} <= {self.validation.phash_threshold} "
                           f"to {self.rows[index]['file']}") + self._class_note(index)
        return None, None

    def _class_note(self, index: int) -> str:
        return f" (found for {self.rows[index]['wnid']})"

    def _slot(self, row: dict) -> int:
        """The index ``row`` goes to: the row of an earlier run it replaces (its URL fetched again), else a new one."""
        return self._retry.get((row["wnid"], row["url"]), len(self.rows)) if row.get("url") else len(self.rows)

    def will_retry(self, wnid: str, url: str) -> bool:
        """Whether this run fetches ``url`` again for ``wnid`` (an earlier failure that may pass, not yet replaced)."""
        with self._lock:
            return (wnid, url) in self._retry

    def _append(self, row: dict, journaled: bool = False) -> dict:
        index = self._slot(row)
        if not journaled:
            self._journal(index, row)
        if index == len(self.rows):
            self.rows.append(row)
        else:
            del self._retry[(row["wnid"], row["url"])]
            self._replaced.setdefault(index, self.rows[index])
            self.rows[index] = row
        self._index(index, row)
        self._unsaved += 1
        # A quarter of the manifest at least: each save costs O(rows), so saving every few rows made
        # an import quadratic; the journal holds the rows in between, so a kill loses none of them.
        if self._unsaved >= max(self.save_every, len(self.rows) // 4):
            self.save()
        return row

    def save(self) -> None:
        """Write the whole manifest atomically, then empty the journal (callers may hold the lock
        or not). Killed in between, the journal is replayed onto rows it already holds: no change.
        Done under the destination's manifest lock, after taking in the exclusions an analyst made
        since the last save (:meth:`_take_exclusions`): this collector never changes them."""
        with self._lock, self.dest.manifest_lock():
            self._drain()  # the files of the rows written here are stored
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None  # no idle threads left behind (a dashboard imports many times)
            self._take_exclusions()
            rows = self.rows
            if self._failed:  # rows whose file could not be stored, and the copies pointing to one: left out,
                # so the next run imports them again (the journal, numbered like self.rows, is emptied below);
                # a row of an earlier run replaced by one of them gets its old verdict back, in its place
                lost = {self.rows[i]["file"] for i in self._failed} - {None}
                gone = {i for i, row in enumerate(self.rows) if i in self._failed or row["duplicate_of"] in lost}
                gone = _restore_replaced(self.rows, gone, self._replaced)
                self._failed &= gone  # a restored old row is no failed one (a later save keeps it)
                rows = [row for i, row in enumerate(self.rows) if i not in gone]
            df = pd.DataFrame(rows, columns=list(MANIFEST_SCHEMA)) if rows else empty_table(MANIFEST_SCHEMA)
            try:
                self.dest.write_manifest(df)
            except OSError as exc:  # the journal is kept: the next run replays it
                raise record_failure(exc, self.dest.manifest_path) from None
            self._written = _stamp(self.dest.manifest_path)
            self._close_journal()
            self.dest.journal_path.unlink(missing_ok=True)
            self._unsaved = 0
            if self._store_error is not None:
                self.closed = True
                raise self._store_failure()

    def _take_exclusions(self) -> None:
        """Copy 'excluded' and 'excluded_reason' from the manifest on disk onto the rows held here
        (the same row: same position, class, file and hash; rows are appended, or a rejection replaced in
        place by its URL's new verdict, which then differs in file and hash), and
        count the change in the usable images of its class. A manifest that cannot be read is
        left to the write that follows (which restores it from the rows held here), unless what stops
        it is a person's edit (ManifestEditError: a cell, the header, a column of their own), which
        stops this run instead."""
        try:
            if _stamp(self.dest.manifest_path) == self._written:
                return  # the manifest is the one this collector wrote last: nobody changed it since
            disk = self.dest.read_manifest()
            _refuse_extra_columns(self.dest)
        except ManifestEditError:
            # A person's edit made meanwhile (a column of their own, a header, a cell): this run stops instead of
            # writing its rows over it; what it recorded stays in the journal, and the same command resumes once the
            # file is fixed (a 'Notes' column added during a crawl was dropped at its next save: review).
            raise
        except (CollectError, OSError):  # missing, or not readable: the write that follows restores it
            return
        n = min(len(disk), len(self.rows))
        if not n:
            return
        excluded = disk["excluded"].fillna(False).astype(bool).to_numpy()[:n]
        reasons = disk["excluded_reason"].astype(object).to_numpy()[:n]
        ids = {col: disk[col].astype(object).to_numpy()[:n] for col in ("wnid", "file", "sha256")}
        for i in range(n):
            row, now, why = self.rows[i], bool(excluded[i]), _plain(reasons[i])
            if bool(row["excluded"]) == now and row["excluded_reason"] == why:
                continue
            if any(row[col] != _plain(ids[col][i]) for col in ids):
                continue  # not this row (the manifest was replaced meanwhile): nothing to take
            if row["status"] == "accepted" and bool(row["excluded"]) != now:
                self.usable[row["wnid"]] += -1 if now else 1
            row["excluded"], row["excluded_reason"] = now, why

    @property
    def new_rows(self) -> list[dict]:
        """The rows this run added, and those of earlier runs it replaced (URLs fetched again)."""
        with self._lock:
            return [self.rows[i] for i in sorted(self._replaced)] + list(self.rows[self.initial_rows:])

    def manifest(self) -> pd.DataFrame:
        with self._lock:
            df = pd.DataFrame(self.rows, columns=list(MANIFEST_SCHEMA)) if self.rows else empty_table(MANIFEST_SCHEMA)
        return conform(df, MANIFEST_SCHEMA, table="manifest")


# --------------------------------------------------------------------------- figures
def summarise(manifest: pd.DataFrame, wnids=None, k: int | None = None) -> pd.DataFrame:
    """Per-class figures from a manifest: requested (k), accepted (usable: accepted and not
    excluded), excluded, duplicate, rejected, short_by, and one 'rejected:<code>' column per
    rejection reason code. ``wnids`` fixes the rows (classes without any row show zeros)."""
    df = manifest
    order = list(dict.fromkeys(list(wnids) if wnids is not None else list(df["wnid"].dropna())))
    excluded = df["excluded"].fillna(False).astype(bool)
    accepted = df["status"] == "accepted"
    table = pd.DataFrame({"wnid": order})
    table["requested"] = pd.array([k] * len(order), dtype="Int64") if k is not None else pd.array([pd.NA] * len(order), dtype="Int64")

    def count(mask) -> list[int]:
        counts = df.loc[mask.fillna(False).astype(bool), "wnid"].value_counts()
        return [int(counts.get(w, 0)) for w in order]

    table["accepted"] = count(accepted & ~excluded)
    table["excluded"] = count(accepted & excluded)
    table["duplicate"] = count(df["status"] == "duplicate")
    table["ambiguous"] = count(accepted & df["other_wnids"].notna())
    table["rejected"] = count(df["status"] == "rejected")
    if k is not None:
        table["short_by"] = [max(0, k - a) for a in table["accepted"]]
    rejected = df[df["status"] == "rejected"]
    codes = sorted({reason_code(r) for r in rejected["reason"].dropna()})
    for code in codes:
        mask = (df["status"] == "rejected") & df["reason"].fillna("").map(reason_code).eq(code)
        table[f"rejected:{code}"] = count(mask)
    return table
