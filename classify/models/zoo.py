"""Any timm, torchvision or Hugging Face Hub (timm) classifier by its own name, beside the registry.

The curated registry (:mod:`classify.models.registry`) holds the paper's models with their names, notes
and grouping; this module makes every other pretrained ImageNet classifier usable without editing
it. :func:`resolve` maps a name to a :class:`~classify.models.registry.ModelEntry`, trying in order:

1. the registry (ids and aliases: ``resnet50``, ``vit``, ``torchvision/resnet50.IMAGENET1K_V2``);
2. ``hf-hub:ORG/NAME``: a timm model on the Hugging Face Hub, described by the ``config.json`` in
   this machine's Hugging Face cache (id ``hf-hub/ORG/NAME``; source ``hf-hub``);
3. ``torchvision/ARCH.WEIGHTS`` or ``tv:ARCH.WEIGHTS`` (``get_model(ARCH, weights=WEIGHTS)``;
   without ``.WEIGHTS`` the enum's ``DEFAULT``);
4. a timm name, ``arch.tag`` or ``arch`` (timm's default tag), from timm's pretrained configs;
5. a bare torchvision architecture (``efficientnet_v2_s``), with its ``DEFAULT`` weights.

A name none of them knows raises :class:`~classify.models.registry.UnknownModelError` ('Unknown model',
with close matches from all of them). Nothing here downloads: timm's and torchvision's configs
ship with the packages, a Hub model's config is read from the cache (missing: a one-line
:class:`~classify.models.weights.WeightsUnavailableError` with the fetch command).

What a name does not say is inferred, and can be overridden (``--label-space``, ``--family``):

* the label space, from the head: its size (:data:`HEAD_SIZES`; from the pretrained config, or
  from the classifier weight of a ``--checkpoint``), or the config's ``label_names`` when they are
  wnids (:func:`label_space_for_head`). 21,841-class heads come in two orders: Microsoft's Swin
  order for the ``swin``/``swinv2`` ``ms_in22k`` heads (``class_order='swin-22k'``, see
  :data:`classify.models.registry.CLASS_ORDERS`), sorted wnids (timm's ``imagenet-22k``) for the others;
* the family, from the architecture built on the meta device (:func:`infer_family`): no
  attention -> CNN; attention and no spatial convolution but a patchify stem -> transformer;
  attention and convolutions -> hybrid.

:func:`search` lists names across timm and torchvision (``python -m classify models --search``,
and the Models page), with whether the weights are on this machine and the fetch command.
"""
from __future__ import annotations

import difflib
import functools
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from core.errors import WildLensError

from classify.models.registry import (_ALIASES, _REGISTRY, CLASS_ORDERS, FAMILIES, ModelEntry, UnknownModelError, class_wnids,
                                      registered_close_matches)
from classify.models.sources.hf_hub_source import hub_config, hub_fetch_command, parse_hub_config
from classify.models.weights import build_untrained
from classify.models.registry import get_source
from classify.models.library_index import model_names
from classify.models.weights import WeightsError, WeightsUnavailableError, checkpoint_shapes, find_in_hf_cache, hf_hub_cache

# Head size -> label space (core.labels names). 21842 is FocalNet's Microsoft remapping of 22k.
HEAD_SIZES = {1000: "imagenet-1k", 21843: "imagenet-21k", 21841: "imagenet-22k", 21842: "imagenet-22k-ms",
              11821: "imagenet-12k"}
# 21,841-class heads whose outputs follow Microsoft's Swin order, not sorted wnids (registry note).
SWIN_22K_ARCHS = re.compile(r"^swin(v2)?_")
# 21,841-class heads checked against their training code: sorted wnids (ImageFolder over fall11).
SORTED_22K_ARCHS = re.compile(r"^(beit|beitv2|convnext|eva02|caformer|convformer)_")
TORCHVISION_PREFIXES = ("torchvision/", "tv:", "tv/")
HF_PREFIXES = ("hf-hub:", "hf-hub/", "hf_hub:")
LIBRARIES = ("registry", "timm", "torchvision", "hf-hub")


