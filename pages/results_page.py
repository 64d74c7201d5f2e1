"""Results: per model and per class, side by side, grouped CNN versus transformer, each number with
its interval, and the claims the run supports (issue 23).

Every number here is a cell of ``explain.metrics.compute_metric_tables`` (via
``pages.reads.metric_tables``; its ``<column>_ci_low`` / ``_ci_high`` bounds draw the error bars and
the intervals in the tables), a half-width of ``core.intervals``, or a claim of
``explain.claims.run_claims`` (via ``pages.reads.claims``); this page only selects, labels and draws.
"""
import html

import pandas as pd
import plotly.express as px
import streamlit as st

from core.intervals import DEFAULT_HALF_WIDTH, DEFAULT_LEVEL, format_level, images_needed
from explain.claims import PHRASES, claims_table
from explain.metric_intervals import rankable
from explain.uncertainty import MIN_BOOTSTRAP_N
from explain.metrics import column_docs
from explain.schema import labels_of
from pages.charts import cached_figure, claims_figure, error_offsets
from pages.pictures import THUMBNAIL, grid_thumbnails, show_thumbnail
from pages.tables import NA_DASH, PERCENT_D3, download_csv, interval_texts, show_table
from pages.reads import (CLAIMS_AUTO_ROWS, class_name, claims, metric_tables, metrics_result, model_families,
                         no_predictions_note, predictions_only)
from pages.run_state import (RESULTS_STATE, RUN_PARAM, VIEW_PARAM, back_params, current_view, keep_widget_state,
                             page_link, refused_choice, remember_url, require_run, url_choice, url_choices,
                             url_from_outside, write_choice, write_choices, write_params)
from pages.text import escape_markdown, listed, plural, show_error

RATE_COLUMNS = ["accuracy", "accuracy_hier", "accuracy_top5", "accuracy_balanced", "sibling_rate", "hypernym_rate",
                "hyponym_rate", "cousin_rate", "related_rate", "distant_rate", "hprec_at_5", "share_nearest",
                "share_nearest_unseen"]
MEAN_COLUMNS = ["path_mistakes", "lch_mistakes", "wup_mistakes", "lin_mistakes", "severity",
                "path_all", "lch_all", "wup_all", "lin_all", "hdist_at_1", "hdist_at_5",
                "lin_vs_best", "lin_vs_best_unseen", "sim_to_seen"]
# Hybrids sit between CNNs and transformers; zero-shot (language-augmented) models after them.
FAMILY_ORDER = {"CNN": 0, "hybrid": 1, "transformer": 2, "language-augmented": 3, "other": 4}
# Plotly's D3 palette (blue, purple, orange, green, gray): model families, not relations (explain.vocabulary colours those).
FAMILY_COLOURS = dict(zip(FAMILY_ORDER, (px.colors.qualitative.D3[0], px.colors.qualitative.D3[4],
                                         px.colors.qualitative.D3[1], px.colors.qualitative.D3[2],
                                         px.colors.qualitative.D3[7])))


LABELS = labels_of("per_class") | labels_of("per_model")


def chart_format(metric: str) -> str:
    """Plotly (d3) format of a metric's values: the tables' formats (pages.tables)."""
    return PERCENT_D3 if metric in RATE_COLUMNS else ".2f" if metric in ("severity", "hdist_at_1", "hdist_at_5") \
        else ".3f"


st.title("Results")
run = require_run()
view = current_view(run)
result = metrics_result(run, view)
tables = result.tables
if tables.per_model.empty:
    no_predictions_note(run, view)
    st.stop()

models = tables.per_model["model"].tolist()
family = model_families(run, models)
models = sorted(models, key=lambda m: (FAMILY_ORDER.get(family[m], 9), m))
# The chosen models live in the URL (`model`, repeated; none: every model), so a reload or a bookmark keeps
# them (a fresh look at the sample, 2026-12-06: a reload brought every model back); a link naming a model
# the run lacks says so.
url_choices("model", models, "results_models", "models this run has no predictions of")
chosen = st.multiselect(f"Models · {plural(len(models), 'model')} in this run", models, key="results_models",
                        format_func=lambda m: f"{m} ({family[m]})")
linked_model = st.query_params.get("segment_model", "")
if linked_model and linked_model not in chosen and url_from_outside(
        "results-segment", tuple(st.query_params.get(key, "") for key in ("stack", "segment_model", "segment"))):
    # A link's segment of a model not shown went without a word (a hostile check; one of a kind not shown is said below).
    st.warning(escape_markdown(f"The link's segment is {listed([linked_model], 1)}'s, "
                               + ("a model not among those chosen above: no segment shown (add it above, then click "
                                  "its segment)." if linked_model in models else
                                  "a model this run has no predictions of: no segment shown.")),
               icon=":material/link_off:")
# A chosen segment's model removed: its segment leaves the URL in the same step (one step of the history).
write_choices("model", chosen, models, also={"segment_model": None, "segment": None}
              if st.query_params.get("segment_model", chosen[0] if chosen else "") not in chosen else None)
if not chosen:  # said, as Browse says it (a UI review: the page ended at the empty box without a word)
    st.info("Pick at least one model.")
    st.stop()

