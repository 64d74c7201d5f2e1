"""The stored metrics artefact: a run's metric tables in its ``metrics/`` folder, with the
fingerprint of the predictions and manifest they were computed from.

Layout (``core.runstore`` owns the folder, this module its content)::

    runs/<run_id>/metrics/
      per_model.parquet    explain.schema.PER_MODEL columns, one row per model
      per_class.parquet    explain.schema.PER_CLASS columns, one row per (model, true class)
      confusions.parquet   explain.schema.CONFUSIONS columns, the top-3 per (model, true class)
      fingerprint.json     what the tables are: the inputs' fingerprints, the parameters, the
                           code and column versions, and each table file's sha256
      curated/             the same files for the curated view (issue 24): the analyst's
                           curation log applied (explain.curation_view), its fingerprint in
                           fingerprint.json's "curation"

The raw tables are exactly ``compute_metric_tables(run.usable_predictions(), confusion_top_k=3)``,
what ``python -m explain metrics`` computes from the run's predictions; the curated ones the
same of ``explain.curation_view.view_predictions(run, "curated")``, both computed a chunk of models at a
time (``explain.streaming``: the same tables, in bounded memory). A log that changes nothing
(no entry, every entry undone) stores no curated copy: the curated tables are the raw ones.

Why: the dashboard's first load of a 1,000,000-prediction run read every prediction and recomputed
the tables on each new server (about 3 s on the day of the architecture issue). The stored tables
of that run are at most 40,010 rows: ``benchmarks/bench_app.py`` measured the Results page's
first load at 0.11 s with them against 1.32 s recomputing (12x, 2-core machine, same run); writing
the artefact after inference costs about the recompute, once.

Staleness: the tables are used only while ``fingerprint.json`` matches the run as it is now:
``core.runstore.predictions_fingerprint`` (a part file added, replaced or removed) and
``manifest_fingerprint`` (an import, an exclusion), the parameters, :data:`METRICS_CODE_VERSION`,
``explain.similarity.SIMILARITY_CODE_VERSION`` and a digest of the table schemas (adding a column
invalidates old artefacts by itself). Anything else (no artefact, a damaged or hand-edited table
whose sha256 differs, a JSON that does not parse) also means "recompute", never an error.

Deletes: the tables are written holding ``core.locking.run_presence_lock``: a delete while they
are written is refused (the run is in use), a delete while they were computed wins and the refresh
raises :class:`RunDeleted` without writing (it made ``runs/<id>/metrics/`` again before, a folder
that blocked the id).

Atomicity: a refresh first removes ``fingerprint.json``, then writes each table atomically, then
writes ``fingerprint.json`` last with the sha256 of the bytes it wrote. A kill at any point leaves
either no fingerprint (recomputed next time) or tables that hash to what the fingerprint claims;
two refreshes racing each other cannot leave one's fingerprint over the other's tables either,
since a reader checks every table's hash.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from core.curation import curation_fingerprint, read_curation
from core.runstore import (SCHEMA_VERSION, Run, StoreError, manifest_fingerprint, now_iso, predictions_fingerprint,
                           read_parquet_bytes, table_to_parquet_bytes, write_bytes_atomic, write_json_atomic)
from core.tables import read_stored_bytes, real_folder
from .curation_view import CURATED, RAW, ViewChange, check_view, default_view
from .metrics import DEFAULT_CONFUSION_TOP_K, DEFAULT_INTERVALS, MetricTables
from .streaming import stream_metric_tables
from .schema import METRIC_SCHEMAS

# Bump when a metric's value changes meaning for the same predictions (stored tables are then stale).
METRICS_CODE_VERSION = 8  # 2: issue 16 (label spaces, top-k MBM metrics); 3: per-class sim_to_seen;
# 4: the 'related' relation and related_count (issue 12 point 6); 5: empty top-5 columns are no top-5;
# 6: issue 22 (item 10: exact repeats count once, a group with a top-1-only row has no top-5 accuracy;
# item 12: per-model rows over the in-space classes only; item 13: accuracy_hier for unseen classes);
# 7: issue 23 (interval columns, relation rates); 8: issue 27 (each model's bootstrap draws keyed by its id)
FINGERPRINT_FILE = "fingerprint.json"
# What `python -m explain metrics` and the dashboard use; the artefact stores these tables only
# (the interval settings too: other --ci / --resamples / --seed values are computed, not stored).
PARAMETERS = {"confusion_top_k": DEFAULT_CONFUSION_TOP_K, "ci": DEFAULT_INTERVALS.as_dict()}
_PARAMETERS = {"confusion_top_k": DEFAULT_CONFUSION_TOP_K, "ci": DEFAULT_INTERVALS}  # the computation's arguments


def _schema_digest() -> str:
    text = json.dumps({name: list(schema.items()) for name, schema in METRIC_SCHEMAS.items()})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _versions() -> dict:
    from .similarity import SIMILARITY_CODE_VERSION

    return {"metrics": METRICS_CODE_VERSION, "similarity": SIMILARITY_CODE_VERSION, "store_schema": SCHEMA_VERSION,
            "columns": _schema_digest()}


def view_dir(run: Run, view: str = RAW) -> Path:
    """The folder of a view's tables: ``metrics/`` (raw) or ``metrics/curated/``."""
    return run.metrics_dir if check_view(view) == RAW else run.metrics_dir / CURATED


