"""Issue 22 item 6: deleting a run while `explain metrics --run` refreshes its tables left
runs/<id>/metrics/ behind (the writer made the folder again), after which import said "Run r
already exists" and everything else "No run 'r'". The refresh now writes under the run's lock: a
delete before the write wins (nothing is written, the refresh says so), a delete during the write
is refused (the run is in use)."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest

from core.locking import FolderBusy
from core.runstore import PREDICTION_SCHEMA, RunInfo, RunStore, conform
from explain import artefact
from core.errors import WildLensError
from explain.artefact import ensure_metrics, write_metrics
from tests.conftest import ROOT

CATS = ["n02123045", "n02123159", "n02123394", "n02124075"]


def _make_run(store: RunStore, run_id: str = "r"):
    run = store.create_run(RunInfo(run_id=run_id, wnids=CATS))
    true = np.repeat(CATS, 3)
    run.append_predictions(conform(pd.DataFrame({
        "model": "m", "image": [f"{i}.jpg" for i in range(len(true))], "true_wnid": true,
        "pred_wnid": np.roll(true, 1), "label_space": "imagenet-1k", "status": "ok"}), PREDICTION_SCHEMA))
    return run


def _gone(store: RunStore, run_id: str = "r") -> None:
    assert not (store.runs_dir / run_id).exists(), list((store.runs_dir / run_id).rglob("*"))
    assert [i.run_id for i in store.list_runs()] == []
    store.create_run(RunInfo(run_id=run_id))  # the id is free again (was: "Run r already exists")


def test_a_delete_while_the_tables_are_computed_leaves_nothing(monkeypatch):
    store = RunStore()
    run = _make_run(store)
    real = artefact.stream_metric_tables

    def deleted_meanwhile(*args, **kwargs):
        tables = real(*args, **kwargs)
        store.delete_run("r")  # the Runs page's delete, between the read and the write
        return tables

    monkeypatch.setattr(artefact, "stream_metric_tables", deleted_meanwhile)
    # WildLensError, not artefact.RunDeleted, so that on the unfixed code this fails by its assertion
    # (nothing raised, runs/r/metrics/ made again), not by an import.
    with pytest.raises(WildLensError, match="Run r was deleted while its metrics were computed; nothing was written") \
            as caught:
        ensure_metrics(run)
    assert type(caught.value).__name__ == "RunDeleted"
    _gone(store)


def test_a_delete_during_the_write_is_refused_and_the_run_stays(monkeypatch):
    store = RunStore()
    run = _make_run(store)
    tables = ensure_metrics(run, store=False).tables
    real = artefact.write_bytes_atomic
    refused = []

    def delete_between_tables(target, data):
        real(target, data)
        with pytest.raises(FolderBusy, match="Run r is in use"):
            store.delete_run("r")
        refused.append(target.name)

    monkeypatch.setattr(artefact, "write_bytes_atomic", delete_between_tables)
    write_metrics(run, tables, artefact.current_fingerprint(run))
    assert refused and store.open_run("r").run_id == "r"
    monkeypatch.undo()
    assert artefact.read_stored_metrics(run) is not None
    store.delete_run("r")  # once the refresh is done
    _gone(store)


_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import explain.artefact as artefact
    from explain.cli import main
    real = artefact.stream_metric_tables
    def slow(*args, **kwargs):
        tables = real(*args, **kwargs)
        Path(sys.argv[1]).write_text("computed")
        time.sleep(4)  # the parent deletes the run now
        return tables
    artefact.stream_metric_tables = slow
    sys.exit(main(["metrics", "--run", "r"]))
""")


@pytest.mark.long
def test_two_processes_delete_during_explain_metrics_run(tmp_path):
    home = tmp_path / "home"
    store = RunStore(home)
    _make_run(store)
    flag = tmp_path / "computed"
    env = {**os.environ, "WILDLENS_HOME": str(home)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(flag)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.05)
        store.delete_run("r")
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 2, (out, err)
    assert err.strip().splitlines()[-1] == ("error: Run r was deleted while its metrics were computed; nothing was "
                                           "written.")
    _gone(store)



def test_a_run_whose_lock_cannot_be_made_still_gets_its_tables(monkeypatch):
    """A read-only run folder (the lock file cannot be created): the tables, and why they are not stored."""
    from core import locking

    store = RunStore()
    run = _make_run(store)
    real_open = os.open

    def read_only(path, flags, *args):
        if str(path).endswith(locking.PRESENCE_LOCK_NAME):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(locking.os, "open", read_only)
    result = ensure_metrics(run)
    assert result.recomputed and not result.stored
    assert "cannot write the metrics of run r" in result.store_error and "Permission denied" in result.store_error
