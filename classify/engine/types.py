"""What an inference run is given and what it reports, shared by both engines and their callers:
the images (:class:`ImageTask`), the options (:class:`InferenceOptions`) and the report
(:class:`InferenceReport`, one :class:`ModelReport` per model).

Data only: the local pipeline (``classify.engine.pipeline``), the Ray engine
(``classify.engine.ray_engine``) and the engine choice (``classify.engine.dispatch``) all import
it, and it imports none of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from classify.engine.options import DEFAULT_RESAMPLER


@dataclass(frozen=True)
class ImageTask:
    """One image to classify. ``image`` is its identity in the store (a manifest 'file', or
    '<wnid>/<name>' in a folder); ``error`` marks an image known to be unusable up front."""

    image: str
    path: str
    true_wnid: str | None = None
    error: str | None = None


@dataclass
class InferenceOptions:
    batch_size: int | None = None  # None: DEFAULT_BATCH for the device
    num_workers: int | None = None  # None: default_num_workers(device)
    # CPU only: forward passes in flight at once, one thread each; None = cpu_streams(workers).
    num_threads: int | None = None
    device: str = "auto"  # 'auto' (CUDA > MPS > CPU), 'cpu', 'cuda', 'cuda:1', 'mps'
    # 'auto' (bf16/fp16 autocast on a GPU, fp32 on the CPU), 'fp32', 'bf16' (GPU, or a CPU with
    # AVX-512 BF16/AMX), 'fp16' (GPU), 'int8' (CPU, CNNs: ONNX Runtime static quantization)
    precision: str = "auto"
    # int8 only (classify.engine.quantize.Int8Cascade): 'auto' re-runs in fp32 the images whose int8
    # top-1 probability margin is at or below the gate chosen on the calibration set (stored as
    # MODEL--int8, each row's int8_rechecked says whether it was); 'none': int8 alone (MODEL--int8-plain).
    int8_recheck: str = "auto"
    channels_last: bool = True
    fold_batchnorm: bool = True  # exact up to float rounding, checked per model (classify.engine.optimize)
    max_params_per_pass: int = 300_000_000  # models held in memory together (fp32: 1.2 GB)
    allow_download: bool = False  # fetch missing weights (never while HF_HUB_OFFLINE is set)
    checkpoints: dict[str, str] = field(default_factory=dict)  # model id -> local checkpoint file
    compact: bool = True  # merge a model's part files once a run has finished
    # 'auto': ONNX Runtime on the CPU when installed and its export is verified, else PyTorch;
    # 'torch'; 'onnxruntime' (CPU only; an error instead of a fallback).
    backend: str = "auto"
    # auto: exporting costs ~1-2 s per model, ~15 ms saved per image: export only for at least this
    # many images; a cached export is used for any number.
    onnx_export_min_images: int = 64
    cache_dir: str | None = None  # ONNX exports; None: the run store's cache folder ($WILDLENS_HOME/cache/onnx)
    # Decode large JPEGs at a reduced DCT scale (classify.engine.preprocess.load_rgb_draft): 2-4x faster
    # decoding of big photos, but not the pixels of a full decode, so off by default.
    jpeg_draft: bool = False
    # 'torch': torchvision's uint8 resize (resize + crop 2-3x faster than Pillow's, within 1/255 on <1% of values);
    # 'pil': Pillow, equal to timm's eval transform to the bit (classify.engine.preprocess).
    resampler: str = DEFAULT_RESAMPLER
    # Also hand each image's frozen features to the sink (classify.features: the pooled pre-logit
    # features of a classifier, the image embedding of a zero-shot model) in a 'features' column
    # beside its prediction row. PyTorch only: a model never runs on ONNX Runtime with this set.
    features: bool = False
    # 'local' (this process: a DataLoader and forward threads) or 'ray' (Ray Data actors on a local
    # Ray instance or a cluster, classify.engine.ray_engine); the rows, parts and resume are the same.
    engine: str = "local"
    ray_address: str | None = None  # None: RAY_ADDRESS, else a local instance started for the run
    ray_actors: int | None = None  # actors (each holds the models once); None: 1 per GPU, else 1
    ray_gpus_per_actor: float | None = None  # None: 1 when the cluster has GPUs, else 0 (CPU actors)
    # Seconds to join the cluster at ray_address (connection, protocol check, ray.init), then one line
    # (core.raysession.ray_session); a server that accepted TCP but was not Ray hung past 300 s.
    ray_join_timeout: float = 30.0
    # 'auto': JPEGs decode, resize and crop on a CUDA device (nvJPEG, classify.engine.gpu_decode) when its
    # probe works, other formats and refusals on the CPU; 'off': always the CPU workers. Local engine. A
    # JPEG the device decodes is decoded in full, also with jpeg_draft (which applies to the CPU path).
    gpu_decode: str = "auto"


DECODE_CPU = "CPU workers"  # InferenceReport.decode when every image was decoded by the CPU workers


@dataclass
class ModelReport:
    model: str
    predicted: int = 0  # rows stored now with status 'ok'
    failed: int = 0  # rows stored now with status 'failed'
    skipped: int = 0  # already stored 'ok' before this call
    rechecked: int | None = None  # the int8 cascade: rows stored now that its fp32 pass classified again


@dataclass
class InferenceReport:
    models: dict[str, ModelReport]
    images: int  # image decodes in this call (once per pass over the images)
    seconds: float
    device: str
    precision: str
    backends: dict[str, str] = field(default_factory=dict)  # model id -> backend it ran on, and why
    resampler: str = DEFAULT_RESAMPLER  # what resized the images (classify.engine.preprocess)
    # Entries of an images folder that were not read, (path relative to the folder, reason);
    # set by classify.targets.predict_folder (see scan_folder).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    engine: str = "local"  # InferenceOptions.engine; 'ray (2 actors, local instance)' and the like
    # Which path decoded the images: DECODE_CPU, or the device path with its counts (classify.engine.gpu_decode)
    decode: str = DECODE_CPU
    # Ray nodes lost during the run (classify.engine.ray_engine): their unfinished batches were redone
    # on the nodes left; nothing they stored is lost, nothing is stored twice.
    lost_nodes: list[str] = field(default_factory=list)

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        parts = [f"{m.model}: {m.predicted} predicted, {m.failed} failed, {m.skipped} already stored"
                 for m in self.models.values()]
        ran_on = "; ".join(f"{model} on {backend}" for model, backend in self.backends.items())
        return ("; ".join(parts) + f" ({self.images} images in {self.seconds:.1f} s on {self.device}, {self.precision}, "
                                  f"{self.resampler} resize"
                                  + (f", {self.engine} engine" if self.engine != "local" else "")
                                  + (f", decode: {self.decode}" if self.decode != DECODE_CPU else "") + ")"
                + (f" [{ran_on}]" if ran_on else "")
                + (f"; lost Ray node{'s' if len(self.lost_nodes) > 1 else ''} {', '.join(self.lost_nodes)}: "
                   "unfinished batches redone on the nodes left" if self.lost_nodes else ""))
