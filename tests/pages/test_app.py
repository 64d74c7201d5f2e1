"""The dashboard through streamlit.testing.v1.AppTest: every page, the key widgets, the full flow
on the sample run, and CSV downloads equal to the library's tables."""
import json
import re

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.pages.conftest import capture_downloads, url_messages

APP = str(ROOT / "app.py")
TIMEOUT = 600  # the first run loads WordNet and classifies the sample on a shared 2-core machine

PAGES = {
    "runs": "pages/runs_page.py",
    "query": "pages/query_page.py",
    "import": "pages/import_page.py",
    "images": "pages/images_page.py",
    "models": "pages/models_page.py",
    "results": "pages/results_page.py",
    "confusions": "pages/confusions_page.py",
    "browse": "pages/browse_page.py",
    "image": "pages/image_page.py",
    "probes": "pages/probes_page.py",
    "knowledge": "pages/knowledge_page.py",
    "explain": "pages/explain_page.py",
}


def open_page(at: AppTest, name: str) -> AppTest:
    at.switch_page(PAGES[name]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_app_opens_on_the_sample_run(app):
    assert [t.value for t in app.title] == ["Runs"]
    assert app.sidebar.selectbox(key="run_id").value == "sample"
    runs = app.dataframe[0].value
    assert "sample" in runs["run"].tolist()
    assert int(runs.loc[runs["run"] == "sample", "images"].iloc[0]) == 30


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders(app, name):
    at = open_page(app, name)
    assert not at.error, [e.value for e in at.error]
    titles = {"runs": "Runs", "query": "Query", "images": "Images", "models": "Models", "results": "Results",
              "confusions": "Confusions", "explain": "Explain a confusion", "import": "Import",
              "browse": "Browse", "image": "Image", "probes": "Probes", "knowledge": "Knowledge"}
    assert [t.value for t in at.title] == [titles[name]]
    if name not in ("runs", "query", "import"):  # those three make runs; the others read the current one
        assert any("Sample run" in i.value for i in at.info), "the sample banner must be shown"
    # Import shows a table once a folder is named, Probes once probe results exist (their own test files);
    # the Image page shows one image (its tables are the grids').
    if name not in ("import", "probes", "image"):
        assert at.get("download_button"), "every page's tables can be downloaded as CSV"


def test_query_page_finds_the_seven_cat_classes(app):
    at = open_page(app, "query")
    assert at.text_input(key="query").value == "cat"
    sense = at.checkbox(key="sense|imagenet-1k|cat|cat.n.01")  # preselected: no question asked
    assert sense.value and any("guy.n.01 · no class in imagenet-1k" in m.value for m in at.markdown)
    classes = at.dataframe[0].value
    assert len(classes) == 7 and classes["wnid"].iloc[0] == "n02123045"
    from core.labels import classes_table, hyponym_classes

    assert classes.equals(classes_table(hyponym_classes("cat.n.01", "imagenet-1k")))
    at.text_input(key="query").set_value("qwzxv").run()
    assert any("not in WordNet" in e.value for e in at.error)
    at.text_input(key="query").set_value("beautiful").run()
    assert any("no noun sense" in e.value for e in at.error)


def test_query_page_lists_the_unseen_hyponyms_with_their_cog_level(app):
    # Issue 16: cat.n.01 has 7 IN-1k classes and 31 more IN-21k classes (Angora, leopard cat, ...).
    at = open_page(app, "query")
    unseen = at.dataframe[1].value
    assert len(unseen) == 31 and {"n02123478", "n02126317"} <= set(unseen["wnid"])
    assert "sim_to_seen" not in unseen.columns  # ranking 21,843 concepts waits for the toggle
    at.toggle(key="unseen_cog").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    ranked = at.dataframe[1].value.set_index("wnid")
    from explain.concepts import concept_levels

    expected = concept_levels("imagenet-1k").table.set_index("wnid").loc[ranked.index]
    assert (ranked["sim_to_seen"] == expected["sim_to_seen"]).all()
    assert ranked.loc["n02126317", "nearest_seen"] == "lynx (n02127052)"
    extra = at.multiselect[1]
    assert "leopard cat (n02126317)" in extra.options and extra.value == []


def test_query_page_sense_without_classes_warns(app):
    at = open_page(app, "query")
    at.text_input(key="query").set_value("guy.n.01").run()
    assert any("No class of imagenet-1k lies under guy.n.01" in w.value for w in at.warning)
    at.text_input(key="query").set_value("run").run()  # the answer before the 16 senses listed
    assert [w.value for w in at.warning] == ["No class of imagenet-1k lies under any of the 16 noun senses of ‘run’. "
                                             "Pick another word, a more general one, or a larger label space such as "
                                             "imagenet-21k."]


def test_images_page_shows_provenance_and_excludes(app, app_home):
    from core.runstore import RunStore

    at = open_page(app, "images")
    assert at.selectbox[0].value in {"n02123045", "n03763968", "n03877845", "n04485082", "n07920052"}
    assert len(at.get("image")) == 6  # six views of the selected photograph
    provenance = at.dataframe[0].value  # the data editor
    assert {"excluded", "source", "url", "sha256", "original_name"} <= set(provenance.columns)
    run = RunStore(app_home).open_run("sample")
    before = len(run.usable_images())
    run.set_excluded([run.usable_images()["file"].iloc[0]], reason="test")
    try:
        at.run()
        assert not at.exception
        assert len(run.usable_images()) == before - 1 and len(run.read_manifest()) == 30  # kept, not deleted
        from explain.artefact import staleness

        assert staleness(run).startswith("the manifest changed")  # the stored metrics know they are stale
        at = open_page(at, "results")  # ... and the Results page recomputes and stores them
        assert set(at.dataframe[0].value["n"].astype(int)) == {before - 1} and staleness(run) is None
    finally:
        run.set_excluded([run.read_manifest()["file"].iloc[0]], excluded=False)
        run.set_excluded(run.read_manifest()["file"].tolist(), excluded=False)


def test_models_page_lists_families_and_the_usable_default(app):
    at = open_page(app, "models")
    subheaders = [s.value for s in at.subheader]
    assert any(s.startswith("CNNs") for s in subheaders) and any(s.startswith("Transformers") for s in subheaders)
    assert len(at.dataframe) >= 2, "registry tables missing"
    cnns = at.dataframe[0].value
    assert bool(cnns.set_index("id").loc["efficientnet_lite0", "usable"])
    button = [b for b in at.button if b.label.startswith("Run ")][0]
    assert button.label == "Run 3 models"  # the three packaged models, already run on the sample, are ticked


def test_models_page_reports_a_precision_this_machine_lacks(app):
    at = open_page(app, "models")
    [s for s in at.selectbox if s.label == "Device"][0].set_value("cpu")
    # fp16 needs a GPU on every CPU (bf16 runs on CPUs with native bf16, e.g. this one's AVX-512 BF16)
    [s for s in at.selectbox if s.label == "Precision"][0].set_value("fp16")
    at.run()
    [b for b in at.button if b.label.startswith("Run ")][0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("needs a GPU" in e.value for e in at.error), [e.value for e in at.error]


def test_models_page_runs_int8_as_the_cascade_or_alone(app, monkeypatch):
    """--int8-recheck on the page: int8 is the int8 -> fp32 cascade unless 'int8 alone' is ticked."""
    import classify.targets
    from core.errors import WildLensError

    seen = []

    def spy(run, models, options, *args, **kwargs):
        seen.append(options)
        raise WildLensError("stopped by the test")

    monkeypatch.setattr(classify.targets, "predict_run", spy)
    at = open_page(app, "models")
    assert not [c for c in at.checkbox if c.label == "int8 alone"]  # only offered with int8
    [s for s in at.selectbox if s.label == "Precision"][0].set_value("int8")
    at.run()
    for alone in (False, True):
        [c for c in at.checkbox if c.label == "int8 alone"][0].set_value(alone)
        at.run()
        [b for b in at.button if b.label.startswith("Run ")][0].click().run()
        assert not at.exception, [e.value for e in at.exception]
    assert [(o.precision, o.int8_recheck) for o in seen] == [("int8", "auto"), ("int8", "none")]


def test_results_tables_and_csv_equal_the_library(app, app_home, monkeypatch):
    from explain.export import table_to_csv_bytes
    from explain.metrics import compute_metric_tables
    from core.runstore import RunStore

    downloads = capture_downloads(monkeypatch)
    at = open_page(app, "results")
    expected = compute_metric_tables(RunStore(app_home).open_run("sample").usable_predictions())
    assert downloads["sample_per_model.csv"] == table_to_csv_bytes(expected.per_model)
    assert downloads["sample_per_class.csv"] == table_to_csv_bytes(expected.per_class)
    shown = at.dataframe[0].value
    row = shown[shown["model"] == "efficientnet_lite0"].iloc[0]
    lib = expected.per_model.set_index("model").loc["efficientnet_lite0"]
    assert float(row["accuracy"]) == pytest.approx(float(lib["accuracy"]))
    assert int(row["n"]) == 30
    # the sample's chelsea views must be real predictions: some domestic cat class
    assert 0.0 < float(lib["accuracy"]) <= 1.0


def test_confusions_and_explain_flow(app, app_home, monkeypatch):
    from explain.export import table_to_csv_bytes
    from explain.metrics import compute_metric_tables
    from core.runstore import RunStore

    downloads = capture_downloads(monkeypatch)
    at = open_page(app, "confusions")
    expected = compute_metric_tables(RunStore(app_home).open_run("sample").usable_predictions())
    assert downloads["sample_confusions.csv"] == table_to_csv_bytes(expected.confusions)
    if expected.confusions.empty:
        pytest.skip("the default model made no mistake on the sample")
    first = expected.confusions.iloc[0]
    class_box = [s for s in at.selectbox if s.label == "True class"][0]
    class_box.set_value(first["true_wnid"]).run()
    explain_links = [link.proto for link in at.main.get("page_link") if link.proto.label.startswith("Explain ")]
    assert explain_links
    at.query_params.clear()  # follow the link as the browser does: its URL, then the page
    at.query_params.update(dict(part.split("=", 1) for part in explain_links[0].query_string.split("&")))
    at.switch_page(PAGES["explain"]).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Explain a confusion"]
    pair = at.session_state["pair"]
    assert pair[1] == first["true_wnid"]
    # the confusion picked reads its MF with its interval, as the tables' cells
    picked = [s for s in at.selectbox if s.label == "Confused with"][0]
    assert re.search(r" · MF \d+\.\d% \[\d+\.\d, \d+\.\d\] · ", picked.format_func(picked.value)), \
        picked.format_func(picked.value)
    assert at.get("plotly_chart"), "the WordNet path graph is missing"
    metrics = {m.label: m.value for m in at.metric}
    from explain.explanations import explain_pair

    truth = explain_pair(pair[1], pair[2])
    assert metrics["Path length"] == str(truth.path_length)
    assert metrics["WUP"] == f"{truth.wup:.3f}"  # similarities: three decimals on every page


# --------------------------------------------------------------------------- query -> images -> results
TABBY, TIGER_CAT = "n02123045", "n02123159"


def _crawl_button(at):
    return [b for b in at.button if b.label == "Create run and crawl"][0]


def _choose_two_cats(at, k: int = 2):
    classes = [m for m in at.multiselect if m.label == "Classes"][0]
    classes.set_value([TABBY, TIGER_CAT])
    at.number_input(key="k").set_value(k)
    return at.run()


def test_crawl_without_internet_offers_the_local_import(app, app_home, monkeypatch):
    import crawl.crawler
    from tests.crawl import fake_engine as T
    from core.runstore import RunStore

    T.loopback_only(monkeypatch)
    monkeypatch.setattr(crawl.crawler, "engine_base_url", lambda engine, config=None: T.closed_port_url())
    before = {i.run_id for i in RunStore(app_home).list_runs()}
    at = _choose_two_cats(open_page(app, "query"))
    _crawl_button(at).click().run()
    assert not at.exception
    assert any("Cannot reach" in e.value and "Import a local folder" in e.value for e in at.error)
    assert {i.run_id for i in RunStore(app_home).list_runs()} == before  # no empty run left behind


def test_a_crawl_that_stops_part_way_leaves_its_run_current(app, app_home, monkeypatch):
    """Issue 22 item 21: the run a crawl made is the current run at once, also when the engine
    goes away part-way (what was fetched is kept in it): it stayed on the previous run."""
    import types

    import crawl
    from core.runstore import RunStore

    monkeypatch.setattr(crawl, "check_engine", lambda engine: types.SimpleNamespace(ok=True, host="h", detail=""))

    def stops(*args, **kwargs):
        raise crawl.EngineUnreachable("cannot reach h: gone")

    monkeypatch.setattr(crawl, "crawl_run", stops)
    before = {i.run_id for i in RunStore(app_home).list_runs()}
    at = _choose_two_cats(open_page(app, "query"))
    _crawl_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    (new,) = {i.run_id for i in RunStore(app_home).list_runs()} - before
    assert any(new in e.value for e in at.error), [e.value for e in at.error]
    assert at.query_params["run"] == new
    at.run()
    assert at.session_state["run_id"] == new


def test_full_flow_crawl_classify_results(app, app_home, monkeypatch):
    """Query -> crawl (against a loopback imitation of Bing) -> Models -> Results, all in the app."""
    import crawl.crawler
    from tests.crawl import fake_engine as T
    from core.runstore import RunStore

    T.loopback_only(monkeypatch)
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [engine.add(f"/t/{i}.jpg", T.jpeg(200 + i, size=(200, 160))) for i in range(3)]
        engine.results["tiger cat"] = [engine.add(f"/g/{i}.png", T.png(300 + i, size=(200, 160))) for i in range(3)]
        monkeypatch.setattr(crawl.crawler, "engine_base_url", lambda name, config=None: engine.base_url)
        before = {i.run_id for i in RunStore(app_home).list_runs()}
        at = _choose_two_cats(open_page(app, "query"))
        _crawl_button(at).click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
    store = RunStore(app_home)
    (new,) = {i.run_id for i in store.list_runs()} - before
    run = store.open_run(new)
    assert run.info.sense == "cat.n.01" and run.info.wnids == [TABBY, TIGER_CAT]
    usable = run.usable_images()
    assert usable.groupby("wnid").size().to_dict() == {TABBY: 2, TIGER_CAT: 2}
    assert usable["url"].str.startswith(engine.base_url).all()

    at.session_state["_next_run_id"] = new  # what the page's "Open its images" link does
    at = open_page(at, "models")
    run_button = [b for b in at.button if b.label.startswith("Run ")][0]
    # Issue 12 item 8: a new run starts with every usable model picked (it was "Run 0 model(s)").
    assert run_button.label == "Run 3 models"
    picker = at.multiselect[0]
    assert set(picker.value) == {"efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"}
    picker.set_value(["efficientnet_lite0"]).run()
    run_button = [b for b in at.button if b.label.startswith("Run ")][0]
    assert run_button.label == "Run 1 model"
    run_button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Predictions stored" in s.value for s in at.success)
    assert any("models already run: efficientnet\\_lite0" in m.value for m in at.markdown), "the state after the run"
    at = open_page(at, "results")
    shown = at.dataframe[0].value
    assert shown["model"].tolist() == ["efficientnet_lite0"] and int(shown["n"].iloc[0]) == 4
    from explain.artefact import read_stored_metrics, staleness

    assert staleness(run) is None  # the page found the stored metrics stale after inference and rewrote them
    assert int(read_stored_metrics(run).per_model["n"].iloc[0]) == 4


# --------------------------------------------------------------------------- hostile outside text (issue 11 items 14, 15)
EVIL = "**x**[link](https://evil.invalid)![i](https://evil.invalid/i.png)"
EVIL_MODEL = '@**m**[link](https://evil.invalid)<a href="https://evil.invalid">a</a>'  # from stored predictions
FORMULA = '=HYPERLINK("https://evil.invalid","x")'


def _live(text: str) -> bool:
    """The hostile strings' Markdown or HTML, as it would render: bold, a link, an image."""
    return any(live in text for live in ("**x**", "**m**", "](https://evil")) or re.search(r"(?<!\\)<a href", text) is not None


def _rendered_texts(at: AppTest) -> list[str]:
    """Every text the page hands to Streamlit's Markdown renderer."""
    texts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "error", "warning", "info", "success"):
        texts += [e.value for e in getattr(at, kind)]
    texts += [b.label for b in at.button]
    texts += [o for r in at.radio for o in r.options]
    return texts


def test_crawl_notes_from_the_engine_are_escaped(app, monkeypatch):
    """Engine texts (Flickr's error messages, search terms) in a crawl's notes are outside text."""
    import crawl.crawler
    from crawl.http import Reachability
    from pages.text import escape_markdown

    note = f"{TABBY} tabby: the engine said {EVIL}"

    def fake_crawl(run, wnids, k, engine=None, config=None, progress=None, search_terms=None):
        return crawl.crawler.CrawlSummary(engine, k, run.run_id, pd.DataFrame({"wnid": wnids, "accepted": 0}),
                                          notes=[note])

    monkeypatch.setattr(crawl.crawler, "check_engine", lambda engine, config=None: Reachability(True, "h", "ok", 0.0))
    monkeypatch.setattr(crawl.crawler, "crawl_run", fake_crawl)
    at = _choose_two_cats(open_page(app, "query"))
    _crawl_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert escape_markdown(note) in [c.value for c in at.caption], [c.value for c in at.caption]
    assert not any(_live(t) for t in _rendered_texts(at)), [t for t in _rendered_texts(at) if _live(t)]


@pytest.fixture(scope="module")
def hostile_run(app_home):
    """A run copied from elsewhere: a formula for a title, a model id of Markdown, HTML and a
    formula in its run.json and stored predictions, and formulas in its manifest's provenance."""
    from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, write_table
    from tests.crawl import fake_engine as T

    store = RunStore(app_home)
    run = store.create_run(RunInfo(run_id="hostile", title=FORMULA, wnids=[TABBY, TIGER_CAT], models=[EVIL_MODEL]))
    rows = []
    for i, wnid in enumerate([TABBY, TABBY, TIGER_CAT, TIGER_CAT]):
        data = T.jpeg(700 + i, size=(96, 80))
        file = f"{wnid}/{i:016x}.jpg"
        (run.images_dir / wnid).mkdir(parents=True, exist_ok=True)
        (run.images_dir / file).write_bytes(data)
        rows.append({"wnid": wnid, "file": file, "sha256": f"{i:064x}", "width": 96, "height": 80, "format": "JPEG",
                     "mode": "RGB", "bytes": len(data), "source": "import", "search_term": "=1+1",
                     "url": "+http://evil.invalid/a.jpg", "original_name": "@evil.jpg", "status": "accepted",
                     "excluded": False})
    manifest = pd.DataFrame(rows)
    run.write_manifest(manifest)
    predictions = pd.DataFrame({"model": EVIL_MODEL, "image": manifest["file"], "true_wnid": manifest["wnid"],
                                "pred_wnid": [TIGER_CAT, TABBY, TIGER_CAT, TIGER_CAT], "prob_1": 0.5,
                                "label_space": "imagenet-1k", "status": "ok"})
    # Written as a copied run holds it: the run store itself refuses such an id as a folder name.
    write_table(predictions, run.path / "predictions" / "hostile" / "part-0.parquet", PREDICTION_SCHEMA)
    return run


def test_hostile_run_text_is_escaped_and_downloads_are_spreadsheet_safe(app, hostile_run, monkeypatch):
    """Item 15: run titles, model ids and provenance reach every page's Markdown escaped, and
    charts get no live HTML. Item 14: every table downloaded from those pages has its
    formula-like text cells quoted, numbers untouched, and reads back to the original."""
    import io

    from core.csvsafe import read_csv
    from core.runstore import RunStore
    from explain.export import table_to_csv_bytes
    from explain.metrics import compute_metric_tables
    from pages.text import escape_markdown

    downloads = capture_downloads(monkeypatch)
    app.session_state["_next_run_id"] = hostile_run.run_id
    for page in ("runs", "images", "models", "results", "confusions", "explain"):
        at = open_page(app, page)
        assert at.session_state["run_id"] == hostile_run.run_id
        live = [t for t in _rendered_texts(at) if _live(t)]
        assert not live, (page, live)
        if page in ("models", "confusions"):  # the model id is shown, escaped
            assert any(escape_markdown(EVIL_MODEL) in m.value for m in at.markdown), page
        for chart in at.get("plotly_chart"):  # the spec is JSON, with '<' written as \u003c
            assert "<a href" not in json.dumps(json.loads(chart.proto.spec)), page

    def cells(name: str, column: str) -> list:
        return pd.read_csv(io.BytesIO(downloads[name]), dtype={column: str})[column].tolist()

    runs = pd.read_csv(io.BytesIO(downloads["runs.csv"]), dtype={"title": str})
    assert runs.loc[runs["run"] == "hostile", "title"].tolist() == ["'" + FORMULA]
    back = read_csv(io.BytesIO(downloads["runs.csv"]), dtype=str, keep_default_na=False)
    assert back["title"].tolist() == [i.title or i.query for i in RunStore().list_runs()]
    manifest_csv = downloads["hostile_manifest.csv"]
    for column, value in (("search_term", "=1+1"), ("url", "+http://evil.invalid/a.jpg"), ("original_name", "@evil.jpg")):
        assert set(cells("hostile_manifest.csv", column)) == {"'" + value}, column
        assert set(read_csv(io.BytesIO(manifest_csv), dtype={column: str})[column]) == {value}, column
    assert cells("hostile_manifest.csv", "width") == ["96"] * 4
    expected = compute_metric_tables(hostile_run.usable_predictions())
    for name, table in (("per_model", expected.per_model), ("per_class", expected.per_class),
                        ("confusions", expected.confusions)):
        data = downloads[f"hostile_{name}.csv"]
        assert data == table_to_csv_bytes(table), name
        assert set(cells(f"hostile_{name}.csv", "model")) == {"'" + EVIL_MODEL}, name


def test_results_shows_the_classes_a_model_has_not_seen(app, app_home):
    """Issue 16: a run with leopard-cat images (ImageNet-21k only) classified by an IN-1k model:
    Results shows the class in its own panel with NA accuracy and the library's lin_vs_best."""
    from core.runstore import RunInfo, RunStore
    from explain.metrics import compute_metric_tables

    leopard_cat = "n02126317"
    store = RunStore(app_home)
    run = store.create_run(RunInfo(run_id="unseen", title="cats", wnids=[TABBY, leopard_cat], models=["efficientnet_lite0"]))
    preds = pd.DataFrame({"model": "efficientnet_lite0", "image": [f"{TABBY}/a.jpg", f"{leopard_cat}/b.jpg",
                                                                   f"{leopard_cat}/c.jpg"],
                          "true_wnid": [TABBY, leopard_cat, leopard_cat],
                          "pred_wnid": [TABBY, "n02127052", "n02128385"],  # lynx, leopard
                          "prob_1": 0.5, "label_space": "imagenet-1k", "status": "ok"})
    run.append_predictions(preds)
    app.run()  # the run list is read on each run of the script
    app.sidebar.selectbox(key="run_id").set_value("unseen").run()
    at = open_page(app, "results")
    assert any(h.value == "Classes the models have not seen" for h in at.subheader)
    expected = compute_metric_tables(run.usable_predictions()).per_class.set_index("true_wnid").loc[leopard_cat]
    shown = at.dataframe[-1].value.set_index("true_wnid").loc[leopard_cat]
    assert pd.isna(expected["accuracy"]) and shown["lin_vs_best"] == expected["lin_vs_best"]
    assert shown["sim_to_seen"] == expected["sim_to_seen"] and 0 < shown["lin_vs_best"] <= 1


def test_the_levels_toggle_names_each_class_with_its_cog_level(app, app_home):
    """Issue 16: any class anywhere can show its ImageNet-CoG level (sidebar toggle)."""
    from core.runstore import RunInfo, RunStore
    from explain.concepts import concept_levels

    gamecock = "n01514752"  # an IN-21k concept of level 1 (closest to the IN-1k classes)
    assert concept_levels("imagenet-1k").table.set_index("wnid").loc[gamecock, "level"] == 1
    run = RunStore(app_home).create_run(RunInfo(run_id="levels", wnids=[gamecock]))
    run.append_predictions(pd.DataFrame({"model": "efficientnet_lite0", "image": [f"{gamecock}/a.jpg"],
                                         "true_wnid": [gamecock], "pred_wnid": ["n01514668"],  # cock
                                         "prob_1": 0.5, "label_space": "imagenet-1k", "status": "ok"}))
    app.run()
    app.sidebar.selectbox(key="run_id").set_value("levels").run()
    at = open_page(app, "results")
    def per_class(at):  # the per-class table: the one with a class_name column
        return next(d.value for d in at.dataframe if "class_name" in d.value.columns)

    assert per_class(at)["class_name"].tolist() == ["gamecock"]
    at.sidebar.toggle(key="show_levels").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert per_class(at)["class_name"].tolist() == ["gamecock · L1"]


def _second_run(app_home, run_id="second"):
    from core.runstore import RunInfo, RunStore

    run = RunStore(app_home).create_run(RunInfo(run_id=run_id, title="second run", wnids=[TABBY]))
    run.append_predictions(pd.DataFrame({"model": "efficientnet_lite0", "image": [f"{TABBY}/a.jpg", f"{TABBY}/b.jpg"],
                                         "true_wnid": [TABBY, TABBY], "pred_wnid": [TABBY, TIGER_CAT],
                                         "prob_1": 0.5, "label_space": "imagenet-1k", "status": "ok"}))
    return run


def test_the_run_lives_in_the_url(app_home, monkeypatch):
    """Issue 12 item 1: ?run=<id> opens that run on any page (a reload, a shared link), the URL
    follows the sidebar, and an unknown id is a message with the run list, not a silent switch."""
    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    _second_run(app_home)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["run"] = "second"
    at.run()
    assert at.sidebar.selectbox(key="run_id").value == "second"
    open_page(at, "results")
    assert at.query_params["run"] == "second"
    assert at.dataframe[0].value["n"].tolist() == [2], "the second run's numbers, not the sample's"
    at.sidebar.selectbox(key="run_id").set_value("sample").run()
    assert at.query_params["run"] == "sample" and at.dataframe[0].value["n"].iloc[0] == 30

    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT)
    fresh.query_params["run"] = "no-such-run"
    fresh.run()
    open_page(fresh, "results")
    assert any("No run no-such-run" in e.value.replace("\\", "") for e in fresh.error)
    assert not fresh.dataframe, "no other run's table in its place"
    assert {"second", "sample"} <= {link.proto.query_string.split("=")[-1] for link in fresh.get("page_link")}


