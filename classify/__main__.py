"""``python -m classify``: the stage's command line (:mod:`classify.cli`), wired to the next stage.

An entry point, not library code: after a run's predictions are stored it refreshes the run's
metrics artefact (``metrics/``, :mod:`explain.artefact`), which the classify library itself may
not import (stages import only ``core``; see tests/core/test_architecture.py).
"""
from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from classify.cli import main as classify_main
    from explain.artefact import refresh_metrics

    return classify_main(argv, after_run=refresh_metrics)


if __name__ == "__main__":
    raise SystemExit(main())
