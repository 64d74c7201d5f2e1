"""Per-prediction explanations that several stages read: their schema, where they are stored and
when they are fresh (issue 24).

explain/ writes, for each view of a run (``raw``: the usable predictions as stored; ``curated``:
the curation log applied, :mod:`core.curation`), one row per (model, image) that the metrics
count, with the top-1's WordNet relation to the truth, its mistake severity and, for a mistake,
its error type and the reason for it::

    runs/<run_id>/metrics/images.parquet            (raw view)       EXPLAINED_SCHEMA
    runs/<run_id>/metrics/images.json               what it was computed from (inputs_fingerprint)
    runs/<run_id>/metrics/curated/images.parquet    (curated view)
    runs/<run_id>/metrics/curated/images.json

Readers (crawl's dataset export, the dashboard) use :func:`read_explained`, which returns the rows
only while the stored inputs match the run now; the schema and the fingerprint live here, on the
ground floor, so that a reader needs no import of the stage that wrote them.

The label issues that the probe stage writes (``probes/label_issues.parquet``, one row per
(model, image)) are read by explain's error types: their schema lives here too.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from .parts import sweep_stale_temps
from .runstore import (Run, StoreError, manifest_fingerprint, predictions_fingerprint, read_parquet_bytes,
                       table_to_parquet_bytes, write_bytes_atomic, write_json_atomic)
from .tables import read_stored_bytes, real_folder

RAW, CURATED = "raw", "curated"  # the two views of a run's predictions (explain.curation_view)
VIEWS = (RAW, CURATED)
# The most stored predictions whose explanations are made: they are typed with every prediction of a view in
# memory (one streamed chunk's worth, explain.streaming.STREAM_ROWS). Here, not in explain/, so crawl's export
# can name it; explain.error_types.check_explainable refuses above it.
EXPLAINED_IN_MEMORY = 2_000_000

EXPLAINED_SCHEMA: dict[str, str] = {
    "model": "string",
    "image": "string",  # the manifest's file (or a prediction's image id)
    "true_wnid": "string",  # in this view: a relabel of the curated view is the truth
    "pred_wnid": "string",  # top-1
    "prob_1": "Float64",  # the model's probability of its top-1 (NA when not stored)
    "correct": "boolean",  # top-1 == truth (strict)
    "in_label_space": "boolean",  # the truth is a class of the model's label space (False: unseen; NA: space unknown)
    "relation": "string",  # explain.vocabulary.RELATIONS: 'same' for a correct top-1
    "severity": "Int64",  # mistake severity: hypernym steps from the truth up to the lowest common subsumer
    "error_type": "string",  # explain.error_types.ERROR_TYPES; NA for a correct top-1
    "error_reason": "string",  # why that type, one line (shown on hover and in CSVs)
}
EXPLAINED_FILE, EXPLAINED_FINGERPRINT = "images.parquet", "images.json"
# Bump when an error type or its reason changes for the same inputs (explain.error_types's rules, or
# anything they read: relations, meronyms, thresholds): stored explanations are then stale for every
# reader, crawl's export too, which cannot ask explain which code made them (code review).
ERROR_TYPES_CODE_VERSION = 2  # 2: in_label_space; the per-model table over the in-space classes

LABEL_ISSUES_SCHEMA: dict[str, str] = {
    "model": "string",
    "image": "string",  # the manifest's 'file'
    "true_wnid": "string",  # the class the image is stored under
    "suggested_wnid": "string",  # the class the out-of-fold probe finds most probable
    "label_quality": "Float64",  # out-of-fold probability of true_wnid (cleanlab self-confidence)
    "suggested_prob": "Float64",  # out-of-fold probability of suggested_wnid
    "is_issue": "boolean",  # flagged by cleanlab.filter.find_label_issues
    "C": "Float64",  # the probe's inverse regularisation
}
PROBES_DIR, LABEL_ISSUES_FILE = "probes", "label_issues.parquet"


def label_issues_path(run: Run) -> Path:
    return Path(run.path) / PROBES_DIR / LABEL_ISSUES_FILE


def _file_fingerprint(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "none"
    return hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}".encode()).hexdigest()[:16]


def label_issues_fingerprint(run: Run) -> str:
    """Changes when the probe stage rewrites its label issues (written by atomic rename)."""
    return _file_fingerprint(label_issues_path(run))


def read_label_issues(run: Run) -> pd.DataFrame | None:
    """The run's stored label issues, or None when the probe stage has written none. A file that is
    not a regular one (a FIFO, a link, a folder) or does not read as the table raises StoreError
    with its one line (never a wait on a FIFO)."""
    path = label_issues_path(run)
    if not path.exists() and not path.is_symlink():
        return None
    data = read_stored_bytes(path)
    if data is None:
        raise StoreError(f"{path} is not a regular file of the probe stage; move it away (python -m probe "
                         "--label-issues writes it again).")
    return read_parquet_bytes(data, LABEL_ISSUES_SCHEMA, table="label issues", source=path)


def view_folder(run: Run, view: str) -> Path:
    """``metrics/`` for the raw view, ``metrics/curated/`` for the curated one."""
    if view not in VIEWS:
        raise StoreError(f"unknown view {str(view)[:20]!r}; one of {', '.join(VIEWS)}.")
    return run.metrics_dir if view == RAW else run.metrics_dir / CURATED


def inputs_fingerprint(run: Run, view: str, versions: dict | None = None) -> dict:
    """What a view's explanations are computed from: the predictions, the manifest (exclusions,
    near duplicates), the curation log (tags and relabels decide error types in both views), the
    label issues, and the writer's code ``versions``."""
    from .curation import curation_fingerprint

    view_folder(run, view)  # checks the view
    return {"view": view, "predictions": predictions_fingerprint(run), "manifest": manifest_fingerprint(run),
            "curation": curation_fingerprint(run), "label_issues": label_issues_fingerprint(run),
            "versions": dict(versions or {})}


