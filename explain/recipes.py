"""Prompt recipes of one zero-shot model side by side (issue 14 item 6, the dashboard's Knowledge page).

A zero-shot (CLIP) model's prompt recipe is part of its stored model id (``classify.zeroshot.prompts``:
``Recipe.tag()``): ``clip/ViT-B-32.openai`` is the default recipe (the class name in OpenAI's 80
templates), ``clip/ViT-B-32.openai__def`` adds each class's WordNet definition,
``…__def__path__simple7`` definition and hypernym path in 7 templates, and a precision suffix may
follow (``…__def--bf16``, ``classify.engine.options``). The metric tables hold one row per model id, so
the recipes of one model are rows of ``per_model`` and ``per_class`` like different models; this
module puts them back together: :func:`recipe_table` (per base model and recipe: accuracy, sibling
rate, similarity means over the mistakes, severity, n) and :func:`recipe_difference` (per class:
what a second recipe gained or lost against a first).

explain/ imports only core/ (the architecture rule), so the id is read here by a small parser of
the stored form (:func:`parse_model_id`), not through ``classify.zeroshot.prompts.split_recipe``; the test
``tests/explain/test_recipes.py`` checks it against that one on every recipe token, so the two
cannot drift apart unnoticed. Pure pandas: no model, no WordNet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

ZERO_SHOT_PREFIX = "clip/"  # classify.models.sources.openclip_source.STORED_PREFIX: what runs store for zero-shot models
RECIPE_SEPARATOR = "__"  # classify.zeroshot.prompts.RECIPE_SEPARATOR
PRECISION_SEPARATOR = "--"  # classify.engine.options.PRECISION_SEPARATOR
PRECISIONS = ("fp32", "bf16", "fp16", "int8", "int8-plain")  # classify.engine.options.SUFFIXED_PRECISIONS
_FILE_TOKEN = re.compile(r"^(kf|tf)-[0-9a-f]{8}$")

# Human labels: the knowledge a recipe adds, then what else it changes (classify.zeroshot.prompts.Recipe).
KNOWLEDGE_LABELS = {"name": "name only", "def": "definition", "path": "path", "def+path": "definition + path"}
_KNOWLEDGE_ORDER = ("name", "def", "path", "def+path", "file")
DEFAULT_RECIPE_LABEL = KNOWLEDGE_LABELS["name"]

# The metric columns compared across recipes (per_model's and per_class's names: explain.schema).
METRICS = ("n", "n_mistakes", "accuracy", "accuracy_top5", "sibling_rate", "path_mistakes", "lch_mistakes",
           "wup_mistakes", "lin_mistakes", "severity")

# The columns this module adds (labels and docs for the dashboard's headers; the rest are explain.schema's).
COLUMN_LABELS = {"base_model": "Model", "precision": "Precision", "recipe": "Recipe tag", "recipe_label": "Recipe",
                 "accuracy_vs_name": "Accuracy vs name only", "accuracy_a": "Accuracy A", "accuracy_b": "Accuracy B",
                 "accuracy_change": "Change (B − A)", "sibling_rate_a": "Sibling % A", "sibling_rate_b": "Sibling % B",
                 "n_a": "Images A", "n_b": "Images B", "outcome": "Outcome"}
COLUMN_DOCS = {
    "base_model": "The zero-shot model without its recipe: the same weights and image tower in every row of a group.",
    "precision": "The precision suffix of the model id (bf16, fp16, fp32, int8); empty: the device's default.",
    "recipe": "The recipe tag of the model id (classify.zeroshot.prompts.Recipe.tag): empty for the default recipe, "
              "else its tokens joined by '__' (def, path, openai-names, simple7, elevater, kf-/tf-<sha8>).",
    "recipe_label": "What the recipe gives the text tower: the class name only, or with its WordNet definition, "
                    "hypernym path, a knowledge file; then other changes (OpenAI names, 7 templates, ELEVATER format).",
    "accuracy_vs_name": "accuracy minus the accuracy of the same model's name-only recipe (the default). "
                        "NA when the run lacks that recipe.",
    "accuracy_a": "Strict accuracy of the class under recipe A (NA: A has no predictions of it, or it is "
                  "outside A's label set).",
    "accuracy_b": "Strict accuracy of the class under recipe B.",
    "accuracy_change": "accuracy_b - accuracy_a: positive, recipe B gained on this class; NA when either is NA.",
    "sibling_rate_a": "sibling_rate of the class under recipe A (share of its mistakes that are siblings).",
    "sibling_rate_b": "sibling_rate of the class under recipe B.",
    "n_a": "Predictions of the class counted under recipe A.", "n_b": "Predictions of the class counted under recipe B.",
    "outcome": "gained (B more accurate), lost (B less accurate), same, or not comparable (either accuracy NA).",
}


@dataclass(frozen=True)
class ModelRecipe:
    """A stored model id read as base model, recipe tag and precision."""

    model: str  # the stored id, as in the tables
    base_model: str  # 'clip/ViT-B-32.openai'
    recipe: str  # '' (default) or the tokens joined by '__': 'def__path'
    precision: str | None  # 'bf16' or None (the device's default)

    @property
    def zero_shot(self) -> bool:
        return self.base_model.lower().startswith(ZERO_SHOT_PREFIX)

    @property
    def label(self) -> str:
        return recipe_label(self.recipe)

    @property
    def group(self) -> str:
        """What recipes are compared within: the base model in one precision ('clip/ViT-B-32.openai--bf16')."""
        return self.base_model + (PRECISION_SEPARATOR + self.precision if self.precision else "")


def _is_token(token: str) -> bool:
    key = token.lower()
    return key in ("openai-names", "def", "path", "simple7", "elevater") or bool(_FILE_TOKEN.match(key))


def parse_model_id(model_id: str) -> ModelRecipe:
    """'clip/ViT-B-32.openai__def__path--bf16' -> ModelRecipe(base_model='clip/ViT-B-32.openai',
    recipe='def__path', precision='bf16'). The precision suffix is cut first (as
    ``classify.engine.options.split_model_id``), then the trailing run of recipe tokens (as
    ``classify.zeroshot.prompts.split_recipe``: the longest tail whose every '__' part is a recipe token).
    Tokens keep their order and case as stored; an id without recipe tokens (any classifier) is
    its own base with recipe ''."""
    text = str(model_id)
    rest, sep, precision = text.rpartition(PRECISION_SEPARATOR)
    if not (sep and rest and precision in PRECISIONS):
        rest, precision = text, None
    parts = rest.split(RECIPE_SEPARATOR)
    for cut in range(1, len(parts)):
        tail = parts[cut:]
        if all(_is_token(t) for t in tail):
            return ModelRecipe(text, RECIPE_SEPARATOR.join(parts[:cut]), RECIPE_SEPARATOR.join(tail), precision)
    return ModelRecipe(text, rest, "", precision)


def recipe_knowledge(recipe: str) -> str:
    """The knowledge a recipe tag adds: 'name', 'def', 'path', 'def+path' or 'file'."""
    tokens = {t.lower() for t in recipe.split(RECIPE_SEPARATOR) if t}
    if any(t.startswith("kf-") for t in tokens):
        return "file"
    kinds = tokens & {"def", "path"}
    return "def+path" if kinds == {"def", "path"} else next(iter(kinds), "name")


def recipe_label(recipe: str) -> str:
    """A person's name for a recipe tag: '' -> 'name only', 'def' -> 'definition', 'def__path' ->
    'definition + path', 'path__elevater' -> 'path · ELEVATER format', 'simple7' -> 'name only · 7
    templates', 'kf-1a2b3c4d' -> 'knowledge file 1a2b3c4d', 'openai-names' -> 'name only · OpenAI names'."""
    tokens = [t.lower() for t in recipe.split(RECIPE_SEPARATOR) if t]
    knowledge = recipe_knowledge(recipe)
    head = next((f"knowledge file {t[3:]}" for t in tokens if t.startswith("kf-")), None) \
        if knowledge == "file" else KNOWLEDGE_LABELS[knowledge]
    extras = []
    if "openai-names" in tokens:
        extras.append("OpenAI names")
    if "simple7" in tokens:
        extras.append("7 templates")
    extras += [f"template file {t[3:]}" for t in tokens if t.startswith("tf-")]
    if "elevater" in tokens:
        extras.append("ELEVATER format")
    return " · ".join([head, *extras])


