"""Browse: every image with its predictions, filtered by model, true class, predicted class,
outcome, relation and confidence, and two models compared image by image (issue 12 items 4b, 4c).

The tables come from :mod:`explain.browse` (one row per image and model, its filters and the
two-model comparison); this page only renders them. Filters live in the URL too, so links and
bookmarks work: ``?run=<id>&model=<model id>&true=<wnid>&pred=<wnid>&outcome=mistake|correct``
(and ``relation=``, ``conf_min=``, ``conf_max=``); ``model`` and ``relation`` may repeat. The grid's
page is ``page=``, and the two-model comparison is ``cmp_a=<model>&cmp_b=<model>&cmp_group=<group>``
(one of explain.browse.GROUPS) with its own ``cmp_page=`` (issue 22 item 21). A value at its default
(every model, any class, page 1, the first two models of the Models filter, both_wrong) is left out of the URL; a value
the run lacks or the page cannot take is dropped with a note naming it.
"""
from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from explain.browse import (ANNOTATION_DOCS, COLUMN_DOCS, GROUP_LABELS, GROUPS, OUTCOMES, SORT_LABELS, SORTS, UNMATCHED,
                            card_rows, compare_models, image_mask)
from explain.selection import Selection
from explain.vocabulary import RELATION_MARKDOWN_COLOURS, RELATIONS, relation_help, unmatched
from pages.pictures import THUMBNAIL, grid_thumbnails, show_thumbnail
from pages.tables import NA_DASH, download_csv, percent_rounded, show_table
from pages.reads import (CLAIMS_AUTO_ROWS, browse_rows, class_name, curation, image_codes, image_table,
                         image_table_key, no_predictions_note, paired_test)
from pages.text import error_type_line, escape_markdown, listed, plural
from pages.run_state import (BROWSE_PER_PAGE, RUN_PARAM, VIEW_PARAM, current_view, remember_url, require_run,
                             url_from_outside, write_params)

PER_PAGE = BROWSE_PER_PAGE  # pages.run_state: the Image page's way back finds an image's grid page
GRID_COLUMNS = 4
MAX_TABLE_ROWS = 5_000  # shown on screen; the CSV has every filtered row
URL_KEYS = ("model", "true", "pred", "outcome", "relation", "conf_min", "conf_max", "etype", "tag", "margin_max", "sort",
            "page",
            "cmp_a", "cmp_b", "cmp_group", "cmp_page")
IMAGE_PAGE = "pages/image_page.py"
OUTCOME_LABELS = {"all": "All", "correct": "Correct", "mistake": "Mistakes"}

# Readable headers of explain.browse's tables; the raw names stay in the CSV and in each header's help.
TABLE_LABELS = {"model": "Model", "image": "Image", "true_wnid": "True class id", "true_name": "True class",
                "correct": "Correct", "in_top5": "In top-5", "relation": "Relation", "label_space": "Label space",
                "margin": "Margin", "error_type": "Error type", "error_reason": "Why", "tags": "Tags",
                **{f"pred_wnid_{k}": f"Top-{k} id" for k in range(1, 6)},
                **{f"pred_name_{k}": f"Top-{k}" for k in range(1, 6)},
                **{f"prob_{k}": f"Top-{k} prob." for k in range(1, 6)}}
COMPARE_LABELS = {"group": "Group", "image": "Image", "true_wnid": "True class id", "true_name": "True class",
                  **{f"{side}_{c}": f"{side.upper()} {label}" for side in ("a", "b") for c, label in (
                      ("pred_wnid", "top-1 id"), ("pred_name", "top-1"), ("prob", "prob."), ("correct", "correct"),
                      ("relation", "relation"))}}
COMPARE_DOCS = {"group": "Both wrong, Only A wrong, Only B wrong or Both right (top-1, strict); in the CSV "
                         "both_wrong, only_a_wrong, only_b_wrong, both_right.",
                "image": COLUMN_DOCS["image"], "true_wnid": COLUMN_DOCS["true_wnid"],
                "true_name": COLUMN_DOCS["true_name"],
                **{f"{side}_{c}": f"Model {side.upper()}'s " + text for side in ("a", "b") for c, text in (
                    ("pred_wnid", "top-1 prediction (wnid)."), ("pred_name", "top-1 prediction (ImageNet's name)."),
                    ("prob", "probability of its top-1."), ("correct", "top-1 is the true class (strict)."),
                    ("relation", "WordNet relation of its top-1 to the true class."))}}


