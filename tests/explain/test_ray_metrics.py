"""The metric tables on Ray Data (explain.ray_metrics): each chunk of models a task on the suite's
multi-node cluster (tests/raycluster.py), the same tables as the local streamed path bit for bit."""
from __future__ import annotations

import pandas as pd
import pytest

from core.parts import PredictionParts
from core.runstore import RunInfo, RunStore
from explain.streaming import stream_metric_tables
from explain.uncertainty import IntervalOptions
from tests.explain.test_streaming import WNIDS, _assert_equal, _predictions

pytestmark = pytest.mark.xdist_group("ray")  # the cluster starts once, on the worker of the Ray tests
CI = IntervalOptions(resamples=200)


def test_tables_on_ray_equal_the_local_tables_bit_for_bit(ray_cluster):
    from core.curation import record
    from explain.ray_metrics import ray_metric_tables

    run = RunStore().create_run(RunInfo(run_id="on-ray", label_space="imagenet-1k"))  # in the driver's store
    PredictionParts(run.predictions_dir).append(_predictions(["alpha", "beta", "gamma"], 80, seed=7))
    done = []
    on_ray, _ = ray_metric_tables(run, ci=CI, chunk_rows=1, progress=lambda i, n: done.append(n))
    _assert_equal(on_ray, stream_metric_tables(run, ci=CI, cache_dir=False)[0])
    assert done == [3, 3, 3], "one task per model: three chunks"
    first = run.read_predictions().iloc[0]
    record(run, "relabel", [str(first["image"])], next(w for w in WNIDS if w != first["true_wnid"]))
    record(run, "exclude", ["n/img-002.jpg"])
    curated, change = ray_metric_tables(run, "curated", ci=CI, chunk_rows=1)
    local, local_change = stream_metric_tables(run, "curated", ci=CI, cache_dir=False)
    _assert_equal(curated, local)
    assert change == local_change and change.excluded_images == 1 and change.relabelled_rows == 3
    # A part a node cannot read (here: written by a newer WildLens) is the node's one line, not Ray's traceback.
    import pyarrow.parquet as pq

    from core.runstore import StoreError

    part = next((run.predictions_dir / "beta").glob("part-*.parquet"))
    table = pq.read_table(part)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"wildlens.schema_version": b"999"}), part)
    with pytest.raises(StoreError) as caught:
        ray_metric_tables(run, ci=CI, chunk_rows=1)
    assert "was written by a newer WildLens (schema 999" in str(caught.value) and "\n" not in str(caught.value)


def test_the_command_line_takes_the_engine_and_refuses_it_without_a_run(ray_cluster, capsys, tmp_path):
    from explain.cli import main

    run = RunStore().create_run(RunInfo(run_id="cli-ray", label_space="imagenet-1k"))
    PredictionParts(run.predictions_dir).append(_predictions(["alpha", "beta"], 40, seed=2))
    assert main(["metrics", "--run", "cli-ray", "--engine", "ray", "--resamples", "200", "--out",
                 str(tmp_path / "out")]) == 0
    on_ray = pd.read_csv(tmp_path / "out" / "per_class.csv")
    assert main(["metrics", "--run", "cli-ray", "--resamples", "200", "--out", str(tmp_path / "here")]) == 0
    pd.testing.assert_frame_equal(on_ray, pd.read_csv(tmp_path / "here" / "per_class.csv"))
    capsys.readouterr()
    assert main(["metrics", str(tmp_path / "p.csv"), "--engine", "ray"]) == 2
    assert "--engine ray computes a stored run's tables on Ray: give --run RUN_ID." in capsys.readouterr().err
