"""The zero-shot models a run asks for: ``clip:`` names with the run's label set and prompt recipe
(:func:`zero_shot_models`), and the refusal of a label set other than the one a run's stored
rows of that model were made over (:func:`check_stored_label_sets`).

At the top of ``classify``: it reads runs, label sets and recipe files, which the open_clip
source (``classify.models.sources.openclip_source``: names, weights, the zero-shot head) does not.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from classify.models.registry import ModelEntry
from classify.models.sources.openclip_source import (SOURCE_NAME, clip_entry, parse_clip_name, with_label_set,
                                                     with_recipe)


def zero_shot_models(names: Sequence[str], label_set: str | None = None, recipe=None,
                     checkpoints: Mapping[str, str] | None = None, run=None,
                     ) -> tuple[list[ModelEntry], dict[str, str]]:
    """Entries of zero-shot names (``clip:MODEL[.TAG][+RECIPE]``) predicting over ``label_set``
    (a ``--label-set`` spec, ``classify.zeroshot.labelsets.resolve_label_set``; default: the run's classes
    with a run, else the entry's default, ImageNet-1k), with ``recipe`` (a ``classify.zeroshot.prompts.Recipe``)
    for names that carry none, and the checkpoints (keyed by any of a model's names, with or without
    its recipe) keyed by entry id, as ``InferenceOptions.checkpoints`` takes them."""
    from core.errors import OptionError


    if label_set is None and run is not None:
        from classify.zeroshot.labelsets import DEFAULT_LABEL_SET

        label_set = DEFAULT_LABEL_SET
    space = None
    if label_set is not None:
        from classify.zeroshot.labelsets import resolve_label_set

        space = resolve_label_set(label_set, run=run)
    if recipe is not None:
        _touch_files(recipe)
    entries: list[ModelEntry] = []
    for name in names:
        entry = clip_entry(name)
        if recipe is not None and not parse_clip_name(name).recipe:
            entry = with_recipe(entry, recipe)
        if space is not None:
            entry = with_label_set(entry, space.name)
        if entry not in entries:
            entries.append(entry)
    by_id: dict[str, str] = {}
    for key, path in (checkpoints or {}).items():
        named = parse_clip_name(clip_entry(key).id)
        matched = [e for e in entries if e.id == named.id or (not named.recipe and parse_clip_name(e.id).base_id
                                                                == named.base_id)]
        if not matched:
            raise OptionError(f"--checkpoint names {key}, which is not among --models "
                              f"({', '.join(parse_clip_name(e.id).display for e in entries) or 'no zero-shot model'}); "
                              "add it there.")
        for entry in matched:
            by_id[entry.id] = path
    return entries, by_id


def _touch_files(recipe) -> None:
    """Read a recipe's template and knowledge files now: a bad file fails before any work, and
    ``classify.zeroshot.prompts`` keeps the copy its tag names (read back when the model loads)."""
    from classify.zeroshot.prompts import read_knowledge_file

    recipe.template_list
    if recipe.knowledge == "file":
        read_knowledge_file(recipe.knowledge_file)


def check_stored_label_sets(parts, entries: Sequence[ModelEntry], where: str) -> None:
    """A zero-shot model id holds one label set per run (or --out file): predictions stored over
    another label set would be taken as done (resume) and mixed with the new ones. ``parts``: the
    stored predictions (``core.parts.PredictionParts``); OptionError naming both label sets."""
    from core.errors import OptionError


    for entry in entries:
        if entry.source != SOURCE_NAME:
            continue
        stored = parts.read([entry.id])
        spaces = sorted(set(stored["label_space"].dropna().astype(str)) - {entry.label_space})
        if spaces:
            raise OptionError(f"{where} holds predictions of {parse_clip_name(entry.id).display} over label set "
                              f"{spaces[0]}, not {entry.label_space}; one model keeps one label set in a run: pass "
                              f"--label-set {spaces[0]}, or write the predictions elsewhere.")