def test_explain_from_confusions_keeps_the_run_and_the_pair(app_home, monkeypatch):
    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    _second_run(app_home, "pair-run")
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"run": "pair-run", "model": "efficientnet_lite0", "true": TABBY, "pred": TIGER_CAT})
    at.run()
    open_page(at, "explain")
    assert at.sidebar.selectbox(key="run_id").value == "pair-run"
    assert [s.value for s in at.selectbox][:3] == ["efficientnet_lite0", TABBY, TIGER_CAT]


def test_models_page_select_all_usable(app):
    at = open_page(app, "models")
    picker = at.multiselect[0]
    assert "Models to run · 3 of" in picker.label
    picker.set_value([]).run()
    assert [b for b in at.button if b.label.startswith("Run ")][0].label == "Run 0 models"
    [b for b in at.button if b.label == "Select all usable"][0].click().run()
    assert len(at.multiselect[0].value) == 3
    assert [b for b in at.button if b.label.startswith("Run ")][0].label == "Run 3 models"


def test_the_first_page_says_what_to_do_next(app):
    """Issue 12 item 7: the Runs page (where the app opens) links to the current run's Results
    (the URL carries the run) and to a new query."""
    results = [link for link in app.main.get("page_link") if "results" in link.proto.page][0]  # not the sidebar's
    assert results.proto.query_string == "run=sample"
    assert any("query" in link.proto.page for link in app.main.get("page_link"))


