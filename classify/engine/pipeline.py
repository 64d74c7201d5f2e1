"""The inference pipeline: image tasks in, top-5 rows per (model, image) out, batch by batch.

It owns what happens between a list of images and a sink (:func:`run_local`, reached through ``classify.engine.dispatch.run_inference``); where the
tasks come from and where the rows go are the targets' business (:mod:`classify.targets`), and
device, precision and thread policy are :mod:`classify.engine.device`'s. The pipeline, and why:

* A ``torch.utils.data.DataLoader`` whose worker processes decode each image once
  (``core.imageio.load_rgb``: EXIF, CMYK, palettes, 16-bit, bombs) and crop it once per distinct
  :class:`~classify.models.registry.Geometry` among the models of a pass (:class:`DecodedCrops`). Models
  that differ only in mean/std share the crop; normalisation runs on the device
  (``classify.engine.preprocess``).
* Models run together in *passes* over the same decoded images, as many as fit in a parameter
  budget, ordered by geometry (:func:`plan_passes`); a 600-px EfficientNet-B7 does not force a
  second decode for the 224-px models beside it, and twenty models are not all held in memory at once.
* ``torch.inference_mode``, channels-last memory, and on a GPU autocast or true fp32
  (``classify.engine.device``); probabilities are computed in float32. Batch-norm is folded into
  convolutions where that provably changes nothing (``classify.engine.optimize``). On the CPU several
  batches are computed at once, one thread each (``classify.engine.device.cpu_streams``): no OpenMP
  barriers, and the cores the decode workers leave idle are used.
* On the CPU a model runs on ONNX Runtime where that is installed and its export checks out
  (``classify.engine.onnx_backend``: about twice PyTorch's speed there, logits within 1e-3); otherwise,
  and always on a GPU, on PyTorch (:func:`_load_one`). A zero-shot head runs its image tower there
  and its text classifier's matrix product on PyTorch (:func:`_load_part`). ``InferenceOptions.backend``
  chooses; the report says which backend each model ran on and why.
* Reduced precisions on the CPU (``classify.engine.device.resolve_precision``): ``bf16`` is PyTorch's
  bf16 autocast (batch-norm folded, channels-last; oneDNN's AMX/AVX-512 BF16 kernels), never ONNX
  Runtime, whose CPU provider has no bf16 convolutions; ``int8`` is ONNX Runtime on a statically
  quantized copy of the fp32 export (``classify.engine.quantize``), CNNs only. Rows of a precision other
  than the device's default are stored under their own model id, ``<id>--bf16`` / ``<id>--int8``
  (``classify.engine.options.precision_model_id``, :func:`precision_entries`), so they sit beside the
  default's rows and are resumed separately; the default (fp32 on the CPU, autocast on a GPU, as
  before) keeps the plain id.
* Every batch's rows go to the sink before progress is reported, so a target that stores them at
  once (part files, ``core.parts``) loses at most one batch to a kill; (model, image) pairs the
  caller says are done are skipped.
* An image that cannot be read or decoded becomes a row with status 'failed' and its reason; the
  run goes on. Files are read by ``classify.engine.preprocess.read_image_file``: regular files only, at
  most ``MAX_IMAGE_BYTES``; an image beyond ``classify.engine.preprocess.MAX_ASPECT_RATIO`` is refused
  from its header before it is decoded, which bounds the resize by the model input. Progress
  goes through ``core.progress`` (terminal bar or dashboard).
* On a CUDA device JPEGs are decoded on the GPU (``classify.engine.gpu_decode``, ``InferenceOptions.gpu_decode``):
  decoding was the bound there (ResNet-50 bf16: ~15,000 images/s forward, 2,030 images/s whole
  pipeline with 16 decode workers on an H200). Workers then only read and check a JPEG and hand over
  its bytes (:class:`DecodedCrops` with ``device_jpeg``, :attr:`CropBatch.raw`); :func:`_run_pass`
  decodes each batch on the device, one batch ahead of the forward pass, and crops it there. Other
  formats, and JPEGs the device cannot take, are decoded by the workers as before; the report says
  which path ran (``InferenceReport.decode``). The CPU device never takes this path.
"""
from __future__ import annotations

import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset

import dataclasses

from core.errors import OptionError
from core.imageio import ImageLoadError, load_rgb
from core.progress import ProgressCallback, report
from core.runstore import MODEL_STAMP_COLUMNS, TOP_K

from classify.engine import gpu_decode
from classify.engine.device import (DEFAULT_BATCH, autocast_dtype, check_backend, check_counts, cpu_streams, cpu_threads,
                                    default_num_workers, full_fp32, precision_name, resolve_precision, select_device)
from classify.engine.onnx_backend import (ExportKey, OnnxBackendError, OnnxCache, default_cache_dir, onnx_classifier, onnx_part,
                                          onnxruntime_version)
