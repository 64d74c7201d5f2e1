"""The Ray engine (classify.engine.ray_engine): same rows as the local engine, one writer, faults survived.

The tests that need Ray share the suite's Ray cluster (tests/raycluster.py: a head without CPUs
and two worker nodes of 1 CPU each, ray.cluster_utils.Cluster), and run the real EfficientNet-Lite
weights on the 30 views of the packaged photographs (written as JPEG files): a few seconds of
inference each, most of the time is Ray's start and the actors' model load. Nodes are removed and
added mid-run (a lost node, a node with another store) and the cluster restored after.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from classify.engine.types import InferenceOptions
from classify.engine.ray_engine import (RayEngineError, check_workers, decode_frame, encode_frame, plan_actors, ray_available,
                                        sample_paths)
from classify.targets import predict_folder
from core.errors import OptionError
from tests.conftest import ROOT
from tests.raycluster import _restore_workers, _without_home, batch_gate, wait_until_schedulable

MODELS = "efficientnet_lite0,efficientnet_lite1"
# The fault tests run one model: what they test is the rows kept once through a fault, and each model an
# actor loads is ~3 CPU-seconds more per actor start on this 2-core machine (the suite's budget).
ONE = "efficientnet_lite0"
PROBS = [f"prob_{i}" for i in range(1, 6)]
# One xdist worker runs this whole module (`make test` uses --dist loadgroup): the module's Ray
# instance starts once, not once per worker that stole a test of it (with worksteal on 4 workers the
# module's tests summed to 758 s, against 166 s on one worker; most of it Ray starts and actor loads).
pytestmark = pytest.mark.xdist_group("ray")
needs_ray = pytest.mark.skipif(not ray_available(), reason="ray is not installed (pip install -r requirements.txt)")


# --------------------------------------------------------------------------- no Ray needed
def test_rows_cross_processes_as_arrow_without_pickle_and_bit_for_bit():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"model": ["a", "a", "b"], "image": ["x", "y", "x"], "true_wnid": ["n1", None, "n1"],
                          "prob_1": rng.random(3), "status": ["ok", "failed", "ok"],
                          "reason": [None, "cannot decode", None]})
    frame["features"] = [rng.random(4, dtype=np.float32), None, rng.random(7, dtype=np.float32)]
    classifier = rng.random((3, 7), dtype=np.float32)
    frame["text_classifier"] = [None, None, {"classifier": classifier, "wnids": ("n1", "n2", "n3"), "logit_scale": 100.0}]
    back = decode_frame(encode_frame(frame))
    pd.testing.assert_frame_equal(back[["model", "image", "true_wnid", "prob_1", "status", "reason"]],
                                  frame[["model", "image", "true_wnid", "prob_1", "status", "reason"]])
    assert back["features"][1] is None
    assert back["features"][0].dtype == np.float32 and np.array_equal(back["features"][2], frame["features"][2])
    text = back["text_classifier"][2]
    assert back["text_classifier"][0] is None and text["wnids"] == ("n1", "n2", "n3") and text["logit_scale"] == 100.0
    assert np.array_equal(text["classifier"], classifier)
    assert b"pickle" not in encode_frame(frame)


@pytest.mark.parametrize("options, nodes, expected", [
    (InferenceOptions(), [{"CPU": 16}], (1, 0.0, 16.0)),
    (InferenceOptions(ray_actors=2), [{"CPU": 2}], (2, 0.0, 1.0)),
    (InferenceOptions(), [{"CPU": 64, "GPU": 4}], (4, 1.0, 16.0)),
    (InferenceOptions(ray_gpus_per_actor=0.5), [{"CPU": 16, "GPU": 2}], (4, 0.5, 4.0)),
    (InferenceOptions(ray_gpus_per_actor=0), [{"CPU": 8, "GPU": 2}], (1, 0.0, 8.0)),
    # CPU actors on three 8-CPU nodes: an actor is on one node, so never more than 8 CPUs each
    (InferenceOptions(), [{"CPU": 8}] * 3, (1, 0.0, 8.0)),
    (InferenceOptions(ray_actors=6), [{"CPU": 8}] * 3, (6, 0.0, 4.0)),
    (InferenceOptions(ray_actors=4), [{"CPU": 8}] * 3, (4, 0.0, 4.0)),  # 6 CPUs each would leave one unplaced
    (InferenceOptions(ray_actors=3), [{"CPU": 0}, {"CPU": 8}, {"CPU": 4}], (3, 0.0, 4.0)),
    # a head node without GPUs and two 16-CPU nodes with 2 GPUs each
    (InferenceOptions(), [{"CPU": 4}, {"CPU": 16, "GPU": 2}, {"CPU": 16, "GPU": 2}], (4, 1.0, 8.0)),
])
def test_actors_follow_the_clusters_gpus_else_share_its_cpus(options, nodes, expected):
    plan = plan_actors(options, nodes)
    assert (plan.actors, plan.gpus_per_actor, plan.cpus_per_actor) == expected
    assert plan.batch_size == (64 if plan.gpus_per_actor else 8)


def test_more_gpu_actors_than_gpus_is_refused_in_one_line():
    with pytest.raises(OptionError, match="need 3 GPUs; the Ray cluster has 2"):
        plan_actors(InferenceOptions(ray_actors=3), [{"CPU": 8, "GPU": 2}])


@pytest.mark.parametrize("actors", [3, 99999999999999999999])
def test_more_cpu_actors_than_cpus_is_refused_in_one_line(actors):
    """Second campaign: --ray-actors 99999999999999999999 on a 2-CPU machine planned that many
    1-CPU actors; Ray waited for resources that never come (killed after 60 s)."""
    with pytest.raises(OptionError, match=f"{actors:,} CPU actors need {actors:,} CPUs; the Ray cluster has 2"):
        plan_actors(InferenceOptions(ray_actors=actors), [{"CPU": 2}])


def test_without_ray_the_engine_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayEngineError, match=r"pip install 'ray\[data\]==2.60.0'.*--engine local"):
        predict_folder(_views(tmp_path), "efficientnet_lite0", options=InferenceOptions(engine="ray"))
    with pytest.raises(OptionError, match="engine 'spark': choose one of local, ray"):
        predict_folder(_views(tmp_path), "efficientnet_lite0", options=InferenceOptions(engine="spark"))


def test_the_command_line_takes_the_engine_and_refuses_ray_options_without_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "classify", "--images", str(tmp_path), "--out", str(tmp_path / "o.csv"),
                           "--ray-actors", "2"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 2 and "--ray-actors is for --engine ray" in done.stderr


# --------------------------------------------------------------------------- a local Ray instance
def _views(folder: Path) -> Path:
    """The packaged photographs' 30 views as JPEG files, DIR/<wnid>/<view>.jpg."""
    from core.imageio import load_rgb
    from crawl.sample_photos import SAMPLE_PHOTOS, VIEWS, photo_path

    out = folder / "views"
    if not out.exists():
        for photo in SAMPLE_PHOTOS:
            image = load_rgb(photo_path(photo).read_bytes())
            (out / photo.wnid).mkdir(parents=True)
            for name, view in VIEWS:
                view(image).save(out / photo.wnid / f"{name.replace(' ', '_').replace('%', '')}.jpg", quality=90)
    return out


