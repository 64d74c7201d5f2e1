"""One writer per folder: an advisory lock that the OS releases when the process dies.

A second crawl or import into the same run fails at once (:class:`FolderBusy`) instead of
interleaving two manifests; a killed writer leaves no stale lock to clean up, because ``flock``
locks belong to the open file and vanish with the process.
"""
from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .tables import StoreError

LOCK_NAME = ".wildlens.lock"
# Held (shared) by whoever writes derived files into an existing run (explain's metrics/), taken
# exclusively by RunStore.delete_run for the moment it renames the folder away.
PRESENCE_LOCK_NAME = ".wildlens-presence.lock"


class FolderBusy(StoreError):
    """Another process holds the folder's lock; the message says who and what to do."""


class RunGone(StoreError):
    """The run folder was deleted (or replaced) before a writer could lock it; nothing was written."""


@contextmanager
def run_presence_lock(folder: Path, gone_message: str) -> Iterator[None]:
    """Hold the run folder ``folder`` in place for the ``with`` block: a shared lock on its
    :data:`PRESENCE_LOCK_NAME` file, which ``RunStore.delete_run`` takes exclusively (without
    waiting) around its rename. Raises :class:`RunGone` (``gone_message``) when the run is no
    longer there: its folder is missing, or the lock file there is not the one locked (the folder
    was renamed away, and maybe a new run of the same id made, while this waited for the lock).

    Why: a writer that creates its files' folders (``mkdir(parents=True)``) after a delete made
    ``runs/<id>/metrics/`` again, a folder without run.json that no list showed and that blocked
    the id ("Run r already exists"). Under this lock the folder is never created: the lock file is
    opened in the folder as it is, and a delete either happened before (RunGone) or waits for the
    block to end (it is refused, FolderBusy, like a delete during an import)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; check presence only
        if not Path(folder).is_dir():
            raise RunGone(gone_message) from None
        yield
        return
    path = Path(folder) / PRESENCE_LOCK_NAME
    try:  # O_CREAT without the folder: a missing folder is an error, never made again
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileNotFoundError:
        raise RunGone(gone_message) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a delete holds it exclusively only while it renames
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if not same:
            raise RunGone(gone_message)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def exclusive_lock(folder: Path, busy_message: str | None = None, name: str = LOCK_NAME,
                   make_folder: bool = True) -> Iterator[None]:
    """Hold ``folder/name`` exclusively for the ``with`` block, or raise :class:`FolderBusy` at once.
    ``make_folder=False``: a folder that is gone stays gone (FileNotFoundError), for a lock taken on a
    folder another process may rename meanwhile (crawl.importer's take-up of a staging folder: the
    loser of two made an empty copy under the old name; review, 2026-12-07)."""
    folder = Path(folder)
    if make_folder:
        folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no advisory lock; one writer is then the user's job
        yield
        return
    path = folder / name
    not_a_lock = (f"{path} is not a regular file, so it cannot be the lock WildLens keeps there; remove it "
                  "and re-run.")
    try:  # never waits on a FIFO put there, never follows a link: one line instead (hostile campaign)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a link, a socket or FIFO, a folder
            raise StoreError(not_a_lock) from None
        raise  # e.g. permission denied: the caller's own message says what to do (a folder you can write to)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(not_a_lock)
        handle = os.fdopen(fd, "r+")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(busy_message or f"Another WildLens process is writing to {folder}; wait for it to "
                                             "finish.") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
