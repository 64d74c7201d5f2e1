"""core.errors: the one line a command line prints after 'error: '."""
import pytest

from core.errors import WildLensError, one_line


@pytest.mark.parametrize("message, printed", [
    ("Folder /tmp/a\x1b[2J does not exist.", "Folder /tmp/a\\x1b[2J does not exist."),  # an escape sequence
    ("model m\u202egnp.exe", "model m\\u202egnp.exe"),  # a right-to-left override
    ("first line\nsecond line", "first line"),  # the first line only
    ("chat noir: n02123045 (é, 猫)", "chat noir: n02123045 (é, 猫)"),  # printable text as it is
])
def test_one_line_is_the_first_line_with_control_characters_escaped(message, printed):
    assert one_line(WildLensError(message)) == printed


def test_one_line_of_an_empty_message_names_the_error_and_a_key_error_loses_its_quotes():
    assert one_line(WildLensError("")) == "WildLensError"
    assert one_line(KeyError("no run 'x'")) == "no run 'x'"
