"""core.curation: the append-only log of tags, relabels and exclusions, its replay and undo, its
checks, and two writers at once."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading

import pandas as pd
import pytest

from core.curation import (BUILTIN_TAGS, CurationError, log_path, read_curation, record, replay, run_images, undo,
                           parse_log)
from core.runstore import RunStore

TABBY, TIGER_CAT, PERSIAN = "n02123045", "n02123159", "n02123394"
IMAGES = [f"{TABBY}/{i:016x}.jpg" for i in range(6)]


@pytest.fixture
def run():
    return RunStore().create_run(run_id="cur")


def test_actions_replay_last_word_wins_and_summary(run):
    record(run, "tag", IMAGES[:2], "not-a-photo", note="souvenir mugs", by="test")
    record(run, "tag", IMAGES[1], "several-objects")
    record(run, "untag", IMAGES[1], "not-a-photo")
    record(run, "relabel", IMAGES[2], TIGER_CAT)
    record(run, "relabel", IMAGES[2], PERSIAN)  # the later relabel replaces the earlier
    record(run, "exclude", IMAGES[3:5])
    record(run, "include", IMAGES[4])
    state = read_curation(run)
    assert state.tags == {IMAGES[0]: frozenset({"not-a-photo"}), IMAGES[1]: frozenset({"several-objects"})}
    assert state.relabels == {IMAGES[2]: PERSIAN}
    assert state.excluded == frozenset({IMAGES[3]})
    assert state.history[IMAGES[1]] == (1, 2, 3) and state.active
    assert state.summary() == "images: 2 tagged, 1 relabelled, 1 excluded"
    assert state.tagged("not-a-photo", "wrong-class") == {IMAGES[0]}
    assert [e.seq for e in state.entries] == list(range(1, 8)) and state.entries[0].note == "souvenir mugs"
    # readable by pandas, one row per entry
    frame = pd.read_json(log_path(run), lines=True)
    assert list(frame["action"]) == ["tag", "tag", "untag", "relabel", "relabel", "exclude", "include"]


def test_undo_takes_an_entry_back_exactly_and_all_undone_is_the_raw_run(run):
    record(run, "relabel", IMAGES[0], TIGER_CAT)
    record(run, "relabel", IMAGES[0], PERSIAN)
    record(run, "exclude", IMAGES[1])
    record(run, "tag", IMAGES[2], "wrong-class")
    undo(run, 2)
    assert read_curation(run).relabels == {IMAGES[0]: TIGER_CAT}  # as if #2 never happened
    for seq in (1, 3, 4):
        undo(run, seq)
    state = read_curation(run)
    assert not state.active and state.undone == {1, 2, 3, 4} and state.problems == ()
    with pytest.raises(CurationError, match="already undone"):
        undo(run, 2)
    with pytest.raises(CurationError, match="itself an undo"):
        undo(run, 5)
    with pytest.raises(CurationError, match="no entry #99"):
        undo(run, 99)


@pytest.mark.parametrize("action, images, value, match", [
    ("tag", IMAGES[0], "", "empty tag"),
    ("tag", IMAGES[0], "x" * 41, "at most 40"),
    ("tag", IMAGES[0], "bad\x1b[31mtag", "printable"),
    ("tag", IMAGES[0], ["not-a-photo"], "a tag is text"),
    ("relabel", IMAGES[0], "n99999999", "not the wnid of a WordNet"),
    ("relabel", IMAGES[0], "tabby", "not the wnid of a WordNet"),
    ("undo", IMAGES[0], "1", "number"),
    ("frob", IMAGES[0], None, "unknown action"),
    ("exclude", [], None, "no image named"),
    ("exclude", ["a\nb.jpg"], None, "not an image name"),
    ("exclude", [3], None, "not an image name"),
])
def test_bad_actions_are_refused_in_one_line_and_nothing_is_written(run, action, images, value, match):
    with pytest.raises(CurationError, match=match) as info:
        record(run, action, images, value)
    assert "\n" not in str(info.value)
    assert not log_path(run).exists()


def test_free_tags_and_notes_are_kept_as_one_line_of_text(run):
    entry = record(run, "tag", IMAGES[0], "  =HYPERLINK(\"http://x\")  ", note="<script>alert(1)</script>\n  two")
    assert entry.value == '=HYPERLINK("http://x")' and entry.note == "<script>alert(1)</script> two"
    assert read_curation(run).tags[IMAGES[0]] == {'=HYPERLINK("http://x")'}
    with pytest.raises(CurationError, match="at most 500"):
        record(run, "tag", IMAGES[0], "x", note="n" * 501)


def test_an_image_the_run_lacks_is_refused(run):
    with pytest.raises(CurationError, match="no image of run cur"):
        record(run, "exclude", [IMAGES[0], "typo.jpg"], known_images=set(IMAGES))
    record(run, "exclude", IMAGES[0], known_images=IMAGES)
    assert read_curation(run).excluded == {IMAGES[0]}


def test_run_images_are_the_manifest_files_and_the_predicted_images(run):
    from core.runstore import MANIFEST_SCHEMA, PREDICTION_SCHEMA, conform

    run.write_manifest(conform(pd.DataFrame({"wnid": [TABBY, TABBY], "file": [IMAGES[0], pd.NA],
                                             "status": ["accepted", "rejected"]}), MANIFEST_SCHEMA))
    run.append_predictions(conform(pd.DataFrame({"model": ["m"], "image": ["row-1"], "true_wnid": [TABBY],
                                                 "pred_wnid": [TABBY], "status": ["ok"]}), PREDICTION_SCHEMA))
    assert run_images(run) == {IMAGES[0], "row-1"}


def test_run_images_say_why_an_uploaded_runs_predictions_cannot_be_read(run, tmp_path):
    """A part refused when read (a symbolic link): a run with a manifest still names its stored files; a run
    of uploaded predictions (no manifest) has no other list of its images, so the refusal's one line is
    raised, not an empty set that made every curation say 'unknown image'."""
    from core.runstore import MANIFEST_SCHEMA, PREDICTION_SCHEMA, StoreError, conform

    run.append_predictions(conform(pd.DataFrame({"model": ["m"], "image": ["row-1"], "true_wnid": [TABBY],
                                                 "pred_wnid": [TABBY], "status": ["ok"]}), PREDICTION_SCHEMA))
    part = next(run.predictions_dir.glob("m/part-*.parquet"))
    (tmp_path / "outside.parquet").write_bytes(part.read_bytes())
    part.unlink()
    part.symlink_to(tmp_path / "outside.parquet")
    with pytest.raises(StoreError, match="is a symbolic link"):
        run_images(run)
    run.write_manifest(conform(pd.DataFrame({"wnid": [TABBY], "file": [IMAGES[0]], "status": ["accepted"]}),
                               MANIFEST_SCHEMA))
    assert run_images(run) == {IMAGES[0]}


def test_damaged_lines_are_kept_reported_and_skipped(run):
    record(run, "tag", IMAGES[0], "duplicate")
    path = log_path(run)
    good = path.read_bytes()
    junk = b'{"seq": 2, "action": "explode", "images": ["x"]}\nnot json at all\n{"seq": 1, "action": "exclude", "images": ["y"]}\n'
    path.write_bytes(good + junk + b'{"seq": 9, "action": "excl')  # a torn last line, no newline
    state = read_curation(run)
    assert len(state.problems) == 4 and state.tags == {IMAGES[0]: {"duplicate"}}
    assert any("unknown action" in p for p in state.problems) and any("repeats" in p for p in state.problems)
    entry = record(run, "exclude", IMAGES[1])
    assert entry.seq == 3  # above every seq a line names, valid or not (the 'explode' line holds 2)
    data = path.read_bytes()
    assert data.startswith(good + junk + b'{"seq": 9, "action": "excl\n')  # kept byte for byte
    assert read_curation(run).excluded == {IMAGES[1]}


def test_a_log_that_is_no_regular_file_is_refused(run, tmp_path):
    folder = log_path(run).parent
    folder.mkdir()
    os.mkfifo(log_path(run))
    with pytest.raises(CurationError, match="regular file"):
        read_curation(run)
    os.unlink(log_path(run))
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps({"seq": 1, "action": "exclude", "images": ["a"]}) + "\n")
    os.symlink(outside, log_path(run))
    with pytest.raises(CurationError, match="cannot be opened"):
        read_curation(run)
    with pytest.raises(CurationError):
        record(run, "exclude", IMAGES[0])
    assert outside.read_text().count("\n") == 1  # the file the link names is untouched
    import shutil

    shutil.rmtree(folder)
    os.symlink(tmp_path, folder)
    with pytest.raises(CurationError, match="symbolic link"):
        record(run, "exclude", IMAGES[0])
    assert not (tmp_path / "log.jsonl").exists()


def test_a_deleted_run_is_not_made_again(run):
    store = RunStore()
    store.delete_run("cur")
    with pytest.raises(CurationError, match="gone"):
        record(run, "exclude", IMAGES[0])
    assert not run.path.exists()


def _append_many(root: str, prefix: str, n: int) -> None:
    os.environ["WILDLENS_HOME"] = root
    run = RunStore().open_run("cur")
    for i in range(n):
        record(run, "tag", IMAGES[i % len(IMAGES)], f"{prefix}-{i}", by=prefix)


def test_two_writers_never_lose_an_entry(run):
    """A dashboard (threads) and a command line (another process) appending at once: every entry
    is there once, with its own seq."""
    root = os.environ["WILDLENS_HOME"]
    process = multiprocessing.get_context("spawn").Process(target=_append_many, args=(root, "cli", 25))
    process.start()
    threads = [threading.Thread(target=_append_many, args=(root, f"page{t}", 15)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    process.join(60)
    assert process.exitcode == 0
    state = read_curation(run)
    assert [e.seq for e in state.entries] == list(range(1, 56)) and state.problems == ()
    assert sorted(e.value for e in state.entries) == sorted([f"cli-{i}" for i in range(25)]
                                                            + [f"page{t}-{i}" for t in range(2) for i in range(15)])


def test_replay_reports_an_undo_of_nothing():
    entries, problems = parse_log(b'{"seq":1,"action":"undo","value":5,"images":["a"]}\n')
    state = replay(entries, problems)
    assert state.problems and not state.active
    assert set(BUILTIN_TAGS) >= {"not-a-photo", "wrong-class"}


def test_a_lock_that_cannot_be_taken_refuses_the_write(run):
    """A folder (or a dangling link) where the curation lock belongs: one line, nothing written
    unlocked (hostile campaign: 360 acknowledged entries of 6 writers kept 42)."""
    folder = log_path(run).parent
    folder.mkdir()
    (folder / ".wildlens-curation.lock").mkdir()
    with pytest.raises(CurationError, match="cannot take the lock"):
        record(run, "exclude", IMAGES[0])
    assert not log_path(run).exists()
    (folder / ".wildlens-curation.lock").rmdir()
    os.symlink(folder / "nowhere", folder / ".wildlens-curation.lock")
    with pytest.raises(CurationError, match="cannot take the lock"):
        record(run, "exclude", IMAGES[0])


def test_a_folder_or_file_in_place_of_the_log_says_so(run):
    folder = log_path(run).parent
    folder.mkdir()
    log_path(run).mkdir()
    with pytest.raises(CurationError, match="is a folder; move it away"):
        read_curation(run)
    log_path(run).rmdir()
    folder.rmdir()
    folder.write_text("not a folder")
    with pytest.raises(CurationError, match="is a file, not the run's curation folder"):
        record(run, "exclude", IMAGES[0])


def test_a_tag_cannot_hold_the_separator_and_times_are_printable(run):
    with pytest.raises(CurationError, match="cannot hold ';'"):
        record(run, "tag", IMAGES[0], "blurry; small")
    line = rb'{"seq":1,"action":"exclude","images":["a"],"time":"\u001b[2J\u202e","by":"\u0007x"}'  # JSON escapes
    entries, _ = parse_log(line + b"\n")
    assert entries[0].time == "" and entries[0].by == ""