from classify.engine.optimize import fold_batchnorm
from classify.engine.options import precision_model_id, split_model_id, stored_precision
from classify.engine.preprocess import (DEFAULT_RESAMPLER, check_image_header, check_resampler, crop_to_tensor, load_rgb_draft,
                                        normalizer, read_image_file)
from classify.engine.quantize import Int8Cascade
from classify.engine.types import DECODE_CPU, ImageTask, InferenceOptions, InferenceReport, ModelReport  # noqa: F401
from classify.models.lookup import resolve_models
from classify.models.registry import Geometry, ModelEntry, class_wnids, get_source
from classify.models.weights import WeightsError, file_sha256, load_model, require_weights, weights_status


# --------------------------------------------------------------------------- precision ids
def precision_entries(entries: Sequence[ModelEntry], precision: str, default: str = "fp32",
                      int8_recheck: str = "auto") -> list[ModelEntry]:
    """The entries as results of ``precision`` (a resolved one) are stored: same model, id
    ``<id>--<precision>`` unless it is the device's ``default`` (``classify.engine.options.precision_model_id``);
    int8 alone (``int8_recheck='none'``) is ``<id>--int8-plain`` (``options.stored_precision``). Idempotent."""
    stored = stored_precision(precision, int8_recheck)
    out = []
    for entry in entries:
        model_id = precision_model_id(entry.id, stored, default)
        out.append(entry if model_id == entry.id else dataclasses.replace(entry, id=model_id))
    return out


def base_entry(entry: ModelEntry) -> ModelEntry:
    """The entry under its registry id (weights, checkpoints and export caches are per model, not
    per precision)."""
    base, _ = split_model_id(entry.id)
    return entry if base == entry.id else dataclasses.replace(entry, id=base)


def check_precision_models(entries: Sequence[ModelEntry], precision: str) -> None:
    """int8 is for CNNs on ONNX Runtime: a transformer, or a machine without onnxruntime, is a
    one-line OptionError before any work."""
    if precision != "int8":
        return
    others = [e for e in entries if e.family != "CNN"]
    if others:
        named = ", ".join(f"{base_entry(e).id} ({e.family})" for e in others)
        raise OptionError(f"precision int8 is for CNNs, not {named}: run {'it' if len(others) == 1 else 'them'} "
                          "in fp32 or bf16.")
    if onnxruntime_version() is None:
        raise OptionError("precision int8 needs onnxruntime and onnx (pip install -r requirements.txt); use fp32 or bf16.")


# --------------------------------------------------------------------------- model stamps
def model_stamp(entry: ModelEntry, checkpoint: str | None = None) -> dict[str, str | None]:
    """What every row of ``entry`` records of the model beyond its id
    (``core.runstore.MODEL_STAMP_COLUMNS``): the sha256 of the weights file it runs from (its
    package, cache file or ``checkpoint``; None for a source without a file or weights not here
    yet), its class order and its family. A re-run compares them with the stored rows'
    (``classify.targets``): another checkpoint, --label-space or --family is another model."""
    from classify.models.weights import weights_status

    base = base_entry(entry)
    # A checkpoint that is not there is its one line now, before anything is compared or computed.
    status = require_weights(base, checkpoint) if checkpoint is not None else weights_status(base)
    digest = file_sha256(status.path) if status.available and status.path else None
    return {"weights_sha256": digest, "class_order": entry.class_order, "family": entry.family}


def model_stamps(entries: Sequence[ModelEntry], checkpoints: dict[str, str] | None = None) -> dict[str, dict]:
    """:func:`model_stamp` of each entry, by stored id (checkpoints are keyed by registry id)."""
    return {e.id: model_stamp(e, (checkpoints or {}).get(base_entry(e).id)) for e in entries}


def stamp_rows(frame: pd.DataFrame, stamps: dict[str, dict]) -> pd.DataFrame:
    """``frame`` with each row's model stamp (:func:`model_stamp`) in MODEL_STAMP_COLUMNS."""
    for column in MODEL_STAMP_COLUMNS:
        frame[column] = frame["model"].map({model: stamp[column] for model, stamp in stamps.items()})
    return frame


def stamping(sink: Callable[[pd.DataFrame], object], stamps: dict[str, dict]) -> Callable[[pd.DataFrame], object]:
    """``sink`` that stores each batch's rows stamped with their model (both engines: the driver stamps)."""
    return lambda frame: sink(stamp_rows(frame, stamps))


# --------------------------------------------------------------------------- passes
def plan_passes(entries: Sequence[ModelEntry], max_params: int) -> list[list[ModelEntry]]:
    """Group models into passes over the images: same-geometry models next to each other (they
    share crops), each pass within ``max_params`` (a bigger model gets a pass of its own)."""
    first_seen: dict[Geometry, int] = {}
    for i, entry in enumerate(entries):
        first_seen.setdefault(entry.input_config().geometry, i)
    ordered = sorted(entries, key=lambda e: first_seen[e.input_config().geometry])
    passes: list[list[ModelEntry]] = []
    current: list[ModelEntry] = []
    budget = 0
    for entry in ordered:
        if current and budget + entry.num_params > max_params:
            passes.append(current)
            current, budget = [], 0
        current.append(entry)
        budget += entry.num_params
    if current:
        passes.append(current)
    return passes