def table_path(run: Run, name: str, view: str = RAW) -> Path:
    return view_dir(run, view) / f"{name}.parquet"


def fingerprint_path(run: Run, view: str = RAW) -> Path:
    return view_dir(run, view) / FINGERPRINT_FILE


def current_fingerprint(run: Run, view: str = RAW) -> dict:
    """What a fresh artefact of ``run`` must claim: inputs, parameters and versions (JSON-ready);
    the curated view's also the curation log's fingerprint."""
    out = {"predictions": predictions_fingerprint(run), "manifest": manifest_fingerprint(run),
           "parameters": dict(PARAMETERS), "versions": _versions()}
    if check_view(view) == CURATED:
        out["curation"] = curation_fingerprint(run)
    return out


def stored_fingerprint(run: Run, view: str = RAW) -> dict | None:
    """The artefact's fingerprint.json, or None when it is missing or unreadable."""
    raw = read_stored_bytes(fingerprint_path(run, view), 1 << 20)  # a FIFO or a link: stale, never waited on
    try:
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def staleness(run: Run, expected: dict | None = None, view: str = RAW) -> str | None:
    """Why the stored fingerprint does not match the run now (one short phrase), or None when it
    matches. Cheap (file stats and one small JSON): table hashes are checked when reading."""
    expected = expected or current_fingerprint(run, view)
    stored = stored_fingerprint(run, view)
    if stored is None:
        return "no stored metrics" if not fingerprint_path(run, view).exists() else "fingerprint.json is unreadable"
    for key, what in (("predictions", "the predictions changed"), ("manifest", "the manifest changed (an exclusion or "
                      "an import)"), ("curation", "the curation log changed"), ("parameters", "other parameters"),
                      ("versions", "computed by another version")):
        if stored.get(key) != expected.get(key):
            return what
    return None


@dataclass(frozen=True)
class MetricsResult:
    """Tables plus how they were obtained: ``recomputed`` (False: read from ``metrics/``),
    ``stored`` (the artefact now holds them), ``reason`` (why recomputed), ``store_error`` (why
    they could not be written back), the ``view`` and what the curation ``change``d (curated view)."""

    tables: MetricTables
    recomputed: bool
    stored: bool
    reason: str = ""
    store_error: str = ""
    view: str = RAW
    change: ViewChange = ViewChange()

    def describe(self, run: Run) -> str:
        """One line for a command line: which view, and where the tables came from."""
        what = f"metrics of run {run.run_id}" + (f", curated view ({self.change.describe()})" if self.view == CURATED
                                                 else ", raw view")
        folder = view_dir(run, self.view) if self.change.any or self.view == RAW else run.metrics_dir
        if not self.recomputed:
            return f"{what}: read from {folder} (up to date)"
        where = f"stored in {folder}" if self.stored else f"not stored ({self.store_error or 'asked not to'})"
        return f"{what}: recomputed ({self.reason}); {where}"


def read_stored_metrics(run: Run, expected: dict | None = None, view: str = RAW) -> MetricTables | None:
    """The stored tables when the artefact is fresh and intact, else None (never raises for a
    damaged artefact: it is derived data, recomputed by the caller)."""
    expected = expected or current_fingerprint(run, view)
    if staleness(run, expected, view) is not None:
        return None
    entries = (stored_fingerprint(run, view) or {}).get("tables")
    frames = {}
    for name, schema in METRIC_SCHEMAS.items():
        entry = entries.get(name) if isinstance(entries, dict) else None
        if not isinstance(entry, dict):
            return None  # a hand-edited fingerprint.json
        path = table_path(run, name, view)
        data = read_stored_bytes(path)
        if data is None:
            return None
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            return None  # damaged, hand-edited, or another refresh's table
        try:
            frames[name] = read_parquet_bytes(data, schema, table=name, source=path)
        except StoreError:
            return None
    return MetricTables(**frames, ci=DEFAULT_INTERVALS.as_dict())


