"""explain.recipes: zero-shot prompt recipes read from model ids, side by side and per class."""
import itertools

import pandas as pd
import pytest

from explain.recipes import (COLUMN_DOCS, COLUMN_LABELS, difference_summary, parse_model_id, recipe_difference,
                             recipe_label, recipe_table, zero_shot_groups)

B32 = "clip/ViT-B-32.openai"


def _per_model(rows):
    """Hand-built per_model rows: (model, n, accuracy, sibling_rate, path_mistakes, severity)."""
    df = pd.DataFrame(rows, columns=["model", "n", "accuracy", "sibling_rate", "path_mistakes", "severity"])
    return df.astype({"model": "string", "n": "Int64", "accuracy": "Float64", "sibling_rate": "Float64",
                      "path_mistakes": "Float64", "severity": "Float64"})


@pytest.mark.parametrize("model_id, base, recipe, precision", [
    (B32, B32, "", None),
    (f"{B32}__def", B32, "def", None),
    (f"{B32}__def__path", B32, "def__path", None),
    (f"{B32}__def__path--bf16", B32, "def__path", "bf16"),
    (f"{B32}--int8", B32, "", "int8"),
    (f"{B32}__openai-names__path__simple7__elevater", B32, "openai-names__path__simple7__elevater", None),
    (f"{B32}__kf-0123abcd__tf-89abcdef", B32, "kf-0123abcd__tf-89abcdef", None),
    ("clip/odd__name__def", "clip/odd__name", "def", None),  # only the trailing run of recipe tokens
    ("efficientnet_lite0", "efficientnet_lite0", "", None),
    ("efficientnet_lite0--fp16", "efficientnet_lite0", "", "fp16"),
    ("hf-hub/org/model--x", "hf-hub/org/model--x", "", None),  # '--x' is no precision
])
def test_parse_model_id(model_id, base, recipe, precision):
    parsed = parse_model_id(model_id)
    assert (parsed.model, parsed.base_model, parsed.recipe, parsed.precision) == (model_id, base, recipe, precision)
    assert parsed.zero_shot == base.startswith("clip/")


def test_the_parser_agrees_with_classify_on_every_recipe(tmp_path, monkeypatch):
    """explain may not import classify, so it has its own parser: it must read every tag that
    classify.zeroshot.prompts.Recipe.tag() writes as classify.zeroshot.prompts.split_recipe reads it."""
    monkeypatch.setenv("WILDLENS_HOME", str(tmp_path))
    from classify.engine.options import split_model_id
    from classify.zeroshot.prompts import Recipe, split_recipe

    knowledge_file = tmp_path / "k.tsv"
    knowledge_file.write_text("n02123045\tstriped domestic cat\n")
    template_file = tmp_path / "t.txt"
    template_file.write_text("a picture of a {}.\n")
    recipes = [Recipe(names=names, knowledge=knowledge, templates=templates, style=style)
               for names, knowledge, templates, style in itertools.product(
                   ("wordnet", "openai"), ("name", "def", "path", "def+path"),
                   ("openai80", "simple7", str(template_file)), ("plain", "elevater"))]
    recipes += [Recipe(knowledge_file=str(knowledge_file)), Recipe(knowledge_file=str(knowledge_file), style="elevater")]
    for recipe, precision in itertools.product(recipes, ("", "--bf16")):
        model_id = B32 + recipe.tag() + precision
        parsed = parse_model_id(model_id)
        base, their_precision = split_model_id(model_id)
        their_base, their_recipe = split_recipe(base)
        assert (parsed.base_model, parsed.precision) == (their_base, their_precision), model_id
        assert parsed.recipe == recipe.tag().lstrip("_"), model_id
        assert Recipe.parse(parsed.recipe) == their_recipe, model_id


@pytest.mark.parametrize("tag, label", [
    ("", "name only"), ("def", "definition"), ("path", "path"), ("def__path", "definition + path"),
    ("path__def", "definition + path"), ("def__elevater", "definition · ELEVATER format"),
    ("simple7", "name only · 7 templates"), ("openai-names", "name only · OpenAI names"),
    ("kf-0123abcd", "knowledge file 0123abcd"), ("def__tf-89abcdef", "definition · template file 89abcdef"),
    ("openai-names__def__path__simple7__elevater", "definition + path · OpenAI names · 7 templates · ELEVATER format"),
])
def test_recipe_label(tag, label):
    assert recipe_label(tag) == label


