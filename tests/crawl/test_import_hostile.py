"""Hostile input against the import of issue 12's day and the editable search terms, through the
library: folder names are data, special files are skipped with a reason, a live import's staging
folder is never swept, and a search term shaped like a spreadsheet formula is stored as text and
neutralised in every CSV."""
import os
import time

import pytest

from core.locking import exclusive_lock
from core.runstore import RunStore
from crawl.crawler import crawl_run
from crawl.importer import STAGING_PREFIX, import_new_run, plan_folders
from crawl.store import LOCK_NAME, FolderDestination
from explain.export import table_to_csv_bytes
from tests.crawl import fake_engine as T
from tests.crawl.test_engine import fast_config

TABBY, TIGER_CAT, CRANE_BIRD = "n02123045", "n02123159", "n02012849"
FORMULA_FOLDER = '=HYPERLINK("http:x")'
FORMULA_TERM = "=cmd|' /C calc'!A0"
HOSTILE_FOLDERS = ["**bold**", "<img src=x onerror=alert(1)>", FORMULA_FOLDER, "$x$", ":red[x]"]


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


def write_images(folder, seed: int, n: int = 1) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"p{i}.jpg").write_bytes(T.jpeg(seed + i, size=(160, 120)))


def test_hostile_folders_fifos_links_and_corrupt_files(tmp_path):
    src = tmp_path / "src"
    for seed, name in enumerate(HOSTILE_FOLDERS):
        write_images(src / name, 100 + 10 * seed)
    write_images(src / "tabby", 200, n=2)
    (src / "empty").mkdir()
    (src / "tabby" / "broken.jpg").write_bytes(T.jpeg(210, size=(160, 120))[:300])
    os.mkfifo(src / "tabby" / "pipe.jpg")
    os.mkfifo(src / "pipe")
    os.symlink("/etc", src / "etc")
    plan = plan_folders(src)
    table = plan.table().set_index("folder")
    assert set(table.index) == {*HOSTILE_FOLDERS, "tabby", "empty", "etc"}
    assert set(table.loc[HOSTILE_FOLDERS + ["empty", "etc"], "status"]) == {"unknown"}
    assert int(table.loc["tabby", "files"]) == 3 and int(table.loc["etc", "files"]) == 0
    assert any("pipe" in note for note in plan.notes)

    store = RunStore()
    mapping = {name: None for name in HOSTILE_FOLDERS + ["empty"]}
    mapping.update({FORMULA_FOLDER: TIGER_CAT, "etc": TABBY})  # a link out of SRC is read as nothing
    summary = import_new_run(src, mapping, store, title=FORMULA_FOLDER)
    run = store.open_run(summary.run_id)
    assert run.info.title == FORMULA_FOLDER and run.info.wnids == [TABBY, TIGER_CAT]
    manifest = run.read_manifest()
    reasons = manifest.loc[manifest["status"] == "rejected", "reason"].str.split(":").str[0].tolist()
    assert sorted(reasons) == ["not-regular", "outside-src", "undecodable"], reasons
    assert (manifest["status"] == "accepted").sum() == 3
    assert not [p for p in store.runs_dir.iterdir() if p.name.startswith(".")]  # no staging folder left
    assert os.path.islink(src / "etc") and (src / "tabby" / "broken.jpg").exists()  # SRC untouched
    csv = table_to_csv_bytes(manifest, "imagenet-1k").decode()
    assert "\n=" not in csv and ",=" not in csv and ',"=' not in csv


def test_a_live_import_keeps_its_staging_folder_however_old(tmp_path):
    """A staging folder a day old whose import still holds its lock (a stopped process, a machine
    that slept) is not a killed import's: the next import leaves it; an unlocked one is swept."""
    store = RunStore()
    store.runs_dir.mkdir(parents=True)
    live, dead = store.runs_dir / f"{STAGING_PREFIX}live", store.runs_dir / f"{STAGING_PREFIX}dead"
    for folder in (live, dead):
        (folder / "images").mkdir(parents=True)
        (folder / "run.json").write_text("{}")
    src = tmp_path / "src"
    write_images(src / "tabby", 300)
    with exclusive_lock(live, name=LOCK_NAME):
        two_days_ago = time.time() - 2 * 24 * 3600
        for folder in (live, dead):
            os.utime(folder, (two_days_ago, two_days_ago))
        summary = import_new_run(src, {}, store)
    assert live.is_dir() and (live / "run.json").exists()
    assert not dead.exists()
    assert [i.run_id for i in store.list_runs()] == [summary.run_id]


def test_a_search_term_like_a_formula_is_stored_as_text_and_neutralised(tmp_path):
    store = RunStore()
    run = store.create_run(run_id="cranes", query="crane", sense="crane.n.05")
    with T.FakeEngine() as engine:
        engine.results[FORMULA_TERM] = [engine.add(f"/c/{i}.jpg", T.jpeg(400 + i)) for i in range(2)]
        summary = crawl_run(run, [CRANE_BIRD], k=1, config=fast_config(engine),
                            search_terms={CRANE_BIRD: [FORMULA_TERM]})
        out = tmp_path / "out"
        crawl_run(out, [CRANE_BIRD], k=1, config=fast_config(engine), search_terms={CRANE_BIRD: FORMULA_TERM})
    assert summary.new_accepted == 1
    assert set(run.read_manifest()["search_term"].dropna()) == {FORMULA_TERM}  # the text as typed
    csv = table_to_csv_bytes(run.read_manifest(), "imagenet-1k").decode()
    assert "'" + FORMULA_TERM in csv and ",=cmd" not in csv
    on_disk = (out / "manifest.csv").read_text()  # --out DIR's manifest is a CSV too
    assert "'" + FORMULA_TERM in on_disk and ",=cmd" not in on_disk
    assert set(FolderDestination(out).read_manifest()["search_term"].dropna()) == {FORMULA_TERM}  # read back as typed


