"""Probes: sample-efficiency curves of linear probes on frozen features, and the embedding map
(issue 15 items 4 and 5).

Numbers: the probe results are ``python -m probe``'s stored tables (``probes/results.parquet``:
one row per model, variant, shots N and seed), drawn as they are; the mean and the min-max band
over seeds are the only arithmetic here. The fixed-head reference is the run's per-model
accuracy (``pages.reads.metric_tables``). The map is ``explain.embedding``'s projection of
``core.features``' stored features, joined with the model's stored predictions.
"""
import html
import re
import textwrap

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from core.features import feature_dir, feature_models, read_feature_meta, read_features
from core.runstore import Run, _files_fingerprint, manifest_fingerprint, predictions_fingerprint, read_table
from explain.embedding import METHOD_LABELS, embedding_table, explained_variance, project, select_images
from explain.vocabulary import RELATION_COLOURS, RELATIONS
from pages.pictures import THUMBNAIL, grid_thumbnails, show_thumbnail
from pages.tables import NA_DASH, download_csv, show_table
from pages.text import escape_markdown, plural, show_error
from pages.reads import metric_tables, predictions_only, predictions_only_note, usable_files
from pages.run_state import require_run

PALETTE = tuple(px.colors.qualitative.D3)  # Plotly's D3: one colour per model (models, not relations)
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")  # one per probe variant
RESULT_DOCS = {
    "model": "The model whose frozen features the probe was trained on.",
    "variant": "The probe: how its head was initialised and trained (python -m probe).",
    "shots": "N: training images per class (0: zero-shot, no training).",
    "seeds": "Seeds (random draws of the N training images) averaged; 1 for N = 0, the zero-shot head, which draws nothing.",
    "n_train": "Training images (mean over seeds).", "n_test": "Test images: those not drawn for training, nor near duplicates of a training image (mean over seeds).",
    "top1_mean": "Top-1 accuracy on the test images, mean over seeds.",
    "top1_std": "Standard deviation of top-1 over seeds (NA for one seed).",
    "top1_min": "Lowest top-1 over seeds.", "top1_max": "Highest top-1 over seeds.",
    "top5_mean": "Top-5 accuracy on the test images, mean over seeds.",
    "top1_ci_low": "Lower bound of the 95 % Wilson interval of top1_mean over the test images (one draw's n_test): "
                   "the uncertainty from which images were photographed, apart from the seeds' spread.",
    "top1_ci_high": "Upper bound of the same interval.",
    "capped_classes": "Classes with fewer than N + 1 images: they trained on all but one of theirs, so the "
                      "curve flattens once N passes the smallest class.",
    "fixed_head": "The model's own classifier head: strict top-1 accuracy on all the run's usable images (Results).",
}
RESULT_LABELS = {"shots": "N (shots per class)", "seeds": "Seeds", "n_train": "Train images", "n_test": "Test images",
                 "top1_mean": "Top-1 (mean)", "top1_std": "Top-1 (std)", "top1_min": "Top-1 (min)",
                 "top1_max": "Top-1 (max)", "top5_mean": "Top-5 (mean)", "top1_ci_low": "Top-1 low (images)",
                 "top1_ci_high": "Top-1 high (images)", "capped_classes": "Capped classes", "fixed_head": "Fixed head top-1",
                 "variant": "Variant", "model": "Model"}
PERCENT_COLUMNS = {"top1_mean", "top1_std", "top1_min", "top1_max", "top5_mean", "fixed_head", "top1_ci_low",
                   "top1_ci_high"}
MAP_DOCS = {"image": "The image's file in the run.", "true_name": "ImageNet's name of the true class.",
            "pred_name": "ImageNet's name of the model's top-1 prediction.", "prob_1": "Its probability.",
            "correct": "Top-1 is the true class (strict).",
            "relation": "WordNet relation of the prediction to the true class ('same' when correct)."}
