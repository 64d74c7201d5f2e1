"""Speed of explain/'s metrics. Run from the repository root: ``python benchmarks/bench_metrics.py``.

Prints:
1. the cold build of the ImageNet-1k similarity matrices (in a temporary cache folder, so
   nothing cached before counts), split into the IN-21K information content and the 1000 x 1000
   matrices, and the warm reload from the disk cache;
2. the whole metric table (per model, per class, confusions) for 1,000,000 synthetic predictions
   over 10 models; targets: <= 2 s on a 2-core machine; then the same with every interval column
   (Wilson and the bootstrap over images, 2000 resamples) and what the intervals add (issue 23's
   target: <= 1.5 s);
3. on the same 10,000 predictions, the vectorised tables against calling NLTK per sample (path,
   LCH, WUP and the sibling test, as the 2023 paper's notebooks did), with the ratio; target >= 100x;
4. ``--in21k`` (issue 26 item 3): the tables (no intervals) for 1,000,000 predictions in the
   ImageNet-21k space, 10 models, drawn from 100,000 distinct (true, predicted) pairs, whose
   similarities are computed on demand (no matrix covers 21,843 classes): the first call in this
   process (every pair and the taxonomy built) and the median of ``--repeat`` later ones; target <= 1 s;
5. ``--error-types`` (issue 24 item 4): the per-prediction explanations (relation, severity, error
   type and reason: ``explain.error_types.explain_predictions``) of the 1,000,000 synthetic
   predictions of section 2, 10 models, with one image in 250 flagged as a label problem and one in
   400 as a near duplicate, warm (similarity matrices built, the first call not counted), and the
   per-model error-type table with its Wilson intervals; target: well under 2 s on a 2-core machine.
6. ``--stream`` (issue 27 item 3): ``--rows`` predictions (900 models x ``--rows / 900`` images; the ETH
   study's 45,000,000 with ``--rows 45000000``) written as a run's part files (not counted), then the
   run's metric tables with every interval column streamed a chunk of models at a time
   (``explain.streaming.stream_metric_tables``) in a fresh process: its wall time and peak resident
   memory (targets: <= 5 min and <= 4 GB); then, on the first 2,000,000 predictions, the streamed tables
   (chunks of one model) against the in-memory ones, which must be equal to the last bit.
7. ``--tiny-models``: the tables with every interval column for 2,000 models of one image each and 200 of
   five (per-model samples, as an upload may hold), against the same call drawing every bootstrap block
   (the yardstick: before blocks on which no bound depends were skipped), medians of ``--repeat``; the
   bounds must be equal to the last bit.

The synthetic predictions are realistic rather than uniform: each model has its own accuracy
(55-90 %), its mistakes fall mostly on classes near the truth in WordNet (sampled by path
distance), some are distant, the top-5 columns hold nearby classes, and 0.5 % of rows failed.
Fixed seed. Figures depend on the machine and its load (printed first).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from explain import similarity  # noqa: E402
from explain.metrics import compute_metric_tables  # noqa: E402
from explain.uncertainty import IntervalOptions  # noqa: E402
from core.runstore import PREDICTION_SCHEMA, conform  # noqa: E402
from core.wordnet import get_wordnet  # noqa: E402

N_MODELS = 10
N_NEAREST = 25  # a class's mistakes are drawn from its 25 nearest classes (and some distant ones)


def synthetic_predictions(n_rows: int, matrices: similarity.SimilarityMatrices, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    wnids = np.array(matrices.wnids)
    n_classes = len(wnids)
    distance = matrices.values.path_distance.astype(np.int64)
    # Nearest other classes of each class, by WordNet path distance (ties broken at random).
    noise = rng.random(distance.shape) * 0.5
    order = np.argsort(distance + noise + np.eye(n_classes) * 1e6, axis=1)[:, :N_NEAREST]
    weights = np.exp(-np.arange(N_NEAREST) / 4.0)
    weights /= weights.sum()

    per_model = n_rows // N_MODELS
    model = np.repeat([f"model_{i:02d}" for i in range(N_MODELS)], per_model)
    accuracy = np.repeat(np.linspace(0.55, 0.90, N_MODELS), per_model)
    n = len(model)
    true = rng.integers(0, n_classes, n)
    correct = rng.random(n) < accuracy
    near = order[true, rng.choice(N_NEAREST, n, p=weights)]
    distant = rng.integers(0, n_classes, n)
    pred = np.where(correct, true, np.where(rng.random(n) < 0.85, near, distant))
    # Top-5: nearby classes, with the truth among them for part of the mistakes.
    # Top-5: the 4 nearest classes other than the top-1 (a top-5 names 5 different classes: the tables
    # refuse a repeat), with the truth among them for part of the mistakes.
    candidates = order[true, :5]
    other = np.argsort(candidates == pred[:, None], axis=1, kind="stable")[:, :4]
    top = np.take_along_axis(candidates, other, axis=1)
    hit = (pred != true) & (rng.random(n) < 0.6)
    top[hit, rng.integers(0, 4, hit.sum())] = true[hit]
    probs = np.sort(rng.dirichlet(np.ones(6), n)[:, :5], axis=1)[:, ::-1]
    status = np.where(rng.random(n) < 0.005, "failed", "ok")
    df = pd.DataFrame({
        "model": model, "image": np.char.add("img_", np.arange(n).astype(str)),
        "true_wnid": wnids[true], "pred_wnid": wnids[pred],
        **{f"pred_wnid_{k}": wnids[top[:, k - 2]] for k in range(2, 6)},
        **{f"prob_{k}": probs[:, k - 1] for k in range(1, 6)},
        "label_space": "imagenet-1k", "status": status})
    return conform(df, PREDICTION_SCHEMA, table="predictions", extra="drop")  # the dtypes a run stores


def synthetic_21k(n_rows: int = 1_000_000, n_pairs: int = 100_000, seed: int = 0) -> pd.DataFrame:
    """``n_rows`` predictions over ImageNet-21k drawn from ``n_pairs`` distinct (true, pred)
    pairs (30 % of them correct), 10 models; the top-5 are the prediction and four classes at
    fixed strides from it (five different classes)."""
    from core.labels import get_label_space

    wnids = np.array(get_label_space("imagenet-21k").wnids)
    rng = np.random.default_rng(seed)
    pair_true, pair_pred = rng.integers(0, len(wnids), n_pairs), rng.integers(0, len(wnids), n_pairs)
    same = rng.random(n_pairs) < 0.3
    pair_pred[same] = pair_true[same]
    pick = rng.integers(0, n_pairs, n_rows)
    true, pred = pair_true[pick], pair_pred[pick]
    top = (pred[:, None] + np.array([1, 2, 3, 4])[None, :] * 7919) % len(wnids)
    per_model = n_rows // N_MODELS
    df = pd.DataFrame({
        "model": np.repeat([f"model_{i:02d}" for i in range(N_MODELS)], per_model),
        "image": np.char.add("img_", (np.arange(n_rows) % per_model).astype(str)),
        "true_wnid": wnids[true], "pred_wnid": wnids[pred],
        **{f"pred_wnid_{k}": wnids[top[:, k - 2]] for k in range(2, 6)},
        **{f"prob_{k}": np.full(n_rows, 0.1) for k in range(1, 6)},
        "label_space": "imagenet-21k", "status": "ok"})
    return conform(df, PREDICTION_SCHEMA, table="predictions", extra="drop")


def per_sample_nltk(df: pd.DataFrame) -> dict:
    """What the reference notebooks did: synsets and NLTK similarities one row at a time, averaged
    over all samples and over the mistakes, plus the sibling test for the mistakes."""
    wn = get_wordnet()
    sums = {}
    for model, true, pred in zip(df["model"], df["true_wnid"], df["pred_wnid"]):
        g = wn.synset_from_pos_and_offset("n", int(true[1:]))
        p = wn.synset_from_pos_and_offset("n", int(pred[1:]))
        values = (g.path_similarity(p), g.lch_similarity(p), g.wup_similarity(p))
        entry = sums.setdefault(model, np.zeros(9))
        entry[0] += 1
        entry[2:5] += values
        if g != p:
            entry[1] += 1
            entry[5:8] += values
            entry[8] += bool(set(g.hypernyms() + g.instance_hypernyms()) & set(p.hypernyms() + p.instance_hypernyms()))
    return {m: {"path_all": e[2] / e[0], "lch_all": e[3] / e[0], "wup_all": e[4] / e[0],
                "path_mistakes": e[5] / e[1], "lch_mistakes": e[6] / e[1], "wup_mistakes": e[7] / e[1],
                "sibling_rate": e[8] / e[1]} for m, e in sums.items()}


def synthetic_flags(df: pd.DataFrame) -> pd.DataFrame:
    """explain.error_types.image_flags-shaped flags for the synthetic predictions: one image in 250
    a label problem (tagged not-a-photo), one in 400 a near duplicate of another class's image."""
    images = df["image"].astype(str).to_numpy()
    label, duplicate = images[::250], images[::400]
    flagged = np.unique(np.concatenate([label, duplicate]))
    return pd.DataFrame({
        "image": pd.array(flagged, dtype="string"),
        "label_reason": pd.array(np.where(np.isin(flagged, label), "tagged not-a-photo", None), dtype="string"),
        "duplicate_reason": pd.array(np.where(np.isin(flagged, duplicate), "near duplicate of img_0.jpg, a tabby "
                                              "(3 bits apart)", None), dtype="string")})