def test_the_server_freezes_its_start_up_objects_once(app):
    """pages.server.freeze_startup_objects: at a process's first script run, after importing what the chart
    pages import, every tracked object moves to the collector's permanent generation (a full collection
    walked ~370,000 of them in Results' first load at 1M predictions); never again after, so no run's or
    session's garbage is pinned."""
    import gc
    import sys

    from pages.server import freeze_startup_objects

    assert gc.get_freeze_count() > 0 and "plotly.express" in sys.modules
    assert freeze_startup_objects() is False


def test_pages_write_the_url_through_write_params_only():
    """pages.run_state.write_params sends what one action changes as one URL (one step of Back); a direct
    st.query_params write sends one per key (a hostile check: Back took several presses)."""
    import re

    direct = re.compile(r"st\.query_params(\[[^\]]*\]\s*=[^=]|\.(update|pop|clear|from_dict|setdefault)\(|\.\w+\s*=[^=])"
                        r"|del st\.query_params")
    found = [f"{path.name}:{n}" for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
             for n, line in enumerate(path.read_text().splitlines(), 1) if direct.search(line)]
    assert found == ["run_state.py:%d" % next(n for n, line in enumerate((ROOT / "pages/run_state.py").read_text()
                                                                         .splitlines(), 1)
                                              if "st.query_params.from_dict(" in line)], found


