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

import numpy as np
import pandas as pd

from core.intervals import wilson_interval
from core.locking import exclusive_lock
from core.runstore import Run, read_table, write_table

from core.phash import NEAR_DUPLICATE_DISTANCE

from .data import ProbeData, load_probe_data
from .paths import LABEL_ISSUES, PER_CLASS, PROBES_DIR, RESULTS, probes_dir  # noqa: F401  (re-exported)
from .duplicates import group_summary
from .fewshot import (PER_CLASS_SCHEMA, RESULTS_SCHEMA, SEEDS, SHOTS, capped_shots, local_fits, shot_limit, sort_results,
                      sweep)
from .issues import ISSUES_SCHEMA, label_issues

THREADS = 1


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
               notes: Callable[[str], None] | None = None, fits: Callable | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Probe each model's stored features over the run's classes; write and return
    ``(results, per_class)`` for these models. ``notes`` receives one line per thing the tables
    do not show (dropped classes, images without features, no language-initialised variant, N
    capped at what the classes hold); a line that starts with ``warning: `` is one the results
    should be read with (near duplicates among the images). ``fits``: where the fits run
    (:func:`probe.fewshot.local_fits` by default; :func:`probe.ray_fits.ray_fits` on Ray)."""
    datas = [load_probe_data(run, m) for m in models]  # every input checked before any work
    results, per_class = [], []
    with single_threaded():
        for data in datas:
            _notes(data, notes)
            if notes is not None:
                limit = shot_limit(data.labels, data.classes, data.groups)
                above = [int(n) for n in shots if int(n) > limit]
                if above:
                    notes(f"{data.model}: N capped at {limit} (asked {', '.join(map(str, above))}): no class holds "
                          f"more than {limit + 1} distinct images and each keeps one for testing; running N = "
                          f"{', '.join(map(str, capped_shots(shots, limit)))}")
            r, p = sweep(data.model, data.features, data.labels, data.classes, shots=shots, seeds=seeds,
                         prior_coef=data.prior_coef, groups=data.groups, progress=progress, fits=fits or local_fits)
            results.append(r)
            per_class.append(p)
    results_df = sort_results(pd.concat(results, ignore_index=True), RESULTS_SCHEMA)
    per_class_df = sort_results(pd.concat(per_class, ignore_index=True), PER_CLASS_SCHEMA)
    with _writing(run):
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
    with _writing(run):
        _merge_write(run, LABEL_ISSUES, table, models, ISSUES_SCHEMA, "label issues")
    return table


@contextmanager
def _writing(run: Run):
    """``probes/`` held for one writer, in a run that must still be there: the run's presence lock first
    (core.locking.run_presence_lock), so a run deleted during the minutes of fitting is one line and its folder is
    never made again (a code review: runs/<id>/probes/ came back, unlisted, and blocked the id)."""
    from core.locking import run_presence_lock

    # RunGone is a StoreError (a WildLensError): the command line prints its one line.
    with run_presence_lock(run.path, f"Run {run.run_id} is gone (deleted meanwhile); nothing was written."):
        with exclusive_lock(probes_dir(run), f"Another process is writing {probes_dir(run)}; wait for it to finish."):
            yield


def _notes(data: ProbeData, notes: Callable[[str], None] | None, language: bool = True) -> None:
    if notes is None:
        return
    if data.dropped:
        listed = ", ".join(f"{c} ({n}{' near duplicates of one picture' if c in data.all_duplicates else ''})"
                           for c, n in data.dropped.items())
        notes(f"{data.model}: left out, fewer than 2 usable images with features: {listed}")
    if data.groups is not None:
        groups, images = group_summary(data.groups)
        if groups:
            notes(f"warning: {duplicates_line(data.model, groups, images, len(data.groups))}")
    if data.without_features:
        notes(f"{data.model}: {data.without_features} usable images have no stored features (not probed)")
    if language and data.language_note:
        notes(data.language_note)


def duplicates_line(model: str, groups: int, images: int | None = None, probed: int | None = None) -> str:
    held = f" hold {images} of the {probed} probed images" if images is not None and probed is not None else ""
    return (f"{model}: {groups} groups of near-duplicate images (pHash distance <= {NEAR_DUPLICATE_DISTANCE})"
            f"{held}; each group stays on one side of every split (a training shot's near duplicates are not "
            "tested), and the run holds fewer distinct pictures than images: exclude the copies (Images page) "
            "to probe each picture once")


def curve_notes(results: pd.DataFrame) -> tuple[str, str]:
    """What the Probes page says with the curves, from the stored results: ``(cap, duplicates)``,
    one line each, '' when there is nothing to say. ``cap``: the models whose largest N is the
    largest their classes allow (``shots_limit``), so the curve stops there; ``duplicates``: the
    models whose probed images hold near-duplicate groups (``near_dup_groups``). Results written
    before these columns existed say nothing."""
    caps: dict[int, list[str]] = {}
    dups: list[str] = []
    if results is None or results.empty:
        return "", ""
    for model, part in results.groupby("model", sort=True):
        limit = pd.to_numeric(part.get("shots_limit"), errors="coerce").max() if "shots_limit" in part else None
        largest = pd.to_numeric(part["shots"], errors="coerce").max()
        if limit is not None and not pd.isna(limit) and limit >= 1 and largest == limit:
            caps.setdefault(int(limit), []).append(str(model))
        groups = pd.to_numeric(part.get("near_dup_groups"), errors="coerce").max() if "near_dup_groups" in part else None
        if groups is not None and not pd.isna(groups) and groups > 0:
            dups.append(duplicates_line(str(model), int(groups)))
    cap = "; ".join(f"N stops at {limit} ({', '.join(names)}): no class holds more than {limit + 1} distinct images "
                    f"and each keeps one for testing, so a larger N would repeat the N = {limit} probe"
                    for limit, names in sorted(caps.items()))
    return (cap + "." if cap else ""), ("; ".join(dups) + "." if dups else "")


def coinciding_curves(results: pd.DataFrame) -> str:
    """One line naming the curves (model · variant) the Probes chart draws on top of each other, '' when
    none: the same top-1 at every N and seed, so one line hides the other (the chart's hover lists both).
    Why: two models whose features give the same probes (a fine-tune that kept the backbone, a model
    stored under two ids) showed as one line and a legend entry with nothing to see."""
    if results is None or results.empty or not {"model", "variant", "shots", "top1"} <= set(results.columns):
        return ""
    data = results.assign(shots=pd.to_numeric(results["shots"], errors="coerce"),
                          top1=pd.to_numeric(results["top1"], errors="coerce"))
    seed = data["seed"].astype("string").fillna("") if "seed" in data.columns else pd.Series("", index=data.index)
    curves: dict[tuple, list[str]] = {}
    for (model, variant), part in data.assign(seed=seed).groupby(["model", "variant"], sort=False, dropna=False):
        points = part.sort_values(["shots", "seed", "top1"])  # a total order, repeated rows too
        key = tuple(zip(points["shots"].astype("float64").fillna(-1), points["seed"],
                        points["top1"].astype("float64").fillna(-1).round(12)))
        curves.setdefault(key, []).append(f"{model} · {variant}")
    same = [names for names in curves.values() if len(names) > 1]
    if not same:
        return ""
    parts = [" and ".join([", ".join(names[:-1]), names[-1]]) for names in same]
    return ("; ".join(parts) + ": the same top-1 at every N and seed, drawn on top of each other (the hover lists "
            "each).")


def read_results(run: Run) -> pd.DataFrame | None:
    target = probes_dir(run) / RESULTS
    return read_table(target, RESULTS_SCHEMA, table="probe results") if target.exists() else None


def image_interval(top1: pd.Series, n_test: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson interval of a top-1 over one draw's test images (core.intervals; the Probes curves'
    error bars, issue 23): how far the accuracy could move with other photographs of these classes,
    apart from the seeds' spread."""
    n = pd.to_numeric(n_test, errors="coerce").astype("float64").fillna(0).to_numpy()
    rate = pd.to_numeric(top1, errors="coerce").astype("float64").to_numpy()
    known = ~np.isnan(rate) & (n > 0)
    low, high = wilson_interval(np.where(known, np.round(rate * n), 0), np.where(known, n, 0))
    return np.where(known, low, np.nan), np.where(known, high, np.nan)
