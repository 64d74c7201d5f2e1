"""Confusions: each true class's top-3 false positives per model, coloured by WordNet relation,
a confusion matrix per model ordered by the WordNet tree (click a cell for its images), and the
misclassified images themselves. Numbers come from ``explain.metrics`` tables and
``explain.matrix``; this page only selects, labels and draws."""
import hashlib
import html
import json
import re

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from explain import matrix as cm
from explain.explanations import confusion_lcs_phrase
from explain.vocabulary import RELATION_COLOURS, relation_help
from pages.charts import WHISKER_CLEAR, cached_figure, error_offsets
from pages.tables import (NA_DASH, PERCENT_D3, download_csv, interval_columns_in, interval_texts, show_table, styled,
                          table_column_config, without_bounds)
from explain.selection import Selection
from pages.run_state import (RUN_PARAM, VIEW_PARAM, back_params, current_view, keep_widget_state, page_link, remember_url,
                             require_run, url_choices, url_from_outside, write_choices, write_params)
from pages.reads import (class_name, confusion_matrix, metric_tables, misclassified_images, model_view_predictions,
                         no_predictions_note)
from pages.pictures import THUMBNAIL, grid_thumbnails, show_thumbnail
from pages.text import escape_markdown, listed, plural

BROWSE = "pages/browse_page.py"
IMAGE_PAGE = "pages/image_page.py"
MATRIX_CAP = 40  # classes a readable matrix shows by default (the slider goes further)


TOP3_DOCS = {"pred_wnid": "A class the model predicted (top-1) instead of the true class: its name (its wnid is in "
                          "the chart below and the table at the end); the CSV has pred_wnid and pred_name.",
             "relation": relation_help(markdown=False)}


def relation_style(value: str) -> str:
    colour = RELATION_COLOURS.get(value)
    return f"background-color: {colour}; color: white" if colour else ""


st.title("Confusions")
run = require_run()
view = current_view(run)
tables = metric_tables(run, view)
confusions = tables.confusions
if tables.per_model.empty:
    no_predictions_note(run, view)
    st.stop()

label_space = run.info.label_space
models = tables.per_model["model"].tolist()
# The chosen models live in the URL (`models`, repeated; none: every model), as on Results: a reload brought
# every model back (a UI review).
url_choices("models", models, "conf_models", "models this run has no predictions of")
chosen_models = list(dict.fromkeys(st.multiselect(f"Models · {plural(len(models), 'model')} in this run", models,
                                                  key="conf_models")))  # each once: one table and key per model
write_choices("models", chosen_models, models)
true_wnids = sorted(tables.per_class["true_wnid"].unique())
names = {w: class_name(w, label_space) for w in set(true_wnids) | set(confusions["pred_wnid"].to_numpy(dtype=object))}


def name_of(wnid: str) -> str:
    """A class name for any wnid on this page (a stored wnid WordNet lacks shows as itself)."""
    if wnid not in names:
        names[wnid] = class_name(wnid, label_space)
    return names[wnid]


def browse_link(model: str, true: str, pred: str, label: str) -> None:
    """The Browse page filtered to one (model, true, predicted) pair of mistakes."""
    page_link(BROWSE, run.run_id, escape_markdown(label), icon=":material/photo_library:",
              model=model, true=true, pred=pred, outcome="mistake")


has_files = run.images_dir.is_dir() and next(run.images_dir.iterdir(), None) is not None  # uploaded: none
PREDICTION_LABELS = {"image": "Image", "true_wnid": "True class id", "pred_wnid": "Predicted class id",
                     "prob_1": "Probability"}
PREDICTION_DOCS = {"image": "The image's row id in the uploaded predictions.",
                   "true_wnid": "The true class.", "pred_wnid": "The model's top-1 prediction.",
                   "prob_1": f"The model's probability of its top-1. {NA_DASH} : not in the predictions file."}


def prediction_rows(rows: pd.DataFrame, model: str, links: bool, limit: int) -> None:
    """A run without image files (uploaded predictions): its predictions as a table, names beside
    the wnids, each predicted class of a mistake (``links``) linked to Browse."""
    st.caption("This run has no image files (its predictions were uploaded): its predictions instead.")
    table = rows.head(limit)[["image", "true_wnid", "pred_wnid", "prob_1"]]
    table = table.assign(true_name=table["true_wnid"].map(name_of), pred_name=table["pred_wnid"].map(name_of))
    show_table(table[["image", "true_wnid", "true_name", "pred_wnid", "pred_name", "prob_1"]], docs=PREDICTION_DOCS,
               labels=PREDICTION_LABELS, column_config={"prob_1": st.column_config.NumberColumn(
                   "Probability", help=f"`prob_1`: {PREDICTION_DOCS['prob_1']}", format="percent", step=0.001)})
    if links:
        mistakes = table[table["pred_wnid"] != table["true_wnid"]].drop_duplicates(["true_wnid", "pred_wnid"])
        for true, pred in zip(mistakes["true_wnid"].head(6), mistakes["pred_wnid"].head(6)):
            browse_link(model, str(true), str(pred), f"{name_of(true)} → {name_of(pred)} ({pred}) in Browse")