def test_explain_any_two_concepts_lives_in_the_url_and_says_where_the_path_length_comes_from(app_home, monkeypatch):
    """A UI review: "Any two concepts" reverted to the run's first confusion on reload while the URL still
    named that confusion's pair, and tabby -> dog showed "Path length 3" beside six drawn edges."""
    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"run": "sample", "pair": "any", "true": TABBY, "pred": "dog.n.01"})
    at.run()
    open_page(at, "explain")
    assert not at.exception
    assert at.radio[0].value == "Any two concepts"
    assert [t.value for t in at.text_input] == [TABBY, "dog.n.01"]
    assert at.query_params["pair"] == "any" and at.query_params["pred"] == "n02084071"
    assert "model" not in at.query_params
    assert {m.label: m.value for m in at.metric}["Path length"] == "3"
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # escaped Markdown, read as shown
    assert "Path length 3 (and Path sim., LCH) is WordNet's shortest path, up to domestic animal (n01317541)" in captions
    assert "the path drawn (6 edges) climbs to their lowest common hypernym, carnivore" in captions
    # Typed concepts win over the URL the page wrote (a hostile check: every second edit was lost), a word of
    # several senses says which is shown, and the mode switches at each click, back and forth.
    at.text_input[1].set_value("cat").run()
    assert at.query_params["pred"] == "n02121620"
    at.text_input[1].set_value("lion").run()
    assert at.query_params["pred"] == "n02129165" and at.text_input[1].value == "lion"
    at.text_input[1].set_value("xyzzy").run()
    assert at.error and at.text_input[1].value == "xyzzy"
    at.text_input[1].set_value("tiger").run()
    assert not at.error and at.text_input[1].value == "tiger"
    said = [c.value.replace("\\", "") for c in at.caption if "noun senses" in c.value]
    assert said and "'tiger' has 2 noun senses: showing its first, tiger.n.01" in said[0]
    assert "such as tiger.n.02 (" in said[0] and said[0].endswith(") for another."), said  # the other sense's words
    sent = url_messages(monkeypatch)
    for mode in ("From this run's confusions", "Any two concepts", "From this run's confusions"):
        before = len(sent)
        at.radio[0].set_value(mode).run()
        assert at.radio[0].value == mode and ("pair" in at.query_params) == (mode == "Any two concepts")
        assert len(sent) == before + 1, sent  # a key removed and three set: one URL, one press of Back
        if mode == "Any two concepts":  # the typed concepts kept through the other mode (a hostile check)
            assert [t.value for t in at.text_input] == [TABBY, "tiger"]
    assert at.query_params["model"]
    odd = AppTest.from_file(APP, default_timeout=TIMEOUT)
    odd.query_params.update({"run": "sample", "pair": "ANY", "true": TABBY, "pred": "dog.n.01"})
    odd.run()
    open_page(odd, "explain")
    assert not odd.exception and odd.radio[0].value == "From this run's confusions"
    assert any("pair=ANY is not 'any'" in w.value.replace("\\", "") for w in odd.warning)