SELECTED_SHOWN = 24  # thumbnails drawn for a selection; the table lists them all


def probe_commands(run: Run) -> str:
    models = ",".join(run.info.models) or "efficientnet_lite0"
    return (f"python -m classify --run {run.run_id} --models {models} --features\n"
            f"python -m probe --run {run.run_id} --models {models}")


def read_probe_table(run: Run, name: str) -> pd.DataFrame | None:
    """``probes/<name>`` of the run as ``python -m probe`` wrote it (its schema: probe.artefact and
    probe.fewshot); None when it is not there."""
    from probe.paths import PER_CLASS, RESULTS, probes_dir

    path = probes_dir(run) / name
    if not path.exists():  # asked before probe.artefact loads scikit-learn (1 s of a run without probes' first load)
        return None
    from probe.artefact import read_results
    from probe.fewshot import PER_CLASS_SCHEMA

    if name == RESULTS:
        return read_results(run)
    return read_table(path, PER_CLASS_SCHEMA if name == PER_CLASS else None)


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Per (model, variant, N): the rows (seeds; one row without a seed for N = 0), the mean / std /
    min / max of top-1, the mean top-5 and, where probe stored it, the most classes capped below N."""
    keys = ["model", "variant", "shots"]
    numbers = [c for c in ("n_train", "n_test", "top1", "top5", "capped_classes") if c in results.columns]
    data = results[keys].copy()
    for column in numbers:
        data[column] = pd.to_numeric(results[column], errors="coerce").astype("float64")
    data["shots"] = pd.to_numeric(results["shots"], errors="coerce").astype("float64")
    groups = data.groupby(keys, sort=True, dropna=False)
    spec = dict(seeds=("top1", "size"), n_train=("n_train", "mean"), n_test=("n_test", "mean"),
                top1_mean=("top1", "mean"), top1_std=("top1", "std"), top1_min=("top1", "min"),
                top1_max=("top1", "max"), top5_mean=("top5", "mean"))
    if "capped_classes" in data.columns:
        spec["capped_classes"] = ("capped_classes", "max")
    out = groups.agg(**{k: v for k, v in spec.items() if v[0] in data.columns}).reset_index()
    out["shots"] = out["shots"].astype("Int64")
    if "n_test" in out.columns:  # issue 23: the interval over images, beside the spread over seeds
        from probe.artefact import image_interval  # here: probe/ loads scikit-learn, the page may not need it

        out["top1_ci_low"], out["top1_ci_high"] = image_interval(out["top1_mean"], out["n_test"])
    return out


def shot_position(shots: pd.Series) -> np.ndarray:
    """x of each N on the log2 axis; N = 0 (zero-shot) sits half a step left of N = 1."""
    values = shots.astype("float64").to_numpy()
    return np.where(values > 0, values, 0.5)


def curve_figure(summary: pd.DataFrame, fixed: dict[str, float], note: str = "") -> go.Figure:
    """The curves; ``note`` (probe.artefact.curve_notes: where N stops) is written above the plot."""
    fig = go.Figure()
    models = list(dict.fromkeys(summary["model"]))
    variants = list(dict.fromkeys(summary["variant"]))
    colour = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    dash = {v: DASHES[i % len(DASHES)] for i, v in enumerate(variants)}
    for (model, variant), part in summary.groupby(["model", "variant"], sort=False):
        part = part.sort_values("shots")
        x = shot_position(part["shots"])
        name = html.escape(f"{model} · {variant}")
        if (part["seeds"] > 1).any():  # the band: min to max over seeds
            fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]),
                                     y=np.concatenate([part["top1_max"], part["top1_min"][::-1]]),
                                     fill="toself", fillcolor=colour[model], opacity=0.15, line=dict(width=0),
                                     hoverinfo="skip", showlegend=False, legendgroup=name))
        ci_low = part["top1_ci_low"] if "top1_ci_low" in part else pd.Series(np.nan, index=part.index)
        ci_high = part["top1_ci_high"] if "top1_ci_high" in part else pd.Series(np.nan, index=part.index)
        hover = [html.escape(f"{model} · {variant}") + ("<br>N = 0: zero-shot" if s == 0 else f"<br>N = {int(s)} per class") + f"<br>top-1 {m:.1%} "
                 + (f"(min {lo:.1%}, max {hi:.1%}, {int(k)} seeds)" if k > 1 else "(1 seed)")
                 + ("" if pd.isna(cl) else f"<br>95 % over the {int(n)} test images: [{cl:.1%}, {ch:.1%}]")
                 for s, m, lo, hi, k, cl, ch, n in zip(part["shots"], part["top1_mean"], part["top1_min"],
                                                       part["top1_max"], part["seeds"], ci_low, ci_high,
                                                       part.get("n_test", pd.Series(0, index=part.index)).fillna(0))]
        error = dict(type="data", symmetric=False, array=(ci_high - part["top1_mean"]).clip(lower=0).to_numpy(),
                     arrayminus=(part["top1_mean"] - ci_low).clip(lower=0).to_numpy(), thickness=1.2, width=4,
                     color=colour[model]) if ci_low.notna().any() else None
        fig.add_trace(go.Scatter(x=x, y=part["top1_mean"], mode="lines+markers", name=name, legendgroup=name,
                                 line=dict(color=colour[model], dash=dash[variant], width=2.5), error_y=error,
                                 hovertext=hover, hoverinfo="text"))
    # One dotted line per fixed-head accuracy: models that share it (as printed) share the line, in grey,
    # instead of drawing their labels on top of each other; labels alternate sides.
    heads: dict[str, list[str]] = {}
    for model in models:
        if model in fixed and not pd.isna(fixed[model]):
            heads.setdefault(f"{fixed[model]:.1%}", []).append(model)
    for i, (text, group) in enumerate(sorted(heads.items(), key=lambda kv: fixed[kv[1][0]])):
        line_colour = colour[group[0]] if len(group) == 1 else "#555555"
        fig.add_hline(y=fixed[group[0]], line=dict(color=line_colour, dash="dot", width=1.5),
                      annotation_text=html.escape(f"{', '.join(group)}: fixed head {text}"),
                      annotation_position="top left" if i % 2 == 0 else "bottom right",
                      annotation_font_color=line_colour)
    shots = sorted({int(s) for s in summary["shots"].dropna()})
    ticks = [0.5 if s == 0 else s for s in shots]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=["0 (zero-shot)" if s == 0 else str(s) for s in shots],
                     title_text="N: training images per class (log2 scale)")
    fig.update_yaxes(tickformat=".0%", title_text="Top-1 accuracy on the test images", rangemode="tozero")
    lines = textwrap.wrap(html.escape(note), 120)
    if lines:
        fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=1.02, xanchor="left",
                           yanchor="bottom", showarrow=False, align="left", font=dict(color="#555555"))
    fig.update_layout(height=460 + 16 * len(lines), margin=dict(l=10, r=10, t=30 + 16 * len(lines), b=10),
                      legend=dict(orientation="h", y=-0.25),
                      hovermode="x unified",  # lines that coincide (a tie) hide each other: the hover lists them all
                      plot_bgcolor="white", xaxis=dict(gridcolor="#eee"), yaxis=dict(gridcolor="#eee"))
    return fig


def probes_section(run: Run) -> None:
    st.header("Sample efficiency", divider="gray")
    try:
        results = read_probe_table(run, "results.parquet")
    except Exception as exc:  # a damaged file: say which, keep the map below
        show_error(exc)
        return
    if results is None or results.empty:
        st.info("No probe results in this run yet. Store the models' frozen features (the Models page's *Also store "
                "features (for Probes)*, or the first command), then train the probes:", icon=":material/info:")
        st.code(probe_commands(run), language="sh")
        return
    # The raw view: the probes are trained and tested on the stored labels, so their fixed-head line is
    # the raw accuracy whatever the sidebar shows (code review).
    tables = metric_tables(run, "raw")
    per_model = tables.per_model
    fixed = dict(zip(per_model["model"], per_model["accuracy"])) if not per_model.empty else {}
    summary = summarise(results)
    models = list(dict.fromkeys(summary["model"]))
    chosen = st.multiselect(f"Models · {plural(len(models), 'model')} with probes", models, default=models,
                            key="probe-models")
    shown = summary[summary["model"].isin(chosen)]
    if shown.empty:
        return
    from probe.artefact import curve_notes

    cap, duplicates = curve_notes(results[results["model"].isin(chosen)])  # probe's words, from its stored columns
    if duplicates:
        st.warning(escape_markdown(duplicates), icon=":material/warning:")
    st.plotly_chart(curve_figure(shown, fixed, cap), width="stretch", key="probe-curve")
    from probe.artefact import coinciding_curves

    same = coinciding_curves(results[results["model"].isin(chosen)])
    if same:
        st.caption(escape_markdown(same))
    st.caption("Lines: top-1 of the probe on the images not drawn for training, mean over seeds; bands: min to max "
               "over seeds; error bars: the 95 % Wilson interval over one draw's test images. Dotted horizontal lines: each model's own fixed classifier head (strict top-1 on all the "
               "run's usable images, as on Results), for comparison; the probe's test images are a subset of those.")
    table = shown.assign(fixed_head=shown["model"].map(fixed))
    config = {c: st.column_config.NumberColumn(RESULT_LABELS[c], help=f"`{c}`: {RESULT_DOCS[c]}", format="percent")
              for c in PERCENT_COLUMNS}
    show_table(table, docs=RESULT_DOCS, labels=RESULT_LABELS, column_config=config)
    space = run.info.label_space
    cols = st.columns(3)
    with cols[0]:
        download_csv(table, f"{run.run_id}_probes_summary.csv", key="dl-probe-summary",
                     label="Download the curve table (CSV)", label_space=space)
    with cols[1]:
        download_csv(results, f"{run.run_id}_probes_results.csv", key="dl-probe-results",
                     label="Download every seed (CSV)", label_space=space)
    try:
        per_class = read_probe_table(run, "per_class.parquet")
    except Exception as exc:
        show_error(exc)
        per_class = None
    if per_class is not None:
        with cols[2]:
            download_csv(per_class, f"{run.run_id}_probes_per_class.csv", key="dl-probe-per-class",
                         label="Download per class (CSV)", label_space=space)


# ------------------------------------------------------------------ the embedding map
def features_fingerprint(run: Run, model: str) -> str:
    folder = feature_dir(run, model)
    return _files_fingerprint(run.path, sorted(folder.glob("*"))) if folder.is_dir() else "none"


@st.cache_data(max_entries=16, show_spinner="Projecting the features…")
def _embedding(run_path: str, model: str, method: str, features_fp: str, predictions_fp: str,
               manifest_fp: str) -> tuple[pd.DataFrame, tuple[float, float]]:
    run = Run(run_path)
    index, features = read_features(run, model)
    index, features = select_images(index, features, usable_files(run))
    coords = project(features, method, seed=0)
    from pages.reads import predictions

    table = embedding_table(index, coords, predictions(run), model,
                            label_space=run.info.label_space or "imagenet-1k")
    return table, explained_variance(features) if method == "pca" else (np.nan, np.nan)


def embedding(run: Run, model: str, method: str) -> tuple[pd.DataFrame, tuple[float, float]]:
    return _embedding(str(run.path), model, method, features_fingerprint(run, model), predictions_fingerprint(run),
                      manifest_fingerprint(run))


COLOUR_BY = {"true": "True class", "correct": "Correct or not", "relation": "Relation of the mistake"}


def colour_groups(table: pd.DataFrame, by: str) -> list[tuple[str, str | None, np.ndarray]]:
    """(legend label, colour or None for the palette, row positions) per group of points."""
    if by == "true":
        labels = (table["true_name"].fillna("?") + " (" + table["true_wnid"].fillna("?") + ")").to_numpy()
        order = list(dict.fromkeys(sorted(labels)))
        return [(label, None, np.flatnonzero(labels == label)) for label in order]
    if by == "correct":
        correct = table["correct"]
        return [(label, colour, np.flatnonzero(mask.to_numpy(dtype=bool)))
                for label, colour, mask in (("correct", RELATION_COLOURS["same"], correct.fillna(False)),
                                            ("mistake", RELATION_COLOURS["distant"], (~correct).fillna(False)),
                                            ("no prediction", "#bbbbbb", correct.isna()))]
    relation = table["relation"].fillna("no prediction")
    return [(r, RELATION_COLOURS.get(r, "#bbbbbb"), np.flatnonzero((relation == r).to_numpy(dtype=bool)))
            for r in (*RELATIONS, "no prediction")]


def map_figure(table: pd.DataFrame, by: str, method: str) -> go.Figure:
    fig = go.Figure()
    hover = np.array([
        "<b>" + html.escape(str(image)) + "</b><br>true: " + html.escape(f"{tn} ({tw})") + "<br>predicted: "
        + (html.escape(f"{pn} ({pw})") + (f" · {p:.0%}" if not pd.isna(p) else "") if not pd.isna(pw) else NA_DASH)
        + ("" if pd.isna(rel) else "<br>" + html.escape(str(rel)))
        for image, tn, tw, pn, pw, p, rel in zip(table["image"], table["true_name"], table["true_wnid"],
                                                 table["pred_name"], table["pred_wnid"], table["prob_1"],
                                                 table["relation"])], dtype=object)
    trace = go.Scattergl if len(table) > 5000 else go.Scatter
    for i, (label, colour, rows) in enumerate(colour_groups(table, by)):
        if not len(rows):
            continue
        fig.add_trace(trace(x=table["x"].to_numpy()[rows], y=table["y"].to_numpy()[rows], mode="markers",
                            name=html.escape(label), customdata=rows, hovertext=hover[rows], hoverinfo="text",
                            marker=dict(size=9, color=colour or PALETTE[i % len(PALETTE)], opacity=0.85,
                                        line=dict(color="white", width=0.5))))
    axis = METHOD_LABELS[method]
    fig.update_xaxes(title_text=f"{axis} 1", zeroline=False, gridcolor="#eee")
    fig.update_yaxes(title_text=f"{axis} 2", zeroline=False, gridcolor="#eee")
    fig.update_layout(height=560, margin=dict(l=10, r=10, t=30, b=10), plot_bgcolor="white", dragmode="lasso",
                      legend=dict(title_text=COLOUR_BY[by]))
    return fig


def selected_rows(event) -> list[int]:
    """Row positions of the map's table picked by a box or lasso (each point carries its row as customdata)."""
    points = (event.selection.get("points") if event and getattr(event, "selection", None) else None) or []
    rows = []
    for point in points:
        value = point.get("customdata")
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value is not None:
            rows.append(int(value))
    return list(dict.fromkeys(rows))


