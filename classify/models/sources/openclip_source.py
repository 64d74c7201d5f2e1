"""open_clip models as zero-shot (language-augmented) classifiers: ``clip:<model>[.<tag>][+<recipe>]``.

A name is an open_clip architecture (``open_clip.list_models()``: ``ViT-B-32``, ``RN50``,
``MobileCLIP-S1``), its pretrained tag (``openai``, ``laion2b_s34b_b79k``; absent: a
``--checkpoint`` supplies the weights) and, after ``+``, a prompt recipe (``classify.zeroshot.prompts``:
``Recipe.tag()``, absent for the default recipe). The recipe is part of the model id, so recipes
sit side by side in one run like two models.

Stored ids. A model id names a folder of part files (``core.parts``: letters, digits, ``_``,
``.``, ``-``; ``/`` becomes ``_``), so neither ``:`` nor ``+`` can be stored. The stored form is
``clip/<model>[.<tag>][__<recipe token>...]`` (``clip/ViT-B-32.openai``,
``clip/ViT-B-32.openai__def__path``: the recipe's ``Recipe.tag()``), like ``hf-hub/ORG/NAME``;
both forms resolve to the same entry (:func:`parse_clip_name`, :func:`clip_entry`, and
``classify.models.lookup.get_model``, which pages use to name a stored id), recipe tokens in any order
or case give one id, and the precision suffix (``--bf16``) goes after everything, as for any model.

What the source answers (:class:`ClipSource`, ``ModelEntry.source == 'clip'``):

* the input: open_clip's preprocessing of the tag (``open_clip.get_pretrained_cfg``: mean, std,
  interpolation, resize mode) at the architecture's image size, as an
  :class:`~classify.models.registry.InputConfig` (resize the shorter side to the size and centre-crop it:
  crop_pct 1.0; ``squash`` resizes both sides), so the same batched decode serves CLIP models and
  classifiers;
* the weights: the file open_clip itself downloads from the Hugging Face Hub (``hf_hub`` of the
  tag's pretrained config; the safetensors twin first), looked up in the Hugging Face cache without
  network (:func:`classify.models.weights.find_in_hf_cache`); the fetch command is open_clip's own
  ``create_model_and_transforms``;
* loading: the architecture built with ``pretrained=None`` (random weights, no download; text
  tower weights are never fetched either), then the state dict read safely
  (:func:`classify.models.weights.read_state_dict`: safetensors or ``weights_only``) and adapted as
  open_clip's ``load_checkpoint`` adapts it, ``strict``; QuickGELU as the tag was trained with;
* the module the pipeline runs: :class:`classify.zeroshot.classifier.ZeroShotHead`, the image tower and the
  cached text classifier over the entry's label set (``ModelEntry.label_space``, whose wnids in
  ``core.labels`` order are the output order).

The whole model is not exported to ONNX (``weights_file = False``): an export keyed on the weights
would not know the label set and the recipe. Its image tower is (:meth:`ClipSource.onnx_part`): keyed
on the weights' sha256 and open_clip's version, one export serves every label set and recipe, and
the text classifier's matrix product stays on PyTorch. Everything imports open_clip lazily.
"""
from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from classify.models.weights import (WeightsError, confirm_listed, download_from_hf, file_sha256, find_in_hf_cache,
                                     note_listed, read_state_dict)
from classify.models.registry import ModelSource, register_source

if TYPE_CHECKING:
    from classify.models.registry import InputConfig, ModelEntry, OnnxPartSpec, WeightsStatus
    from classify.zeroshot.classifier import ZeroShotHead

SOURCE_NAME = "clip"
FAMILY = "language-augmented"
USER_PREFIX = "clip:"  # what people type
STORED_PREFIX = "clip/"  # what runs store (core.parts refuses ':' and '+')
USER_RECIPE_SEPARATOR = "+"  # clip:ViT-B-32.openai+def+path
STORED_RECIPE_SEPARATOR = "__"  # classify.zeroshot.prompts.RECIPE_SEPARATOR: clip/ViT-B-32.openai__def__path
DEFAULT_LABEL_SET = "imagenet-1k"  # the label set of a zero-shot model when none is given


