"""`pip install .` gives a complete product: the wheel holds every package, the vendored WordNet,
the dashboard's entry script and settings, and the `wildlens` command; its pins are requirements.txt's."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests.conftest import ROOT


def _requirements() -> list[str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def _name(spec: str) -> str:
    return re.split(r"[=<>!~ \[]", spec, maxsplit=1)[0].lower().replace("_", "-")


def test_pyproject_pins_exactly_what_requirements_txt_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = project["dependencies"] + extras["test"] + extras["ray"]  # requirements.txt: all, for the tests
    assert sorted(declared, key=_name) == sorted(_requirements(), key=_name)
    assert all("==" in spec for spec in declared), "every dependency is pinned"
    assert project["scripts"]["wildlens"] == "wildlens.cli:main"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    # A copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                                ".pytest_cache", "out", ".wildlens"))
    # --no-build-isolation: the pinned setuptools of the venv builds it, nothing is downloaded.
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=300,
                          env={"PIP_NO_INDEX": "1", "PATH": "/usr/bin:/bin", "HOME": str(out)})
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("wildlens-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_holds_every_package_the_data_and_the_dashboard(wheel):
    names = set(wheel.namelist())
    for package in ("core", "crawl", "classify", "explain", "pages", "wildlens"):
        sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*.py")}
        assert sources <= names, f"{package}: missing {sorted(sources - names)[:5]}"
    from core.wordgraph import packaged_graph_file, packaged_other_pos_file
    from explain.similarity import packaged_ic_file

    assert {"app.py", "core/data/nltk_data/corpora/wordnet.zip", "core/data/nltk_data/WORDNET_LICENSE",
            f"explain/data/{packaged_ic_file().name}", f"core/data/{packaged_graph_file().name}",
            f"core/data/{packaged_other_pos_file().name}"} <= names
    assert not any(n.startswith("tests/") for n in names), "tests are not part of the product"
    data = [n for n in names if n.endswith("share/wildlens/.streamlit/config.toml")]
    assert data and wheel.read(data[0]) == (ROOT / ".streamlit" / "config.toml").read_bytes()
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "wildlens = wildlens.cli:main" in wheel.read(entry_points).decode()
