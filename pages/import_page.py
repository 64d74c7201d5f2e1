"""Import: a local folder of class sub-folders becomes a new run (issue 12 item 2).

The classes come from the folders, not from a query: each sub-folder's name is resolved as a
wnid, a synset name or a class name of the chosen label space (crawl.importer.plan_folders).
Ambiguous names are decided here (a list of the candidate senses with their definitions),
unknown ones are skipped or mapped to a class, and the run is created only when an image is
accepted (crawl.importer.import_new_run). Folder and file names are outside text: escaped
wherever Streamlit reads Markdown, shown as they are in tables and select box options.
"""
import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from core.errors import WildLensError
from core.folderscan import printable_name
from core.intervals import DEFAULT_HALF_WIDTH, format_half_width, images_needed
from core.labels import get_label_space, label_space_names
from core.serving import check_import_allowed, check_import_source
from crawl.importer import (AMBIGUOUS, UNKNOWN, FolderImportError, import_new_run, plan_folders,
                            resolve_class_name)
from pages.tables import NA_DASH, download_csv, show_table
from pages.text import escape_markdown, plural, progress_bar, show_error
from pages.run_state import open_run_link, store

SKIP, OTHER = "\0skip", "\0other"  # select box values that no wnid can be
# Readable headers; the raw names stay in the CSV and in each header's help.
# "Files", not "Images": the plan counts the files the import will read, and only reading says which are images (a UI
# review: a folder of .py files read "classify (27 images)").
PLAN_LABELS = {"folder": "Folder", "files": "Files", "status": "Status", "class": "Class", "wnid": "Class id",
               "note": "Note"}
PLAN_DOCS = {"folder": "The sub-folder's name, as it is on disk.",
             "files": "Files the import would read (each is validated: non-images are recorded as rejected).",
             "status": "resolved: one class; ambiguous: several, pick one below; unknown: no class of this name, "
                       "skip or map it below.",
             "class": f"ImageNet's name of the class the folder resolved to. {NA_DASH} : not resolved (decided "
                      "below).",
             "wnid": f"The class's WordNet 3.0 id. {NA_DASH} : not resolved (decided below).",
             "note": "The candidates of an ambiguous folder; for an unknown one, the classes nearest to its name in "
                     "WordNet, then close spellings."}
SUMMARY_LABELS = {"wnid": "Class id", "name": "Class", "accepted": "Accepted", "excluded": "Excluded",
                  "duplicate": "Duplicates", "ambiguous": "Also another class", "rejected": "Rejected"}
SUMMARY_DOCS = {"wnid": "The class's WordNet 3.0 id.", "name": "ImageNet's name of the class.",
                "accepted": "Images imported (accepted, not excluded).", "excluded": "Accepted, then excluded.",
                "duplicate": "Files whose content was already stored (also under another class).",
                "ambiguous": "Accepted images found under another class too.",
                "rejected": "Files refused (not an image, too small, unreadable; see the rejected:<code> columns)."}


def summary_labels(table) -> dict:
    """SUMMARY_LABELS and a readable label for each 'rejected:<code>' column ('Rejected (not image)'; a UI review:
    the header read 'Rejected:not-image'); the CSV keeps the column's own name."""
    return {**SUMMARY_LABELS, **{c: f"Rejected ({c.split(':', 1)[1].replace('-', ' ')})" for c in map(str, table.columns)
                                 if c.startswith("rejected:")}}


def shown(name: str) -> str:
    """A folder name for a Markdown label: escaped, line breaks visible as ⏎, bytes that are not UTF-8 as \\xNN."""
    return escape_markdown(printable_name(name).replace("\r", "⏎").replace("\n", "⏎"))


