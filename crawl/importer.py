"""Import a local folder of images: the offline way to bring images into WildLens.

Layout: ``SRC/<class>/<images>`` where ``<class>`` is a wnid (``n02123045``), a WordNet synset
name (``tabby.n.01``) or an ImageNet class name (``tabby``, ``tiger cat``, ``Egyptian_cat``;
case, spaces, '_' and '-' do not matter). A name must match a lemma of exactly one class of the
label space; otherwise the import stops before copying anything and lists the candidates
(e.g. 'crane' is a bird and a machine in ImageNet-1k: name the folder by its wnid, or map it).

Two steps, so nothing ambiguous is guessed (the Import page and ``python -m crawl import``):

- :func:`plan_folders` reads SRC and says, per class folder, how many files it holds and whether
  its name is ``resolved`` (one class), ``ambiguous`` (several: the candidates, each with its
  synset name and definition) or ``unknown`` (with suggestions when there are any: the classes
  nearest to the name in WordNet, ``core.labels.neighbour_classes``, then close spellings).
- :func:`import_new_run` takes an explicit mapping ``{folder name: wnid, or None to skip}`` for
  the folders that did not resolve (and may override those that did), imports into a staging
  folder and creates the run only when at least one image was accepted: a refused or empty
  import leaves no run behind. :func:`import_folder` adds to an existing run or a plain folder.

Images may sit in sub-folders of a class folder. Hidden files and folders (starting with '.')
are skipped. Every file is read (never written), validated like a crawled image, and accepted
files are copied under a name made of their hash, so hostile or exotic file names never reach
the file system; the original relative path is kept in the manifest as data
(``original_name``). Importing the same folder again adds nothing.

Only regular files inside SRC are read, and never more than the size limit of any of them:
a link to /dev/zero would fill memory, a FIFO would block forever, a class folder linking to
/ would walk the whole disk. Symbolic links follow core.folderscan's rule (the same for
``classify --images``): an entry is read once, under the class folder that holds it by its real
path, so a link into another class folder is skipped (its images are read there: before,
``SRC/n02123045/up -> ..`` stored every other class's photos as tabby, ``--skip`` folders
included); a link to SRC or above it is a loop; a link that leaves SRC is followed only with
``follow_links`` (``--follow-links``), and what it leads to is the class of the folder holding the
link (except what lies in another class folder); each folder is read once, so link loops end.
Every entry that is not read gets a manifest row (status 'rejected') and a line in the summary,
with its reason: ``not-regular`` (FIFO, device, socket), ``outside-src``, ``symlink-loop``,
``other-class``, ``unreadable`` (permission, broken link), ``too-large``.
"""
from __future__ import annotations

import dataclasses
import difflib
import errno
import functools
import json
import os
import re
import secrets
import shutil
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import printable
from core.folderscan import Skip, TreeScan, bad_name_reason, printable_name
from core.labels import DEFAULT_LABEL_SPACE, QueryError, get_label_space, neighbour_classes, resolve_noun_synsets
from core.progress import ProgressCallback, report
from core.runstore import Run, RunInfo, RunStore, new_run_id, now_iso, valid_run_id, write_bytes_atomic
from core.tables import RUN_ID_RULE, StoreError
from core.userfile import describe_kind, expand_user
from core.serving import check_import_source
from core.wordgraph import noun_of as synset_of  # NLTK's nouns as arrays (core.wordgraph)
from core.wordnet import is_wnid, wnid_of

from .config import ValidationConfig
from .store import (CollectError, Collector, RunDestination, as_destination, check_manifest, check_writable, exclusive, leftover_notes,
                    StoreFailure, record_failure, summarise, sweep_leftovers)
from .validate import (NOT_REGULAR, SYMLINK_LOOP, TOO_LARGE, UNREADABLE, Rejected, sha256_hex,
                       validate_image)

_SYNSET_NAME_RE = re.compile(r"^.+\.n\.[0-9]{2}$")  # ASCII digits (\d takes others)
# Threads that store accepted files (crawl.store.Collector): their fsyncs overlap, and the file
# system commits them together; on a loaded disk 4 in flight cost a third of one at a time.
IMPORT_WRITERS = 4


class FolderImportError(CollectError):
    """A folder that cannot be imported as asked; the message lists what to fix. ``summary`` is
    the import's summary when the import ran and accepted nothing (why each file was rejected)."""

    summary: "ImportSummary | None" = None


RESOLVED, AMBIGUOUS, UNKNOWN = "resolved", "ambiguous", "unknown"


@dataclass(frozen=True)
class Candidate:
    """A class a folder name may stand for."""

    wnid: str
    synset: str  # WordNet synset name, e.g. 'missile.n.01'
    name: str  # the label space's class name, e.g. 'missile'
    definition: str

    @property
    def label(self) -> str:
        """'missile.n.01 — a rocket carrying a warhead ...' (plain text: for select box options)."""
        return f"{self.synset} — {self.definition}"


@dataclass(frozen=True)
class FolderPlan:
    """What one class folder of SRC is: ``status`` 'resolved' (``wnid`` set), 'ambiguous'
    (``candidates``: every class its name matches) or 'unknown' (``candidates``: the nearest
    classes in WordNet, then close spellings, maybe none; ``reason`` says why). ``files``: regular files the import would read."""

    folder: str
    files: int
    status: str
    wnid: str | None = None
    candidates: tuple[Candidate, ...] = ()
    reason: str = ""


