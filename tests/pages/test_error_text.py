"""pages.text.show_error: one line, escaped, in the page's words where the error has them."""
from pathlib import Path

import pytest

from crawl.export import ExportError, _out_error


@pytest.mark.parametrize("error, expected", [
    # A folder's line breaks are escaped where it is named (crawl.export._out_error), the message whole (cut
    # at the first, it named another, shorter path and lost its reason: hostile check, 2026-12-07).
    (_out_error(Path("/tmp/x\n\n    code\n* [a](http://e)"), " is not empty (1 entry)"),
     "The folder /tmp/x\\n\\n    code\\n* [a](http:/e) is not empty (1 entry)"),  # (Path folds the //)
    (ExportError("cannot write the export to /tmp/a\r\nsecond line"), "cannot write the export to /tmp/a"),
    (ExportError("the folder /tmp/\u202egnp.exe"), "the folder /tmp/\\u202egnp.exe"),  # a right-to-left override
    (ExportError("x" * 900), "x" * 500),
])
def test_an_error_is_one_escaped_line_in_the_pages_words(monkeypatch, error, expected):
    import pages.text as text

    shown = []
    monkeypatch.setattr(text.st, "error", lambda body, icon=None: shown.append(body))
    text.show_error(error)
    (body,) = shown
    assert "\n" not in body and "\r" not in body and len(body) <= 500
    assert body == text.escape_markdown(expected)