@pytest.fixture()
def ray_instance(ray_cluster):
    """The ray module, connected to the suite's cluster."""
    import ray

    return ray


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    return _views(tmp_path_factory.mktemp("ray-views"))


@pytest.fixture(scope="module")
def local_table(views):
    table, _ = predict_folder(views, MODELS, options=InferenceOptions(batch_size=4))
    return _sorted(table)


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(["model", "image"]).reset_index(drop=True)


def _only(table: pd.DataFrame, model: str) -> pd.DataFrame:
    return table[table["model"] == model].reset_index(drop=True)


def _assert_same_predictions(table: pd.DataFrame, reference: pd.DataFrame) -> None:
    table = _sorted(table)
    assert not table.duplicated(["model", "image"]).any(), "each (model, image) once"
    assert table[["model", "image"]].equals(reference[["model", "image"]])
    wnids = [c for c in reference.columns if c.startswith("pred_wnid")]
    assert table[wnids].equals(reference[wnids]), "same top-5 wnids for every image and model"
    assert np.abs(table[PROBS].to_numpy() - reference[PROBS].to_numpy()).max() <= 1e-5


@needs_ray
def test_ray_gives_the_local_engines_rows(ray_cluster, views, local_table, tmp_path):
    out = tmp_path / "ray.parquet"
    spread = []
    table, report = predict_folder(views, MODELS, out, InferenceOptions(engine="ray", ray_actors=2, batch_size=4),
                                   _spread(ray_cluster, spread))
    assert spread == [2], "the two actors run on the two worker nodes"
    _assert_same_predictions(table, local_table)
    assert report.engine.startswith("ray (2 actors") and "ray (2 actors" in report.summary()
    assert {m: (r.predicted, r.failed) for m, r in report.models.items()} == {
        "efficientnet_lite0": (30, 0), "efficientnet_lite1": (30, 0)}
    _assert_same_predictions(pd.read_parquet(out), local_table)  # the file written through the same parts
    again, report = predict_folder(views, MODELS, out, InferenceOptions(engine="ray"))
    assert all(r.skipped == 30 and r.predicted == 0 for r in report.models.values()), "a re-run resumes: nothing to do"
    # Issue 22 item 5: the driver stamps the actors' rows with the weights' digest, so a re-run with
    # another model under the same id (here its family overridden) is refused, as with the local engine.
    from classify.models.lookup import resolve_models
    from classify.targets import StoredModelError
    from classify.models.weights import weights_status
    from classify.models.weights import file_sha256

    stored = pd.read_parquet(out)
    for entry in resolve_models(MODELS):
        rows = stored[stored["model"] == entry.id]
        assert set(rows["weights_sha256"]) == {file_sha256(weights_status(entry).path)}
        assert set(rows["family"]) == {"CNN"} and set(rows["class_order"]) == {"label-space"}
    import dataclasses

    lite0, lite1 = resolve_models(MODELS)
    with pytest.raises(StoredModelError, match="holds efficientnet_lite0 predictions as family CNN, not transformer"):
        predict_folder(views, [dataclasses.replace(lite0, family="transformer"), lite1], out,
                       InferenceOptions(engine="ray"))


def _map_worker_nodes() -> dict[str, str]:
    """{actor id: node id} of every Ray Data actor (a MapWorker) that got a worker process, alive or dead, from
    the GCS's actor table (``ray._private.state.actors``: Ray's public ``ray.util.state`` needs the
    dashboard, which the suite's cluster does not start)."""
    from ray._private.state import actors

    # A worker process (Pid) marks an actor that was placed: one Ray never started lists the node it was
    # being leased through (the head's, seen in a review).
    return {actor["ActorID"]: actor["Address"]["NodeID"] for actor in actors().values()
            if "MapWorker" in actor["ActorClassName"] and actor["Pid"] and actor["Address"]["NodeID"].strip("0")}


def _spread(cluster, seen: list, deadline: float = 10.0):
    """A progress callback that records, at the first stored batch, on how many worker nodes the run
    placed its actors. Read from the actor table, not /proc: Ray Data releases an actor pool once it
    has consumed all its inputs ("consumed all inputs", ray/data/_internal/actor_autoscaler), which a
    slow driver's first stored batch can come after; the look at /proc then found no actor (spread [0]
    in 2 of 4 fresh-clone suites, 2026-12-07; a 3 s pause in the callback gave it in 2 runs of 2)."""
    before = set(_map_worker_nodes())
    workers = {node.node_id for node in cluster.worker_nodes}

    def placed() -> set[str]:
        return {node for actor, node in _map_worker_nodes().items() if actor not in before} & workers

    def watch(event):
        if event.done and not seen:
            end = time.monotonic() + deadline  # an actor Ray is still placing has no node yet
            nodes = placed()
            while len(nodes) < 2 and time.monotonic() < end:
                time.sleep(0.1)
                nodes = placed()
            seen.append(len(nodes))
    return watch


