"""core.saved_views: named views of a run, saved atomically, replaced by name, never lost to a
damaged file; hostile names refused."""
from __future__ import annotations

import threading

import pytest

from core.runstore import RunStore
from core.saved_views import SavedViewError, read_views, remove_view, save_view


@pytest.fixture
def run():
    return RunStore().create_run(run_id="views")


def test_save_replace_remove(run):
    save_view(run, "cartoon cats", "browse", {"tag": ["not-a-photo"], "model": ["a", "b"]})
    save_view(run, "sure mistakes", "browse", {"outcome": "mistake"})
    save_view(run, "cartoon cats", "image", {"src": ["browse"]})  # same name: replaced, moved last
    views, problem = read_views(run)
    assert problem == "" and [(v.name, v.page) for v in views] == [("sure mistakes", "browse"), ("cartoon cats", "image")]
    assert views[0].params == {"outcome": ["mistake"]}
    assert remove_view(run, "sure mistakes") and not remove_view(run, "sure mistakes")
    assert [v.name for v in read_views(run)[0]] == ["cartoon cats"]


@pytest.mark.parametrize("name", ["", " ", "x" * 61, "bad\x1bname", None])
def test_bad_names_are_refused(run, name):
    with pytest.raises(SavedViewError):
        save_view(run, name, "browse", {})


def test_a_damaged_file_is_reported_and_not_overwritten(run):
    path = run.path / "views.json"
    path.write_text("{not json")
    views, problem = read_views(run)
    assert views == [] and "cannot be read" in problem
    with pytest.raises(SavedViewError, match="cannot be read"):
        save_view(run, "x", "browse", {})
    assert path.read_text() == "{not json"


def test_two_tabs_saving_at_once_keep_both(run):
    def save(i):
        save_view(run, f"view {i}", "browse", {"page": [str(i)]})

    threads = [threading.Thread(target=save, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(v.name for v in read_views(run)[0]) == sorted(f"view {i}" for i in range(12))
