"""Knowledge: the prompt recipes of one zero-shot model side by side (issue 14 item 6).

A recipe (classify.zeroshot.prompts.Recipe) is what the text tower reads for each class: the name alone, or
with its WordNet definition, its hypernym path, a knowledge file. Each recipe is stored as its own
model id (``clip/ViT-B-32.openai__def``); ``explain.recipes`` groups the run's metric tables by base
model and recipe and compares two recipes per class. The coverage and the prompts come from
``classify.zeroshot.prompts`` (``coverage``, ``knowledge``, ``class_prompts``). This page only picks and draws.
"""
import html

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from core.errors import WildLensError
from explain.recipes import (COLUMN_DOCS, COLUMN_LABELS, difference_summary, parse_model_id, recipe_difference,
                             recipe_label, recipe_table, zero_shot_groups)
from explain.schema import labels_of
from pages.charts import error_offsets
from pages.tables import (NA_DASH, PERCENT_D3, STYLE_MAX_CELLS, download_csv, points, show_table, styled,
                          table_column_config)
from pages.reads import class_name, metric_tables, predictions, predictions_only, predictions_only_note
from pages.text import escape_markdown, plural, show_error
from pages.run_state import page_link, require_run

LABELS = labels_of("per_model") | COLUMN_LABELS
SHOWN = ["recipe_label", "accuracy", "accuracy_vs_name", "sibling_rate", "path_mistakes", "lch_mistakes",
         "wup_mistakes", "lin_mistakes", "severity", "n", "n_mistakes", "accuracy_top5", "recipe", "model"]
TABLE_LABELS = COLUMN_LABELS | {"true_wnid": "Class id"}
SIGNED = ("accuracy_vs_name", "accuracy_change")  # differences: '+12.5 points' green, '-12.5 points' red
SHARES = ("accuracy_a", "accuracy_b", "sibling_rate_a", "sibling_rate_b")
# The recipes whose prompts are shown when the run has no zero-shot model: the knowledge kinds, ELEVATER's format.
STANDARD_RECIPES = ("", "def", "path", "def__path", "def__elevater")
PROMPT_LABEL_SET_MAX = 2000  # above this many classes names are made unique within the run's classes only
# Plotly's D3 blue and orange: the two bars of a recipe (accuracy, sibling %), as on Results.
BAR_COLOURS = {"accuracy": px.colors.qualitative.D3[0], "sibling_rate": px.colors.qualitative.D3[1]}  # metrics, not relations


def _signed_colour(value) -> str:
    if value is None or pd.isna(value) or value == 0:
        return ""
    return "color: #15803d" if value > 0 else "color: #b91c1c"


def show_signed_table(df: pd.DataFrame, table: str | None) -> None:
    """show_table, with the differences signed and coloured ('+23.2 points' green) and this page's shares
    as percentages; a table too big to style is left to show_table's own formats."""
    data = styled(df)
    if df.empty or df.size > STYLE_MAX_CELLS or data is df:
        show_table(df, table, docs=COLUMN_DOCS, labels=TABLE_LABELS)
        return
    signed = [c for c in SIGNED if c in df.columns]
    # Differences of shares in points, as Results and the claims write them (a UI review: "+0.0%").
    formats = {c: points for c in signed} | {c: "{:.1%}" for c in SHARES if c in df.columns}
    data = data.format(formats, subset=list(formats), na_rep=NA_DASH).map(_signed_colour, subset=signed)
    config = table_column_config(table, df.columns, df, docs=COLUMN_DOCS, labels=TABLE_LABELS, formats=False)
    st.dataframe(data, column_config=config, hide_index=True, width="stretch", placeholder=NA_DASH)


@st.cache_data(max_entries=32, show_spinner=False)
def _coverage(wnids: tuple) -> dict:
    from classify.zeroshot.prompts import coverage

    return coverage(wnids)


@st.cache_data(max_entries=8, show_spinner="Reading each class's WordNet knowledge…")
def _knowledge_table(wnids: tuple) -> pd.DataFrame:
    from classify.zeroshot.prompts import OPENAI_IMAGENET_CLASSNAMES, knowledge
    from core.labels import get_label_space

    definition, path = knowledge(wnids, "def"), knowledge(wnids, "path")
    openai = dict(zip(get_label_space("imagenet-1k").wnids, OPENAI_IMAGENET_CLASSNAMES))
    return pd.DataFrame({"wnid": list(wnids), "definition": [definition.get(w) for w in wnids],
                         "path": [path.get(w) for w in wnids], "openai_name": [openai.get(w) for w in wnids]},
                        dtype="string")


@st.cache_data(max_entries=16, show_spinner="Building the prompts…")
def _prompts(label_set: tuple, wnid: str, tag: str) -> list[str]:
    from classify.zeroshot.prompts import Recipe, class_prompts

    return class_prompts(label_set, Recipe.parse(tag), only=(wnid,))[wnid]


