"""Prediction part files in a plain folder (core.parts): what a folder run of classify keeps
beside its output file, without being a run."""
import pandas as pd
import pytest

from core.parts import PredictionParts
from core.runstore import PREDICTION_SCHEMA, StoreError


def _preds(model, images, pred="n02123045", status="ok"):
    return pd.DataFrame({"model": model, "image": images, "true_wnid": "n02123045", "pred_wnid": pred,
                         "prob_1": 0.9, "label_space": "imagenet-1k", "status": status})


def test_a_plain_folder_keeps_parts_without_being_a_run(tmp_path):
    folder = tmp_path / ".out.csv.parts"
    parts = PredictionParts(folder)
    assert parts.read().empty and list(parts.read().columns) == list(PREDICTION_SCHEMA)
    parts.append(_preds("torchvision/m", ["a", "b"]))
    parts.append(_preds("torchvision/m", ["b"], pred=None, status="failed"))  # latest wins
    assert parts.predicted_images("torchvision/m") == {"a"}
    assert parts.predicted_images("torchvision/m", include_failed=True) == {"a", "b"}
    before = parts.read()
    parts.compact("torchvision/m")
    assert [p.name for p in folder.iterdir()] == ["torchvision_m"]  # no run.json, manifest or images
    assert len(list((folder / "torchvision_m").glob("part-*.parquet"))) == 1
    assert parts.read().equals(before)
    with pytest.raises(StoreError, match="not a usable model id"):
        parts.model_dir("../elsewhere")


def test_recorded_families_read_the_ok_rows_family_stamp_latest_part_first(tmp_path):
    """What the Results page reads instead of every row (three columns): each model's recorded family."""
    import time

    parts = PredictionParts(tmp_path / "p")
    assert parts.recorded_families() == {}
    parts.append(_preds("a", ["1", "2"]).assign(family="CNN"))
    parts.append(_preds("b", ["1"], pred=None, status="failed").assign(family="hybrid"))  # failed rows only
    parts.append(_preds("c", ["1"]))  # recorded no family (rows stored before the stamps)
    time.sleep(0.002)  # part names carry the time: the next part sorts after the first
    parts.append(_preds("a", ["3"]).assign(family="transformer"))  # --family changed: the latest rows win
    parts.append(_preds("torchvision/m", ["1"]).assign(family="CNN"))
    assert parts.recorded_families() == {"a": "transformer", "torchvision/m": "CNN"}
    ok = parts.read().query("status == 'ok'").dropna(subset=["family"])  # the old way: every row read
    assert parts.recorded_families() == dict(ok.drop_duplicates("model", keep="last")[["model", "family"]].values)
    (tmp_path / "p" / "a" / "part-99999999999999999999-000000.parquet").write_bytes(b"not parquet")
    with pytest.raises(StoreError, match="not a readable Parquet file"):
        parts.recorded_families()


