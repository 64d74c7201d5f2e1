"""Export a run's image set as a dataset other tools read: an image folder, or FiftyOne's image
classification dataset (issue 24 item 6). ``python -m crawl export --run R --out DIR --format
imagefolder|fiftyone [--raw]``; the dashboard calls :func:`export_run`.

**The set.** The run's usable images (manifest status 'accepted', not excluded in the manifest),
in the *curated* view by default: the curation log (:func:`core.curation.read_curation`) leaves
its excluded images out and gives a relabelled image its new class. ``view='raw'`` (``--raw``)
exports the run as collected, without the curation. The summary says which view and what the
curation changed ('curated view: 4 relabelled, 3 excluded').

**imagefolder**::

    DIR/<wnid>/<sha256[:16]>.<ext>   each image under its (curated) class
    DIR/export_manifest.csv          per exported file: the run's image, true class and its name,
                                     the class it was collected for, provenance (URL, search term,
                                     rank, engine = the manifest's source) and the curation's tags
                                     and notes; spreadsheet-safe (core.csvsafe)

**fiftyone**: FiftyOne's documented ``FiftyOneImageClassificationDataset`` (``DIR/data/`` and
``DIR/labels.json``; :mod:`core.fiftyone_layout` has the layout and why this format): the label is
the curated wnid, and the ground truth's attributes carry the class name, the provenance, and per
model its top-1 (label, name, confidence), its top-5 and, when explain's stored explanations
(:func:`core.explained.read_explained`) are fresh, WildLens's relation, severity and error type.
When they are missing or stale the export goes on without those three and says which command adds
them. Load it with ``fiftyone.Dataset.from_dir(DIR,
dataset_type=fiftyone.types.FiftyOneImageClassificationDataset)``.

**Files.** Each image is a copy of the run's stored file: a copy-on-write clone where the file
system makes one (btrfs, XFS: no second copy on disk, yet editing one never changes the other),
else a plain copy. ``link=True`` (``--link``) makes hard links instead, as the issue first asked:
no second copy anywhere, but a hard link IS the run's file, so editing an exported image in place
(``mogrify``, a cleaning script) rewrites the run's stored image and breaks its sha256 (the
hostile campaign did exactly that); the summary says so whenever links were made. File names
come from the image's content hash and the class's wnid, never from a web string. An image whose
file is missing, is a link out of the run's images folder, or is not a regular file (a FIFO, a
device) is skipped and counted, never fatal.

**Safety.** DIR must be missing or an empty folder (nothing in it is ever overwritten or deleted),
outside the run store's runs folder, and under ``WILDLENS_EXPORT_ROOT`` when that is set (on a
shared dashboard an export needs it: ``core.serving.check_export_destination``). The export is
built in a hidden folder and put at DIR at the end: a missing DIR is a renamed sibling
(``.<DIR name>.wildlens-export-<hex>.tmp``, one step); an empty folder you made is kept (its owner,
mode and inode) and the entries move into it, the labels or manifest last, so an export is
complete exactly when its ``labels.json`` / ``export_manifest.csv`` is there. An export that fails
or is interrupted removes what it wrote and leaves DIR as it was; a process killed outright
(SIGKILL, power) leaves only the hidden folder.
"""
from __future__ import annotations

import errno
import functools
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import stat
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from core.errors import WildLensError, printable
from core.userfile import UserFileError, broken_link_reason, expand_user, no_home_reason
from core.explained import CURATED, EXPLAINED_IN_MEMORY, RAW, VIEWS, read_explained
from core.fiftyone_layout import (CLASS_NAME_ATTR, DATA_DIR, IMAGE_ATTR, LABELS_FILE, model_attribute,
                                  model_keys)
from core.locking import run_presence_lock
from core.progress import report
from core.runstore import Run, RunStore, StoreError, TOP_K, write_bytes_atomic
from core.wordnet import is_wnid

from .config import FORMAT_EXTENSIONS

IMAGEFOLDER, FIFTYONE = "imagefolder", "fiftyone"
FORMATS = (IMAGEFOLDER, FIFTYONE)
MANIFEST_FILE = "export_manifest.csv"  # imagefolder's; not 'manifest.csv', which marks a crawl's folder
TEMP_PREFIX, TEMP_SUFFIX = ".wildlens-export-", ".tmp"
_EXTENSIONS = frozenset(FORMAT_EXTENSIONS.values())
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# link() fails with these where the file system or the two places forbid a hard link: copy instead.
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}

SKIP_NO_FILE = "no stored file"
SKIP_MISSING = "file missing"
SKIP_OUTSIDE = "a link out of the run's images folder"
SKIP_NOT_REGULAR = "not a regular file"
SKIP_BAD_CLASS = "class is no wnid"
SKIP_SAME_FILE = "same file as an image exported already"

