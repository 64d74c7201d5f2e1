"""The Probes page (issue 15 items 4 and 5) and the Images page's flagged section (item 3) through
AppTest on copies of the sample run, with features written through core.features and probe
results / label issues written in python -m probe's layout (probes/*.parquet): the curve draws the
stored numbers (mean over seeds, min-max band) beside each model's fixed-head accuracy from the
run's metrics, the empty state names the commands, the map has one point per usable image and a
box selection lists those images, and a flagged image's Exclude button excludes it (kept in the
manifest)."""
import html
import json

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from pages.text import escape_markdown
from tests.conftest import ROOT
from tests.pages.conftest import send_chart_selection

APP = str(ROOT / "app.py")
TIMEOUT = 600
MODEL = "efficientnet_lite0"


@pytest.fixture(scope="module")
def empty_home(sample_store, tmp_path_factory):
    from tests.pages.conftest import copy_store

    return copy_store(sample_store, tmp_path_factory, "probes_empty")


def _results() -> pd.DataFrame:
    rows = []
    for model, base in ((MODEL, 0.30), ("efficientnet_lite1", 0.35)):
        for variant, lift in (("linear", 0.0), ("language-init", 0.05)):
            for shots in (1, 2, 4):
                for i, seed in enumerate((22, 37, 45)):
                    rows.append({"model": model, "variant": variant, "shots": shots, "seed": seed,
                                 "n_train": 5 * shots, "n_test": 30 - 5 * shots,
                                 "top1": base + lift + 0.1 * np.log2(shots) + 0.02 * (i - 1),
                                 "top5": min(1.0, base + 0.4 + 0.01 * i)})
    # the zero-shot head of a language-augmented model: N = 0, no seed (python -m probe's layout)
    rows.append({"model": MODEL, "variant": "language-init", "shots": 0, "seed": pd.NA, "n_train": 0, "n_test": 30,
                 "top1": 0.2, "top5": np.nan})
    return pd.DataFrame(rows).astype({"seed": "Int64"})


@pytest.fixture(scope="module")
def probe_home(sample_store, tmp_path_factory):
    """A copy of the sample store whose sample run has features of one model, probe results of two
    and a label-issue table."""
    from core.features import write_feature_part
    from core.runstore import RunStore, write_table
    from tests.pages.conftest import copy_store

    home = copy_store(sample_store, tmp_path_factory, "probes_home")
    run = RunStore(home).open_run("sample")
    images = run.usable_images()[["file", "wnid"]].rename(columns={"file": "image", "wnid": "true_wnid"})
    rng = np.random.default_rng(0)
    centres = {w: rng.normal(size=32) * 4 for w in images["true_wnid"].unique()}
    features = np.stack([centres[w] + rng.normal(size=32) for w in images["true_wnid"]]).astype(np.float32)
    write_feature_part(run, MODEL, images, features)
    (run.path / "probes").mkdir()
    write_table(_results(), run.path / "probes" / "results.parquet")
    flagged = images.iloc[[0, 7, 13, 7]].reset_index(drop=True)  # probe's layout: one row per (model, image)
    issues = flagged.assign(model=[MODEL, MODEL, MODEL, "efficientnet_lite1"],
                            suggested_wnid=["n02123159", "n02123045", "n02123045", "n02123394"],
                            label_quality=[0.4, 0.1, 0.9, 0.3], is_issue=[True, True, False, True])
    write_table(issues, run.path / "probes" / "label_issues.parquet")
    return home


def _open(home, monkeypatch, page: str) -> AppTest:
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _values(v) -> np.ndarray:
    """A Plotly spec's array: a list, or Plotly 6's typed array ({'dtype', 'bdata'[, 'shape']}, base64)."""
    if isinstance(v, dict) and "bdata" in v:
        import base64

        out = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return out.reshape([int(n) for n in str(v["shape"]).split(",")]) if "shape" in v else out
    return np.asarray(v)


