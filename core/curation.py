"""A run's curation: the analyst's tags, relabels and exclusions of its images, kept as an
append-only log that is never rewritten in place and never changes an image or the manifest.

Layout (``core.runstore`` owns the run folder, this module the ``curation/`` in it)::

    runs/<run_id>/curation/log.jsonl     one JSON object per line, in the order they were made:

    {"seq": 3, "time": "2026-12-05T15:02:11+00:00", "action": "tag", "value": "not-a-photo",
     "images": ["n02123045/3f2a9c01d4e5b6a7.jpg"], "note": "a souvenir mug", "by": "dashboard"}

Actions (:data:`ACTIONS`): ``tag`` / ``untag`` (value: a tag, :data:`BUILTIN_TAGS` or any free
one-line text), ``relabel`` (value: the wnid of any WordNet 3.0 noun, not only of the label
space), ``exclude`` / ``include`` (no value), ``undo`` (value: the ``seq`` of an earlier entry).
One entry may name one image or a whole selection. ``pandas.read_json(path, lines=True)`` reads it.

Replay (:func:`replay`): the entries in ``seq`` order, each undone entry skipped, the last word
winning per image (a later relabel replaces an earlier one; exclude then include leaves the image
in). ``undo N`` takes entry N back exactly: the state is the one without N, so undoing every entry
gives the raw run again. An undo cannot itself be undone (make the action again instead), and an
entry is undone at most once.

Writes: one entry at a time, under the run's curation lock (:data:`LOCK_NAME`, waited for: the
dashboard and ``python -m crawl curate`` never lose each other's entries) and its presence lock
(a delete of the run waits or is refused, and a deleted run's folder is never made again). The
log is read, the new line added after its bytes, and the whole written atomically (temporary
file, fsync, rename): a killed writer leaves the old log or the new one. Lines that are not a
valid entry (a hand edit, a damaged copy) are kept byte for byte, skipped by replay, and reported
(:attr:`Curation.problems`).

The fingerprint (:func:`log_fingerprint`) is a digest of the log's bytes: the curated metric
tables are keyed by it.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .errors import WildLensError
from .runstore import Run, StoreError, now_iso, waiting_lock, write_bytes_atomic

CURATION_DIR = "curation"
LOG_FILE = "log.jsonl"
LOCK_NAME = ".wildlens-curation.lock"
ACTIONS = ("tag", "untag", "relabel", "exclude", "include", "undo")
# Tags every run offers (issue 24); any other one-line text is a free tag.
BUILTIN_TAGS = ("not-a-photo", "wrong-class", "several-objects", "duplicate", "unsuitable")
TAG_HELP = {
    "not-a-photo": "a drawing, cartoon, render, text or a photo of an object that depicts the class (a souvenir)",
    "wrong-class": "the image shows another class than the one it is filed under",
    "several-objects": "more than one object, so a single label cannot be right",
    "duplicate": "the same picture as another image of the run",
    "unsuitable": "unusable for another reason (too small, cropped, offensive, ...)",
}
MAX_TAG_CHARS = 40
MAX_NOTE_CHARS = 500
MAX_IMAGE_CHARS = 1000
MAX_LOG_BYTES = 256 << 20  # a log past this is no log a person made: refused, not read
TAG_SEPARATOR = "; "  # between an image's tags wherever they are listed as text (explain.browse.annotate)


class CurationError(WildLensError, ValueError):
    """A curation action that cannot be recorded as asked, or a log that cannot be read; one line."""


@dataclass(frozen=True)
class Entry:
    """One line of the log."""

    seq: int
    time: str
    action: str
    images: tuple[str, ...]
    value: str | int | None = None
    note: str = ""
    by: str = ""

    def as_json(self) -> dict:
        return {"seq": self.seq, "time": self.time, "action": self.action, "value": self.value,
                "images": list(self.images), "note": self.note, "by": self.by}

    @property
    def what(self) -> str:
        """'tag not-a-photo', 'relabel to n02123159', 'undo #2': the action in words."""
        return {"tag": f"tag {self.value}", "untag": f"untag {self.value}", "relabel": f"relabel to {self.value}",
                "exclude": "exclude", "include": "include", "undo": f"undo #{self.value}"}[self.action]

    def describe(self) -> str:
        """'#3 tag not-a-photo (2 images)': one line for a history list (outside text: escape it)."""
        n = len(self.images)
        return f"#{self.seq} {self.what}" + (f" ({n} images)" if n != 1 else "")


@dataclass(frozen=True)
class Curation:
    """A log replayed: what the analyst said of each image, as it stands now.

    ``tags``: image -> its tags; ``relabels``: image -> the wnid it was relabelled to (any noun;
    whether that differs from its stored class is for the reader to say); ``excluded``: images
    excluded now; ``history``: image -> the seqs of every entry that named it (undone ones too);
    ``undone``: seqs taken back; ``problems``: one line per log line that is no valid entry."""

    entries: tuple[Entry, ...] = ()
    undone: frozenset[int] = frozenset()
    tags: dict[str, frozenset[str]] = field(default_factory=dict)
    relabels: dict[str, str] = field(default_factory=dict)
    excluded: frozenset[str] = frozenset()
    history: dict[str, tuple[int, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    fingerprint: str = "none"

    @property
    def active(self) -> bool:
        """Whether anything is in effect (every entry undone is the raw run)."""
        return bool(self.tags or self.relabels or self.excluded)

    def entry(self, seq: int) -> Entry | None:
        return next((e for e in self.entries if e.seq == seq), None)

    def tagged(self, *tags: str) -> frozenset[str]:
        """Images carrying any of ``tags``."""
        wanted = set(tags)
        return frozenset(image for image, have in self.tags.items() if have & wanted)

    def summary(self) -> str:
        """'3 images tagged, 4 relabelled, 2 excluded' (what is in effect), or 'nothing curated'."""
        parts = [f"{len(self.tags)} tagged" if self.tags else "", f"{len(self.relabels)} relabelled" if self.relabels
                 else "", f"{len(self.excluded)} excluded" if self.excluded else ""]
        parts = [p for p in parts if p]
        return ("images: " + ", ".join(parts)) if parts else "nothing curated"


# --------------------------------------------------------------------------- checks
def _printable(text: str) -> bool:
    return not any(unicodedata.category(c).startswith("C") for c in text)


def clean_tag(tag) -> str:
    """A tag as stored: its words joined by one space; refused (CurationError) when it is empty,
    longer than :data:`MAX_TAG_CHARS` or holds control characters."""
    if not isinstance(tag, str):
        raise CurationError(f"a tag is text, not {type(tag).__name__}; give e.g. {BUILTIN_TAGS[0]}.")
    text = " ".join(tag.split())
    if not text:
        raise CurationError(f"an empty tag; give one of {', '.join(BUILTIN_TAGS)} or a word of your own.")
    if len(text) > MAX_TAG_CHARS or not _printable(text):
        raise CurationError(f"a tag is one line of at most {MAX_TAG_CHARS} printable characters; "
                            f"{text[:20]!r}... is not.")
    if TAG_SEPARATOR.strip() in text:  # the tables and CSVs list an image's tags joined by '; '
        raise CurationError(f"a tag cannot hold {TAG_SEPARATOR.strip()!r} (it separates an image's tags in tables); "
                            f"give {text.replace(';', ',')[:40]!r} or two tags.")
    return text


def clean_note(note) -> str:
    if note is None:
        return ""
    if not isinstance(note, str):
        raise CurationError(f"a note is text, not {type(note).__name__}.")
    text = " ".join(note.split())
    if len(text) > MAX_NOTE_CHARS or not _printable(text):
        raise CurationError(f"a note is one line of at most {MAX_NOTE_CHARS} printable characters; shorten it.")
    return text


def clean_images(images) -> tuple[str, ...]:
    """The images of an entry: names as the run stores them (the manifest's ``file``, or a
    prediction's ``image``), each once, in the order given."""
    if isinstance(images, str):
        images = [images]
    try:
        items = list(images)
    except TypeError:
        raise CurationError(f"images: expected image names, not {type(images).__name__}.") from None
    if not items:
        raise CurationError("no image named; give at least one image of the run.")
    out = []
    for item in items:
        if not isinstance(item, str) or not item or len(item) > MAX_IMAGE_CHARS or not _printable(item):
            shown = repr(item)[:60]
            raise CurationError(f"{shown} is not an image name (one line of at most {MAX_IMAGE_CHARS} printable "
                                "characters, as the run's images are named).")
        out.append(item)
    return tuple(dict.fromkeys(out))


def _check_value(action: str, value):
    """The value an entry of ``action`` stores (a clean tag, a noun's wnid, an undo's seq, None),
    or CurationError: one rule for what is recorded and for what a log line may hold."""
    if action in ("tag", "untag"):
        return clean_tag(value)
    if action == "relabel":
        return check_wnid(value)
    if action == "undo":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise CurationError(f"undo takes the number (#) of an entry of the log, not {str(value)[:20]!r}.")
        return value
    return None


def check_wnid(value) -> str:
    """The wnid of a WordNet 3.0 noun ('n02123045'), or CurationError saying how to find one."""
    from .wordgraph import noun_of

    if isinstance(value, str):
        try:
            noun_of(value.strip())
            return value.strip()
        except (KeyError, ValueError, WildLensError):
            pass
    raise CurationError(f"{str(value)[:40]!r} is not the wnid of a WordNet 3.0 noun (n + 8 digits, e.g. n02123045); "
                        "find one with: python -m explain senses WORD")


# --------------------------------------------------------------------------- reading
def log_path(run: Run) -> Path:
    return Path(run.path) / CURATION_DIR / LOG_FILE


def _read_bytes(path: Path) -> bytes:
    """The log's bytes (b'' when there is none); a log that is no regular file, or too large, or
    a curation folder that is a link, is refused (a link could lead anywhere)."""
    _check_folder(path.parent)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise CurationError(f"the curation log {path} cannot be opened ({exc.strerror or exc}); it must be a regular "
                            "file (not a link): move it away and curate again.") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked on the descriptor, before a read could wait or fail
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise CurationError(f"the curation log {path} is {kind}; move it away and curate again.")
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_LOG_BYTES + 1)
    if len(data) > MAX_LOG_BYTES:
        raise CurationError(f"the curation log {path} is larger than {MAX_LOG_BYTES >> 20} MiB; it is not one "
                            "WildLens wrote: move it away.")
    return data


