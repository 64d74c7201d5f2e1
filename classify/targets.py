"""What inference runs on and where its rows go: a run of the store, or a plain folder of images.

Two targets, one sink type:

* :func:`predict_run`: the usable images of a run (accepted, not excluded; :func:`run_tasks`); the
  rows go to the run's ``predictions/`` part files, and the models whose predictions are results
  (``ModelSource.records_results``) are added to run.json's ``models``.
* :func:`predict_folder`: ``DIR/<wnid>/<images>`` (:func:`scan_folder`), for the command line; with
  ``out`` the rows go to part files beside it (``.FILE.parts/``, so the same command resumes) and
  the table is written to ``out`` (CSV or Parquet, :func:`check_output_path`); without, they stay
  in memory. A folder is not a run: it has no run.json, manifest or images folder, only the parts.

What a target resumes is the same model's rows only (:func:`check_stored_models`: the stored rows'
weights digest, label space, class order and family against the model asked for), and ``--out``
replaces only a file WildLens wrote for the same images folder and models, never one inside the
store's runs/ (:func:`check_out_outside_the_store`, :func:`check_out_claim`; ``overwrite`` replaces
any regular file and starts its batches over).

Both hand their tasks to :func:`classify.engine.dispatch.run_inference` with a :class:`PredictionSink`,
which stores each batch as it comes (``core.parts.PredictionParts``, or memory), says what is
already stored, compacts at the end and reads the final table.

Before the first image is decoded, a target that stores its rows (:func:`_writing_parts`) proves
that its folders can be written (:class:`OutputError` otherwise, instead of a PermissionError
after all the inference), takes the parts folder's lock (``core.locking``: a second classify run
on the same run or ``--out`` fails at once with :class:`~core.locking.FolderBusy`), and removes
the temporary files a killed run left there (``PredictionParts.sweep_temporary``, and beside
``--out`` its own atomic-write temporaries), all while holding the lock.

:func:`scan_folder` reads DIR without trusting it, by ``core.folderscan``'s rule (the one crawl
import follows): regular files only (``stat`` after resolving links), never a link out of DIR,
each image once, under the class folder that holds it by its real path (a link into another
class folder, or to DIR or above it, is not followed), every folder at most once (links that
loop), and each entry it does not read is reported: as a task marked failed with its reason where the name is an image's
(a FIFO, a link to ``/dev/zero``, a file over ``core.imageio.MAX_IMAGE_BYTES``), else in
:attr:`FolderScan.skipped` (folders linked from outside DIR or unreadable, other files).

Importing this module does not import PyTorch (the engine, the feature tap and the device are imported
when inference starts): the command line's mistakes that these checks find (a folder that does not
exist, an ``--out`` that cannot be written, a run id that is not there) are one line in ~0.5 s, not
after the ~2 s of CPU that importing PyTorch takes (measured 2026-12-06: 2.7 s for a folder that does
not exist, before).
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import pandas as pd

from core.errors import WildLensError
from core.folderscan import Skip, TreeScan, printable_name
from core.locking import exclusive_lock
from core.parts import PredictionParts, atomic_temp_re
from core.progress import ProgressCallback
from core.runstore import (MODEL_STAMP_COLUMNS, PREDICTION_SCHEMA, Run, StoreError, conform, probe_writable,
                           write_table)
from core.userfile import file_sha256
from core.wordnet import is_wnid

from core.imageio import file_kind, oversize_reason
from core.userfile import broken_link_reason, expand_user

from classify.engine.types import ImageTask, InferenceOptions, InferenceReport
from classify.sinks import OutputError, PredictionSink  # noqa: F401  (OutputError: raised here too)
from classify.models.registry import ModelEntry
from classify.models.registry import get_source

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".jfif", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".ppm",
                            ".pgm", ".pbm"})
OUTPUT_SUFFIXES = (".csv", ".parquet", ".pq")
# The lock file of a parts folder (a run's predictions/ or a folder run's .FILE.parts/): one
# classify run writes there at a time. Not crawl's lock name: classifying a run while a crawl adds
# to it is allowed, as before.
PARTS_LOCK_NAME = ".wildlens-classify.lock"


class FolderError(WildLensError, ValueError):
    """An images folder that is not DIR/<wnid>/<images>; the message says how to fix it."""


class StoredModelError(WildLensError, ValueError):
    """The target holds rows of a model id made by another model (other weights, label space,
    class order or family); resuming would mix the two. The message says how to keep or replace them."""


def _describe_space(space: str, order: str | None) -> str:
    return f"{space} (class order {order})" if order else space


def _stored_difference(stored: pd.DataFrame, entry: ModelEntry, stamp: dict, checkpoint: str | None) -> str | None:
    """How the stored 'ok' rows of ``entry.id`` differ from the model asked for now, as words
    after 'holds MODEL predictions', or None when they are its rows (a value not recorded, NA
    in rows stored before issue 22, is taken as the same, except the weights with a checkpoint)."""
    def known(column: str) -> list[str]:
        return sorted(set(stored[column].dropna().astype(str)))

    now = stamp["weights_sha256"]
    where = f"checkpoint {checkpoint}" if checkpoint else "its own weights"
    digests = known("weights_sha256")
    if now is not None and [d for d in digests if d != now]:
        old = next(d for d in digests if d != now)
        return f"from other weights (sha256 {old[:12]}) than these (sha256 {now[:12]}, {where})"
    if checkpoint and stored["weights_sha256"].isna().any():
        return (f"stored before WildLens recorded the weights they came from, so they cannot be told apart from "
                f"{where}'s (sha256 {(now or '?')[:12]})")
    spaces, orders = known("label_space"), known("class_order")
    if [v for v in spaces if v != entry.label_space] or [v for v in orders if v != entry.class_order]:
        old_space = next((v for v in spaces if v != entry.label_space), spaces[0] if spaces else "?")
        old_order = next((v for v in orders if v != entry.class_order), orders[0] if orders else None)
        return (f"over label space {_describe_space(old_space, old_order)}, not "
                f"{_describe_space(entry.label_space, entry.class_order)}")
    families = [v for v in known("family") if v != entry.family]
    if families:
        return f"as family {families[0]}, not {entry.family}"
    from classify.engine.options import split_model_id

    # MODEL--int8 is the int8 -> fp32 cascade, whose rows say whether fp32 re-checked them; rows without
    # that were stored by int8 alone, before the cascade existed: another model under the same id.
    if split_model_id(entry.id)[1] == "int8" and "int8_rechecked" in stored.columns \
            and stored["int8_rechecked"].isna().any():
        return ("made by int8 alone, before --precision int8 re-checked unsure images in fp32 (their int8_rechecked "
                "is empty; int8 alone is now stored as MODEL--int8-plain)")
    return None


def check_stored_models(parts: PredictionParts, entries: Sequence[ModelEntry], checkpoints: dict[str, str] | None,
                        where: str, fix: Callable[[str], str]) -> None:
    """Refuse, in one line (:class:`StoredModelError`), to resume a model id whose stored 'ok'
    rows were made by another model than ``entries`` asks for: other weights (the rows' sha256,
    ``--checkpoint``), label space or class order (``--label-space``), family (``--family``).
    Those rows would be skipped as 'already stored' and, in a killed run, mixed with the new
    model's under one id. ``where`` names the target ('Run r', '--out FILE'); ``fix(model id)``
    ends the message. Failed rows are not compared: a re-run computes them again."""
    from classify.engine.pipeline import base_entry, model_stamps

    stamps = model_stamps(entries, checkpoints)
    for entry in entries:
        stored = parts.read([entry.id])
        stored = stored[stored["status"] == "ok"]
        if stored.empty:
            continue
        difference = _stored_difference(stored, entry, stamps[entry.id], (checkpoints or {}).get(base_entry(entry).id))
        if difference:
            raise StoredModelError(f"{where} holds {entry.id} predictions {difference}: one model id keeps one "
                                   f"model's rows, and resuming would mix the two. {fix(entry.id)}")


def result_entries(models: str | Iterable[str | ModelEntry], options: InferenceOptions) -> list[ModelEntry]:
    """:func:`classify.engine.dispatch.result_entries`, imported at the first call (it imports PyTorch)."""
    from classify.engine.dispatch import result_entries as entries

    return entries(models, options)


def run_inference(*args, **kwargs) -> InferenceReport:
    """:func:`classify.engine.dispatch.run_inference`, imported when inference starts (PyTorch)."""
    from classify.engine.dispatch import run_inference as run

    return run(*args, **kwargs)


# --------------------------------------------------------------------------- runs
def run_tasks(run: Run) -> list[ImageTask]:
    """The run's usable images (accepted, not excluded) as tasks."""
    tasks = []
    for row in run.usable_images().itertuples(index=False):
        file, wnid = row.file, row.wnid
        if file is None or pd.isna(file):
            continue
        try:
            tasks.append(ImageTask(str(file), str(run.image_path(str(file))), None if pd.isna(wnid) else str(wnid)))
        except StoreError as exc:
            tasks.append(ImageTask(str(file), "", None if pd.isna(wnid) else str(wnid), error=str(exc)))
    return tasks


