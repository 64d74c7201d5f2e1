"""Where a run's probe tables live (``runs/<id>/probes/``), apart from the code that fits them: a page that
only asks whether a table is there (the Images page's label issues) imports this, not scikit-learn and
scipy.stats (probe.linear: 1.2 s of the Images page's first load)."""
from __future__ import annotations

from pathlib import Path

from core.runstore import Run

PROBES_DIR = "probes"
RESULTS = "results.parquet"
PER_CLASS = "per_class.parquet"
LABEL_ISSUES = "label_issues.parquet"


def probes_dir(run: Run) -> Path:
    return Path(run.path) / PROBES_DIR