def _check_folder(folder: Path) -> None:
    """The run's curation folder is missing or a real folder: a link could lead anywhere, a file in
    its place would make every write fail with an odd message."""
    if folder.is_symlink():
        raise CurationError(f"{folder} is a symbolic link, not the run's curation folder; move it away.")
    if folder.exists() and not folder.is_dir():
        raise CurationError(f"{folder} is a file, not the run's curation folder; move it away and curate again.")


def _entry(obj) -> Entry:
    """An Entry from a parsed line, or ValueError saying what is wrong with it."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    seq = obj.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("no seq (a whole number from 1)")
    action = obj.get("action")
    if action not in ACTIONS:
        raise ValueError(f"unknown action {str(action)[:20]!r}")
    try:
        images = clean_images(obj.get("images"))
        note = clean_note(obj.get("note", ""))
    except CurationError as exc:
        raise ValueError(str(exc)) from None
    value = _check_value(action, obj.get("value"))
    time, by = obj.get("time", ""), obj.get("by", "")
    # Every text of an entry is printable, whoever wrote the line: the command line prints them as they are.
    return Entry(seq, time if isinstance(time, str) and _printable(time) and len(time) <= 40 else "", action, images,
                 value, note, by if isinstance(by, str) and _printable(by) and len(by) <= 40 else "")


def parse_log(data: bytes) -> tuple[list[Entry], list[str]]:
    """(entries in seq order, one line per line that is no valid entry). A seq that repeats an
    earlier one is a problem too (only the first counts)."""
    entries, problems, _ = _parse(data)
    return entries, problems


def _parse(data: bytes) -> tuple[list[Entry], list[str], int]:
    """parse_log's answer and the highest seq any line names, valid or not: the next entry's seq
    is above it, so a line this version cannot read (a newer action) never shares its number
    with a new entry (hostile campaign: the new entry stopped counting once the old line parsed)."""
    entries, problems, seen, highest = [], [], set(), 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            if isinstance(obj, dict) and isinstance(obj.get("seq"), int) and not isinstance(obj.get("seq"), bool):
                highest = max(highest, min(obj["seq"], 1 << 62))
            entry = _entry(obj)
        except CurationError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            problems.append(f"line {number}: {str(exc)[:120] or type(exc).__name__}")
            continue
        if entry.seq in seen:
            problems.append(f"line {number}: seq {entry.seq} repeats an earlier entry's")
            continue
        seen.add(entry.seq)
        entries.append(entry)
    return sorted(entries, key=lambda e: e.seq), problems, highest


def log_fingerprint(data: bytes) -> str:
    """16 hex digits of the log's sha256; 'none' for no log."""
    return hashlib.sha256(data).hexdigest()[:16] if data else "none"