ci = tables.ci
level = float(ci["level"]) if ci else DEFAULT_LEVEL
intervals = (f"Each rate and mean is shown with its {format_level(level)} interval, `value [low, high]` (Wilson for a share, "
             f"a bootstrap over images for a mean, {ci['resamples']} resamples, seed {ci['seed']}); the error bars "
             f"are the same intervals. A mean over fewer than {MIN_BOOTSTRAP_N} images (or mistakes, for a mean "
             "over them) is shown alone: too few for a bootstrap interval to hold its level." if ci else
             "These tables were computed without intervals (`--no-ci`): values are shown alone.")
st.caption("Accuracy is strict (top-1 == true class); *Hier. accuracy* also counts a prediction of a hyponym "
           "of the true class as correct, as the reference notebooks of the 2023 study of ImageNet classifiers "
           "on uncurated web images (the paper WildLens is built on) did. Similarity means over the "
           "mistakes are that paper's figures; *(all)* columns average over every image. " + intervals
           + " Hover a column header for its definition and its name in the CSV; – marks a value that is not "
           "defined (e.g. no mistakes).")


# ------------------------------------------------------------------ raw and curated (issue 24 item 3)
from explain.curation_view import (COMPARISON_DOCS, CURATED, RAW, VIEW_COMPARED, change_sentence,  # noqa: E402
                                   compare_views, default_view)

if default_view(run) == CURATED:
    st.subheader("Raw and curated")
    raw_result, curated_result = metrics_result(run, RAW), metrics_result(run, CURATED)
    compared = compare_views(raw_result.tables, curated_result.tables)
    compared = compared[compared["model"].isin(chosen)]
    st.markdown("  \n".join(escape_markdown(change_sentence(row, curated_result.change))
                             for row in compared.to_dict("records")))
    st.caption(f"What the run's curation log changed: {escape_markdown(curated_result.change.describe())} (images; "
               "from the Image page or python -m crawl curate): relabelled images count under their new class, "
               "excluded images leave. Every other section of this page shows the "
               f"**{view}** view (the sidebar switches it). Differences within the intervals may be chance.")
    columns = ["model"] + [f"{c}_{side}" + b for c in VIEW_COMPARED for side in ("raw", "curated", "change")
                           for b in (("", "_ci_low", "_ci_high") if side != "change" else ("",))
                           if f"{c}_{side}" + b in compared.columns]
    show_table(compared[columns], docs=COMPARISON_DOCS,
               labels={f"{c}_{side}": f"{LABELS.get(c, c)} ({side})" for c in VIEW_COMPARED
                       for side in ("raw", "curated", "change")})
    download_csv(compared, f"{run.run_id}_raw_vs_curated.csv", key="dl-raw-curated", label_space=run.info.label_space)


def bar_errors(frame: pd.DataFrame, column: str) -> dict:
    """px.bar / px.scatter keywords drawing ``column``'s interval as error bars (none without bounds)."""
    offsets = error_offsets(frame, column)
    if offsets is None:
        return {}
    return {"error_y": offsets[0], "error_y_minus": offsets[1]}

# ------------------------------------------------------------------ per model
st.subheader("Per model")
per_model = tables.per_model[tables.per_model["model"].isin(chosen)]
shown = per_model.assign(family=per_model["model"].map(family))
shown = shown.iloc[sorted(range(len(shown)), key=lambda i: (FAMILY_ORDER.get(shown["family"].iloc[i], 9),
                                                             shown["model"].iloc[i]))]
show_table(shown[["family"] + [c for c in shown.columns if c != "family"]], "per_model")
download_csv(tables.per_model, f"{run.run_id}_per_model.csv", key="dl-per-model", label_space=run.info.label_space)

chart_metrics = [c for c in RATE_COLUMNS + MEAN_COLUMNS if c in per_model.columns]
url_choice("chart", chart_metrics, "results-chart")  # ?chart=<column>: bookmarkable, kept on reload
metric = st.selectbox("Chart", chart_metrics, format_func=LABELS.get, key="results-chart")
write_choice("chart", metric, chart_metrics[0])
# The per-class heatmap's metric is read from the URL here, above the Image page links that carry it back
# (RESULTS_STATE); its box is drawn with the per-class table below.
heatmap_metrics = [c for c in RATE_COLUMNS + MEAN_COLUMNS if c in tables.per_class.columns]
refused_heatmap = url_choice("heatmap", heatmap_metrics, "class-metric", warn=False)  # said beside its box below
# Plotly reads HTML in labels and hover texts (<a href> is a live link): model ids from stored
# predictions and class names reach the charts HTML-escaped; Plotly shows the entities as text.
chart = shown.assign(model=shown["model"].map(html.escape))
has_bounds = error_offsets(chart, metric) is not None
if has_bounds:
    chart = chart.assign(interval=interval_texts(chart, metric))
    chart["interval"] = chart["interval"].fillna(NA_DASH)
errors = bar_errors(chart, metric)
if errors:  # px takes column names: the offsets go in as columns of their own
    chart = chart.assign(_above=errors["error_y"], _below=errors["error_y_minus"])


