"""Where a target's prediction rows go, batch by batch (:class:`PredictionSink`), and the error for
a place they cannot go (:class:`OutputError`).

Below both ``classify.targets`` (which picks a sink for a run or a folder) and
``classify.features`` (whose ``FeatureSink`` also stores the features riding on the rows), so
that features need not import targets, which imports features to run them.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from core.errors import WildLensError
from core.parts import PredictionParts
from core.runstore import PREDICTION_SCHEMA

from classify.models.registry import ModelEntry


class OutputError(WildLensError, RuntimeError):
    """Where the predictions go cannot be written; found before any inference."""


class PredictionSink:
    """Where a target's rows go, batch by batch: part files (``parts``: a run's ``predictions/``
    or a folder run's ``.FILE.parts/``), stored at once so a killed run resumes, or, with no
    parts folder, memory. ``classify.engine.dispatch.run_inference`` calls it with each batch's rows."""

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
