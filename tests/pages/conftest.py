"""What the page tests share: one sample store per test process, copied for each module.

Building the sample run classifies 30 views with three real models (about 20 s on this 2-core
machine); every page-test module used to build its own. Now each process builds it once and
each module gets a copy of the whole store (runs and caches, file times kept, so the stored
fingerprints still match): a module may add or delete runs without touching another's."""
import os
import shutil

import pytest


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory, worker_id):
    """A store with the sample run built (real models, real predictions); never modified.

    Built once per test session, not once per xdist worker: the workers share the session's
    base folder, and the first one builds under a lock while the others wait and then read it
    (pytest-xdist's recipe). Three builds on three workers were ~60 s of the suite's CPU."""
    if worker_id == "master":  # no xdist: this process's own folder
        return _build_sample_store(tmp_path_factory.mktemp("sample_store"))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    home = shared / "sample_store"
    with FileLock(str(shared / "sample_store.lock")):
        if not (home / ".built").exists():
            home.mkdir(exist_ok=True)
            _build_sample_store(home)
            (home / ".built").touch()
    return home


def _build_sample_store(home):
    old = os.environ.get("WILDLENS_HOME")
    os.environ["WILDLENS_HOME"] = str(home)
    try:
        from core.runstore import RunStore
        from wildlens.sample import ensure_sample_run

        ensure_sample_run(RunStore(home))
    finally:
        if old is None:
            os.environ.pop("WILDLENS_HOME", None)
        else:
            os.environ["WILDLENS_HOME"] = old
    return home


def copy_store(sample_store, tmp_path_factory, name: str):
    home = tmp_path_factory.mktemp(name)
    # copy2 keeps the file times, but every copy is a new inode, which the run's fingerprints hold
    # (core.runstore._files_fingerprint): a copy's derived tables are made again at its first page (Image page,
    # 2026-12-08: 0.47 against 0.22 CPU-s).
    shutil.copytree(sample_store, home, dirs_exist_ok=True, symlinks=True,
                    ignore=lambda folder, names: [".built"] if folder == str(sample_store) else [])
    return home


@pytest.fixture(scope="session", autouse=True)
def _component_scan_once():
    """Streamlit's scan of the installed packages for v2 component manifests, done once per test process.

    Why: every AppTest builds its own component manager at its first run, and the scan parses the
    metadata of every installed distribution (~130 here): 0.11 s of CPU per AppTest (0.36 s under
    cProfile); tests/pages/test_app.py 34.4 -> 29.3 s (2026-12-06). The installed packages do not change
    during a test session, so its answer does not either; a server (``make run``, the browser tests)
    scans once at its start, as before."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without v2 components: nothing is scanned
        yield
        return
    real = manifest_scanner.scan_component_manifests
    manifest_scanner.scan_component_manifests = functools.cache(real)
    try:
        yield
    finally:
        manifest_scanner.scan_component_manifests = real


@pytest.fixture(scope="session", autouse=True)
def _scripts_compiled_once():
    """One compiled-script cache for the test process, as a server keeps one
    (``streamlit.runtime.Runtime._script_cache``): AppTest makes new ``ScriptCache``s for every run, one
    for the pages (``app_test``) and one for app.py (``local_script_runner``), so each page was parsed
    and passed through Streamlit's magic AST rewrite at every render of every test (7-25 ms a page;
    app.py 0.8 ms). benchmarks/bench_app.py's ``share_script_cache`` does the same for its figures.
    Keyed by the script's absolute path: ``AppTest.from_string`` files are named by their text's hash.
    tests/pages/test_results_page.py + test_app.py: 50.9 / 48.8 -> 45.6 / 44.0 CPU-s (alternating, 2026-12-07)."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    real = app_test.ScriptCache, local_script_runner.ScriptCache
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared
    try:
        yield
    finally:
        app_test.ScriptCache, local_script_runner.ScriptCache = real


