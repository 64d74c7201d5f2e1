"""Runs: every stored run, newest first, and what each holds; open, rename or delete one."""
import pandas as pd
import streamlit as st

from core.errors import WildLensError
from core.runstore import StoreError
from pages.common import (NA_DASH, RUN_PARAM, download_csv, escape_markdown, list_runs, manifest, open_run_link,
                          page_link, plural, predictions, select_run, show_error, show_table, store)


st.title("Runs")
# The folder comes from WILDLENS_HOME: outside text, escaped (a code span cannot escape a backtick).
st.caption(f"Stored in {escape_markdown(store().root)} (set `WILDLENS_HOME` to move it). Runs persist across restarts.")

flash = st.session_state.pop("_runs_flash", None)  # what the last rename or delete did (set before its rerun)
if flash:
    st.success(flash, icon=":material/check_circle:")

infos = list_runs()
for run_id, why in store().damaged_runs():  # skipped by every list: said here, with what to fix
    st.warning(escape_markdown(f"Run folder {run_id} is not listed: {why}"), icon=":material/warning:")
if not infos:
    st.info("No runs yet: start a query on the Query page, or import a folder of your own images on the Import page.")
    st.page_link("pages/query_page.py", label="Start a query", icon=":material/search:")
    st.page_link("pages/import_page.py", label="Import a folder", icon=":material/drive_folder_upload:")
    st.stop()

# What to do next, first thing on the page the app opens on.
current = st.session_state.get("run_id")
with st.container(border=True):
    st.markdown("**Start here**")
    c1, c2, c3 = st.columns(3)
    if current:
        with c1:
            page_link("pages/results_page.py", current, "See how the models did on the current run",
                      icon=":material/leaderboard:")
    with c2:
        st.page_link("pages/query_page.py", label="Start a query", icon=":material/search:",
                     help="A word, its WordNet sense, the ImageNet classes under it, images from the web.")
    with c3:
        st.page_link("pages/import_page.py", label="Import your own images", icon=":material/drive_folder_upload:",
                     help="A folder with one sub-folder per class becomes a new run.")


def usable_count(run) -> int:
    if not run.manifest_path.exists():
        return 0
    df = manifest(run)  # cached per manifest version
    return int(((df["status"] == "accepted") & ~df["excluded"].astype(bool)).sum())


rows = []
for info in infos:
    try:
        run = store().open_run(info.run_id)
        # no manifest (uploaded predictions): no image files, NA rather than a misleading 0
        images = usable_count(run) if run.manifest_path.exists() else None
    except (StoreError, OSError):  # deleted (or being deleted) in another tab or by the CLI since listed
        continue
    rows.append({
        "run": info.run_id, "title": info.title or info.query,
        "images": images,
        "classes": len(info.wnids), "models": ", ".join(info.models), "source": info.source,
        "sense": info.sense or None, "label space": info.label_space, "created": info.created, "sample": info.is_sample,
    })
COLUMNS = ["run", "title", "images", "classes", "models", "source", "sense", "label space", "created", "sample"]
table = pd.DataFrame(rows, columns=COLUMNS).astype({"images": "Int64"})
infos = [i for i in infos if i.run_id in set(table["run"])]  # the picker below offers the runs still here
# On screen the time to the minute, as the sidebar shows it; the CSV keeps the stored ISO time.
show_table(table.assign(created=table["created"].str[:16].str.replace("T", " ")),
           labels={"run": "Run id", "created": "Created (UTC)", "label space": "Label space", "models": "Models run"},
           docs={"run": "The run's folder name under runs/; it never changes.", "title": "Rename it below.",
                 "created": "When the run was made (UTC).",
                 "sense": f"The WordNet sense queried. {NA_DASH} : none (an import, uploaded predictions, the sample).",
                 "label space": "The label space of its classes.", "classes": "Classes the run holds.",
                 "source": "crawl:<engine>, import, upload or sample.",
                 "models": "Models whose predictions are stored.", "sample": "The sample run built at first start.",
                 "images": f"Accepted images, not excluded. {NA_DASH} : none stored (a run made from an uploaded "
                           "predictions file)."},
           column_config={"sample": st.column_config.CheckboxColumn(
               "Sample", help="`sample`: The sample run built at first start.")})
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
        st.success(f"Run {made.run_id} created with {plural(len(made.info.models), 'model')} and "
                   f"{plural(len(made.info.wnids), 'class', 'classes')}.")
        open_run_link(made.run_id, "pages/results_page.py", "See its results")

# --------------------------------------------------------------------------- open, rename, delete
if not infos:
    st.stop()
st.subheader("Open, rename or delete a run")
ids = [i.run_id for i in infos]
by_id = {i.run_id: i for i in infos}
choice = st.selectbox("Run", ids, index=ids.index(current) if current in ids else 0,
                      format_func=lambda r: f"{by_id[r].title or by_id[r].query or r} · {r}")
info = by_id[choice]
if st.button("Make it the current run", type="primary", disabled=choice == current):
    select_run(choice, "pages/results_page.py")

left, right = st.columns([3, 1], vertical_alignment="bottom")
new_title = left.text_input("Title", value=info.title, key=f"title-{choice}", max_chars=200)
if right.button("Save title", key="rename-save", disabled=new_title.strip() == info.title.strip()):
    try:
        store().rename_run(choice, new_title)
    except WildLensError as exc:
        show_error(exc)
    else:
        st.session_state["_runs_flash"] = f"Run {choice} renamed to {escape_markdown(' '.join(new_title.split()))}."
        st.rerun()

pending = st.session_state.get("_delete_pending")
if pending != choice:
    if st.button("Delete this run…", key="delete-ask", icon=":material/delete:"):
        st.session_state["_delete_pending"] = choice
        st.rerun()
else:
    run = store().open_run(choice)
    n_images = usable_count(run)
    n_predictions = len(predictions(run)) if run.predictions_dir.exists() else 0
    name = escape_markdown(info.title or info.query or choice)
    goes = f"its {plural(n_images, 'image')}" + (
        f", {plural(n_predictions, 'stored prediction')} of {plural(len(info.models), 'model')}" if n_predictions
        else "") + f" and every other file in {escape_markdown(run.path)}"
    with st.container(border=True):
        st.warning(f"Delete run **{name}** ({choice})? This removes {goes}. It cannot be undone."
                   + (" The sample run is built again the next time WildLens starts." if info.is_sample else ""),
                   icon=":material/warning:")
        yes, no = st.columns(2)
        confirmed = yes.button(f"Delete {choice} for good", key="delete-confirm", type="primary")
        if no.button("Cancel", key="delete-cancel"):
            st.session_state.pop("_delete_pending", None)
            st.rerun()
    if confirmed:
        st.session_state.pop("_delete_pending", None)
        try:
            store().delete_run(choice)
        except WildLensError as exc:
            show_error(exc)
            st.stop()
        remaining = [i.run_id for i in list_runs()]
        if current == choice or current not in remaining:
            # The sidebar's picker owns 'run_id': the next current run is handed over for the rerun.
            from wildlens.sample import SAMPLE_RUN_ID

            st.session_state["_next_run_id"] = (SAMPLE_RUN_ID if SAMPLE_RUN_ID in remaining
                                                else remaining[0] if remaining else None)
            if not remaining:
                st.query_params.pop(RUN_PARAM, None)
        st.session_state["_runs_flash"] = f"Run {name} ({choice}) deleted with {plural(n_images, 'image')}."
        st.rerun()
