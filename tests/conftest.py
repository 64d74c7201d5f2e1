"""Test-wide guards: nothing leaves the machine, nothing lands in the user's home."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Offline by default: hubs must never be contacted by a test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # Ray's instances in the tests upload nothing


# Native thread pools per test worker (OpenMP in PyTorch, OpenBLAS in NumPy and scikit-learn, MKL): the
# cores over the workers, set before a worker starts and imports them (the workers inherit this
# process's environment); a value the caller set wins. Why: each pool sizes itself to the machine, so two
# workers on 2 cores ran 4 threads that spin at barriers while the other worker's threads hold the cores.
# Measured (tests/classify, tests/probe, tests/explain without Ray, -n 2, this 2-core machine, cgroup
# cpuacct of the whole process tree): 377 CPU-seconds and 195 s wall -> 302.5 and 159 s.
THREAD_POOLS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 1 and not os.environ.get("PYTEST_XDIST_WORKER"):
        from core.machine import available_cores  # os only: the controller imports no PyTorch or NumPy

        cores = available_cores()
        for name in THREAD_POOLS:
            os.environ.setdefault(name, str(max(1, cores // workers)))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``long`` first, the rest in their order (a stable sort). Why: `make test`
    schedules with pytest-xdist's loadgroup, which hands out work in collection order after the
    groups, so a 100-second browser test collected last (tests/pages) could run alone at the end
    while the other worker had nothing left (longest-processing-time-first scheduling)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    honour_xdist_groups(config, items)


def honour_xdist_groups(config, items) -> None:
    """Give each test marked ``xdist_group(name)`` the node id ``<id>@<name>`` that loadgroup schedules by.

    pytest-xdist 3.8 appends the suffix by assigning ``item._nodeid``, which pytest 9.2 no longer reads
    (``Item.nodeid`` is ``str(item._id)``): every group was silently ignored, and the Ray module's tests
    ran on both workers, each starting its own Ray instance and actors (208 s of the suite's test time
    against about 170 s on one worker). Only on an xdist worker under ``--dist loadgroup``, and only
    where the id has no suffix yet (a fixed xdist does it itself).

    A module whose module fixtures are its cost is a group of its own (test_precisions, test_features,
    test_zeroshot, test_interval_coverage), and so are modules sharing one (test_wordgraph and test_meronyms:
    NLTK's parse of every noun synset): split over two workers, each built them (timelines of
    2026-12-06: test_precisions 20.5 s on one worker, 17.4 s on the other). It saves CPU; the suite's wall
    from a fresh clone stayed within its spread (474 -> 480 s)."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Each test gets its own WILDLENS_HOME so runs never touch ~/.wildlens."""
    monkeypatch.setenv("WILDLENS_HOME", str(tmp_path_factory.mktemp("wildlens_home")))


# The suite's Ray cluster (head + 2 worker nodes), shared by every test of the xdist group "ray".
from tests.raycluster import ray_cluster, stop_after_the_ray_group  # noqa: E402,F401  (a fixture)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    stop_after_the_ray_group(item, nextitem)


def pytest_sessionfinish(session):
    from tests.raycluster import stop_cluster

    stop_cluster()