@dataclass(frozen=True)
class ClipName:
    """The parts of a zero-shot model name: open_clip architecture, pretrained tag, recipe tag."""

    model: str
    tag: str = ""
    recipe: str = ""  # Recipe.tag(): '' or '__def__path'

    @property
    def base(self) -> str:
        return f"{self.model}.{self.tag}" if self.tag else self.model

    @property
    def base_id(self) -> str:
        """The stored id of the model without a recipe: 'clip/ViT-B-32.openai'."""
        return STORED_PREFIX + self.base

    @property
    def id(self) -> str:
        """The stored id: 'clip/ViT-B-32.openai' or 'clip/ViT-B-32.openai__def__path'."""
        return self.base_id + self.recipe

    @property
    def display(self) -> str:
        """The name people type: 'clip:ViT-B-32.openai+def+path'."""
        tokens = [t for t in self.recipe.split(STORED_RECIPE_SEPARATOR) if t]
        return USER_PREFIX + self.base + "".join(USER_RECIPE_SEPARATOR + t for t in tokens)


def is_clip_name(name: object) -> bool:
    return isinstance(name, str) and name.strip().lower().startswith((USER_PREFIX, STORED_PREFIX))


def parse_clip_name(name: str) -> ClipName:
    """'clip:ViT-B-32.openai+def+path' or 'clip/ViT-B-32.openai__def__path' -> ClipName with the
    recipe tokens as written (no lookup or canonical form: see :func:`clip_entry`). open_clip's
    architecture names and tags hold no '.', '+' or '__'."""
    text = name.strip()
    if not is_clip_name(text):
        raise ValueError(f"{name!r} is not a zero-shot model name (clip:MODEL[.TAG]).")
    rest = text[len(USER_PREFIX):]
    cuts = [i for i in (rest.find(USER_RECIPE_SEPARATOR), rest.find(STORED_RECIPE_SEPARATOR)) if i >= 0]
    recipe = ""
    if cuts:
        rest, recipe = rest[:min(cuts)], rest[min(cuts):]
        recipe = STORED_RECIPE_SEPARATOR.join(t for t in recipe.replace(USER_RECIPE_SEPARATOR, STORED_RECIPE_SEPARATOR)
                                              .split(STORED_RECIPE_SEPARATOR) if t)
        recipe = STORED_RECIPE_SEPARATOR + recipe if recipe else ""
    model, _, tag = rest.partition(".")
    return ClipName(model.strip(), tag.strip(), recipe.strip())


# --------------------------------------------------------------------------- open_clip lookups
def _open_clip():
    import open_clip

    return open_clip


@functools.lru_cache(maxsize=1)
def _pretrained_pairs() -> tuple[tuple[str, str], ...]:
    return tuple(_open_clip().list_pretrained())


def _canonical_model(model: str) -> str | None:
    models = _open_clip().list_models()
    if model in models:
        return model
    lower = {m.lower(): m for m in models}
    return lower.get(model.lower())


def _unknown(name: str, why: str):
    from classify.models.registry import UnknownModelError, registered_close_matches

    names = [f"{USER_PREFIX}{m}.{t}" for m, t in _pretrained_pairs()]
    close = [c for c in registered_close_matches(name) if is_clip_name(c)]
    close += difflib.get_close_matches(name.strip(), names, n=4, cutoff=0.6)
    hint = f" Did you mean: {', '.join(dict.fromkeys(close[:5]))}?" if close else ""
    return UnknownModelError(f"Unknown zero-shot model {name!r}.{hint} {why}; 'python -m classify models --family "
                             f"{FAMILY}' lists the registered ones, open_clip.list_pretrained() all of them.")


def canonical_recipe(recipe, name: str = "") -> str:
    """The recipe's own tag (``classify.zeroshot.prompts.Recipe.parse(tag).tag()``): '' for the default,
    else '__def__path' etc. Tokens in any order or case give the one tag."""
    if not isinstance(recipe, str):  # a Recipe
        return recipe.tag()
    if not recipe:
        return ""
    from classify.zeroshot.prompts import Recipe

    return Recipe.parse(recipe).tag()


def with_recipe(entry: ModelEntry, recipe) -> ModelEntry:
    """The zero-shot entry with prompt recipe ``recipe`` (a ``classify.zeroshot.prompts.Recipe`` or its
    tag; '' = the default), over the same label set."""
    parsed = parse_clip_name(entry.id)
    tag = canonical_recipe(recipe, entry.id)
    named = replace(parsed, recipe=tag)
    if named.id == entry.id:
        return entry
    from core.runstore import valid_run_id

    if not valid_run_id(named.id.replace("/", "_")):  # the rule core.parts applies to model ids
        from classify.models.registry import UnknownModelError

        raise UnknownModelError(f"{named.display}: its stored id {named.id!r} is not a usable model id (at most 80 "
                                "letters, digits, '_', '.', '-'); shorten the recipe.")
    base = _base_entry(parsed.base_id.lower())
    if tag:
        shown = named.display.partition(USER_RECIPE_SEPARATOR)[2]
        base = replace(base, id=named.id, name=f"{base.name} + {shown}", aliases=())
    return with_label_set(base, entry.label_space)


