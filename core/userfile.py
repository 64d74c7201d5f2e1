"""Read a file that a user named: a regular file only, at most a size cap, one-line errors.

Why: ``open()`` of a FIFO blocks until something writes to it (``explain metrics FIFO`` waited for
ever), and a link to ``/dev/zero`` or another device reads without end (MemoryError). Any path that
comes from a person (an option, a form field, an uploaded name) is read through
:func:`read_user_bytes` or :func:`open_user_file`, which

- open without blocking (``O_NONBLOCK``: a FIFO opens at once instead of waiting for a writer) and
  follow a symbolic link, as any program does for a file it is given;
- check what was opened (``fstat`` of the open descriptor, so a file swapped for a FIFO between a
  check and the open cannot slip through): a folder, FIFO, socket or device is refused;
- refuse a file above ``max_bytes`` before reading it, and stop reading at ``max_bytes + 1`` (a file
  that grows while read is refused too).

Every refusal is :class:`UserFileError`, a :class:`core.errors.WildLensError` whose message is one
line that starts with ``what`` (e.g. "--image-counts /tmp/x.csv") and says what to give instead.
"""
from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from .errors import WildLensError

MiB = 1 << 20
GiB = 1 << 30
DEFAULT_MAX_BYTES = 2 * GiB


class UserFileError(WildLensError, ValueError):
    """A file a user named cannot be read as asked; the message names it and says what to give."""

    @property
    def problem(self) -> str:
        """The message without its advice ("give a regular file", "split it"), which fits a file named on a command
        line: for a reader that gives its own (a run's run.json, a folder's journal)."""
        return " ".join(str(self).split()).split("; ")[0].rstrip(".")


def _size_text(n: int) -> str:
    return f"{n / GiB:.3g} GiB" if n >= GiB else f"{n / MiB:.3g} MiB" if n >= MiB else f"{n:,} bytes"


def describe_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words: 'a folder', 'a FIFO (named pipe)', ..."""
    return _kind(mode)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_regular(path: Path, what: str, max_bytes: int) -> tuple[int, int]:
    """(descriptor, size) of a regular file of at most ``max_bytes``; UserFileError otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise UserFileError(f"{what} does not exist (no such file); check the path.") from None
    except IsADirectoryError:
        raise UserFileError(f"{what} is a folder, not a regular file; give a file.") from None
    except PermissionError:
        raise UserFileError(f"{what} cannot be read: permission denied.") from None
    except OSError as exc:
        raise UserFileError(f"{what} cannot be opened: {exc.strerror or exc}.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserFileError(f"{what} is {_kind(info.st_mode)}, not a regular file; give a regular file.")
        if info.st_size > max_bytes:
            raise UserFileError(f"{what} is {_size_text(info.st_size)}, more than the {_size_text(max_bytes)} "
                                "this reads; split it into smaller files.")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_user_bytes(path: str | os.PathLike, *, what: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (see the module docstring); ``what`` names it in
    messages (default: the path)."""
    path = Path(path)
    what = what or str(path)
    fd, size = _open_regular(path, what, max_bytes)
    with os.fdopen(fd, "rb", closefd=True) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise UserFileError(f"{what} cannot be read: {exc.strerror or exc}.") from None
    if len(data) > max_bytes:  # it grew while being read
        raise UserFileError(f"{what} grew past the {_size_text(max_bytes)} this reads while it was read; "
                            "give a file that is not being written.")
    return data


def open_user_file(path: str | os.PathLike, *, what: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                   text: bool = False, encoding: str = "utf-8"):
    """An in-memory file object of the regular file ``path`` (its bytes read at once by
    :func:`read_user_bytes`): ``io.BytesIO``, or with ``text`` an ``io.StringIO`` decoded with
    ``encoding`` (UserFileError if it does not decode)."""
    data = read_user_bytes(path, what=what, max_bytes=max_bytes)
    if not text:
        return io.BytesIO(data)
    try:
        return io.StringIO(data.decode(encoding))
    except UnicodeDecodeError:
        raise UserFileError(f"{what or path} is not {encoding} text.") from None


def broken_link_reason(path: str | os.PathLike) -> str | None:
    """Why ``path``, a symbolic link, leads nowhere ('<path> is a symbolic link to <target>, which does not
    exist' or '... that leads back to itself'), or None when it is no link or its target can be reached.
    For a destination the user named (--out): making a folder or a file there fails with the OS's bare
    'File exists' / 'No such file' otherwise (a hostile-input campaign, 2026-12-06)."""
    path = Path(path)
    if not path.is_symlink():
        return None
    try:
        os.stat(path)
    except FileNotFoundError:
        return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return f"{path} is a symbolic link that leads back to itself ({os.readlink(path)})"
        return f"{path} is a symbolic link to {os.readlink(path)}, which cannot be reached ({exc.strerror or exc})"
    return None


def expand_user(path, what: str = "") -> Path:
    """``Path(path).expanduser()``, or :class:`UserFileError` (one line) when a leading '~name'
    names no user here; ``what`` names where the path came from ('--out', 'WILDLENS_HOME=') ahead of
    it in that line. Why: Python raises RuntimeError("Could not determine home directory"), and
    '--out ~nosuchuser/x' ended crawl summary, crawl import and the other commands in a traceback
    (hostile check, 2026-12-07); a path from an environment variable was not named as one."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        from .errors import printable

        label = f"{what}{'' if not what or what.endswith('=') else ' '}"
        raise UserFileError(f"{label}{printable(path)}: {no_home_reason(path)}") from None


def no_home_reason(path) -> str:
    """What :func:`expand_user` says of a path whose '~name' names no user here (crawl.export words
    the same reason in its own sentence)."""
    from .errors import printable

    return f"{printable(Path(path).parts[0])} names no user's home here; give the full path."


def file_sha256(path) -> str:
    """The sha256 of the file at ``path``, read a MiB at a time (a weights file, a written --out, a sample view)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def regular_file_size(path) -> int:
    """The size of the regular file at ``path``, after reading its first byte; OSError (its strerror "not a
    regular file" for a FIFO, a folder, a device) otherwise, for callers that word the error themselves (the
    Ray engine's node probe). Opened as :func:`read_user_bytes` opens: a FIFO at an image's path held the probe
    until its 300 s deadline (a hostile check)."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            raise OSError(0, "not a regular file")
        os.read(fd, 1)
        return facts.st_size
    finally:
        os.close(fd)
