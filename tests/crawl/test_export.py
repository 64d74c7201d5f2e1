"""python -m crawl export (issue 24 item 6): a run's curated image set as an image folder or a
FiftyOne image classification dataset; the labels read back equal the curated (or raw) truth, the
files are hard links (copies across file systems), and a refused, failed or killed export leaves
the destination as it was."""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os

import pandas as pd
import pytest
from PIL import Image

from core.csvsafe import read_csv
from core.curation import record
from core.explained import (CURATED, ERROR_TYPES_CODE_VERSION, EXPLAINED_SCHEMA, RAW, inputs_fingerprint,
                            write_explained)
from core.fiftyone_layout import models_in
from core.runstore import RunStore
from crawl import export as export_module
from crawl.cli import main as crawl_main
from crawl.export import ExportError, export_run

TABBY, TIGER_CAT, PERSIAN, LYNX = "n02123045", "n02123159", "n02123394", "n02127052"
MODELS = ("resnet50", "vit.base/16")
HOSTILE_TAG = '=HYPERLINK("http://x","y")'
HOSTILE_NOTE = "<script>alert(1)</script>"
HOSTILE_URL = "=cmd|' /C calc'!A0"


def _png(color) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, format="PNG")
    return buffer.getvalue()


def _make_run(run_id="r1"):
    """6 accepted images (4 tabby, 2 tiger cat), one excluded in the manifest, one rejected; two
    models' predictions of every stored image."""
    run = RunStore().create_run(run_id=run_id, wnids=[TABBY, TIGER_CAT], models=list(MODELS))
    rows = []
    for i in range(8):
        wnid = TABBY if i < 4 or i == 6 else TIGER_CAT
        data = _png((30 * i, 10, 200 - 20 * i))
        sha = hashlib.sha256(data).hexdigest()
        file = f"{wnid}/{sha[:16]}.png"
        status = "rejected" if i == 7 else "accepted"
        if status == "accepted":
            (run.images_dir / wnid).mkdir(parents=True, exist_ok=True)
            (run.images_dir / file).write_bytes(data)
        rows.append({"wnid": wnid, "file": file if status == "accepted" else None, "sha256": sha, "width": 8,
                     "height": 8, "format": "PNG", "bytes": len(data), "source": "bing", "search_term": "tabby cat",
                     "url": HOSTILE_URL if i == 0 else f"https://example.org/{i}.png", "rank": i + 1,
                     "status": status, "excluded": i == 6})
    run.write_manifest(pd.DataFrame(rows))
    files = [r["file"] for r in rows[:6]]
    predictions = []
    for model in MODELS:
        for k, file in enumerate(files):
            truth = TABBY if k < 4 else TIGER_CAT
            top = [TABBY, TIGER_CAT, PERSIAN, LYNX, "n02124075"] if (k + len(model)) % 2 else \
                [TIGER_CAT, TABBY, PERSIAN, LYNX, "n02124075"]
            predictions.append({"model": model, "image": file, "true_wnid": truth, "pred_wnid": top[0],
                                **{f"pred_wnid_{j}": top[j - 1] for j in range(2, 6)},
                                "prob_1": 0.5 + k / 20, "prob_2": 0.2, "prob_3": 0.1, "prob_4": 0.05, "prob_5": 0.01,
                                "label_space": "imagenet-1k", "status": "ok"})
    run.append_predictions(pd.DataFrame(predictions))
    return run, files


def _curate(run, files):
    record(run, "relabel", files[:2], TIGER_CAT, note=HOSTILE_NOTE)
    record(run, "relabel", files[4], PERSIAN)
    record(run, "exclude", files[3])
    record(run, "tag", files[5], HOSTILE_TAG)


def _labels(out):
    return json.loads((out / "labels.json").read_text())


def _truth_by_image(labels):
    return {t["attributes"]["wildlens_image"]: t["label"] for t in labels["labels"].values()}


