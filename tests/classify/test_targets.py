"""Targets against hostile folders and concurrent or killed runs (issue 11, items 3, 10, 11, 12):
only regular files inside DIR are read, every skipped entry is reported, an unwritable output
fails before inference, one classify run per parts folder, and a killed run's temporary files
are swept when it resumes."""
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import classify.engine.pipeline as pipeline
import classify.targets as targets
from classify.engine.types import InferenceOptions
from classify.targets import predict_folder, predict_run, scan_folder
from core.errors import WildLensError
from core.parts import PredictionParts
from core.runstore import RunInfo, RunStore
from tests.classify.doubles import make_test_double

SITE = Path(torch.__file__).resolve().parent.parent
ROOT = Path(__file__).resolve().parents[2]
CHELSEA = SITE / "skimage/data/chelsea.png"
COFFEE = SITE / "skimage/data/coffee.png"
CNN = make_test_double("test_efficientnet", "imagenet-1k")
FAST = InferenceOptions(num_workers=0, backend="torch")


@pytest.fixture()
def fixed_weights(monkeypatch):
    from classify.models.weights import load_model

    torch.manual_seed(0)
    model = load_model(CNN)
    monkeypatch.setattr(pipeline, "load_model", lambda entry, *a, **k: model)
    return model


def _photos(root: Path) -> Path:
    (root / "n02123045").mkdir(parents=True)
    (root / "n07920052").mkdir(parents=True)
    (root / "n02123045" / "chelsea.png").write_bytes(CHELSEA.read_bytes())
    (root / "n07920052" / "coffee.png").write_bytes(COFFEE.read_bytes())
    return root


def _drop_privileges():
    """In a child running as root: give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set, so the exec'd process obeys permission bits as any user would (root ignores a
    read-only folder otherwise). A no-op for other users."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
    # A runaway read (/dev/zero) fails with MemoryError here instead of taking the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def _python(code: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh, unprivileged, memory-capped, offline Python process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=_drop_privileges)


# The command line, with inference replaced by a marker: whatever fails must fail before it.
CLI_WITHOUT_INFERENCE = """
import sys
import classify.targets as t
def started(*args, **kwargs):
    raise SystemExit("inference started")