class LabelSpaceError(WildLensError, ValueError):
    """The head's classes cannot be named from its size or labels; the message names --label-space."""


class FamilyError(WildLensError, ValueError):
    """A family that is not one of FAMILIES, or one that cannot be inferred."""


# --------------------------------------------------------------------------- label spaces
def label_space_for_head(num_classes: int, arch: str = "", label_names: Iterable[str] | None = None,
                         model: str = "") -> tuple[str, str, str]:
    """(label space, class order, note) of a head with ``num_classes`` outputs of architecture
    ``arch``; ``label_names`` (a pretrained config's, when present) decide when they are wnids."""
    from core.labels import get_label_space
    from core.wordnet import is_wnid

    who = f"{model}: " if model else ""
    fix = (f"give --label-space {model or 'MODEL'}=SPACE (imagenet-1k, imagenet-21k, imagenet-22k, "
           "imagenet-22k-ms, imagenet-12k) if its outputs are one of those in that order")
    if not num_classes:
        raise LabelSpaceError(f"{who}this model has no classifier head (0 outputs: a feature extractor), so it "
                              "cannot classify; pick a tag with an ImageNet head (python -m classify models --search).")
    names = tuple(label_names or ())
    if names and len(names) != num_classes:
        names = ()  # a config whose labels do not describe this head (a checkpoint's own head)
    if num_classes == 21841 and SWIN_22K_ARCHS.match(arch):
        # timm's configs (and Hub config.json files) list sorted wnids for every 21,841 head, but
        # Microsoft trained Swin's in its own order (see classify.models.registry.CLASS_ORDERS).
        return "imagenet-22k", "swin-22k", "Microsoft's Swin 22k order (inferred from the architecture)"
    if names and all(isinstance(n, str) and is_wnid(n) for n in names):
        for space in HEAD_SIZES.values():
            if get_label_space(space).wnids == names:
                return space, "label-space", "label names from its pretrained config"
        swin = ModelEntry("swin", "", "transformer", "timm", "", "", "imagenet-22k", 0, class_order="swin-22k")
        if class_wnids(swin) == names:
            return "imagenet-22k", "swin-22k", "label names from its pretrained config (Microsoft's Swin order)"
        raise LabelSpaceError(f"{who}its head's {num_classes} wnids are in an order WildLens has no label space "
                              f"for; {fix}.")
    if names:  # text labels: not an ImageNet head WildLens can read by wnid
        raise LabelSpaceError(f"{who}its head's labels ({names[0]!r}, ...) are not WordNet ids; {fix}.")
    space = HEAD_SIZES.get(int(num_classes))
    if space is None:
        raise LabelSpaceError(f"{who}a head with {num_classes} outputs is not a known ImageNet label space "
                              f"(known sizes: {', '.join(f'{n}' for n in HEAD_SIZES)}); {fix}.")
    if num_classes == 21841:
        if not SORTED_22K_ARCHS.match(arch):
            return space, "label-space", ("sorted 22k wnids assumed (the order of this family's 22k head is not "
                                          "verified; --label-space overrides)")
    return space, "label-space", f"inferred from its {num_classes}-output head"


def _override_label_space(name: str, head: int | None, space: str) -> tuple[str, str]:
    """(label space, class order) for ``--label-space``: a label space name, or 'swin-22k'."""
    from core.labels import canonical_label_space, get_label_space

    if space.strip().lower() in ("swin-22k", "imagenet-22k-swin"):
        space, order = "imagenet-22k", "swin-22k"
    else:
        try:
            space, order = canonical_label_space(space), "label-space"
        except WildLensError as exc:
            raise LabelSpaceError(f"--label-space for {name}: {exc}") from None
    size = len(get_label_space(space))
    if head and head != size:
        raise LabelSpaceError(f"--label-space {space} for {name}: that label space has {size} classes, but the "
                              f"head has {head} outputs.")
    return space, order


