"""timm models on the Hugging Face Hub by repository: ``hf-hub:ORG/NAME`` (entry id ``hf-hub/ORG/NAME``).

Such a repository holds a timm ``config.json`` (architecture, model arguments, pretrained config:
input, head size, sometimes the label names) and the weights (``model.safetensors`` or
``pytorch_model.bin``). Everything is read from this machine's Hugging Face cache: the config with
:func:`parse_hub_config` (timm's own layout, old and new), the weights with
:func:`classify.models.weights.read_state_dict` (safetensors or weights_only), never with timm's
``hf-hub:`` loader, which would ask the network. ``ModelEntry.arch`` is the timm architecture and
``ModelEntry.weights`` the repository.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from classify.models.weights import WeightsError, download_from_hf, find_in_hf_cache, read_state_dict
from classify.models.registry import ModelSource, register_source

if TYPE_CHECKING:
    from classify.models.registry import InputConfig, ModelEntry, WeightsStatus


def parse_hub_config(config: dict) -> tuple[str, dict, dict]:
    """(architecture, pretrained config, model arguments) of a timm Hub ``config.json``, in both
    layouts timm writes (timm.models._hub._parse_model_cfg: a nested 'pretrained_cfg', or one flat dict)."""
    config = dict(config)
    if "pretrained_cfg" in config:
        pretrained = dict(config["pretrained_cfg"])
        arch = config.get("architecture")
    else:
        pretrained = config
        arch = pretrained.pop("architecture", None)
        if "labels" in pretrained:
            pretrained["label_names"] = pretrained.pop("labels")
    for key in ("num_classes", "label_names", "label_descriptions"):
        if key in config and key != "pretrained_cfg":
            pretrained[key] = config[key]
    if not arch:
        raise WeightsError("config.json names no timm architecture ('architecture').")
    return str(arch), pretrained, dict(config.get("model_args") or {})


@register_source
class HubSource(ModelSource):
    name = "hf-hub"
    description = "timm model on the Hugging Face Hub"

    def _config(self, entry: ModelEntry) -> tuple[str, dict, dict]:

        config = hub_config(entry.weights)
        if config is None:
            raise WeightsError(f"The config.json of hf-hub:{entry.weights} is not in the Hugging Face cache; fetch "
                               f"it with: {self.fetch_command(entry)}")
        return parse_hub_config(config)

    def input_config(self, entry: ModelEntry) -> InputConfig:
        from classify.models.sources.timm_source import input_config_of

        _, pretrained, _ = self._config(entry)
        return input_config_of(pretrained, f"hf-hub:{entry.weights}")

    def fetch_command(self, entry: ModelEntry) -> str:

        return hub_fetch_command(entry.weights)

    def _filename(self, entry: ModelEntry) -> str | None:
        _, pretrained, _ = self._config(entry)
        return pretrained.get("hf_hub_filename")

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        found, where = find_in_hf_cache(entry.weights, self._filename(entry))
        return self.status(entry, found, "hf-cache", [where])

    def _create(self, entry: ModelEntry, num_classes: int, **kwargs):
        import timm

        arch, pretrained, model_args = self._config(entry)
        pretrained = {**pretrained, "num_classes": num_classes}
        args = {**model_args, "num_classes": num_classes}
        return timm.create_model(arch, pretrained_cfg=pretrained, **args, **kwargs)

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        return self._create(entry, num_classes, pretrained=False)

    def load(self, entry: ModelEntry, path: Path | None):
        if path is None:
            path = download_from_hf(entry.weights, self._filename(entry), self.fetch_command(entry))
        overlay = {"state_dict": read_state_dict(path), "custom_load": False, "num_classes": entry.num_classes}
        return self._create(entry, entry.num_classes, pretrained=True, pretrained_cfg_overlay=overlay)


def hub_config(repo: str) -> dict | None:
    """The ``config.json`` of a Hub model in this machine's Hugging Face cache, or None (no network)."""
    found, _ = find_in_hf_cache(repo, "config.json")
    if found is None:
        return None
    try:
        return json.loads(Path(found).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(f"{found} is not a readable config.json ({exc}).") from None


def hub_fetch_command(repo: str) -> str:
    return f"python -c \"import timm; timm.create_model('hf-hub:{repo}', pretrained=True)\""