@contextmanager
def _writing_parts(parts: PredictionParts, busy: str, unwritable: Callable[[object, object], str]) -> Iterator[None]:
    """Hold ``parts``' folder for one classify run: it can be written (else :class:`OutputError`
    with ``unwritable(path, reason)``), no other classify run writes there (else ``FolderBusy``
    with ``busy``), and a killed run's temporary files are gone. A function, not a text to
    ``.format()``: the paths in it may hold braces ('o{x}/p.csv' raised KeyError)."""
    try:
        parts.check_writable()
    except OSError as exc:
        raise OutputError(unwritable(exc.filename or parts.folder, exc.strerror or exc)) from None
    try:
        with exclusive_lock(parts.folder, busy, name=PARTS_LOCK_NAME):
            parts.sweep_temporary()
            yield
    except PermissionError as exc:  # the lock file itself (an existing one, read-only)
        if exc.filename is None or Path(exc.filename).name != PARTS_LOCK_NAME:
            raise
        raise OutputError(unwritable(exc.filename, exc.strerror or exc)) from None


def predict_run(run: Run, models: str | Iterable[str | ModelEntry], options: InferenceOptions | None = None,
                progress: ProgressCallback | None = None) -> InferenceReport:
    """Classify a run's usable images with ``models``; resumable; stores through the run store.
    One classify run per run at a time (:func:`_writing_parts`)."""
    options = options or InferenceOptions()
    entries = result_entries(models, options)  # ids as stored: '<id>--int8' for int8, etc.
    tasks = run_tasks(run)
    parts = run.prediction_parts
    busy = f"Another classify run is writing predictions to run {run.run_id}; wait for it to finish."
    def unwritable(path, reason) -> str:
        return (f"Run {run.run_id}: the folder {path} cannot be created or written ({reason}); give yourself "
                f"write access to {run.path} or classify a copy of the run.")

    def fix(model: str) -> str:
        return (f"To keep both, classify into another run; to replace them, move {parts.model_dir(model)} out of the "
                "run (or delete it) and run again.")

    with _writing_parts(parts, busy, unwritable):
        check_stored_models(parts, entries, options.checkpoints, f"Run {run.run_id}", fix)
        # classify.features: with options.features the features are stored beside the predictions, same
        # pass; the engine is given the tap that captures them.
        tap = None
        if options.features:
            from classify.features import FeatureSink, FeatureTap

            sink, tap = FeatureSink(run, parts), FeatureTap
        else:
            sink = PredictionSink(parts)
        result = run_inference(tasks, entries, sink, sink.already_done(entries), options, progress, tap=tap)
        sink.finish(entries, options.compact)
        if run.info_path.exists():
            info = run.info
            results = [e.id for e in entries if e.id not in info.models and get_source(e).records_results]
            known = list(info.models) + results
            if known != list(info.models):
                run.update_info(models=known)
    return result


