"""The `wildlens` command: one entry point whose subcommands are the stages' own command lines."""
from __future__ import annotations

import subprocess
import sys

from pages.launcher import config_flags
from tests.conftest import ROOT


def wildlens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wildlens", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_help_lists_every_command():
    out = wildlens("--help")
    assert out.returncode == 0
    for command in ("crawl", "classify", "explain", "app"):
        assert f"\n  {command} " in out.stdout


def test_explain_senses_is_the_stage_command():
    via_wildlens = wildlens("explain", "senses", "cat")
    direct = subprocess.run([sys.executable, "-m", "explain", "senses", "cat"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert via_wildlens.returncode == direct.returncode == 0
    assert via_wildlens.stdout == direct.stdout
    assert via_wildlens.stdout.startswith("cat.n.01\t7\t")


def test_a_user_error_is_one_line_and_exit_2():
    out = wildlens("explain", "senses", "qwzxv")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: 'qwzxv' is not in WordNet.")
    unknown = wildlens("kraw")
    assert unknown.returncode == 2 and "unknown command 'kraw'" in unknown.stderr


def test_the_settings_become_streamlit_flags(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[server]\nheadless = true\nfileWatcherType = "none"\n[browser]\ngatherUsageStats = false\n')
    assert config_flags(config) == ["--server.headless", "true", "--server.fileWatcherType", "none",
                                    "--browser.gatherUsageStats", "false"]
    assert config_flags(None) == []
