"""Runs: every stored run, newest first, and what each holds."""
import pandas as pd
import streamlit as st

from pages.common import (download_csv, escape_markdown, list_runs, open_run_link, page_link, select_run, show_error,
                          store)

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

with st.expander("Bring your own predictions: a CSV or Parquet file becomes a new run"):
    st.caption("The columns `python -m explain metrics` reads: model, true_wnid, pred_wnid (wnids such as "
               "n02123045), optionally image, pred_wnid_2..5, prob_1..5, label_space, status. Every metric and "
               "page then works on it; there are no images to show.")
    upload = st.file_uploader("Predictions file", type=["csv", "tsv", "parquet", "pq"], key="upload-predictions")
    if upload is not None and st.button("Create the run", key="upload-create"):
        import re
        import tempfile
        from pathlib import Path

        from core.errors import WildLensError
        from explain.export import import_predictions_as_run

        # The reader reads paths (and names the file's own lines in its errors): the upload goes to a
        # temporary file. The user's file name is also the run's title (escaped where shown).
        # Named like the upload (so errors name the user's file), reduced to safe characters.
        name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(upload.name).name).lstrip(".")[:80] or "predictions.csv"
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / name
            path.write_bytes(upload.getvalue())
            try:
                made, _ = import_predictions_as_run(path, store(), title=Path(upload.name).stem)
            except WildLensError as exc:
                show_error(exc)
                st.stop()
        st.success(f"Run {made.run_id} created with {len(made.info.models)} model(s) and "
                   f"{len(made.info.wnids)} classes.")
        open_run_link(made.run_id, "pages/results_page.py", "See its results")

choice = st.selectbox("Open a run", [i.run_id for i in infos], index=[i.run_id for i in infos].index(st.session_state["run_id"]) if st.session_state.get("run_id") in [i.run_id for i in infos] else 0)
if st.button("Make it the current run", type="primary"):
    select_run(choice, "pages/results_page.py")
