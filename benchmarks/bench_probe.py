"""Speed of probe/'s few-shot sweep. Run from the repository root: ``python benchmarks/bench_probe.py``.

Prints:
1. the whole sweep as ``python -m probe`` runs it (``probe.artefact.run_probes``: read the stored
   features, draw, search C with GridSearchCV on the validation split, refit, score, write both
   tables) for 10 classes x 8 values of N (1 ... 128) x CoG's 5 seeds, on stored 1280-dimensional
   features of 150 images per class; target <= 60 s on this CPU. Then per N, the time and the
   mean top-1, so the figures can be read against the curve they produce.
2. ``--throughput``: images per second of feature extraction beside plain inference on the
   packaged photographs (``classify.features.feature_throughput``: the same images and model, both
   on PyTorch; extraction also stores predictions and features).

The synthetic features look like a CNN's pooled pre-logit features rather than like Gaussian
blobs: each image is a 64-dimensional latent (its class's mean plus within-class variation, the
classes close to one another as fine-grained classes are), mapped to 1280 dimensions by a fixed
random matrix and a ReLU, plus noise: non-negative, anisotropic, low intrinsic dimension. The
within-class spread is set so that a 128-shot probe reaches about 80 % top-1 and a 1-shot probe
about a third of that, where real few-shot curves of 10 related classes lie. Fixed seed. Figures
depend on the machine and its load (printed first).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

N_CLASSES = 10
PER_CLASS = 150
DIM = 1280
LATENT = 64
TARGET_S = 60.0


def synthetic_features(n_classes: int = N_CLASSES, per_class: int = PER_CLASS, dim: int = DIM,
                       spread: float = 3.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=LATENT)
    means = shared + 0.9 * rng.normal(size=(n_classes, LATENT))  # related classes: close means
    codes = np.repeat(np.arange(n_classes), per_class)
    latent = means[codes] + spread * rng.normal(size=(len(codes), LATENT)) / np.sqrt(2)
    mix = rng.normal(size=(LATENT, dim)) / np.sqrt(LATENT)
    x = np.maximum(latent @ mix + 0.3, 0) + 0.05 * np.abs(rng.normal(size=(len(codes), dim)))
    return x.astype(np.float32), codes


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy
    import scipy
    import sklearn

    return (f"{os.cpu_count()} cores, {cpu}, load average {load:.2f}; numpy {numpy.__version__}, "
            f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}")


def bench_sweep(seeds: list[int], shots: list[int]) -> None:
    from core.features import write_feature_part
    from core.runstore import RunInfo, RunStore
    from probe.artefact import run_probes
    from probe.fewshot import SEEDS, SHOTS

    seeds = seeds or list(SEEDS)
    shots = shots or list(SHOTS)
    x, codes = synthetic_features()
    wnids = [f"n{9000000 + i:08d}" for i in range(N_CLASSES)]
    labels = np.array(wnids)[codes]
    with tempfile.TemporaryDirectory(prefix="wildlens-bench-probe-") as home:
        os.environ["WILDLENS_HOME"] = home
        store = RunStore(home)
        run = store.create_run(RunInfo(run_id="bench", wnids=wnids, source="import"))
        files = [f"{w}/{i:05d}.jpg" for i, w in enumerate(labels)]
        run.write_manifest(pd.DataFrame({"wnid": labels, "file": files, "status": "accepted", "excluded": False}))
        write_feature_part(run, "synthetic-1280", pd.DataFrame({"image": files, "true_wnid": labels}), x)

        timings: dict[int, float] = {}
        last = [time.perf_counter()]

        def progress(done: int, total: int, message: str) -> None:
            now = time.perf_counter()
            n = int(message.split("N=")[1].split()[0])
            timings[n] = timings.get(n, 0.0) + now - last[0]
            last[0] = now

        start, cpu_start = time.perf_counter(), time.process_time()
        last[0] = start
        results, _ = run_probes(run, ["synthetic-1280"], shots, seeds, progress=progress)
        total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    fits = len(results)
    print(f"sweep: {N_CLASSES} classes x {PER_CLASS} images, {DIM}-d stored features, N = {shots}, "
          f"seeds {seeds}: {fits} probes, each a GridSearchCV over 7 values of C (N = 1: default C) + refit")
    print(f"  whole sweep (read features, draws, search, refit, score, write tables): {total:.1f} s wall "
          f"(target <= {TARGET_S:.0f} s: {'met' if total <= TARGET_S else 'MISSED'}), {cpu:.1f} s of CPU "
          f"(one BLAS thread: the wall time above it is other processes' load)")
    summary = results.groupby("shots").agg(top1=("top1", "mean"), top1_std=("top1", "std"), n_train=("n_train", "first"),
                                           C=("C", "median"))
    for n, row in summary.iterrows():
        print(f"  N={n:>3}: {timings.get(int(n), float('nan')):5.1f} s for {len(seeds)} seeds, n_train {row.n_train:>4}, "
              f"top-1 {row.top1:.3f} ± {row.top1_std:.3f}, median C {row.C:g}")


def bench_throughput(model: str, repeats: int) -> None:
    try:
        from classify.features import feature_throughput
    except ImportError as exc:  # classify --features not in this checkout
        print(f"throughput: skipped ({exc})")
        return
    from classify.engine.types import InferenceOptions
    from crawl.sample_photos import SAMPLE_PHOTOS, VIEWS, load_rgb, photo_path

    with tempfile.TemporaryDirectory(prefix="wildlens-bench-views-") as tmp:
        images = []
        for photo in SAMPLE_PHOTOS:
            original = load_rgb(photo_path(photo))
            for name, view in VIEWS:
                path = Path(tmp) / f"{photo.wnid}-{len(images):03d}.png"
                view(original).save(path)
                images.append((str(path), photo.wnid))
        images = images * 4  # 120 images: a few batches
        r = feature_throughput(images, model, InferenceOptions(num_workers=0, device="cpu"), out_dir=tmp,
                               repeats=repeats)
    print(f"throughput on {r['images']} views of the packaged photographs, {model}, PyTorch ({r['backend']}), "
          f"best of {repeats}:")
    print(f"  plain inference   {r['plain_images_per_s']:6.1f} images/s")
    print(f"  with features     {r['features_images_per_s']:6.1f} images/s  ({r['ratio']:.2f}x plain; "
          f"{r['dim']}-d features and predictions stored)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="", help="comma-separated (default CoG's five)")
    parser.add_argument("--shots", default="", help="comma-separated (default 1..128)")
    parser.add_argument("--throughput", action="store_true", help="also feature extraction beside plain inference")
    parser.add_argument("--model", default="efficientnet_lite0")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}")
    ints = lambda s: [int(v) for v in s.split(",") if v.strip()]  # noqa: E731
    bench_sweep(ints(args.seeds), ints(args.shots))
    if args.throughput:
        bench_throughput(args.model, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
