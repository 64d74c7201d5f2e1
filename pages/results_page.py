"""Results: per model and per class, side by side, grouped CNN versus transformer.

Every number here is a cell of ``explain.metrics.compute_metric_tables`` (via
``pages.reads.metric_tables``); this page only selects, labels and draws.
"""
import html

import plotly.express as px
import streamlit as st

from explain.metrics import column_docs
from explain.schema import labels_of
from pages.tables import PERCENT_D3, download_csv, show_table
from pages.reads import class_name, metric_tables, model_family
from pages.run_state import page_link, require_run
from pages.text import plural

RATE_COLUMNS = ["accuracy", "accuracy_hier", "accuracy_top5", "accuracy_balanced", "sibling_rate", "hprec_at_5",
                "share_nearest", "share_nearest_unseen"]
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
tables = metric_tables(run)
if tables.per_model.empty:
    st.info("No predictions in this run yet: run models on the Models page.")
    page_link("pages/models_page.py", run.run_id, "Models", icon=":material/memory:")
    st.stop()

models = tables.per_model["model"].tolist()
family = {m: model_family(m) for m in models}
models = sorted(models, key=lambda m: (FAMILY_ORDER.get(family[m], 9), m))
chosen = st.multiselect(f"Models · {plural(len(models), 'model')} in this run", models, default=models,
                        format_func=lambda m: f"{m} ({family[m]})")
if not chosen:
    st.stop()

st.caption("Accuracy is strict (top-1 == true class); *Hier. accuracy* also counts a prediction of a hyponym "
           "of the true class as correct, as the 2023 paper's notebooks did. Similarity means over the "
           "mistakes are the paper's figures; *(all)* columns average over every image. Hover a column "
           "header for its definition and its name in the CSV; – marks a value that is not defined "
           "(e.g. no mistakes).")

# ------------------------------------------------------------------ per model
st.subheader("Per model")
per_model = tables.per_model[tables.per_model["model"].isin(chosen)]
shown = per_model.assign(family=per_model["model"].map(family))
shown = shown.iloc[sorted(range(len(shown)), key=lambda i: (FAMILY_ORDER.get(shown["family"].iloc[i], 9),
                                                             shown["model"].iloc[i]))]
show_table(shown[["family"] + [c for c in shown.columns if c != "family"]], "per_model")
download_csv(tables.per_model, f"{run.run_id}_per_model.csv", key="dl-per-model", label_space=run.info.label_space)

metric = st.selectbox("Chart", [c for c in RATE_COLUMNS + MEAN_COLUMNS if c in per_model.columns],
                      format_func=LABELS.get)
# Plotly reads HTML in labels and hover texts (<a href> is a live link): model ids from stored
# predictions and class names reach the charts HTML-escaped; Plotly shows the entities as text.
chart = shown.assign(model=shown["model"].map(html.escape))
fig = px.bar(chart, x="model", y=metric, color="family", color_discrete_map=FAMILY_COLOURS,
             category_orders={"model": chart["model"].tolist()}, text_auto=chart_format(metric),
             hover_data={"n": True, "n_mistakes": True, metric: ":" + chart_format(metric)},
             labels={metric: LABELS[metric], "model": "Model", "n": LABELS["n"], "n_mistakes": LABELS["n_mistakes"]})
fig.update_layout(height=380, margin=dict(t=30, b=10), legend_title_text="")
if metric in RATE_COLUMNS:
    fig.update_yaxes(range=[0, 1], tickformat=".0%")  # axis marks at round shares; values above read PERCENT_D3
st.plotly_chart(fig, width="stretch")
st.caption(f"`{metric}`: " + column_docs("per_model").get(metric, ""))

# ------------------------------------------------------------------ per class
st.subheader("Per class")
per_class = tables.per_class[tables.per_class["model"].isin(chosen)]
label_space = run.info.label_space
names = {w: class_name(w, label_space) for w in per_class["true_wnid"].unique()}
class_metric = st.selectbox("Heatmap", [c for c in RATE_COLUMNS + MEAN_COLUMNS if c in per_class.columns],
                            key="class-metric", format_func=LABELS.get)
grid = per_class.pivot(index="true_wnid", columns="model", values=class_metric).astype(float)
grid = grid[[m for m in models if m in grid.columns]]
if len(grid) > 40:
    # A readable heatmap has tens of rows: show the classes where the models do worst on average
    # (for severity, where it is highest); the table below holds every class.
    worst_first = grid.mean(axis=1).sort_values(ascending=class_metric != "severity").index
    shown_rows = st.slider("Classes in the heatmap (worst first)", 10, min(len(grid), 200), 40, step=10)
    grid = grid.loc[worst_first[:shown_rows]]
grid.index = [html.escape(f"{names[w]} ({w})") for w in grid.index]
grid.columns = [html.escape(m) for m in grid.columns]
heat = px.imshow(grid, text_auto=chart_format(class_metric) if grid.size <= 600 else False, aspect="auto",
                 color_continuous_scale="Blues", labels=dict(color=LABELS[class_metric], x="Model", y="True class"))
heat.update_traces(hovertemplate="%{y}<br>%{x}<br>" + html.escape(LABELS[class_metric]) + ": %{z:"
                   + chart_format(class_metric) + "}<extra></extra>")
if class_metric in RATE_COLUMNS:
    heat.update_coloraxes(colorbar_tickformat=".0%")
heat.update_layout(height=max(260, 22 * len(grid) + 120), margin=dict(t=30, b=10))
st.plotly_chart(heat, width="stretch")
st.caption(f"`{class_metric}`: " + column_docs("per_class").get(class_metric, "")
           + " Empty cells: not defined (e.g. no mistakes).")

shown_class = per_class.assign(class_name=per_class["true_wnid"].map(names))
cols = ["model", "true_wnid", "class_name"] + [c for c in per_class.columns if c not in ("model", "true_wnid")]
show_table(shown_class[cols], "per_class")
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
    scatter = px.scatter(points, x="sim_to_seen", y="lin_vs_best", color="model", hover_name="class_name",
                         hover_data={"n": True, "share_nearest": ":" + PERCENT_D3, "hdist_at_1": ":.2f",
                                     "sim_to_seen": ":.3f", "lin_vs_best": ":.3f"},
                         labels={c: LABELS[c] for c in ("n", "share_nearest", "hdist_at_1", "sim_to_seen",
                                                        "lin_vs_best")} | {"model": "Model"},
                         range_x=[0, 1], range_y=[0, 1.05])
    scatter.update_traces(marker=dict(size=11))
    scatter.update_layout(height=380, margin=dict(t=30, b=10), legend_title_text="")
    st.plotly_chart(scatter, width="stretch")
    view = points[["model", "true_wnid", "class_name", "n", "sim_to_seen", "lin_vs_best", "share_nearest",
                   "hdist_at_1"]]
    show_table(unseen.assign(class_name=unseen["true_wnid"].map(names))[view.columns], "per_class")
