"""The stored ``probes/`` artefact of a run, and the two library entry points the command line runs.

Layout::

    <run>/probes/results.parquet        one row per (model, variant, N, seed): fewshot.RESULTS_SCHEMA
    <run>/probes/per_class.parquet      one row per (model, variant, N, seed, class): PER_CLASS_SCHEMA
    <run>/probes/label_issues.parquet   one row per (model, image): issues.ISSUES_SCHEMA

A call replaces the rows of the models it ran and keeps the other models' rows, so models can be
probed one at a time. Written atomically (``core.runstore.write_table``) under the folder's lock
(``core.locking``). The BLAS runs on one thread during a probe: the same arguments give
byte-identical numbers, and two cores shared by other work are not oversubscribed.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pandas as pd

from core.locking import exclusive_lock
from core.runstore import Run, read_table, write_table

from .data import ProbeData, load_probe_data
from .fewshot import PER_CLASS_SCHEMA, RESULTS_SCHEMA, SEEDS, SHOTS, sort_results, sweep
from .issues import ISSUES_SCHEMA, label_issues

PROBES_DIR = "probes"
RESULTS = "results.parquet"
PER_CLASS = "per_class.parquet"
LABEL_ISSUES = "label_issues.parquet"
THREADS = 1


def probes_dir(run: Run) -> Path:
    return Path(run.path) / PROBES_DIR


@contextmanager
def single_threaded() -> Iterator[None]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=THREADS):
        yield


def _merge_write(run: Run, name: str, new: pd.DataFrame, models: Sequence[str], schema: dict[str, str], table: str) -> Path:
    target = probes_dir(run) / name
    if target.exists():
        old = read_table(target, schema, table=table)
        new = pd.concat([old[~old["model"].isin(list(models))], new], ignore_index=True)
    if name == LABEL_ISSUES:
        new = new.astype(schema).sort_values(["model", "label_quality", "image"], kind="stable").reset_index(drop=True)
    else:
        new = sort_results(new, schema)
    write_table(new, target, schema, table=table)
    return target


def run_probes(run: Run, models: Sequence[str], shots: Sequence[int] = SHOTS, seeds: Sequence[int] = SEEDS,
               progress: Callable[[int, int, str], None] | None = None,
               notes: Callable[[str], None] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Probe each model's stored features over the run's classes; write and return
    ``(results, per_class)`` for these models. ``notes`` receives one line per thing the tables
    do not show (dropped classes, images without features, no language-initialised variant)."""
    datas = [load_probe_data(run, m) for m in models]  # every input checked before any work
    results, per_class = [], []
    with single_threaded():
        for data in datas:
            _notes(data, notes)
            r, p = sweep(data.model, data.features, data.labels, data.classes, shots=shots, seeds=seeds,
                         prior_coef=data.prior_coef, progress=progress)
            results.append(r)
            per_class.append(p)
    results_df = sort_results(pd.concat(results, ignore_index=True), RESULTS_SCHEMA)
    per_class_df = sort_results(pd.concat(per_class, ignore_index=True), PER_CLASS_SCHEMA)
    with exclusive_lock(probes_dir(run), f"Another process is writing {probes_dir(run)}; wait for it to finish."):
        _merge_write(run, RESULTS, results_df, models, RESULTS_SCHEMA, "probe results")
        _merge_write(run, PER_CLASS, per_class_df, models, PER_CLASS_SCHEMA, "probe per-class results")
    return results_df, per_class_df


def run_label_issues(run: Run, models: Sequence[str], notes: Callable[[str], None] | None = None) -> pd.DataFrame:
    """cleanlab's label issues for each model's features over the run's classes; written and returned."""
    datas = [load_probe_data(run, m) for m in models]
    tables = []
    with single_threaded():
        for data in datas:
            _notes(data, notes, language=False)
            tables.append(label_issues(data))
    table = pd.concat(tables, ignore_index=True)
    with exclusive_lock(probes_dir(run), f"Another process is writing {probes_dir(run)}; wait for it to finish."):
        _merge_write(run, LABEL_ISSUES, table, models, ISSUES_SCHEMA, "label issues")
    return table


def _notes(data: ProbeData, notes: Callable[[str], None] | None, language: bool = True) -> None:
    if notes is None:
        return
    if data.dropped:
        listed = ", ".join(f"{c} ({n})" for c, n in data.dropped.items())
        notes(f"{data.model}: left out, fewer than 2 usable images with features: {listed}")
    if data.without_features:
        notes(f"{data.model}: {data.without_features} usable images have no stored features (not probed)")
    if language and data.language_note:
        notes(data.language_note)


def read_results(run: Run) -> pd.DataFrame | None:
    target = probes_dir(run) / RESULTS
    return read_table(target, RESULTS_SCHEMA, table="probe results") if target.exists() else None
