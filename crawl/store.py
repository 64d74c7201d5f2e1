"""Where collected images go, and the bookkeeping that makes collection resumable.

A *destination* is either a run of the run store (``images/`` + ``manifest.parquet``) or a
plain folder (``DIR/<wnid>/`` + ``DIR/manifest.csv``, for ``python -m crawl import --out``).
Both hold the same manifest (``core.runstore.MANIFEST_SCHEMA``).

The ``Collector`` is the single writer of a destination during a crawl or an import: it keeps
the manifest in memory, decides accepted / duplicate for each validated image under a lock
(download threads call it concurrently), stores accepted files by content hash atomically,
and writes the manifest atomically every few rows. Between two manifest writes every row is
also appended to a journal (``.wildlens-manifest.journal`` beside the manifest) *before* its
file is stored, so a killed process loses no row and leaves no stored file without a row: the
next collection replays the journal into the manifest and drops a replayed row whose file never
arrived. Nothing is ever deleted except temporary files that ``core.runstore.atomic_path``
itself names (``.<name>.<12 hex>.tmp``).

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

import json
import os
import re
import tempfile
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from core.errors import WildLensError
from core.locking import FolderBusy, exclusive_lock
from core.runstore import MANIFEST_SCHEMA, Run, StoreError, conform, empty_table, now_iso, write_bytes_atomic, write_table

from .config import FORMAT_EXTENSIONS, ValidationConfig
from .validate import (EXACT_DUPLICATE, NEAR_DUPLICATE, TRANSIENT_CODES, ImageFacts, Rejected, phash_int,
                       reason_code)

_EXTENSIONS = "|".join(sorted(set(FORMAT_EXTENSIONS.values())))
_STORED_NAME_RE = re.compile(r"^[0-9a-f]{16}\.(%s)$" % _EXTENSIONS)
# The temporary name core.runstore.atomic_path gives a stored image while it is written
# ('.<sha256[:16]>.<ext>.<secrets.token_hex(6)>.tmp'): the only files collection ever deletes.
_TEMP_NAME_RE = re.compile(r"^\.[0-9a-f]{16}\.(%s)\.[0-9a-f]{12}\.tmp$" % _EXTENSIONS)
LOCK_NAME = ".wildlens-collect.lock"
JOURNAL_NAME = ".wildlens-manifest.journal"
# The columns without which a file is not a manifest (a CSV of something else reads as one
# column and would otherwise pass for an empty manifest).
_REQUIRED_COLUMNS = ("wnid", "file", "sha256", "status")


class CollectError(WildLensError, RuntimeError):
    """Collection cannot proceed; the message says why and what to do."""


# --------------------------------------------------------------------------- destinations
class Destination:
    """Images folder + manifest. Subclasses say where the manifest lives and in which format."""

    images_dir: Path
    root: Path
    manifest_path: Path

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_NAME

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

    def describe(self) -> str:
        return str(self.root)


class RunDestination(Destination):
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

    def describe(self) -> str:
        return f"run {self.run.run_id}"


class FolderDestination(Destination):
    """``DIR/<wnid>/<hash>.<ext>`` and ``DIR/manifest.csv`` (every schema column, 'file'
    relative to DIR)."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser()
        self.images_dir = self.root
        self.manifest_path = self.root / "manifest.csv"

    def rebuild_command(self) -> str:
        return f"python -m crawl import {self.root} --out NEW_DIR"

    def read_manifest(self) -> pd.DataFrame:
        if not self.manifest_path.exists():
            return empty_table(MANIFEST_SCHEMA)
        try:
            from core.csvsafe import read_csv  # gives back the cells write_table neutralised: resume sees the originals

            raw = read_csv(self.manifest_path, dtype=str, keep_default_na=False, na_values=[""])
            missing = [col for col in _REQUIRED_COLUMNS if col not in raw.columns]
            if missing:
                raise ValueError(f"no column {', '.join(missing)}")
            if "excluded" in raw:
                raw["excluded"] = raw["excluded"].map({"True": True, "true": True, "1": True, "False": False,
                                                       "false": False, "0": False})
            df = conform(raw, MANIFEST_SCHEMA, table="manifest")
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, StoreError,
                OSError) as exc:
            raise self.damaged(f"{self.manifest_path} is not a readable manifest ({_flat(str(exc))})") from None
        df["excluded"] = df["excluded"].fillna(False)
        return df

    def write_manifest(self, df: pd.DataFrame) -> None:
        write_table(df, self.manifest_path, MANIFEST_SCHEMA, table="manifest")  # atomic CSV


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