def with_label_set(entry: ModelEntry, label_set: str) -> ModelEntry:
    """The zero-shot entry predicting over ``label_set`` (a name ``core.labels.get_label_space``
    resolves); its outputs follow that name's wnid order."""
    return entry if entry.label_space == label_set else replace(entry, label_space=label_set)


def clip_entry(name: str) -> ModelEntry:
    """The entry of any zero-shot name: a registered one (its notes and display name), else any
    (architecture, tag) open_clip knows, or an architecture alone (weights from --checkpoint)."""
    from core.errors import OptionError

    parsed = parse_clip_name(name)
    try:
        recipe = canonical_recipe(parsed.recipe, name)
    except OptionError as exc:  # classify.zeroshot.prompts.PromptError: an UnknownModelError, as for any bad name
        from classify.models.registry import UnknownModelError

        raise UnknownModelError(f"{parsed.display}: {exc}") from None
    return with_recipe(_base_entry(parsed.base_id.lower()), recipe)


@functools.lru_cache(maxsize=128)
def _base_entry(key: str) -> ModelEntry:
    from classify.models.registry import _ALIASES, _REGISTRY, ModelEntry

    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    parsed = parse_clip_name(key)
    model = _canonical_model(parsed.model)
    if model is None:
        raise _unknown(parsed.display, f"open_clip has no architecture {parsed.model!r}")
    tag = ""
    if parsed.tag:
        tags = {t.lower(): t for m, t in _pretrained_pairs() if m == model}
        tag = tags.get(parsed.tag.lower(), "")
        if not tag:
            raise _unknown(parsed.display, f"open_clip has no pretrained tag {parsed.tag!r} for {model} (it has: "
                                           f"{', '.join(sorted(tags.values())) or 'none'})")
    named = ClipName(model, tag)
    entry = ModelEntry(id=named.id, name=named.display, family=FAMILY, source=SOURCE_NAME, arch=model, weights=tag,
                       label_space=DEFAULT_LABEL_SET, num_params=0,
                       notes="Not in the curated registry: resolved from open_clip by name.")
    from classify.models.weights import count_parameters

    return replace(entry, num_params=count_parameters(entry))


# --------------------------------------------------------------------------- the source
def _pretrained_cfg(entry: ModelEntry) -> dict:
    if not entry.weights:
        return {}
    return dict(_open_clip().get_pretrained_cfg(entry.arch, entry.weights) or {})


def _listed_hub(entry: ModelEntry) -> str | None:
    """The tag's ``hf_hub`` from the cached listing while open_clip is not imported (it imports timm and
    torchvision: 3-4 s of the Models page's first load, for the registry's CLIP models' status); None
    otherwise or when the listing lacks it."""
    from classify.models.library_index import listed_place

    listed = listed_place("clip", f"{entry.arch}.{entry.weights}")
    return None if listed is None else listed[0]


def _hub(entry: ModelEntry, hub: str | None = None) -> tuple[str, str | None]:
    """(repository, file name or None for open_clip's default) of a tag's weights on the Hub (``hub``: its
    ``hf_hub`` when known already)."""
    hub = _pretrained_cfg(entry).get("hf_hub", "") if hub is None else hub
    if not hub:
        raise WeightsError(f"open_clip names no Hugging Face Hub repository for {entry.arch}.{entry.weights}; give "
                           f"--checkpoint {parse_clip_name(entry.id).display}=PATH.")
    repo, filename = os.path.split(hub)  # as open_clip's download_pretrained: 'org/name/' or 'org/name/file'
    return repo, filename or None