def extract_features(run: Run, models: str | Iterable[str | ModelEntry], options: InferenceOptions | None = None,
                     progress: ProgressCallback | None = None) -> InferenceReport:
    """Store the frozen features (and the predictions, same pass) of a run's usable images for
    ``models``; resumable (images with both stored are skipped), one classify run per run."""
    from classify.features import feature_options

    return predict_run(run, models, feature_options(options), progress)



# --------------------------------------------------------------------------- folders
@dataclass
class FolderScan:
    """What :func:`scan_folder` found. ``tasks``: the images, with ``error`` set on entries named
    like images that are not read (the pipeline stores them as failed rows with that reason);
    ``skipped``: every other entry not read, (path relative to DIR, reason)."""

    tasks: list[ImageTask]
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _inspect(path: Path, link: bool, root: Path) -> tuple[Path | None, os.stat_result | None, str | None]:
    """(real path, its stat, None) for an entry that may be read, else (None, None, reason).
    ``link``: the entry is a symbolic link; only then is it resolved (a plain entry's real path
    is its path, since its folder's is already real)."""
    try:
        real = path.resolve(strict=True) if link else path
        info = os.stat(real, follow_symlinks=False)
    except RuntimeError:  # Python < 3.13 reports a link loop this way
        return None, None, "symbolic link loop: not followed"
    except FileNotFoundError:
        return None, None, "broken symbolic link: not followed" if link else "vanished while scanning"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, None, "symbolic link loop: not followed"
        return None, None, f"cannot be inspected ({exc.strerror or exc})"
    if real != root and root not in real.parents:
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a file"
        return None, None, f"symbolic link to {kind} outside the images folder ({real}): not followed"
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return None, None, f"not a regular file ({file_kind(info.st_mode)}): not read"
    return real, info, None


