"""Where and how the forward pass runs: device, precision, backend check, threads and workers.

* Device: CUDA, then Apple MPS, then CPU (:func:`select_device`); what the user may ask for is
  :data:`DEVICES` (or ``cuda:N``).
* Precision (:data:`PRECISIONS`): on a GPU autocast, bf16 where supported, else fp16
  (:func:`autocast_dtype`); ``fp32`` on CUDA is true fp32, TF32 off (:func:`full_fp32`); the CPU
  always runs fp32.
* Backend (:data:`BACKENDS`): ONNX Runtime is for the CPU only here (:func:`check_backend`); which
  backend a model actually runs on is decided per model in :mod:`classify.pipeline`.
* Threads, streams and decode workers per device (:func:`default_num_workers`,
  :func:`cpu_streams`, :func:`cpu_threads`), and the batch size per device (:data:`DEFAULT_BATCH`).

The option lists here are the ones the command line and the Models page offer. A value the
machine cannot honour raises :class:`core.errors.OptionError` whose message says what to use.
"""
from __future__ import annotations

import contextlib
import os

import torch

from core.errors import OptionError

from .options import BACKENDS, DEVICES, PRECISIONS  # noqa: F401  (the option lists live there; re-exported)

# Measured on a 2-core CPU (benchmarks/bench_inference.py): EfficientNet-Lite0 images/s peak at
# small batches there (activations that stay in cache); a GPU wants bigger ones.
DEFAULT_BATCH = {"cpu": 8, "mps": 32, "cuda": 64}


def select_device(preference: str = "auto") -> torch.device:
    """CUDA, then MPS, then CPU; or exactly what was asked, if it exists."""
    if preference == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(preference)
    except RuntimeError:
        raise OptionError(f"device {preference!r}: use auto, cpu, cuda, cuda:N or mps.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise OptionError("device 'cuda' was asked for, but PyTorch sees no CUDA GPU here; use --device auto or cpu.")
    if device.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise OptionError("device 'mps' was asked for, but this machine has no usable Apple GPU; use --device auto or cpu.")
    return device


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """None for float32; the autocast dtype otherwise. Half precision is for GPUs only."""
    if precision not in PRECISIONS:
        raise OptionError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}.")
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    if device.type == "cpu":
        raise OptionError(f"precision {precision} needs a GPU; on the CPU use fp32 (the default).")
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if precision == "bf16" else torch.float16


def precision_name(amp: torch.dtype | None) -> str:
    """What a report calls the precision a run used: 'fp32', 'bfloat16' or 'float16'."""
    return "fp32" if amp is None else str(amp).replace("torch.", "")


def check_backend(backend: str, device: torch.device) -> None:
    if backend not in BACKENDS:
        raise OptionError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}.")
    if backend == "onnxruntime" and device.type != "cpu":
        raise OptionError(f"backend onnxruntime is for the CPU here; on {device.type} use --backend auto or torch.")


def check_counts(batch_size: int | None, num_workers: int | None) -> None:
    """Batch size and decode workers as a person may give them (None or 0 batch: the device's default)."""
    if batch_size is not None and batch_size < 0:
        raise OptionError(f"batch size {batch_size}: use 1 or more (or leave it out for the device's default).")
    if num_workers is not None and num_workers < 0:
        raise OptionError(f"workers {num_workers}: use 0 (decode in this process) or more.")


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def default_num_workers(device: torch.device) -> int:
    """Decode workers. On the CPU they share the cores with the forward pass, so half of them
    (one on a 2-core machine). A GPU does the math elsewhere and decoding is the bound: ResNet-50
    in bf16 on an H200 computes ~15,000 images/s, while 16 cores decode ~2,000/s; there one
    worker per core beat 14 and 8 (2,030, 1,470, 1,070 images/s; benchmarks/bench_inference.py)."""
    cores = available_cores()
    return max(1, min(4, cores // 2)) if device.type == "cpu" else max(1, min(32, cores))


def cpu_streams(workers: int) -> int:
    """Forward passes in flight at once on the CPU, one thread each: the cores the decode workers
    leave free, plus one that computes while a worker is busy (a worker needs ~12 ms of a core per
    image; ONNX Runtime's forward pass ~15, PyTorch's ~35). Separate batches share the cores
    without the barriers of intra-op threads. EfficientNet-Lite0 on 2 cores with 1 worker
    (benchmarks/bench_inference.py): ONNX Runtime 2 streams ~60 images/s, 1 stream ~50, 1 stream
    with 2 intra-op threads ~48; PyTorch 2 streams ~30, 1 stream ~22."""
    return max(1, available_cores() - workers) + (1 if workers else 0)


@contextlib.contextmanager
def cpu_threads(device: torch.device):
    """One intra-op thread per forward pass on the CPU (the streams give the parallelism), then
    restore torch's setting. Oversubscribed OpenMP threads spin at barriers; on a busy 2-core
    machine that made a 2-thread forward pass slower than a 1-thread one."""
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def full_fp32(device: torch.device):
    """fp32 on CUDA means IEEE fp32: PyTorch's default TF32 convolutions (a 10-bit mantissa)
    moved EfficientNet-Lite0's probabilities by up to 1e-3 from the CPU's on an H200. The flags
    are process-wide; a GPU runs one batch at a time here, and they are restored after it."""
    if device.type != "cuda":
        yield
        return
    conv, matmul = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = conv, matmul
