"""Issue 22 items 2 and 20: the manifest's writers, together and at scale.

* An analyst's exclusions (``Run.set_excluded``: the Images page, a label issue) made while an
  import or a crawl adds to the same run are kept: every writer re-reads the manifest under the
  run's manifest lock. Tested with two real processes (an import running in a child process while
  this one excludes).
* The manifest is rewritten O(log n) times, not every 10 rows (the quadratic step: 40,000 files
  took 420 s), and a kill -9 at any point still loses and duplicates nothing.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.crawl import fake_engine as T
from crawl.config import ValidationConfig
from crawl.importer import import_folder
from crawl.store import Collector, FolderDestination, RunDestination
from crawl.validate import Rejected, validate_image
from core.runstore import RunStore

TABBY, TIGER_CAT = "n02123045", "n02123159"
ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}  # read in the test: WILDLENS_HOME is the test's


def _images(folder: Path, seeds, size=(64, 64)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (folder / f"img{seed:06d}.jpg").write_bytes(T.jpeg(seed, size=size))


def test_exclusions_made_during_an_import_in_another_process_are_kept(tmp_path):
    """Before: the importer held the manifest in memory and rewrote it every 10 rows, so '5 excluded
    of 122 rows' became '0 excluded of 332'."""
    store = RunStore()
    run = store.create_run(run_id="r", query="cat", sense="cat.n.01")
    _images(tmp_path / "first" / TABBY, range(40))
    import_folder(tmp_path / "first", run)
    files = run.read_manifest()["file"].dropna().tolist()
    assert len(files) == 40
    _images(tmp_path / "second" / TIGER_CAT, range(1000, 2500))
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "import", str(tmp_path / "second"), "--run", "r",
                             "--no-progress"], cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(run.read_manifest()) <= 40 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the child is writing: its rows reach the manifest
        excluded = []
        for file in files[:5]:
            assert run.set_excluded([file], True, "blurry") == 1
            excluded.append(file)
            time.sleep(0.05)
        still_running = proc.poll() is None
        assert proc.wait(120) == 0, proc.stderr.read().decode()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert still_running, "the import ended before the exclusions: make it bigger"
    manifest = run.read_manifest()
    assert len(manifest) == 40 + 1500
    assert sorted(manifest.loc[manifest["excluded"].astype(bool), "file"]) == sorted(excluded)
    assert (manifest.loc[manifest["excluded"].astype(bool), "excluded_reason"] == "blurry").all()
    assert len(run.usable_images()) == (manifest["status"] == "accepted").sum() - 5


def test_an_exclusion_between_two_saves_of_a_collector_is_kept(tmp_path):
    """The same in one process, step by step: the collector's next save re-reads the exclusions."""
    run = RunStore().create_run(run_id="r2")
    dest = RunDestination(run)
    collector = Collector(dest, ValidationConfig(), save_every=1)
    for i in range(3):
        data = T.jpeg(700 + i)
        collector.record(TABBY, {"source": "import", "original_name": f"{i}.jpg"}, facts=validate_image(data), data=data)
    collector.save()
    first = run.read_manifest().loc[0, "file"]
    run.set_excluded([first], True, "wrong class")
    assert collector.usable_count(TABBY) == 3
    data = T.jpeg(710)
    collector.record(TABBY, {"source": "import", "original_name": "3.jpg"}, facts=validate_image(data), data=data)
    collector.save()
    manifest = run.read_manifest()
    assert manifest.loc[0, ["excluded", "excluded_reason"]].tolist() == [True, "wrong class"]
    assert len(manifest) == 4 and collector.usable_count(TABBY) == 3  # the exclusion counts against k
    assert bool(collector.manifest().loc[0, "excluded"])  # what the summary reports