def _skip_reason(skip: Skip) -> str:
    """A core.folderscan Skip in the words of a classify run's failed rows and skipped entries."""
    target = skip.target
    return {
        "loop": "symbolic link loop: not followed",
        "above": f"symbolic link to {target}, the images folder or a folder above it (already scanned: a link loop): "
                 "not followed",
        "seen": f"folder already scanned as {skip.other} (a link loop or a second link): not entered again",
        "class": f"symbolic link into class folder {skip.other} ({target}): its images are classified there, under "
                 "that class; not followed",
        "no-class": f"symbolic link to {target}, inside the images folder but in no class folder: not followed",
        "outside": f"symbolic link to {'a folder' if stat.S_ISDIR(skip.mode) else 'a file'} outside the images folder "
                   f"({target}): not followed",
        "broken": "broken symbolic link: not followed",
        "special": f"not a regular file ({file_kind(skip.mode)}): not read",
        "folder-error": f"folder cannot be read ({skip.error}): its images are not classified",
        "name": f"{skip.error}: not read",  # not UTF-8: core.folderscan.bad_name_reason
    }.get(skip.why, f"cannot be inspected ({skip.error})")


def _listing(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda e: e.name)


def check_images_folder(folder: str | Path) -> Path:
    """``folder`` as given (user expanded) when it is a folder; else FolderError with advice."""
    given = expand_user(folder, "--images")
    if not given.exists():
        raise FolderError(f"Folder {given} does not exist.")
    if not given.is_dir():
        raise FolderError(f"{given} is a file; give a folder holding one sub-folder per class (named by wnid).")
    return given


