"""timm's pretrained models: ``arch.tag`` names, weights from the Hugging Face Hub or a URL.

Input configuration from timm's pretrained config (at its test resolution where timm records
one); weights looked up, without network access, in the Hugging Face cache (a safetensors twin
first) and then, for weights timm hosts elsewhere (GitHub releases), in the torch hub cache;
loading through ``timm.create_model``, with a local file read safely first
(:func:`classify.models.weights.read_state_dict`) and adapted by timm's own filter. ``--download`` fetches
the file into the cache that lookup reads (:func:`classify.models.weights.download_from_hf`, the
safetensors twin first, or :func:`classify.models.weights.download_url`) and loads it from there, so no
downloaded file is read by timm's own loader.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from classify.models.weights import (WeightsError, confirm_listed, download_from_hf, download_url, find_in_hf_cache,
                                     find_in_torch_hub, note_listed, read_state_dict)
from classify.models.library_index import listed_place
from classify.models.registry import ModelSource, register_source

if TYPE_CHECKING:
    from classify.models.registry import InputConfig, ModelEntry, WeightsStatus


def timm_input_config(pretrained_name: str) -> InputConfig:
    """The evaluation input of timm's pretrained config ``pretrained_name`` ('arch.tag' or 'arch')."""
    from timm.models import get_pretrained_cfg

    from classify.models.registry import UnknownModelError

    cfg = get_pretrained_cfg(pretrained_name)
    if cfg is None:
        raise UnknownModelError(f"The installed timm has no pretrained config {pretrained_name!r}.")
    return input_config_of(cfg.to_dict(), pretrained_name)


def input_config_of(pretrained_cfg: dict, name: str) -> InputConfig:
    """Our InputConfig from a timm pretrained config (a dict): timm's own evaluation transform."""
    from timm.data import resolve_data_config

    from classify.models.registry import InputConfig

    # use_test_size: evaluate at the test resolution where timm records one (e.g. tv2 weights).
    data = resolve_data_config(pretrained_cfg=pretrained_cfg, use_test_size=True)
    _, height, width = data["input_size"]
    if height != width:
        raise ValueError(f"{name}: non-square input {height}x{width} is not supported.")
    return InputConfig(size=int(height), crop_pct=float(data["crop_pct"]), interpolation=str(data["interpolation"]),
                       mean=tuple(float(v) for v in data["mean"]), std=tuple(float(v) for v in data["std"]),
                       crop_mode=str(data.get("crop_mode", "center")))


def timm_untrained(name: str, num_classes: int):
    """``timm.create_model(name)`` with random weights; a pretrained_cfg naming the tag sets image
    size etc. exactly as pretrained=True would."""
    import timm

    return timm.create_model(name, pretrained=False, num_classes=num_classes)


@register_source
class TimmSource(ModelSource):
    name = "timm"
    description = "timm pretrained weights"

    def model_name(self, entry: ModelEntry) -> str:
        """'arch.tag' as timm.create_model takes it (also the pretrained-config key); the bare
        architecture for one without pretrained weights (weights '': a --checkpoint supplies them)."""
        return f"{entry.arch}.{entry.weights}" if entry.weights else entry.arch

    def input_config(self, entry: ModelEntry) -> InputConfig:
        return timm_input_config(self.model_name(entry))

    def fetch_command(self, entry: ModelEntry) -> str:
        if not entry.weights:
            return f"(none: timm has no pretrained weights for {entry.arch}; give --checkpoint {entry.arch}=PATH)"
        return f"python -c \"import timm; timm.create_model('{self.model_name(entry)}', pretrained=True)\""

    def pretrained_cfg(self, entry: ModelEntry):
        from timm.models import get_pretrained_cfg

        cfg = get_pretrained_cfg(self.model_name(entry))
        if cfg is None:
            raise WeightsError(f"timm has no pretrained weights named {self.model_name(entry)!r}.")
        return cfg

    def _places(self, entry: ModelEntry, listing: bool = True) -> tuple[str, str, str, bool]:
        """(Hub repository id, Hub file name, URL, from the listing) of the entry's weights, '' where timm
        names none. From the cached listing (:func:`classify.models.library_index.listed_place`) while timm
        is not imported: the Models page's status of every registry model imported timm (2.5-4 s of its
        first load); else, and for a name the listing lacks, from timm's pretrained config."""
        listed = listed_place("timm", self.model_name(entry)) if listing else None
        if listed is not None:
            return (*listed, True)
        cfg = self.pretrained_cfg(entry)
        return cfg.hf_hub_id or "", cfg.hf_hub_filename or "", (self._url(cfg) if cfg.url else "") or "", False

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        if not entry.weights:
            return self.status(entry, None, "missing", ["timm (no pretrained weights for this architecture)"])
        try:
            return self._locate(entry, *self._places(entry))
        except ValueError:  # a place huggingface_hub refuses: never from timm, so from a listing; ask timm
            return self._locate(entry, *self._places(entry, listing=False))

    def _locate(self, entry: ModelEntry, hub_id: str, hub_file: str, url: str, listed: bool) -> WeightsStatus:
        looked: list[str] = []
        found: Path | None = None
        kind = "missing"
        if hub_id:
            found, where = find_in_hf_cache(hub_id, hub_file or None)
            kind = "hf-cache"
            looked.append(where)
        if found is None and url:
            found, where = find_in_torch_hub(url)
            kind = "torch-hub-cache"
            looked.append(where)
        if found is not None and listed:
            note_listed(found)  # load() asks timm before reading it
        return self.status(entry, found, kind, looked)

    @staticmethod
    def _url(cfg) -> str:
        return cfg.url[0] if isinstance(cfg.url, (tuple, list)) else cfg.url

    def download(self, entry: ModelEntry) -> Path:
        """Fetch the weights into the cache :meth:`locate` reads (Hub first, as timm prefers), unread."""
        cfg = self.pretrained_cfg(entry)
        if cfg.hf_hub_id:
            return download_from_hf(cfg.hf_hub_id, cfg.hf_hub_filename, self.fetch_command(entry))
        if cfg.url:
            return download_url(self._url(cfg), self.fetch_command(entry))
        raise WeightsError(f"timm names no place to download {self.model_name(entry)!r} from.")

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        return timm_untrained(self.model_name(entry), num_classes)

    def load(self, entry: ModelEntry, path: Path | None):
        import timm

        if path is None:  # require_weights allowed a download: fetched here, read below like any file
            path = self.download(entry)
        else:  # timm is imported now: its own config must name the same file
            confirm_listed(path, lambda: self.locate(entry), self.model_name(entry), "timm-weights")
        if path.suffix == ".npz":  # original JAX/Flax ViT weights: timm's own converter reads them (no pickle)
            overlay = {"file": str(path), "custom_load": True}
        else:  # read here (safetensors or weights_only), then timm's filter adapts foreign layouts
            overlay = {"state_dict": read_state_dict(path), "custom_load": False}
        # The head as the entry says (a checkpoint's own head may differ from the pretrained
        # config's, e.g. 11,821 classes under an in1k tag): timm then keeps the file's classifier.
        overlay["num_classes"] = entry.num_classes
        return timm.create_model(self.model_name(entry), pretrained=True, pretrained_cfg_overlay=overlay,
                                 num_classes=entry.num_classes)