@pytest.fixture(scope="session", autouse=True)
def _runs_awaited_without_polling():
    """AppTest waits for a script run by polling every millisecond (``require_widgets_deltas``: a
    wake-up and a scan of the run's events each time, on the core another test worker needs); here
    it joins the script's thread instead, which ends after the run's SHUTDOWN event (LocalScriptRunner
    joins it right after the wait anyway). Same timeout and error as Streamlit's; its own wait where
    the runner has no thread attribute (another Streamlit version). The same two modules: 48.5 / 47.3 ->
    44.3 / 44.7 CPU-s (alternating, with the shared script cache, 2026-12-07)."""
    from streamlit.testing.v1 import local_script_runner

    real = local_script_runner.require_widgets_deltas

    def joined(runner, timeout: float = 3) -> None:
        thread = getattr(runner, "_script_thread", None)
        if thread is None:
            return real(runner, timeout)
        thread.join(timeout)
        if runner.script_stopped():
            return
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    local_script_runner.require_widgets_deltas = joined
    try:
        yield
    finally:
        local_script_runner.require_widgets_deltas = real


APP_TIMEOUT = 600  # the first run loads WordNet and classifies the sample on a shared 2-core machine


@pytest.fixture(scope="module")
def app_home(sample_store, tmp_path_factory):
    """One store for the module: a copy of the process's sample store."""
    return copy_store(sample_store, tmp_path_factory, "app_home")


@pytest.fixture
def app(app_home, monkeypatch):
    """The dashboard (app.py) through AppTest on the module's store, caches cleared, first run done."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    monkeypatch.setenv("WILDLENS_HOME", str(app_home))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=APP_TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def capture_downloads(monkeypatch) -> dict:
    """{file name: bytes} of every download button a page draws from now on (the pages defer the
    bytes to the click: the spy asks for them at once)."""
    import streamlit as st

    captured = {}
    real = st.download_button

    def spy(label, data=None, file_name=None, *args, **kwargs):
        captured[file_name] = data() if callable(data) else data
        return real(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(st, "download_button", spy)
    return captured


def url_messages(monkeypatch) -> list:
    """The query strings of the URL messages Streamlit sends the browser from now on, one per message
    (the browser keeps each new URL as a history step: one per run is one press of Back per action)."""
    from streamlit.runtime.state.query_params import QueryParams

    sent = []
    real = QueryParams._send_query_param_msg

    def spy(self):
        real(self)
        from urllib.parse import urlencode

        sent.append(urlencode(self._query_params, doseq=True))

    monkeypatch.setattr(QueryParams, "_send_query_param_msg", spy)
    return sent


def send_chart_selection(at, chart, selection: dict):
    """Rerun ``at`` as the browser does after a selection on a Plotly chart drawn with on_select:
    the chart's widget state carries ``{"selection": selection}`` (AppTest cannot click a chart)."""
    import json

    tree = at._tree
    sent = tree.get_widget_states

    def with_selection():
        states = sent()
        widget = states.widgets.add()
        widget.id, widget.string_value = chart.proto.id, json.dumps({"selection": selection})
        return states

    tree.get_widget_states = with_selection
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def server(tmp_path_factory, request):
    """A real dashboard server (tests/pages/browser.py ``serve``) on a fresh WILDLENS_HOME for a
    browser test module: (url, home); a server that does not start fails the test with its log's tail."""
    from tests.conftest import ROOT
    from tests.pages.browser import serve

    name = f"{request.module.__name__.rsplit('.', 1)[-1]}_home"
    # A module that does not test the first start (SERVER_ON_SAMPLE = True) gets a copy of the
    # session's sample store: the server then reads the sample instead of classifying it again
    # (about 20 s of CPU per module on this 2-core machine).
    home = (copy_store(request.getfixturevalue("sample_store"), tmp_path_factory, name)
            if getattr(request.module, "SERVER_ON_SAMPLE", False) else tmp_path_factory.mktemp(name))
    try:
        with serve(home, ROOT) as url:
            yield url, home
    except RuntimeError as exc:  # not started: the log's tail says why
        pytest.fail(str(exc))


def away_and_back(at, other_page: str, written: dict) -> None:
    """Show ``other_page``, then set the URL back to ``written`` (the query the page wrote), as the
    browser's Back does; the caller opens the page again."""
    at.switch_page(other_page).run()
    for key in list(at.query_params):
        del at.query_params[key]
    for key, value in written.items():
        at.query_params[key] = value