@needs_ray
def test_a_worker_killed_mid_run_loses_nothing_and_duplicates_nothing(ray_cluster, views, local_table, tmp_path):
    """The run's actor process killed (SIGKILL) once the first batch is stored, the actor held before its
    next batch (tests.raycluster.batch_gate: without it a slow driver found the actor released, its inputs
    all consumed): Ray restarts it, the batches it held are redone, and every row is stored once, equal to
    the local engine's."""
    from ray._private.state import actors

    before = set(actors())
    killed = []
    gate = batch_gate()

    def kill_the_runs_actor_after_the_first_batch(event):
        if event.done and not killed:
            # This run's actor from the GCS's actor table (a look at /proc could take a previous run's actor
            # still exiting).
            mine = {key: actor for key, actor in actors().items()
                    if key not in before and "MapWorker" in actor["ActorClassName"]}
            alive = [(key, actor["Pid"]) for key, actor in mine.items() if actor["State"] == "ALIVE" and actor["Pid"]]
            assert alive, f"the run's actor is running: {[(a['State'], a['Pid']) for a in mine.values()]}"
            os.kill(alive[0][1], signal.SIGKILL)
            killed.append((alive[0][0], event.done))
            gate.unlink()

    out = tmp_path / "killed.parquet"
    gate.touch()
    try:
        table, report = predict_folder(views, ONE, out, InferenceOptions(engine="ray", batch_size=2),
                                       kill_the_runs_actor_after_the_first_batch)
    finally:
        gate.unlink(missing_ok=True)
    assert killed and killed[0][1] < 30, "the run's actor was killed mid-run, with images still to do"
    assert actors(killed[0][0])["NumRestarts"] >= 1, "Ray restarted the killed actor"
    assert all(r.predicted + r.skipped == 30 and r.failed == 0 for r in report.models.values())
    _assert_same_predictions(table, _only(local_table, ONE))
    parts = pd.concat([pd.read_parquet(p) for p in (tmp_path / ".killed.parquet.parts").rglob("*.parquet")])
    assert len(parts) == 30 and not parts.duplicated(["model", "image"]).any()