t.run_inference = started
from classify.cli import main
sys.exit(main(sys.argv[1:]))
"""


# --------------------------------------------------------------------------- item 3: what is read
def test_scan_reads_regular_files_inside_dir_only_and_reports_the_rest(tmp_path):
    root = _photos(tmp_path / "photos")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stranger.png").write_bytes(CHELSEA.read_bytes())
    cats, coffee = root / "n02123045", root / "n07920052"
    os.mkfifo(cats / "pipe.jpg")  # opening it would wait for a writer forever
    (cats / "outside.png").symlink_to(outside / "stranger.png")  # a file outside DIR
    (cats / "broken.png").symlink_to(tmp_path / "nowhere.png")
    (cats / "alias.png").symlink_to("../n07920052/coffee.png")  # another class's image: read there only (issue 22)
    (cats / "notes.txt").write_text("not an image")
    (coffee / "elsewhere").symlink_to(outside, target_is_directory=True)  # a folder outside DIR
    (coffee / "loop").symlink_to("..", target_is_directory=True)  # DIR again
    (coffee / "self").symlink_to("self")  # a link to itself
    scan = scan_folder(root)
    tasks = {t.image: t for t in scan.tasks}
    assert tasks["n02123045/chelsea.png"].error is None and tasks["n07920052/coffee.png"].error is None
    assert "class folder n07920052" in tasks["n02123045/alias.png"].error
    assert "not a regular file (FIFO)" in tasks["n02123045/pipe.jpg"].error
    assert "outside" in tasks["n02123045/outside.png"].error and "not followed" in tasks["n02123045/outside.png"].error
    assert "broken symbolic link" in tasks["n02123045/broken.png"].error
    skipped = dict(scan.skipped)
    assert "outside" in skipped["n07920052/elsewhere"] and "not followed" in skipped["n07920052/elsewhere"]
    assert "already scanned" in skipped["n07920052/loop"]
    assert "loop" in skipped["n07920052/self"]
    assert "not an image file name" in skipped["n02123045/notes.txt"]
    assert "n07920052/elsewhere/stranger.png" not in tasks


def test_a_class_folder_that_links_outside_dir_is_skipped_with_its_reason(tmp_path):
    root = _photos(tmp_path / "photos")
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (tmp_path / "elsewhere" / "deep" / "x.png").write_bytes(CHELSEA.read_bytes())
    (root / "n01440764").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (root / "not-a-wnid").symlink_to(tmp_path / "elsewhere", target_is_directory=True)  # skipped, not an error
    scan = scan_folder(root)
    assert {t.image for t in scan.tasks} == {"n02123045/chelsea.png", "n07920052/coffee.png"}
    skipped = dict(scan.skipped)
    assert set(skipped) == {"n01440764", "not-a-wnid"} and all("outside" in r for r in skipped.values())


def test_reads_are_capped_and_regular_files_only(tmp_path, monkeypatch):
    import classify.engine.preprocess as preprocess
    from core import imageio
    from core.imageio import ImageLoadError

    photo = tmp_path / "chelsea.png"
    photo.write_bytes(CHELSEA.read_bytes())
    assert preprocess.read_image_file(photo) == CHELSEA.read_bytes()
    monkeypatch.setattr(imageio, "MAX_IMAGE_BYTES", 10_000)  # the limit lives there (no PyTorch)
    with pytest.raises(ImageLoadError, match="over the 10000-byte limit"):
        preprocess.read_image_file(photo)
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(ImageLoadError, match="not a regular file"):
        preprocess.read_image_file(tmp_path / "pipe.png")  # at once: opened without waiting for a writer
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    with pytest.raises(ImageLoadError, match="not a regular file"):
        preprocess.read_image_file(tmp_path / "zero.png")


def test_a_file_whose_name_is_not_utf8_is_a_failed_row_and_the_rest_is_classified(tmp_path, fixed_weights):
    """A hostile-input campaign (2026-12-06): a file named b'bad\\xff.png' stopped the run with a
    UnicodeEncodeError from pyarrow (its parts left behind). Now it is a failed row, its name shown with
    \\xNN and the reason to rename it; the other images are classified and the table is written."""
    root = _photos(tmp_path / "photos")
    (root / "n02123045" / os.fsdecode(b"bad\xff.png")).write_bytes(CHELSEA.read_bytes())
    table, report = predict_folder(root, [CNN], tmp_path / "p.csv", options=FAST)
    row = table.set_index("image").loc["n02123045/bad\\xff.png"]
    assert row["status"] == "failed" and "its name is not UTF-8" in row["reason"] and "rename it" in row["reason"]
    assert report.models[CNN.id].predicted == 2
    assert len(pd.read_csv(tmp_path / "p.csv")) == 3


def test_an_oversized_file_is_a_failed_row_not_a_read(tmp_path, fixed_weights, monkeypatch):
    import classify.engine.preprocess as preprocess

    root = _photos(tmp_path / "photos")
    huge = root / "n02123045" / "huge.png"
    with open(huge, "wb") as fh:  # sparse: no disk used
        fh.truncate(preprocess.MAX_IMAGE_BYTES + 1)
    table, report = predict_folder(root, [CNN], options=FAST)
    row = table.set_index("image").loc["n02123045/huge.png"]
    assert row["status"] == "failed" and f"over the {preprocess.MAX_IMAGE_BYTES}-byte limit" in row["reason"]
    assert report.models[CNN.id].predicted == 2


@pytest.mark.long
def test_hostile_folder_end_to_end_never_hangs_or_walks_the_disk(tmp_path):
    """A FIFO, a link to /dev/zero, class folders linked to / and /dev: before, a hang, a MemoryError
    or a walk of the whole disk; now each is a failed row or a skipped entry with its reason."""
    root = _photos(tmp_path / "photos")
    os.mkfifo(root / "n02123045" / "pipe.jpg")
    (root / "n02123045" / "zero.jpg").symlink_to("/dev/zero")
    (root / "n01440764").symlink_to("/", target_is_directory=True)
    (root / "n01443537").symlink_to("/dev", target_is_directory=True)
    out = tmp_path / "out.csv"
    done = _python("import sys; from classify.cli import main; sys.exit(main(sys.argv[1:]))",
                   "--images", str(root), "--out", str(out), "--no-progress", "--workers", "0", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_csv(out).set_index("image")
    assert set(rows.index) == {"n02123045/chelsea.png", "n07920052/coffee.png", "n02123045/pipe.jpg",
                               "n02123045/zero.jpg"}
    assert rows.loc["n02123045/pipe.jpg", "status"] == "failed" and "FIFO" in rows.loc["n02123045/pipe.jpg", "reason"]
    assert rows.loc["n02123045/zero.jpg", "status"] == "failed"
    assert "outside" in rows.loc["n02123045/zero.jpg", "reason"]
    assert "2 entries of" in done.stderr and "n01440764: " in done.stderr and "n01443537: " in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreadable_folder_is_reported_not_silently_dropped(tmp_path):
    root = _photos(tmp_path / "photos")
    private = root / "n02123045" / "private"
    private.mkdir()
    (private / "x.png").write_bytes(CHELSEA.read_bytes())
    private.chmod(0)
    try:
        done = _python("import json, sys; from classify.targets import scan_folder; s = scan_folder(sys.argv[1]); "
                       "print(json.dumps([[t.image for t in s.tasks], s.skipped]))", str(root), timeout=60)
    finally:
        private.chmod(0o755)
    assert done.returncode == 0, done.stderr[-3000:]
    images, skipped = json.loads(done.stdout)
    assert sorted(images) == ["n02123045/chelsea.png", "n07920052/coffee.png"]
    assert [entry for entry, _ in skipped] == ["n02123045/private"] and "Permission denied" in skipped[0][1]


# --------------------------------------------------------------------------- item 10: unwritable output
def test_a_read_only_out_folder_fails_before_inference_in_one_line(tmp_path):
    root = _photos(tmp_path / "photos")
    locked = tmp_path / "locked"
    locked.mkdir()
    err = _refused_while_read_only(locked, root, locked / "p.csv")
    assert str(locked) in err and "cannot be created or written" in err
    assert list(locked.iterdir()) == []


def _refused_while_read_only(folder, images, out) -> str:
    """classify --images IMAGES --out OUT with FOLDER read-only: exit 2 and one 'error: ' line (returned)."""
    folder.chmod(0o555)
    try:
        done = _python(CLI_WITHOUT_INFERENCE, "--images", str(images), "--out", str(out), "--no-progress")
    finally:
        folder.chmod(0o755)
    assert done.returncode == 2, done.stderr[-3000:]
    err = done.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_an_unwritable_parts_folder_under_a_path_with_braces_is_one_line(tmp_path):
    """Issue 22 item 9: the message was built with .format() on a text holding the path, so a
    folder named 'o{x}' raised KeyError instead of saying what cannot be written."""
    root = _photos(tmp_path / "photos")
    folder = tmp_path / "o{x}"
    parts = targets.parts_folder_for(folder / "p.csv")
    parts.mkdir(parents=True)
    err = _refused_while_read_only(parts, root, folder / "p.csv")
    assert str(parts) in err and "cannot be created or written" in err


def test_a_read_only_run_fails_before_inference_in_one_line(tmp_path):
    home = tmp_path / "home"
    run = RunStore(home).create_run(RunInfo(run_id="ro", wnids=["n02123045"]))
    run.images_dir.mkdir(parents=True, exist_ok=True)
    (run.images_dir / "n02123045").mkdir()
    (run.images_dir / "n02123045" / "a.png").write_bytes(CHELSEA.read_bytes())
    run.write_manifest(pd.DataFrame({"wnid": ["n02123045"], "file": ["n02123045/a.png"], "status": ["accepted"]}))
    run.path.chmod(0o555)
    try:
        code = f"import os; os.environ['WILDLENS_HOME'] = {str(home)!r}\n" + CLI_WITHOUT_INFERENCE
        done = _python(code, "--run", "ro", "--no-progress")
    finally:
        run.path.chmod(0o755)
    assert done.returncode == 2, done.stderr[-3000:]
    err = done.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "cannot be created or written" in err


# --------------------------------------------------------------------------- item 11: one writer
def _second_run_during_the_first(monkeypatch, second):
    """Call ``second()`` while the first run is inside inference; return what it raised."""
    real = targets.run_inference
    seen = {}

    def first_run_inference(*args, **kwargs):
        if seen:  # the second run got this far: no lock stopped it
            return real(*args, **kwargs)
        seen["error"] = "running"
        try:
            second()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            seen["error"] = exc
        else:
            seen["error"] = None
        return real(*args, **kwargs)

    monkeypatch.setattr(targets, "run_inference", first_run_inference)
    return seen


def test_two_runs_on_the_same_out_file_the_second_fails_at_once(tmp_path, fixed_weights, monkeypatch):
    root = _photos(tmp_path / "photos")
    out = tmp_path / "p.csv"
    seen = _second_run_during_the_first(monkeypatch, lambda: predict_folder(root, [CNN], out, FAST))
    table, _ = predict_folder(root, [CNN], out, FAST)
    error = seen["error"]
    assert isinstance(error, WildLensError), error
    assert "Another classify run" in str(error) and str(out) in str(error) and "wait for it" in str(error)
    assert len(pd.read_csv(out)) == len(table) == 2


def test_two_runs_on_the_same_run_the_second_fails_at_once(tmp_path, fixed_weights, monkeypatch):
    run = RunStore(tmp_path / "store").create_run(RunInfo(run_id="r", wnids=["n02123045"]))
    (run.images_dir / "n02123045").mkdir(parents=True)
    (run.images_dir / "n02123045" / "a.png").write_bytes(CHELSEA.read_bytes())
    run.write_manifest(pd.DataFrame({"wnid": ["n02123045"], "file": ["n02123045/a.png"], "status": ["accepted"]}))
    seen = _second_run_during_the_first(monkeypatch, lambda: predict_run(run, [CNN], FAST))
    predict_run(run, [CNN], FAST)
    error = seen["error"]
    assert isinstance(error, WildLensError), error
    assert "Another classify run" in str(error) and "run r" in str(error)


def test_the_cli_prints_the_busy_message_in_one_line(tmp_path, monkeypatch, capsys):
    from classify.cli import main
    from core.locking import exclusive_lock

    root = _photos(tmp_path / "photos")
    out = tmp_path / "p.csv"
    with exclusive_lock(targets.parts_folder_for(out), name=targets.PARTS_LOCK_NAME):
        assert main(["--images", str(root), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Another classify run") and "\n" not in err


# --------------------------------------------------------------------------- item 12: a killed run's leftovers
KILLED_DURING_ATOMIC_WRITE = """
import os, signal, sys
import pandas as pd
from core.parts import PredictionParts
from core.runstore import PREDICTION_SCHEMA, write_table
os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # kill -9 between write and rename
rows = pd.DataFrame({"model": ["test-double-test_efficientnet-imagenet-1k"], "image": ["n02123045/chelsea.png"],
                     "status": ["ok"]})
