"""Runs: every stored run, newest first, and what each holds; open, rename or delete one.

Rename and delete act on the run picked here, by its id, which never changes (issue 22 item 1):

* The picker is keyed, so a rename (a new label) keeps it on the run; it follows the sidebar's
  current run when that changes.
* Save title is a form: the typed title and the click (or Enter) arrive together, and the rename
  runs in the button's callback, before the table and the sidebar are drawn (one script run).
* "Delete this run…" records the id it was drawn for; the confirmation names that run, and its
  button carries that id and the title it showed. The delete is refused, with one line and nothing
  deleted, when the run was deleted meanwhile, when it was renamed since (another tab, the CLI:
  the confirmation is shown again with the new title), or when the picker no longer shows it
  (a stale click). Picking another run drops a pending delete.

The images column is counted once per change of each run's manifest (a cache per run and
manifest version): every rerun used to read every run's manifest again, since a cache of 8
manifests cycled through by more runs never hits.
"""
import pandas as pd
import streamlit as st

from core.errors import WildLensError, one_line
from core.runstore import Run, StoreError, manifest_fingerprint, predictions_fingerprint
from pages.tables import NA_DASH, download_csv, show_table
from pages.run_state import (RUN_PARAM, list_runs, open_run_link, page_link, resend_if_relabelled, select_run, store,
                             write_params)
from pages.text import escape_markdown, plural, show_error

PICK = "runs-pick"  # the key of this page's run picker


def title_of(info) -> str:
    return info.title or info.query or info.run_id


@st.cache_data(max_entries=4096, show_spinner=False)
def _image_count(run_path: str, manifest_fp: str) -> int | None:
    from core.errors import WildLensError

    try:
        return len(Run(run_path).usable_images())
    except WildLensError:  # a damaged manifest: the run is still listed, and can be deleted here (it was left out)
        return None


def image_count(run) -> int | None:
    """Accepted images not excluded (Run.usable_images), counted once per manifest version; None when
    the manifest cannot be read (the run's own pages say why)."""
    return _image_count(str(run.path), manifest_fingerprint(run)) if run.manifest_path.exists() else 0


@st.cache_data(max_entries=256, show_spinner=False)
def _prediction_count(run_path: str, predictions_fp: str) -> int | None:
    from core.errors import WildLensError

    try:
        return len(Run(run_path).read_predictions())
    except WildLensError:  # a damaged or linked part: the run can still be renamed and deleted here
        return None


def prediction_count(run) -> int | None:
    """Stored predictions of the run; None when they cannot be read (the run's own pages say why)."""
    return _prediction_count(str(run.path), predictions_fingerprint(run)) if run.predictions_dir.exists() else 0


def show_outcome() -> None:
    """What the last rename or delete did (set by its callback)."""
    done, failed = st.session_state.pop("_runs_flash", None), st.session_state.pop("_runs_error", None)
    if done:
        st.success(done, icon=":material/check_circle:")
    if failed:
        st.error(failed, icon=":material/error:")


def rename(run_id: str) -> None:
    """Save title's callback: ``run_id`` is the run the form was drawn for."""
    title = st.session_state.get(f"title-{run_id}", "")
    try:
        before = store().open_run(run_id).info.title
        if " ".join(title.split()) == before:
            st.session_state["_runs_flash"] = f"Run {run_id} keeps its title {escape_markdown(before)}."
            return
        info = store().rename_run(run_id, title)
    except (WildLensError, OSError) as exc:
        st.session_state["_runs_error"] = escape_markdown(one_line(exc))
        return
    st.session_state["_runs_flash"] = f"Run {run_id} renamed to {escape_markdown(info.title)}."


def ask_delete(run_id: str) -> None:
    st.session_state["_delete_pending"] = run_id


def confirm_delete(run_id: str, shown: str, n_images: int | None) -> None:
    """The confirm button's callback, with the id and the title the confirmation showed."""
    def refuse(line: str, keep: bool = False) -> None:
        if not keep:
            st.session_state.pop("_delete_pending", None)
        st.session_state["_runs_error"] = line

    picked = st.session_state.get(PICK)
    if st.session_state.get("_delete_pending") != run_id or picked != run_id:
        return refuse(f"The confirmation was for run {run_id} and the page now shows {picked}: nothing was deleted. "
                      "Pick the run and ask again to delete it.")
    try:
        opened = store().open_run(run_id)
        info, linked = opened.info, opened.path.is_symlink()
    except StoreError:
        return refuse(f"Run {run_id} no longer exists (deleted in another tab or by the CLI): nothing was deleted.")
    if title_of(info) != shown:
        return refuse(f"Run {run_id} was renamed to {escape_markdown(title_of(info))} since the delete was asked: "
                      "nothing was deleted. Confirm again below if it is still the run to delete.", keep=True)
    st.session_state.pop("_delete_pending", None)
    try:
        store().delete_run(run_id)
    except WildLensError as exc:
        return refuse(escape_markdown(one_line(exc)))
    remaining = [i.run_id for i in list_runs()]
    current = st.session_state.get("run_id")
    if current == run_id or current not in remaining:
        # The sidebar's picker owns 'run_id': the next current run is handed over for its draw.
        from wildlens.sample import SAMPLE_RUN_ID

        st.session_state["_next_run_id"] = (SAMPLE_RUN_ID if SAMPLE_RUN_ID in remaining
                                            else remaining[0] if remaining else None)
        if not remaining:
            write_params({RUN_PARAM: None})
    st.session_state["_runs_flash"] = (f"Run {escape_markdown(shown)} ({run_id}) deleted with "
                                       f"{'its images' if n_images is None else plural(n_images, 'image')}."
                                       if not linked else
                                       f"Run {escape_markdown(shown)} ({run_id}): its link removed, the folder it led "
                                       "to kept.")