def show_predictions(df: pd.DataFrame, docs: dict, labels: dict) -> None:
    """pages.tables.show_table, probabilities as percentages with one decimal (Streamlit's
    'percent' format; a predictions file may have none: an en dash, said in the help)."""
    probs = {c: st.column_config.NumberColumn(
        labels[c], help=f"`{c}`: {docs.get(c, '')}\n\n{NA_DASH} : not stored (a predictions file without "
                        "probabilities or without a top-5).", format="percent", step=0.001)
        for c in df.columns if c.startswith("prob") or c.endswith("_prob")}
    show_table(percent_rounded(df, probs), docs=docs, labels=labels, column_config=probs)


@st.cache_data(max_entries=4, show_spinner=False)
def _options(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str,
             _table) -> tuple[list, list, list]:
    """The models (first appearance), true and top-1 classes (sorted) of the image table, once per
    table: iterating a million rows in Python on every click cost half a second."""
    return ([str(m) for m in pd.unique(_table["model"].dropna())], sorted(_table["true_wnid"].dropna().unique()),
            sorted(_table["pred_wnid_1"].dropna().unique()))


@st.cache_resource(max_entries=8, show_spinner="Comparing the two models…")
def _two_models(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, model_a: str,
                model_b: str, true: str, _table, _image_codes):
    """explain.browse.compare_models of the image table (the true-class filter applied), per pair and
    class: shared, read-only. ``_image_codes``: the table's (pages.reads.image_codes): the images are
    paired by them (1,000,000 predictions: 0.2 -> 0.09 s of the first load)."""
    if not true:
        return compare_models(_table, model_a, model_b, image_codes=_image_codes)
    keep = image_mask(_table, true=true)
    return compare_models(_table[keep].reset_index(drop=True), model_a, model_b, image_codes=_image_codes[keep])


# --------------------------------------------------------------------------- the URL
def _url_state() -> dict:
    """The filters as the URL holds them now (strings), comparable between reruns."""
    return {key: tuple(st.query_params.get_all(key)) for key in URL_KEYS}