def results_model_bars(chart: pd.DataFrame, metric: str, errors: bool, has_bounds: bool, level: float):
    fig = px.bar(chart, x="model", y=metric, color="family", color_discrete_map=FAMILY_COLOURS,
                 category_orders={"model": chart["model"].tolist()}, text_auto=chart_format(metric),
                 error_y="_above" if errors else None, error_y_minus="_below" if errors else None,
                 hover_data={"n": True, "n_mistakes": True, metric: ":" + chart_format(metric),
                             **({"interval": True} if has_bounds else {}),
                             **({"_above": False, "_below": False} if errors else {})},
                 labels={metric: LABELS[metric], "model": "Model", "family": "Family", "n": LABELS["n"],
                         "n_mistakes": LABELS["n_mistakes"], "interval": f"{format_level(level)} interval"})
    # Inside the bar, clear of the error bar's cap; a bar too short for it (0 %) has its value above it,
    # where 'inside' (and Plotly's 'auto') drew nothing (a fresh look at the sample, 2026-12-06: 0 % read
    # like "no value").
    top = max((abs(float(v)) for v in chart[metric] if pd.notna(v)), default=0.0)
    short = 0.08 * (1.0 if metric in RATE_COLUMNS else top)
    # Above its whisker, where a bar is too short for its value and has one: the whisker crossed the value written
    # just above the bar ("0.0%" struck through, a UI review). Python's format spec is d3's for these formats.
    whisker_top = dict(zip(chart["model"], chart[metric].astype(float) + chart["_above"].astype(float))) if errors else {}
    for trace in fig.data:
        low = [v is not None and pd.notna(v) and abs(float(v)) < short for v in trace.y]
        trace.textposition = ["outside" if is_low else "inside" for is_low in low]
        lifted = [is_low and pd.notna(whisker_top.get(x, float("nan"))) for x, is_low in zip(trace.x, low)]
        if any(lifted):
            trace.texttemplate = ["" if up else f"%{{y:{chart_format(metric)}}}" for up in lifted]
            for x, v, up in zip(trace.x, trace.y, lifted):
                if up:
                    fig.add_annotation(x=x, y=whisker_top[x], text=format(float(v), chart_format(metric)),
                                       showarrow=False, yshift=10)
    fig.update_traces(insidetextanchor="start", cliponaxis=False)
    fig.update_layout(height=380, margin=dict(t=30, b=10), legend_title_text="")
    if metric in RATE_COLUMNS:
        fig.update_yaxes(range=[0, 1.02], tickformat=".0%")  # axis marks at round shares; values above read PERCENT_D3
    return fig


undefined = [m for m, v in zip(shown["model"], shown[metric]) if pd.isna(v)]
if len(undefined) == len(shown):  # an empty chart said nothing (e.g. no unseen class in the run)
    st.info(escape_markdown(f"No chosen model has a value of {LABELS[metric]} in this run: it is undefined here "
                            "(what it needs is below)."), icon=":material/info:")
else:
    # pages.charts.cached_figure: built once per content (Plotly Express's validation cost 0.35 s a rerun)
    st.plotly_chart(cached_figure(results_model_bars, chart, metric, bool(errors), has_bounds, level), width="stretch")
partly = undefined and len(undefined) < len(shown)
# Models whose value has no interval (a mean over fewer than MIN_BOOTSTRAP_N mistakes): named, not a bare "Whiskers"
# over bars without any (a UI review: the curated view's mean WUP of 9 mistakes).
bare = [m for m, v, low in zip(shown["model"], shown[metric], shown[f"{metric}_ci_low"] if f"{metric}_ci_low" in shown
                                else [None] * len(shown)) if not pd.isna(v) and pd.isna(low)] if has_bounds else []
st.caption(f"`{metric}`: " + column_docs("per_model").get(metric, "")
           + (f" Whiskers: the {format_level(level)} interval."
              if has_bounds and len(undefined) + len(bare) < len(shown) else "")
           + (f" No interval for {escape_markdown(', '.join(bare))}: fewer than {MIN_BOOTSTRAP_N} "
              + ("mistakes" if metric.endswith("_mistakes") or metric == "severity" else "observations")
              + " to resample." if bare else "")
           + (" No value (undefined) for " + escape_markdown(", ".join(undefined)) + "." if partly else ""))

# ------------------------------------------------------------------ error types (issue 24 item 4)
from explain.browse import selection_images, filter_images, filter_annotated  # noqa: E402
from explain.error_types import (ERROR_TYPE_COLOURS, ERROR_TYPE_DOCS, ERROR_TYPE_TABLE_DOCS,  # noqa: E402
                                 ERROR_TYPE_TABLE_LABELS, ERROR_TYPES, data_problem_sentence, mistake_shares)
from explain.selection import Selection  # noqa: E402
from explain.vocabulary import RELATION_COLOURS  # noqa: E402
from pages.reads import error_types, image_table  # noqa: E402

st.subheader("Error types")
st.caption("Every top-1 mistake gets one type, the first that applies, in the order of the legend: "
           + ", ".join(f"**{t}**" for t in ERROR_TYPES) + ". *label* and *duplicate* are problems of the data, "
           "*unseen* of the label space, the rest the model's (after ETH SRI's *Automated Classification of Model "
           "Errors on ImageNet*; decided here from WordNet, the curation log, the label-issue probe and near "
           "duplicates). Each image's reason is on the Image page and in the CSVs.")
