"""`make test`'s scheduling: tests marked ``xdist_group`` run on one worker (pytest-xdist's loadgroup).

The Ray module relies on it to start one Ray instance for the suite; with pytest 9.2 and xdist 3.8
the group was silently ignored (tests/conftest.py ``honour_xdist_groups`` says why). This runs a small
suite of its own on two workers, as `make test` does, and reads where each test ran."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CONFTEST = """
from tests.conftest import honour_xdist_groups


def pytest_collection_modifyitems(config, items):
    honour_xdist_groups(config, items)
"""

TESTS = """
import os
import time
from pathlib import Path

import pytest


def _record(name):
    Path(os.environ["WHERE"], name).write_text(os.environ.get("PYTEST_XDIST_WORKER", "none"))
    time.sleep(0.05)  # long enough for the other worker to ask for work


@pytest.mark.parametrize("n", range(8))
@pytest.mark.xdist_group("together")
def test_grouped(n):
    _record(f"grouped-{n}")


@pytest.mark.parametrize("n", range(8))
def test_free(n):
    _record(f"free-{n}")
"""


# long: 5-6 s (a suite of its own on two workers). Collected last (tests/wildlens), it ran alone at the end of the
# suite while the other worker had finished: 7 s of one core idle (a per-test timeline, 2026-12-08).
@pytest.mark.long
def test_an_xdist_group_runs_on_one_worker_under_loadgroup(tmp_path):
    suite, where = tmp_path / "suite", tmp_path / "where"
    suite.mkdir()
    where.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_groups.py").write_text(TESTS)
    (suite / "pytest.ini").write_text("[pytest]\n")  # not the project's configuration
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WHERE": str(where)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", str(suite)], capture_output=True, text=True, cwd=suite, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    grouped = {path.read_text() for path in where.glob("grouped-*")}
    everything = {path.read_text() for path in where.iterdir()}
    assert len(list(where.glob("grouped-*"))) == 8 and len(grouped) == 1, grouped
    assert everything <= {"gw0", "gw1"}, everything