def key(*parts: str) -> str:
    """A widget key per (source folder, label space, class folder): decisions reset with either."""
    return "imp-" + hashlib.sha1("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]


def folder_key(*parts: str) -> str:
    """The key of a class folder's own widget: tagged, so that no folder name ('leave-out', 'title')
    can give the key of one of the page's widgets (a duplicate key is a crash)."""
    return key(str(src), label_space, "folder", *parts)


st.title("Import")
st.caption("Bring your own images: a folder on the machine that runs WildLens, with one sub-folder per class "
           "named by its wnid (`n02123045`), its synset name (`tabby.n.01`) or its class name (`tabby`). "
           "Nothing in it is changed; accepted images are copied into a new run, which is created only when at "
           "least one image is accepted.")

# WILDLENS_IMPORT_ROOT: only folders under it (and none on a shared dashboard without it). The
# library refuses the rest too (crawl.importer.plan_folders); here the page says so before reading.
try:
    import_root = check_import_allowed()
except WildLensError as exc:
    show_error(exc)
    st.stop()
if import_root is not None:
    st.caption(f"Only folders under {escape_markdown(import_root)} (WILDLENS_IMPORT_ROOT); a relative path is "
               "taken from there.")

left, right = st.columns([3, 1])
folder = left.text_input("Folder", key="import_folder", placeholder="/data/my_images")
spaces = label_space_names()
label_space = right.selectbox("Label space", spaces, index=spaces.index("imagenet-1k"), key="import_label_space",
                              help="The classes folder names are resolved against; ImageNet-1k unless your "
                                   "classes are only in a larger one (imagenet-21k).")
if not folder.strip():
    st.info("Type the path of a folder laid out as `<class>/<images>` to see what would be imported.")
    st.stop()

@st.cache_data(max_entries=8, show_spinner="Reading the folder…")
def _plan(src: str, label_space: str, signature: tuple):
    return plan_folders(src, label_space)


def folder_signature(src: Path) -> tuple:
    """The modification times of SRC and its class folders: adding, removing or renaming an image
    or a folder changes one, and the plan is read again; every other click (a pick in a select box,
    typing a title) reuses it instead of counting every file once more (0.8 s per 30,000 files)."""
    try:
        # printable_name: a name that is not UTF-8 cannot be hashed for the cache (a review, 2026-12-06: a crash)
        return tuple((printable_name(entry.name), entry.stat().st_mtime_ns) for entry in [src, *sorted(src.iterdir())]
                     if entry.is_dir())
    except OSError:  # not a folder, or unreadable: plan_folders says what is wrong
        return ()


src = Path(folder.strip()).expanduser()
if import_root is not None and not src.is_absolute():
    src = import_root / src
try:
    check_import_source(src)
except WildLensError as exc:
    show_error(exc)
    st.stop()
try:
    plan = _plan(str(src), label_space, folder_signature(src))
except WildLensError as exc:
    show_error(exc)
    st.stop()
except OSError as exc:  # the folder vanished or cannot be read while planning
    show_error(exc, note="Check that the folder is readable by the user running WildLens.")
    st.stop()

space = get_label_space(label_space)
n_ambiguous, n_unknown = len(plan.by_status(AMBIGUOUS)), len(plan.by_status(UNKNOWN))
st.subheader(f"{plural(len(plan.folders), 'class folder')} in {escape_markdown(src)}")
st.caption(f"{plural(len(plan.resolved), 'folder')} resolved, {n_ambiguous:,} ambiguous, {n_unknown:,} unknown · "
           f"{plural(sum(f.files for f in plan.folders), 'file')} to read")
plan_table = plan.table()
# An unresolved folder has no class yet: NA (an en dash on screen), not an empty cell.
show_table(plan_table.assign(**{c: plan_table[c].mask(plan_table[c] == "") for c in ("class", "wnid")}),
           docs=PLAN_DOCS, labels=PLAN_LABELS)
for note in plan.notes:  # folder names inside: outside text
    st.caption(escape_markdown(note))

mapping: dict[str, str | None] = {}
undecided: list[str] = []
if n_ambiguous or n_unknown:
    st.subheader("Decide the folders that did not resolve")
for item in plan.by_status(AMBIGUOUS):
    candidates = {c.wnid: c for c in item.candidates}
    choice = st.selectbox(
        f"**{shown(item.folder)}** ({plural(item.files, 'file')}) can mean {len(candidates)} classes: which one?",
        [*candidates, SKIP], index=None, placeholder="Choose the sense…", key=folder_key(item.folder),
        format_func=lambda w, c=candidates: "Skip this folder" if w == SKIP else f"{c[w].label} ({w})")
    if choice is None:
        undecided.append(item.folder)
    else:
        mapping[item.folder] = None if choice == SKIP else choice
for item in plan.by_status(UNKNOWN):
    close = {c.wnid: c for c in item.candidates}
    choice = st.selectbox(
        f"**{shown(item.folder)}** ({plural(item.files, 'file')}) is not a class of {label_space}",
        [SKIP, *close, OTHER], key=folder_key(item.folder),
        format_func=lambda w, c=close: ("Skip this folder" if w == SKIP else "Map it to another class: type it…"
                                        if w == OTHER else f"Map it to {c[w].name} — {c[w].definition} ({w})"),
        help=escape_markdown(item.reason))
    if choice == SKIP:
        mapping[item.folder] = None
    elif choice != OTHER:
        mapping[item.folder] = choice
    else:
        text = st.text_input(f"Class for **{shown(item.folder)}**: a wnid, a synset name (`missile.n.01`) or a "
                             "class name", key=folder_key(item.folder, "text"))
        wnid = None
        if text.strip():
            try:
                wnid = resolve_class_name(text, label_space)
            except WildLensError as exc:
                show_error(exc)
        if wnid is None:
            undecided.append(item.folder)
        else:
            st.caption(f"→ {escape_markdown(space.display_name(wnid))} ({wnid}): "
                       f"{escape_markdown(space.definition(wnid))}")
            mapping[item.folder] = wnid

resolved = list(plan.resolved)
if resolved:
    left_out = st.multiselect("Leave out resolved folders (optional)", resolved,
                              key=key(str(src), label_space, "leave-out"))
    mapping.update({name: None for name in left_out})

st.subheader("Create the run")
title = st.text_input("Run title", value=f"Import of {src.name or src}", key=key(str(src), "title"))
chosen = [f for f in plan.folders if f.folder not in undecided and mapping.get(f.folder, f.wnid) is not None]
if undecided:
    st.caption("Decide first: " + ", ".join(f"**{shown(name)}**" for name in undecided))
elif not chosen:
    st.caption("Every folder is skipped: nothing to import.")
else:
    st.caption(f"{plural(len(chosen), 'folder')} ({plural(sum(f.files for f in chosen), 'file')}) go into a new "
               f"run; {plural(len(plan.folders) - len(chosen), 'folder')} skipped.")
    # What the smallest class buys (core.intervals, SPEC "Uncertainty"), before anything is copied.
    fewest = min(f.files for f in chosen)
    st.caption(f"The smallest class, if every file is accepted: {format_half_width(fewest)}; "
               f"±{DEFAULT_HALF_WIDTH * 100:.0f} points needs {images_needed(DEFAULT_HALF_WIDTH):,} images per class.")
if not st.button(f"Import {plural(len(chosen), 'folder')} into a new run", type="primary",
                 disabled=bool(undecided) or not chosen, key="import-go"):
    st.stop()

try:
    summary = import_new_run(src, mapping, store(), title=title, label_space=label_space, progress=progress_bar())
except FolderImportError as exc:
    show_error(exc)
    if exc.summary is not None and not exc.summary.per_class.empty:
        st.caption("What was read, per class:")
        read = exc.summary.per_class.drop(columns=["requested", "short_by"], errors="ignore")
        read.insert(1, "name", [space.display_name(w) if w in space else w for w in read["wnid"]])
        show_table(read, docs=SUMMARY_DOCS, labels=summary_labels(read))
    st.stop()
except WildLensError as exc:
    show_error(exc)
    st.stop()
except OSError as exc:  # the folder vanished or cannot be read mid-import
    show_error(exc, note="Check that the folder is readable by the user running WildLens. No run was created yet: "
                         "import the same folder again to go on from the images already imported.")
    st.stop()

# An import taken up after it was stopped (crawl.importer._kept_for_resume) counts only what it imported now.
kept = (f"; {plural(summary.already_imported, 'file')} an earlier, unfinished import of this folder had recorded "
        "were kept, not read again" if summary.already_imported else "")
st.success(f"Run {summary.run_id} created: {plural(summary.new_accepted, 'image')} of "
           f"{plural(len(summary.wnids), 'class', 'classes')} imported from {plural(summary.files_seen, 'file')}{kept}.")
table = summary.per_class.drop(columns=["requested", "short_by"], errors="ignore")  # no k: an import asks for none
# 'name': the column core.names.with_names gives a wnid, so the CSV has it once.
table.insert(1, "name", [space.display_name(w) if w in space else w for w in table["wnid"]])
show_table(table, docs=SUMMARY_DOCS, labels=summary_labels(table))
download_csv(table, f"{summary.run_id}_import_summary.csv", key="dl-import-summary", label_space=label_space)
if summary.folders_skipped:
    st.markdown("**Not imported:**\n" + "\n".join(f"- {shown(name)}: {escape_markdown(why)}"
                                                   for name, why in summary.folders_skipped.items()))
if summary.skipped:
    st.caption(f"{plural(len(summary.skipped), 'entry', 'entries')} not read (each has a manifest row with its reason):")
    show_table(pd.DataFrame(summary.skipped, columns=["entry", "reason"]),
               docs={"entry": "A file or folder the import did not read.", "reason": "Why."})
for note in summary.notes:  # what was skipped and why: folder and file names, escaped
    st.caption(escape_markdown(note))
open_run_link(summary.run_id, "pages/images_page.py", "Open its images")