def _float(text) -> float | None:
    """A confidence bound or margin from the URL, a fraction in [0, 1]; None (said as a bad value) when it is
    no number, NaN or outside: the sliders read in percent, and conf_min=41 was clipped to 1 silently (a
    hostile check: "No image matches" and no word why)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if 0.0 <= value <= 1.0 else None


def _page_number(text: str, key: str, bad: list[str]) -> int:
    """A page number from the URL (1 when absent); anything but a whole number >= 1 is noted in ``bad``.
    A number past the last page goes back to 1 where the grid is drawn (:func:`paged`)."""
    if not text:
        return 1
    if text.isascii() and text.isdigit() and int(text) >= 1 and len(text) <= 9:
        return int(text)
    bad.append(f"{key}={listed([text], 1)} (a page number from 1)")
    return 1


def _apply_url(url: dict, models: list[str], trues: list[str], preds: list[str]) -> None:
    """Set the filter widgets from a URL that came from outside (a link, a reload, a bookmark);
    values this run lacks are dropped, with a note."""
    notes, bad = [], []
    wanted = [m for m in url["model"] if m]
    chosen = [m for m in wanted if m in models]
    missing = list(dict.fromkeys(m for m in wanted if m not in models))
    if missing:
        notes.append(("model " if len(missing) == 1 else f"{len(missing):,} models: ") + listed(missing))
    st.session_state["browse_models"] = chosen or list(models)
    for key, options, what in (("true", trues, "true class"), ("pred", preds, "predicted class")):
        value = url[key][0] if url[key] else ""
        if value and value not in options:
            notes.append(f"{what} {listed([value], 1)}")
            value = ""
        st.session_state[f"browse_{key}"] = value
    outcome = url["outcome"][0] if url["outcome"] else "all"
    if outcome not in OUTCOMES:
        bad.append(f"outcome={listed([outcome], 1)} (one of {', '.join(OUTCOMES)})")
        outcome = "all"
    st.session_state["browse_outcome"] = outcome
    st.session_state["browse_relations"] = [r for r in RELATIONS if r in url["relation"]]
    odd = list(dict.fromkeys(r for r in url["relation"] if r and r not in RELATIONS))
    if odd:
        bad.append(f"relation={listed(odd)} (one of {', '.join(RELATIONS)})")
    bounds = []
    for key, default in (("conf_min", 0.0), ("conf_max", 1.0)):
        text = url[key][0] if url[key] else ""
        value = _float(text) if text else default
        if value is None:  # 'conf_min=abc': said, never a traceback, and the bound left open
            bad.append(f"{key}={listed([text], 1)} (a fraction from 0 to 1, e.g. 0.41 for 41%)")
            value = default
        bounds.append(value)
    low, high = bounds
    st.session_state["browse_conf"] = (min(low, high), max(low, high))
    from explain.error_types import ERROR_TYPES

    st.session_state["browse_etypes"] = [e for e in ERROR_TYPES if e in url["etype"]]
    odd = list(dict.fromkeys(e for e in url["etype"] if e and e not in ERROR_TYPES))
    if odd:
        bad.append(f"etype={listed(odd)} (one of {', '.join(ERROR_TYPES)})")
    st.session_state["browse_tags"] = list(dict.fromkeys(t for t in url["tag"] if t))
    order = url["sort"][0] if url["sort"] else "class"
    if order not in SORTS:
        bad.append(f"sort={listed([order], 1)} (one of {', '.join(SORTS)})")
        order = "class"
    st.session_state["browse_sort"] = order
    text = url["margin_max"][0] if url["margin_max"] else ""
    margin = _float(text) if text else 1.0
    if margin is None:
        bad.append(f"margin_max={listed([text], 1)} (a fraction from 0 to 1, e.g. 0.41 for 41%)")
        margin = 1.0
    st.session_state["browse_margin"] = margin
    st.session_state["browse_page_no"] = _page_number(url["page"][0] if url["page"] else "", "page", bad)
    # The comparison: two different models of the run (a missing one named, the default kept), a group.
    for key in ("cmp_a", "cmp_b"):
        value = url[key][0] if url[key] else ""
        if value and value not in models:
            notes.append(f"model {listed([value], 1)}")
            value = ""
        if value and key == "cmp_b" and value == st.session_state.get("cmp_a"):
            bad.append(f"cmp_b={listed([value], 1)} (a model other than cmp_a)")
            value = ""
        if value:
            st.session_state[key] = value
        else:
            st.session_state.pop(key, None)  # _keep_valid puts the default back
    group = url["cmp_group"][0] if url["cmp_group"] else ""
    if group and group not in GROUPS:
        bad.append(f"cmp_group={listed([group], 1)} (one of {', '.join(GROUPS)})")
        group = ""
    st.session_state["cmp_group"] = group or GROUPS[0]
    st.session_state["cmp_page_no"] = _page_number(url["cmp_page"][0] if url["cmp_page"] else "", "cmp_page", bad)
    if notes or bad:
        # Outside text from the URL: escaped, each list cut short (one line, whatever the link holds).
        text = ("The link names what this run has no predictions of: " + ", ".join(notes) + ". " if notes else "") \
            + (f"Not a value these filters take: {'; '.join(bad)}. " if bad else "")
        st.warning(escape_markdown(text) + "Showing the rest.", icon=":material/link_off:")


def _write_params(values: dict) -> None:
    """Put ``values`` in the URL (an empty one: its key removed) and remember the URL as written,
    so that the next rerun tells a link from outside from what the page wrote itself."""
    write_params(values)  # one history step for the whole change
    remember_url("browse", _url_state())


def _changed_here(state_key: str, values: dict, own_change: bool) -> bool:
    """Did the page's own widgets change ``values`` since the last run (remembered under ``state_key``)? Not
    on a link, a reload or Back (``own_change`` False), nor on the first run."""
    last, st.session_state[state_key] = st.session_state.get(state_key), dict(values)
    return own_change and last is not None and last != values


def _write_url(selection: Selection, *, own_change: bool) -> None:
    """The grid's selection (explain.selection) in the URL, the Browse page's own keys. A filter changed
    on the page (``own_change``: not a link, a reload or Back) puts both grids on their first page in
    the same URL: one step of the browser's history (clamped further down, the page was a second step)."""
    params = selection.params()
    values = {key: params.get(key, []) if key in ("model", "relation", "etype", "tag") else
              (params.get(key) or [""])[0] for key in ("model", "true", "pred", "outcome", "relation", "conf_min",
                                                        "conf_max", "etype", "tag", "margin_max", "sort")}
    if _changed_here("_browse_filters", values, own_change):
        st.session_state["browse_page_no"] = st.session_state["cmp_page_no"] = 1
        values.update(page="", cmp_page="")
    _write_params(values)


