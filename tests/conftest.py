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


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Each test gets its own WILDLENS_HOME so runs never touch ~/.wildlens."""
    monkeypatch.setenv("WILDLENS_HOME", str(tmp_path_factory.mktemp("wildlens_home")))
