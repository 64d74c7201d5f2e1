"""`python -m explain metrics`: files equal the library's tables; bad input is one clear line."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from explain.cli import main
from explain.export import read_predictions_file, table_to_csv_bytes
from core.labels import get_label_space
from explain.metrics import compute_metric_tables
from tests.conftest import ROOT

IN1K = get_label_space("imagenet-1k").wnids


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory):
    """One WILDLENS_HOME for the module's subprocesses, so the IC cache is built only once."""
    return tmp_path_factory.mktemp("cli_home")


def run_cli(home, *args):
    env = {**os.environ, "WILDLENS_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "explain", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def predictions():
    rng = np.random.default_rng(0)
    n = 240
    true = np.array(IN1K)[rng.integers(0, 12, n)]
    pred = np.where(rng.random(n) < 0.6, true, np.array(IN1K)[rng.integers(0, 40, n)])
    df = pd.DataFrame({"model": np.repeat(["resnet50", "vit_base"], n // 2), "image": [f"{i}.jpg" for i in range(n)],
                       "true_wnid": true, "pred_wnid": pred,
                       **{f"pred_wnid_{k}": np.array(IN1K)[rng.integers(0, 12, n)] for k in range(2, 6)},
                       **{f"prob_{k}": rng.random(n) / k for k in range(1, 6)},
                       "status": np.where(rng.random(n) < 0.05, "failed", "ok")})
    return df


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_files_equal_the_library_tables(tmp_path, shared_home, predictions, suffix):
    source = tmp_path / f"predictions{suffix}"
    predictions.to_csv(source, index=False) if suffix == ".csv" else predictions.to_parquet(source)
    out = run_cli(shared_home, "metrics", str(source), "--out", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("resnet50\tn=")
    df, _ = read_predictions_file(source)
    tables = compute_metric_tables(df, cache_dir=False)
    for name, table in tables.as_dict().items():
        written = (tmp_path / "out" / f"{name}.csv").read_bytes()
        assert written == table_to_csv_bytes(table), name
        assert len(pd.read_csv(tmp_path / "out" / f"{name}.csv")) == len(table)
    per_model = pd.read_csv(tmp_path / "out" / "per_model.csv")
    assert per_model["n"].sum() == (predictions["status"] == "ok").sum()


def _error_case(tmp_path, name, predictions):
    """Write one malformed input; return its path and the words the message must contain."""
    path = tmp_path / name
    df = predictions.copy()
    if name == "missing_column.csv":
        df.drop(columns="pred_wnid").to_csv(path, index=False)
        return path, ["column 'pred_wnid'", "missing"]
    if name == "non_wnid.csv":
        df.loc[6, "true_wnid"] = "tabby cat"
        df.to_csv(path, index=False)
        return path, ["row 7 (line 8)", "column 'true_wnid'", "'tabby cat' is not a wnid"]
    if name == "unknown_wnid.csv":
        df.loc[10, "pred_wnid"] = "n99999999"
        df.loc[10, "status"] = "ok"
        df.to_csv(path, index=False)
        return path, ["row 11 (line 12)", "column 'pred_wnid'", "n99999999 is not a noun synset"]
    if name == "empty.csv":
        path.write_bytes(b"")
        return path, ["is empty"]
    if name == "header_only.csv":
        path.write_text("model,image,true_wnid,pred_wnid\n")
        return path, ["has no rows"]
    if name == "bad_prob.csv":
        df["prob_2"] = df["prob_2"].astype(object)
        df.loc[3, "prob_2"] = "high"
        df.to_csv(path, index=False)
        return path, ["row 4 (line 5)", "column 'prob_2'", "'high'"]
    if name == "binary.csv":
        path.write_bytes(b"\xff\xfe\x00\x81garbage\x00")
        return path, ["binary.csv"]
    if name == "damaged.parquet":
        path.write_bytes(b"PAR1 not really")
        return path, ["cannot be read"]
    if name == "predictions.xlsx":
        path.write_bytes(b"")
        return path, ["unknown file type"]
    if name == "missing.csv":
        return path, ["does not exist"]
    if name == "list_true_wnid.parquet":  # issue 11 item 7: was a TypeError (unhashable) traceback
        df.assign(true_wnid=[[w] for w in df["true_wnid"]]).to_parquet(path)
        return path, ["column 'true_wnid'", "list<", "one wnid per row"]
    if name == "struct_model.parquet":
        df.assign(model=[{"name": m} for m in df["model"]]).to_parquet(path)
        return path, ["column 'model'", "struct<"]
    if name == "list_prob.parquet":
        df.assign(prob_1=[[p] for p in df["prob_1"]]).to_parquet(path)
        return path, ["column 'prob_1'", "list<"]
    raise AssertionError(name)


ERROR_CASES = ["missing_column.csv", "non_wnid.csv", "unknown_wnid.csv", "empty.csv", "header_only.csv",
               "bad_prob.csv", "binary.csv", "damaged.parquet", "predictions.xlsx", "missing.csv",
               "list_true_wnid.parquet", "struct_model.parquet", "list_prob.parquet"]


@pytest.mark.parametrize("name", ERROR_CASES)
def test_malformed_input_is_one_line_exit_2(tmp_path, capsys, predictions, name):
    path, needles = _error_case(tmp_path, name, predictions)
    code = main(["metrics", str(path), "--out", str(tmp_path / "out"), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not (tmp_path / "out").exists(), "nothing is written for bad input"


@pytest.mark.parametrize("name", ["unknown_wnid.csv", "empty.csv", "list_true_wnid.parquet"])
def test_malformed_input_in_a_real_process_has_no_traceback(tmp_path, shared_home, predictions, name):
    path, needles = _error_case(tmp_path, name, predictions)
    out = run_cli(shared_home, "metrics", str(path), "--out", str(tmp_path / "out"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and needles[-1] in out.stderr


def test_top_k_option(tmp_path, predictions):
    source = tmp_path / "p.csv"
    predictions.to_csv(source, index=False)
    assert main(["metrics", str(source), "--out", str(tmp_path / "all"), "--top-k", "0", "--no-cache"]) == 0
    assert main(["metrics", str(source), "--out", str(tmp_path / "one"), "--top-k", "1", "--no-cache"]) == 0
    everything = pd.read_csv(tmp_path / "all" / "confusions.csv")
    first = pd.read_csv(tmp_path / "one" / "confusions.csv")
    assert (first["rank"] == 1).all() and len(everything) > len(first)
    assert everything["rank"].max() > 3


# --------------------------------------------------------------------------- hardening (issue 11)
def _no_mistakes_and_all_failed(n: int = 6) -> pd.DataFrame:
    """'perfect' is always right (its sibling_rate and mistake means are NA), 'broken' failed on
    every image (every rate is NA)."""
    true = np.array(IN1K)[np.arange(n) % 3]
    return pd.DataFrame({"model": ["perfect"] * n + ["broken"] * n, "image": [f"{i}.jpg" for i in range(n)] * 2,
                         "true_wnid": np.r_[true, true], "pred_wnid": np.r_[true, true],
                         "status": ["ok"] * n + ["failed"] * n})


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_na_metrics_are_printed_as_na_exit_0(tmp_path, capsys, suffix):
    """Issue 11 item 6: a model without mistakes, or whose every row failed, has NA rates; the
    summary printed them with `value != value`, which pd.NA refuses (TypeError after the tables
    were written)."""
    source = tmp_path / f"predictions{suffix}"
    df = _no_mistakes_and_all_failed()
    df.to_csv(source, index=False) if suffix == ".csv" else df.to_parquet(source)
    assert main(["metrics", str(source), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "perfect\tn=6\taccuracy=1.0000\tsibling_rate=NA"
    assert out[1] == "broken\tn=0\taccuracy=NA\tsibling_rate=NA"
    tables = compute_metric_tables(read_predictions_file(source)[0], cache_dir=False)
    for name, table in tables.as_dict().items():
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == table_to_csv_bytes(table), name
