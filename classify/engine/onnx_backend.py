"""ONNX Runtime on the CPU: the same network, exported once, about twice as fast as PyTorch here.

Why: on a 2-core AVX2 machine PyTorch's eager EfficientNet-Lite0 forward pass costs ~30-35 ms of
one core per image even with batch-norm folded and channels-last (TorchScript trace + freeze is
no faster; ``optimize_for_inference`` is slower). ONNX Runtime's CPU provider fuses conv + BN +
ReLU6 and runs the whole network in its blocked NCHWc layout: ~15 ms per image
(``benchmarks/bench_inference.py``, where the measurements are).

How it stays exact and safe:

* The model is exported with PyTorch's TorchScript-based exporter at the model's fixed input
  size with a dynamic batch axis, after :func:`classify.engine.optimize.static_same_padding` (TF 'SAME'
  padding as constants, so ONNX Runtime can fold each Pad into its Conv).
* Before an export is kept it is checked: ONNX Runtime and PyTorch run the same probe batch and
  the largest logit difference must be under :data:`VALIDATION_TOLERANCE`. A model that fails
  (an operator the exporter lacks, a difference) is recorded as failed and runs on PyTorch.
* Exports are cached in the run store's cache folder (``$WILDLENS_HOME/cache/onnx``) under a
  key made of the model id, the sha256 of its weights file, the input size and the versions of
  torch, timm, onnx and this export code; a change to any of them makes a new export. The file
  is ONNX protobuf (no pickle), written atomically, named by model id and key hash.
* Exporting costs a second or two per model, so it is worth it only for enough images
  (``InferenceOptions.onnx_export_min_images``); a cached export is always used.
* A model whose whole cannot be keyed on a weights file (a zero-shot head: its text classifier
  depends on the label set and the prompts) exports a part alone (:func:`onnx_part`: the image
  tower, keyed on the weights' hash and the library that builds it) and keeps the rest on PyTorch;
  the check is the largest difference the part can make to the module's logits (``logit_bound``).
* A cached graph is used only when its bytes have the sha256 recorded when it was checked
  (:func:`write_verified`, :func:`read_verified`).
"""
from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import json
import os
import re
import tempfile
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from classify.engine.optimize import static_same_padding
from classify.models.weights import file_sha256  # noqa: F401  (export keys are keyed on it; callers read it from here too)

ONNX_OPSET = 17
EXPORT_FORMAT = 1  # bump whenever the export code changes what it writes: old cache entries stop matching
VALIDATION_TOLERANCE = 1e-3  # largest |logit difference| vs PyTorch accepted on the probe batch
CACHE_SUBDIR = "onnx"


class OnnxBackendError(RuntimeError):
    """ONNX Runtime cannot run this model; the message says why (the caller falls back to PyTorch)."""


def onnxruntime_version() -> str | None:
    """The installed onnxruntime, or None (the backend then falls back to PyTorch)."""
    if importlib.util.find_spec("onnx") is None:  # the exporter needs it too; found, not imported (0.57 s)
        return None
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def default_cache_dir() -> Path:
    from core.runstore import RunStore

    return RunStore().cache_dir / CACHE_SUBDIR


def _version(package: str) -> str:
    """A library's ``__version__`` without importing it: the module's own when it is loaded already;
    for timm the ``__version__`` line of its ``version.py`` (what ``timm.__version__`` is, also in an
    editable install whose metadata is stale); for onnx its installed metadata (which is what
    ``onnx.__version__`` reads). Why: a cached export needs neither library, and importing them to key
    it cost 2.1 s of each model load (timm 1.56 s, with torchvision and torch._dynamo; onnx 0.57 s),
    in every Ray actor."""
    import sys
    from importlib import metadata

    if package in sys.modules:
        return str(sys.modules[package].__version__)
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.origin and package == "timm":
        try:
            text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
            found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
            if found:
                return found.group(1)
        except OSError:
            pass
    try:
        if package != "timm":
            return metadata.version(package)
    except metadata.PackageNotFoundError:
        pass
    return str(importlib.import_module(package).__version__)  # anything else: ask the module itself


