"""torchvision's models: an architecture and a weights enum name (``IMAGENET1K_V2``).

Input configuration from the weights' own preset transform (resize, crop, mean/std); weights
looked up in the torch hub cache, where torchvision downloads them; loading through
``torchvision.models.get_model``, or a local state dict read safely into the architecture.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..weights import find_in_torch_hub, read_state_dict
from .base import ModelSource, build_untrained, register_source

if TYPE_CHECKING:
    from ..registry import InputConfig, ModelEntry
    from ..weights import WeightsStatus


@register_source
class TorchvisionSource(ModelSource):
    name = "torchvision"
    description = "torchvision weights"

    def input_config(self, entry: ModelEntry) -> InputConfig:
        from torchvision.models import get_model_weights

        from ..registry import InputConfig

        preset = get_model_weights(entry.arch)[entry.weights].transforms()  # ImageClassification: resize, crop, normalise
        crop, resize = int(preset.crop_size[0]), int(preset.resize_size[0])
        return InputConfig(size=crop, crop_pct=crop / resize, interpolation=preset.interpolation.value,
                           mean=tuple(float(v) for v in preset.mean), std=tuple(float(v) for v in preset.std))

    def fetch_command(self, entry: ModelEntry) -> str:
        return (f"python -c \"import torchvision; torchvision.models.get_model('{entry.arch}', "
                f"weights='{entry.weights}')\"")

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        from torchvision.models import get_model_weights

        found, where = find_in_torch_hub(get_model_weights(entry.arch)[entry.weights].url)
        return self.status(entry, found, "torch-hub-cache", [where])

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        from torchvision.models import get_model

        return get_model(entry.arch, weights=None, num_classes=num_classes)

    def load(self, entry: ModelEntry, path: Path | None):
        from torchvision.models import get_model

        if path is None:
            return get_model(entry.arch, weights=entry.weights)
        model = build_untrained(entry)
        model.load_state_dict(read_state_dict(path), strict=True)
        return model