@needs_ray
def test_a_killed_driver_resumes_like_the_local_engine(ray_instance, views, local_table, tmp_path):
    out = tmp_path / "driver.parquet"
    parts = tmp_path / ".driver.parquet.parts"
    # The driver joins this test's Ray instance (its job's actors die with it), with one image a batch.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ray_instance.get_runtime_context().gcs_address}
    driver = subprocess.Popen([sys.executable, "-m", "classify", "--images", str(views), "--out", str(out),
                               "--models", ONE, "--engine", "ray", "--batch-size", "1", "--no-progress"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(list(parts.rglob("part-*.parquet"))) < 2:
            assert driver.poll() is None, "the driver ended before it was killed"
            time.sleep(0.2)
    finally:
        # The driver and its local Ray instance, as a closed terminal or a killed job would end them.
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    files = list(parts.rglob("part-*.parquet"))
    assert len(files) >= 2, "the driver stored rows before it was killed"
    stored = pd.concat([pd.read_parquet(p) for p in files])
    assert 0 < len(stored) < 30, "killed mid-run"
    table, report = predict_folder(views, ONE, out, InferenceOptions(engine="ray", batch_size=4))
    assert sum(r.skipped for r in report.models.values()) == len(stored), "what was stored is not computed again"
    _assert_same_predictions(table, _only(local_table, ONE))


@needs_ray
def test_a_node_that_cannot_read_the_images_stops_the_run_before_any_work(ray_instance, views, tmp_path):
    readable = sample_paths([_task(p) for p in sorted(views.rglob("*.jpg"))])
    assert len(readable) == 8
    assert check_workers(readable) == 3, "the head and both worker nodes"
    missing = str(tmp_path / "elsewhere" / "a.jpg")  # as a path only the driver's machine has
    with pytest.raises(RayEngineError, match=r"Ray node .* cannot read .*elsewhere/a.jpg .*same path.*NFS"):
        check_workers(readable + [missing])


@needs_ray
def test_a_node_that_left_before_its_probe_ran_is_not_counted_nor_blamed(ray_instance, views, monkeypatch):
    """A node that left the cluster after ray.nodes() listed it (the GCS lists a dead node as alive
    for a few health checks): its probe is refused as unschedulable, and the run goes on with the
    nodes that are there. Was: "cannot run WildLens ... install it there" for a node that was gone.
    The node here never existed (an id of no node): Ray answers it as it answers a removed one,
    without racing a dying raylet (which can abort Ray 2.60's driver: tests/raycluster.py _settle)."""
    from classify.engine.ray_engine import Probe, finish_probes, start_probes

    readable = sample_paths([_task(p) for p in sorted(views.rglob("*.jpg"))])
    probes = start_probes(readable)
    gone = "ab" * 28
    remote = ray_instance.remote(num_cpus=0, max_retries=0)(lambda: None)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def pinned_to_no_node():
        return remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(gone, soft=False)).remote()

    assert finish_probes(probes + [Probe("192.0.2.9 (node abababab)", gone, pinned_to_no_node())]) == 3, \
        "the three nodes there"
    with pytest.raises(RayEngineError, match=r"^every Ray node this run was planned on left the cluster before it "
                                             r"started \(192\.0\.2\.9 \(node abababab\)\); check 'ray status'"):
        finish_probes([Probe("192.0.2.9 (node abababab)", gone, pinned_to_no_node())])
    # Refused while Ray still lists the node alive (draining, or joining): not skipped; named with Ray's reason.
    import classify.engine.ray_engine as engine

    monkeypatch.setattr(engine, "PROBE_GONE_WAIT", 0.5)  # how long a refused node may take to be listed dead
    there = probes[0]
    with pytest.raises(RayEngineError, match=rf"^Ray node {re.escape(there.node)} refused the image and weights check "
                                             r"\(.*not schedulable.*\): it may be draining or still joining"):
        finish_probes([Probe(there.node, there.node_id, pinned_to_no_node())])


@needs_ray
def test_a_worker_node_removed_mid_run_loses_nothing_and_the_summary_says_so(ray_cluster, views, local_table,
                                                                              tmp_path):
    """A classify run on the cluster that loses a worker node (its raylet, object store and actor
    gone: Cluster.remove_node) after its first batch is stored: every row stored once, equal to the
    local engine's, the run finished on the node left, and the summary names the lost node."""
    removed = []
    gate = batch_gate()  # the actors held before their next batch until the node is gone (see the kill test)

    def remove_a_node_after_the_first_batch(event):
        if event.done and not removed:
            node = next(iter(ray_cluster.worker_nodes))
            removed.append((event.done, node.node_id[:8]))
            ray_cluster.remove_node(node, allow_graceful=False)
            gate.unlink()

    out = tmp_path / "lost.parquet"
    gate.touch()
    try:
        table, report = predict_folder(views, ONE, out, InferenceOptions(engine="ray", ray_actors=2, batch_size=2),
                                       remove_a_node_after_the_first_batch)
    finally:
        gate.unlink(missing_ok=True)
        _restore_workers(ray_cluster)
    assert removed and removed[0][0] < 30, "a node was removed mid-run, with images still to do"
    assert len(report.lost_nodes) == 1 and f"(node {removed[0][1]})" in report.lost_nodes[0]
    assert f"lost Ray node {report.lost_nodes[0]}: unfinished batches redone on the nodes left" in report.summary()
    assert all(r.predicted + r.skipped == 30 and r.failed == 0 for r in report.models.values())
    _assert_same_predictions(table, _only(local_table, ONE))
    parts = pd.concat([pd.read_parquet(p) for p in (tmp_path / ".lost.parquet.parts").rglob("*.parquet")])
    assert len(parts) == 30 and not parts.duplicated(["model", "image"]).any(), "every row stored once"


@needs_ray
def test_a_node_with_another_store_is_refused_by_name_before_any_row(ray_cluster, tmp_path):
    """A node whose Ray was started with another WILDLENS_HOME (another store than the one the run is
    in) cannot read the run's images: the probe refuses the run naming that node and the fix, before
    any row is stored; the other nodes read the run through the driver's store path."""
    from classify.targets import predict_run
    from core.runstore import RunInfo, RunStore
    from crawl.sample_photos import write_sample_images

    run = RunStore().create_run(RunInfo(run_id="shared", label_space="imagenet-1k"))  # in this test's WILDLENS_HOME
    write_sample_images(run)
    other = tmp_path / "another-store"
    other.mkdir()
    with _without_home():
        stranger = ray_cluster.add_node(num_cpus=1, object_store_memory=96 * 1024 ** 2,
                                        env_vars={"WILDLENS_HOME": str(other)})
        ray_cluster.wait_for_nodes()
    wait_until_schedulable(stranger.node_id)
    try:
        with pytest.raises(RayEngineError) as caught:
            predict_run(run, "efficientnet_lite0", InferenceOptions(engine="ray", batch_size=4))
    finally:
        ray_cluster.remove_node(stranger)
    text = str(caught.value)
    home = Path(os.environ["WILDLENS_HOME"]).resolve()
    assert text.startswith(f"Ray node ") and f"(node {stranger.node_id[:8]}) cannot read this run's images: " in text
    assert f"its WildLens store is {other}, not the one this run is in ({home})" in text
    assert f"WILDLENS_HOME={home} ray start --address HEAD:6379" in text and "\n" not in text
    assert not list(run.predictions_dir.rglob("*.parquet")), "nothing stored"


def _task(path: Path):
    from classify.engine.types import ImageTask

    return ImageTask(path.name, str(path), path.parent.name)


@pytest.fixture(scope="module")
def feature_runs(tmp_path_factory):
    """One --features pass of Lite0 and a zero-shot model (the tiny random open_clip test double, given
    as a safetensors checkpoint: plumbing only) over the packaged photographs' 30 views, into a run on
    each engine, the Ray one with two actors; shared by the two tests below. Why one pass: each Ray
    pass starts two actors (~6 CPU-seconds each: PyTorch, timm, the models) on this 2-core machine
    (the suite's budget), and two models in one pass is also what a user's --models a,b --features runs.
    Returns (local run, Ray run, [Lite0's entry, the zero-shot entry], [how many worker nodes the Ray pass's
    actors were placed on], a folder). Everything under a WILDLENS_HOME of its own (the function-scoped one
    is not set up yet for a module's fixture)."""
    import torch
    from safetensors.torch import save_file

    from classify.models.lookup import resolve_models
    from classify.models.registry import get_source
    from classify.models.sources.openclip_source import clip_entry
    from classify.targets import extract_features
    from classify.zeroshot_runs import zero_shot_models
    from core.runstore import RunInfo, RunStore
    from crawl.sample_photos import write_sample_images
    from tests.classify.doubles import register_tiny_clip
    from tests.raycluster import suite_cluster

    cluster = suite_cluster()
    folder = tmp_path_factory.mktemp("feature-runs")
    runs, spread = [], []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WILDLENS_HOME", str(folder / "home"))
        arch = register_tiny_clip()
        torch.manual_seed(0)
        model = get_source(clip_entry(f"clip:{arch}")).create(clip_entry(f"clip:{arch}"), device="cpu")
        checkpoint = folder / "tiny.safetensors"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(checkpoint))
        zero_shot, checkpoints = zero_shot_models([f"clip:{arch}+simple7"], "sense:cat.n.01", None,
                                                  {f"clip:{arch}": str(checkpoint)})
        entries = [resolve_models("efficientnet_lite0")[0], *zero_shot]
        for engine in ("local", "ray"):
            run = RunStore(folder / engine).create_run(RunInfo(run_id="features", label_space="imagenet-1k"))
            write_sample_images(run)
            extract_features(run, entries, InferenceOptions(engine=engine, batch_size=4, checkpoints=checkpoints,
                                                            ray_actors=2 if engine == "ray" else None),
                             _spread(cluster, spread) if engine == "ray" else None)
            runs.append(run)
    return runs[0], runs[1], entries, spread, folder