if sys.argv[1] == "part":
    PredictionParts(sys.argv[2]).append(rows)
else:
    write_table(rows, sys.argv[2], PREDICTION_SCHEMA, table="predictions")
"""


def _killed_write(kind: str, target: Path) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_DURING_ATOMIC_WRITE, kind, str(target)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_resuming_sweeps_the_temporary_files_of_a_killed_run(tmp_path, fixed_weights):
    root = _photos(tmp_path / "photos")
    out = tmp_path / "p.csv"
    parts = targets.parts_folder_for(out)
    _killed_write("part", parts)
    _killed_write("out", out)
    model_dir = PredictionParts(parts).model_dir(CNN.id)
    leftovers = list(model_dir.glob(".part-*.tmp")) + list(tmp_path.glob(".p.csv.*.tmp"))
    assert len(leftovers) == 2
    mine = [tmp_path / ".p.csv.notes.tmp", model_dir / ".part-draft.tmp", tmp_path / "keep.tmp"]
    for path in mine:  # not names this tool gives its temporary files: never touched
        path.write_text("someone else's")
    predict_folder(root, [CNN], out, FAST)
    assert not any(p.exists() for p in leftovers)
    assert all(p.exists() for p in mine)


def test_resuming_a_run_sweeps_its_prediction_temporaries(tmp_path, fixed_weights):
    run = RunStore(tmp_path / "store").create_run(RunInfo(run_id="r", wnids=["n02123045"]))
    (run.images_dir / "n02123045").mkdir(parents=True)
    (run.images_dir / "n02123045" / "a.png").write_bytes(CHELSEA.read_bytes())
    run.write_manifest(pd.DataFrame({"wnid": ["n02123045"], "file": ["n02123045/a.png"], "status": ["accepted"]}))
    _killed_write("part", run.predictions_dir)
    leftovers = list(run.predictions_dir.rglob(".part-*.tmp"))
    assert len(leftovers) == 1
    predict_run(run, [CNN], FAST)
    assert not any(p.exists() for p in leftovers)
