"""The stored metrics artefact (explain.artefact): equal to `python -m explain metrics`, fresh
while nothing changed, recomputed after a new part file, an exclusion or damage; never fatal."""
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from core.runstore import (PREDICTION_SCHEMA, RunInfo, RunStore, StoreError, conform, manifest_fingerprint,
                           predictions_fingerprint)
from explain import artefact
from explain.artefact import (current_fingerprint, ensure_metrics, load_metrics, read_stored_metrics, refresh_metrics,
                              staleness)
from explain.cli import main as explain_main
from explain.export import table_to_csv_bytes
from explain.metrics import compute_metric_tables

SITE = Path(torch.__file__).resolve().parent.parent
CATS = ["n02123045", "n02123159", "n02123394", "n02124075"]  # tabby, tiger cat, Persian, Egyptian cat
OTHERS = ["n02127052", "n02129604", "n07920052"]  # lynx, tiger, espresso


def _others(pool, pred, rng):
    """Per row four distinct classes of ``pool`` other than its pred, as four columns."""
    rows = [rng.permutation([c for c in pool if c != p])[:4] for p in pred]
    return [[r[j] for r in rows] for j in range(4)]


def _repredicted(df, wnid):
    """``df`` with top-1 ``wnid``; a lower rank that held it takes the old top-1 (no class twice)."""
    df = df.copy()
    for k in range(2, 6):
        held = df[f"pred_wnid_{k}"] == wnid
        df.loc[held, f"pred_wnid_{k}"] = df.loc[held, "pred_wnid"]
    return df.assign(pred_wnid=wnid)


def _predictions(files, true, model, seed):
    rng = np.random.default_rng(seed)
    n = len(files)
    pool = np.array(CATS + OTHERS)
    pred = np.where(rng.random(n) < 0.5, true, pool[rng.integers(0, len(pool), n)])
    others = _others(pool, pred, rng)
    return conform(pd.DataFrame({
        "model": model, "image": files, "true_wnid": true, "pred_wnid": pred,
        # pred_wnid_2..5: four other classes of the pool (a top-5 names 5 different classes)
        **{f"pred_wnid_{k}": others[k - 2] for k in range(2, 6)},
        **{f"prob_{k}": rng.random(n) / k for k in range(1, 6)},
        "label_space": "imagenet-1k", "status": np.where(rng.random(n) < 0.1, "failed", "ok")}),
        PREDICTION_SCHEMA, table="predictions")


@pytest.fixture
def run():
    """A run of 24 images (files need not exist: metrics read only the manifest and predictions)
    with predictions of two models, stored as part files."""
    return make_run("artefact", 6)


def make_run(run_id: str, per_class: int):
    """A run of ``per_class`` images of each of CATS with two models' predictions, as part files."""
    run = RunStore().create_run(RunInfo(run_id=run_id, wnids=CATS))
    true = np.repeat(CATS, per_class)
    files = [f"{w}/{i:04d}.jpg" for i, w in enumerate(true)]
    run.write_manifest(pd.DataFrame({"wnid": true, "file": files, "status": "accepted", "excluded": False}))
    for m, model in enumerate(["model_a", "model_b"]):
        run.append_predictions(_predictions(files, true, model, seed=m))
    return run


def _expected(run):
    return compute_metric_tables(run.usable_predictions())


def _assert_tables_equal(got, expected):
    for name, df in expected.as_dict().items():
        pd.testing.assert_frame_equal(got.as_dict()[name], df, obj=name)


def _count_computations(monkeypatch) -> list:
    calls = []
    real = artefact.stream_metric_tables

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(artefact, "stream_metric_tables", counting)
    return calls


