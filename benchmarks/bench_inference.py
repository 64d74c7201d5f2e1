"""Batched inference pipeline vs the reference notebooks' per-image loop.

    .venv/bin/python benchmarks/bench_inference.py [--images 128] [--repeats 2] [--sweep]

Both sides classify the same images (photographs that scikit-image, scikit-learn and matplotlib
install, copied to --images files in a class folder) with EfficientNet-Lite0 and its packaged
weights, and both produce top-5 wnids:

* per-image loop, as the notebooks ran: decode, timm's eval transform, one image per forward
  pass, autograd on (no ``no_grad``/``inference_mode``), softmax, top-5;
* the pipeline, ``classify.inference.predict_folder`` with its defaults: DataLoader decode
  workers, batches, inference_mode, channels-last, uint8 hand-over, on-device normalisation.
  Its time includes loading the model and starting the workers.

Prints images/s of each and the ratio (target: >= 5x on a 2-core CPU). With a CUDA GPU it also
prints images/s of ResNet-50 and ViT-B/16 with their own input pipelines; those two use random
weights (clearly labelled; throughput does not depend on weight values).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from classify.inference import InferenceOptions, predict_folder  # noqa: E402
from classify.registry import DEFAULT_MODEL, class_wnids, get_model, make_test_double  # noqa: E402
from classify.weights import load_efficientnet_lite0_package  # noqa: E402
from crawl.imageio import load_rgb  # noqa: E402

SITE = Path(torch.__file__).resolve().parent.parent
PHOTOS = ["skimage/data/chelsea.png", "skimage/data/coffee.png", "skimage/data/astronaut.png",
          "skimage/data/rocket.jpg", "skimage/data/motorcycle_left.png", "sklearn/datasets/images/china.jpg",
          "sklearn/datasets/images/flower.jpg", "matplotlib/mpl-data/sample_data/grace_hopper.jpg"]


def make_folder(root: Path, n: int) -> list[Path]:
    """n image files (the packaged photographs, repeated) in root/<wnid>/."""
    folder = root / "n02123045"
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        source = SITE / PHOTOS[i % len(PHOTOS)]
        target = folder / f"{i:04d}{source.suffix}"
        shutil.copyfile(source, target)
        paths.append(target)
    return paths


def per_image_loop(paths: list[Path], autograd: bool = True) -> float:
    """images/s of the notebooks' way: one image per forward pass, autograd on."""
    from timm.data import create_transform

    entry = get_model(DEFAULT_MODEL)
    cfg = entry.input_config()
    model = load_efficientnet_lite0_package()
    transform = create_transform(input_size=(3, cfg.size, cfg.size), interpolation=cfg.interpolation,
                                 mean=cfg.mean, std=cfg.std, crop_pct=cfg.crop_pct)
    wnids = class_wnids(entry)
    start = time.perf_counter()
    with torch.set_grad_enabled(autograd):
        for path in paths:
            x = transform(load_rgb(path)).unsqueeze(0)
            probs = model(x).softmax(dim=1)  # with autograd on it records the graph, as in the notebooks
            top = probs.topk(5)
            _ = [wnids[i] for i in top.indices[0].tolist()], top.values[0].tolist()
    return len(paths) / (time.perf_counter() - start)


def pipeline(folder: Path, options: InferenceOptions, model=DEFAULT_MODEL) -> float:
    start = time.perf_counter()
    table, result = predict_folder(folder, [model], options=options)
    elapsed = time.perf_counter() - start
    assert (table["status"] == "ok").all(), table[table["status"] != "ok"]
    return result.images / elapsed


def best_of(repeats: int, fn, *args) -> float:
    return max(fn(*args) for _ in range(repeats))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (best of N for each side)")
    parser.add_argument("--sweep", action="store_true", help="also try other batch sizes and worker counts")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
        paths = make_folder(Path(tmp) / "images", args.images)
        folder = Path(tmp) / "images"
        print(f"EfficientNet-Lite0 (packaged weights), {args.images} images, {os.cpu_count()} CPU cores, "
              f"load average {os.getloadavg()[0]:.2f} (other processes slow both sides; the loop more)")
        # Interleaved rounds: the load other processes put on a shared machine drifts, and each
        # round measures both sides under about the same conditions.
        rounds = []
        for _ in range(args.repeats):
            rounds.append((per_image_loop(paths), pipeline(folder, InferenceOptions(device="cpu"))))
        for i, (loop, batched) in enumerate(rounds, 1):
            print(f"  round {i}: per-image loop {loop:6.1f} images/s, batched pipeline {batched:6.1f} images/s "
                  f"-> {batched / loop:4.1f}x")
        baseline = max(r[0] for r in rounds)
        batched = max(r[1] for r in rounds)
        ratios = sorted(r[1] / r[0] for r in rounds)
        print(f"  per-image loop, autograd on : {baseline:7.1f} images/s (best round)")
        print(f"  batched pipeline (defaults) : {batched:7.1f} images/s (best round)")
        print(f"  speed-up                    : {batched / baseline:7.1f}x best vs best, "
              f"{ratios[len(ratios) // 2]:.1f}x median round  (target >= 5x)")
        if args.sweep:
            rate = best_of(args.repeats, per_image_loop, paths, False)
            print(f"    per-image loop, autograd off: {rate:7.1f} images/s")
            for batch_size in (4, 8, 16, 32):
                for workers in (0, 1, 2):
                    rate = best_of(args.repeats, pipeline, folder,
                                   InferenceOptions(device="cpu", batch_size=batch_size, num_workers=workers))
                    print(f"    batch {batch_size:3d}, workers {workers}: {rate:7.1f} images/s")

        if torch.cuda.is_available():
            folder = Path(tmp) / "gpu-images"
            make_folder(folder, max(args.images, 512))
            print(f"CUDA: {torch.cuda.get_device_name()}, {max(args.images, 512)} images "
                  "(random-init weights: throughput only, not results)")
            for name in ("resnet50", "vit"):  # the registry's ResNet-50 and ViT-B/16 input pipelines
                real = get_model(name)
                double = make_test_double(real.arch, real.label_space, real.family, real.input_config())
                arch = real.arch
                for precision in ("fp32", "auto"):
                    options = InferenceOptions(device="cuda", precision=precision, batch_size=128)
                    pipeline(folder, options, double)  # warm-up: cuDNN autotuning, worker start
                    rate = best_of(args.repeats, pipeline, folder, options, double)
                    print(f"  {arch:22s} {precision:4s}: {rate:8.1f} images/s (with decode + transforms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
