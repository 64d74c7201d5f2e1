"""The Makefile's choice of the interpreter the venv is made from (`make PYTHON=...`), run on a copy
of the Makefile beside an empty requirements.txt, with a stand-in interpreter: no venv is made for real."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

# Answers the Makefile's version check as a Python 3.11 and makes a venv whose python accepts anything.
STAND_IN = """#!/bin/sh
case "$1" in
  -c) exit 0 ;;
  -m) if [ "$2" = venv ]; then mkdir -p "$3/bin" && printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/python" && chmod +x "$3/bin/python"; fi; exit 0 ;;
esac
exit 1
"""


@pytest.fixture()
def project(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "requirements.txt").write_text("")
    return tmp_path


def _make(project, *args, env=None):
    return subprocess.run(["make", "-C", str(project), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name", ["my pythons", "py`touch MARK`", 'py"q', "it's"])
def test_a_python_whose_path_has_a_space_or_a_quote_makes_the_venv_and_runs_nothing_else(project, name):
    """PYTHON was used unquoted: '/opt/my pythons/python3.11' ran '/opt/my' and was refused as 'not Python 3.11';
    double-quoted (a hostile check), a backquote in it ran a command and a '"' broke the shell line."""
    folder = project / name
    folder.mkdir()
    (folder / "python3.11").write_text(STAND_IN)
    (folder / "python3.11").chmod(0o755)
    done = _make(project, "install", f"PYTHON={folder / 'python3.11'}")
    assert done.returncode == 0, done.stderr
    assert (project / ".venv" / "bin" / "python").exists() and (project / ".venv" / ".installed-requirements").exists()
    assert not (project / "MARK").exists() and not list(project.rglob("MARK"))


@pytest.mark.parametrize("where", ["environment", "command line"])
def test_an_empty_python_means_the_default_interpreter(project, where):
    """An empty PYTHON (`PYTHON= make install`) ran ' -c ...': no command, and the refusal named no interpreter."""
    done = _make(project, "-n", "install", *(["PYTHON="] if where == "command line" else []),
                 env={"PYTHON": ""} if where == "environment" else None)
    assert done.returncode == 0, done.stderr
    chosen = re.search(r"\|\| \{ '([^']*)' -c", done.stdout)
    assert chosen and chosen.group(1).strip(), done.stdout
