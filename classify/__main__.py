"""``python -m classify``: the stage's command line (:mod:`classify.cli`), chained to the next stage.

After a run's predictions are stored, the run's metrics artefact (``metrics/``) is refreshed by
the next stage's own command line, ``python -m explain metrics --run RUN_ID``, in a process of its
own: classify imports no other stage, not even here (stages import only ``core``; see
tests/core/test_architecture.py), and the two stages meet only through the run store, as the
dashboard and ``wildlens`` do. That command prints the run's per-model summary.
"""
from __future__ import annotations

import subprocess
import sys


def refresh_metrics(run) -> None:
    """Run ``python -m explain metrics --run RUN_ID`` (same interpreter, same ``WILDLENS_HOME``).
    A failure there is reported, never fatal: the predictions are stored, and the tables are
    recomputed by whatever reads them next."""
    done = subprocess.run([sys.executable, "-m", "explain", "metrics", "--run", run.run_id], check=False)
    if done.returncode != 0:
        print(f"note: the metric tables of run {run.run_id} were not stored (exit {done.returncode}); "
              f"'python -m explain metrics --run {run.run_id}' computes them.", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        from classify.cli import main as classify_main
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load: nothing was started, no traceback
        return 130
    return classify_main(argv, after_run=refresh_metrics)


if __name__ == "__main__":
    raise SystemExit(main())