def test_the_manifest_is_rewritten_a_logarithmic_number_of_times(tmp_path, monkeypatch):
    """Before: every 10 rows (n/10 rewrites of up to n rows: quadratic)."""
    written = []
    real = FolderDestination.write_manifest

    def counting(self, df):
        written.append(len(df))
        real(self, df)

    monkeypatch.setattr(FolderDestination, "write_manifest", counting)
    collector = Collector(FolderDestination(tmp_path), ValidationConfig())
    for i in range(3000):
        collector.record(TABBY, {"source": "import", "original_name": f"{i}.jpg"},
                         rejection=Rejected("empty", "0 bytes"))
    collector.save()
    assert len(FolderDestination(tmp_path).read_manifest()) == 3000
    assert sum(written) <= 12 * 3000, f"{len(written)} rewrites of {sum(written)} rows for 3000 rows"
    assert len(written) <= 60


def _consistent(out: Path) -> pd.DataFrame:
    manifest = FolderDestination(out).read_manifest()
    assert not manifest.duplicated(["wnid", "original_name"]).any(), "one row per imported file"
    accepted = manifest[manifest["status"] == "accepted"]
    on_disk = {p.relative_to(out).as_posix() for p in out.glob("n*/*")}
    assert on_disk == set(accepted["file"]), "every stored file has a row, every accepted row its file"
    assert not list(out.rglob("*.tmp"))
    return manifest


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.4, 0.8])
def test_an_import_killed_at_any_point_resumes_without_loss_or_duplicates(tmp_path, delay):
    """kill -9 at several points of a command-line import (journal writes, file stores, manifest
    saves), then the same import again: every file has exactly one row, every stored file its row."""
    src = tmp_path / "src"
    _images(src / TABBY, range(3000, 4500))
    (src / TABBY / "dup.jpg").write_bytes(T.jpeg(3000))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "import", str(src), "--out", str(out), "--no-progress"],
                            cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (out / "manifest.csv").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, "the import ended before the kill: make it bigger"
    summary = import_folder(src, out)
    manifest = _consistent(out)
    assert len(manifest) == 1501 and (manifest["status"] == "duplicate").sum() >= 1
    assert summary.already_imported + summary.new_rows == 1501


def test_a_file_that_cannot_be_stored_stops_the_import_with_one_line_and_loses_nothing(tmp_path, monkeypatch):
    """The files are stored by writer threads now: a failing one (a full disk) must still stop the
    import with a one-line error, and leave a manifest whose accepted rows all have their file."""
    import crawl.store
    from crawl.store import CollectError

    src = tmp_path / "src"
    _images(src / TABBY, range(4000, 4060))
    real = T.disk_full_after(monkeypatch, 25)
    out = tmp_path / "out"
    with pytest.raises(CollectError, match=r"^Cannot store images in .*No space left on device.*run the same "
                                           r"command again to resume\.$"):
        import_folder(src, out)
    stored = _consistent(out)
    assert 20 <= (stored["status"] == "accepted").sum() <= 25
    monkeypatch.setattr(crawl.store, "write_bytes_atomic", real)
    import_folder(src, out)
    assert (_consistent(out)["status"] == "accepted").sum() == 60


