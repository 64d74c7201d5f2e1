"""What lives as long as the dashboard's server, not a session: the sample run built once at the
first start (sessions that open meanwhile wait for it), and the Ray instance the Models page's
runs share, held by a thread of the server."""
from __future__ import annotations

import threading

import streamlit as st

from core.runstore import RunStore

from pages.run_state import store
from pages.text import escape_markdown, progress_bar


_SAMPLE_LOCK = threading.Lock()  # sessions that open during the first build wait for it, not race it


_SAMPLE_READY: set[str] = set()  # stores whose sample run this process has built or checked


def ensure_sample_run() -> None:
    """Build the sample run on the first start (once per process and store; idempotent on disk),
    showing what it does: one progress bar per pass of models over the photographs."""
    root = str(store().root)
    # Always one slot, emptied once the build is done: the page's elements keep their places
    # between the first run and the next (a widget that moved, e.g. an open expander, would reset).
    slot = st.empty()
    if root in _SAMPLE_READY:
        return
    from wildlens.sample import ensure_sample_run as build

    try:
        with _SAMPLE_LOCK:
            if root in _SAMPLE_READY:
                return
            with slot.status("First start: classifying the sample photographs with the offline models…",
                             expanded=True):
                build(RunStore(root), progress=progress_bar())
            _SAMPLE_READY.add(root)
        slot.empty()
    except Exception as exc:  # the app must still open: say what is wrong instead
        slot.warning(f"The sample run could not be built: {escape_markdown(exc)}")


def hold_ray_for_the_server(address: str | None, waiting=None) -> str:
    """Ray started (a local instance) or joined for ``address`` before a run, with the wait shown;
    returns where Ray runs. ``core.raysession.ray_session`` starts it in a thread that lives as
    long as the server (Ray's local processes die with the *thread* that started them, and
    Streamlit runs every rerun in a new thread: an instance started by a run died when the run
    ended, and the whole dashboard 60 s later), so it stays for the next runs, and the engine's
    own ray_session then finds it ready. ``waiting(seconds)`` is called each second until Ray is
    ready (a local instance takes a few seconds to start): a page shows the wait through it, and its
    Streamlit call lets the reader's Stop end the run. Raises the engine's RayEngineError (an
    address that takes no connection)."""
    import time
    from concurrent.futures import ThreadPoolExecutor, TimeoutError as Pending

    from core.raysession import ray_session

    def enter() -> str:
        with ray_session(address) as where:
            return where

    pool = ThreadPoolExecutor(1, thread_name_prefix="wildlens-ray-wait")
    future = pool.submit(enter)
    pool.shutdown(wait=False)
    started = time.monotonic()
    while True:
        try:
            return future.result(timeout=1.0)
        except Pending:
            if waiting is not None:
                waiting(time.monotonic() - started)


_FROZEN = threading.Event()  # set once this process has frozen its start-up objects


def freeze_startup_objects() -> bool:
    """Once per server process, at its first script run: import what every chart page imports, collect all
    garbage, and move every object the collector tracks into its permanent generation (``gc.freeze``); True
    when it did. Why: a server showing a 1,000,000-prediction run tracks ~370,000 objects, nearly all of them
    modules' functions, classes and constants; each full collection walked them all, and one took 0.2-0.27 s
    of Results' first load (bench_app.py, measured with gc.callbacks; frozen: 0.01-0.02 s). Why only once,
    at the start: frozen objects are never collected, so freezing later would also pin garbage of the runs
    and sessions alive at that moment (code review: a figure of 3,000,000 points kept after each freeze);
    at the start there is nothing but imports and the first session's state."""
    if _FROZEN.is_set():
        return False
    import gc

    import plotly.express  # noqa: F401  (every chart page's: imported once here, not in a page's first load)
    import plotly.graph_objects  # noqa: F401

    gc.collect()
    gc.freeze()
    _FROZEN.set()
    return True