# --------------------------------------------------------------------------- data loading
class DecodedCrops(Dataset):
    """Item i -> (i, one uint8 crop per geometry, None) or (i, None, reason it failed); with
    ``device_jpeg``, a JPEG the device can decode is (i, its ``gpu_decode.RawJpeg``, None) instead,
    after the same file and header checks (``gpu_decode.device_jpeg`` says which)."""

    def __init__(self, tasks: Sequence[ImageTask], geometries: Sequence[Geometry], jpeg_draft: bool = False,
                 resampler: str = DEFAULT_RESAMPLER, device_jpeg: bool = False):
        self.tasks = list(tasks)
        self.device_jpeg = device_jpeg
        self.geometries = tuple(geometries)
        self.resampler = check_resampler(resampler)
        # With jpeg_draft, JPEGs decode at a reduced scale that still covers the largest resize.
        self.draft_side = max(g.resize_size for g in self.geometries) if jpeg_draft and self.geometries else None

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int):
        task = self.tasks[index]
        if task.error:
            return index, None, task.error
        try:
            data = read_image_file(task.path)  # regular files only, at most MAX_IMAGE_BYTES
            check_image_header(data)  # a 20000x1 strip is refused here, before decoding
            if self.device_jpeg:
                raw = gpu_decode.device_jpeg(data)  # header only: JPEG, RGB/L, within the pixel limit
                if raw is not None:
                    return index, raw, None
            image = load_rgb(data) if self.draft_side is None else load_rgb_draft(data, self.draft_side)
            crops = tuple(crop_to_tensor(image, g, self.resampler) for g in self.geometries)
        except ImageLoadError as exc:
            return index, None, str(exc)
        except Exception as exc:  # noqa: BLE001 - one odd file is its own failed row, never a crashed run
            return index, None, f"cannot preprocess: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        return index, crops, None


@dataclass
class CropBatch:
    indices: list[int]  # tasks whose crops are in ``crops``
    crops: tuple[torch.Tensor, ...]  # per geometry: uint8 (len(indices), 3, size, size)
    failed: list[tuple[int, str]]  # (task index, reason)
    # JPEG files for the device decoder (task index, gpu_decode.RawJpeg); _run_pass decodes them
    # into ``indices``/``crops`` before the forward pass, so _batch_rows never sees them.
    raw: list = field(default_factory=list)

    def pin_memory(self):  # DataLoader(pin_memory=True) calls this on custom batch types
        self.crops = tuple(c.pin_memory() for c in self.crops)
        return self


class CollateCrops:
    """Stack the crops of the images that decoded; keep the failures aside (picklable for workers)."""

    def __init__(self, n_geometries: int):
        self.n_geometries = n_geometries

    def __call__(self, samples) -> CropBatch:
        raw = [(i, item) for i, item, _ in samples if isinstance(item, gpu_decode.RawJpeg)]
        raw = list(zip([i for i, _ in raw], gpu_decode.one_buffer([r for _, r in raw])))  # one storage to send
        good = [(i, crops) for i, crops, _ in samples if crops is not None and not isinstance(crops, gpu_decode.RawJpeg)]
        failed = [(i, reason) for i, crops, reason in samples if crops is None]
        stacked = tuple(torch.stack([crops[g] for _, crops in good]) for g in range(self.n_geometries)) if good else ()
        return CropBatch([i for i, _ in good], stacked, failed, raw)


def decode_on_device(batch: CropBatch, decoder: "gpu_decode.DeviceDecoder") -> CropBatch:
    """The batch with its JPEG files decoded and cropped on the decoder's device, merged with
    the crops the workers made, in task order (the order the CPU path gives); a file neither the
    device nor the CPU path decodes joins ``failed`` with the CPU path's reason."""
    if not batch.raw:
        decoder.counts.workers += len(batch.indices)
        return batch
    results = decoder([raw for _, raw in batch.raw])
    decoded = [(i, crops) for (i, _), (crops, _) in zip(batch.raw, results) if crops is not None]
    failed = sorted(batch.failed + [(i, reason) for (i, _), (crops, reason) in zip(batch.raw, results)
                                    if crops is None])
    decoder.counts.workers += len(batch.indices)
    indices = batch.indices + [i for i, _ in decoded]
    order = sorted(range(len(indices)), key=indices.__getitem__)
    crops = []
    for g in range(len(decoder.geometries)):
        parts = [batch.crops[g].to(decoder.device, non_blocking=True)] if batch.indices else []
        if decoded:
            parts.append(torch.stack([c[g] for _, c in decoded]))
        merged = torch.cat(parts) if parts else None
        if merged is not None and order != list(range(len(order))):
            merged = merged[torch.tensor(order, device=merged.device)]
        if merged is not None:
            crops.append(merged)
    return CropBatch([indices[k] for k in order], tuple(crops), failed)