@pytest.mark.parametrize("failure", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_a_writer_that_dies_of_anything_leaves_its_row_out(tmp_path, monkeypatch, failure):
    """Hostile campaign: a writer ending in a KeyboardInterrupt or SystemExit (not an Exception)
    was taken off the pending list before its outcome was known, so the manifest listed its row
    without the file. Any failure now leaves the row out, and the save says so in one line."""
    import crawl.store
    from crawl.config import ValidationConfig
    from crawl.store import CollectError, Collector, FolderDestination
    from crawl.validate import validate_image

    real, calls = crawl.store.write_bytes_atomic, []

    def dying(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise failure("the writer died")
        real(path, data)

    monkeypatch.setattr(crawl.store, "write_bytes_atomic", dying)
    collector = Collector(FolderDestination(tmp_path), ValidationConfig(), writers=2)
    for i in range(6):
        data = T.jpeg(7000 + i)
        try:
            collector.record(TABBY, {"source": "bing", "url": f"http://img.test/{i}.jpg"}, facts=validate_image(data),
                             data=data)
        except (CollectError, KeyboardInterrupt, SystemExit):
            pass  # a download thread would stop here
    with pytest.raises(CollectError, match="^Cannot store images in "):
        collector.save()
    manifest = FolderDestination(tmp_path).read_manifest()
    accepted = manifest[manifest["status"] == "accepted"]
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("n*/*")}
    assert on_disk == set(accepted["file"]), "every stored file has a row, every accepted row its file"
    assert not list(tmp_path.rglob("*.tmp")) and 2 <= len(accepted) <= 5


def test_an_import_into_a_new_run_killed_part_way_resumes_on_the_next_run(tmp_path):
    """A hostile campaign: `crawl import SRC --run NEW` killed part-way started over on the next run, and each killed
    attempt left a partial copy in runs/.import-* for a day. kill -9 once some images are stored, then the same
    import again: the staging folder is taken up (the images stored before kept), the run ends as a clean import
    of the same folder ends, nothing is left behind. Another import (another source) never takes it."""
    import json

    import crawl.importer as importer
    from crawl.importer import IMPORT_MARKER, STAGING_PREFIX, import_new_run

    src = tmp_path / "src"
    _images(src / TABBY, range(5000, 5600))
    store = RunStore()
    proc = subprocess.Popen([sys.executable, "-m", "crawl", "import", str(src), "--run", "fresh", "--no-progress"],
                            cwd=ROOT, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline and \
            len(list(store.runs_dir.glob(f"{STAGING_PREFIX}*/images/{TABBY}/*"))) < 20:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, "the import ended before the kill: make it bigger"
    (left,) = store.runs_dir.glob(f"{STAGING_PREFIX}*")
    saved = json.loads((left / IMPORT_MARKER).read_text())
    assert saved["run_id"] == "fresh" and saved["source"] == str(src.resolve())
    other = tmp_path / "other"
    for change in ({"source": str(other)}, {"run_id": "other"}, {"follow_links": True}):
        assert importer._resumable_staging(store, {**saved, **change}) is None  # another import: never taken
    summary = import_new_run(src, run_id="fresh", label_space="imagenet-1k")
    assert any(n.startswith("took up the staging folder of an earlier import of run fresh") for n in summary.notes)
    assert summary.already_imported >= 10  # (the 20 files seen may include a temporary file being written)
    assert not list(store.runs_dir.glob(f"{STAGING_PREFIX}*")), "no partial copy left"
    assert not (store.runs_dir / "fresh" / IMPORT_MARKER).exists()
    clean = import_new_run(src, run_id="clean", label_space="imagenet-1k")
    key = ["wnid", "sha256", "status", "original_name"]
    resumed, whole = (store.open_run(r).read_manifest()[key].astype(str) for r in ("fresh", "clean"))
    assert sorted(map(tuple, resumed.values)) == sorted(map(tuple, whole.values))
    assert clean.wnids == summary.wnids
    files = {p.name for p in (store.runs_dir / "fresh" / "images" / TABBY).iterdir()}
    assert files == {Path(f).name for f in store.open_run("fresh").read_manifest().query("status == 'accepted'")["file"]}


@pytest.mark.parametrize("failure", ["interrupt", "disk full at a file", "disk full at the journal", "fault"])
def test_an_import_into_a_new_run_that_stops_on_an_error_resumes_on_the_next_run(tmp_path, monkeypatch, failure):
    """A hostile campaign: `crawl import SRC --run NEW` stopped by Ctrl-C (or the dashboard's next page) or by a
    full disk (a file's write, or the journal's, where a full disk usually shows first and which was a 45-line
    traceback) removed its staging folder, so the next run started over from the first image. Those keep it,
    marker written again, and the same import takes it up; a fault of unknown state still removes it."""
    import errno

    import crawl.importer as importer
    import crawl.store as store_module
    from crawl.importer import IMPORT_MARKER, STAGING_PREFIX, import_new_run
    from crawl.store import StoreFailure

    src = tmp_path / "src"
    _images(src / TABBY, range(7000, 7012))
    store = RunStore()
    calls = []

    def failing_at_the_sixth(real, error):
        def call(*args, **kwargs):
            calls.append(1)
            if len(calls) == 6:
                raise error
            return real(*args, **kwargs)
        return call

    if failure == "disk full at a file":
        monkeypatch.setattr(store_module, "write_bytes_atomic", failing_at_the_sixth(
            store_module.write_bytes_atomic, OSError(errno.ENOSPC, "No space left on device")))
    elif failure == "disk full at the journal":
        real_journal = store_module.Collector._journal

        def journal(self, index, row):
            calls.append(1)
            if len(calls) == 6:
                real_write = os.write
                monkeypatch.setattr(store_module.os, "write", lambda fd, data: (_ for _ in ()).throw(
                    OSError(errno.ENOSPC, "No space left on device")))
                try:
                    return real_journal(self, index, row)
                finally:
                    monkeypatch.setattr(store_module.os, "write", real_write)
            return real_journal(self, index, row)

        monkeypatch.setattr(store_module.Collector, "_journal", journal)
    else:
        monkeypatch.setattr(importer, "_import_one", failing_at_the_sixth(
            importer._import_one, KeyboardInterrupt() if failure == "interrupt" else RuntimeError("a bug")))
    with pytest.raises((KeyboardInterrupt, StoreFailure, RuntimeError)) as caught:
        import_new_run(src, run_id="fresh", label_space="imagenet-1k", store=store)
    if failure.startswith("disk full"):
        assert isinstance(caught.value, StoreFailure) and "run the same command again to resume" in str(caught.value)
    calls.extend([1] * 100)  # the patches stay, but fail no more: the resume below runs as on a disk with room
    left = list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))
    assert store.list_runs() == [], "no run before the import ends"
    if failure == "fault":
        assert left == [], "a fault of unknown state leaves nothing"
        return
    (staging,) = left
    assert (staging / IMPORT_MARKER).is_file(), "the marker the same import takes the folder up by"
    summary = import_new_run(src, run_id="fresh", label_space="imagenet-1k", store=store)
    assert any(n.startswith("took up the staging folder of an earlier import of run fresh") for n in summary.notes)
    assert summary.already_imported >= 4 and summary.already_imported + summary.new_accepted == 12
    assert not list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))
    manifest = store.open_run("fresh").read_manifest()
    accepted = manifest[manifest["status"] == "accepted"]
    assert len(accepted) == 12 and not manifest.duplicated("sha256").any()
    files = {p.name for p in (store.runs_dir / "fresh" / "images" / TABBY).iterdir()}
    assert files == {Path(f).name for f in accepted["file"]}, "every accepted row has its file, and no other file"


