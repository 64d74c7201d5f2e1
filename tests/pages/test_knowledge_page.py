"""The Knowledge page (issue 14 item 6): the recipes of one zero-shot model side by side, what a
recipe gained or lost per class, the knowledge coverage and the prompts of a class.

The zero-shot predictions are written straight into a run (no CLIP weights install offline): two
recipes of ``clip/ViT-B-32.openai``, the default and ``__def``, as ``python -m classify --run``
would store them; the page must show the library's numbers (explain.recipes over the stored
metric tables)."""
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

APP = str(ROOT / "app.py")
PAGE = "pages/knowledge_page.py"
TIMEOUT = 600
TABBY, TIGER_CAT, PERSIAN, EGYPTIAN, LYNX = "n02123045", "n02123159", "n02123394", "n02124075", "n02127052"
NAME_ONLY, WITH_DEF = "clip/ViT-B-32.openai", "clip/ViT-B-32.openai__def"


@pytest.fixture(scope="module")
def app_home(sample_store, tmp_path_factory):
    from tests.pages.conftest import copy_store

    home = copy_store(sample_store, tmp_path_factory, "knowledge_home")
    _recipe_run(home)
    return home


def _rows(model: str, truth_pred: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame({"model": model, "image": [f"{t}/{i}.jpg" for i, (t, _) in enumerate(truth_pred)],
                         "true_wnid": [t for t, _ in truth_pred], "pred_wnid": [p for _, p in truth_pred],
                         "prob_1": 0.5, "label_space": "imagenet-1k", "status": "ok"})


def _recipe_run(home, run_id="recipes"):
    """Name only: tabby 1/2, Persian 0/2, tiger cat 2/2; with definitions: tabby 2/2, Persian 1/2,
    tiger cat 1/2 (gained on two classes, lost on one)."""
    from core.runstore import RunInfo, RunStore
    from explain.artefact import refresh_metrics

    run = RunStore(home).create_run(RunInfo(run_id=run_id, title="two recipes", wnids=[TABBY, TIGER_CAT, PERSIAN]))
    run.append_predictions(_rows(NAME_ONLY, [(TABBY, TABBY), (TABBY, TIGER_CAT), (PERSIAN, TABBY), (PERSIAN, TABBY),
                                             (TIGER_CAT, TIGER_CAT), (TIGER_CAT, TIGER_CAT)]))
    run.append_predictions(_rows(WITH_DEF, [(TABBY, TABBY), (TABBY, TABBY), (PERSIAN, PERSIAN), (PERSIAN, EGYPTIAN),
                                            (TIGER_CAT, TIGER_CAT), (TIGER_CAT, LYNX)]))
    return refresh_metrics(run)


def _open(home, monkeypatch, run_id: str) -> AppTest:
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["run"] = run_id
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Knowledge"]
    return at


def _tables(home, run_id):
    from core.runstore import RunStore
    from explain.artefact import load_metrics

    return load_metrics(RunStore(home).open_run(run_id))


def test_two_recipes_side_by_side_with_the_library_numbers(app_home, monkeypatch):
    from explain.recipes import recipe_difference, recipe_table

    at = _open(app_home, monkeypatch, "recipes")
    assert not at.error, [e.value for e in at.error]
    picker = at.selectbox[0]
    assert picker.options == ["clip/ViT-B-32.openai (2 recipes)"]
    tables = _tables(app_home, "recipes")
    expected = recipe_table(tables.per_model)
    shown = at.dataframe[0].value
    assert shown["recipe_label"].tolist() == ["name only", "definition"]
    assert shown["model"].tolist() == [NAME_ONLY, WITH_DEF]
    for column in ("accuracy", "sibling_rate", "path_mistakes", "wup_mistakes", "severity", "accuracy_vs_name"):
        pd.testing.assert_series_equal(shown[column].reset_index(drop=True), expected[column].reset_index(drop=True),
                                       check_names=False)
    assert shown["accuracy"].tolist() == pytest.approx([0.5, 4 / 6])
    assert shown["accuracy_vs_name"].tolist() == pytest.approx([0.0, 4 / 6 - 0.5])
    assert at.get("plotly_chart"), "the grouped bar chart of accuracy and sibling %"

    # Per class: B (definition) against A (name only), as the library says.
    assert [s.value for s in at.selectbox][1:3] == [NAME_ONLY, WITH_DEF]
    diff = recipe_difference(tables.per_class, NAME_ONLY, WITH_DEF)
    table = at.dataframe[1].value
    assert table["true_wnid"].tolist() == diff["true_wnid"].tolist() == [TABBY, PERSIAN, TIGER_CAT]
    assert table["outcome"].tolist() == ["gained", "gained", "lost"]
    assert table["accuracy_change"].tolist() == pytest.approx([0.5, 0.5, -0.5])
    assert any("gained on 2 classes, lost on 1 class" in m.value for m in at.markdown)

    # Coverage of the run's three classes, and what the text tower reads for the chosen class.
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Classes"] == "3" and metrics["With a definition"] == "3" and metrics["With an OpenAI name"] == "3"
    knowledge = at.dataframe[2].value
    assert knowledge["wnid"].tolist() == [TABBY, TIGER_CAT, PERSIAN]
    assert knowledge["definition"].iloc[1] == "a cat having a striped coat"
    prompts = [c.value for c in at.code]
    assert len(prompts) == 2 and prompts[0].startswith("a bad photo of a tabby.")
    from core.wordnet import synset_of

    assert synset_of(TABBY).definition() in prompts[1], "the def recipe's prompts carry the definition"
    labels = [e.label for e in at.expander]
    assert labels[0].startswith("name only") and "80 prompts" in labels[0]
    assert len(at.get("download_button")) == 4, "recipes, per-class difference, knowledge, prompts"


def test_choosing_the_same_recipe_twice_says_so(app_home, monkeypatch):
    at = _open(app_home, monkeypatch, "recipes")
    at.selectbox(key="recipe-b").set_value(NAME_ONLY).run()
    assert any("Pick two different recipes" in i.value for i in at.info)


def test_a_run_without_zero_shot_models_says_how_and_still_shows_the_coverage(app_home, monkeypatch):
    at = _open(app_home, monkeypatch, "sample")
    assert not at.error, [e.value for e in at.error]
    how = [i.value for i in at.info if "No zero-shot model" in i.value]
    assert how and "python -m classify --run sample --models clip:ViT-B-32.openai --knowledge def" in how[0]
    assert any("models" in link.proto.page for link in at.main.get("page_link"))  # not the sidebar's
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Classes"] == "5"
    # The usual recipes' prompts for the first class, no model needed.
    labels = [e.label for e in at.expander]
    assert [label.split(" · ")[0] for label in labels] == ["name only", "definition", "path", "definition + path",
                                                          "definition"]
