"""The Confusions page's confusion matrix (issue 12 item 4a) and names beside wnids (item 5), through
streamlit.testing.v1.AppTest on the sample run (real predictions). A click on the chart is the
selection state the browser sends (Plotly points with ``customdata = [row, column]``), injected
as the chart's widget state, since AppTest cannot click."""
import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.pages.conftest import away_and_back, send_chart_selection

APP = str(ROOT / "app.py")
TIMEOUT = 600  # the first run loads WordNet and classifies the sample on a shared 2-core machine
PAGE = "pages/confusions_page.py"
CELL_BOX = "Images of the cell"


def open_page(at: AppTest) -> AppTest:
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def sample(app_home):
    from core.runstore import RunStore

    run = RunStore(app_home).open_run("sample")
    return run, run.read_predictions(), set(run.usable_images()["file"].dropna())


def library_matrix(sample, model: str, **kwargs):
    from explain.matrix import confusion_matrix

    run, preds, usable = sample
    return confusion_matrix(preds, model, run.info.wnids, usable=usable, **kwargs)


def matrix_chart(at: AppTest):
    charts = [c for c in at.get("plotly_chart") if "matrix-chart-" in c.proto.id]
    assert len(charts) == 1
    return charts[0], json.loads(charts[0].proto.spec)


def cell_box(at: AppTest):
    return [s for s in at.selectbox if s.label == CELL_BOX][0]


def click(at: AppTest, chart, spec, k: int) -> AppTest:
    """Rerun as the browser does after a click on the k-th cell point of the matrix chart."""
    points = spec["data"][1]
    return send_chart_selection(at, chart, {
        "points": [{"curve_number": 1, "point_number": k, "point_index": k, "x": points["x"][k], "y": points["y"][k],
                    "customdata": points["customdata"][k]}], "point_indices": [k], "box": [], "lasso": []})


