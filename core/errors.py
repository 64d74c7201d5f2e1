"""The one user-facing error base of WildLens.

Every problem a person can fix (an unknown query, a missing weights file, a damaged run, a bad
option) is raised as a subclass of :class:`WildLensError` whose message is one line naming what is
wrong and what to do. Command lines print ``error: <message>`` and exit 2 for exactly these
(:func:`one_line`); the dashboard shows the message in place. Anything else is a bug and keeps its
traceback.

Subclasses keep the built-in base they had before this class existed (``ValueError``,
``RuntimeError``), so ``except ValueError`` in code that predates it still works.
"""
from __future__ import annotations

import re


class WildLensError(Exception):
    """A problem the user can fix; ``str()`` is one line: what is wrong and what to do."""


class OptionError(WildLensError, ValueError):
    """An option value that is not allowed here (a precision the machine lacks, a typo)."""


def one_line(exc: BaseException, limit: int = 500) -> str:
    """The first line of an error's message (KeyError's repr quotes stripped), at most ``limit``
    characters, control characters escaped (:func:`printable`): what a command line prints after
    'error: '. Why escaped: a message names what the user gave (a folder, a file, a model id), and a
    folder named with an escape sequence cleared the terminal through ``--out`` (hostile check, 2026-12-07)."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return printable(first_line(text, limit)) or type(exc).__name__


def first_line(text, limit: int = 500) -> str:
    """The first line of ``text`` (up to a newline or carriage return), stripped, at most ``limit``
    characters ('' for none). Only those two end it: str.splitlines also cut at U+2028, a form feed or
    a file separator inside a folder name the user gave, and the message lost the rest of the path, its
    reason and its fix (hostile check, 2026-12-07); :func:`printable` shows them escaped. A message that
    names a path with a newline in it escapes the path itself (crawl.export._out_error)."""
    text = str(text).strip()
    return re.split(r"\r\n|\r|\n", text, maxsplit=1)[0][:limit] if text else ""


def printable(text) -> str:
    """``text`` for a terminal: every control, format or unassigned character (an escape sequence, a
    bell, a right-to-left override, a newline in a model id) written as its escape, the rest as
    it is. Outside text a command prints (model ids from a predictions file, names from a FiftyOne
    export) goes through here: printed raw it could clear the screen or retitle the window."""
    import unicodedata

    # Zl and Zp: U+2028 and U+2029 break lines like a newline (str.splitlines, terminals, browsers).
    return "".join(c if not unicodedata.category(c).startswith(("C", "Zl", "Zp"))
                   else c.encode("unicode_escape").decode("ascii") for c in str(text))
