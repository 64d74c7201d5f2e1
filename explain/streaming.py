"""Metric tables of more predictions than memory holds: a run's part files read a few models at a time.

Every number of the three metric tables (:func:`explain.metrics.compute_metric_tables`) is a function
of one model's rows: its per-model and per-class sums, its confusions, and its bootstrap intervals,
whose Poisson weights are drawn from streams keyed by the model's own id
(:func:`explain.uncertainty.model_stream_key`), not by its position among other models. So the tables
of a run are the tables of each chunk of models, concatenated in model order, whatever the chunks:
:func:`stream_metric_tables` reads the prediction parts one chunk of models at a time (about
:data:`STREAM_ROWS` rows, from the Parquet footers: no row is read to plan), computes the chunk's
tables with the in-memory function and keeps only the tables. Peak memory is one chunk's working set
plus the tables, not every prediction: the ETH error-analysis study (900 models x 50,000 images =
45,000,000 predictions) fits a 24 GB machine this way (``benchmarks/bench_metrics.py --rows
45000000 --stream``; the in-memory frame alone would be ~15 GB). A test compares the streamed tables
with the in-memory ones, chunk sizes from one model up, bit for bit.

The curated view (:mod:`explain.curation_view`) is applied per chunk (relabels and exclusions are per
image); the images it changed are counted across chunks once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pandas as pd

from core.curation import Curation, read_curation
from core.explained import EXPLAINED_IN_MEMORY as _EXPLAINED_IN_MEMORY
from core.runstore import Run
from core.tables import PREDICTION_SCHEMA, StoreError, empty_table, open_table_file
from .curation_view import RAW, ViewChange, apply_curation, check_view
from .metrics import DEFAULT_CONFUSION_TOP_K, DEFAULT_INTERVALS, MetricTables, compute_metric_tables
from .schema import METRIC_SCHEMAS

# Rows per chunk. Why 2,000,000: the in-memory tables peak at ~1.2 GB per million predictions with
# intervals (measured with bench_metrics.py), so a chunk stays near 2.5 GB, under the 4 GB the scale
# issue allows with room for the tables; smaller chunks cost more per-chunk overhead (the similarity
# lookups and the thread pool start per chunk).
STREAM_ROWS = 2_000_000
# The per-prediction explanations (explain.error_types) still type every prediction of a view at once:
# they are made only up to this many stored predictions (one chunk's worth of memory); above it
# explain.error_types.check_explainable refuses in one line for every caller (python -m explain metrics,
# the artefact after inference, the pages, the FiftyOne export). Streaming them is not built yet.
EXPLAINED_IN_MEMORY = _EXPLAINED_IN_MEMORY
assert EXPLAINED_IN_MEMORY == STREAM_ROWS  # (one chunk's worth, as the comment above says)


def part_rows(run: Run) -> dict[Path, int]:
    """Each model folder of the run's predictions -> its stored rows (Parquet footers only), in the
    folders' name order (the order ``Run.read_predictions`` reads them: the tables' model order)."""
    from core.parts import model_folders

    return {model_dir: folder_rows(model_dir) for model_dir in model_folders(run.predictions_dir)}


def folder_rows(model_dir: Path) -> int:
    """Rows stored in one model folder's parts (their footers). A part that vanished while listed (a
    compaction writes the merged part before it removes the old ones) is listed again, once."""
    for attempt in (1, 2):
        try:
            return sum(_stored_rows(p) for p in sorted(model_dir.glob("part-*.parquet")))
        except FileNotFoundError as exc:
            if attempt == 2:
                raise StoreError(f"{exc.filename or model_dir} is listed but cannot be opened (removed meanwhile?); "
                                 "run again once the other process is done.") from None
    raise AssertionError("unreachable")


def _stored_rows(path: Path) -> int:
    """Rows of one part file from its footer, read through one descriptor of a regular file (a FIFO
    or folder in its place is a one-line StoreError, as when its rows are read)."""
    import pyarrow.parquet as pq

    try:
        with open_table_file(path, follow_links=False) as handle:  # a part: never a link
            return pq.ParquetFile(handle).metadata.num_rows
    except (FileNotFoundError, StoreError):
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise StoreError(f"{path} is not a readable Parquet file ({exc}).") from None


def model_chunks(run: Run, chunk_rows: int = STREAM_ROWS, rows_by_folder: dict[Path, int] | None = None) -> list[list[Path]]:
    """The run's model folders cut into consecutive chunks of at most ``chunk_rows`` stored rows (a
    model with more is a chunk of its own); ``rows_by_folder``: :func:`part_rows` when already read."""
    chunks: list[list[Path]] = []
    size = 0
    for model_dir, rows in (part_rows(run) if rows_by_folder is None else rows_by_folder).items():
        if not chunks or size + rows > chunk_rows:
            chunks.append([])
            size = 0
        chunks[-1].append(model_dir)
        size += rows
    return [c for c in chunks if c]


@dataclass
class ChangeCount:
    """What the curated view changed, added up over chunks: images once however many models saw them."""

    relabelled: set = field(default_factory=set)
    excluded: set = field(default_factory=set)
    relabelled_rows: int = 0
    excluded_rows: int = 0

    def add(self, rows: pd.DataFrame, change: ViewChange, curation: Curation) -> None:
        """Count one chunk: ``rows`` before the curation, ``change`` what it changed in them."""
        if not change.any:
            return
        self.relabelled_rows += change.relabelled_rows
        self.excluded_rows += change.excluded_rows
        images = rows["image"].astype(object).to_numpy()
        self.excluded |= set(pd.unique(images[rows["image"].isin(list(curation.excluded)).to_numpy()]).tolist())
        touched = rows["image"].isin(list(curation.relabels)).to_numpy() & ~rows["image"].isin(
            list(curation.excluded)).to_numpy()
        for image, truth in zip(images[touched], rows["true_wnid"].astype(object).to_numpy()[touched]):
            if not (isinstance(truth, str) and truth == curation.relabels[image]):  # as apply_curation decides
                self.relabelled.add(image)

    def view_change(self) -> ViewChange:
        return ViewChange(relabelled_images=len(self.relabelled), excluded_images=len(self.excluded),
                          relabelled_rows=self.relabelled_rows, excluded_rows=self.excluded_rows)


def usable_chunks(run: Run, view: str = RAW, curation: Curation | None = None, chunk_rows: int = STREAM_ROWS,
                  counted: ChangeCount | None = None, chunks: list[list[Path]] | None = None) -> Iterator[pd.DataFrame]:
    """The run's usable predictions in ``view``, one chunk of models at a time (``chunks``, else
    :func:`model_chunks`): each chunk is what ``explain.curation_view.view_predictions`` gives for
    those models. ``counted`` adds up what the curation changed."""
    from core.parts import PredictionParts

    check_view(view)
    usable = run.usable_files()
    if view != RAW and curation is None:
        curation = read_curation(run)
    for folders in (chunks if chunks is not None else model_chunks(run, chunk_rows)):
        rows = PredictionParts.read_folders(folders)
        if usable is not None:
            rows = rows[rows["image"].isin(usable)].reset_index(drop=True)
        if view != RAW:
            curated, change = apply_curation(rows, curation)
            if counted is not None:
                counted.add(rows, change, curation)
            rows = curated
        yield rows


def concat_tables(chunked: list[tuple[list[Path], MetricTables]], ci) -> MetricTables:
    """The tables of consecutive chunks of models (each with its model folders) as one, rows in chunk
    order, the schemas' dtypes. A model with rows in two chunks' folders (a copy such as
    ``alpha.bak`` beside ``alpha``) would be two rows of one model: refused in one line naming them."""
    first: dict[str, list[Path]] = {}
    for folders, tables_ in chunked:
        for model in tables_.per_model["model"].astype(str):
            if model in first and first[model] is not folders:
                raise StoreError(f"Model {model}'s predictions are in more than one folder of the run "
                                 f"({', '.join(f.name for f in first[model])} and {', '.join(f.name for f in folders)}): "
                                 f"move the copy out of {folders[0].parent}, then run again.")
            first[model] = folders
    parts = [t for _, t in chunked]
    tables = {}
    for name, schema in METRIC_SCHEMAS.items():
        frames = [getattr(p, name) for p in parts if len(getattr(p, name))]
        if not frames:
            frames = [getattr(parts[0], name)] if parts else []
        tables[name] = (pd.concat(frames, ignore_index=True).astype(schema) if frames
                        else pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()}))
    return MetricTables(tables["per_model"], tables["per_class"], tables["confusions"], ci=ci.as_dict() if ci else None)


def stream_metric_tables(run: Run, view: str = RAW, *, curation: Curation | None = None,
                         confusion_top_k: int | None = DEFAULT_CONFUSION_TOP_K, cache_dir=None,
                         ci=DEFAULT_INTERVALS, chunk_rows: int = STREAM_ROWS,
                         progress=None) -> tuple[MetricTables, ViewChange]:
    """``compute_metric_tables`` of the run's usable predictions in ``view``, read one chunk of
    models at a time (the module docstring says why the tables are the same); and what the
    curation changed. ``progress(done, total)`` after each chunk."""
    counted = ChangeCount()
    chunks = model_chunks(run, chunk_rows)
    parts = []
    for i, rows in enumerate(usable_chunks(run, view, curation, chunk_rows, counted, chunks)):
        parts.append((chunks[i], compute_metric_tables(rows, confusion_top_k=confusion_top_k, cache_dir=cache_dir,
                                                       ci=ci)))
        del rows
        if progress is not None:
            progress(i + 1, len(chunks))
    if not parts:  # no predictions: the empty tables, as the in-memory path gives them
        parts = [([], compute_metric_tables(empty_table(PREDICTION_SCHEMA), confusion_top_k=confusion_top_k,
                                            cache_dir=cache_dir, ci=ci))]
    return concat_tables(parts, ci), counted.view_change()
