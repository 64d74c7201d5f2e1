"""Image: one image full size with every model's top-5, its provenance, near duplicates and
curation history; next / previous through the selection it was opened from (buttons, and the
left / right arrow keys); and its curation: tags, relabel to any WordNet noun, exclude / include,
for this image or the whole selection at once (issue 24 items 1 and 2).

The selection and the open image live in the URL (explain.selection: ``src=`` and the grid's own
filters, ``open=<image>``), so a reload or a shared link opens the same image in the same order.
Curation goes to the run's append-only log (core.curation.record, under the run's lock: the
command line's ``python -m crawl curate`` and this page never lose each other's entries); images
and the manifest are never changed. Everything shown is computed in explain.image_view and
explain.selection; outside text (class names from a hand-made run, tags, notes, URLs, search terms)
is escaped, and a URL is shown as text, never as a link.
"""
from __future__ import annotations

import io

import pandas as pd
import streamlit as st

from core.curation import BUILTIN_TAGS, TAG_HELP, CurationError, record, undo
from core.errors import WildLensError, one_line, printable
from explain.browse import BrowseError
from explain.curation_view import CURATED, RAW
from explain.image_view import history, model_rows, near_duplicates, provenance
from explain.selection import SOURCE_LABELS, Selection, describe
from explain.vocabulary import RELATION_MARKDOWN_COLOURS, relation_help
from pages.reads import (class_name, curation, image_table, image_table_key, known_images as known_image_names,
                         manifest, no_predictions_note, resolve_selection)
from pages.run_state import (BROWSE_GRID_PAGE_PARAM, BROWSE_PER_PAGE, RESULTS_SEGMENT, RESULTS_STATE, RUN_PARAM,
                             VIEW_PARAM, carried_back_params, current_view, require_run, returned_params, write_params)
from pages.pictures import file_version, say_no_file, stored_picture
from pages.tables import NA_DASH
from pages.text import escape_markdown, listed, plural

PAGE = "pages/image_page.py"
SOURCE_PAGES = {"browse": "pages/browse_page.py", "pair": "pages/confusions_page.py",
                "compare": "pages/browse_page.py", "issues": "pages/images_page.py", "list": "pages/probes_page.py"}
RESULTS_PAGE = "pages/results_page.py"  # the way back of a Results segment's images (its back_ parameters)
MAX_SIDE = 1600  # pixels: larger pictures are shown scaled down (the file itself is never changed)


def _name(wnid) -> str:
    if wnid is None or pd.isna(wnid):
        return NA_DASH
    return class_name(str(wnid), label_space)


def _named(wnid) -> str:
    """'tiger cat (n02123159)', escaped for Markdown."""
    return escape_markdown(f"{_name(wnid)} ({wnid})")


@st.cache_data(max_entries=64, show_spinner=False)
def _picture(path: str, version: tuple) -> tuple[bytes | None, str]:
    """(JPEG bytes of the whole picture, at most MAX_SIDE pixels a side, or None if it cannot be
    decoded; its size as text); cached per :func:`pages.pictures.file_version`."""
    from core.imageio import ImageLoadError, load_rgb, read_image_file

    try:  # read as inference reads files: a regular file of at most MAX_IMAGE_BYTES (a 1 GiB one was read whole)
        picture = load_rgb(read_image_file(path))
    except ImageLoadError as exc:
        return None, one_line(exc)
    size = f"{picture.width} × {picture.height} pixels"
    picture.thumbnail((MAX_SIDE, MAX_SIDE))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=90)
    return out.getvalue(), size


def _show_picture(image: str, width="native") -> None:
    """The image at its own size (a larger one fits the column), its file and size below; ``width``
    in pixels for a small copy."""
    path = stored_picture(run, image)
    if path is None:
        return
    try:
        version = file_version(path)
    except OSError:  # gone since it was found: as a missing file
        say_no_file(image)
        return
    data, size = _picture(str(path), version)
    if data is None:
        st.caption(f"Cannot decode {escape_markdown(image)}: {escape_markdown(size)}")
    elif width == "native":
        # "content": its own size, never wider than the column (a width in pixels overflowed it: a 512-pixel photo
        # covered the curation controls beside it; a UI review).
        st.image(data, width="content", caption=escape_markdown(f"{image} · {size}"))
    else:
        st.image(data, width=width)


