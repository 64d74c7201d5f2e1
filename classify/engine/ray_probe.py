"""What a Ray node runs before a run's work (``ray_engine.start_probes``): can it read the run's
images and find each model's weights?

A module of its own, kept light, because a Ray worker imports the module of the function it runs:
``_probe_node`` in ``classify.engine.ray_engine`` made each probe's worker import PyTorch with the
engine (the engine's imports 2.6 CPU-seconds in a fresh process, this module's 0.4, pandas through
core.raysession -> core.runstore still among them; 2026-12-07), which the run waited for before it
stored its first row, on every node.
"""
from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Sequence

from core.errors import WildLensError
from core.raysession import HOME_PREFIX, node_home, node_path
from core.userfile import regular_file_size

if TYPE_CHECKING:
    from classify.models.registry import ModelEntry


def probe_node(paths: Sequence[str], models: Sequence[tuple["ModelEntry", str | None]], allow_download: bool,
               driver_home: str | None = None, sizes: Sequence[int] | None = None) -> dict:
    """Run on a node: can it import WildLens, read ``paths`` (each of the size the driver saw, when
    ``sizes`` are given: another file at the same path is another store's) and load each model's weights?"""
    home = node_home(driver_home)
    out = {"node": socket.gethostname(), "unreadable": None, "weights": [], "home": str(home) if home else None,
           "in_store": False}
    for i, path in enumerate(paths):
        local = node_path(path, home)
        try:
            size = regular_file_size(local)
        except (OSError, ValueError) as exc:
            out["unreadable"] = f"{local} ({getattr(exc, 'strerror', None) or exc})"
            out["in_store"] = path.startswith(HOME_PREFIX)
            break
        if sizes is not None and i < len(sizes) and size != sizes[i]:
            out["unreadable"] = f"{local} (another file: {size:,} bytes there, {sizes[i]:,} on this machine)"
            out["in_store"] = path.startswith(HOME_PREFIX)
            break
    from classify.models.weights import require_weights

    for entry, checkpoint in models:
        try:
            require_weights(entry, checkpoint, allow_download)
        except WildLensError as exc:
            out["weights"].append(str(exc))
    return out
