"""core.userfile: a file a user names is read only as a regular file of bounded size, and every
refusal is one line that names it (issue 22 item 19)."""
import os

import pytest

from core.errors import WildLensError
from core.userfile import UserFileError, open_user_file, read_user_bytes


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"wnid,count\n")
    link = tmp_path / "link.csv"
    link.symlink_to(path)
    assert read_user_bytes(path) == read_user_bytes(link) == b"wnid,count\n"
    assert open_user_file(link, text=True).read() == "wnid,count\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # nothing ever writes to it: a blocking open would wait for ever
    with pytest.raises(UserFileError, match=r"^--file .*pipe.csv is a FIFO \(named pipe\), not a regular file"):
        read_user_bytes(fifo, what=f"--file {fifo}")


@pytest.mark.parametrize("target, kind", [("/dev/zero", "a device"), ("/dev/null", "a device")])
def test_devices_and_links_to_them_are_refused(tmp_path, target, kind):
    if not os.path.exists(target):
        pytest.skip(f"no {target}")
    link = tmp_path / "z.csv"
    link.symlink_to(target)
    with pytest.raises(UserFileError, match=f"is {kind}, not a regular file"):
        read_user_bytes(link)


def test_a_folder_a_missing_file_and_a_file_over_the_cap_are_one_line(tmp_path):
    with pytest.raises(UserFileError, match="is a folder"):
        read_user_bytes(tmp_path)
    with pytest.raises(UserFileError, match="does not exist"):
        read_user_bytes(tmp_path / "missing.csv")
    big = tmp_path / "big.csv"
    big.write_bytes(b"x" * 5000)
    with pytest.raises(UserFileError, match=r"is 5,000 bytes, more than the 4,096 bytes this reads") as caught:
        read_user_bytes(big, max_bytes=4096)
    assert isinstance(caught.value, WildLensError) and "\n" not in str(caught.value)
    assert read_user_bytes(big, max_bytes=5000) == b"x" * 5000  # the cap itself is allowed


def test_text_that_does_not_decode_is_one_line(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(UserFileError, match="is not utf-8 text"):
        open_user_file(path, text=True)


def test_a_broken_link_is_named_for_what_it_is(tmp_path):
    from core.userfile import broken_link_reason

    (tmp_path / "file").write_text("x")
    (tmp_path / "ok").symlink_to("file")
    (tmp_path / "nowhere").symlink_to("missing")
    (tmp_path / "loop").symlink_to("loop")
    assert broken_link_reason(tmp_path / "file") is None and broken_link_reason(tmp_path / "ok") is None
    assert broken_link_reason(tmp_path / "absent") is None  # no link at all: the caller's own message
    assert broken_link_reason(tmp_path / "nowhere") == f"{tmp_path / 'nowhere'} is a symbolic link to missing, which does not exist"
    assert broken_link_reason(tmp_path / "loop") == f"{tmp_path / 'loop'} is a symbolic link that leads back to itself (loop)"