def _decoded_ahead(batches: Iterable[CropBatch], decoder: "gpu_decode.DeviceDecoder | None"):
    """``batches`` with their JPEG files decoded on the device, one batch ahead in a thread, so
    the host side of decoding (parsing, launches) overlaps the forward pass of the batch before."""
    if decoder is None:
        yield from batches
        return

    def decode(batch: CropBatch) -> CropBatch:
        with torch.inference_mode():
            return decode_on_device(batch, decoder)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wildlens-jpeg") as pool:
        ahead = None
        try:
            for batch in batches:
                future = pool.submit(decode, batch)
                if ahead is not None:
                    yield ahead.result()
                ahead = future
            if ahead is not None:
                yield ahead.result()
        finally:
            if ahead is not None:
                ahead.cancel()


# --------------------------------------------------------------------------- rows
def prediction_rows(entry: ModelEntry, tasks: Sequence[ImageTask], probs: torch.Tensor) -> pd.DataFrame:
    """Top-5 rows from a (n, classes) probability matrix, wnids from the model's class order."""
    k = min(TOP_K, probs.shape[1])
    top = probs.topk(k, dim=1)
    wnids = np.asarray(class_wnids(entry))[top.indices.cpu().numpy()]
    values = top.values.cpu().double().numpy()
    data = {"model": entry.id, "image": [t.image for t in tasks], "true_wnid": [t.true_wnid for t in tasks]}
    for rank in range(TOP_K):
        name = "pred_wnid" if rank == 0 else f"pred_wnid_{rank + 1}"
        data[name] = wnids[:, rank] if rank < k else None
        data[f"prob_{rank + 1}"] = values[:, rank] if rank < k else np.nan
    data.update({"label_space": entry.label_space, "status": "ok", "reason": None})
    return pd.DataFrame(data)


def failure_rows(entry: ModelEntry, tasks: Sequence[ImageTask], reasons: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"model": entry.id, "image": [t.image for t in tasks], "true_wnid": [t.true_wnid for t in tasks],
                         "label_space": entry.label_space, "status": "failed", "reason": list(reasons)})


# --------------------------------------------------------------------------- the core loop
@dataclass
class _LoadedModel:
    entry: ModelEntry
    module: torch.nn.Module
    geometry_index: int
    normalize: Callable[[torch.Tensor], torch.Tensor]
    backend: str = "torch"  # what runs the forward pass, and why (for the report)
    channels_last: bool = True  # feed channels-last inputs (PyTorch); ONNX Runtime wants NCHW
    checked: bool = False  # output width verified against the class list
    tap: object | None = None  # InferenceOptions.features: what _Settings.tap made for the module


def _onnx_excluded(entry: ModelEntry, device: torch.device, options: InferenceOptions,
                   precision: str = "fp32") -> str | None:
    """Why this model runs on PyTorch without trying ONNX Runtime; None: try it."""
    if options.backend == "torch":
        return "asked for"
    if options.features:
        return "features are read from the PyTorch module"
    if device.type != "cpu":
        return f"{device.type} device"
    if precision == "bf16":
        return "bf16 autocast; ONNX Runtime has no bf16 CPU kernels"
    source = get_source(entry)
    if not source.weights_file and (not source.part_export or precision == "int8"):
        return f"{source.description}: no weights file to key an export on"
    return None


