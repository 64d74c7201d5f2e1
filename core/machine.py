"""What this process may run on, detected rather than assumed (the machine may differ between runs)."""
from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or taskset's share), not the
    machine's; the machine's count where affinity is not reported (macOS, Windows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threaded_map(function, items: list, *, limit: int, name: str) -> list:
    """``[function(i) for i in items]`` on up to ``limit`` threads, no more than the items or the cores this
    process may use (:func:`available_cores`), for work that releases the GIL (NumPy, Pillow, hashlib); an
    exception is raised in item order. One after the other where one thread would do; where a thread cannot
    be started ("can't start new thread" under an address-space limit) the items not yet taken by a thread run
    here, each once (CPython queues an item before starting its thread: such an item is withdrawn first)."""
    items = list(items)
    workers = min(len(items), available_cores(), limit)
    if workers <= 1:
        return [function(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        futures = submit_all(pool, function, items)
        return [future.result() if future is not None else function(item) for future, item in zip(futures, items)]


def submit_all(pool, function, items: list) -> list:
    """``pool.submit(function, item)`` for each item, or None for each item to run by the caller: every item from
    the first whose thread could not be started (a RuntimeError from ``submit``: "can't start new thread"), and
    any queued one that no thread had taken then (cancelled: CPython queues an item before it starts the thread,
    so without this it could run twice). No item runs twice; run each None item yourself."""
    futures = []
    for k, item in enumerate(items):
        try:
            futures.append(pool.submit(function, item))
        except RuntimeError:
            pool.shutdown(wait=False, cancel_futures=True)  # the failed one's item too: queued, never to run
            return [None if f.cancel() else f for f in futures] + [None] * (len(items) - k)
    return futures