# --------------------------------------------------------------------------- families
ATTENTION_CLASSES = ("BottleneckAttn", "HaloAttn", "LambdaLayer")  # timm's self-attention in CNN layouts


def is_attention(module) -> bool:
    import torch

    name = type(module).__name__
    return isinstance(module, torch.nn.MultiheadAttention) or "Attention" in name or name in ATTENTION_CLASSES


def infer_family(model) -> str:
    """'CNN' (no attention), 'transformer' (attention; convolutions only as a patchify stem, kernel
    = stride) or 'hybrid' (attention and spatial convolutions: a conv stem or conv blocks)."""
    import torch

    attention = any(is_attention(m) for m in model.modules())
    if not attention:
        return "CNN"
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)):
            kernel, stride = tuple(m.kernel_size), tuple(m.stride)
            if max(kernel) > 1 and kernel != stride:
                return "hybrid"
    return "transformer"


def _check_family(name: str, family: str) -> str:
    value = family.strip()
    for known in FAMILIES:
        if value.lower() == known.lower():
            return known
    raise FamilyError(f"--family for {name}: {family!r} is not one of {', '.join(FAMILIES)}.")


# --------------------------------------------------------------------------- names
@dataclass(frozen=True)
class Named:
    """What a name points to before anything is built: a library, an architecture and weights."""

    library: str  # 'registry', 'timm', 'torchvision', 'hf-hub'
    id: str  # the entry id it resolves to
    arch: str
    weights: str  # timm tag ('' for an architecture without pretrained weights), torchvision enum, hub repo
    num_classes: int | None = None  # from the pretrained config (None: not known without the file)
    label_names: tuple[str, ...] = ()


def _strip_prefix(name: str, prefixes: tuple[str, ...]) -> str | None:
    low = name.lower()
    for prefix in prefixes:
        if low.startswith(prefix):
            return name[len(prefix):]
    return None


@functools.lru_cache(maxsize=4)
def _name_index(cache_dir: Path) -> dict | None:
    """timm's architectures and pretrained names and torchvision's classifiers, listed once per
    installed timm and torchvision and kept in the cache (``model-names-*.json``,
    :func:`classify.models.library_index.model_names`), or None when their versions cannot be read.
    Why: telling that a name is no library's model imported timm and torchvision (with torch._dynamo),
    2-6 s of a new server's first Results page on a run of uploaded predictions whose models are named
    'model_00'. Only its answers "not there" and the close matches are taken from it; a name it lists is
    still resolved by the library."""
    lists = model_names(cache_dir)
    return None if lists is None else _index_of(lists)


def _index_of(lists: dict) -> dict:
    """Sets to ask "is it there", and the lists in the libraries' order for the close matches."""
    return {**{k: tuple(v) for k, v in lists.items()}, "archs": frozenset(lists["timm_archs"]),
            "tv": frozenset(lists["torchvision"])}


def _nowhere(name: str) -> bool:
    """Whether the index says that neither timm nor torchvision has ``name``'s architecture: the one answer
    taken from it. Any other name is resolved by the libraries themselves, in their order, so an index
    that is wrong can make a name unknown but never another library's model (code review). False
    without an index, or when either library is imported already (it answers itself then, a model a
    plugin registered in this process included)."""
    import sys

    from core.runstore import RunStore

    if "timm" in sys.modules or "torchvision" in sys.modules:
        return False
    index = _name_index(RunStore().cache_dir)
    arch = name.partition(".")[0]  # timm's split_model_name_tag, and torchvision's ARCH.WEIGHTS
    return index is not None and arch not in index["archs"] and arch not in index["tv"]


def _timm_named(name: str) -> Named | None:
    import timm
    from timm.models import get_pretrained_cfg, split_model_name_tag

    arch, tag = split_model_name_tag(name)
    if not arch or not timm.is_model(arch):
        return None
    try:
        cfg = get_pretrained_cfg(f"{arch}.{tag}" if tag else arch)
    except RuntimeError:  # an unknown tag of a known architecture
        return None
    if cfg is None:
        return None
    tag = tag or (cfg.tag or "")
    if tag == "untrained" or not (cfg.hf_hub_id or cfg.url or cfg.file):
        tag = ""  # an architecture without pretrained weights: usable with --checkpoint only
    return Named("timm", f"{arch}.{tag}" if tag else arch, arch, tag, int(cfg.num_classes or 0),
                 tuple(cfg.label_names or ()))