EXPLAIN_COMMAND = "python -m explain metrics --run {run}{raw}"
MANIFEST_COLUMNS = ("file", "image", "true_wnid", "true_name", "collected_wnid", "relabelled", "url", "search_term",
                    "rank", "engine", "tags", "notes", "sha256", "width", "height", "format")


class ExportError(WildLensError, ValueError):
    """A run cannot be exported as asked (a destination that is not empty, nothing to export). ``page_text``: the
    message as a page says it, whose folder box is no option ('The folder DIR is not empty ...' where the command
    line says '--out DIR is not empty ...'); the message itself elsewhere."""

    def __init__(self, message: str, page_text: str | None = None):
        super().__init__(message)
        self.page_text = message if page_text is None else page_text


def _out_error(out: Path, rest: str) -> ExportError:
    """An :class:`ExportError` about the destination folder ``out``: '--out DIR<rest>' on the command line, 'The
    folder DIR<rest>' on a page."""
    # printable: the folder is the user's text; a newline in its name would end the one line there and
    # lose the reason (hostile check, 2026-12-07), an escape sequence would reach the terminal.
    return ExportError(f"--out {printable(out)}{rest}", f"The folder {printable(out)}{rest}")


@dataclass
class ExportSummary:
    """What :func:`export_run` wrote and what it left out."""

    destination: Path  # DIR: the exported dataset
    format: str
    view: str  # 'curated' or 'raw'
    images: int  # images exported
    classes: int  # classes they fall in
    linked: int  # hard links to the run's files (--link)
    copied: int  # plain copies
    cloned: int = 0  # copy-on-write clones (a file system that makes them: no second copy on disk)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> images skipped for it
    skipped_images: list[tuple[str, str]] = field(default_factory=list)  # (the run's image, reason)
    relabelled: int = 0  # images of the set whose class the curation changed (curated view)
    excluded: int = 0  # usable images the curation left out (curated view)
    models: list[str] = field(default_factory=list)  # models whose predictions are in (fiftyone)
    explained: bool = False  # relation, severity and error type are in (fiftyone)
    notes: list[str] = field(default_factory=list)  # one line each: what the user should know

    @property
    def change(self) -> str:
        """'4 relabelled, 3 excluded', or 'no change'."""
        parts = [f"{self.relabelled} relabelled" if self.relabelled else "",
                 f"{self.excluded} excluded" if self.excluded else ""]
        return ", ".join(p for p in parts if p) or "no change"

    def describe_view(self) -> str:
        if self.view == RAW:
            return "raw view: the run as collected, without its curation"
        return f"curated view: {self.change} (the run's curation log applied; --raw exports the run as collected)"

    def describe(self) -> list[str]:
        """The lines a command prints: the view, what was written, what was skipped, the notes."""
        where = (f"{self.destination}/<wnid>/<file> and {MANIFEST_FILE}" if self.format == IMAGEFOLDER
                 else f"{self.destination}/{DATA_DIR}/ and {LABELS_FILE}")
        lines = [self.describe_view(),
                 f"exported {self.images} images of {self.classes} classes as {self.format}: {where}"]
        if self.linked:
            lines.append(f"{self.linked} hard-linked: these ARE the run's stored files, so editing one in place "
                         "changes the run's copy too; edit copies (an export without --link writes copies)"
                         + (f"; {self.copied + self.cloned} copied (no hard link possible there)"
                            if self.copied + self.cloned else ""))
        elif self.cloned:
            lines.append(f"{self.cloned} copy-on-write clones (no second copy on disk until one is edited)"
                         + (f", {self.copied} copied" if self.copied else ""))
        if self.skipped:
            total = sum(self.skipped.values())
            lines.append(f"skipped {total} image{'s' * (total != 1)}: "
                         + ", ".join(f"{n} {why}" for why, n in self.skipped.items()))
        return lines + [f"note: {note}" for note in self.notes]


# --------------------------------------------------------------------------- checks
_TEMP_EXTRA = len(f".{TEMP_PREFIX}{'0' * 8}{TEMP_SUFFIX}")  # bytes the hidden folder's name adds to DIR's


