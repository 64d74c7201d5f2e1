"""The stored metrics artefact: a run's metric tables in its ``metrics/`` folder, with the
fingerprint of the predictions and manifest they were computed from.

Layout (``core.runstore`` owns the folder, this module its content)::

    runs/<run_id>/metrics/
      per_model.parquet    explain.schema.PER_MODEL columns, one row per model
      per_class.parquet    explain.schema.PER_CLASS columns, one row per (model, true class)
      confusions.parquet   explain.schema.CONFUSIONS columns, the top-3 per (model, true class)
      fingerprint.json     what the tables are: the inputs' fingerprints, the parameters, the
                           code and column versions, and each table file's sha256

The tables are exactly ``compute_metric_tables(run.usable_predictions(), confusion_top_k=3)``,
what ``python -m explain metrics`` computes from the run's predictions.

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

from core.runstore import (SCHEMA_VERSION, Run, StoreError, manifest_fingerprint, now_iso, predictions_fingerprint,
                           read_parquet_bytes, table_to_parquet_bytes, write_bytes_atomic, write_json_atomic)
from .metrics import DEFAULT_CONFUSION_TOP_K, DEFAULT_INTERVALS, MetricTables, compute_metric_tables
from .schema import METRIC_SCHEMAS

# Bump when a metric's value changes meaning for the same predictions (stored tables are then stale).
METRICS_CODE_VERSION = 7  # 2: issue 16 (label spaces, top-k MBM metrics); 3: per-class sim_to_seen;
# 4: the 'related' relation and related_count (issue 12 point 6); 5: empty top-5 columns are no top-5;
# 6: issue 22 (item 10: exact repeats count once, a group with a top-1-only row has no top-5 accuracy;
# item 12: per-model rows over the in-space classes only; item 13: accuracy_hier for unseen classes);
# 7: issue 23 (interval columns, relation rates)
FINGERPRINT_FILE = "fingerprint.json"
# What `python -m explain metrics` and the dashboard use; the artefact stores these tables only
# (the interval settings too: other --ci / --resamples / --seed values are computed, not stored).
PARAMETERS = {"confusion_top_k": DEFAULT_CONFUSION_TOP_K, "ci": DEFAULT_INTERVALS.as_dict()}


def _schema_digest() -> str:
    text = json.dumps({name: list(schema.items()) for name, schema in METRIC_SCHEMAS.items()})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _versions() -> dict:
    from .similarity import SIMILARITY_CODE_VERSION

    return {"metrics": METRICS_CODE_VERSION, "similarity": SIMILARITY_CODE_VERSION, "store_schema": SCHEMA_VERSION,
            "columns": _schema_digest()}


def table_path(run: Run, name: str) -> Path:
    return run.metrics_dir / f"{name}.parquet"


def fingerprint_path(run: Run) -> Path:
    return run.metrics_dir / FINGERPRINT_FILE


def current_fingerprint(run: Run) -> dict:
    """What a fresh artefact of ``run`` must claim: inputs, parameters and versions (JSON-ready)."""
    return {"predictions": predictions_fingerprint(run), "manifest": manifest_fingerprint(run),
            "parameters": dict(PARAMETERS), "versions": _versions()}


def stored_fingerprint(run: Run) -> dict | None:
    """The artefact's fingerprint.json, or None when it is missing or unreadable."""
    try:
        data = json.loads(fingerprint_path(run).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def staleness(run: Run, expected: dict | None = None) -> str | None:
    """Why the stored fingerprint does not match the run now (one short phrase), or None when it
    matches. Cheap (file stats and one small JSON): table hashes are checked when reading."""
    expected = expected or current_fingerprint(run)
    stored = stored_fingerprint(run)
    if stored is None:
        return "no stored metrics" if not fingerprint_path(run).exists() else "fingerprint.json is unreadable"
    for key, what in (("predictions", "the predictions changed"), ("manifest", "the manifest changed (an exclusion or "
                      "an import)"), ("parameters", "other parameters"), ("versions", "computed by another version")):
        if stored.get(key) != expected[key]:
            return what
    return None


@dataclass(frozen=True)
class MetricsResult:
    """Tables plus how they were obtained: ``recomputed`` (False: read from ``metrics/``),
    ``stored`` (the artefact now holds them), ``reason`` (why recomputed) and ``store_error`` (why
    they could not be written back)."""

    tables: MetricTables
    recomputed: bool
    stored: bool
    reason: str = ""
    store_error: str = ""

    def describe(self, run: Run) -> str:
        """One line for a command line: where the tables came from."""
        if not self.recomputed:
            return f"metrics of run {run.run_id}: read from {run.metrics_dir} (up to date)"
        where = f"stored in {run.metrics_dir}" if self.stored else f"not stored ({self.store_error or 'asked not to'})"
        return f"metrics of run {run.run_id}: recomputed ({self.reason}); {where}"


def read_stored_metrics(run: Run, expected: dict | None = None) -> MetricTables | None:
    """The stored tables when the artefact is fresh and intact, else None (never raises for a
    damaged artefact: it is derived data, recomputed by the caller)."""
    expected = expected or current_fingerprint(run)
    if staleness(run, expected) is not None:
        return None
    entries = (stored_fingerprint(run) or {}).get("tables")
    frames = {}
    for name, schema in METRIC_SCHEMAS.items():
        entry = entries.get(name) if isinstance(entries, dict) else None
        if not isinstance(entry, dict):
            return None  # a hand-edited fingerprint.json
        path = table_path(run, name)
        try:
            data = path.read_bytes()
        except OSError:
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


def write_metrics(run: Run, tables: MetricTables, fingerprint: dict) -> Path:
    """Store ``tables`` as the artefact claiming ``fingerprint`` (see the module docstring for the
    write order), holding the run in place (``core.locking.run_presence_lock``: a delete meanwhile
    is refused, one before is :class:`RunDeleted` and nothing is written; the run folder is never
    made again). Raises StoreError when the run folder cannot be written."""
    from core.locking import RunGone, run_presence_lock

    try:
        with run_presence_lock(run.path, f"Run {run.run_id} was deleted while its metrics were computed; nothing "
                                         "was written."):
            return _write_metrics(run, tables, fingerprint)
    except RunGone as exc:
        raise RunDeleted(str(exc)) from None
    except OSError as exc:  # the lock file cannot be made: a read-only run folder
        raise StoreError(f"cannot write the metrics of run {run.run_id} to {run.metrics_dir}: "
                         f"{exc.strerror or exc}; check the folder's permissions and free space.") from None


def _write_metrics(run: Run, tables: MetricTables, fingerprint: dict) -> Path:
    target = fingerprint_path(run)
    try:
        run.metrics_dir.mkdir(exist_ok=True)  # not parents=True: the run folder is there (locked), never made
        target.unlink(missing_ok=True)  # first: no claim while the tables change
        entries = {}
        for name, df in tables.as_dict().items():
            data = table_to_parquet_bytes(df, METRIC_SCHEMAS[name], table=name)
            write_bytes_atomic(table_path(run, name), data)
            entries[name] = {"file": table_path(run, name).name, "rows": len(df),
                             "sha256": hashlib.sha256(data).hexdigest()}
        write_json_atomic(target, {**fingerprint, "tables": entries, "written": now_iso()})  # last
    except OSError as exc:
        raise StoreError(f"cannot write the metrics of run {run.run_id} to {run.metrics_dir}: "
                         f"{exc.strerror or exc}; check the folder's permissions and free space.") from None
    return target


def ensure_metrics(run: Run, *, store: bool = True, force: bool = False, cache_dir=None) -> MetricsResult:
    """The run's metric tables: the stored ones when fresh, else recomputed from
    ``run.usable_predictions()`` and (``store``) written back. A write that fails is reported in
    the result, not raised: the tables are still right. ``force`` recomputes a fresh artefact."""
    expected = current_fingerprint(run)  # before reading: a part added meanwhile leaves it stale, never wrong
    if not force:
        tables = read_stored_metrics(run, expected)
        if tables is not None:
            return MetricsResult(tables, recomputed=False, stored=True)
    reason = "forced" if force else (staleness(run, expected) or "a stored table is damaged")
    tables = compute_metric_tables(run.usable_predictions(), confusion_top_k=PARAMETERS["confusion_top_k"],
                                   cache_dir=cache_dir, ci=DEFAULT_INTERVALS)
    if not store:
        return MetricsResult(tables, recomputed=True, stored=False, reason=reason)
    try:
        write_metrics(run, tables, expected)
    except RunDeleted:
        raise  # not "tables not stored": there is no run any more to show them for
    except StoreError as exc:
        return MetricsResult(tables, recomputed=True, stored=False, reason=reason, store_error=str(exc))
    return MetricsResult(tables, recomputed=True, stored=True, reason=reason)


def refresh_metrics(run: Run, *, force: bool = False, cache_dir=None) -> MetricTables:
    """Make the stored artefact current (recompute and write only when stale, or ``force``) and
    return the tables. Called after inference (``python -m classify --run``, the sample run).
    Raises StoreError when the tables had to be written and could not be."""
    result = ensure_metrics(run, force=force, cache_dir=cache_dir)
    if not result.stored:
        raise StoreError(result.store_error)
    return result.tables


def load_metrics(run: Run, *, cache_dir=None) -> MetricTables:
    """The run's tables for a reader (dashboard, CLI): stored when fresh, else recomputed and
    written back when the folder allows (a read-only run still gets its tables)."""
    return ensure_metrics(run, cache_dir=cache_dir).tables
