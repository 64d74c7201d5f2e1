"""Crawls against a loopback imitation of Bing: provenance, validation, duplicates, resume, offline."""
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.crawl import fake_engine as T
from crawl.config import CrawlConfig, ValidationConfig
from crawl.crawler import CrawlError, EngineUnreachable, check_engine, crawl_run, search_terms
from crawl.engines import ENGINES, WildLensBingParser, get_engine
from crawl.store import CollectError, FolderDestination, exclusive
from crawl.validate import reason_code
from core.runstore import MANIFEST_SCHEMA, RunStore

TABBY, TIGER_CAT, PERSIAN = "n02123045", "n02123159", "n02123394"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


def fast_config(engine: T.FakeEngine, **changes) -> CrawlConfig:
    base = dict(base_url=engine.base_url, threads=1, connect_timeout=1.0, read_timeout=0.5, file_deadline=2.0,
                probe_timeout=2.0, validation=ValidationConfig(max_bytes=200_000))
    base.update(changes)
    return CrawlConfig(**base)


def check_consistent(folder: Path) -> pd.DataFrame:
    """The invariants a crawl must leave, finished or interrupted."""
    manifest = FolderDestination(folder).read_manifest()
    assert list(manifest.columns)[:len(MANIFEST_SCHEMA)] == list(MANIFEST_SCHEMA)
    assert set(manifest["status"]) <= {"accepted", "rejected", "duplicate"}
    crawled = manifest[manifest["url"].notna()]
    assert not crawled.duplicated(["wnid", "url"]).any(), "one row per (class, URL)"
    accepted = manifest[manifest["status"] == "accepted"]
    assert accepted["file"].notna().all() and manifest.loc[manifest["status"] != "accepted", "file"].isna().all()
    on_disk = {p.relative_to(folder).as_posix() for p in folder.glob("n*/*")}
    assert on_disk == set(accepted["file"]), "every stored file has a row, every accepted row its file"
    assert not list(folder.rglob("*.tmp")), "no partial file"
    for row in accepted.itertuples():
        data = (folder / row.file).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row.sha256 and len(data) == row.bytes
    return manifest


# --------------------------------------------------------------------------- the big one
@pytest.fixture(scope="module")
def zoo():
    """A result list for 'tabby' with every kind of good and bad answer, and one for
    'tiger cat' that overlaps it."""
    with T.FakeEngine() as engine:
        served = {}

        def add(path, body=b"", **route):
            served[path] = body
            return engine.add(path, body, **route)

        good0, good1, good2 = T.jpeg(100), T.png(101), T.jpeg(102)
        add("/a/good0.jpg", good0)
        add("/a/html.jpg", T.html_page(), headers={"Content-Type": "image/jpeg"})
        add("/a/good1.png", good1)
        add("/a/same-as-good0.jpg", good0)
        add("/a/near-good1.jpg", T.near_copy(good1))
        add("/a/corrupt.jpg", T.truncated(T.jpeg(103)))
        add("/a/500.jpg", b"", status=500)
        add("/a/slow.jpg", T.jpeg(104), delay=3.0)
        add("/a/huge.jpg", T.jpeg(105, size=(1600, 1200), quality=100))
        add("/a/loop", status=302, headers={"Location": "/a/loop"})
        add("/a/to-file", status=302, headers={"Location": "file:///etc/passwd"})
        add("/a/tiny.jpg", T.jpeg(106, size=(20, 20)))
        add("/a/cmyk.jpg", T.cmyk_jpeg(107))
        add("/a/palette.png", T.palette_png_with_transparency(108))
        add("/a/16bit.png", T.png_16bit(109))
        add("/a/anim.gif", T.animated_gif(110))
        add("/a/exif.jpg", T.exif_rotated_jpeg(114))
        add("/a/empty.jpg", b"")
        add("/a/bomb.png", T.bomb_png())
        add("/a/good2.jpg", good2)
        add("/a/hop", status=301, headers={"Location": "/a/good3.webp"})
        add("/a/good3.webp", T.encode(T.pattern(115), "WEBP"))
        add("/a/cut-frame.gif", T.gif_with_cut_second_frame(116))  # IndexError in Pillow (issue 22 item 7)
        add("/a/bad-exif.jpg", T.jpeg_with_corrupt_exif(117))  # struct.error in exif_transpose
        engine.results["tabby"] = [
            "/a/good0.jpg", "/a/html.jpg", "/a/good1.png", "/a/same-as-good0.jpg", "/a/near-good1.jpg",
            "/a/corrupt.jpg", "/a/404.jpg", "/a/500.jpg", "/a/slow.jpg", "/a/huge.jpg", "/a/loop", "/a/to-file",
            "file:///etc/passwd", "ftp://127.0.0.1/x.jpg", "/a/tiny.jpg", "/a/cmyk.jpg", "/a/palette.png",
            "/a/16bit.png", "/a/anim.gif", "/a/exif.jpg", "/a/empty.jpg", "/a/bomb.png", "/a/good2.jpg",
            "/a/good0.jpg",  # listed twice: fetched once, one row
            "/a/hop", "/a/cut-frame.gif", "/a/bad-exif.jpg",
        ]
        add("/b/good10.jpg", T.jpeg(120))
        add("/b/copy-of-good1.png", good1)
        add("/b/good11.jpg", T.jpeg(121))
        engine.results["tiger cat"] = ["/b/good10.jpg", "/a/good2.jpg", "/b/copy-of-good1.png", "/b/good11.jpg"]
        engine.served = served
        yield engine