def clip_preprocess(entry: ModelEntry) -> dict:
    """open_clip's evaluation preprocessing of the entry: its PreprocessCfg defaults, the tag's
    pretrained config over them, the architecture's image size."""
    from dataclasses import asdict

    from open_clip.transform import PreprocessCfg, merge_preprocess_dict

    cfg = merge_preprocess_dict(asdict(PreprocessCfg()), _pretrained_cfg(entry))
    model_cfg = _open_clip().get_model_config(entry.arch)
    if model_cfg is None:
        raise WeightsError(f"open_clip has no configuration for {entry.arch!r}.")
    size = model_cfg.get("vision_cfg", {}).get("image_size", cfg["size"])
    cfg["size"] = size
    return cfg


@register_source
class ClipSource(ModelSource):
    name = SOURCE_NAME
    description = "open_clip zero-shot model"
    weights_file = False  # an ONNX export keyed on the weights would not know the label set or recipe
    part_export = True  # its image tower is exported alone (onnx_part)

    def model_name(self, entry: ModelEntry) -> str:
        return f"{entry.arch}.{entry.weights}" if entry.weights else entry.arch

    def input_config(self, entry: ModelEntry) -> InputConfig:
        from classify.models.registry import InputConfig

        cfg = clip_preprocess(entry)
        size = cfg["size"]
        height, width = (size, size) if isinstance(size, int) else tuple(size)
        if height != width:
            raise ValueError(f"{entry.id}: non-square input {height}x{width} is not supported.")
        mode = cfg.get("resize_mode", "shortest")
        if mode not in ("shortest", "squash"):
            raise ValueError(f"{entry.id}: open_clip resize mode {mode!r} (padding) is not supported.")
        return InputConfig(size=int(height), crop_pct=1.0, interpolation=str(cfg["interpolation"]),
                           mean=tuple(float(v) for v in cfg["mean"]), std=tuple(float(v) for v in cfg["std"]),
                           crop_mode="center" if mode == "shortest" else "squash")

    def fetch_command(self, entry: ModelEntry) -> str:
        if not entry.weights:
            return (f"(none: {entry.arch} is an open_clip architecture without a pretrained tag; give --checkpoint "
                    f"{parse_clip_name(entry.id).display}=PATH)")
        return (f"python -c \"import open_clip; open_clip.create_model_and_transforms('{entry.arch}', "
                f"pretrained='{entry.weights}')\"")

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        if not entry.weights:
            return self.status(entry, None, "missing", ["open_clip (no pretrained tag named)"])
        listed = _listed_hub(entry)
        try:
            repo, filename = _hub(entry, listed)
            found, where = find_in_hf_cache(repo, filename or "open_clip_pytorch_model.bin")
        except ValueError:  # a place huggingface_hub refuses: never from open_clip, so from a listing; ask it
            listed = None
            repo, filename = _hub(entry)
            found, where = find_in_hf_cache(repo, filename or "open_clip_pytorch_model.bin")
        if found is not None and listed is not None:
            note_listed(found)  # load() asks open_clip before reading it
        return self.status(entry, found, "hf-cache", [where])

    def download(self, entry: ModelEntry) -> Path:
        repo, filename = _hub(entry)
        return download_from_hf(repo, filename or "open_clip_pytorch_model.bin", self.fetch_command(entry))

    def create(self, entry: ModelEntry, device=None):
        """The open_clip model (image and text towers) with random weights: nothing is downloaded
        (``pretrained=None``; no tower's own pretrained weights either)."""
        import torch

        open_clip = _open_clip()
        quick_gelu = bool(_pretrained_cfg(entry).get("quick_gelu", False))
        device = device if device is not None else torch.get_default_device()
        # On the meta device the tensors are made there (create_model builds on the CPU, then moves):
        # no random init of ~150M parameters to throw away (six CLIP models 5.8 -> 1.9 s, 2026-12-06).
        place = torch.device(device) if torch.device(device).type == "meta" else contextlib.nullcontext()
        with _quiet_random_init(), place:
            return open_clip.create_model(entry.arch, pretrained=None, force_quick_gelu=quick_gelu,
                                          pretrained_image=False, pretrained_text=False, device=device)

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        """The whole CLIP model (its text classifier is a buffer built from prompts, not parameters)."""
        return self.create(entry)

    def onnx_part(self, entry: ModelEntry, module) -> OnnxPartSpec | None:
        """The image tower of a :class:`~classify.zeroshot.classifier.ZeroShotHead` (``image_encoder``),
        keyed on the model without its recipe ('clip/ViT-B-32.openai/image-tower'): the tower does not
        depend on the label set or the prompts."""
        from classify.models.registry import OnnxPartSpec

        sha = getattr(module, "weights_sha256", None)
        if not sha or not hasattr(module, "image_encoder"):
            return None
        return OnnxPartSpec("image_encoder", f"{parse_clip_name(entry.id).base_id}/image-tower", sha,
                            f"open_clip {_open_clip().__version__}")

    def load(self, entry: ModelEntry, path: Path | None):
        if path is None:
            path = self.download(entry)
        model = self.create(entry, device="cpu")
        confirm_listed(path, lambda: self.locate(entry), entry.id, "clip-weights")
        load_clip_state_dict(model, read_state_dict(path))
        return zero_shot_head(entry, model, weights_sha256=file_sha256(path))


