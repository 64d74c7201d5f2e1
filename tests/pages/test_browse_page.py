"""The Browse page through streamlit.testing.v1.AppTest on the sample run (real predictions of the
packaged models): it renders, links pre-filter it and the filters go back to the URL, its CSVs
are the library's tables (explain.browse), the comparison's counts are the library's, and a run
without image files (uploaded predictions) shows its tables."""
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.pages.conftest import away_and_back, capture_downloads, url_messages

APP = str(ROOT / "app.py")
PAGE = "pages/browse_page.py"
TIMEOUT = 600  # the first run loads WordNet and classifies the sample on a shared 2-core machine
EVIL_MODEL = "m__bold__.x"  # a valid model id (core.parts) that Markdown would read as bold


def open_page(at: AppTest, **params) -> AppTest:
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def library(app_home):
    """explain.browse's table of the sample run, computed without the page."""
    from core.runstore import RunStore
    from explain.browse import run_image_table

    return run_image_table(RunStore(app_home).open_run("sample"))


def _widget(at, kind: str, key: str):
    return getattr(at, kind)(key=key)


def test_browse_renders_on_the_sample_run(app, library):
    at = open_page(app)
    assert [t.value for t in at.title] == ["Browse"]
    assert not at.error, [e.value for e in at.error]
    models = list(dict.fromkeys(library["model"]))
    assert len(models) >= 2 and _widget(at, "multiselect", "browse_models").value == models
    assert at.get("image"), "the sample run's photographs are shown"
    assert any(e.label == "Top-5" for e in at.expander)
    texts = " ".join(c.value for c in at.caption)
    assert "tabby" in texts or "espresso" in texts  # class names, not wnids alone
    shown = at.dataframe[0].value
    assert len(shown) == len(library) == 30 * len(models)
    assert {"true_name", "pred_name_1", "pred_name_5"} <= set(shown.columns)
    assert [m.label for m in at.metric] == ["Both wrong", "Only A wrong", "Only B wrong", "Both right"]


def test_every_true_class_compares_the_two_models(app, library):
    """A hostile campaign: with a true class chosen, the comparison got the whole table's image ranks of that class's
    rows and refused them for every class but the first few, and the page stopped with an error."""
    from explain.browse import compare_models

    at = open_page(app)
    a, b = _widget(at, "selectbox", "cmp_a").value, _widget(at, "selectbox", "cmp_b").value
    for true in sorted(set(library["true_wnid"].dropna()), reverse=True):  # the last classes first
        _widget(at, "selectbox", "browse_true").set_value(true).run()
        assert not at.exception, (true, [e.value for e in at.exception])
        shown = {m.label: m.value for m in at.metric}
        expected = compare_models(library[library["true_wnid"] == true].reset_index(drop=True), a, b)
        assert shown == {label: f"{len(expected.group(g)):,}" for g, label in
                         (("both_wrong", "Both wrong"), ("only_a_wrong", "Only A wrong"),
                          ("only_b_wrong", "Only B wrong"), ("both_right", "Both right"))}, true


def test_a_link_prefilters_the_page_and_the_filters_go_back_to_the_url(app, library):
    mistakes = library[~library["correct"].astype(bool)]
    if mistakes.empty:
        pytest.skip("no model made a mistake on the sample")
    first = mistakes.iloc[0]
    at = open_page(app, run="sample", model=first["model"], true=first["true_wnid"], pred=first["pred_wnid_1"],
                   outcome="mistake")
    assert _widget(at, "multiselect", "browse_models").value == [first["model"]]
    assert _widget(at, "selectbox", "browse_true").value == first["true_wnid"]
    assert _widget(at, "selectbox", "browse_pred").value == first["pred_wnid_1"]
    assert _widget(at, "radio", "browse_outcome").value == "mistake"
    from explain.browse import filter_images

    expected = filter_images(library, models=[first["model"]], true=first["true_wnid"], pred=first["pred_wnid_1"],
                             outcome="mistake")
    shown = at.dataframe[0].value
    assert not expected.empty and shown["image"].tolist() == expected["image"].tolist()
    assert (shown["model"] == first["model"]).all() and (~shown["correct"].astype(bool)).all()
    # A change of filter goes back to the URL (bookmarkable) and is not overridden by the old link.
    _widget(at, "radio", "browse_outcome").set_value("all").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "outcome" not in at.query_params and at.query_params["model"] == first["model"]
    assert _widget(at, "radio", "browse_outcome").value == "all"
    _widget(at, "slider", "browse_conf").set_value((0.25, 0.9)).run()
    assert at.query_params["conf_min"] == "0.25" and at.query_params["conf_max"] == "0.9"


