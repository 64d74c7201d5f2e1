"""Images: the run's images per class with their provenance; exclude bad ones (kept, not deleted);
export the image set as an image folder or a FiftyOne dataset (crawl.export)."""
from pathlib import Path

import pandas as pd
import streamlit as st

from pages.pictures import THUMBNAIL, grid_thumbnails, show_thumbnail
from pages.tables import NA_DASH, download_csv, show_table, table_column_config
from pages.reads import class_name, manifest
from core.errors import WildLensError, printable
from pages.text import escape_markdown, listed, plural, show_error
from pages.run_state import require_run, url_choice, write_choice

PER_PAGE = 30
COLUMNS = 6
# The manifest's columns (core.runstore.MANIFEST_SCHEMA) in a sentence each, for the tables' help.
MANIFEST_DOCS = {
    "wnid": "The class the image was collected or imported for (WordNet 3.0 id).",
    "file": "Where the image is stored: <wnid>/<sha256[:16]>.<ext> under the run's images folder.",
    "excluded": "Kept out of metrics and of the next inference run; the file and its row stay.",
    "excluded_reason": "Why it was excluded (yours to edit).",
    "source": "Where it came from: bing, google, baidu, flickr, import or sample.",
    "search_term": "What the search engine was asked.", "url": "The address the image was downloaded from.",
    "rank": "Its position in the engine's results.", "original_name": "An imported file's path inside its folder.",
    "sha256": "SHA-256 of the bytes (identity and exact duplicates).", "width": "Pixels.", "height": "Pixels.",
    "format": "Pillow's format name (JPEG, PNG, ...).", "mode": "Pillow's colour mode as stored (RGB, CMYK, ...).",
    "bytes": "File size.", "fetched_at": "When it was fetched or imported (ISO 8601, UTC).",
    "other_wnids": "Other classes the same image was found for: its label is ambiguous.",
    "status": "accepted, rejected or duplicate.", "reason": "Why it was rejected, or what it duplicates.",
    "duplicate_of": "The kept copy's file, for exact and near duplicates.", "count": "Images.",
}
MANIFEST_LABELS = {"excluded_reason": "Reason excluded", "search_term": "Search term", "url": "URL",
                   "original_name": "Original name", "sha256": "SHA-256", "fetched_at": "Fetched at (UTC)",
                   "other_wnids": "Also found for", "duplicate_of": "Duplicate of", "bytes": "Bytes",
                   "count": "Images"}

st.title("Images")
run = require_run()
info = run.info
df = manifest(run)
from pages.reads import predictions_only, predictions_only_note  # noqa: E402

if df.empty and predictions_only(run):  # uploaded predictions: no image to collect into it
    predictions_only_note("it has no images to show or exclude",
                          "To look at the images, import them as a new run on the Import page (one sub-folder per "
                          "class); the Browse page lists this run's predictions.")
    st.stop()
if df.empty:
    st.info("This run has no images yet. Collect some on the Query page.")
    st.stop()

# ------------------------------------------------------------------ flagged by the label-issue check (issue 15)
# python -m probe --label-issues writes probes/label_issues.parquet: per image, the class a probe on
# frozen features suggests and its label quality (low: the stored label looks wrong). Flagged images
# come first here; Exclude keeps the image and its manifest row, as the table's checkbox below does.
FLAGGED_SHOWN = 12
from probe.paths import LABEL_ISSUES, probes_dir  # not probe.artefact: it loads scikit-learn