def _linked_src(tmp_path):
    """Issue 22 item 4's tree: a tabby folder holding links to SRC, to the coffee folder, to one
    coffee photo and to a hidden folder; a folder the import is told to skip."""
    src = tmp_path / "src"
    for folder, seed in (("n02123045", 800), ("n07920052", 801), ("astronaut", 802), (".stash", 803)):
        (src / folder).mkdir(parents=True)
        (src / folder / f"{folder.strip('.')}.jpg").write_bytes(T.jpeg(seed))
    (src / "n02123045" / "up").symlink_to("..", target_is_directory=True)
    (src / "n02123045" / "more").symlink_to("../n07920052", target_is_directory=True)
    (src / "n02123045" / "cup.jpg").symlink_to("../n07920052/n07920052.jpg")
    (src / "n02123045" / "stash").symlink_to("../.stash", target_is_directory=True)
    return src


def test_links_never_store_an_image_under_another_class_or_bypass_skip(tmp_path, capsys):
    """Before: 'up -> ..' stored the coffee photo and the skipped astronaut as tabby, and the real
    n07920052 folder was refused as 'symlink-loop'."""
    from crawl.cli import main
    from crawl.importer import plan_folders
    from core.runstore import RunStore

    src = _linked_src(tmp_path)
    counts = {f.folder: f.files for f in plan_folders(src).folders}
    assert counts == {"n02123045": 1, "n07920052": 1, "astronaut": 1}
    assert main(["import", str(src), "--run", "r", "--skip", "astronaut", "--no-progress"]) == 0
    manifest = RunStore().open_run("r").read_manifest().set_index("original_name")
    accepted = manifest[manifest["status"] == "accepted"]
    assert sorted(zip(accepted.index, accepted["wnid"])) == [("n02123045/n02123045.jpg", "n02123045"),
                                                             ("n07920052/n07920052.jpg", "n07920052")]
    reasons = manifest["reason"].dropna().to_dict()
    assert reasons["n02123045/up"].startswith("symlink-loop: a symbolic link to ") and "above it" in reasons["n02123045/up"]
    assert reasons["n02123045/more"].startswith("other-class: a symbolic link into class folder 'n07920052'")
    assert reasons["n02123045/cup.jpg"].startswith("other-class: a symbolic link into class folder 'n07920052'")
    assert reasons["n02123045/stash"].startswith("other-class: ") and "in no class folder" in reasons["n02123045/stash"]
    assert not any(name.startswith("n07920052") for name in reasons), reasons  # the real folder is read
    assert not any("astronaut" in name for name in manifest.index)


def test_a_class_folder_that_is_a_link_to_another_is_read_once_under_the_real_one(tmp_path):
    from crawl.importer import import_folder

    src = tmp_path / "src"
    (src / "n02123045").mkdir(parents=True)
    (src / "n02123045" / "a.jpg").write_bytes(T.jpeg(810))
    (src / "tabby").symlink_to("n02123045", target_is_directory=True)  # the same class, by name
    (src / "tiger cat").symlink_to("n02123045", target_is_directory=True)  # another class: never
    summary = import_folder(src, tmp_path / "out", mapping=None)
    manifest = summary.per_class.set_index("wnid")
    assert manifest["accepted"].to_dict() == {"n02123045": 1, "n02123159": 0}
    rows = FolderDestination(tmp_path / "out").read_manifest().set_index("original_name")
    assert rows.loc["tiger cat", "reason"].startswith("other-class: a symbolic link into class folder 'n02123045'")
    assert rows.loc["tabby", "reason"].startswith("other-class: ")


def test_a_folder_destination_is_never_inside_the_stores_runs_folder(tmp_path):
    """Second campaign: `crawl import SRC --out $WILDLENS_HOME/runs/r1` (exit 0) wrote a folder
    manifest.csv and class folders into the run; `--out runs/newdir` made a folder of runs/ that
    is no run. Refused in one line before any work, also through a link, as `classify --out` is."""
    from crawl.importer import import_folder
    from crawl.store import CollectError

    write_images(tmp_path / "src" / TABBY, 300, n=2)
    store = RunStore()
    import_folder(tmp_path / "src", store.create_run(run_id="r1"))
    run_files = sorted(p.relative_to(store.runs_dir) for p in store.runs_dir.rglob("*"))
    link = tmp_path / "runs-link"
    link.symlink_to(store.runs_dir, target_is_directory=True)
    for out in (store.runs_dir / "r1", store.runs_dir / "newdir", link / "r1" / "images", store.runs_dir):
        with pytest.raises(CollectError) as caught:
            import_folder(tmp_path / "src", out)
        message = str(caught.value)
        assert "inside the run store's runs folder" in message and "--run" in message and "\n" not in message
        with T.FakeEngine() as engine, pytest.raises(CollectError, match="inside the run store's runs folder"):
            crawl_run(out, [TABBY], k=1, config=fast_config(engine))
    assert sorted(p.relative_to(store.runs_dir) for p in store.runs_dir.rglob("*")) == run_files
