"""Any model name -> its registry entry: an id or alias of the table, a zero-shot ``clip:`` name
(:mod:`classify.models.sources.openclip_source`), or any other timm / torchvision / ``hf-hub:``
name (:func:`classify.models.zoo.resolve`, label space and family inferred).

Above the table (:mod:`classify.models.registry`), the sources and the zoo, so that none of them
needs the others to name a model.
"""
from __future__ import annotations

import functools
from typing import Iterable

from core.errors import WildLensError

from classify.models.registry import _ALIASES, _REGISTRY, ModelEntry, UnknownModelError


def get_model(name: str | ModelEntry) -> ModelEntry:
    """An entry by id or alias (case-insensitive); any other timm / torchvision / ``hf-hub:`` name
    through :func:`classify.models.zoo.resolve` (label space and family inferred). Entries pass through
    (unregistered ones too)."""
    if isinstance(name, ModelEntry):
        return name
    key = name.strip().lower()
    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    if key.startswith(("clip:", "clip/")):  # zero-shot names, with a recipe or outside the registry
        from classify.models.sources.openclip_source import clip_entry

        return clip_entry(name)
    return _resolve_outside_registry(name.strip())


class UnresolvedModelError(UnknownModelError):
    """A name that timm, torchvision or the Hub knows but that cannot become an entry on this
    machine (a Hub config not cached, an architecture without pretrained weights, a head that is
    no ImageNet label space); the message says what to do. An UnknownModelError, so that callers
    asking only 'is this a model?' (pages grouping a run's models) need not know the zoo's errors."""


@functools.lru_cache(maxsize=256)
def _resolve_outside_registry(name: str) -> ModelEntry:
    from classify.models.zoo import resolve  # imports timm and torchvision: only for names outside the registry

    try:
        return resolve(name)
    except UnknownModelError:
        raise
    except WildLensError as exc:
        raise UnresolvedModelError(str(exc)) from None


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
