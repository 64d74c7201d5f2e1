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


@pytest.mark.parametrize("content", [
    '{"views": [{"name": "' + "x" * 61 + '", "page": "browse", "params": {}}]}',  # a name this version refuses
    '{"views": [{"name": "a", "page": "browse", "params": {"n": [1]}}]}',  # a value that is no text
    '{"views": {"name": "a"}}', '[]', '{"views": [], "pinned": ["a"]}'])
def test_a_view_it_cannot_read_is_never_dropped_by_a_save(run, content):
    path = run.path / "views.json"
    path.write_text(content)
    views, problem = read_views(run)
    assert problem
    with pytest.raises(SavedViewError):
        save_view(run, "new", "browse", {})
    assert path.read_text() == content


def test_a_special_file_or_a_lasso_of_500(run):
    import os

    os.mkfifo(run.path / "views.json")
    views, problem = read_views(run)  # returns at once, never waits on the FIFO
    assert views == [] and "not a regular file" in problem
    os.unlink(run.path / "views.json")
    images = [f"n02123045/{i:016x}.jpg" for i in range(500)]
    save_view(run, "lasso", "image", {"src": ["list"], "img": images})
    assert len(read_views(run)[0][0].params["img"]) == 500