def scan_folder(folder: str | Path) -> FolderScan:
    """DIR/<wnid>/<images> -> tasks (image id '<wnid>/<relative path>') and the entries not read,
    each with its reason. Reads only regular files inside DIR, by ``core.folderscan``'s rule: links
    are resolved and ``stat``-ed first, links out of DIR, into another class folder or to DIR or
    above it are not followed, each folder is entered once (a link back to a folder already
    scanned is a loop), unreadable folders are reported; hidden entries are ignored, as before. Raises FolderError with advice when DIR is not such a folder."""
    given = check_images_folder(folder)
    root = given.resolve()
    try:
        top = _listing(root)
    except OSError as exc:
        raise FolderError(f"{given} cannot be read ({exc.strerror or exc}); give a folder you can read.") from None
    skipped: list[tuple[str, str]] = []
    classes: list[tuple[str, Path, os.stat_result]] = []
    for entry in top:
        if entry.name.startswith("."):
            continue
        real, info, reason = _inspect(root / entry.name, entry.is_symlink(), root)
        if reason:
            skipped.append((entry.name, reason))
        elif stat.S_ISDIR(info.st_mode):
            classes.append((entry.name, real, info))
        else:
            skipped.append((entry.name, "a file directly in the images folder, not in a class sub-folder"))
    if not classes:
        raise FolderError(f"{given} has no class sub-folders. Expected {given}/<wnid>/<images>, e.g. "
                          f"{given}/n02123045/cat1.jpg.")
    wrong = [printable_name(name) for name, _, _ in classes if not is_wnid(name)]
    if wrong:
        shown = ", ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise FolderError(f"Sub-folders of {given} must be named by WordNet id (e.g. n02123045 for tabby); "
                          f"these are not: {shown}. 'python -m explain hyponyms cat.n.01' lists wnids.")
    unknown = [name for name, _, _ in classes if not _is_noun(name)]
    if unknown:  # classified as a truth no metric reads: `explain metrics` refused the file afterwards
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise FolderError(f"Sub-folders of {given} must be named by WordNet 3.0 noun ids; these are no WordNet noun: "
                          f"{shown}. Rename or move them ('python -m explain hyponyms cat.n.01' lists wnids).")
    tasks: list[ImageTask] = []
    tree = TreeScan(root)  # core.folderscan: each image once, under the class folder holding it by its real path
    for name, _, _ in classes:
        for item in tree.entries(name):
            looks_like_image = Path(item.original).suffix.lower() in IMAGE_SUFFIXES
            if item.skip is None and looks_like_image:
                tasks.append(ImageTask(item.original, str(item.path), name, error=oversize_reason(item.size)))
            elif item.skip is None:
                skipped.append((item.original, f"not an image file name (suffix {Path(item.original).suffix or 'none'})"))
            elif looks_like_image and item.original != name:  # named like an image but not read: a failed row says why
                tasks.append(ImageTask(item.original, "", name, error=_skip_reason(item.skip)))
            else:
                skipped.append((item.original, _skip_reason(item.skip)))
    if not tasks:
        also = f" {len(skipped)} entries were skipped, e.g. {skipped[0][0]}: {skipped[0][1]}." if skipped else ""
        raise FolderError(f"No images under {given}/<wnid>/ (looked for {', '.join(sorted(IMAGE_SUFFIXES))}).{also}")
    return FolderScan(tasks, skipped)


def _is_noun(wnid: str) -> bool:
    from core.wordgraph import noun_of  # NLTK's nouns as arrays: a folder check starts no NLTK

    try:
        noun_of(wnid)
    except (KeyError, ValueError):
        return False
    return True


def check_output_path(out: str | Path) -> Path:
    out = expand_user(out, "--out")
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise FolderError(f"--out {out}: the file name must end in .csv or .parquet (it decides the format).")
    if out.exists() and out.is_dir():
        raise FolderError(f"--out {out} is a folder; give a file name ending in .csv or .parquet.")
    return out


def parts_folder_for(out: Path) -> Path:
    """Where the batches of a folder run are kept for resuming: beside the output file."""
    return out.parent / f".{out.name}.parts"


def check_parts_not_linked(out: Path) -> None:
    """The batches folder beside ``out`` (``.FILE.parts/``) and its model folders are WildLens's
    own folders, never symbolic links: a link to a run's ``predictions/`` had the batches written
    into that run and its part files compacted into one holding another folder's images (the
    ``--out`` check saw only FILE). OutputError, one line, before any work, with or without
    --overwrite; a file there (not a folder) is refused too."""
    parts = parts_folder_for(out)
    fix = "remove it (WildLens makes that folder itself), or give another --out."
    if parts.is_symlink():
        raise OutputError(f"--out {out}: its batches folder {parts} is a symbolic link (to {os.readlink(parts)}); {fix}")
    if not parts.exists():
        return
    if not parts.is_dir():
        raise OutputError(f"--out {out}: its batches folder {parts} is not a folder "
                          f"({file_kind(os.stat(parts).st_mode)}); {fix}")
    try:
        linked = sorted(child for child in parts.iterdir() if child.is_symlink())
    except OSError as exc:
        raise OutputError(f"--out {out}: its batches folder {parts} cannot be read ({exc.strerror or exc}); {fix}") \
            from None
    if linked:
        raise OutputError(f"--out {out}: its batches folder {parts} holds a symbolic link ({linked[0].name} -> "
                          f"{os.readlink(linked[0])}); {fix}")