class RunDeleted(StoreError):
    """The run was deleted while its tables were computed: nothing was written (the run stays deleted)."""


def write_metrics(run: Run, tables: MetricTables, fingerprint: dict, view: str = RAW) -> Path:
    """Store ``tables`` as the artefact claiming ``fingerprint`` (see the module docstring for the
    write order), holding the run in place (``core.locking.run_presence_lock``: a delete meanwhile
    is refused, one before is :class:`RunDeleted` and nothing is written; the run folder is never
    made again). Raises StoreError when the run folder cannot be written."""
    from core.locking import RunGone, run_presence_lock

    try:
        with run_presence_lock(run.path, f"Run {run.run_id} was deleted while its metrics were computed; nothing "
                                         "was written."):
            return _write_metrics(run, tables, fingerprint, view)
    except RunGone as exc:
        raise RunDeleted(str(exc)) from None
    except OSError as exc:  # the lock file cannot be made: a read-only run folder
        raise StoreError(f"cannot write the metrics of run {run.run_id} to {run.metrics_dir}: "
                         f"{exc.strerror or exc}; check the folder's permissions and free space.") from None


def _write_metrics(run: Run, tables: MetricTables, fingerprint: dict, view: str) -> Path:
    target = fingerprint_path(run, view)
    for folder in (run.metrics_dir, view_dir(run, view)):
        if not real_folder(folder):  # a link would have the tables written wherever it leads (hostile campaign)
            raise StoreError(f"cannot write the metrics of run {run.run_id}: {folder} is a link or a file, not a "
                             "folder; move it away.")
    try:
        run.metrics_dir.mkdir(exist_ok=True)  # not parents=True: the run folder is there (locked), never made
        view_dir(run, view).mkdir(exist_ok=True)
        target.unlink(missing_ok=True)  # first: no claim while the tables change
        entries = {}
        for name, df in tables.as_dict().items():
            data = table_to_parquet_bytes(df, METRIC_SCHEMAS[name], table=name)
            write_bytes_atomic(table_path(run, name, view), data)
            entries[name] = {"file": table_path(run, name, view).name, "rows": len(df),
                             "sha256": hashlib.sha256(data).hexdigest()}
        write_json_atomic(target, {**fingerprint, "tables": entries, "written": now_iso()})  # last
    except OSError as exc:
        raise StoreError(f"cannot write the metrics of run {run.run_id} to {view_dir(run, view)}: "
                         f"{exc.strerror or exc}; check the folder's permissions and free space.") from None
    return target


def _stored_change(run: Run) -> ViewChange:
    """What the stored curated tables' fingerprint says the curation changed."""
    data = (stored_fingerprint(run, CURATED) or {}).get("change")
    try:
        return ViewChange(**{k: int(data[k]) for k in ("relabelled_images", "excluded_images", "relabelled_rows",
                                                        "excluded_rows")})
    except (TypeError, KeyError, ValueError):
        return ViewChange()


def ensure_metrics(run: Run, *, store: bool = True, force: bool = False, cache_dir=None,
                   view: str = RAW, engine: str = "local", ray_address: str | None = None,
                   ray_join_timeout: float | None = None, _computed: MetricTables | None = None) -> MetricsResult:
    """The run's metric tables in ``view`` (explain.curation_view): the stored ones when fresh,
    else recomputed and (``store``) written back. A write that fails is reported in the result,
    not raised: the tables are still right. ``force`` recomputes a fresh artefact. The curated
    view of a run whose log changes none of its predictions is the raw view (stored once).
    ``engine='ray'`` computes them on Ray (:mod:`explain.ray_metrics`, the same tables)."""
    check_view(view)
    expected = current_fingerprint(run, view)  # before reading: a part added meanwhile leaves it stale, never wrong
    if not force:
        tables = read_stored_metrics(run, expected, view)
        if tables is not None:
            return MetricsResult(tables, recomputed=False, stored=True, view=view,
                                 change=_stored_change(run) if view == CURATED else ViewChange())
    change = ViewChange()
    # The run's predictions are read a chunk of models at a time (explain.streaming): the same tables as
    # compute_metric_tables of them all, in bounded memory.
    if view == CURATED:
        curation = read_curation(run)
        changes_rows = bool(curation.relabels or curation.excluded)  # tags alone change no row: nothing to read
        tables, change = (_tables(run, CURATED, curation, cache_dir, engine, ray_address, ray_join_timeout)
                          if changes_rows else (None, ViewChange()))
        if not change.any:  # nothing curated that these predictions hold: the raw tables (not forced: not this view's)
            # (the tables just computed are the raw ones: no second pass over the predictions)
            raw = ensure_metrics(run, store=store, cache_dir=cache_dir, engine=engine, ray_address=ray_address,
                                 ray_join_timeout=ray_join_timeout, _computed=tables)
            return MetricsResult(raw.tables, raw.recomputed, raw.stored, raw.reason, raw.store_error, CURATED, change)
    elif _computed is not None:  # the raw tables, computed by the curated view's call (nothing curated)
        tables = _computed
    else:
        tables, _ = _tables(run, RAW, None, cache_dir, engine, ray_address, ray_join_timeout)
    reason = "forced" if force else (staleness(run, expected, view) or "a stored table is damaged")
    if not store:
        return MetricsResult(tables, recomputed=True, stored=False, reason=reason, view=view, change=change)
    if view == CURATED:
        expected = {**expected, "change": change.__dict__}
    try:
        write_metrics(run, tables, expected, view)
    except RunDeleted:
        raise  # not "tables not stored": there is no run any more to show them for
    except StoreError as exc:
        return MetricsResult(tables, recomputed=True, stored=False, reason=reason, store_error=str(exc), view=view,
                             change=change)
    return MetricsResult(tables, recomputed=True, stored=True, reason=reason, view=view, change=change)