def test_recorded_families_read_a_part_of_several_row_groups(tmp_path):
    """Read dictionary-encoded, each row group brings its own dictionary: a part whose row groups hold
    different families (a hand-made part, a large compacted one) is still read (a code review:
    "Unifying differing dictionaries" made it 'not a readable Parquet file' and stopped the Results page)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = PredictionParts(tmp_path / "p")
    parts.append(pd.concat([_preds("a", ["1", "2"]).assign(family="CNN"),
                            _preds("a", ["3", "4"]).assign(family="transformer")], ignore_index=True))
    (part,) = (tmp_path / "p").rglob("part-*.parquet")
    pq.write_table(pq.read_table(part), part, row_group_size=2)
    assert pq.ParquetFile(part).metadata.num_row_groups == 2
    assert parts.recorded_families() == {"a": "transformer"}
    pq.write_table(pa.table({"model": ["a"] * 3, "family": ["CNN", "transformer", "CNN"], "status": ["ok"] * 3}),
                   part)
    assert parts.recorded_families() == {"a": "CNN"}, "the latest row wins within a part, as read() has it"


def test_recorded_families_skip_a_part_without_the_family_column_and_choose_the_same_each_time(tmp_path):
    """Hostile check: a part stored before the family stamp (no 'family' column) is skipped, as before the
    dictionary read, not 'not a readable Parquet file' (which dropped every model's recorded family); a part
    whose row groups give one model several families gives the same answer on every call."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "p"
    for model, columns in {"a": {"model": ["a"], "family": ["my-family"], "status": ["ok"]},
                           "b": {"model": ["b"], "status": ["ok"]}}.items():
        (root / model).mkdir(parents=True)
        pq.write_table(pa.table(columns), root / model / "part-20240101000000000000-aaaaaa.parquet")
    assert PredictionParts(root).recorded_families() == {"a": "my-family"}
    (root / "c").mkdir()
    families = [f"fam{g % 3}" for g in range(8) for _ in range(5)]
    pq.write_table(pa.table({"model": ["c"] * 40, "family": families, "status": ["ok"] * 40}),
                   root / "c" / "part-20240101000000000000-aaaaaa.parquet", row_group_size=5)
    answers = {PredictionParts(root).recorded_families()["c"] for _ in range(200)}
    assert answers == {families[-1]}, "the last row's family, within a part too (a review: its first group's)"


def test_recorded_families_refuse_special_part_files_in_one_line(tmp_path):
    """A part that is a dangling link, a link loop or a FIFO is a one-line StoreError, never a hang."""
    import os

    for name, make in (("dangling", lambda p: p.symlink_to(tmp_path / "nowhere")), ("loop", lambda p: p.symlink_to(p)),
                       ("fifo", lambda p: os.mkfifo(p))):
        parts = PredictionParts(tmp_path / name)
        parts.append(_preds("a", ["1"]).assign(family="CNN"))
        make(tmp_path / name / "a" / "part-99999999999999999999-000000.parquet")
        with pytest.raises(StoreError) as caught:
            parts.recorded_families()
        assert "\n" not in str(caught.value) and "part-99999999999999999999" in str(caught.value)


def test_a_part_that_is_a_link_is_refused_not_followed_and_a_linked_model_folder_is_read(tmp_path):
    """A stored part is a regular file WildLens renamed into place: a symbolic link in a part's place
    (to a valid predictions file outside the folder, or to another part beside it) is a one-line
    StoreError from every reader, and neither the link nor its target is touched. A model folder that
    is a link (predictions moved to another disk) is still read."""
    import os

    from explain.streaming import _stored_rows

    outside = PredictionParts(tmp_path / "outside")
    outside.append(_preds("a", ["x", "y", "z"]).assign(family="CNN"))
    foreign = next((tmp_path / "outside" / "a").glob("part-*.parquet"))
    foreign_bytes = foreign.read_bytes()
    for target in ("outside", "beside"):
        parts = PredictionParts(tmp_path / target / "run")
        parts.append(_preds("a", ["1"]).assign(family="CNN"))
        own = next((parts.folder / "a").glob("part-*.parquet"))
        link = parts.folder / "a" / "part-99999999999999999999-000000.parquet"
        link.symlink_to(foreign if target == "outside" else own)
        for read in (parts.read, parts.recorded_families, lambda: parts.predicted_images("a"),
                     lambda: parts.compact("a"), lambda: _stored_rows(link)):
            with pytest.raises(StoreError, match="is a symbolic link") as caught:
                read()
            assert "\n" not in str(caught.value) and link.name in str(caught.value)
        assert link.is_symlink() and own.is_file() and foreign.read_bytes() == foreign_bytes
        assert len(list((parts.folder / "a").glob("part-*.parquet"))) == 2  # compact removed nothing
    moved = PredictionParts(tmp_path / "moved")
    moved.folder.mkdir()
    os.symlink(tmp_path / "outside" / "a", moved.folder / "a")  # the model folder itself is a link
    assert moved.read()["image"].tolist() == ["x", "y", "z"]
    assert moved.recorded_families() == {"a": "CNN"}


@pytest.mark.parametrize("target", ["unmounted", "loop", "file"])
def test_a_linked_model_folder_that_cannot_be_reached_is_one_line_never_skipped(tmp_path, target):
    """A model folder linked to another disk is read (test above); when its target is not a folder here
    (a disk not mounted, a loop, a file) every reader and writer says so in one line naming the link,
    instead of reading the run as if that model had no predictions (explain metrics stored tables
    without it; classify classified every image again, then failed to write)."""
    import os

    from core.runstore import RunInfo, RunStore
    from explain.streaming import part_rows

    run = RunStore(tmp_path / "home").create_run(RunInfo(run_id="r", label_space="imagenet-1k"))
    parts = PredictionParts(run.predictions_dir)
    parts.append(_preds("a", ["1"]))
    link = run.predictions_dir / "b"
    if target == "loop":
        os.symlink(link, link)
    elif target == "file":
        (tmp_path / "afile").write_text("x")
        os.symlink(tmp_path / "afile", link)
    else:
        os.symlink(tmp_path / "disk-unmounted", link)
    for action in (parts.read, parts.recorded_families, lambda: parts.read(["b"]), lambda: parts.predicted_images("b"),
                   lambda: parts.append(_preds("b", ["2"])), lambda: part_rows(run), run.read_predictions):
        with pytest.raises(StoreError, match="is a link to .*which is not a folder here") as caught:
            action()
        assert "\n" not in str(caught.value) and str(link) in str(caught.value)
    assert link.is_symlink() and parts.read(["a"])["image"].tolist() == ["1"]  # the other model still reads
    dangling_root = PredictionParts(tmp_path / "predictions-link")
    os.symlink(tmp_path / "nowhere", dangling_root.folder)
    for action in (dangling_root.read, dangling_root.check_writable):
        with pytest.raises(StoreError, match="is a link to"):
            action()


def test_folders_of_models_name_models_as_read_names_them(tmp_path):
    """A hand-made part whose 'model' column is integers with a gap reads as '1.0' (read()'s typing);
    folders_of_models must say the same, or Confusions' one-model read skipped its whole-view fallback
    and showed another matrix than the whole view's (hostile campaign)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = PredictionParts(tmp_path / "p")
    parts.append(_preds("1.0", ["a"]))
    (parts.folder / "z").mkdir()
    rows = _preds("x", ["b", "c"], status="ok")
    table = pa.table({**{c: pa.array(rows[c].astype(object).tolist()) for c in rows.columns if c != "model"},
                      "model": pa.array([1, None], pa.int64())})
    pq.write_table(table, parts.folder / "z" / "part-29991231000000000000-abcdef.parquet")
    assert set(parts.read()["model"].dropna()) == {"1.0"}
    assert parts.folders_of_models() == {"1.0": {"1.0", "z"}}