def test_fiftyone_labels_are_the_curated_truth_and_raw_with_raw(tmp_path):
    run, files = _make_run()
    _curate(run, files)
    summary = export_run(run, tmp_path / "fo", "fiftyone")
    assert _truth_by_image(_labels(tmp_path / "fo")) == {files[0]: TIGER_CAT, files[1]: TIGER_CAT, files[2]: TABBY,
                                                         files[4]: PERSIAN, files[5]: TIGER_CAT}
    assert (summary.images, summary.relabelled, summary.excluded, summary.view) == (5, 3, 1, CURATED)
    assert summary.describe()[0].startswith("curated view: 3 relabelled, 1 excluded")
    # FiftyOne's layout: data/<uuid>.<ext> for every key of labels
    data = sorted(p.name for p in (tmp_path / "fo" / "data").iterdir())
    assert sorted(f"{uuid}.png" for uuid in _labels(tmp_path / "fo")["labels"]) == data
    assert _labels(tmp_path / "fo")["classes"] is None

    raw = export_run(run, tmp_path / "raw", "fiftyone", view=RAW)
    assert _truth_by_image(_labels(tmp_path / "raw")) == {f: TABBY if k < 4 else TIGER_CAT for k, f in enumerate(files)}
    assert (raw.images, raw.relabelled, raw.excluded) == (6, 0, 0)
    assert raw.describe()[0].startswith("raw view")


def test_fiftyone_samples_carry_each_models_top1(tmp_path):
    run, files = _make_run()
    export_run(run, tmp_path / "fo", "fiftyone", view=RAW)
    targets = _labels(tmp_path / "fo")["labels"].values()
    target = next(t for t in targets if t["attributes"]["wildlens_image"] == files[1])
    attributes = target["attributes"]
    assert [model for _, model in models_in(attributes)] == list(MODELS)
    predictions = run.read_predictions()
    for key, model in models_in(attributes):
        row = predictions[(predictions["model"] == model) & (predictions["image"] == files[1])].iloc[0]
        assert attributes[f"{key}_label"] == row["pred_wnid"]
        assert attributes[f"{key}_confidence"] == pytest.approx(row["prob_1"])
        assert attributes[f"{key}_top5"] == [row["pred_wnid"], *(row[f"pred_wnid_{j}"] for j in range(2, 6))]
        assert attributes[f"{key}_name"] in ("tabby", "tiger cat")
    assert attributes["class_name"] == "tabby" and attributes["url"] == "https://example.org/1.png"
    assert "." not in "".join(attributes) and "/" not in "".join(attributes)  # valid FiftyOne field names


def _explain(run, view, relation="sibling", version=None):
    rows = run.read_predictions()[["model", "image", "true_wnid", "pred_wnid", "prob_1"]].copy()
    rows["correct"] = rows["true_wnid"] == rows["pred_wnid"]
    rows["in_label_space"] = True
    rows["relation"] = [("same" if c else relation) for c in rows["correct"]]
    rows["severity"] = [0 if c else 1 for c in rows["correct"]]
    rows["error_type"] = [pd.NA if c else "fine-grained" for c in rows["correct"]]
    rows["error_reason"] = pd.NA
    write_explained(run, view, rows[list(EXPLAINED_SCHEMA)],
                    inputs_fingerprint(run, view, {"error_types": version or ERROR_TYPES_CODE_VERSION}))


def _relations(out):
    found = {}
    for target in _labels(out)["labels"].values():
        attributes = target["attributes"]
        for key, model in models_in(attributes):
            found[(model, attributes["wildlens_image"])] = tuple(attributes.get(f"{key}_{s}")
                                                                 for s in ("relation", "severity", "error_type"))
    return found


def test_explanations_are_in_when_fresh_and_out_with_a_note_when_stale(tmp_path):
    run, files = _make_run()
    _curate(run, files)
    _explain(run, CURATED)
    fresh = export_run(run, tmp_path / "fresh", "fiftyone")
    assert fresh.explained and not fresh.notes
    relations = _relations(tmp_path / "fresh")
    assert len(relations) == 10 and {r[0] for r in relations.values()} <= {"same", "sibling"}
    assert all(r[1] in (0, 1) for r in relations.values())

    record(run, "tag", files[2], "not-a-photo")  # the log changed: the stored explanations are stale
    stale = export_run(run, tmp_path / "stale", "fiftyone")
    assert not stale.explained
    assert any("python -m explain metrics --run r1" in note for note in stale.notes)
    assert all(r == (None, None, None) for r in _relations(tmp_path / "stale").values())
    assert stale.images == 5  # never fails for it