def test_a_ctrl_c_during_an_import_into_a_new_run_says_that_running_it_again_resumes(tmp_path, monkeypatch, capsys):
    import crawl.importer as importer
    from crawl.cli import main

    src = tmp_path / "src"
    _images(src / TABBY, range(7100, 7104))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importer, "_import_one", interrupted)
    assert main(["import", str(src), "--run", "fresh", "--no-progress"]) == 130
    assert capsys.readouterr().err == ("interrupted: no run was created yet; run the same command again to resume "
                                       "the import\n")


def test_the_dashboards_import_left_mid_way_resumes_under_the_run_id_it_was_given(tmp_path, monkeypatch):
    """The Import page gives no run id (each import gets a fresh one from its title): an import the reader
    left mid-way (Streamlit stops the script with an exception that is no Exception) is taken up by the same
    import of the same folder and title, under the id it was given then; another title starts anew."""
    import crawl.importer as importer
    from crawl.importer import STAGING_PREFIX, import_new_run

    class PageLeft(BaseException):  # as Streamlit's StopException
        pass

    src = tmp_path / "src"
    _images(src / TABBY, range(7200, 7208))
    store = RunStore()
    real, calls = importer._import_one, []

    def left_at_the_fourth(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise PageLeft()
        return real(*args, **kwargs)

    monkeypatch.setattr(importer, "_import_one", left_at_the_fourth)
    with pytest.raises(PageLeft):
        import_new_run(src, store=store, title="Cats")
    monkeypatch.setattr(importer, "_import_one", real)
    (staging,) = store.runs_dir.glob(f"{STAGING_PREFIX}*")
    first_id = json.loads((staging / "run.json").read_text())["run_id"]
    other = import_new_run(src, store=store, title="Other cats")
    assert other.run_id != first_id and other.already_imported == 0, "another title: another import"
    # Stopped a second time after taking the folder up: the id survives (run.json held '.import-<token>'
    # once the title was written again, and the third import made a new id; review).
    seen = []

    def left_at_the_sixth(*args, **kwargs):  # every file is handed over again, the 3 recorded ones included
        seen.append(1)
        if len(seen) == 6:
            raise PageLeft()
        return real(*args, **kwargs)

    monkeypatch.setattr(importer, "_import_one", left_at_the_sixth)
    with pytest.raises(PageLeft):
        import_new_run(src, store=store, title="Cats")
    monkeypatch.setattr(importer, "_import_one", real)
    summary = import_new_run(src, store=store, title="Cats")
    assert summary.run_id == first_id, "the id the import was given when it started"
    assert summary.already_imported == 5 and summary.new_accepted == 3
    assert json.loads((store.runs_dir / first_id / "run.json").read_text())["run_id"] == first_id
    assert not list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))
    assert sorted(r.run_id for r in store.list_runs()) == sorted([first_id, other.run_id])