@dataclass
class ImportPlan:
    """Every class folder of ``src`` (by name), and notes about entries that are not class folders."""

    src: Path
    label_space: str
    folders: list[FolderPlan]
    notes: list[str] = field(default_factory=list)

    def by_status(self, status: str) -> list[FolderPlan]:
        return [f for f in self.folders if f.status == status]

    @property
    def resolved(self) -> dict[str, str]:
        """folder -> wnid of the folders whose name resolved to exactly one class."""
        return {f.folder: f.wnid for f in self.folders if f.status == RESOLVED}

    def table(self) -> pd.DataFrame:
        """One row per folder: folder (a name that is not UTF-8 with \\xNN), files, status, class (name), wnid,
        note (candidates or reason)."""
        space = get_label_space(self.label_space)
        rows = []
        for f in self.folders:
            note = f.reason
            if f.status == AMBIGUOUS:
                note = "one of: " + "; ".join(f"{c.synset} ({c.wnid})" for c in f.candidates)
            elif f.status == UNKNOWN and f.candidates:
                note = "not a class name; nearest: " + ", ".join(f"{c.name} ({c.wnid})" for c in f.candidates)
            elif f.status == UNKNOWN:
                note = f.reason.split(": ", 1)[-1] if f.reason.startswith("folder ") and ": " in f.reason else \
                    "not a class name of " + self.label_space
            rows.append({"folder": printable_name(f.folder), "files": f.files, "status": f.status,  # shown as text
                         "class": space.display_name(f.wnid) if f.wnid else "", "wnid": f.wnid or "",
                         "note": note})
        return pd.DataFrame(rows, columns=["folder", "files", "status", "class", "wnid", "note"])


@dataclass
class ImportSummary:
    destination: str
    folders: dict[str, str]  # class folder name -> wnid, the folders imported
    per_class: pd.DataFrame  # see crawl.store.summarise
    files_seen: int = 0
    already_imported: int = 0
    new_rows: int = 0
    new_accepted: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (original name, reason) of entries not read
    folders_skipped: dict[str, str] = field(default_factory=dict)  # class folder not imported -> why
    run_id: str | None = None  # the run created by import_new_run
    wnids: list[str] = field(default_factory=list)  # import_new_run: the run's classes (with accepted images)
    # With _import(since=True), an import taken up after a stop (crawl.importer._changed_since): files in the run
    # in more than one version, and files imported before that are no longer readable files in the source.
    changed_since: int = 0
    gone_since: int = 0


def _normalise(name: str) -> str:
    return " ".join(re.sub(r"[_\-]+", " ", name).split()).casefold()


@functools.lru_cache(maxsize=None)
def _lemma_index(label_space: str) -> dict[str, tuple[str, ...]]:
    """Normalised ImageNet lemma -> the wnids of the label space it names (usually one)."""
    space = get_label_space(label_space)
    index: dict[str, list[str]] = {}
    for wnid in space.wnids:
        for lemma in space.lemmas(wnid).split(","):
            key = _normalise(lemma)
            if key and wnid not in index.setdefault(key, []):
                index[key].append(wnid)
    return {k: tuple(v) for k, v in index.items()}


def _candidate(wnid: str, space) -> Candidate:
    try:
        synset = synset_of(wnid).name()
    except Exception:  # a label-space wnid WordNet 3.0 lacks: named by its wnid
        synset = wnid
    return Candidate(wnid, synset, space.display_name(wnid), space.definition(wnid))


def _resolve(name: str, label_space: str, what: str) -> tuple[str, str | None, tuple[Candidate, ...], str]:
    """(status, wnid, candidates, reason) of a name: a wnid, a synset name or a class name."""
    space = get_label_space(label_space)
    bad = bad_name_reason(name)
    if bad is not None:  # no class is named so; the folder's name cannot be journalled or printed as it is
        return UNKNOWN, None, (), f"{what} '{printable_name(name)}': {bad}"
    text = name.strip()
    if is_wnid(text):
        if text not in space:
            return UNKNOWN, None, (), (f"{what} {name!r}: {text} is not a class of {label_space} (choose a larger "
                                       "label space, e.g. --label-space imagenet-21k).")
        return RESOLVED, text, (), ""
    if _SYNSET_NAME_RE.match(text):
        try:
            synsets = resolve_noun_synsets(text)
        except QueryError as exc:
            return UNKNOWN, None, (), f"{what} {name!r}: {exc}"
        wnid = wnid_of(synsets[0])
        if wnid not in space:
            return UNKNOWN, None, (), f"{what} {name!r}: {text} ({wnid}) is not a class of {label_space}."
        return RESOLVED, wnid, (), ""
    index = _lemma_index(label_space)
    key = _normalise(text)
    matches = index.get(key, ())
    if len(matches) == 1:
        return RESOLVED, matches[0], (), ""
    if len(matches) > 1:
        candidates = tuple(_candidate(w, space) for w in matches)
        options = "; ".join(f"{c.wnid} {c.synset} ({_short(c.definition)})" for c in candidates)
        return AMBIGUOUS, None, candidates, f"{what} {name!r} is ambiguous in {label_space}: {options}"
    # WordNet's neighbours first (a folder 'motorcycle': moped, go-kart, ...), then spelling
    # neighbours ('tabbby': tabby); spelling alone offered unicycle and tricycle for motorcycle.
    near = neighbour_classes(text, label_space) if key else []
    close = difflib.get_close_matches(key, list(index), n=3, cutoff=0.75) if key else []
    candidates = tuple(dict.fromkeys([_candidate(w, space) for w in near]
                                     + [_candidate(w, space) for c in close for w in index[c]]))
    hints = []
    if near:
        hints.append("nearest in WordNet: " + "; ".join(f"{space.display_name(w)} -> {w}" for w in near[:3]))
    if close:
        hints.append("close spelling: " + "; ".join(f"{c} -> " + ", ".join(index[c]) for c in close))
    hint = f" ({'; '.join(hints)})" if hints else ""
    return UNKNOWN, None, candidates, f"{what} {name!r} is not a class name of {label_space}{hint}"


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def resolve_class_folder(name: str, label_space: str = DEFAULT_LABEL_SPACE) -> str:
    """The wnid a class folder's name stands for, exactly, or FolderImportError saying why not."""
    return resolve_class_name(name, label_space, what="folder")