def test_explain_back_restores_the_confusion_picked_before(app_home, monkeypatch):
    """A UI review: Back after a new true class left the boxes as they were, and the next Back showed a pair
    never picked (the boxes were set through index= only)."""
    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"run": "sample"})
    at.run()
    open_page(at, "explain")
    boxes = ("explain-model", "explain-class", "explain-confused")
    models = at.selectbox(key="explain-model").options
    if len(models) < 2 or len(at.selectbox(key="explain-class").options) < 2:
        pytest.skip("the sample's confusions leave no second model or class to pick")
    at.selectbox(key="explain-model").set_value(models[-1]).run()
    before = {k: at.query_params[k] for k in at.query_params}
    shown = tuple(at.selectbox(key=k).value for k in boxes)
    assert shown == (before["model"], before["true"], before["pred"])
    other = re.search(r"\((n\d{8})\)$", at.selectbox(key="explain-class").options[-1]).group(1)
    at.selectbox(key="explain-class").set_value(other).run()
    assert at.query_params["true"] == other != before["true"]
    at.query_params.clear()  # the browser's Back: the URL of the step before
    at.query_params.update(before)
    at.run()
    assert tuple(at.selectbox(key=k).value for k in boxes) == shown, "Back shows the pair picked before"
    assert {k: at.query_params[k] for k in at.query_params} == before and not at.warning