def _torchvision_weights(arch: str):
    import torchvision.models as tvm
    from torchvision.models import get_model_weights

    if arch not in tvm.list_models(module=tvm):
        return None
    try:
        return get_model_weights(arch)
    except (ValueError, KeyError):
        return None


def _torchvision_named(spec: str, strict: bool) -> Named | None:
    arch, _, weights = spec.partition(".")
    enum = _torchvision_weights(arch)
    if enum is None:
        if strict:
            raise _unknown(f"torchvision/{spec}", f"torchvision has no classification model {arch!r}")
        return None
    if not weights or weights.upper() == "DEFAULT":
        member = enum.DEFAULT
    else:
        members = {k.upper(): v for k, v in enum.__members__.items()}
        member = members.get(weights.upper())
        if member is None:
            options = ", ".join(k for k in enum.__members__ if k != "DEFAULT")
            raise _unknown(f"torchvision/{spec}", f"torchvision's {arch} has no weights {weights!r} (it has: {options})")
    categories = member.meta.get("categories") or ()
    return Named("torchvision", f"torchvision/{arch}.{member.name}", arch, member.name, len(categories))


def _hub_named(repo: str) -> Named:
    repo = repo.strip().strip("/")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise _unknown(f"hf-hub:{repo}", "a Hub model is named hf-hub:ORG/NAME")
    config = hub_config(repo)
    if config is None:
        _, where = find_in_hf_cache(repo, "config.json")
        raise WeightsUnavailableError(f"hf-hub:{repo}", (where,), hub_fetch_command(repo),
                                      extra=" Its config.json (architecture and head) is not cached.")
    arch, pretrained, _ = parse_hub_config(config)
    return Named("hf-hub", f"hf-hub/{repo}", arch, repo, int(pretrained.get("num_classes") or 0),
                 tuple(pretrained.get("label_names") or ()))


def name_of(name: str) -> Named:
    """What ``name`` points to, without building anything; UnknownModelError if nothing. A name
    that lands on a registry id another way (``torchvision/resnet50`` -> its DEFAULT weights) is
    the registry's entry."""
    named = _name_of(name)
    if named.library != "registry" and named.id in _REGISTRY:
        entry = _REGISTRY[named.id]
        return Named("registry", entry.id, entry.arch, entry.weights, entry.num_classes)
    return named


def _name_of(name: str) -> Named:
    text = name.strip()
    key = text.lower()
    if key in _ALIASES:
        entry = _REGISTRY[_ALIASES[key]]
        return Named("registry", entry.id, entry.arch, entry.weights, entry.num_classes)
    repo = _strip_prefix(text, HF_PREFIXES)
    if repo is not None:
        return _hub_named(repo)
    spec = _strip_prefix(text, TORCHVISION_PREFIXES)
    if spec is not None:
        return _torchvision_named(spec, strict=True)
    if "/" not in text and ":" not in text:
        if _nowhere(text):  # neither library has it: said without importing them (2-6 s)
            raise _unknown(text)
        named = _timm_named(text)
        if named is not None:
            return named
        named = _torchvision_named(text, strict=False)
        if named is not None:
            return named
    raise _unknown(text)


@functools.lru_cache(maxsize=1)
def _all_names() -> tuple[str, ...]:
    from core.runstore import RunStore

    index = _name_index(RunStore().cache_dir)
    if index is not None:
        return index["timm_pretrained"] + index["timm_models"] + tuple(f"torchvision/{a}" for a in index["torchvision"])
    import timm
    import torchvision.models as tvm

    return tuple(timm.list_pretrained()) + tuple(timm.list_models()) + tuple(
        f"torchvision/{a}" for a in tvm.list_models(module=tvm))


