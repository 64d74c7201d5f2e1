import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "explain", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_senses_and_hyponyms_cli():
    out = run_cli("senses", "cat")
    assert out.returncode == 0
    first = out.stdout.splitlines()[0].split("\t")
    assert first[:2] == ["cat.n.01", "7"]
    out = run_cli("hyponyms", "cat.n.01", "--label-space", "imagenet-1k")
    assert out.returncode == 0
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [r[0] for r in rows] == ["n02123045", "n02123159", "n02123394", "n02123597", "n02124075", "n02125311", "n02127052"]
    assert rows[0][1] == "tabby"


@pytest.mark.long
def test_cli_errors_are_one_line_and_exit_2():
    for args, needle in [(("senses", "qwzxv"), "not in WordNet"), (("hyponyms", "guy.n.01"), "No class"),
                         (("hyponyms", "cat"), "noun senses")]:
        out = run_cli(*args)
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr
