"""Import a local folder of images: the offline way to bring images into WildLens.

Layout: ``SRC/<class>/<images>`` where ``<class>`` is a wnid (``n02123045``), a WordNet synset
name (``tabby.n.01``) or an ImageNet class name (``tabby``, ``tiger cat``, ``Egyptian_cat``;
case, spaces, '_' and '-' do not matter). A name must match a lemma of exactly one class of the
label space; otherwise the import stops before copying anything and lists the candidates
(e.g. 'crane' is a bird and a machine in ImageNet-1k: name the folder by its wnid).

Images may sit in sub-folders of a class folder. Hidden files and folders (starting with '.')
are skipped. Every file is read (never written), validated like a crawled image, and accepted
files are copied under a name made of their hash, so hostile or exotic file names never reach
the file system; the original relative path is kept in the manifest as data
(``original_name``). Importing the same folder again adds nothing.
"""
from __future__ import annotations

import difflib
import hashlib
import functools
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from core.labels import DEFAULT_LABEL_SPACE, QueryError, get_label_space, resolve_noun_synsets
from core.progress import ProgressCallback, report
from core.runstore import Run, now_iso
from core.wordnet import is_wnid, wnid_of

from .config import ValidationConfig
from .store import (CollectError, Collector, as_destination, check_manifest, check_writable, exclusive, leftover_notes,
                    summarise, sweep_leftovers)
from .validate import TOO_LARGE, Rejected, sha256_hex, validate_image

_SYNSET_NAME_RE = re.compile(r"^.+\.n\.\d{2}$")


class FolderImportError(CollectError):
    """A folder that cannot be imported as asked; the message lists what to fix."""


@dataclass
class ImportSummary:
    destination: str
    folders: dict[str, str]  # class folder name -> wnid
    per_class: pd.DataFrame  # see crawl.store.summarise
    files_seen: int = 0
    already_imported: int = 0
    new_rows: int = 0
    new_accepted: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


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


def resolve_class_folder(name: str, label_space: str = DEFAULT_LABEL_SPACE) -> str:
    """The wnid a class folder's name stands for, exactly, or FolderImportError saying why not."""
    space = get_label_space(label_space)
    text = name.strip()
    if is_wnid(text):
        if text not in space:
            raise FolderImportError(f"folder {name!r}: {text} is not a class of {label_space}"
                               " (choose a larger label space, e.g. --label-space imagenet-21k).")
        return text
    if _SYNSET_NAME_RE.match(text):
        try:
            synsets = resolve_noun_synsets(text)
        except QueryError as exc:
            raise FolderImportError(f"folder {name!r}: {exc}") from None
        wnid = wnid_of(synsets[0])
        if wnid not in space:
            raise FolderImportError(f"folder {name!r}: {text} ({wnid}) is not a class of {label_space}.")
        return wnid
    index = _lemma_index(label_space)
    key = _normalise(text)
    matches = index.get(key, ())
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        options = "; ".join(f"{w} ({space.lemmas(w)}: {space.definition(w)})" for w in matches)
        raise FolderImportError(f"folder {name!r} is ambiguous in {label_space}: {options}. Rename the folder to the wnid.")
    close = difflib.get_close_matches(key, list(index), n=5, cutoff=0.8)
    hint = ("Did you mean: " + "; ".join(f"{c} -> {', '.join(index[c])}" for c in close) + "?") if close else \
        "Name the folder by its wnid (e.g. n02123045) or an ImageNet class name ('python -m explain hyponyms ...' lists them)."
    raise FolderImportError(f"folder {name!r} is not a class name of {label_space}. {hint}")


def _visible(name: str) -> bool:
    return not name.startswith(".")


def _class_files(folder: Path) -> list[Path]:
    """Files under a class folder, sorted, hidden entries skipped; symlinked folders are not
    followed (a link loop or a link to / must not send the import around the disk)."""
    files = []
    for current, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if _visible(d))
        files += [Path(current) / n for n in sorted(names) if _visible(n)]
    return files


