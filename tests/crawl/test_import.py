"""Local import (SRC/<wnid or class name>/<images>) and the crawl command line."""
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.crawl import fake_engine as T
from crawl.cli import main
from crawl.importer import FolderImportError, import_folder, resolve_class_folder
from crawl.store import FolderDestination
from core.runstore import RunStore

TABBY, TIGER_CAT, EGYPTIAN = "n02123045", "n02123159", "n02124075"
ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ["; rm -rf ~ .jpg", "-rf.png", r"a\..\..\evil.jpg", "naïve 猫 \u202egpj.exe", "line\nbreak.jpg", "x" * 200 + ".jpg",
           "$(reboot).jpg"]


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


def tree_fingerprint(root):
    return sorted((p.relative_to(root).as_posix(), p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
                  for p in root.rglob("*") if p.is_file())


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    tabby, tiger, egypt = root / "Tabby", root / TIGER_CAT, root / "egyptian_cat"
    for folder in (tabby, tiger, egypt / "more" / "deeper"):
        folder.mkdir(parents=True)
    for i, name in enumerate(HOSTILE):
        (tabby / name).write_bytes(T.jpeg(300 + i))
    (tabby / "copy.jpg").write_bytes(T.jpeg(300))  # exact duplicate of HOSTILE[0]
    (tabby / "page.jpg").write_bytes(T.html_page())
    (tabby / "cut.png").write_bytes(T.truncated(T.png(320)))
    (tabby / "tiny.jpg").write_bytes(T.jpeg(321, size=(10, 10)))
    (tabby / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (tiger / "cmyk.jpg").write_bytes(T.cmyk_jpeg(330))
    (tiger / "alpha.png").write_bytes(T.palette_png_with_transparency(331))
    (tiger / "near-of-tabby.jpg").write_bytes(T.near_copy(T.jpeg(301)))  # same picture as a tabby file
    (egypt / "more" / "deeper" / "rotated.jpg").write_bytes(T.exif_rotated_jpeg(340))
    (egypt / "anim.gif").write_bytes(T.animated_gif(341))
    (egypt / "deep16.png").write_bytes(T.png_16bit(342))
    (root / "loose.jpg").write_bytes(T.jpeg(350))
    return root


def test_import_cli_writes_folder_and_manifest(src, tmp_path, capsys):
    before = tree_fingerprint(src)
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    assert tree_fingerprint(src) == before  # nothing in SRC changed
    manifest = pd.read_csv(out / "manifest.csv")
    assert {"wnid", "file", "sha256", "width", "height", "status", "reason", "duplicate_of"} <= set(manifest.columns)
    by_name = manifest.set_index("original_name")
    assert set(by_name["wnid"]) == {TABBY, TIGER_CAT, EGYPTIAN}
    for name in HOSTILE:  # stored under hash names, extension from the decoded format ('-rf.png' is a JPEG)
        row = by_name.loc[f"Tabby/{name}"]
        assert (row.status, row.file) == ("accepted", f"{TABBY}/{row.sha256[:16]}.jpg")
    assert by_name.loc["Tabby/copy.jpg", "status"] == "duplicate"
    assert by_name.loc["Tabby/copy.jpg", "duplicate_of"] == by_name.loc[f"Tabby/{HOSTILE[0]}", "file"]
    assert by_name.loc["Tabby/page.jpg", "reason"] == "html: an HTML page, not an image"
    assert by_name.loc["Tabby/cut.png", "reason"].startswith("undecodable:")
    assert by_name.loc["Tabby/tiny.jpg", "reason"].startswith("too-small:")
    near = by_name.loc[f"{TIGER_CAT}/near-of-tabby.jpg"]
    assert near.status == "duplicate" and near.other_wnids == TABBY and near.reason.startswith("near-duplicate")
    assert by_name.loc[f"Tabby/{HOSTILE[1]}", "other_wnids"] == TIGER_CAT
    rotated = by_name.loc["egyptian_cat/more/deeper/rotated.jpg"]
    assert (rotated.status, rotated.width, rotated.height) == ("accepted", 100, 160)
    assert ".DS_Store" not in " ".join(by_name.index) and "loose.jpg" not in " ".join(by_name.index)
    accepted = manifest[manifest["status"] == "accepted"]
    stored = sorted(p.relative_to(out).as_posix() for p in out.glob("n*/*"))
    assert stored == sorted(accepted["file"])
    assert all(name.split("/")[1][:16].isalnum() for name in stored)  # hash names only
    for row in accepted.itertuples():  # byte-identical copies
        original = (src / row.original_name).read_bytes()
        assert (out / row.file).read_bytes() == original
    err = capsys.readouterr().err
    assert "1 file(s) directly in" in err

    # importing again adds nothing
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    assert len(pd.read_csv(out / "manifest.csv")) == len(manifest)
    assert "already imported" in capsys.readouterr().err


def test_import_into_a_run(src):
    summary = import_folder(src, RunStore().create_run(run_id="mine"), label_space="imagenet-1k")
    run = RunStore().open_run("mine")
    assert run.info.wnids == [TABBY, TIGER_CAT, EGYPTIAN] and run.info.source == "import"
    assert len(run.usable_images()) == summary.new_accepted == int(summary.per_class["accepted"].sum())
    assert summary.folders == {"Tabby": TABBY, TIGER_CAT: TIGER_CAT, "egyptian_cat": EGYPTIAN}
    table = summary.per_class.set_index("wnid")
    assert table.loc[TABBY, "rejected:html"] == 1 and table.loc[TABBY, "duplicate"] == 1


def test_import_cli_into_run(src, capsys):
    assert main(["import", str(src), "--run", "from-cli", "--no-progress"]) == 0
    assert "created run from-cli" in capsys.readouterr().err
    assert len(RunStore().open_run("from-cli").usable_images()) > 5


@pytest.mark.parametrize("name, wnid", [("tabby", TABBY), ("Tabby Cat", TABBY), ("tiger_cat", TIGER_CAT),
                                        ("EGYPTIAN-CAT", EGYPTIAN), (TABBY, TABBY), ("tabby.n.01", TABBY)])
def test_folder_names_resolve_exactly(name, wnid):
    assert resolve_class_folder(name, "imagenet-1k") == wnid


def test_ambiguous_or_unknown_folder_names_are_refused_before_anything_is_copied(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    for name in ("crane", "kitty cat", "tabby"):
        (src / name).mkdir(parents=True)
        (src / name / "a.jpg").write_bytes(T.jpeg(1))
    with pytest.raises(FolderImportError) as info:
        import_folder(src, out)
    message = str(info.value)
    assert "'crane' is ambiguous in imagenet-1k: n02012849" in message and "n03126707" in message
    assert "'kitty cat' is not a class name of imagenet-1k" in message
    assert not out.exists()
    with pytest.raises(FolderImportError, match="not a class of imagenet-1k"):
        resolve_class_folder("n02121808", "imagenet-1k")  # domestic cat: in ImageNet-21k only
    assert resolve_class_folder("n02121808", "imagenet-21k") == "n02121808"


def test_unmappable_folders_are_one_line_naming_each_reason(tmp_path, capsys):
    # The CLI and the dashboard show one line: the reasons must be on it, not on lines 2..n.
    src = tmp_path / "src"
    for name in ("crane", "astronaut", "tabby"):
        (src / name).mkdir(parents=True)
        (src / name / "a.jpg").write_bytes(T.jpeg(1))
    assert main(["import", str(src), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 class folder(s) cannot be mapped" in err
    assert "'crane' is ambiguous" in err and "'astronaut'" in err


def test_every_unmappable_folder_is_named_and_a_folder_with_an_equals_sign_can_be_mapped(tmp_path, capsys):
    """A hostile-input campaign (2026-12-06): the line stopped at 500 characters after two of four
    folders' reasons (the others showed up only on the next try), and --map split at the first '=', so
    a folder 'cats=2023' could never be mapped. Now every folder is named before the reasons, and --map
    splits at the last '=' (no class name holds one)."""
    src = tmp_path / "src"
    for name in ("Crane", "cardigan", "maillot", "n02123045.old", "cats=2023"):
        (src / name).mkdir(parents=True)
        (src / name / "a.jpg").write_bytes(T.jpeg(len(name)))
    assert main(["import", str(src), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "5 class folder(s) cannot be mapped" in err, err
    fix, named = err.split(" Why: ")[0].split("on the Import page: in place): ")
    assert "--map FOLDER=WNID" in fix and "--skip FOLDER" in fix
    assert all(f"'{name}'" in named for name in ("Crane", "cardigan", "maillot", "n02123045.old", "cats=2023")), err
    # Long names, and one with a newline: the fix and every folder still on the one line (a review, 2026-12-06).
    many = tmp_path / "many"
    for i in range(12):
        (many / (f"{i:02d}" + "x" * 200)).mkdir(parents=True)
        (many / (f"{i:02d}" + "x" * 200) / "a.jpg").write_bytes(T.jpeg(100 + i))
    (many / "two\nlines").mkdir()
    (many / "two\nlines" / "a.jpg").write_bytes(T.jpeg(99))
    assert main(["import", str(many), "--out", str(tmp_path / "o2"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--skip FOLDER" in err and "'two\\nlines'" in err, err
    assert all(f"'{i:02d}xxx" in err for i in range(12)), err
    skips = [arg for name in ("Crane", "cardigan", "maillot", "n02123045.old") for arg in ("--skip", name)]
    assert main(["import", str(src), "--out", str(tmp_path / "o"), "--no-progress", "--map", f"cats=2023={TABBY}",
                 *skips]) == 0, capsys.readouterr().err
    manifest = FolderDestination(tmp_path / "o").read_manifest()
    assert manifest[manifest["status"] == "accepted"]["wnid"].tolist() == [TABBY]


def test_import_errors_exit_2(tmp_path, capsys):
    import os

    assert main(["import", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "nope is not a folder (nothing is there)" in capsys.readouterr().err
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name, kind in (("pipe", "a FIFO, a named pipe"), ("file.txt", "a file"), ("dangling", "a broken symbolic link"),
                       ("loop", "a symbolic link that leads back to itself")):
        assert main(["import", str(tmp_path / name), "--out", str(tmp_path / "o")]) == 2
        assert f"{name} is not a folder ({kind})" in capsys.readouterr().err
    # a stale staging folder whose lock file is a link does not stop every later import (code review)
    from core.runstore import RunStore
    from crawl.importer import import_new_run

    staging = RunStore().runs_dir / ".import-old"
    staging.mkdir(parents=True)
    (staging / ".wildlens-collect.lock").symlink_to(tmp_path / "nowhere")
    os.utime(staging, (0, 0))
    src = tmp_path / "src" / "n02123045"
    src.mkdir(parents=True)
    from tests.crawl import fake_engine as T

    (src / "a.jpg").write_bytes(T.jpeg(1))
    assert import_new_run(tmp_path / "src", run_id="after-staging").run_id == "after-staging"
    assert not (tmp_path / "nowhere").exists()
    os.mkfifo(tmp_path / "two\nlines")  # a name's newline cut the message to a bare path (hostile campaign)
    assert main(["import", str(tmp_path / "two\nlines"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "two\\nlines is not a folder (a FIFO, a named pipe)" in err and err.count("\n") == 1, err


def test_too_large_and_unreadable_files(tmp_path):
    src = tmp_path / "src" / TABBY
    src.mkdir(parents=True)
    (src / "big.jpg").write_bytes(T.jpeg(5, size=(400, 400), quality=100))
    (src / "locked.jpg").write_bytes(T.jpeg(6))
    os.chmod(src / "locked.jpg", 0)
    try:
        from crawl.config import ValidationConfig

        summary = import_folder(tmp_path / "src", tmp_path / "out", validation=ValidationConfig(max_bytes=20_000))
        again = import_folder(tmp_path / "src", tmp_path / "out", validation=ValidationConfig(max_bytes=20_000))
    finally:
        os.chmod(src / "locked.jpg", 0o644)
    manifest = FolderDestination(tmp_path / "out").read_manifest().set_index("original_name")
    assert manifest.loc[f"{TABBY}/big.jpg", "reason"].startswith("too-large:")
    if os.geteuid() != 0:  # root reads anything
        assert manifest.loc[f"{TABBY}/locked.jpg", "reason"].startswith("unreadable:")
    assert again.new_rows == 0 and summary.new_rows == 2


# --------------------------------------------------------------------------- fetch / check CLI
def test_fetch_cli_with_progress_and_summary(tmp_path, capsys):
    out = tmp_path / "out"
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [engine.add(f"/t/{i}.jpg", T.jpeg(400 + i)) for i in range(6)]
        code = main(["fetch", "--query", "tabby.n.01", "--k", "3", "--out", str(out), "--base-url", engine.base_url,
                     "--threads", "2", "--read-timeout", "1", "--context", "cat"])
        assert code == 1  # 'tabby cat' has no results here: short, and said so
        assert "the engine listed no more usable images" in capsys.readouterr().err
        engine.results["tabby cat"] = engine.results.pop("tabby")
        assert main(["fetch", "--query", "tabby.n.01", "--k", "3", "--out", str(out), "--base-url", engine.base_url,
                     "--context", "cat"]) == 0
    captured = capsys.readouterr()
    assert TABBY in captured.out and "3 new images accepted" in captured.err
    assert main(["summary", "--out", str(out), "--k", "3"]) == 0
    assert "short_by" in capsys.readouterr().out


def test_offline_cli_exit_code_and_message(tmp_path, capsys):
    closed = T.closed_port_url()
    assert main(["fetch", "--wnids", TABBY, "--out", str(tmp_path), "--base-url", closed, "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "cannot reach 127.0.0.1: connection refused. No internet? Use local import: python -m crawl import" in err
    assert main(["fetch", "--wnids", TABBY, "--run", "never", "--base-url", closed, "--no-progress"]) == 3
    assert RunStore().list_runs() == []  # offline: no empty run is created
    assert main(["check", "--base-url", closed]) == 3
    assert main(["check"]) == 3  # www.bing.com does not resolve under the test guard
    assert "cannot reach www.bing.com" in capsys.readouterr().err
    with T.FakeEngine() as engine:
        assert main(["check", "--base-url", engine.base_url]) == 0


# --------------------------------------------------------------------------- issue 11: no image deleted, no hang
def stored_files(folder):
    """Every stored image under ``folder`` with its mtime and hash: proof that nothing was rewritten."""
    return tree_fingerprint(folder) if folder.exists() else []


def test_src_inside_the_destination_is_refused_before_anything_is_touched(src, tmp_path, capsys):
    """Issue 11 item 1: importing a run's own images folder into that run deleted every image."""
    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 0
    run = RunStore().open_run("R")
    before = stored_files(run.images_dir)
    assert len(before) > 5
    link = tmp_path / "link-to-images"
    link.symlink_to(run.images_dir)
    for manifest_moved in (False, True):
        if manifest_moved:
            run.manifest_path.rename(tmp_path / "moved-away.parquet")
        for source in (run.images_dir, run.images_dir / TABBY, link):
            capsys.readouterr()
            assert main(["import", str(source), "--run", "R", "--no-progress"]) == 2
            err = capsys.readouterr().err.strip()
            assert err.startswith("error: ") and len(err.splitlines()) == 1
            assert "is inside the destination" in err and "choose another --run or --out" in err
            assert stored_files(run.images_dir) == before
    # the destination inside SRC, reached through a symbolic link, is refused as before
    (tmp_path / "out-link").symlink_to(src / "Tabby", target_is_directory=True)
    with pytest.raises(FolderImportError, match="inside the source"):
        import_folder(src, tmp_path / "out-link" / "sub")


def test_missing_manifest_beside_stored_images_is_an_error_not_a_sweep(src, tmp_path, capsys):
    """Issue 11 item 2: with manifest.csv removed, the orphan sweep deleted every stored image."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    before = stored_files(out / TABBY) + stored_files(out / TIGER_CAT)
    (out / "manifest.csv").rename(tmp_path / "moved-away.csv")
    other = tmp_path / "other"
    (other / TABBY).mkdir(parents=True)
    (other / TABBY / "new.jpg").write_bytes(T.jpeg(999))
    capsys.readouterr()
    assert main(["import", str(other), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{out} holds" in err and "stored image(s) but no manifest" in err and "nothing was changed" in err
    assert f"python -m crawl import {out} --out NEW_DIR" in err
    assert stored_files(out / TABBY) + stored_files(out / TIGER_CAT) == before
    assert not (out / "manifest.csv").exists()
    # the advice works: the stored files re-imported into a new manifest, every one of them accepted
    assert main(["import", str(out), "--out", str(tmp_path / "rebuilt"), "--no-progress"]) == 0
    rebuilt = FolderDestination(tmp_path / "rebuilt").read_manifest()
    assert (rebuilt["status"] == "accepted").sum() == len(list(out.glob("n*/*")))


def test_missing_run_manifest_beside_stored_images_is_an_error(src, tmp_path, capsys):
    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 0
    run = RunStore().open_run("R")
    before = stored_files(run.images_dir)
    run.manifest_path.unlink()
    capsys.readouterr()
    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "run R holds" in err and f"python -m crawl import {run.images_dir} --run NEW_RUN" in err
    assert stored_files(run.images_dir) == before


@pytest.mark.parametrize("damage", [b"\x00\x01garbage\n", b"wnid,file\n\"unterminated\n"])
def test_unreadable_manifest_says_how_to_rebuild_and_changes_nothing(src, tmp_path, capsys, damage):
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    before = stored_files(out / TABBY)
    (out / "manifest.csv").write_bytes(damage)
    capsys.readouterr()
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a readable manifest" in err
    assert "move it away" not in err or "python -m crawl import" in err  # never 'start afresh' alone
    assert f"python -m crawl import {out} --out NEW_DIR" in err
    assert stored_files(out / TABBY) == before and (out / "manifest.csv").read_bytes() == damage


@pytest.mark.parametrize("name", ["manifest.csv", ".wildlens-manifest.journal"])
def test_a_fifo_in_place_of_a_folders_manifest_or_journal_is_one_line_not_a_hang(src, tmp_path, capsys, name):
    """A hostile campaign: a FIFO at DIR/manifest.csv hung `crawl import --out DIR` and `crawl summary --out DIR`
    (pandas opened it and waited for a writer), one at the journal hung the import. Each is one line at once,
    the FIFO left in place, nothing changed."""
    import threading

    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    (out / name).unlink(missing_ok=True)
    os.mkfifo(out / name)
    capsys.readouterr()
    commands = [["import", str(src), "--out", str(out), "--no-progress"]]
    commands += [["summary", "--out", str(out)]] if name == "manifest.csv" else []
    for command in commands:
        codes = []
        worker = threading.Thread(target=lambda: codes.append(main(command)), daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), f"{command[0]} waited on the FIFO"
        err = capsys.readouterr().err.strip()
        assert codes == [2] and len(err.splitlines()) == 1, err
        assert f"{out / name}" in err and "FIFO" in err, err
    assert (out / name).is_fifo()


def test_damaged_run_manifest_says_how_to_rebuild(src, capsys):
    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 0
    run = RunStore().open_run("R")
    before = stored_files(run.images_dir)
    run.manifest_path.write_bytes(b"PAR1 not parquet")
    capsys.readouterr()
    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is not a readable Parquet file" in err and f"python -m crawl import {run.images_dir} --run NEW_RUN" in err
    assert stored_files(run.images_dir) == before


def test_only_the_tools_own_temporary_files_are_swept(src, tmp_path):
    """A user's hidden '.notes.tmp' and a stored image without a row are not WildLens temporaries."""
    out = tmp_path / "out"
    import_folder(src, out)
    folder = out / TABBY
    ours = folder / ".0123456789abcdef.jpg.a1b2c3d4e5f6.tmp"  # what core.runstore.atomic_path names
    ours.write_bytes(b"half a file")
    theirs = folder / ".notes.tmp"
    theirs.write_bytes(b"a user's file")
    stray = folder / "fedcba9876543210.jpg"  # hash-like name, no manifest row
    stray.write_bytes(T.jpeg(777))
    summary = import_folder(src, out)
    assert not ours.exists()
    assert theirs.read_bytes() == b"a user's file" and stray.read_bytes() == T.jpeg(777)
    assert any("1 file(s) in the class folders have no manifest row" in note for note in summary.notes)


# --------------------------------------------------------------------------- issue 11: read-only destinations
def cli_unprivileged(*args: str) -> subprocess.CompletedProcess:
    """``python -m crawl ARGS`` in a process for which file modes count. Root ignores them, so as
    root the child drops the two capabilities that let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH)."""
    cmd = [sys.executable, "-m", "crawl", *args]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: a read-only folder cannot be made")
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", *cmd]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.stderr.startswith("setpriv:"):
        pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
    return done


def read_only(*folders: Path):
    """chmod 555 for the ``with`` block (restored after, so tmp_path can be cleaned up)."""
    from contextlib import contextmanager

    @contextmanager
    def block():
        for folder in folders:
            folder.chmod(0o555)
        try:
            yield
        finally:
            for folder in folders:
                folder.chmod(0o755)

    return block()


def assert_one_line_error(done, *phrases):
    err = done.stderr.strip()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in err and len(err.splitlines()) == 1 and err.startswith("error: "), err
    for phrase in phrases:
        assert phrase in err, err


def test_import_into_a_dangling_link_is_a_one_line_error(src, tmp_path, capsys):
    """A hostile-input campaign (2026-12-06): --out naming a symbolic link to nowhere raised a
    FileExistsError traceback from the lock's mkdir. Now one line, and the link is left as it was."""
    out = tmp_path / "dl"
    out.symlink_to("nowhere_dir", target_is_directory=True)
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{out} is a symbolic link to nowhere_dir, which does not exist" in err and err.count("\n") == 1, err
    assert out.is_symlink() and not (tmp_path / "nowhere_dir").exists()


def test_import_into_a_read_only_destination_is_a_one_line_error(src, tmp_path):
    """Issue 11 item 10 (crawl part): a PermissionError traceback after the work."""
    out = tmp_path / "out"
    out.mkdir()
    with read_only(out):
        done = cli_unprivileged("import", str(src), "--out", str(out), "--no-progress")
    assert_one_line_error(done, f"Cannot write to {out}", "Permission denied", "choose a destination you can write to")
    assert list(out.iterdir()) == []

    assert main(["import", str(src), "--run", "R", "--no-progress"]) == 0
    run = RunStore().open_run("R")
    before = stored_files(run.images_dir)
    with read_only(run.path, run.images_dir, *run.images_dir.iterdir()):
        done = cli_unprivileged("import", str(src), "--run", "R", "--no-progress")
    assert_one_line_error(done, "Cannot write to run R", "Permission denied")
    assert stored_files(run.images_dir) == before


def test_new_run_in_a_read_only_store_is_a_one_line_error(src):
    home = Path(os.environ["WILDLENS_HOME"])
    (home / "runs").mkdir(parents=True, exist_ok=True)
    with read_only(home, home / "runs"):
        done = cli_unprivileged("import", str(src), "--run", "fresh", "--no-progress")
    assert_one_line_error(done, "Cannot create run fresh in", "Permission denied")


def test_fetch_into_a_read_only_destination_fails_before_any_request(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [engine.add(f"/t/{i}.jpg", T.jpeg(600 + i)) for i in range(3)]
        with read_only(out):
            done = cli_unprivileged("fetch", "--wnids", TABBY, "--k", "2", "--out", str(out), "--base-url", engine.base_url,
                                    "--no-progress")
        assert_one_line_error(done, f"Cannot write to {out}", "Permission denied")
        assert sum(engine.hits.values()) == 0  # not even the engine was asked
    assert list(out.iterdir()) == []


# --------------------------------------------------------------------------- issue 11: special files in SRC
@pytest.fixture
def hostile_src(tmp_path):
    """A source with every kind of entry that is not a regular file inside it: a link to
    /dev/zero, a FIFO, link loops, links out of SRC (a file, a folder, /dev and /)."""
    root = tmp_path / "hostile"
    tabby = root / "Tabby"
    tabby.mkdir(parents=True)
    (tabby / "good.jpg").write_bytes(T.jpeg(700))
    (tabby / "zero.jpg").symlink_to("/dev/zero")
    os.mkfifo(tabby / "fifo.jpg")
    (tabby / "loop.jpg").symlink_to("loop.jpg")
    (tabby / "sub").mkdir()
    (tabby / "sub" / "deep.png").write_bytes(T.png(701))
    (tabby / "sub" / "up").symlink_to("..", target_is_directory=True)  # a folder loop inside SRC
    (tabby / "same-good.jpg").symlink_to("good.jpg")  # inside SRC: followed (an exact duplicate)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.jpg").write_bytes(T.jpeg(702))
    (tabby / "secret.jpg").symlink_to(elsewhere / "secret.jpg")
    (root / "tiger cat").symlink_to(elsewhere, target_is_directory=True)  # a class folder out of SRC
    (root / "egyptian cat").symlink_to("/dev", target_is_directory=True)
    (root / "Persian cat").symlink_to("/", target_is_directory=True)
    os.mkfifo(root / "stray-fifo")
    return root


def test_import_reads_regular_files_inside_src_only(hostile_src, tmp_path, capsys):
    """Issue 11 item 3: MemoryError on /dev/zero, a hang on a FIFO, a walk of the whole disk."""
    import time

    out = tmp_path / "out"
    started = time.monotonic()
    assert main(["import", str(hostile_src), "--out", str(out), "--no-progress"]) == 0
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    manifest = FolderDestination(out).read_manifest().set_index("original_name")
    reason = manifest["reason"].fillna("").to_dict()
    status = manifest["status"].to_dict()
    assert status["Tabby/good.jpg"] == "accepted" and status["Tabby/sub/deep.png"] == "accepted"
    assert status["Tabby/same-good.jpg"] == "duplicate"
    assert reason["Tabby/zero.jpg"] == ("outside-src: a symbolic link to /dev/zero, outside the source folder "
                                        "(--follow-links follows it)")
    assert reason["Tabby/fifo.jpg"] == "not-regular: a FIFO (named pipe), not a regular file"
    assert reason["Tabby/loop.jpg"].startswith("symlink-loop: ")
    assert reason["Tabby/sub/up"].startswith("symlink-loop: ")
    assert reason["Tabby/secret.jpg"].startswith("outside-src: a symbolic link to ")
    for folder, wnid in (("tiger cat", TIGER_CAT), ("egyptian cat", EGYPTIAN), ("Persian cat", "n02123394")):
        assert reason[folder].startswith("outside-src: a symbolic link to "), folder
        assert manifest.loc[folder, "wnid"] == wnid
    assert len(manifest) == 11  # nothing from /, /dev or the folder out of SRC
    assert "skipped 8 entries that are not regular files of their own class folder in" in err
    assert "1 entry directly in" in err and "stray-fifo" in err
    table = FolderDestination(out).read_manifest()
    assert set(table["file"].dropna()) == {p.relative_to(out).as_posix() for p in out.glob("n*/*")}

    # importing again adds nothing and still says what was skipped
    summary = import_folder(hostile_src, out)
    assert summary.new_rows == 0 and len(summary.skipped) == 8
    assert dict(summary.skipped)["Tabby/fifo.jpg"].startswith("not-regular")


def test_follow_links_follows_links_out_of_src_but_reads_regular_files_only(tmp_path):
    src = tmp_path / "src"
    (src / "Tabby").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.jpg").write_bytes(T.jpeg(710))
    (elsewhere / "fifo.jpg").symlink_to("/dev/zero")
    (src / "Tabby" / "secret.jpg").symlink_to(elsewhere / "secret.jpg")
    (src / "Tabby" / "zero.jpg").symlink_to("/dev/zero")
    (src / "tiger cat").symlink_to(elsewhere, target_is_directory=True)
    summary = import_folder(src, tmp_path / "out", follow_links=True)
    manifest = FolderDestination(tmp_path / "out").read_manifest().set_index("original_name")
    # read once, under the class folder that holds it by its real path (issue 22 item 4: it was
    # read twice, first as a tabby)
    assert manifest.loc["tiger cat/secret.jpg", "status"] == "accepted"
    assert manifest.loc["Tabby/secret.jpg", "reason"].startswith("other-class: a symbolic link into class folder "
                                                                 "'tiger cat'")
    assert manifest.loc["Tabby/zero.jpg", "reason"] == "not-regular: a character device, not a regular file"
    assert manifest.loc["tiger cat/fifo.jpg", "reason"].startswith("not-regular")
    assert summary.new_accepted == 1


def test_a_file_or_class_folder_whose_name_is_not_utf8_is_a_row_with_its_reason_not_a_traceback(tmp_path, capsys):
    """A hostile-input campaign (2026-12-06): one file named b'bad\\xff.png' stopped the whole import
    with a UnicodeEncodeError from the journal (no run, nothing imported). Now that file is a rejected
    row whose name is shown with \\xNN, the rest is imported, and a second import adds nothing; a class
    folder so named is refused in one line, and mapped by hand its files are rows with that reason."""
    src = tmp_path / "src"
    (src / TABBY).mkdir(parents=True)
    (src / TABBY / "good.jpg").write_bytes(T.jpeg(730))
    bad = os.fsdecode(b"bad\xff.jpg")  # the name as Python lists it: a lone surrogate
    (src / TABBY / bad).write_bytes(T.jpeg(731))
    # A link whose target's name is not UTF-8 (a review, 2026-12-06: its reason stopped the import the same way).
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / bad).write_bytes(T.jpeg(733))
    (src / TABBY / "link.jpg").symlink_to(tmp_path / "outside" / bad)
    for _ in range(2):
        summary = import_folder(src, tmp_path / "out")
    manifest = FolderDestination(tmp_path / "out").read_manifest().set_index("original_name")
    assert len(manifest) == 3 and summary.new_accepted == 0, "the second import adds nothing"
    assert manifest.loc[f"{TABBY}/link.jpg", "reason"].startswith("outside-src: a symbolic link to ")
    assert "bad\\xff.jpg" in manifest.loc[f"{TABBY}/link.jpg", "reason"]
    assert manifest.loc[f"{TABBY}/good.jpg", "status"] == "accepted"
    row = manifest.loc[f"{TABBY}/bad\\xff.jpg"]
    assert row["status"] == "rejected" and "its name is not UTF-8" in row["reason"] and "rename it" in row["reason"]
    folder = tmp_path / "src2" / os.fsdecode(b"caf\xe9")
    folder.mkdir(parents=True)
    (folder / "a.jpg").write_bytes(T.jpeg(732))
    assert main(["import", str(tmp_path / "src2"), "--out", str(tmp_path / "out2"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "folder 'caf\\xe9': its name is not UTF-8" in err and err.count("\n") == 1, err
    code = main(["import", str(tmp_path / "src2"), "--out", str(tmp_path / "out3"), "--no-progress",
                 "--map", os.fsdecode(b"caf\xe9") + f"={TABBY}"])
    assert code == 0, capsys.readouterr().err  # nothing read: its one row says why
    row = FolderDestination(tmp_path / "out3").read_manifest().iloc[0]
    assert row["original_name"] == "caf\\xe9" and "its name is not UTF-8" in row["reason"]


def test_huge_files_are_never_read(tmp_path):
    """Reads stop at the size limit: a 64 GiB sparse file is judged by its size, not hashed whole."""
    import time

    src = tmp_path / "src" / TABBY
    src.mkdir(parents=True)
    with open(src / "huge.jpg", "wb") as handle:
        handle.truncate(64 << 30)
    (src / "ok.jpg").write_bytes(T.jpeg(720))
    started = time.monotonic()
    summary = import_folder(tmp_path / "src", tmp_path / "out")
    assert time.monotonic() - started < 10
    manifest = FolderDestination(tmp_path / "out").read_manifest().set_index("original_name")
    assert manifest.loc[f"{TABBY}/huge.jpg", "reason"] == f"too-large: {64 << 30} bytes > limit {20 * 1024 * 1024}"
    assert summary.new_accepted == 1


def test_unreadable_folders_are_recorded_not_dropped(tmp_path):
    src = tmp_path / "src"
    (src / "Tabby" / "locked").mkdir(parents=True)
    (src / "Tabby" / "locked" / "a.jpg").write_bytes(T.jpeg(730))
    (src / "Tabby" / "ok.jpg").write_bytes(T.jpeg(731))
    (src / TIGER_CAT).mkdir()
    (src / TIGER_CAT / "b.jpg").write_bytes(T.jpeg(732))
    out = tmp_path / "out"
    (src / "Tabby" / "locked").chmod(0)
    (src / TIGER_CAT).chmod(0)
    try:
        done = cli_unprivileged("import", str(src), "--out", str(out), "--no-progress")
    finally:
        (src / "Tabby" / "locked").chmod(0o755)
        (src / TIGER_CAT).chmod(0o755)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "skipped 2 entries" in done.stderr
    manifest = FolderDestination(out).read_manifest().set_index("original_name")
    assert manifest.loc["Tabby/locked", "reason"] == "unreadable: folder: Permission denied"
    assert manifest.loc[TIGER_CAT, "reason"] == "unreadable: folder: Permission denied"
    assert manifest.loc["Tabby/ok.jpg", "status"] == "accepted"


def test_unreadable_source_is_a_one_line_error(tmp_path):
    src = tmp_path / "src"
    (src / "Tabby").mkdir(parents=True)
    src.chmod(0)
    try:
        done = cli_unprivileged("import", str(src), "--out", str(tmp_path / "out"), "--no-progress")
    finally:
        src.chmod(0o755)
    assert_one_line_error(done, f"{src} cannot be read", "Permission denied")


# --------------------------------------------------------------------------- issue 12 item 2: import is its own flow
ESPRESSO, PALACE, MISSILE, PROJECTILE = "n07920052", "n03877845", "n03773504", "n04008634"


@pytest.fixture
def mixed_src(tmp_path):
    """The issue's folders: three good names, one ambiguous ('missile'), one unknown ('astronaut')."""
    root = tmp_path / "mixed"
    for seed, name in enumerate(("tabby", "espresso", "missile", "palace", "astronaut")):
        (root / name).mkdir(parents=True)
        for i in range(2):
            (root / name / f"{i}.jpg").write_bytes(T.jpeg(900 + 10 * seed + i))
    return root


def test_plan_says_what_each_folder_is(mixed_src):
    from crawl.importer import plan_folders

    (mixed_src / "tabby" / "sub").mkdir()
    (mixed_src / "tabby" / "sub" / "2.jpg").write_bytes(T.jpeg(990))
    plan = plan_folders(mixed_src, "imagenet-1k")
    by = {f.folder: f for f in plan.folders}
    assert [f.folder for f in plan.folders] == sorted(by)
    assert (by["tabby"].status, by["tabby"].wnid, by["tabby"].files) == ("resolved", TABBY, 3)
    assert plan.resolved == {"espresso": ESPRESSO, "palace": PALACE, "tabby": TABBY}
    missile = by["missile"]
    assert missile.status == "ambiguous" and missile.wnid is None and missile.files == 2
    assert [(c.wnid, c.synset) for c in missile.candidates] == [(MISSILE, "missile.n.01"),
                                                                 (PROJECTILE, "projectile.n.01")]
    assert missile.candidates[0].label.startswith("missile.n.01 — a rocket carrying a warhead")
    assert by["astronaut"].status == "unknown" and "not a class name of imagenet-1k" in by["astronaut"].reason
    table = plan.table().set_index("folder")
    assert table.loc["missile", "note"] == f"one of: missile.n.01 ({MISSILE}); projectile.n.01 ({PROJECTILE})"
    assert table.loc["palace", "class"] == "palace" and table.loc["palace", "wnid"] == PALACE
    # close matches of an unknown name are offered when there are any
    (mixed_src / "tabbby").mkdir()
    (mixed_src / "crane.n.04").mkdir()  # a synset name: the machine
    by = {f.folder: f for f in plan_folders(mixed_src, "imagenet-1k").folders}
    assert by["tabbby"].status == "unknown" and by["tabbby"].candidates[0].wnid == TABBY
    assert by["crane.n.04"].wnid == "n03126707"


def test_hostile_folder_names_are_data(tmp_path):
    from crawl.importer import plan_folders

    names = ["**x**[y](evil.invalid)", "$(reboot)", "naïve 猫", "-rf", "a\nb"]
    for name in names:
        (tmp_path / "s" / name).mkdir(parents=True)
    plan = plan_folders(tmp_path / "s")
    assert sorted(f.folder for f in plan.folders) == sorted(names)
    assert all(f.status == "unknown" for f in plan.folders)


def test_new_run_from_a_mapping_imports_the_good_folders(mixed_src):
    from crawl.importer import import_new_run

    store = RunStore()
    summary = import_new_run(mixed_src, {"missile": MISSILE, "astronaut": None}, store, title="weapons and cats")
    run = store.open_run(summary.run_id)
    info = run.info
    assert info.title == "weapons and cats" and info.source == "import" and info.label_space == "imagenet-1k"
    assert info.wnids == summary.wnids == [TABBY, MISSILE, PALACE, ESPRESSO]  # label-space order
    assert (info.query, info.sense, info.images_per_class) == ("", "", 0)
    assert run.usable_images().groupby("wnid").size().to_dict() == {TABBY: 2, MISSILE: 2, PALACE: 2, ESPRESSO: 2}
    assert summary.folders_skipped == {"astronaut": "skipped as asked"}
    assert summary.folders == {"espresso": ESPRESSO, "missile": MISSILE, "palace": PALACE, "tabby": TABBY}
    assert [i.run_id for i in store.list_runs()] == [summary.run_id]
    assert not list(store.runs_dir.glob(".import-*"))  # the staging folder became the run


def test_unmapped_ambiguous_or_unknown_folders_stop_before_any_run(mixed_src):
    from crawl.importer import import_new_run

    store = RunStore()
    with pytest.raises(FolderImportError) as info:
        import_new_run(mixed_src, {"missile": MISSILE}, store)
    assert "'astronaut' is not a class name" in str(info.value) and "--skip FOLDER" in str(info.value)
    with pytest.raises(FolderImportError, match=r"--map FOLDER=WNID.*'missile' is ambiguous .*n03773504"):
        import_new_run(mixed_src, {"astronaut": None}, store)
    with pytest.raises(FolderImportError, match="has no class folder named 'nope'"):
        import_new_run(mixed_src, {"nope": None}, store)
    with pytest.raises(FolderImportError, match="not a class of imagenet-1k"):
        import_new_run(mixed_src, {"missile": "n02121808", "astronaut": None}, store)  # domestic cat: 21k only
    with pytest.raises(FolderImportError, match="every class folder is skipped"):
        import_new_run(mixed_src, {n: None for n in ("tabby", "espresso", "missile", "palace", "astronaut")}, store)
    assert store.list_runs() == [] and not (store.runs_dir.exists() and list(store.runs_dir.iterdir()))


def test_nothing_accepted_leaves_no_run(tmp_path):
    from crawl.importer import import_new_run

    src = tmp_path / "src" / "tabby"
    src.mkdir(parents=True)
    (src / "page.jpg").write_bytes(T.html_page())
    (src / "tiny.jpg").write_bytes(T.jpeg(1, size=(10, 10)))
    store = RunStore()
    with pytest.raises(FolderImportError) as info:
        import_new_run(tmp_path / "src", None, store, run_id="empty")
    message = str(info.value)
    assert "2 file(s) read, none is a usable image" in message and "no run was created" in message
    assert "rejected:html" in message and info.value.summary is not None
    assert store.list_runs() == [] and list(store.runs_dir.iterdir()) == []


def test_a_failing_import_removes_its_staging_folder(mixed_src, monkeypatch):
    import crawl.importer as importer

    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(importer, "_import_one", boom)
    store = RunStore()
    with pytest.raises(RuntimeError):
        importer.import_new_run(mixed_src, {"missile": MISSILE, "astronaut": None}, store)
    assert list(store.runs_dir.iterdir()) == []


def test_cli_names_the_candidates_and_map_and_skip_pick_them(mixed_src, capsys):
    assert main(["import", str(mixed_src), "--run", "weapons", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 class folder(s) cannot be mapped" in err
    assert f"'missile' is ambiguous in imagenet-1k: {MISSILE} missile.n.01" in err and PROJECTILE in err
    assert "--map FOLDER=WNID" in err and "--skip FOLDER" in err
    assert RunStore().list_runs() == []  # refused: no empty run behind
    assert main(["import", str(mixed_src), "--run", "weapons", "--no-progress", "--map", "missile=projectile.n.01",
                 "--skip", "astronaut", "--title", "My import"]) == 0
    err = capsys.readouterr().err
    assert "created run weapons" in err and "folder 'astronaut' not imported: skipped as asked" in err
    info = RunStore().open_run("weapons").info
    assert info.title == "My import" and PROJECTILE in info.wnids and info.source == "import"
    assert main(["import", str(mixed_src), "--run", "weapons", "--map", "missile"]) == 2
    assert "--map expects FOLDER=CLASS" in capsys.readouterr().err


def test_an_unknown_folder_that_is_a_wordnet_noun_gets_its_wordnet_neighbours_first(tmp_path, capsys):
    """Issue 22 item 21: 'motorcycle' was offered unicycle and tricycle (spelling neighbours);
    WordNet's classes next to it come first (moped, under motorcycle > minibike), spelling after."""
    from crawl.importer import plan_folders

    MOPED, GO_KART = "n03785016", "n03444034"
    src = tmp_path / "src"
    for folder in ("motorcycle", "tabbby"):
        (src / folder).mkdir(parents=True)
        (src / folder / "a.jpg").write_bytes(T.jpeg(995))
    by = {f.folder: f for f in plan_folders(src, "imagenet-1k").folders}
    moto = by["motorcycle"]
    assert moto.status == "unknown" and [c.wnid for c in moto.candidates][:2] == [MOPED, "n02704792"]
    assert GO_KART in [c.wnid for c in moto.candidates]
    assert {"unicycle", "tricycle"}.isdisjoint(c.name for c in moto.candidates[:5])
    assert f"nearest in WordNet: moped -> {MOPED}" in moto.reason
    assert by["tabbby"].candidates[0].wnid == TABBY  # not a WordNet noun: spelling neighbours only
    table = plan_folders(src, "imagenet-1k").table().set_index("folder")
    assert table.loc["motorcycle", "note"].startswith(f"not a class name; nearest: moped ({MOPED})")
    assert main(["import", str(src), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert f"moped -> {MOPED}" in capsys.readouterr().err


def test_cli_refuses_a_folder_mapped_twice_or_mapped_and_skipped(mixed_src, capsys):
    """Second campaign: '--map missile=missile.n.01 --map missile=projectile.n.01' stored the
    missiles under the last one (exit 0); '--map astronaut=tabby --skip astronaut' skipped it
    silently. Which class a folder gets is never guessed: one line naming the folder, no run."""
    base = ["import", str(mixed_src), "--run", "weapons", "--no-progress"]
    for extra, words in (
            (["--map", "missile=missile.n.01", "--map", "missile=projectile.n.01", "--skip", "astronaut"],
             ["'missile'", "--map", MISSILE, PROJECTILE]),
            (["--map", "missile=projectile.n.01", "--map", "astronaut=tabby", "--skip", "astronaut"],
             ["'astronaut'", "--map", "--skip"])):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err, err
        for word in words:
            assert word in err, (word, err)
    assert RunStore().list_runs() == []
    # the same class twice for a folder is no conflict
    assert main(base + ["--map", "missile=projectile.n.01", "--map", f"missile={PROJECTILE}",
                        "--skip", "astronaut", "--skip", "astronaut"]) == 0
    assert PROJECTILE in RunStore().open_run("weapons").info.wnids


@pytest.mark.parametrize("argv, words", [
    (["fetch", "--wnids", TABBY, "--k", "99999999999999999999", "--out", "{tmp}/f"], ["--k", "1 to 1,000,000"]),
    (["summary", "--out", "{tmp}", "--k", "99999999999999999999"], ["--k"]),
    (["terms", "--wnids", ""], ["--wnids needs at least one wnid"]),
    (["terms", "--wnids", " , "], ["--wnids needs at least one wnid"]),
    (["summary", "--out", "{tmp}/no-such-folder"], ["no-such-folder is not a folder"]),
    # an empty folder (or one no import wrote) printed '(no classes)', exit 0, as if an import had found nothing
    (["summary", "--out", "{tmp}"], ["holds no manifest.csv", "python -m crawl import SRC --out DIR"]),
])
def test_crawl_options_out_of_range_are_one_line(tmp_path, capsys, argv, words):
    """Second campaign: --k 99999999999999999999 was an OverflowError traceback (pandas' Int64);
    --wnids '' fell through to the query None and printed 'None has 2 noun senses'; summary of a
    folder that does not exist printed '(no classes)' with exit 0."""
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "None" not in err, err
    for word in words:
        assert word in err, (word, err)


@pytest.mark.parametrize("extra, words", [
    (["--max-mb", "nan"], "--max-mb must be a positive number"),
    (["--max-mb", "inf"], "--max-mb must be a positive number"),
    (["--phash-threshold", "65"], "phash threshold 65"),
    (["--phash-threshold", "99999999999999999999"], "out of 64 bits"),
])
def test_import_limits_that_mean_nothing_are_one_line(src, tmp_path, capsys, extra, words):
    """Second campaign: --max-mb nan / inf were ValueError / OverflowError tracebacks; a pHash
    threshold of 65 or more (a distance is at most 64) marked every image but the first a near
    duplicate, exit 0 (1 of 6 photos accepted)."""
    out = tmp_path / "imported"
    assert main(["import", str(src), "--out", str(out), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and words in err and "\n" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("option", ["--deadline", "--connect-timeout", "--read-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_fetch_timeouts_must_be_finite_and_positive(tmp_path, capsys, option, value):
    """Second campaign: --deadline nan (or inf) was taken: nan passed the 'positive' check (min()
    with nan, and nan <= 0 is false) and left the fetch with no deadline; the crawl went on."""
    closed = T.closed_port_url()
    assert main(["fetch", "--wnids", TABBY, "--out", str(tmp_path / "f"), "--base-url", closed, "--no-progress",
                 option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: timeouts must be positive numbers") and "\n" not in err, err


def test_the_import_folder_is_checked_before_anything_about_the_path_is_said(tmp_path, monkeypatch):
    """Code review: the new SRC checks ran before the import-root check, so a path outside the root got
    'not a folder (...)' (or a traceback for an unreadable parent) instead of the root's refusal."""
    from core.serving import ServingError
    from crawl.importer import import_new_run

    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("WILDLENS_IMPORT_ROOT", str(root))
    for outside in (tmp_path / "missing", tmp_path / "loop"):
        if outside.name == "loop":
            outside.symlink_to(outside)
        with pytest.raises(ServingError, match="is outside the import folder"):
            import_new_run(outside)


def test_the_imported_together_note_shows_folder_names_as_every_message_does():
    """A hostile campaign: the note for folders that mean one class printed their names raw, so a name holding ESC
    codes set the terminal's title and colours and a newline split the note."""
    from crawl.importer import _same_class_notes

    (note,) = _same_class_notes({"n03763968": "n03763968", "x\x1b]0;pwned\x07\x1b[31m\nz": "n03763968"})
    assert note.startswith("folders 'n03763968', 'x") and note.endswith(" all mean n03763968; imported together")
    assert not any(ord(c) < 32 or c == "\x7f" for c in note), repr(note)


def test_an_import_into_a_run_deleted_meanwhile_never_makes_its_folder_again(src):
    """A code review: an import (or crawl) into a run deleted between its opening and its first write made runs/<id>/
    again (images/, a manifest, lock files, no run.json): listed nowhere, its id blocked. The run's presence lock is
    held for the whole write now: one line, nothing made."""
    from crawl.store import CollectError

    store = RunStore()
    run = store.create_run(run_id="victim")
    store.delete_run("victim")
    with pytest.raises(CollectError, match=r"^Run victim is gone \(deleted meanwhile\); nothing was written\.$"):
        import_folder(src, run, label_space="imagenet-1k")
    assert not (store.runs_dir / "victim").exists()


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_journal_put_in_place_during_a_run_is_refused_not_waited_on_nor_followed(src, tmp_path, kind):
    """A code review: the journal was opened for writing by path, so a FIFO put there between two saves blocked the
    import for ever (holding its lock), and a link made the rows go to the link's target. Opened without blocking
    and without following, what was opened must be a regular file: one line, the target untouched."""
    import threading

    from crawl.config import ValidationConfig
    from crawl.store import CollectError, Collector

    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    collector = Collector(FolderDestination(out), ValidationConfig())
    journal = collector.dest.journal_path
    target = tmp_path / "theirs.txt"
    target.write_text("mine\n")
    os.mkfifo(journal) if kind == "fifo" else journal.symlink_to(target)
    caught = []

    def write():
        try:
            collector._journal(0, {"wnid": TABBY})
        except CollectError as exc:
            caught.append(str(exc))

    worker = threading.Thread(target=write, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the journal's open waited on the FIFO"
    assert len(caught) == 1 and str(journal) in caught[0] and "move it away and run again" in caught[0]
    assert target.read_text() == "mine\n"


def test_an_exclusion_typed_as_a_spreadsheet_writes_it_is_read_and_kept(src, tmp_path, capsys):
    """manifest.csv edited in Excel or LibreOffice (TRUE / FALSE) or by hand (yes): read as exclusions,
    and a second import keeps them (TRUE was read as not excluded, then written back as False); a
    word that is no yes/no is refused naming its line."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = out / "manifest.csv"
    text = path.read_text().splitlines()
    header = text[0].split(",")
    at = header.index("excluded")
    accepted = [i for i, line in enumerate(text[1:], 1) if ",accepted," in line][:2]
    for i, word in zip(accepted, ("TRUE", " yes")):
        cells = text[i].split(",")
        cells[at] = word
        text[i] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    dest = FolderDestination(out)
    assert dest.read_manifest()["excluded"].sum() == 2
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    assert FolderDestination(out).read_manifest()["excluded"].sum() == 2, "the second import keeps them"
    text = path.read_text().splitlines()
    cells = text[accepted[0]].split(",")
    cells[at] = "maybe"
    text[accepted[0]] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    capsys.readouterr()
    assert main(["summary", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: column excluded holds 'maybe' in data row {accepted[0]} (line {accepted[0] + 1} of the file); " \
           "write True or False there, or leave it empty, then run again; nothing was changed." in err
    assert err.count("\n") == 1
    # The fix is that cell: re-importing into a new folder (the advice for a damaged manifest) would make a
    # manifest without this person's exclusions.
    assert "Rebuild" not in err and "re-import" not in err
    # Blank lines before it (pandas skips them, and a line of spaces): the line named is still the one to fix.
    path.write_text("\n".join(text[:1] + ["", "   "] + text[1:]) + "\n")
    assert main(["summary", "--out", str(out)]) == 2
    assert f"in data row {accepted[0]} (line {accepted[0] + 3} of the file)" in capsys.readouterr().err


def test_the_excluded_flags_read_as_people_and_tools_write_them():
    from crawl.store import _read_flags

    cells = pd.Series(["TRUE", "false", " Yes", None, "", "1.0", "0", "NA", "nan", "ＴＲＵＥ", "True ",
                       # Excel's missing value; a byte-order mark and a zero-width space a paste or an export left
                       "#N/A", "\ufeffTRUE", "FALSE\u200b"], dtype=object)
    assert _read_flags(cells, "excluded").tolist() == [True, False, True, pd.NA, pd.NA, True, False, pd.NA, pd.NA,
                                                       True, True, pd.NA, True, False]
    with pytest.raises(ValueError, match=r"^column excluded holds 'maybe\\x1b' in data row 2 "):
        _read_flags(pd.Series(["True", "maybe\x1b"], dtype=object), "excluded")


def test_summary_prints_a_hand_edited_wnid_escaped(src, tmp_path, capsys):
    """crawl summary's table comes from a manifest a person may edit: an escape sequence in a cell is
    printed escaped, not sent to the terminal."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = out / "manifest.csv"
    lines = path.read_text().splitlines()
    at = lines[0].split(",").index("wnid")
    cells = lines[1].split(",")
    cells[at] = "n02123045\x1b[2J"
    lines[1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    main(["summary", "--out", str(out)])
    printed = capsys.readouterr()
    assert "\x1b" not in printed.out + printed.err


@pytest.mark.parametrize("edit, said", [
    (lambda text: text.replace(",excluded,", ",Excluded,", 1), "its header names 'Excluded' where WildLens writes "
                                                                "'excluded'; rename that column back to excluded"),
    (lambda text: text.replace(",excluded,", ",excluded\u200b,", 1), "its header names 'excluded\\u200b' where"),
    (lambda text: text.replace(",excluded_reason", ",Excluded reason", 1), "its header names 'Excluded reason' "
                                                                          "where WildLens writes 'excluded_reason'"),
    (lambda text: text.replace(",", ";"), "its header is separated by ';', not commas"),
    (lambda text: text.replace(",accepted,", ",accepted\xe9,", 1), None),  # saved as cp1252 below (Excel's "CSV")
])
def test_a_manifest_a_spreadsheet_saved_its_own_way_is_refused_with_the_fix_and_kept(src, tmp_path, capsys, edit,
                                                                                      said):
    """Hostile check: 'Excluded' as the header (or with a zero-width space) was read as an unknown column, and
    the next import wrote 'excluded' back empty: the person's exclusions were gone, exit 0. A ';'-separated
    or cp1252 file was told to be rebuilt by re-importing, which drops them too."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = out / "manifest.csv"
    text = edit(path.read_text())
    path.write_bytes(text.encode("cp1252", errors="replace") if said is None else text.encode("utf-8"))
    before = path.read_bytes()
    capsys.readouterr()
    for argv in (["summary", "--out", str(out)], ["import", str(src), "--out", str(out), "--no-progress"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "nothing was changed" in err and "Rebuild" not in err, err
        assert (said or "is not UTF-8 text") in err, err
    assert path.read_bytes() == before


def test_a_manifest_that_is_a_dangling_link_is_refused_not_read_as_empty(src, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.csv").symlink_to(tmp_path / "gone.csv")
    assert main(["summary", "--out", str(out)]) == 2  # it printed '(no classes)', exit 0
    err = capsys.readouterr().err
    assert f"manifest.csv is a symbolic link to {tmp_path / 'gone.csv'}, which does not exist" in err
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 2
    assert (out / "manifest.csv").is_symlink() and not (tmp_path / "gone.csv").exists()


def test_a_persons_own_column_named_like_one_of_wildlens_beside_it_is_not_refused(src, tmp_path, capsys):
    """The header check refuses only a header whose WildLens column is missing: a person's extra 'Status'
    beside 'status' was refused with advice that would have made the header name 'status' twice (review)."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = out / "manifest.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",Status"] + [line + ",checked" for line in lines[1:]]) + "\n")
    capsys.readouterr()
    assert main(["summary", "--out", str(out)]) == 0


def test_a_column_of_a_persons_own_stops_a_writer_before_it_drops_it(src, tmp_path, capsys):
    """A 'Notes' column added in a spreadsheet was dropped at the next import's save, without a word (review):
    the import and the crawl now refuse before any work; reading (summary) goes on; pandas' index column is
    no one's data."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = out / "manifest.csv"
    original = path.read_bytes()
    _edited(out, "Notes", lambda i: "seen twice")
    before = path.read_bytes()
    capsys.readouterr()
    assert main(["summary", "--out", str(out)]) == 0
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: column 'Notes' is not WildLens's, and this run would write the " \
        "manifest without it; copy it to a file of your own and delete it here" in err
    assert path.read_bytes() == before
    path.write_bytes(original)
    _edited(out, "", str, first=True)  # pandas' to_csv index: an empty header over the row numbers
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0


def _edited(out, header, cells, first=False):
    """DIR/manifest.csv with a column added (last, or ``first``): ``header`` and one cell per row from
    ``cells(i)``, written as a spreadsheet writes CSV (the file names hold newlines: quoted cells)."""
    import csv
    import io

    path = out / "manifest.csv"
    rows = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    added = [[header, *rows[0]] if first else [*rows[0], header]]
    added += [[cells(i), *row] if first else [*row, cells(i)] for i, row in enumerate(rows[1:])]
    text = io.StringIO(newline="")
    csv.writer(text, lineterminator="\n").writerows(added)
    path.write_text(text.getvalue())
    return path


@pytest.mark.parametrize("header, cells, refused", [
    ("", lambda i: "real notes", "column 'Unnamed: 21' is not WildLens's"),  # an empty header over notes
    ("Unnamed: 0", lambda i: "my note", "column 'Unnamed: 0' is not WildLens's"),
    ("Unnamed: 0", lambda i: str(i), None),  # pandas' own index column: no one's data
    ("x" * 10_000, lambda i: "n", "copy it to a file of your own and delete it here"),  # the fix stays on the line
    ("file", lambda i: "again", "its header names file twice; keep one of the two columns"),
])
def test_what_a_person_added_to_the_header_is_told_or_kept(src, tmp_path, capsys, header, cells, refused):
    """Hostile check: notes under an empty header cell (read as 'Unnamed: N') were dropped as pandas' index
    column; a 10,000-character name cut the fix off the line; a second 'file' column was named 'file.1'."""
    out = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out), "--no-progress"]) == 0
    path = _edited(out, header, cells)
    before = path.read_bytes()
    capsys.readouterr()
    code = main(["import", str(src), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    if refused is None:
        assert code == 0
        return
    assert code == 2 and err.count("\n") == 1 and refused in err and "nothing was changed" in err, err
    assert len(err) < 2000 and path.read_bytes() == before