def thumbnails(rows: pd.DataFrame, model: str, links: bool = True, limit: int = 60) -> None:
    """Images with their predicted name and probability, each mistake (``links``) with a link to Browse;
    a table where the run has no image files."""
    if not has_files:
        prediction_rows(rows, model, links, limit)
    else:
        image_grid(rows, model, links, limit)
    if len(rows) > limit:
        st.caption(f"Showing {limit} of {len(rows):,}.")


def open_link(model: str, true: str, pred: str, label: str, image: str | None = None) -> None:
    """The Image page on one (model, true, predicted) pair (explain.selection 'pair'): the pair's images
    one by one, opened on ``image``."""
    params = {RUN_PARAM: run.run_id, **({VIEW_PARAM: st.query_params[VIEW_PARAM]} if VIEW_PARAM in st.query_params
                                        else {}),
              **Selection(source="pair", models=(model,), true=true, pred=pred).params(),
              # The Image page's "Back to the grid" gives this page all of it back, the models chosen too (a hostile check).
              **back_params({**PAGE_STATE, "models": chosen_models if set(chosen_models) != set(models) else None})}
    if image:
        params["open"] = image
    st.page_link(IMAGE_PAGE, label=escape_markdown(label), icon=":material/open_in_full:", query_params=params)


def image_grid(rows: pd.DataFrame, model: str, links: bool, limit: int) -> None:
    grid = st.columns(6)
    shown = rows.head(limit)
    # Browse's thumbnails (pages.pictures: made together, kept per file version, read as inference reads files):
    # each picture was read whole from disk on every rerun, and a file that does not decode showed no word.
    pictures = grid_thumbnails(run, shown["image"].astype(str), THUMBNAIL)
    for i, (_, p) in enumerate(shown.iterrows()):
        pred = str(p["pred_wnid"])
        prob = "" if pd.isna(p["prob_1"]) else f" ({float(p['prob_1']):.1%})"
        with grid[i % 6]:
            # The caption holds a class name (a stored wnid where it has none: escaped) and a probability.
            show_thumbnail(run, str(p["image"]), pictures, caption=f"→ {escape_markdown(name_of(pred))}{prob}")
            open_link(model, str(p["true_wnid"]), pred, "Open", str(p["image"]))
            if links and pred != str(p["true_wnid"]):
                browse_link(model, str(p["true_wnid"]), pred, "Browse this pair")


# ------------------------------------------------------------------ the URL
# What a user would bookmark lives in the URL: the true class (`true`), the model of the matrix and of the
# misclassified images (`model`; `images_model` where the images' model differs from the matrix's) and the
# matrix's picked cell (`cell_true`, `cell_pred`), and the settings that differ from their defaults: the bars'
# measure (`bars=share_of_samples`), the row-normalised matrix (`normalised=1`) and a single outside column
# (`outside=other`). A link from outside (a reload, a bookmark, the Image page's "Back to the grid": model, true,
# pred of a pair) sets the widgets; values the run lacks are dropped with a note. Why: the page kept nothing, so
# a reload or the way back from an image landed on the first class (a fresh look at the sample, 2026-12-06);
# the images' own model and the settings were lost on a reload (a UI review, 2026-12-07).
URL_KEYS = ("true", "model", "pred", "cell_true", "cell_pred", "images_model", "bars", "normalised", "outside")
PAGE_STATE: dict = {}  # this rerun's URL state as far as known (_page_state), for the Image page's way back
BARS = {"mf": "MF (share of the mistakes)", "share_of_samples": "Share of all images"}  # the first: the default
OUTSIDE = ("ancestor", "other")  # the matrix's outside predictions: grouped under their nearest node (default), one column


def _url_state() -> dict:
    return {key: st.query_params.get(key, "") for key in URL_KEYS}


