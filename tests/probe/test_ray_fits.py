"""Probe sweeps on Ray (probe.ray_fits): each (model, N, seed, variant) fit a Ray task on the suite's
cluster (tests/raycluster.py), the same tables as the local sweep bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from core.features import feature_dir
from core.runstore import write_json_atomic
from probe.artefact import run_probes
from probe.cli import main
from tests.probe.synthetic import blobs, make_run

pytestmark = pytest.mark.xdist_group("ray")  # the cluster starts once, on the worker of the Ray tests


def test_a_sweep_on_ray_equals_the_local_sweep_bit_for_bit(ray_cluster):
    """Both variants (the plain probe and the language-initialised one, from a recorded text
    classifier), three N, two seeds: every fit a Ray task, the tables equal to the last bit."""
    features, labels = blobs([9, 7, 8, 6], dim=16, seed=3)
    run, _ = make_run(features, labels, run_id="ray-probes", kind="image-embedding")
    classes = sorted(set(labels))
    centres = np.stack([features[labels == c].mean(axis=0) for c in classes])
    folder = feature_dir(run, "synthnet")
    np.save(folder / "text.npy", (centres / np.linalg.norm(centres, axis=1, keepdims=True)).T.astype(np.float32))
    meta = json.loads((folder / "meta.json").read_text())
    write_json_atomic(folder / "meta.json", {**meta, "text_classifier": {"path": "text.npy", "wnids": classes,
                                                                         "logit_scale": 100.0}})
    shots, seeds = [1, 2, 4], [22, 37]
    from probe.ray_fits import ray_fits

    local = run_probes(run, ["synthnet"], shots, seeds)
    done = []
    on_ray = run_probes(run, ["synthnet"], shots, seeds, progress=lambda d, t, m: done.append((d, t)),
                        fits=ray_fits())
    for a, b in zip(local, on_ray):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert len(local[0]) == 13 and set(local[0]["variant"]) == {"linear", "language-init"}
    assert done == [(i, 13) for i in range(1, 14)], "progress in the jobs' order"


def test_the_command_line_runs_the_sweep_on_ray_and_refuses_what_does_not_fit(ray_cluster, capsys):
    features, labels = blobs([6, 6, 6], dim=8, seed=5)
    make_run(features, labels, run_id="ray-cli")  # (run, files)
    assert main(["--run", "ray-cli", "--models", "synthnet", "--shots", "1,2", "--seeds", "22", "--engine", "ray"]) == 0
    out = capsys.readouterr().out
    assert "synthnet\tlinear\tN=2\tseeds=1" in out and "probes/results.parquet" in out
    assert main(["--run", "ray-cli", "--models", "synthnet", "--ray-address", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.strip() == "error: --ray-address is for --engine ray; add --engine ray or drop it."
    assert main(["--run", "ray-cli", "--models", "synthnet", "--label-issues", "--engine", "ray"]) == 2
    assert "--label-issues runs in this process" in capsys.readouterr().err
    assert main(["--run", "ray-cli", "--models", "synthnet", "--engine", "ray", "--ray-address", ""]) == 2
    assert capsys.readouterr().err.startswith("error: --ray-address is empty: give HOST:PORT")
    assert main(["--run", "ray-cli", "--models", "synthnet", "--ray-join-timeout", "5"]) == 2
    assert "--ray-join-timeout is for --engine ray" in capsys.readouterr().err