def _check_name_length(out: Path) -> None:
    """Refuse a last name too long for the hidden folder built beside (or inside) DIR, before anything
    is made. Why: a 250-byte name passed every check, the export made DIR's parents and then failed
    at the hidden name ("File name too long"), leaving the parents behind (hostile check, 2026-12-07)."""
    # os.path.isdir: False on any OSError (Path.is_dir raised on a too-long or unsearchable component:
    # those reach check_destination's lstat and its one-line message).
    folder = next((p for p in (out, *out.parents) if os.path.isdir(p)), None)
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX") if folder is not None else 255
    except (OSError, ValueError):
        limit = 255
    # At most 255 bytes, Linux's limit for a name: vfat and exFAT report 1530 (255 UTF-16 units times
    # their widest charset) and a filesystem may report none (-1 or 0).
    limit = 255 if limit <= 0 else min(limit, 255)
    size = len(os.fsencode(out.name))
    if size + _TEMP_EXTRA > limit:
        raise _out_error(out, f": its last name is {size} bytes, and an export is built under a hidden name "
                              f"{_TEMP_EXTRA} bytes longer, over this filesystem's {limit}: give a name of at "
                              f"most {limit - _TEMP_EXTRA} bytes.")


def check_destination(out: Path | str, run: Run | None = None) -> Path:
    """DIR as a path, or ExportError (one line) when it may not receive an export: inside the run
    store's runs folder (the default store's, and the run's own), a link, not a folder, or a folder
    with anything in it. Nothing is created or changed."""
    from core.serving import check_export_destination

    if "\0" in str(out):  # (a NUL pasted into the page's box reached os.lstat: ValueError, a page exception)
        raise _out_error(out, " holds a NUL character; give the folder's path.")
    try:
        out = expand_user(out)
    except UserFileError:  # '~nosuchuser/x' (Python's RuntimeError was a traceback; hostile check, 2026-12-07)
        raise _out_error(out, f": {no_home_reason(out)}") from None
    check_export_destination(out)  # WILDLENS_EXPORT_ROOT: no export outside it (none on a shared dashboard without it)
    where = out.resolve()
    runs_folders = {RunStore().runs_dir.resolve()}
    if run is not None:
        runs_folders.add(Path(run.path).resolve().parent)
    for runs in runs_folders:
        if where == runs or runs in where.parents:
            raise _out_error(out, f": that is inside the run store's runs folder ({runs}), which holds "
                              "WildLens's runs only; give a folder outside it.")
    if out.name == "..":  # Path keeps '..' as a name: 'DIR/x/..' was built as 'x/.../.x..' and failed at the rename
        raise _out_error(out, " ends in '..': give the folder by its own name.")
    _check_name_length(out)
    try:
        info = os.lstat(out)
    except FileNotFoundError:
        return out
    except NotADirectoryError:  # a file on the way: named (it read "cannot be checked (Not a directory)")
        above = next((p for p in out.parents if os.path.lexists(p) and not os.path.isdir(p)), None)
        what = ((broken_link_reason(above) or f"{above} is not a folder") if above is not None
                else "a part of it is not a folder")
        raise _out_error(out, f" cannot be made: {printable(what)}; fix or move it, or give another --out.") from None
    except OSError as exc:
        raise _out_error(out, f" cannot be checked ({exc.strerror or exc}); give a folder you can "
                          "read.") from None
    if stat.S_ISLNK(info.st_mode):
        raise _out_error(out, " is a symbolic link; give the folder itself (missing or empty).")
    if not stat.S_ISDIR(info.st_mode):
        raise _out_error(out, f" exists and is not a folder; give a new or empty folder (nothing there is "
                          "overwritten).")
    try:
        names = os.listdir(out)
    except OSError as exc:
        raise _out_error(out, f" cannot be read ({exc.strerror or exc}); give a new or empty folder.") from None
    entries = len(names)
    leftovers = [n for n in names if n.startswith(f".{out.name}{TEMP_PREFIX}") and n.endswith(TEMP_SUFFIX)]
    if leftovers and len(leftovers) == entries:  # (a hostile campaign: "not empty (1 entry)" named nothing)
        raise _out_error(out, f" holds only what a killed export left ({printable(leftovers[0])}"
                          f"{' and more' if entries > 1 else ''}); remove it and export again (an export never "
                          "deletes anything, not even its own leftovers).")
    if entries:
        raise _out_error(out, f" is not empty ({entries} entr{'ies' if entries != 1 else 'y'}); give a new or "
                          "empty folder: an export never overwrites or deletes anything.")
    return out


def _check_choice(fmt: str, view: str) -> None:
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {str(fmt)[:20]!r}; one of {', '.join(FORMATS)}.")
    if view not in VIEWS:
        raise ExportError(f"unknown view {str(view)[:20]!r}; one of {', '.join(VIEWS)}.")