def _chart(at: AppTest, key_part: str):
    charts = [c for c in at.get("plotly_chart") if key_part in c.proto.id]
    assert len(charts) == 1, [c.proto.id for c in at.get("plotly_chart")]
    return charts[0], json.loads(charts[0].proto.spec)


def test_without_probes_the_page_names_the_commands(empty_home, monkeypatch):
    at = _open(empty_home, monkeypatch, "pages/probes_page.py")
    assert [t.value for t in at.title] == ["Probes"]
    assert any("No probe results" in i.value for i in at.info)
    assert any("No stored features" in i.value for i in at.info)
    code = "\n".join(c.value for c in at.code)
    models = "efficientnet_lite0,efficientnet_lite1,efficientnet_lite2"
    assert f"python -m classify --run sample --models {models} --features" in code
    assert f"python -m probe --run sample --models {models}" in code
    assert not at.get("plotly_chart")


def test_the_curve_draws_the_stored_means_bands_and_fixed_heads(probe_home, monkeypatch):
    from core.runstore import RunStore
    from explain.artefact import load_metrics

    at = _open(probe_home, monkeypatch, "pages/probes_page.py")
    _, spec = _chart(at, "probe-curve")
    assert not any("drawn on top of each other" in c.value for c in at.caption)  # every curve differs here
    results = _results()
    expected = results.groupby(["model", "variant", "shots"])["top1"].agg(["mean", "min", "max"])
    lines = {t["name"]: t for t in spec["data"] if t.get("mode") == "lines+markers"}
    assert set(lines) == {f"{m} · {v}" for m in (MODEL, "efficientnet_lite1") for v in ("linear", "language-init")}
    for (model, variant), group in expected.groupby(level=[0, 1]):
        line = lines[f"{model} · {variant}"]
        zero = (model, variant) == (MODEL, "language-init")  # N = 0 sits half a step left of N = 1
        assert _values(line["x"]).tolist() == ([0.5] if zero else []) + [1, 2, 4]
        np.testing.assert_allclose(_values(line["y"]), group["mean"].to_numpy(), rtol=1e-12)
    bands = [t for t in spec["data"] if t.get("fill") == "toself"]
    assert len(bands) == 4  # one min-max band per line (three seeds each)
    lo, hi = expected.loc[(MODEL, "linear")]["min"].to_numpy(), expected.loc[(MODEL, "linear")]["max"].to_numpy()
    band = [b for b in bands if b["legendgroup"] == f"{MODEL} · linear"][0]
    np.testing.assert_allclose(_values(band["y"]), np.concatenate([hi, lo[::-1]]), rtol=1e-12)
    assert spec["layout"]["xaxis"]["type"] == "log"
    assert spec["layout"]["xaxis"]["ticktext"] == ["0 (zero-shot)", "1", "2", "4"]
    # the fixed head: each model's accuracy from the run's metrics, a horizontal line
    per_model = load_metrics(RunStore(probe_home).open_run("sample")).per_model.set_index("model")
    hlines = {round(s["y0"], 12) for s in spec["layout"]["shapes"] if s["y0"] == s["y1"]}
    for model in (MODEL, "efficientnet_lite1"):
        assert round(float(per_model.loc[model, "accuracy"]), 12) in hlines
    notes = [a["text"] for a in spec["layout"]["annotations"]]
    for model in (MODEL, "efficientnet_lite1"):  # labelled with the model (models of equal accuracy share a line)
        head = f": fixed head {per_model.loc[model, 'accuracy']:.1%}"
        assert any(model in n and n.endswith(head) for n in notes), notes
    assert len(notes) == len({f"{per_model.loc[m, 'accuracy']:.1%}" for m in (MODEL, "efficientnet_lite1")})
    table = at.dataframe[0].value
    table = table.data if hasattr(table, "data") else table
    assert len(table) == 13 and set(table["seeds"]) == {1, 3}
    row = table[(table["model"] == MODEL) & (table["variant"] == "linear") & (table["shots"] == 4)].iloc[0]
    assert row["top1_mean"] == pytest.approx(expected.loc[(MODEL, "linear", 4), "mean"])
    assert row["fixed_head"] == pytest.approx(per_model.loc[MODEL, "accuracy"])
    assert any("min to max" in c.value for c in at.caption)
    assert len(at.get("download_button")) >= 2
    # issue 23: the error bars are the Wilson interval of the mean top-1 over the test images (scipy's)
    from scipy.stats import binomtest

    line = lines[f"{MODEL} · linear"]
    n_test = results[(results["model"] == MODEL) & (results["variant"] == "linear")].groupby("shots")["n_test"].mean()
    for i, (mean, n) in enumerate(zip(_values(line["y"]), n_test.to_numpy())):
        ci = binomtest(int(round(mean * n)), int(n)).proportion_ci(method="wilson")
        assert _values(line["error_y"]["array"])[i] == pytest.approx(ci.high - mean, abs=1e-12)
        assert _values(line["error_y"]["arrayminus"])[i] == pytest.approx(mean - ci.low, abs=1e-12)
    assert row["top1_ci_low"] <= row["top1_mean"] <= row["top1_ci_high"]


