"""One writer per folder: an advisory lock that the OS releases when the process dies.

A second crawl or import into the same run fails at once (:class:`FolderBusy`) instead of
interleaving two manifests; a killed writer leaves no stale lock to clean up, because ``flock``
locks belong to the open file and vanish with the process.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .runstore import StoreError

LOCK_NAME = ".wildlens.lock"


class FolderBusy(StoreError):
    """Another process holds the folder's lock; the message says who and what to do."""


@contextmanager
def exclusive_lock(folder: Path, busy_message: str | None = None, name: str = LOCK_NAME) -> Iterator[None]:
    """Hold ``folder/name`` exclusively for the ``with`` block, or raise :class:`FolderBusy` at once."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no advisory lock; one writer is then the user's job
        yield
        return
    with open(folder / name, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(busy_message or f"Another WildLens process is writing to {folder}; wait for it to "
                                             "finish.") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