with st.expander("What each type means"):
    st.markdown("\n".join(f"- **{t}**: {escape_markdown(ERROR_TYPE_DOCS[t])}" for t in ERROR_TYPES))
types = error_types(run, view, level)
types = types[types["model"].isin(chosen)]
# The stack's choice and the clicked segment live in the URL (`stack=relation`, `segment_model`, `segment`): a
# reload, a bookmark or the browser's Back shows the same segment's images (a UI review: they were lost). Streamlit
# cannot set a chart's selection, so a URL from outside (a link, a reload, Back) decides alone: its segment, or
# none, the chart drawn afresh under a new key (else a selection the browser still holds wrote itself back over the
# step Back went to: a code review), and the chart shows none picked; on the page's own reruns a new selection on
# the chart decides, and the segment stays until one does. The three are written in one step.
STACKS = ["error type", "relation"]
SEGMENT_KEYS = ("stack", "segment_model", "segment")
url_segment = tuple(st.query_params.get(key, "") for key in SEGMENT_KEYS)
fresh_link = url_from_outside("results-segment", url_segment)  # this run's URL is a link's, a reload's or Back's
if fresh_link:
    stack_value, linked = url_segment[0], url_segment[1:]
    if stack_value and stack_value not in STACKS:
        st.warning(escape_markdown(f"The link's stack={listed([stack_value], 1)} is not one of this page's choices "
                                   "here: showing the first."), icon=":material/link_off:")
    st.session_state["mistake-stack"] = stack = stack_value if stack_value in STACKS else STACKS[0]
    if any(linked) and not all(linked):
        st.warning("The link names half a segment (it needs both segment_model and segment): click one.",
                   icon=":material/link_off:")
    st.session_state["_results_segment"] = (linked, "link", stack) if all(linked) else None
    st.session_state["_results_chart_epoch"] = st.session_state.get("_results_chart_epoch", 0) + 1
    st.session_state["_results_last_pick"] = None
else:
    keep_widget_state("mistake-stack")
by = st.radio("Stack each model's mistakes by", STACKS, horizontal=True, key="mistake-stack")
shares = mistake_shares(types=types) if by == "error type" else mistake_shares(per_model=per_model)
colours = ERROR_TYPE_COLOURS if by == "error type" else RELATION_COLOURS
bars = shares.assign(model_label=shares["model"].map(html.escape),
                     interval=[t or NA_DASH for t in interval_texts(shares.rename(columns={
                         "share": "x_share", "share_ci_low": "x_share_ci_low", "share_ci_high": "x_share_ci_high"}),
                         "x_share")])


def results_mistake_stack(bars: pd.DataFrame, by: str, colours: dict, models: tuple, level: float):
    stack = px.bar(bars, x="model_label", y="share", color="kind", color_discrete_map=colours,
                   category_orders={"kind": list(ERROR_TYPES if by == "error type" else colours), "model_label":
                                    [html.escape(m) for m in models]},
                   custom_data=["model_label", "kind"], hover_data={"count": True, "interval": True,
                                                               "model_label": False, "share": ":" + PERCENT_D3},
                   labels={"model_label": "Model", "share": "Share of the mistakes", "kind": by.capitalize(),
                           "count": "Mistakes", "interval": f"{format_level(level)} interval"})
    stack.update_yaxes(range=[0, 1.0001], tickformat=".0%")
    stack.update_layout(height=380, margin=dict(t=30, b=10), legend_title_text="", clickmode="event+select")
    return stack


event = st.plotly_chart(cached_figure(results_mistake_stack, bars, by, colours, tuple(shown["model"]), level),
                        width="stretch", on_select="rerun", selection_mode=("points",),
                        key=f"mistake-stack-{by}-{view}-{st.session_state.get('_results_chart_epoch', 0)}")
st.caption("Click a segment to see its images below. Hover for the count and the share's interval (Wilson over "
           "the model's mistakes).")
points = (event.selection.get("points") if event else None) or []
model_of_label = {html.escape(m): m for m in shares["model"]}  # the chart carries escaped ids only (Plotly reads HTML)
picked_point = points[0].get("customdata") if isinstance(points, list) and points and isinstance(points[0], dict) \
    else None
# The browser sends the selection: a point's customdata is [model label, kind] when it is the chart's own
# (a hostile campaign: ["m"] raised IndexError, [["m"], 1] TypeError).
pick = tuple(picked_point[:2]) if isinstance(picked_point, list) and len(picked_point) >= 2 \
    and all(isinstance(v, str) for v in picked_point[:2]) else None
if pick != st.session_state.get("_results_last_pick"):  # a new selection on the chart (none: a click off the bars)
    st.session_state["_results_last_pick"] = pick
    st.session_state["_results_segment"] = ((model_of_label[pick[0]], pick[1]), "chart", by) \
        if pick is not None and pick[0] in model_of_label else None
segment, source, stacked_by = st.session_state.get("_results_segment") or (None, None, None)
if stacked_by != by:  # the stack changed since the segment was picked: its kinds are another's
    segment = None
