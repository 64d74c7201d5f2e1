"""Confusions: each true class's top-3 false positives per model, coloured by WordNet relation,
and the misclassified images themselves. Numbers come from ``explain.metrics`` tables."""
import pandas as pd
import streamlit as st

from explain.explanations import confusion_lcs_phrase
from explain.metrics import column_docs
from explain.vocabulary import RELATION_COLOURS, relation_help
from pages.common import (RUN_PARAM, class_name, download_csv, escape_markdown, metric_tables, misclassified_images,
                          require_run)


def relation_style(value: str) -> str:
    colour = RELATION_COLOURS.get(value)
    return f"background-color: {colour}; color: white" if colour else ""


st.title("Confusions")
run = require_run()
tables = metric_tables(run)
confusions = tables.confusions
if tables.per_model.empty:
    st.info("No predictions in this run yet: run models on the Models page.")
    st.stop()

label_space = run.info.label_space
models = tables.per_model["model"].tolist()
chosen_models = st.multiselect("Models", models, default=models)
true_wnids = sorted(tables.per_class["true_wnid"].unique())
names = {w: class_name(w, label_space) for w in set(true_wnids) | set(confusions["pred_wnid"])}
true_wnid = st.selectbox("True class", true_wnids, format_func=lambda w: f"{names[w]} ({w})")
st.caption(relation_help())

# ------------------------------------------------------------------ side by side per model
cols = st.columns(max(1, min(len(chosen_models), 3)))
for i, model in enumerate(chosen_models):
    with cols[i % len(cols)]:
        stats = tables.per_class[(tables.per_class["model"] == model) & (tables.per_class["true_wnid"] == true_wnid)]
        top = confusions[(confusions["model"] == model) & (confusions["true_wnid"] == true_wnid)].sort_values("rank")
        st.markdown(f"**{escape_markdown(model)}**")  # a model id from stored predictions
        if stats.empty:
            st.caption("No prediction for this class.")
            continue
        row = stats.iloc[0]
        st.caption(f"{int(row['n'])} images · {int(row['n_mistakes'])} mistakes · accuracy {float(row['accuracy']):.0%}")
        if top.empty:
            st.caption("No mistakes.")
            continue
        view = pd.DataFrame({"predicted": [f"{names[w]} ({w})" for w in top["pred_wnid"]],
                             "MF": top["mf"].astype(float), "relation": top["relation"],
                             "common ancestor": [confusion_lcs_phrase(true_wnid, lcs, names[true_wnid])
                                                 for lcs in top["lcs_wnid"]]})
        st.dataframe(view.style.map(relation_style, subset=["relation"]).format({"MF": "{:.0%}"}),
                     hide_index=True, width="stretch",
                     column_config={"relation": st.column_config.Column("relation", help=relation_help(markdown=False)),
                                    "common ancestor": st.column_config.Column(
                                        "common ancestor", help=column_docs("confusions")["lcs_wnid"])})
        for _, conf in top.iterrows():
            if st.button(f"Explain {escape_markdown(names[conf['pred_wnid']])}", key=f"explain-{model}-{conf['pred_wnid']}",
                         icon=":material/account_tree:"):
                st.session_state["pair"] = (model, true_wnid, conf["pred_wnid"])
                # The URL carries the run and the pair: Explain opens on them, reloads and shares keep them.
                st.switch_page("pages/explain_page.py", query_params={
                    RUN_PARAM: run.run_id, "model": model, "true": true_wnid, "pred": conf["pred_wnid"]})

# ------------------------------------------------------------------ misclassified images
st.subheader("Misclassified images")
model_for_images = st.selectbox("Model", chosen_models or models, key="images-model")
wrong = misclassified_images(run, model_for_images, true_wnid)
if wrong.empty:
    st.caption("None: every image of this class was classified correctly (or none was classified).")
else:
    grid = st.columns(6)
    for i, (_, p) in enumerate(wrong.head(60).iterrows()):
        # The caption holds a class name (a stored wnid where it has none: escaped) and a probability.
        name = names.get(p["pred_wnid"]) or class_name(p["pred_wnid"], label_space)
        grid[i % 6].image(str(run.image_path(p["image"])), width="stretch",
                          caption=f"→ {escape_markdown(name)} ({float(p['prob_1']):.0%})")
    if len(wrong) > 60:
        st.caption(f"Showing 60 of {len(wrong)}.")

# ------------------------------------------------------------------ whole table
st.subheader("All top-3 confusions")
table = confusions[confusions["model"].isin(chosen_models)]
config = {c: st.column_config.Column(c, help=h) for c, h in column_docs("confusions").items()}
if len(table) <= 1500:
    st.dataframe(table.style.map(relation_style, subset=["relation"]).format({"mf": "{:.0%}", "share_of_samples": "{:.0%}"}),
                 hide_index=True, width="stretch", column_config=config)
else:  # styling every cell of a large table costs seconds per render; the colours are above
    st.caption(f"{len(table):,} rows, shown without colours.")
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)
download_csv(confusions, f"{run.run_id}_confusions.csv", key="dl-confusions")