@needs_ray
def test_features_through_ray_equal_the_local_engines(ray_cluster, feature_runs):
    from core.features import read_features

    local, ray, (lite0, _), spread, folder = feature_runs
    assert spread == [2], "the two actors run on the two worker nodes"
    (local_index, local_vectors), (ray_index, ray_vectors) = (read_features(run, lite0.id) for run in (local, ray))
    order = [list(local_index["image"]).index(image) for image in ray_index["image"]]
    assert sorted(ray_index["image"]) == sorted(local_index["image"]) and len(order) == 30
    assert ray_vectors.shape == (30, 1280) and np.abs(ray_vectors - local_vectors[order]).max() <= 1e-5
    _assert_same_predictions(_only(_sorted(ray.read_predictions()), lite0.id),
                             _only(_sorted(local.read_predictions()), lite0.id))
    # Issue 22 item 5, the Ray engine into a run: the actors' rows record the weights they came
    # from, so the run resumed with another checkpoint is refused before any work (was: the old
    # rows returned as 'already stored' for the new weights).
    from classify.models.weights import file_sha256
    from classify.targets import StoredModelError, predict_run
    from classify.models.weights import weights_status

    for run in (local, ray):
        predictions = run.read_predictions()
        assert set(predictions[predictions["model"] == lite0.id]["weights_sha256"]) == {
            file_sha256(weights_status(lite0).path)}
    other = folder / "other-weights.safetensors"
    other.write_bytes(b"other weights: refused from their digest, before they are read")
    before = ray.read_predictions()
    with pytest.raises(StoredModelError, match="^Run features holds efficientnet_lite0 predictions from other weights"):
        predict_run(ray, "efficientnet_lite0",
                    InferenceOptions(engine="ray", checkpoints={"efficientnet_lite0": str(other)}))
    pd.testing.assert_frame_equal(ray.read_predictions(), before)  # (the run the next test reads: unchanged)


@needs_ray
def test_a_zero_shot_model_runs_on_ray_with_its_text_classifier(ray_cluster, feature_runs):
    """A zero-shot model with --features on both engines (in the pass of :func:`feature_runs`): the same
    rows, embeddings and text classifier."""
    from core.features import read_feature_meta, read_features

    local, ray, (_, zero_shot), spread, _ = feature_runs
    assert spread == [2], "the two actors run on the two worker nodes"
    _assert_same_predictions(_only(_sorted(ray.read_predictions()), zero_shot.id),
                             _only(_sorted(local.read_predictions()), zero_shot.id))
    (li, lv), (ri, rv) = (read_features(run, zero_shot.id) for run in (local, ray))
    lmeta, rmeta = (read_feature_meta(run, zero_shot.id) for run in (local, ray))
    order = [list(li["image"]).index(image) for image in ri["image"]]
    assert sorted(ri["image"]) == sorted(li["image"]) and len(order) == 30
    assert rv.shape == (30, 16) and np.abs(rv - lv[order]).max() <= 1e-5
    assert rmeta["kind"] == "image-embedding" and rmeta["text_classifier"]["wnids"] == lmeta["text_classifier"]["wnids"]
    assert len(rmeta["text_classifier"]["wnids"]) > 1


def test_the_node_probe_names_what_a_node_lacks(tmp_path):
    """What each node runs before the work (no Ray needed to call it): an image it cannot read, a
    model whose weights are not there, with the command that fetches them."""
    from classify.engine.ray_engine import _probe_node
    from classify.models.lookup import resolve_models

    image = tmp_path / "a.jpg"
    image.write_bytes(b"\xff\xd8\xff")
    answer = _probe_node([str(image), str(tmp_path / "gone.jpg")], [(resolve_models("resnet50")[0], None),
                                                                    (resolve_models("efficientnet_lite0")[0], None)],
                         False)
    assert answer["unreadable"] == f"{tmp_path / 'gone.jpg'} (No such file or directory)"
    assert len(answer["weights"]) == 1 and "resnet50" in answer["weights"][0] and "timm.create_model" in answer["weights"][0]


def test_a_fifo_or_a_folder_at_an_images_path_is_unreadable_at_once_to_the_probe_and_the_driver(tmp_path):
    """A hostile check: a FIFO at an image's path held the probe (and the driver's pick of the images to
    probe) until the 300 s deadline, then blamed the node's workers."""
    import threading

    from classify.engine.ray_engine import _probe_node
    from classify.engine.types import ImageTask

    image = tmp_path / "a.jpg"
    image.write_bytes(b"\xff\xd8\xff")
    fifo, folder = tmp_path / "fifo.jpg", tmp_path / "folder.jpg"
    os.mkfifo(fifo)
    folder.mkdir()
    done = {}
    worker = threading.Thread(target=lambda: done.update(
        probe=[_probe_node([str(path)], [], False)["unreadable"] for path in (fifo, folder)],
        picked=sample_paths([ImageTask(p.name, str(p), "n1") for p in (fifo, image, folder)])), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the FIFO held it"
    assert done["probe"] == [f"{fifo} (not a regular file)", f"{folder} (not a regular file)"]
    assert done["picked"] == [str(image)]


def test_store_relative_paths_are_read_under_each_nodes_own_store(tmp_path, monkeypatch):
    """An image in the driver's store travels relative to it; a node reads it under its own
    WILDLENS_HOME when its Ray was started with one, else under the driver's; other paths as they are."""
    import core.raysession as engine  # where the store-relative paths live

    home = tmp_path / "store"
    image = home / "runs" / "r" / "images" / "n1" / "a.jpg"
    portable = engine.portable_path(str(image), home)
    assert portable == "wildlens-home:runs/r/images/n1/a.jpg"
    assert engine.portable_path("/elsewhere/b.jpg", home) == "/elsewhere/b.jpg" and engine.portable_path("", home) == ""
    monkeypatch.setattr(engine, "_NODE_HOME", None)
    assert engine.node_path(portable, engine.node_home(str(home))) == str(image)
    assert os.environ["WILDLENS_HOME"] == str(home), "the node's caches go to the driver's store"
    monkeypatch.setattr(engine, "_NODE_HOME", "/mnt/shared")
    assert engine.node_path(portable, engine.node_home(str(home))) == "/mnt/shared/runs/r/images/n1/a.jpg"
    assert engine.node_path("/elsewhere/b.jpg", Path("/mnt/shared")) == "/elsewhere/b.jpg"
    monkeypatch.setenv("WILDLENS_RAY_LOCAL", "1")  # a local instance's workers: the run's own store wins
    assert engine.node_path(portable, engine.node_home(str(home))) == str(image)
    # Nothing outside the store: a path that climbs out is not store-relative, and a node refuses one that is.
    climbing = str(home / "runs" / ".." / ".." / "etc" / "passwd")
    assert engine.portable_path(climbing, home) == climbing, "outside the store: sent as it is, never store-relative"
    for hostile in ("wildlens-home:../../etc/passwd", "wildlens-home:/etc/passwd", "wildlens-home:runs/../../x",
                    "wildlens-home:"):
        with pytest.raises(engine.RayEngineError, match="is not a path inside the run store"):
            engine.node_path(hostile, home)


def test_the_probe_tells_a_node_without_the_store_or_with_another_one_what_to_do(monkeypatch, tmp_path):
    """What a node's probe answer becomes: a node reading the driver's store path that lacks the run
    is told to mount it; a node with a store of its own elsewhere is told which; a node whose file at
    the same path has another size holds another store's copy (not silently read)."""
    import classify.engine.ray_engine as engine

    class AnsweredRay:
        def wait(self, futures, num_returns, timeout):
            return futures, []

        def get(self, future):
            return future

    monkeypatch.setattr(engine, "_import_ray", lambda: AnsweredRay())
    answer = {"unreadable": "/d/runs/r/images/a.jpg (No such file or directory)", "in_store": True, "home": "/d",
              "weights": []}
    with pytest.raises(RayEngineError, match=r"^Ray node 10\.0\.0\.7 \(node ab12cd34\) cannot read this run's images at "
                                             r"this machine's store path: .*; mount the run store there \(/d\)"):
        engine.finish_probes([engine.Probe("10.0.0.7 (node ab12cd34)", "ab12cd34", answer, "/d")])
    with pytest.raises(RayEngineError, match=r"its WildLens store is /other, not the one this run is in \(/d\)"):
        engine.finish_probes([engine.Probe("10.0.0.7 (node ab12cd34)", "ab12cd34", {**answer, "home": "/other"}, "/d")])
    image = tmp_path / "runs" / "r" / "images" / "a.jpg"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"a stale copy")
    import core.raysession

    monkeypatch.setattr(core.raysession, "_NODE_HOME", None)
    probed = engine._probe_node(["wildlens-home:runs/r/images/a.jpg"], [], False, str(tmp_path), [12])
    assert probed["unreadable"] is None, "the same size: read"
    probed = engine._probe_node(["wildlens-home:runs/r/images/a.jpg"], [], False, str(tmp_path), [4096])
    assert probed["unreadable"] == f"{image} (another file: 12 bytes there, 4,096 on this machine)" and probed["in_store"]