def test_a_link_to_what_the_run_lacks_says_so(app):
    at = open_page(app, run="sample", model="no_such_model", true="n02123045", pred="n01440764")
    assert any("no predictions of" in w.value and "no\\_such\\_model" in w.value for w in at.warning), \
        [w.value for w in at.warning]
    assert _widget(at, "selectbox", "browse_pred").value == ""


def test_the_csv_is_the_library_table(app, library, monkeypatch):
    from explain.browse import filter_images
    from explain.export import table_to_csv_bytes

    downloads = capture_downloads(monkeypatch)
    at = open_page(app)
    assert downloads["sample_images.csv"] == table_to_csv_bytes(library)
    models = list(dict.fromkeys(library["model"]))
    _widget(at, "multiselect", "browse_models").set_value(models[1:]).run()
    _widget(at, "radio", "browse_outcome").set_value("correct").run()
    _widget(at, "slider", "browse_conf").set_value((0.3, 1.0)).run()
    assert not at.exception, [e.value for e in at.exception]
    expected = filter_images(library, models=models[1:], outcome="correct", conf_min=0.3)
    assert downloads["sample_images.csv"] == table_to_csv_bytes(expected)
    header = downloads["sample_images.csv"].split(b"\n", 1)[0].decode().split(",")
    assert all(c.replace("wnid", "name") in header for c in header if "wnid" in c)


def test_compare_counts_are_the_library_counts(app, library, monkeypatch):
    from explain.browse import GROUPS, compare_models
    from explain.export import table_to_csv_bytes

    downloads = capture_downloads(monkeypatch)
    at = open_page(app)
    models = list(dict.fromkeys(library["model"]))
    for a, b in ((models[0], models[1]), (models[-1], models[0])):
        _widget(at, "selectbox", "cmp_a").set_value(a).run()
        _widget(at, "selectbox", "cmp_b").set_value(b).run()
        assert not at.exception, [e.value for e in at.exception]
        expected = compare_models(library, a, b)
        shown = {m.label: int(m.value.replace(",", "")) for m in at.metric}
        assert shown == {"Both wrong": expected.counts["both_wrong"], "Only A wrong": expected.counts["only_a_wrong"],
                         "Only B wrong": expected.counts["only_b_wrong"], "Both right": expected.counts["both_right"]}
        assert sum(shown.values()) == 30  # both predicted every sample image
        name = f"sample_compare_{a}_vs_{b}.csv"
        assert downloads[name] == table_to_csv_bytes(expected.images)
    group = next(g for g in GROUPS if expected.counts[g])
    _widget(at, "radio", "cmp_group").set_value(group).run()
    assert at.dataframe[-1].value["image"].tolist() == expected.group(group)["image"].tolist()


