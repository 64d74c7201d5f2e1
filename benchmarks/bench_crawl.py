"""Crawl throughput: accepted images per second against a loopback imitation of Bing.

Every image answer is delayed by an artificial latency (default 50 ms, like a distant image
host) so that parallel downloads matter; result pages are not delayed. Images are distinct
640x480 JPEGs (~40 KB), so each accepted image costs a full decode, a perceptual hash, a
SHA-256 and an fsync'ed atomic write. The loopback server runs in this same process, where it
competes for the GIL and the CPU, and in a process of its own (``--server-process``; still on the
same 2 cores): real-world figures depend on the network, not on this.

Import scaling (``--import-sizes``): ``import_new_run`` of SRC folders of N distinct small JPEGs
(64x64, four class folders) into a new run of a scratch run store, for growing N. Linear means
the per-file time stays flat: the 'ratio' column is each size's per-file time over the smallest
size's, in the same run (issue 22 item 20: it was quadratic, 5k / 10k / 20k / 40k files took
10 / 34 / 117 / 420 s).

The near-duplicate search (``--nearest-sizes``) is what stays O(n) per image: each accepted image
is compared with every accepted pHash (one vectorised XOR + popcount). This times one search,
``Collector._nearest``, over N stored pHashes, and extrapolates its whole cost for an import of N
files (the sum of one search per image over 0..N hashes, about per-hash time x N^2 / 2).

Crawl on Ray (``--ray-actors 1 2 4``, issue 27 item 2): the same k images spread over 8 classes (the
unit an actor takes), the loopback engine in its own process, on a local Ray instance of this machine;
each actor downloads with ``--ray-threads`` threads, the per-host limit lifted (one loopback host
serves everything); the local crawl of the same 8 classes with 16 threads is the yardstick, in the
same run. The whole call is timed, the actors' start included.

    .venv/bin/python benchmarks/bench_crawl.py [--k 600] [--latency 0.05] [--threads 1 8 16]
    .venv/bin/python benchmarks/bench_crawl.py --ray-actors 1 2 4 [--ray-threads 8]
    .venv/bin/python benchmarks/bench_crawl.py --import-sizes 5000 10000 20000 40000
    .venv/bin/python benchmarks/bench_crawl.py --nearest-sizes 40000 1000000
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.crawl import fake_engine as T  # noqa: E402
from crawl.config import CrawlConfig  # noqa: E402
from crawl.crawler import crawl_run  # noqa: E402

TABBY = "n02123045"


def _serve(latency: float, images: list[bytes], pipe) -> None:
    """The loopback engine in a process of its own (``--server-process``): it answers until the pipe closes."""
    with T.FakeEngine(latency=latency) as engine:
        engine.results["tabby"] = [engine.add(f"/img/{i}.jpg", data) for i, data in enumerate(images)]
        pipe.send(engine.base_url)
        try:
            pipe.recv()
        except EOFError:
            pass


def _crawl(base_url: str, k: int, threads: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as out:
        config = CrawlConfig(base_url=base_url, threads=threads, max_terms=1, read_timeout=5)
        started = time.perf_counter()
        summary = crawl_run(out, [TABBY], k, config=config)
        return time.perf_counter() - started, summary.new_accepted


def run_once(k: int, latency: float, threads: int, images: list[bytes], server_process: bool = False) -> tuple[float, int]:
    if server_process:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        server = context.Process(target=_serve, args=(latency, images, theirs), daemon=True)
        server.start()
        theirs.close()  # the child's end: if the server dies, recv() below sees EOF instead of waiting
        try:
            if not ours.poll(60):
                raise RuntimeError("the loopback engine's process did not start within 60 s")
            return _crawl(ours.recv(), k, threads)
        finally:
            ours.send("stop")
            server.join(10)
    with T.FakeEngine(latency=latency) as engine:
        engine.results["tabby"] = [engine.add(f"/img/{i}.jpg", data) for i, data in enumerate(images)]
        return _crawl(engine.base_url, k, threads)


CLASSES = ("n02123045", "n02123159", "n02123394", "n02124075")


def import_once(n: int, workdir: Path) -> float:
    """Seconds to import n distinct 64x64 JPEGs (in four class folders) into a new run."""
    from core.runstore import RunStore
    from crawl.importer import import_new_run

    src = workdir / f"src-{n}"
    for i in range(n):
        folder = src / CLASSES[i % len(CLASSES)]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:07d}.jpg").write_bytes(T.jpeg(1_000_000 + i, size=(64, 64)))
    store = RunStore(workdir / f"home-{n}")
    started = time.perf_counter()
    summary = import_new_run(src, store=store, run_id=f"bench-{n}")
    seconds = time.perf_counter() - started
    assert summary.files_seen == n, summary.files_seen
    return seconds


def bench_import(sizes: list[int]) -> None:
    print(f"bench_crawl import: N distinct 64x64 JPEGs in 4 class folders -> a new run, {os.cpu_count()} CPU(s)")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            seconds = import_once(n, Path(tmp))
            per_file = seconds / n * 1000
            base = base or per_file
            print(f"  N={n:7d}: {seconds:7.1f} s  {per_file:6.2f} ms/file  ratio {per_file / base:5.2f} "
                  f"(per-file time / N={sizes[0]}'s)", flush=True)


def bench_nearest(sizes: list[int], queries: int = 200) -> None:
    """One near-duplicate search over N accepted pHashes (the collector's own), timed."""
    import numpy as np

    from crawl.config import ValidationConfig
    from crawl.store import Collector, FolderDestination

    print(f"bench_crawl nearest: one pHash search (Collector._nearest) over N accepted pHashes, {queries} searches")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        collector = Collector(FolderDestination(Path(tmp) / "out"), ValidationConfig())
        for n in sizes:
            collector._phash_array = rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64)
            collector._phash_rows = np.arange(n, dtype=np.int64)
            collector._phash_count = n
            probes = [f"{int(h):016x}" for h in rng.integers(0, 2**63, size=queries, dtype=np.int64)]
            started = time.perf_counter()
            for phash in probes:
                collector._nearest(phash)
            per_search = (time.perf_counter() - started) / queries
            total = per_search * n / 2  # one search per image over 0..n hashes: n searches of n/2 on average
            print(f"  N={n:8d}: {per_search * 1000:8.3f} ms/search  {per_search / n * 1e9:5.2f} ns/hash  "
                  f"-> ~{total / 60:6.1f} min of searching in an import of N files", flush=True)