def _load_one(entry: ModelEntry, geometry_index: int, n_images: int, settings: "_Settings") -> _LoadedModel:
    """The model as the forward pass will call it: an ONNX Runtime session where allowed and
    verified, else the PyTorch module (batch-norm folded, channels-last, on the device)."""
    options, device = settings.options, settings.device
    result_id, entry = entry.id, base_entry(entry)  # weights and caches are the registry model's
    config = entry.input_config()
    checkpoint = options.checkpoints.get(entry.id)
    loaded: dict[str, torch.nn.Module] = {}

    def torch_model() -> torch.nn.Module:  # loaded at most once, only when needed
        if "model" not in loaded:
            loaded["model"] = load_model(entry, checkpoint, options.allow_download)
        return loaded["model"]

    normalize = normalizer(config, device)
    reason = _onnx_excluded(entry, device, options, settings.precision)
    if settings.precision == "int8":
        return _load_int8(entry, result_id, geometry_index, normalize, checkpoint, torch_model, settings, reason)
    if reason is None:
        allow_export = options.backend == "onnxruntime" or n_images >= options.onnx_export_min_images
        try:
            if not get_source(entry).weights_file:  # a part alone (a zero-shot head's image tower)
                return _load_part(entry, result_id, geometry_index, normalize, torch_model(), options, allow_export)
            key, cache = _export_key(entry, checkpoint, torch_model, options, "the export cache")
            classifier, _ = onnx_classifier(key, cache, 1, torch_model, allow_export)
            return _LoadedModel(_as(entry, result_id), classifier, geometry_index, normalize,
                                backend=f"onnxruntime ({classifier.note})", channels_last=False)
        except OnnxBackendError as exc:
            if options.backend == "onnxruntime":
                raise OptionError(f"{entry.id} cannot run on ONNX Runtime: {exc}. Use --backend auto or torch.") from None
            reason = str(exc)
    module = torch_model()
    if options.fold_batchnorm:
        probe = torch.randn(1, 3, config.size, config.size, generator=torch.Generator().manual_seed(0))
        module, _ = fold_batchnorm(module, probe)
    module = module.to(device)
    if options.channels_last:
        module = module.to(memory_format=torch.channels_last)
    tap = None
    if options.features:  # hooks on the final module (after folding): the layer before the head
        if settings.tap is None:
            raise OptionError("features were asked for without a feature tap: run them through "
                              "classify.targets.predict_run or extract_features.")
        tap = settings.tap(module, entry.id)
    return _LoadedModel(_as(entry, result_id), module, geometry_index, normalize, backend=f"torch ({reason})",
                        channels_last=options.channels_last, tap=tap)


def _load_part(entry: ModelEntry, result_id: str, geometry_index: int, normalize, module: torch.nn.Module,
               options: InferenceOptions, allow_export: bool) -> _LoadedModel:
    """The PyTorch module with the part its source names (``ModelSource.onnx_part``) on ONNX Runtime
    (``classify.engine.onnx_backend.onnx_part``: checked by the largest logit difference it can make).
    ViT-B-32's image tower alone, two streams of one thread each on 2 cores: 19.5 images/s on
    PyTorch, 22.5 on ONNX Runtime; the whole pipeline's steady rate 16.8 -> 19.7 (bench_zeroshot.py)."""
    spec = get_source(entry).onnx_part(entry, module)
    if spec is None:
        raise OnnxBackendError(f"{get_source(entry).description}: no part of it can be exported alone")
    key = ExportKey.for_part(spec.part_id, spec.weights_sha256, entry.input_config().size, spec.library)
    session = onnx_part(key, _onnx_cache(options), 1, module, spec.attribute, allow_export)
    return _LoadedModel(_as(entry, result_id), module.eval(), geometry_index, normalize,
                        backend=f"onnxruntime {spec.attribute} ({session.note}), the rest on torch", channels_last=False)


def _export_key(entry: ModelEntry, checkpoint: str | None, torch_model: Callable[[], torch.nn.Module],
                options: InferenceOptions, cache_name: str) -> tuple[ExportKey, OnnxCache]:
    """The key of a model's ONNX exports (its weights file) and the cache they live in."""
    status = weights_status(entry, checkpoint)
    if status.path is None:  # weights still to be downloaded: loading the model fetches them
        torch_model()
        status = weights_status(entry, checkpoint)
    if status.path is None:
        raise OnnxBackendError(f"no weights file to key {cache_name} on")
    key = ExportKey.for_model(entry.id, status.path, entry.input_config().size)
    return key, _onnx_cache(options)


def _onnx_cache(options: InferenceOptions) -> OnnxCache:
    """The folder of ONNX exports: ``InferenceOptions.cache_dir``, else the run store's cache."""
    return OnnxCache(Path(options.cache_dir) if options.cache_dir else default_cache_dir())


def _as(entry: ModelEntry, result_id: str) -> ModelEntry:
    return entry if entry.id == result_id else dataclasses.replace(entry, id=result_id)


def _load_int8(entry: ModelEntry, result_id: str, geometry_index: int, normalize, checkpoint: str | None,
               torch_model: Callable[[], torch.nn.Module], settings: "_Settings", excluded: str | None) -> _LoadedModel:
    """The int8 ONNX Runtime model (``classify.engine.quantize``): quantized once from the fp32 export and
    cached; gated onto the fp32 export (:class:`~classify.engine.quantize.Int8Cascade`) unless
    ``int8_recheck`` is 'none'; no fallback, since PyTorch would not be int8 (an OptionError says why)."""
    from classify.engine.quantize import int8_cascade, int8_classifier

    options = settings.options
    config = entry.input_config()
    cascade = options.int8_recheck != "none"
    try:
        if excluded is not None:
            raise OnnxBackendError(excluded)
        key, cache = _export_key(entry, checkpoint, torch_model, options, "the quantized model's cache")
        classifier = (int8_cascade if cascade else int8_classifier)(key, cache, config, 1, torch_model)
    except OnnxBackendError as exc:
        raise OptionError(f"{entry.id} cannot run in int8: {exc}. Use --precision fp32 or bf16.") from None
    what = "onnxruntime int8 -> fp32 cascade" if cascade else "onnxruntime int8 alone (--int8-recheck none)"
    return _LoadedModel(_as(entry, result_id), classifier, geometry_index, normalize,
                        backend=f"{what} ({classifier.note})", channels_last=False)