def check_writable(dest: Destination, wnids=()) -> None:
    """Raise CollectError (one line) unless the destination's folders can be written, before any
    work: a read-only destination used to fail with a PermissionError traceback after the work.
    Folders that do not exist yet are judged by their nearest existing parent, and nothing is
    created: the probe is an unnamed temporary file."""
    folders = [dest.root, dest.images_dir] + [dest.images_dir / w for w in wnids]
    probed: set[Path] = set()
    for folder in folders:
        existing = Path(folder)
        while not existing.exists() and existing != existing.parent:
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
    try:
        with exclusive_lock(dest.root, name=LOCK_NAME):
            yield
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


def check_manifest(dest: Destination) -> None:
    """Raise CollectError unless the manifest can be read, or is absent beside no stored image."""
    if dest.manifest_path.exists():
        dest.read_manifest()
        return
    stored = stored_files(dest)
    if stored:
        raise dest.damaged(f"{dest.describe()} holds {len(stored)} stored image(s) but no manifest "
                           f"({dest.manifest_path} is missing)")


def sweep_leftovers(dest: Destination, manifest: pd.DataFrame, wnids) -> tuple[int, int]:
    """Tidy the class folders after a killed process: remove the temporary files of unfinished
    atomic writes (only names ``core.runstore.atomic_path`` gives) and count stored-looking files
    that no manifest row names. Those are left where they are: with the journal a kill leaves
    none, so they come from elsewhere (a manifest restored from an older copy, a hand-made copy)
    and are nobody's to delete. Returns (temporaries removed, unrecorded files)."""
    referenced = set(manifest["file"].dropna())
    removed = unrecorded = 0
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


def _split_wnids(value) -> set[str]:
    return {w for w in str(value).split(",") if w} if isinstance(value, str) and value else set()