def _open(image: str) -> None:
    """Open ``image`` of the selection: the URL says so, the page draws it."""
    write_params({"open": image})
    st.rerun()


def _record(action: str, images, value=None) -> None:
    """One curation entry (core.curation.record); a refusal is its one line, nothing else changes."""
    try:
        entry = record(run, action, images, value, note=st.session_state.get("curation-note", ""), by="dashboard",
                       known_images=known_images)
    except WildLensError as exc:
        st.session_state["_curation_error"] = one_line(exc)
    else:
        st.session_state["_curation_done"] = entry.describe()
        st.session_state.pop("curation-note", None)
    st.rerun()


# --------------------------------------------------------------------------- the page
st.title("Image")
run = require_run()
label_space = run.info.label_space or "imagenet-1k"
view = current_view(run)
table_key = image_table_key(run, view)  # the run's fingerprints, read once for this rerun
table = image_table(run, view, key=table_key)
if table.empty:
    no_predictions_note(run, view)
    st.stop()
selection, notes = Selection.from_params(st.query_params.get_all)
# What the selection is, in words; the link's values are outside text: cut, control characters as escapes (a hostile
# check: a 100 KB true= was echoed whole, a right-to-left override reversed the line).
described = printable(describe(selection, _name))
described = described if len(described) <= 300 else described[:299] + "…"
if notes:
    st.warning("Not a value this selection takes: " + escape_markdown(printable("; ".join(notes)))
               + ". Showing the rest.",
               icon=":material/link_off:")
# Models the link names that the run has none of: said, as Results and Browse say it (a hostile check: the page said
# only that no image was in the selection).
named = [m for m in (selection.compare[:2] if selection.source == "compare" else selection.models) if m]
models_here = table["model"].cat.categories if isinstance(table["model"].dtype, pd.CategoricalDtype) \
    else table["model"].unique()
unknown = [m for m in named if m not in set(models_here)]
if unknown:
    st.warning(escape_markdown(f"The link names {listed(unknown)}: {'a model' if len(unknown) == 1 else 'models'} "
                               "this run has no predictions of."), icon=":material/link_off:")
try:
    images = resolve_selection(run, table_key, selection)  # pages.reads: explain.selection.resolve, cached per selection
except BrowseError as exc:
    st.error(escape_markdown(one_line(exc)), icon=":material/error:")
    st.stop()
state = curation(run)
known_images = known_image_names(table_key)  # pages.reads: the table's and the manifest's, cached

for key, show in (("_curation_error", st.error), ("_curation_done", st.toast)):
    message = st.session_state.pop(key, None)
    if message:
        show(escape_markdown(("Recorded " if key == "_curation_done" else "") + message),
             icon=":material/error:" if key == "_curation_error" else ":material/check:")

order = images["image"].astype(str).tolist()
wanted = st.query_params.get("open")
# Where the reader is in the selection, remembered per selection: an image relabelled or excluded here
# leaves the selection, stays open, and Next goes on from its place.
place_key = "_image_place-" + "&".join(f"{k}={v}" for k, values in sorted(selection.params().items()) for v in values)
outside = bool(wanted) and wanted not in order and wanted in known_images
if not order and not outside:
    st.info(f"No image in this selection ({escape_markdown(described)}).")
    st.stop()
if outside:
    image = wanted
    place = min(st.session_state.get(place_key, 0), len(order))  # the selection's image now at its place
    previous, following = (order[place - 1] if place > 0 else None), (order[place] if place < len(order) else None)
else:
    position = order.index(wanted) if wanted in order else 0
    image = order[position]
    st.session_state[place_key] = position
    previous = order[position - 1] if position > 0 else None
    following = order[position + 1] if position + 1 < len(order) else None
if wanted and wanted != image:  # a link to an image the run does not have: said, not silently replaced
    st.warning(escape_markdown(f"The link opens {listed([wanted], 1)}, which this run has no image of; showing the "
                               "selection's first image instead."), icon=":material/link_off:")