def resolve_class_name(text: str, label_space: str = DEFAULT_LABEL_SPACE, what: str = "class") -> str:
    """The wnid that ``text`` (a wnid, a synset name such as 'missile.n.01', or a class name or
    lemma of the label space) stands for, or FolderImportError naming the candidates or close names."""
    status, wnid, _, reason = _resolve(text, label_space, what)
    if status == RESOLVED:
        return wnid
    if status == AMBIGUOUS:
        reason += ". Rename the folder to the wnid." if what == "folder" else ". Give the wnid or the synset name."
    elif not reason.endswith("."):
        reason += (". Name it by its wnid (e.g. n02123045) or an ImageNet class name ('python -m explain hyponyms "
                   "...' lists them).")
    raise FolderImportError(reason)


def _visible(name: str) -> bool:
    return not name.startswith(".")


@dataclass(frozen=True)
class Entry:
    """One entry of a class folder: a regular file to read at ``path`` (the link's target for a
    followed link), or ``skip``, the reason it is not read."""

    original: str  # path relative to SRC, '/'-separated: the manifest's original_name
    path: Path | None = None
    skip: Rejected | None = None


def _kind(mode: int) -> str:
    return ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file")


def _not_regular(mode: int) -> Rejected:
    return Rejected(NOT_REGULAR, f"{_kind(mode)}, not a regular file")


def _reason(skip: Skip) -> Rejected:
    """A core.folderscan Skip in the words of an import's manifest ('<code>: <detail>')."""
    why, target = skip.why, skip.target
    detail = {
        "loop": "a symbolic link that leads back to itself",
        "above": f"a symbolic link to {target}, the source folder or a folder above it (a link loop: not followed)",
        "seen": f"leads to {skip.other}, a folder already read (a link loop or a second link to it)",
        "class": f"a symbolic link into class folder {skip.other!r} ({target}): its images are read there, under "
                 "that folder's class",
        "no-class": f"a symbolic link to {target}, inside the source folder but in no class folder",
        "outside": f"a symbolic link to {target}, outside the source folder (--follow-links follows it)",
        "broken": f"a broken symbolic link ({skip.error})",
        "special": f"{_kind(skip.mode)}, not a regular file",
        "folder-error": f"folder: {skip.error}",
        "name": skip.error,  # not UTF-8: core.folderscan.bad_name_reason
    }.get(why, skip.error)
    return Rejected(skip.code, detail)


class _Walker:
    """The entries of SRC's class folders by core.folderscan's rule (shared with classify
    --images): a folder's files, then its sub-folders, by name; each entry read once, under the
    class folder that holds it by its real path."""

    def __init__(self, src: Path, follow_links: bool = False):
        self.scan = TreeScan(src, follow_links)

    def class_entries(self, folder: str) -> list[Entry]:
        return [Entry(item.original, item.path) if item.skip is None else Entry(item.original, skip=_reason(item.skip))
                for item in self.scan.entries(folder)]


def _root_oddities(src: Path) -> list[str]:
    """Entries directly in SRC that are neither a file nor a folder (a FIFO, a broken link, a loop)."""
    odd = []
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        if _visible(entry.name) and not Path(entry.path).is_dir() and not Path(entry.path).is_file():
            odd.append(entry.name)
    return odd