if segment is not None:
    on_chart = shares[(shares["model"] == segment[0]) & (shares["kind"] == segment[1])]
    if not (len(on_chart) and int(on_chart["count"].iloc[0]) > 0):  # not among the models or kinds shown now
        if fresh_link:
            st.warning(escape_markdown(f"The link's segment {listed([segment[0]], 1)} · {listed([segment[1]], 1)} "
                                       f"is none of this chart's (stacked by {by}): click one."),
                       icon=":material/link_off:")
        segment = None
if segment is None:
    st.session_state["_results_segment"] = None
from_link = source == "link"
write_params({"stack": None if by == STACKS[0] else by, "segment_model": segment[0] if segment else None,
              "segment": segment[1] if segment else None})
remember_url("results-segment", tuple(st.query_params.get(key, "") for key in SEGMENT_KEYS))
if segment is not None:
    model_picked, kind_picked = segment
    table_view = image_table(run, view)
    rows = filter_images(table_view, models=[model_picked], outcome="mistake",
                         relations=[kind_picked] if by == "relation" else None)
    if by == "error type":
        rows = filter_annotated(rows, error_types=[kind_picked])
    picked_images = selection_images(rows, "class")
    chosen_selection = Selection(source="browse", models=(model_picked,), outcome="mistake",
                                 relations=(kind_picked,) if by == "relation" else (),
                                 error_types=(kind_picked,) if by == "error type" else ())
    link_params = {RUN_PARAM: run.run_id, **({VIEW_PARAM: st.query_params[VIEW_PARAM]} if VIEW_PARAM in st.query_params
                                             else {}), **chosen_selection.params()}
    # The Image page's way back opens this page as it is now (its URL state as back_ parameters): it went to Browse
    # with the segment's filters (a leftover of a UI review).
    # The heatmap's box is drawn below, after these links: its value is the widget's, not yet the URL's.
    here = {key: st.query_params.get_all(key) if key == "model" else st.query_params.get(key) for key in RESULTS_STATE}
    heatmap = st.session_state.get("class-metric")
    here["heatmap"] = heatmap if heatmap in heatmap_metrics[1:] else None
    open_params = {**link_params, **back_params(here)}
    st.markdown(f"**{escape_markdown(model_picked)}**: {plural(len(picked_images), 'mistake')} of type "
                f"**{escape_markdown(kind_picked)}**" + (" (the segment the link names; click one to pick another)"
                                                          if from_link else ""))
    if from_link:
        # The chart cannot show a link's segment as selected, so a click off the bars changes nothing:
        # this is the way to none (a UI review found no way to clear it).
        st.button("Show no segment", key="results-clear-segment", icon=":material/close:",
                  on_click=lambda: st.session_state.update(_results_segment=None))
    links = st.columns(2)
    if len(picked_images):
        links[0].page_link("pages/image_page.py", label="Page through them", icon=":material/open_in_full:",
                           query_params={**open_params, "open": str(picked_images["image"].iloc[0])})
    links[1].page_link("pages/browse_page.py", label="Browse them", icon=":material/grid_view:",
                       query_params={k: v for k, v in link_params.items() if k != "src"})
    grid = st.columns(6)
    has_files = run.images_dir.is_dir()
    shown = picked_images.head(12)
    # Browse's thumbnails (pages.pictures): files read as inference reads them (st.image on a path waited on a
    # FIFO), a picture that does not decode said in words.
    pictures = grid_thumbnails(run, shown["image"].astype(str), THUMBNAIL) if has_files else {}
    for i, item in enumerate(shown.itertuples(index=False)):
        with grid[i % 6]:
            mine = rows[(rows["image"] == item.image)]
            reason = mine["error_reason" if by == "error type" else "relation"]
            reason = str(reason.iloc[0]) if len(reason) and isinstance(reason.iloc[0], str) else ""
            # What the model predicted, as Confusions' cards say it (a UI review: only the true class and the reason)
            pred, prob = (mine["pred_wnid_1"].iloc[0], mine["prob_1"].iloc[0]) if len(mine) else (None, None)
            said = "" if pred is None or pd.isna(pred) else f"→ {escape_markdown(class_name(pred, run.info.label_space))}" \
                + ("" if prob is None or pd.isna(prob) else f" ({float(prob):.1%})")
            if has_files:
                show_thumbnail(run, str(item.image), pictures, caption=said or None)
            elif said:
                st.caption(said)
            st.caption(escape_markdown(f"{class_name(item.true_wnid, run.info.label_space)} · {reason}"))
            st.page_link("pages/image_page.py", label="Open", icon=":material/open_in_full:",
                         query_params={**open_params, "open": str(item.image)})