def _recipe_order(recipe: str) -> tuple:
    """Default first; then by knowledge (definition, path, both, a file), then the fewer other changes."""
    tokens = [t.lower() for t in recipe.split(RECIPE_SEPARATOR) if t]
    return (_KNOWLEDGE_ORDER.index(recipe_knowledge(recipe)), len(tokens), recipe_label(recipe), recipe)


def zero_shot_groups(per_model: pd.DataFrame) -> dict[str, list[str]]:
    """Base model (in one precision, :attr:`ModelRecipe.group`) -> its model ids in the table,
    default recipe first; zero-shot models only (stored ids starting 'clip/'), groups by name."""
    groups: dict[str, list[ModelRecipe]] = {}
    for model in pd.unique(per_model["model"].astype(str)) if "model" in per_model else ():
        parsed = parse_model_id(model)
        if parsed.zero_shot:
            groups.setdefault(parsed.group, []).append(parsed)
    return {g: [p.model for p in sorted(ps, key=lambda p: _recipe_order(p.recipe))] for g, ps in sorted(groups.items())}


def recipe_table(per_model: pd.DataFrame) -> pd.DataFrame:
    """The zero-shot rows of a per_model table, one per (base model, precision, recipe): columns
    ``base_model, precision, recipe, recipe_label, model``, the :data:`METRICS` present in the
    table (accuracy, sibling rate, path / LCH / WUP / Lin means over the mistakes, severity, n),
    and ``accuracy_vs_name`` (accuracy minus the same base model's name-only recipe's; NA without
    one), then each metric's ``_ci_low`` / ``_ci_high`` where the table has them (after
    ``accuracy_vs_name``). Rows: groups by name, in each the default recipe first. Values are the table's own
    (explain.metrics), never recomputed. Empty (same columns) when the run has no zero-shot model."""
    metrics = [c for c in METRICS if c in per_model.columns]
    columns = ["base_model", "precision", "recipe", "recipe_label", "model", *metrics, "accuracy_vs_name"]
    order = [m for models in zero_shot_groups(per_model).values() for m in models]
    if not order:
        dtypes = {c: "string" for c in columns[:5]} | {c: per_model[c].dtype for c in metrics} | \
            {"accuracy_vs_name": "Float64"}
        return pd.DataFrame({c: pd.Series(dtype=dtypes[c]) for c in columns})
    rows = per_model.assign(model=per_model["model"].astype(str)).drop_duplicates("model").set_index("model")
    parsed = [parse_model_id(m) for m in order]
    out = pd.DataFrame({"base_model": [p.base_model for p in parsed],
                        "precision": [p.precision for p in parsed],
                        "recipe": [p.recipe for p in parsed],
                        "recipe_label": [p.label for p in parsed],
                        "model": order})
    for column in ("base_model", "precision", "recipe", "recipe_label", "model"):
        out[column] = out[column].astype("string")
    for metric in metrics:
        out[metric] = rows.loc[order, metric].to_numpy()
        out[metric] = out[metric].astype(per_model[metric].dtype)
    if "accuracy" in metrics:
        groups = [p.group for p in parsed]
        default = {p.group: out["accuracy"].iloc[i] for i, p in enumerate(parsed) if p.recipe == ""}
        baseline = pd.array([default.get(g, pd.NA) for g in groups], dtype="Float64")
        out["accuracy_vs_name"] = out["accuracy"].astype("Float64") - baseline
    else:
        out["accuracy_vs_name"] = pd.array([pd.NA] * len(out), dtype="Float64")
    for metric in metrics:  # issue 23: each metric's interval, where the table has one
        for bound in (f"{metric}_ci_low", f"{metric}_ci_high"):
            if bound in per_model.columns:
                out[bound] = pd.array(rows.loc[order, bound].to_numpy(), dtype=per_model[bound].dtype)
    return out


