"""core.errors: the one line a command line prints after 'error: '."""
import pytest

from core.errors import WildLensError, one_line


@pytest.mark.parametrize("message, printed", [
    ("Folder /tmp/a\x1b[2J does not exist.", "Folder /tmp/a\\x1b[2J does not exist."),  # an escape sequence
    ("model m\u202egnp.exe", "model m\\u202egnp.exe"),  # a right-to-left override
    ("first line\nsecond line", "first line"),  # the first line only (a name's newline is escaped where it is named)
    ("first\r\nsecond", "first"),
    # Only a newline or carriage return ends the line: a line separator or form feed inside a folder's name
    # is escaped, not a cut (the message named another, shorter path and lost its reason: hostile check).
    ("Folder /tmp/a\u2028b\x0cc is not empty", "Folder /tmp/a\\u2028b\\x0cc is not empty"),
    ("chat noir: n02123045 (é, 猫)", "chat noir: n02123045 (é, 猫)"),  # printable text as it is
])
def test_one_line_is_the_first_line_with_control_characters_escaped(message, printed):
    assert one_line(WildLensError(message)) == printed


def test_one_line_of_an_empty_message_names_the_error_and_a_key_error_loses_its_quotes():
    assert one_line(WildLensError("")) == "WildLensError"
    assert one_line(KeyError("no run 'x'")) == "no run 'x'"


def test_another_errors_first_line_only():
    assert one_line(OSError("first line\nsecond line")) == "first line"
    assert one_line(RuntimeError("a\x1b[2J\nb")) == "a\\x1b[2J"