st.title("Runs")
# The folder comes from WILDLENS_HOME: outside text, escaped (a code span cannot escape a backtick).
st.caption(f"Stored in {escape_markdown(store().root)} (set `WILDLENS_HOME` to move it). Runs persist across restarts.")

infos = list_runs()
for run_id, why in store().damaged_runs():  # skipped by every list: said here, with what to fix
    st.warning(escape_markdown(f"Run folder {run_id} is not listed: {why}"), icon=":material/warning:")
if not infos:
    show_outcome()
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
    here = {RUN_PARAM: current} if current else None  # a link opened in a new tab keeps the run
    with c2:
        st.page_link("pages/query_page.py", label="Start a query", icon=":material/search:", query_params=here,
                     help="A word, its WordNet sense, the ImageNet classes under it, images from the web.")
    with c3:
        st.page_link("pages/import_page.py", label="Import your own images", icon=":material/drive_folder_upload:",
                     query_params=here, help="A folder with one sub-folder per class becomes a new run.")


rows = []
for info in infos:
    try:
        run = store().open_run(info.run_id)
        # no manifest (uploaded predictions): no image files, NA rather than a misleading 0
        images = image_count(run) if run.manifest_path.exists() else None
    except (StoreError, OSError):  # deleted (or being deleted) in another tab or by the CLI since listed
        continue
    rows.append({
        "run": info.run_id, "title": info.title or info.query,
        "images": images,
        "classes": len(info.wnids), "models": ", ".join(info.models), "source": info.source,
        "sense": info.sense or None, "label space": info.label_space, "created": info.created, "sample": info.is_sample,
    })
# The long list of models last but one: in front it pushed the label space and the time off a 1400-pixel screen.
COLUMNS = ["run", "title", "images", "classes", "label space", "source", "sense", "created", "models", "sample"]
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
                           "predictions file), or a manifest that cannot be read (the run's Images page says why)."},
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
show_outcome()
ids = [i.run_id for i in infos]
by_id = {i.run_id: i for i in infos}
# Keyed: an unkeyed select box is identified by its labels too, so a rename (a new label) made it
# a new widget, back on the current run, and the delete that followed offered that run instead of
# the renamed one (issue 22 item 1). It follows the sidebar: a new current run is shown here too.
if st.session_state.get("_runs_pick_follows") != current or st.session_state.get(PICK) not in ids:
    st.session_state[PICK] = current if current in ids else ids[0]
    st.session_state["_runs_pick_follows"] = current
resend_if_relabelled(PICK, title_of(by_id[st.session_state[PICK]]))
choice = st.selectbox("Run", ids, key=PICK, format_func=lambda r: f"{title_of(by_id[r])} · {r}")
info = by_id[choice]
if st.button("Make it the current run", type="primary", disabled=choice == current):
    select_run(choice, "pages/results_page.py")

# A form: the typed title and the click (or Enter) reach the server together, in one run, and
# the rename is done (in the callback) before the page and the sidebar draw the run's title.
with st.form(f"rename-{choice}", border=False, enter_to_submit=True):
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    left.text_input("Title", value=info.title, key=f"title-{choice}", max_chars=200)
    right.form_submit_button("Save title", key="rename-save", on_click=rename, args=(choice,))

pending = st.session_state.get("_delete_pending")
if pending is not None and pending != choice:  # asked for another run, then another was picked
    st.session_state.pop("_delete_pending", None)
    st.caption(f"The delete of {pending} was not confirmed; nothing was deleted.")
    pending = None
if pending is None:
    st.button("Delete this run…", key="delete-ask", icon=":material/delete:", on_click=ask_delete, args=(choice,))
else:
    try:
        run = store().open_run(choice)
    except StoreError:  # deleted in another tab or by the CLI since the list was read
        st.session_state.pop("_delete_pending", None)
        st.error(f"Run {choice} no longer exists: nothing to delete.", icon=":material/error:")
        st.stop()
    n_images = image_count(run)
    n_predictions = prediction_count(run)
    shown = title_of(info)
    stored = ("" if n_predictions == 0 else ", its stored predictions (unreadable: a damaged or linked part file)"
              if n_predictions is None else
              f", {plural(n_predictions, 'stored prediction')} of {plural(len(info.models), 'model')}")
    # A run folder that is a link is unlinked, its target kept (core.runstore.RunStore.delete_run): said so (a
    # hostile campaign: the box announced its images and every file gone).
    linked = run.path.is_symlink()
    images_text = "images" if n_images is None else plural(n_images, "image")  # None: an unreadable manifest
    goes = (f"the link {escape_markdown(run.path)} only; the folder it leads to and its "
            f"{images_text} stay where they are" if linked else
            f"its {images_text}{stored} and every other file in {escape_markdown(run.path)}")
    with st.container(border=True):
        st.warning(f"Delete run **{escape_markdown(shown)}** ({choice})? This removes {goes}. It cannot be undone."
                   + (" The sample run is built again the next time WildLens starts." if info.is_sample else ""),
                   icon=":material/warning:")
        yes, no = st.columns(2)
        # The click carries the id and the title it was drawn for (confirm_delete checks both).
        yes.button(f"Delete {choice} for good", key="delete-confirm", type="primary", on_click=confirm_delete,
                   args=(choice, shown, n_images))
        no.button("Cancel", key="delete-cancel", on_click=lambda: st.session_state.pop("_delete_pending", None))