def test_results_chart_heatmap_and_images_class_live_in_the_url(app_home, monkeypatch):
    """A UI review: Results' Chart and Heatmap metrics and the Images page's class came back to the first
    option on reload. They are in the URL now (default: left out), read back from a link; a value that is
    no option is ignored."""
    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"run": "sample", "chart": "accuracy_top5", "heatmap": "wup_all"})
    at.run()
    open_page(at, "results")
    assert not at.exception
    assert at.selectbox(key="results-chart").value == "accuracy_top5"
    assert at.selectbox(key="class-metric").value == "wup_all"
    at.selectbox(key="results-chart").set_value("accuracy").run()  # the default: left out of the URL
    assert "chart" not in at.query_params and at.query_params["heatmap"] == "wup_all"
    at.selectbox(key="results-chart").set_value("sibling_rate").run()
    assert at.query_params["chart"] == "sibling_rate"
    # No model chosen stops the page above the box; the pick survives it (a hostile check: the box came back
    # at Accuracy while the chart and the URL kept Sibling %).
    everyone = list(at.multiselect(key="results_models").value)
    at.multiselect(key="results_models").set_value([]).run()
    at.multiselect(key="results_models").set_value(everyone[:1]).run()
    assert at.selectbox(key="results-chart").value == "sibling_rate" and at.query_params["chart"] == "sibling_rate"
    # The browser's Back to the URL without the parameter: the default chart again (a UI review: the box kept
    # Sibling % and wrote it back over that history step, so Back did nothing).
    del at.query_params["chart"]
    at.run()
    assert at.selectbox(key="results-chart").value == "accuracy" and "chart" not in at.query_params

    images = AppTest.from_file(APP, default_timeout=TIMEOUT)
    images.query_params.update({"run": "sample", "class": "n03877845"})  # palace
    images.run()
    open_page(images, "images")
    assert not images.exception and images.selectbox(key="images-class").value == "n03877845"
    bogus = AppTest.from_file(APP, default_timeout=TIMEOUT)
    bogus.query_params.update({"run": "sample", "class": "<b>n0</b>", "chart": "nope"})
    bogus.run()
    open_page(bogus, "images")
    assert not bogus.exception and bogus.selectbox(key="images-class").value != "<b>n0</b>"
    assert "class" not in bogus.query_params, "no such class: the first one shown, the URL left at the default"
    said = [w.value for w in bogus.warning if "class" in w.value]
    assert len(said) == 1 and "\\<b\\>" in said[0], "said once, the link's text escaped"
    assert said[0].replace("\\", "") == "The link's class=<b>n0</b> is not one of this page's choices here: showing the first."