def test_the_matrix_renders_in_tree_order_with_names(app, sample):
    from explain.matrix import tree_order
    from pages.reads import class_name

    at = open_page(app)
    assert "Confusion matrix" in [s.value for s in at.subheader]
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    expected = library_matrix(sample, model)
    assert list(expected.index) == tree_order(sample[0].info.wnids)
    chart, spec = matrix_chart(at)
    heat, cells = spec["data"]
    assert heat["type"] == "heatmap" and cells["type"] == "scatter"
    counts = [[0 if v is None else int(v) for v in row] for row in heat["z"]]
    assert counts == expected.to_numpy().tolist()
    ticks = spec["layout"]["yaxis"]["ticktext"]
    assert ticks == [class_name(w) for w in expected.index], "rows are named, in tree order"
    step = heat["colorbar"]["dtick"]  # whole counts on the colour bar (a UI review: "2, 1, 1" on an all-ones matrix)
    assert step == max(1, -(-int(expected.to_numpy().max()) // 5)) and float(step).is_integer()
    # one clickable point per non-empty cell, its customdata the cell's position
    assert sorted(map(tuple, cells["customdata"])) == sorted(
        (i, j) for i in range(expected.shape[0]) for j in range(expected.shape[1]) if expected.iat[i, j] > 0)
    assert chart.proto.selection_mode == [0]  # points
    assert "<a" not in json.dumps(spec)


def test_row_normalised_toggle(app, sample):
    at = open_page(app)
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    [t for t in at.toggle if t.key == "matrix-normalise"][0].set_value(True).run()
    assert not at.exception
    _, spec = matrix_chart(at)
    shares = library_matrix(sample, model, normalise=True)
    counts = library_matrix(sample, model)
    z = spec["data"][0]["z"]
    for i in range(shares.shape[0]):
        for j in range(shares.shape[1]):
            if counts.iat[i, j] > 0:
                assert z[i][j] == pytest.approx(shares.iat[i, j])
            else:
                assert z[i][j] is None  # an empty cell stays blank
    rows = [sum(v for v in row if v is not None) for row in z]
    assert all(r == pytest.approx(1.0) for r in rows if r)
    assert "row-normalised" in spec["layout"]["title"]["text"]


def test_the_outside_grouping_toggle(app, sample):
    from explain.matrix import OTHER

    at = open_page(app)
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    [t for t in at.toggle if t.key == "matrix-grouped"][0].set_value(False).run()
    _, spec = matrix_chart(at)
    expected = library_matrix(sample, model, outside="other")
    assert spec["data"][0]["z"] and len(spec["data"][0]["z"][0]) == expected.shape[1]
    if expected.shape[1] > expected.shape[0]:
        assert spec["layout"]["xaxis"]["ticktext"][-1] == OTHER


def test_a_click_shows_the_images_of_the_cell_and_links_to_browse(app, sample):
    from explain.matrix import cell_images
    from pages.reads import class_name
    from pages.text import escape_markdown

    at = open_page(app)
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    expected = library_matrix(sample, model)
    chart, spec = matrix_chart(at)
    off_diagonal = [k for k, (i, j) in enumerate(spec["data"][1]["customdata"]) if i != j]
    if not off_diagonal:
        pytest.skip("the model made no mistake on the sample")
    run, preds, usable = sample

    def images_of(k):
        i, j = spec["data"][1]["customdata"][k]
        return cell_images(preds, model, expected.index[i], expected.columns[j], run.info.wnids, usable=usable)

    # A cell whose most confident image is not its first file, where the sample has one: the order is then tested
    k = next((k for k in off_diagonal if images_of(k)["image"].iloc[0] != images_of(k)["image"].min()), off_diagonal[0])
    i, j = spec["data"][1]["customdata"][k]
    true, column = expected.index[i], expected.columns[j]
    click(at, chart, spec, k)
    assert cell_box(at).value == (true, column), "the click chose the cell"
    images = images_of(k)
    assert len(images) == expected.iat[i, j]
    from pages.text import plural

    assert any(f"· {plural(len(images), 'image')}" in m.value for m in at.markdown)
    shown = [c for img in at.get("image") for c in img.captions]
    first = images.sort_values("image").iloc[0]
    assert f"→ {escape_markdown(class_name(first['pred_wnid']))} ({float(first['prob_1']):.1%})" == shown[0], \
        "by file, the Image page's order after an Open (a UI review: most confident first)"
    import urllib.parse

    opened = [link.proto for link in at.get("page_link") if link.proto.label == "Open"]
    assert opened and first["image"] in urllib.parse.unquote(opened[0].query_string), [o.query_string for o in opened][:2]
    links = [link.proto for link in at.get("page_link") if "browse" in link.proto.page]
    wanted = {f"run=sample&model={model}&true={true}&pred={pred}&outcome=mistake" for pred in images["pred_wnid"]}
    assert wanted <= {link.query_string for link in links}
    # a rerun without a new click keeps the cell (the browser resends the same selection; AppTest sends none)
    at.run()
    assert cell_box(at).value == (true, column)


def test_picking_a_cell_in_the_list(app, sample):
    at = open_page(app)
    box = cell_box(at)
    assert box.value is None
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    expected = library_matrix(sample, model)
    diagonal = [(w, w) for w in expected.index if expected.loc[w, w] > 0][0]
    box.set_value(diagonal).run()
    assert not at.exception
    from pages.text import plural

    assert any(f"· {plural(int(expected.loc[diagonal]), 'image')}" in m.value for m in at.markdown)
    assert (at.query_params["cell_true"], at.query_params["cell_pred"]) == diagonal
    for key in ("cell_true", "cell_pred"):  # the browser's Back to the step before: no cell (a UI review: kept)
        del at.query_params[key]
    at.run()
    assert cell_box(at).value is None and "cell_true" not in at.query_params


def test_selected_cell_maps_points_to_cells():
    from explain.matrix import selected_cell

    index, columns = ["a", "b"], ["a", "b", "other"]
    assert selected_cell([{"customdata": [1, 2], "x": 2, "y": 1}], index, columns) == ("b", "other")
    assert selected_cell([{"x": 0, "y": 1}], index, columns) == ("b", "a")  # positions from the axes
    assert selected_cell([{"customdata": [5, 0]}], index, columns) is None  # an older, larger chart's point
    assert selected_cell([], index, columns) is None and selected_cell(None, index, columns) is None
    assert selected_cell([{"customdata": ["x", 0]}, {"customdata": [0, 1]}], index, columns) == ("a", "b")


def test_all_confusions_table_names_every_wnid(app):
    from pages.reads import class_name

    at = open_page(app)
    table = at.dataframe[-1].value
    for wnid, name in (("true_wnid", "true_name"), ("pred_wnid", "pred_name"), ("lcs_wnid", "lcs_name")):
        assert list(table.columns).index(name) == list(table.columns).index(wnid) + 1
        assert table[name].tolist() == [class_name(w) for w in table[wnid]]


def test_misclassified_thumbnails_name_the_prediction_and_link_to_browse(app, sample):
    from pages.text import escape_markdown
    from pages.reads import class_name

    at = open_page(app)
    run, preds, usable = sample
    model = [s for s in at.selectbox if s.key == "images-model"][0].value
    true = [s for s in at.selectbox if s.label == "True class"][0].value
    wrong = preds[(preds["model"] == model) & (preds["true_wnid"] == true) & (preds["status"] == "ok")
                  & (preds["pred_wnid"] != true) & preds["image"].isin(usable)]
    if wrong.empty:
        pytest.skip("no mistake on the first class")
    captions = [c for img in at.get("image") for c in img.captions]
    first = wrong.iloc[0]
    assert f"→ {escape_markdown(class_name(first['pred_wnid']))} ({float(first['prob_1']):.1%})" in captions
    links = {link.proto.query_string for link in at.get("page_link") if "browse" in link.proto.page}
    assert f"run=sample&model={model}&true={true}&pred={first['pred_wnid']}&outcome=mistake" in links
    # By image, as the Image page pages through them after an "Open" (a UI review: three orders on one page)
    from urllib.parse import parse_qs

    shown = [parse_qs(link.proto.query_string)["open"][0] for link in at.main.get("page_link")
             if link.proto.label == "Open" and "src=pair" in link.proto.query_string]
    assert shown == sorted(wrong["image"])[:60] and shown != wrong["image"].tolist()[:60], \
        "tested where the stored order is another"


def test_one_models_view_rows_are_that_models_rows_of_the_whole_view(app_home, tmp_path):
    """pages.reads._model_view_rows (Confusions reads one model's folder, not all predictions) equals the
    whole view's rows of that model, in order, raw and curated (an exclusion and a relabel applied), and
    for a model id that names no folder."""
    import shutil

    import pandas as pd

    from core.curation import record
    from core.runstore import RunStore, manifest_fingerprint, predictions_fingerprint
    from pages.reads import _curation_fp, _model_view_rows, _view_rows

    home = tmp_path / "home"
    shutil.copytree(app_home, home, symlinks=True)
    run = RunStore(home).open_run("sample")
    images = sorted(set(run.usable_images()["file"].dropna()))
    record(run, "exclude", images[0], known_images=set(images))
    record(run, "relabel", images[1], "n02124075", known_images=set(images))  # Egyptian cat
    models = sorted(set(run.read_predictions()["model"]))
    # A hand-made misfiling: a newer part in folder 'z' holding another prediction of the first model's first
    # image and rows of a model 'c' without a folder of its own. Only the whole view knows their latest rows.
    from core.runstore import PREDICTION_SCHEMA
    from core.tables import write_table

    preds = run.read_predictions()
    stray = preds[preds["model"] == models[0]].head(2).assign(pred_wnid="n02124075")
    stray = pd.concat([stray, stray.assign(model="c")], ignore_index=True)
    write_table(stray, run.predictions_dir / "z" / "part-29991231000000000000-abcdef.parquet", PREDICTION_SCHEMA,
                table="predictions")
    assert run.prediction_parts.folders_of_models()[models[0]] == {models[0].replace("/", "_"), "z"}
    models += ["c"]
    for view in ("raw", "curated"):
        key = (str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view, _curation_fp(run, view))
        whole = _view_rows(*key)
        for model in models + ["no such/model:x"]:
            expected = whole[whole["model"] == model].reset_index(drop=True)
            pd.testing.assert_frame_equal(_model_view_rows(*key, model).reset_index(drop=True), expected)
        assert (view == "raw") == (images[0] in set(whole["image"]))


def test_the_class_the_model_and_the_cell_live_in_the_url(app, sample):
    """A fresh look at the sample (2026-12-06): the page kept nothing in its URL and read none of it, so a
    reload, a bookmark or the Image page's "Back to the grid" (model, true, pred of a pair) landed on the
    first class. Now the true class, the model and the picked cell go to the URL and come back from it."""
    run, preds, usable = sample
    models = list(dict.fromkeys(preds["model"]))
    ok = preds[(preds["status"] == "ok") & preds["image"].isin(usable)]
    first = sorted(ok["true_wnid"].unique())[0]
    matrix = library_matrix(sample, models[-1])
    # A pair that is a cell of the matrix (a prediction outside the run's classes sits in its ancestor's column).
    pairs = ok[(ok["model"] == models[-1]) & (ok["true_wnid"] != first)][["true_wnid", "pred_wnid"]]
    pairs = pairs[pairs["pred_wnid"].isin(matrix.columns)]
    true, pred = pairs.iloc[-1]
    # The Image page's way back: the pair's parameters.
    for key, value in {"run": "sample", "model": models[-1], "true": true, "pred": pred}.items():
        app.query_params[key] = value
    at = open_page(app)
    assert [s for s in at.selectbox if s.label == "True class"][0].value == true
    assert [s for s in at.selectbox if s.key == "matrix-model"][0].value == models[-1]
    assert [s for s in at.selectbox if s.key == "images-model"][0].value == models[-1]
    assert cell_box(at).value == (true, pred)
    assert at.query_params["cell_true"] == true and at.query_params["cell_pred"] == pred
    assert at.query_params["true"] == true and at.query_params["model"] == models[-1]
    assert "pred" not in at.query_params, "the pair's own parameter gives way to the page's"
    # Another page, then the browser's Back to the URL this page wrote (a review, 2026-12-06: Streamlit had
    # dropped the widgets' state, so the first class came back and the URL was overwritten).
    written = {key: at.query_params[key] for key in ("run", "true", "model", "cell_true", "cell_pred")}
    away_and_back(at, "pages/browse_page.py", written)
    at = open_page(at)
    assert [s for s in at.selectbox if s.label == "True class"][0].value == true
    assert cell_box(at).value == (true, pred)
    # The page's own changes go to the URL: another class, another model.
    other = first
    [s for s in at.selectbox if s.label == "True class"][0].set_value(other).run()
    [s for s in at.selectbox if s.key == "matrix-model"][0].set_value(models[0]).run()
    assert not at.exception
    assert at.query_params["true"] == other and at.query_params["model"] == models[0]
    # A link naming what the run lacks says so and shows the rest.
    at.query_params["true"] = "n00000000"
    at.run()
    assert any("true class n00000000" in w.value and "Showing the run's first instead" in w.value for w in at.warning)


def test_the_images_own_model_and_the_settings_live_in_the_url(app, sample):
    """A UI review (2026-12-07): the misclassified images' model, the bars' measure and the matrix's two toggles
    were lost on a reload or the browser's Back (one `model` for the matrix and the images). Now each goes to the
    URL where it differs from its default and comes back from it; a value the page does not take is said."""
    from pages.text import escape_markdown

    run, preds, usable = sample
    models = list(dict.fromkeys(preds["model"]))
    at = open_page(app)
    [s for s in at.selectbox if s.key == "images-model"][0].set_value(models[-1]).run()
    at.radio(key="top3-bars").set_value("share_of_samples").run()
    at.toggle(key="matrix-normalise").set_value(True).run()
    at.toggle(key="matrix-grouped").set_value(False).run()
    assert not at.exception, [e.value for e in at.exception]
    matrix_model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    assert matrix_model != models[-1]
    written = {key: at.query_params[key] for key in at.query_params}
    assert {k: written.get(k) for k in ("model", "images_model", "bars", "normalised", "outside")} == {
        "model": matrix_model, "images_model": models[-1], "bars": "share_of_samples", "normalised": "1",
        "outside": "other"}
    away_and_back(at, "pages/browse_page.py", written)
    at = open_page(at)
    assert [s for s in at.selectbox if s.key == "images-model"][0].value == models[-1]
    assert [s for s in at.selectbox if s.key == "matrix-model"][0].value == matrix_model
    assert at.radio(key="top3-bars").value == "share_of_samples"
    assert at.toggle(key="matrix-normalise").value is True and at.toggle(key="matrix-grouped").value is False
    _, spec = matrix_chart(at)
    assert not any(str(t).startswith("other: under") for t in spec["layout"]["xaxis"]["ticktext"]), "one column"
    # Back to the defaults: their keys leave the URL; the same model for both: one `model`.
    at.toggle(key="matrix-normalise").set_value(False).run()
    at.toggle(key="matrix-grouped").set_value(True).run()
    at.radio(key="top3-bars").set_value("mf").run()
    [s for s in at.selectbox if s.key == "images-model"][0].set_value(matrix_model).run()
    assert not {"images_model", "bars", "normalised", "outside"} & set(at.query_params)
    # A hand-made link with values the page does not take: said (cut short), the defaults shown (the widgets set
    # otherwise before it, so the default is what the link made).
    at.toggle(key="matrix-normalise").set_value(True).run()
    at.radio(key="top3-bars").set_value("share_of_samples").run()
    at.query_params["bars"] = "<b>x</b>" + "y" * 5000
    at.query_params["normalised"] = "yes"
    at.run()
    (said,) = [w.value for w in at.warning if w.value.startswith("Not a value this page takes")]
    assert len(said) < 400 and escape_markdown("bars=<b>x</b>") in said and escape_markdown("normalised=yes (takes 0 or 1)") in said
    assert at.radio(key="top3-bars").value == "mf" and at.toggle(key="matrix-normalise").value is False


def test_back_to_an_address_without_a_setting_shows_its_default(app, sample):
    """A code review: the settings were applied only when present in the URL, so Back to the address before a toggle
    was switched on kept it on and wrote it back over that step; and the bars' measure was forgotten while its
    radio was not drawn (a class without mistakes)."""
    at = open_page(app)
    before = {key: at.query_params[key] for key in at.query_params}
    at.toggle(key="matrix-normalise").set_value(True).run()
    at.toggle(key="matrix-grouped").set_value(False).run()
    at.radio(key="top3-bars").set_value("share_of_samples").run()
    assert {"normalised", "outside", "bars"} <= set(at.query_params)
    for key in list(at.query_params):
        del at.query_params[key]
    at.query_params.update(before)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="matrix-normalise").value is False and at.toggle(key="matrix-grouped").value is True
    assert at.radio(key="top3-bars").value == "mf"
    assert not {"normalised", "outside", "bars"} & set(at.query_params)
    # The bars' measure outlives a run that does not draw its radio (no model chosen: no bars).
    at.radio(key="top3-bars").set_value("share_of_samples").run()
    models = at.multiselect(key="conf_models").value
    at.multiselect(key="conf_models").set_value([]).run()
    assert not [r for r in at.radio if r.key == "top3-bars"]
    at.multiselect(key="conf_models").set_value(models).run()
    assert at.radio(key="top3-bars").value == "share_of_samples" and at.query_params["bars"] == "share_of_samples"


def test_the_way_back_from_a_pair_outside_the_runs_classes_picks_its_grouped_cell(app, sample):
    """The Image page's "Back to the grid" of a pair whose prediction is no class of the run (lite1's
    military uniform -> comic book) names the prediction; the matrix holds it in its ancestor's column
    ('other: under …'): that cell is picked (seen in headless Chromium, 2026-12-06: none was)."""
    from explain.matrix import column_of

    run, preds, usable = sample
    ok = preds[(preds["status"] == "ok") & preds["image"].isin(usable)]
    for model in dict.fromkeys(ok["model"]):
        matrix = library_matrix(sample, model)
        outside = ok[(ok["model"] == model) & ~ok["pred_wnid"].isin(matrix.columns)]
        if len(outside):
            true, pred = outside.iloc[0][["true_wnid", "pred_wnid"]]
            break
    else:
        pytest.skip("no prediction outside the run's classes on the sample")
    for key, value in {"run": "sample", "model": model, "true": true, "pred": pred}.items():
        app.query_params[key] = value
    at = open_page(app)
    column = column_of([(true, pred)], run.info.wnids)[(true, pred)]
    assert column.startswith("other: under ") and cell_box(at).value == (true, column)
    assert at.query_params["cell_pred"] == column
    # Its tick and hover name the node as classes are named (a UI review: 'other: under clothing.n.01').
    from explain.matrix import outside_anchor
    from pages.reads import class_name

    anchor = outside_anchor(column)
    _, spec = matrix_chart(at)
    position = list(library_matrix(sample, model).columns).index(column)
    assert spec["layout"]["xaxis"]["ticktext"][position] == f"other: under {class_name(anchor, 'imagenet-1k')}"
    assert any(f"other: under {class_name(anchor, 'imagenet-1k')} ({anchor}):" in h
               for h in spec["data"][1]["hovertext"])


def test_a_hostile_link_is_text_cut_short_and_changes_nothing_else(app, sample):
    """Outside text from the URL: markup stays text, a huge value is cut, a cell the matrix lacks is not picked."""
    from pages.text import escape_markdown

    evil = "**x**[l](https://evil.invalid)" + "y" * 10_000
    for key, value in {"run": "sample", "true": evil, "model": "<b>m</b>", "cell_true": evil, "cell_pred": evil}.items():
        app.query_params[key] = value
    at = open_page(app)
    (warning,) = [w.value for w in at.warning if "first instead" in w.value]
    assert len(warning) < 600 and escape_markdown("**x**[l](https://evil.invalid)") in warning, warning
    assert cell_box(at).value is None
    assert at.query_params["true"] != evil and "cell_true" not in at.query_params
    (said,) = [w.value for w in at.warning if "no cell picked" in w.value]  # (a hostile campaign: not a word)
    assert len(said) < 400 and escape_markdown("**x**[l](https://evil.invalid)") in said, said


def test_each_top_confusion_links_to_explain_with_the_pair(app):
    """A link, not a button that switched pages: the switch sent a Confusions URL first, a history step the
    reader never saw (a hostile check: Back from Explain landed there)."""
    at = open_page(app)
    links = [link.proto for link in at.main.get("page_link") if "explain" in link.proto.page]
    assert links and all(link.label.startswith("Explain ") for link in links)
    queries = [dict(part.split("=", 1) for part in link.query_string.split("&")) for link in links]
    assert all(q["run"] == "sample" and q["model"] and q["true"] and q["pred"] != q["true"] for q in queries), queries
    assert len({q["true"] for q in queries}) == 1  # the class the page shows, each of its top confusions
    assert not [b for b in at.button if b.key and b.key.startswith("explain-")]
    # each model's accuracy of the class with its interval, as Results' cells write it (it read "accuracy 0.0%")
    import re

    lines = [c.value for c in at.caption if " · accuracy " in c.value]
    assert lines and all(re.search(r"accuracy \d+\.\d% \[\d+\.\d, \d+\.\d\]$", line) for line in lines), lines


def test_back_to_the_grid_from_the_image_page_gives_confusions_all_its_settings_back(app, sample):
    """A UI review: the Image page's "Back to the grid" named the pair only, so Confusions came back with its
    defaults (the bars' measure, the row-normalised matrix, the cell picked). Its "Open" links now carry the
    page's state as back_ parameters, which the Image page's way back gives it whole."""
    import urllib.parse

    at = open_page(app)
    model = [s for s in at.selectbox if s.key == "matrix-model"][0].value
    expected = library_matrix(sample, model)
    diagonal = [(w, w) for w in expected.index if expected.loc[w, w] > 0][0]
    if len(at.multiselect(key="conf_models").options) > 1:  # the models chosen come back too (a hostile check)
        at.multiselect(key="conf_models").set_value([model]).run()
        assert at.query_params["models"] == model
    at.toggle(key="matrix-normalise").set_value(True).run()
    cell_box(at).set_value(diagonal).run()
    state = {key: at.query_params[key] for key in at.query_params}
    assert state["normalised"] == "1" and (state["cell_true"], state["cell_pred"]) == diagonal
    opens = [link.proto for link in at.get("page_link") if link.proto.page == "image"]
    assert opens, "an Open link to the Image page"
    query = dict(urllib.parse.parse_qsl(opens[0].query_string))
    assert {key: query[f"back_{key}"] for key in state if key != "run"} == {k: v for k, v in state.items() if k != "run"}
    # On the Image page, opened by that link: its way back is Confusions' whole state.
    at.switch_page("pages/image_page.py")
    for key in list(at.query_params):
        del at.query_params[key]
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (back,) = [link.proto for link in at.get("page_link") if link.proto.label == "Back to the grid"]
    back_query = dict(urllib.parse.parse_qsl(back.query_string))
    assert "confusions" in back.page and back_query == state, back_query
    # Confusions from that link (a link from outside: it decides): the settings and the cell as they were.
    away_and_back(at, "pages/image_page.py", back_query)
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="matrix-normalise").value is True and cell_box(at).value == diagonal
    assert {key: at.query_params[key] for key in at.query_params} == state
    if "models" in state:
        assert at.multiselect(key="conf_models").value == [model]
    # A hand-made link's back_ parameters without Confusions' class and model (or on another kind of selection)
    # leave the way back to the selection: a lone back_bars landed on the first class (a hostile check).
    pair = {k: v for k, v in query.items() if not k.startswith("back_")}
    for extra in ({"back_bars": "share_of_samples"}, {"back_true": state["true"], "back_model": model, "src": "browse"}):
        away_and_back(at, PAGE, {**pair, **extra})
        at.switch_page("pages/image_page.py").run()
        assert not at.exception, [e.value for e in at.exception]
        (back,) = [link.proto for link in at.get("page_link") if link.proto.label == "Back to the grid"]
        back_query = dict(urllib.parse.parse_qsl(back.query_string))
        assert "bars" not in back_query and "true" in back_query and back_query["model"] == model, back_query