@pytest.fixture(scope="module")
def zoo_crawl(zoo, tmp_path_factory):
    out = tmp_path_factory.mktemp("zoo")
    config = fast_config(zoo, max_terms=1)
    started = time.monotonic()
    summary = crawl_run(out, [TABBY, TIGER_CAT], k=50, config=config)
    return out, summary, time.monotonic() - started


def test_every_answer_gets_the_right_verdict(zoo, zoo_crawl):
    out, summary, _ = zoo_crawl
    manifest = check_consistent(out)
    tabby = manifest[manifest["wnid"] == TABBY].set_index("url")
    verdict = {url.replace(zoo.base_url, ""): (row.status, reason_code(None if pd.isna(row.reason) else row.reason)) for url, row in tabby.iterrows()}
    assert verdict == {
        "/a/good0.jpg": ("accepted", ""), "/a/html.jpg": ("rejected", "html"), "/a/good1.png": ("accepted", ""),
        "/a/same-as-good0.jpg": ("duplicate", "exact-duplicate"), "/a/near-good1.jpg": ("duplicate", "near-duplicate"),
        "/a/corrupt.jpg": ("rejected", "undecodable"), "/a/404.jpg": ("rejected", "http-error"),
        "/a/500.jpg": ("rejected", "http-error"), "/a/slow.jpg": ("rejected", "timeout"),
        "/a/huge.jpg": ("rejected", "too-large"), "/a/loop": ("rejected", "redirects"),
        "/a/to-file": ("rejected", "bad-url"), "file:///etc/passwd": ("rejected", "bad-url"),
        "ftp://127.0.0.1/x.jpg": ("rejected", "bad-url"), "/a/tiny.jpg": ("rejected", "too-small"),
        "/a/cmyk.jpg": ("accepted", ""), "/a/palette.png": ("accepted", ""), "/a/16bit.png": ("accepted", ""),
        "/a/anim.gif": ("accepted", ""), "/a/exif.jpg": ("accepted", ""), "/a/empty.jpg": ("rejected", "empty"),
        "/a/bomb.png": ("rejected", "decompression-bomb"), "/a/good2.jpg": ("accepted", ""),
        "/a/hop": ("accepted", ""), "/a/cut-frame.gif": ("rejected", "undecodable"),
        "/a/bad-exif.jpg": ("rejected", "undecodable"),
    }
    assert tabby.loc[zoo.absolute("/a/404.jpg"), "reason"] == "http-error: HTTP 404"
    assert zoo.hits["/a/good0.jpg"] == 1 and zoo.hits["/a/good2.jpg"] == 1  # never fetched twice


def test_provenance_and_stored_originals(zoo, zoo_crawl):
    out, _, _ = zoo_crawl
    manifest = FolderDestination(out).read_manifest()
    accepted = manifest[manifest["status"] == "accepted"].set_index("url")
    for url, row in accepted.iterrows():
        path = url.replace(zoo.base_url, "")
        served = zoo.served["/a/good3.webp" if path == "/a/hop" else path]
        assert (out / row.file).read_bytes() == served  # byte-identical original
        assert row.file == f"{row.wnid}/{row.sha256[:16]}.{ {'JPEG': 'jpg', 'PNG': 'png', 'GIF': 'gif', 'WEBP': 'webp'}[row.format]}"
        assert row.source == "bing" and row.search_term in ("tabby", "tiger cat") and row.fetched_at.endswith("+00:00")
    tabby = manifest[manifest["wnid"] == TABBY].set_index("url")
    assert tabby.loc[zoo.absolute("/a/good0.jpg"), "rank"] == 1 and tabby.loc[zoo.absolute("/a/hop"), "rank"] == 25
    modes = accepted.set_index(accepted.index.str.replace(zoo.base_url, ""))["mode"]
    assert (modes["/a/cmyk.jpg"], modes["/a/palette.png"], modes["/a/16bit.png"]) == ("CMYK", "P", "I;16")
    exif = accepted.loc[zoo.absolute("/a/exif.jpg")]
    assert (exif.width, exif.height) == (100, 160)
    dup = tabby.loc[zoo.absolute("/a/same-as-good0.jpg")]
    assert dup.duplicate_of == tabby.loc[zoo.absolute("/a/good0.jpg"), "file"] and pd.isna(dup.file)
    near = tabby.loc[zoo.absolute("/a/near-good1.jpg")]
    assert near.duplicate_of == tabby.loc[zoo.absolute("/a/good1.png"), "file"] and "pHash distance" in near.reason


