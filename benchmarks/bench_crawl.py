"""Crawl throughput: accepted images per second against a loopback imitation of Bing.

Every image answer is delayed by an artificial latency (default 50 ms, like a distant image
host) so that parallel downloads matter; result pages are not delayed. Images are distinct
640x480 JPEGs (~40 KB), so each accepted image costs a full decode, a perceptual hash, a
SHA-256 and an fsync'ed atomic write. The loopback server runs in this same process and
competes for the GIL and the CPU: real-world figures depend on the network, not on this.

    .venv/bin/python benchmarks/bench_crawl.py [--k 120] [--latency 0.05] [--threads 1 8]
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


def run_once(k: int, latency: float, threads: int, images: list[bytes]) -> tuple[float, int]:
    with T.FakeEngine(latency=latency) as engine, tempfile.TemporaryDirectory() as out:
        engine.results["tabby"] = [engine.add(f"/img/{i}.jpg", data) for i, data in enumerate(images)]
        config = CrawlConfig(base_url=engine.base_url, threads=threads, max_terms=1, read_timeout=5)
        started = time.perf_counter()
        summary = crawl_run(out, [TABBY], k, config=config)
        seconds = time.perf_counter() - started
        return seconds, summary.new_accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=120, help="images to accept (default 120)")
    parser.add_argument("--latency", type=float, default=0.05, help="artificial delay per image answer, s (default 0.05)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    images = [T.jpeg(10_000 + i, size=(640, 480), quality=85) for i in range(args.k + 20)]
    mean_kb = sum(map(len, images)) / len(images) / 1024
    print(f"bench_crawl: k={args.k} distinct 640x480 JPEGs (~{mean_kb:.0f} KB), loopback server in-process, "
          f"artificial latency {args.latency * 1000:.0f} ms per image answer, {os.cpu_count()} CPU(s)")
    for threads in args.threads:
        seconds, accepted = run_once(args.k, args.latency, threads, images)
        print(f"  threads={threads:2d}: {accepted} accepted in {seconds:6.2f} s -> {accepted / seconds:7.1f} accepted images/s")


if __name__ == "__main__":
    main()
