"""Issue 22 item 19: the files a user names to explain/ are read only when they are regular files
of bounded size. A FIFO blocked `explain metrics FIFO` and `explain concepts --image-counts FIFO`
for ever; a link to /dev/zero read until MemoryError. Each is now one line, exit 2, at once."""
import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")


def _limited_memory():  # so the unfixed reader hits MemoryError in seconds instead of filling the machine
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def run_cli(home, *args):
    env = {**os.environ, "WILDLENS_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "explain", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, preexec_fn=_limited_memory)


@pytest.fixture()
def fifo(tmp_path):
    path = tmp_path / "predictions.csv"
    os.mkfifo(path)
    return path


@pytest.fixture()
def zero_link(tmp_path):
    path = tmp_path / "zeros.csv"
    path.symlink_to("/dev/zero")
    return path


def _one_line_error(out, *words):
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]


def test_metrics_of_a_fifo_is_refused_at_once(tmp_path, fifo):
    _one_line_error(run_cli(tmp_path, "metrics", str(fifo), "--out", str(tmp_path / "out")), str(fifo),
                    "not a regular file")


def test_metrics_of_a_link_to_dev_zero_is_refused(tmp_path, zero_link):
    _one_line_error(run_cli(tmp_path, "metrics", str(zero_link), "--out", str(tmp_path / "out")), "not a regular file")


def test_image_counts_from_a_fifo_is_refused_at_once(tmp_path, fifo):
    _one_line_error(run_cli(tmp_path, "concepts", "--image-counts", str(fifo), "--out", str(tmp_path / "out")),
                    "--image-counts", "not a regular file")


def test_image_counts_from_dev_zero_is_refused(tmp_path, zero_link):
    _one_line_error(run_cli(tmp_path, "concepts", "--image-counts", str(zero_link), "--out", str(tmp_path / "out")),
                    "--image-counts", "not a regular file")


def test_a_sparse_predictions_file_is_refused_by_its_nul_bytes(tmp_path):
    """Second campaign: a valid header and row, then 1 GiB of holes (truncate -s). Was 27 s and
    6.4 GB (for 2 GiB) to say 'line 6 has 1 fields' (MemoryError under this test's 3 GiB limit);
    now the first NUL byte is named at once."""
    path = tmp_path / "sparse.csv"
    path.write_text("model,image,true_wnid,pred_wnid\nm,a.jpg,n02123045,n02123045\n")
    os.truncate(path, 1 << 30)
    _one_line_error(run_cli(tmp_path, "metrics", str(path), "--out", str(tmp_path / "out")),
                    "sparse.csv: line 3 holds a NUL byte", "not CSV text")
    small = tmp_path / "nul.csv"
    small.write_bytes(b"model,image,true_wnid,pred_wnid\nm,a.jpg,n02123045,n02123045\x00\n")
    _one_line_error(run_cli(tmp_path, "metrics", str(small), "--out", str(tmp_path / "out")),
                    "nul.csv: line 2 holds a NUL byte")
