"""The metric tables on Ray Data (``python -m explain metrics --run R --engine ray``): chunks of models on the nodes.

The same computation as :func:`explain.streaming.stream_metric_tables`, spread over a Ray cluster for
runs whose predictions are more than one machine should read: the run's model folders are cut into
the same chunks (:func:`explain.streaming.model_chunks`), a Ray Dataset holds one row per chunk, and
``map`` computes each chunk's tables where Ray places it: the task reads the chunk's part files from
the shared run store (paths relative to the driver's store, read under the node's own
``WILDLENS_HOME`` when its Ray was started with one: :func:`core.raysession.node_path`), keeps the
usable images (the set the driver read from the manifest, sent once through the object store),
applies the curated view's relabels and exclusions, and returns the three tables as one Arrow IPC
stream each (float64 bit for bit, no pickle in the payload). The driver puts the chunks back in
order and concatenates them: every model's numbers are its own (its bootstrap streams keyed by its
id), so the tables equal the local ones bit for bit (a test compares them on the suite's multi-node
cluster). Nothing is written by the nodes; the driver stores the artefact as the local path does.
"""
from __future__ import annotations

import warnings
from typing import Callable

import pandas as pd

from core.curation import Curation, read_curation
from core.runstore import Run, default_root
from core.tables import ipc_bytes, ipc_table
from .curation_view import RAW, ViewChange, check_view
from .metrics import DEFAULT_CONFUSION_TOP_K, DEFAULT_INTERVALS, MetricTables
from .streaming import STREAM_ROWS, ChangeCount, concat_tables, model_chunks, part_rows

TABLES = ("per_model", "per_class", "confusions")
MAX_RETRIES = 3  # a chunk whose worker died is computed again (a pure function of the stored parts)


def _to_arrow(frame: pd.DataFrame) -> bytes:
    import pyarrow as pa

    return ipc_bytes(pa.Table.from_pandas(frame, preserve_index=False))


def _from_arrow(data: bytes) -> pd.DataFrame:
    """:func:`_to_arrow`'s inverse, into pandas' nullable dtypes (a null stays NA, a NaN stays NaN)."""
    import pyarrow as pa

    nullable = {pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(), pa.bool_(): pd.BooleanDtype(),
                pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}
    return ipc_table(data).to_pandas(types_mapper=nullable.get)


def _chunk_tables(row: dict, *, driver_home: str, predictions: str, usable, view: str, curation: Curation | None,
                  confusion_top_k, ci, cache_dir) -> dict:
    """On a node: one chunk's tables (and what the curation changed in it) as Arrow IPC bytes. The
    chunk's model folders must hold there the rows the driver counted (from the same Parquet
    footers): a node that sees another store, or none, is refused by name, never read as empty."""
    import socket
    from pathlib import Path

    from core.parts import PredictionParts
    from core.raysession import RayEngineError, node_home, node_path
    from .curation_view import apply_curation
    from .metrics import compute_metric_tables
    from .streaming import folder_rows

    home = node_home(driver_home)
    where = Path(node_path(predictions, home))
    folders = [where / name for name in row["folders"]]
    for folder, expected in zip(folders, row["rows"]):
        found = folder_rows(folder) if folder.is_dir() else None
        if found != expected:
            seen = "no such folder" if found is None else f"{found:,} rows there, {expected:,} on the driver"
            raise RayEngineError(f"Ray node {socket.gethostname()} cannot read this run's predictions: {folder} "
                                 f"({seen}); its WildLens store is {home}. Every node must read the run store the "
                                 f"driver uses ({driver_home}): mount it there, or start that node's Ray with "
                                 "WILDLENS_HOME set to where it mounts it.")
    rows = PredictionParts.read_folders(folders)
    if usable is not None:
        rows = rows[rows["image"].isin(usable)].reset_index(drop=True)
    counted = ChangeCount()
    if view != RAW:
        curated, change = apply_curation(rows, curation)
        counted.add(rows, change, curation)
        rows = curated
    # cache_dir False (--no-cache): memory only on the node too; None: the node's store's cache.
    tables = compute_metric_tables(rows, confusion_top_k=confusion_top_k, ci=ci, cache_dir=cache_dir)
    return {"index": row["index"], **{name: _to_arrow(getattr(tables, name)) for name in TABLES},
            "relabelled": sorted(counted.relabelled), "excluded": sorted(counted.excluded),
            "relabelled_rows": counted.relabelled_rows, "excluded_rows": counted.excluded_rows}


