"""core.errors: the one line a command line prints after 'error: '."""
import pytest

from core.errors import WildLensError, one_line


@pytest.mark.parametrize("message, printed", [
    ("Folder /tmp/a\x1b[2J does not exist.", "Folder /tmp/a\\x1b[2J does not exist."),  # an escape sequence
    ("model m\u202egnp.exe", "model m\\u202egnp.exe"),  # a right-to-left override
    ("Folder /tmp/new\nname is not empty", "Folder /tmp/new\\nname is not empty"),  # a name's line break, shown
    ("Folder /tmp/a\u2028b is not empty", "Folder /tmp/a\\u2028b is not empty"),  # a line separator too
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