class _UnknownName(UnknownModelError):
    """An UnknownModelError whose close matches are looked for when its message is first read: a caller
    that only asks "is this a model?" (the pages' family of each uploaded model) does not pay for them
    (difflib over 3,000 names: 8 ms a name, 0.08 s of Results' first load on a run of 10 such models)."""

    def __init__(self, name: str, why: str = ""):
        super().__init__(name)
        self._name, self._why, self._text = name, why, None

    def __str__(self) -> str:
        if self._text is None:
            self._text = _unknown_text(self._name, self._why)
        return self._text

    def __reduce__(self):  # crosses processes as the plain error with its message
        return UnknownModelError, (str(self),)

    def __repr__(self) -> str:  # as the plain error's, with its message (it showed "_UnknownName('model_00')")
        return f"UnknownModelError({str(self)!r})"

    @property
    def args(self) -> tuple:  # the message, as the plain error's args hold it (logging and Ray print args)
        return (str(self),)

    @args.setter
    def args(self, value) -> None:  # BaseException sets it; the message is made from the name instead
        pass


def _unknown(name: str, why: str = "") -> UnknownModelError:
    return _UnknownName(name, why)


def _unknown_text(name: str, why: str) -> str:
    key = name.strip().lower()
    close = registered_close_matches(name)
    close += [c for c in difflib.get_close_matches(key, _all_names(), n=4, cutoff=0.75) if c not in close]
    hint = f" Did you mean: {', '.join(dict.fromkeys(close[:5]))}?" if close else ""
    reason = why or "not in the registry, timm or torchvision, nor an hf-hub:ORG/NAME"
    return (f"Unknown model {name!r}.{hint} {reason[0].upper()}{reason[1:]}; "
            "'python -m classify models --search TEXT' finds names.")


# --------------------------------------------------------------------------- entries
def _head_of_checkpoint(entry: ModelEntry, checkpoint: str | Path, default_classes: int) -> int:
    """Outputs of the classifier in ``checkpoint``: the tensor at the model's classifier weight
    (the last weight with the default head's rows), else the last 2-D head/fc/classifier weight."""
    shapes = checkpoint_shapes(checkpoint)
    rows = default_classes or 1000
    model = build_untrained(entry, rows, device="meta")
    heads = [k for k, v in model.state_dict().items() if k.endswith(".weight") and v.ndim in (2, 4)
             and v.shape[0] == rows]
    for key in reversed(heads):
        if key in shapes:
            return int(shapes[key][0])
    named = [k for k, s in shapes.items() if k.endswith(".weight") and len(s) == 2
             and re.search(r"(head|fc|classifier)", k)]
    if named:
        return int(shapes[named[-1]][0])
    raise LabelSpaceError(f"{checkpoint}: no classifier weight found for {entry.id}; give --label-space "
                          f"{entry.id}=SPACE.")


def _entry_for(named: Named) -> ModelEntry:
    source = {"timm": "timm", "torchvision": "torchvision", "hf-hub": "hf-hub"}[named.library]
    label = {"timm": "timm", "torchvision": "torchvision", "hf-hub": "Hugging Face Hub (timm)"}[named.library]
    return ModelEntry(id=named.id, name=named.id, family="CNN", source=source, arch=named.arch, weights=named.weights,
                      label_space="imagenet-1k", num_params=0,
                      notes=f"Not in the curated registry: resolved from {label} by name.")