def _tables(run: Run, view: str, curation, cache_dir, engine: str, ray_address: str | None,
            join_timeout: float | None = None):
    """(tables, what the curation changed) of the artefact's parameters, here or on Ray."""
    if engine == "ray":
        from .ray_metrics import ray_metric_tables

        return ray_metric_tables(run, view, curation=curation, address=ray_address, join_timeout=join_timeout,
                                 cache_dir=cache_dir, **_PARAMETERS)
    return stream_metric_tables(run, view, curation=curation, cache_dir=cache_dir, **_PARAMETERS)


def refresh_metrics(run: Run, *, force: bool = False, cache_dir=None) -> MetricTables:
    """Make the stored raw artefact current (recompute and write only when stale, or ``force``)
    and the curated one too when the run's curation changes its predictions, each with its
    per-prediction explanations (``explain.error_types.ensure_explained``); return the raw
    tables. Called after inference (``python -m classify --run``, the sample run). Raises
    StoreError when the tables had to be written and could not be."""
    from .error_types import TooManyToExplain, ensure_explained

    result = ensure_metrics(run, force=force, cache_dir=cache_dir)
    if not result.stored:
        raise StoreError(result.store_error)
    # The per-prediction explanations (error types) too, which Results and Browse read: typed here, after
    # inference, rather than on the first page load (1.5 s at 1,000,000 predictions; bench_app.py). Not for
    # a run too large to type in memory (the tables streamed; the pages say why the error types are missing).
    try:
        ensure_explained(run, RAW, cache_dir=cache_dir, force=force)
        explain = True
    except TooManyToExplain:
        explain = False
    if explain:  # and Browse's per-image table, which a new server reads instead of building (explain.browse_store)
        _store_browse_table(run, RAW, force)
    state = read_curation(run)
    if state.relabels or state.excluded:
        curated = ensure_metrics(run, force=force, cache_dir=cache_dir, view=CURATED)
        if not curated.stored:
            raise StoreError(curated.store_error)
        if explain:
            ensure_explained(run, CURATED, cache_dir=cache_dir, force=force)
    if explain and default_view(run) == CURATED:  # a log of tags alone opens Browse curated too
        _store_browse_table(run, CURATED, force)
    return result.tables


def _store_browse_table(run: Run, view: str, force: bool) -> None:
    """Browse's per-image table stored for the next server (explain.browse_store), unless it is
    fresh already (its claim compared, not the 370 MB file read). Optional: what stops it stores
    nothing and never fails the refresh, whose tables are written."""
    import pyarrow as pa

    from core.errors import WildLensError

    from .browse_store import browse_fresh, ensure_browse_table

    label_space = run.info.label_space or "imagenet-1k"
    if not force and browse_fresh(run, view, label_space):
        return
    try:
        ensure_browse_table(run, view, label_space, force=True)
    except (WildLensError, pa.ArrowException, MemoryError):  # predictions Browse cannot show (the page says why),
        pass  # or a table too large for this machine's memory: the page builds it when asked


def load_metrics(run: Run, *, cache_dir=None, view: str = RAW) -> MetricTables:
    """The run's tables in ``view`` for a reader (dashboard, CLI): stored when fresh, else
    recomputed and written back when the folder allows (a read-only run still gets its tables)."""
    return ensure_metrics(run, cache_dir=cache_dir, view=view).tables