st.markdown("  \n".join(escape_markdown(data_problem_sentence(row)) for row in types.to_dict("records")))
show_table(types, docs=ERROR_TYPE_TABLE_DOCS, labels=ERROR_TYPE_TABLE_LABELS)
download_csv(types, f"{run.run_id}_error_types.csv", key="dl-error-types", label_space=run.info.label_space)
if len(types):
    points_long = mistake_shares(types=types).merge(
        types[["model", "accuracy", "accuracy_ci_low", "accuracy_ci_high", "family"]], on="model")
    # A type no shown model has a mistake of is a panel of points at 0: named below the chart instead (a UI
    # review: five of eight panels were empty on the sample run).
    present = set(points_long.loc[points_long["count"] > 0, "kind"])
    absent = [t for t in ERROR_TYPES if t not in present]
    points_long = points_long[points_long["kind"].isin(present)] if present else points_long
    points_long = points_long.assign(model=points_long["model"].map(html.escape),
                                     family=points_long["family"].fillna("other").map(html.escape))
    scatter_errors = error_offsets(points_long, "share")
    accuracy_errors = error_offsets(points_long, "accuracy")  # every number with its interval: both axes
    if scatter_errors is not None:  # px takes column names: the offsets go in as columns (split per panel)
        points_long = points_long.assign(_above=scatter_errors[0], _below=scatter_errors[1],
                                         _right=accuracy_errors[0], _left=accuracy_errors[1])
    # The hover writes each number with its interval as the tables do, '63.3% [45.5, 78.1]' (a UI review: Plotly
    # wrote the error bars' lengths, "63% +15% / -18%"); 'x_share' formats as a share (pages.tables.is_rate).
    points_long = points_long.assign(
        accuracy_text=[t or NA_DASH for t in interval_texts(points_long, "accuracy")],
        share_text=[t or NA_DASH for t in interval_texts(points_long.rename(columns={
            "share": "x_share", "share_ci_low": "x_share_ci_low", "share_ci_high": "x_share_ci_high"}), "x_share")])

    def results_types_scatter(points_long: pd.DataFrame, errors: bool):
        kinds = [t for t in ERROR_TYPES if t in set(points_long["kind"])]
        scatter_types = px.scatter(points_long, x="accuracy", y="share", color="family", facet_col="kind",
                                   facet_col_wrap=4, color_discrete_map=FAMILY_COLOURS, hover_name="model",
                                   category_orders={"kind": kinds},
                                   error_y="_above" if errors else None, error_y_minus="_below" if errors else None,
                                   error_x="_right" if errors else None, error_x_minus="_left" if errors else None,
                                   hover_data={"accuracy": False, "share": False, "accuracy_text": True,
                                               "share_text": True, **({"_above": False, "_below": False, "_right": False,
                                                                       "_left": False} if errors else {})},
                                   labels={"accuracy": "Accuracy", "share": "Share of the mistakes",
                                           "accuracy_text": "Accuracy", "share_text": "Share of the mistakes",
                                           "kind": "Error type", "family": "Family"})
        scatter_types.update_traces(marker=dict(size=10))
        scatter_types.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
        scatter_types.update_yaxes(tickformat=".0%", matches=None, showticklabels=True, rangemode="tozero")
        # Ticks at 0, 50 and 100 % inside a padded range: at the panels' edges "100%" ran into the next one's "0%".
        scatter_types.update_xaxes(tickformat=".0%", range=[-0.06, 1.06], tickvals=[0, 0.5, 1])
        scatter_types.update_layout(height=280 if len(kinds) <= 4 else 520, margin=dict(t=40, b=10),
                                    legend_title_text="")
        return scatter_types

    st.plotly_chart(cached_figure(results_types_scatter, points_long, scatter_errors is not None), width="stretch")
    st.caption("ETH's figure: each model's accuracy against the share of its mistakes of each type, one point per "
               "model coloured by family (hover a point for its model); whiskers: the Wilson intervals of the share "
               "and of the accuracy. With more models a trend shows how much of a better model's remaining error is "
               "the data's."
               + (f" No mistake of type {', '.join(absent)} among the models shown." if absent and present else ""))

# ------------------------------------------------------------------ claims
st.subheader("Claims")
st.caption("What this run lets you write: every pair of models on the images both classified (exact McNemar test "
           "for accuracy, a paired bootstrap of the difference for the means) and every pair of families with at "
           "least two models each (a bootstrap over models, then images; a family needs about five models before "
           "any difference can be shown). q: Benjamini-Hochberg over every model claim listed (and apart over "
           f"every family claim). A claim is supported when q < 0.05; differences in {format_level(level)} "
           "intervals, the better one first.")
predictions_counted = int(tables.per_model["n"].sum() + tables.per_model["n_unseen"].fillna(0).sum())
if len(models) < 2:
    st.info("A claim compares two models; " + ("the uploaded predictions hold one (a run without images: no model "
                                               "can be run on it)." if predictions_only(run) else
                                               "this run has one. Run another on the Models page."))
elif predictions_counted > CLAIMS_AUTO_ROWS and not st.toggle(
        f"Compare every pair ({plural(len(models) * (len(models) - 1) // 2, 'pair')} of models)", key="claims-on",
        help=f"{predictions_counted:,} predictions: the paired tests take a while the first time (then cached)."):
    st.caption("Turn on to compute the claims.")