def read_explained(run: Run, view: str, versions: dict | None = None, *,
                   columns: list[str] | None = None) -> pd.DataFrame | None:
    """The stored explanations of ``view`` when they were computed from the run as it is now (and,
    with ``versions``, by that code), else None: a reader then computes them (explain) or goes
    without (crawl's export says which command adds them). ``columns``: only these (of
    EXPLAINED_SCHEMA) are decoded; the file's checksum is still checked whole."""
    folder = view_folder(run, view)
    stored = read_claim(run, view, EXPLAINED_FINGERPRINT)
    if stored is None:
        return None
    if versions is None:  # a reader that is not explain: the stored versions, made by this code's rules
        versions = stored.get("versions")
        if not isinstance(versions, dict) or versions.get("error_types") != ERROR_TYPES_CODE_VERSION:
            return None
    expected = inputs_fingerprint(run, view, versions)
    if any(stored.get(key) != value for key, value in expected.items()):
        return None
    path = folder / EXPLAINED_FILE
    data = read_stored_bytes(path)
    if data is None or hashlib.sha256(data).hexdigest() != stored.get("sha256"):
        return None
    try:
        return read_parquet_bytes(data, EXPLAINED_SCHEMA, table="explained predictions", source=path, columns=columns)
    except StoreError:
        return None


def write_explained(run: Run, view: str, rows: pd.DataFrame, fingerprint: dict) -> Path:
    """Store a view's explanations claiming ``fingerprint`` (:func:`inputs_fingerprint`, taken
    before the inputs were read), the table first and its fingerprint last, holding the run in
    place (a deleted run is not made again). Raises StoreError when it cannot be written."""
    # The hash of the bytes this call writes, never of the file read back: another writer's table
    # landing in between would be claimed with this call's (fresher) fingerprint (code review).
    data = table_to_parquet_bytes(rows, EXPLAINED_SCHEMA, table="explained predictions")
    return write_claimed(run, view, EXPLAINED_FILE, data, EXPLAINED_FINGERPRINT,
                         {**fingerprint, "sha256": hashlib.sha256(data).hexdigest(), "rows": len(rows)},
                         "the explanations")


def read_claim(run: Run, view: str, claim_name: str) -> dict | None:
    """A view's stored claim (:func:`write_claimed`'s JSON), or None when it is missing, not a regular
    file (a FIFO or a link: stale, never waited on), over 1 MB, or not a JSON object, or when ``metrics/``
    or the view's folder is a link (write_claimed never writes through one, so what lies there is no claim
    of this run's: the hostile campaign had a Browse table read through a linked ``metrics/curated``)."""
    folder = view_folder(run, view)
    if not (real_folder(run.metrics_dir) and real_folder(folder)):
        return None
    raw = read_stored_bytes(folder / claim_name, 1 << 20)
    try:
        stored = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return stored if isinstance(stored, dict) else None


def write_claimed(run: Run, view: str, name: str, data, claim_name: str, claim: dict, what: str) -> Path:
    """The one way a view's derived file is stored beside its claim (what it was made from, its hash):
    in the view's real folder (never through a link), holding the run in place (a deleted run is not
    made again), sweeping what a writer killed mid-write left, the claim removed first and written
    last. Raises StoreError naming ``what`` when it cannot be written."""
    from .locking import RunGone, run_presence_lock

    folder = view_folder(run, view)
    for place in (run.metrics_dir, folder):
        if not real_folder(place):  # a link would have the file written wherever it leads (hostile campaign)
            raise StoreError(f"cannot store {what} of run {run.run_id}: {place} is a link or a file, not a "
                             "folder; move it away.")
    try:
        with run_presence_lock(run.path, f"Run {run.run_id} was deleted meanwhile; nothing was written."):
            run.metrics_dir.mkdir(exist_ok=True)
            folder.mkdir(exist_ok=True)
            sweep_stale_temps(folder, (name, claim_name))
            (folder / claim_name).unlink(missing_ok=True)
            path = folder / name
            write_bytes_atomic(path, data)
            write_json_atomic(folder / claim_name, claim)
    except RunGone as exc:
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(f"cannot store {what} of run {run.run_id} in {folder}: {exc.strerror or exc}; "
                         "check the folder's permissions and free space.") from None
    return path
