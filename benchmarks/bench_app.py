"""Server-side render time of every dashboard page on a large run.

Run from the repository root: ``python benchmarks/bench_app.py``.

Builds, in a temporary WILDLENS_HOME, a run with 1,000,000 stored predictions: 100,000 images
(100 per ImageNet-1k class) each classified by 10 synthetic models whose mistakes fall mostly on
classes near the truth in WordNet (the generator of bench_metrics.py). Every manifest row points
to a real small JPEG (hard links of one file, so building it stays fast). Then, with
``streamlit.testing.v1.AppTest``, each page is rendered once to warm the caches (the first load
reads the predictions and computes the metric tables) and then timed over a few more renders:
the figures are the script's server-side time for the page's first load in a new session with
every Streamlit cache empty (issue 26 item 2: <= 1 s; the median of ``--first-repeats``, the pages
visited in turn: from the second round on, modules and in-memory tables that no Streamlit cache holds
are warm, as on a server that has shown any page; the first round's figure, the coldest, is printed
beside it) and for one render after it (the median of ``--repeats``), the time a user waits after
clicking, minus the network and the browser (<= 0.3 s). The compiled page scripts are
kept for the process, as a server keeps them (:func:`share_script_cache`): a page is compiled at its
first load, not again at every render.

The run's metrics artefact (``metrics/``, :mod:`explain.artefact`) is written once after building,
as ``python -m classify --run`` does after inference. The Results page's first load (fresh
Streamlit caches, a new session) is then timed twice: reading the stored tables (target <= 1 s)
and, with ``metrics/`` removed, the stale path that recomputes the tables from the 1,000,000
predictions and stores them again (what every first load cost before the artefact existed). Both
run in this process after the build, so the IN-1k similarity matrices are already in memory for
the recompute: a cold server would be slower still on that path.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# Every page of app.py's navigation, in its order.
PAGES = ["runs", "query", "import", "images", "models", "results", "confusions", "browse", "probes", "knowledge",
         "explain"]
N_MODELS = 10
IMAGES_PER_CLASS = 100


def build_run(home: Path, images_per_class: int = IMAGES_PER_CLASS, seed: int = 0) -> str:
    from PIL import Image

    from explain import similarity
    from core.runstore import PREDICTION_SCHEMA, RunStore, conform

    matrices = similarity.label_space_matrices("imagenet-1k", cache_dir=home / "cache")
    wnids = np.array(matrices.wnids)
    n_classes = len(wnids)
    rng = np.random.default_rng(seed)
    distance = matrices.values.path_distance.astype(np.int64)
    nearest = np.argsort(distance + rng.random(distance.shape) * 0.5 + np.eye(n_classes) * 1e6, axis=1)[:, :25]
    weights = np.exp(-np.arange(25) / 4.0)
    weights /= weights.sum()

    true = np.repeat(np.arange(n_classes), images_per_class)
    files = np.array([f"{wnids[t]}/{i:08x}.jpg" for i, t in enumerate(true)])
    store = RunStore(home)
    run = store.create_run(run_id="bench-1m", title="Benchmark: 1,000,000 predictions", label_space="imagenet-1k",
                           wnids=wnids.tolist(), images_per_class=images_per_class, source="benchmark",
                           models=[f"model_{m:02d}" for m in range(N_MODELS)])
    # A real JPEG per class, hard-linked under each of its images' names (a file system allows
    # ~65,000 links per file): pages that show thumbnails find real files.
    templates = home / "templates"
    templates.mkdir()
    for c, wnid in enumerate(wnids):
        (run.images_dir / wnid).mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (96, 96), (c % 256, 140, 160)).save(templates / f"{wnid}.jpg", quality=80)
    for f, t in zip(files, true):
        os.link(templates / f"{wnids[t]}.jpg", run.images_dir / f)
    template = templates / f"{wnids[0]}.jpg"
    n_images = len(files)
    run.write_manifest(pd.DataFrame({
        "wnid": wnids[true], "file": files, "sha256": [f"{i:064x}" for i in range(n_images)],
        "width": 96, "height": 96, "format": "JPEG", "mode": "RGB", "bytes": template.stat().st_size,
        "source": "benchmark", "status": "accepted", "excluded": False}))

    for m in range(N_MODELS):
        accuracy = 0.55 + 0.35 * m / (N_MODELS - 1)
        correct = rng.random(n_images) < accuracy
        near = nearest[true, rng.choice(25, n_images, p=weights)]
        pred = np.where(correct, true, np.where(rng.random(n_images) < 0.85, near, rng.integers(0, n_classes, n_images)))
        # the 4 nearest classes other than the top-1: a top-5 names 5 different classes (the tables refuse a
        # repeat; this benchmark stopped at that check until the top-1 was left out here)
        candidates = nearest[true, :5]
        top = np.take_along_axis(candidates, np.argsort(candidates == pred[:, None], axis=1, kind="stable")[:, :4], axis=1)
        probs = np.sort(rng.dirichlet(np.ones(6), n_images)[:, :5], axis=1)[:, ::-1]
        df = pd.DataFrame({"model": f"model_{m:02d}", "image": files, "true_wnid": wnids[true],
                           "pred_wnid": wnids[pred], **{f"pred_wnid_{k}": wnids[top[:, k - 2]] for k in range(2, 6)},
                           **{f"prob_{k}": probs[:, k - 1] for k in range(1, 6)},
                           "label_space": "imagenet-1k", "status": "ok"})
        run.append_predictions(conform(df, PREDICTION_SCHEMA, table="predictions"))
    return run.run_id


_SCRIPT_CACHE = None  # the process's compiled page scripts (share_script_cache)


def share_script_cache() -> None:
    """AppTest compiles ``app.py`` and the page again on every run (new ``ScriptCache``s per run, one in
    ``app_test`` for the pages, one in ``local_script_runner`` for app.py, with Streamlit's magic AST
    pass: 4-25 ms a render here); a server keeps one per process
    (``streamlit.runtime.Runtime._script_cache``, cleared only when a watched source file changes, and
    WildLens watches none), so a page is compiled at its first load only. The figures here are the
    server's: one cache for this process, as the server has. (Figures recorded before 2026-12-06 evening
    compiled every render.)"""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    global _SCRIPT_CACHE
    if _SCRIPT_CACHE is None:
        _SCRIPT_CACHE = ScriptCache()
        app_test.ScriptCache = local_script_runner.ScriptCache = lambda: _SCRIPT_CACHE


def time_pages(home: Path, run_id: str, repeats: int, first_repeats: int = 3) -> dict[str, tuple[float, float, float]]:
    """Per page: its first load in the first round (the process has rendered only the pages before it in
    the navigation: the coldest), the median of ``first_repeats`` first loads, each in a new session with
    every Streamlit cache empty (a new browser tab on a server whose caches were cleared), and the median
    of ``repeats`` renders after the last of them (a click on a widget). The pages are visited in turn,
    ``first_repeats`` times. Why a median: one first load moved by 20-30 % between runs on this machine,
    more than the changes it was to measure. What clearing the caches leaves warm from the rounds before
    (modules imported, WordNet and the similarity matrices in memory) is what a server that has shown any
    page has too; the first round's figure is printed beside it."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["WILDLENS_HOME"] = str(home)
    share_script_cache()
    rounds = max(1, first_repeats)
    firsts: dict[str, list[float]] = {page: [] for page in PAGES}
    afters: dict[str, list[float]] = {page: [] for page in PAGES}
    for round_ in range(rounds):
        for page in PAGES:
            st.cache_data.clear()
            st.cache_resource.clear()
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900).run()  # the Runs page: not timed
            at.session_state["_next_run_id"] = run_id
            at.run()
            at.switch_page(f"pages/{page}_page.py")
            started = time.perf_counter()
            at.run()
            firsts[page].append(time.perf_counter() - started)
            if at.exception:
                raise RuntimeError(f"{page}: {at.exception[0].value}")
            if round_ == rounds - 1:
                for _ in range(max(1, repeats)):
                    started = time.perf_counter()
                    at.run()
                    afters[page].append(time.perf_counter() - started)
    return {page: (firsts[page][0], statistics.median(firsts[page]), statistics.median(afters[page])) for page in PAGES}