# --------------------------------------------------------------------------- fingerprints
def test_fingerprints_change_exactly_when_the_inputs_change(run):
    p, m = predictions_fingerprint(run), manifest_fingerprint(run)
    assert (p, m) == (predictions_fingerprint(run), manifest_fingerprint(run)), "nothing changed, same fingerprint"
    run.read_predictions(), run.usable_predictions(), refresh_metrics(run)  # reading and deriving change nothing
    assert (p, m) == (predictions_fingerprint(run), manifest_fingerprint(run))

    run.append_predictions(run.read_predictions(["model_a"]).head(2))  # a part added
    added = predictions_fingerprint(run)
    assert added != p and manifest_fingerprint(run) == m
    run.compact_predictions("model_a")  # two parts replaced by one
    compacted = predictions_fingerprint(run)
    assert compacted not in (p, added)
    sorted(run.predictions_dir.glob("model_b/part-*.parquet"))[-1].unlink()  # a part removed
    assert predictions_fingerprint(run) not in (p, added, compacted)

    run.set_excluded([run.read_manifest()["file"].iloc[0]], reason="blurry")
    assert manifest_fingerprint(run) != m
    excluded = manifest_fingerprint(run)
    run.set_excluded([run.read_manifest()["file"].iloc[0]], excluded=False)  # same bytes as before, new file
    assert manifest_fingerprint(run) not in (m, excluded)


def test_fingerprints_of_an_empty_run():
    run = RunStore().create_run(run_id="empty")
    assert predictions_fingerprint(run) == manifest_fingerprint(run) == "none"
    tables = load_metrics(run)
    assert all(df.empty for df in tables.as_dict().values())


# --------------------------------------------------------------------------- the artefact
def test_refresh_writes_the_tables_and_the_fingerprint_last(run):
    tables = refresh_metrics(run)
    _assert_tables_equal(tables, _expected(run))
    names = sorted(p.name for p in run.metrics_dir.iterdir())
    # ... and each prediction's explanation (error types: core.explained), which the pages read, and
    # Browse's per-image table built from them (explain.browse_store).
    assert names == ["browse.arrow", "browse.json", "confusions.parquet", "fingerprint.json", "images.json",
                     "images.parquet", "per_class.parquet", "per_model.parquet"]
    from core.explained import read_explained
    from explain.browse import run_image_table
    from explain.browse_store import read_browse_table

    assert read_explained(run, "raw") is not None
    pd.testing.assert_frame_equal(read_browse_table(run, "raw", "imagenet-1k"), run_image_table(run, "raw"))
    stored = json.loads((run.metrics_dir / "fingerprint.json").read_text())
    assert stored["predictions"] == predictions_fingerprint(run) and stored["manifest"] == manifest_fingerprint(run)
    assert stored["parameters"]["confusion_top_k"] == 3
    ci = stored["parameters"]["ci"]  # the interval settings are part of what the tables are (issue 23)
    assert (ci["level"], ci["resamples"], ci["seed"], ci["rates"]) == (0.95, 2000, 0, "wilson")
    assert set(stored["versions"]) >= {"metrics", "similarity", "columns"}
    assert {n: e["rows"] for n, e in stored["tables"].items()} == {n: len(df) for n, df in tables.as_dict().items()}
    fingerprint_mtime = (run.metrics_dir / "fingerprint.json").stat().st_mtime_ns
    assert all((run.metrics_dir / f"{n}.parquet").stat().st_mtime_ns <= fingerprint_mtime for n in stored["tables"])
    assert staleness(run) is None


def test_a_run_too_large_to_type_in_memory_gets_its_tables_and_one_line_for_its_error_types(run, monkeypatch,
                                                                                             capsys):
    """The per-prediction explanations type every prediction in memory: above EXPLAINED_IN_MEMORY stored
    predictions (48 here, the limit lowered to 40) every caller refuses them in one line before reading
    anything (45,000,000 predictions were ~15 GB): the artefact after inference stores the tables only,
    the explain command prints a note and exits 0, and the pages' reader raises the one line."""
    import explain.streaming as streaming
    from core.explained import read_explained
    from explain.error_types import TooManyToExplain, ensure_explained

    monkeypatch.setattr(streaming, "EXPLAINED_IN_MEMORY", 40)
    with monkeypatch.context() as nothing_read:
        nothing_read.setattr(type(run), "read_predictions", lambda *a, **k: pytest.fail("predictions read"))
        with pytest.raises(TooManyToExplain) as caught:
            ensure_explained(run)
    assert str(caught.value).startswith("Run artefact holds 48 predictions, more than the 40 whose error types")
    assert "\n" not in str(caught.value)
    _assert_tables_equal(refresh_metrics(run), _expected(run))
    assert read_explained(run, "raw") is None and staleness(run) is None
    assert explain_main(["metrics", "--run", "artefact", "--no-cache"]) == 0
    assert "note: Run artefact holds 48 predictions" in capsys.readouterr().err
    monkeypatch.setattr(streaming, "EXPLAINED_IN_MEMORY", 48)  # at the limit: made
    assert not ensure_explained(run).empty