def test_a_run_without_image_files_shows_its_tables(app, app_home, library, tmp_path, monkeypatch):
    """Uploaded predictions have no images (explain.export.import_predictions_as_run); a hostile
    model id in them reaches the page's Markdown escaped."""
    from core.runstore import RunStore
    from explain.browse import run_image_table
    from explain.export import import_predictions_as_run, table_to_csv_bytes

    preds = RunStore(app_home).open_run("sample").read_predictions()
    preds = preds.assign(image=preds["image"].str.replace("/", "_"))  # another tool's image ids
    preds.loc[preds["model"] == preds["model"].iloc[0], "model"] = EVIL_MODEL
    file = tmp_path / "theirs.csv"
    preds.drop(columns=["status", "reason"]).to_csv(file, index=False)
    run, _ = import_predictions_as_run(file, RunStore(app_home), title="theirs")
    downloads = capture_downloads(monkeypatch)
    app.session_state["_next_run_id"] = run.run_id
    at = open_page(app)
    assert at.session_state["run_id"] == run.run_id
    assert not at.error, [e.value for e in at.error]
    assert not at.get("image")
    assert any("no image files" in i.value for i in at.info), [i.value for i in at.info]
    assert len(at.dataframe[0].value) == len(preds)
    assert downloads[f"{run.run_id}_images.csv"] == table_to_csv_bytes(run_image_table(run))
    assert [m.label for m in at.metric] == ["Both wrong", "Only A wrong", "Only B wrong", "Both right"]
    _widget(at, "selectbox", "cmp_a").set_value(EVIL_MODEL).run()
    assert not at.exception, [e.value for e in at.exception]
    texts = [e.value for kind in ("markdown", "caption", "warning", "info", "error") for e in getattr(at, kind)]
    assert any("m\\_\\_bold" in t for t in texts), "the model id is shown, escaped"
    assert not [t for t in texts if re.search(r"(?<!\\)__bold", t)]


def _card_lines(at) -> list[list[str]]:
    """Each card's prediction lines (the caption under its true class), in the grid's order."""
    marks = ("✓ ", "✗ ", "_✓ ", "_✗ ")
    return [c.value.split("  \n") for c in at.caption if c.value.startswith(marks)]


def test_cards_lead_with_what_the_filters_matched_and_mark_the_rest(app, library):
    """Issue 22 item 16: filtered to Mistakes + distant, a card showed every chosen model's top-1 in
    model order, the other models' right and related answers unmarked. Now the matched rows (the
    library's selection, explain.browse.filter_images) come first and the rest are greyed, marked."""
    from explain.browse import filter_images
    from explain.browse import UNMATCHED
    from pages.text import escape_markdown

    matched = filter_images(library, outcome="mistake", relations=["distant"])
    if matched.empty:
        pytest.skip("no distant mistake on the sample")
    at = open_page(app, run="sample", outcome="mistake", relation="distant")
    images = matched.drop_duplicates("image").sort_values(["true_wnid", "image"])["image"].tolist()
    from pages.text import plural

    assert any(c.value.startswith(f"{plural(len(matched), 'prediction')} of {plural(len(images), 'image')} match")
               for c in at.caption)
    cards = _card_lines(at)[:len(images)]  # the Images grid's; the comparison's grid follows
    models = list(dict.fromkeys(library["model"]))
    for lines, image in zip(cards, images):
        hits = matched[matched["image"] == image]["model"].tolist()
        rest = [m for m in models if m not in hits and ((library["image"] == image) & (library["model"] == m)).any()]
        assert len(lines) == len(hits) + len(rest), lines
        for line, model in zip(lines, hits + rest):
            assert f"{escape_markdown(model)}:" in line, (line, model)
        assert not [line for line in lines[:len(hits)] if UNMATCHED in line or line.startswith("_")]
        assert all(line.startswith("_") and line.endswith(f"· {UNMATCHED}_") for line in lines[len(hits):]), lines
        assert rest and any(line.startswith("_✓") for line in lines[len(hits):]), "another model's right answer, marked"
    # Without filters every prediction is matched: nothing is greyed.
    _widget(at, "radio", "browse_outcome").set_value("all").run()
    _widget(at, "multiselect", "browse_relations").set_value([]).run()
    assert not [line for lines in _card_lines(at) for line in lines if UNMATCHED in line]


