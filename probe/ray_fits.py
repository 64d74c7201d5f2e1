"""Probe sweeps on Ray (``python -m probe --engine ray``): each (model, N, seed, variant) fit a Ray task.

:func:`ray_fits` is a runner for :func:`probe.fewshot.sweep`: the model's inputs (features, labels,
draw groups, the text classifier) go to the cluster's object store once (``ray.put``), then one task
per fit runs :func:`probe.fewshot.probe_one`, the function the local sweep calls, with the BLAS on one
thread as in the local sweep (:func:`probe.artefact.single_threaded`): the same arguments give the
same numbers, so the results table equals the local one bit for bit (a test compares them). The
answers are read back in the jobs' order, so progress and tables do not depend on which task ends
first. Ray itself (a local instance, or the cluster at ``--ray-address`` / ``RAY_ADDRESS``) is
:func:`core.raysession.ray_session`'s; every node needs WildLens installed (the same checkout),
nothing else: the features travel with the tasks, no node reads the run.

A task whose worker dies is retried (:data:`MAX_RETRIES`, Ray's task retries); a fit is a pure
function of its inputs, so a retry gives the same row. A fit that raises (a bug) fails the sweep as
it would locally; nothing is written until every fit of every model is back.
"""
from __future__ import annotations

from typing import Callable, Iterator

MAX_RETRIES = 3  # a task whose worker died runs again (a fit is pure: the same answer)
IN_FLIGHT = 64  # fits submitted ahead of the one being read: bounded memory for long sweeps


def _fit(fn: Callable, inputs, job: tuple, threads: int) -> tuple[dict, list[dict]]:
    """On a worker: ``fn(inputs, job)`` with the BLAS on ``threads`` threads, as the local sweep runs it."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads):
        return fn(inputs, job)


def ray_fits(address: str | None = None, join_timeout: float | None = None) -> Callable:
    """A ``fits`` runner for :func:`probe.fewshot.sweep` that runs each fit as a Ray task on the
    cluster at ``address`` (else ``RAY_ADDRESS``, else a local instance)."""
    from .artefact import THREADS

    def run(fn: Callable, inputs, jobs: list[tuple]) -> Iterator[tuple[dict, list[dict]]]:
        from core.raysession import _import_ray, ray_session

        ray = _import_ray()
        with ray_session(address, join_timeout):
            task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_fit)
            shared = ray.put(inputs)
            pending = [task.remote(fn, shared, job, THREADS) for job in jobs[:IN_FLIGHT]]
            try:
                for i in range(len(jobs)):
                    if i + IN_FLIGHT < len(jobs):
                        pending.append(task.remote(fn, shared, jobs[i + IN_FLIGHT], THREADS))
                    yield ray.get(pending[i])
                    pending[i] = None  # read: its result may go
            finally:  # a fit that failed, or a sweep stopped early: the fits still queued are cancelled
                for ref in pending:
                    if ref is not None:
                        ray.cancel(ref)

    return run