else:
    from core.errors import WildLensError

    try:
        all_claims = claims(run, family, ci)
    except WildLensError as exc:
        show_error(exc, note="No claim can be made until that is fixed.")
        all_claims = []
    picked = set(chosen)
    shown_claims = [c for c in all_claims if c.kind == "families" or (c.a in picked and c.b in picked)]
    supported = [c for c in shown_claims if c.supported]
    unsupported = [c for c in shown_claims if not c.supported and c.possible]
    impossible = [c for c in shown_claims if not c.possible]
    st.markdown(f"**Supported by this run** ({len(supported)})")
    if supported:
        st.markdown("\n".join(f"- {escape_markdown(c.sentence)}" for c in supported))
    else:
        st.caption("None: no difference between these models (or families) has q < 0.05.")
    with st.expander(f"Not supported ({len(unsupported)})", expanded=not supported):
        st.markdown("\n".join(f"- {escape_markdown(c.sentence)}" for c in unsupported) or "None.")
    for c in impossible:
        st.info(escape_markdown(c.sentence[:1].upper() + c.sentence[1:]), icon=":material/groups:")
    statistics = [s for s in PHRASES if any(c.statistic == s and c.diff is not None for c in shown_claims
                                             if c.kind == "models")]
    if statistics:
        statistic = st.selectbox("Differences", statistics, key="claims-statistic",
                                 format_func=lambda s: PHRASES[s].label[:1].upper() + PHRASES[s].label[1:])
        st.plotly_chart(claims_figure([c for c in shown_claims if c.kind == "models"], statistic), width="stretch")
        st.caption("Each pair's difference A − B with its interval; grey: no evidence of a difference (q ≥ 0.05), "
                   "blue: supported. Hover a point for its verdict.")
    download_csv(claims_table(shown_claims), f"{run.run_id}_claims.csv", key="dl-claims",
                 label="Download the claims as CSV", label_space=run.info.label_space)

# ------------------------------------------------------------------ per class
st.subheader("Per class")
per_class = tables.per_class[tables.per_class["model"].isin(chosen)]
label_space = run.info.label_space
names = {w: class_name(w, label_space) for w in per_class["true_wnid"].unique()}
if refused_heatmap:  # a link's heatmap= that is no choice here, said beside the box it is about
    refused_choice("heatmap", refused_heatmap)
class_metric = st.selectbox("Heatmap", heatmap_metrics, key="class-metric", format_func=LABELS.get)
write_choice("heatmap", class_metric, heatmap_metrics[0])
grid = per_class.pivot(index="true_wnid", columns="model", values=class_metric).astype(float)
grid = grid[[m for m in models if m in grid.columns]]
if len(grid) > 40:
    # A readable heatmap has tens of rows: show the classes where the models do worst on average
    # (for severity, where it is highest); the table below holds every class.
    worst_first = grid.mean(axis=1).sort_values(ascending=class_metric != "severity").index
    shown_rows = st.slider("Classes in the heatmap (worst first)", 10, min(len(grid), 200), 40, step=10)
    grid = grid.loc[worst_first[:shown_rows]]
class_bounds = error_offsets(per_class, class_metric) is not None
if class_bounds:  # each cell's value and interval on hover, in the tables' one format
    texts = per_class[["true_wnid", "model"]].assign(text=interval_texts(per_class, class_metric))
    hover_text = texts.pivot(index="true_wnid", columns="model", values="text").reindex(
        index=grid.index, columns=grid.columns).fillna(NA_DASH)
grid.index = [html.escape(f"{names[w]} ({w})") for w in grid.index]
grid.columns = [html.escape(m) for m in grid.columns]


def results_heatmap(grid: pd.DataFrame, class_metric: str, hover_text: pd.DataFrame | None):
    heat = px.imshow(grid, text_auto=chart_format(class_metric) if grid.size <= 600 else False, aspect="auto",
                     color_continuous_scale="Blues", labels=dict(color=LABELS[class_metric], x="Model", y="True class"))
    if hover_text is not None:
        heat.update_traces(customdata=hover_text.to_numpy(), hovertemplate="%{y}<br>%{x}<br>"
                           + html.escape(LABELS[class_metric]) + ": %{customdata}<extra></extra>")
    else:
        heat.update_traces(hovertemplate="%{y}<br>%{x}<br>" + html.escape(LABELS[class_metric]) + ": %{z:"
                           + chart_format(class_metric) + "}<extra></extra>")
    if class_metric in RATE_COLUMNS:
        heat.update_coloraxes(colorbar_tickformat=".0%")
    heat.update_layout(height=max(260, 22 * len(grid) + 120), margin=dict(t=30, b=10))
    return heat


st.plotly_chart(cached_figure(results_heatmap, grid, class_metric, hover_text if class_bounds else None),
                width="stretch")
st.caption(f"`{class_metric}`: " + column_docs("per_class").get(class_metric, "")
           + " Empty cells: not defined (e.g. no mistakes)."
           + (f" Hover a cell for its {format_level(level)} interval." if class_bounds else ""))