def test_a_batch_lost_with_its_node_goes_back_to_the_nodes_left():
    """When Ray gives up a batch because its node died (it raised ActorUnavailableError with Ray's
    default health checks), the driver's loop hands the lost nodes to the run, which plans the
    images still to do on the nodes left: as many actors as still fit, or one line when none does."""
    import classify.engine.ray_engine as engine

    class Failing:
        def iter_batches(self, **kwargs):
            raise RuntimeError("The actor is temporarily unavailable: RpcError: failed to connect to all addresses")
            yield

    rows = [{"image": "a", "models": "m"}]
    with pytest.raises(engine._NodesLost) as caught:
        engine._store_pass(Failing(), rows, [], {"m": {"a"}}, {}, lambda frame: None, None, "m", {},
                           watch=lambda: ["192.0.2.2 (node 0a1b2c3d)"])
    assert caught.value.names == ["192.0.2.2 (node 0a1b2c3d)"]
    with pytest.raises(RuntimeError, match="temporarily unavailable"):  # no node lost: the failure as it is
        engine._store_pass(Failing(), rows, [], {"m": {"a"}}, {}, lambda frame: None, None, "m", {}, watch=lambda: [])

    class Left:
        def __init__(self, cpus):
            self.cpus = cpus

        def nodes(self):
            return [{"Alive": True, "Resources": {"CPU": c}} for c in self.cpus]

    before = engine.RayPlan(actors=3, gpus_per_actor=0.0, cpus_per_actor=1.0, batch_size=4)
    options = InferenceOptions(engine="ray", ray_actors=3)
    assert engine._layout_left(Left([0, 1, 1]), options, before, ["x"]).actors == 2
    with pytest.raises(RayEngineError, match=r"^Lost Ray node x and no node left can run an actor; every row stored so "
                                             r"far is kept: start nodes"):
        engine._layout_left(Left([0]), options, before, ["x"])


@pytest.fixture()
def torch_threads():
    """Torch's thread count as it was: an actor built in this process sets it to 1."""
    import torch

    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


def test_a_gpu_actor_decodes_jpegs_on_its_device(tmp_path, monkeypatch, torch_threads):
    """The actor itself, called in this process: with the device path on (forced onto the CPU, as
    classify.engine.gpu_decode's tests do), JPEGs decode through it and PNGs in the actor's threads, the
    rows equal the CPU path's, and the batch says which path decoded how many."""
    import json

    from classify.engine import gpu_decode
    from classify.engine.gpu_decode import DecodeChoice
    from classify.engine.ray_engine import PredictActor, _decode_text
    from classify.models.lookup import resolve_models

    torch = torch_threads
    views = _views(tmp_path)
    jpegs = sorted(views.rglob("*.jpg"))[:5]
    png = tmp_path / "n02123045" / "a.png"
    png.parent.mkdir()
    from PIL import Image

    Image.open(jpegs[0]).save(png)
    paths = jpegs + [png]
    batch = {"image": np.array([p.name for p in paths]), "path": np.array([str(p) for p in paths]),
             "true_wnid": np.array([p.parent.name for p in paths]), "error": np.array([""] * len(paths)),
             "models": np.array(["efficientnet_lite0"] * len(paths))}
    entries = resolve_models("efficientnet_lite0")
    geometries = [entries[0].input_config().geometry]
    options = InferenceOptions(device="cpu", backend="torch")

    def rows(actor):
        out = actor(batch)
        return decode_frame(out["frame"][0]).set_index("image").sort_index(), json.loads(out["decode"][0])

    cpu, cpu_decode = rows(PredictActor(entries, geometries, {"efficientnet_lite0": 6}, options, 6, 2))
    assert cpu_decode == {"cpu": 6, "device": 0, "reason": ""}
    assert torch.get_num_threads() == 1  # the actor's one thread per slice; restored by the fixture
    monkeypatch.setattr(gpu_decode, "resolve_decode", lambda option, device: DecodeChoice(True, "decode_jpeg on cpu"))
    device, device_decode = rows(PredictActor(entries, geometries, {"efficientnet_lite0": 6}, options, 6, 1))
    assert device_decode == {"device": 5, "cpu": 1, "reason": "decode_jpeg on cpu"}
    assert (device["pred_wnid"] == cpu["pred_wnid"]).all() and (device["status"] == "ok").all()
    assert (device["prob_1"] - cpu["prob_1"]).abs().max() < 2e-3  # the GPU's float resize (gpu_decode's tests)
    assert _decode_text({"device": 5, "cpu": 1, "reasons": {"decode_jpeg on cpu"}}) == (
        "decode_jpeg on cpu for 5 JPEGs, the actors' CPU threads for 1 other images")