def ray_metric_tables(run: Run, view: str = RAW, *, curation: Curation | None = None,
                      confusion_top_k: int | None = DEFAULT_CONFUSION_TOP_K, ci=DEFAULT_INTERVALS,
                      chunk_rows: int = STREAM_ROWS, address: str | None = None, join_timeout: float | None = None,
                      cache_dir=None,
                      progress: Callable[[int, int], None] | None = None) -> tuple[MetricTables, ViewChange]:
    """:func:`explain.streaming.stream_metric_tables` with each chunk of models computed by a Ray
    Data task on the cluster at ``address`` (else ``RAY_ADDRESS``, else a local instance); the same
    tables. ``progress(done, total)`` as chunks come back."""
    from core.errors import WildLensError
    from core.raysession import _import_ray, portable_path, ray_session, user_error
    from .schema import METRIC_SCHEMAS

    check_view(view)
    ray = _import_ray()
    import ray.data

    home = default_root().resolve()
    counts = part_rows(run)  # the footers, read once: the chunks, and what each node must find
    chunks = model_chunks(run, chunk_rows, counts)
    if not chunks:
        from .streaming import stream_metric_tables

        return stream_metric_tables(run, view, confusion_top_k=confusion_top_k, ci=ci, cache_dir=cache_dir)
    usable = run.usable_files()
    if view != RAW and curation is None:
        curation = read_curation(run)
    # Folder names below the run's predictions folder (sent as a store-relative path): a folder that is a
    # link is followed on the node as it is here.
    items = [{"index": i, "folders": [f.name for f in chunk], "rows": [counts[f] for f in chunk]}
             for i, chunk in enumerate(chunks)]
    with ray_session(address, join_timeout):  # (which turns Ray Data's progress bars off)
        with warnings.catch_warnings():
            # Ray 2.60 (pinned) names no other way to bound a task's retries in map than this remote
            # argument, which it marks deprecated for 2.64 (as classify.engine.ray_engine says).
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            dataset = ray.data.from_items(items, override_num_blocks=len(items)).map(
                _chunk_tables, num_cpus=1, max_retries=MAX_RETRIES,
                fn_kwargs={"driver_home": str(home), "usable": usable, "view": view, "curation": curation,
                           "predictions": portable_path(str(run.predictions_dir.resolve()), home),
                           "confusion_top_k": confusion_top_k, "ci": ci,
                           "cache_dir": False if cache_dir is False else None})
        answers = {}
        try:
            for answer in dataset.iter_rows():
                answers[int(answer["index"])] = answer
                if progress is not None:
                    progress(len(answers), len(items))
        except WildLensError:
            raise
        except Exception as exc:  # a node's WildLensError (a damaged part, another store) arrives wrapped by Ray
            found = user_error(exc)
            if found is not None:
                raise found from None
            raise
    counted = ChangeCount()
    parts = []
    for i in range(len(items)):
        answer = answers[i]
        parts.append((chunks[i], MetricTables(*(_from_arrow(answer[name]).astype(METRIC_SCHEMAS[name])
                                                for name in TABLES))))
        counted.relabelled |= set(answer["relabelled"])
        counted.excluded |= set(answer["excluded"])
        counted.relabelled_rows += int(answer["relabelled_rows"])
        counted.excluded_rows += int(answer["excluded_rows"])
    return concat_tables(parts, ci), counted.view_change()
