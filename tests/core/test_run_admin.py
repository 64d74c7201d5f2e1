"""Run administration (issue 12 item 2): a run can be renamed (title only) and deleted (its
folder and files, never anything outside the runs folder, never while a writer holds it)."""
import json
import threading

import pandas as pd
import pytest

from core.locking import FolderBusy, exclusive_lock
from core.runstore import RunInfo, RunStore, StoreError

TABBY = "n02123045"


def make_run(store: RunStore, run_id: str = "r1", title: str = "old title"):
    run = store.create_run(RunInfo(run_id=run_id, title=title, wnids=[TABBY], source="import"))
    (run.images_dir / TABBY).mkdir(parents=True)
    (run.images_dir / TABBY / "0123456789abcdef.jpg").write_bytes(b"jpeg")
    run.append_predictions(pd.DataFrame({"model": "m", "image": [f"{TABBY}/0123456789abcdef.jpg"], "true_wnid": [TABBY],
                                         "pred_wnid": [TABBY], "prob_1": 0.9, "label_space": "imagenet-1k",
                                         "status": "ok"}))
    return run


def test_rename_changes_the_title_only():
    store = RunStore()
    run = make_run(store)
    before = json.loads(run.info_path.read_text())
    info = store.rename_run("r1", "  Cats\nfrom   the garden ")
    assert info.title == "Cats from the garden" and store.open_run("r1").info.title == "Cats from the garden"
    after = json.loads(run.info_path.read_text())
    assert {k: v for k, v in after.items() if k != "title"} == {k: v for k, v in before.items() if k != "title"}
    assert [i.run_id for i in store.list_runs()] == ["r1"]
    assert not [p for p in run.path.iterdir() if p.name.endswith(".tmp")]  # written atomically, nothing left
    with pytest.raises(StoreError, match="needs a title"):
        store.rename_run("r1", " \n ")
    with pytest.raises(StoreError, match="No run 'nope'"):
        store.rename_run("nope", "x")
    assert len(store.rename_run("r1", "x" * 500).title) == 200


def test_delete_removes_the_run_folder_and_its_files():
    store = RunStore()
    keep = make_run(store, "keep")
    run = make_run(store, "gone")
    store.delete_run("gone")
    assert not run.path.exists()
    assert [i.run_id for i in store.list_runs()] == ["keep"]
    assert list(store.runs_dir.iterdir()) == [keep.path]  # no '.deleting-*' left
    with pytest.raises(StoreError, match="No run 'gone'"):
        store.delete_run("gone")


@pytest.mark.parametrize("bad", ["..", "../x", "/etc", "", ".hidden", "a/b"])
def test_delete_refuses_ids_that_are_not_run_folders(bad, tmp_path):
    store = RunStore()
    make_run(store)
    with pytest.raises(StoreError):
        store.delete_run(bad)
    assert (store.runs_dir / "r1" / "run.json").exists()


def test_delete_never_follows_links_out_of_the_runs_folder(tmp_path):
    store = RunStore()
    run = make_run(store)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (run.path / "link-to-outside").symlink_to(outside, target_is_directory=True)
    (run.images_dir / TABBY / "file-link.jpg").symlink_to(outside / "keep.txt")
    # a run folder that is itself a link elsewhere: only the link goes
    elsewhere = tmp_path / "elsewhere-run"
    elsewhere.mkdir()
    (elsewhere / "run.json").write_text(json.dumps({"run_id": "linked", "title": "t"}))
    (store.runs_dir / "linked").symlink_to(elsewhere, target_is_directory=True)
    store.delete_run("r1")
    store.delete_run("linked")
    assert (outside / "keep.txt").read_text() == "mine"
    assert (elsewhere / "run.json").exists()
    assert store.list_runs() == []


@pytest.mark.parametrize("where, name", [("", ".wildlens-collect.lock"), ("predictions", ".wildlens-classify.lock")])
def test_delete_is_refused_while_a_writer_holds_the_run(where, name):
    """A crawl or import locks the run folder (crawl.store), an inference its predictions folder
    (classify.targets): the same locks core.locking gives, checked from another thread here."""
    store = RunStore()
    run = make_run(store)
    holding, release = threading.Event(), threading.Event()

    def writer():
        with exclusive_lock(run.path / where if where else run.path, name=name):
            holding.set()
            release.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        with pytest.raises(FolderBusy) as info:
            store.delete_run("r1")
        message = str(info.value)
        assert "Run r1 is in use" in message and "\n" not in message
        assert (run.path / "run.json").exists() and [i.run_id for i in store.list_runs()] == ["r1"]
    finally:
        release.set()
        thread.join()
    store.delete_run("r1")  # the writer is done: now it goes
    assert store.list_runs() == []


def test_the_sample_run_can_be_deleted_and_staging_folders_are_not_runs():
    store = RunStore()
    store.create_run(RunInfo(run_id="sample", is_sample=True))
    staging = store.runs_dir / ".import-0123456789ab"
    staging.mkdir()
    (staging / "run.json").write_text(json.dumps({"run_id": "half-imported"}))
    assert [i.run_id for i in store.list_runs()] == ["sample"]  # an import in progress is no run yet
    store.delete_run("sample")
    assert store.list_runs() == [] and staging.exists()


def test_a_copied_run_folder_is_its_own_run(tmp_path):
    import shutil

    store = RunStore(tmp_path)
    original = store.create_run(title="original")
    shutil.copytree(original.path, store.runs_dir / "copy-of-it")
    ids = sorted(i.run_id for i in store.list_runs())
    assert ids == sorted([original.run_id, "copy-of-it"])
    assert store.open_run("copy-of-it").info.run_id == "copy-of-it"