def embedding_section(run: Run) -> None:
    st.header("Embedding map", divider="gray")
    try:
        models = feature_models(run)
    except Exception as exc:
        show_error(exc)
        return
    if not models:
        st.info("No stored features in this run yet. Run the models on the Models page with *Also store features "
                "(for Probes)* ticked, or store a model's pooled features with:", icon=":material/info:")
        st.code(probe_commands(run).splitlines()[0], language="sh")
        return
    c1, c2, c3 = st.columns([2, 1, 2])
    model = c1.selectbox(f"Model · {plural(len(models), 'model')} with stored features", models, key="map-model")
    method = c2.radio("Projection", list(METHOD_LABELS), format_func=METHOD_LABELS.get, horizontal=True,
                      key="map-method", help="PCA (default): exact and fast, distances mean something. t-SNE on "
                      "request: keeps neighbourhoods, not distances (seed 0, perplexity 30 capped at (n-1)/3).")
    by = c3.radio("Colour by", list(COLOUR_BY), format_func=COLOUR_BY.get, horizontal=True, key="map-colour")
    try:
        table, variance = embedding(run, model, method)
    except Exception as exc:
        show_error(exc)
        return
    if table.empty:
        st.info(f"{escape_markdown(model)} has no stored features of a usable image.")
        return
    meta = read_feature_meta(run, model) or {}
    event = st.plotly_chart(map_figure(table, by, method), width="stretch", on_select="rerun",
                            selection_mode=("box", "lasso"), key=f"map-{model}-{method}-{by}")
    note = (f"PCA axes explain {variance[0]:.1%} and {variance[1]:.1%} of the variance. " if method == "pca" else
            "t-SNE: clusters' sizes and the gaps between them mean little. ")
    st.caption(f"{plural(len(table), 'image')} · {meta.get('kind', 'features')}, {meta.get('dim', '?')} dimensions, "
               f"L2-normalised before the projection. {note}Hover a point for its image and classes; draw a box or "
               "a lasso to list those images below.")
    rows = selected_rows(event)
    if not rows:
        return
    picked = table.iloc[[r for r in rows if 0 <= r < len(table)]]
    st.subheader(f"Selected: {plural(len(picked), 'image')}")
    from explain.selection import MAX_LISTED, Selection
    from pages.run_state import RUN_PARAM

    chosen = Selection().with_images(picked["image"].astype(str))
    st.page_link("pages/image_page.py", label=f"Page through {'the first ' if len(picked) > MAX_LISTED else ''}"
                 f"{plural(min(len(picked), MAX_LISTED), 'image')} on the Image page (tag, relabel, exclude)",
                 icon=":material/open_in_full:", query_params={RUN_PARAM: run.run_id, **chosen.params()})
    cols = st.columns(6)
    shown = picked.head(SELECTED_SHOWN)
    # Thumbnails as on the other grids (pages.pictures): st.image on the file's path stopped the page at a file
    # that no longer decodes, and a run of uploaded predictions has no files.
    thumbnails = grid_thumbnails(run, shown["image"].astype(str), THUMBNAIL)
    for i, (_, row) in enumerate(shown.iterrows()):
        verdict = "no prediction" if pd.isna(row["pred_name"]) else f"→ {row['pred_name']}"
        # Captions name classes (our vocabulary) and the image's hash-based file name, escaped anyway.
        with cols[i % 6]:
            show_thumbnail(run, str(row["image"]), thumbnails, caption=escape_markdown(f"{row['true_name']} {verdict}"))
    show_table(picked[["image", "true_name", "pred_name", "prob_1", "correct", "relation"]], docs=MAP_DOCS,
               labels={"image": "Image", "prob_1": "Probability", "correct": "Correct", "relation": "Relation"})
    safe_model = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)
    download_csv(picked, f"{run.run_id}_map_{safe_model}_selection.csv", key="dl-map-selection",
                 label="Download the selection (CSV)", label_space=run.info.label_space)


st.title("Probes")
run = require_run()
st.caption("Linear probes on the models' frozen features (ImageNet-CoG, ELEVATER): how top-1 grows with N training "
           "images per class, beside each model's own head; and a map of the features, one point per image.")
if predictions_only(run):  # uploaded predictions: no image to take features from
    predictions_only_note(
        "no features can be taken from its images, and probes and the map are made of features",
        "To probe these models, import the images as a new run on the Import page, run the models on it on the "
        "Models page with *Also store features (for Probes)* ticked, then train the probes with `python -m probe "
        "--run NEW_RUN_ID`.")
    st.stop()
probes_section(run)
embedding_section(run)
