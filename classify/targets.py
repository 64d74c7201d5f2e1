"""What inference runs on and where its rows go: a run of the store, or a plain folder of images.

Two targets, one sink type:

* :func:`predict_run`: the usable images of a run (accepted, not excluded; :func:`run_tasks`); the
  rows go to the run's ``predictions/`` part files, and the models whose predictions are results
  (``ModelSource.records_results``) are added to run.json's ``models``.
* :func:`predict_folder`: ``DIR/<wnid>/<images>`` (:func:`scan_folder`), for the command line; with
  ``out`` the rows go to part files beside it (``.FILE.parts/``, so the same command resumes) and
  the table is written to ``out`` (CSV or Parquet, :func:`check_output_path`); without, they stay
  in memory. A folder is not a run: it has no run.json, manifest or images folder, only the parts.

Both hand their tasks to :func:`classify.pipeline.run_inference` with a :class:`PredictionSink`,
which stores each batch as it comes (``core.parts.PredictionParts``, or memory), says what is
already stored, compacts at the end and reads the final table.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from core.errors import WildLensError
from core.parts import PredictionParts
from core.progress import ProgressCallback
from core.runstore import PREDICTION_SCHEMA, Run, StoreError, conform, write_table
from core.wordnet import is_wnid

from .pipeline import ImageTask, InferenceOptions, InferenceReport, run_inference
from .registry import ModelEntry, resolve_models
from .sources import get_source

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".jfif", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".ppm",
                            ".pgm", ".pbm"})
OUTPUT_SUFFIXES = (".csv", ".parquet", ".pq")


class FolderError(WildLensError, ValueError):
    """An images folder that is not DIR/<wnid>/<images>; the message says how to fix it."""


class PredictionSink:
    """Where a target's rows go, batch by batch: part files (``parts``: a run's ``predictions/``
    or a folder run's ``.FILE.parts/``), stored at once so a killed run resumes, or, with no
    parts folder, memory. ``run_inference`` calls it with each batch's rows."""

    def __init__(self, parts: PredictionParts | None = None):
        self.parts = parts
        self.frames: list[pd.DataFrame] = []

    def __call__(self, frame: pd.DataFrame) -> None:
        if self.parts is None:
            self.frames.append(frame)
        else:
            self.parts.append(frame)

    def already_done(self, entries: Sequence[ModelEntry]) -> dict[str, set[str]]:
        """Per model, the images stored 'ok' before this call: a re-run skips them."""
        if self.parts is None:
            return {}
        return {e.id: self.parts.predicted_images(e.id) for e in entries}

    def finish(self, entries: Sequence[ModelEntry], compact: bool) -> None:
        """After the run: merge each model's part files into one (``compact``)."""
        if self.parts is not None and compact:
            for entry in entries:
                self.parts.compact(entry.id)

    def table(self, entries: Sequence[ModelEntry], images: set[str]) -> pd.DataFrame:
        """The rows of ``entries`` for ``images``, stored now or before."""
        if self.parts is None:
            return pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame(columns=list(PREDICTION_SCHEMA))
        table = self.parts.read([e.id for e in entries])
        return table[table["image"].isin(images)]


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


def predict_run(run: Run, models: str | Iterable[str | ModelEntry], options: InferenceOptions | None = None,
                progress: ProgressCallback | None = None) -> InferenceReport:
    """Classify a run's usable images with ``models``; resumable; stores through the run store."""
    options = options or InferenceOptions()
    entries = resolve_models(models)
    tasks = run_tasks(run)
    sink = PredictionSink(run.prediction_parts)
    result = run_inference(tasks, entries, sink, sink.already_done(entries), options, progress)
    sink.finish(entries, options.compact)
    if run.info_path.exists():
        info = run.info
        results = [e.id for e in entries if e.id not in info.models and get_source(e).records_results]
        known = list(info.models) + results
        if known != list(info.models):
            run.update_info(models=known)
    return result


# --------------------------------------------------------------------------- folders
def scan_folder(folder: str | Path) -> tuple[list[ImageTask], int]:
    """DIR/<wnid>/<images> -> tasks (image id '<wnid>/<relative path>'), and how many files were
    skipped for not looking like images. Raises FolderError with advice."""
    root = Path(folder).expanduser()
    if not root.exists():
        raise FolderError(f"Folder {root} does not exist.")
    if not root.is_dir():
        raise FolderError(f"{root} is a file; give a folder holding one sub-folder per class (named by wnid).")
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise FolderError(f"{root} has no class sub-folders. Expected {root}/<wnid>/<images>, e.g. "
                          f"{root}/n02123045/cat1.jpg.")
    wrong = [p.name for p in classes if not is_wnid(p.name)]
    if wrong:
        shown = ", ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise FolderError(f"Sub-folders of {root} must be named by WordNet id (e.g. n02123045 for tabby); "
                          f"these are not: {shown}. 'python -m explain hyponyms cat.n.01' lists wnids.")
    tasks, skipped = [], 0
    for folder_ in classes:
        for path in sorted(folder_.rglob("*")):
            if not path.is_file() or any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                skipped += 1
                continue
            tasks.append(ImageTask(path.relative_to(root).as_posix(), str(path), folder_.name))
    if not tasks:
        raise FolderError(f"No images under {root}/<wnid>/ (looked for {', '.join(sorted(IMAGE_SUFFIXES))}).")
    return tasks, skipped


def check_output_path(out: str | Path) -> Path:
    out = Path(out).expanduser()
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise FolderError(f"--out {out}: the file name must end in .csv or .parquet (it decides the format).")
    if out.exists() and out.is_dir():
        raise FolderError(f"--out {out} is a folder; give a file name ending in .csv or .parquet.")
    return out


def parts_folder_for(out: Path) -> Path:
    """Where the batches of a folder run are kept for resuming: beside the output file."""
    return out.parent / f".{out.name}.parts"


def predict_folder(folder: str | Path, models: str | Iterable[str | ModelEntry], out: str | Path | None = None,
                   options: InferenceOptions | None = None, progress: ProgressCallback | None = None,
                   ) -> tuple[pd.DataFrame, InferenceReport]:
    """Classify DIR/<wnid>/<images>. With ``out`` the batches are kept beside it (resumable) and
    the predictions are written to it, CSV or Parquet by suffix; the table is also returned."""
    options = options or InferenceOptions()
    entries = resolve_models(models)
    tasks, _ = scan_folder(folder)
    out_path = check_output_path(out) if out is not None else None
    sink = PredictionSink(PredictionParts(parts_folder_for(out_path)) if out_path is not None else None)
    result = run_inference(tasks, entries, sink, sink.already_done(entries), options, progress)
    sink.finish(entries, options.compact)
    table = sink.table(entries, {t.image for t in tasks})
    table = table.sort_values(["model", "image"], kind="stable").reset_index(drop=True)
    if out_path is not None:
        write_table(table, out_path, PREDICTION_SCHEMA, table="predictions")
    return conform(table, PREDICTION_SCHEMA, table="predictions", extra="drop"), result
