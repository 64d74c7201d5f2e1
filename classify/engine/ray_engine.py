"""The Ray engine: the same inference as :func:`classify.engine.pipeline.run_local`, on Ray Data actors.

``InferenceOptions(engine="ray")`` (``python -m classify --engine ray``) sends a run's images to
a Ray cluster, or to a Ray instance started on this machine when none is named, and stores the
rows exactly as the local engine does. How:

* The driver (this process) plans as the local engine does (``pipeline._plan``: the same checks,
  the same (model, image) pairs skipped, the same passes), then, per pass, builds a Ray Dataset of
  the images still to do: one row per image with its path, true wnid, known error and the models
  that still need it (``ray.data.from_items``).
* ``map_batches`` runs :class:`PredictActor`, a callable class, on an actor pool
  (``ActorPoolStrategy(size=actors)``; ``num_gpus`` per actor on GPU nodes, CPU actors otherwise).
  Each actor loads the pass's models once (``pipeline._load_pass``: the same backend choice, batch-
  norm folding, feature taps), decodes each batch with the local engine's code
  (``pipeline.DecodedCrops``: the same guards, failures as rows), in a thread pool of the actor's
  CPUs, and computes the rows with ``pipeline._batch_rows``. Decoding happens inside the actor,
  not in a separate Ray stage: on a CPU node a decode stage competes with the actors for the same
  cores (with two actors on two cores it would never be scheduled), and it would ship every crop
  through the object store (150 kB per image and geometry) only to be read once.
* A batch's rows leave the actor as one Arrow IPC stream (:func:`encode_frame`): the prediction
  columns as they are (float64 probabilities bit for bit), features as float32 lists, a zero-shot
  model's text classifier as its own columns. No pickle in our payload, and no dependence on how
  Ray converts a column of arrays of different lengths.
* The driver is the one writer: it reads the batches as they finish (``iter_batches``), drops any
  (model, image) row it has already stored (a batch retried after a worker died comes back whole),
  hands the rest to the same sink as the local engine (part files, atomic, ``core.parts``) and
  reports progress. Killed driver: the part files say what is done and a re-run skips it, as with
  the local engine. Killed worker: Ray restarts the actor and retries its batches (at most
  ``MAX_RETRIES`` times; Ray Data's default is forever); the driver's filter keeps each row once.
* The actors' device and precision are theirs (:func:`actor_precision`: resolved by a task with an
  actor's resources, on the actors' hardware), so ids and autocast follow the actors, not the driver.

Where Ray runs (:func:`core.raysession.ray_session`): ``InferenceOptions.ray_address``
(``--ray-address``), else ``RAY_ADDRESS``, joins a cluster; else a local instance is started for
this process. Every worker needs WildLens and its packages installed (``pip install -e '.[ray]'``
on each node, the same version). Images in the driver's run store travel as paths relative to it
(:func:`_portable`): a node reads them under its own ``WILDLENS_HOME`` when its Ray was started with
one (the shared store mounted at another path there), else under the driver's path; images outside
the store must be at the same absolute path on every node (NFS, a shared volume). Before the first
row is stored, a probe on every alive node that can host an actor (:func:`start_probes`,
:func:`finish_probes`, running while the actors start) imports WildLens, reads sample images and
checks the models' weights, and refuses in one line naming the node and what it lacks.

A node lost mid-run (its raylet gone): Ray retries the lost actor's batches where it can; where it
gives up, the driver waits for the cluster to mark the node dead (:data:`NODE_LOSS_WAIT`) and goes on
with the images still to do on as many actors as the nodes left hold. Stored rows stay stored, no
row is stored twice, and the report names the node (``InferenceReport.lost_nodes``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from core.errors import OptionError, WildLensError
from core.progress import ProgressCallback, report
from core.runstore import HOME_ENV, default_root
from core.tables import ipc_bytes, ipc_table
# Ray itself (installed or not, the session, joining a cluster) lives in core: probe sweeps run on it too.
# ray_available, ray_session, ray_version and _check_reachable are also read through this module (pages,
# benchmarks, tests): the engine's names for them.
from core.raysession import (RayEngineError, _check_reachable, _import_ray, ray_available, ray_session,  # noqa: F401
                             ray_version)
# Paths in the driver's run store travel relative to it; each node reads them under its own store.
from core.raysession import HOME_PREFIX, node_home as _node_home, node_path as _local, portable_path as _portable
from core.userfile import regular_file_size
from core.raysession import exception_chain, user_error as _user_error  # a worker's WildLensError out of what Ray raised

from classify.engine import gpu_decode
from classify.engine.device import precision_name
from classify.engine.ray_probe import probe_node as _probe_node  # (a light module: see its docstring)
from classify.engine.pipeline import (CollateCrops, CropBatch, DecodedCrops, _batch_rows, _load_pass, _pass_label, _plan, _Settings, base_entry, decode_on_device, mark_stored, stamping)
from classify.engine.types import ImageTask, InferenceOptions, InferenceReport
from classify.models.registry import ModelEntry

if TYPE_CHECKING:
    import torch

SAMPLE_IMAGES = 8  # images each node must read before the run starts (check_workers)
MAX_RETRIES = 3  # restarts of a dead actor, and retries of its batches
MAX_BLOCKS = 10_000  # Ray blocks per pass: each holds a whole number of batches
PROBE_SECONDS = 300  # the node probes' overall deadline
ACTOR_THREADS = "the actors' CPU threads"  # InferenceReport.decode when no image was decoded on a device
FEATURES = "features"
KIND = "feature_kind"
TEXT = "text_classifier"
_TEXT_FIELDS = ("text_values", "text_rows", "text_wnids", "text_logit_scale")
# Seconds to wait, after a batch failed the way a lost node makes it fail (an actor, worker or object
# gone: _may_be_node_loss), for the Ray cluster to list a node as dead (node loss: redo its batches
# elsewhere) before the failure is reported as it is.
# Ray marks a node dead after its health checks fail (3 s apart, 5 in a row by default: ~15 s).
NODE_LOSS_WAIT = 30.0
# The same wait for a node whose probe Ray refused as unschedulable (finish_probes): gone, or still there.
PROBE_GONE_WAIT = NODE_LOSS_WAIT


# --------------------------------------------------------------------------- the actors' device
def _resolve_here(device_type: str, precision: str) -> dict:
    """Run with an actor's resources: its device, ``precision`` and the default precision as this
    hardware resolves them (a GPU's bf16 support, a CPU's bf16 instructions), or the refusal."""
    from classify.engine.device import resolve_precision, select_device

    try:
        device = select_device(device_type)
        return {"precision": resolve_precision(precision, device), "default": resolve_precision("auto", device)}
    except WildLensError as exc:
        return {"error": str(exc)}


_RESOLVED: dict[tuple, tuple] = {}  # (Ray session, device, precision, GPUs per actor) -> (device, precision, default)


def actor_device_type(options: InferenceOptions, nodes: Sequence[dict[str, float]]) -> str:
    """'cuda' for GPU actors, 'cpu' for CPU actors; ``--device`` with the Ray engine is auto, cpu
    or cuda (Ray gives each actor its GPUs, so cuda:N means nothing there)."""
    if options.device not in ("auto", "cpu", "cuda"):
        raise OptionError(f"--device {options.device} with --engine ray: use auto, cpu or cuda (Ray gives each actor "
                          "its GPUs; --ray-gpus-per-actor sets how many).")
    gpus = sum(float(n.get("GPU", 0)) for n in nodes)
    if options.device == "cuda" and (not gpus or options.ray_gpus_per_actor == 0):
        raise OptionError("--device cuda with --engine ray, but " + ("the Ray cluster has no GPU" if not gpus else
                          "--ray-gpus-per-actor is 0") + "; use --device auto or cpu.")
    return "cuda" if plan_actors(options, nodes).gpus_per_actor else "cpu"


def actor_precision(options: InferenceOptions) -> tuple["torch.device", str, str]:
    """(device, precision, default precision) of the actors, resolved on their own hardware by a
    task with an actor's resources (a driver without a GPU cannot tell what 'auto' is on an H200),
    once per Ray session and options; a precision that hardware lacks is its one-line refusal."""
    import torch

    ray = _import_ray()
    with ray_session(options.ray_address, options.ray_join_timeout) as where:
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if options.device == "cpu" and options.ray_gpus_per_actor:
            raise OptionError("--device cpu with --ray-gpus-per-actor: drop one of them.")
        if options.device == "cpu":
            options = dataclasses.replace(options, ray_gpus_per_actor=0)
        kind = actor_device_type(options, nodes)
        layout = plan_actors(options, nodes)
        key = (where, ray.get_runtime_context().get_job_id(), kind, options.precision, layout.gpus_per_actor)
        if key not in _RESOLVED:
            task = ray.remote(num_cpus=0, num_gpus=layout.gpus_per_actor or 0, max_retries=0)(_resolve_here)
            answer = ray.get(task.remote(kind, options.precision), timeout=600)
            if "error" in answer:
                raise OptionError(f"On the Ray actors' {kind.upper()}s: {answer['error']}")
            _RESOLVED[key] = (torch.device(kind), answer["precision"], answer["default"])
        return _RESOLVED[key]


# --------------------------------------------------------------------------- the node check
def node_name(node: dict) -> str:
    """A node of ``ray.nodes()`` as a person finds it in ``ray status``: its address and the start of
    its node id (the nodes of one machine share an address)."""
    where = node.get("NodeManagerAddress") or node.get("NodeManagerHostname") or "?"
    return f"{where} (node {str(node.get('NodeID', ''))[:8]})"


@dataclass(frozen=True)
class Probe:
    node: str  # node_name()
    node_id: str
    future: object
    driver_home: str | None = None


def start_probes(paths: Sequence[str], models: Sequence[ModelEntry] = (), checkpoints: dict[str, str] | None = None,
                 allow_download: bool = False, layout: "RayPlan | None" = None,
                 driver_home: str | None = None, sizes: Sequence[int] | None = None) -> list[Probe]:
    """Start :func:`_probe_node` on every alive node that can host an actor of ``layout`` (every
    alive node without one). The run starts its actors meanwhile and waits for the answers (:func:`finish_probes`) before it stores the
    first row. ``driver_home``: the driver's run store, against which store-relative ``paths``
    (:func:`_portable`) are read on a node without a WILDLENS_HOME of its own."""
    ray = _import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0, max_retries=0)(_probe_node)
    pairs = [(base_entry(e), (checkpoints or {}).get(base_entry(e).id)) for e in models]
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if layout is not None:  # a head node with no CPUs for actors does not need the images
        nodes = [n for n in nodes if float(n.get("Resources", {}).get("CPU", 0)) >= layout.cpus_per_actor
                 and float(n.get("Resources", {}).get("GPU", 0)) >= layout.gpus_per_actor]
    return [Probe(node_name(n), n["NodeID"],
                  probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                  .remote(list(paths), pairs, allow_download, driver_home, None if sizes is None else list(sizes)),
                  driver_home) for n in nodes]


def finish_probes(probes: list[Probe]) -> int:
    """The probes' answers; raises :class:`RayEngineError` naming the first node that cannot
    run WildLens, read the images or find the weights. Returns the number of nodes checked (a node
    that left the cluster since the probes started is not one: :func:`_node_gone`)."""
    if not probes:
        return 0
    ray = _import_ray()
    ready, _ = ray.wait([p.future for p in probes], num_returns=len(probes), timeout=PROBE_SECONDS)
    checked = len(probes)
    for probe in probes:
        name = probe.node
        if probe.future not in ready:
            raise RayEngineError(f"Ray node {name} did not answer the image and weights check within {PROBE_SECONDS} s "
                                 "(busy, or its workers cannot start); check 'ray status', or run with --engine local.")
        try:
            answer = ray.get(probe.future)
        except Exception as exc:  # noqa: BLE001  (ray wraps a worker's import error in its own types)
            if _node_gone(exc):
                # Ray refused the probe pinned to the node: the node left the cluster after ray.nodes() listed
                # it (the GCS lists a dead node as alive until its health checks fail), or it is draining or
                # so new that this raylet has not heard of it. Gone (Ray lists it dead within the wait): it
                # hosts no actor, so it needs nothing; not counted. Was: "cannot run WildLens ... install it
                # there" for a node that no longer existed (a run started right after a node died, 4 of 4
                # tries, 2026-12-07). Still there: refused, as it was never checked.
                if _lost_since(ray, {probe.node_id: name}, PROBE_GONE_WAIT):
                    checked -= 1
                    continue
                raise RayEngineError(f"Ray node {name} refused the image and weights check ({_last_line(exc)}): it "
                                     "may be draining or still joining the cluster; check 'ray status' and run "
                                     "again.") from None
            raise RayEngineError(f"Ray node {name} cannot run WildLens ({_last_line(exc)}); install it there the same "
                                 "way as here (pip install -e '.[ray]' in the same checkout).") from None
        if answer["unreadable"] and answer.get("in_store") and answer["home"] != probe.driver_home:
            raise RayEngineError(
                f"Ray node {name} cannot read this run's images: {answer['unreadable']}; its WildLens store is "
                f"{answer['home']}, not the one this run is in ({probe.driver_home}). Start Ray on that node with "
                f"{HOME_ENV} set to where it mounts this store (e.g. {HOME_ENV}={probe.driver_home} ray start "
                "--address HEAD:6379), or without it to use this machine's path.")
        if answer["unreadable"] and answer.get("in_store"):
            raise RayEngineError(
                f"Ray node {name} cannot read this run's images at this machine's store path: {answer['unreadable']}; "
                f"mount the run store there ({probe.driver_home}), or start Ray on that node with {HOME_ENV} set to "
                f"where it mounts the store ({HOME_ENV}=/its/mount ray start --address HEAD:6379).")
        if answer["unreadable"]:
            raise RayEngineError(f"Ray node {name} cannot read {answer['unreadable']}: with --engine ray every node must "
                                 "read the images at the same path as this machine; put the run store on a "
                                 "filesystem every node mounts at the same place (NFS), with WILDLENS_HOME there.")
        if answer["weights"]:
            raise RayEngineError(f"Ray node {name}: {answer['weights'][0]}")
    if not checked:
        raise RayEngineError(f"every Ray node this run was planned on left the cluster before it started "
                             f"({', '.join(p.node for p in probes)}); check 'ray status' and run again.")
    return checked


def _node_gone(exc: BaseException) -> bool:
    """Whether Ray refused a probe as unschedulable: pinned to its node (NodeAffinitySchedulingStrategy,
    soft=False), that means the node is not alive in this raylet's view (gone, draining, or not yet
    heard of); a probe asks for no resources, so it is never infeasible otherwise (Ray's
    NodeAffinitySchedulingPolicy). The caller tells gone from the rest (:func:`_lost_since`)."""
    try:
        from ray.exceptions import TaskUnschedulableError
    except ImportError:  # pragma: no cover - a Ray without the type
        return False
    return isinstance(exc, TaskUnschedulableError)


def check_workers(paths: Sequence[str], models: Sequence[ModelEntry] = (), checkpoints: dict[str, str] | None = None,
                  allow_download: bool = False) -> int:
    """On every alive node of the Ray instance: read ``paths`` (images the driver read) and find
    the weights of ``models``; returns the number of nodes checked, or raises
    :class:`RayEngineError` naming the node and what it lacks."""
    return finish_probes(start_probes(paths, models, checkpoints, allow_download))


def _sizes(paths: Sequence[str]) -> list[int]:
    """The driver's size of each sample image (a node reading another file at the same path differs)."""
    out = []
    for path in paths:
        try:
            out.append(os.stat(path).st_size)
        except OSError:
            out.append(-1)  # gone since sampled: any size there is "another file"
    return out