@dataclass(frozen=True)
class ExportKey:
    """Everything an exported graph depends on. Its digest names the cached file."""

    model_id: str
    weights_sha256: str
    input_size: int
    torch: str
    timm: str
    onnx: str
    opset: int = ONNX_OPSET
    export_format: int = EXPORT_FORMAT
    library: str = ""  # the library that builds an exported part ('open_clip 3.3.0'); '' for whole timm models

    @classmethod
    def for_model(cls, model_id: str, weights_file: str | Path, input_size: int) -> "ExportKey":
        return cls(model_id, file_sha256(weights_file), int(input_size), torch.__version__, _version("timm"),
                   _version("onnx"))

    @classmethod
    def for_part(cls, part_id: str, weights_sha256: str, input_size: int, library: str) -> "ExportKey":
        """The key of a part exported alone (:func:`onnx_part`), keyed on its model's weights hash."""
        return cls(part_id, weights_sha256, int(input_size), torch.__version__, _version("timm"), _version("onnx"),
                   library=library)

    @property
    def digest(self) -> str:
        fields = asdict(self)
        if not fields["library"]:  # why: keys made before ``library`` existed keep naming their cached files
            del fields["library"]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()

    @property
    def stem(self) -> str:
        # File names come from the model id and a hash only (ids may hold '/' and '.').
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model_id).strip("._")[:80] or "model"
        return f"{safe}-{self.digest[:20]}"


