"""Batched inference pipeline vs the reference notebooks' per-image loop.

    .venv/bin/python benchmarks/bench_inference.py [--images 128] [--repeats 3] [--sweep]

Both sides classify the same images (photographs that scikit-image, scikit-learn and matplotlib
install, copied to --images files in a class folder) with EfficientNet-Lite0 and its packaged
weights, and both produce top-5 wnids:

* per-image loop, as the notebooks ran: decode, timm's eval transform, unsqueeze, one image per
  forward pass with autograd on (no ``no_grad``/``inference_mode``), softmax, top-5; PyTorch's
  default threads (all cores);
* the pipeline, ``classify.inference.predict_folder`` with its defaults: DataLoader decode
  workers, batches, on-device normalisation, and on the CPU ONNX Runtime (the model exported once
  to ONNX, cached) - also shown with ``backend='torch'`` (inference_mode, batch-norm folded,
  channels-last). Its time includes loading the model and starting the workers. The first round
  of the default pipeline also exports the model (once per model and machine; later runs read
  the cache), so it is reported apart and the medians are over the warm rounds.

Rounds are interleaved so that the load other processes put on a shared machine hits every side
alike; each figure comes with the load average and the share of the CPU that other processes
used while it was measured (from /proc/stat). Then it breaks the cost of one image down (decode,
crop, forward pass on one core) to show the ceiling of the ratio on this machine.

With a CUDA GPU it also prints images/s of ResNet-50 and ViT-B/16 with their own input
pipelines; those two use random weights (clearly labelled; throughput does not depend on weight
values).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from classify.inference import InferenceOptions, predict_folder  # noqa: E402
from classify.preprocess import crop_to_tensor, normalizer  # noqa: E402
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


# --------------------------------------------------------------------------- measuring honestly
def _busy_jiffies() -> int | None:
    """CPU time all processes used so far (Linux /proc/stat, in clock ticks); None elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return user + nice + system + irq + softirq + steal


@dataclass
class Sample:
    rate: float  # images per second
    load: float  # 1-minute load average at the end
    foreign: float | None  # share of the machine's CPU used by other processes meanwhile

    def describe(self) -> str:
        other = f", others used {100 * self.foreign:3.0f}% CPU" if self.foreign is not None else ""
        return f"{self.rate:6.1f} images/s (load {self.load:.2f}{other})"


def measure(n_images: int, fn, *args) -> Sample:
    """Run fn(*args) once; images/s, and how busy the rest of the machine was meanwhile."""
    tick = os.sysconf("SC_CLK_TCK")
    before_busy, before_own, start = _busy_jiffies(), os.times(), time.perf_counter()
    fn(*args)
    wall = time.perf_counter() - start
    after_busy, after_own = _busy_jiffies(), os.times()
    own = sum(after_own[:4]) - sum(before_own[:4])  # this process and its finished children (workers)
    foreign = None
    if before_busy is not None and after_busy is not None:
        busy = (after_busy - before_busy) / tick
        foreign = max(0.0, busy - own) / (wall * (os.cpu_count() or 1))
    return Sample(n_images / wall, os.getloadavg()[0], foreign)


def median_rate(samples: list[Sample]) -> float:
    return statistics.median(s.rate for s in samples)


# --------------------------------------------------------------------------- the two sides
def per_image_loop(paths: list[Path], autograd: bool = True) -> None:
    """The notebooks' way: one image per forward pass, autograd on."""
    from timm.data import create_transform

    entry = get_model(DEFAULT_MODEL)
    cfg = entry.input_config()
    model = load_efficientnet_lite0_package()
    transform = create_transform(input_size=(3, cfg.size, cfg.size), interpolation=cfg.interpolation,
                                 mean=cfg.mean, std=cfg.std, crop_pct=cfg.crop_pct)
    wnids = class_wnids(entry)
    with torch.set_grad_enabled(autograd):
        for path in paths:
            x = transform(load_rgb(path)).unsqueeze(0)
            probs = model(x).softmax(dim=1)  # with autograd on it records the graph, as in the notebooks
            top = probs.topk(5)
            _ = [wnids[i] for i in top.indices[0].tolist()], top.values[0].tolist()


def pipeline(folder: Path, options: InferenceOptions, model=DEFAULT_MODEL, backends: dict | None = None) -> None:
    table, result = predict_folder(folder, [model], options=options)
    assert (table["status"] == "ok").all(), table[table["status"] != "ok"]
    if backends is not None:
        backends.update(result.backends)


