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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``long`` first, the rest in their order (a stable sort). Why: `make test`
    schedules with pytest-xdist's loadgroup, which hands out work in collection order after the
    groups, so a 100-second browser test collected last (tests/pages) could run alone at the end
    while the other worker had nothing left (longest-processing-time-first scheduling)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Each test gets its own WILDLENS_HOME so runs never touch ~/.wildlens."""
    monkeypatch.setenv("WILDLENS_HOME", str(tmp_path_factory.mktemp("wildlens_home")))