def _load_pass(entries: Sequence[ModelEntry], geometries: list[Geometry], images: dict[str, int],
               settings: "_Settings") -> list[_LoadedModel]:
    return [_load_one(e, geometries.index(e.input_config().geometry), images[e.id], settings) for e in entries]


def _forward(model: _LoadedModel, crops: torch.Tensor, device: torch.device, amp: torch.dtype | None) -> torch.Tensor:
    x = model.normalize(crops)
    if model.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    precision = torch.autocast(device.type, dtype=amp) if amp is not None else full_fp32(device)
    with precision:
        logits = model.module(x)
    if not model.checked:
        expected = len(class_wnids(model.entry))
        if logits.ndim != 2 or logits.shape[1] != expected:
            raise WeightsError(f"{model.entry.id} outputs {tuple(logits.shape[1:])} scores, but its label space "
                               f"{model.entry.label_space} has {expected} classes.")
        model.checked = True
    return logits.float().softmax(dim=1)


def _pass_label(entries: Sequence[ModelEntry]) -> str:
    return ", ".join(e.id for e in entries) if len(entries) <= 3 else f"{len(entries)} models"


@dataclass
class _Settings:
    device: torch.device
    amp: torch.dtype | None
    batch_size: int
    workers: int
    streams: int  # forward passes in flight at once (CPU; 1 on a GPU), one thread each
    options: InferenceOptions
    precision: str = "fp32"  # resolved: 'fp32', 'bf16', 'fp16' or 'int8' (classify.engine.device.resolve_precision)
    # With options.features: called as tap(module, model id) on each PyTorch module after folding, it
    # returns the object whose attach(rows) adds the batch's features (classify.features.FeatureTap).
    # Given by the caller, so the engine knows no feature code.
    tap: Callable | None = None