st.title("Knowledge")
run = require_run()
tables = metric_tables(run)
label_space = run.info.label_space
run_wnids = tuple(run.info.wnids) or tuple(sorted(tables.per_class["true_wnid"].astype(str).unique()))
names = {w: class_name(w, label_space) for w in run_wnids}
st.caption("A zero-shot model reads each class as text: its name in prompt templates, and with a **recipe** also "
           "its WordNet definition or hypernym path (ELEVATER). Each recipe is stored as its own model id, "
           "e.g. `clip/ViT-B-32.openai__def`; here the recipes of one model sit side by side.")

groups = zero_shot_groups(tables.per_model)
recipes = recipe_table(tables.per_model)
chosen_ids: list[str] = []
uploaded = predictions_only(run)  # uploaded predictions: no image to run a zero-shot model on
if not groups and uploaded:
    predictions_only_note("no zero-shot model can be run on it",
                          "To compare prompt recipes, import the images as a new run on the Import page and run a "
                          "CLIP model on it on the Models page, once per recipe. The coverage and the prompts below "
                          "need no model.")
elif not groups:
    st.info("No zero-shot model in this run yet. Run one on the Models page (pick a CLIP model, then a label set "
            "and a prompt recipe), or from a shell, once per recipe:\n\n"
            f"`python -m classify --run {run.run_id} --models clip:ViT-B-32.openai`  \n"
            f"`python -m classify --run {run.run_id} --models clip:ViT-B-32.openai --knowledge def`\n\n"
            "Their accuracy and mistakes then appear here side by side. CLIP weights must be on this machine "
            "(the command says how to fetch them). The coverage and the prompts below need no model.",
            icon=":material/info:")
    page_link("pages/models_page.py", run.run_id, "Models", icon=":material/memory:")
else:
    # ------------------------------------------------------------------ recipes side by side
    base = st.selectbox(f"Zero-shot model · {plural(len(groups), 'model')} in this run", list(groups),
                        format_func=lambda g: f"{g} ({plural(len(groups[g]), 'recipe')})")
    chosen_ids = groups[base]
    rows = recipes[recipes["model"].isin(chosen_ids)]
    st.subheader("Recipes side by side")
    if len(rows) == 1 and uploaded:
        st.caption("Only one recipe of this model in the uploaded predictions. Another recipe needs the images: "
                   "import them as a new run on the Import page and run the model there with it.")
    elif len(rows) == 1:
        st.caption("Only one recipe of this model in the run: run another (e.g. `--knowledge def`) to compare.")
    show_signed_table(rows[[c for c in SHOWN if c in rows.columns]], "per_model")
    download_csv(rows, f"{run.run_id}_recipes.csv", key="dl-recipes", label_space=label_space)

    fig = go.Figure()
    x = [html.escape(label) for label in rows["recipe_label"]]  # Plotly reads HTML in labels
    for metric in ("accuracy", "sibling_rate"):
        values = rows[metric].astype(float).tolist()
        bounds = error_offsets(rows, metric)  # the interval of each bar (issue 23), none without bounds
        fig.add_bar(name=LABELS[metric], x=x, y=values, marker_color=BAR_COLOURS[metric],
                    error_y=None if bounds is None else dict(type="data", symmetric=False, array=bounds[0],
                                                             arrayminus=bounds[1], thickness=1.2, width=4),
                    text=[f"{v:.1%}" if v == v else "–" for v in values], textposition="outside",
                    hovertemplate="%{x}<br>" + html.escape(LABELS[metric]) + ": %{y:" + PERCENT_D3 + "}<extra></extra>")
    fig.update_layout(barmode="group", height=360, margin=dict(t=30, b=10), legend_title_text="",
                      legend=dict(orientation="h", y=1.12))
    fig.update_yaxes(range=[0, 1.1], tickformat=".0%")
    st.plotly_chart(fig, width="stretch")
    st.caption("Accuracy: strict top-1 over the run's images. Sibling %: the share of the mistakes that are a "
               "sibling of the true class in WordNet (a sensible mistake); – : no mistakes. Similarity means are "
               "over the mistakes only. Whiskers: the 95% interval (Wilson). Hover a column header for its definition.")

    # ------------------------------------------------------------------ per class: what a recipe gained or lost
    if len(chosen_ids) >= 2:
        st.subheader("Per class: what one recipe gained or lost")
        label_of = {m: parse_model_id(m).label for m in chosen_ids}
        left, right = st.columns(2)
        model_a = left.selectbox("Recipe A", chosen_ids, index=0, format_func=label_of.get, key="recipe-a")
        model_b = right.selectbox("Recipe B", chosen_ids, index=1, format_func=label_of.get, key="recipe-b")
        if model_a == model_b:
            st.info("Pick two different recipes.")
        else:
            diff = recipe_difference(tables.per_class, model_a, model_b)
            counts = difference_summary(diff)
            st.markdown(f"**{escape_markdown(label_of[model_b])}** against **{escape_markdown(label_of[model_a])}**: "
                        f"gained on {plural(counts['gained'], 'class')}, lost on {plural(counts['lost'], 'class')}, "
                        f"the same on {plural(counts['same'], 'class')}"
                        + (f", {plural(counts['not comparable'], 'class')} not comparable" if counts["not comparable"]
                           else "") + ".")
            shown = diff.assign(class_name=diff["true_wnid"].map(lambda w: names.get(w) or class_name(w, label_space)))
            cols = ["true_wnid", "class_name", "outcome", "accuracy_a", "accuracy_b", "accuracy_change",
                    "sibling_rate_a", "sibling_rate_b", "n_a", "n_b"]
            show_signed_table(shown[cols], None)
            download_csv(diff, f"{run.run_id}_recipe_difference.csv", key="dl-recipe-diff", label_space=label_space)

