"""Where collected images go, and the bookkeeping that makes collection resumable.

A *destination* is either a run of the run store (``images/`` + ``manifest.parquet``) or a
plain folder (``DIR/<wnid>/`` + ``DIR/manifest.csv``, for ``python -m crawl import --out``).
Both hold the same manifest (``core.runstore.MANIFEST_SCHEMA``).

The ``Collector`` is the single writer of a destination during a crawl or an import: it keeps
the manifest in memory, decides accepted / duplicate for each validated image under a lock
(download threads call it concurrently), stores accepted files by content hash atomically,
and writes the manifest atomically every few rows, so a killed process loses at most those
rows and never leaves half a file or half a table.

Duplicate policy (exact: same sha256; near: pHash distance <= threshold):
- the first copy seen is kept (accepted); later copies get status ``duplicate`` with
  ``duplicate_of`` = the kept file, and no file of their own (the bytes are already stored);
- when the copies belong to different classes the image's label is ambiguous: both rows name
  the other classes in ``other_wnids``. The kept copy stays accepted (an analyst may exclude
  it); the second class does not get a second copy, so one picture never carries two labels.
"""
from __future__ import annotations

import os
import re
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

_STORED_NAME_RE = re.compile(r"^[0-9a-f]{16}\.(%s)$" % "|".join(sorted(set(FORMAT_EXTENSIONS.values()))))
LOCK_NAME = ".wildlens-collect.lock"


class CollectError(WildLensError, RuntimeError):
    """Collection cannot proceed; the message says why and what to do."""


# --------------------------------------------------------------------------- destinations
class Destination:
    """Images folder + manifest. Subclasses say where the manifest lives and in which format."""

    images_dir: Path
    root: Path

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

    def read_manifest(self) -> pd.DataFrame:
        return self.run.read_manifest()

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

    def read_manifest(self) -> pd.DataFrame:
        if not self.manifest_path.exists():
            return empty_table(MANIFEST_SCHEMA)
        try:
            raw = pd.read_csv(self.manifest_path, dtype=str, keep_default_na=False, na_values=[""])
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise CollectError(f"{self.manifest_path} is not a readable manifest ({exc}); move it away to start afresh.") from None
        if "excluded" in raw:
            raw["excluded"] = raw["excluded"].map({"True": True, "true": True, "1": True, "False": False,
                                                   "false": False, "0": False})
        try:
            df = conform(raw, MANIFEST_SCHEMA, table="manifest")
        except StoreError as exc:
            raise CollectError(f"{self.manifest_path}: {exc}") from None
        df["excluded"] = df["excluded"].fillna(False)
        return df

    def write_manifest(self, df: pd.DataFrame) -> None:
        write_table(df, self.manifest_path, MANIFEST_SCHEMA, table="manifest")  # atomic CSV


def as_destination(target) -> Destination:
    if isinstance(target, Destination):
        return target
    if isinstance(target, Run):
        return RunDestination(target)
    if isinstance(target, (str, os.PathLike)):
        return FolderDestination(target)
    raise TypeError(f"Expected a Run or a folder path, not {type(target).__name__}.")


@contextmanager
def exclusive(dest: Destination) -> Iterator[None]:
    """One writer per destination (core.locking): a second crawl or import into the same run fails
    at once instead of interleaving two manifests. The OS releases the lock when a process dies."""
    try:
        with exclusive_lock(dest.root, name=LOCK_NAME):
            yield
    except FolderBusy:
        raise CollectError(f"Another crawl or import is writing to {dest.describe()}; wait for it to finish.") from None


def sweep_leftovers(dest: Destination, manifest: pd.DataFrame, wnids) -> int:
    """Remove what a killed process can leave in the class folders: temporary files of an
    unfinished atomic write, and hash-named files stored after the last manifest write (their
    rows were lost; the images are fetched or imported again, since their URLs are not in the
    manifest). Only names WildLens itself creates are touched."""
    referenced = set(manifest["file"].dropna())
    removed = 0
    for wnid in wnids:
        folder = dest.images_dir / wnid
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            name = path.name
            stale_temp = name.startswith(".") and name.endswith(".tmp")
            orphan = bool(_STORED_NAME_RE.match(name)) and f"{wnid}/{name}" not in referenced
            if path.is_file() and (stale_temp or orphan):
                path.unlink(missing_ok=True)
                removed += 1
    return removed


# --------------------------------------------------------------------------- collector
@dataclass(frozen=True)
class Outcome:
    status: str  # 'accepted', 'duplicate', 'rejected', or 'surplus' (class already full: nothing recorded)
    row: dict | None = None


def _blank_row() -> dict:
    row = {col: None for col in MANIFEST_SCHEMA}
    row["excluded"] = False
    return row


def _split_wnids(value) -> set[str]:
    return {w for w in str(value).split(",") if w} if isinstance(value, str) and value else set()


class Collector:
    """Thread-safe manifest + duplicate index of one destination (see the module docstring)."""

    def __init__(self, dest: Destination, validation: ValidationConfig, *, save_every: int = 10):
        self.dest = dest
        self.validation = validation
        self.save_every = max(1, save_every)
        self._lock = threading.RLock()
        manifest = dest.read_manifest()
        self.rows: list[dict] = [{k: (None if v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v)
                                  for k, v in rec.items()} for rec in manifest.to_dict("records")]
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
                    self._unsaved += 1
                return Outcome("duplicate", self._append(row))
            if target is not None and self.usable[wnid] >= target:
                return Outcome("surplus")
            if data is None:
                raise ValueError("record(): the bytes of an accepted image are needed to store it")
            row["file"] = facts.stored_name(wnid)
            write_bytes_atomic(self.dest.images_dir / row["file"], data)  # temp + fsync + rename
            row.update(status="accepted", reason=None)
            return Outcome("accepted", self._append(row))

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

    def _append(self, row: dict) -> dict:
        self.rows.append(row)
        self._index(len(self.rows) - 1, row)
        self._unsaved += 1
        if self._unsaved >= self.save_every:
            self.save()
        return row

    def save(self) -> None:
        """Write the whole manifest atomically (callers may hold the lock or not)."""
        with self._lock:
            df = pd.DataFrame(self.rows, columns=list(MANIFEST_SCHEMA)) if self.rows else empty_table(MANIFEST_SCHEMA)
            self.dest.write_manifest(df)
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