def resolve(name: str | ModelEntry, checkpoint: str | Path | None = None, label_space: str | None = None,
            family: str | None = None) -> ModelEntry:
    """The entry of any model name (see the module docstring). ``checkpoint``: a local weights
    file whose head decides the label space; ``label_space`` / ``family``: overrides."""
    if isinstance(name, ModelEntry):
        return name
    named = name_of(name)
    if named.library == "registry":
        entry = _REGISTRY[named.id]
        if label_space:
            space, order = _override_label_space(entry.id, None, label_space)
            entry = replace(entry, label_space=space, class_order=order)
        if family:
            entry = replace(entry, family=_check_family(entry.id, family))
        return entry
    base = _entry_for(named)
    if not named.weights and checkpoint is None:
        raise WeightsError(f"timm has no pretrained weights for {named.arch!r}; give a checkpoint "
                           f"(--checkpoint {named.arch}=PATH) or pick a tag: python -m classify models --search "
                           f"{named.arch}")
    head = named.num_classes
    names = named.label_names
    if checkpoint is not None:
        head, names = _head_of_checkpoint(base, checkpoint, named.num_classes or 1000), ()
    if label_space:
        space, order = _override_label_space(named.id, head, label_space)
        note = "label space given with --label-space"
    else:
        space, order, note = label_space_for_head(head or 0, named.arch, names, model=named.id)
    entry = replace(base, label_space=space, class_order=order, notes=f"{base.notes} Label space: {note}.")
    if order not in CLASS_ORDERS:  # pragma: no cover - guarded by label_space_for_head
        raise LabelSpaceError(f"{named.id}: class order {order!r} unknown")
    model = build_untrained(entry, device="meta")
    inferred = infer_family(model)
    entry = replace(entry, family=_check_family(named.id, family) if family else inferred,
                    num_params=sum(p.numel() for p in model.parameters()))
    return entry


def _keyed(options: Mapping[str, str] | None, what: str) -> dict[str, str]:
    """{model name as given: value} -> {resolved id: value}; '*' applies to every model."""
    out: dict[str, str] = {}
    for key, value in (options or {}).items():
        out["*" if key == "*" else canonical_id(key)] = value
    return out


def canonical_id(name: str) -> str:
    """The id a name resolves to (registry entry, timm 'arch.tag', 'torchvision/arch.WEIGHTS',
    'hf-hub/ORG/NAME'), without building the model."""
    return name_of(name).id


def resolve_models(names: str | Iterable[str | ModelEntry], checkpoints: Mapping[str, str] | None = None,
                   label_spaces: Mapping[str, str] | None = None, families: Mapping[str, str] | None = None,
                   ) -> tuple[list[ModelEntry], dict[str, str]]:
    """Entries for 'a,b' (or a list) with per-model checkpoints and overrides keyed by any name
    of the model ('*': every model), and the checkpoints keyed by entry id (for InferenceOptions).
    A checkpoint or override for a model not asked for is an error, not silently dropped."""
    items = [n for n in (names.split(",") if isinstance(names, str) else list(names))
             if not (isinstance(n, str) and not n.strip())]
    if not items:
        raise UnknownModelError("No model given. 'python -m classify models' lists them.")
    ckpt, spaces, fams = _keyed(checkpoints, "checkpoint"), _keyed(label_spaces, "label space"), _keyed(families, "family")
    ids = [n.id if isinstance(n, ModelEntry) else canonical_id(n) for n in items]
    for option, given in (("--checkpoint", ckpt), ("--label-space", spaces), ("--family", fams)):
        stray = [k for k in given if k != "*" and k not in ids]
        if stray:
            raise UnknownModelError(f"{option} names {', '.join(stray)}, which is not among --models "
                                    f"({', '.join(ids)}); add it there.")
    if "*" in ckpt:
        raise WeightsError("--checkpoint needs MODEL=PATH: one file belongs to one model.")
    entries: list[ModelEntry] = []
    by_id: dict[str, str] = {}
    for item, id_ in zip(items, ids):
        entry = resolve(item, ckpt.get(id_), spaces.get(id_) or spaces.get("*"), fams.get(id_) or fams.get("*"))
        if entry not in entries:
            entries.append(entry)
        if id_ in ckpt:
            by_id[entry.id] = ckpt[id_]
    return entries, by_id