def _select(at: AppTest, chart, rows: list[int]) -> AppTest:
    """Rerun as the browser does after a box selection of the points with these table rows."""
    return send_chart_selection(at, chart, {
        "points": [{"curve_number": 0, "point_number": i, "point_index": i, "customdata": r} for i, r in enumerate(rows)],
        "point_indices": list(range(len(rows))), "box": [{"x": [0, 1], "y": [0, 1]}], "lasso": []})


def test_the_map_has_a_point_per_image_and_a_selection_lists_them(probe_home, monkeypatch):
    from core.runstore import RunStore
    from explain.embedding import project

    at = _open(probe_home, monkeypatch, "pages/probes_page.py")
    run = RunStore(probe_home).open_run("sample")
    chart, spec = _chart(at, f"map-{MODEL}-pca-true")
    assert sorted(chart.proto.selection_mode) == [1, 2]  # box and lasso
    points = [t for t in spec["data"]]
    for t in points:
        for axis in ("x", "y", "customdata"):
            t[axis] = _values(t[axis])
    assert sum(len(t["x"]) for t in points) == 30 and len(points) == 5  # one trace per true class
    rows = sorted(int(r) for t in points for r in t["customdata"])
    assert rows == list(range(30))
    # positions are explain.embedding's PCA of the stored features
    from core.features import read_features

    index, features = read_features(run, MODEL)
    coords = project(features, "pca")
    for t in points:
        np.testing.assert_allclose(np.c_[t["x"], t["y"]], coords[t["customdata"]], atol=1e-9)
    hover = points[0]["hovertext"][0]
    assert index["image"].iloc[int(points[0]["customdata"][0])] in hover and "predicted:" in hover
    at = _select(at, chart, [0, 5, 6])
    assert "Selected: 3 images" in [s.value for s in at.subheader]
    listed = at.dataframe[-1].value
    listed = listed.data if hasattr(listed, "data") else listed
    assert listed["image"].tolist() == index["image"].iloc[[0, 5, 6]].tolist()
    preds = run.read_predictions()
    preds = preds[preds["model"] == MODEL].set_index("image")
    from pages.reads import class_name

    assert listed["pred_name"].tolist() == [class_name(preds.loc[i, "pred_wnid"]) for i in listed["image"]]
    assert len(at.get("image")) == 3
    # colour by relation: one trace per relation present, in the vocabulary's colours
    at.radio(key="map-colour").set_value("relation").run()
    _, spec = _chart(at, f"map-{MODEL}-pca-relation")
    from explain.vocabulary import RELATION_COLOURS

    for trace in spec["data"]:
        assert trace["marker"]["color"] == RELATION_COLOURS.get(trace["name"], "#bbbbbb")


