"""Predictions kept as part files: how a run stores its top-5 rows, and how a folder run resumes.

A parts folder holds one sub-folder per model (``/`` in a model id becomes ``_``) with
``part-<UTC time>-<random>.parquet`` files in it, each conformed to ``PREDICTION_SCHEMA``:

    <folder>/<model>/part-20261129161500123456-3f2a1b.parquet

* :meth:`PredictionParts.append` stores a batch as new part files, one per model, each written
  atomically, so a killed inference run loses at most the batch in flight and nothing it stored;
* :meth:`~PredictionParts.read` concatenates the parts in name (= time) order and keeps the latest
  row where an image was predicted twice;
* :meth:`~PredictionParts.predicted_images` is what a re-run skips;
* :meth:`~PredictionParts.compact` merges a model's parts into one.

Two owners use it: :class:`core.runstore.Run` (its ``predictions/`` folder; ``Run`` keeps its
``*_predictions`` methods and delegates here) and ``classify``'s plain-folder target (the
``.FILE.parts/`` folder beside ``--out FILE``), which is not a run: it has no run.json, manifest or
images folder, only these parts.
"""
from __future__ import annotations

import datetime as _dt
import secrets
from pathlib import Path

import pandas as pd

from .runstore import (_RUN_ID_RE, PREDICTION_SCHEMA, PREDICTION_STATUSES, StoreError, conform, empty_table,
                       read_table, write_table)


class PredictionParts:
    """One folder of prediction part files. Paths and table I/O; no business logic."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)

    def model_dir(self, model: str) -> Path:
        """The sub-folder of one model's parts; refuses ids that could name another folder."""
        if not _RUN_ID_RE.match(model.replace("/", "_")):
            raise StoreError(f"{model!r} is not a usable model id.")
        return self.folder / model.replace("/", "_")

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

    def read(self, models: list[str] | None = None) -> pd.DataFrame:
        """All stored predictions (of ``models``, else of every model); the latest row wins where
        an image was predicted twice."""
        if not self.folder.exists():
            return empty_table(PREDICTION_SCHEMA)
        folders = [self.model_dir(m) for m in models] if models else sorted(p for p in self.folder.iterdir() if p.is_dir())
        parts = [read_table(p, PREDICTION_SCHEMA, table="predictions")
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
