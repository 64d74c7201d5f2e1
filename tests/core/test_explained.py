"""core.explained: stored explanations are read only while fresh and as written; the fingerprint
claims the bytes its own call wrote; special files and linked folders are never read or written
through."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from core.explained import (ERROR_TYPES_CODE_VERSION, EXPLAINED_SCHEMA, RAW, inputs_fingerprint, read_explained,
                            read_label_issues, write_explained)
from core.runstore import RunStore, StoreError

VERSIONS = {"error_types": ERROR_TYPES_CODE_VERSION}


def _rows(kind: str) -> pd.DataFrame:
    return pd.DataFrame({"model": ["m"], "image": ["a.jpg"], "true_wnid": ["n02123045"], "pred_wnid": ["n02123159"],
                         "prob_1": [0.5], "correct": [False], "in_label_space": [True], "relation": ["sibling"],
                         "severity": [1], "error_type": [kind], "error_reason": ["why"]})[list(EXPLAINED_SCHEMA)]


@pytest.fixture
def run():
    return RunStore().create_run(run_id="explained")


def test_a_write_claims_its_own_bytes(run, monkeypatch):
    """Another writer's table landing between this call's write and its fingerprint is not claimed
    with this call's fingerprint (code review: a stale table read back as fresh)."""
    import core.explained as explained

    real = explained.write_bytes_atomic

    def then_another_writer(path, data):
        real(path, data)
        real(path, explained.table_to_parquet_bytes(_rows("model-failure"), EXPLAINED_SCHEMA))

    monkeypatch.setattr(explained, "write_bytes_atomic", then_another_writer)
    write_explained(run, RAW, _rows("label"), inputs_fingerprint(run, RAW, VERSIONS))
    assert read_explained(run, RAW, VERSIONS) is None  # what is there is not what was claimed: stale
    monkeypatch.setattr(explained, "write_bytes_atomic", real)
    write_explained(run, RAW, _rows("label"), inputs_fingerprint(run, RAW, VERSIONS))
    assert read_explained(run, RAW, VERSIONS)["error_type"].tolist() == ["label"]
    assert read_explained(run, RAW)["error_type"].tolist() == ["label"]  # a reader without versions: this code's


def test_special_files_and_linked_folders(run, tmp_path):
    write_explained(run, RAW, _rows("label"), inputs_fingerprint(run, RAW, VERSIONS))
    fingerprint = run.metrics_dir / "images.json"
    fingerprint.unlink()
    os.mkfifo(fingerprint)
    assert read_explained(run, RAW, VERSIONS) is None  # at once: a FIFO is never waited on
    fingerprint.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.metrics_dir / "curated").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="is a link or a file"):
        write_explained(run, "curated", _rows("label"), inputs_fingerprint(run, "curated", VERSIONS))
    assert list(elsewhere.iterdir()) == []
    issues = run.path / "probes"
    issues.mkdir()
    os.mkfifo(issues / "label_issues.parquet")
    with pytest.raises(StoreError, match="not a regular file"):
        read_label_issues(run)
