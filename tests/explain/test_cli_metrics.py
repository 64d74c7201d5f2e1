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


def _distinct(pred, drawn):
    """The drawn top-5 columns with each repeat (of pred or of an earlier column) replaced by the
    next class of IN1K not yet in that row: a top-5 names 5 different classes."""
    rows = []
    for i, first in enumerate(pred):
        top = [first]
        for column in drawn:
            top.append(column[i] if column[i] not in top else next(w for w in IN1K if w not in top))
        rows.append(top[1:])
    return [np.array([r[j] for r in rows]) for j in range(len(drawn))]


@pytest.fixture(scope="module")
def predictions():
    rng = np.random.default_rng(0)
    n = 240
    true = np.array(IN1K)[rng.integers(0, 12, n)]
    pred = np.where(rng.random(n) < 0.6, true, np.array(IN1K)[rng.integers(0, 40, n)])
    drawn = [np.array(IN1K)[rng.integers(0, 12, n)] for _ in range(2, 6)]
    df = pd.DataFrame({"model": np.repeat(["resnet50", "vit_base"], n // 2), "image": [f"{i}.jpg" for i in range(n)],
                       "true_wnid": true, "pred_wnid": pred,
                       **{f"pred_wnid_{k}": column for k, column in zip(range(2, 6), _distinct(pred, drawn))},
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
    if name == "five_fields.csv":  # issue 11 item 8: pandas took the first field as an index and shifted the rest
        path.write_text("model,true_wnid,pred_wnid,status\n" + "".join(
            f"resnet50,{i}.jpg,n02123045,n02123045,ok\n" for i in range(4)))
        return path, ["five_fields.csv", "line 2 has 5 fields", "header has 4", "quote"]
    if name == "one_long_row.csv":
        lines = df.to_csv(index=False).splitlines()
        lines[9] = lines[9].replace(",", ",x,", 1)  # an unquoted comma inside the model field
        path.write_text("\n".join(lines) + "\n")
        return path, ["line 10 has 15 fields", "header has 14"]
    if name == "short_row.csv":
        lines = df.to_csv(index=False).splitlines()
        lines[4] = lines[4].rsplit(",", 1)[0]  # the last field (status) left out, not left empty
        path.write_text("\n".join(lines) + "\n")
        return path, ["line 5 has 13 fields", "header has 14", "leave a field empty"]
    if name == "trailing_comma.csv":  # issue 11 item 9: reported as "pred_wnid: empty"
        path.write_text("model,image,true_wnid,pred_wnid\n" + "".join(
            f"resnet50,{i}.jpg,n02123045,n02123159,\n" for i in range(4)))
        return path, ["line 2 has 5 fields", "header has 4", "trailing comma"]
    if name == "trailing_comma_once.csv":
        lines = df.to_csv(index=False).splitlines()
        lines[3] += ","
        path.write_text("\n".join(lines) + "\n")
        return path, ["line 4 has 15 fields", "trailing comma"]
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
               "list_true_wnid.parquet", "struct_model.parquet", "list_prob.parquet",
               "five_fields.csv", "one_long_row.csv", "short_row.csv", "trailing_comma.csv", "trailing_comma_once.csv"]


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
    assert out[0] == "perfect\tn=6\taccuracy=1.0000 [0.6097, 1.0000]\tsibling_rate=NA"  # Wilson 6/6 (scipy)
    assert out[1] == "broken\tn=0\taccuracy=NA\tsibling_rate=NA"
    tables = compute_metric_tables(read_predictions_file(source)[0], cache_dir=False)
    for name, table in tables.as_dict().items():
        assert (tmp_path / "out" / f"{name}.csv").read_bytes() == table_to_csv_bytes(table), name


def test_a_trailing_comma_is_not_reported_as_an_empty_field(tmp_path, capsys, predictions):
    """Issue 11 item 9: the message said "column 'pred_wnid': empty" for a row whose pred_wnid is
    there; it must say what is wrong (the extra field), never blame a column that is filled."""
    path, _ = _error_case(tmp_path, "trailing_comma.csv", predictions)
    assert main(["metrics", str(path), "--out", str(tmp_path / "out"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "empty" not in err and "pred_wnid':" not in err, err


def test_quoted_commas_newlines_and_blank_lines_are_read_and_lines_named(tmp_path, capsys, predictions):
    """The field-count rule reads CSV as CSV: a quoted comma or line break is part of a value, a
    blank line is skipped; a later error names the line a person finds in an editor."""
    df = predictions.head(6).copy()
    df["image"] = df["image"].astype(object)
    df.loc[1, "image"] = "a,b.jpg"
    df.loc[2, "image"] = "two\nlines.jpg"
    text = df.to_csv(index=False).replace("\n", "\n   \n", 1)  # a blank line (spaces only) after the header
    path = tmp_path / "quoted.csv"
    path.write_text(text)
    read, line_of_row = read_predictions_file(path)
    assert read["image"].tolist()[1:3] == ["a,b.jpg", "two\nlines.jpg"] and len(read) == 6
    assert line_of_row(0) == "row 1 (line 3)" and line_of_row(3) == "row 4 (line 7)"
    assert main(["metrics", str(path), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    capsys.readouterr()
    bad = text.splitlines()
    bad[6] = bad[6].replace(df.loc[3, "true_wnid"], "tabby", 1)
    path.write_text("\n".join(bad) + "\n")
    assert main(["metrics", str(path), "--out", str(tmp_path / "out2"), "--no-cache"]) == 2
    assert "row 4 (line 7)" in capsys.readouterr().err


def test_metric_csvs_neutralise_formulas_and_read_back(tmp_path, capsys):
    """Issue 11 item 14: a model id that a spreadsheet would run (=, +, -, @, tab, CR first) is
    written with a quote in front in per_model, per_class and confusions.csv; numbers are not
    touched; classify's own CSV output (write_table) is read back with the original model ids."""
    from core.csvsafe import read_csv
    from core.runstore import PREDICTION_SCHEMA, write_table

    models = ['=HYPERLINK("https://evil.invalid","x")', "+1", "-m", "@SUM(A1)", "\t=1", "\r=1"]
    true = np.array(IN1K)[np.arange(12) % 3]
    pred = np.array(IN1K)[np.arange(12) % 4]  # some mistakes: every model has confusions
    df = pd.DataFrame({"model": np.repeat(models, 12), "image": [f"{i}.jpg" for i in range(12)] * len(models),
                       "true_wnid": np.tile(true, len(models)), "pred_wnid": np.tile(pred, len(models)),
                       "status": "ok"})
    source = tmp_path / "predictions.csv"
    write_table(df, source, PREDICTION_SCHEMA, table="predictions")  # as python -m classify --out FILE.csv
    assert main(["metrics", str(source), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    tables = compute_metric_tables(read_predictions_file(source)[0], cache_dir=False)
    for name, table in tables.as_dict().items():
        path = tmp_path / "out" / f"{name}.csv"
        assert path.read_bytes() == table_to_csv_bytes(table), name
        as_written = pd.read_csv(path, dtype={"model": str})  # what a spreadsheet gets
        assert len(as_written) == len(table), name
        assert set(as_written["model"]) == {"'" + m for m in models}, name
        numbers = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
        pd.testing.assert_frame_equal(as_written[numbers], pd.read_csv(path)[numbers])
        assert all(pd.api.types.is_numeric_dtype(as_written[c]) for c in numbers), name
        back = read_csv(path, dtype={"model": "string"})
        assert back["model"].tolist() == table["model"].tolist(), name


def test_out_is_never_inside_the_stores_runs_folder(tmp_path, capsys, predictions):
    """Second campaign: `explain metrics FILE --out $WILDLENS_HOME/runs/r1` (exit 0) wrote three CSVs
    into run r1, `--out runs` into runs/ itself, `concepts --out runs/r1` its concepts.csv there.
    Refused in one line, exit 2, also through a link; nothing is written."""
    from core.runstore import RunStore

    store = RunStore()
    run = store.create_run(run_id="r1")
    before = sorted(p.relative_to(store.runs_dir) for p in store.runs_dir.rglob("*"))
    source = tmp_path / "p.csv"
    predictions.to_csv(source, index=False)
    link = tmp_path / "shortcut"
    link.symlink_to(run.path, target_is_directory=True)
    for argv in (["metrics", source, "--out", run.path], ["metrics", source, "--out", store.runs_dir],
                 ["metrics", source, "--out", link / "metrics"], ["metrics", "--run", "r1", "--out", run.path],
                 ["concepts", "--out", run.path]):
        assert main([str(a) for a in argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: --out ") and "inside the run store's runs folder" in err and "\n" not in err, err
    assert sorted(p.relative_to(store.runs_dir) for p in store.runs_dir.rglob("*")) == before


def test_an_out_that_is_a_dangling_link_says_so(tmp_path, capsys, predictions):
    """A hostile-input campaign (2026-12-06): --out naming a symbolic link to nowhere said only
    'File exists' (the folder's mkdir), which names no fix. The link is left as it was."""
    source = tmp_path / "predictions.csv"
    predictions.to_csv(source, index=False)
    out = tmp_path / "dl"
    out.symlink_to("nowhere_dir", target_is_directory=True)
    assert main(["metrics", str(source), "--out", str(out), "--resamples", "100"]) == 2
    err = capsys.readouterr().err
    assert f"{out} is a symbolic link to nowhere_dir, which does not exist" in err and err.count("\n") == 1, err
    assert out.is_symlink() and not (tmp_path / "nowhere_dir").exists()