def test_a_selected_image_that_no_longer_decodes_is_said_and_the_others_drawn(probe_home, tmp_path_factory,
                                                                               monkeypatch):
    """The map's selection drew each image by its path (st.image): a file that no longer decoded stopped the
    page (PIL's UnidentifiedImageError). Now the other grids' thumbnails (pages.pictures): "Cannot decode
    <image>" with the card's caption, the other images drawn."""
    from core.features import read_features
    from core.runstore import RunStore
    from pages.text import escape_markdown
    from tests.pages.conftest import copy_store

    home = copy_store(probe_home, tmp_path_factory, "probes_damaged")
    run = RunStore(home).open_run("sample")
    index, _ = read_features(run, MODEL)
    damaged = str(index["image"].iloc[5])
    run.image_path(damaged).write_bytes(b"\xff\xd8 not a jpeg any more")
    at = _open(home, monkeypatch, "pages/probes_page.py")
    chart, _ = _chart(at, f"map-{MODEL}-pca-true")
    at = _select(at, chart, [0, 5, 6])
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    said = captions.index(f"Cannot decode {escape_markdown(damaged)}")
    assert " → " in captions[said + 1] or "no prediction" in captions[said + 1], "the card's caption kept"
    assert len(at.get("image")) == 2


def test_tsne_on_request(probe_home, monkeypatch):
    at = _open(probe_home, monkeypatch, "pages/probes_page.py")
    at.radio(key="map-method").set_value("tsne").run()
    assert not at.exception
    _, spec = _chart(at, f"map-{MODEL}-tsne-true")
    assert sum(len(_values(t["x"])) for t in spec["data"]) == 30
    assert spec["layout"]["xaxis"]["title"]["text"] == "t-SNE 1"


def test_images_page_shows_flagged_images_first_and_excludes(probe_home, monkeypatch):
    from core.runstore import RunStore

    run = RunStore(probe_home).open_run("sample")
    issues = pd.read_parquet(run.path / "probes" / "label_issues.parquet")
    at = _open(probe_home, monkeypatch, "pages/images_page.py")
    assert at.subheader[0].value == "Flagged by the label-issue check · 2 images"
    buttons = [b for b in at.button if b.key and b.key.startswith("exclude-flagged-")]
    flagged = issues[issues["is_issue"]].sort_values("label_quality").drop_duplicates("image")
    assert [b.key.removeprefix("exclude-flagged-") for b in buttons] == flagged["image"].tolist()  # lowest first
    first, suggested = flagged["image"].iloc[0], flagged["suggested_wnid"].iloc[0]
    from pages.reads import class_name
    from pages.text import escape_markdown

    notes = [m.value for m in at.markdown if "quality" in m.value]
    assert notes[0].startswith(escape_markdown(class_name(flagged["true_wnid"].iloc[0])) + " → **"
                               + escape_markdown(class_name(suggested)) + "**")
    assert "quality 0.10" in notes[0] and escape_markdown(f"{MODEL}, efficientnet_lite1") in notes[0]
    try:
        buttons[0].click().run()
        assert not at.exception, [e.value for e in at.exception]
        manifest = run.read_manifest().set_index("file")
        assert len(manifest) == 30 and bool(manifest.loc[first, "excluded"])  # excluded, kept
        assert manifest.loc[first, "excluded_reason"] == f"label issue: suggested {suggested}"
        assert first not in set(run.usable_images()["file"])
        assert at.subheader[0].value == "Flagged by the label-issue check · 1 image"
        assert any("1 flagged image already excluded" in c.value for c in at.caption)
        assert len(at.get("image")) >= 6  # the class grid below is still there
    finally:
        run.set_excluded([first], excluded=False)


