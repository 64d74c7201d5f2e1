"""The sidebar's ImageNet-CoG levels switch (pages.run_state.levels_toggle) says so, in one line under
it, when none of the current run's classes has a level, and why (issue 22 item 21): before, it
switched on and nothing changed on a run of ImageNet-1k classes, with no word."""
import re

from core.runstore import RunInfo, RunStore
from tests.pages.test_app import open_page

GAMECOCK = "n01514752"  # an ImageNet-21k concept of level 1
ENTITY = "n00001740"  # WordNet's root: not an ImageNet-21k concept


def _notes(at) -> list[str]:
    """The sidebar's levels notes, as read on screen (the Markdown escapes taken out)."""
    shown = [re.sub(r"\\(.)", r"\1", c.value) for c in at.sidebar.caption]
    return [text for text in shown if "ImageNet-CoG level" in text]


def _switch(at, on: bool):
    at.sidebar.toggle(key="show_levels").set_value(on).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_switch_says_when_no_class_of_the_run_has_a_level(app, app_home):
    at = open_page(app, "results")  # the sample run: five ImageNet-1k classes
    assert not _notes(at)
    at = _switch(at, True)
    (note,) = _notes(at)
    assert note.startswith("None of this run's 5 classes has an ImageNet-CoG level: all 5 are classes of "
                           "imagenet-1k. CoG's levels rank only the ImageNet-21k concepts")
    store = RunStore(app_home)
    store.create_run(RunInfo(run_id="no-levels", title="outside", wnids=[ENTITY, "n07929519"]))  # + coffee
    store.create_run(RunInfo(run_id="a-level", title="gamecock", wnids=["n02123045", GAMECOCK]))
    at.run()
    at.sidebar.selectbox(key="run_id").set_value("no-levels").run()
    (note,) = _notes(at)
    assert "1 is an ancestor of a class of imagenet-1k, 1 is not an ImageNet-21k concept" in note, note
    at.sidebar.selectbox(key="run_id").set_value("a-level").run()
    assert not _notes(at), "a class with a level: its name says it, no note"
    at.sidebar.selectbox(key="run_id").set_value("no-levels").run()
    at = _switch(at, False)
    assert not _notes(at)