def _apply_url(url: dict) -> None:
    lacking = []
    if url["true"]:
        if url["true"] in true_wnids:
            st.session_state["conf_true"] = url["true"]
        else:
            lacking.append(f"true class {listed([url['true']])}")
    unchosen = False
    for key, widgets in (("model", ("matrix-model", "images-model")), ("images_model", ("images-model",))):
        if not url[key]:
            continue
        if url[key] in models:
            if url[key] in (chosen_models or models):
                for widget in widgets:
                    st.session_state[widget] = url[key]
            else:  # a hand-made link: its models leave this one out (a review: ignored without a word)
                unchosen = unchosen or key == "model"
                instead = url["model"] if key == "images_model" and url["model"] in chosen_models else chosen_models[0]
                what = "images" if key == "images_model" else "matrix and images"
                st.warning(escape_markdown(f"The link's model {url[key]} is not among the models it chooses "
                                           f"above: showing {instead}'s {what} instead (add {url[key]} above "
                                           f"to see its {what})."), icon=":material/link_off:")
        else:
            lacking.append(f"model {listed([url[key]])}")
    settings = {"bars": ("top3-bars", {v: v for v in BARS}),
                "normalised": ("matrix-normalise", {"0": False, "1": True}),
                "outside": ("matrix-grouped", {"ancestor": True, "other": False})}
    odd = []
    for key, (widget, values) in settings.items():  # the first value is the default, which the URL leaves out
        if url[key] and url[key] not in values:
            odd.append(f"{key}={listed([url[key]])} (takes {' or '.join(values)})")
        # No parameter (or one the page does not take) is the default: Back to an address before a toggle was
        # switched on switches it off again (a code review: it stayed on and its value was written back).
        st.session_state[widget] = values.get(url[key], next(iter(values.values())))
    if odd:
        st.warning(escape_markdown("Not a value this page takes: " + "; ".join(odd) + ". Showing the default."),
                   icon=":material/link_off:")
    wanted = None if unchosen else (url["cell_true"], url["cell_pred"]) if url["cell_true"] and url["cell_pred"] else \
        (url["true"], url["pred"]) if url["true"] and url["pred"] else None
    # Picked below, once the matrix's cells are known; () for a URL without a cell: none picked (a UI review: Back
    # to the step before a cell was picked kept the cell).
    st.session_state["_conf_wanted_cell"] = wanted or ()
    if lacking:
        st.warning(escape_markdown("The link names what this run has no predictions of: " + ", ".join(lacking)
                                   + ". Showing the run's first instead."), icon=":material/link_off:")


def _page_state(cell, images_model) -> dict:
    """The page's URL state (URL_KEYS) from its widgets: what _write_url writes, and what an "Open" link gives
    the Image page for its way back (the cell's links come before the images' model's box: its last value)."""
    return {"true": true_wnid, "model": matrix_model, **({"cell_true": cell[0], "cell_pred": cell[1]} if cell else {}),
            "images_model": images_model if images_model != matrix_model else None,
            "bars": None if st.session_state.get("top3-bars", "mf") == "mf" else st.session_state["top3-bars"],
            "normalised": "1" if normalised else None, "outside": None if grouped else OUTSIDE[1]}


def _write_url(values: dict) -> None:
    """``values`` in the URL (an empty one: its key removed), remembered as the page's own."""
    write_params({key: values.get(key) for key in URL_KEYS})  # one history step for the whole change
    remember_url("confusions", _url_state())


url = _url_state()
if url_from_outside("confusions", url):  # a link, a reload, a bookmark, or back from another page
    _apply_url(url)
if st.session_state.get("conf_true") not in true_wnids:
    st.session_state.pop("conf_true", None)
for key in ("matrix-model", "images-model"):  # each section offers the models chosen above (a UI review: every model)
    if key in st.session_state and st.session_state[key] not in (chosen_models or models):
        # Set, not popped: popped, the page used the first chosen model while the browser's box kept showing the one
        # removed (a UI review; Streamlit keeps a keyed widget's value in the browser when its options change).
        st.session_state[key] = (chosen_models or models)[0]

true_wnid = st.selectbox("True class", true_wnids, format_func=lambda w: f"{names[w]} ({w})", key="conf_true")
st.caption("Each model's most frequent confusions of this class. MF (misclassification frequency): a confusion's "
           "share of the class's mistakes. " + relation_help())