def test_the_two_model_comparison_lives_in_the_url(app, library):
    """Issue 22 item 21: the two models compared (and the group shown) were not in the URL, so a
    reload or a shared link showed the first two models. Now they are cmp_a, cmp_b, cmp_group."""
    from explain.browse import GROUPS, compare_models

    models = list(dict.fromkeys(library["model"]))
    a, b = models[-1], models[0]
    expected = compare_models(library, a, b)
    group = next(g for g in GROUPS[1:] if expected.counts[g])
    at = open_page(app, run="sample", cmp_a=a, cmp_b=b, cmp_group=group)
    assert (_widget(at, "selectbox", "cmp_a").value, _widget(at, "selectbox", "cmp_b").value) == (a, b)
    assert _widget(at, "radio", "cmp_group").value == group
    assert at.dataframe[-1].value["image"].tolist() == expected.group(group)["image"].tolist()
    assert not at.warning, [w.value for w in at.warning]
    # A change goes back to the URL; a new tab with that URL shows the same comparison.
    _widget(at, "selectbox", "cmp_b").set_value(models[1]).run()
    _widget(at, "radio", "cmp_group").set_value("both_wrong").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["cmp_a"] == a and at.query_params["cmp_b"] == models[1]
    assert "cmp_group" not in at.query_params  # the default is left out
    params = {k: at.query_params[k] for k in at.query_params}
    tab = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    tab = open_page(tab, **params)
    assert (_widget(tab, "selectbox", "cmp_a").value, _widget(tab, "selectbox", "cmp_b").value) == (a, models[1])
    assert _widget(tab, "radio", "cmp_group").value == "both_wrong"


def test_a_comparison_link_with_what_the_run_lacks_says_so(app, library):
    models = list(dict.fromkeys(library["model"]))
    at = open_page(app, run="sample", cmp_a="nobody", cmp_b=models[0], cmp_group="neither", page="x")
    warning = " ".join(w.value for w in at.warning)
    assert "model nobody" in warning and "cmp\\_group\\=neither" in warning and "page\\=x" in warning, warning
    assert _widget(at, "selectbox", "cmp_a").value == models[0]  # the default, then B the first other
    assert _widget(at, "selectbox", "cmp_b").value == models[1]
    assert _widget(at, "radio", "cmp_group").value == "both_wrong"
    at = open_page(app, run="sample", cmp_a=models[1], cmp_b=models[1])
    assert any("a model other than cmp\\_a" in w.value for w in at.warning), [w.value for w in at.warning]
    assert _widget(at, "selectbox", "cmp_b").value == models[0]


def test_the_grid_page_lives_in_the_url(app, monkeypatch):
    at = open_page(app, run="sample", page="2")
    assert _widget(at, "number_input", "browse_page_no").value == 2
    assert any(c.value == "Images 25–30 of 30." for c in at.caption), [c.value for c in at.caption]
    _widget(at, "number_input", "browse_page_no").set_value(1).run()
    assert "page" not in at.query_params
    _widget(at, "number_input", "browse_page_no").set_value(2).run()
    assert at.query_params["page"] == "2"
    # A filter changed on the page puts the grid on its first page, in one URL for the browser: one press of
    # Back (a hostile check: the page went to the URL apart, a second step).
    sent = url_messages(monkeypatch)
    models = _widget(at, "multiselect", "browse_models").value
    _widget(at, "multiselect", "browse_models").set_value(models[:2]).run()  # still 30 images: two pages
    assert _widget(at, "number_input", "browse_page_no").value == 1 and "page" not in at.query_params
    assert len(sent) == 1 and "page=" not in sent[0] and sent[0].count("model=") == 2, sent
    _widget(at, "number_input", "browse_page_no").set_value(2).run()
    _widget(at, "radio", "browse_outcome").set_value("mistake").run()
    assert at.query_params["outcome"] == "mistake" and "page" not in at.query_params
    assert len(sent) == 3 and "outcome=mistake" in sent[2] and "page=" not in sent[2], sent
    _widget(at, "radio", "browse_outcome").set_value("mistake").run()  # nothing changed: nothing sent
    assert len(sent) == 3, sent