def _keep_valid(key: str, options: list, default) -> None:
    """A widget's stored value that the current options lack (another run was picked) goes back to the default."""
    value = st.session_state.get(key, default)
    if isinstance(default, list):
        value = [v for v in value if v in options]
    elif value not in options:
        value = default
    st.session_state[key] = value


# --------------------------------------------------------------------------- rendering
def _name(wnid) -> str:
    if wnid is None or pd.isna(wnid):
        return NA_DASH
    return class_name(str(wnid), label_space)


def _coloured(text: str, relation) -> str:
    colour = RELATION_MARKDOWN_COLOURS.get(relation) if isinstance(relation, str) else None
    return f":{colour}[{text}]" if colour else text


def _prob(value) -> str:
    return NA_DASH if value is None or pd.isna(value) else f"{float(value):.1%}"


def _prediction_line(row) -> str:
    """'✓ model: tabby 87%' in the relation's colour (outside text escaped); a row the filters did
    not match (explain.browse.card_rows) in italics, without its relation's colour, and says so."""
    mark = "✓" if row["correct"] is True else "✗"
    text = f"{escape_markdown(_name(row['pred_wnid_1']))} {_prob(row['prob_1'])}"
    if not row["matched"]:
        return unmatched(f"{mark} {escape_markdown(row['model'])}: {text} · {UNMATCHED}")
    return f"{mark} {escape_markdown(row['model'])}: {_coloured(text, row['relation'])}"


def _top5(row) -> str:
    parts = [f"{k}\\. {escape_markdown(_name(row[f'pred_wnid_{k}']))} {_prob(row[f'prob_{k}'])}"
             for k in range(1, 6) if not pd.isna(row[f"pred_wnid_{k}"])]
    return "  \n".join(parts) or "no top-5 stored"


def image_grid(images: pd.DataFrame, cards: pd.DataFrame, selection: Selection | None = None) -> None:
    """A grid of images (``image``, ``true_wnid`` columns), each with its true class and its rows of
    ``cards`` (explain.browse.card_rows: what the filters matched first, then the chosen models'
    other predictions of the image, in italics): the top-1 (its relation's colour) and, in an
    expander, the top-5; its tags and its matched mistakes' error types (:func:`error_type_line`); and a
    link that opens it on the Image page inside ``selection``."""
    by_image: dict[str, list[dict]] = {}
    for record in cards.to_dict("records"):  # once: a frame's to_dict per card cost 6 ms each
        by_image.setdefault(record["image"], []).append(record)
    thumbnails = grid_thumbnails(run, images["image"].astype(str), THUMBNAIL) if has_files else {}
    for start in range(0, len(images), GRID_COLUMNS):
        cols = st.columns(GRID_COLUMNS)
        for col, item in zip(cols, images.iloc[start:start + GRID_COLUMNS].itertuples(index=False)):
            with col.container(border=True):
                if has_files:
                    show_thumbnail(run, str(item.image), thumbnails)
                st.markdown(f"**{escape_markdown(_name(item.true_wnid))}**")
                rows = by_image.get(item.image, [])
                st.caption("  \n".join(_prediction_line(r) for r in rows) or "No prediction of the chosen models.")
                line, reasons = error_type_line(rows)
                if line:  # the reasons on hover (help), as the issue asks, and in the table and CSV below
                    st.caption(escape_markdown(line), help=escape_markdown(reasons) or None)
                tagged = [r["tags"] for r in rows[:1] if isinstance(r.get("tags"), str)]
                if tagged:
                    st.caption(escape_markdown(f"tags: {tagged[0]}"))
                if selection is not None:
                    image_link(selection, "Open", item.image)
                with st.expander("Top-5"):
                    st.caption(f"{escape_markdown(item.image)}  \n" + "  \n".join(
                        f"**{escape_markdown(r['model'])}**" + ("" if r["matched"] else f" ({UNMATCHED})")
                        + f"  \n{_top5(r)}" for r in rows))


