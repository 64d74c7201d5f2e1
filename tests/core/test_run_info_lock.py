"""run.json is read, changed and written under the run's info lock: a rename on the Runs page and an
inference recording its model at the same moment both land (before, the later write put back what
it had read, and one change was silently lost)."""
import threading
import time

import core.runstore
from core.runstore import RunInfo, RunStore


def test_a_rename_and_a_concurrent_model_update_both_land(monkeypatch):
    store = RunStore()
    run = store.create_run(RunInfo(run_id="cats", title="old", models=["a"]))
    real = core.runstore.write_json_atomic

    def slow_write(target, obj):  # widen the window between reading run.json and writing it back
        time.sleep(0.3)
        real(target, obj)

    monkeypatch.setattr(core.runstore, "write_json_atomic", slow_write)
    threads = [threading.Thread(target=store.rename_run, args=("cats", "new title")),
               threading.Thread(target=run.update_info, kwargs={"models": ["a", "b"]})]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    info = store.open_run("cats").info
    assert (info.title, info.models) == ("new title", ["a", "b"])


def test_the_info_lock_does_not_block_deleting_a_run():
    store = RunStore()
    store.create_run(RunInfo(run_id="cats", title="old"))
    store.rename_run("cats", "renamed")  # leaves the (released) lock file in the folder
    store.delete_run("cats")
    assert store.list_runs() == [] and not (store.runs_dir / "cats").exists()


def test_a_delete_killed_half_way_is_finished_by_the_next_delete():
    """A server stopped while a big run was being removed left runs/.deleting-<id>-<token> behind,
    in no list and holding the disk; the next delete removes it. Other dot folders stay."""
    store = RunStore()
    store.create_run(RunInfo(run_id="next", title="next"))
    left = store.runs_dir / ".deleting-old-a1b2c3"
    (left / "images" / "n02123045").mkdir(parents=True)
    (left / "images" / "n02123045" / "x.jpg").write_bytes(b"x")
    staging = store.runs_dir / ".import-0123456789ab"  # an import's, not a delete's
    staging.mkdir()
    store.delete_run("next")
    assert not left.exists() and staging.is_dir()
    assert store.list_runs() == []


# --------------------------------------------------------------------------- a damaged run.json
import json  # noqa: E402

import pytest  # noqa: E402

from core.runstore import StoreError  # noqa: E402


@pytest.mark.parametrize("damage", [
    {"title": ["x"]}, {"wnids": "n02123045"}, {"models": [1]}, {"created": 5}, {"is_sample": "yes"},
    {"images_per_class": "20"}, {"schema_version": "1"}, "[]", b"\xff\xfe{",
])
def test_a_run_json_of_the_wrong_shape_is_a_damaged_run_not_a_crash(damage):
    """A hand-edited or damaged run.json (a title that is a list, binary garbage) made list_runs
    or every page's sidebar raise; now that run is skipped by list_runs and opening it says which
    field is wrong. Other runs are listed as before; nothing is changed on disk."""
    store = RunStore()
    store.create_run(RunInfo(run_id="good", title="good"))
    bad = store.create_run(RunInfo(run_id="bad", title="bad"))
    if isinstance(damage, dict):
        bad.info_path.write_text(json.dumps({**json.loads(bad.info_path.read_text()), **damage}))
    elif isinstance(damage, bytes):
        bad.info_path.write_bytes(damage)
    else:
        bad.info_path.write_text(damage)
    before = bad.info_path.read_bytes()
    assert [i.run_id for i in store.list_runs()] == ["good"]
    with pytest.raises(StoreError, match="is damaged"):
        bad.info
    assert bad.info_path.read_bytes() == before


def test_null_fields_read_as_their_defaults():
    store = RunStore()
    run = store.create_run(RunInfo(run_id="old", title="old"))
    run.info_path.write_text(json.dumps({**json.loads(run.info_path.read_text()), "query": None, "models": None}))
    info = run.info
    assert (info.query, info.models, info.title) == ("", [], "old")


def test_damaged_runs_names_each_skipped_run_and_why():
    store = RunStore()
    store.create_run(RunInfo(run_id="good", title="good"))
    bad = store.create_run(RunInfo(run_id="bad", title="bad"))
    bad.info_path.write_text('{"title": 3}')
    assert store.damaged_runs() == [("bad", f"{bad.info_path} is damaged ('title' should be text, not int); fix that "
                                            "field or restore the file.")]