def _what_is(path: Path) -> str:
    """What is at ``path``, in words, for a SRC that is not a folder."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "nothing is there"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that leads back to itself"
        return f"it cannot be inspected: {exc.strerror or exc}"
    return "a file" if stat.S_ISREG(mode) else describe_kind(mode).replace(" (named pipe)", ", a named pipe")


def _resolved_source(src: Path | str, label_space: str, follow_links: bool) -> Path:
    """SRC's real path; SRC that is no folder is plan_folders' one line about the path as given. Why:
    resolving a link that leads back to itself raised RuntimeError (a traceback), and a broken link was
    named by its missing target (code review)."""
    given = expand_user(src)
    check_import_source(given, follow_links)  # the serving root first: nothing about a path outside it is said
    if not os.path.isdir(given):  # (never raises: an unreadable parent is "not a folder" too)
        plan_folders(given, label_space, follow_links)  # raises FolderImportError with what it is
    return given.resolve()


def plan_folders(src: Path | str, label_space: str = DEFAULT_LABEL_SPACE, follow_links: bool = False) -> ImportPlan:
    """Read ``src`` (SRC/<class>/<images>) without importing anything: every class folder with
    its file count and what its name stands for (see :class:`FolderPlan`). Folder names are data:
    any text is allowed and shown as it is. Raises FolderImportError when ``src`` is not a
    readable folder or holds no class folder."""
    src = expand_user(src)
    # WILDLENS_IMPORT_ROOT (and no import at all on a shared dashboard without it): every import
    # entry point plans first, so this one check covers them all (core/serving.py).
    check_import_source(src, follow_links)
    if not src.is_dir():
        kind = f" ({_what_is(src)})"  # what it is instead: a FIFO read "is not a folder" like a typo
        raise FolderImportError(f"{printable(src)} is not a folder{kind}. Expected SRC/<wnid or class name>/<images>.")
    notes = []
    try:
        children = sorted(p for p in src.iterdir() if _visible(p.name))
        odd = _root_oddities(src)
    except OSError as exc:
        raise FolderImportError(f"{src} cannot be read ({exc.strerror or exc}); check its permissions.") from None
    loose = [p.name for p in children if p.is_file()]
    if loose:
        notes.append(f"{len(loose)} file(s) directly in {src} skipped (put images in one folder per class)")
    if odd:
        shown = ", ".join(repr(name) for name in odd[:5]) + (", ..." if len(odd) > 5 else "")
        notes.append(f"{len(odd)} {'entry' if len(odd) == 1 else 'entries'} directly in {src} skipped: neither a "
                     f"file nor a folder ({shown})")
    folders = [p.name for p in children if p.is_dir()]
    if not folders:
        raise FolderImportError(f"{src} has no class folders. Expected SRC/<wnid or class name>/<images>.")
    walker = _Walker(src.resolve(), follow_links)
    plans = []
    for folder in folders:
        files = sum(1 for entry in walker.class_entries(folder) if entry.skip is None)
        status, wnid, candidates, reason = _resolve(folder, label_space, "folder")
        plans.append(FolderPlan(folder, files, status, wnid, candidates, reason))
    return ImportPlan(src, label_space, plans, notes)


def _choose(plan: ImportPlan, mapping: dict[str, str | None] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(folder -> wnid to import, folder -> why skipped) from the plan and an explicit mapping
    {folder: wnid, or None to skip}. Folders the mapping leaves out must have resolved; every
    one that did not is named in one FolderImportError (nothing is guessed)."""
    mapping = dict(mapping or {})
    space = get_label_space(plan.label_space)
    names = {f.folder for f in plan.folders}
    strangers = [name for name in mapping if name not in names]
    if strangers:
        raise FolderImportError(f"{plan.src} has no class folder named {', '.join(repr(n) for n in strangers)}; "
                                f"its folders: {', '.join(repr(n) for n in sorted(names)[:10])}.")
    chosen, skipped, errors = {}, {}, []
    for f in plan.folders:
        if f.folder in mapping:
            wnid = mapping[f.folder]
            if wnid is None:
                skipped[f.folder] = "skipped as asked"
            elif not is_wnid(str(wnid)) or wnid not in space:
                raise FolderImportError(f"folder {f.folder!r} is mapped to {wnid!r}, which is not a class of "
                                        f"{plan.label_space}; map it to a wnid of {plan.label_space} or skip it.")
            else:
                chosen[f.folder] = wnid
        elif f.status == RESOLVED:
            chosen[f.folder] = f.wnid
        else:
            errors.append((f.status != AMBIGUOUS, f.folder, f.reason.rstrip(".")))
    if errors:
        # One line (CLIs and the dashboard show one): the count, the fix, every folder's name (up to 20, each
        # cut to 60 characters), then each one's reason. A long list is cut at the end of the line, never
        # the way out nor a folder to fix (a hostile-input campaign, 2026-12-06: four folders, two named
        # before the cut). Ambiguous folders first: their candidates are the choice to make (an unknown one
        # may be skipped).
        errors = sorted(errors, key=lambda e: e[0])
        names = ", ".join(_folder_shown(folder) for _, folder, _ in errors[:20]) + \
            (f" and {len(errors) - 20} more" if len(errors) > 20 else "")
        reasons = [reason for _, _, reason in errors]
        shown = " | ".join(reasons[:5]) + (f" | and {len(reasons) - 5} more" if len(reasons) > 5 else "")
        raise FolderImportError(f"Cannot import {plan.src}: {len(errors)} class folder(s) cannot be mapped, nothing "
                                f"was imported (pick each one's class: --map FOLDER=WNID, or leave it out: --skip "
                                f"FOLDER; on the Import page: in place): {names}. Why: {shown}")
    return chosen, skipped


def _folder_shown(folder: str, limit: int = 60) -> str:
    """A folder's name inside a one-line message: quoted, bytes that are not UTF-8 as \\xNN, control
    characters escaped (a newline would end the line), cut to ``limit`` characters."""
    text = printable(printable_name(folder))
    return "'" + (text if len(text) <= limit else text[:limit - 1] + "…") + "'"


def _same_class_notes(chosen: dict[str, str]) -> list[str]:
    by_wnid: dict[str, list[str]] = {}
    for folder, wnid in chosen.items():
        by_wnid.setdefault(wnid, []).append(folder)
    # Shown as every other message shows a folder (a hostile campaign: a name holding ESC codes set the terminal's
    # title and colours, a newline split the note).
    return [f"folders {', '.join(map(_folder_shown, names))} all mean {wnid}; imported together"
            for wnid, names in by_wnid.items() if len(names) > 1]


def plan_import(src: Path | str, label_space: str = DEFAULT_LABEL_SPACE) -> tuple[dict[str, str], list[str]]:
    """Map every class folder of ``src`` to a wnid; raise FolderImportError listing every folder
    that cannot be mapped (nothing is imported then). Returns (folder -> wnid, notes)."""
    plan = plan_folders(src, label_space)
    chosen, _ = _choose(plan, None)
    return chosen, plan.notes + _same_class_notes(chosen)