def replay(entries: Iterable[Entry], problems: Iterable[str] = (), fingerprint: str = "none") -> Curation:
    """The state the entries leave (see the module docstring)."""
    entries = tuple(sorted(entries, key=lambda e: e.seq))
    undone: set[int] = set()
    by_seq = {e.seq: e for e in entries}
    problems = list(problems)
    for e in entries:
        if e.action != "undo":
            continue
        target = by_seq.get(e.value)
        if target is None or target.action == "undo" or target.seq in undone or target.seq > e.seq:
            problems.append(f"entry #{e.seq}: undo of #{e.value}, which is no earlier action still in effect")
            continue
        undone.add(target.seq)
    tags: dict[str, set[str]] = {}
    relabels: dict[str, str] = {}
    excluded: set[str] = set()
    history: dict[str, list[int]] = {}
    for e in entries:
        if e.action != "undo":
            for image in e.images:
                history.setdefault(image, []).append(e.seq)
        if e.action == "undo" or e.seq in undone:
            continue
        for image in e.images:
            if e.action == "tag":
                tags.setdefault(image, set()).add(e.value)
            elif e.action == "untag":
                tags.get(image, set()).discard(e.value)
            elif e.action == "relabel":
                relabels[image] = e.value
            elif e.action == "exclude":
                excluded.add(image)
            elif e.action == "include":
                excluded.discard(image)
    return Curation(entries, frozenset(undone), {k: frozenset(v) for k, v in tags.items() if v}, relabels,
                    frozenset(excluded), {k: tuple(v) for k, v in history.items()}, tuple(problems), fingerprint)