def test_a_workers_user_error_reaches_the_driver_as_its_one_line():
    """Ray Data hands the driver a UserCodeException whose text holds the worker's traceback (the
    text below is what Ray 2.60 printed for an OptionError raised in an actor); the engine raises
    the WildLensError named there again, with its words. Unknown errors stay as they are."""
    from classify.engine.ray_engine import _user_error
    from classify.models.weights import WeightsError

    text = ("ray::MapWorker(MapBatches(PredictActor)).submit() (pid=9872, ip=192.0.2.2)\n"
            '  File "/work/main/classify/pipeline.py", line 401, in _forward\n'
            "    raise WeightsError(\n"
            "classify.models.weights.WeightsError: m outputs (10,) scores, but its label space imagenet-1k has 1000 classes.\n"
            "\nThe above exception was the direct cause of the following exception:\n\n"
            "\x1b[36mray::MapWorker(MapBatches(PredictActor)).submit()\x1b[39m\n"
            "ray.exceptions.UserCodeException: UDF failed to process a data block.")
    found = _user_error(RuntimeError(text))
    assert type(found) is WeightsError and str(found) == "m outputs (10,) scores, but its label space imagenet-1k has 1000 classes."
    assert _user_error(RuntimeError("ValueError: something else")) is None
    inner = OptionError("fix this")
    try:
        raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        assert _user_error(exc) is inner


@pytest.mark.parametrize("address, words", [
    ("127.0.0.1:1", "Cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused); start it with 'ray start --head'"),
    ("ray://127.0.0.1:1", "Cannot reach the Ray cluster at ray://127.0.0.1:1"),
    ("head-node", "--ray-address head-node: write HOST:PORT"),
])
def test_an_unreachable_cluster_is_one_line_at_once(address, words, tmp_path):
    """ray.init retries an address that takes no connection for minutes; the engine checks first."""
    if not ray_available():
        pytest.skip("ray is not installed")
    started = time.monotonic()
    with pytest.raises(RayEngineError) as caught:
        predict_folder(_views(tmp_path), "efficientnet_lite0", options=InferenceOptions(engine="ray", ray_address=address))
    assert str(caught.value).startswith(words) and "\n" not in str(caught.value)
    assert time.monotonic() - started < 30



@pytest.fixture()
def not_ray():
    """A local TCP server that accepts connections but is not Ray: ``not_ray(mode)`` with 'silent'
    (accepts and says nothing) or 'garbage' (answers text); returns its HOST:PORT."""
    import socket
    import threading

    servers, connections = [], []

    def start(mode: str) -> str:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:  # closed at the end of the test
                    return
                connections.append(conn)
                if mode == "garbage":
                    try:
                        conn.sendall(b"SSH-2.0-OpenSSH_9.2 hello, I am not Ray\r\n" * 4)
                    except OSError:
                        pass

        threading.Thread(target=serve, daemon=True).start()
        return f"127.0.0.1:{server.getsockname()[1]}"

    yield start
    for sock in servers + connections:
        sock.close()


# A deadline of 1 s for the silent server, which waits it out (3 s: 2 s more of the suite's time each), and
# 3 s for the one that answers at once, so a loaded machine cannot turn its answer into a missed deadline.
@pytest.mark.parametrize("mode, deadline, words", [
    ("silent", 1, "accepts connections but did not answer as a Ray cluster within 1 s"),
    ("garbage", 3, "answers, but not as a Ray cluster"),
])
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_that_does_not_speak_ray_is_one_line_within_the_join_deadline(mode, deadline, words, scheme, not_ray,
                                                                                   tmp_path, monkeypatch):
    """Issue 22 item 19: a server that accepts TCP but is not Ray (silent, or answering garbage)
    kept ray.init waiting past 300 s; joining a cluster has one deadline (--ray-join-timeout,
    30 s by default), then one line. ray:// is checked the same way (Ray Client's server is gRPC
    too), here with Ray Client reported present so the check itself is what answers."""
    if not ray_available():
        pytest.skip("ray is not installed")
    import core.raysession as engine  # where the Ray session lives

    monkeypatch.setattr(engine, "ray_client_available", lambda: True)
    address = scheme + not_ray(mode)
    started = time.monotonic()
    with pytest.raises(RayEngineError) as caught:
        predict_folder(_views(tmp_path), "efficientnet_lite0",
                       options=InferenceOptions(engine="ray", ray_address=address, ray_join_timeout=deadline))
    message = str(caught.value)
    assert message.startswith(f"--ray-address {address} {words}"), message
    assert "\n" not in message and "--ray-join-timeout" in message
    assert time.monotonic() - started < 15