def _last_line(exc: BaseException) -> str:
    """The last line of what Ray says of a worker's failure: the original exception's type and words."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def sample_paths(tasks: Sequence[ImageTask], n: int = SAMPLE_IMAGES) -> list[str]:
    """Up to ``n`` image paths the driver can read, spread over the list (first, last, between)."""
    usable = [t.path for t in tasks if not t.error and t.path]
    if not usable:
        return []
    picks = sorted({round(i * (len(usable) - 1) / max(1, n - 1)) for i in range(n)})
    out = []
    for i in picks:
        try:
            regular_file_size(usable[i])  # (a FIFO there would have held the run: opened without blocking)
            out.append(usable[i])
        except OSError:  # unreadable here too: a failed row, as with the local engine, not a node problem
            continue
    return out


# --------------------------------------------------------------------------- rows across processes
def encode_frame(frame: pd.DataFrame) -> bytes:
    """A batch's rows -> one Arrow IPC stream (no pickle): the prediction columns as they are,
    ``features`` as float32 lists, a text classifier as flat values, row count, wnids, scale."""
    import pyarrow as pa

    plain = frame.drop(columns=[c for c in (FEATURES, TEXT) if c in frame.columns])
    table = pa.Table.from_pandas(plain, preserve_index=False)
    if FEATURES in frame.columns:
        vectors = [None if v is None else np.asarray(v, dtype=np.float32) for v in frame[FEATURES]]
        table = table.append_column(FEATURES, pa.array(vectors, type=pa.list_(pa.float32())))
    if TEXT in frame.columns:
        def fields(text) -> tuple:  # one row's (values, rows, wnids, logit scale), or Nones
            if not isinstance(text, dict):
                return None, None, None, None
            matrix = np.asarray(text["classifier"], dtype=np.float32)
            return matrix.reshape(-1), matrix.shape[0], list(text["wnids"]), float(text["logit_scale"])

        values, rows, wnids, scales = list(zip(*(fields(text) for text in frame[TEXT]))) or [()] * 4
        for name, data, kind in zip(_TEXT_FIELDS, (values, rows, wnids, scales),
                                    (pa.list_(pa.float32()), pa.int64(), pa.list_(pa.string()), pa.float64())):
            table = table.append_column(name, pa.array(data, type=kind))
    return ipc_bytes(table)


def decode_frame(data: bytes) -> pd.DataFrame:
    """:func:`encode_frame`'s inverse: features back as float32 arrays, the text classifier as
    the dict ``classify.features.FeatureSink`` stores."""
    table = ipc_table(data)
    extra = [c for c in (FEATURES, *_TEXT_FIELDS) if c in table.column_names]
    frame = table.drop_columns(extra).to_pandas()
    if FEATURES in table.column_names:
        frame[FEATURES] = [None if v is None else np.asarray(v, dtype=np.float32)
                           for v in table.column(FEATURES).to_numpy(zero_copy_only=False)]
    if "text_values" in table.column_names:
        values, rows, wnids, scales = (table.column(n).to_pylist() for n in _TEXT_FIELDS)
        texts = []
        for v, r, w, s in zip(values, rows, wnids, scales):
            texts.append(None if v is None else {"classifier": np.asarray(v, dtype=np.float32).reshape(r, -1),
                                                 "wnids": tuple(w), "logit_scale": s})
        frame[TEXT] = texts
    return frame


# --------------------------------------------------------------------------- the actor
class PredictActor:
    """One Ray Data actor: the pass's models loaded once, then ``__call__`` per batch of images
    (decode in a thread pool, forward, rows as one Arrow IPC stream)."""

    def __init__(self, entries: Sequence[ModelEntry], geometries: Sequence, images: dict[str, int],
                 options: InferenceOptions, batch_size: int, threads: int, tap=None, driver_home: str | None = None):
        import torch

        from classify.engine.device import autocast_dtype, resolve_precision, select_device

        self.home = _node_home(driver_home)  # before the models load: their caches are kept there

        device = select_device(options.device)
        threads = max(1, threads)
        self.streams = threads if device.type == "cpu" else 1
        if device.type == "cpu":
            torch.set_num_threads(1)  # one thread per slice (__call__); ONNX Runtime sessions have one too
        self.settings = _Settings(device, autocast_dtype(options.precision, device), batch_size, 0, 1, options,
                                  resolve_precision(options.precision, device), tap)
        self.geometries = list(geometries)
        # JPEGs decode on a GPU actor's device as in the local engine (classify.engine.gpu_decode), else in threads here.
        choice = gpu_decode.resolve_decode(options.gpu_decode, device)
        why_not = gpu_decode.device_geometries_reason(self.geometries, options.resampler) if choice.on else None
        self.decoder = (gpu_decode.DeviceDecoder(self.geometries, device, options.resampler)
                        if choice.on and why_not is None else None)
        self.decode_reason = choice.reason if self.decoder else (why_not or "")
        from classify.zeroshot.classifier import build_settings

        # A zero-shot model's text classifier is built on the actor's device (the local engine's command
        # line does the same), or read from the cache in the workers' WILDLENS_HOME; on a cluster the
        # actors starting at once may each build it once, so a shared WILDLENS_HOME pays it once after.
        with build_settings(device=device):
            self.loaded = _load_pass(list(entries), self.geometries, images, self.settings)
        self.backends = json.dumps({m.entry.id: m.backend for m in self.loaded})
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="wildlens-decode")
        self.collate = CollateCrops(len(self.geometries))

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        tasks = [ImageTask(str(image), _local(str(path), self.home), str(true) or None, str(error) or None)
                 for image, path, true, error in zip(batch["image"], batch["path"], batch["true_wnid"], batch["error"])]
        crops = DecodedCrops(tasks, self.geometries, self.settings.options.jpeg_draft, self.settings.options.resampler,
                             device_jpeg=self.decoder is not None)
        crop_batch = self.collate(list(self.pool.map(crops.__getitem__, range(len(tasks)))))
        counts = {"device": 0, "cpu": len(crop_batch.indices) + len(crop_batch.raw)}
        if self.decoder is not None:
            before = self.decoder.counts.on_device
            with torch.inference_mode():
                crop_batch = decode_on_device(crop_batch, self.decoder)
            counts = {"device": self.decoder.counts.on_device - before}
            counts["cpu"] = len(crop_batch.indices) - counts["device"]
        wanted: dict[str, set[str]] = {m.entry.id: set() for m in self.loaded}
        for task, models in zip(tasks, batch["models"]):
            for model in str(models).split("\n"):
                wanted.setdefault(model, set()).add(task.image)
        def rows(part: CropBatch) -> list[pd.DataFrame]:
            with torch.inference_mode():  # thread-local: set in the thread that computes
                return _batch_rows(part, tasks, self.loaded, wanted, self.settings)

        # On a CPU actor the batch is cut into one slice per CPU, each computed in its own thread
        # with one intra-op thread, as the local engine's forward streams do (classify.engine.device.cpu_streams).
        parts = _split(crop_batch, self.streams)
        frames = [f for part in self.pool.map(rows, parts) for f in part] if len(parts) > 1 else rows(crop_batch)
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        decode = json.dumps({**counts, "reason": self.decode_reason})
        return {"frame": np.array([encode_frame(frame)], dtype=object), "images": np.array([len(tasks)]),
                "backends": np.array([self.backends], dtype=object), "decode": np.array([decode], dtype=object)}


def _retries() -> dict[str, int]:
    return {"max_restarts": MAX_RETRIES, "max_task_retries": MAX_RETRIES}


def _blocks(rows: int, batch: int) -> int:
    """Ray blocks for ``rows`` rows: each a whole number of batches (a block of one batch where
    there are at most MAX_BLOCKS batches), so a retried block redoes whole batches and no batch is
    cut in two by a block boundary."""
    batches = max(1, math.ceil(rows / batch))
    per_block = math.ceil(batches / MAX_BLOCKS)
    return max(1, math.ceil(batches / per_block))


def _decode_text(decoded_by: dict) -> str:
    """``InferenceReport.decode`` of a Ray run: what decoded the images on the actors."""
    reasons = "; ".join(sorted(decoded_by["reasons"]))
    if decoded_by["device"]:
        return f"{reasons} for {decoded_by['device']} JPEGs, the actors' CPU threads for {decoded_by['cpu']} other images"
    return f"{ACTOR_THREADS} ({reasons})" if reasons else ACTOR_THREADS


def _split(batch: CropBatch, parts: int) -> list[CropBatch]:
    """``batch`` in up to ``parts`` slices of consecutive images (failures ride with the first)."""
    n = len(batch.indices)
    parts = max(1, min(parts, n))
    if parts == 1:
        return [batch]
    bounds = [round(k * n / parts) for k in range(parts + 1)]
    return [CropBatch(batch.indices[a:b], tuple(c[a:b] for c in batch.crops), batch.failed if k == 0 else [])
            for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _pass_rows(tasks: Sequence[ImageTask], entries: Sequence[ModelEntry], pending: dict[str, set[str]],
               home: Path | None = None) -> list[dict]:
    """The Ray Dataset's rows of a pass: each image some model of it still needs, its path relative to
    the driver's store ``home`` where it lies in it (:func:`_portable`)."""
    rows = []
    for task in tasks:
        models = [e.id for e in entries if task.image in pending[e.id]]
        if models:
            rows.append({"image": task.image, "path": _portable(task.path, home), "true_wnid": task.true_wnid or "",
                         "error": task.error or "", "models": "\n".join(models)})
    return rows