def _check_out_folder(out: Path) -> None:
    """The folder of ``out`` exists (created if need be) and takes a new file (a probe named as
    the atomic write of ``out`` names its temporary file, so a kill here leaves only what the
    sweep removes); OutputError otherwise."""
    try:
        probe_writable(out.parent, f".{out.name}.{secrets.token_hex(6)}.tmp")
    except OSError as exc:
        raise OutputError(f"--out {out}: the folder {exc.filename or out.parent} cannot be created or written "
                          f"({exc.strerror or exc}); give an --out in a folder you can write to.") from None


def _sweep_out_temporaries(out: Path) -> int:
    """Remove the temporary files of killed writes of ``out`` (core.runstore.atomic_path's names
    for it, '.FILE.<12 hex>.tmp'); call it holding the parts folder's lock."""
    pattern = atomic_temp_re(re.escape(out.name))
    removed = 0
    for path in out.parent.iterdir():
        if pattern.match(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


# --------------------------------------------------------------------------- what --out may replace
OUT_MARKER_NAME = ".wildlens-out.json"  # in the parts folder: the images folder, and the file as last written
# The columns of a predictions file an older WildLens wrote to --out: before the int8 cascade's
# int8_rechecked, and before the model stamps too (issue 22).
_OLDER_OUT_COLUMNS = (tuple(c for c in PREDICTION_SCHEMA if c != "int8_rechecked"),
                      tuple(c for c in PREDICTION_SCHEMA if c not in (*MODEL_STAMP_COLUMNS, "int8_rechecked")))


def check_out_outside_the_store(out: Path) -> None:
    """``--out`` never names a file inside the run store's ``runs/`` folder (``$WILDLENS_HOME/runs``,
    both resolved through links): a run's manifest.parquet replaced by predictions broke the run.
    OutputError otherwise, with or without --overwrite."""
    from core.runstore import RunStore

    runs = RunStore().runs_dir.resolve()
    for where in {out.parent.resolve() / out.name, out.resolve()}:
        if where == runs or runs in where.parents:
            raise OutputError(f"--out {out}: that is inside the run store's runs folder ({runs}), which holds "
                              "WildLens's runs only; give a file outside it (to classify a run, use --run RUN_ID).")


def _read_out_marker(parts: PredictionParts) -> dict | None:
    """The parts folder's marker (what a WildLens --out run wrote there), or None (none, or not readable)."""
    import json

    from core.tables import read_stored_bytes

    raw = read_stored_bytes(parts.folder / OUT_MARKER_NAME, 1 << 20)  # a FIFO put there hung classify (campaign)
    try:
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("images"), str) else None


def _write_out_marker(parts: PredictionParts, **fields) -> None:
    from core.runstore import now_iso, write_json_atomic

    write_json_atomic(parts.folder / OUT_MARKER_NAME, {**fields, "written": now_iso()})


def _columns_of(path: Path) -> list[str] | None:
    """The column names of a CSV or Parquet file (its header only), or None when it cannot be read."""
    try:
        if path.suffix.lower() == ".csv":
            import csv

            with open(path, newline="", encoding="utf-8") as handle:
                return next(csv.reader(handle), [])
        import pyarrow.parquet as pq

        from core.tables import open_table_file

        with open_table_file(path) as handle:  # one descriptor, never a FIFO: see there
            return list(pq.read_schema(handle).names)
    except Exception:  # noqa: BLE001  (any unreadable file is simply not a predictions file)
        return None