def test_cross_class_duplicates_are_flagged_on_both_rows(zoo, zoo_crawl):
    out, _, _ = zoo_crawl
    manifest = FolderDestination(out).read_manifest()
    tabby = manifest[manifest["wnid"] == TABBY].set_index("url")
    tiger = manifest[manifest["wnid"] == TIGER_CAT].set_index("url")
    same_url = tiger.loc[zoo.absolute("/a/good2.jpg")]  # listed for both: verdict reused, not fetched again
    assert same_url.status == "duplicate" and same_url.other_wnids == TABBY
    assert same_url.duplicate_of == tabby.loc[zoo.absolute("/a/good2.jpg"), "file"]
    copy = tiger.loc[zoo.absolute("/b/copy-of-good1.png")]  # other URL, same bytes
    assert copy.status == "duplicate" and copy.other_wnids == TABBY and copy.reason.startswith("exact-duplicate")
    assert tabby.loc[zoo.absolute("/a/good2.jpg"), "other_wnids"] == TIGER_CAT
    assert tabby.loc[zoo.absolute("/a/good1.png"), "other_wnids"] == TIGER_CAT
    assert tabby.loc[zoo.absolute("/a/good0.jpg"), "other_wnids"] is pd.NA
    assert not (out / TIGER_CAT / copy.duplicate_of.split("/")[1]).exists()  # one copy on disk, under the first class


def test_summary_counts_by_reason(zoo_crawl):
    _, summary, _ = zoo_crawl
    table = summary.per_class.set_index("wnid")
    assert table.loc[TABBY, ["requested", "accepted", "duplicate", "rejected", "short_by"]].tolist() == [50, 9, 2, 15, 41]
    assert table.loc[TABBY, "rejected:bad-url"] == 3 and table.loc[TABBY, "rejected:http-error"] == 2
    assert table.loc[TIGER_CAT, ["accepted", "duplicate", "ambiguous"]].tolist() == [2, 2, 0]
    assert table.loc[TABBY, "ambiguous"] == 2
    assert not summary.complete and any("9/50 accepted" in note for note in summary.notes)
    assert summary.new_accepted == 11


# --------------------------------------------------------------------------- resume
def good_engine(n: int, query: str = "tabby", latency: float = 0.0) -> T.FakeEngine:
    engine = T.FakeEngine(latency=latency)
    engine.results[query] = [engine.add(f"/g/{i}.jpg", T.jpeg(1000 + i)) for i in range(n)]
    return engine


def test_resume_tops_up_without_refetching(tmp_path):
    with good_engine(30) as engine:
        config = fast_config(engine, threads=4)
        first = crawl_run(tmp_path, [TABBY], k=4, config=config)
        assert first.per_class["accepted"].tolist() == [4] and first.complete
        urls_first = set(check_consistent(tmp_path)["url"])
        hits_first = dict(engine.hits)
        second = crawl_run(tmp_path, [TABBY], k=9, config=config)
        manifest = check_consistent(tmp_path)
        assert second.per_class["accepted"].tolist() == [9] and second.new_accepted == 5
        for url in urls_first:  # what the manifest held was not fetched again
            path = url.replace(engine.base_url, "")
            assert engine.hits[path] == hits_first[path] == 1
        rows = len(manifest)
        pages = engine.hits["/images/async"]
        third = crawl_run(tmp_path, [TABBY], k=9, config=config)  # nothing to do: the engine is not asked
        assert third.new_rows == 0 and len(check_consistent(tmp_path)) == rows
        assert engine.hits["/images/async"] == pages
    leftover = [t.name for t in threading.enumerate() if t.name.split("-")[0] in ("feeder", "parser", "downloader")]
    assert leftover == [], "every crawler thread has exited"


def test_threads_never_overshoot_k(tmp_path):
    with good_engine(60, latency=0.02) as engine:
        summary = crawl_run(tmp_path, [TABBY], k=10, config=fast_config(engine, threads=8))
    manifest = check_consistent(tmp_path)
    assert summary.per_class["accepted"].tolist() == [10] == [int((manifest["status"] == "accepted").sum())]


