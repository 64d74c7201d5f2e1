"""Metric tables streamed a chunk of models at a time (explain.streaming) equal the in-memory tables,
bit for bit, intervals included; a model's intervals do not depend on the other models."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.parts import PredictionParts
from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, conform
from explain.metrics import compute_metric_tables
from explain.streaming import model_chunks, stream_metric_tables
from explain.uncertainty import IntervalOptions

CI = IntervalOptions(resamples=200)  # fewer than the default 2000: the same code, a faster test
WNIDS = ["n02123045", "n02123159", "n02123394", "n02123597", "n02124075", "n02125311", "n02127052", "n02129604",
         "n02129165", "n02128385", "n02128757", "n02128925", "n02085620", "n02085782", "n02086240", "n02087046"]


def _predictions(models: list[str], images: int, seed: int = 0) -> pd.DataFrame:
    """Each model's top-5 over ``images`` images of the 16 classes above (mistakes mostly among cats)."""
    rng = np.random.default_rng(seed)
    wnids = np.array(WNIDS)
    true = rng.integers(0, len(wnids), images)
    frames = []
    for m, model in enumerate(models):
        correct = rng.random(images) < 0.5 + 0.1 * m
        pred = np.where(correct, true, rng.integers(0, len(wnids), images))
        order = np.argsort(rng.random((images, len(wnids))), axis=1)
        order = order[order != pred[:, None]].reshape(images, -1)  # top-5 names five different classes
        top = np.column_stack([pred, order[:, :4]])
        probs = np.sort(rng.dirichlet(np.ones(6), images)[:, :5], axis=1)[:, ::-1]
        frames.append(pd.DataFrame({
            "model": model, "image": [f"n/img-{i:03d}.jpg" for i in range(images)], "true_wnid": wnids[true],
            **{("pred_wnid" if k == 1 else f"pred_wnid_{k}"): wnids[top[:, k - 1]] for k in range(1, 6)},
            **{f"prob_{k}": probs[:, k - 1] for k in range(1, 6)},
            "label_space": "imagenet-1k", "status": np.where(rng.random(images) < 0.02, "failed", "ok")}))
    return conform(pd.concat(frames, ignore_index=True), PREDICTION_SCHEMA, table="predictions", extra="drop")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = RunStore(tmp_path_factory.mktemp("streamed")).create_run(RunInfo(run_id="many", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha", "beta", "gamma/v2", "delta"], 120))
    return run


@pytest.fixture(scope="module")
def in_memory(run):
    return compute_metric_tables(run.usable_predictions(), ci=CI, cache_dir=False)


def _assert_equal(a, b) -> None:
    for name in ("per_model", "per_class", "confusions"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


@pytest.mark.parametrize("chunk_rows", [1, 250, 10 ** 9])
def test_streamed_tables_equal_the_in_memory_tables_bit_for_bit(run, in_memory, chunk_rows):
    chunks = model_chunks(run, chunk_rows)
    assert len(chunks) == {1: 4, 250: 2, 10 ** 9: 1}[chunk_rows]
    done = []
    streamed, change = stream_metric_tables(run, ci=CI, cache_dir=False, chunk_rows=chunk_rows,
                                            progress=lambda i, n: done.append((i, n)))
    _assert_equal(streamed, in_memory)
    assert done == [(i, len(chunks)) for i in range(1, len(chunks) + 1)] and not change.any
    assert in_memory.per_model["accuracy_ci_low"].notna().all(), "the intervals are there to compare"


def test_a_models_intervals_do_not_depend_on_the_other_models(run, in_memory):
    """Each model's bootstrap draws its own streams (keyed by its id): alone, its rows are its rows
    among the others', bounds included; so adding a model to a run moves no other model's bounds."""
    alone = compute_metric_tables(run.read_predictions(["beta"]), ci=CI, cache_dir=False)
    for name in ("per_model", "per_class", "confusions"):
        table = getattr(in_memory, name)
        pd.testing.assert_frame_equal(getattr(alone, name), table[table["model"] == "beta"].reset_index(drop=True),
                                      check_exact=True)


def test_the_curated_view_streams_too_and_counts_each_image_once(tmp_path):
    """Relabels and exclusions applied chunk by chunk give the in-memory curated tables, and what
    changed counts an image once however many models (chunks) saw it."""
    from core.curation import read_curation, record
    from explain.curation_view import CURATED, view_predictions

    run = RunStore(tmp_path).create_run(RunInfo(run_id="curated", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha", "beta", "gamma"], 40, seed=3))
    stored = run.read_predictions()
    first = stored[stored["model"] == "alpha"].iloc[0]
    new_truth = next(w for w in WNIDS if w != first["true_wnid"])
    record(run, "relabel", [str(first["image"])], new_truth)
    record(run, "exclude", ["n/img-005.jpg", "n/img-006.jpg"])
    rows, change = view_predictions(run, CURATED)
    expected = compute_metric_tables(rows, ci=CI, cache_dir=False)
    streamed, streamed_change = stream_metric_tables(run, CURATED, ci=CI, cache_dir=False, chunk_rows=1)
    _assert_equal(streamed, expected)
    assert streamed_change == change and change.relabelled_images == 1 and change.excluded_images == 2
    assert change.relabelled_rows == 3 and read_curation(run).relabels


def test_a_run_without_predictions_streams_to_empty_tables(tmp_path):
    run = RunStore(tmp_path).create_run(RunInfo(run_id="empty", label_space="imagenet-1k"))
    streamed, _ = stream_metric_tables(run, ci=CI, cache_dir=False)
    empty = compute_metric_tables(run.usable_predictions(), ci=CI, cache_dir=False)
    _assert_equal(streamed, empty)


def test_a_model_whose_rows_sit_in_two_chunks_is_refused_not_counted_twice(tmp_path):
    """A copy of a model's folder (alpha.bak beside alpha) read in another chunk would make two rows of
    one model: one line naming both folders; in one chunk the rows count once, as in memory."""
    import shutil

    from core.runstore import StoreError

    run = RunStore(tmp_path).create_run(RunInfo(run_id="copied", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha", "beta"], 30, seed=5))
    shutil.copytree(run.predictions_dir / "alpha", run.predictions_dir / "alpha.bak")
    with pytest.raises(StoreError, match=r"^Model alpha's predictions are in more than one folder of the run \(alpha "
                                         r"and alpha\.bak\): move the copy out of .*predictions, then run again\.$"):
        stream_metric_tables(run, ci=None, cache_dir=False, chunk_rows=1)
    whole, _ = stream_metric_tables(run, ci=None, cache_dir=False)
    _assert_equal(whole, compute_metric_tables(run.usable_predictions(), ci=None, cache_dir=False))


def test_a_part_that_is_a_dangling_link_is_named(tmp_path):
    from core.runstore import StoreError
    from explain.streaming import part_rows

    run = RunStore(tmp_path).create_run(RunInfo(run_id="dangling", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha"], 10, seed=6))
    link = run.predictions_dir / "alpha" / "part-20261205000000000000-abcdef.parquet"
    link.symlink_to(tmp_path / "gone.parquet")
    # A part is never a link (core.tables.open_table_file(follow_links=False)): named as one, dangling or not.
    with pytest.raises(StoreError, match=r"part-20261205000000000000-abcdef\.parquet is a symbolic link"):
        part_rows(run)


def test_a_node_that_sees_another_store_is_refused_by_the_chunk_task(tmp_path, monkeypatch):
    """What each Ray Data task checks first (explain.ray_metrics, called here in this process): the
    chunk's folders hold the rows the driver counted; a node whose store lacks them says so, by name."""
    import core.raysession
    from core.raysession import RayEngineError, portable_path
    from explain.ray_metrics import _chunk_tables
    from explain.streaming import part_rows

    home = tmp_path / "store"
    run = RunStore(home).create_run(RunInfo(run_id="shared", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha"], 10, seed=8))
    row = {"index": 0, "folders": ["alpha"], "rows": list(part_rows(run).values())}
    kwargs = dict(driver_home=str(home.resolve()), predictions=portable_path(str(run.predictions_dir.resolve()),
                                                                           home.resolve()),
                  usable=None, view="raw", curation=None, confusion_top_k=3, ci=None, cache_dir=False)
    monkeypatch.setattr(core.raysession, "_NODE_HOME", None)
    assert _chunk_tables(row, **kwargs)["index"] == 0
    monkeypatch.setattr(core.raysession, "_NODE_HOME", str(tmp_path / "elsewhere"))
    with pytest.raises(RayEngineError, match=r"cannot read this run's predictions: .*elsewhere/runs/shared/predictions/"
                                             r"alpha \(no such folder\); its WildLens store is .*elsewhere"):
        _chunk_tables(row, **kwargs)