def _models_of(path: Path) -> set[str]:
    if path.suffix.lower() == ".csv":
        from core.csvsafe import read_csv

        return set(read_csv(path, usecols=["model"], dtype="string")["model"].dropna())
    from core.tables import open_table_file

    with open_table_file(path) as handle:  # one descriptor, never a FIFO: see there
        return set(pd.read_parquet(handle, columns=["model"])["model"].dropna())


def _legacy_parts(parts: PredictionParts) -> bool:
    """Batches an older WildLens kept beside its --out: model folders of part files, no marker."""
    return parts.folder.is_dir() and any(parts.folder.glob("*/part-*.parquet"))


def check_out_claim(out: Path, parts: PredictionParts, images: Path, model_ids: Sequence[str],
                    overwrite: bool = False) -> set[str] | None:
    """May this run write ``out`` (and resume the batches beside it)? Yes when ``out`` does not
    exist, or is the file WildLens last wrote there (the marker's sha256 equals the file's) for
    the same images folder, or is an older WildLens's predictions file (its columns exactly, and
    its batches beside it); and the file's models are among ``model_ids`` (dropping one would
    drop its rows from the file). Batches beside it from another images folder are never resumed
    (their images are named relative to it). ``overwrite`` replaces any regular file (the batches
    start over: :func:`_start_over`). OutputError, one line, otherwise. Never a special file.
    Returns the models the existing file holds (None: no file, or one to be overwritten)."""
    marker = _read_out_marker(parts)
    fix = "give a new file name, or add --overwrite to replace it"
    if marker is not None and marker["images"] != str(images) and not overwrite:
        raise OutputError(f"--out {out}: its batches ({parts.folder}) are from another images folder "
                          f"({marker['images']}); write to another --out, or add --overwrite to start it over.")
    if not (out.exists() or out.is_symlink()):
        return None
    if not out.is_file():
        broken = broken_link_reason(out)  # (a hostile-input campaign: os.stat raised FileNotFoundError here)
        if broken:
            raise OutputError(f"--out {broken}; give a new file name.")
        raise OutputError(f"--out {out} exists and is not a regular file ({file_kind(os.stat(out).st_mode)}); give a "
                          "new file name.")
    if overwrite:
        return None
    if marker is not None and marker.get("out_sha256"):
        if marker["out_sha256"] != file_sha256(out):
            raise OutputError(f"--out {out} was changed since WildLens wrote it for {marker['images']}; it is not "
                              f"replaced: {fix}.")
        held = set(marker.get("models") or ())
    else:
        columns = _columns_of(out)
        if marker is not None or not _legacy_parts(parts) or columns is None or \
                tuple(columns) not in (*_OLDER_OUT_COLUMNS, tuple(PREDICTION_SCHEMA)):
            raise OutputError(f"--out {out} exists and is not a predictions file WildLens wrote for {images}; "
                              f"it is not replaced: {fix}.")
        held = _models_of(out)
    dropped = sorted(held - set(model_ids))
    if dropped:
        raise OutputError(f"--out {out} holds predictions of {', '.join(dropped)} too, which --models does not name; "
                          f"add {'it' if len(dropped) == 1 else 'them'} to --models to keep them, write to another "
                          "--out, or add --overwrite to replace the file.")
    return held


def _start_over(parts: PredictionParts) -> int:
    """--overwrite: remove the batches of the file being replaced (part files and the marker,
    WildLens's own files), so nothing of it is resumed; any other file stays. Holding the lock."""
    removed = 0
    if not parts.folder.is_dir():
        return 0
    for folder in parts.folder.iterdir():
        if folder.is_dir() and not folder.is_symlink():
            for part in folder.glob("part-*.parquet"):
                if part.is_file() and not part.is_symlink():
                    part.unlink()
                    removed += 1
            try:
                folder.rmdir()  # only once empty
            except OSError:
                pass
    (parts.folder / OUT_MARKER_NAME).unlink(missing_ok=True)
    return removed


