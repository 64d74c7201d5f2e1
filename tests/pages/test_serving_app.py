"""Who can reach the dashboard (issue 22, item 17): the real server's address, ``--share``'s
notice, the password gate and the Import page's root. The library's limits: tests/core/test_serving.py.

The address tests start the real server the default way (``python -m wildlens app``, what
``make run`` runs) and read the kernel's table of listening sockets (/proc/net/tcp, tcp6): it
lists what every interface of the machine answers on, so "listens on 127.0.0.1 only" is checked
for all of them without sending a packet to any address but loopback ones. 127.0.0.2 is the
other address contacted: this machine's too (the whole 127/8 is), answered by a server that
listens on every interface (what `make run` did) and refused by one bound to 127.0.0.1.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.pages.browser import free_port

APP = str(ROOT / "app.py")
TIMEOUT = 300
SECRET = "correct horse 7"


# ---------------------------------------------------------------- the real server
def _listening(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port`` (IPv4 and IPv6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            if width == 8:
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def _answers(host: str, port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://{host}:{port}/_stcore/health", timeout=3).read() == b"ok"
    except OSError:
        return False


def _start(tmp_path, *options: str, env: dict | None = None):
    port = free_port()
    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "wildlens", "app", "--server.port", str(port), *options],
                            cwd=ROOT, env={**os.environ, "WILDLENS_HOME": str(tmp_path / "home"), **(env or {})},
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, port, log


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait(host: str, port: int, proc, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _answers(host, port):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"the server did not answer on {host}:{port}: {log.read_text()[-2000:]}")


def test_the_default_server_listens_on_loopback_only(tmp_path):
    proc, port, log = _start(tmp_path)
    try:
        _wait("127.0.0.1", port, proc, log)
        assert _listening(port) == {"127.0.0.1"}, f"listening on {_listening(port)}, not loopback only"
        assert not _answers("127.0.0.2", port)
        assert "serving beyond this machine" not in log.read_text()
    finally:
        _stop(proc)


def test_share_prints_what_it_exposes(tmp_path):
    """--share with an address given (127.0.0.2, so that the test exposes nothing to the network):
    the notice says what anyone reaching it can do, and the server listens where it was told."""
    root = tmp_path / "images"
    root.mkdir()
    proc, port, log = _start(tmp_path, "--share", "--server.address", "127.0.0.2",
                             env={"WILDLENS_IMPORT_ROOT": str(root), "WILDLENS_PASSWORD": SECRET})
    try:
        _wait("127.0.0.2", port, proc, log)
        text = log.read_text()
        assert "WildLens is serving beyond this machine" in text and "delete runs" in text
        assert f"Import: only folders under {root}" in text and "Password: asked" in text
        assert SECRET not in text  # never echoed
        assert _listening(port) == {"127.0.0.2"}
    finally:
        _stop(proc)


def test_share_alone_means_every_interface_with_the_notice(monkeypatch, capsys):
    """What --share hands to Streamlit when no address is given (not started: it would be reachable)."""
    from pages.launcher import streamlit_options

    monkeypatch.delenv("WILDLENS_PASSWORD", raising=False)
    monkeypatch.delenv("WILDLENS_IMPORT_ROOT", raising=False)
    options, notice = streamlit_options(["--share", "--server.port", "8799"])
    assert options[options.index("--server.address") + 1] == "0.0.0.0"
    assert "--share" not in options
    assert "every network interface" in notice and "Password: NONE" in notice and "Import: off" in notice
    default, none = streamlit_options(["--server.port", "8799"])
    assert default[default.index("--server.address") + 1] == "127.0.0.1" and none is None
    given, flagged = streamlit_options(["--server.address=0.0.0.0"])  # Streamlit's own flag: a share too
    assert flagged is not None and "--server.address=0.0.0.0" in given and "--server.address" not in given
    assert "--server.maxUploadSize" in default  # Streamlit's cap follows WildLens's


# ---------------------------------------------------------------- the password gate (AppTest)
@pytest.fixture
def empty_home(monkeypatch):
    import pages.server

    monkeypatch.setattr(pages.server, "ensure_sample_run", lambda: None)  # no sample: not what is tested
    st.cache_data.clear()
    st.cache_resource.clear()


def _texts(at: AppTest) -> str:
    return " ".join(str(e.value) for kind in (at.markdown, at.title, at.caption, at.error, at.info)
                    for e in kind)


def test_password_gate_runs_no_page_until_the_password_is_given(empty_home, monkeypatch):
    monkeypatch.setenv("WILDLENS_PASSWORD", SECRET)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.label for t in at.text_input] == ["Password"]  # nothing else: no page, no sidebar
    assert not at.sidebar.selectbox and "Runs" not in [t.value for t in at.title]
    at.text_input[0].input("wrong guess")
    at.button[0].click().run()
    assert [e.value for e in at.error] == ["Wrong password."]
    assert "wrong guess" not in _texts(at) and SECRET not in _texts(at)
    assert [t.label for t in at.text_input] == ["Password"]
    at.text_input[0].input(SECRET)
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Runs" in [t.value for t in at.title]  # the default page now runs
    assert SECRET not in _texts(at)
    assert SECRET not in [str(v) for v in at.session_state.to_dict().values()]  # the form cleared it


def test_no_password_set_means_no_gate(empty_home, monkeypatch):
    monkeypatch.delenv("WILDLENS_PASSWORD", raising=False)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Runs" in [t.value for t in at.title] and "Password" not in [t.label for t in at.text_input]


# ---------------------------------------------------------------- the Import page's root
def test_import_page_reads_only_under_the_root(empty_home, monkeypatch, tmp_path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "set" / "n02123045").mkdir(parents=True)
    (elsewhere / "n02123045").mkdir(parents=True)
    monkeypatch.setenv("WILDLENS_IMPORT_ROOT", str(root))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/import_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "WILDLENS_IMPORT_ROOT" in _texts(at)
    at.text_input(key="import_folder").input(str(elsewhere)).run()
    assert any("outside the import folder" in e.value for e in at.error)
    assert not at.dataframe  # no plan of the outside folder was read
    at.text_input(key="import_folder").input("set").run()  # relative: under the root
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.dataframe


def test_import_page_is_off_when_shared_without_a_root(empty_home, monkeypatch):
    monkeypatch.delenv("WILDLENS_IMPORT_ROOT", raising=False)
    monkeypatch.setenv("WILDLENS_SHARE", "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("pages/import_page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Import is off on a shared dashboard" in e.value for e in at.error)
    assert "import_folder" not in [t.key for t in at.text_input]


# ---------------------------------------------------------------- the Models page's Ray address
def test_a_shared_dashboard_never_joins_a_typed_ray_address(app, monkeypatch):
    """Joining a Ray cluster lets it run code in the dashboard's process: shared, only RAY_ADDRESS."""
    import classify.engine.ray_engine
    from tests.pages.test_app import open_page
    from tests.pages.test_models_engine import _fake_predict_run, _pick_lite0, _run_button

    monkeypatch.setattr(classify.engine.ray_engine, "ray_available", lambda: True)
    monkeypatch.setenv("WILDLENS_SHARE", "1")
    seen = _fake_predict_run(monkeypatch)
    at = _pick_lite0(open_page(app, "models"))
    at.radio(key="engine-choice").set_value("ray").run()
    at.text_input(key="ray-address").input("ray://attacker.example:10001").run()
    assert any("joins only the cluster its operator set" in w.value for w in at.warning)
    _run_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert seen["options"].ray_address is None and seen["held"] == [None]