# Classes too few images to rank: the accuracy's Wilson half-width above DEFAULT_HALF_WIDTH, and the images
# each would need (explain.metric_intervals.rankable).
ranking = rankable(per_class, half_width=DEFAULT_HALF_WIDTH, level=level)
half, wide = ranking["half_width"], ranking["too_wide"]
# The images a class needs at the least favourable accuracy within its interval (the one nearest 50 %:
# explain.metric_intervals.rankable), fewer than the worst case's the warning gives (a fresh look, 2026-12-06:
# 88 here and 93 there read as a contradiction; "at its accuracy" misnamed it, a UI review).
# Short: the cell's sentence pushed the metrics off a 1,400-pixel screen (a UI review); its help says the rest.
rank_note = pd.Series([f"±{h * 100:.0f} points: too few to rank (~{k:,} images for ±{DEFAULT_HALF_WIDTH * 100:.0f})"
                       if w else "" for h, w, k in zip(half, wide, ranking["images_needed"])],
                      index=per_class.index, dtype="string")
if wide.any():
    worst = half[wide].groupby(per_class.loc[wide, "true_wnid"]).max().sort_values(ascending=False)
    listed = ", ".join(f"{names[w]} (±{h * 100:.0f})" for w, h in worst.head(8).items())
    more = f" and {len(worst) - 8:,} more" if len(worst) > 8 else ""
    st.warning(f"{plural(len(worst), 'class')} of {len(names):,} {'has' if len(worst) == 1 else 'have'} an accuracy "
               f"interval wider than ±{DEFAULT_HALF_WIDTH * 100:.0f} points ({format_level(level)}): too few images to rank "
               f"{'it' if len(worst) == 1 else 'them'}: " + escape_markdown(listed + more) + ". A class needs about "
               f"{images_needed(DEFAULT_HALF_WIDTH, 0.5, level):,} images for ±{DEFAULT_HALF_WIDTH * 100:.0f} points "
               "(worst case); the *Ranking* column says how wide each one is.", icon=":material/straighten:")

shown_class = per_class.assign(class_name=per_class["true_wnid"].map(names), rank_note=rank_note)
cols = ["model", "true_wnid", "class_name", "rank_note"] + [c for c in per_class.columns
                                                           if c not in ("model", "true_wnid")]
show_table(shown_class[cols], "per_class", labels={"rank_note": "Ranking"},
           docs={"rank_note": f"Empty: the accuracy's {format_level(level)} interval is at most ±{DEFAULT_HALF_WIDTH * 100:.0f} "
                              "points wide. Otherwise its half-width (Wilson, explain.metric_intervals.rankable): too "
                              "few images to rank the class against others, and about how many images it would need "
                              f"for ±{DEFAULT_HALF_WIDTH * 100:.0f} points at the least favourable accuracy in its "
                              "interval (the one nearest 50 %): an observed 0 % of 6 images does not promise a narrow "
                              "interval."})
download_csv(tables.per_class, f"{run.run_id}_per_class.csv", key="dl-per-class", label_space=run.info.label_space)

# ------------------------------------------------------------------ classes the models have not seen
unseen = per_class[per_class["in_label_space"].eq(False).fillna(False).astype(bool)]
if not unseen.empty:
    st.subheader("Classes the models have not seen")
    st.caption("Classes outside a model's label space (e.g. an ImageNet-21k-only hyponym for an ImageNet-1k "
               "model): strict accuracy is NA, the model cannot name them. x: how close the nearest class it "
               "knows is (sim_to_seen, ImageNet-CoG); y: how close its predictions come to that best "
               "(lin_vs_best, 1 = as close as its label space allows). One point per class and model.")
    points = unseen.assign(model=unseen["model"].map(html.escape),
                           class_name=[html.escape(f"{names[w]} ({w})") for w in unseen["true_wnid"]])
    point_errors = bar_errors(points, "lin_vs_best")
    if point_errors:
        points = points.assign(_above=point_errors["error_y"], _below=point_errors["error_y_minus"],
                               interval=interval_texts(points, "lin_vs_best"))
        points["interval"] = points["interval"].fillna(NA_DASH)
    scatter = px.scatter(points, x="sim_to_seen", y="lin_vs_best", color="model", hover_name="class_name",
                         error_y="_above" if point_errors else None, error_y_minus="_below" if point_errors else None,
                         hover_data={"n": True, "share_nearest": ":" + PERCENT_D3, "hdist_at_1": ":.2f",
                                     "sim_to_seen": ":.3f", "lin_vs_best": ":.3f",
                                     **({"interval": True, "_above": False, "_below": False} if point_errors
                                        else {})},
                         labels={c: LABELS[c] for c in ("n", "share_nearest", "hdist_at_1", "sim_to_seen",
                                                        "lin_vs_best")} | {"model": "Model",
                                                                           "interval": f"{format_level(level)} interval"},
                         range_x=[0, 1], range_y=[0, 1.05])
    scatter.update_traces(marker=dict(size=11))
    scatter.update_layout(height=380, margin=dict(t=30, b=10), legend_title_text="")
    st.plotly_chart(scatter, width="stretch")
    view = ["model", "true_wnid", "class_name", "n", "sim_to_seen", "lin_vs_best", "share_nearest", "hdist_at_1"]
    view += [f"{c}{side}" for c in view if f"{c}_ci_low" in unseen.columns for side in ("_ci_low", "_ci_high")]
    show_table(unseen.assign(class_name=unseen["true_wnid"].map(names))[view], "per_class")