RAY_CLASSES = ("n02123045", "n02123159", "n02123394", "n02123597", "n02124075", "n02125311", "n02127052",
               "n02128385")


def _serve_classes(latency: float, per_class: list[list[bytes]], pipe) -> None:
    """The loopback engine for several classes, in a process of its own, answering until the pipe closes."""
    from crawl.crawler import search_terms

    with T.FakeEngine(latency=latency) as engine:
        for c, (wnid, images) in enumerate(zip(RAY_CLASSES, per_class)):
            engine.results[search_terms(wnid)[0]] = [engine.add(f"/{c}/{i}.jpg", data) for i, data in enumerate(images)]
        pipe.send(engine.base_url)
        try:
            pipe.recv()
        except EOFError:
            pass


def bench_ray(k: int, latency: float, actors: list[int], threads: int) -> None:
    """Section 'crawl on Ray': the local crawl of 8 classes, then the same on 1, 2, 4 ... Ray actors."""
    import multiprocessing

    from core.raysession import ray_session
    from crawl.ray_crawl import ray_classes

    per = max(1, k // len(RAY_CLASSES))
    per_class = [[T.jpeg(20_000 + 1000 * c + i, size=(640, 480), quality=85) for i in range(per + 5)]
                 for c in range(len(RAY_CLASSES))]
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe()
    server = context.Process(target=_serve_classes, args=(latency, per_class, theirs), daemon=True)
    server.start()
    theirs.close()
    try:
        base_url = ours.recv()
        print(f"crawl on Ray: {per * len(RAY_CLASSES)} images over {len(RAY_CLASSES)} classes, loopback engine in its "
              f"own process, {latency * 1000:.0f} ms per image answer, {os.cpu_count()} CPU(s)")

        def crawl(classes=None, threads_=16) -> tuple[float, int]:
            with tempfile.TemporaryDirectory() as out:
                config = CrawlConfig(base_url=base_url, threads=threads_, max_terms=1, read_timeout=5)
                started = time.perf_counter()
                summary = crawl_run(out, list(RAY_CLASSES), per, config=config,
                                    **({"classes": classes} if classes else {}))
                return time.perf_counter() - started, summary.new_accepted

        seconds, accepted = crawl()
        baseline = accepted / seconds
        print(f"  local crawl, 16 threads:        {accepted} accepted in {seconds:6.2f} s -> {baseline:6.1f} images/s (1.00x)")
        with ray_session(None):  # one local instance for every measurement (its start is not counted)
            for n in actors:
                seconds, accepted = crawl(ray_classes(actors=n, per_host=1024), threads)
                rate = accepted / seconds
                print(f"  Ray, {n} actor{'s' if n > 1 else ' '} x {threads} threads:    {accepted} accepted in {seconds:6.2f} s -> "
                      f"{rate:6.1f} images/s ({rate / baseline:.2f}x)")
    finally:
        ours.send("stop")
        server.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=600, help="images to accept (default 600: 120 was mostly start-up)")
    parser.add_argument("--latency", type=float, default=0.05, help="artificial delay per image answer, s (default 0.05)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8, 16],
                        help="download threads to measure (default 1 8 16; 16 is CrawlConfig's default)")
    parser.add_argument("--server-process", choices=("both", "yes", "no"), default="both",
                        help="run the loopback engine in a process of its own (a real image host does not share "
                             "the crawler's GIL and CPU), in the crawler's process, or both (default)")
    parser.add_argument("--import-sizes", type=int, nargs="+", metavar="N",
                        help="measure import scaling at these sizes instead of crawl throughput")
    parser.add_argument("--nearest-sizes", type=int, nargs="+", metavar="N",
                        help="time one near-duplicate search over N stored pHashes instead")
    parser.add_argument("--ray-actors", type=int, nargs="+", metavar="N",
                        help="measure the crawl on Ray with these actor counts instead (e.g. 1 2 4)")
    parser.add_argument("--ray-threads", type=int, default=8, help="download threads per Ray actor (default 8)")
    args = parser.parse_args()
    if args.ray_actors:
        bench_ray(args.k, args.latency, args.ray_actors, args.ray_threads)
        return
    if args.nearest_sizes:
        bench_nearest(args.nearest_sizes)
        return
    if args.import_sizes:
        bench_import(args.import_sizes)
        return
    images = [T.jpeg(10_000 + i, size=(640, 480), quality=85) for i in range(args.k + 20)]
    mean_kb = sum(map(len, images)) / len(images) / 1024
    print(f"bench_crawl: k={args.k} distinct 640x480 JPEGs (~{mean_kb:.0f} KB), loopback engine, "
          f"artificial latency {args.latency * 1000:.0f} ms per image answer, {os.cpu_count()} CPU(s)")
    where = {"both": (False, True), "yes": (True,), "no": (False,)}[args.server_process]
    for threads in args.threads:
        for server_process in where:
            seconds, accepted = run_once(args.k, args.latency, threads, images, server_process)
            print(f"  threads={threads:2d}, server {'in its own process' if server_process else 'in this process    '}: "
                  f"{accepted} accepted in {seconds:6.2f} s -> {accepted / seconds:7.1f} accepted images/s "
                  f"(target >= 150 at 50 ms)")


if __name__ == "__main__":
    main()
