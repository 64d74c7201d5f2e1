"""Predictions kept as part files: how a run stores its top-5 rows, and how a folder run resumes.

A parts folder holds one sub-folder per model (``/`` in a model id becomes ``_``) with
``part-<UTC time>-<random>.parquet`` files in it, each conformed to ``PREDICTION_SCHEMA``:

    <folder>/<model>/part-20261129161500123456-3f2a1b.parquet

* :meth:`PredictionParts.append` stores a batch as new part files, one per model, each written
  atomically, so a killed inference run loses at most the batch in flight and nothing it stored;
* :meth:`~PredictionParts.read` concatenates the parts in name (= time) order and keeps the latest
  row where an image was predicted twice;
* :meth:`~PredictionParts.predicted_images` is what a re-run skips;
* :meth:`~PredictionParts.compact` merges a model's parts into one;
* :meth:`~PredictionParts.check_writable` proves, before any work, that new files can be made;
* :meth:`~PredictionParts.sweep_temporary` removes what a killed writer left: the temporary file
  of a part write that never reached its rename (``.part-<time>-<random>.parquet.<12 hex>.tmp``,
  :func:`atomic_temp_re`) and a write probe, and nothing else. The caller holds the folder's lock
  (``core.locking``), so no live writer's temporary file is taken.

Two owners use it: :class:`core.runstore.Run` (its ``predictions/`` folder; ``Run`` keeps its
``*_predictions`` methods and delegates here) and ``classify``'s plain-folder target (the
``.FILE.parts/`` folder beside ``--out FILE``), which is not a run: it has no run.json, manifest or
images folder, only these parts.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import secrets
from pathlib import Path

import pandas as pd

from .tables import (_RUN_ID_RE, MODEL_ID_RULE, PREDICTION_SCHEMA, PREDICTION_STATUSES, StoreError, conform, empty_table,
                     open_table_file, probe_writable, read_table, write_table)


_PART_NAME = r"part-\d{20}-[0-9a-f]{6}\.parquet"  # append(): part-<UTC time, 20 digits>-<6 hex>.parquet
_PROBE_PREFIX = ".write-probe."


def atomic_temp_re(name_pattern: str) -> re.Pattern:
    """The temporary files that ``core.runstore.atomic_path`` writes for a target whose name
    matches ``name_pattern`` (a regular expression): '.<name>.<12 hex>.tmp' beside it. A process
    killed between the write and the rename leaves one behind."""
    return re.compile(rf"^\.(?:{name_pattern})\.[0-9a-f]{{12}}\.tmp\Z")


def sweep_stale_temps(folder: Path, names: tuple[str, ...], older_than_s: float = 900.0) -> int:
    """Remove, in ``folder``, the temporary files of atomic writes of ``names`` (:func:`atomic_temp_re`)
    not touched for ``older_than_s``: what a writer killed mid-write left (a Browse table's is ~370 MB
    at 1,000,000 predictions, hostile campaign). For a folder without a writers' lock: a live writer
    is never that slow (seconds for the largest table), so its file is left alone; so is any other file."""
    import time

    pattern = atomic_temp_re("|".join(re.escape(n) for n in names))
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    now = time.time()
    for entry in entries:
        try:
            if (pattern.match(entry.name) and entry.is_file(follow_symlinks=False)
                    and now - entry.stat(follow_symlinks=False).st_mtime > older_than_s):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


_PART_TEMP_RE = atomic_temp_re(_PART_NAME)
_PROBE_RE = re.compile(rf"^{re.escape(_PROBE_PREFIX)}[0-9a-f]{{12}}\.tmp\Z")


def check_folder(path: Path) -> None:
    """A one-line StoreError when ``path`` is a symbolic link whose target is not a folder here (a disk
    not mounted, a dangling link, a loop, a link to a file). Why: a model folder linked to another disk
    (how a user moves predictions) that could not be reached was skipped as if absent: explain metrics
    stored tables without that model, and classify classified every image again, then failed to write
    (hostile-input campaign)."""
    if path.is_symlink() and not path.is_dir():
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise StoreError(f"{path} is a link to {target}, which is not a folder here (a disk not mounted?); mount it, "
                         "or move the link away, and re-run.")


def usable_model_id(model: str) -> bool:
    """Whether ``model`` can name a model folder (:data:`core.tables.MODEL_ID_RULE`; :meth:`PredictionParts.model_dir`
    refuses the rest)."""
    return bool(_RUN_ID_RE.match(str(model).replace("/", "_")))


def model_folders(folder: Path) -> list[Path]:
    """The model folders of a parts folder, in name order; a linked one that cannot be reached (or the
    parts folder itself) is :func:`check_folder`'s one line, never skipped. Plain files are not folders."""
    check_folder(folder)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            out.append(path)
        else:
            check_folder(path)
    return out