# --------------------------------------------------------------------------- where the time goes
def stage_costs(paths: list[Path], cache_dir: Path) -> dict[str, float]:
    """ms of one core per image: decode, resize+crop, and the forward pass (batch 8) per backend."""
    from classify.onnx_backend import ExportKey, OnnxCache, onnx_classifier
    from classify.optimize import fold_batchnorm
    from classify.weights import weights_status

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        entry = get_model(DEFAULT_MODEL)
        config = entry.input_config()
        unique = paths[:len(PHOTOS)]
        decode, crop = [], []
        for _ in range(3):
            for path in unique:
                start = time.perf_counter()
                image = load_rgb(path)
                middle = time.perf_counter()
                crop_to_tensor(image, config.geometry)
                decode.append(middle - start)
                crop.append(time.perf_counter() - middle)
        batch = normalizer(config, torch.device("cpu"))(
            torch.stack([crop_to_tensor(load_rgb(p), config.geometry) for p in (unique * 2)[:8]]))

        def per_image(fn, x) -> float:
            fn(x)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                fn(x)
                times.append(time.perf_counter() - start)
            return 1000 * statistics.median(times) / len(x)

        costs = {"decode (load_rgb)": 1000 * statistics.median(decode),
                 "resize + crop": 1000 * statistics.median(crop)}
        model = load_efficientnet_lite0_package()
        with torch.set_grad_enabled(True):
            costs["forward, PyTorch eager, batch 1, autograd on"] = per_image(model, batch[:1])
        with torch.inference_mode():
            folded, _ = fold_batchnorm(model, batch[:1])
            folded = folded.to(memory_format=torch.channels_last)
            costs["forward, PyTorch, BN folded, channels-last"] = per_image(
                folded, batch.contiguous(memory_format=torch.channels_last))
        try:
            key = ExportKey.for_model(entry.id, weights_status(entry).path, config.size)
            classifier, _ = onnx_classifier(key, OnnxCache(cache_dir), 1, load_efficientnet_lite0_package, True)
            costs["forward, ONNX Runtime"] = per_image(classifier, batch)
        except Exception as exc:  # report, do not fail the benchmark
            print(f"  (ONNX Runtime not measured: {exc})")
        return costs
    finally:
        torch.set_num_threads(before)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved warm rounds (medians are reported)")
    parser.add_argument("--sweep", action="store_true", help="also try other batch sizes, worker and thread counts")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
        paths = make_folder(Path(tmp) / "images", args.images)
        folder = Path(tmp) / "images"
        cache = Path(tmp) / "onnx-cache"  # empty: the first pipeline run exports, as on a new machine
        cores = os.cpu_count()
        print(f"EfficientNet-Lite0 (packaged weights), {args.images} images, {cores} CPU cores, "
              f"load average {os.getloadavg()[0]:.2f}")
        default = InferenceOptions(device="cpu", cache_dir=str(cache))
        on_torch = InferenceOptions(device="cpu", cache_dir=str(cache), backend="torch")
        backends: dict[str, str] = {}
        cold = measure(args.images, pipeline, folder, default, DEFAULT_MODEL, backends)
        print(f"  first pipeline run (exports the model to ONNX once): {cold.describe()}  "
              f"[{backends.get(DEFAULT_MODEL)}]")
        rounds = []
        for i in range(args.repeats):
            loop = measure(args.images, per_image_loop, paths)
            fast = measure(args.images, pipeline, folder, default, DEFAULT_MODEL, backends)
            slow = measure(args.images, pipeline, folder, on_torch)
            rounds.append((loop, fast, slow))
            print(f"  round {i + 1}: per-image loop {loop.describe()}")
            print(f"           pipeline         {fast.describe()} -> {fast.rate / loop.rate:4.1f}x")
            print(f"           pipeline (torch) {slow.describe()} -> {slow.rate / loop.rate:4.1f}x")
        loop_rate = median_rate([r[0] for r in rounds])
        fast_rate = median_rate([r[1] for r in rounds])
        slow_rate = median_rate([r[2] for r in rounds])
        print(f"  per-image loop, autograd on       : {loop_rate:7.1f} images/s (median of {args.repeats})")
        print(f"  pipeline, defaults ({backends.get(DEFAULT_MODEL, '?').split(' ')[0]}) : {fast_rate:7.1f} images/s"
              f"  -> {fast_rate / loop_rate:.1f}x  (target >= 5x)")
        print(f"  pipeline, backend torch           : {slow_rate:7.1f} images/s  -> {slow_rate / loop_rate:.1f}x")

        costs = stage_costs(paths, cache)
        print("  one image, one core (ms):")
        for name, ms in costs.items():
            print(f"    {name:46s} {ms:6.1f}")
        onnx_ms = costs.get("forward, ONNX Runtime")
        if onnx_ms:
            per_image_cpu = costs["decode (load_rgb)"] + costs["resize + crop"] + onnx_ms
            ceiling = 1000 * (cores or 1) / per_image_cpu
            print(f"  ceiling: {per_image_cpu:.1f} ms of CPU per image over {cores} cores = {ceiling:.0f} images/s "
                  f"at perfect overlap and no start-up cost -> {ceiling / loop_rate:.1f}x the loop")

        if args.sweep:
            loop = [measure(args.images, per_image_loop, paths, False) for _ in range(args.repeats)]
            print(f"    per-image loop, autograd off : {median_rate(loop):7.1f} images/s")
            for backend in ("auto", "torch"):
                for batch_size in (4, 8, 16, 32):
                    for workers, threads in ((0, 2), (1, 1), (1, 2), (2, 1)):
                        options = InferenceOptions(device="cpu", cache_dir=str(cache), backend=backend,
                                                   batch_size=batch_size, num_workers=workers, num_threads=threads)
                        samples = [measure(args.images, pipeline, folder, options) for _ in range(args.repeats)]
                        print(f"    {backend:5s} batch {batch_size:3d}, workers {workers}, threads {threads}: "
                              f"{median_rate(samples):7.1f} images/s (load {samples[-1].load:.2f})")

        if torch.cuda.is_available():
            folder = Path(tmp) / "gpu-images"
            make_folder(folder, max(args.images, 512))
            print(f"CUDA: {torch.cuda.get_device_name()}, {max(args.images, 512)} images "
                  "(random-init weights: throughput only, not results)")
            for name in ("resnet50", "vit"):  # the registry's ResNet-50 and ViT-B/16 input pipelines
                real = get_model(name)
                double = make_test_double(real.arch, real.label_space, real.family, real.input_config())
                for precision in ("fp32", "auto"):
                    options = InferenceOptions(device="cuda", precision=precision, batch_size=128)
                    pipeline(folder, options, double)  # warm-up: cuDNN autotuning, worker start
                    samples = [measure(max(args.images, 512), pipeline, folder, options, double)
                               for _ in range(args.repeats)]
                    print(f"  {real.arch:22s} {precision:4s}: {median_rate(samples):8.1f} images/s "
                          "(with decode + transforms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
