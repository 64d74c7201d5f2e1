"""WildLens dashboard: the entry point (``make run`` and ``wildlens app`` start it through ``pages/launcher.py``).

It sets session defaults once, makes sure the embedded sample run exists (computed on the first
start from photographs that installed packages ship), and routes to the pages. Pages are thin:
they call explain/, crawl/ and classify/ and render what those return.
"""
import streamlit as st

from pages.access import note_serving_mode, require_password
from pages.server import ensure_sample_run, freeze_startup_objects
from pages.run_state import init_state, levels_toggle, run_selector, saved_views_sidebar, view_switch

st.set_page_config(page_title="WildLens", layout="wide", page_icon=(  # inline SVG: a data: URL, no request leaves the machine
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><circle cx="10" cy="10" r="6.5" fill="none" '
    'stroke="#2563eb" stroke-width="2.6"/><path d="M15 15l6 6" stroke="#2563eb" stroke-width="2.8" stroke-linecap="round"/></svg>'))
# Before anything else runs: no page, no sidebar and no sample build for a session without the
# password (WILDLENS_PASSWORD, when set; pages/access.py).
note_serving_mode()
require_password()
init_state()
ensure_sample_run()

# url_path differs from each file's stem on purpose: Streamlit's AppTest otherwise mistakes the
# files for an old-style pages/ folder app and runs a page without this entry script.
PAGES = [
    st.Page("pages/runs_page.py", url_path="start", title="Runs", icon=":material/folder_open:", default=True),
    st.Page("pages/query_page.py", url_path="query", title="Query", icon=":material/search:"),
    st.Page("pages/import_page.py", url_path="import", title="Import", icon=":material/drive_folder_upload:"),
    st.Page("pages/images_page.py", url_path="images", title="Images", icon=":material/photo_library:"),
    st.Page("pages/models_page.py", url_path="models", title="Models", icon=":material/memory:"),
    st.Page("pages/results_page.py", url_path="results", title="Results", icon=":material/leaderboard:"),
    st.Page("pages/confusions_page.py", url_path="confusions", title="Confusions", icon=":material/compare_arrows:"),
    st.Page("pages/browse_page.py", url_path="browse", title="Browse", icon=":material/grid_view:"),
    st.Page("pages/image_page.py", url_path="image", title="Image", icon=":material/image:"),
    st.Page("pages/probes_page.py", url_path="probes", title="Probes", icon=":material/show_chart:"),
    st.Page("pages/knowledge_page.py", url_path="knowledge", title="Knowledge", icon=":material/menu_book:"),
    st.Page("pages/explain_page.py", url_path="explain", title="Explain", icon=":material/account_tree:"),
]
# Hidden: the sidebar draws the links itself (pages.run_state.run_selector), each carrying ?run=<current>,
# so that a link opened in a new tab opens the same run (st.navigation's own links carry no query).
# /runs opens the Runs page too: Streamlit serves the default page at "/" only (its url_path is ignored), and
# /runs answered "Page not found" (a fresh look, 2026-12-06). The same script under a second, unlisted Page.
RUNS_AT_ITS_NAME = st.Page("pages/runs_page.py", url_path="runs", title="Runs", icon=":material/folder_open:")
page = st.navigation(PAGES + [RUNS_AT_ITS_NAME], position="hidden")
# The page of the run before, by its URL path (a page that starts a new visit reads its URL again:
# pages/query_page.py); the Page objects are made anew on every run.
st.session_state["_previous_path"] = st.session_state.get("_current_path")
st.session_state["_current_path"] = page.url_path
st.session_state["_current_page"] = page  # links that keep the reader on this page (pages.run_state.require_run)
with st.sidebar:
    run_selector(PAGES)
    view_switch()
    saved_views_sidebar()
    levels_toggle()
freeze_startup_objects()  # once per process (pages/server.py says why)
page.run()