def time_results_first_load(home: Path, run_id: str, artefact: bool) -> float:
    """Server-side time of the Results page's first render in a new session with empty Streamlit
    caches; ``artefact=False`` removes the run's metrics/ first (the stale path)."""
    import shutil

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from core.runstore import RunStore

    os.environ["WILDLENS_HOME"] = str(home)
    share_script_cache()
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900).run()  # the Runs page: not timed
    at.session_state["_next_run_id"] = run_id
    at.run()
    if not artefact:
        shutil.rmtree(RunStore(home).open_run(run_id).metrics_dir, ignore_errors=True)
    at.switch_page("pages/results_page.py")
    started = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - started
    if at.exception:
        raise RuntimeError(f"results: {at.exception[0].value}")
    return elapsed


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is no count of renders: give 1 or more")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images-per-class", type=int, default=IMAGES_PER_CLASS,
                        help="100 gives 100,000 images x 10 models = 1,000,000 predictions")
    parser.add_argument("--repeats", type=_at_least_one, default=5, help="renders after the first load, per page (median)")
    parser.add_argument("--first-repeats", type=_at_least_one, default=3,
                        help="first loads per page, each with every cache empty (median)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="wildlens-bench-app-") as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        run_id = build_run(home, args.images_per_class)
        from core.runstore import RunStore

        n = len(RunStore(home).open_run(run_id).read_predictions())
        print(f"built run {run_id}: {n:,} predictions, {n // N_MODELS:,} images, {N_MODELS} models "
              f"({time.perf_counter() - started:.1f} s)")
        from explain.artefact import refresh_metrics

        started = time.perf_counter()
        refresh_metrics(RunStore(home).open_run(run_id))
        print(f"metrics artefact written (what python -m classify --run does after inference): "
              f"{time.perf_counter() - started:.2f} s")
        results = time_pages(home, run_id, args.repeats, args.first_repeats)
        print(f"{'page':<12}{'first load, round 1':>21}{'first load (median of ' + str(args.first_repeats) + ')':>27}"
              f"{'render after (median of ' + str(args.repeats) + ')':>28}")
        worst_first = worst = worst_cold = 0.0
        for page, (cold, first, warm) in results.items():
            worst, worst_first, worst_cold = max(worst, warm), max(worst_first, first), max(worst_cold, cold)
            print(f"{page:<12}{cold:>20.2f}s{first:>26.2f}s{warm:>27.3f}s")
        print(f"slowest first load in round 1 (the process fresh but for the pages before it): {worst_cold:.2f} s")
        print(f"slowest first load: {worst_first:.2f} s (issue 26 item 2: <= 1 s): {'met' if worst_first <= 1 else 'NOT met'}; "
              f"slowest render after it: {worst:.3f} s (<= 0.3 s): {'met' if worst <= 0.3 else 'NOT met'}")

        stored = [time_results_first_load(home, run_id, artefact=True) for _ in range(args.first_repeats)]
        stale = [time_results_first_load(home, run_id, artefact=False) for _ in range(max(1, args.first_repeats - 1))]
        stored_s, stale_s = statistics.median(stored), statistics.median(stale)
        print(f"Results page, first load in a new session (median of {len(stored)} / {len(stale)}):")
        print(f"  metrics artefact present:             {stored_s:6.2f} s (target <= 1 s): "
              f"{'met' if stored_s <= 1 else 'NOT met'}")
        print(f"  artefact absent (recompute and store): {stale_s:6.2f} s")
        print(f"  ratio: the stored tables load {stale_s / stored_s:.1f}x faster than recomputing")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