if wanted != image:
    write_params({"open": image})

# ------------------------------------------------------------------ paging
back_page = SOURCE_PAGES[selection.source]
# The page that opened this one gave its whole state (back_ parameters): that is the way back; else the selection.
# Confusions gives it on a pair, naming at least its class and model; Results on its segment's images (Browse's
# filters), naming the segment (RESULTS_SEGMENT; they went back to Browse: a leftover of a UI review). Nothing else
# (a hostile check: any back_ parameter replaced the way back, a lone back_bars landing on the first class, and
# src=browse took Confusions' keys to Browse).
returned = returned_params()
# Each named with a value: Streamlit keeps a blank one (a code review: back_segment= went back to Results).
to_results = selection.source == "browse" and all(any(returned.get(key, ())) for key in RESULTS_SEGMENT)
nav = st.columns([1.3, 1.3, 4, 2], vertical_alignment="center")
if nav[0].button("Previous", icon=":material/chevron_left:", shortcut="Left", disabled=previous is None,
                 key="image-previous", width="stretch"):
    _open(previous)
if nav[1].button("Next", icon=":material/chevron_right:", shortcut="Right", disabled=following is None,
                 key="image-next", width="stretch"):
    _open(following)
where = (f"**Not in this selection now** (relabelled, excluded or opened from a link); {plural(len(order), 'image')}"
         if outside else f"**Image {position + 1:,} of {len(order):,}**")
nav[2].markdown(f"{where} · {escape_markdown(described)} "
                f"({'a Results segment' if to_results else SOURCE_LABELS[selection.source]}, {view} view)")
if selection.source == "pair" and {"true", "model"} <= returned.keys():
    back = returned
elif to_results:
    back_page, back = RESULTS_PAGE, {k: v for k, v in returned.items() if k in RESULTS_STATE}
else:
    back = {k: v for k, v in selection.params().items() if k not in ("src", "img")}