class Collector:
    """Thread-safe manifest + duplicate index of one destination (see the module docstring)."""

    def __init__(self, dest: Destination, validation: ValidationConfig, *, save_every: int = 10):
        self.dest = dest
        self.validation = validation
        self.save_every = max(1, save_every)
        self._lock = threading.RLock()
        had_manifest = dest.manifest_path.exists()
        if not had_manifest:
            check_manifest(dest)  # no manifest beside stored images: an error, never a fresh start
        manifest = dest.read_manifest()
        self.rows: list[dict] = [{k: _plain(v) for k, v in rec.items()} for rec in manifest.to_dict("records")]
        self.replayed = self._replay_journal()
        self.initial_rows = len(self.rows)
        self._by_sha: dict[str, int] = {}  # accepted rows
        self._phash_rows: list[int] = []
        self._phash_values: list[int] = []
        self._phash_array: np.ndarray | None = None
        self._by_url: dict[str, list[int]] = {}
        self._seen: set[tuple] = set()  # (wnid, url) and (wnid, original_name, sha256)
        self._claimed: set[tuple] = set()  # URLs taken by a download thread in this session
        self.usable: Counter = Counter()  # accepted and not excluded, per class
        self._unsaved = 0
        self.closed = False
        for index, row in enumerate(self.rows):
            self._index(index, row)
        if self.replayed or not had_manifest:
            self.save()  # the journal folded in; a new destination gets its manifest before its first file

    # journal -------------------------------------------------------------------
    def _journal(self, index: int, row: dict) -> None:
        """Append row ``index`` (new or changed) to the journal before anything else is done with it."""
        line = json.dumps({"i": index, "row": row}, default=_jsonable, ensure_ascii=False) + "\n"
        with open(self.dest.journal_path, "a", encoding="utf-8") as handle:
            handle.write(line)

    def _replay_journal(self) -> int:
        """Apply the rows journaled since the last manifest write (a killed process); returns how
        many were applied. A line cut short by the kill ends the replay; an accepted row whose
        file never arrived (killed between its journal line and its rename) is dropped, so the
        image is fetched or imported again."""
        try:
            lines = self.dest.journal_path.read_bytes().splitlines()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise self.dest.damaged(f"{self.dest.journal_path} cannot be read ({exc.strerror or exc})") from None
        applied, appended = 0, []
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
            else:  # a row the manifest holds: only other_wnids is ever changed on a recorded row; an
                # exclusion made since (the dashboard) is kept
                known = self.rows[index]
                if any(known.get(col) != row[col] for col in ("wnid", "url", "original_name", "sha256")):
                    break  # not this manifest's row
                known["other_wnids"] = row["other_wnids"]
            applied += 1
        missing = {i for i in appended if self.rows[i]["status"] == "accepted"
                   and not (self.dest.images_dir / str(self.rows[i]["file"])).is_file()}
        if missing:
            self.rows = [row for i, row in enumerate(self.rows) if i not in missing]
        return applied

    # indexes -------------------------------------------------------------------
    def _index(self, index: int, row: dict) -> None:
        wnid, url = row.get("wnid"), row.get("url")
        if url:
            self._seen.add((wnid, url))
            self._by_url.setdefault(url, []).append(index)
        if row.get("original_name"):
            self._seen.add((wnid, row["original_name"], row.get("sha256")))
        if row.get("status") == "accepted" and row.get("sha256"):
            self._by_sha.setdefault(row["sha256"], index)
            if row.get("phash"):
                self._phash_rows.append(index)
                self._phash_values.append(phash_int(row["phash"]))
                self._phash_array = None
            if not row.get("excluded"):
                self.usable[wnid] += 1

    def _nearest(self, phash: str) -> tuple[int, int] | None:
        """(row index, distance) of the closest accepted image within the threshold, or None."""
        if self.validation.phash_threshold < 0 or not self._phash_values:
            return None
        if self._phash_array is None:
            self._phash_array = np.array(self._phash_values, dtype=np.uint64)
        distances = np.bitwise_count(self._phash_array ^ np.uint64(phash_int(phash)))
        best = int(np.argmin(distances))
        if int(distances[best]) > self.validation.phash_threshold:
            return None
        return self._phash_rows[best], int(distances[best])

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
            row["file"] = facts.stored_name(wnid)
            row.update(status="accepted", reason=None)
            self._journal(len(self.rows), row)  # first the row, then the file: a kill leaves no file without a row
            write_bytes_atomic(self.dest.images_dir / row["file"], data)  # temp + fsync + rename
            return Outcome("accepted", self._append(row, journaled=True))

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

    def _append(self, row: dict, journaled: bool = False) -> dict:
        if not journaled:
            self._journal(len(self.rows), row)
        self.rows.append(row)
        self._index(len(self.rows) - 1, row)
        self._unsaved += 1
        if self._unsaved >= self.save_every:
            self.save()
        return row

    def save(self) -> None:
        """Write the whole manifest atomically, then empty the journal (callers may hold the lock
        or not). Killed in between, the journal is replayed onto rows it already holds: no change."""
        with self._lock:
            df = pd.DataFrame(self.rows, columns=list(MANIFEST_SCHEMA)) if self.rows else empty_table(MANIFEST_SCHEMA)
            self.dest.write_manifest(df)
            self.dest.journal_path.unlink(missing_ok=True)
            self._unsaved = 0

    @property
    def new_rows(self) -> list[dict]:
        with self._lock:
            return list(self.rows[self.initial_rows:])

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