def check_folder_target(folder: str | Path, out: str | Path | None) -> Path | None:
    """What :func:`predict_folder` checks before the models load, without PyTorch (the command line
    asks first, so these mistakes are one line at once): ``out`` is a CSV or Parquet file outside the
    store's runs/ (returned, resolved; None without ``out``) and ``folder`` is a folder."""
    out_path = check_output_path(out) if out is not None else None
    if out_path is not None:
        check_out_outside_the_store(out_path)
    check_images_folder(folder)
    return out_path


def predict_folder(folder: str | Path, models: str | Iterable[str | ModelEntry], out: str | Path | None = None,
                   options: InferenceOptions | None = None, progress: ProgressCallback | None = None,
                   overwrite: bool = False) -> tuple[pd.DataFrame, InferenceReport]:
    """Classify DIR/<wnid>/<images>. With ``out`` the batches are kept beside it (resumable, one
    classify run per ``out`` at a time) and the predictions are written to it, CSV or Parquet by
    suffix; the table is also returned. The report lists the entries of DIR not read (``skipped``).
    ``out`` is never inside the store's runs/ (:func:`check_out_outside_the_store`) and replaces
    only what :func:`check_out_claim` allows, unless ``overwrite`` (then its batches start over)."""
    options = options or InferenceOptions()
    out_path = check_folder_target(folder, out)
    entries = result_entries(models, options)  # ids as stored: '<id>--int8' for int8, etc.
    scan = scan_folder(folder)
    tasks = scan.tasks
    if out_path is None:
        table, result = _classify_folder(tasks, entries, PredictionSink(), options, progress)
    else:
        images = expand_user(folder).resolve()
        model_ids = [e.id for e in entries]
        check_parts_not_linked(out_path)
        claim_parts = PredictionParts(parts_folder_for(out_path))
        check_out_claim(out_path, claim_parts, images, model_ids, overwrite)  # before any folder is made
        _check_out_folder(out_path)
        parts = PredictionParts(parts_folder_for(out_path))
        busy = f"Another classify run is writing to {out_path} (batches in {parts.folder}); wait for it to finish."
        def unwritable(path, reason) -> str:
            return (f"--out {out_path}: the folder {path} cannot be created or written ({reason}); give an --out "
                    "in a folder you can write to.")

        with _writing_parts(parts, busy, unwritable):
            check_parts_not_linked(out_path)  # again, now no other run writes
            held = check_out_claim(out_path, parts, images, model_ids, overwrite)
            if overwrite:
                _start_over(parts)
            check_stored_models(parts, entries, options.checkpoints, f"--out {out_path}",
                                lambda model: "To keep both, write to another --out; to replace them, add --overwrite.")
            _sweep_out_temporaries(out_path)
            _sweep_out_temporaries(parts.folder / OUT_MARKER_NAME)
            marker = _read_out_marker(parts)
            if marker is None or marker["images"] != str(images):  # before the first batch: whose batches these are
                # An older WildLens's file accepted above stays recognised if this run is killed.
                known = {} if held is None else {"out": out_path.name, "out_sha256": file_sha256(out_path),
                                                 "models": sorted(held)}
                _write_out_marker(parts, images=str(images), **known)
            table, result = _classify_folder(tasks, entries, PredictionSink(parts), options, progress)
            write_table(table, out_path, PREDICTION_SCHEMA, table="predictions")
            _write_out_marker(parts, images=str(images), out=out_path.name, out_sha256=file_sha256(out_path),
                              models=sorted(set(table["model"].dropna().astype(str))))
    result.skipped = list(scan.skipped)
    return conform(table, PREDICTION_SCHEMA, table="predictions", extra="drop"), result


def _classify_folder(tasks: list[ImageTask], entries: list[ModelEntry], sink: PredictionSink,
                     options: InferenceOptions, progress: ProgressCallback | None):
    # A folder stores no features (they go under a run): with options.features they are taken, as before
    # the layout change, and dropped with the extra columns when the rows are stored.
    tap = None
    if options.features:
        from classify.features import FeatureTap as tap
    result = run_inference(tasks, entries, sink, sink.already_done(entries), options, progress, tap=tap)
    sink.finish(entries, options.compact)
    table = sink.table(entries, {t.image for t in tasks})
    return table.sort_values(["model", "image"], kind="stable").reset_index(drop=True), result