def recipe_difference(per_class: pd.DataFrame, model_a: str, model_b: str) -> pd.DataFrame:
    """Per class, recipe B (``model_b``) against recipe A (``model_a``), two model ids of the
    per_class table: ``true_wnid, n_a, n_b, accuracy_a, accuracy_b, accuracy_change`` (B − A),
    ``sibling_rate_a, sibling_rate_b`` and ``outcome`` ('gained', 'lost', 'same', or 'not
    comparable' where either accuracy is NA). Every class of either model; the largest gain first,
    the largest loss last, the not comparable ones at the end (then by wnid)."""
    def side(model: str, suffix: str) -> pd.DataFrame:
        rows = per_class[per_class["model"].astype(str) == model]
        keep = [c for c in ("n", "accuracy", "sibling_rate") if c in rows.columns]
        return rows.set_index(rows["true_wnid"].astype(str))[keep].add_suffix(suffix)

    a, b = side(model_a, "_a"), side(model_b, "_b")
    out = a.join(b, how="outer")
    out.index.name = "true_wnid"
    out = out.reset_index()
    out["true_wnid"] = out["true_wnid"].astype("string")
    for column in ("n_a", "n_b"):
        out[column] = out[column].astype("Int64") if column in out else pd.array([pd.NA] * len(out), dtype="Int64")
    for column in ("accuracy_a", "accuracy_b", "sibling_rate_a", "sibling_rate_b"):
        out[column] = out[column].astype("Float64") if column in out else pd.array([pd.NA] * len(out), dtype="Float64")
    out["accuracy_change"] = out["accuracy_b"] - out["accuracy_a"]
    change = out["accuracy_change"]
    outcome = pd.Series("not comparable", index=out.index, dtype="string")
    known = change.notna().to_numpy(dtype=bool)
    values = change.to_numpy(dtype=float, na_value=float("nan"))
    outcome[known & (values > 0)] = "gained"
    outcome[known & (values < 0)] = "lost"
    outcome[known & (values == 0)] = "same"
    out["outcome"] = outcome
    out = out.assign(_na=~known, _key=-pd.Series(values).fillna(0).to_numpy())
    out = out.sort_values(["_na", "_key", "true_wnid"], kind="stable").drop(columns=["_na", "_key"])
    return out[["true_wnid", "n_a", "n_b", "accuracy_a", "accuracy_b", "accuracy_change", "sibling_rate_a",
                "sibling_rate_b", "outcome"]].reset_index(drop=True)


def difference_summary(difference: pd.DataFrame) -> dict[str, int]:
    """Classes per outcome of :func:`recipe_difference`: {'gained': …, 'lost': …, 'same': …, 'not comparable': …}."""
    counts = difference["outcome"].value_counts()
    return {k: int(counts.get(k, 0)) for k in ("gained", "lost", "same", "not comparable")}


__all__ = ["COLUMN_DOCS", "COLUMN_LABELS", "DEFAULT_RECIPE_LABEL", "METRICS", "ModelRecipe", "difference_summary",
           "parse_model_id", "recipe_difference", "recipe_knowledge", "recipe_label", "recipe_table",
           "zero_shot_groups"]
