"""Special files where WildLens keeps a folder's lock file (hostile campaign): a FIFO or a link there is
one line, never a hang or a traceback, and what a link leads to is left alone."""
import os
import time

import pytest

from core.locking import exclusive_lock
from core.tables import StoreError


@pytest.mark.parametrize("kind", ["fifo", "link", "dangling"])
def test_a_lock_file_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    lock = tmp_path / ".wildlens-collect.lock"
    target = tmp_path / "elsewhere.txt"
    target.write_text("mine")
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "link":
        lock.symlink_to(target)
    else:
        lock.symlink_to(tmp_path / "gone")
    start = time.perf_counter()
    with pytest.raises(StoreError, match="remove it and re-run") as caught:
        with exclusive_lock(tmp_path, name=lock.name):
            pass
    assert time.perf_counter() - start < 2 and "\n" not in str(caught.value)
    assert target.read_text() == "mine" and not (tmp_path / "gone").exists()


def test_a_regular_lock_file_still_locks(tmp_path):
    from core.locking import FolderBusy

    with exclusive_lock(tmp_path, "busy", name="x.lock"):
        with pytest.raises(FolderBusy, match="busy"):
            with exclusive_lock(tmp_path, "busy", name="x.lock"):
                pass


def test_a_lock_file_without_permission_is_the_callers_message(tmp_path, monkeypatch):
    """Code review: every error opening the lock read "remove it and re-run"; a read-only lock file (maybe
    another user's) keeps its PermissionError, which the callers word ("choose a destination you can write to")."""
    import core.locking

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(core.locking.os, "open", denied)
    with pytest.raises(PermissionError):
        with exclusive_lock(tmp_path, name="x.lock"):
            pass