def paged(count: int, key: str, param: str) -> slice:
    """The rows of one page of ``count``; the page number (widget ``key``) goes to the URL as ``param``."""
    pages = max(1, -(-count // PER_PAGE))
    if st.session_state.get(key, 1) > pages:
        if url_applied:  # a link's page past the end is said (a UI review: page=99 showed page 1 without a word)
            st.caption(escape_markdown(f"The link's {param}={st.session_state[key]} is past the last page ({pages}): "
                                       "showing the first."))
        st.session_state[key] = 1
    if pages > 1:
        left, right = st.columns([1, 4], vertical_alignment="bottom")
        page = left.number_input("Page", 1, pages, key=key)
    else:
        page, right = 1, st
    _write_params({param: str(page) if page > 1 else ""})
    first = (page - 1) * PER_PAGE
    right.caption(f"Images {first + 1}–{min(first + PER_PAGE, count)} of {count:,}.")
    return slice(first, first + PER_PAGE)


def image_link(selection: Selection, label: str, image: str | None = None, icon: str = ":material/open_in_full:") -> None:
    """A link to the Image page: ``selection`` (explain.selection) in its URL, opened on ``image``."""
    params = {RUN_PARAM: run.run_id, **({VIEW_PARAM: st.query_params[VIEW_PARAM]} if VIEW_PARAM in st.query_params
                                        else {}), **selection.params()}
    if image:
        params["open"] = image
    st.page_link(IMAGE_PAGE, label=label, icon=icon, query_params=params)


def bulk_curation(images: list[str]) -> None:
    """Tag, exclude or include every image the filters matched, as one entry of the run's curation
    log (core.curation; one undo takes it back). Relabelling a whole selection is on the Image page."""
    from core.curation import BUILTIN_TAGS, CurationError, record
    from core.errors import one_line

    with st.expander("Curate this image" if len(images) == 1 else f"Curate these {plural(len(images), 'image')} at once"):
        st.caption("One entry of the run's curation log names them all (an undo on the Image page takes it back); "
                   "images and the manifest are never changed. The curated view and Results show the effect.")
        left, right = st.columns([2, 3], vertical_alignment="bottom")
        tag = left.selectbox("Tag", BUILTIN_TAGS, key="bulk-browse-tag")
        note = right.text_input("Note", key="bulk-browse-note", max_chars=500, placeholder="why, in one line")
        c1, c2, c3 = st.columns(3)
        action = ("tag" if c1.button(f"Tag them {tag}", key="bulk-browse-tag-go", icon=":material/sell:") else
                  "exclude" if c2.button("Exclude them", key="bulk-browse-exclude", icon=":material/block:") else
                  "include" if c3.button("Include them", key="bulk-browse-include") else None)
        if action:
            try:
                entry = record(run, action, images, tag if action == "tag" else None, note=note, by="dashboard",
                               known_images=set(table["image"].dropna()))
            except CurationError as exc:
                st.error(escape_markdown(one_line(exc)), icon=":material/error:")
            else:
                st.toast(escape_markdown(f"Recorded {entry.describe()}"), icon=":material/check:")
                st.rerun()


# --------------------------------------------------------------------------- the page
st.title("Browse")
run = require_run()
label_space = run.info.label_space or "imagenet-1k"
view = current_view(run)
image_key = image_table_key(run, view)  # the run's fingerprints, read once for this rerun
table = image_table(run, view, key=image_key)  # pages.reads: explain.browse.image_table of the view, annotated
if table.empty:
    no_predictions_note(run, view)
    st.stop()
has_files = run.images_dir.is_dir() and next(run.images_dir.iterdir(), None) is not None  # uploaded: none

table_key = (*image_key[:4], curation(run).fingerprint)  # (run, predictions, manifest, view: read once above)
all_models, true_options, pred_options = _options(*table_key, table)
names = {w: _name(w) for w in set(true_options) | set(pred_options)}

url = _url_state()
url_applied = url_from_outside("browse", url)
if url_applied:
    _apply_url(url, all_models, true_options, pred_options)
_keep_valid("browse_models", all_models, list(all_models))
_keep_valid("browse_true", ["", *true_options], "")
_keep_valid("browse_pred", ["", *pred_options], "")
_keep_valid("browse_outcome", list(OUTCOMES), "all")
_keep_valid("browse_relations", list(RELATIONS), [])
st.session_state.setdefault("browse_conf", (0.0, 1.0))

c1, c2, c3 = st.columns([2.5, 1, 1])  # three model tags and the clear icon fit at 1,400 px (a UI review)
models = c1.multiselect("Models", all_models, key="browse_models")
true = c2.selectbox("True class", ["", *true_options], key="browse_true",
                    format_func=lambda w: f"{names[w]} ({w})" if w else "Any true class")
pred = c3.selectbox("Predicted class (top-1)", ["", *pred_options], key="browse_pred",
                    format_func=lambda w: f"{names[w]} ({w})" if w else "Any prediction")
c4, c5, c6 = st.columns([1, 2, 1])
outcome = c4.radio("Outcome", list(OUTCOMES), key="browse_outcome", horizontal=True, format_func=OUTCOME_LABELS.get)
relations = c5.multiselect("Relation of the top-1 to the true class", list(RELATIONS), key="browse_relations",
                           placeholder="Any relation", help=relation_help(markdown=False))
conf = c6.slider("Top-1 confidence", 0.0, 1.0, step=0.01, key="browse_conf", format="percent")  # as the cards read
from explain.error_types import ERROR_TYPES  # noqa: E402

tag_options = sorted(set(st.session_state.get("browse_tags", [])) | {t for value in table["tags"].dropna().unique()
                                                                      for t in str(value).split("; ")})
_keep_valid("browse_etypes", list(ERROR_TYPES), [])
_keep_valid("browse_tags", tag_options, [])
_keep_valid("browse_sort", list(SORTS), "class")
st.session_state.setdefault("browse_margin", 1.0)
c7, c8, c9, c10 = st.columns([2, 1, 1, 1.3])  # the Order box holds "True class, then image" whole
etypes = c7.multiselect("Error type of the mistake", list(ERROR_TYPES), key="browse_etypes",
                        placeholder="Any error type", help=ANNOTATION_DOCS["error_type"])
chosen_tags = c8.multiselect("Tag", tag_options, key="browse_tags", placeholder="Any tag",
                             help=ANNOTATION_DOCS["tags"])
margin = c9.slider("Top-1 margin at most", 0.0, 1.0, step=0.01, key="browse_margin", help=ANNOTATION_DOCS["margin"],
                   format="percent")
order = c10.selectbox("Order", list(SORTS), key="browse_sort", format_func=SORT_LABELS.get)
selection = Selection(source="browse", models=() if set(models) == set(all_models) else tuple(models), true=true,
                      pred=pred, outcome=outcome, relations=tuple(relations),
                      conf_min=conf[0] if conf[0] > 0 else None, conf_max=conf[1] if conf[1] < 1 else None,
                      error_types=tuple(etypes), tags=tuple(chosen_tags),
                      margin_max=margin if margin < 1 else None, sort=order)
_write_url(selection, own_change=not url_applied)
from pages.run_state import save_view_form  # noqa: E402

save_view_form("browse", {k: v for k, v in selection.params().items() if k != "src"}
               | ({VIEW_PARAM: [st.query_params[VIEW_PARAM]]} if VIEW_PARAM in st.query_params else {}),
               key="browse-save")
st.caption(relation_help())

# pages.reads: explain.browse's filters and selection_images of the table, cached per filters (a
# rerun with the same filters, a page turned, filters nothing again); the rows stay positions.
filtered = browse_rows(image_key, models=models, true=true, pred=pred, outcome=outcome, relations=relations,
                       conf_min=conf[0] if conf[0] > 0 else None, conf_max=conf[1] if conf[1] < 1 else None,
                       error_types=etypes, tags=chosen_tags, margin_max=margin if margin < 1 else None, sort=order)

# ------------------------------------------------------------------ the images
st.subheader("Images")
if not models:
    st.info("Pick at least one model.")
elif filtered.empty:
    st.info("No image matches these filters.")
else:
    images = filtered.images  # the Image page pages through them in this order
    image_link(selection, "Open this image" if len(images) == 1 else  # a UI review: "these 1 image"
               f"Page through these {plural(len(images), 'image')} one by one", images["image"].iloc[0])
    st.caption(f"{plural(len(filtered), 'prediction')} of {plural(len(images), 'image')} "
               f"{'matches' if len(filtered) == 1 else 'match'}. Each image shows, "
               "per chosen model, its top-1 (✓ right, ✗ wrong; coloured by relation) and, under Top-5, its five best "
               f"guesses: first the predictions the filters matched, then, in italics and marked “{UNMATCHED}”, the "
               "chosen models' other predictions of the same image.")
    if not has_files:
        st.info("This run has no image files (its predictions were uploaded): the table below lists them.",
                icon=":material/hide_image:")
    else:
        shown = images.iloc[paged(len(images), "browse_page_no", "page")]
        image_grid(shown, card_rows(*filtered.of_images(shown["image"]), shown["image"], models), selection)

    if not filtered.empty and has_files:
        bulk_curation(images["image"].astype(str).tolist())

# ------------------------------------------------------------------ the table
st.subheader("Predictions per image")
if len(filtered) > MAX_TABLE_ROWS:
    st.caption(f"The first {MAX_TABLE_ROWS:,} of {len(filtered):,} rows; the CSV has them all.")
show_predictions(filtered.head(MAX_TABLE_ROWS), COLUMN_DOCS, TABLE_LABELS)
download_csv(filtered.frame, f"{run.run_id}_images.csv", key="dl-browse", label_space=label_space)

# ------------------------------------------------------------------ two models, image by image
st.subheader("Compare two models")
if len(all_models) < 2:
    from pages.reads import predictions_only

    st.caption("Comparing needs two models; " + ("the uploaded predictions hold one (a run without images: no model "
                                                 "can be run on it)." if predictions_only(run) else
                                                 "this run has one. Run another on the Models page."))
    st.stop()
# A and B default to the first two models of the Models filter above when it names two or more (a UI review: with
# lite0 and lite2 chosen, the comparison showed lite0 against lite1, a model filtered out); else the run's first two.
# A model at its default follows the filter's change (on a link or on this page: the defaults of the last run are
# remembered); one picked in its box stays, and is written to the URL as it is no default.
picked = [m for m in models if m in all_models] if len(models) >= 2 else []
default_a = picked[0] if picked else all_models[0]
if url_applied:  # a link's, a reload's or Back's A and B decide (applied above): none follows a default here
    st.session_state.pop("_cmp_default_a", None), st.session_state.pop("_cmp_default_b", None)
if st.session_state.get("cmp_a") == st.session_state.get("_cmp_default_a"):
    st.session_state.pop("cmp_a", None)
_keep_valid("cmp_a", all_models, default_a)
ca, cb, cc = st.columns([1, 1, 2])
model_a = ca.selectbox("Model A", all_models, key="cmp_a")
others = [m for m in all_models if m != model_a]
default_b = next((m for m in picked if m != model_a), others[0])
if st.session_state.get("cmp_b") == st.session_state.get("_cmp_default_b"):
    st.session_state.pop("cmp_b", None)
_keep_valid("cmp_b", others, default_b)
st.session_state["_cmp_default_a"], st.session_state["_cmp_default_b"] = default_a, default_b
model_b = cb.selectbox("Model B", others, key="cmp_b")
comparison = _two_models(*table_key, model_a, model_b, true, table, image_codes(image_key))
where = f" of {escape_markdown(names[true])}" if true else ""
cc.caption(f"A = {escape_markdown(model_a)}, B = {escape_markdown(model_b)}: top-1, strict, on the "
           f"{plural(comparison.n_images, 'image')}{where} that both predicted (the true-class filter above applies, "
           "the others do not).")
counts = comparison.counts
for col, group in zip(st.columns(len(GROUPS)), GROUPS):
    col.metric(GROUP_LABELS[group], f"{counts[group]:,}")


def mcnemar_line(model_a: str, model_b: str, true: str) -> str:
    """The exact McNemar test of the two models (explain.compare.compare_models via pages.reads): over
    every paired image, or the true class's row when that filter is set; its b, c, p (q) and verdict."""
    from core.errors import WildLensError
    from explain.uncertainty import A_BETTER, B_BETTER

    try:
        tested = paired_test(run, model_a, model_b)
    except WildLensError as exc:
        from core.errors import one_line

        return f"No paired test: {escape_markdown(one_line(exc))}"
    rows = tested[tested["true_wnid"] == true] if true else tested[tested["scope"] == "overall"]
    if rows.empty:
        return "No paired test: no image of this class was classified by both."
    row = rows.iloc[0]
    p = NA_DASH if pd.isna(row["p"]) else f"{float(row['p']):.2g}"
    q = "" if not true or pd.isna(row["q"]) else f", q = {float(row['q']):.2g} over the classes"
    verdict = str(row["verdict"])
    named = {A_BETTER: f"A ({model_a}) more accurate", B_BETTER: f"B ({model_b}) more accurate"}.get(verdict, verdict)
    return (f"**Exact McNemar test** (top-1, strict; {plural(int(row['n']), 'paired image')}{where}): "
            f"b = {int(row['a_only_correct']):,} only B wrong (A right), "  # the radio's words below
            f"c = {int(row['b_only_correct']):,} only A wrong (B right), "
            f"p = {p}{q}: **{escape_markdown(named)}**.")


if len(table) > CLAIMS_AUTO_ROWS and not st.toggle(
        "Exact McNemar test of A and B", key="mcnemar-on",
        help=f"{len(table):,} predictions: the paired comparison (explain.compare, every statistic with its "
             "bootstrap) takes a few seconds the first time for each pair, then it is cached."):
    st.caption("Turn on for the exact McNemar test of the two models (as on the Results page, the paired tests of a "
               "run this large are computed when asked).")
else:
    st.markdown(mcnemar_line(model_a, model_b, true))
_keep_valid("cmp_group", list(GROUPS), "both_wrong")
group = st.radio("Show", list(GROUPS), key="cmp_group", horizontal=True,
                 format_func=lambda g: f"{GROUP_LABELS[g]} ({counts[g]:,})")
compared = {"cmp_a": "" if model_a == default_a else model_a, "cmp_b": "" if model_b == default_b else model_b,
            "cmp_group": "" if group == GROUPS[0] else group}
if _changed_here("_browse_compared", compared, not url_applied):  # as _write_url: one step
    st.session_state["cmp_page_no"] = 1
    compared["cmp_page"] = ""
_write_params(compared)
chosen = comparison.group(group)
if chosen.empty:
    st.caption("No image in this group.")
else:
    if has_files:
        shown = chosen.iloc[paged(len(chosen), "cmp_page_no", "cmp_page")]
        pair = Selection(source="compare", true=true, compare=(model_a, model_b, group))
        image_grid(shown, card_rows(filtered.of_images(shown["image"])[0], None, shown["image"], [model_a, model_b]),
                   pair)
    view = chosen.head(MAX_TABLE_ROWS)  # the group as the radio names it; the CSV keeps its raw value
    show_predictions(view.assign(group=view["group"].map(GROUP_LABELS)), COMPARE_DOCS, COMPARE_LABELS)
safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model_a}_vs_{model_b}")
download_csv(comparison.images, f"{run.run_id}_compare_{safe}.csv", key="dl-compare", label_space=label_space)