def test_an_import_of_thousands_of_class_folders_is_taken_up_too(tmp_path, monkeypatch):
    """The marker lists the class folders: 3,000 made 78 KB, over the 64 KiB it was read with, and such an
    import never resumed (hostile check). A title as long makes a marker as large."""
    import crawl.importer as importer
    from crawl.importer import IMPORT_MARKER, STAGING_PREFIX, import_new_run

    src = tmp_path / "src"
    _images(src / TABBY, range(7300, 7304))
    store = RunStore()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    title = "A title as long as a marker of 3,000 class folders " * 2000
    real = importer._import_one
    monkeypatch.setattr(importer, "_import_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_new_run(src, store=store, title=title)
    monkeypatch.setattr(importer, "_import_one", real)
    (staging,) = store.runs_dir.glob(f"{STAGING_PREFIX}*")
    assert (staging / IMPORT_MARKER).stat().st_size > 64 << 10
    summary = import_new_run(src, store=store, title=title)
    assert any(n.startswith("took up the staging folder") for n in summary.notes)
    assert not list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))


def test_an_interrupt_landing_just_after_the_rename_leaves_the_run_and_no_empty_staging_folder(tmp_path, monkeypatch):
    """A Ctrl-C that arrives as os.rename returns (CPython raises it then): the run is in place; the marker
    was written again into a staging folder made anew, which the next import took up and failed on (no
    run.json; hostile check)."""
    import crawl.importer as importer
    from crawl.importer import STAGING_PREFIX, import_new_run

    src = tmp_path / "src"
    _images(src / TABBY, range(7400, 7403))
    store = RunStore()
    real = os.rename

    def renamed_then_interrupted(a, b):
        real(a, b)
        if Path(b).name == "done":
            raise KeyboardInterrupt

    monkeypatch.setattr(importer.os, "rename", renamed_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_new_run(src, store=store, run_id="done", label_space="imagenet-1k")
    assert [r.run_id for r in store.list_runs()] == ["done"]
    assert not list(store.runs_dir.glob(f"{STAGING_PREFIX}*")), "no staging folder made anew"


def test_a_ctrl_c_while_waiting_for_a_writer_that_finished_is_an_interrupt_not_a_full_disk(tmp_path):
    """A Ctrl-C landing as the writer finished: the wait saw a done future and took the KeyboardInterrupt
    for the write's failure, and the import said "Cannot store images ... make room", exit 2 (hostile check)."""
    from concurrent.futures import Future

    class InterruptedWait(Future):
        def result(self, timeout=None):  # done, successfully, when the Ctrl-C arrives in the wait
            raise KeyboardInterrupt

    collector = Collector(FolderDestination(tmp_path / "out"), ValidationConfig(), writers=2)
    done = InterruptedWait()
    done.set_result(None)
    collector._pending.append((0, done))
    with pytest.raises(KeyboardInterrupt):
        collector._wait_one()
    assert collector._store_error is None and not collector._failed
    assert collector._pending == [(0, done)], "still pending: a later wait counts it"


def _stopped_at_the_first_file(monkeypatch, src, store, **kwargs) -> None:
    """An import into a new run stopped by Ctrl-C at its first file: its staging folder kept for the resume."""
    import crawl.importer as importer

    real = importer._import_one

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importer, "_import_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        importer.import_new_run(src, store=store, **kwargs)
    monkeypatch.setattr(importer, "_import_one", real)


@pytest.mark.parametrize("change", ["none", "changed and removed", "special files", "rejected before", "two stops"])
def test_a_resume_after_the_source_changed_says_how_the_run_differs_from_an_import_of_it_now(tmp_path, monkeypatch,
                                                                                             change):
    """A file the stopped import had imported and that has other bytes in the source now is in the run twice
    (the old copy and the new), one removed from the source (or now a FIFO, a link, a folder) stays: the
    resumed import said nothing of it (a hostile check). Counted from the run's manifest at the end: a change
    that a second, stopped pass saw is said too, and an earlier version that was rejected is no second one."""
    import crawl.importer as importer
    from crawl.importer import STAGING_PREFIX

    src = tmp_path / "src"
    _images(src / TABBY, range(7600, 7608))
    if change == "rejected before":
        (src / TABBY / "img007600.jpg").write_bytes(b"not an image")
    store = RunStore()
    real, calls = importer._import_one, []

    def stopped_after(n):
        def stopped(*args, **kwargs):
            if len(calls) == n:
                raise KeyboardInterrupt
            calls.append(args[2].original)
            return real(*args, **kwargs)
        return stopped

    def stop_at(n):
        monkeypatch.setattr(importer, "_import_one", stopped_after(n))
        calls.clear()
        with pytest.raises(KeyboardInterrupt):
            importer.import_new_run(src, store=store, run_id="changed", label_space="imagenet-1k")
        monkeypatch.setattr(importer, "_import_one", real)

    stop_at(4)
    assert len(list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))) == 1
    first = sorted(p for p in src.rglob("*.jpg") if any(original.endswith(p.name) for original in calls))
    assert len(first) == 4
    if change == "changed and removed":
        first[1].write_bytes(T.jpeg(7700, size=(64, 64)))
        first[2].unlink()
    elif change == "special files":
        for path in first[1:4]:
            path.unlink()
        os.mkfifo(first[1])
        (tmp_path / "outside.jpg").write_bytes(T.jpeg(7703, size=(64, 64)))
        os.symlink(tmp_path / "outside.jpg", first[2])  # out of the source: not read
        first[3].mkdir()
    elif change == "rejected before":
        first[0].write_bytes(T.jpeg(7701, size=(64, 64)))
    elif change == "two stops":
        first[1].write_bytes(T.jpeg(7702, size=(64, 64)))
        stop_at(3)  # this pass reads the new version, then stops again
    summary = importer.import_new_run(src, store=store, run_id="changed", label_space="imagenet-1k")
    notes = " ".join(summary.notes)
    assert "took up the staging folder" in notes
    said = {"changed and removed": "1 changed (each version is in the run) and 1 are no longer readable files there "
                                   "(kept in the run)",
            "special files": "3 are no longer readable files there (kept in the run)",
            "two stops": "1 changed (each version is in the run)"}.get(change)
    if said is None:
        assert "source changed" not in notes, notes
    else:
        assert (f"the source changed while the import was stopped: of the files it had imported, {said}; for a run "
                "of the source as it is now, import it again under another run id") in notes, notes
    usable = len(store.open_run("changed").usable_images())
    assert usable == {"changed and removed": 9, "two stops": 9, "rejected before": 8}.get(change, 8)