_issues_path = probes_dir(run) / LABEL_ISSUES
if _issues_path.exists():
    from core.runstore import read_table
    from pages.text import escape_markdown, show_error
    from probe.issues import ISSUES_SCHEMA

    try:
        _issues = read_table(_issues_path, ISSUES_SCHEMA, table="label issues")
    except Exception as exc:  # a damaged file: say which, keep the page
        show_error(exc)
        _issues = None
    if _issues is not None:
        # One row per (model, image): an image flagged by several models is shown once, with its lowest
        # label quality (and that model's suggestion), naming every model that flagged it.
        _flagged = _issues[_issues["is_issue"].fillna(False).astype(bool)].sort_values(["label_quality", "image"],
                                                                                      kind="stable")
        _by = (_flagged.groupby("image")["model"].agg(lambda m: ", ".join(sorted(set(m.dropna()))))
               if "model" in _flagged.columns else pd.Series(dtype="string"))
        _flagged = _flagged.drop_duplicates("image", keep="first")
        # Keyed by the stored file, the one unique id an image has: duplicate and rejected rows have
        # no file (NA, many times in one import), so the manifest's 'file' column is no index (issue
        # 22 item 8: mapping through it raised InvalidIndexError and nothing could be excluded).
        _stored = df[df["file"].notna()]
        _excluded = set(_stored.loc[_stored["excluded"].fillna(False).astype(bool), "file"])
        _flagged = _flagged[_flagged["image"].isin(set(_stored["file"]))]
        _open = _flagged[~_flagged["image"].isin(_excluded)]
    if _issues is not None and _flagged.empty:
        st.caption(f"The label-issue check (python -m probe --label-issues) flagged none of this run's "
                   f"{plural(int(_issues['image'].nunique()), 'image')}.")
    elif _issues is not None:
        st.subheader(f"Flagged by the label-issue check · {plural(len(_open), 'image')}")
        st.caption("A probe trained on the frozen features (python -m probe --label-issues) suggests another class "
                   "for these images; lowest label quality first. Exclude keeps the file and its manifest row and "
                   "leaves the image out of metrics and of the next inference run"
                   + (f"; {plural(len(_flagged) - len(_open), 'flagged image')} already excluded." if
                      len(_flagged) > len(_open) else "."))
        if _open.empty:
            st.success("No flagged image left to review.", icon=":material/check:")
        else:
            from pages.run_state import RUN_PARAM

            st.page_link("pages/image_page.py", label="Page through the flagged images (tag, relabel, exclude in the "
                         "curation log)", icon=":material/open_in_full:",
                         query_params={RUN_PARAM: run.run_id, "src": "issues"})
        # Thumbnails as on the other grids (pages.pictures): st.image on the file's path stopped the page at
        # a file that no longer decodes and waited forever on a FIFO put in an image's place.
        _thumbnails = grid_thumbnails(run, _open["image"].astype(str).iloc[:FLAGGED_SHOWN], THUMBNAIL)
        for _start in range(0, min(len(_open), FLAGGED_SHOWN), COLUMNS):
            _cols = st.columns(COLUMNS)
            for _col, (_, _row) in zip(_cols, _open.iloc[_start:min(_start + COLUMNS, FLAGGED_SHOWN)].iterrows()):
                # An empty suggestion or quality (the file's schema allows them) is said as such, never "<NA>".
                _file = str(_row["image"])
                _suggested = "" if pd.isna(_row["suggested_wnid"]) else str(_row["suggested_wnid"])
                with _col:
                    show_thumbnail(run, _file, _thumbnails)
                _col.markdown((NA_DASH if pd.isna(_row["true_wnid"]) else escape_markdown(
                               class_name(_row["true_wnid"], info.label_space))) + " → **"
                              + (escape_markdown(class_name(_suggested, info.label_space)) if _suggested
                                 else "no suggestion") + "**  \n"
                              + ("quality " + (NA_DASH if pd.isna(_row["label_quality"])  # (a hostile campaign)
                                                else f"{float(_row['label_quality']):.2f}"))
                              + (f" · {escape_markdown(_by[_file])}" if _file in _by.index and _by[_file] else ""))
                if _col.button("Exclude", key=f"exclude-flagged-{_file}", icon=":material/block:"):
                    try:
                        run.set_excluded([_file], True, "label issue" + (f": suggested {_suggested}" if _suggested else ""))
                    except WildLensError as exc:  # the run deleted meanwhile, a full disk: one line
                        with _col:
                            show_error(exc)
                    else:
                        st.rerun()
        if len(_open) > FLAGGED_SHOWN:
            st.caption(f"The {FLAGGED_SHOWN} lowest label qualities are shown; "
                       f"{plural(len(_open) - FLAGGED_SHOWN, 'more image')} below them.")
        st.divider()

wnids = list(dict.fromkeys(list(info.wnids) + df["wnid"].dropna().tolist()))
counts = df.groupby("wnid")["status"].value_counts().unstack(fill_value=0)


