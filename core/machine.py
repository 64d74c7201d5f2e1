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