def test_a_crawl_that_cannot_store_a_file_stops_with_one_line_and_loses_nothing(tmp_path, monkeypatch):
    """Accepted files are stored by writer threads (crawl.crawler.CRAWL_WRITERS): a full disk must
    still end the crawl with the one-line error, leave every accepted row with its file, and a
    re-run with room again must resume to k."""
    import crawl.store

    real = T.disk_full_after(monkeypatch, 8)
    with good_engine(60, latency=0.01) as engine:
        config = fast_config(engine, threads=8)
        with pytest.raises(CollectError, match=r"^Cannot store images in .*No space left on device.*run the same "
                                               r"command again to resume\.$"):
            crawl_run(tmp_path, [TABBY], k=30, config=config)
        stored = check_consistent(tmp_path)
        assert 1 <= (stored["status"] == "accepted").sum() <= 8
        # the downloads stopped at the failure: not every listed image was fetched and dropped
        fetched = sum(n for path, n in engine.hits.items() if path.startswith("/g/"))
        assert fetched <= 8 + 2 * config.threads, f"{fetched} images fetched after the disk filled"
        monkeypatch.setattr(crawl.store, "write_bytes_atomic", real)
        summary = crawl_run(tmp_path, [TABBY], k=30, config=config)
    assert summary.complete and (check_consistent(tmp_path)["status"] == "accepted").sum() == 30


def test_interrupted_crawl_is_consistent_and_resumes(tmp_path):
    with good_engine(40, latency=0.02) as engine:
        config = fast_config(engine, threads=4, save_every=3)

        def interrupt(event):
            if event.done >= 3:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            crawl_run(tmp_path, [TABBY], k=20, config=config, progress=interrupt)
        manifest = check_consistent(tmp_path)
        assert 3 <= (manifest["status"] == "accepted").sum() < 20
        summary = crawl_run(tmp_path, [TABBY], k=20, config=config)
        assert summary.complete and (check_consistent(tmp_path)["status"] == "accepted").sum() == 20