def _atomic_write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_onnx_bytes(model: torch.nn.Module, input_size: int) -> bytes:
    """The ONNX graph of ``model`` (eval mode, float32) for input_size x input_size images and
    any batch size. ``model`` itself is left untouched."""
    import onnx

    model = copy.deepcopy(model).eval().float()
    static_same_padding(model, input_size)
    dummy = torch.zeros(1, 3, input_size, input_size)
    with tempfile.TemporaryDirectory(prefix="wildlens-onnx-") as tmp:
        path = Path(tmp) / "model.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
            torch.onnx.export(model, (dummy,), str(path), dynamo=False, input_names=["input"],
                              output_names=["logits"], opset_version=ONNX_OPSET, do_constant_folding=True,
                              dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
        proto = onnx.load(str(path))
    # The exporter writes Pad(x, pads, "") with an empty optional third input; ONNX Runtime's
    # Pad->Conv fusion refuses a Pad whose constant_value input is not a constant, and an empty
    # trailing optional input means exactly what no input means.
    for node in proto.graph.node:
        while len(node.input) and node.input[-1] == "":
            node.input.pop()
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def make_session(model: str | Path | bytes, threads: int = 1):
    """An ONNX Runtime CPU session of a graph file (or its bytes, as read and verified by
    :func:`read_verified`) with all graph optimisations and ``threads`` intra-op threads.
    The pipeline uses one thread per session and runs batches concurrently instead
    (``classify.engine.device.cpu_streams``); ``run`` is thread-safe and releases the GIL."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = max(1, int(threads))
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: not the note about hardware-specific layouts
    source = bytes(model) if isinstance(model, (bytes, bytearray)) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


META_MAX_BYTES = 1 << 16  # a cache's .json is a few hundred bytes: anything larger is not ours


def _read_meta(path: Path) -> dict | None:
    """A cache entry's JSON object, or None when absent, unreadable, too large, not a regular file
    (a FIFO in its place hung the run: core.tables.open_table_file opens without blocking and
    refuses it) or not an object."""
    from core.tables import StoreError, open_table_file

    try:
        with open_table_file(path) as handle:
            raw = handle.read(META_MAX_BYTES + 1)
        meta = json.loads(raw) if len(raw) <= META_MAX_BYTES else None
    except (OSError, ValueError, StoreError):
        return None
    return meta if isinstance(meta, dict) else None


def write_verified(model_path: Path, meta_path: Path, data: bytes, meta: dict) -> None:
    """Store a checked graph and, after it, its ``.json`` (``meta`` plus the graph's sha256, which
    :func:`read_verified` asks for), each atomically: killed in between, the graph has no checksum
    and is never used."""
    _atomic_write(model_path, data)
    _atomic_write(meta_path, json.dumps({**meta, "onnx_sha256": hashlib.sha256(data).hexdigest(), "onnx_bytes": len(data)},
                                        indent=1).encode())


MAX_EXPORT_BYTES = 4 << 30  # above any classifier's graph here (ViT-L/14's image tower is ~1.2 GB)


def read_verified(model_path: Path, meta_path: Path) -> bytes:
    """The bytes of a cached graph whose sha256 is the one its ``.json`` recorded when it was
    checked and stored. Why: ONNX Runtime opens a damaged graph whose tensors changed (a flipped
    bit on disk, another model's export under this name) and computes wrong logits without a
    word; the hash is taken of the bytes the session is then built from. Raises
    :class:`OnnxBackendError` naming what is wrong."""
    meta = _read_meta(meta_path)
    expected = meta.get("onnx_sha256") if meta else None
    if not isinstance(expected, str):
        raise OnnxBackendError("cached export has no checksum to verify it by")
    from core.tables import read_stored_buffer, read_stored_bytes

    # Its recorded size (exports cached before it: at most MAX_EXPORT_BYTES): a 3 GB sparse file or a link to
    # one put in its place took 33 s and 3.8 GB to refuse by its hash (hostile campaign). A link is no export.
    size = meta.get("onnx_bytes")
    data = (read_stored_buffer(model_path, size) if type(size) is int and 0 < size <= MAX_EXPORT_BYTES
            else read_stored_bytes(model_path, MAX_EXPORT_BYTES))
    if data is None:
        raise OnnxBackendError("cached export unreadable (missing, not a regular file, or not the size recorded)")
    if hashlib.sha256(data).hexdigest() != expected:
        raise OnnxBackendError("cached export damaged (its sha256 is not the one recorded when it was checked)")
    return data


def one_line(text: object, limit: int = 300) -> str:
    """``text`` as one printable line of at most ``limit`` characters (a reason read back from a cache file)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


class OnnxClassifier:
    """Callable like the PyTorch module it replaces: float32 (N, 3, H, W) -> logits (N, classes)."""

    def __init__(self, session, path: Path, note: str):
        self.session = session
        self.path = path
        self.note = note  # how it was obtained, for reports ('cached export', 'exported now')
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # ONNX Runtime reads plain NCHW float32; .contiguous() undoes channels-last if any.
        array = x.detach().to("cpu", torch.float32).contiguous().numpy()
        return torch.from_numpy(self.session.run([self.output_name], {self.input_name: array})[0])


def _probe(input_size: int) -> torch.Tensor:
    return torch.randn(2, 3, input_size, input_size, generator=torch.Generator().manual_seed(0))


def logit_difference(classifier: OnnxClassifier, model: torch.nn.Module, input_size: int) -> float:
    """Largest |logit difference| between ONNX Runtime and PyTorch on a fixed probe batch."""
    probe = _probe(input_size)
    with torch.inference_mode():
        expected = model.eval()(probe).float()
    got = classifier(probe)
    if got.shape != expected.shape:
        return float("inf")
    return float((got - expected).abs().max())


@dataclass
class OnnxCache:
    """The folder of exported graphs: ``<stem>.onnx`` with ``<stem>.json`` beside it (what was
    checked), or ``<stem>.failed.json`` (why this model cannot be exported with these versions)."""

    folder: Path

    def paths(self, key: ExportKey) -> tuple[Path, Path, Path]:
        return (self.folder / f"{key.stem}.onnx", self.folder / f"{key.stem}.json",
                self.folder / f"{key.stem}.failed.json")

    def failure(self, key: ExportKey) -> str | None:
        failed = self.paths(key)[2]
        if not failed.exists():
            return None
        meta = _read_meta(failed)
        return one_line(meta.get("reason", "export failed")) if meta else "export failed"

    def has(self, key: ExportKey) -> bool:
        return self.paths(key)[0].is_file()

    def store(self, key: ExportKey, data: bytes, difference: float) -> Path:
        model_path, meta_path, failed = self.paths(key)
        write_verified(model_path, meta_path, data, {**asdict(key), "max_abs_logit_difference": difference,
                                                     "tolerance": VALIDATION_TOLERANCE,
                                                     "onnxruntime": onnxruntime_version()})
        failed.unlink(missing_ok=True)
        return model_path

    def record_failure(self, key: ExportKey, reason: str) -> None:
        _atomic_write(self.paths(key)[2], json.dumps({**asdict(key), "reason": reason}, indent=1).encode())

    def discard(self, key: ExportKey) -> None:
        for path in self.paths(key)[:2]:
            path.unlink(missing_ok=True)


def _first_line(exc: BaseException) -> str:
    """'Type: first line', printable, at most 600 characters with '…' where cut: a cut at 200 without a
    mark ended a long cache path mid-name (hostile campaign, a folder in place of an export)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {one_line(text.splitlines()[0], 600)}" if text else type(exc).__name__


def _session(key: ExportKey, cache: OnnxCache, threads: int, allow_export: bool,
             export: Callable[[], tuple[bytes, Callable[[OnnxClassifier], float]]],
             prepare: Callable[[], object] | None = None) -> OnnxClassifier:
    """The session of ``key``: from the cache, or ``export()`` (the graph and the check that
    measures its largest logit difference from PyTorch) now, kept when the check passes. Raises
    :class:`OnnxBackendError` with the reason when ONNX Runtime cannot be used. ``prepare()`` (loading
    the PyTorch model) runs before an export, outside the failure record: a model that cannot be
    loaded says so itself and is never remembered as one that cannot be exported."""
    if onnxruntime_version() is None:
        raise OnnxBackendError("onnxruntime/onnx are not installed (pip install -r requirements.txt)")
    model_path, meta_path, failed_path = cache.paths(key)
    if cache.has(key):
        try:
            verified = read_verified(model_path, meta_path)
            return OnnxClassifier(make_session(verified, threads), model_path, "cached export")
        except Exception as exc:  # a damaged or unverifiable cache file: export again below
            reason = str(exc) if isinstance(exc, OnnxBackendError) else f"cached export unreadable ({_first_line(exc)})"
            try:
                cache.discard(key)
            except OSError:
                pass  # not removable (a folder at its name): the export below stores over it or says why
            if not allow_export:
                raise OnnxBackendError(f"{reason}; too few images to export it again") from None
    known_failure = cache.failure(key)
    if known_failure:
        raise OnnxBackendError(f"export failed before with these versions: {known_failure} (delete "
                               f"{failed_path} to try again)")
    if not allow_export:
        raise OnnxBackendError("no cached export and too few images to be worth exporting")
    if prepare is not None:
        prepare()
    try:
        data, check = export()
        with tempfile.TemporaryDirectory(prefix="wildlens-onnx-check-") as tmp:
            candidate = Path(tmp) / "candidate.onnx"
            candidate.write_bytes(data)
            difference = check(OnnxClassifier(make_session(candidate, threads), candidate, ""))
        if not difference <= VALIDATION_TOLERANCE:
            raise OnnxBackendError(f"ONNX Runtime and PyTorch logits differ by {difference:.3g} "
                                   f"(tolerance {VALIDATION_TOLERANCE:g})")
    except Exception as exc:  # the exporter raises many types for unsupported operators
        reason = str(exc) if isinstance(exc, OnnxBackendError) else _first_line(exc)
        # Only what these versions will do again is remembered (an operator the exporter lacks, a
        # difference): a full disk or a lack of memory is this run's, and the next one tries again.
        # An ImportError is this machine's too: an onnx that is installed but cannot be imported (a
        # protobuf mismatch) would be remembered as failing long after it is mended (code review).
        if isinstance(exc, ImportError):
            reason = f"onnx cannot be imported ({_first_line(exc)}); pip install -r requirements.txt"
        if not isinstance(exc, (OSError, MemoryError, ImportError)):
            try:
                cache.record_failure(key, reason)
            except OSError:
                pass  # remembering is a saving, not a need
        raise OnnxBackendError(reason) from None
    try:
        cache.store(key, data, difference)
    except OSError as exc:  # a full disk, a read-only or odd cache folder: this run goes on without it
        raise OnnxBackendError(f"the checked export cannot be stored in {cache.folder} ({_first_line(exc)})") from None
    return OnnxClassifier(make_session(data, threads), model_path, f"exported now, max logit diff {difference:.1e}")


def onnx_classifier(key: ExportKey, cache: OnnxCache, threads: int, load_model: Callable[[], torch.nn.Module],
                    allow_export: bool) -> tuple[OnnxClassifier, torch.nn.Module | None]:
    """An ONNX Runtime classifier for ``key``: from the cache, or exported now from
    ``load_model()`` and checked against it. Returns (classifier, the PyTorch model if it had to be
    loaded). Raises :class:`OnnxBackendError` with the reason when ONNX Runtime cannot be used."""
    loaded: list[torch.nn.Module] = []

    def export() -> tuple[bytes, Callable[[OnnxClassifier], float]]:
        model = loaded[0]
        return (export_onnx_bytes(model, key.input_size),
                lambda candidate: logit_difference(candidate, model, key.input_size))

    classifier = _session(key, cache, threads, allow_export, export, prepare=lambda: loaded.append(load_model()))
    return classifier, (loaded[0] if loaded else None)


PART_PROBE_IMAGES = 8  # random images a part's export is checked on (a whole model's: 2, _probe)


class OnnxPart(torch.nn.Module):
    """A submodule run by ONNX Runtime, in place in its PyTorch parent: float32 in, the graph's first
    output out (an image tower that returns (pooled, tokens) exports both; the pooled comes out)."""

    def __init__(self, session: OnnxClassifier):
        super().__init__()
        self.session = session

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.session(x)


def onnx_part(key: ExportKey, cache: OnnxCache, threads: int, module: torch.nn.Module, attribute: str,
              allow_export: bool) -> OnnxClassifier:
    """``module`` with its submodule ``attribute`` (a zero-shot head's image tower) replaced, in place,
    by :class:`OnnxPart`: from the cache, or exported alone now. The check bounds what the pipeline
    reads: the module's ``logit_bound(expected, got)`` of the part's outputs on a probe batch (a
    zero-shot head: the largest logit difference over *any* label set, since the export is shared by
    every label set and recipe); a module without one has no part to export. On any failure
    ``module`` is left as it was and :class:`OnnxBackendError` says why."""
    original = getattr(module, attribute)
    bound = getattr(module, "logit_bound", None)
    if bound is None:
        raise OnnxBackendError(f"{type(module).__name__} has no logit_bound to check an export of its {attribute} by")

    def export() -> tuple[bytes, Callable[[OnnxClassifier], float]]:
        def check(candidate: OnnxClassifier) -> float:
            probe = torch.randn(PART_PROBE_IMAGES, 3, key.input_size, key.input_size,
                                generator=torch.Generator().manual_seed(0))
            with torch.inference_mode():
                expected, got = original.eval()(probe), candidate(probe)
            expected = expected[0] if isinstance(expected, (tuple, list)) else expected  # (pooled, tokens) towers
            return float(bound(expected, got)) if got.shape == expected.shape else float("inf")

        return export_onnx_bytes(original, key.input_size), check

    session = _session(key, cache, threads, allow_export, export)
    setattr(module, attribute, OnnxPart(session))
    return session