# ------------------------------------------------------------------ knowledge coverage of the run's classes
st.subheader("Knowledge coverage of the run's classes")
if not run_wnids:
    st.info("This run names no classes yet: its coverage and prompts appear once it has classes (the Query page).")
    st.stop()
try:
    coverage = _coverage(run_wnids)
    knowledge_rows = _knowledge_table(run_wnids)
except WildLensError as exc:  # a class id WordNet 3.0 lacks (a hand-edited run.json, an uploaded file)
    show_error(exc)
    st.stop()
total = coverage["classes"]
cells = st.columns(4)
cells[0].metric("Classes", f"{total:,}")
for cell, key, label in zip(cells[1:], ("definition", "path", "openai_name"),
                            ("With a definition", "With a hypernym path", "With an OpenAI name")):
    cell.metric(label, f"{coverage[key]:,}", delta=f"{coverage[key] / total:.0%} of the classes" if total else None,
                delta_color="off", delta_arrow="off")
st.caption("From WordNet by wnid (classify.zeroshot.prompts.coverage): a definition is the synset's gloss, a path its chain "
           "of hypernyms (a prompt names the two above the class), an OpenAI name the name OpenAI curated for an "
           "ImageNet-1k class (`--names openai`); a class without a kind of knowledge gets the templates alone.")
knowledge_rows = knowledge_rows.assign(class_name=knowledge_rows["wnid"].map(names))[
    ["wnid", "class_name", "definition", "path", "openai_name"]]
show_table(knowledge_rows, None, labels={"path": "Hypernym path", "openai_name": "OpenAI name",
                                          "definition": "Definition"},
           docs={"definition": "The WordNet definition (--knowledge def).",
                 "path": "The hypernym path as a plain prompt writes it (--knowledge path).",
                 "openai_name": "OpenAI's curated name (ImageNet-1k classes only)."})
download_csv(knowledge_rows, f"{run.run_id}_knowledge.csv", key="dl-knowledge", label_space=label_space)

# ------------------------------------------------------------------ the prompts of one class
st.subheader("What the text tower reads")
wnid = st.selectbox("Class", run_wnids, format_func=lambda w: f"{names.get(w, w)} ({w})", key="prompt-class")
tags = [parse_model_id(m).recipe for m in chosen_ids] or list(STANDARD_RECIPES)
label_set = run_wnids
if chosen_ids:
    spaces = predictions(run)
    spaces = spaces.loc[spaces["model"].isin(chosen_ids), "label_space"].dropna().unique() \
        if "label_space" in spaces else []
    if len(spaces) == 1:
        from core.labels import get_label_space

        try:
            wnids_of_set = tuple(get_label_space(str(spaces[0])).wnids)
        except (WildLensError, OSError, KeyError):  # a label set this machine cannot read back: the run's classes
            wnids_of_set = ()
        if wnid in wnids_of_set and len(wnids_of_set) <= PROMPT_LABEL_SET_MAX:
            label_set = wnids_of_set
st.caption(("The prompts of " + ("each recipe above" if chosen_ids else "the usual recipes") + ", exactly as "
            "classify.zeroshot.prompts builds them for this class (the first three of each; the CSV has all); the text "
            "classifier averages their embeddings. Names are made unique within "
            f"{plural(len(label_set), 'class', 'classes')} of the label set."))
prompt_rows = []
for tag in tags:
    try:
        prompts = _prompts(label_set, wnid, tag)
    except WildLensError as exc:  # a knowledge or template file that is not on this machine
        st.warning(escape_markdown(f"{recipe_label(tag)}: {exc}"), icon=":material/warning:")
        continue
    prompt_rows += [{"recipe": tag, "recipe_label": recipe_label(tag), "template": i + 1, "prompt": p}
                    for i, p in enumerate(prompts)]
    with st.expander(f"{recipe_label(tag)} · {plural(len(prompts), 'prompt')}", expanded=True):
        st.code("\n".join(prompts[:3]) + ("\n…" if len(prompts) > 3 else ""), language=None, wrap_lines=True)
if prompt_rows:
    prompt_table = pd.DataFrame(prompt_rows)
    download_csv(prompt_table.assign(wnid=wnid)[["wnid", "recipe", "recipe_label", "template", "prompt"]],
                 f"{run.run_id}_{wnid}_prompts.csv", key="dl-prompts", label="Download every prompt (CSV)",
                 label_space=label_space)