# --------------------------------------------------------------------------- the set
@dataclass
class _Image:
    """One image of the set: its manifest row, its class in the view, and its curation."""

    row: dict
    truth: str
    relabelled: bool
    tags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _image_set(run: Run, view: str):
    """(the set's images in class then file order, the usable images the curation excluded, the
    curation: None in the raw view)."""
    if not run.manifest_path.exists():
        raise ExportError(f"run {run.run_id} has no images (no manifest: its predictions were uploaded, or nothing "
                          "was collected yet); collect images with: python -m crawl fetch/import --run "
                          f"{run.run_id}")
    usable = run.usable_images()
    curation = None
    if view == CURATED:
        from core.curation import read_curation

        curation = read_curation(run)
    notes_of: dict[str, list[str]] = {}
    if curation is not None:
        for entry in curation.entries:  # the notes of the entries in effect, per image
            if entry.note and entry.action != "undo" and entry.seq not in curation.undone:
                for image in entry.images:
                    notes_of.setdefault(image, []).append(entry.note)
    images, excluded = [], 0
    for row in usable.to_dict("records"):
        file = row.get("file")
        name = None if file is None or pd.isna(file) else str(file)
        collected = row.get("wnid")
        collected = None if collected is None or pd.isna(collected) else str(collected)
        truth, relabelled, tags, notes = collected, False, (), ()
        if curation is not None and name is not None:
            if name in curation.excluded:
                excluded += 1
                continue
            new = curation.relabels.get(name)
            if new is not None and new != collected:
                truth, relabelled = new, True
            tags = tuple(sorted(curation.tags.get(name, ())))
            notes = tuple(dict.fromkeys(notes_of.get(name, ())))
        images.append(_Image(row, truth or "", relabelled, tags, notes))
    images.sort(key=lambda i: (i.truth, str(i.row.get("file") or "")))
    return images, excluded, curation


def _output_name(row: dict) -> str:
    """'<sha256[:16]>.<ext>': the image's stored name, rebuilt from its hash and a known image
    extension, so no text of the manifest (which a person may edit) becomes a file name."""
    file = "" if row.get("file") is None or pd.isna(row.get("file")) else str(row["file"])
    sha = row.get("sha256")
    digest = str(sha)[:16] if isinstance(sha, str) and _SHA256_RE.match(sha) else \
        hashlib.sha256(file.encode("utf-8")).hexdigest()[:16]
    extension = Path(file).suffix.lower().lstrip(".")
    return f"{digest}.{extension}" if extension in _EXTENSIONS else digest