def test_explanations_of_older_rules_are_left_out(tmp_path):
    """Stored by another version of explain's error-type rules: not exported as current (code review)."""
    run, _ = _make_run()
    _explain(run, RAW, version=ERROR_TYPES_CODE_VERSION - 1)
    summary = export_run(run, tmp_path / "fo", "fiftyone", view=RAW)
    assert not summary.explained and summary.notes


def test_explanations_of_an_uncurated_run_come_from_the_raw_view(tmp_path):
    run, _ = _make_run()
    _explain(run, RAW, relation="cousin")
    summary = export_run(run, tmp_path / "fo", "fiftyone")
    assert summary.explained and "cousin" in {r[0] for r in _relations(tmp_path / "fo").values()}


def test_imagefolder_copies_the_runs_files_and_writes_a_manifest(tmp_path):
    run, files = _make_run()
    _curate(run, files)
    out = tmp_path / "set"
    summary = export_run(run, out, "imagefolder")
    assert (summary.linked, summary.copied + summary.cloned, summary.images, summary.classes) == (0, 5, 5, 3)
    manifest = read_csv(out / "export_manifest.csv", dtype=str, keep_default_na=False)
    assert len(manifest) == 5
    for row in manifest.itertuples():
        exported, stored = out / row.file, run.images_dir / row.image
        assert row.file == f"{row.true_wnid}/{stored.name}"
        # a copy (or a copy-on-write clone): editing it in place never changes the run's image (hostile campaign)
        assert os.stat(exported).st_ino != os.stat(stored).st_ino
        assert exported.read_bytes() == stored.read_bytes()
    by_image = manifest.set_index("image")
    assert by_image.loc[files[4], "true_wnid"] == PERSIAN and by_image.loc[files[4], "relabelled"] == "True"
    assert by_image.loc[files[4], "collected_wnid"] == TIGER_CAT and by_image.loc[files[4], "engine"] == "bing"
    assert files[3] not in by_image.index
    assert sorted(p.name for p in out.iterdir()) == sorted([TABBY, TIGER_CAT, PERSIAN, "export_manifest.csv"])


def test_hostile_text_is_neutralised_in_the_manifest(tmp_path):
    run, files = _make_run()
    _curate(run, files)
    out = tmp_path / "set"
    export_run(run, out, "imagefolder")
    text = (out / "export_manifest.csv").read_text()
    assert f"'{HOSTILE_URL}" in text and "'" + HOSTILE_TAG.replace('"', '""') in text
    for line in text.splitlines():
        for cell in line.split(","):
            assert not cell.lstrip('"').startswith(("=", "+", "@")), cell
    manifest = read_csv(out / "export_manifest.csv", dtype=str, keep_default_na=False).set_index("image")
    assert manifest.loc[files[5], "tags"] == HOSTILE_TAG  # read back exactly
    assert manifest.loc[files[0], "notes"] == HOSTILE_NOTE and manifest.loc[files[0], "url"] == HOSTILE_URL


def test_links_on_request_say_what_they_are(tmp_path):
    run, files = _make_run()
    out = tmp_path / "linked"
    summary = export_run(run, out, "imagefolder", view=RAW, link=True)
    assert (summary.linked, summary.copied) == (6, 0)
    assert any("ARE the run's stored files" in line for line in summary.describe())
    for file in files:
        assert os.stat(out / file).st_ino == os.stat(run.images_dir / file).st_ino  # no second copy


