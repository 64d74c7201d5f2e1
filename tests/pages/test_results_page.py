"""Issue 23 item 5 on the dashboard: every rate and mean with its interval (one format), error bars,
classes too few images to rank, the Claims section, the McNemar result on Browse, and the half-width
that k gives on Query. Through AppTest on the sample run (pages/results_page.py and its neighbours)."""
import json
import re

import pandas as pd
import pytest

from tests.pages.test_app import open_page

TABBY, TIGER_CAT, EGYPTIAN_CAT = "n02123045", "n02123159", "n02124075"


# --------------------------------------------------------------------------- pages.tables: one format
def test_one_interval_format_for_rates_and_means():
    from pages.tables import interval_texts

    def one(value, low, high, column):
        frame = pd.DataFrame({column: pd.array([value], dtype="Float64"),
                              f"{column}_ci_low": pd.array([low], dtype="Float64"),
                              f"{column}_ci_high": pd.array([high], dtype="Float64")})
        return interval_texts(frame, column)[0]

    assert one(0.6333, 0.4553, 0.7812, "accuracy") == "63.3% [45.5, 78.1]"
    assert one(0.781, 0.7701, 0.7924, "wup_all") == "0.781 [0.770, 0.792]"
    assert one(1.5, 1.2, 1.8, "severity") == "1.50 [1.20, 1.80]"
    assert one(0.5, None, None, "sibling_rate") == "50.0%"  # no interval: the value alone
    assert one(pd.NA, 0.1, 0.2, "accuracy") is None  # drawn as the en dash
    assert one(0.25, 0.1, 0.4, "cousin_rate") == "25.0% [10.0, 40.0]"  # the new relation rates


def _tables():
    from explain.metrics import compute_metric_tables

    return compute_metric_tables(pd.DataFrame({
        "model": ["m"] * 6, "image": list("abcdef"), "true_wnid": [TABBY] * 3 + [TIGER_CAT] * 3,
        "pred_wnid": [TABBY, TABBY, EGYPTIAN_CAT, TIGER_CAT, TIGER_CAT, TIGER_CAT],
        "label_space": "imagenet-1k", "status": "ok"}))


def test_styled_folds_the_bounds_into_their_column_and_keeps_the_numbers():
    from explain.schema import interval_columns
    from pages.tables import interval_texts, styled

    per_class = _tables().per_class
    styler = styled(per_class)
    assert not any(c.endswith(("_ci_low", "_ci_high")) for c in styler.data.columns)
    assert set(interval_columns("per_class")) <= set(styler.data.columns)
    assert styler.data["accuracy"].dtype == per_class["accuracy"].dtype  # st.dataframe sorts by the numbers
    body = styler._translate(False, False)["body"]
    column = list(styler.data.columns).index("accuracy")
    shown = [row[column + 1]["display_value"] for row in body]  # +1: the index cell
    assert shown == interval_texts(per_class, "accuracy")
    assert shown[0].startswith("66.7% [") and shown[0].endswith("]")