def read_curation(run: Run) -> Curation:
    """The run's curation as it stands (an empty one when the run has no log)."""
    data = _read_bytes(log_path(run))
    entries, problems = parse_log(data)
    return replay(entries, problems, log_fingerprint(data))


def curation_fingerprint(run: Run) -> str:
    """The fingerprint of the run's log now ('none' without one): what curated tables and every
    page's reads are keyed by. From the file's size, time and inode, not its bytes: a page asks on
    every rerun, and the log is only ever replaced by an atomic rename (a new inode), so any entry
    shows. A log that cannot be read has its own fingerprint; reading it says what is wrong."""
    path = log_path(run)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "none"
    except OSError as exc:
        return "unreadable-" + hashlib.sha256(str(exc).encode()).hexdigest()[:8]
    return hashlib.sha256(f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}:{info.st_mode}".encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- writing
def record(run: Run, action: str, images, value=None, *, note: str = "", by: str = "",
           known_images: Iterable[str] | None = None) -> Entry:
    """Append one entry to the run's log and return it (see the module docstring for the lock and
    the atomic write). ``known_images``: the run's images; an entry naming another is refused, so
    a typo never curates nothing. CurationError (one line) for anything that cannot be recorded."""
    from .locking import RunGone, run_presence_lock

    if action not in ACTIONS:
        raise CurationError(f"unknown action {str(action)[:20]!r}; one of {', '.join(ACTIONS)}.")
    images = clean_images(images)
    note = clean_note(note)
    value = _check_value(action, value)
    if known_images is not None:
        known = known_images if isinstance(known_images, (set, frozenset)) else set(known_images)
        unknown = [image for image in images if image not in known]
        if unknown:
            more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
            raise CurationError(f"{unknown[0]!r}{more} is no image of run {run.run_id}; give images as the run names "
                                "them (the manifest's file column, e.g. n02123045/3f2a9c01d4e5b6a7.jpg).")
    path = log_path(run)
    try:
        with run_presence_lock(run.path, f"Run {run.run_id} is gone; nothing was recorded."):
            _check_folder(path.parent)
            path.parent.mkdir(exist_ok=True)  # the run folder is there (locked): never made again
            with waiting_lock(path.parent, LOCK_NAME, required=True):
                data = _read_bytes(path)
                entries, _, highest = _parse(data)
                seq = max(highest, max((e.seq for e in entries), default=0)) + 1
                if action == "undo":
                    state = replay(entries)
                    target = state.entry(value)
                    if target is None:
                        raise CurationError(f"the log has no entry #{value}; see the entries with: python -m crawl "
                                            f"curate --run {run.run_id} --list")
                    if target.action == "undo":
                        raise CurationError(f"entry #{value} is itself an undo; make its action again instead.")
                    if target.seq in state.undone:
                        raise CurationError(f"entry #{value} is already undone.")
                    images = images or target.images
                entry = Entry(seq, now_iso(), action, images, value, note, by)
                line = json.dumps(entry.as_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
                prefix = data if not data or data.endswith(b"\n") else data + b"\n"
                write_bytes_atomic(path, prefix + line + b"\n")
    except (RunGone, StoreError) as exc:  # gone, or a lock that cannot be taken: its one line
        raise CurationError(str(exc)) from None
    except OSError as exc:
        raise CurationError(f"cannot write the curation log of run {run.run_id} ({exc.strerror or exc}); check that "
                            f"{run.path} is writable and the disk has room.") from None
    return entry


def undo(run: Run, seq: int, *, note: str = "", by: str = "") -> Entry:
    """Take entry ``seq`` back (an ``undo`` entry naming the same images)."""
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise CurationError(f"undo takes the number (#) of an entry of the log, not {str(seq)[:20]!r}.")
    target = read_curation(run).entry(seq)
    if target is None:
        raise CurationError(f"the log has no entry #{seq}; see the entries with: python -m crawl curate --run "
                            f"{run.run_id} --list")
    return record(run, "undo", target.images, seq, note=note, by=by)


def run_images(run: Run) -> set[str]:
    """Every image name a curation of ``run`` may refer to: its manifest's stored files and the
    images its predictions name (a run of uploaded predictions has no manifest)."""
    names: set[str] = set()
    if run.manifest_path.exists():
        names |= set(run.read_manifest()["file"].dropna().astype(str))
    if run.predictions_dir.exists():
        try:
            names |= set(run.read_predictions()["image"].dropna().astype(str))
        except WildLensError:
            if not run.manifest_path.exists():
                raise  # a run of uploaded predictions has no other list of its images: say why it cannot be read
            # (with a manifest, its stored files are still named; the predictions' error shows where they are read)
    return names