def test_a_top5_tells_the_two_cranes_apart(app, app_home):
    """Issue 22 item 21: a top-5 holding ImageNet-1k's two 'crane's read 'crane' twice. Names come
    from core.names.class_name, which gives an ambiguous name its sense."""
    import shutil

    from core.runstore import RunStore
    from pages.text import escape_markdown

    run = RunStore(app_home).open_run("sample")
    row = run.read_predictions().iloc[[0]].assign(model="crane_check", pred_wnid_2="n02012849",
                                                  pred_wnid_3="n03126707")
    run.append_predictions(row)
    try:
        at = open_page(app, run="sample", model="crane_check")
        texts = " ".join(c.value for c in at.caption)
        assert escape_markdown("2. crane (wading bird)") in texts, texts
        assert escape_markdown("3. crane (lifting device)") in texts, texts
    finally:
        shutil.rmtree(run.prediction_parts.model_dir("crane_check"))


@pytest.mark.parametrize("filters", [
    {},
    {"outcome": "mistake", "sort": "margin"},
    {"outcome": "correct", "conf_min": 0.5, "sort": "confident"},
    {"relations": ("sibling", "cousin"), "sort": "unsure"},
    {"models": (), "outcome": "mistake"},
    {"error_types": ("fine-grained",), "margin_max": 0.4},
])
def test_browse_rows_are_the_library_filters_kept_as_positions(app_home, library, filters):
    """pages.reads.browse_rows (cached per filters, rows as positions into the shared table) gives what
    explain.browse's filters, selection_images and card_rows give on the whole table: the rows, their
    order, the images in the chosen order, a page of cards, and the CSV's rows."""
    import pandas as pd

    from core.runstore import RunStore
    from explain.browse import card_rows, filter_annotated, filter_images, selection_images
    from pages.reads import browse_rows, image_table_key

    models = list(dict.fromkeys(library["model"]))
    args = {"models": tuple(models), "true": "", "pred": "", "outcome": "all", "relations": (), "conf_min": None,
            "conf_max": None, "error_types": (), "tags": (), "margin_max": None, "sort": "class"} | filters
    got = browse_rows(image_table_key(RunStore(app_home).open_run("sample"), "raw"), **args)
    expected = filter_images(library, models=list(args["models"]), true=None, pred=None, outcome=args["outcome"],
                             relations=list(args["relations"]) or None, conf_min=args["conf_min"],
                             conf_max=args["conf_max"])
    expected = filter_annotated(expected, error_types=list(args["error_types"]) or None, margin_max=args["margin_max"])
    assert len(got) == len(expected) and got.empty == expected.empty
    pd.testing.assert_frame_equal(got.frame(), expected)
    pd.testing.assert_frame_equal(got.head(3), expected.head(3))
    pd.testing.assert_frame_equal(got.images, selection_images(expected, args["sort"]))
    shown = got.images["image"].head(5)
    pd.testing.assert_frame_equal(card_rows(*got.of_images(shown), shown, models),
                                  card_rows(library, expected, shown, models))
    pd.testing.assert_frame_equal(card_rows(got.of_images(shown)[0], None, shown, models[:2]),
                                  card_rows(library, None, shown, models[:2]))


@pytest.mark.parametrize("kind", ["outside", "loop"])
def test_a_part_that_is_a_link_is_one_line_on_browse_and_image(app, app_home, tmp_path, kind):
    """A part replaced by a symbolic link (to a predictions file outside the run, or to itself) is refused
    by every reader (core.parts); Browse and the Image page say so in one line, as Results does, instead
    of an uncaught error from the explanations' size check (hostile-input campaign)."""
    import json
    import shutil

    from core.runstore import RunStore

    sample = RunStore(app_home).open_run("sample")
    copy = sample.path.parent / f"linked-{kind}"
    shutil.copytree(sample.path, copy, symlinks=True)
    info = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps(info | {"run_id": copy.name}))
    folder = next(p for p in (copy / "predictions").iterdir() if p.is_dir())
    link = folder / "part-29991231000000000000-abcdef.parquet"
    if kind == "loop":
        link.symlink_to(link)
    else:
        shutil.copy(next(folder.glob("part-*.parquet")), tmp_path / "outside.parquet")
        link.symlink_to(tmp_path / "outside.parquet")
    app.session_state["_next_run_id"] = copy.name
    for page in (PAGE, "pages/image_page.py", "pages/results_page.py"):
        at = app.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert any("symbolic link" in e.value for e in at.error), (page, [e.value for e in at.error])
    assert link.is_symlink() and (kind == "loop" or (tmp_path / "outside.parquet").is_file())
    shutil.rmtree(copy)