def _is_text(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


class PredictionParts:
    """One folder of prediction part files. Paths and table I/O; no business logic."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)

    def model_dir(self, model: str) -> Path:
        """The sub-folder of one model's parts; refuses ids that could name another folder, and a
        linked folder that cannot be reached (:func:`check_folder`)."""
        if not usable_model_id(model):
            raise StoreError(f"{model!r} is not a usable model id: {MODEL_ID_RULE}.")
        check_folder(self.folder)
        folder = self.folder / model.replace("/", "_")
        check_folder(folder)
        return folder

    def append(self, df: pd.DataFrame) -> list[Path]:
        """Store a batch of predictions as new part files (one per model), atomically."""
        df = conform(df, PREDICTION_SCHEMA, table="predictions", extra="drop")
        bad = set(df["status"].dropna()) - set(PREDICTION_STATUSES)
        if bad:
            raise StoreError(f"predictions: unknown status {sorted(bad)}; allowed {PREDICTION_STATUSES}.")
        written = []
        for model, part in df.groupby("model", sort=False):
            folder = self.model_dir(str(model))
            name = f"part-{_dt.datetime.now(_dt.timezone.utc):%Y%m%d%H%M%S%f}-{secrets.token_hex(3)}.parquet"
            write_table(part, folder / name, PREDICTION_SCHEMA, table="predictions")
            written.append(folder / name)
        return written

    def _columns_of_parts(self, columns: list[str], *, dictionary: bool = False):
        """(folder, path, a pyarrow table of ``columns``) for each part file, in :meth:`read`'s order, read from
        those columns alone; a part without them is skipped, one that cannot be read is a one-line
        StoreError. ``dictionary``: text columns come dictionary-encoded (each distinct value decoded once
        where Parquet stored them so, not once a row; one dictionary per row group); others as they are."""
        import pyarrow.parquet as pq

        for folder in model_folders(self.folder):
            for path in sorted(folder.glob("part-*.parquet")):
                try:
                    handle = open_table_file(path, follow_links=False)
                except OSError as exc:  # a dangling link, a loop: as damaged as a bad file
                    raise StoreError(f"{path} cannot be read ({exc.strerror or exc}).") from None
                with handle:
                    try:
                        parquet = pq.ParquetFile(handle)
                        if not set(columns) <= set(parquet.schema_arrow.names):
                            continue
                        strings = [c for c in columns if dictionary and _is_text(parquet.schema_arrow.field(c).type)]
                        if strings:  # asked for a column the file lacks, read_dictionary raised (a hostile check)
                            handle.seek(0)
                            parquet = pq.ParquetFile(handle, read_dictionary=strings)
                        table = parquet.read(columns=columns)
                    except Exception as exc:  # pyarrow raises several types for a damaged file
                        raise StoreError(f"{path} is not a readable Parquet file ({' '.join(str(exc).split())}).") \
                            from None
                yield folder, path, table

    def recorded_families(self) -> dict[str, str]:
        """model -> the family its stored 'ok' rows record (its model stamp: one model per id, which
        ``classify.targets`` keeps; the latest row's where they differ, as :meth:`read`'s latest row
        wins), for the models whose rows record one; read from the 'model', 'family' and 'status'
        columns alone, dictionary-encoded (1,000,000 predictions: 97 -> 40 ms; each row's strings decoded
        were most of it). Why: the Results page read every stored row for this (0.8 s at 1,000,000
        predictions)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        out: dict[str, str] = {}
        for _, path, rows in self._columns_of_parts(["model", "family", "status"], dictionary=True):
            try:
                # One dictionary for every row group (each comes with its own): grouping keys whose dictionaries
                # differ raised "Unifying differing dictionaries" (a code review: a part of two row groups).
                rows = rows.unify_dictionaries()
                ok = rows.filter(pc.equal(rows.column("status"), "ok"))
                pairs = ok.group_by(["model", "family"], use_threads=False).aggregate([])
                if pairs.num_rows > len(set(pairs.column("model").to_pylist())):
                    # A model with two families in one part (hand-made): its last row's, as read()'s latest row
                    # wins (a review: its first-appearing group's was taken). Only then: +5 ms at 1M rows.
                    ok = ok.append_column("row", pa.array(np.arange(ok.num_rows)))
                    pairs = ok.group_by(["model", "family"], use_threads=False).aggregate([("row", "max")])
                    pairs = pairs.sort_by("row_max")
            except Exception as exc:  # columns of another type (a hand-made part)
                raise StoreError(f"{path} is not a readable Parquet file ({' '.join(str(exc).split())}).") from None
            for model, family in zip(pairs.column("model").to_pylist(), pairs.column("family").to_pylist()):
                if model is not None and family is not None:
                    out[str(model)] = str(family)  # parts sort by time and pairs by last row: the latest wins
        return out

    def folders_of_models(self) -> dict[str, set[str]]:
        """model -> the names of the folders whose parts hold its rows, from the 'model' column alone.
        A model's rows normally sit in its own folder (:meth:`append`); a hand-made run may file them
        elsewhere, and then only reading every folder gives the latest row of each image."""
        from .tables import _from_arrow

        out: dict[str, set[str]] = {}
        for folder, path, rows in self._columns_of_parts(["model"]):
            # Typed as read() types them (a hand-made int column with a gap reads as '1.0', not '1').
            models = _from_arrow(rows, path, {"model": PREDICTION_SCHEMA["model"]}, "predictions")["model"]
            for model in pd.unique(models.dropna()).tolist():
                out.setdefault(str(model), set()).add(folder.name)
        return out

    def read(self, models: list[str] | None = None) -> pd.DataFrame:
        """All stored predictions (of ``models``, else of every model); the latest row wins where
        an image was predicted twice."""
        folders = [self.model_dir(m) for m in models] if models else model_folders(self.folder)
        return self.read_folders(folders)

    @staticmethod
    def read_folders(folders: list[Path]) -> pd.DataFrame:
        """The stored predictions of these model folders (a parts folder's sub-folders), in the order
        given; the latest row wins where an image was predicted twice (explain.streaming reads a run a
        few models at a time with it)."""
        parts = [read_table(p, PREDICTION_SCHEMA, table="predictions", follow_links=False)
                 for folder in folders if folder.exists() for p in sorted(folder.glob("part-*.parquet"))]
        if not parts:
            return empty_table(PREDICTION_SCHEMA)
        df = pd.concat(parts, ignore_index=True)
        return df.drop_duplicates(["model", "image"], keep="last").reset_index(drop=True)

    def predicted_images(self, model: str, include_failed: bool = False) -> set[str]:
        """Images of ``model`` stored with status 'ok' (or any status, with ``include_failed``)."""
        df = self.read([model])
        if not include_failed:
            df = df[df["status"] == "ok"]
        return set(df["image"].dropna())

    def check_writable(self) -> None:
        """Create the folder and a file in it, then remove the file: raises ``OSError`` whose
        ``filename`` is the folder that could not be made or written, where new part files could
        not be written."""
        check_folder(self.folder)  # a dangling link here read "File exists; give yourself write access"
        probe_writable(self.folder, f"{_PROBE_PREFIX}{secrets.token_hex(6)}.tmp")

    def sweep_temporary(self) -> int:
        """Remove the temporary files a killed writer left here (see the module docstring); the
        number removed. Call it holding the folder's lock. Any other file is left alone."""
        if not self.folder.is_dir():
            return 0
        removed = 0
        candidates = [p for p in self.folder.iterdir() if _PROBE_RE.match(p.name)]
        for folder in self.folder.iterdir():
            if folder.is_dir() and not folder.is_symlink():
                candidates += [p for p in folder.iterdir() if _PART_TEMP_RE.match(p.name)]
        for path in candidates:
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def compact(self, model: str) -> None:
        """Merge a model's part files into one. The merged part is written (atomically) as the
        newest part before the old ones are removed, so a kill at any point loses nothing."""
        folder = self.model_dir(model)
        parts = sorted(folder.glob("part-*.parquet"))
        if len(parts) < 2:
            return
        merged = self.read([model])
        self.append(merged)
        for p in parts:
            p.unlink()