def test_killed_process_leaves_no_partial_file(tmp_path):
    """SIGKILL in the middle of a command-line crawl, then resume in-process."""
    out = tmp_path / "out"
    with good_engine(80, latency=0.03) as engine:
        cmd = [sys.executable, "-m", "crawl", "fetch", "--wnids", TABBY, "--k", "60", "--out", str(out),
               "--base-url", engine.base_url, "--threads", "2", "--no-progress", "--read-timeout", "2"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + 30
        while not (out / "manifest.csv").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(0.15)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert (out / "manifest.csv").exists(), proc.stderr.read().decode()[-2000:]
        FolderDestination(out).read_manifest()  # readable: written atomically
        summary = crawl_run(out, [TABBY], k=60, config=fast_config(engine, threads=4))
        manifest = check_consistent(out)  # leftovers of the killed run were swept
        assert summary.complete and (manifest["status"] == "accepted").sum() == 60


def test_rows_recorded_after_the_last_manifest_write_survive_a_kill(tmp_path, monkeypatch):
    """Issue 11 item 2: rows are journaled before their file is stored, so a killed process loses
    no row and the next run never has to delete a stored image it cannot account for."""
    import crawl.store
    from crawl.store import Collector, JOURNAL_NAME
    from crawl.validate import validate_image

    dest = FolderDestination(tmp_path)
    collector = Collector(dest, ValidationConfig(), save_every=1000)
    assert (tmp_path / "manifest.csv").exists()  # written before the first file
    for i in range(3):
        data = T.jpeg(3000 + i)
        collector.record(TABBY, {"source": "bing", "url": f"http://img.test/{i}.jpg", "rank": i + 1},
                         facts=validate_image(data), data=data)
    collector.record(TIGER_CAT, {"source": "bing", "url": "http://img.test/0.jpg"}, facts=validate_image(T.jpeg(3000)))
    real_write = crawl.store.write_bytes_atomic

    def killed(*args):  # the process dies after the journal line, before the file's rename
        raise KeyboardInterrupt

    monkeypatch.setattr(crawl.store, "write_bytes_atomic", killed)
    data = T.jpeg(3010)
    with pytest.raises(KeyboardInterrupt):
        collector.record(TABBY, {"source": "bing", "url": "http://img.test/lost.jpg"}, facts=validate_image(data), data=data)
    monkeypatch.setattr(crawl.store, "write_bytes_atomic", real_write)
    with open(tmp_path / JOURNAL_NAME, "a") as journal:
        journal.write('{"i": 5, "row": {"wnid": "n0212')  # a line cut short by the kill
    assert len(FolderDestination(tmp_path).read_manifest()) == 0  # the manifest was never rewritten

    resumed = Collector(dest, ValidationConfig())
    manifest = check_consistent(tmp_path)  # every stored file has its row, no row lacks its file
    assert manifest["url"].tolist() == [f"http://img.test/{i}.jpg" for i in range(3)] + ["http://img.test/0.jpg"]
    assert manifest["rank"].tolist()[:3] == [1, 2, 3]
    assert manifest.loc[0, "other_wnids"] == TIGER_CAT and manifest.loc[3, "status"] == "duplicate"
    assert resumed.claim_url(TABBY, "http://img.test/1.jpg") == "seen"  # not fetched again
    assert resumed.claim_url(TABBY, "http://img.test/lost.jpg") == "new"  # its file never arrived: fetched again
    assert not (tmp_path / JOURNAL_NAME).exists()  # folded into the manifest


def test_failures_that_may_pass_are_fetched_again_by_the_next_run(tmp_path):
    """A URL refused, timed out or answered 408/429/5xx is fetched again by the next run of the crawl
    (once per run), its row replaced in place: one row per (class, URL); a 404 is the server's verdict
    and is kept, as is every accepted image."""
    with good_engine(4) as engine:
        flaky = {"/g/503.jpg": 503, "/g/429.jpg": 429, "/g/404.jpg": 404}
        for path, status in flaky.items():
            engine.add(path, b"try later", status=status, headers={"Content-Type": "text/plain"})
        refused = T.closed_port_url() + "/r.jpg"
        engine.results["tabby"] += [engine.absolute(p) for p in flaky] + [refused]
        config = fast_config(engine, threads=2, allow_private_hosts=True)  # (the refused URL's port is not the engine's)
        first = crawl_run(tmp_path, [TABBY], k=20, config=config)
        before = check_consistent(tmp_path).set_index("url")
        assert first.new_accepted == 4 and len(before) == 8
        assert before.loc[refused, "reason"] == "connection: connection refused"
        for path, status in flaky.items():
            assert before.loc[engine.absolute(path), "reason"] == f"http-error: HTTP {status}"
            engine.add(path, T.jpeg(1100 + status))  # the server answers now
        second = crawl_run(tmp_path, [TABBY], k=20, config=config)
        after = check_consistent(tmp_path).set_index("url")
        assert list(after.index) == list(before.index), "the same rows, in place"
        assert second.new_accepted == 2 and second.new_rows == 3  # 503 and 429 now accepted; the refused URL again
        assert (after.loc[[engine.absolute("/g/503.jpg"), engine.absolute("/g/429.jpg")], "status"] == "accepted").all()
        assert after.loc[engine.absolute("/g/404.jpg"), "reason"] == "http-error: HTTP 404"
        assert after.loc[refused, "reason"] == "connection: connection refused"
        assert engine.hits["/g/503.jpg"] == engine.hits["/g/429.jpg"] == 2 and engine.hits["/g/404.jpg"] == 1
        assert all(engine.hits[f"/g/{i}.jpg"] == 1 for i in range(4)), "accepted images are never fetched again"
        third = crawl_run(tmp_path, [TABBY], k=20, config=config)
        assert third.new_rows == 1 and third.new_accepted == 0  # only the refused URL, once
        assert engine.hits["/g/503.jpg"] == 2 and len(check_consistent(tmp_path)) == 8


def test_a_url_fetched_again_survives_a_kill_as_its_old_or_its_new_verdict(tmp_path):
    """The replacement row is journalled at its own index: replayed, it replaces the old verdict;
    journalled but its file never stored, the old verdict stands and the next run tries again."""
    from crawl.store import Collector, JOURNAL_NAME
    from crawl.validate import Rejected, validate_image

    dest = FolderDestination(tmp_path)
    urls = ["http://img.test/a.jpg", "http://img.test/b.jpg"]
    collector = Collector(dest, ValidationConfig(), save_every=1000)
    for url in urls:
        collector.record(TABBY, {"source": "bing", "url": url}, rejection=Rejected("timeout", "no answer in 2 s"))
    collector.save()
    resumed = Collector(dest, ValidationConfig(), save_every=1000)
    assert [resumed.will_retry(TABBY, url) for url in urls] == [True, True]
    assert resumed.claim_url(TABBY, urls[0]) == "new" and resumed.claim_url(TIGER_CAT, urls[0]) == "new"
    for i, url in enumerate(urls):
        data = T.jpeg(3200 + i)
        resumed.record(TABBY, {"source": "bing", "url": url}, facts=validate_image(data), data=data)
    assert (tmp_path / JOURNAL_NAME).exists()  # killed here: the manifest still holds the two timeouts
    lost = dest.read_manifest()
    assert (lost["status"] == "rejected").all()
    (tmp_path / resumed.rows[1]["file"]).unlink()  # as if killed between b's journal line and its file
    again = Collector(dest, ValidationConfig())
    rows = check_consistent(tmp_path)
    assert rows["url"].tolist() == urls and rows["status"].tolist() == ["accepted", "rejected"]
    assert again.claim_url(TABBY, urls[0]) == "seen" and again.will_retry(TABBY, urls[1])


def test_replaying_the_journal_keeps_an_exclusion_made_since(tmp_path):
    """A journaled change to a recorded row (its other classes) must not undo what an analyst did
    to the manifest between the kill and the resume."""
    from crawl.store import Collector
    from crawl.validate import validate_image

    dest = FolderDestination(tmp_path)
    collector = Collector(dest, ValidationConfig(), save_every=1000)
    data = T.jpeg(3100)
    collector.record(TABBY, {"source": "bing", "url": "http://img.test/a.jpg"}, facts=validate_image(data), data=data)
    collector.save()
    collector.record(TIGER_CAT, {"source": "bing", "url": "http://img.test/a.jpg"}, facts=validate_image(data))
    # killed here; then the first row is excluded by hand
    manifest = dest.read_manifest()
    manifest.loc[0, ["excluded", "excluded_reason"]] = [True, "blurry"]
    dest.write_manifest(manifest)
    Collector(dest, ValidationConfig())
    rows = check_consistent(tmp_path)
    assert rows["wnid"].tolist() == [TABBY, TIGER_CAT]
    assert (rows.loc[0, "excluded"], rows.loc[0, "excluded_reason"], rows.loc[0, "other_wnids"]) == (True, "blurry", TIGER_CAT)


# --------------------------------------------------------------------------- into a run
def test_crawl_into_a_run_updates_run_json():
    store = RunStore()
    run = store.create_run(run_id="cats", query="cat", sense="cat.n.01")
    with good_engine(10, query="Persian cat") as engine:
        summary = crawl_run(run, [PERSIAN], k=3, config=fast_config(engine, context="cat"))
    assert summary.complete
    info = store.open_run("cats").info
    assert (info.wnids, info.images_per_class, info.source) == ([PERSIAN], 3, "crawl:bing")
    usable = run.usable_images()
    assert len(usable) == 3 and (usable["search_term"] == "Persian cat").all()
    assert all(run.image_path(f).is_file() for f in usable["file"])


LEOPARD_CAT = "n02126317"  # an ImageNet-21k concept that no ImageNet-1k model can name


def test_a_class_outside_the_label_space_is_crawled_like_any_other():
    # Issue 16: an unseen hyponym of the query joins an IN-1k run; its terms are its WordNet lemmas.
    store = RunStore()
    run = store.create_run(run_id="cats", query="cat", sense="cat.n.01", label_space="imagenet-1k")
    with good_engine(10, query="leopard cat") as engine:
        summary = crawl_run(run, [LEOPARD_CAT], k=2, config=fast_config(engine, context="cat", max_terms=1))
    assert summary.per_class.set_index("wnid").loc[LEOPARD_CAT, "accepted"] == 2
    assert LEOPARD_CAT in store.open_run("cats").info.wnids
    assert set(run.usable_images()["wnid"]) >= {LEOPARD_CAT}
    with pytest.raises(CrawlError, match="Not WordNet 3.0 noun ids: n99999999"):
        crawl_run(run, ["n99999999"], k=1, config=fast_config(engine))


# --------------------------------------------------------------------------- offline
def test_offline_engine_stops_quickly_with_advice(tmp_path):
    config = CrawlConfig(base_url=T.closed_port_url(), probe_timeout=2.0)
    started = time.monotonic()
    with pytest.raises(EngineUnreachable) as info:
        crawl_run(tmp_path, [TABBY], k=5, config=config)
    assert time.monotonic() - started < 3
    message = str(info.value)
    assert message.startswith("cannot reach 127.0.0.1: connection refused")
    assert "No internet? Use local import: python -m crawl import" in message
    assert list(tmp_path.iterdir()) == []  # nothing created or touched


def test_no_dns_means_cannot_reach_bing(tmp_path):
    """What a machine without internet sees with the default engine (names do not resolve)."""
    reach = check_engine("bing")
    assert not reach.ok and reach.host == "www.bing.com"
    with pytest.raises(EngineUnreachable, match=r"^cannot reach www\.bing\.com: the name cannot be resolved \(DNS\)"):
        crawl_run(tmp_path, [TABBY], k=5)


def test_engine_lost_after_the_check_stops_the_class(tmp_path):
    with good_engine(10) as engine:
        engine.page_delay = 2.0  # answers HEAD, never a result page in time
        started = time.monotonic()
        with pytest.raises(EngineUnreachable, match="cannot reach 127.0.0.1: no answer within 0.5s") as info:
            crawl_run(tmp_path, [TABBY, TIGER_CAT], k=5, config=fast_config(engine))
        assert time.monotonic() - started < 5
        assert info.value.summary is not None and info.value.summary.per_class["accepted"].tolist() == [0, 0]


def test_blocked_engine_is_reported_not_silent(tmp_path):
    with good_engine(10) as engine:
        engine.page_status = 429
        summary = crawl_run(tmp_path, [TABBY], k=5, config=fast_config(engine, max_terms=1))
    assert not summary.complete
    assert any("http-error: HTTP 429" in note for note in summary.notes)


def test_rate_limited_engine_is_reported_as_such(tmp_path):
    """Issue 11 item 13: HTTP 429 was reported as 'the engine listed no more usable images'."""
    with good_engine(10) as engine:
        engine.page_status = 429
        summary = crawl_run(tmp_path, [TABBY, TIGER_CAT], k=5, config=fast_config(engine))
        pages = engine.hits["/images/async"]
    assert not summary.complete
    short = [note for note in summary.notes if "0/5 accepted" in note]
    assert len(short) == 2 and not any("listed no more" in note for note in summary.notes)
    assert short[0] == (f"{TABBY} tabby: 0/5 accepted; bing rate-limited the crawl (HTTP 429) at 'tabby' after 0 "
                        "result page(s): wait a few minutes, then run the same command again to resume")
    assert pages == 2  # one refused page per class: the other search terms are not tried against a 429


def test_a_crawl_stopped_by_its_page_budget_says_so_and_resumes(tmp_path):
    """Issue 11 item 13: one result page (the budget for k=3) of dead links was reported as
    'the engine listed no more usable images', though the engine had more."""
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [f"/dead/{i}.jpg" for i in range(20)] + \
                                  [engine.add(f"/g/{i}.jpg", T.jpeg(5000 + i)) for i in range(10)]
        first = crawl_run(tmp_path, [TABBY], k=3, config=fast_config(engine, max_terms=1))
        assert first.per_class["accepted"].tolist() == [0]
        note = [n for n in first.notes if "0/3 accepted" in n][0]
        assert "listed no more" not in note
        assert note == (f"{TABBY} tabby: 0/3 accepted; 'tabby': stopped after 1 result page(s) (20 image URLs), the "
                        "look-ahead budget of this run: run the same command again to look further")
        second = crawl_run(tmp_path, [TABBY], k=3, config=fast_config(engine, max_terms=1))
    assert second.complete and second.new_accepted == 3


def test_an_engine_with_no_more_results_is_still_reported_as_such(tmp_path):
    with good_engine(2) as engine:
        summary = crawl_run(tmp_path, [TABBY], k=5, config=fast_config(engine, max_terms=1))
    assert any(note.endswith("2/5 accepted; the engine listed no more usable images for 'tabby' (add a context word, "
                             "another engine, or import images)") for note in summary.notes), summary.notes


def test_unresolvable_image_hosts_are_rejected_and_the_engine_rechecked(tmp_path):
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [f"http://img{i}.example.invalid/x.jpg" for i in range(6)] + \
                                  [engine.add(f"/g/{i}.jpg", T.jpeg(2000 + i)) for i in range(3)]
        summary = crawl_run(tmp_path, [TABBY], k=3, config=fast_config(engine))
    assert summary.complete
    table = summary.per_class.set_index("wnid")
    assert table.loc[TABBY, "rejected:connection"] == 6


def test_network_lost_during_a_crawl_stops_it(tmp_path):
    """Image hosts stop resolving and the engine stops answering: stop with the offline message."""
    with T.FakeEngine() as engine:
        engine.results["tabby"] = [engine.add("/g/0.jpg", T.jpeg(2100))] + \
                                  [f"http://img{i}.example.invalid/x.jpg" for i in range(12)]
        engine.probe_answers = 1  # the check before the crawl passes, the one during it fails
        with pytest.raises(EngineUnreachable, match="^cannot reach 127.0.0.1: connection failed. No internet?") as info:
            crawl_run(tmp_path, [TABBY], k=5, config=fast_config(engine, offline_after=5))
    assert info.value.summary.per_class["accepted"].tolist() == [1]
    assert check_consistent(tmp_path)["status"].tolist()[:1] == ["accepted"]


def test_image_hosts_on_private_addresses_are_refused_unless_allowed(tmp_path, capsys):
    """Issue 11 item 17 (SSRF): the engine's own address is trusted, other loopback hosts are not."""
    from crawl.cli import main

    with T.FakeEngine() as engine, T.FakeEngine() as intranet:
        engine.results["tabby"] = [intranet.add(f"/i/{i}.jpg", T.jpeg(4000 + i)) for i in range(3)] + \
                                  [engine.add("/own.jpg", T.jpeg(4010)),
                                   engine.add("/to-intranet", status=302, headers={"Location": intranet.absolute("/i/0.jpg")})]
        summary = crawl_run(tmp_path / "strict", [TABBY], k=4, config=fast_config(engine, max_terms=1))
        table = summary.per_class.set_index("wnid")
        assert table.loc[TABBY, "accepted"] == 1 and table.loc[TABBY, "rejected:private-address"] == 4
        assert sum(intranet.hits.values()) == 0  # not one request reached the private host
        reasons = check_consistent(tmp_path / "strict").set_index("url")["reason"]
        assert reasons[intranet.absolute("/i/1.jpg")] == ("private-address: 127.0.0.1 is a loopback address "
                                                           "(--allow-private-hosts fetches it)")
        assert reasons[engine.absolute("/to-intranet")].startswith("private-address:")  # checked after the redirect

        allowed = crawl_run(tmp_path / "allowed", [TABBY], k=4, config=fast_config(engine, max_terms=1, allow_private_hosts=True))
        assert allowed.complete and allowed.new_accepted == 4

        args = ["fetch", "--wnids", TABBY, "--k", "4", "--base-url", engine.base_url, "--no-progress", "--threads", "1"]
        assert main(args + ["--out", str(tmp_path / "cli-strict")]) == 1
        assert "rejected:private-address" in capsys.readouterr().out
        assert main(args + ["--out", str(tmp_path / "cli-allowed"), "--allow-private-hosts"]) == 0
        # What k = 4 buys (issue 23 item 4): Wilson's widest half-width at 4 images, printed before the crawl.
        assert ("k = 4 images per class: accuracy to \u00b135.0 points (95%, worst case p = 0.5); \u00b110 points "
                "needs 93 images per class") in capsys.readouterr().err


# --------------------------------------------------------------------------- engines
def test_search_terms_from_lemmas_with_context():
    assert search_terms(TABBY) == ["tabby", "tabby cat"]
    assert search_terms(TABBY, context="cat") == ["tabby cat"]
    assert search_terms(PERSIAN, context="cat") == ["Persian cat"]


def test_bing_parser_reads_every_image_url():
    """icrawler 0.6.10's own Bing parser keeps only URLs containing '.jpg'; ours reads the JSON."""
    from icrawler.builtin.bing import BingParser
    from icrawler.utils import Signal

    page = ('<div class="imgpt"><a class="iusc" m="{&quot;murl&quot;:&quot;https://x.org/a.png&quot;}"></a></div>'
            '<div class="imgpt"><a class="iusc" m="{&quot;murl&quot;:&quot;https://x.org/b.jpg?s=1&amp;t=2&quot;}"></a></div>'
            '<a class="iusc" m="not json"></a>').encode()
    response = type("R", (), {"content": page})()
    ours = [t["file_url"] for t in WildLensBingParser(1, Signal(), None).parse(response)]
    assert ours == ["https://x.org/a.png", "https://x.org/b.jpg?s=1&t=2"]
    theirs = [t["file_url"] for t in BingParser(1, Signal(), None).parse(response)]
    assert "https://x.org/a.png" not in theirs


def test_engine_urls_use_the_injected_base():
    from icrawler.utils import Signal

    def page(name, **kwargs):
        spec = get_engine(name)
        feeder = spec.feeder_cls(1, Signal(), None, base_url="http://127.0.0.1:9", page_size=spec.page_size)
        return feeder.page_url("tiger cat", spec.page_size, **kwargs)

    assert page("bing") == "http://127.0.0.1:9/images/async?q=tiger+cat&first=20&count=20"
    assert page("bing", filters={"type": "photo"}).endswith("&qft=%2Bfilterui%3Aphoto-photo")
    assert page("google").startswith("http://127.0.0.1:9/search?q=tiger+cat&ijn=1&start=100")
    assert page("baidu").startswith("http://127.0.0.1:9/search/acjson?") and "word=tiger+cat&pn=30" in page("baidu")
    assert "api_key=KEY" in page("flickr", apikey="KEY") and "page=2" in page("flickr", apikey="KEY")
    assert set(ENGINES) == {"bing", "google", "baidu", "flickr"}


def test_flickr_needs_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("FLICKR_APIKEY", raising=False)
    with pytest.raises(CrawlError, match="flickr needs an API key"):
        crawl_run(tmp_path, [TABBY], k=1, engine="flickr")


def test_flickr_and_baidu_parsers():
    from icrawler.utils import Signal

    flickr = get_engine("flickr").parser_cls(1, Signal(), None)
    body = b'{"stat":"ok","photos":{"photo":[{"id":"1","url_c":"https://f/1_c.jpg","url_m":"https://f/1_m.jpg"},{"id":"2"}]}}'
    assert [t["file_url"] for t in flickr.parse(type("R", (), {"content": body})())] == ["https://f/1_c.jpg"]
    baidu = get_engine("baidu").parser_cls(1, Signal(), None)
    body = b'{"data":[{"hoverURL":"https://b/1.jpg"},{}]}'
    assert [t["file_url"] for t in baidu.parse(type("R", (), {"content": body})())] == ["https://b/1.jpg"]


def test_one_writer_per_destination(tmp_path):
    dest = FolderDestination(tmp_path)
    with exclusive(dest):
        with pytest.raises(CollectError, match="Another crawl or import"):
            with exclusive(FolderDestination(tmp_path)):
                pass