def class_label(wnid: str) -> str:
    c = counts.loc[wnid] if wnid in counts.index else {}
    return f"{class_name(wnid, info.label_space)} ({wnid}) · {int(c.get('accepted', 0)):,} accepted"


url_choice("class", wnids, "images-class")  # ?class=<wnid>: bookmarkable, kept on reload
wnid = st.selectbox(f"Class · {plural(len(wnids), 'class')} in this run", wnids, format_func=class_label,
                    key="images-class")
write_choice("class", wnid, wnids[0] if len(wnids) else None)
download_csv(df, f"{run.run_id}_manifest.csv", key="dl-manifest", label="Download the whole manifest (CSV)",
             label_space=info.label_space)
rows = df[df["wnid"] == wnid]
accepted = rows[rows["status"] == "accepted"].reset_index(drop=True)

tab_grid, tab_other = st.tabs([f"Accepted ({len(accepted)})", f"Rejected and duplicates ({len(rows) - len(accepted)})"])
with tab_grid:
    if accepted.empty:
        st.info("No accepted image for this class.")
    else:
        pages = max(1, -(-len(accepted) // PER_PAGE))
        page = st.number_input("Page", 1, pages, 1) if pages > 1 else 1
        shown = accepted.iloc[(page - 1) * PER_PAGE: page * PER_PAGE]
        thumbnails = grid_thumbnails(run, shown["file"].astype(str), THUMBNAIL)  # (an image's id is its manifest file)
        for start in range(0, len(shown), COLUMNS):
            cols = st.columns(COLUMNS)
            for col, (_, row) in zip(cols, shown.iloc[start:start + COLUMNS].iterrows()):
                # Captions are built from the manifest's hash and numbers, escaped anyway: a hand-edited manifest is a
                # file's text (a code review: '![](//a.b)' as a sha256 loaded an outside image).
                caption = escape_markdown(f"{row['sha256'][:10]} · {row['width']} × {row['height']}"
                                          + (" · excluded" if row["excluded"] else ""))
                with col:
                    show_thumbnail(run, str(row["file"]), thumbnails, caption=caption)

        st.markdown("**Provenance** — tick *excluded* to keep an image out of the next inference run. "
                    "The file and its row stay; untick to bring it back.")
        columns = ["file", "excluded", "excluded_reason", "source", "search_term", "url", "rank", "original_name",
                   "sha256", "width", "height", "format", "mode", "bytes", "fetched_at", "other_wnids"]
        edited = st.data_editor(
            accepted[columns], hide_index=True, width="stretch", key=f"editor-{wnid}", placeholder=NA_DASH,
            disabled=[c for c in columns if c not in ("excluded", "excluded_reason")],
            column_config={**table_column_config(None, columns, accepted, docs=MANIFEST_DOCS, labels=MANIFEST_LABELS),
                           "excluded": st.column_config.CheckboxColumn("Excluded", help="`excluded`: "
                                                                       + MANIFEST_DOCS["excluded"]),
                           "url": st.column_config.TextColumn("URL", help="`url`: " + MANIFEST_DOCS["url"])},
        )
        excluded_now = edited["excluded"].fillna(False).astype(bool).to_numpy()
        reason_now = edited["excluded_reason"].fillna("").astype(str).str.strip().to_numpy()
        reason_before = accepted["excluded_reason"].fillna("").astype(str).str.strip().to_numpy()
        # A change is an exclusion ticked or unticked, or an excluded image's reason edited. A reason typed for an
        # image left included is kept nowhere (the manifest holds reasons of exclusions): said, not counted (a
        # hostile campaign: it was dropped without a word and its Save button stayed).
        changed = edited[(excluded_now != accepted["excluded"].fillna(False).astype(bool).to_numpy())
                         | (excluded_now & (reason_now != reason_before))]
        stray = edited[~excluded_now & (reason_now != "") & (reason_now != reason_before)]
        if len(stray):
            st.caption(escape_markdown(f"A reason is kept with an exclusion only: tick Excluded for "
                                       f"{listed(stray['file'].astype(str).tolist(), 2)}, or clear its reason."))
        if not changed.empty and st.button(f"Save {plural(len(changed), 'change')}", type="primary"):
            # Every edit in one write (all or nothing). An empty cell is NA, an emptied checkbox too: `NA or ...` and
            # bool(NA) raised, the page stopped and the exclusion was lost (a hostile campaign, a code review).
            ticked = dict(zip(edited["file"], excluded_now))
            reasons = dict(zip(edited["file"], reason_now))
            try:
                run.set_exclusions({file: (reasons[file] or "excluded by analyst") if ticked[file] else None
                                    for file in changed["file"]})
            except WildLensError as exc:  # the run deleted meanwhile, a full disk: one line, nothing lost
                show_error(exc, note="The changes above are still in the table: save again once that is fixed.")
            else:
                st.success("Saved. Predictions already stored are kept; excluded images are left out of metrics.")
                st.rerun()
with tab_other:
    other = rows[rows["status"] != "accepted"]
    if other.empty:
        st.caption("Nothing was rejected for this class.")
    else:
        show_table(other[["status", "reason", "duplicate_of", "other_wnids", "url", "search_term", "rank",
                          "original_name", "bytes", "fetched_at"]], docs=MANIFEST_DOCS, labels=MANIFEST_LABELS)
        reasons = other.assign(reason=other["reason"].fillna("")).groupby(["status", "reason"]).size()
        show_table(pd.DataFrame({"count": reasons}).reset_index(), docs=MANIFEST_DOCS, labels=MANIFEST_LABELS,
                   width="content")

# ------------------------------------------------------------------ export (issue 24 item 6)
st.subheader("Export the image set")
st.caption("The run's usable images as a dataset other tools read, in the same layout as `python -m crawl export`: "
           "*imagefolder* (one folder per class, a manifest CSV) or *fiftyone* (FiftyOne's "
           "FiftyOneImageClassificationDataset: `data/` and `labels.json`, with every model's prediction and "
           "WildLens's relation, severity and error type). Curated: the curation log's relabels and exclusions "
           "applied. Images are hard links to the run's files where the disk allows (no second copy): edit the "
           "exported files only after copying them. The folder must be new or empty; nothing there is overwritten.")
from crawl.export import ExportError, export_run  # noqa: E402
from explain.curation_view import default_view  # noqa: E402

left, middle, right = st.columns([1, 1, 3], vertical_alignment="bottom")
export_format = left.radio("Format", ["imagefolder", "fiftyone"], key="export-format", horizontal=True)
export_view = middle.radio("View", ["curated", "raw"], key="export-view", horizontal=True,
                           index=0 if default_view(run) == "curated" else 1)
from core.serving import ServingError, check_export_destination, export_root  # noqa: E402

try:
    fence = export_root()
    check_export_destination(fence / "x" if fence else Path.home())  # a shared dashboard without a root: off
except ServingError as exc:
    show_error(exc)
    st.stop()
target = right.text_input("Folder" + (f" (under {escape_markdown(fence)}, WILDLENS_EXPORT_ROOT)" if fence else " on this machine"),
                          key="export-folder",
                          value=str((fence or Path.home() / "wildlens-exports") / f"{run.run_id}-{export_view}-{export_format}"))
if st.button("Export", key="export-go", icon=":material/ios_share:", disabled=not target.strip()):
    from pages.reads import explained, explanations_refused

    try:
        if not target.strip().startswith("~") and not Path(target.strip()).is_absolute():
            # A relative folder went into the server's working folder, and the success line named it relative
            # (a hostile campaign): the page takes a full path, as the box's default is.
            raise ExportError(f"{target.strip()[:200]} is not a full path; give one that starts at / (or ~), e.g. "
                              f"{(fence or Path.home() / 'wildlens-exports') / target.strip()[:60]}.")
        if export_format == "fiftyone" and explanations_refused(run) is None:  # (too large: exported without them)
            explained(run, export_view)  # the stored explanations fresh: relation, severity, error type go in
        with st.spinner("Exporting…"):
            summary = export_run(run, target.strip(), export_format, view=export_view)
    except WildLensError as exc:  # ExportError, and a damaged log or predictions the explanations refuse
        show_error(exc)  # in the page's words: "The folder DIR ..." (crawl.export.ExportError.page_text)
    else:
        # printable: the lines name the folder the user typed (a right-to-left override in it was obeyed)
        st.success(escape_markdown("  \n".join(map(printable, summary.describe()))), icon=":material/check:")