def plan_import(src: Path | str, label_space: str = DEFAULT_LABEL_SPACE) -> tuple[dict[str, str], list[str]]:
    """Map every class folder of ``src`` to a wnid; raise FolderImportError listing every folder
    that cannot be mapped (nothing is imported then). Returns (folder -> wnid, notes)."""
    src = Path(src).expanduser()
    if not src.is_dir():
        raise FolderImportError(f"{src} is not a folder. Expected SRC/<wnid or class name>/<images>.")
    folders, errors, notes = {}, [], []
    loose = [p.name for p in src.iterdir() if p.is_file() and _visible(p.name)]
    if loose:
        notes.append(f"{len(loose)} file(s) directly in {src} skipped (put images in one folder per class)")
    for entry in sorted(p for p in src.iterdir() if p.is_dir() and _visible(p.name)):
        try:
            folders[entry.name] = resolve_class_folder(entry.name, label_space)
        except FolderImportError as exc:
            errors.append(str(exc))
    if errors:
        raise FolderImportError("Cannot import " + str(src) + ":\n  " + "\n  ".join(errors))
    if not folders:
        raise FolderImportError(f"{src} has no class folders. Expected SRC/<wnid or class name>/<images>.")
    by_wnid: dict[str, list[str]] = {}
    for folder, wnid in folders.items():
        by_wnid.setdefault(wnid, []).append(folder)
    for wnid, names in by_wnid.items():
        if len(names) > 1:
            notes.append(f"folders {', '.join(names)} all mean {wnid}; imported together")
    return folders, notes


def import_folder(src: Path | str, run_or_dir, label_space: str | None = None,
                  progress: ProgressCallback | None = None,
                  validation: ValidationConfig = ValidationConfig()) -> ImportSummary:
    """Import ``src`` (SRC/<class>/<images>) into a Run or a folder (DIR/<wnid>/ and
    DIR/manifest.csv). Same validation and de-duplication as a crawl; SRC is only read."""
    started = time.monotonic()
    src = Path(src).expanduser().resolve()
    label_space = label_space or (run_or_dir.info.label_space if isinstance(run_or_dir, Run) else DEFAULT_LABEL_SPACE)
    dest = as_destination(run_or_dir)
    _check_apart(src, dest)
    folders, notes = plan_import(src, label_space)
    wnids = list(dict.fromkeys(folders.values()))
    check_writable(dest, wnids)
    check_manifest(dest)
    work = [(wnid, path) for folder, wnid in folders.items() for path in _class_files(src / folder)]
    summary = ImportSummary(dest.describe(), folders, pd.DataFrame(), notes=notes, files_seen=len(work))
    with exclusive(dest):
        collector = Collector(dest, validation)
        summary.notes += leftover_notes(*sweep_leftovers(dest, collector.manifest(), wnids), "import")
        try:
            for done, (wnid, path) in enumerate(work, start=1):
                original = path.relative_to(src).as_posix()
                _import_one(collector, wnid, path, original, validation, summary)
                report(progress, "import", done, len(work), dest.describe(), f"{original[-50:]}")
        finally:
            collector.save()
    summary.per_class = summarise(collector.manifest(), wnids)
    new = collector.new_rows
    summary.new_rows = len(new)
    summary.new_accepted = sum(1 for r in new if r["status"] == "accepted")
    summary.seconds = time.monotonic() - started
    if isinstance(run_or_dir, Run):
        _update_run_info(run_or_dir, wnids, label_space)
    return summary


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


def _import_one(collector: Collector, wnid: str, path: Path, original: str, validation: ValidationConfig,
                summary: ImportSummary) -> None:
    provenance = {"source": "import", "original_name": original, "fetched_at": now_iso()}
    try:
        size = path.stat().st_size
        if size > validation.max_bytes:  # hashed in chunks, never read whole
            sha, data = _sha256_file(path), None
        else:
            data = path.read_bytes()
            sha = sha256_hex(data)
    except OSError as exc:
        if not collector.has_import(wnid, original, None):
            collector.record(wnid, provenance, rejection=Rejected("unreadable", exc.strerror or type(exc).__name__))
        return
    if collector.has_import(wnid, original, sha):
        summary.already_imported += 1
        return
    provenance["sha256"] = sha
    try:
        if data is None:
            raise Rejected(TOO_LARGE, f"{size} bytes > limit {validation.max_bytes}")
        facts = validate_image(data, validation)
    except Rejected as exc:
        collector.record(wnid, provenance, rejection=exc)
        return
    collector.record(wnid, provenance, facts=facts, data=data)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _update_run_info(run: Run, wnids, label_space: str) -> None:
    info = run.info
    space = get_label_space(label_space)
    merged = sorted(set(info.wnids) | set(wnids), key=lambda w: space.index.get(w, len(space)))
    sources = [s for s in (info.source or "").split("+") if s]
    run.update_info(wnids=merged, source="+".join(sources + ["import"]) if "import" not in sources else info.source,
                    label_space=info.label_space or label_space)
