"""The test suite's Ray cluster: three nodes on this machine, started once per test process that needs it.

``ray.cluster_utils.Cluster`` (Ray's own utility for a cluster of several nodes on one machine: each
node its own raylet and object store): a head without CPUs, where the driver connects and zero-CPU
tasks run, and two worker nodes of 1 CPU each, so two actors always sit on two nodes. Every test that
uses it is in the xdist group "ray" (one worker: the cluster starts once, ~5 s and its daemons' CPU),
the classify engine's and the probe sweeps' alike. Health checks every 0.5 s, 3 misses: a removed node
is marked dead in ~2 s (Ray's default is ~15 s).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.rayworker import GATE_ENV

ROOT = Path(__file__).resolve().parent.parent  # (not imported from tests.conftest, which imports this module)

FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_timeout_ms": 500}
# Idle workers kept (2 per node, for 10 min) instead of Ray's default (up to a node's CPUs, killed after
# 1 s idle): a later run's probes and actors reuse processes that already imported PyTorch. Measured on
# five of the engine's tests: 130 CPU-seconds of the whole process tree -> 98 (cgroup cpuacct), 84 -> 71 s.
WARM_WORKERS = {"num_workers_soft_limit": 2, "idle_worker_killing_time_threshold_ms": 600_000}
WORKER_STORE = 96 * 1024 ** 2  # each worker node's object store


@contextmanager
def _without_home():
    """The nodes' processes inherit this process's environment: started without WILDLENS_HOME, their
    workers take each run's driver store (core.raysession.node_home), as nodes started
    without one on a cluster do."""
    saved = os.environ.pop("WILDLENS_HOME", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["WILDLENS_HOME"] = saved


def _restore_workers(cluster, nodes: int = 2) -> None:
    """The cluster's worker nodes back to ``nodes`` (after a test removed one)."""
    with _without_home():
        while len(cluster.worker_nodes) < nodes:
            cluster.add_node(num_cpus=1, object_store_memory=WORKER_STORE)
        cluster.wait_for_nodes()


_RUNNING: dict = {}  # the cluster of this test process while the Ray tests run: {"cluster": Cluster}


@pytest.fixture()
def ray_cluster():
    """The suite's cluster, started at the first test that asks for it and stopped after the last
    test of the xdist group "ray" (:func:`stop_after_the_ray_group`), so its daemons do not idle
    beside the rest of the worker's tests."""
    yield suite_cluster()


def suite_cluster():
    """:func:`ray_cluster`'s body, for a fixture of a wider scope (a run shared by a module's tests)."""
    from classify.engine.ray_engine import ray_available

    if not ray_available():
        pytest.skip("ray is not installed (pip install -r requirements.txt)")
    if "cluster" not in _RUNNING:
        _RUNNING["cluster"] = _start()
    _settle(_RUNNING["cluster"])
    return _RUNNING["cluster"]


def wait_until_schedulable(node_id: str, deadline: float = 20.0) -> None:
    """Wait until a task pinned to ``node_id`` runs there: the driver's raylet has heard of a node the
    test just added (the GCS lists it first; a probe pinned to it before is refused as unschedulable,
    which the run reports as a node draining or still joining: classify.engine.ray_engine.finish_probes)."""
    import time

    import ray
    from ray.exceptions import TaskUnschedulableError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0, max_retries=0)
    def here() -> str:
        return ray.get_runtime_context().get_node_id()

    end = time.monotonic() + deadline
    while True:
        try:
            assert ray.get(here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                           .remote()) == node_id
            return
        except TaskUnschedulableError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def _settle(cluster, deadline: float = 20.0) -> None:
    """Wait until Ray's own node table (the GCS, ``ray.nodes()``) has exactly the cluster's nodes
    alive: a node an earlier test removed is marked dead, one it added back is registered. Why: a node
    removed at the end of one test stays "alive" in the GCS for ~2 s (three missed health checks);
    a run started in that window sends a probe task to the dead raylet and Ray 2.60's driver aborts
    (raylet_client_pool.cc: "Check failed: address.node_id() != ''", the pytest process gone with
    exit status 1 and no report; seen 3 of 3 times running the four Ray modules in one process,
    2026-12-07; ray-project/ray#56613 touches the same client pool)."""
    import time

    import ray

    want = {cluster.head_node.node_id, *(node.node_id for node in cluster.worker_nodes)}
    end = time.monotonic() + deadline
    while True:
        alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
        if alive == want:
            return
        if time.monotonic() > end:
            raise AssertionError(f"the test cluster did not settle in {deadline:.0f} s: Ray sees "
                                 f"{len(alive)} live nodes, the cluster has {len(want)}")
        time.sleep(0.1)


def _start():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # an earlier --engine ray call in this test process started its own
        ray.shutdown()
    with _without_home():
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 128 * 1024 ** 2,
            "_system_config": {**FAST_HEALTH, **WARM_WORKERS}})
    _restore_workers(cluster)
    # Each worker registers the tiny CLIP test double as this process does and installs the batch gate
    # (tests.rayworker.worker_setup).
    _RUNNING["gate"] = Path(tempfile.mkdtemp(prefix="wildlens-ray-gate-")) / "hold"
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), GATE_ENV: str(_RUNNING["gate"])},
                          "worker_process_setup_hook": "tests.rayworker.worker_setup"})
    return cluster


def batch_gate() -> Path:
    """A file that, while it exists, holds each of the suite's Ray Data actors (classify.engine.ray_engine.
    PredictActor) before its third batch and every one after (for up to 60 s; tests.rayworker). Why: Ray Data releases an
    actor once it has consumed all its inputs, which a driver slower than the whole run (a loaded machine) saw
    before its first stored batch; a fault test that kills or removes a running actor after that batch needs
    one still running. Create it before the run; remove it once the fault is made."""
    return _RUNNING["gate"]


def stop_cluster() -> None:
    """Stop the suite's cluster if this process started it (a later test that asks starts it again)."""
    cluster = _RUNNING.pop("cluster", None)
    gate = _RUNNING.pop("gate", None)
    if gate is not None:
        shutil.rmtree(gate.parent, ignore_errors=True)
    if cluster is not None:
        import ray

        ray.shutdown()
        cluster.shutdown()


def in_ray_group(item) -> bool:
    marker = item.get_closest_marker("xdist_group")
    return marker is not None and (marker.args[:1] or (marker.kwargs.get("name"),))[0] == "ray"


def stop_after_the_ray_group(item, nextitem) -> None:
    """Called after each test's teardown (tests/conftest.py): the cluster stops when the next test
    is not one of the group (loadgroup runs the group's tests one after another on one worker)."""
    if "cluster" in _RUNNING and (nextitem is None or not in_ray_group(nextitem)):
        stop_cluster()
