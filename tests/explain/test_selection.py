"""explain.selection and the browse annotations: a selection survives its URL form, resolves to the
grid's own order, and bad values in a link are named, not fatal; the image view's near duplicates
and history."""
from __future__ import annotations

import pandas as pd
import pytest

from core.curation import Curation, Entry, replay
from explain.browse import annotate, filter_annotated, image_table, selection_images
from explain.image_view import history, near_duplicates
from explain.selection import Selection, describe, resolve

TABBY, TIGER_CAT, PERSIAN, EGYPTIAN = "n02123045", "n02123159", "n02123394", "n02124075"


@pytest.fixture(scope="module")
def table():
    rows = []
    for i, (true, pred, p1, p2) in enumerate([(TABBY, TABBY, 0.9, 0.05), (TABBY, TIGER_CAT, 0.5, 0.45),
                                              (TABBY, EGYPTIAN, 0.7, 0.1), (PERSIAN, TABBY, 0.3, 0.29)]):
        for model, shift in (("a", 0.0), ("b", 0.01)):
            rows.append({"model": model, "image": f"img{i}.jpg", "true_wnid": true, "pred_wnid": pred,
                         "pred_wnid_2": PERSIAN if pred != PERSIAN else TABBY, "prob_1": p1 - shift,
                         "prob_2": p2, "status": "ok"})
    base = image_table(pd.DataFrame(rows), cache_dir=False)
    explained = pd.DataFrame({"model": ["a", "a"], "image": ["img1.jpg", "img3.jpg"],
                              "error_type": ["fine-grained", "label"], "error_reason": ["sibling", "tagged"]})
    return annotate(base, explained, {"img3.jpg": frozenset({"not-a-photo", "=cmd"})})


def test_annotations_margin_error_types_and_tags(table):
    row = table[(table["model"] == "a") & (table["image"] == "img1.jpg")].iloc[0]
    assert row["margin"] == pytest.approx(0.05) and row["error_type"] == "fine-grained"
    assert table[(table["model"] == "b") & (table["image"] == "img1.jpg")]["error_type"].isna().all()
    assert table[table["image"] == "img3.jpg"]["tags"].tolist() == ["=cmd; not-a-photo"] * 2
    assert filter_annotated(table, tags=["not-a-photo"])["image"].unique().tolist() == ["img3.jpg"]
    assert filter_annotated(table, error_types=["label", "fine-grained"])["image"].tolist() == ["img1.jpg", "img3.jpg"]
    assert set(filter_annotated(table, margin_max=0.06)["image"]) == {"img1.jpg", "img3.jpg"}


def test_orders_the_grid_and_the_image_page_share(table):
    assert selection_images(table, "class")["image"].tolist() == ["img0.jpg", "img1.jpg", "img2.jpg", "img3.jpg"]
    assert selection_images(table, "confident")["image"].tolist()[0] == "img0.jpg"
    assert selection_images(table, "unsure")["image"].tolist()[0] == "img3.jpg"
    assert selection_images(table, "margin")["image"].tolist()[:2] == ["img3.jpg", "img1.jpg"]


def test_a_selection_survives_its_url_and_resolves_like_the_grid(table):
    s = Selection(source="browse", models=("a",), true=TABBY, outcome="mistake", conf_max=0.8, sort="unsure")
    narrow = Selection(source="browse", margin_max=0.06)
    assert Selection.from_params(lambda key: narrow.params().get(key, []))[0] == narrow
    assert set(resolve(narrow, table)["image"]) == {"img1.jpg", "img3.jpg"}
    params = s.params()
    back, notes = Selection.from_params(lambda key: params.get(key, []))
    assert back == s and notes == []
    assert resolve(s, table)["image"].tolist() == ["img1.jpg", "img2.jpg"]
    pair = Selection(source="pair", models=("b",), true=TABBY, pred=EGYPTIAN)
    assert resolve(pair, table)["image"].tolist() == ["img2.jpg"]
    assert "tabby → Egyptian" in describe(pair, {TABBY: "tabby", EGYPTIAN: "Egyptian cat"}.get)
    # The comparison's groups name the models by their letters (a UI review: 'only a wrong').
    assert describe(Selection(source="compare", compare=("m1", "m2", "only_a_wrong")), str) == "m1 vs m2: only A wrong"
    assert describe(Selection(source="compare", compare=("m1", "m2", "both_wrong")), str) == "m1 vs m2: both wrong"
    # Bounds outside [0, 1] are refused by name, not clipped (a hostile check: conf_min=41 meant 41 %).
    out, notes = Selection.from_params(lambda key: {"conf_min": ["41"], "margin_max": ["-1"]}.get(key, []))
    assert out.conf_min is None and out.margin_max is None and len(notes) == 2, notes
    picked = Selection(source="list", images=("img2.jpg", "nope.jpg", "img0.jpg"))
    assert resolve(picked, table)["image"].tolist() == ["img2.jpg", "img0.jpg"]
    both = Selection(source="compare", compare=("a", "b", "both_wrong"))
    assert resolve(both, table)["image"].tolist() == ["img1.jpg", "img2.jpg", "img3.jpg"]


def test_bad_values_in_a_link_are_named_and_dropped(table):
    params = {"src": ["evil<script>"], "outcome": ["sideways"], "conf_min": ["abc"], "relation": ["enemy"],
              "sort": ["random"]}
    s, notes = Selection.from_params(lambda key: params.get(key, []))
    assert s.source == "browse" and s.outcome == "all" and s.conf_min is None and s.sort == "class"
    assert len(notes) == 5 and any("src=evil" in n for n in notes)


def test_issues_selection_is_most_suspect_first(table):
    issues = pd.DataFrame({"model": ["a", "a", "a", "b"], "image": ["img2.jpg", "img0.jpg", "gone.jpg", "img3.jpg"],
                           "true_wnid": [TABBY, TABBY, TABBY, PERSIAN], "label_quality": [0.2, 0.1, 0.0, 0.05],
                           "is_issue": [True, True, True, True]})
    got = resolve(Selection(source="issues", models=("a",)), table, issues)
    assert got["image"].tolist() == ["img0.jpg", "img2.jpg"]


def test_near_duplicates_and_history():
    manifest = pd.DataFrame({"file": ["x.jpg", "y.jpg", "z.jpg", None], "wnid": [TABBY, PERSIAN, TABBY, TABBY],
                             "phash": ["00000000000000ff", "00000000000000fe", "ffffffffffffff00", "00000000000000ff"],
                             "status": ["accepted", "accepted", "accepted", "rejected"]})
    near = near_duplicates(manifest, "x.jpg")
    assert near["file"].tolist() == ["y.jpg"] and near["distance"].tolist() == [1]
    assert near_duplicates(manifest.assign(phash=None), "x.jpg").empty
    state = replay([Entry(1, "t", "tag", ("x.jpg", "y.jpg"), "duplicate"), Entry(2, "t", "exclude", ("x.jpg",)),
                    Entry(3, "t", "undo", ("x.jpg",), 2)])
    past = history(state, "x.jpg")
    assert [(h["seq"], h["what"], h["undone"], h["images"]) for h in past] == [(1, "tag duplicate", False, 2),
                                                                              (2, "exclude", True, 1)]
    assert history(Curation(), "x.jpg") == []