def test_a_card_shows_each_models_error_type_where_they_differ(app, library):
    """A card showed its first model's error type under every model's mistake (a fresh look at the
    sample, 2026-12-06: lite1's 'comic book' was 'model-failure', the card said 'related'). Each card's
    error-type caption is now built from all its matched mistakes, as the library typed them."""
    from pages.text import escape_markdown

    mistakes = library[~library["correct"].astype(bool) & library["error_type"].notna()]
    differ = mistakes.groupby("image")["error_type"].nunique()
    if not (differ > 1).any():
        pytest.skip("no image whose models' mistakes differ in type on the sample")
    at = open_page(app, run="sample", outcome="mistake")
    captions = [c.value for c in at.caption]
    images = (mistakes.drop_duplicates("image").sort_values(["true_wnid", "image"])["image"].tolist())
    lines = [i for i, text in enumerate(captions) if text.startswith(("✓ ", "✗ ", "_✓ ", "_✗ "))]
    checked = 0
    for image, at_line in zip(images, lines):  # each card: its prediction lines, then its error-type caption
        rows = mistakes[mistakes["image"] == image]
        following = captions[at_line + 1] if at_line + 1 < len(captions) else ""
        if rows["error_type"].nunique() > 1:
            assert following.startswith(escape_markdown("error types: ")), (image, following)
            for model, kind in zip(rows["model"], rows["error_type"]):
                assert escape_markdown(f"{model}: {kind}") in following, (image, model, kind, following)
            checked += 1
        else:
            assert following.startswith(escape_markdown(f"error type: {rows['error_type'].iloc[0]}")), (image, following)
    assert checked >= 1


def test_the_error_type_line_names_one_type_or_each_models():
    from pages.text import error_type_line

    row = {"matched": True, "model": "a", "error_type": "related", "error_reason": "why a"}
    assert error_type_line([row]) == ("error type: related", "why a")
    same = [row, {**row, "model": "b", "error_reason": "why b"}]
    assert error_type_line(same) == ("error type: related (2 models)", "a: why a  \nb: why b")
    differ = [row, {**row, "model": "b", "error_type": "model-failure", "error_reason": ""}]
    assert error_type_line(differ) == ("error types: a: related · b: model-failure", "a: why a")
    assert error_type_line([{**row, "matched": False}, {**row, "error_type": None}]) == ("", "")


def test_the_filters_come_back_with_the_browsers_back_after_another_page(app):
    """pages.run_state.url_from_outside, the rule Confusions, Results and Query share: on a new visit the URL
    the page last wrote sets the widgets again (Streamlit dropped their state while another page was shown)."""
    at = open_page(app, run="sample")
    _widget(at, "radio", "browse_outcome").set_value("mistake").run()
    written = {key: at.query_params[key] for key in at.query_params}
    assert written.get("outcome") == "mistake"
    away_and_back(at, "pages/results_page.py", written)
    at = open_page(at)
    assert _widget(at, "radio", "browse_outcome").value == "mistake"