def _fresh(home, monkeypatch, page: str = "confusions") -> AppTest:
    """``page`` on the sample run of ``home``, in a new session with every cache empty."""
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"run": "sample"})
    at.run()
    return open_page(at, page)


def test_confusions_models_live_in_the_url(app_home, monkeypatch):
    """A UI review: a model removed from Confusions' Models box came back on reload."""
    at = _fresh(app_home, monkeypatch)
    box = at.multiselect(key="conf_models")
    everyone = list(box.value)
    assert len(everyone) >= 2 and "models" not in at.query_params
    box.set_value(everyone[:1]).run()
    assert at.query_params["models"] == everyone[0]  # AppTest keeps a one-value list as that value
    again = AppTest.from_file(APP, default_timeout=TIMEOUT)
    again.query_params.update({"run": "sample", "models": [everyone[0], "nope"]})
    again.run()
    open_page(again, "confusions")
    assert not again.exception and again.multiselect(key="conf_models").value == everyone[:1]


def test_confusions_sections_offer_the_models_chosen_above(app_home, monkeypatch):
    """A UI review: with one model chosen in Confusions' Models box, the matrix's and the misclassified
    images' model boxes still offered every model; both now offer the chosen ones (every model when none
    is chosen), and a matrix model that is no longer chosen gives way to the first chosen one."""
    at = _fresh(app_home, monkeypatch)
    everyone = list(at.multiselect(key="conf_models").value)
    assert len(everyone) >= 2
    assert list(at.selectbox(key="matrix-model").options) == everyone
    at.selectbox(key="matrix-model").set_value(everyone[-1]).run()
    at.multiselect(key="conf_models").set_value(everyone[:1]).run()
    assert not at.exception
    for key in ("matrix-model", "images-model"):
        assert list(at.selectbox(key=key).options) == everyone[:1] and at.selectbox(key=key).value == everyone[0], key
    assert at.query_params["model"] == everyone[0], "the URL names the matrix's model shown"
    at.multiselect(key="conf_models").set_value([]).run()
    assert not at.exception and list(at.selectbox(key="matrix-model").options) == everyone
    # A hand-made link whose models leave out its model: said, the first chosen one's matrix, no cell picked
    linked = AppTest.from_file(APP, default_timeout=TIMEOUT)
    linked.query_params.update({"run": "sample", "models": everyone[:1], "model": everyone[-1],
                                "cell_true": "n02123045", "cell_pred": "n02123045"})
    linked.run()
    open_page(linked, "confusions")
    assert not linked.exception and linked.selectbox(key="matrix-model").value == everyone[0]
    said = [w.value for w in linked.warning if "not among the models" in w.value]
    assert len(said) == 1 and "cell_true" not in linked.query_params


