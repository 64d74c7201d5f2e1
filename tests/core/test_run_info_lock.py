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