def test_explain_metrics_says_when_the_explanations_cannot_be_made(run, capsys, monkeypatch):
    """The tables stored and fresh, and the explanations cannot be made (here: their store refuses, as
    a run that cannot be written does): the command still prints the stored tables, and says in one
    line why the per-prediction explanations were not made (a hostile-input campaign: it said nothing)."""
    import explain.error_types
    from core.runstore import StoreError

    refresh_metrics(run)

    def refuse(*args, **kwargs):
        raise StoreError("metrics/explained cannot be written (read-only file system).")

    monkeypatch.setattr(explain.error_types, "ensure_explained", refuse)
    capsys.readouterr()
    assert explain_main(["metrics", "--run", "artefact", "--no-cache"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: per-prediction")]
    assert len(notes) == 1 and "cannot be written" in notes[0], notes


def test_explain_metrics_refuses_a_part_added_as_a_dangling_link_and_keeps_the_stored_tables(run, capsys):
    """A dangling link added among the parts changes the predictions' fingerprint (the stored tables no
    longer describe the folder), and reading it is refused: one error line naming it, exit 2, the
    stored tables left as they were."""
    import os

    refresh_metrics(run)
    before = {p.name: p.read_bytes() for p in run.metrics_dir.iterdir() if p.is_file()}
    os.symlink("/nonexistent/x", next(run.predictions_dir.iterdir()) / "part-dangling.parquet")
    capsys.readouterr()
    assert explain_main(["metrics", "--run", "artefact", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "part-dangling.parquet is a symbolic link" in err[0], err
    assert {p.name: p.read_bytes() for p in run.metrics_dir.iterdir() if p.is_file()} == before


def test_fresh_tables_are_read_not_recomputed(run, monkeypatch):
    refresh_metrics(run)
    calls = _count_computations(monkeypatch)
    result = ensure_metrics(run)
    assert not result.recomputed and calls == []
    _assert_tables_equal(result.tables, _expected(run))
    refresh_metrics(run)  # fresh: a refresh only reads
    assert calls == []
    refresh_metrics(run, force=True)
    assert calls == [1]


def test_a_new_part_file_makes_it_stale(run, monkeypatch):
    refresh_metrics(run)
    before = read_stored_metrics(run).per_model.set_index("model")["n"].to_dict()
    files = run.usable_images()["file"].tolist()
    true = run.usable_images()["wnid"].to_numpy()
    run.append_predictions(_predictions(files, true, "model_c", seed=7))  # a third model
    assert staleness(run) == "the predictions changed" and read_stored_metrics(run) is None
    calls = _count_computations(monkeypatch)
    result = ensure_metrics(run)
    assert result.recomputed and result.stored and calls == [1]
    assert set(result.tables.per_model["model"]) == {"model_a", "model_b", "model_c"}
    assert result.tables.per_model.set_index("model")["n"].to_dict().items() >= before.items()
    _assert_tables_equal(read_stored_metrics(run), _expected(run))  # rewritten: fresh again


def test_an_exclusion_makes_it_stale(run):
    refresh_metrics(run)
    n_before = int(read_stored_metrics(run).per_model["n"].sum() + read_stored_metrics(run).per_model["n_failed"].sum())
    run.set_excluded(run.usable_images()["file"].head(3).tolist(), reason="not a cat")
    assert staleness(run).startswith("the manifest changed")
    tables = load_metrics(run)
    assert int(tables.per_model["n"].sum() + tables.per_model["n_failed"].sum()) == n_before - 2 * 3
    _assert_tables_equal(tables, _expected(run))
    assert staleness(run) is None


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other_table", "missing", "bad_json", "no_json",
                                    "edited_json"])
def test_a_damaged_artefact_is_recomputed_not_fatal(run, damage):
    refresh_metrics(run)
    target = run.metrics_dir / "per_class.parquet"
    if damage == "garbage":
        target.write_bytes(b"PAR1 this is not parquet PAR1")
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    elif damage == "other_table":  # a valid Parquet file, but not the one the fingerprint names
        shutil.copyfile(run.metrics_dir / "per_model.parquet", target)
    elif damage == "missing":
        target.unlink()
    elif damage == "bad_json":
        (run.metrics_dir / "fingerprint.json").write_text("{not json")
    elif damage == "edited_json":  # parses, matches the inputs, but names no table
        data = json.loads((run.metrics_dir / "fingerprint.json").read_text())
        (run.metrics_dir / "fingerprint.json").write_text(json.dumps({**data, "tables": []}))
    else:
        (run.metrics_dir / "fingerprint.json").unlink()
    assert read_stored_metrics(run) is None
    result = ensure_metrics(run)
    assert result.recomputed and result.stored
    _assert_tables_equal(result.tables, _expected(run))
    _assert_tables_equal(read_stored_metrics(run), _expected(run))


def test_a_kill_while_writing_leaves_no_false_claim(run, monkeypatch):
    refresh_metrics(run)
    run.append_predictions(_repredicted(run.read_predictions(["model_a"]).head(3), OTHERS[0]))

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the tables, before fingerprint.json

    monkeypatch.setattr(artefact, "write_json_atomic", killed)
    with pytest.raises(KeyboardInterrupt):
        refresh_metrics(run)
    assert not (run.metrics_dir / "fingerprint.json").exists(), "the old fingerprint must not vouch for new tables"
    assert staleness(run) == "no stored metrics"
    monkeypatch.undo()
    _assert_tables_equal(load_metrics(run), _expected(run))
    assert staleness(run) is None


def test_other_parameters_or_code_make_it_stale(run, monkeypatch):
    refresh_metrics(run)
    monkeypatch.setattr(artefact, "METRICS_CODE_VERSION", artefact.METRICS_CODE_VERSION + 1)
    assert staleness(run) == "computed by another version"
    monkeypatch.undo()
    assert staleness(run) is None
    monkeypatch.setitem(artefact.PARAMETERS, "confusion_top_k", 5)
    assert staleness(run) == "other parameters"


def test_an_unwritable_run_still_gets_its_tables(run, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(artefact, "write_bytes_atomic", denied)
    result = ensure_metrics(run)
    assert result.recomputed and not result.stored and "Permission denied" in result.store_error
    _assert_tables_equal(load_metrics(run), _expected(run))
    with pytest.raises(StoreError, match="cannot write the metrics of run artefact"):
        refresh_metrics(run)


# --------------------------------------------------------------------------- command line
def test_cli_run_form_reads_the_artefact_and_equals_the_file_form(run, tmp_path, capsys):
    source = tmp_path / "predictions.parquet"
    run.usable_predictions().to_parquet(source)
    assert explain_main(["metrics", str(source), "--out", str(tmp_path / "file")]) == 0
    file_out = capsys.readouterr().out

    assert explain_main(["metrics", "--run", run.run_id, "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert "recomputed (no stored metrics); stored in" in captured.err
    summary = [line for line in captured.out.splitlines() if not line.startswith("wrote ")]
    assert summary == [line for line in file_out.splitlines() if not line.startswith("wrote ")]
    assert summary[0].startswith("model_a\tn=")
    for name in ("per_model", "per_class", "confusions"):
        assert (tmp_path / "run" / f"{name}.csv").read_bytes() == (tmp_path / "file" / f"{name}.csv").read_bytes()

    assert explain_main(["metrics", "--run", run.run_id]) == 0  # no --out: the summary only
    captured = capsys.readouterr()
    assert "(up to date)" in captured.err and captured.out.splitlines() == summary

    assert explain_main(["metrics", "--run", run.run_id, "--top-k", "0"]) == 0  # other parameters: not stored
    assert "not stored" in capsys.readouterr().err and staleness(run) is None


@pytest.mark.parametrize("argv, needle", [
    (["metrics"], "give either a predictions FILE or --run RUN_ID"),
    (["metrics", "--run", "no-such-run"], "No run 'no-such-run'"),
    (["metrics", "x.csv"], "--out DIR is needed"),
    (["metrics", "x.csv", "--run", "artefact", "--out", "o"], "give either"),
    (["metrics", "--run", "artefact", "--top-k", "-1"], "--top-k must be 0"),
])
def test_cli_run_form_errors_are_one_line(run, argv, needle, capsys):
    assert explain_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------------------- after python -m classify
@pytest.mark.long
def test_classify_run_leaves_metrics_equal_to_explain_metrics(tmp_path, capsys):
    """`python -m classify --run RUN --models efficientnet_lite0` (its entry point, in-process) on a
    two-photo run; the run's metrics/ tables then equal `python -m explain metrics` of its predictions."""
    from classify.__main__ import main as classify_main

    run = RunStore().create_run(RunInfo(run_id="classified"))
    files = {"n02123045/chelsea.png": "skimage/data/chelsea.png", "n07920052/coffee.png": "skimage/data/coffee.png"}
    for file, source in files.items():
        (run.images_dir / file).parent.mkdir(parents=True, exist_ok=True)
        (run.images_dir / file).write_bytes((SITE / source).read_bytes())
    run.write_manifest(pd.DataFrame({"wnid": [f.split("/")[0] for f in files], "file": list(files),
                                     "status": "accepted"}))
    assert classify_main(["--run", "classified", "--models", "efficientnet_lite0", "--no-progress",
                          "--workers", "0"]) == 0
    assert staleness(run) is None
    stored = read_stored_metrics(run)

    source = tmp_path / "predictions.parquet"
    run.read_predictions().to_parquet(source)
    assert explain_main(["metrics", str(source), "--out", str(tmp_path / "out")]) == 0
    for name, df in stored.as_dict().items():
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == table_to_csv_bytes(df), name
    assert int(stored.per_model.set_index("model").loc["efficientnet_lite0", "n"]) == 2
    assert current_fingerprint(run)["predictions"] != "none"


def test_cli_run_form_with_na_metrics_exits_0(tmp_path, capsys):
    """Issue 11 item 6, the --run form: a model without mistakes and a model whose every row
    failed have NA rates, printed as NA (was a TypeError after the tables were stored)."""
    run = RunStore().create_run(RunInfo(run_id="na-metrics", wnids=CATS))
    true = np.repeat(CATS, 2)
    files = [f"{w}/{i:04d}.jpg" for i, w in enumerate(true)]
    run.write_manifest(pd.DataFrame({"wnid": true, "file": files, "status": "accepted", "excluded": False}))
    for model, status in (("perfect", "ok"), ("broken", "failed")):
        run.append_predictions(conform(pd.DataFrame({"model": model, "image": files, "true_wnid": true,
                                                     "pred_wnid": true, "label_space": "imagenet-1k",
                                                     "status": status}), PREDICTION_SCHEMA, table="predictions"))
    assert explain_main(["metrics", "--run", run.run_id, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out[:2]) == ["broken\tn=0\taccuracy=NA\tsibling_rate=NA",
                               "perfect\tn=8\taccuracy=1.0000 [0.6756, 1.0000]\tsibling_rate=NA"]  # Wilson 8/8 (scipy)
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"per_model.csv", "per_class.csv", "confusions.csv"}
    assert explain_main(["metrics", "--run", run.run_id]) == 0  # read back from the stored artefact
    assert capsys.readouterr().out.splitlines() == out[:2]