def test_the_join_deadline_is_an_option_of_the_command_line(not_ray, tmp_path):
    """The same through the command line, in a fresh process: exit 2 and one line, in time."""
    if not ray_available():
        pytest.skip("ray is not installed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WILDLENS_HOME": str(tmp_path / "home")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "classify", "--images", str(_views(tmp_path)), "--out",
                           str(tmp_path / "o.csv"), "--engine", "ray", "--ray-address", not_ray("silent"),
                           "--ray-join-timeout", "1", "--no-progress"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer as a Ray cluster within 1 s" in lines[0], done.stderr[-2000:]
    assert time.monotonic() - started < 60
    assert not (tmp_path / "o.csv").exists()


def test_a_ray_client_address_without_ray_client_names_the_install_command(not_ray, tmp_path, monkeypatch):
    """Issue 22 item 9: ray://HOST:PORT (listed in the README) raised Ray's ValueError, a traceback,
    where the ray[client] extra (grpcio) is not installed; now one line with the command."""
    if not ray_available():
        pytest.skip("ray is not installed")
    import core.raysession as engine  # where the Ray session lives

    monkeypatch.setattr(engine, "ray_client_available", lambda: False)
    address = "ray://" + not_ray("silent")
    with pytest.raises(RayEngineError) as caught:
        predict_folder(_views(tmp_path), "efficientnet_lite0", options=InferenceOptions(engine="ray", ray_address=address))
    message = str(caught.value)
    assert message.startswith(f"--ray-address {address}: a ray:// address joins through Ray Client"), message
    assert "pip install 'ray[client]==" in message and "\n" not in message


@needs_ray
def test_a_real_ray_cluster_passes_the_protocol_check(ray_instance):
    """The check answers 'Ray' for the shared test instance's GCS (gRPC's HTTP/2 greeting)."""
    from classify.engine.ray_engine import _check_reachable

    started = time.monotonic()
    _check_reachable(ray_instance.get_runtime_context().gcs_address, time.monotonic() + 10)
    assert time.monotonic() - started < 5

@needs_ray
def test_ray_sessions_upload_no_usage_statistics(monkeypatch):
    """Ray uploads usage statistics by default; WildLens is offline by default, so ray_session
    turns that off before it starts or joins Ray, unless the user said otherwise."""
    import core.raysession as engine  # where the Ray session lives

    monkeypatch.delenv("RAY_USAGE_STATS_ENABLED", raising=False)
    monkeypatch.setattr(engine, "_ready", lambda ray, asked, *deadline: "stub")
    with engine.ray_session(None):
        assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0"
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "1")
    with engine.ray_session(None):
        assert os.environ["RAY_USAGE_STATS_ENABLED"] == "1"


@pytest.fixture(scope="module")
def server_with_ray(tmp_path_factory):
    """The dashboard's case, in a fresh process: Ray's local instance started through ray_session
    from a thread that ends (Streamlit runs each rerun in a new thread), then used; the process
    waits for SIGTERM as a server does (its handler exits, as Streamlit's does). One process for
    the two tests below: each local instance costs ~10 CPU-seconds to start here."""
    script = (
        "import signal, sys, threading, time, ray\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "from core.raysession import ray_session\n"
        "def start():\n"
        "    with ray_session(None) as where: print(where, flush=True)\n"
        "t = threading.Thread(target=start); t.start(); t.join()\n"
        "time.sleep(3)\n"
        "print(ray.get(ray.remote(lambda: 41 + 1).remote(), timeout=60), flush=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "",
           "WILDLENS_HOME": str(tmp_path_factory.mktemp("server-home"))}
    server = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (not lines or lines[-1] != "ready"):
            line = server.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        yield server, lines
    finally:
        if server.poll() is None or _group(server.pid):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


@needs_ray
def test_a_local_instance_started_from_a_thread_that_ends_lives_on(server_with_ray):
    """A server runs each request in a new thread (Streamlit's reruns); Ray's local instance dies
    with the thread that started it (PR_SET_PDEATHSIG), so the engine starts it in a lasting one:
    started from a thread that ended, it still answers."""
    _, lines = server_with_ray
    assert lines == ["a local Ray instance", "42", "ready"]


@needs_ray
def test_a_server_stopped_with_sigterm_leaves_no_ray_process(server_with_ray):
    """Then the server stopped with SIGTERM. Ray's own exit left its dashboard and runtime-env agents
    behind (they ignore SIGTERM), and a shutdown from the main thread hung once the starting thread
    was gone; the engine stops what it started."""
    server, lines = server_with_ray
    assert lines[-1:] == ["ready"]
    assert len(_group(server.pid)) > 1, "Ray's processes run in the server's process group"
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    deadline = time.monotonic() + 20
    while _group(server.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _group(server.pid) == [], "no Ray process left behind"


def _group(pgid: int) -> list[str]:
    """Command names of the live processes in process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append((entry / "comm").read_text().strip())
    return found


@needs_ray
@pytest.mark.parametrize("device, words", [
    ("cuda", "--device cuda with --engine ray, but the Ray cluster has no GPU; use --device auto or cpu."),
    ("cuda:1", "--device cuda:1 with --engine ray: use auto, cpu or cuda"),
])
def test_the_device_is_the_actors_not_the_drivers(ray_instance, views, device, words, tmp_path, capsys):
    """With the Ray engine --device speaks of the actors (the driver may have no GPU while the
    cluster has many): the command line does not ask the driver's PyTorch for it. The command line's main
    in this process, whose Ray connection (the suite's cluster) it reuses: a fresh process cost ~3 CPU-seconds
    each. Joining through RAY_ADDRESS is the killed-driver test's (a subprocess)."""
    from classify.cli import main

    code = main(["--images", str(views), "--out", str(tmp_path / "o.csv"), "--engine", "ray", "--device", device,
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and f"error: {words}" in err, err[-1500:]
    assert not (tmp_path / "o.csv").exists()


def test_a_ray_init_that_does_not_return_ends_at_the_join_deadline():
    """The last part of the deadline: ray.init itself (here one that never returns) is waited for
    until the deadline, then one line; the next call is not queued behind the stuck one."""
    import threading

    import core.raysession as engine  # where the Ray session lives

    release = threading.Event()

    class StuckRay:
        def init(self, **kwargs):
            release.wait(60)

    started = time.monotonic()
    try:
        with pytest.raises(RayEngineError, match=r"^--ray-address 10\.0\.0\.1:6379: joining the Ray cluster did not "
                                                 r"finish within the join deadline \(--ray-join-timeout\)"):
            engine._join_lasting(StuckRay(), "10.0.0.1:6379", time.monotonic() + 1)
        assert time.monotonic() - started < 10
        assert engine._LastingThread().call(lambda: 42, timeout=5) == 42
        assert engine._RAY_THREAD is None, "a fresh lasting thread serves the next call"
    finally:
        release.set()


def test_a_join_that_token_authentication_refuses_names_ray_auth_mode(tmp_path, monkeypatch):
    """Ray 2.60 turns token authentication on for a cluster started where ~/.ray/auth_token exists; a
    driver without RAY_AUTH_MODE=token was refused with log lines only: the join's one line says so."""
    import core.raysession as session

    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert session._auth_hint() == "", "no token file: nothing to say"
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("token")
    assert session._auth_hint().endswith("set RAY_AUTH_MODE=token")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert session._auth_hint() == ""
