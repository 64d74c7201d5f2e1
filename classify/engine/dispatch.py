"""The engine choice, in one place: ``InferenceOptions.engine`` picks the local pipeline
(``classify.engine.pipeline.run_local``) or Ray Data (``classify.engine.ray_engine``).

Every caller of an engine (``classify.targets``, ``classify.features``, the command line, the
benchmarks) goes through :func:`run_inference` and :func:`result_entries`, so the local pipeline
never imports the Ray engine (which builds on the pipeline's batches and rows), and the feature tap (``classify.features.FeatureTap``) is given here by the
caller rather than imported by an engine.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import pandas as pd

from core.progress import ProgressCallback

from classify.engine.device import resolve_precision, select_device
from classify.engine.options import check_engine
from classify.engine.pipeline import precision_entries, run_local
from classify.engine.ray_engine import actor_precision, run_inference_ray
from classify.engine.types import ImageTask, InferenceOptions, InferenceReport
from classify.models.lookup import resolve_models
from classify.models.registry import ModelEntry


def run_inference(tasks: Sequence[ImageTask], models: Iterable[str | ModelEntry],
                  sink: Callable[[pd.DataFrame], object], already_done: dict[str, set[str]] | None = None,
                  options: InferenceOptions | None = None, progress: ProgressCallback | None = None,
                  tap: Callable | None = None) -> InferenceReport:
    """Classify ``tasks`` with every model, skipping (model, image) pairs in ``already_done``;
    hand each batch's rows (PREDICTION_SCHEMA) to ``sink`` before reporting progress, on the
    engine ``options.engine`` names. ``tap(module, model id)``: what captures each batch's
    features when ``options.features`` is set (``classify.features.FeatureTap``)."""
    options = options or InferenceOptions()
    check_engine(options.engine)
    if options.engine == "ray":
        return run_inference_ray(tasks, models, sink, already_done, options, progress, tap=tap)
    return run_local(tasks, models, sink, already_done, options, progress, tap=tap)


def result_entries(models: str | Iterable[str | ModelEntry], options: InferenceOptions) -> list[ModelEntry]:
    """The models as their rows will be stored with ``options``' precision on its device (with
    ``engine='ray'``, the actors' device and precision, ``classify.engine.ray_engine.actor_precision``)."""
    if options.engine == "ray":
        _, precision, default = actor_precision(options)
        return precision_entries(resolve_models(models), precision, default, options.int8_recheck)
    device = select_device(options.device)
    return precision_entries(resolve_models(models), resolve_precision(options.precision, device),
                             resolve_precision("auto", device), options.int8_recheck)