# Browse's grid opens on the page that holds this image (the grid and this page share one order); an image outside
# the selection now (relabelled, excluded) has no grid page: the grid's first.
if selection.source in BROWSE_GRID_PAGE_PARAM and not to_results and not outside and position >= BROWSE_PER_PAGE:
    back = {**back, BROWSE_GRID_PAGE_PARAM[selection.source]: str(position // BROWSE_PER_PAGE + 1)}
nav[3].page_link(back_page, label="Back to Results" if to_results else "Back to the grid",
                 icon=":material/bar_chart:" if to_results else ":material/grid_view:",
                 query_params={RUN_PARAM: run.run_id, **({VIEW_PARAM: st.query_params[VIEW_PARAM]}
                                                        if VIEW_PARAM in st.query_params else {}), **back})
note_col, save_col = st.columns([4, 1], vertical_alignment="center")
note_col.caption("← and → page through the selection (when no text box has the focus).")
with save_col:
    from pages.run_state import save_view_form

    save_view_form("image", {**selection.params(), "open": [image]}
                   | ({VIEW_PARAM: [st.query_params[VIEW_PARAM]]} if VIEW_PARAM in st.query_params else {}),
                   key="image-save")

rows = model_rows(table, image)
stored_truth = str(manifest(run).set_index("file")["wnid"].get(image, rows["true_wnid"].iloc[0] if len(rows) else ""))
truth = str(rows["true_wnid"].iloc[0]) if len(rows) else stored_truth
relabel = state.relabels.get(image)
tags = sorted(state.tags.get(image, ()))
excluded = image in state.excluded

# ------------------------------------------------------------------ the picture and its curation
left, right = st.columns([1, 1], gap="large")
with left:
    _show_picture(image)
with right:
    st.markdown(f"**True class**: {_named(truth)}")
    if relabel and relabel != stored_truth:
        st.caption(f"Relabelled from {_named(stored_truth)}" + ("" if view == CURATED else
                                                                 f" to {_named(relabel)} (raw view: stored class shown)"))
    status = [f"excluded from the curated metrics" if excluded else "", ("tags: " + ", ".join(tags)) if tags else ""]
    st.caption(escape_markdown(" · ".join(s for s in status if s)) or "Not curated.")

    bulk = st.toggle(f"Apply to the whole selection ({plural(len(order), 'image')})", key="curate-bulk",
                     help="On: the actions below record one entry naming every image of the selection; off: this "
                          "image only. Either way one undo takes the entry back.")
    targets = order if bulk else [image]
    st.text_input("Note (kept with the next action)", key="curation-note", max_chars=500,
                  placeholder="why, in one line")

    st.markdown("**Tags**")
    present = [t for t in BUILTIN_TAGS if t in tags] if not bulk else []
    # Keyed by the log's fingerprint: after any entry (an undo, another tab) the pills start from the log again.
    picked = st.pills("Tags", BUILTIN_TAGS, selection_mode="multi", default=present,
                      key=f"tags-{image}-{bulk}-{state.fingerprint}",
                      label_visibility="collapsed", wrap=True,  # in a column they scrolled, the last one cut off
                      help="; ".join(f"{t}: {TAG_HELP[t]}" for t in BUILTIN_TAGS))
    if not bulk:
        added = [t for t in picked if t not in present]
        removed = [t for t in present if t not in picked]
        if added:
            _record("tag", targets, added[0])
        if removed:
            _record("untag", targets, removed[0])
    else:
        bulk_tag = picked[0] if picked else None
        if bulk_tag and st.button(f"Tag {plural(len(targets), 'image')} {bulk_tag}", key="bulk-tag"):
            _record("tag", targets, bulk_tag)
    free = [t for t in tags if t not in BUILTIN_TAGS]
    if free:
        st.caption("Own tags: " + escape_markdown(", ".join(free)))
    # A form, so Enter in the box adds the tag as the button does (a UI review: Enter did nothing).
    with st.form(key=f"own-tag-form-{image}-{state.fingerprint}", border=False, enter_to_submit=True):
        own_left, own_right = st.columns([3, 1], vertical_alignment="bottom")
        own = own_left.text_input("A tag of your own", key=f"own-tag-{image}-{state.fingerprint}", max_chars=40,
                                  placeholder="e.g. watermark")
        added = own_right.form_submit_button("Add")
    if added and own.strip():
        _record("tag", targets, own)
    if free and not bulk:
        drop = st.selectbox("Remove an own tag", [""] + free, key=f"own-untag-{image}-{state.fingerprint}",
                            format_func=lambda t: t or "…")
        if drop:
            _record("untag", targets, drop)

    st.markdown("**Relabel**")
    query = st.text_input("Search WordNet for the right class (any noun)", key=f"relabel-query-{image}",
                          placeholder="a word, a synset name or a wnid, e.g. tiger cat")
    if query.strip():
        from core.labels import senses

        try:
            found = senses(query, label_space)
        except WildLensError as exc:
            st.caption(escape_markdown(one_line(exc)))
            found = []
        if found:
            choice = st.selectbox("Sense", found, key=f"relabel-sense-{image}",
                                  format_func=lambda s: f"{s.name} · {s.definition[:90]}"
                                                        + (f" · {plural(s.n_classes, 'class')} of the label space"
                                                           if s.n_classes else ""))
            st.caption(escape_markdown(f"{choice.wnid}: {choice.definition}"))
            if st.button(f"Relabel {plural(len(targets), 'image')} as {choice.name}", key="relabel-go",
                         icon=":material/label:", disabled=not bulk and choice.wnid == truth):
                _record("relabel", targets, choice.wnid)
    if relabel and relabel != stored_truth and not bulk:
        if st.button(f"Back to the stored class ({_name(stored_truth)})", key="relabel-back"):
            _record("relabel", targets, stored_truth)

    st.markdown("**Exclude**")
    if bulk:
        c1, c2 = st.columns(2)
        if c1.button(f"Exclude {plural(len(targets), 'image')}", key="bulk-exclude", icon=":material/block:"):
            _record("exclude", targets)
        if c2.button(f"Include {plural(len(targets), 'image')}", key="bulk-include"):
            _record("include", targets)
    elif excluded:
        if st.button("Include it again", key="include", icon=":material/check_circle:"):
            _record("include", targets)
    elif st.button("Exclude it from the curated metrics", key="exclude", icon=":material/block:",
                   help="The image and its predictions stay; the curated view leaves it out."):
        _record("exclude", targets)

# ------------------------------------------------------------------ every model's top-5
st.subheader("Predictions")
st.caption(relation_help())
if rows.empty:
    st.caption("No model's prediction of this image in this view.")
for row in rows.to_dict("records"):
    mark = "✓" if row["correct"] is True else "✗"
    guesses = []
    for k in range(1, 6):
        wnid = row.get(f"pred_wnid_{k}")
        if wnid is None or pd.isna(wnid):
            continue
        prob = row.get(f"prob_{k}")
        text = f"{k}\\. {escape_markdown(_name(wnid))}" + ("" if prob is None or pd.isna(prob) else f" {float(prob):.1%}")
        colour = RELATION_MARKDOWN_COLOURS.get(row.get(f"relation_{k}")) if isinstance(row.get(f"relation_{k}"), str) \
            else None
        guesses.append(f":{colour}[{text}]" if colour else text)
    error = ""
    if isinstance(row.get("error_type"), str):
        error = f" · error type **{escape_markdown(row['error_type'])}**: {escape_markdown(row.get('error_reason') or '')}"
    st.markdown(f"{mark} **{escape_markdown(row['model'])}**{error}  \n" + " · ".join(guesses))

# ------------------------------------------------------------------ provenance, duplicates, history
# Keyed and tracked, so the tab open stays open across the page's reruns (a UI review: an Undo in Curation history
# jumped back to Provenance); a switch reruns the page (~0.3 s).
where, twins, past = st.tabs(["Provenance", "Near duplicates", "Curation history"], key="image-tabs", on_change="rerun")
with where:
    found = provenance(manifest(run), image)
    if found:
        # Text, never a link: a URL from a search engine is outside text.
        st.markdown("  \n".join(f"**{escape_markdown(k)}**: {escape_markdown(' '.join(v.split()))}"
                                 for k, v in found.items()))
    else:
        st.caption("No manifest row: the run's predictions were uploaded without images.")
with twins:
    near = near_duplicates(manifest(run), image)
    if near.empty:
        st.caption("No other image of the run is within the near-duplicate distance (core.phash).")
    else:
        cols = st.columns(4)
        for i, twin in enumerate(near.head(8).itertuples(index=False)):
            with cols[i % 4]:
                _show_picture(str(twin.file), width=200)
                st.caption(f"{_named(twin.wnid)} · {twin.distance} bits · {escape_markdown(twin.status)}")
                if twin.file in known_images:
                    st.page_link(PAGE, label="Open", icon=":material/open_in_new:",
                                 query_params={RUN_PARAM: run.run_id, **selection.params(), **carried_back_params(),
                                               "open": str(twin.file)})
with past:
    entries = history(state, image)
    if not entries:
        st.caption("No curation yet.")
    for entry in reversed(entries):
        line = (f"#{entry['seq']} {entry['what']}" + (f" ({entry['images']} images)" if entry["images"] > 1 else "")
                + f" · {entry['time'][:16].replace('T', ' ')} · {entry['by'] or '?'}"
                + (f" · {entry['note']}" if entry["note"] else "") + (" · undone" if entry["undone"] else ""))
        c1, c2 = st.columns([5, 1], vertical_alignment="center")
        c1.caption(escape_markdown(line))
        if not entry["undone"] and c2.button("Undo", key=f"undo-{entry['seq']}"):
            try:
                undo(run, entry["seq"], by="dashboard")
                st.session_state["_curation_done"] = f"undo #{entry['seq']}"
            except CurationError as exc:
                st.session_state["_curation_error"] = one_line(exc)
            st.rerun()
    if state.problems:
        st.warning(escape_markdown(f"{plural(len(state.problems), 'line')} of the log skipped: {state.problems[0]}"),
                   icon=":material/warning:")