def test_a_new_server_reads_the_stored_table_and_builds_it_only_when_missing(app, app_home, library, monkeypatch):
    """Issue 26 item 2: the table stored after inference (explain.browse_store, written by
    refresh_metrics) is what a first load reads; without it the page builds the table, the same, and
    stores it for the next server."""
    import explain.browse
    from core.runstore import RunStore

    run = RunStore(app_home).open_run("sample")
    stored = run.metrics_dir / "browse.arrow"
    assert stored.is_file(), "refresh_metrics stored the table after the sample's inference"
    real = explain.browse.image_table
    builds = []

    def counting(*args, **kwargs):
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(explain.browse, "image_table", counting)
    at = open_page(app)
    assert builds == [] and len(at.dataframe[0].value) == len(library)
    (run.metrics_dir / "browse.json").unlink()
    import streamlit as st

    from explain.browse_store import read_browse_table, wait_for_writes
    from pages import reads

    st.cache_resource.clear()
    at = open_page(AppTest.from_file(APP, default_timeout=TIMEOUT).run())
    assert builds == [1] and len(at.dataframe[0].value) == len(library)
    wait_for_writes(60)  # stored after the page was drawn
    stored = read_browse_table(run, "raw", run.info.label_space or "imagenet-1k")
    assert stored is not None, "stored again for the next server"
    # the page's build from its cached rows is the library's table, the one refresh_metrics stores
    import pandas as pd

    pd.testing.assert_frame_equal(stored, library)
    pd.testing.assert_frame_equal(reads._image_table(*reads.image_table_key(run, "raw")), library)


def test_one_image_is_this_image_not_these_1(app, library):
    """A UI review: "Page through these 1 image one by one", "Curate these 1 image at once"."""
    mistakes = library[~library["correct"].astype(bool)]
    counts = mistakes.groupby(["model", "true_wnid", "pred_wnid_1"]).size()
    single = counts[counts == 1]
    if single.empty:
        pytest.skip("no pair of the sample has exactly one image")
    model, true, pred = single.index[0]
    at = open_page(app, run="sample", model=model, true=true, pred=pred, outcome="mistake")
    links = [link.proto.label for link in at.get("page_link")]
    assert "Open this image" in links and not [label for label in links if "these 1 " in label], links
    assert "Curate this image" in [e.label for e in at.expander]


@pytest.mark.parametrize("grid", ["browse", "compare"])
def test_back_to_the_grid_opens_the_grid_page_that_holds_the_image(app, monkeypatch, grid):
    """A leftover of a UI review: the Image page's "Back to the grid" named Browse's filters but not its grid page,
    so an image opened from (or paged to) the second page came back to the first. The way back now opens the grid
    page holding the image shown: the Image page pages through the grid's images in the grid's order. The
    comparison's grid (its groups hold under 24 of the sample's 30 images) is paged 8 at a time here."""
    import urllib.parse

    import pages.run_state

    param, where = ("page", {}) if grid == "browse" else ("cmp_page", {"cmp_group": "both_right"})
    if grid == "compare":
        monkeypatch.setattr(pages.run_state, "BROWSE_PER_PAGE", 8)  # both pages read it at each run
    at = open_page(app, run="sample", **where, **{param: "2"})
    opens = [dict(urllib.parse.parse_qsl(link.proto.query_string)) for link in at.get("page_link")
             if link.proto.page == "image" and link.proto.label == "Open"]
    opens = [query for query in opens if query.get("src") == grid]
    assert opens, "Open links on the grid's second page"
    query = opens[-1]
    shown = query["open"]

    def back_link(params: dict) -> dict:
        away_and_back(at, PAGE, params)
        at.switch_page("pages/image_page.py").run()
        assert not at.exception, [e.value for e in at.exception]
        (back,) = [link.proto for link in at.get("page_link") if link.proto.label == "Back to the grid"]
        assert "browse" in back.page
        return dict(urllib.parse.parse_qsl(back.query_string))

    back = back_link(query)
    assert back[param] == "2", back
    # Browse from that link: the second page, and the image among its cards.
    away_and_back(at, "pages/image_page.py", back)
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert _widget(at, "number_input", "browse_page_no" if grid == "browse" else "cmp_page_no").value == 2
    on_grid = {q.get("open") for q in (dict(urllib.parse.parse_qsl(link.proto.query_string))
                                       for link in at.get("page_link") if link.proto.page == "image") if q.get("src") == grid}
    assert shown in on_grid, (shown, on_grid)
    # The page's boundaries (a review: rounding up, or counting from 1, passed the last image alone): the second
    # page's first image goes back to it; the first page's last image and the selection's first, to page 1.
    assert back_link(opens[0])[param] == "2"
    away_and_back(at, "pages/image_page.py", {**{k: v for k, v in query.items() if k != "open"}, param: "1"})
    at.switch_page(PAGE).run()
    page_one = [q for q in (dict(urllib.parse.parse_qsl(link.proto.query_string)) for link in at.get("page_link")
                            if link.proto.page == "image" and link.proto.label == "Open") if q.get("src") == grid]
    assert page_one and page_one[-1]["open"] not in {q["open"] for q in opens}
    assert param not in back_link(page_one[-1])
    first = back_link({k: v for k, v in query.items() if k != "open"})
    assert param not in first, first


