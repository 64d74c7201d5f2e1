"""torchvision's models: an architecture and a weights enum name (``IMAGENET1K_V2``).

Input configuration from the weights' own preset transform (resize, crop, mean/std); weights
looked up in the torch hub cache, where torchvision downloads them; loading as a state dict read
safely (:func:`classify.models.weights.read_state_dict`) into the architecture. ``--download`` fetches the
file into that cache first (:func:`classify.models.weights.download_url`, sha256-prefix checked as torch hub
does): ``get_model(weights=...)`` itself would unpickle it with torch hub's unrestricted unpickler.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from classify.models.weights import confirm_listed, download_url, find_in_torch_hub, note_listed, read_state_dict
from classify.models.library_index import listed_place
from classify.models.registry import ModelSource, register_source
from classify.models.weights import build_untrained

if TYPE_CHECKING:
    from classify.models.registry import InputConfig, ModelEntry, WeightsStatus


# What torchvision's builders change when weights are given (get_model(arch, weights=...)):
# Inception-v3 and GoogLeNet then turn ImageNet-normalised input back into the [-1, 1] input their
# weights were trained on (transform_input) and carry auxiliary heads in the file. Building with
# weights=None and loading the file ourselves must build the same network.
WEIGHTS_BUILD_KWARGS = {"inception_v3": {"transform_input": True, "aux_logits": True, "init_weights": False},
                        "googlenet": {"transform_input": True, "aux_logits": True, "init_weights": False}}


@register_source
class TorchvisionSource(ModelSource):
    name = "torchvision"
    description = "torchvision weights"

    def input_config(self, entry: ModelEntry) -> InputConfig:
        from torchvision.models import get_model_weights

        from classify.models.registry import InputConfig

        preset = get_model_weights(entry.arch)[entry.weights].transforms()  # ImageClassification: resize, crop, normalise
        crop, resize = int(preset.crop_size[0]), int(preset.resize_size[0])
        return InputConfig(size=crop, crop_pct=crop / resize, interpolation=preset.interpolation.value,
                           mean=tuple(float(v) for v in preset.mean), std=tuple(float(v) for v in preset.std))

    def fetch_command(self, entry: ModelEntry) -> str:
        return (f"python -c \"import torchvision; torchvision.models.get_model('{entry.arch}', "
                f"weights='{entry.weights}')\"")

    def url(self, entry: ModelEntry) -> str:
        from torchvision.models import get_model_weights

        return get_model_weights(entry.arch)[entry.weights].url

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        # The cached listing while torchvision is not imported (it imports torch and torch._dynamo: 2-3 s of
        # the Models page's first load), else the weights enum.
        listed = listed_place("torchvision", f"{entry.arch}.{entry.weights}")
        found, where = find_in_torch_hub(listed[0] if listed else self.url(entry))
        if found is not None and listed:
            note_listed(found)  # load() asks torchvision before reading it
        return self.status(entry, found, "torch-hub-cache", [where])

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        from torchvision.models import get_model

        return get_model(entry.arch, weights=None, num_classes=num_classes, **WEIGHTS_BUILD_KWARGS.get(entry.arch, {}))

    def load(self, entry: ModelEntry, path: Path | None):
        if path is None:  # require_weights allowed a download: fetched here, read below like any file
            path = download_url(self.url(entry), self.fetch_command(entry), check_hash=True)
        model = build_untrained(entry)  # torchvision is imported now: its enum must name the same file
        confirm_listed(path, lambda: self.locate(entry), entry.id, "torchvision-weights")
        model.load_state_dict(read_state_dict(path), strict=True)
        return model