# ------------------------------------------------------------------ side by side per model
# The class's rows once, then each model's among them: a mask over the whole tables per model was ~65 ms of
# every rerun at 1,000,000 predictions (10 models, 30,000 confusions).
class_stats = tables.per_class[(tables.per_class["true_wnid"] == true_wnid).to_numpy(dtype=bool, na_value=False)]
class_top = confusions[(confusions["true_wnid"] == true_wnid).to_numpy(dtype=bool, na_value=False)]
# Each model's counts and accuracy with its interval, as Results' cells, from its row (one per model and class;
# the first if a hand-made table had two): read as lists, not as a row each (taking one row of the 86-column
# table takes from each of its 86 columns, once per model).
stats_of = {}
for model, n, n_mistakes, accuracy in zip(class_stats["model"], class_stats["n"], class_stats["n_mistakes"],
                                          interval_texts(class_stats, "accuracy")):
    stats_of.setdefault(model, (n, n_mistakes, accuracy or NA_DASH))
if not chosen_models:  # a UI review: the section was blank without a word
    st.info("Pick at least one model above to see its most frequent confusions of this class; until then the "
            "matrix and the misclassified images below offer every model.")
cols = st.columns(max(1, min(len(chosen_models), 3)))
for i, model in enumerate(chosen_models):
    with cols[i % len(cols)]:
        top = class_top[(class_top["model"] == model).to_numpy(dtype=bool, na_value=False)].sort_values("rank")
        st.markdown(f"**{escape_markdown(model)}**")  # a model id from stored predictions
        if model not in stats_of:
            st.caption("No prediction for this class.")
            continue
        n, n_mistakes, accuracy = stats_of[model]
        st.caption(f"{plural(int(n), 'image')} · {plural(int(n_mistakes), 'mistake')} · accuracy {accuracy}")
        if top.empty:
            st.caption("No mistakes.")
            continue
        # Columns under their CSV names (the headers' help shows them), labelled for reading; three
        # narrow columns fit a third of the page, so each common ancestor goes under its Explain button.
        # MF with its interval in one cell (pages.tables.styled folds mf_ci_low / mf_ci_high into it).
        # Three narrow columns: the name alone, so that MF with its interval and the relation fit.
        view = pd.DataFrame({"pred_wnid": [names[w] for w in top["pred_wnid"]],
                             "mf": top["mf"].astype(float),
                             **{c: top[c].astype(float) for c in ("mf_ci_low", "mf_ci_high") if c in top.columns},
                             "relation": top["relation"]})
        data = styled(view)
        config = table_column_config("confusions", without_bounds(view).columns, without_bounds(view),
                                     formats=isinstance(data, pd.DataFrame), docs=TOP3_DOCS,
                                     labels={"pred_wnid": "Predicted class"}, bounded=interval_columns_in(view))
        config["relation"]["width"] = "small"
        # In a container keyed by the model and the class: another class's table is a new table, its columns
        # sized to its own cells (a UI review: sized for the class before, "100.0 % [56.6, 100.0]" read
        # "00.0 % [56.6, 100.0]"; a key on the table alone kept the widths). A digest, not the id made safe:
        # 'a/b' and 'a_b' would share a key, and Streamlit refuses a key used twice.
        table_key = hashlib.blake2b(json.dumps([model, true_wnid]).encode(), digest_size=12).hexdigest()
        with st.container(key=f"top3-{table_key}"):
            # Rows of 35 pixels under a header of 35, and room for a horizontal scroll bar: in a third of a
            # 1,400-pixel page the bar took the last row's place (a UI review: "comic book" cut in half).
            st.dataframe(data.map(relation_style, subset=["relation"]), hide_index=True, width="stretch",
                         placeholder=NA_DASH, column_config=config, height=35 * (len(view) + 1) + 3 + 16)
        for _, conf in top.iterrows():
            # A link, not a button and st.switch_page: the switch sent its URL on this page first, a history
            # step of its own (a hostile check: Back from Explain landed on a Confusions URL never seen). The URL
            # carries the run, the view and the pair: Explain opens on them, reloads and shares keep them.
            page_link("pages/explain_page.py", run.run_id, f"Explain {escape_markdown(names[conf['pred_wnid']])}",
                      icon=":material/account_tree:", model=model, true=true_wnid, pred=conf["pred_wnid"])
            if isinstance(conf["lcs_wnid"], str):  # the lowest common subsumer and how far up it is
                st.caption("Common ancestor: " + escape_markdown(
                    confusion_lcs_phrase(true_wnid, conf["lcs_wnid"], names[true_wnid])))