def test_the_comparison_defaults_to_the_models_the_filter_names(app, library, monkeypatch):
    """A UI review (2026-12-08): with lite0 and lite2 chosen in the Models filter, the comparison showed lite0 against
    lite1, a model filtered out. Its defaults now follow the filter when it names two or more, on a link and on the
    page; a model picked in its box stays; a default is left out of the URL, and a filter change is one URL write
    (a code review: the first version wrote cmp_b in a second step, and followed the filter on a link only)."""
    from streamlit.runtime.state.query_params_proxy import QueryParamsProxy

    models = list(dict.fromkeys(library["model"]))
    if len(models) < 3:
        pytest.skip("the sample has fewer than three models")

    def pair(at):
        return _widget(at, "selectbox", "cmp_a").value, _widget(at, "selectbox", "cmp_b").value

    def fresh(**params):  # a link: only these parameters in the URL
        for key in list(app.query_params):
            del app.query_params[key]
        return open_page(app, **params)

    at = fresh(run="sample", model=[models[0], models[2]])
    assert pair(at) == (models[0], models[2])
    assert "cmp_a" not in at.query_params and "cmp_b" not in at.query_params
    at = fresh(run="sample", model=[models[2], models[1]])
    assert pair(at) == (models[2], models[1])  # the filter's order
    # On the page: no filter, then two models chosen in the filter: A and B follow, in one URL write.
    at = fresh(run="sample")
    assert pair(at) == (models[0], models[1])
    writes = []
    real = QueryParamsProxy.from_dict
    monkeypatch.setattr(QueryParamsProxy, "from_dict", lambda self, params: (writes.append(dict(params)),
                                                                            real(self, params))[1])
    _widget(at, "multiselect", "browse_models").set_value([models[0], models[2]]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert pair(at) == (models[0], models[2]) and len(writes) == 1, writes
    assert "cmp_a" not in at.query_params and "cmp_b" not in at.query_params
    # A model picked in its box stays when the filter changes again; a link naming A and B keeps them.
    _widget(at, "selectbox", "cmp_b").set_value(models[1]).run()
    _widget(at, "multiselect", "browse_models").set_value([models[2], models[0]]).run()
    assert pair(at) == (models[2], models[1]) and at.query_params["cmp_b"] == models[1]
    at = fresh(run="sample", model=[models[0], models[2]], cmp_a=models[1], cmp_b=models[0])
    assert pair(at) == (models[1], models[0])


def test_a_links_page_past_the_last_is_said(app):
    """A UI review: page=99 showed page 1 without a word (a page that is no number was already said)."""
    at = open_page(app, run="sample", page="99")
    said = [c.value for c in at.caption if "past the last page" in c.value]
    assert len(said) == 1 and "page\\=99 is past the last page \\(2\\)" in said[0], said
    assert "page" not in at.query_params
    at.run()  # the page's own rerun: said once
    assert not [c.value for c in at.caption if "past the last page" in c.value]
