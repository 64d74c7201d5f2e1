"""Where and how the forward pass runs: device, precision, backend check, threads and workers.

* Device: CUDA, then Apple MPS, then CPU (:func:`select_device`); what the user may ask for is
  :data:`DEVICES` (or ``cuda:N``).
* Precision (:data:`PRECISIONS`, :func:`resolve_precision`): on a GPU autocast, bf16 where
  supported, else fp16 (:func:`autocast_dtype`); ``fp32`` on CUDA is true fp32, TF32 off
  (:func:`full_fp32`). The CPU runs fp32 unless asked: ``bf16`` is PyTorch's bf16 autocast, offered
  only where the CPU computes bf16 natively (AVX-512 BF16 or AMX-BF16 on x86, BF16 on Arm; read
  from the CPU's feature flags, :func:`cpu_bf16_instructions`) - elsewhere PyTorch would emulate it,
  slower than fp32; ``int8`` is a statically quantized ONNX Runtime model of a CNN
  (``classify.engine.quantize``); ``fp16`` needs a GPU. A precision the machine lacks is a one-line
  :class:`OptionError` that names what to use instead.
* Backend (:data:`BACKENDS`): ONNX Runtime is for the CPU only here (:func:`check_backend`); which
  backend a model actually runs on is decided per model in :mod:`classify.engine.pipeline`.
* Threads, streams and decode workers per device (:func:`default_num_workers`,
  :func:`cpu_streams`, :func:`cpu_threads`), and the batch size per device (:data:`DEFAULT_BATCH`).

The option lists here are the ones the command line and the Models page offer. A value the
machine cannot honour raises :class:`core.errors.OptionError` whose message says what to use.
"""
from __future__ import annotations

import contextlib
import functools
import platform
import subprocess
from pathlib import Path

import torch

from core.errors import OptionError
from core.machine import available_cores  # noqa: F401  (looked up here at each call: tests replace it)

from classify.engine.options import BACKENDS, DEVICES, PRECISIONS  # noqa: F401  (the option lists live there; re-exported)

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


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags: Linux's /proc/cpuinfo ('flags' on x86, 'Features' on Arm), on
    macOS the Arm features sysctl reports (``hw.optional.arm.FEAT_BF16`` -> 'bf16'); empty where
    neither can be read, which counts as 'no optional instructions' (the safe side)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True,
                                 timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        return frozenset({"bf16"}) if out == "1" else frozenset()
    return frozenset()


# CPU flag -> the instructions' name, in the order a report names them (the fastest first).
BF16_CPU_FLAGS = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX-512 BF16"), ("bf16", "Arm BF16"))


# 8-bit dot products that add four u8 x s8 products into int32 (x86 VNNI, Arm dot product). Without
# them ONNX Runtime's u8 x s8 kernels sum pairs in int16 (AVX2 vpmaddubsw), which saturates: on an
# AVX2-only AMD EPYC (2026-12-02) EfficientNet-Lite0's int8 agreed with fp32 on 39 % of the
# calibration views, 84 % on an AVX512-VNNI Xeon (classify.engine.quantize reduces the weights' range there).
INT8_DOT_CPU_FLAGS = (("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"), ("amx_int8", "AMX-INT8"),
                      ("asimddp", "Arm dot product"))


def cpu_int8_dot_instructions() -> list[str]:
    """The CPU's instructions for 8-bit dot products into int32 (e.g. ['AVX-512 VNNI']); empty: none,
    and an int8 model's weights are quantized to 7 bits (``classify.engine.quantize``) so that the
    int16 pair sums of the kernels it then runs cannot saturate."""
    flags = cpu_flags()
    return [name for flag, name in INT8_DOT_CPU_FLAGS if flag in flags]


def cpu_bf16_instructions() -> list[str]:
    """The native bf16 instructions this CPU has (e.g. ['AMX-BF16', 'AVX-512 BF16']); empty: none,
    and ``--precision bf16`` is refused on the CPU (PyTorch would emulate it, slower than fp32)."""
    flags = cpu_flags()
    return [name for flag, name in BF16_CPU_FLAGS if flag in flags]


def resolve_precision(precision: str, device: torch.device) -> str:
    """What ``precision`` means on ``device``: 'fp32', 'bf16', 'fp16' or 'int8' (the name results
    are stored under, ``classify.engine.options.precision_model_id``), or an OptionError saying what to
    use instead."""
    if precision not in PRECISIONS:
        raise OptionError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}.")
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return "fp32"
    if precision == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if precision == "int8":
        if device.type != "cpu":
            raise OptionError(f"precision int8 runs on the CPU (ONNX Runtime); on {device.type} use bf16 or fp16, "
                              "or --device cpu.")
        return "int8"
    if device.type == "cpu":
        if precision == "fp16":
            raise OptionError("precision fp16 needs a GPU; on the CPU use fp32 (the default), int8, or bf16 where "
                              "the CPU has it.")
        if not cpu_bf16_instructions():
            raise OptionError("precision bf16 needs a GPU or a CPU with AVX-512 BF16 or AMX-BF16 (this one has "
                              "neither); on this CPU use fp32 (the default) or int8.")
    return precision


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """None for float32 and int8 (which is a quantized model, not autocast); the autocast dtype
    otherwise. Refuses, in one line, a precision the device lacks (:func:`resolve_precision`)."""
    resolved = resolve_precision(precision, device)
    if resolved in ("fp32", "int8"):
        return None
    return torch.bfloat16 if resolved == "bf16" else torch.float16


def precision_name(amp: torch.dtype | None) -> str:
    """What a report calls the precision a run used: 'fp32', 'bfloat16' or 'float16'."""
    return "fp32" if amp is None else str(amp).replace("torch.", "")


def check_backend(backend: str, device: torch.device, precision: str = "fp32") -> None:
    """``precision``: the resolved one. bf16 runs on PyTorch (ONNX Runtime's CPU provider has no
    bf16 convolutions); int8 on ONNX Runtime (a quantized model)."""
    if backend not in BACKENDS:
        raise OptionError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}.")
    if backend == "onnxruntime" and device.type != "cpu":
        raise OptionError(f"backend onnxruntime is for the CPU here; on {device.type} use --backend auto or torch.")
    if backend == "onnxruntime" and precision == "bf16":
        raise OptionError("precision bf16 runs on PyTorch (ONNX Runtime has no bf16 CPU kernels); use --backend auto "
                          "or torch, or precision int8 on ONNX Runtime.")
    if backend == "torch" and precision == "int8":
        raise OptionError("precision int8 runs on ONNX Runtime (a statically quantized model); use --backend auto "
                          "or onnxruntime, or precision bf16 on PyTorch.")


def check_counts(batch_size: int | None, num_workers: int | None) -> None:
    """Batch size and decode workers as a person may give them (None or 0 batch: the device's default)."""
    # Upper bounds too: --batch-size 99999999999999999999 was a ValueError traceback (islice), and
    # --workers 99999999999999999999 hung (a DataLoader asked for that many processes).
    if batch_size is not None and not 0 <= batch_size <= MAX_BATCH_SIZE:
        raise OptionError(f"batch size {batch_size}: use 1 to {MAX_BATCH_SIZE:,} (or leave it out for the device's "
                          "default).")
    if num_workers is not None and not 0 <= num_workers <= MAX_WORKERS:
        raise OptionError(f"workers {num_workers}: use 0 (decode in this process) to {MAX_WORKERS}.")


MAX_BATCH_SIZE = 65_536  # images per forward pass
MAX_WORKERS = 256  # decode processes


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