# ------------------------------------------------------------------ the top-3 as bars, with their intervals
picked = class_top[class_top["model"].isin(chosen_models).to_numpy(dtype=bool, na_value=False)]
keep_widget_state("top3-bars")  # not drawn for a class without mistakes: its choice kept for the next (a code review)
if not picked.empty:
    share = st.radio("Bars", list(BARS), horizontal=True, key="top3-bars", format_func=BARS.get)
    bars = picked.sort_values(["model", "rank"])
    # Plotly reads HTML in labels and hover texts: model ids and class names go in escaped.
    bars = bars.assign(pair=[html.escape(f"{m} · {name_of(p)} ({p})")
                             for m, p in zip(bars["model"], bars["pred_wnid"])])
    offsets = error_offsets(bars, share)
    if offsets is not None:
        bars = bars.assign(_above=offsets[0], _below=offsets[1], interval=interval_texts(bars, share))
        bars["interval"] = bars["interval"].fillna(NA_DASH)

    def confusions_top_bars(bars: pd.DataFrame, share: str, errors: bool):
        top_bars = px.bar(bars, x=share, y="pair", color="relation", orientation="h",
                          color_discrete_map=RELATION_COLOURS, text_auto=PERCENT_D3,
                          error_x="_above" if errors else None, error_x_minus="_below" if errors else None,
                          hover_data={"count": True, share: ":" + PERCENT_D3, "pair": False,
                                      **({"interval": True, "_above": False, "_below": False} if errors else {})},
                          labels={"mf": "MF", "share_of_samples": "Share of images", "pair": "", "count": "Images",
                                  "relation": "Relation", "interval": "Interval"})
        top_bars.update_yaxes(categoryorder="array", categoryarray=bars["pair"].tolist()[::-1])
        top_bars.update_xaxes(range=[0, 1.02], tickformat=".0%")
        top_bars.update_traces(textposition="inside", insidetextanchor="start")
        # A value written at the bar's start is crossed by its whisker when the interval reaches back under it
        # ("20.0%" struck through on the sample's tiger cat, [3.6, 62.4]): then it is written just right of the
        # whisker's end instead, as Results lifts a short bar's value above its whisker. WHISKER_CLEAR: the share
        # of the axis a value at the start takes ("100.0%" at 1,400 pixels).
        if errors:
            low_end = dict(zip(bars["pair"], bars[share].astype(float) - bars["_below"].astype(float)))
            high_end = dict(zip(bars["pair"], bars[share].astype(float) + bars["_above"].astype(float)))
            for trace in top_bars.data:
                moved = [pd.notna(low_end.get(y, np.nan)) and low_end[y] < WHISKER_CLEAR
                         and high_end[y] <= 1 - WHISKER_CLEAR for y in trace.y]
                if any(moved):
                    trace.texttemplate = ["" if m else f"%{{x:{PERCENT_D3}}}" for m in moved]
                    for x, y, m in zip(trace.x, trace.y, moved):
                        if m:
                            top_bars.add_annotation(x=high_end[y], y=y, text=format(float(x), PERCENT_D3),
                                                    showarrow=False, xanchor="left", xshift=6)
        top_bars.update_layout(height=max(200, 34 * len(bars) + 110), margin=dict(t=30, b=10), legend_title_text="")
        return top_bars

    # pages.charts.cached_figure: built once per content (Plotly's validation is most of a rerun)
    st.plotly_chart(cached_figure(confusions_top_bars, bars, share, offsets is not None), width="stretch")
    st.caption(("MF: the confusion's share of the class's mistakes; " if share == "mf" else
                "Share of images: the confusion's share of all the class's images; ")
               + "error bars: its Wilson interval (hover a bar for it). With few mistakes these are wide.")

# ------------------------------------------------------------------ confusion matrix
st.subheader("Confusion matrix")
st.caption("Rows: true classes; columns: top-1 predictions; usable images only (status ok, not excluded). Rows and "
           "columns follow the WordNet hyponym tree depth first, so siblings sit together and each block is a "
           "subtree. Predictions outside the run's classes are grouped under their nearest node of that tree "
           "('other: under …'). Click a cell to see its images.")
controls = st.columns([2, 1, 1])
matrix_model = controls[0].selectbox("Model", chosen_models or models, key="matrix-model")
normalised = controls[1].toggle("Row-normalised", key="matrix-normalise",
                                help="Each row as shares of its images (rows sum to 100%); a class without images is empty.")
st.session_state.setdefault("matrix-grouped", True)  # on by default; set here, not by value=, as a link may set it
grouped = controls[2].toggle("Group outside predictions", key="matrix-grouped",
                             help="On: one column per nearest WordNet node of the run's tree. Off: a single 'other' column.")
