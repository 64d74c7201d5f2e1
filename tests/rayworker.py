"""What each worker of the suite's Ray job runs at its start (``worker_process_setup_hook``, tests/raycluster.py):
a module of its own, light, since every worker imports it."""
from __future__ import annotations

import os
import time

GATE_ENV = "WILDLENS_TEST_BATCH_GATE"  # the batch gate's file (tests.raycluster.batch_gate)


def worker_setup() -> None:
    """Each worker's setup hook (the suite's Ray job): the tiny CLIP test double registered once open_clip is
    imported (tests.classify.doubles), and the batch gate (tests.raycluster.batch_gate) installed once the engine is,
    neither imported now (importing open_clip in the hook cost each worker ~3.5 s of CPU, the engine 2.6 s, in
    the many workers that never build a CLIP model or run a batch)."""
    _after_import("open_clip.factory", _register_tiny_clip)
    _after_import("classify.engine.ray_engine", _gate_batches)


def _register_tiny_clip(_module) -> None:
    from tests.classify.doubles import register_tiny_clip

    register_tiny_clip()


def _gate_batches(engine) -> None:
    gate = os.environ.get(GATE_ENV)
    if not gate:
        return
    real = engine.PredictActor.__call__

    def __call__(self, batch):
        calls = self.__dict__.get("_gated_calls", 0)
        self._gated_calls = calls + 1
        end = time.monotonic() + 60
        # From the third batch on: the driver stores its first batch once two have finished (Ray Data's
        # iterator reads one ahead); held from the second, the run waited out the 60 s (measured 2026-12-07).
        while calls >= 2 and os.path.exists(gate) and time.monotonic() < end:
            time.sleep(0.02)
        return real(self, batch)

    engine.PredictActor.__call__ = __call__


def _after_import(name: str, then) -> None:
    """Call ``then(module)`` once module ``name`` is imported (now, if it is)."""
    import importlib.abc
    import importlib.util
    import sys

    if name in sys.modules:
        then(sys.modules[name])
        return

    class After(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)  # the real spec, found by the finders after this one
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None:  # not installed (open_clip): nothing to do
                return None
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                then(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, After())