def import_folder(src: Path | str, run_or_dir, label_space: str | None = None,
                  progress: ProgressCallback | None = None,
                  validation: ValidationConfig = ValidationConfig(), follow_links: bool = False,
                  mapping: dict[str, str | None] | None = None) -> ImportSummary:
    """Import ``src`` (SRC/<class>/<images>) into an existing Run or a folder (DIR/<wnid>/ and
    DIR/manifest.csv). Same validation and de-duplication as a crawl; SRC is only read, its
    regular files only; ``follow_links`` follows symbolic links that leave SRC. ``mapping``
    ({folder: wnid, or None to skip}) decides the folders whose name is ambiguous or unknown; the
    others are resolved by name. For a new run use :func:`import_new_run` (no empty run is left)."""
    src = _resolved_source(src, label_space or DEFAULT_LABEL_SPACE, follow_links)
    label_space = label_space or (run_or_dir.info.label_space if isinstance(run_or_dir, Run) else DEFAULT_LABEL_SPACE)
    dest = as_destination(run_or_dir)
    _check_apart(src, dest)
    plan = plan_folders(src, label_space, follow_links)
    chosen, skipped = _choose(plan, mapping)
    if not chosen:
        raise FolderImportError(f"Nothing to import from {src}: every class folder is skipped; map at least one to a class.")
    summary = _import(src, dest, chosen, plan.notes, progress, validation, follow_links)
    summary.folders_skipped = skipped
    run = run_or_dir if isinstance(run_or_dir, Run) else getattr(dest, "run", None)
    if run is not None:
        _update_run_info(run, list(dict.fromkeys(chosen.values())), label_space)
    return summary


def _import(src: Path, dest, folders: dict[str, str], notes: list[str], progress, validation: ValidationConfig,
            follow_links: bool, since: bool = False) -> ImportSummary:
    """Import ``folders`` of ``src`` into ``dest``. ``since``: count in the summary the files ``dest`` had
    recorded that changed or left ``src`` (for an import taken up after a stop, whose rows are all its own)."""
    started = time.monotonic()
    notes = list(notes) + _same_class_notes(folders)
    wnids = list(dict.fromkeys(folders.values()))
    check_writable(dest, wnids)
    check_manifest(dest)
    walker = _Walker(src, follow_links)
    work = [(wnid, entry) for folder, wnid in folders.items() for entry in walker.class_entries(folder)]
    summary = ImportSummary(dest.describe(), folders, pd.DataFrame(), notes=notes,
                            files_seen=sum(1 for _, entry in work if entry.skip is None))
    with exclusive(dest):
        collector = Collector(dest, validation, writers=IMPORT_WRITERS)
        summary.notes += leftover_notes(*sweep_leftovers(dest, collector.manifest(), wnids), "import")
        readable = np.zeros(len(work) if since else 0, dtype=bool)  # per entry: read this time (since=True)
        try:
            for done, (wnid, entry) in enumerate(work, start=1):
                sha = _import_one(collector, wnid, entry, validation, summary)
                if since:
                    readable[done - 1] = sha is not None
                report(progress, "import", done, len(work), dest.describe(), f"{entry.original[-50:]}")
        finally:
            collector.save()
    manifest = collector.manifest()  # (built from the rows each call: once here)
    if since:
        summary.changed_since, summary.gone_since = _changed_since(manifest, work, readable)
    if summary.skipped:
        counts = pd.Series([reason.split(":", 1)[0] for _, reason in summary.skipped]).value_counts()
        summary.notes.append(f"skipped {len(summary.skipped)} {'entry' if len(summary.skipped) == 1 else 'entries'} "
                             f"that are not regular files of their own class folder in {src} ("
                             + ", ".join(f"{n} {code}" for code, n in counts.items())
                             + "); each has a manifest row with its reason")
    summary.per_class = summarise(manifest, wnids)
    new = collector.new_rows
    summary.new_rows = len(new)
    summary.new_accepted = sum(1 for r in new if r["status"] == "accepted")
    summary.seconds = time.monotonic() - started
    return summary


def _changed_since(manifest: pd.DataFrame, work: list, readable: np.ndarray) -> tuple[int, int]:
    """(files in the run in more than one accepted version, files accepted before that this import found no
    readable file for), from the manifest at the end: what stops in between changed is counted too (a hostile
    check: counted during the last pass, a change seen by a pass that was stopped again went unsaid), and an
    earlier version that was rejected is no second version in the run."""
    accepted = manifest[manifest["status"] == "accepted"]
    versions = accepted.groupby(["wnid", "original_name"], sort=False)["sha256"].nunique()
    read = pd.MultiIndex.from_arrays([[w for (w, _), ok in zip(work, readable) if ok],
                                      [e.original for (_, e), ok in zip(work, readable) if ok]])
    return int((versions > 1).sum()), int((~versions.index.isin(read)).sum())


class _StagedRun(RunDestination):
    """A new run's staging folder, named in messages and progress as the run it will become."""

    must_exist = False  # the import's own folder, made by it (no run of that id exists yet)

    def __init__(self, run: Run, run_id: str, marker: dict | None = None):
        super().__init__(run)
        self.final_id = run_id
        self.marker = marker

    def locked(self) -> None:
        """Called by crawl.store.exclusive once this import holds the folder's lock: the marker that lets the same
        import, run again after a kill, take the folder up (:func:`_resumable_staging`) is written only now, so a
        folder whose import has not taken its lock yet is never taken from it (a marker means: locked, or dead)."""
        if self.marker is not None:
            write_bytes_atomic(self.root / IMPORT_MARKER, _marker_bytes(self.marker))

    def unlocking(self) -> None:
        """Called by crawl.store.exclusive before the lock goes (not when the process is killed): the marker goes
        first, so a folder whose import still runs, lock released, is never taken (a review: between the end of
        the collection and the rename)."""
        (self.root / IMPORT_MARKER).unlink(missing_ok=True)

    def describe(self) -> str:
        return f"new run {self.final_id}"

    def rebuild_command(self) -> str:
        return f"python -m crawl import SRC --run {self.final_id}"


STAGING_PREFIX = ".import-"  # runs/.import-<token>: a new run being imported (list_runs skips it)
_STALE_STAGING_S = 24 * 3600