def test_a_large_table_keeps_numbers_and_shows_the_bounds_beside_them():
    """Over STYLE_MAX_CELLS the table is not styled: a value with an interval keeps its number (as
    text, '9.5 %' sorted above '63.3 %') and its bounds are a text column beside it."""
    from scipy.stats import binomtest

    from pages.tables import STYLE_MAX_CELLS, styled, table_column_config, without_bounds

    per_class = _tables().per_class
    big = pd.concat([per_class] * (STYLE_MAX_CELLS // without_bounds(per_class).size + 1), ignore_index=True)
    shown = styled(big)
    assert isinstance(shown, pd.DataFrame) and "accuracy_ci_low" not in shown.columns
    assert shown["accuracy"].dtype == per_class["accuracy"].dtype
    columns = list(shown.columns)
    assert columns[columns.index("accuracy") + 1] == "accuracy_interval"
    row = big.iloc[0]
    ci = binomtest(int(round(row["accuracy"] * row["n"])), int(row["n"])).proportion_ci(method="wilson")
    assert shown["accuracy_interval"].iloc[0] == f"[{ci.low * 100:.1f}, {ci.high * 100:.1f}]"
    config = table_column_config("per_class", shown.columns, shown, formats=True, bounded=["accuracy"])
    assert config["accuracy_interval"]["label"] == "Accuracy interval"


# --------------------------------------------------------------------------- the pages
@pytest.fixture(scope="module")
def sample_tables(app_home):
    from core.runstore import RunStore
    from explain.artefact import load_metrics

    return load_metrics(RunStore(app_home).open_run("sample"))


def _figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _values(array) -> list:
    """A Plotly JSON array: a list, or a typed array ({'dtype': 'f8', 'bdata': base64})."""
    import base64

    import numpy as np

    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def test_results_draws_error_bars_from_the_interval_columns(app, sample_tables):
    at = open_page(app, "results")
    bars = [f for f in _figures(at) if f["data"] and f["data"][0].get("type") == "bar"][0]
    per_model = sample_tables.per_model.set_index("model")
    drawn = {}
    for trace in bars["data"]:
        for model, y, above, below in zip(_values(trace["x"]), _values(trace["y"]), _values(trace["error_y"]["array"]),
                                          _values(trace["error_y"]["arrayminus"])):
            drawn[model] = (y + above, y - below)
    for model, (high, low) in drawn.items():
        assert high == pytest.approx(float(per_model.loc[model, "accuracy_ci_high"]))
        assert low == pytest.approx(float(per_model.loc[model, "accuracy_ci_low"]))
    # Every hover label as written elsewhere on the page (a UI review: 'family=CNN' beside 'Model=...')
    assert all("Family=" in t["hovertemplate"] and "family=" not in t["hovertemplate"] for t in bars["data"])


def test_results_tables_show_value_and_interval_in_one_cell(app, sample_tables):
    at = open_page(app, "results")
    shown = at.dataframe[0].value  # the per-model table: numbers underneath, bounds folded away
    assert "accuracy" in shown.columns and "accuracy_ci_low" not in shown.columns
    per_class = [d.value for d in at.dataframe if "rank_note" in d.value.columns][0]
    assert "accuracy_ci_high" not in per_class.columns


def test_results_marks_classes_too_few_images_to_rank(app, sample_tables):
    from core.intervals import DEFAULT_HALF_WIDTH, images_needed, wilson_half_width

    at = open_page(app, "results")
    per_class = [d.value for d in at.dataframe if "rank_note" in d.value.columns][0]
    row = per_class.iloc[0]
    half = float(wilson_half_width(int(row["n"]), float(row["accuracy"])))
    assert half > DEFAULT_HALF_WIDTH  # six images a class
    # at the accuracy within its interval nearest 50 %: 0 of 6 right does not promise +-10 points from 16 images
    stored = sample_tables.per_class.set_index(["model", "true_wnid"]).loc[(row["model"], row["true_wnid"])]
    planning = min(max(0.5, float(stored["accuracy_ci_low"])), float(stored["accuracy_ci_high"]))
    needed = images_needed(DEFAULT_HALF_WIDTH, planning)
    assert row["rank_note"] == f"±{half * 100:.0f} points: too few to rank (~{needed:,} images for ±10)"
    assert any("too few images to rank" in w.value for w in at.warning)


def test_results_lists_the_claims_the_run_does_and_does_not_support(app, app_home, sample_tables):
    from core.runstore import RunStore
    from explain.claims import run_claims
    from explain.uncertainty import IntervalOptions

    at = open_page(app, "results")
    assert any(h.value == "Claims" for h in at.subheader)
    run = RunStore(app_home).open_run("sample")
    expected = run_claims(run.usable_predictions(), families={m: "CNN" for m in run.info.models},
                          options=IntervalOptions(**{k: sample_tables.ci[k] for k in ("level", "resamples", "seed")}))
    texts = "\n".join(m.value for m in at.markdown)
    from pages.text import escape_markdown

    for claim in expected:
        if claim.possible:
            assert escape_markdown(claim.sentence) in texts, claim.sentence
    assert any("no family claim can be made from this run" in i.value.lower() for i in at.info)
    forest = [f for f in _figures(at) if any(t.get("name") in ("no evidence", "supported (q < 0.05)")
                                             for t in f["data"])]
    assert forest, "the differences chart is missing"
    muted = [t for t in forest[0]["data"] if t["name"] == "no evidence"]
    for trace in muted:  # differences without evidence: muted, the verdict on hover
        assert "rgba(150, 150, 150" in trace["marker"]["color"]
        assert all(text.startswith("no evidence of a difference: ") for text in trace["hovertext"])


def test_confusions_draws_mf_with_error_bars(app, sample_tables):
    confusions = sample_tables.confusions
    if confusions.empty:
        pytest.skip("no mistakes on the sample")
    at = open_page(app, "confusions")
    true = [s for s in at.selectbox if s.label == "True class"][0]
    true.set_value(confusions["true_wnid"].iloc[0]).run()
    bars = [f for f in _figures(at) if f["data"] and f["data"][0].get("orientation") == "h"]
    assert bars, "the top-3 MF chart is missing"
    for trace in bars[0]["data"]:
        above, below = _values(trace["error_x"]["array"]), _values(trace["error_x"]["arrayminus"])
        assert len(above) == len(below) == len(_values(trace["x"])) and min(above + below) >= 0


def test_confusions_bar_values_are_never_crossed_by_their_whiskers(app):
    """A look at the sample in Chromium: "20.0%" at the start of tiger cat's bar was struck through by its whisker
    ([3.6, 62.4]). A value whose whisker reaches back under it is written right of the whisker's end instead; every
    other value stays at its bar's start."""
    from pages.charts import WHISKER_CLEAR

    at = open_page(app, "confusions")
    moved = kept = 0
    for measure in ("mf", "share_of_samples"):
        at.radio(key="top3-bars").set_value(measure).run()
        (figure,) = [f for f in _figures(at) if f["data"] and f["data"][0].get("orientation") == "h"]
        notes = {(a["y"], a["text"]): a for a in figure["layout"].get("annotations", [])}
        for trace in figure["data"]:
            xs = _values(trace["x"])
            above, below = _values(trace["error_x"]["array"]), _values(trace["error_x"]["arrayminus"])
            templates = trace.get("texttemplate")
            templates = templates if isinstance(templates, list) else [templates] * len(xs)
            for x, y, up, down, template in zip(xs, trace["y"], above, below, templates):
                crossed = x - down < WHISKER_CLEAR and x + up <= 1 - WHISKER_CLEAR
                if crossed:
                    note = notes[(y, format(float(x), ".1%"))]
                    assert template == "" and note["x"] == pytest.approx(x + up) and note["xanchor"] == "left"
                    moved += 1
                else:
                    assert template and "%{x" in template
                    kept += 1
    assert moved and kept, (moved, kept)


def test_browse_shows_the_mcnemar_result(app, app_home):
    from core.runstore import RunStore
    from explain.compare import compare_models

    at = open_page(app, "browse")
    line = [m.value for m in at.markdown if "Exact McNemar test" in m.value]
    assert line, "the McNemar result is missing"
    run = RunStore(app_home).open_run("sample")
    a, b = at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value
    overall = compare_models(run.usable_predictions(), a, b).overall
    # In the words of the radio below it (a UI review: "only A right" beside "Only B wrong (11)"), its counts too.
    assert f"b = {int(overall['a_only_correct'])} only B wrong (A right)" in line[0]
    assert f"c = {int(overall['b_only_correct'])} only A wrong (B right)" in line[0]
    labels = at.radio(key="cmp_group").options  # as shown: "Both wrong (11)"
    assert f"Only B wrong ({int(overall['a_only_correct'])})" in labels
    assert f"Only A wrong ({int(overall['b_only_correct'])})" in labels
    assert str(overall["verdict"]) in line[0] or "more accurate" in line[0]


def test_browse_on_a_large_run_tests_the_two_models_when_asked(app, monkeypatch):
    """Above pages.reads.CLAIMS_AUTO_ROWS predictions the McNemar line waits for its toggle (the
    paired comparison took 3.5 s of Browse's first load at 1,000,000 predictions), as the Results
    page's claims do; turned on, it is the same line."""
    import pages.reads

    monkeypatch.setattr(pages.reads, "CLAIMS_AUTO_ROWS", 0)
    at = open_page(app, "browse")
    assert not [m.value for m in at.markdown if "Exact McNemar test" in m.value]
    assert any("Turn on for the exact McNemar test" in c.value for c in at.caption)
    at.toggle(key="mcnemar-on").set_value(True).run()
    assert not at.exception
    assert [m.value for m in at.markdown if "Exact McNemar test" in m.value], "turned on, the line is shown"


def test_query_says_what_half_width_k_gives(app):
    from core.intervals import format_half_width

    at = open_page(app, "query")  # opens on the cat word: its classes, k and the engine are drawn
    at.number_input(key="k").set_value(50).run()
    assert any(format_half_width(50) in c.value for c in at.caption)


def test_a_run_too_large_for_its_error_types_keeps_its_tables_and_says_why_in_one_line(app, monkeypatch):
    """Above the per-prediction explanations' in-memory limit (explain.streaming.EXPLAINED_IN_MEMORY,
    lowered here to 10 for the sample's 90 predictions) Results shows its tables and, where the error
    types would be, the one line saying why they are missing (an info, not an error to fix)."""
    import explain.streaming as streaming

    monkeypatch.setattr(streaming, "EXPLAINED_IN_MEMORY", 10)
    counted, real = [], streaming.part_rows
    monkeypatch.setattr(streaming, "part_rows", lambda run: counted.append(1) or real(run))
    at = open_page(app, "results")
    assert not at.exception and not at.error, [e.value for e in at.error]
    notes = [i.value for i in at.info if "whose error types are typed in memory" in i.value]
    assert len(notes) == 1 and "its metric tables are complete" in notes[0] and "tables above" in notes[0]
    at.run()
    assert len(counted) == 1, "the parts' footers are read once per predictions fingerprint, not on every rerun"
    assert "Error types" in [s.value for s in at.subheader] and len(at.dataframe) >= 1  # the tables above: drawn


def test_browse_on_a_run_too_large_for_its_error_types_says_so_and_shows_its_images(app, monkeypatch):
    import explain.streaming as streaming

    monkeypatch.setattr(streaming, "EXPLAINED_IN_MEMORY", 10)
    at = open_page(app, "browse")
    assert not at.exception and not at.error, [e.value for e in at.error]
    notes = [i.value for i in at.info if "whose error types are typed in memory" in i.value]
    assert len(notes) == 1 and notes[0].endswith("Shown here without error types.")
    assert [t.value for t in at.title] == ["Browse"] and "**tabby**" in [m.value for m in at.markdown]  # its cards


def test_a_run_whose_explanations_cannot_be_stored_types_them_once_for_every_level(app_home, tmp_path, monkeypatch):
    """Results' error-type table reads four stored columns while they are fresh; when they cannot be stored
    (a read-only run) the rows typed for it are the ones Browse and a segment click share (pages.reads
    _explained): typed once for two interval levels and the click, not once each (review)."""
    import shutil

    import explain.error_types as error_types
    from core.runstore import RunStore, StoreError
    from core.curation import curation_fingerprint
    from core.explained import label_issues_fingerprint
    from core.runstore import manifest_fingerprint, predictions_fingerprint
    from pages.reads import _error_types, _explained

    home = tmp_path / "home"
    shutil.copytree(app_home, home, symlinks=True)
    run = RunStore(home).open_run("sample")
    shutil.rmtree(run.metrics_dir, ignore_errors=True)
    calls = []
    real = error_types.explain_predictions
    monkeypatch.setattr(error_types, "explain_predictions", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(error_types, "write_explained",
                        lambda *a, **k: (_ for _ in ()).throw(StoreError("read-only file system")))
    key = (str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), "raw", curation_fingerprint(run),
           label_issues_fingerprint(run))
    first = _error_types(*key, 0.95)
    _error_types(*key, 0.9)
    _explained(*key)
    assert len(calls) == 1 and len(first) == len(set(run.read_predictions()["model"]))


def test_the_chosen_models_live_in_the_url(app, sample_tables):
    """A fresh look at the sample (2026-12-06): removing a model left the URL as it was, so a reload
    brought every model back, and ?model=... was not read. Now a subset goes to the URL and comes back."""
    models = sample_tables.per_model["model"].tolist()
    at = open_page(app, "results")
    box = [m for m in at.multiselect if m.key == "results_models"][0]
    assert sorted(box.value) == sorted(models) and "model" not in at.query_params  # every model: no parameter
    box.set_value(models[:1]).run()
    assert not at.exception and at.query_params["model"] == models[0]
    # From outside (a bookmark): the URL sets the selection; a model the run lacks is named.
    at.query_params["model"] = [models[-1], "", "no-such-model", "no-such-model"]
    at.run()
    assert [m for m in at.multiselect if m.key == "results_models"][0].value == [models[-1]]
    from pages.text import escape_markdown

    assert any(escape_markdown("no-such-model") in w.value and "Showing the rest" in w.value for w in at.warning)
    # named once, and an empty value is no name (a hostile check: "no predictions of: , zzz")
    assert any(w.value.endswith(escape_markdown(": no-such-model. Showing the rest.")) for w in at.warning), \
        [w.value for w in at.warning]
    # Another page, then the browser's Back to the URL this page wrote (a review, 2026-12-06: Streamlit had
    # dropped the widget's state, so every model came back and the URL was overwritten).
    written = at.query_params["model"]
    at.switch_page("pages/browse_page.py").run()
    at.query_params["model"] = written
    at.switch_page("pages/results_page.py").run()
    assert [m for m in at.multiselect if m.key == "results_models"][0].value == [models[-1]]


def test_no_model_chosen_says_to_pick_one_on_results_and_confusions(app):
    """A UI review: with every model removed, Results ended at the empty box and Confusions' side-by-side
    section was blank, without a word (Browse says "Pick at least one model.")."""
    at = open_page(app, "results")
    [m for m in at.multiselect if m.key == "results_models"][0].set_value([]).run()
    assert not at.exception and any(i.value == "Pick at least one model." for i in at.info)
    at = open_page(app, "confusions")
    [m for m in at.multiselect if m.key == "conf_models"][0].set_value([]).run()
    assert not at.exception and any(i.value.startswith("Pick at least one model above") for i in at.info)
    assert any(c.value.startswith("No model chosen above") for c in at.caption), "the all-confusions table says why"
    assert at.get("plotly_chart"), "the matrix is still drawn (its own model box)"


def test_a_metric_no_model_has_says_so_and_a_zero_bar_shows_its_value(app, sample_tables):
    """A fresh look at the sample (2026-12-06): 'Nearest % (unseen)' drew bare axes, and a 0 % bar hid its
    value inside a bar of no height. Now a metric undefined for every chosen model is said in words, and
    the bars' values sit inside when they fit, above a bar too short to hold them."""
    from explain.schema import labels_of

    per_model = sample_tables.per_model
    at = open_page(app, "results")
    chart = [s for s in at.selectbox if s.label == "Chart"][0]
    labels = labels_of("per_model")
    columns = [c for c in per_model.columns if labels.get(c) in chart.options]  # what the chart offers
    empty = [c for c in columns if per_model[c].isna().all()]
    zero = [c for c in columns if c.endswith("_rate") and (per_model[c] == 0).any() and per_model[c].notna().all()]
    if empty:
        charts_before = len(at.get("plotly_chart"))
        chart.set_value(empty[0]).run()
        assert any("No chosen model has a value of" in i.value for i in at.info)
        assert len(at.get("plotly_chart")) == charts_before - 1, "no empty chart"
    if zero:
        chart.set_value(zero[0]).run()
        bars = [f for f in _figures(at) if f["layout"].get("yaxis", {}).get("tickformat") == ".0%"][0]
        positions = [p for trace in bars["data"] for p in trace["textposition"]]
        values = [v for trace in bars["data"] for v in _values(trace["y"])]  # a typed array in Plotly's JSON
        assert len(values) == len(positions) and 0 in values, (positions, values)
        assert all(p == "outside" for p, v in zip(positions, values) if v == 0), (positions, values)
        # written above its whisker, not crossed by it (a UI review: "0.0%" struck through)
        lifted = [a for a in bars["layout"].get("annotations", []) if a.get("text") == "0.0%"]
        templates = [t for trace in bars["data"] for t in (trace.get("texttemplate") or [])
                     if isinstance(trace.get("texttemplate"), list)]
        if any("error_y" in trace for trace in bars["data"]):
            assert lifted and all(a["y"] > 0 and a["yshift"] > 0 for a in lifted), bars["layout"].get("annotations")
            assert "" in templates, "the bar's own label left empty"
    assert empty or zero, "the sample has a metric with no value or a 0 % bar"


def test_a_link_repeating_models_thousands_of_times_is_one_short_warning(app, sample_tables):
    from pages.text import escape_markdown

    models = sample_tables.per_model["model"].tolist()
    at = open_page(app, "results")
    at.query_params["model"] = [models[0]] + [f"**m{i}**" for i in range(900)]  # Streamlit ignores over 1,000
    at.run()
    assert [m for m in at.multiselect if m.key == "results_models"][0].value == [models[0]]
    (warning,) = [w.value for w in at.warning if "Showing the rest" in w.value]
    assert len(warning) < 600 and "and 895 more" in warning and escape_markdown("**m0**") in warning, warning


def test_a_clicked_mistake_segment_shows_its_images_and_names_one_that_does_not_decode(sample_store, tmp_path_factory,
                                                                                      monkeypatch):
    """Results' click on a segment of the mistakes' stack: its images as Browse's thumbnails (pages.pictures), a
    picture that does not decode named as such (st.image on the file's path waited on a FIFO and showed a damaged
    file as its bare name)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from core.runstore import RunStore
    from pages.text import escape_markdown
    from tests.conftest import ROOT
    from tests.pages.conftest import copy_store, send_chart_selection

    home = copy_store(sample_store, tmp_path_factory, "segment_home")
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params.update({"run": "sample"})
    at.run()
    at.switch_page("pages/results_page.py").run()
    chart = [c for c in at.get("plotly_chart") if "mistake-stack" in (c.proto.id or "")]
    assert chart, "the mistakes' stack"
    spec = json.loads(chart[0].proto.spec)
    segments = [(data[0], data[1]) for trace in spec["data"] for data in trace.get("customdata") or []
                if isinstance(data, list) and data[2]]  # (model, kind) with mistakes: [model, kind, count, interval]
    if not segments:
        pytest.skip("no segment to click on the sample")
    model, kind = segments[0]
    run = RunStore(home).open_run("sample")
    point = {"curve_number": 0, "point_number": 0, "point_index": 0, "customdata": [model, kind]}
    for forged in (["m"], [["m"], 1], [None, None], "m", {"x": 1}):  # what a client may send (a hostile campaign)
        send_chart_selection(at, chart[0], {"points": [{**point, "customdata": forged}], "point_indices": [0],
                                            "box": [], "lasso": []})  # (it asserts no exception)
    send_chart_selection(at, chart[0], {"points": {"0": point}, "point_indices": [0], "box": [], "lasso": []})
    send_chart_selection(at, chart[0], {"points": [point], "point_indices": [0], "box": [], "lasso": []})
    shown = len(at.get("image"))
    assert shown >= 1, "the segment's images"
    captions = [c for image in at.get("image") for c in image.captions]
    assert captions and all(c.startswith("→ ") for c in captions), "what the model predicted (a UI review)"
    from explain.browse import filter_images, selection_images
    from explain.browse import run_image_table

    from explain.browse import filter_annotated
    from explain.error_types import ERROR_TYPES

    rows = filter_images(run_image_table(run, "raw"), models=[model], outcome="mistake")
    rows = rows if kind not in ERROR_TYPES else filter_annotated(run_image_table(run, "raw").pipe(
        lambda t: t.loc[rows.index]), error_types=[kind])
    first = str(selection_images(rows, "class")["image"].iloc[0])
    run.image_path(first).write_bytes(b"\xff\xd8 not a jpeg any more")
    st.cache_data.clear()
    st.cache_resource.clear()
    send_chart_selection(at, chart[0], {"points": [point], "point_indices": [0], "box": [], "lasso": []})
    captions = [c.value for c in at.caption]
    assert f"Cannot decode {escape_markdown(first)}" in captions, [c for c in captions if "decode" in c]
    assert len(at.get("image")) == shown - 1, "the others are drawn"


def test_the_clicked_segment_and_the_stack_live_in_the_url(app):
    """A UI review (2026-12-07): the images of a clicked segment were lost on the browser's Back from the Image page
    (and on a reload), as was the stack's choice (error type or relation). Now both go to the URL and come back;
    the chart's own reruns decide (no segment picked: none in the URL); a link naming no segment is said."""
    from tests.pages.conftest import away_and_back, send_chart_selection

    at = open_page(app, "results")

    def stack_chart():
        (chart,) = [c for c in at.get("plotly_chart") if "mistake-stack" in (c.proto.id or "")]
        segments = [(d[0], d[1]) for trace in json.loads(chart.proto.spec)["data"] for d in trace.get("customdata") or []
                    if isinstance(d, list) and d[2]]
        return chart, segments

    def click(chart, segment):
        point = {"curve_number": 0, "point_number": 0, "point_index": 0, "customdata": list(segment) if segment else []}
        send_chart_selection(at, chart, {"points": [point] if segment else [], "point_indices": [0] if segment else [],
                                         "box": [], "lasso": []})

    at.radio(key="mistake-stack").set_value("relation").run()
    assert at.query_params["stack"] == "relation"
    chart, segments = stack_chart()
    if not segments:
        pytest.skip("no segment to click on the sample")
    click(chart, segments[-1])
    assert (at.query_params["segment_model"], at.query_params["segment"]) == segments[-1]
    shown = len(at.get("image"))
    assert shown >= 1
    written = {key: at.query_params[key] for key in at.query_params}
    away_and_back(at, "pages/image_page.py", written)
    at.switch_page("pages/results_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="mistake-stack").value == "relation"
    said = [m.value for m in at.markdown if "the segment the link names" in m.value]
    assert len(said) == 1 and len(at.get("image")) == shown
    # The page's own reruns: a segment picked on the chart, then none (a click off the bars): none in the URL.
    chart, _ = stack_chart()
    click(chart, segments[0])
    assert at.query_params["segment"] == segments[0][1]
    click(chart, None)
    assert "segment" not in at.query_params and "segment_model" not in at.query_params
    assert not [m.value for m in at.markdown if "mistakes of type" in m.value or "mistake of type" in m.value]
    # A link naming a segment the chart lacks.
    at.query_params["segment_model"], at.query_params["segment"] = segments[-1][0], "<b>no such</b>"
    at.run()
    assert any("is none of this chart's" in w.value for w in at.warning)
    assert "segment" not in at.query_params


def url_state(at) -> dict[str, list[str]]:
    """AppTest's URL as key -> its values (a repeated parameter is a list there, a single one a string)."""
    return {key: [str(v) for v in value] if isinstance(value, list) else [str(value)]
            for key, value in at.query_params.items()}


def way_back(at):
    """The Image page's one way back: its "Back to Results" or "Back to the grid" link."""
    (back,) = [link.proto for link in at.get("page_link")
               if link.proto.label in ("Back to Results", "Back to the grid")]
    return back


def test_the_image_pages_way_back_from_a_segment_is_results_as_it_was(app):
    """A leftover of a UI review: a clicked segment's images opened the Image page on Browse's filters, so its way back
    went to Browse. Results' Image page links now carry its URL state as back_ parameters (the models, the charts'
    metrics, the stack and the segment), and the Image page's "Back to Results" gives it back whole. The heatmap's
    metric changed after the segment was clicked is carried too (its box is drawn below the links)."""
    import urllib.parse

    from tests.pages.conftest import away_and_back, send_chart_selection

    at = open_page(app, "results")
    at.radio(key="mistake-stack").set_value("relation").run()
    (chart,) = [c for c in at.get("plotly_chart") if "mistake-stack" in (c.proto.id or "")]
    segments = [(d[0], d[1]) for trace in json.loads(chart.proto.spec)["data"] for d in trace.get("customdata") or []
                if isinstance(d, list) and d[2]]
    if not segments:
        pytest.skip("no segment to click on the sample")
    point = {"curve_number": 0, "point_number": 0, "point_index": 0, "customdata": list(segments[-1])}
    send_chart_selection(at, chart, {"points": [point], "point_indices": [0], "box": [], "lasso": []})
    assert at.selectbox(key="class-metric").value != "wup_mistakes"  # not the first: the first is no parameter
    at.selectbox(key="class-metric").set_value("wup_mistakes").run()
    assert not at.exception, [e.value for e in at.exception]
    state = url_state(at)
    assert state["segment"] == [segments[-1][1]] and "heatmap" in state, state
    opens = [link.proto for link in at.get("page_link") if link.proto.page == "image"
             and link.proto.label in ("Page through them", "Open")]
    assert len(opens) >= 2, "Page through them and an Open per thumbnail"
    for link in opens:
        query = urllib.parse.parse_qs(link.query_string)
        assert {key[len("back_"):]: values for key, values in query.items() if key.startswith("back_")} == \
            {k: v for k, v in state.items() if k != "run"}, query
    # On the Image page, opened by the first Open link: "Back to Results" with that state.
    query = dict(urllib.parse.parse_qsl(opens[-1].query_string))
    away_and_back(at, "pages/results_page.py", query)
    at.switch_page("pages/image_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    back = way_back(at)
    assert back.label == "Back to Results" and "results" in back.page, (back.label, back.page)
    assert [m.value for m in at.markdown if "(a Results segment, raw view)" in m.value]
    back_query = urllib.parse.parse_qs(back.query_string)
    assert back_query == state, back_query
    # Results from that link: the stack, the segment's images and the heatmap's metric as they were.
    away_and_back(at, "pages/image_page.py", {k: v[0] if len(v) == 1 else v for k, v in back_query.items()})
    at.switch_page("pages/results_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="mistake-stack").value == "relation"
    assert url_state(at) == state
    assert [m.value for m in at.markdown if "the segment the link names" in m.value]
    # Half a segment in hand-made back_ parameters: the way back stays Browse's filters.
    half = {k: v for k, v in query.items() if k != "back_segment"}
    away_and_back(at, "pages/results_page.py", half)
    at.switch_page("pages/image_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    back = way_back(at)
    assert back.label == "Back to the grid" and "browse" in back.page, (back.label, back.page)


def test_a_links_segment_of_a_model_not_chosen_is_said_and_dropped(app):
    """A hostile check: a link naming models and a segment of another model dropped the segment without a word
    (one of a kind the chart lacks is said); and the page's own reruns, a chosen model removed with its
    segment, say nothing."""
    at = open_page(app, "results")
    models = [option.rsplit(" (", 1)[0] for option in at.multiselect(key="results_models").options]  # "id (family)"
    if len(models) < 2:
        pytest.skip("one model on the sample")
    at.query_params.update({"model": models[0], "stack": "relation", "segment_model": models[1], "segment": "sibling"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = [w.value for w in at.warning if "a model not among those chosen" in w.value]
    assert len(said) == 1 and "segment_model" not in at.query_params and "segment" not in at.query_params, said
    at.run()  # the page's own rerun: nothing more said
    assert not [w.value for w in at.warning if "a model not among those chosen" in w.value]
    # A model the run lacks is said so, not "add it above" (a hostile check).
    at.query_params.update({"segment_model": "nosuchmodel", "segment": "sibling"})
    at.run()
    assert [w.value for w in at.warning if "nosuchmodel's, a model this run has no predictions of" in w.value]
    assert not [w.value for w in at.warning if "add it above" in w.value]


def test_back_inside_the_page_undoes_a_segment_and_a_stack_in_one_step_each(app, monkeypatch):
    """A code review: (1) Back to the URL before a click wrote the segment straight back (the browser's chart still
    held the selection), (2) switching the stack with a segment picked sent two URLs (two presses of Back, the one
    between naming a segment of the other stack), (3) a segment restored from the URL went at the next unrelated
    change. Now a URL from outside decides alone (the chart drawn afresh), the stack and the segment go in one
    write, and a segment stays until a new selection on the chart."""
    from streamlit.runtime.state.query_params_proxy import QueryParamsProxy

    from tests.pages.conftest import send_chart_selection

    at = open_page(app, "results")
    (chart,) = [c for c in at.get("plotly_chart") if "mistake-stack" in (c.proto.id or "")]
    segments = [(d[0], d[1]) for trace in json.loads(chart.proto.spec)["data"] for d in trace.get("customdata") or []
                if isinstance(d, list) and d[2]]
    if not segments:
        pytest.skip("no segment to click on the sample")
    before = {key: at.query_params[key] for key in at.query_params}
    selection = {"points": [{"curve_number": 0, "point_number": 0, "point_index": 0, "customdata": list(segments[0])}],
                 "point_indices": [0], "box": [], "lasso": []}
    send_chart_selection(at, chart, selection)
    assert at.query_params["segment"] == segments[0][1]
    # (1) Back: the earlier URL, the chart still sending its selection.
    for key in list(at.query_params):
        del at.query_params[key]
    at.query_params.update(before)
    send_chart_selection(at, chart, selection)
    assert "segment" not in at.query_params and "segment_model" not in at.query_params
    assert not [m.value for m in at.markdown if " of type " in m.value]
    # (2) A segment picked, then the stack switched: one URL written.
    (chart,) = [c for c in at.get("plotly_chart") if "mistake-stack" in (c.proto.id or "")]
    send_chart_selection(at, chart, selection)
    assert at.query_params["segment"] == segments[0][1]
    sent = []
    original = QueryParamsProxy.from_dict
    monkeypatch.setattr(QueryParamsProxy, "from_dict", lambda self, params: (sent.append(dict(params)),
                                                                              original(self, params))[1])
    at.radio(key="mistake-stack").set_value("relation").run()
    assert len(sent) == 1 and sent[0].get("stack") == "relation" and "segment" not in sent[0], sent
    assert not [w.value for w in at.warning if "segment" in w.value]
    # (3) A segment from the URL (a reload) stays through an unrelated change.
    monkeypatch.setattr(QueryParamsProxy, "from_dict", original)
    at.query_params.update({"segment_model": segments[0][0], "segment": segments[0][1]})
    del at.query_params["stack"]
    at.run()
    assert [m.value for m in at.markdown if "the segment the link names" in m.value]
    at.selectbox(key="results-chart").set_value("sibling_rate").run()
    assert "chart" in at.query_params, "an unrelated change made"
    assert at.query_params["segment"] == segments[0][1]
    assert [m.value for m in at.markdown if "the segment the link names" in m.value]
    # (4) A segment from the URL is cleared by its button (the chart cannot show it selected, so a click off
    # the bars sends nothing new): none in the URL, no images, and none comes back at the next rerun.
    at.button(key="results-clear-segment").click().run()
    assert "segment" not in at.query_params and "segment_model" not in at.query_params
    assert not [m.value for m in at.markdown if " of type " in m.value]
    at.selectbox(key="results-chart").set_value("accuracy").run()
    assert "segment" not in at.query_params and not [b for b in at.button if b.key == "results-clear-segment"]


def test_the_accuracy_against_types_scatter_hovers_with_intervals(app):
    """A UI review: the scatter's hover read "Accuracy=63% +15% / -18%" (Plotly's error bar lengths); each number
    reads with its interval as the tables write it, and the type is named as the stack's hover names it."""
    at = open_page(app, "results")
    scatters = [f for f in _figures(at) if f["data"] and f["data"][0].get("type") == "scatter"
                and "facet" in json.dumps(f["layout"].get("annotations", ""))]
    scatters = scatters or [f for f in _figures(at) if f["data"] and f["data"][0].get("type") == "scatter"]
    assert scatters, "the accuracy-against-types scatter"
    templates = [t["hovertemplate"] for t in scatters[0]["data"] if t.get("hovertemplate")]
    assert templates and all("Accuracy=%{customdata" in t and "Share of the mistakes=%{customdata" in t
                             and "Error type=" in t and "%{x" not in t for t in templates), templates[0]
    texts = [v for t in scatters[0]["data"] for row in (t.get("customdata") or []) for v in row if isinstance(v, str)]
    assert any(re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\]", v) for v in texts), texts[:6]


def test_a_mean_without_an_interval_says_why_and_interval_cells_keep_their_start(sample_store, tmp_path_factory,
                                                                                   monkeypatch):
    """A UI review (2026-12-08): in the curated view of the sample (a relabel and an exclusion: 9 mistakes per model)
    the mean WUP of the mistakes had no whiskers while the caption said "Whiskers: the 95% interval", and the page
    promised every mean its interval. A mean over fewer than MIN_BOOTSTRAP_N mistakes has none (explain.uncertainty):
    the chart's caption names the models without one and why, the page's caption says the rule. And the per-class
    table's interval cells were cut from the left ('.0% [61.0, 100.0]'): bounded columns are 'medium' wide."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from core.curation import record
    from core.runstore import RunStore
    from explain.uncertainty import MIN_BOOTSTRAP_N
    from tests.conftest import ROOT
    from tests.pages.conftest import copy_store

    home = copy_store(sample_store, tmp_path_factory, "curated_home")
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    run = RunStore(home).open_run("sample")
    record(run, "relabel", ["n02123045/21af83c986bb37c1.png"], EGYPTIAN_CAT)
    record(run, "exclude", ["n03763968/27fcb2c34a7b748f.png"])
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params.update({"run": "sample", "view": "curated", "chart": "wup_mistakes"})
    at.run()
    at.switch_page("pages/results_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    bare = [c for c in captions if f"fewer than {MIN_BOOTSTRAP_N} mistakes to resample" in c]
    assert len(bare) == 1 and "Whiskers" not in bare[0], captions
    assert [c for c in captions if f"A mean over fewer than {MIN_BOOTSTRAP_N} images" in c]
    configs = [json.loads(d.proto.columns) for d in at.dataframe]
    configs = [c for c in configs if "sibling_rate" in c]
    assert len(configs) >= 2, "the per-model and per-class tables"
    assert all(c["sibling_rate"].get("width") == "medium" for c in configs), [c["sibling_rate"] for c in configs]


def test_a_links_heatmap_that_is_no_choice_is_said_once_beside_the_heatmap(app):
    """A code review: reading the heatmap's metric above the Image page links moved the warning for a link's bad
    heatmap= under the per-model chart's box. It is said beside the heatmap's box, once."""
    at = open_page(app, "results")
    at.query_params.update({"run": "sample", "heatmap": "<b>nope</b>"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = [w for w in at.warning if "heatmap" in w.value]
    assert len(said) == 1 and "nope" in said[0].value and "<b>" not in said[0].value

    def order(node, out):
        for child in getattr(node, "children", {}).values():
            out.append(child)
            order(child, out)
        return out

    flat = order(at.main, [])
    position = {id(e): i for i, e in enumerate(flat)}
    (per_class,) = [e for e in flat if getattr(e, "type", "") == "subheader" and e.value == "Per class"]
    assert position[id(said[0])] > position[id(per_class)]
    at.run()
    assert not [w for w in at.warning if "heatmap" in w.value]  # the page's own rerun: said once


def test_a_blank_back_segment_keeps_the_way_back_to_browse(app):
    """A code review: Streamlit keeps blank parameters, and back_segment= (blank) counted as a segment."""
    at = open_page(app, "results")
    for key in list(at.query_params):
        del at.query_params[key]
    at.query_params.update({"run": "sample", "model": "efficientnet_lite0", "outcome": "mistake",
                            "back_segment_model": "", "back_segment": ""})
    at.switch_page("pages/image_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    back = way_back(at)
    assert back.label == "Back to the grid" and "browse" in back.page