def test_images_page_says_when_the_check_flagged_nothing(empty_home, monkeypatch):
    from core.runstore import RunStore, write_table

    run = RunStore(empty_home).open_run("sample")
    images = run.usable_images()[["file", "wnid"]].rename(columns={"file": "image", "wnid": "true_wnid"})
    issues = images.assign(model=MODEL, suggested_wnid=images["true_wnid"], label_quality=0.99, is_issue=False)
    (run.path / "probes").mkdir(exist_ok=True)
    write_table(issues, run.path / "probes" / "label_issues.parquet")
    try:
        at = _open(empty_home, monkeypatch, "pages/images_page.py")
        assert not [s for s in at.subheader if "Flagged" in s.value]
        assert any("flagged none of this run's 30 images" in c.value for c in at.caption)
        assert not [b for b in at.button if b.key and b.key.startswith("exclude-flagged-")]
    finally:
        (run.path / "probes" / "label_issues.parquet").unlink()


def test_the_chart_says_where_n_stops_and_warns_of_near_duplicates(probe_home, monkeypatch):
    """Issue 22 item 14: N = 8…128 were plotted when every class held 7 images, and near
    duplicates went unmentioned. The stored results say the cap (shots_limit) and the groups
    (near_dup_groups); the chart says where N stops, the page warns, both in probe's words."""
    from core.runstore import RunStore, write_table
    from probe.artefact import curve_notes

    run = RunStore(probe_home).open_run("sample")
    target = run.path / "probes" / "results.parquet"
    original = target.read_bytes()
    results = _results()
    results["shots_limit"] = np.where(results["model"] == MODEL, 4, 29)  # MODEL's classes stop at N = 4
    results["near_dup_groups"] = np.where(results["model"] == MODEL, 3, 0)
    write_table(results, target)
    try:
        cap, duplicates = curve_notes(results)
        assert cap.startswith(f"N stops at 4 ({MODEL}): no class holds more than 5 distinct images")
        assert duplicates.startswith(f"{MODEL}: 3 groups of near-duplicate images (pHash distance <= 8)")
        at = _open(probe_home, monkeypatch, "pages/probes_page.py")
        _, spec = _chart(at, "probe-curve")
        notes = [a["text"].replace("<br>", " ") for a in spec["layout"]["annotations"]]
        assert html.escape(cap) in notes  # on the chart, wrapped
        assert [w.value for w in at.warning] == [escape_markdown(duplicates)]
        # the other model alone: its N stops where asked, no duplicates: nothing said
        at.multiselect(key="probe-models").set_value(["efficientnet_lite1"]).run()
        _, spec = _chart(at, "probe-curve")
        assert not [a for a in spec["layout"]["annotations"] if "N stops" in a["text"]] and not at.warning
    finally:
        target.write_bytes(original)


def test_curves_drawn_on_top_of_each_other_are_named_under_the_chart(sample_store, tmp_path_factory, monkeypatch):
    """Two models with the same probes drew one line; the page names them under the chart
    (probe.artefact.coinciding_curves), as text: a model id is outside text."""
    from core.runstore import RunStore, write_table
    from tests.pages.conftest import copy_store

    home = copy_store(sample_store, tmp_path_factory, "probes_same")
    run = RunStore(home).open_run("sample")
    results = _results()
    lite1 = results[results["model"] == "efficientnet_lite1"]
    same = pd.concat([results[results["model"] != "efficientnet_lite1"], lite1,
                      lite1.assign(model="efficientnet_lite2")], ignore_index=True)
    (run.path / "probes").mkdir()
    write_table(same, run.path / "probes" / "results.parquet")
    at = _open(home, monkeypatch, "pages/probes_page.py")
    said = [c.value for c in at.caption if "drawn on top of each other" in c.value]
    from pages.text import escape_markdown

    assert said == [escape_markdown("efficientnet_lite1 · linear and efficientnet_lite2 · linear; efficientnet_lite1 · "
                                    "language-init and efficientnet_lite2 · language-init: the same top-1 at every N "
                                    "and seed, drawn on top of each other (the hover lists each).")], said