def import_new_run(src: Path | str, mapping: dict[str, str | None] | None = None, store: RunStore | None = None, *,
                   title: str = "", label_space: str = DEFAULT_LABEL_SPACE, run_id: str | None = None,
                   progress: ProgressCallback | None = None, validation: ValidationConfig = ValidationConfig(),
                   follow_links: bool = False) -> ImportSummary:
    """Import ``src`` into a new run whose classes come from its folders, creating the run only
    when at least one image is accepted.

    ``mapping`` ({folder: wnid, or None to skip}) decides every folder whose name did not resolve
    to exactly one class (see :func:`plan_folders`); a folder it leaves out that is ambiguous or
    unknown stops the import before anything is read (FolderImportError naming each). The import
    runs into a staging folder inside the runs folder (``runs/.import-<token>``, invisible to
    ``RunStore.list_runs``) that is renamed to ``runs/<run_id>`` at the end, in one step; when
    nothing was accepted, or the import fails, the staging folder is removed and no run exists
    (FolderImportError, its ``summary`` saying why each file was rejected). A killed, interrupted (Ctrl-C,
    another page opened on the dashboard) or file-system-failed import's staging folder is kept
    (:func:`_kept_for_resume`) and taken up by the same import run again (:func:`_resumable_staging`:
    same run id, or for an import without one the same title; source, label space, classes and links):
    re-running resumes. Other staging folders a killed process left behind are removed by
    the next import after a day.

    The run records what an import knows: ``source`` 'import', the classes that got images
    (label-space order), the label space and title; no query, sense, k or engine. The summary's
    ``run_id`` names the new run, ``folders_skipped`` the folders left out and why."""
    store = store or RunStore()
    src = _resolved_source(src, label_space, follow_links)
    plan = plan_folders(src, label_space, follow_links)
    chosen, skipped = _choose(plan, mapping)
    if not chosen:
        raise FolderImportError(f"Nothing to import from {src}: every class folder is skipped; map at least one "
                                "to a class. No run was created.")
    auto_id = run_id is None  # the dashboard's imports: a fresh id each time, from the title
    run_id = run_id or new_run_id(title or src.name or "import")
    if not valid_run_id(run_id):
        raise FolderImportError(f"{run_id!r} is not a valid run id: {RUN_ID_RULE}.")
    target = store.runs_dir / run_id
    if target.exists():
        raise FolderImportError(f"Run {run_id} already exists; import into it with --run {run_id} only if you mean "
                                "to add to it, or choose another run id.")
    # What makes a killed import of this run the same import: the run, the source, the label space, the folders'
    # classes, whether links are followed and what an image must satisfy (a review: rows the killed attempt had
    # rejected under other limits were kept). Its staging folder is taken up again (re-running resumes), before
    # the sweep of day-old ones (which would otherwise remove it).
    # An import without a run id of its own (the dashboard's) is the same import as an earlier one of the same
    # title: it takes up that import's staging folder and the run id made then (re-running resumes there too).
    marker = {"run_id": {"new run titled": title} if auto_id else run_id, "source": str(src), "label_space": label_space,
              "follow_links": bool(follow_links),
              "folders": sorted([str(folder), str(wnid)] for folder, wnid in chosen.items()),
              "validation": {k: (sorted(v) if isinstance(v, (set, frozenset)) else v)
                             for k, v in dataclasses.asdict(validation).items()}}
    staging = _resumable_staging(store, marker)
    resumed = staging is not None
    # From here every exit goes through _kept_for_resume: a taken-up folder is never removed for an error
    # before its import has started (a full disk at the title's update removed the images kept, and a
    # Ctrl-C in the sweep left the folder without its marker, so the next run started over; review).
    try:
        if resumed and auto_id:
            run_id = _staged_run_id(staging, store) or run_id
            target = store.runs_dir / run_id
        _sweep_stale_staging(store)
        if resumed:
            run = Run(staging)
            if title:
                try:
                    run.update_info(run_id=run_id, title=title)  # run.json keeps the id (Run.info names the folder)
                except OSError as exc:
                    raise record_failure(exc, run.info_path) from None
        else:
            staging = store.runs_dir / f"{STAGING_PREFIX}{secrets.token_hex(6)}"
            try:
                staging.mkdir(parents=True)
                run = Run(staging)
                run.save_info(RunInfo(run_id=run_id, title=title or f"Import of {src.name}", source="import",
                                      label_space=label_space))
            except OSError as exc:  # a read-only $WILDLENS_HOME: one line, not a traceback
                raise FolderImportError(f"Cannot create run {run_id} in {store.runs_dir}: {exc.strerror or exc}; "
                                        "set $WILDLENS_HOME to a folder you can write to, or use --out DIR.") from None
        dest = _StagedRun(run, run_id, marker)
        _check_apart(src, dest)
        summary = _import(src, dest, chosen, plan.notes, progress, validation, follow_links, since=resumed)
        summary.folders_skipped = skipped
        usable = run.usable_images()
        space = get_label_space(label_space)
        got = set(usable["wnid"].dropna())
        summary.wnids = sorted(got, key=lambda w: space.index.get(w, len(space)))
        if not summary.wnids:
            counts = summary.per_class.drop(columns=["wnid", "requested", "accepted", "short_by"], errors="ignore")
            counts = counts.select_dtypes("number").sum()
            why = ", ".join(f"{int(n)} {code}" for code, n in counts.items() if n and code != "excluded")
            error = FolderImportError(f"Nothing imported from {src}: {summary.files_seen} file(s) read, none is a "
                                      f"usable image{f' ({why})' if why else ''}; no run was created.")
            error.summary = summary
            raise error
        for folder, wnid in chosen.items():
            if wnid not in got:
                summary.notes.append(f"folder {folder!r} ({wnid}): no usable image; the class is not in the run")
        run.update_info(run_id=run_id, wnids=summary.wnids)
        if resumed:
            summary.notes.append(f"took up the staging folder of an earlier import of run {run_id} that did not finish"
                                 + (f": {summary.already_imported} file(s) it had recorded were not imported again"
                                    if summary.already_imported else ""))
            if summary.changed_since or summary.gone_since:
                # The run then differs from an import of the source as it is now: say so (a hostile check).
                what = [f"{summary.changed_since} changed (each version is in the run)" if summary.changed_since else "",
                        f"{summary.gone_since} are no longer readable files there (kept in the run)"
                        if summary.gone_since else ""]
                summary.notes.append("the source changed while the import was stopped: of the files it had imported, "
                                     + " and ".join(w for w in what if w)
                                     + "; for a run of the source as it is now, import it again under another "
                                       + ("title" if auto_id else "run id"))
        (staging / IMPORT_MARKER).unlink(missing_ok=True)
        try:
            os.rename(staging, target)
        except OSError as exc:
            raise FolderImportError(f"Cannot create run {run_id} in {store.runs_dir}: {exc.strerror or exc} "
                                    "(another run of that id?); nothing was imported.") from None
    except BaseException as exc:
        if staging is not None and not _kept_for_resume(exc, staging, marker):
            shutil.rmtree(staging, ignore_errors=True)
        raise
    _drop_same_import(store, marker)
    summary.run_id = run_id
    summary.destination = f"run {run_id}"
    return summary