outside = OUTSIDE[0] if grouped else OUTSIDE[1]
run_classes = list(run.info.wnids) or true_wnids
n_classes = len(set(run_classes) | set(true_wnids))
cap = None
if n_classes > MATRIX_CAP:
    # A readable matrix has tens of rows: the classes with the most mistakes (either end), in tree order.
    cap = st.slider("Classes in the matrix (most confused first)", 10, min(n_classes, 150), MATRIX_CAP, step=5,
                    key="matrix-cap")
# Cached per model, grouping and cap (pages.reads): a rerun that changes none of them costs nothing.
counts, shown = confusion_matrix(run, matrix_model, run_classes, outside=outside, cap=cap)
values = cm.row_normalise(counts) if normalised else counts


def column_title(label: str, *, short: bool = False) -> str:
    """A column's title (its tick label with ``short``): a class's name and wnid, an outside group's node named
    as classes are ('other: under clothing (n03051540)'; a UI review: 'other: under clothing.n.01')."""
    if label in counts.index:
        return f"{name_of(label)} ({label})"
    anchor = cm.outside_anchor(label)
    if anchor is None:
        return label
    return f"{cm.OUTSIDE_PREFIX}{name_of(anchor)}" + ("" if short else f" ({anchor})")


row_titles = [f"{name_of(w)} ({w})" for w in counts.index]
col_titles = [column_title(c) for c in counts.columns]
short = [name_of(w) for w in counts.index]
# Tick labels are names; a name two classes share (two 'crane's) carries its wnid.
tick_rows = [f"{n} ({w})" if short.count(n) > 1 else n for n, w in zip(short, counts.index)]
tick_outside = [column_title(c, short=True) for c in counts.columns[len(counts.index):]]
tick_cols = tick_rows + [t if tick_outside.count(t) == 1 else title for t, title in
                         zip(tick_outside, col_titles[len(counts.index):])]
cell = None  # the matrix's picked cell (true, column)
if counts.to_numpy().sum() == 0:
    st.caption("No usable prediction of this model.")