def test_a_hard_link_across_file_systems_falls_back_to_a_copy(tmp_path, monkeypatch):
    run, files = _make_run()

    def no_link(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(export_module.os, "link", no_link)
    out = tmp_path / "set"
    summary = export_run(run, out, "imagefolder", view=RAW, link=True)
    assert (summary.linked, summary.copied + summary.cloned) == (0, 6)
    assert not any("ARE the run's" in line for line in summary.describe())
    for file in files:
        exported = out / file  # raw view: the class it was collected for
        assert exported.read_bytes() == (run.images_dir / file).read_bytes()
        assert os.stat(exported).st_ino != os.stat(run.images_dir / file).st_ino


def test_a_non_empty_destination_is_refused_and_untouched(tmp_path):
    run, _ = _make_run()
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export_run(run, out, "fiftyone")
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary folder left either
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(ExportError, match="not a folder"):
        export_run(run, file, "imagefolder")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_run(run, empty, "imagefolder").images == 6  # an empty folder is fine


def test_a_folder_holding_only_a_killed_exports_leftover_says_so(tmp_path):
    """A hostile campaign: an export into an empty folder killed outright leaves its hidden folder there, and the
    next export said only "not empty (1 entry)". It names the leftover and what to do; it is not removed."""
    run, _ = _make_run()
    out = tmp_path / "mine"
    leftover = out / ".mine.wildlens-export-0a1b2c3d.tmp"
    leftover.mkdir(parents=True)
    with pytest.raises(ExportError, match=r"holds only what a killed export left \(\.mine\.wildlens-export-0a1b2c3d"
                                          r"\.tmp\); remove it and export again"):
        export_run(run, out, "imagefolder")
    assert leftover.is_dir()
    (out / "keep.txt").write_text("mine")  # with anything else there: the folder is not empty, as before
    with pytest.raises(ExportError, match=r"not empty \(2 entries\)"):
        export_run(run, out, "imagefolder")


def test_a_destination_inside_the_runs_folder_is_refused(tmp_path, capsys):
    run, _ = _make_run()
    for inside in (run.path / "export", run.path.parent, run.path.parent / "new"):
        with pytest.raises(ExportError, match="inside the run store's runs folder"):
            export_run(run, inside, "imagefolder")
    assert not (run.path / "export").exists() and not (run.path.parent / "new").exists()
    assert crawl_main(["export", "--run", "r1", "--out", str(run.path / "x"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and err.count("\n") == 1


def test_the_command_line_prints_a_destination_named_with_control_characters_escaped(tmp_path, capsys):
    """A folder name is the user's text: an escape sequence in it (clear the screen, retitle the window)
    reaches the terminal escaped, in the refusal and in the summary alike."""
    run, _ = _make_run()
    hostile = tmp_path / "out\x1b[2J\x1b]0;owned\x07"
    hostile.mkdir()
    (hostile / "mine.txt").write_text("kept")
    assert crawl_main(["export", "--run", "r1", "--out", str(hostile), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and err.count("\n") == 1
    assert "out\\x1b[2J\\x1b]0;owned\\x07 is not empty" in err and (hostile / "mine.txt").read_text() == "kept"
    fresh = tmp_path / "new\x1b[31m"
    assert crawl_main(["export", "--run", "r1", "--out", str(fresh), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "new\\x1b[31m/<wnid>/<file>" in out and fresh.is_dir()


def test_a_name_too_long_for_the_hidden_folder_is_refused_before_anything_is_made(tmp_path):
    run, _ = _make_run()
    parents = tmp_path / "a" / "b"
    with pytest.raises(ExportError, match=r"its last name is 250 bytes, and an export is built under a hidden name "
                                          r"30 bytes longer, over this filesystem's 255: give a name of at most 225"):
        export_run(run, parents / ("x" * 250), "imagefolder")
    assert not (tmp_path / "a").exists(), "no parent made"
    summary = export_run(run, parents / ("y" * 225), "imagefolder")  # the longest that fits
    assert summary.images and (parents / ("y" * 225)).is_dir()
    # Over the system's own limit: the last name gets the same sentence (Path.is_dir raised OSError on
    # it: a traceback, review); a folder above it, the lstat's one line as before the check.
    with pytest.raises(ExportError, match=r"its last name is 300 bytes, .* give a name of at most 225 bytes"):
        export_run(run, parents / ("z" * 300), "imagefolder")
    with pytest.raises(ExportError, match=r"cannot be checked \(File name too long\); give a folder you can read"):
        export_run(run, tmp_path / ("z" * 300) / "out", "imagefolder")


def test_a_failed_export_removes_only_the_folders_it_made_itself(tmp_path, monkeypatch):
    """Through '..' ('new/../x' with the user's empty x) and with a folder someone else makes meanwhile:
    only what this export's own mkdir made is removed (review: the user's x and their q1 were removed)."""
    run, _ = _make_run()
    for image in [p for p in run.images_dir.rglob("*") if p.is_file()]:
        image.unlink()
    (tmp_path / "base" / "x").mkdir(parents=True)
    with pytest.raises(ExportError, match="nothing exported"):
        export_run(run, tmp_path / "base" / "new" / ".." / "x" / "out", "imagefolder")
    assert (tmp_path / "base" / "x").is_dir() and not (tmp_path / "base" / "new").exists()
    real_mkdir = os.mkdir

    def someone_else_first(path, *args, **kwargs):
        if str(path) == str(tmp_path / "q1"):
            real_mkdir(path)  # made by another process just before this export's own mkdir
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(export_module.os, "mkdir", someone_else_first)
    with pytest.raises(ExportError, match="nothing exported"):
        export_run(run, tmp_path / "q1" / "q2" / "out", "imagefolder")
    assert (tmp_path / "q1").is_dir() and not (tmp_path / "q1" / "q2").exists()


def test_a_failed_export_removes_the_parent_folders_it_made_and_keeps_the_rest(tmp_path):
    run, _ = _make_run()
    for image in [p for p in run.images_dir.rglob("*") if p.is_file()]:
        image.unlink()  # nothing left to export: refused after the parents were made
    with pytest.raises(ExportError, match="nothing exported from run r1"):
        export_run(run, tmp_path / "q1" / "q2" / "out", "imagefolder")
    assert not (tmp_path / "q1").exists(), "the folders it made are removed"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    with pytest.raises(ExportError, match="nothing exported"):
        export_run(run, tmp_path / "mine" / "new" / "out", "imagefolder")
    assert not (tmp_path / "mine" / "new").exists() and (tmp_path / "mine" / "notes.txt").read_text() == "kept"
    with pytest.raises(ExportError, match=r"ends in '\.\.': give the folder by its own name"):
        export_run(run, tmp_path / "p1" / "x" / "..", "imagefolder")
    assert not (tmp_path / "p1").exists()


def test_a_dangling_link_or_a_file_on_the_way_to_the_destination_is_named_for_what_it_is(tmp_path):
    """Hostile check: a parent that is a link to nowhere was reported as the OS's "Not a directory",
    with advice to check that the folder was writable; the made parents above it are removed."""
    run, _ = _make_run()
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ExportError) as caught:
        export_run(run, tmp_path / "base" / "gone" / "new", "imagefolder")
    assert str(caught.value) == (f"--out cannot be made: {tmp_path / 'base' / 'gone'} is a symbolic link to "
                                 f"{tmp_path / 'nowhere'}, which does not exist; fix or move it, or give another --out "
                                 "(nothing was left at --out).")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "file").write_text("mine")
    with pytest.raises(ExportError) as caught:  # (it read "cannot be checked (Not a directory)")
        export_run(run, tmp_path / "new" / "file" / "sub" / "out", "imagefolder")
    assert str(caught.value) == (f"--out {tmp_path / 'new' / 'file' / 'sub' / 'out'} cannot be made: "
                                 f"{tmp_path / 'new' / 'file'} is not a folder; fix or move it, or give another --out.")
    assert (tmp_path / "new" / "file").read_text() == "mine" and sorted(os.listdir(tmp_path / "new")) == ["file"]


def test_a_nul_or_a_home_of_no_user_in_the_destination_is_one_line(tmp_path):
    run, _ = _make_run()
    with pytest.raises(ExportError, match=r"holds a NUL character; give the folder's path\.$") as caught:
        export_run(run, str(tmp_path / "a\0b"), "imagefolder")
    assert caught.value.page_text.startswith("The folder ")
    with pytest.raises(ExportError, match=r"^--out ~no-such-user-here/x: ~no-such-user-here names no user's home "
                                          r"here; give the full path\.$"):
        export_run(run, "~no-such-user-here/x", "imagefolder")


def test_a_probability_that_is_not_finite_is_exported_as_null(tmp_path):
    """A hand-edited part with inf: JSON has no infinity (json.dumps refused the export with a traceback)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run, _ = _make_run()
    part = next(run.predictions_dir.rglob("part-*.parquet"))
    table = pq.read_table(part)
    probs = table.column("prob_1").to_pylist()
    probs[0] = float("inf")
    pq.write_table(table.set_column(table.schema.get_field_index("prob_1"), "prob_1",
                                    pa.array(probs, table.schema.field("prob_1").type)), part)
    summary = export_run(run, tmp_path / "fo", "fiftyone", view=RAW)
    assert summary.images
    confidences = [c for t in _labels(tmp_path / "fo")["labels"].values() for k, v in t["attributes"].items()
                   if k.endswith("confidence") for c in (v if isinstance(v, list) else [v])]
    assert None in confidences and all(c is None or 0 <= c <= 1 for c in confidences)


def test_a_killed_export_leaves_no_destination(tmp_path, monkeypatch):
    run, _ = _make_run()
    placed = []
    real = export_module._place

    def dies_on_the_third(source, target, link=False):
        if len(placed) == 2:
            raise KeyboardInterrupt
        placed.append(target)
        return real(source, target, link)

    monkeypatch.setattr(export_module, "_place", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        export_run(run, tmp_path / "out", "fiftyone")
    assert list(tmp_path.iterdir()) == []  # neither DIR nor the temporary folder
    empty = tmp_path / "empty"
    empty.mkdir()
    placed.clear()
    with pytest.raises(KeyboardInterrupt):
        export_run(run, empty, "imagefolder")
    assert [p.name for p in tmp_path.iterdir()] == ["empty"] and not list(empty.iterdir())
    assert len(list(run.images_dir.rglob("*.png"))) == 7  # the run's files are all there


def test_an_empty_folder_of_yours_is_filled_not_replaced(tmp_path, monkeypatch):
    """Its inode and mode stay (a private folder stays private, a shell inside it stays there), and
    `--out .` works (hostile campaign: the folder was swapped for a new one, mode 755)."""
    run, _ = _make_run()
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    before = os.stat(mine)
    summary = export_run(run, mine, "fiftyone", view=RAW)
    after = os.stat(mine)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode) and summary.images == 6
    assert sorted(p.name for p in mine.iterdir()) == ["data", "labels.json"]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert export_run(run, ".", "imagefolder", view=RAW).images == 6
    assert (here / "export_manifest.csv").exists()


def test_missing_and_special_image_files_are_skipped_and_counted(tmp_path):
    run, files = _make_run()
    (run.images_dir / files[0]).unlink()
    (run.images_dir / files[1]).unlink()
    os.mkfifo(run.images_dir / files[1])
    outside = tmp_path / "secret.png"
    outside.write_bytes(_png((1, 2, 3)))
    (run.images_dir / files[2]).unlink()
    (run.images_dir / files[2]).symlink_to(outside)
    summary = export_run(run, tmp_path / "fo", "fiftyone", view=RAW)
    assert summary.images == 3
    assert summary.skipped == {"file missing": 1, "not a regular file": 1, "a link out of the run's images folder": 1}
    assert sorted(summary.skipped_images) == sorted([(files[0], "file missing"), (files[1], "not a regular file"),
                                                     (files[2], "a link out of the run's images folder")])
    assert set(_truth_by_image(_labels(tmp_path / "fo"))) == set(files[3:])
    assert any(line.startswith("skipped 3 images") for line in summary.describe())


def test_the_command_line_prints_the_view_and_what_it_wrote(tmp_path, capsys):
    run, files = _make_run()
    _curate(run, files)
    out = tmp_path / "fo"
    assert crawl_main(["export", "--run", "r1", "--out", str(out), "--format", "fiftyone", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "curated view: 3 relabelled, 1 excluded" in captured.out
    assert f"exported 5 images of 3 classes as fiftyone: {out}/data/ and labels.json" in captured.out
    assert "python -m explain metrics --run r1" in captured.err  # no explanations stored: the note says how
    assert crawl_main(["export", "--run", "r1", "--out", str(out), "--no-progress"]) == 2  # now not empty
    assert "not empty" in capsys.readouterr().err
    raw = tmp_path / "raw"
    assert crawl_main(["export", "--run", "r1", "--out", str(raw), "--format", "fiftyone", "--raw",
                       "--no-progress"]) == 0
    assert "raw view" in capsys.readouterr().out
    assert _truth_by_image(_labels(raw)) == {f: TABBY if k < 4 else TIGER_CAT for k, f in enumerate(files)}


def test_a_run_without_images_is_refused_in_one_line(tmp_path):
    run = RunStore().create_run(run_id="bare")
    with pytest.raises(ExportError, match="has no images"):
        export_run(run, tmp_path / "x", "imagefolder")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("renameat2", [True, False])
def test_the_export_moves_never_replace_what_appeared_in_the_folder(tmp_path, monkeypatch, renameat2):
    """A hostile campaign (found by reading): the export checked DIR was empty, then os.rename'd its entries in, which
    replaces a file silently: a file of the user's put there in between was replaced, then removed by the rollback.
    crawl.export.move_no_replace refuses to replace (renameat2's RENAME_NOREPLACE, or a hard link and a check where
    it is missing), and the export says the folder changed, its own entries taken back, the user's file as it was."""
    import crawl.export as export

    if not renameat2:
        monkeypatch.setattr(export, "_renameat2_noreplace", lambda source, target: False)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("ours")
    (tmp_path / "b.txt").write_text("theirs")
    (tmp_path / "c.txt").write_text("ours too")
    with pytest.raises(FileExistsError):
        export.move_no_replace(tmp_path / "c.txt", tmp_path / "b.txt")
    assert (tmp_path / "b.txt").read_text() == "theirs" and (tmp_path / "c.txt").read_text() == "ours too"
    (tmp_path / "d").mkdir()
    with pytest.raises(FileExistsError):
        export.move_no_replace(tmp_path / "a", tmp_path / "d")  # an empty folder of theirs is not replaced either
    export.move_no_replace(tmp_path / "a", tmp_path / "e")
    assert (tmp_path / "e" / "f.txt").read_text() == "ours" and not (tmp_path / "a").exists()
    # Through the export: a file appears in DIR after the check; the export stops, the file is the user's still.
    run, _ = _make_run()
    out = tmp_path / "out"
    out.mkdir()
    real = export._check_exported

    def a_file_appears(*args, **kwargs):
        real(*args, **kwargs)
        (out / "export_manifest.csv").write_text("mine")

    monkeypatch.setattr(export, "_check_exported", a_file_appears)
    monkeypatch.setattr(export.os, "listdir", lambda path, _real=os.listdir: [
        n for n in _real(path) if not (str(path) == str(out) and n == "export_manifest.csv")])  # the check sees none
    with pytest.raises(ExportError, match=r"was changed while exporting \(export_manifest\.csv appeared there\); "
                                          r"nothing of yours was replaced"):
        export_run(run, out, "imagefolder")
    assert sorted(e.name for e in os.scandir(out)) == ["export_manifest.csv"]  # (scandir: not the patched listdir)
    assert (out / "export_manifest.csv").read_text() == "mine"


def test_a_failed_export_takes_back_only_its_own_files(tmp_path, monkeypatch):
    """The rollback after a failure part-way through the moves removes the files this export moved in, not a
    file a user put into one of its class folders meanwhile (it removed the folders whole: a hostile campaign)."""
    run, _ = _make_run()
    out = tmp_path / "out"
    out.mkdir()
    real = export_module.move_no_replace

    def a_users_file_then_a_clash(source, target):
        if target.name == "export_manifest.csv":  # the last move: the class folders are in DIR already
            wnid = next(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))  # not its temp
            (wnid / "my_own_photo.jpg").write_bytes(b"mine")
            raise FileExistsError(17, "File exists", str(target))
        return real(source, target)

    monkeypatch.setattr(export_module, "move_no_replace", a_users_file_then_a_clash)
    with pytest.raises(ExportError, match="was changed while exporting"):
        export_run(run, out, "imagefolder")
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert len(left) == 1 and left[0].endswith("/my_own_photo.jpg"), left
    assert next(out.rglob("my_own_photo.jpg")).read_bytes() == b"mine"
    assert [p for p in out.iterdir() if p.is_dir() and not any(p.iterdir())] == [], "its emptied folders removed"