def test_two_stops_of_one_dashboard_import_make_one_run_and_leave_no_copy(tmp_path, monkeypatch):
    """Two stops of the same dashboard import before either was taken up (two tabs, or a retry while the
    first still ran) kept two staging folders: the next import took up one, the one after the other, and
    made a second run of the same images (review). The run's import now removes the other copy."""
    from crawl.importer import STAGING_PREFIX, import_new_run

    src = tmp_path / "src"
    _images(src / TABBY, range(7500, 7506))
    store = RunStore()
    _stopped_at_the_first_file(monkeypatch, src, store, title="Cats")
    # The second, stopped while the first held its folder (one after the other, the second takes the first up).
    (first,) = store.runs_dir.glob(f"{STAGING_PREFIX}*")
    shutil.copytree(first, store.runs_dir / f"{STAGING_PREFIX}000000000000")
    live = store.runs_dir / f"{STAGING_PREFIX}000000000001"  # a third, whose import still runs (holds its lock)
    shutil.copytree(first, live)
    assert len(list(store.runs_dir.glob(f"{STAGING_PREFIX}*"))) == 3
    from core.locking import exclusive_lock
    from crawl.store import LOCK_NAME

    with exclusive_lock(live, name=LOCK_NAME):
        import_new_run(src, store=store, title="Cats")
    assert list(store.runs_dir.glob(f"{STAGING_PREFIX}*")) == [live], \
        "the other copy of the same import is removed; one whose import runs is left alone"
    import_new_run(src, store=store, title="Other")  # another import: a run of its own, as always
    assert len(store.list_runs()) == 2