@dataclass
class RayPlan:
    actors: int
    gpus_per_actor: float
    cpus_per_actor: float
    batch_size: int


def plan_actors(options: InferenceOptions, nodes: Sequence[dict[str, float]]) -> RayPlan:
    """Actors, GPUs and CPUs per actor, batch size from the options and the alive nodes' resources
    (one dict per node, as ``ray.nodes()`` gives them): on a cluster with GPUs one actor per GPU,
    each with the CPUs its node has per GPU (its decode threads); else one CPU actor, the CPUs
    shared among the actors, never more than the largest node has (an actor is on one node)."""
    from classify.engine.device import DEFAULT_BATCH

    gpus_here = sum(float(n.get("GPU", 0)) for n in nodes)
    gpus = options.ray_gpus_per_actor if options.ray_gpus_per_actor is not None else (1.0 if gpus_here else 0.0)
    if gpus < 0:
        raise OptionError(f"--ray-gpus-per-actor {gpus:g}: give 0 (CPU actors) or a positive number.")
    actors = options.ray_actors or (max(1, int(gpus_here // gpus)) if gpus else 1)
    if actors < 1:
        raise OptionError(f"--ray-actors {actors}: give at least 1.")
    if gpus and gpus * actors > gpus_here:
        raise OptionError(f"{actors} actors x {gpus:g} GPUs need {gpus * actors:g} GPUs; the Ray cluster has "
                          f"{gpus_here:g}: lower --ray-actors or use CPU actors (--ray-gpus-per-actor 0).")
    if gpus:
        per_gpu = [float(n.get("CPU", 0)) / float(n["GPU"]) for n in nodes if float(n.get("GPU", 0)) > 0]
        cpus = max(1.0, float(int(min(per_gpu) * gpus))) if per_gpu else 1.0
    else:  # the most CPUs per actor with which all the actors fit on the nodes (an actor is on one node)
        sizes = [int(float(n.get("CPU", 0))) for n in nodes]
        fits = [c for c in range(1, max(sizes, default=1) + 1) if sum(size // c for size in sizes) >= actors]
        if not fits:  # actors of 1 CPU each that the cluster cannot place: Ray waited for them for ever
            raise OptionError(f"{actors:,} CPU actors need {actors:,} CPUs; the Ray cluster has {sum(sizes):,}: lower "
                              "--ray-actors.")
        cpus = float(max(fits))
    batch = options.batch_size or DEFAULT_BATCH.get("cuda" if gpus else "cpu", 16)
    return RayPlan(actors, gpus, cpus, batch)


class _NodesLost(Exception):
    """Raised inside :func:`_store_pass` when a batch failed because Ray nodes died (their names)."""

    def __init__(self, names: list[str], done: int = 0):
        super().__init__(", ".join(names))
        self.names, self.done = names, done  # done: images the pass finished before the loss


# What Ray raises when an actor, its worker or its node is gone (the failure a lost node gives).
_LOSS_WORDS = re.compile(r"ActorUnavailableError|ActorDiedError|NodeDiedError|WorkerCrashedError|ObjectLostError|"
                         r"actor is (temporarily )?unavailable|node .{0,60}(died|dead)")


def _may_be_node_loss(exc: BaseException) -> bool:
    """Whether Ray's failure is of the kind a lost node gives (an actor, worker or object gone)."""
    from ray.exceptions import NodeDiedError, ObjectLostError, RayActorError, WorkerCrashedError

    lost = (RayActorError, NodeDiedError, ObjectLostError, WorkerCrashedError)
    return any(isinstance(e, lost) for e in exception_chain(exc)) or bool(_LOSS_WORDS.search(str(exc)))


def _raise_ray_failure(exc: BaseException, watch, answered: bool, before_first_row, done: int):
    """Turn what Ray raised while the driver waited for a batch into what the user should see: the
    nodes lost meanwhile (:class:`_NodesLost`, for the caller to go on without them), the worker's
    own WildLensError in one line, a node's probe refusal, or an actor that could not start."""
    user = _user_error(exc)
    lost = watch() if watch is not None and user is None and _may_be_node_loss(exc) else []
    if lost:  # the cluster lost a node: the caller goes on with what is left
        raise _NodesLost(lost, done) from None
    if not answered:  # a node that lacks the weights says so, rather than the actor it broke
        before_first_row()
    if user is not None:
        raise user from None
    from ray.exceptions import RayActorError

    if isinstance(exc, RayActorError):  # an actor that could not start: its exception is only text
        raise RayEngineError(f"A Ray actor could not start ({_last_line(exc)}); "
                             "fix that on the node, or run with --engine local.") from None
    raise exc


def _alive_nodes(ray) -> dict[str, str]:
    """Node id -> :func:`node_name` of every node Ray lists as alive."""
    return {n["NodeID"]: node_name(n) for n in ray.nodes() if n.get("Alive")}


def _lost_since(ray, alive: dict[str, str], wait: float = NODE_LOSS_WAIT) -> list[str]:
    """Names of the nodes of ``alive`` that Ray lists as dead now, waiting up to ``wait`` seconds for
    its health checks to notice (a batch fails as soon as its actor's node goes; the cluster marks
    the node dead a few seconds later). Empty when every node is still alive after the wait."""
    deadline = time.monotonic() + wait
    while True:
        now = _alive_nodes(ray)
        lost = [name for node, name in alive.items() if node not in now]
        if lost or time.monotonic() >= deadline:
            return lost
        time.sleep(0.25)


def _layout_left(ray, options: InferenceOptions, before: RayPlan, lost: list[str]) -> RayPlan:
    """The actor layout on the nodes left after a loss: as many of ``before``'s actors as still fit."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    for actors in range(before.actors, 0, -1):
        try:  # the same kind of actor (its GPUs): a GPU run never falls back to CPU actors asking for CUDA
            return plan_actors(dataclasses.replace(options, ray_actors=actors, ray_gpus_per_actor=before.gpus_per_actor),
                               nodes)
        except OptionError:
            continue
    raise RayEngineError(f"Lost Ray node{'s' if len(lost) > 1 else ''} {', '.join(lost)} and no node left can run an "
                         "actor; every row stored so far is kept: start nodes ('ray start --address HEAD:6379') and run "
                         "the same command again to finish, or use --engine local.")


def run_inference_ray(tasks: Sequence[ImageTask], models: Iterable[str | ModelEntry],
                      sink: Callable[[pd.DataFrame], object], already_done: dict[str, set[str]] | None = None,
                      options: InferenceOptions | None = None, progress: ProgressCallback | None = None,
                      tap: Callable | None = None) -> InferenceReport:
    """:func:`classify.engine.pipeline.run_local` on Ray Data (the module docstring says how); ``tap``
    is sent to the actors by reference (``classify.features.FeatureTap``, importable on every node).
    A node lost mid-run (its raylet gone): the pass goes on with the images still to do, on as many
    actors as the nodes left can hold; the report names the node (``InferenceReport.lost_nodes``)."""
    options = options or InferenceOptions(engine="ray")
    _import_ray()  # the install hint before anything else
    import ray
    import ray.data

    with ray_session(options.ray_address, options.ray_join_timeout) as where:
        device, precision, default = actor_precision(options)
        # The actors compute on their device ('cuda': the GPUs Ray gives each; 'cpu'), not the driver's.
        options = dataclasses.replace(options, device=device.type,
                                      ray_gpus_per_actor=0 if device.type == "cpu" else options.ray_gpus_per_actor)
        plan = _plan(tasks, models, already_done, options, where=(device, precision, default), tap=tap)
        pending, reports = plan.pending, plan.reports
        started = time.perf_counter()
        decoded = 0
        backends: dict[str, str] = {}
        decoded_by = {"device": 0, "cpu": 0, "reasons": set()}  # images decoded on actors' devices / in their threads
        home = default_root().resolve()  # the driver's run store: its images travel relative to it
        alive = _alive_nodes(ray)
        lost_nodes: list[str] = []
        layout = plan_actors(options, [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")])
        todo = [e for e in plan.entries if pending[e.id]]
        samples = sample_paths([t for t in tasks if any(t.image in pending[e.id] for e in todo)]) if todo else []
        probes = start_probes([_portable(p, home) for p in samples], todo, options.checkpoints, options.allow_download,
                              layout, str(home), _sizes(samples)) if todo else []
        for number, pass_entries in enumerate(plan.passes, 1):
            while True:  # once, or again on the nodes left after a node was lost
                rows = _pass_rows(tasks, pass_entries, pending, home)
                if not rows:
                    break
                label = _pass_label(pass_entries)
                report(progress, "inference", 0, len(rows), task=label,
                       message=f"loading model{'s' if len(pass_entries) > 1 else ''} on {layout.actors} Ray "
                               f"actor{'s' if layout.actors > 1 else ''} (pass {number}/{len(plan.passes)})")
                geometries = sorted({e.input_config().geometry for e in pass_entries})
                images = {e.id: len(pending[e.id]) for e in pass_entries}
                blocks = _blocks(len(rows), layout.batch_size)
                with warnings.catch_warnings():
                    # Ray 2.60 (pinned) names no other way to bound an actor pool's restarts and retries
                    # than these remote arguments, which it marks deprecated for 2.64.
                    warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
                    dataset = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
                        PredictActor, batch_format="numpy", batch_size=layout.batch_size,
                        fn_constructor_kwargs={"entries": list(pass_entries), "geometries": geometries,
                                               "images": images, "options": options, "batch_size": layout.batch_size,
                                               "threads": int(layout.cpus_per_actor), "tap": tap,
                                               "driver_home": str(home)},
                        compute=ray.data.ActorPoolStrategy(size=layout.actors),
                        num_gpus=layout.gpus_per_actor or None, num_cpus=layout.cpus_per_actor,
                        # A batch whose worker keeps dying (out of memory, a native crash) fails the run after a
                        # few tries instead of looping (Ray Data's default is forever); rows stored stay stored.
                        ray_remote_args_fn=_retries)
                answer = probes
                try:
                    decoded += _store_pass(dataset, rows, pass_entries, pending, reports, stamping(sink, plan.stamps),
                                           progress, label, backends, lambda: finish_probes(answer), decoded_by,
                                           watch=lambda: _lost_since(ray, alive))
                    probes = []  # answered
                    # Ray may have retried a lost node's batches on its own (an actor restarted elsewhere):
                    # the pass then ends well, and the node is still named.
                    now = _alive_nodes(ray)
                    absorbed = [name for node, name in alive.items() if node not in now]
                    if absorbed:  # the next pass plans on what is left
                        lost_nodes += absorbed
                        alive = {node: name for node, name in alive.items() if node in now}
                        layout = _layout_left(ray, options, layout, lost_nodes)
                    break
                except _NodesLost as lost:
                    # What the lost node stored is kept (the sink wrote it); what it had in flight is in
                    # pending still and is planned again on the nodes left.
                    lost_nodes += lost.names
                    decoded += lost.done
                    alive = {node: name for node, name in alive.items() if name not in lost.names}
                    probes = [p for p in probes if p.node_id in alive]
                    layout = _layout_left(ray, options, layout, lost_nodes)
                    report(progress, "inference", 0, len(rows), task=label,
                           message=f"lost Ray node {', '.join(lost.names)}: going on with {layout.actors} "
                                   f"actor{'s' if layout.actors > 1 else ''} on the nodes left")
    precision_text = "int8" if precision == "int8" else precision_name(plan.settings.amp)
    return InferenceReport(dict(reports), decoded, time.perf_counter() - started, f"{device.type} (Ray actors)",
                           precision_text, backends, options.resampler, decode=_decode_text(decoded_by),
                           engine=f"ray ({layout.actors} actor{'s' if layout.actors > 1 else ''}"
                                  f"{f' x {layout.gpus_per_actor:g} GPU' if layout.gpus_per_actor else ''}, {where})",
                           lost_nodes=lost_nodes)


def _store_pass(dataset, rows: list[dict], entries: Sequence[ModelEntry], pending: dict[str, set[str]],
                reports: dict, sink, progress, label: str, backends: dict[str, str],
                before_first_row: Callable[[], object] = lambda: None, decoded_by: dict | None = None,
                watch: Callable[[], list[str]] | None = None) -> int:
    """The driver's loop: each finished batch's new rows to the sink, then progress. Returns the
    images whose every model of the pass is done. ``before_first_row`` (the node probes' answers)
    runs before anything is stored. ``watch``: after a Ray failure of the kind a lost node gives
    (:func:`_may_be_node_loss`), the names of the nodes lost meanwhile (:func:`_lost_since`); any,
    and :class:`_NodesLost` is raised. Failures of the driver itself (storing rows) are raised as
    they are."""
    waiting = {row["image"]: len(row["models"].split("\n")) for row in rows}
    decoded_by = decoded_by if decoded_by is not None else {"device": 0, "cpu": 0, "reasons": set()}
    done = 0
    answered = False
    batches = iter(dataset.iter_batches(batch_size=None, batch_format="numpy"))
    try:
        # Execution starts at the first batch asked for, so the probes run while the actors start.
        while True:
            try:
                out = next(batches)
            except StopIteration:
                break
            except WildLensError:
                raise
            except Exception as exc:  # noqa: BLE001  (Ray's failures; the driver's own below are not caught)
                _raise_ray_failure(exc, watch, answered, before_first_row, done)
            if not answered:
                before_first_row()
                answered = True
            for blob, ran_on, decode in zip(out["frame"], out["backends"], out["decode"]):
                backends.update(json.loads(ran_on))
                frame = decode_frame(blob)
                if frame.empty:
                    continue
                # A batch retried after a worker died comes back whole: keep each row once.
                keep = np.fromiter((image in pending.get(model, ()) for model, image in zip(frame["model"], frame["image"])),
                                   dtype=bool, count=len(frame))
                frame = frame[keep].reset_index(drop=True)
                if frame.empty:
                    continue
                decode = json.loads(decode)  # counted once: a retried batch's rows were dropped above
                decoded_by["device"] += decode["device"]
                decoded_by["cpu"] += decode["cpu"]
                if decode["reason"]:
                    decoded_by["reasons"].add(decode["reason"])
                sink(frame)  # a failure to store (a full disk) is the driver's: raised as it is, never a node loss
                mark_stored(frame, pending, reports)
                for image in frame["image"]:
                    waiting[image] -= 1
                    if waiting[image] == 0:
                        done += 1
                failed_now = sum(r.failed for r in reports.values())
                report(progress, "inference", done, len(rows), task=label,
                       message=f"{failed_now} unreadable" if failed_now else "classifying on Ray")
    finally:
        close = getattr(batches, "close", None)
        if close is not None:  # stops the actors now, not when the traceback is collected
            close()
    return done