IMPORT_MARKER = ".wildlens-import.json"  # in a staging folder: what import it is (import_new_run's marker)
# It lists the class folders: 3,000 of them made 78 KB, over the 64 KiB read before, and such an import never
# resumed (hostile check, 2026-12-07). ImageNet-21k's 21,841 classes with long folder names fit in this.
MARKER_MAX_BYTES = 16 << 20


def _marker_bytes(marker: dict) -> bytes:
    return json.dumps(marker, sort_keys=True, separators=(",", ":")).encode("utf-8")


@contextmanager
def _left_by_the_same_import(path: Path, marker: dict):
    """Enter when ``path`` is a staging folder that ``marker``'s import left and its import is gone:
    a folder (no link) holding the same marker, whose lock is free (the OS releases it when the process
    dies; a stopped process keeps it, and its folder is left alone). Held while the body runs; the
    body's own errors propagate. Raises _NotLeft otherwise."""
    from core.locking import FolderBusy, exclusive_lock
    from core.userfile import UserFileError, read_user_bytes

    from .store import LOCK_NAME

    try:
        if not path.is_dir() or path.is_symlink():
            raise _NotLeft
        # Compared as bytes, never parsed: a marker nested 200,000 levels deep raised RecursionError (a review).
        if read_user_bytes(path / IMPORT_MARKER, max_bytes=MARKER_MAX_BYTES) != _marker_bytes(marker):
            raise _NotLeft
        lock = exclusive_lock(path, name=LOCK_NAME, make_folder=False)
        lock.__enter__()
    except (UserFileError, ValueError, FolderBusy, StoreError, OSError):
        raise _NotLeft from None
    try:
        # Read again under the lock: a live import that finished between the first read and the lock removed
        # its marker before letting the lock go, and its folder is about to become its run (review).
        try:
            again = read_user_bytes(path / IMPORT_MARKER, max_bytes=MARKER_MAX_BYTES)
        except (UserFileError, OSError):
            again = None
        if again != _marker_bytes(marker):
            raise _NotLeft
        yield
    finally:
        lock.__exit__(None, None, None)


class _NotLeft(Exception):
    """A staging folder that is not one the same import left (see :func:`_left_by_the_same_import`)."""


def _resumable_staging(store: RunStore, marker: dict) -> Path | None:
    """The staging folder of a killed import that ``marker`` describes, taken over under a fresh name, or None.

    Why: an import into a new run killed part-way (SIGKILL, a power cut) started over on the next run, and each
    attempt left a partial copy for a day (a hostile campaign). Its folder is taken up when its import is gone
    (:func:`_left_by_the_same_import`), then it is renamed, so two imports resuming at once cannot share it (one
    rename wins). The collector then resumes as in an existing run: the manifest and its journal say what is
    stored."""
    if not store.runs_dir.is_dir():
        return None
    for path in sorted(store.runs_dir.glob(f"{STAGING_PREFIX}*")):
        try:
            with _left_by_the_same_import(path, marker):
                pass
            fresh = store.runs_dir / f"{STAGING_PREFIX}{secrets.token_hex(6)}"
            os.rename(path, fresh)
            # Ours alone from here: without its marker until this import locks it, no other resume takes it.
            (fresh / IMPORT_MARKER).unlink(missing_ok=True)
        except (_NotLeft, OSError):
            continue
        return fresh
    return None


def _drop_same_import(store: RunStore, marker: dict) -> None:
    """Remove the other kept staging folders of the import that just made its run (same marker, their
    import gone): partial copies of what the run now holds. Why: two stops of the same dashboard import
    before either was taken up left two; the next import took up one and the one after the other,
    making a second run of the same images (review, 2026-12-07)."""
    for path in store.runs_dir.glob(f"{STAGING_PREFIX}*"):
        try:
            with _left_by_the_same_import(path, marker):
                # The marker first: a copy half removed by a Ctrl-C is never taken up as a resumable import.
                (path / IMPORT_MARKER).unlink(missing_ok=True)
                shutil.rmtree(path, ignore_errors=True)
        except (_NotLeft, OSError):
            continue