def test_recipe_table_groups_recipes_default_first():
    per_model = _per_model([
        ("efficientnet_lite0", 6, 0.9, 1.0, 0.3, 2.0),  # a classifier: no recipe, left out
        (f"{B32}__def__path", 6, 0.75, 0.5, 0.4, 1.5),
        (f"{B32}__def", 6, 0.8, pd.NA, pd.NA, pd.NA),  # no mistakes' means: NA, kept NA
        (B32, 6, 0.5, 1.0, 0.2, 3.0),
        ("clip/RN50.openai__path", 6, 0.4, 0.25, 0.1, 4.0),  # no default recipe of RN50 in the run
        (f"{B32}__def--bf16", 6, 0.7, 0.5, 0.3, 2.0),
    ])
    table = recipe_table(per_model)
    assert table.columns.tolist() == ["base_model", "precision", "recipe", "recipe_label", "model", "n", "accuracy",
                                      "sibling_rate", "path_mistakes", "severity", "accuracy_vs_name"]
    assert table["model"].tolist() == ["clip/RN50.openai__path", B32, f"{B32}__def", f"{B32}__def__path",
                                       f"{B32}__def--bf16"], "groups by name, the default recipe first in each"
    assert table["recipe_label"].tolist() == ["path", "name only", "definition", "definition + path", "definition"]
    assert table["precision"].isna().tolist() == [True, True, True, True, False]
    by_model = per_model.set_index("model")
    for column in ("n", "accuracy", "sibling_rate", "path_mistakes", "severity"):
        assert table[column].dtype == per_model[column].dtype
        for model, value in zip(table["model"], table[column]):
            expected = by_model.loc[model, column]
            assert (pd.isna(value) and pd.isna(expected)) or value == expected, (model, column)
    gains = table["accuracy_vs_name"]
    assert gains.iloc[1:4].tolist() == pytest.approx([0.0, 0.3, 0.25])
    assert gains.iloc[[0, 4]].isna().all(), "RN50 and bf16 have no name-only recipe in their own group"
    assert zero_shot_groups(per_model) == {B32: [B32, f"{B32}__def", f"{B32}__def__path"],
                                           f"{B32}--bf16": [f"{B32}__def--bf16"],
                                           "clip/RN50.openai": ["clip/RN50.openai__path"]}
    assert set(COLUMN_LABELS) >= {"base_model", "recipe_label", "accuracy_vs_name"} and set(COLUMN_DOCS) == set(COLUMN_LABELS)


def test_recipe_table_without_zero_shot_models_is_empty_with_its_columns():
    table = recipe_table(_per_model([("efficientnet_lite0", 6, 0.9, 1.0, 0.3, 2.0)]))
    assert table.empty and "recipe_label" in table.columns and table["accuracy"].dtype == "Float64"
    assert zero_shot_groups(_per_model([])) == {}


def test_recipe_difference_per_class():
    rows = [(B32, "n1", 2, 0.5, 1.0), (B32, "n2", 2, 1.0, pd.NA), (B32, "n3", 2, 0.0, 0.5), (B32, "n4", 2, 0.5, 0.0),
            (B32, "n5", 2, pd.NA, pd.NA),  # outside the label set: accuracy NA
            (f"{B32}__def", "n1", 2, 1.0, pd.NA), (f"{B32}__def", "n2", 2, 0.5, 1.0), (f"{B32}__def", "n3", 2, 0.5, 0.0),
            (f"{B32}__def", "n4", 2, 0.5, 1.0), (f"{B32}__def", "n5", 2, pd.NA, pd.NA),
            (f"{B32}__def", "n6", 2, 1.0, pd.NA),  # only under B
            ("efficientnet_lite0", "n1", 2, 0.0, 1.0)]
    per_class = pd.DataFrame(rows, columns=["model", "true_wnid", "n", "accuracy", "sibling_rate"]).astype(
        {"model": "string", "true_wnid": "string", "n": "Int64", "accuracy": "Float64", "sibling_rate": "Float64"})
    diff = recipe_difference(per_class, B32, f"{B32}__def")
    assert diff.columns.tolist() == ["true_wnid", "n_a", "n_b", "accuracy_a", "accuracy_b", "accuracy_change",
                                     "sibling_rate_a", "sibling_rate_b", "outcome"]
    assert diff["true_wnid"].tolist() == ["n1", "n3", "n4", "n2", "n5", "n6"]
    assert diff["outcome"].tolist() == ["gained", "gained", "same", "lost", "not comparable", "not comparable"]
    assert diff["accuracy_change"].iloc[:4].tolist() == pytest.approx([0.5, 0.5, 0.0, -0.5])
    assert diff["accuracy_change"].iloc[4:].isna().all()
    assert diff["n_a"].isna().tolist() == [False] * 5 + [True]
    assert diff.loc[diff["true_wnid"] == "n4", ["sibling_rate_a", "sibling_rate_b"]].iloc[0].tolist() == [0.0, 1.0]
    assert str(diff["accuracy_change"].dtype) == "Float64" and str(diff["n_b"].dtype) == "Int64"
    assert difference_summary(diff) == {"gained": 2, "lost": 1, "same": 1, "not comparable": 2}
    swapped = recipe_difference(per_class, f"{B32}__def", B32)
    assert difference_summary(swapped) == {"gained": 1, "lost": 2, "same": 1, "not comparable": 2}


def test_recipe_table_carries_each_metrics_interval():
    """issue 23: the Knowledge page's bars draw the tables' own intervals, never recomputed."""
    per_model = _per_model([(B32, 6, 0.5, 1.0, 0.2, 3.0), (f"{B32}__def", 6, 0.8, 0.5, 0.4, 1.5)])
    per_model["accuracy_ci_low"] = pd.array([0.19, 0.44], dtype="Float64")
    per_model["accuracy_ci_high"] = pd.array([0.81, 0.96], dtype="Float64")
    table = recipe_table(per_model)
    assert table.columns.tolist()[-2:] == ["accuracy_ci_low", "accuracy_ci_high"]
    assert table["accuracy_ci_low"].tolist() == [0.19, 0.44] and table["accuracy_ci_high"].dtype == "Float64"
    assert "sibling_rate_ci_low" not in table.columns  # no bounds in the table: none invented