def error_types_section(args) -> int:
    from explain.error_types import error_type_table, explain_predictions

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f} (other work on the machine slows every figure)")
    with tempfile.TemporaryDirectory() as cache:
        matrices = similarity.label_space_matrices("imagenet-1k", cache_dir=cache)
        gen_s, df = timed(synthetic_predictions, args.rows, matrices)
        flags = synthetic_flags(df)
        print(f"synthetic predictions: {len(df):,} rows, {df['model'].nunique()} models, {len(flags):,} flagged "
              f"images (generated in {gen_s:.1f} s, not counted)")
        first_s, explained = timed(explain_predictions, df, flags, cache_dir=cache)
        warm = sorted(timed(explain_predictions, df, flags, cache_dir=cache)[0] for _ in range(max(args.repeat, 1)))
        median = warm[len(warm) // 2]
        print(f"error types of {len(explained):,} counted predictions: first call {first_s:.2f} s, warm median "
              f"{median:.2f} s of {len(warm)}, best {warm[0]:.2f} s (target: well under 2 s: "
              f"{'met' if median < 2 else 'NOT met'})")
        table_s = min(timed(error_type_table, explained, families=df)[0] for _ in range(max(args.repeat, 1)))
        table = error_type_table(explained, families=df)
        print(f"  per-model error-type table with Wilson intervals: best {table_s * 1000:.0f} ms")
        shares = table[[c for c in table.columns if c.endswith("_count") and c != "n"]].sum()
        total = int(table["n_mistakes"].sum())
        print("  mistakes by type: " + ", ".join(f"{c.removesuffix('_count')} {int(v):,} ({v / total:.1%})"
                                                  for c, v in shares.items()))
    return 0


STREAM_MODELS = 900  # the ETH error-analysis study's models


def stream_section(args) -> int:
    """Section 6: a synthetic run of ``args.rows`` predictions over 900 models, its tables streamed."""
    import resource
    import subprocess

    from core.parts import PredictionParts
    from core.runstore import RunInfo, RunStore

    per_model = max(1, args.rows // STREAM_MODELS)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f}")
    with tempfile.TemporaryDirectory() as home:
        os.environ["WILDLENS_HOME"] = home
        matrices = similarity.label_space_matrices("imagenet-1k")
        run = RunStore(home).create_run(RunInfo(run_id="eth", label_space="imagenet-1k"))
        parts = PredictionParts(run.predictions_dir)
        started = time.perf_counter()
        batch = max(1, 1_000_000 // per_model)  # models generated together: about a million rows at a time
        for first in range(0, STREAM_MODELS, batch):
            models = min(batch, STREAM_MODELS - first)
            df = synthetic_predictions(per_model * N_MODELS, matrices, seed=first)
            df = df.iloc[: per_model * min(models, N_MODELS)]
            frames = [df]
            for extra in range(N_MODELS, models, N_MODELS):  # more models than one draw holds: draw again
                more = synthetic_predictions(per_model * N_MODELS, matrices, seed=first * 1000 + extra)
                frames.append(more.iloc[: per_model * min(N_MODELS, models - extra)])
            df = pd.concat(frames, ignore_index=True)
            codes = np.repeat(np.arange(first, first + models), per_model)
            df["model"] = pd.array([f"model_{i:03d}" for i in codes], dtype=df["model"].dtype)
            df["image"] = pd.array(np.char.add("img_", (np.arange(len(df)) % per_model).astype(str)),
                                   dtype=df["image"].dtype)
            parts.append(df)
            del df, frames
        rows = per_model * STREAM_MODELS
        print(f"synthetic run: {rows:,} predictions, {STREAM_MODELS} models x {per_model:,} images, written as part "
              f"files in {time.perf_counter() - started:.0f} s (not counted)")
        script = ("import sys, time\n"
                  f"sys.path.insert(0, {str(ROOT)!r})\n"
                  "from core.runstore import RunStore\n"
                  "from explain.streaming import stream_metric_tables\n"
                  "start = time.perf_counter()\n"
                  f"tables, _ = stream_metric_tables(RunStore({home!r}).open_run('eth'))\n"
                  "print(f'{time.perf_counter() - start:.1f} {len(tables.per_model)} {len(tables.per_class)} '\n"
                  "      f'{len(tables.confusions)}')\n")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, "WILDLENS_HOME": home})
        wall = time.perf_counter() - started
        if done.returncode:
            print(done.stderr[-3000:])
            return 1
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 ** 2  # kB on Linux
        inner, n_models, n_classes, n_confusions = done.stdout.split()
        print(f"streamed metric tables with intervals ({IntervalOptions().describe()}): {wall:.0f} s wall for the "
              f"process ({float(inner):.0f} s in stream_metric_tables), peak resident memory {peak_gb:.2f} GB "
              f"(targets: <= 300 s {'met' if wall <= 300 else 'NOT met'}, <= 4 GB "
              f"{'met' if peak_gb <= 4 else 'NOT met'}) -> {int(n_models):,} models, {int(n_classes):,} per-class rows, "
              f"{int(n_confusions):,} confusions")
        # The same tables either way: the first 2,000,000 predictions, in memory and streamed a model at a time.
        from explain.metrics import compute_metric_tables
        from explain.streaming import stream_metric_tables

        sample = RunStore(home).create_run(RunInfo(run_id="sample", label_space="imagenet-1k"))
        PredictionParts(sample.predictions_dir).append(
            run.read_predictions([f"model_{i:03d}" for i in range(max(1, 2_000_000 // per_model))]))
        in_memory = compute_metric_tables(sample.read_predictions())
        streamed, _ = stream_metric_tables(sample, chunk_rows=1)
        for name in ("per_model", "per_class", "confusions"):
            pd.testing.assert_frame_equal(getattr(streamed, name), getattr(in_memory, name), check_exact=True)
        print(f"  the same tables as in memory on {len(sample.read_predictions()):,} predictions "
              f"({len(in_memory.per_model)} models streamed one at a time): equal to the last bit")
    return 0


def tiny_models_section(args) -> int:
    """Section 7 (module docstring)."""
    import statistics
    from unittest import mock

    from core.labels import get_label_space
    from explain import uncertainty
    from explain.metrics import compute_metric_tables

    wnids = np.array(get_label_space("imagenet-1k").wnids)
    rng = np.random.default_rng(0)
    every_block = mock.patch.object(uncertainty._FamilyRun, "_answering",
                                    lambda self, blocks: np.ones(len(blocks), dtype=bool))
    for models, images in ((2000, 1), (200, 5)):
        n = models * images
        true = rng.integers(0, 1000, n)
        pred = np.where(rng.random(n) < 0.7, true, rng.integers(0, 1000, n))
        df = pd.DataFrame({"model": np.repeat([f"m{i}" for i in range(models)], images),
                           "image": [f"i{i}" for i in range(n)], "true_wnid": wnids[true], "pred_wnid": wnids[pred],
                           "label_space": "imagenet-1k", "status": "ok"})
        compute_metric_tables(df, cache_dir=False)  # warm: the similarity tables of these pairs
        now, before = [], []
        for _ in range(max(args.repeat, 1)):
            seconds, new = timed(compute_metric_tables, df, cache_dir=False)
            now.append(seconds)
            with every_block:
                seconds, old = timed(compute_metric_tables, df, cache_dir=False)
            before.append(seconds)
        same = all(getattr(new, t).equals(getattr(old, t)) for t in ("per_model", "per_class", "confusions"))
        a, b = statistics.median(now), statistics.median(before)
        print(f"{models:,} models x {images} image{'s' * (images > 1)}, every interval: {a:.2f} s against {b:.2f} s "
              f"drawing every block ({b / a:.1f}x); bounds {'equal to the last bit' if same else 'DIFFERENT'}")
    return 0


def timed(func, *args, **kwargs):
    start = time.perf_counter()
    result = func(*args, **kwargs)
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--nltk-rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the intervals (0: none)")
    parser.add_argument("--in21k", action="store_true", help="only section 4: 1M predictions in the 21k space")
    parser.add_argument("--tiny-models", action="store_true", help="only section 7: many models of a few images")
    parser.add_argument("--error-types", action="store_true",
                        help="only section 5: error types of 1M predictions (explain.error_types)")
    parser.add_argument("--stream", action="store_true",
                        help="only section 6: --rows predictions over 900 models as a run, its tables streamed")
    args = parser.parse_args()
    if args.stream:
        return stream_section(args)
    if args.tiny_models:
        return tiny_models_section(args)
    if args.error_types:
        return error_types_section(args)
    if args.in21k:
        gen_s, df = timed(synthetic_21k)
        print(f"1,000,000 predictions in the ImageNet-21k space from 100,000 distinct pairs (generated in {gen_s:.1f} s)")
        first_s, _ = timed(compute_metric_tables, df, cache_dir=False, ci=None)
        warm = [timed(compute_metric_tables, df, cache_dir=False, ci=None) for _ in range(max(args.repeat, 1))]
        second_s, tables = sorted(warm, key=lambda t: t[0])[len(warm) // 2]
        print(f"  metric tables without intervals: first call {first_s:.2f} s (pairs and taxonomy built), "
              f"later calls median {second_s:.2f} s of {len(warm)}, best {min(t for t, _ in warm):.2f} s "
              f"(target <= 1 s: {'met' if second_s <= 1 else 'NOT met'}; 3.4 s when the issue was filed); "
              f"{len(tables.confusions):,} confusions")
        return 0

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f} (other work on the machine slows every figure)")
    seconds, _ = timed(get_wordnet)
    print(f"WordNet load (once per process, not counted below): {seconds:.2f} s")

    with tempfile.TemporaryDirectory() as cache:
        similarity.clear_memory_caches()
        ic_s, info = timed(similarity.build_information_content)
        similarity.clear_memory_caches()
        packaged_s, _ = timed(similarity.information_content, cache_dir=cache)
        mat_s, matrices = timed(similarity.label_space_matrices, "imagenet-1k", cache_dir=cache)
        print(f"cold ImageNet-1k build: {ic_s + mat_s:.2f} s  (IN-21K information content {ic_s:.2f} s over "
              f"{info.corpus_size:,} concepts + 1000 x 1000 matrices {mat_s:.2f} s)")
        print(f"  the information content shipped with the package instead: read in {packaged_s * 1000:.0f} ms "
              f"({ic_s / max(packaged_s, 1e-9):.0f}x faster than building it)")
        similarity.clear_memory_caches(include_information_content=False)
        warm_s, _ = timed(similarity.label_space_matrices, "imagenet-1k", cache_dir=cache)
        print(f"warm reload of the matrices from the .npz cache: {warm_s * 1000:.0f} ms")

        gen_s, df = timed(synthetic_predictions, args.rows, matrices)
        print(f"synthetic predictions: {len(df):,} rows, {df['model'].nunique()} models "
              f"(generated in {gen_s:.1f} s, not counted)")
        times, ci_times = [], []
        options = IntervalOptions(resamples=args.resamples) if args.resamples else None
        for _ in range(args.repeat):
            seconds, _ = timed(compute_metric_tables, df, cache_dir=cache, ci=None)
            times.append(seconds)
            if args.resamples:
                seconds, tables = timed(compute_metric_tables, df, cache_dir=cache, ci=options)
                ci_times.append(seconds)
        print(f"metric tables for {len(df):,} predictions without intervals (--no-ci): best {min(times):.2f} s, "
              f"first {times[0]:.2f} s (target <= 2 s)")
        if args.resamples:
            print(f"  with intervals ({options.describe()}): best {min(ci_times):.2f} s -> the intervals add "
                  f"{min(ci_times) - min(times):.2f} s (issue 23 target: at most 1.5 s) -> {len(tables.per_class):,} "
                  f"per-class rows, {len(tables.confusions):,} confusions")
        else:
            tables = compute_metric_tables(df, cache_dir=cache, ci=None)
        acc = tables.per_model.set_index("model")["accuracy"].astype(float)
        print(f"  accuracy range {acc.min():.3f}-{acc.max():.3f}, sibling rate "
              f"{tables.per_model['sibling_rate'].astype(float).mean():.3f}, mean relations of mistakes: "
              + ", ".join(f"{c.replace('_count', '')} {tables.per_model[c].sum() / tables.per_model['n_mistakes'].sum():.2f}"
                          for c in ("hypernym_count", "hyponym_count", "cousin_count", "distant_count")))

        small = df[df["status"] == "ok"].sample(args.nltk_rows, random_state=0).reset_index(drop=True)
        vec_times = [timed(compute_metric_tables, small, cache_dir=cache, ci=None)[0] for _ in range(args.repeat)]
        small_tables = compute_metric_tables(small, cache_dir=cache, ci=None)
        wn = get_wordnet()
        depth_s, _ = timed(wn._compute_max_depth, "n", False)
        print(f"NLTK's one-off LCH depth walk over all nouns: {depth_s:.1f} s (not counted for NLTK)")
        nltk_s, reference = timed(per_sample_nltk, small)
        vec_s = min(vec_times)
        print(f"{len(small):,} predictions: vectorised {vec_s * 1000:.0f} ms (all tables) vs per-sample NLTK "
              f"{nltk_s:.1f} s (path, LCH, WUP, sibling) -> {nltk_s / vec_s:,.0f}x faster (target >= 100x)")
        got = small_tables.per_model.set_index("model")
        worst = max(abs(float(got.loc[m, c]) - v) for m, row in reference.items() for c, v in row.items())
        print(f"  same numbers: largest per-model difference from per-sample NLTK = {worst:.1e}")
        if worst > 1e-9:
            print("  ERROR: the vectorised metrics differ from NLTK")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
