"""The Query page with an ambiguous word (issue 12 item 3): senses sorted by their classes, empty
ones last and marked, the page asks when two senses have classes, senses combine into one run,
and the search terms are shown and editable before a crawl."""

import pandas as pd
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.pages.conftest import url_messages

APP = str(ROOT / "app.py")
TIMEOUT = 600  # the first run loads WordNet and classifies the sample on a shared 2-core machine
CRANE_BIRD, CRANE_MACHINE = "n02012849", "n03126707"


def open_page(at: AppTest, name: str = "query") -> AppTest:
    at.switch_page(f"pages/{name}_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def ask(at: AppTest, query: str) -> AppTest:
    at.text_input(key="query").set_value(query).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sense_boxes(at: AppTest, query: str) -> dict:
    prefix = f"sense|imagenet-1k|{query}|"
    return {c.key[len(prefix):]: c for c in at.checkbox if c.key and c.key.startswith(prefix)}


def tick(at: AppTest, query: str, *names: str) -> AppTest:
    boxes = sense_boxes(at, query)
    for name in names:
        boxes[name].check()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_crane_asks_and_lists_the_bird_and_the_machine_first(app):
    at = ask(open_page(app), "crane")
    assert any("‘crane’ has 2 senses with classes in imagenet-1k: pick one or more" in m.value for m in at.markdown)
    boxes = sense_boxes(at, "crane")
    assert list(boxes) == ["crane.n.04", "crane.n.05"]  # only senses with classes can be picked
    assert not any(b.value for b in boxes.values()), "no silent default"
    assert "1 class · lifts and moves heavy objects" in boxes["crane.n.04"].label
    assert "1 class · large long\\-necked wading bird" in boxes["crane.n.05"].label
    (empties,) = [e for e in at.expander if "with no class in imagenet-1k" in e.label]
    assert empties.label == "3 more senses with no class in imagenet-1k"
    listed = [m.value for m in empties.markdown][0]
    assert [line.split(" · ")[:2] for line in listed.splitlines()] == [
        ["- crane.n.01", "no class in imagenet-1k"], ["- crane.n.02", "no class in imagenet-1k"],
        ["- grus.n.01", "no class in imagenet-1k"]]
    # nothing below until a sense is picked
    assert not at.dataframe and not at.multiselect and not [b for b in at.button if b.label == "Create run and crawl"]


def test_two_senses_combined_give_the_union_of_their_classes(app):
    at = tick(ask(open_page(app), "crane"), "crane", "crane.n.05")
    assert [s.value for s in at.subheader][0] == "1 imagenet-1k class under crane.n.05"
    assert at.dataframe[0].value["wnid"].tolist() == [CRANE_BIRD]
    at = tick(at, "crane", "crane.n.04")
    assert [s.value for s in at.subheader][0] == "2 imagenet-1k classes under crane.n.04 + crane.n.05"
    classes = at.dataframe[0].value
    assert classes[["wnid", "senses"]].values.tolist() == [[CRANE_BIRD, "crane.n.05"], [CRANE_MACHINE, "crane.n.04"]]
    picked = [m for m in at.multiselect if m.label == "Classes"][0]
    assert picked.value == [CRANE_BIRD, CRANE_MACHINE]
    assert picked.format_func(CRANE_BIRD) == f"crane ({CRANE_BIRD}, crane.n.05)"
    terms = at.data_editor[0].value
    assert terms[["wnid", "sense", "search terms"]].values.tolist() == [
        [CRANE_BIRD, "crane.n.05", "crane bird"], [CRANE_MACHINE, "crane.n.04", "crane device"]]
    assert terms["shares a name with"].tolist() == [f"crane ({CRANE_MACHINE})", f"crane ({CRANE_BIRD})"]


def _fake_crawl(calls: list):
    import crawl.crawler

    def fake_crawl(run, wnids, k, engine=None, config=None, progress=None, search_terms=None):
        calls.append({"run": run, "wnids": list(wnids), "search_terms": search_terms})
        return crawl.crawler.CrawlSummary(engine, k, run.run_id, pd.DataFrame({"wnid": wnids, "accepted": 0}))

    return fake_crawl


def test_an_edited_search_term_reaches_the_crawl(app, monkeypatch):
    import crawl.crawler
    from crawl.http import Reachability

    calls = []
    monkeypatch.setattr(crawl.crawler, "check_engine", lambda engine, config=None: Reachability(True, "h", "ok", 0.0))
    monkeypatch.setattr(crawl.crawler, "crawl_run", _fake_crawl(calls))
    at = tick(ask(open_page(app), "crane"), "crane", "crane.n.04", "crane.n.05")
    editor = at.data_editor[0]
    at.session_state[editor.key] = {"edited_rows": {0: {"search terms": "sandhill crane;  grey crane "}},
                                    "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception and not at.warning, [e.value for e in at.exception] + [w.value for w in at.warning]
    [b for b in at.button if b.label == "Create run and crawl"][0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    (call,) = calls
    assert call["search_terms"] == {CRANE_BIRD: ["sandhill crane", "grey crane"], CRANE_MACHINE: ["crane device"]}
    info = call["run"].info
    assert info.sense == "crane.n.04+crane.n.05" and info.query == "crane"
    assert info.wnids == [CRANE_BIRD, CRANE_MACHINE]


def test_an_emptied_search_term_blocks_the_crawl(app):
    at = tick(ask(open_page(app), "crane"), "crane", "crane.n.05")
    at.session_state[at.data_editor[0].key] = {"edited_rows": {0: {"search terms": " ; "}}, "added_rows": [],
                                               "deleted_rows": []}
    at.run()
    from pages.text import escape_markdown

    assert any(f"Give at least one search term for {escape_markdown('crane (n02012849)')}" in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert [b for b in at.button if b.label == "Create run and crawl"][0].disabled


def test_cat_still_preselects_its_usual_sense(app):
    at = open_page(app)
    boxes = sense_boxes(at, "cat")
    assert list(boxes)[:2] == ["cat.n.01", "big_cat.n.01"]
    assert boxes["cat.n.01"].value and not boxes["big_cat.n.01"].value
    assert "7 classes" in boxes["cat.n.01"].label and "6 classes" in boxes["big_cat.n.01"].label
    assert [s.value for s in at.subheader][0] == "7 imagenet-1k classes under cat.n.01"
    assert len(at.dataframe[0].value) == 7 and "senses" not in at.dataframe[0].value.columns
    assert not any("pick one or more" in m.value for m in at.markdown)
    # the import tab is gone: a link to the Import page instead
    assert not [t for t in at.text_input if t.label == "Folder"]
    assert any(p.label == "Import a local folder instead" for p in at.get("page_link"))
    # big cats added: one run of 13 classes
    at = tick(at, "cat", "big_cat.n.01")
    assert [s.value for s in at.subheader][0] == "13 imagenet-1k classes under cat.n.01 + big_cat.n.01"


def shown_afresh(widget):
    """What a browser that draws ``widget`` afresh (it was not on the page before) shows: the value
    the server sends with it, else the widget's own default. AppTest's ``.value`` is the server's
    state instead, which the browser does not see."""
    proto = widget.proto
    if widget.type == "number_input":
        return proto.value if proto.set_value else proto.default
    return proto.raw_value if proto.set_value else proto.options[proto.default]  # a select box


def test_k_and_the_engine_survive_a_word_that_hides_them(app):
    """Issue 22 item 21: "ticking a sense resets 'Images per class (k)' from 20 to 1". A word whose
    senses need a pick ('crane') stops the page above k; st.stop() ends the run without Streamlit's
    clean-up of the widgets it did not draw, so the server kept k while the browser dropped it, and
    when a tick brought k back the browser drew its default (1) and sent that on the next rerun.
    The browser's session starts on the Query page (a bookmark, a reload): k's default is set in the
    same run that draws it. AppTest's first run is the Runs page, so k is taken out of the state
    there, and the Query page sets it again as it does in the browser."""
    del app.session_state["k"], app.session_state["engine"]
    at = open_page(app)
    assert shown_afresh(at.number_input(key="k")) == 20  # the default, drawn at once
    at.number_input(key="k").set_value(37)
    at.selectbox(key="engine").set_value("baidu")
    at.run()
    at = ask(at, "crane")
    assert not at.number_input, "k waits for a sense"
    at = tick(at, "crane", "crane.n.05")
    assert [s.value for s in at.subheader][0] == "1 imagenet-1k class under crane.n.05"
    assert shown_afresh(at.number_input(key="k")) == 37
    assert shown_afresh(at.selectbox(key="engine")) == "baidu"
    at.run()
    assert at.number_input(key="k").value == 37 and at.selectbox(key="engine").value == "baidu"


def test_the_word_and_the_label_space_live_in_the_url(app, monkeypatch):
    """A fresh look at the sample (2026-12-06): the typed word was not in the URL, so a reload went back to
    'cat'. Now `q` and `space` are written, and read on a link, a reload or a new visit to the page."""
    app.query_params["q"] = "dog"
    at = open_page(app)
    assert at.text_input(key="query").value == "dog" and at.query_params["q"] == "dog"
    assert at.query_params["space"] == "imagenet-1k"
    sent = url_messages(monkeypatch)
    ask(at, "crane")
    assert at.query_params["q"] == "crane", "the page's own change goes to the URL"
    # ... to the browser's, in one message, though the page stops there to ask for a sense (a code review: a
    # URL held back to the run's end never left a run that st.stop ended)
    assert len(sent) == 1 and "q=crane" in sent[0], sent
    at.run()
    assert at.text_input(key="query").value == "crane", "a rerun keeps what was typed"
    open_page(at, "results")
    at.query_params["q"] = "crane"  # the browser's Back to the URL the page wrote
    at.query_params["space"] = "imagenet-1k"
    open_page(at)
    assert at.text_input(key="query").value == "crane"


def test_the_page_says_why_a_sense_was_picked(app):
    """'bank' picked the piggy bank without a word (a UI review): core.labels.preselection_note on the page."""
    app.query_params["q"] = "bank"
    at = open_page(app)
    captions = [c.value.replace("\\", "") for c in at.caption]  # escaped Markdown, read as shown
    assert any(c.startswith("savings_bank.n.02 is picked: the only one of the 10 noun senses of ‘bank’") and
               "bank.n.01 (sloping land" in c for c in captions), captions


def test_a_word_with_many_classes_lists_the_ones_left_out(app, monkeypatch):
    """A UI review and a hostile check (2026-12-08): 'entity' preselected all 1,000 classes as chips (21,843 in the
    21k space: 4 s of each rerun went to Streamlit matching them). Above LEAVE_OUT_FROM classes every class is
    collected unless picked in a box that lists the ones left out; below it, the box keeps the chosen ones."""
    import crawl.crawler
    from crawl.http import Reachability

    calls = []
    monkeypatch.setattr(crawl.crawler, "check_engine", lambda engine, config=None: Reachability(True, "h", "ok", 0.0))
    monkeypatch.setattr(crawl.crawler, "crawl_run", _fake_crawl(calls))
    at = ask(open_page(app), "domestic_cat")
    assert [m.label for m in at.multiselect][:1] == ["Classes"]  # few classes: the chosen ones, all at first
    at = ask(at, "entity")
    (box,) = [m for m in at.multiselect if m.label.startswith("Classes: all 1,000 are collected")]
    assert box.value == []
    box.set_value(["n02123045", "n02123159"]).run()
    assert not at.exception, [e.value for e in at.exception]
    [b for b in at.button if b.label == "Create run and crawl"][0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    (call,) = calls
    assert len(call["wnids"]) == 998 and "n02123045" not in call["wnids"] and "n02124075" in call["wnids"]