else:
    # Plotly heatmaps send no selection to Streamlit: one invisible point per non-empty cell takes the click.
    cells = [(i, j) for i in range(counts.shape[0]) for j in range(counts.shape[1]) if counts.iat[i, j] > 0]

    def confusions_matrix_figure(counts: pd.DataFrame, values: pd.DataFrame, normalised: bool, row_titles: tuple,
                                 col_titles: tuple, tick_rows: tuple, tick_cols: tuple, matrix_model: str):
        # Numbered axes with the names as tick labels: two classes may share a name (two 'crane's).
        z = [[None if n == 0 or pd.isna(v) else float(v) for n, v in zip(c_row, v_row)]  # empty cells blank, not 0
             for c_row, v_row in zip(counts.to_numpy().tolist(), values.to_numpy().tolist())]
        fig = go.Figure(go.Heatmap(z=z, x=list(range(len(counts.columns))), y=list(range(len(counts))),
                                   colorscale="Blues", hoverinfo="skip", zmin=0, zmax=1 if normalised else None,
                                   colorbar=dict(title="Share" if normalised else "Images",
                                                 tickformat=".0%" if normalised else "d",
                                                 # whole counts only: Plotly's ticks at 1.2 and 1.4 read "1, 1" (a UI
                                                 # review: an all-ones matrix's bar read 2, 1, 1)
                                                 **({} if normalised else {"dtick": max(1, int(np.ceil(
                                                     counts.to_numpy().max(initial=0) / 5)))})),
                                   texttemplate="%{z:" + PERCENT_D3 + "}" if normalised else "%{z:d}",
                                   showscale=True))
        if counts.size > 1600:
            fig.update_traces(texttemplate=None)
        cells = [(i, j) for i in range(counts.shape[0]) for j in range(counts.shape[1]) if counts.iat[i, j] > 0]
        # Plotly reads HTML in labels and hover texts: class names, model ids and labels go in escaped.
        hover = [html.escape(f"{row_titles[i]} → {col_titles[j]}: {plural(int(counts.iat[i, j]), 'image')}")
                 + ("" if not normalised else f" ({values.iat[i, j]:.1%} of the row)") for i, j in cells]
        row_px = 24
        fig.add_trace(go.Scatter(x=[j for _, j in cells], y=[i for i, _ in cells], mode="markers",
                                 customdata=[[i, j] for i, j in cells], hovertext=hover, hoverinfo="text",
                                 marker=dict(symbol="square-open", size=row_px - 4, color="crimson", opacity=0,
                                             line=dict(width=2)),
                                 selected=dict(marker=dict(opacity=1)), unselected=dict(marker=dict(opacity=0)),
                                 showlegend=False))
        # Outline each block of siblings on the diagonal: the tree's structure, visible at a glance.
        for first, last, _parent in cm.sibling_blocks(list(counts.index)):
            fig.add_shape(type="rect", x0=first - 0.5, x1=last + 0.5, y0=first - 0.5, y1=last + 0.5,
                          line=dict(color="rgba(90, 90, 90, 0.6)", width=1))
        fig.update_xaxes(tickvals=list(range(len(col_titles))), ticktext=[html.escape(t) for t in tick_cols],
                         tickangle=-45, title_text="Predicted class", side="bottom")
        fig.update_yaxes(tickvals=list(range(len(row_titles))), ticktext=[html.escape(t) for t in tick_rows],
                         autorange="reversed", title_text="True class")
        fig.update_layout(height=max(360, row_px * len(counts) + 260), margin=dict(t=30, b=10),
                          title_text=html.escape(f"{matrix_model} · {'row-normalised' if normalised else 'counts'}"),
                          clickmode="event+select", dragmode=False)
        return fig

    fig = cached_figure(confusions_matrix_figure, counts, values, normalised, tuple(row_titles), tuple(col_titles),
                        tuple(tick_rows), tuple(tick_cols), matrix_model)
    wanted = st.session_state.pop("_conf_wanted_cell", None)  # from a link (the URL section above)
    if wanted == ():  # the URL names no cell (Back to the step before a pick, a reload, a link): a fresh chart and
        # box, as Streamlit resets a widget only under a new key (a UI review: the cell stayed picked; set to None,
        # the box still showed it in the browser and the chart kept its selection)
        st.session_state["_conf_cells_epoch"] = st.session_state.get("_conf_cells_epoch", 0) + 1
        wanted = None
    epoch = st.session_state.get("_conf_cells_epoch", 0)
    chart_key = f"matrix-chart-{matrix_model}-{outside}-{len(counts)}-{epoch}"  # a new matrix starts unselected
    event = st.plotly_chart(fig, on_select="rerun", selection_mode=("points",), key=chart_key, width="stretch")
    clicked = cm.selected_cell(event.selection.get("points") if event else None, counts.index, counts.columns)

    # The same cells as a list (keyboard, and clicks land here): a new click replaces the list's choice.
    options = [(counts.index[i], counts.columns[j]) for i, j in cells]
    pick_key = f"matrix-cell-{chart_key}"
    if wanted is not None and tuple(wanted) not in options and wanted[1] not in counts.columns:
        # A pair's prediction outside the run's classes (the Image page's way back) sits in its column.
        wanted = (wanted[0], cm.column_of([tuple(wanted)], run_classes, outside=outside, shown=shown)[tuple(wanted)])
    if wanted is not None and tuple(wanted) in options:
        st.session_state[pick_key] = tuple(wanted)
    elif wanted is not None:  # a hostile campaign: a link's cell that is none of this matrix went without a word
        st.warning(escape_markdown(f"The link's cell {str(wanted[0])[:80]} → {str(wanted[1])[:80]} is not in "
                                   f"{matrix_model}'s matrix as shown here: no cell picked."), icon=":material/link_off:")
    if st.session_state.get(pick_key) not in options:  # a cell the predictions no longer hold (a rerun of a model)
        st.session_state.pop(pick_key, None)
    if clicked is not None and clicked != st.session_state.get(f"_last-{pick_key}"):
        st.session_state[f"_last-{pick_key}"] = clicked
        st.session_state[pick_key] = clicked
    cell = st.selectbox("Images of the cell", options, index=None, key=pick_key,
                        placeholder="Click a cell, or pick one here",
                        format_func=lambda c: f"{row_titles[list(counts.index).index(c[0])]} → "
                                              f"{column_title(c[1])} · {plural(int(counts.loc[c[0], c[1]]), 'image')}")
    # One row per non-empty cell, with a name beside every wnid (a wide CSV would have bare wnids as headers).
    # A model id may hold '/' and ':' (clip/ViT-B-32.openai, hf-hub:…): a file name of safe characters.
    safe_model = re.sub(r"[^A-Za-z0-9_.-]+", "_", matrix_model)
    download_csv(cm.matrix_long(counts), f"{run.run_id}_confusion_matrix_{safe_model}.csv", key="dl-matrix",
                 label="Download the matrix as CSV (one row per cell)", label_space=label_space)
    PAGE_STATE.update(_page_state(cell, st.session_state.get("images-model", matrix_model)))
    if cell is not None:
        true, column = cell
        # The view's usable predictions (pages.reads: raw, or the curation applied), as the metrics take them.
        images = cm.cell_images(model_view_predictions(run, matrix_model), matrix_model, true, column, run_classes,
                                outside=outside, shown=shown)
        # By file, as the misclassified images below and the Image page after an "Open" (a UI review: most confident
        # first, the first "Open" landed on "Image 4 of 4").
        images = images.sort_values("image", na_position="last", kind="stable").reset_index(drop=True)
        st.markdown(f"**{escape_markdown(row_titles[list(counts.index).index(true)])} → "
                    f"{escape_markdown(column_title(column))}** · {plural(len(images), 'image')}")
        if true != column:
            preds_in_cell = images["pred_wnid"].value_counts()
            for pred in preds_in_cell.index[:6]:
                browse_link(matrix_model, true, pred, f"{name_of(true)} → {name_of(pred)} ({pred}) in Browse")
                open_link(matrix_model, true, pred, f"{name_of(true)} → {name_of(pred)}: page through its images")
        else:
            open_link(matrix_model, true, true, f"{name_of(true)}, correct: page through its images")
        thumbnails(images, matrix_model, links=False)  # the pairs are linked above

