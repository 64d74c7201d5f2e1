"""A run made from an uploaded predictions file (explain.export.import_predictions_as_run: source
'upload', no manifest, no images) on every page (issue 22 item 21): each page gives advice the
analyst can follow. The pages said "collect some on the Query page" (Images), "run `python -m
classify --run RUN --features`" (Probes), "run one on the Models page" (Knowledge), offered a Run
button that stayed disabled without a word (Models) and "run another on the Models page" (Browse):
none of it can be done on a run that holds no images. Now the pages that need images say that the
run holds predictions only and what to do instead (import the images as a new run and classify them
there), and no page offers to classify, probe or collect into it."""
import re

import pytest

from tests.pages.test_app import PAGES, open_page

# Advice that cannot be followed on a run without images ({run}: its id).
IMPOSSIBLE = (r"Query page", r"[Cc]ollect some", r"--run {run}", r"[Rr]un (one|another|models) on the Models page",
              r"[Rr]un another \(")
PREDICTIONS_ONLY = "holds predictions only"
NEEDS_IMAGES = ("images", "models", "probes", "knowledge")  # the pages whose work needs the images


def _upload(home, tmp_path_factory, name: str, models: dict[str, str]) -> str:
    """The sample's predictions of ``models`` ({sample model: id in the file}) uploaded as a new run."""
    import pandas as pd

    from core.runstore import RunStore
    from explain.export import import_predictions_as_run

    store = RunStore(home)
    preds = store.open_run("sample").read_predictions()
    preds = preds.assign(image=preds["image"].str.replace("/", "_"))  # another tool's image ids
    parts = [preds[preds["model"] == model].assign(model=as_id) for model, as_id in models.items()]
    file = tmp_path_factory.mktemp("upload") / f"{name}.csv"
    pd.concat(parts).drop(columns=["status", "reason"]).to_csv(file, index=False)
    run, _ = import_predictions_as_run(file, store, title=name)
    return run.run_id


@pytest.fixture(scope="module")
def uploaded(app_home, tmp_path_factory) -> dict[str, str]:
    """{name: run id}: three models, one model, one zero-shot recipe, each from an uploaded file."""
    return {"three": _upload(app_home, tmp_path_factory, "three", {m: m for m in
                                                                   ("efficientnet_lite0", "efficientnet_lite1",
                                                                    "efficientnet_lite2")}),
            "one": _upload(app_home, tmp_path_factory, "one", {"efficientnet_lite0": "efficientnet_lite0"}),
            "clip": _upload(app_home, tmp_path_factory, "clip", {"efficientnet_lite0": "clip/ViT-B-32.openai"})}


def _texts(at) -> list[str]:
    texts = [str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success", "code")
             for e in getattr(at, kind)]
    return texts + [p.label for p in at.get("page_link")]


def _on(app, run_id: str, page: str):
    app.session_state["_next_run_id"] = run_id
    at = open_page(app, page)
    assert at.session_state["run_id"] == run_id
    return at


@pytest.mark.parametrize("page", [p for p in PAGES if p not in ("runs", "query", "import")])
@pytest.mark.parametrize("which", ["three", "one", "clip"])
def test_every_page_gives_advice_an_uploaded_run_can_follow(app, uploaded, page, which):
    run_id = uploaded[which]
    at = _on(app, run_id, page)
    assert not at.error, [e.value for e in at.error]
    texts = _texts(at)
    bad = [(pattern, t) for t in texts for pattern in IMPOSSIBLE if re.search(pattern.format(run=run_id), t)]
    assert not bad, bad
    to_models = [p.proto.label for p in at.main.get("page_link") if p.proto.page == "models"]  # not the sidebar's
    assert not to_models, "no link to classify this run"
    if page == "knowledge" and which == "clip":  # its one recipe is shown; another needs the images
        assert any("Another recipe needs the images" in c.value for c in at.caption)
    elif page in NEEDS_IMAGES:
        assert any(PREDICTIONS_ONLY in i.value for i in at.info), [i.value for i in at.info]
        assert [p for p in at.main.get("page_link") if p.proto.page == "import"], "the way out: import the images"
    if page == "models":
        assert not [b for b in at.button if b.label.startswith("Run ")], "no Run button that cannot run"


def test_a_run_with_images_keeps_its_own_advice(app):
    """The sample run (images, no features) still names the commands that store features."""
    at = open_page(app, "probes")
    assert not any(PREDICTIONS_ONLY in i.value for i in at.info)
    assert any("--features" in c.value for c in at.code)


def test_two_model_ids_alike_once_made_safe_each_get_their_top3_table(app, app_home, tmp_path_factory):
    """Confusions keys each model's top-3 table by a digest of the model and the class: 'm/x' and 'm_x' made
    safe for a key would be one key, which Streamlit refuses (StreamlitDuplicateElementKey: the page stopped)."""
    run_id = _upload(app_home, tmp_path_factory, "twins", {"efficientnet_lite0": "m/x", "efficientnet_lite1": "m_x"})
    at = _on(app, run_id, "confusions")
    assert not at.error, [e.value for e in at.error]
    headers = [m.value for m in at.markdown if m.value.startswith("**m")]
    assert len(headers) == 2, headers


def test_a_link_naming_a_model_twice_shows_it_once(app, app_home, tmp_path_factory):
    """A review: '?models=m/x&models=m/x' chose the model twice and Confusions drew its top-3 table twice under
    one key (StreamlitDuplicateElementKey: the page stopped). Each chosen model is drawn once."""
    run_id = _upload(app_home, tmp_path_factory, "twice", {"efficientnet_lite0": "m/x", "efficientnet_lite1": "m_x"})
    app.session_state["_next_run_id"] = run_id
    app.query_params["models"] = ["m/x", "m/x"]
    at = open_page(app, "confusions")
    assert not at.error, [e.value for e in at.error]
    assert [m for m in at.multiselect if m.key == "conf_models"][0].value == ["m/x"]
    assert len([m.value for m in at.markdown if m.value.startswith("**m")]) == 1