# --------------------------------------------------------------------------- search
@dataclass(frozen=True)
class SearchRow:
    name: str  # what --models takes
    library: str  # timm, torchvision, hf-hub
    in_registry: str  # the registry id ('' if not registered)
    label_space: str  # from the pretrained config's head, or why not
    weights_here: bool
    fetch_command: str

    def as_dict(self) -> dict:
        return {"name": self.name, "library": self.library, "in registry": self.in_registry or "",
                "label space": self.label_space, "weights here": "yes" if self.weights_here else "no",
                "fetch command": self.fetch_command}


def _space_label(num_classes: int, arch: str = "") -> str:
    if not num_classes:
        return "none (features only)"
    try:
        space, order, _ = label_space_for_head(num_classes, arch)
    except LabelSpaceError:
        return f"unknown ({num_classes} outputs)"
    return f"{space} (Swin order)" if order == "swin-22k" else space


def search(text: str, limit: int | None = 50) -> tuple[list[SearchRow], int]:
    """Pretrained names across timm, torchvision and the Hub models in the Hugging Face cache whose
    name contains ``text`` (case-insensitive), registry ones first; (rows, total matches). No network."""
    import timm
    import torchvision.models as tvm
    from timm.models import get_pretrained_cfg

    needle = text.strip().lower()
    registry_ids = {e.id: e for e in _REGISTRY.values()}
    found: list[tuple[str, str]] = []
    found += [(n, "timm") for n in timm.list_pretrained() if needle in n.lower()]
    for arch in tvm.list_models(module=tvm):
        enum = _torchvision_weights(arch)
        if enum is None:
            continue
        for member in enum.__members__:
            name = f"torchvision/{arch}.{member}"
            if member != "DEFAULT" and needle in name.lower():
                found.append((name, "torchvision"))
    found += [(f"hf-hub:{repo}", "hf-hub") for repo in _cached_hub_repos() if needle in repo.lower()]

    def order(item: tuple[str, str]) -> tuple[bool, bool]:
        """Registry names first, then heads with an ImageNet label space, then the rest (feature
        extractors, CLIP embeddings); library order kept within each (a stable sort)."""
        name, library = item
        head = int(get_pretrained_cfg(name).num_classes or 0) if library == "timm" else 1000
        return name not in registry_ids, head not in HEAD_SIZES

    found.sort(key=order)
    total = len(found)
    rows = []
    for name, library in found[:limit] if limit else found:
        if library == "timm":
            cfg = get_pretrained_cfg(name)
            entry = _entry_for(Named("timm", name, *name.split(".", 1)))
            space = _space_label(int(cfg.num_classes or 0), entry.arch)
        elif library == "torchvision":
            named = _torchvision_named(name.split("/", 1)[1], strict=True)
            entry = _entry_for(named)
            space = _space_label(named.num_classes or 0)
        else:
            named = _hub_named(name.split(":", 1)[1])
            entry = _entry_for(named)
            try:
                space, _, _ = label_space_for_head(named.num_classes or 0, named.arch, named.label_names)
            except LabelSpaceError:
                space = f"unknown ({named.num_classes} outputs)"
        status = get_source(entry).locate(entry)
        rows.append(SearchRow(name, library, entry.id if entry.id in registry_ids else "", space, status.available,
                              status.fetch_command))
    return rows, total


def _cached_hub_repos() -> list[str]:
    """ORG/NAME of the timm models in the Hugging Face cache (folders models--ORG--NAME with a
    cached config.json), other than timm's own pretrained repos (listed under their timm names)."""
    cache = hf_hub_cache()
    if not cache.is_dir():
        return []
    repos = []
    for folder in sorted(cache.glob("models--*--*")):
        org, _, name = folder.name[len("models--"):].partition("--")
        if org == "timm" or not name:
            continue
        if any(folder.glob("snapshots/*/config.json")):
            repos.append(f"{org}/{name}")
    return repos


def search_table(text: str, limit: int | None = 200):
    """:func:`search` as a DataFrame (the Models page's search), and the total number of matches."""
    import pandas as pd

    rows, total = search(text, limit)
    columns = ["name", "library", "in registry", "label space", "weights here", "fetch command"]
    return pd.DataFrame([r.as_dict() for r in rows], columns=columns), total
