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
    process may use (:func:`available_cores`), for work that releases the GIL (NumPy, Pillow, hashlib). One
    after the other where one thread would do or none can be started ("can't start new thread" under an
    address-space limit: what the threads made is made again here, so ``function`` must have no side effects)."""
    items = list(items)
    workers = min(len(items), available_cores(), limit)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
                return list(pool.map(function, items))
        except RuntimeError:
            pass
    return [function(i) for i in items]