def test_a_full_disk_without_writer_threads_records_the_rest_and_says_so_once(tmp_path, monkeypatch):
    """A collector without writer threads whose file write fails: one line, the rows before it kept and the
    rejections after it recorded. The first version marked an index no row had yet, and the save died in an
    IndexError (or dropped the next rejection in its place; review)."""
    import errno

    import crawl.store as store_module
    from crawl.store import StoreFailure

    collector = Collector(FolderDestination(tmp_path), ValidationConfig())
    for i in range(3):
        data = T.jpeg(7600 + i)
        collector.record(TABBY, {"source": "import", "original_name": f"{i}.jpg"}, facts=validate_image(data), data=data)
    real = store_module.write_bytes_atomic
    monkeypatch.setattr(store_module, "write_bytes_atomic", lambda path, data: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    data = T.jpeg(7603)
    with pytest.raises(StoreFailure, match="No space left on device"):
        collector.record(TABBY, {"source": "import", "original_name": "3.jpg"}, facts=validate_image(data), data=data)
    collector.record(TABBY, {"source": "import", "original_name": "empty.jpg"}, rejection=Rejected("empty", "0 bytes"))
    monkeypatch.setattr(store_module, "write_bytes_atomic", real)
    with pytest.raises(StoreFailure, match="run the same command again to resume"):
        collector.save()
    manifest = FolderDestination(tmp_path).read_manifest()
    assert sorted(manifest["original_name"]) == ["0.jpg", "1.jpg", "2.jpg", "empty.jpg"]


def test_a_full_disk_at_the_journal_stops_the_collector_and_leaves_no_torn_line(tmp_path, monkeypatch):
    """The journal's write failing part-way: the collector stops as after a failed file (a crawl went on to
    its next term, short, never saying the disk was full), and the half line is cut off (the next line was
    glued onto it, and the replay stopped there, losing the rows after it; review)."""
    import errno

    import crawl.store as store_module
    from crawl.store import StoreFailure

    collector = Collector(FolderDestination(tmp_path), ValidationConfig(), writers=2, save_every=1000)
    collector.record(TABBY, {"source": "import", "original_name": "a.jpg"}, rejection=Rejected("empty", "0 bytes"))
    real = os.write

    def ten_bytes_then_full(fd, data):
        real(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.os, "write", ten_bytes_then_full)
    with pytest.raises(StoreFailure, match=r"Cannot record images in .*journal.*No space left on device"):
        collector.record(TABBY, {"source": "import", "original_name": "b.jpg"}, rejection=Rejected("empty", "0 bytes"))
    monkeypatch.setattr(store_module.os, "write", real)
    with pytest.raises(StoreFailure):
        collector.raise_if_store_failed()
    lines = FolderDestination(tmp_path).journal_path.read_bytes().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["row"]["original_name"] == "a.jpg", "no half line left"


def test_a_staging_folder_renamed_by_another_resume_is_not_made_again_empty(tmp_path, monkeypatch):
    """Two imports taking the same folder up: the loser's lock made the folder again, empty, under the name
    the winner had just renamed away (review). Its lock no longer makes folders."""
    import core.userfile as userfile
    import crawl.importer as importer
    from crawl.importer import STAGING_PREFIX

    src = tmp_path / "src"
    _images(src / TABBY, range(7700, 7703))
    store = RunStore()
    _stopped_at_the_first_file(monkeypatch, src, store, run_id="raced", label_space="imagenet-1k")
    (left,) = store.runs_dir.glob(f"{STAGING_PREFIX}*")
    winner = store.runs_dir / f"{STAGING_PREFIX}ffffffffffff"
    read = userfile.read_user_bytes

    def renamed_by_the_winner_after_the_first_read(path, *args, **kwargs):
        data = read(path, *args, **kwargs)
        if Path(path).parent == left and left.exists():
            os.rename(left, winner)  # the other import took it up just now
        return data

    monkeypatch.setattr(userfile, "read_user_bytes", renamed_by_the_winner_after_the_first_read)
    assert importer._resumable_staging(store, json.loads((left / importer.IMPORT_MARKER).read_bytes())) is None
    assert not left.exists(), "not made again, empty, under the old name"
    assert winner.is_dir()


def test_a_column_a_person_adds_during_a_run_stops_it_instead_of_being_dropped(tmp_path):
    """check_manifest runs before the work; a 'Notes' column added meanwhile (a long crawl) was dropped at the
    collector's next save (review). The save stops instead, the edit kept; the rows stay in the journal."""
    from crawl.store import ManifestEditError

    dest = FolderDestination(tmp_path / "out")
    collector = Collector(dest, ValidationConfig(), save_every=1000)
    collector.record(TABBY, {"source": "import", "original_name": "a.jpg"}, rejection=Rejected("empty", "0 bytes"))
    collector.save()
    path = dest.manifest_path
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",Notes"] + [line + ",mine" for line in lines[1:]]) + "\n")
    edited = path.read_bytes()
    collector.record(TABBY, {"source": "import", "original_name": "b.jpg"}, rejection=Rejected("empty", "0 bytes"))
    with pytest.raises(ManifestEditError, match="column 'Notes' is not WildLens's"):
        collector.save()
    assert path.read_bytes() == edited
    assert dest.journal_path.read_text().count("b.jpg") == 1, "the row waits in the journal for the resume"
