"""The crawl on Ray (crawl.ray_crawl): classes on actors of the suite's multi-node cluster
(tests/raycluster.py), this process the only writer; the same accepted set as the local crawl, a
per-host limit across the actors, and a killed crawl that resumes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from crawl.config import CrawlConfig
from crawl.crawler import crawl_run
from crawl.ray_crawl import ray_classes
from tests.crawl import fake_engine as T
from tests.crawl.test_engine import PERSIAN, TABBY, TIGER_CAT, check_consistent, fast_config, zoo  # noqa: F401

pytestmark = pytest.mark.xdist_group("ray")  # the cluster starts once, on the worker of the Ray tests
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = ["wnid", "url", "status", "reason", "sha256", "file", "duplicate_of", "other_wnids", "search_term", "rank"]


def _rows(folder) -> pd.DataFrame:
    manifest = check_consistent(folder)
    return manifest[KEY].astype(str).sort_values(["wnid", "url"]).reset_index(drop=True)


def test_a_crawl_on_ray_accepts_what_the_local_crawl_accepts(ray_cluster, zoo, tmp_path):  # noqa: F811
    """The zoo of good and bad answers (test_engine.py), two classes whose results overlap: every row
    (verdict, reason, stored file, cross-class duplicate) as the local crawl gives it."""
    config = fast_config(zoo, max_terms=1)
    local = crawl_run(tmp_path / "local", [TABBY, TIGER_CAT], k=50, config=config)
    on_ray = crawl_run(tmp_path / "ray", [TABBY, TIGER_CAT], k=50, config=config, classes=ray_classes(actors=2))
    pd.testing.assert_frame_equal(_rows(tmp_path / "ray"), _rows(tmp_path / "local"))
    assert on_ray.new_accepted == local.new_accepted > 0
    pd.testing.assert_frame_equal(on_ray.per_class, local.per_class)
    # Run again: the URLs whose failure may pass (the zoo's HTTP 500 and its slow server) are fetched
    # again on Ray as in the local crawl, their rows replaced in place (crawl.store.Collector).
    again = crawl_run(tmp_path / "ray", [TABBY, TIGER_CAT], k=50, config=config, classes=ray_classes(actors=2))
    local_again = crawl_run(tmp_path / "local", [TABBY, TIGER_CAT], k=50, config=config)
    assert again.new_rows == local_again.new_rows > 0 and again.new_accepted == local_again.new_accepted
    pd.testing.assert_frame_equal(_rows(tmp_path / "ray"), _rows(tmp_path / "local"))


@pytest.fixture()
def many():
    """Four classes of 12 images each behind 0.1 s of latency per image."""
    with T.FakeEngine(latency=0.1) as engine:
        for c, term in enumerate(("tabby", "tiger cat", "Persian cat", "Siamese cat")):  # the classes' first terms
            engine.results[term] = [engine.add(f"/{c}/{i}.jpg", T.jpeg(1000 + 100 * c + i)) for i in range(12)]
        yield engine


def test_requests_in_flight_per_host_stay_within_the_limit_across_actors(ray_cluster, many, tmp_path):
    wnids = [TABBY, TIGER_CAT, PERSIAN, "n02123597"]
    config = fast_config(many, max_terms=1, threads=4, read_timeout=2.0, file_deadline=5.0)
    summary = crawl_run(tmp_path / "out", wnids, k=12, config=config, classes=ray_classes(actors=2, per_host=2))
    assert summary.complete and summary.new_accepted == 48
    assert many.most_in_flight <= 2, "2 actors x 4 threads, at most 2 requests in flight to the one host"
    check_consistent(tmp_path / "out")


def test_a_killed_crawl_on_ray_resumes_without_loss(ray_cluster, many, tmp_path):
    """The driver killed mid-crawl (its actors die with its job): the manifest and files agree, and the
    same command finishes the crawl with every class full, each image once."""
    out = tmp_path / "out"
    wnids = "n02123045,n02123159,n02123394,n02123597"
    env = {**os.environ, "PYTHONPATH": ROOT, "RAY_ADDRESS": ray_cluster.address}
    command = [sys.executable, "-m", "crawl", "fetch", "--wnids", wnids, "--k", "12", "--out", str(out), "--base-url",
               many.base_url, "--threads", "2", "--ray", "--ray-actors", "2", "--no-progress"]
    driver = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("n*/*.jpg")):
            assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
            time.sleep(0.1)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    stored = list(out.glob("n*/*.jpg"))
    assert 0 < len(stored) < 48, "killed mid-crawl"  # (rows journalled since the last manifest write: folded in on resume)
    # The same crawl again, here (the library call the command makes; a second process would only add its start).
    summary = crawl_run(out, wnids.split(","), k=12, config=CrawlConfig(base_url=many.base_url, threads=2),
                        classes=ray_classes(actors=2))
    assert summary.complete
    manifest = check_consistent(out)
    accepted = manifest[manifest["status"] == "accepted"]
    assert len(accepted) == 48 and not accepted.duplicated("sha256").any()


def _crawl_actor_pids() -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    if f.read().startswith(b"ray::CrawlActor"):
                        pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_an_actor_killed_mid_request_frees_its_host_slots_and_its_job_runs_again(ray_cluster, many, tmp_path):
    """One request in flight per host across the cluster (--ray-per-host 1), and the actor holding it
    killed mid-download: its slot is given back (else every other request would wait forever), a new
    actor runs the lost job again, and the crawl ends full, each image once."""
    import threading

    wnids = [TABBY, TIGER_CAT]  # (two classes of the four: 24 downloads one at a time, 0.1 s each)
    config = fast_config(many, max_terms=1, threads=2, read_timeout=2.0, file_deadline=5.0)
    killed, outcome = [], {}

    def kill_one_mid_request():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            if many.in_flight and sum(n for path, n in many.hits.items() if path.endswith(".jpg")) >= 3:
                pids = _crawl_actor_pids()
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append(pids[0])
            time.sleep(0.02)

    def crawl():
        try:
            outcome["summary"] = crawl_run(tmp_path / "out", wnids, k=12, config=config,
                                           classes=ray_classes(actors=2, per_host=1))
        except Exception as exc:  # noqa: BLE001
            outcome["error"] = exc

    killer, crawler = threading.Thread(target=kill_one_mid_request), threading.Thread(target=crawl, daemon=True)
    killer.start(), crawler.start()
    killer.join()
    crawler.join(120)
    assert killed, "an actor was killed while a request was in flight"
    assert not crawler.is_alive(), "the crawl waited for a slot the dead actor held"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["summary"].complete and outcome["summary"].new_accepted == 24
    # at most one at a time, except while the server still answers the killed actor's request (its slot
    # given back when the driver saw the actor die, not when the server's answer ended)
    assert many.most_in_flight <= 2
    accepted = check_consistent(tmp_path / "out").query("status == 'accepted'")
    assert len(accepted) == 24 and not accepted.duplicated("sha256").any()


def test_a_job_whose_actor_keeps_dying_stops_the_crawl_in_one_line(ray_cluster, many, tmp_path):
    """Every actor killed as soon as it exists: each job is run again on a new actor, three times, then
    the crawl stops with one line naming the class and saying how to resume; what is stored is consistent."""
    import threading

    from crawl.crawler import CrawlError

    stop = threading.Event()

    def kill_every_actor():
        while not stop.is_set():
            for pid in _crawl_actor_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    killer = threading.Thread(target=kill_every_actor, daemon=True)
    killer.start()
    try:
        with pytest.raises(CrawlError) as caught:
            crawl_run(tmp_path / "out", [TABBY], k=12, config=fast_config(many, max_terms=1, threads=2),
                      classes=ray_classes(actors=1))  # (one actor: three actor starts, each ~2.5 CPU-s here)
    finally:
        stop.set()
        killer.join()
    text = str(caught.value)
    assert "its crawl on Ray lost its actor 3 times" in text and "run the same command again to resume" in text
    assert "\n" not in text
    check_consistent(tmp_path / "out")


def test_host_slots_of_a_forgotten_holder_are_given_back():
    """HostSlots alone (no Ray): slots and shared counts per holder; forget() gives back a dead holder's
    slots and its part of the counts; a slot granted to a holder forgotten while it waited goes straight
    back, and a forgotten holder (an actor only unreachable, taken for dead) gets no slot and no count."""
    import asyncio

    from crawl.ray_crawl import HolderGone, HostSlots

    async def scenario():
        slots = HostSlots(2)
        await slots.acquire("a.test", 1)
        await slots.acquire("a.test", 1)
        waiting = asyncio.ensure_future(slots.acquire("a.test", 2))  # no slot left: waits
        await asyncio.sleep(0)
        assert not waiting.done() and await slots.in_use("a.test") == 2
        assert await slots.forget(1) == 2
        await asyncio.wait_for(waiting, 5)
        assert await slots.in_use("a.test") == 1
        await slots.release("a.test", 1)  # a dead holder's late release changes nothing
        assert await slots.in_use("a.test") == 1
        await slots.acquire("a.test", 3)  # holders 2 and 3
        blocked = asyncio.ensure_future(slots.acquire("a.test", 4))
        await asyncio.sleep(0)
        assert not blocked.done()
        await slots.forget(4)  # forgotten while it waited
        await slots.release("a.test", 2)  # its slot goes to holder 4, which gives it straight back
        with pytest.raises(HolderGone):
            await asyncio.wait_for(blocked, 5)
        assert await slots.in_use("a.test") == 1
        await asyncio.wait_for(slots.acquire("a.test", 5), 5)  # the slot given back: no wait
        assert await slots.in_use("a.test") == 2
        with pytest.raises(HolderGone):
            await slots.acquire("a.test", 4)
        # a split class's shared count: a forgotten holder's part is given back (its job runs again)
        assert [await slots.take(TABBY, 3, h) for h in (6, 6, 7, 7)] == [True, True, True, False]
        await slots.forget(6)
        assert await slots.total(TABBY) == 1 and await slots.take(TABBY, 3, 7)
        assert not await slots.take(TABBY, 3, 6)

    asyncio.run(scenario())


def test_a_large_class_is_split_over_actors_by_result_pages(ray_cluster, tmp_path):
    """k of one class spans several result pages: its first pages go to two actors at once (sharing
    the class's count), and the stored rows are the local crawl's, each URL once per class."""
    with T.FakeEngine(latency=0.02) as engine:
        urls = [engine.add(f"/t/{i}.jpg", T.jpeg(3000 + i)) for i in range(50)]
        engine.results["tabby"] = urls[:45] + urls[:5]  # the engine lists five URLs twice, on another page
        config = fast_config(engine, max_terms=1, threads=2)
        local = crawl_run(tmp_path / "local", [TABBY], k=45, config=config)
        on_ray = crawl_run(tmp_path / "ray", [TABBY], k=45, config=config, classes=ray_classes(actors=2))
    assert f"{TABBY}: its first result pages were crawled by 2 actors at once" in on_ray.notes
    assert on_ray.complete and on_ray.new_accepted == local.new_accepted == 45
    pd.testing.assert_frame_equal(_rows(tmp_path / "ray"), _rows(tmp_path / "local"))



@pytest.mark.parametrize("actors, per_host", [(0, 4), (5000, 4), (2, 0)])
def test_actor_and_host_limits_out_of_range_are_one_line(actors, per_host):
    from core.errors import OptionError

    with pytest.raises(OptionError, match=r"^--ray-(actors|per-host) -?\d+: give 1 to 1024"):
        ray_classes(actors=actors, per_host=per_host)