def test_confusions_thumbnails_say_which_file_does_not_decode(sample_store, tmp_path_factory, monkeypatch):
    """Confusions' misclassified images are Browse's thumbnails (pages.pictures): each picture was read whole from
    disk on every rerun through st.image(path), and a file that no longer decodes showed nothing said. Now a
    damaged file is "Cannot decode <image>" under the grid and the other images are drawn."""
    from core.runstore import RunStore
    from tests.pages.conftest import copy_store

    home = copy_store(sample_store, tmp_path_factory, "damaged_home")
    at = _fresh(home, monkeypatch)
    model, true = at.selectbox(key="images-model").value, at.selectbox(key="conf_true").value
    run = RunStore(home).open_run("sample")
    preds = run.usable_predictions()
    wrong = preds[(preds["model"] == model) & (preds["true_wnid"] == true) & (preds["pred_wnid"] != true)]
    if len(wrong) < 2:
        pytest.skip("fewer than two mistakes of the first class on the sample")
    images = sorted(wrong["image"].astype(str))
    run.image_path(images[0]).write_bytes(b"\xff\xd8 not a jpeg any more")
    st.cache_data.clear()
    st.cache_resource.clear()
    at.run()
    assert not at.exception
    captions = [c.value for c in at.caption]
    from pages.text import escape_markdown

    at_damaged = captions.index(f"Cannot decode {escape_markdown(images[0])}")
    assert captions[at_damaged + 1].startswith("→ "), "its prediction still under it (a review)"
    assert len(at.get("image")) >= 1, "the others are drawn"


def test_explain_any_two_concepts_starts_from_the_confusion_shown(app_home, monkeypatch):
    """A UI review: switching from a run's confusion (military uniform -> comic book) to "Any two concepts" showed
    tabby -> Egyptian cat; the two concepts now start from the pair shown (concepts typed earlier are kept)."""
    at = _fresh(app_home, monkeypatch, "explain")
    classes = at.selectbox(key="explain-class").options
    at.selectbox(key="explain-class").set_value(re.search(r"\((n\d{8})\)$", classes[-1]).group(1)).run()
    pair = (at.selectbox(key="explain-class").value, at.selectbox(key="explain-confused").value)
    at.radio[0].set_value("Any two concepts").run()
    assert not at.exception and tuple(t.value for t in at.text_input) == pair
    assert (at.query_params["true"], at.query_params["pred"]) == pair


def test_explain_path_table_gives_the_gloss_room_and_keeps_each_columns_help(app):
    """A UI review: the path table cut names and WordNet's gloss to a few words at the default widths. The gloss
    is wide and the step, depth and role narrow, each keeping its label and help (pages.tables.show_table's widths)."""
    import json

    at = open_page(app, "explain")
    (table,) = [d for d in at.dataframe if "definition" in list(d.value.columns)]
    config = json.loads(table.proto.columns)
    assert config["definition"]["width"] == "large" and config["definition"]["help"].startswith("`definition`: WordNet")
    assert {config[c]["width"] for c in ("step", "depth", "role")} == {"small"}
    assert config["wnid"]["label"] == "Id" and "width" not in config["wnid"]
    assert list(table.value.columns)[-1] == "lemmas", "the gloss before the lemmas"