def _kept_for_resume(exc: BaseException, staging: Path, marker: dict) -> bool:
    """Whether an import that ended in ``exc`` leaves its staging folder for the same import to take up.

    Interrupted (Ctrl-C; the dashboard stopping its script when the reader opens another page while
    it runs: exceptions that are no ``Exception``; a closed browser tab does not stop it, the import
    ends) or failed on the file system (``StoreFailure``: a full disk at a file, the journal or the
    manifest, whose message says to run again to resume; another ``OSError`` of the store; a file of
    the source that cannot be read is a rejected row, no failure): what was imported stays, with its
    marker written again (the lock's end removed it), so running the same import again resumes, as
    after a kill; an import nobody runs again is swept after a day. Why: an import of thousands of
    images stopped at the last one started over from the first (a hostile campaign). Our own
    refusals (``FolderImportError``: nothing usable, the rename refused) and other exceptions (a fault
    whose state is not known) remove the folder, as does a marker that cannot be written (nothing
    could take the folder up); a folder already renamed into place is left as it is."""
    if isinstance(exc, FolderImportError) or (isinstance(exc, Exception)
                                              and not isinstance(exc, (OSError, StoreFailure))):
        return False
    if not staging.is_dir():  # renamed into place before the interrupt landed: nothing to keep, no folder to remake
        return True
    try:
        write_bytes_atomic(staging / IMPORT_MARKER, _marker_bytes(marker))
    except OSError:
        return False
    return True


def _staged_run_id(staging: Path, store: RunStore) -> str | None:
    """The run id a taken-up staging folder was made for (its run.json's field: ``Run.info`` names a run by
    its folder), when it is valid and still free."""
    from core.userfile import UserFileError, read_user_bytes

    try:
        run_id = json.loads(read_user_bytes(staging / "run.json", max_bytes=64 << 10)).get("run_id")
    except (UserFileError, OSError, ValueError, RecursionError, AttributeError):
        return None
    return run_id if isinstance(run_id, str) and valid_run_id(run_id) and not (store.runs_dir / run_id).exists() \
        else None


def _sweep_stale_staging(store: RunStore) -> None:
    """Remove staging folders of imports killed more than a day ago (their process is gone).

    An old time alone does not prove that: an import whose process was stopped or whose machine
    slept for a day is still alive, and holds its staging folder's lock (crawl.store.exclusive);
    such a folder is left alone."""
    from core.locking import FolderBusy, exclusive_lock

    from .store import LOCK_NAME

    if not store.runs_dir.is_dir():
        return
    now = time.time()
    for path in store.runs_dir.glob(f"{STAGING_PREFIX}*"):
        try:
            if path.is_dir() and not path.is_symlink() and now - path.stat().st_mtime > _STALE_STAGING_S:
                with exclusive_lock(path, name=LOCK_NAME, make_folder=False):
                    shutil.rmtree(path, ignore_errors=True)
        except (FolderBusy, StoreError, OSError):  # (a linked lock file in it: left for its owner to look at)
            continue


def _check_apart(src: Path, dest) -> None:
    """Refuse a source and a destination that overlap (symbolic links resolved). The destination
    inside SRC would import its own copies; SRC inside the destination (a run's own images
    folder) reads the files the import writes, and without a manifest every one of them looked
    unrecorded and was deleted."""
    root = dest.root.expanduser().resolve()
    if root == src or src in root.parents:
        raise FolderImportError(f"The destination {dest.root} is inside the source {src}; choose another --run or --out.")
    if root in src.parents:
        raise FolderImportError(f"The source {src} is inside the destination {dest.describe()} ({root}); "
                                "choose another --run or --out (to rebuild a manifest, import into a new one).")


def _import_one(collector: Collector, wnid: str, entry: Entry, validation: ValidationConfig,
                summary: ImportSummary) -> str | None:
    """Record one entry of the source; returns its bytes' sha256, or None where it was not read."""
    provenance = {"source": "import", "original_name": entry.original, "fetched_at": now_iso()}
    try:
        if entry.skip is not None:
            raise entry.skip
        data = _read_capped(entry.path, validation.max_bytes)
    except Rejected as exc:  # not read: recorded once (its key has no hash), reported every time
        if exc.code != TOO_LARGE:
            summary.skipped.append((entry.original, exc.reason))
        if not collector.has_import(wnid, entry.original, None):
            collector.record(wnid, provenance, rejection=exc)
        return None
    sha = sha256_hex(data)
    if collector.has_import(wnid, entry.original, sha):
        summary.already_imported += 1
        return sha
    provenance["sha256"] = sha
    try:
        facts = validate_image(data, validation)
    except Rejected as exc:
        collector.record(wnid, provenance, rejection=exc)
        return sha
    collector.record(wnid, provenance, facts=facts, data=data)
    return sha


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)


def _read_capped(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or Rejected. The walk saw a
    regular file; it is opened without following a link and without blocking, and checked again
    on the open handle (it may have been swapped for a FIFO or a device since), and never more
    than ``limit`` + 1 bytes are read (a file may grow, or lie about its size)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Rejected(SYMLINK_LOOP, "became a symbolic link while importing") from None
        raise Rejected(UNREADABLE, exc.strerror or type(exc).__name__) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(info.st_mode)
        if info.st_size > limit:
            raise Rejected(TOO_LARGE, f"{info.st_size} bytes > limit {limit}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Rejected(TOO_LARGE, f"more than {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise Rejected(UNREADABLE, exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)


def _update_run_info(run: Run, wnids, label_space: str) -> None:
    info = run.info
    space = get_label_space(label_space)
    merged = sorted(set(info.wnids) | set(wnids), key=lambda w: space.index.get(w, len(space)))
    sources = [s for s in (info.source or "").split("+") if s]
    run.update_info(wnids=merged, source="+".join(sources + ["import"]) if "import" not in sources else info.source,
                    label_space=info.label_space or label_space)
