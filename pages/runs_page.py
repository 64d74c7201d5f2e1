"""Runs: every stored run, newest first, and what each holds."""
import pandas as pd
import streamlit as st

from pages.common import download_csv, escape_markdown, list_runs, page_link, select_run, store

st.title("Runs")
# The folder comes from WILDLENS_HOME: outside text, escaped (a code span cannot escape a backtick).
st.caption(f"Stored in {escape_markdown(store().root)} (set `WILDLENS_HOME` to move it). Runs persist across restarts.")

infos = list_runs()
if not infos:
    st.info("No runs yet: create one on the Query page.")
    st.stop()

# What to do next, first thing on the page the app opens on.
current = st.session_state.get("run_id")
with st.container(border=True):
    st.markdown("**Start here**")
    c1, c2 = st.columns(2)
    if current:
        with c1:
            page_link("pages/results_page.py", current, "See how the models did on the current run",
                      icon=":material/leaderboard:")
    with c2:
        st.page_link("pages/query_page.py", label="Start a query: a word, its WordNet classes, images",
                     icon=":material/search:")

rows = []
for info in infos:
    run = store().open_run(info.run_id)
    rows.append({
        "run": info.run_id, "title": info.title or info.query, "created": info.created,
        "sense": info.sense, "label space": info.label_space, "classes": len(info.wnids),
        "source": info.source, "models": ", ".join(info.models), "sample": info.is_sample,
        "images": int(len(run.usable_images())) if run.manifest_path.exists() else 0,
    })
table = pd.DataFrame(rows)
st.dataframe(table, hide_index=True, width="stretch")
download_csv(table, "runs.csv", key="dl-runs")

choice = st.selectbox("Open a run", [i.run_id for i in infos], index=[i.run_id for i in infos].index(st.session_state["run_id"]) if st.session_state.get("run_id") in [i.run_id for i in infos] else 0)
if st.button("Make it the current run", type="primary"):
    select_run(choice, "pages/results_page.py")