class _RandomInitNote(logging.Filter):
    """Drops open_clip's 'No pretrained weights loaded ... initialized randomly' warning: the
    weights are loaded right after (load), or none are wanted (a parameter count)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No pretrained weights loaded")


@contextlib.contextmanager
def _quiet_random_init():
    root, note = logging.getLogger(), _RandomInitNote()
    root.addFilter(note)  # open_clip logs through the root logger
    try:
        yield
    finally:
        root.removeFilter(note)


def load_clip_state_dict(model, state_dict: dict) -> None:
    """open_clip's ``load_checkpoint`` on a state dict read safely: third-party layouts converted,
    old text layouts renamed, logit scale/bias shapes, position embeddings resized; strict."""
    import torch
    from open_clip.factory import convert_state_dict, convert_to_custom_text_state_dict, resize_pos_embed, \
        resize_text_pos_embed

    state_dict = convert_state_dict(model, dict(state_dict))
    if "positional_embedding" in state_dict and not hasattr(model, "positional_embedding"):
        state_dict = convert_to_custom_text_state_dict(state_dict)
    for key in ("logit_scale", "logit_bias"):
        target = getattr(model, key, None)
        if key in state_dict and target is not None and target.ndim != state_dict[key].ndim:
            state_dict[key] = state_dict[key].reshape(target.shape)
    if "logit_bias" not in state_dict and getattr(model, "logit_bias", None) is not None:
        state_dict["logit_bias"] = torch.zeros_like(state_dict["logit_scale"])
    state_dict.pop("text.transformer.embeddings.position_ids", None)
    resize_pos_embed(state_dict, model)
    resize_text_pos_embed(state_dict, model)
    model.load_state_dict(state_dict, strict=True)


# --------------------------------------------------------------------------- the zero-shot head and zero-shot runs
def recipe_of(entry: ModelEntry):
    """The entry's prompt recipe (its id's '__RECIPE' tokens; the default when none)."""
    from classify.zeroshot.prompts import Recipe

    tag = parse_clip_name(entry.id).recipe
    return Recipe.parse(tag) if tag else Recipe()


def zero_shot_head(entry: ModelEntry, model, weights_sha256: str) -> "ZeroShotHead":
    """The pipeline's module for a loaded open_clip ``model``: its text classifier over the entry's
    label set (``class_wnids(entry)``, the order outputs are read in) with the entry's recipe,
    from the cache or built now (:func:`classify.zeroshot.classifier.build_settings` says where and with what progress)."""
    import open_clip
    import torch

    from classify.models.registry import class_wnids
    from classify.zeroshot.classifier import ZeroShotHead, cached_text_classifier, current_settings

    settings = current_settings()
    wnids = class_wnids(entry)
    recipe = recipe_of(entry)
    tokenizer = open_clip.get_tokenizer(entry.arch)
    device = torch.device(settings.device)
    model = model.eval()
    text_device = model.to(device) if device.type != "cpu" else model
    try:
        classifier, _ = cached_text_classifier(
            text_device, tokenizer, f"{entry.arch}.{entry.weights}" if entry.weights else entry.arch, weights_sha256,
            entry.label_space, wnids, recipe, cache_dir=settings.cache_dir, chunk_classes=settings.chunk_classes,
            batch_prompts=settings.batch_prompts, device=device, progress=settings.progress, task=entry.id)
    finally:
        model = model.cpu()
    bias = getattr(model, "logit_bias", None)
    head = ZeroShotHead(model.visual, classifier, model.logit_scale.exp(), bias).eval()
    head.wnids = tuple(wnids)  # the classifier's column order: stored with features for probe/'s language-init head
    head.weights_sha256 = weights_sha256  # what an ONNX export of its image tower is keyed on (ClipSource.onnx_part)
    return head