# ------------------------------------------------------------------ misclassified images
st.subheader("Misclassified images")
model_for_images = st.selectbox("Model", chosen_models or models, key="images-model")
# Written here, once every widget it records has its value (no st.stop above, and none between the widgets).
PAGE_STATE.clear()
PAGE_STATE.update(_page_state(cell, model_for_images))
_write_url(PAGE_STATE)
# By image: the order the Image page pages through them after an "Open" (explain.browse.selection_images, true
# class then image), and Browse's; they came in the order the predictions were stored (a UI review: one set of
# images in three orders; the first "Open" must be "Image 1 of N" there, a browser test).
wrong = misclassified_images(run, model_for_images, true_wnid).sort_values(
    "image", na_position="last", kind="stable").reset_index(drop=True)
st.caption(escape_markdown(f"Images of {names[true_wnid]} (the true class above) that {model_for_images} got wrong, "
                           "by file, as the Image page pages through them; under each, its prediction and the "
                           "model's probability for it."))
if wrong.empty:
    st.caption("None: every image of this class was classified correctly (or none was classified).")
else:
    thumbnails(wrong.assign(true_wnid=true_wnid), model_for_images)

# ------------------------------------------------------------------ whole table
st.subheader("All top-3 confusions")
table = confusions[confusions["model"].isin(chosen_models)]
if not chosen_models:  # a UI review: an empty table reading "empty", and a download of every model's rows
    st.caption("No model chosen above: pick one to list its confusions here.")
# Names beside the wnids (the download below is the library's table as it is).
for column, named in (("true_wnid", "true_name"), ("pred_wnid", "pred_name"), ("lcs_wnid", "lcs_name")):
    if column in table.columns:
        codes, uniques = pd.factorize(table[column])  # each distinct wnid named once (90,000 calls per rerun at 1M)
        named_values = pd.array([name_of(str(w)) for w in uniques.tolist()] + [pd.NA], dtype="string")
        table = table.assign(**{named: named_values.take(np.where(codes < 0, len(uniques), codes))})
        order = list(table.columns)
        order.remove(named)
        order.insert(order.index(column) + 1, named)
        table = table[order]
data = styled(table)  # MF and share of images with their intervals in one cell (pages.tables)
if not isinstance(data, pd.DataFrame):  # styled (up to pages.tables.STYLE_MAX_CELLS cells): relations in colour
    data = data.map(relation_style, subset=["relation"])
elif len(table):  # styling every cell of a large table costs seconds per render; the colours are above
    st.caption(f"{len(table):,} rows, shown without colours.")
frame = data if isinstance(data, pd.DataFrame) else data.data
st.dataframe(data, hide_index=True, width="stretch", placeholder=NA_DASH,
             column_config=table_column_config("confusions", frame.columns, frame,
                                               formats=isinstance(data, pd.DataFrame),
                                               bounded=interval_columns_in(table)))
# The chosen models' rows, as the table shows them (every model when all are chosen: the library's table as it is).
download_csv(confusions[confusions["model"].isin(chosen_models)], f"{run.run_id}_confusions.csv", key="dl-confusions",
             label_space=label_space)