def _wanted(batch: CropBatch, tasks: Sequence[ImageTask], pending: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per model, the images of this batch it still needs (a snapshot: other threads may go on)."""
    images = {tasks[i].image for i in batch.indices} | {tasks[i].image for i, _ in batch.failed}
    return {model: images & todo for model, todo in pending.items()}


def _batch_rows(batch: CropBatch, tasks: Sequence[ImageTask], loaded: Sequence[_LoadedModel],
                wanted: dict[str, set[str]], settings: _Settings) -> list[pd.DataFrame]:
    """Rows of one batch for every model that still needs some of its images."""
    frames = []
    for model in loaded:
        want = wanted[model.entry.id]
        rows = [k for k, i in enumerate(batch.indices) if tasks[i].image in want]
        if rows:
            crops = batch.crops[model.geometry_index]
            crops = crops if len(rows) == len(batch.indices) else crops[rows]
            probs = _forward(model, crops, settings.device, settings.amp)
            frame = prediction_rows(model.entry, [tasks[batch.indices[k]] for k in rows], probs)
            if isinstance(model.module, Int8Cascade):  # this thread's call just marked them
                frame["int8_rechecked"] = model.module.last_rechecked().numpy()
            if model.tap is not None:  # this thread's forward pass just captured them (classify.features)
                frame = model.tap.attach(frame)
            frames.append(frame)
        bad = [(tasks[i], reason) for i, reason in batch.failed if tasks[i].image in want]
        if bad:
            frames.append(failure_rows(model.entry, [t for t, _ in bad], [r for _, r in bad]))
    return frames


def mark_stored(frame: pd.DataFrame, pending: dict[str, set[str]], reports: dict[str, ModelReport]) -> None:
    """After the sink stored ``frame``: its (model, image) pairs are no longer pending, and each
    is counted predicted or failed, and an int8 cascade's re-checked rows (both engines)."""
    rechecked = frame["int8_rechecked"] if "int8_rechecked" in frame.columns else pd.Series(None, index=frame.index)
    for model_id, image, status, again in zip(frame["model"], frame["image"], frame["status"], rechecked):
        pending[model_id].discard(image)
        if status == "ok":
            reports[model_id].predicted += 1
            if again is not None and not pd.isna(again):  # a cascade's row: re-checked or not
                reports[model_id].rechecked = (reports[model_id].rechecked or 0) + bool(again)
        else:
            reports[model_id].failed += 1


def _run_pass(entries: Sequence[ModelEntry], tasks: Sequence[ImageTask], pending: dict[str, set[str]],
              reports: dict[str, ModelReport], sink, progress, label: str, settings: _Settings,
              backends: dict[str, str], decode: "gpu_decode.DecodeChoice | None" = None,
              decode_log: "_DecodeLog | None" = None) -> int:
    """One pass of ``entries`` over ``tasks``; returns the number of images decoded. With
    ``decode.on`` JPEGs are decoded on the device (unless a geometry of the pass needs the CPU),
    and what ran is added to ``decode_log``."""
    geometries = sorted({e.input_config().geometry for e in entries})
    images = {e.id: sum(t.image in pending[e.id] for t in tasks) for e in entries}
    decoder = None
    if decode is not None and decode.on:
        why_not = gpu_decode.device_geometries_reason(geometries, settings.options.resampler)
        if why_not is None:
            decoder = gpu_decode.DeviceDecoder(geometries, settings.device, settings.options.resampler)
        elif decode_log is not None:
            decode_log.notes.append(why_not)
    crops = DecodedCrops(tasks, geometries, settings.options.jpeg_draft, settings.options.resampler,
                         device_jpeg=decoder is not None)
    loader = DataLoader(crops, batch_size=settings.batch_size, shuffle=False, num_workers=settings.workers,
                        collate_fn=CollateCrops(len(geometries)), pin_memory=settings.device.type == "cuda",
                        persistent_workers=False)
    # Workers start (and decode the first batches) while the models load: they are forked before
    # the models exist, so they do not copy them, and the load no longer delays the first batch.
    batches = iter(loader)
    try:
        loaded = _load_pass(entries, geometries, images, settings)
    except BaseException:
        del batches  # shuts the workers down now, not at garbage collection
        raise
    backends.update({m.entry.id: m.backend for m in loaded})
    done = 0

    def compute(batch: CropBatch, wanted: dict[str, set[str]]) -> list[pd.DataFrame]:
        with torch.inference_mode():  # thread-local: set in whichever thread runs the batch
            return _batch_rows(batch, tasks, loaded, wanted, settings)

    def store(batch: CropBatch, frames: list[pd.DataFrame]) -> None:
        nonlocal done
        if frames:
            sink(pd.concat(frames, ignore_index=True))
        for frame in frames:  # counted as done only once the sink has stored them
            mark_stored(frame, pending, reports)
        done += len(batch.indices) + len(batch.failed)
        failed_now = sum(r.failed for r in reports.values())
        report(progress, "inference", done, len(tasks), task=label,
               message=f"{failed_now} unreadable" if failed_now else "classifying")

    if decoder is not None and decode_log is not None:
        decode_log.passes.append(decoder.counts)
    try:
        _compute_and_store(batches, decoder, compute, store, tasks, pending, settings)
    finally:
        for model in loaded:  # what the cascade's fp32 pass re-checked, counted from the stored rows (mark_stored)
            counted = reports[model.entry.id]  # not 'report': the closure above calls core.progress's report
            if isinstance(model.module, Int8Cascade) and counted.rechecked is not None:
                backends[model.entry.id] = (f"{model.backend}; fp32 re-checked {counted.rechecked} of "
                                            f"{counted.predicted} images")
    return done


def _compute_and_store(batches, decoder, compute, store, tasks: Sequence[ImageTask], pending: dict[str, set[str]],
                       settings: _Settings) -> None:
    if settings.streams <= 1:
        for batch in _decoded_ahead(batches, decoder):
            store(batch, compute(batch, _wanted(batch, tasks, pending)))
        return
    # CPU: several batches in flight, each forward pass single-threaded in its own thread (PyTorch
    # and ONNX Runtime release the GIL), so the cores are shared without intra-op barriers and
    # while one batch waits for decoding another computes. Rows are stored in batch order.
    in_flight: deque = deque()
    with ThreadPoolExecutor(max_workers=settings.streams, thread_name_prefix="wildlens-forward") as pool:
        try:
            for batch in _decoded_ahead(batches, decoder):
                in_flight.append((batch, pool.submit(compute, batch, _wanted(batch, tasks, pending))))
                if len(in_flight) >= settings.streams:
                    finished, future = in_flight.popleft()
                    store(finished, future.result())
            while in_flight:
                finished, future = in_flight.popleft()
                store(finished, future.result())
        finally:
            for _, future in in_flight:
                future.cancel()


@dataclass
class _DecodeLog:
    """What decoded the images of a run, for ``InferenceReport.decode``."""

    choice: "gpu_decode.DecodeChoice"
    device: torch.device
    passes: list = field(default_factory=list)  # gpu_decode.DecodeCounts of each pass that decoded on the device
    notes: list = field(default_factory=list)  # why a pass kept the CPU path

    def describe(self) -> str:
        notes = "; ".join(dict.fromkeys(self.notes))
        if not self.passes:
            if self.choice.on:
                return f"{DECODE_CPU} ({notes})" if notes else DECODE_CPU
            return DECODE_CPU if self.device.type == "cpu" else f"{DECODE_CPU} ({self.choice.reason})"
        on_device = sum(c.on_device for c in self.passes)
        workers = sum(c.workers for c in self.passes)
        refused = sum(c.refused for c in self.passes)
        text = f"{self.choice.reason} for {on_device} JPEGs, {DECODE_CPU} for {workers} other images"
        if refused:
            text += f", {refused} JPEGs the device refused on the CPU"
        return text + (f" ({notes})" if notes else "")


@dataclass
class _Plan:
    """What both engines share before the first image: the models as stored, the settings, what
    each model still needs, the reports and the passes (``_plan``)."""

    entries: list[ModelEntry]
    settings: _Settings
    pending: dict[str, set[str]]
    reports: "OrderedDict[str, ModelReport]"
    passes: list[list[ModelEntry]]
    stamps: dict[str, dict] = field(default_factory=dict)  # model id -> what its rows record (model_stamp)


def _plan(tasks: Sequence[ImageTask], models: Iterable[str | ModelEntry], already_done: dict[str, set[str]] | None,
          options: InferenceOptions, where: "tuple[torch.device, str, str] | None" = None,
          tap: Callable | None = None) -> _Plan:
    """Check the options and the weights (before any work) and plan the passes; used by
    :func:`run_local` and by the Ray engine (``classify.engine.ray_engine``), so both refuse the same
    things with the same words and skip the same (model, image) pairs. ``where``: (device,
    precision, the device's default precision) as the Ray engine's actors resolve them on their
    own hardware; None: this process's device."""
    if where is None:
        device = select_device(options.device)
        precision, default = resolve_precision(options.precision, device), resolve_precision("auto", device)
        amp = autocast_dtype(options.precision, device)
    else:
        device, precision, default = where
        amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    entries = precision_entries(resolve_models(models), precision, default, options.int8_recheck)
    check_backend(options.backend, device, precision)
    check_precision_models(entries, precision)
    check_resampler(options.resampler)  # a typo fails here, not inside every worker
    check_counts(options.batch_size, options.num_workers)
    workers = default_num_workers(device) if options.num_workers is None else options.num_workers
    streams = (options.num_threads or cpu_streams(workers)) if device.type == "cpu" else 1  # GPUs: one stream
    settings = _Settings(device, amp, options.batch_size or DEFAULT_BATCH.get(device.type, 16), workers, streams,
                         options, precision, tap)
    images = {t.image for t in tasks}
    pending = {e.id: images - (already_done or {}).get(e.id, set()) for e in entries}
    reports = OrderedDict((e.id, ModelReport(e.id, skipped=len(images) - len(pending[e.id]))) for e in entries)
    for e in entries:  # fail before any work, not after the first pass
        if pending[e.id]:
            require_weights(base_entry(e), options.checkpoints.get(base_entry(e).id), options.allow_download)
    return _Plan(entries, settings, pending, reports, plan_passes(entries, options.max_params_per_pass),
                 model_stamps(entries, options.checkpoints))


def run_local(tasks: Sequence[ImageTask], models: Iterable[str | ModelEntry],
              sink: Callable[[pd.DataFrame], object], already_done: dict[str, set[str]] | None = None,
              options: InferenceOptions | None = None, progress: ProgressCallback | None = None,
              tap: Callable | None = None) -> InferenceReport:
    """The local engine: classify ``tasks`` with every model in this process, skipping (model,
    image) pairs in ``already_done``; hand each batch's rows (PREDICTION_SCHEMA) to ``sink``
    before reporting progress. Callers go through ``classify.engine.dispatch.run_inference``,
    which chooses this or the Ray engine; ``tap``: see :class:`_Settings`."""
    options = options or InferenceOptions()
    plan = _plan(tasks, models, already_done, options, tap=tap)
    settings, pending, reports, passes = plan.settings, plan.pending, plan.reports, plan.passes
    sink = stamping(sink, plan.stamps)
    device, precision, amp = settings.device, settings.precision, settings.amp

    decode = gpu_decode.resolve_decode(options.gpu_decode, device)  # probes the device once (CUDA only)
    decode_log = _DecodeLog(decode, device)
    started = time.perf_counter()
    decoded = 0
    backends: dict[str, str] = {}
    with cpu_threads(device):
        for number, pass_entries in enumerate(passes, 1):
            pass_tasks = [t for t in tasks if any(t.image in pending[e.id] for e in pass_entries)]
            if not pass_tasks:
                continue
            label = _pass_label(pass_entries)
            report(progress, "inference", 0, len(pass_tasks), task=label,
                   message=f"loading model{'s' if len(pass_entries) > 1 else ''} (pass {number}/{len(passes)})")
            decoded += _run_pass(pass_entries, pass_tasks, pending, reports, sink, progress, label, settings, backends,
                                 decode, decode_log)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return InferenceReport(dict(reports), decoded, time.perf_counter() - started, str(device),
                           "int8" if precision == "int8" else precision_name(amp), backends, options.resampler,
                           engine="local", decode=decode_log.describe())