# --------------------------------------------------------------------------- files
class _Skip(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _source(run: Run, row: dict) -> Path:
    """The regular file of a manifest row inside the run's images folder, or _Skip(reason)."""
    file = row.get("file")
    if file is None or pd.isna(file):
        raise _Skip(SKIP_NO_FILE)
    try:
        path = run.image_path(str(file))  # resolved: a link leading out of images/ is refused here
    except (StoreError, RuntimeError, OSError, ValueError):  # RuntimeError: a link loop
        raise _Skip(SKIP_OUTSIDE) from None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise _Skip(SKIP_MISSING) from None
    except OSError as exc:
        raise _Skip(f"unreadable ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise _Skip(SKIP_NOT_REGULAR)
    return path


_FICLONE = 0x40049409  # Linux's ioctl that makes target a copy-on-write clone of source (btrfs, XFS, ...)


def _copy(source: Path, target: Path) -> str:
    """Copy a regular file, opened without following a link or waiting on a FIFO (a file swapped
    after the check is refused, not read): 'cloned' where the file system makes a copy-on-write
    clone (no second copy on disk, yet writing one never changes the other), else 'copied'."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _Skip(SKIP_MISSING) from None
    except OSError:  # ELOOP: a link put in its place
        raise _Skip(SKIP_OUTSIDE) from None
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise _Skip(SKIP_NOT_REGULAR)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(out, "wb") as dst:
            try:
                import fcntl

                fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
                return "cloned"
            except (ImportError, OSError):  # no such file system (ext4, tmpfs): a plain copy
                pass
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
    return "copied"


def _place(source: Path, target: Path, link: bool = False) -> str:
    """Put the run's file ``source`` at ``target``: 'cloned' or 'copied' (:func:`_copy`), or with
    ``link`` 'linked' (a hard link: the same file as the run's, so an edit of one is an edit of the
    other; a file system without hard links copies)."""
    if not link:
        return _copy(source, target)
    try:
        # follow_symlinks=False: a link swapped in after the check is linked as a link, never followed.
        os.link(source, target, follow_symlinks=False)
        return "linked"
    except FileNotFoundError:
        raise _Skip(SKIP_MISSING) from None
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    return _copy(source, target)


# --------------------------------------------------------------------------- predictions
def _text(value):
    return None if value is None or pd.isna(value) else str(value)


def _number(value):
    """A stored number for JSON: null when missing or not finite (a hand-edited part's inf: JSON has no
    infinity, and json.dumps refused the whole export with a traceback; hostile check, 2026-12-07)."""
    if value is None or pd.isna(value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _predictions(run: Run, images: set[str]) -> tuple[list[str], dict[str, dict[str, dict]]]:
    """(model ids in the run's order, image -> model -> that model's prediction row)."""
    if not run.predictions_dir.exists():
        return [], {}
    df = run.read_predictions()
    if df.empty:
        return [], {}
    df = df[df["image"].isin(images)]
    order = list(dict.fromkeys([*run.info.models, *df["model"].dropna().astype(str)]))
    present = set(df["model"].dropna().astype(str))
    by_image: dict[str, dict[str, dict]] = {}
    for row in df.to_dict("records"):
        by_image.setdefault(str(row["image"]), {})[str(row["model"])] = row
    return [m for m in order if m in present], by_image


def _explained(run: Run, view: str, curation_active: bool) -> dict[tuple[str, str], tuple] | None:
    """(model, image) -> (relation, severity, error_type) from explain's stored explanations of the
    view, or None when they are missing or stale. A curated view that the curation does not change
    is the raw view: its explanations are the raw ones (explain stores those when the run has no log)."""
    try:
        rows = read_explained(run, view)
        if rows is None and view == CURATED and not curation_active:
            rows = read_explained(run, RAW)
    except WildLensError:  # a damaged curation log or table: go without, as when stale
        return None
    if rows is None:
        return None
    severity = rows["severity"].astype("Int64")
    return {(str(m), str(i)): (_text(r), None if pd.isna(s) else int(s), _text(e))
            for m, i, r, s, e in zip(rows["model"], rows["image"], rows["relation"], severity, rows["error_type"])}


def _model_attributes(key: str, prediction: dict, explained: dict | None, image: str, model: str,
                      label_space: str) -> dict:
    from core.names import class_name

    attrs = {}
    top = [_text(prediction.get("pred_wnid"))] + [_text(prediction.get(f"pred_wnid_{k}")) for k in range(2, TOP_K + 1)]
    probs = [_number(prediction.get(f"prob_{k}")) for k in range(1, TOP_K + 1)]
    attrs[model_attribute(key, "model")] = model
    attrs[model_attribute(key, "label")] = top[0]
    attrs[model_attribute(key, "name")] = None if top[0] is None else str(class_name(top[0], label_space))
    attrs[model_attribute(key, "confidence")] = probs[0]
    filled = [w for w in top if w is not None]
    if len(filled) > 1:  # a top-5 beyond the top-1
        attrs[model_attribute(key, "top5")] = filled
        attrs[model_attribute(key, "top5_confidence")] = probs[:len(filled)]
    attrs[model_attribute(key, "label_space")] = _text(prediction.get("label_space"))
    status = _text(prediction.get("status"))
    if status is not None and status != "ok":
        attrs[model_attribute(key, "status")] = status
        attrs[model_attribute(key, "reason")] = _text(prediction.get("reason"))
    if explained is not None:
        relation, severity, error_type = explained.get((model, image), (None, None, None))
        attrs[model_attribute(key, "relation")] = relation
        attrs[model_attribute(key, "severity")] = severity
        attrs[model_attribute(key, "error_type")] = error_type
    return attrs


# --------------------------------------------------------------------------- writing
def _manifest_row(image: _Image, exported: str, label_space: str) -> dict:
    from core.names import class_name

    row = image.row
    return {"file": exported, "image": _text(row.get("file")), "true_wnid": image.truth,
            "true_name": str(class_name(image.truth, label_space)), "collected_wnid": _text(row.get("wnid")),
            "relabelled": image.relabelled, "url": _text(row.get("url")), "search_term": _text(row.get("search_term")),
            "rank": row.get("rank"), "engine": _text(row.get("source")), "tags": "; ".join(image.tags),
            "notes": " | ".join(image.notes), "sha256": _text(row.get("sha256")), "width": row.get("width"),
            "height": row.get("height"), "format": _text(row.get("format"))}


def _manifest_bytes(rows: list[dict]) -> bytes:
    from core.csvsafe import to_csv_bytes  # formula-like cells (a URL or tag starting '=') get a quote

    df = pd.DataFrame(rows, columns=list(MANIFEST_COLUMNS))
    for column in ("rank", "width", "height"):
        df[column] = df[column].astype("Int64")
    df["relabelled"] = df["relabelled"].astype("boolean")
    return to_csv_bytes(df)


def _sample_attributes(image: _Image, label_space: str) -> dict:
    from core.names import class_name

    row = image.row
    rank = row.get("rank")
    return {CLASS_NAME_ATTR: str(class_name(image.truth, label_space)), IMAGE_ATTR: _text(row.get("file")),
            "collected_wnid": _text(row.get("wnid")), "relabelled": image.relabelled, "url": _text(row.get("url")),
            "search_term": _text(row.get("search_term")), "rank": None if rank is None or pd.isna(rank) else int(rank),
            "engine": _text(row.get("source")), "curation_tags": list(image.tags)}


def _labels_bytes(labels: dict) -> bytes:
    # classes null: the targets hold the label strings themselves (the format's documented choice
    # without a class list); allow_nan=False: NaN is no JSON (every NA was made null above).
    return json.dumps({"classes": None, "labels": labels}, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8") + b"\n"


def export_run(run: Run, out: Path | str, fmt: str = IMAGEFOLDER, *, view: str = CURATED, link: bool = False,
               progress=None) -> ExportSummary:
    """Export ``run``'s image set (``view``: 'curated' or 'raw') to the new or empty folder ``out``
    as ``fmt`` ('imagefolder' or 'fiftyone'); see the module docstring. Returns where it wrote and
    what it skipped (:class:`ExportSummary`; ``.describe()`` gives the lines to show). Raises
    ExportError (one line) before writing anything when ``out`` may not receive an export or the
    set is empty; any other failure removes what this call wrote and leaves ``out`` as it was.
    ``progress``: a core.progress callback (stage 'export', one unit per image). ``link``: hard
    links to the run's files instead of clones or copies (``--link``; see the module docstring)."""
    _check_choice(fmt, view)
    out = check_destination(out, run)
    label_space = run.info.label_space
    with ExitStack() as stack:
        try:  # the run stays in place while it is read (a delete is refused meanwhile)
            stack.enter_context(run_presence_lock(run.path, f"Run {run.run_id} is gone; nothing was exported."))
        except OSError:  # a read-only run folder: no lock file can be made there, and no delete can happen
            pass
        images, excluded, curation = _image_set(run, view)
        if not images:
            why = (f"the curation excludes all {excluded}; --raw exports the run as collected" if excluded
                   else "it has no accepted image that is not excluded")
            raise ExportError(f"nothing to export from run {run.run_id}: {why}.")
        summary = ExportSummary(out, fmt, view, 0, 0, 0, 0, excluded=excluded,
                                relabelled=sum(i.relabelled for i in images))
        models, predictions, explained, keys = [], {}, None, {}
        if fmt == FIFTYONE:
            names = {str(i.row["file"]) for i in images if _text(i.row.get("file")) is not None}
            models, predictions = _predictions(run, names)
            keys = model_keys(models)
            if models:
                explained = _explained(run, view, curation is not None and curation.active)
                if explained is None:
                    command = EXPLAIN_COMMAND.format(run=run.run_id, raw=" --raw" if view == RAW else "")
                    summary.notes.append("relation, severity and error type are not in the export: the run's stored "
                                         "explanations are missing or older than its predictions or curation; add "
                                         f"them with: {command} (then export again; they are made for runs of up "
                                         f"to {EXPLAINED_IN_MEMORY:,} stored predictions)")
            else:
                summary.notes.append(f"run {run.run_id} has no predictions of these images: the export holds the "
                                     "ground truth only; add them with: python -m classify --run " + run.run_id)
        summary.models, summary.explained = models, explained is not None

        try:
            _build(run, images, out, fmt, summary, label_space, models, predictions, explained, keys, progress,
                   link)
        except OSError as exc:  # a folder that cannot be written, a full disk: one line, the destination as it was
            raise ExportError(f"cannot write the export to {printable(out)}: {exc.strerror or exc}; check that "
                              f"{printable(out.parent)} is writable and has room (nothing was left at --out).") from None
    return summary


def _build(run: Run, images: list[_Image], out: Path, fmt: str, summary: ExportSummary, label_space: str,
           models: list[str], predictions: dict, explained: dict | None, keys: dict, progress, link: bool) -> None:
    """Write the export into a hidden folder and put it at ``out`` at the end; on any failure
    remove that hidden folder (this call's own) and leave ``out`` as it was. A missing ``out``:
    the hidden folder is its sibling, renamed to it in one step. An empty folder the user made:
    the hidden folder is inside it and its entries move in at the end, the labels or manifest
    last, so the folder keeps its owner, mode and inode (a shell inside it stays there), and an
    export is complete exactly when its labels.json / export_manifest.csv is there."""
    if out.is_dir():
        _build_into(run, images, out, fmt, summary, label_space, models, predictions, explained, keys, progress, link)
        return
    made = _make_parents(out.parent)
    temp = out.parent / f".{out.name}{TEMP_PREFIX}{secrets.token_hex(4)}{TEMP_SUFFIX}"
    try:
        os.mkdir(temp)
    except BaseException:
        _remove_made(made)
        raise
    try:
        _write(run, images, temp, fmt, summary, label_space, models, predictions, explained, keys, progress, link)
        _check_exported(run, images, summary)
        try:
            # One step: rename() puts the folder at DIR, replacing DIR only when it is an empty folder.
            os.rename(temp, out)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise _out_error(out, f" was changed while exporting (it is no longer missing or an empty "
                                  "folder); nothing was written there: run the export again with an empty "
                                  "folder.") from None
            raise
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)  # this call's own folder, never the user's
        _remove_made(made)
        raise


def _make_parents(folder: Path) -> list[Path]:
    """Make ``folder`` and the folders above it that are missing, one level at a time from the
    outermost; returns those this call made (its own mkdir succeeded), outermost first, and removes
    them again if making the next one fails. A level that exists, or that someone else makes
    meanwhile (EEXIST), is not this call's. Why one at a time: a walk of what was missing followed by
    mkdir(parents=True) counted a folder made meanwhile, or reached through '..' ('new/../x': the
    user's empty x), as its own, and a failed export removed it (review, 2026-12-07)."""
    levels, at = [], folder
    while at != at.parent:
        levels.append(at)
        at = at.parent
    made: list[Path] = []
    try:
        for level in reversed(levels):
            try:
                os.mkdir(level)
            except FileExistsError:
                if not os.path.isdir(level):
                    # Named for what it is: a dangling link was reported as the OS's bare "Not a directory"
                    # (hostile check, 2026-12-07).
                    what = broken_link_reason(level) or f"{level} is not a folder"
                    raise ExportError(f"--out cannot be made: {printable(what)}; fix or move it, or give another "
                                      "--out (nothing was left at --out).") from None
                continue
            made.append(level)
    except BaseException:
        _remove_made(made)
        raise
    return made


def _remove_made(made: list[Path]) -> None:
    """Remove the folders :func:`_make_parents` made, deepest first, each only while it is empty
    (rmdir): a failed export leaves the destination's parents as they were. Why: a failure after the
    checks (nothing to export, a full disk, Ctrl-C) left the folders it had made (hostile check,
    2026-12-07). One that holds anything, someone else's since, is kept with those above it."""
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            return


def _check_exported(run: Run, images: list[_Image], summary: ExportSummary) -> None:
    """ExportError when every image of the set was skipped (nothing is put at DIR)."""
    if not summary.images:
        raise ExportError(f"nothing exported from run {run.run_id}: all {len(images)} images were skipped ("
                          + ", ".join(f"{n} {why}" for why, n in summary.skipped.items())
                          + "); check the run's images folder.")


def move_no_replace(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target`` unless ``target`` exists (FileExistsError, nothing changed). Why: os.rename
    replaces a file silently, so a file the user put in the folder between the export's emptiness check and its
    move would have been replaced, then removed by the rollback (a hostile campaign, found by reading).
    Linux's renameat2(RENAME_NOREPLACE) checks and renames in one step; where the kernel or the file system lacks
    it, a file is hard-linked (which never replaces) and its old name removed, and a folder is checked, then
    renamed (a rename never replaces a folder that holds anything)."""
    if _renameat2_noreplace(source, target):
        return
    if source.is_dir() and not source.is_symlink():
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", str(target))
        os.rename(source, target)
        return
    os.link(source, target, follow_symlinks=False)  # EEXIST where target exists
    os.unlink(source)


def _renameat2_noreplace(source: Path, target: Path) -> bool:
    """True once renamed by renameat2(..., RENAME_NOREPLACE); False where it is not there (not Linux, an old
    kernel or C library, a file system that refuses the flag); FileExistsError where the target exists."""
    import ctypes

    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    at_fdcwd, rename_noreplace = -100, 1
    if renameat2(at_fdcwd, os.fsencode(source), at_fdcwd, os.fsencode(target), rename_noreplace) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EINVAL)):
        return False
    if code == errno.EEXIST:
        raise FileExistsError(code, os.strerror(code), str(target))
    raise OSError(code, os.strerror(code), str(target))


@functools.cache
def _renameat2():
    """The C library's renameat2, looked up once per process; None where there is none."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None


def _build_into(run: Run, images: list[_Image], out: Path, fmt: str, summary: ExportSummary, label_space: str,
                models: list[str], predictions: dict, explained: dict | None, keys: dict, progress,
                link: bool) -> None:
    """:func:`_build` into the existing empty folder ``out``."""
    temp = out / f".{out.name}{TEMP_PREFIX}{secrets.token_hex(4)}{TEMP_SUFFIX}"  # hidden, the sibling's name
    os.mkdir(temp)
    moved: list[tuple[list, list]] = []  # per entry moved in: its files' (path, (device, inode)), its folders
    try:
        _write(run, images, temp, fmt, summary, label_space, models, predictions, explained, keys, progress, link)
        _check_exported(run, images, summary)
        last = LABELS_FILE if fmt == FIFTYONE else MANIFEST_FILE
        entries = sorted(os.listdir(temp), key=lambda name: name == last)  # the labels or manifest last
        if set(os.listdir(out)) - {temp.name}:
            raise _out_error(out, f" was changed while exporting (it is no longer empty); nothing was written "
                              "there: run the export again with an empty folder.")
        for name in entries:
            written = _written(temp / name, out / name)
            try:
                move_no_replace(temp / name, out / name)
            except FileExistsError:
                raise _out_error(out, f" was changed while exporting ({printable(name)} appeared there); "
                                  "nothing of yours was replaced: run the export again with an empty folder.") from None
            moved.append(written)
        os.rmdir(temp)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)  # this call's own folder, never the user's
        for files, folders in moved:  # what this call moved in, file by file: never anything of the user's
            _remove_written(files, folders)
        raise


def _written(source: Path, target: Path) -> tuple[list, list]:
    """What this export wrote at ``source``, named as it will be at ``target`` once moved: its files with their
    (device, inode), which a rename keeps, and its folders, deepest first. Why not remove the moved folder
    whole on a rollback: a user's file put into it meanwhile went with it (a hostile campaign)."""
    if not source.is_dir() or source.is_symlink():
        info = os.lstat(source)
        return [(target, (info.st_dev, info.st_ino))], []
    files, folders = [], [target]
    for folder, dirs, names in os.walk(source):
        here = target / Path(folder).relative_to(source)
        folders += [here / d for d in dirs]
        for name in names:
            info = os.lstat(Path(folder) / name)
            files.append((here / name, (info.st_dev, info.st_ino)))
    return files, sorted(folders, key=lambda f: len(f.parts), reverse=True)


def _remove_written(files: list, folders: list) -> None:
    """Remove the files :func:`_written` recorded that are still the same files, then the folders left empty."""
    for path, ident in files:
        try:
            info = os.lstat(path)
            if (info.st_dev, info.st_ino) == ident:
                os.unlink(path)
        except OSError:
            pass
    for folder in folders:
        try:
            os.rmdir(folder)  # only an empty one: a folder holding a user's file stays, with it
        except OSError:
            pass


def _write(run: Run, images: list[_Image], temp: Path, fmt: str, summary: ExportSummary, label_space: str,
           models: list[str], predictions: dict, explained: dict | None, keys: dict, progress, link: bool) -> None:
    """Place every image of the set in ``temp`` and write the manifest or labels there."""
    skipped: Counter = Counter()
    manifest_rows, labels, classes, taken = [], {}, set(), set()
    data = temp / DATA_DIR
    if fmt == FIFTYONE:
        data.mkdir()
    total = len(images)
    for done, image in enumerate(images, start=1):
        name = _output_name(image.row)
        image_id = _text(image.row.get("file")) or ""
        try:
            if not is_wnid(image.truth):  # the folder's name: a wnid, never a text from the manifest
                raise _Skip(SKIP_BAD_CLASS)
            source = _source(run, image.row)
            relative = f"{image.truth}/{name}" if fmt == IMAGEFOLDER else f"{DATA_DIR}/{name}"
            uuid = name.split(".")[0]
            if relative in taken or (fmt == FIFTYONE and uuid in labels):
                raise _Skip(SKIP_SAME_FILE)
            target = temp / relative
            target.parent.mkdir(exist_ok=True)
            how = _place(source, target, link)
        except _Skip as skip:
            skipped[skip.reason] += 1
            summary.skipped_images.append((image_id, skip.reason))
            report(progress, "export", done, total, task=fmt)
            continue
        taken.add(relative)
        classes.add(image.truth)
        if how == "linked":
            summary.linked += 1
        elif how == "cloned":
            summary.cloned += 1
        else:
            summary.copied += 1
        if fmt == IMAGEFOLDER:
            manifest_rows.append(_manifest_row(image, relative, label_space))
        else:
            attributes = _sample_attributes(image, label_space)
            for model in models:
                prediction = predictions.get(image_id, {}).get(model)
                if prediction is not None:
                    attributes.update(_model_attributes(keys[model], prediction, explained, image_id, model,
                                                        label_space))
            labels[uuid] = {"label": image.truth, "attributes": attributes}
        report(progress, "export", done, total, task=fmt)
    summary.images, summary.classes = summary.linked + summary.cloned + summary.copied, len(classes)
    summary.skipped = dict(skipped.most_common())
    if not summary.images:
        return
    if fmt == IMAGEFOLDER:
        write_bytes_atomic(temp / MANIFEST_FILE, _manifest_bytes(manifest_rows))
    else:
        write_bytes_atomic(temp / LABELS_FILE, _labels_bytes(labels))
