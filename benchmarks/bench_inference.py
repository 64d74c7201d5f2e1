"""Batched inference pipeline vs the reference notebooks' per-image loop.

    .venv/bin/python benchmarks/bench_inference.py [--images 128] [--repeats 3] [--sweep]

Both sides classify the same images (photographs that scikit-image, scikit-learn and matplotlib
install, copied to --images files in a class folder) with EfficientNet-Lite0 and its packaged
weights, and both produce top-5 wnids:

* per-image loop, as the notebooks ran: decode, timm's eval transform, unsqueeze, one image per
  forward pass with autograd on (no ``no_grad``/``inference_mode``), softmax, top-5; PyTorch's
  default threads (all cores);
* the pipeline, ``classify.targets.predict_folder`` with its defaults: DataLoader decode
  workers, torchvision's uint8 resize, batches, on-device normalisation, and on the CPU ONNX
  Runtime (the model exported once to ONNX, cached) - also shown with ``backend='torch'``
  (inference_mode, batch-norm folded, channels-last) and with ``resampler='pil'`` (Pillow's
  resize, the loop's pixels to the bit). Its time includes loading the model and starting the
  workers. The first round of the default pipeline also exports the model (once per model and
  machine; later runs read the cache), so it is reported apart and the medians are over the warm
  rounds.

Rounds are interleaved so that the load other processes put on a shared machine hits every side
alike; each figure comes with the load average and the share of the CPU that other processes
used while it was measured (from /proc/stat). Then it breaks the cost of one image down (decode,
resize + crop with either resampler, forward pass on one core) to show the ceiling of the ratio
on this machine.

CPU precisions (``--precisions``, or ``--precisions-only`` for this section alone): for
EfficientNet-Lite0/1/2 on 324 views (18 crops, each also mirrored) of nine packaged photographs
(:data:`PRECISION_PHOTOS`: the sample run's five and the four above), written as PNG files in a
class folder, the whole pipeline in fp32 (its default backend, ONNX Runtime), bf16 (PyTorch bf16
autocast; only where the CPU has AVX-512 BF16/AMX) and int8 (ONNX Runtime, statically quantized on
``classify.engine.quantize``'s calibration set, which shares no image with these): images/s of the whole
call, the forward pass alone (ms of one core per image, batch 8, CPU time, so other processes on
a shared machine do not inflate it), each against fp32 in the same round, and top-1 agreement
with fp32 over all views. Then the fp32 pipeline's steady state on 512 images as a share of the
ceiling (decode + resize + ONNX Runtime forward per image, spread over the cores): the steady
rate is (512 - 64) / (t(512) - t(64)), which leaves model load and worker start-up out.

    .venv/bin/python benchmarks/bench_inference.py --precisions-only --repeats 2

With a CUDA GPU (or ``--gpu-only``) it also measures ResNet-50 and ViT-B/16 with their own input
pipelines, fp32 and bf16, each resampler, and the forward pass alone; those two use random
weights (test doubles from ``tests/classify/doubles.py``, clearly labelled; throughput does not
depend on weight values). See ``gpu_section``.

    .venv/bin/python benchmarks/bench_inference.py --gpu-only --images 2048 --repeats 2

The GPU section starts with JPEG decoding on the device (``classify.engine.gpu_decode``): ResNet-50 bf16
from JPEG files (128 crops of the packaged photographs, each of its own size, repeated), the whole pipeline with the CPU decode
workers (``gpu_decode='off'``) against nvJPEG decode, resize and crop on the GPU (``'auto'``),
images/s of each, the ratio, which decode path each run reported, and how far the device's crops are
from the CPU path's (target: >= 10,000 images/s end to end on an H200). Alone:

    .venv/bin/python benchmarks/bench_inference.py --gpu-decode-only --images 4096 --repeats 2
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from classify.engine.options import PLAIN_INT8  # noqa: E402
from classify.engine.types import InferenceOptions  # noqa: E402
from classify.engine.preprocess import crop_to_tensor, normalizer  # noqa: E402
from classify.models.registry import DEFAULT_MODEL, class_wnids  # noqa: E402
from classify.models.lookup import get_model
from classify.models.sources.package_source import load_efficientnet_lite0_package  # noqa: E402
from classify.targets import predict_folder  # noqa: E402
from core.imageio import load_rgb  # noqa: E402
from tests.classify.doubles import make_test_double  # noqa: E402  (random-init models: throughput only)

SITE = Path(torch.__file__).resolve().parent.parent
PHOTOS = ["skimage/data/chelsea.png", "skimage/data/coffee.png", "skimage/data/astronaut.png",
          "skimage/data/rocket.jpg", "skimage/data/motorcycle_left.png", "sklearn/datasets/images/china.jpg",
          "sklearn/datasets/images/flower.jpg", "matplotlib/mpl-data/sample_data/grace_hopper.jpg"]


# The photographs the precision section evaluates: none is in classify.engine.quantize's calibration set
# (tests/classify/engine/test_precisions.py checks the files' hashes).
PRECISION_PHOTOS = ["skimage/data/chelsea.png", "skimage/data/coffee.png", "skimage/data/camera.png",
                    "skimage/data/astronaut.png", "skimage/data/rocket.jpg", "skimage/data/motorcycle_left.png",
                    "sklearn/datasets/images/china.jpg", "sklearn/datasets/images/flower.jpg",
                    "matplotlib/mpl-data/sample_data/grace_hopper.jpg"]
# (scale, x, y) crops: the whole photo, then 85 %, 70 % and 55 % at the centre and four corners,
# and 60 % at the top and bottom centre; each crop is also mirrored: 36 views per photograph.
_CORNERS = [(0.5, 0.5), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)]
VIEW_CROPS = ([(1.0, 0.5, 0.5)] + [(scale, fx, fy) for scale in (0.85, 0.7, 0.55) for fx, fy in _CORNERS]
              + [(0.6, 0.5, 0.0), (0.6, 0.5, 1.0)])


def make_views(root: Path, limit: int | None = None) -> list[Path]:
    """Crops and flips of PRECISION_PHOTOS as PNG files in root/<wnid>/ (at most ``limit``)."""
    from PIL import ImageOps

    folder = root / "n02123045"
    folder.mkdir(parents=True)
    paths = []
    for number, rel in enumerate(PRECISION_PHOTOS):
        image = load_rgb(SITE / rel)
        w, h = image.size
        for k, (scale, fx, fy) in enumerate(VIEW_CROPS):
            cw, ch = round(w * scale), round(h * scale)
            left, top = round((w - cw) * fx), round((h - ch) * fy)
            crop = image.crop((left, top, left + cw, top + ch))
            for flip, view in enumerate((crop, ImageOps.mirror(crop))):
                path = folder / f"{number:02d}-{k:02d}-{flip}.png"
                view.save(path)
                paths.append(path)
    return paths[:limit]


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


def pipeline(folder: Path, options: InferenceOptions, model=DEFAULT_MODEL, backends: dict | None = None,
             decode: list | None = None) -> None:
    table, result = predict_folder(folder, [model], options=options)
    assert (table["status"] == "ok").all(), table[table["status"] != "ok"]
    if backends is not None:
        backends.update(result.backends)
    if decode is not None:
        decode.append(result.decode)  # which path decoded the images (InferenceReport.decode)


# --------------------------------------------------------------------------- where the time goes
def stage_costs(paths: list[Path], cache_dir: Path) -> dict[str, float]:
    """ms of one core per image: decode, resize+crop, and the forward pass (batch 8) per backend; and,
    for comparison with the figures before 2026-12-06, decode + resize as one median over all the
    photographs (the key ending '(before)', which the stage listing leaves out)."""
    from classify.engine.onnx_backend import ExportKey, OnnxCache, onnx_classifier
    from classify.engine.optimize import fold_batchnorm
    from classify.models.weights import weights_status

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        entry = get_model(DEFAULT_MODEL)
        config = entry.input_config()
        unique = paths[:len(PHOTOS)]
        decode, crop, crop_pil = ({path: [] for path in unique} for _ in range(3))
        for _ in range(5):
            for path in unique:
                start = time.perf_counter()
                image = load_rgb(path)
                middle = time.perf_counter()
                crop_to_tensor(image, config.geometry, "torch")
                end = time.perf_counter()
                crop_to_tensor(image, config.geometry, "pil")
                decode[path].append(middle - start)
                crop[path].append(end - middle)
                crop_pil[path].append(time.perf_counter() - end)
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

        # Per photograph the median of its repeats (noise), then the mean over the photographs: the
        # pipeline decodes each of them equally often, so the mean is its cost per image. Why not one
        # median over all: the photographs differ 9x in decode cost (motorcycle_left.png 12.5 ms, a PNG of
        # 741 x 500; grace_hopper.jpg 1.4 ms), and the median of the eight picked the middle photograph,
        # 0.6-0.9 ms of decode + resize under the mix's mean (2026-12-06): a ceiling above what any pipeline
        # could reach.
        def mean_of_medians(times: dict) -> float:
            return 1000 * statistics.fmean(statistics.median(t) for t in times.values())

        def median_of_all(times: dict) -> float:
            return 1000 * statistics.median(t for ts in times.values() for t in ts)

        costs = {"decode (load_rgb)": mean_of_medians(decode),
                 "resize + crop (torch uint8, the default)": mean_of_medians(crop),
                 "resize + crop (Pillow)": mean_of_medians(crop_pil),
                 # the estimator of the figures before 2026-12-06, printed beside the ceiling for comparison
                 "decode + resize, one median over all photographs (before)": median_of_all(decode) + median_of_all(crop)}
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
    parser.add_argument("--gpu-only", action="store_true", help="skip the CPU comparison; only the CUDA section")
    parser.add_argument("--gpu-decode-only", action="store_true",
                        help="only the CUDA comparison of CPU and GPU JPEG decoding (ResNet-50 bf16)")
    parser.add_argument("--precisions", action="store_true", help="also the CPU precision section (fp32/bf16/int8)")
    parser.add_argument("--precisions-only", action="store_true", help="only the CPU precision section")
    parser.add_argument("--steady-only", action="store_true", help="only the fp32 steady state against the ceiling")
    parser.add_argument("--models", default="efficientnet_lite0,efficientnet_lite1,efficientnet_lite2",
                        help="models of the precision section")
    args = parser.parse_args()
    if args.steady_only:
        with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
            steady_share(Path(tmp), Path(tmp) / "cache", args.repeats)
        return 0
    if args.gpu_decode_only:
        if not torch.cuda.is_available():
            print("no CUDA GPU here: nothing measured")
            return 0
        with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
            gpu_decode_section(Path(tmp), max(args.images, 4096), args.repeats, Path(tmp) / "cache")
        return 0
    if args.precisions_only:
        with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
            precision_section(Path(tmp), args.models.split(","), args.repeats)
        return 0

    with tempfile.TemporaryDirectory(prefix="wildlens-bench-") as tmp:
        paths = make_folder(Path(tmp) / "images", args.images)
        folder = Path(tmp) / "images"
        cache = Path(tmp) / "onnx-cache"  # empty: the first pipeline run exports, as on a new machine
        if not args.gpu_only:
            cpu_section(args, folder, paths, cache)
        if args.precisions and not args.gpu_only:
            precision_section(Path(tmp), args.models.split(","), args.repeats)
        if torch.cuda.is_available():
            gpu_section(Path(tmp), max(args.images, 512), args.repeats, cache)
        elif args.gpu_only:
            print("no CUDA GPU here: nothing measured")
    return 0


def cpu_section(args, folder: Path, paths: list[Path], cache: Path) -> None:
    cores = os.cpu_count()
    print(f"EfficientNet-Lite0 (packaged weights), {args.images} images, {cores} CPU cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    default = InferenceOptions(device="cpu", cache_dir=str(cache))
    on_torch = InferenceOptions(device="cpu", cache_dir=str(cache), backend="torch")
    with_pil = InferenceOptions(device="cpu", cache_dir=str(cache), resampler="pil")
    backends: dict[str, str] = {}
    cold = measure(args.images, pipeline, folder, default, DEFAULT_MODEL, backends)
    print(f"  first pipeline run (exports the model to ONNX once): {cold.describe()}  "
          f"[{backends.get(DEFAULT_MODEL)}]")
    rounds = []
    for i in range(args.repeats):
        loop = measure(args.images, per_image_loop, paths)
        fast = measure(args.images, pipeline, folder, default, DEFAULT_MODEL, backends)
        slow = measure(args.images, pipeline, folder, on_torch)
        exact = measure(args.images, pipeline, folder, with_pil)
        rounds.append((loop, fast, slow, exact))
        print(f"  round {i + 1}: per-image loop {loop.describe()}")
        print(f"           pipeline         {fast.describe()} -> {fast.rate / loop.rate:4.1f}x")
        print(f"           pipeline (torch) {slow.describe()} -> {slow.rate / loop.rate:4.1f}x")
        print(f"           pipeline (pil)   {exact.describe()} -> {exact.rate / loop.rate:4.1f}x")
    loop_rate = median_rate([r[0] for r in rounds])
    fast_rate = median_rate([r[1] for r in rounds])
    slow_rate = median_rate([r[2] for r in rounds])
    exact_rate = median_rate([r[3] for r in rounds])
    print(f"  per-image loop, autograd on       : {loop_rate:7.1f} images/s (median of {args.repeats})")
    print(f"  pipeline, defaults ({backends.get(DEFAULT_MODEL, '?').split(' ')[0]}) : {fast_rate:7.1f} images/s"
          f"  -> {fast_rate / loop_rate:.1f}x  (target >= 5x)")
    print(f"  pipeline, backend torch           : {slow_rate:7.1f} images/s  -> {slow_rate / loop_rate:.1f}x")
    print(f"  pipeline, Pillow resize (bit-equal to the loop's pixels): {exact_rate:7.1f} images/s  "
          f"-> {exact_rate / loop_rate:.1f}x")

    costs = stage_costs(paths, cache)
    print("  one image, one core (ms):")
    for name, ms in costs.items():
        if not name.endswith("(before)"):  # the old estimator, shown beside the steady state's ceiling
            print(f"    {name:46s} {ms:6.1f}")
    onnx_ms = costs.get("forward, ONNX Runtime")
    if onnx_ms:
        per_image_cpu = costs["decode (load_rgb)"] + costs["resize + crop (torch uint8, the default)"] + onnx_ms
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


def _precision_options(precision: str, cache: Path) -> InferenceOptions:
    """The pipeline's options for a column of the precision section ('int8-plain': int8 alone)."""
    return InferenceOptions(device="cpu", precision="int8" if precision == PLAIN_INT8 else precision,
                            int8_recheck="none" if precision == PLAIN_INT8 else "auto", cache_dir=str(cache))


def _forward_ms(entry, precision: str, cache: Path, batch: torch.Tensor, backend: str = "auto") -> float:
    """ms of one core (CPU time of this thread) per image: normalise + forward, batch 8, as the
    pipeline runs ``precision`` (ONNX Runtime fp32 / int8, PyTorch bf16 autocast)."""
    from classify.engine.device import cpu_threads
    from classify.engine.pipeline import _load_one, _Settings, _forward
    from classify.engine.device import autocast_dtype, resolve_precision

    device = torch.device("cpu")
    options = _precision_options(precision, cache)
    options.backend = backend
    resolved = resolve_precision(options.precision, device)
    settings = _Settings(device, autocast_dtype(options.precision, device), 8, 0, 1, options, resolved)
    with cpu_threads(device), torch.inference_mode():
        model = _load_one(entry, 0, 10_000, settings)
        for _ in range(2):
            _forward(model, batch, device, settings.amp)
        times = []
        for _ in range(7):
            start = time.thread_time()
            _forward(model, batch, device, settings.amp)
            times.append(time.thread_time() - start)
    return 1000 * min(times) / len(batch)


def precision_section(tmp: Path, models: list[str], repeats: int) -> dict:
    """fp32 / bf16 / int8 on the CPU for each model: whole-pipeline images/s, forward ms per image,
    ratios against fp32 and top-1 agreement with fp32 (see the module docstring). Returns the figures."""
    from classify.engine.device import cpu_bf16_instructions
    from classify.engine.options import precision_model_id

    views_root = tmp / "views"
    paths = make_views(views_root)
    cache = tmp / "precision-cache"
    bf16 = cpu_bf16_instructions()
    # int8 is the int8 -> fp32 cascade (classify.engine.quantize.Int8Cascade); int8-plain is int8 alone.
    precisions = ["fp32"] + (["bf16"] if bf16 else []) + ["int8", PLAIN_INT8]
    cores = os.cpu_count() or 1
    print(f"CPU precisions: {len(paths)} views of {len(PRECISION_PHOTOS)} packaged photographs, {cores} cores, "
          f"native bf16: {', '.join(bf16) or 'none (bf16 not measured)'}, load average {os.getloadavg()[0]:.2f}")
    figures = {}
    for model in models:
        entry = get_model(model)
        config = entry.input_config()
        batch = normalizer(config, torch.device("cpu"))(
            torch.stack([crop_to_tensor(load_rgb(p), config.geometry) for p in paths[:8]]))
        tops, rates, rechecked = {}, {p: [] for p in precisions}, 0.0
        for precision in precisions:  # warm-up: exports, quantizes, fills the page cache
            table, result = predict_folder(views_root, [model], options=_precision_options(precision, cache))
            assert (table["status"] == "ok").all()
            tops[precision] = table.set_index("image")["pred_wnid"].sort_index()
            if precision == "int8":
                rechecked = float(table["int8_rechecked"].astype(bool).mean())
            print(f"  {model} {precision}: {result.backends[precision_model_id(entry.id, precision)]}")
        for _ in range(repeats):  # interleaved rounds: load from other processes hits all alike
            for precision in precisions:
                rates[precision].append(measure(len(paths), pipeline, views_root, _precision_options(precision, cache),
                                                model))
        forward = {p: _forward_ms(entry, p, cache, batch) for p in precisions if p != "int8"}
        # The cascade's forward cost over all views: int8 on each, fp32 again on the re-checked share
        # (8 views of a batch would say little about a share measured over 324).
        forward["int8"] = forward[PLAIN_INT8] + rechecked * forward["fp32"]
        torch_fp32 = _forward_ms(entry, "fp32", cache, batch, backend="torch")
        fp32_rate = statistics.median(s.rate for s in rates["fp32"])
        figures[model] = {}
        for precision in precisions:
            rate = statistics.median(s.rate for s in rates[precision])
            agree = float((tops[precision] == tops["fp32"].reindex(tops[precision].index)).mean())
            figures[model][precision] = {"images_per_s": rate, "forward_ms": forward[precision], "agreement": agree}
            others = "/".join(f"{100 * s.foreign:.0f}" for s in rates[precision] if s.foreign is not None)
            print(f"  {model:18s} {precision:10s} pipeline {rate:6.1f} images/s ({rate / fp32_rate:4.2f}x fp32; "
                  f"others used {others}% CPU), forward {forward[precision]:5.1f} ms/image on one core "
                  f"({forward['fp32'] / forward[precision]:4.2f}x fp32), top-1 agreement with fp32 {100 * agree:5.1f}% "
                  f"({round(agree * len(paths))}/{len(paths)})")
            if precision == "int8":
                print(f"  {'':18s}            (the int8 -> fp32 cascade: fp32 re-checked {100 * rechecked:.1f}% of the "
                      f"views; its forward figure is int8-plain's + that share of fp32's; target >= 99.5% agreement "
                      f"at >= 1.4x fp32)")
            if precision == "bf16":
                print(f"  {'':18s}      (PyTorch fp32, BN folded, channels-last: forward {torch_fp32:5.1f} ms/image; "
                      f"bf16 autocast is {torch_fp32 / forward['bf16']:4.2f}x that, on the same backend)")
    steady_share(tmp, cache, repeats)
    return figures


def steady_share(tmp: Path, cache: Path, repeats: int, n_images: int = 512) -> None:
    """The fp32 default pipeline's steady rate on ``n_images`` (Lite0, the packaged photographs
    repeated, as cpu_section) against the ceiling from stage_costs."""
    small_n = n_images // 8
    big, small = tmp / "steady-big", tmp / "steady-small"
    paths = make_folder(big, n_images)
    make_folder(small, small_n)
    options = InferenceOptions(device="cpu", cache_dir=str(cache))
    pipeline(small, options)  # warm: export cached, page cache
    steady, whole, foreign = [], [], []
    for _ in range(repeats):
        t_small = small_n / measure(small_n, pipeline, small, options).rate
        sample = measure(n_images, pipeline, big, options)
        t_big = n_images / sample.rate
        whole.append(sample.rate)
        steady.append((n_images - small_n) / max(t_big - t_small, 1e-9))
        foreign.append(sample.foreign or 0.0)
    costs = stage_costs(paths, cache)
    cores = os.cpu_count() or 1
    per_image = (costs["decode (load_rgb)"] + costs["resize + crop (torch uint8, the default)"]
                 + costs.get("forward, ONNX Runtime", float("nan")))
    ceiling = 1000 * cores / per_image
    rate = statistics.median(steady)
    print(f"  fp32 pipeline, {n_images} images: steady {rate:.1f} images/s, whole call {statistics.median(whole):.1f}; "
          f"ceiling {ceiling:.1f} images/s ({per_image:.1f} ms of CPU per image over {cores} cores) -> steady state "
          f"{100 * rate / ceiling:.0f}% of the ceiling (target >= 90%), whole call {100 * statistics.median(whole) / ceiling:.0f}%")
    before = (costs["decode + resize, one median over all photographs (before)"]
              + costs.get("forward, ONNX Runtime", float("nan")))
    print(f"  (the ceiling of the figures before 2026-12-06, one median over all photographs: {1000 * cores / before:.1f} "
          f"images/s ({before:.1f} ms) -> {100 * rate * before / (1000 * cores):.0f}%; see stage_costs)")
    # On a shared machine other processes take cores the ceiling counts as ours: the share of the
    # cores left to us while measuring (1 - their share) scales the ceiling; both are shown.
    others = statistics.median(foreign)
    print(f"  other processes used {100 * others:.0f}% of the machine's CPU meanwhile; against the cores left "
          f"({100 * (1 - others):.0f}%) the steady state is {100 * rate / (ceiling * max(1 - others, 1e-9)):.0f}% of the ceiling")
    # The ceiling adds each stage's cost measured alone, one core working and the other idle; the pipeline keeps both
    # cores busy, where a stage shares the caches and the memory bus with the other core's work. The same stages
    # measured beside one busy core (a one-thread matrix product in another process) show what that costs; the
    # target stays against the ceiling above. Seen 2026-12-07 (AMD EPYC): decode 1.11x, resize 1.37x, forward 1.08x.
    busy = subprocess.Popen([sys.executable, "-c", "import numpy as np\na = np.random.rand(1500, 1500)\nwhile True: a @ a"],
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    try:
        time.sleep(1.0)
        shared = stage_costs(paths, cache)
    finally:
        busy.kill()
        busy.wait()
    per_image_shared = (shared["decode (load_rgb)"] + shared["resize + crop (torch uint8, the default)"]
                        + shared.get("forward, ONNX Runtime", float("nan")))
    shared_ceiling = 1000 * cores / per_image_shared
    print(f"  the stages beside one busy core: {per_image_shared:.1f} ms per image ({per_image_shared / per_image:.2f}x); a "
          f"ceiling with both cores busy of {shared_ceiling:.1f} images/s, of which the steady state is "
          f"{100 * rate / shared_ceiling:.0f}% (context: the target is against the ceiling above)")


def gpu_section(tmp: Path, n_images: int, repeats: int, cache: Path, device_name: str = "cuda") -> None:
    """ResNet-50 and ViT-B/16 on CUDA: images/s of the whole pipeline (decode workers, resize,
    transfer, forward, top-5), and of the forward pass alone on batches already on the GPU, which
    shows whether the model or the input pipeline is the bound.

    Every pipeline call also builds its model and starts its workers (seconds for a random-init
    ViT-B), so each setting runs on ``n_images`` and on an eighth of them: the whole-call rate is
    the large run's, and the steady rate (n - n/8) / (t(n) - t(n/8)) leaves the fixed cost out."""
    from classify.engine.device import default_num_workers

    gpu_decode_section(tmp, max(n_images, 4096), repeats, cache, device_name)  # the bound before: decoding
    # Below, the CPU decode workers as measured on 2026-11-29 (gpu_decode='off'), to compare with those figures.
    small_n = max(8, n_images // 8)
    big, small = tmp / "gpu-images", tmp / "gpu-images-small"
    make_folder(big, n_images)
    make_folder(small, small_n)
    device = torch.device(device_name)
    workers = default_num_workers(device)
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else device_name
    print(f"{gpu}, torch {torch.__version__}, {os.cpu_count()} CPU cores, "
          f"{workers} decode workers by default, {n_images} images (random-init weights: throughput only, not results)")

    def rates(options: InferenceOptions, entry) -> str:
        pipeline(small, options, entry)  # warm-up: cuDNN autotuning, page cache
        whole, steady = [], []
        for _ in range(repeats):
            t_small = small_n / measure(small_n, pipeline, small, options, entry).rate
            t_big = n_images / measure(n_images, pipeline, big, options, entry).rate
            whole.append(n_images / t_big)
            steady.append((n_images - small_n) / max(t_big - t_small, 1e-9))
        return (f"{statistics.median(steady):8.1f} images/s steady, {statistics.median(whole):8.1f} whole call "
                f"(median of {repeats})")

    for name in ("resnet50", "vit"):  # the registry's ResNet-50 and ViT-B/16 input pipelines
        real = get_model(name)
        config = real.input_config()
        double = make_test_double(real.arch, real.label_space, real.family, config)
        for precision in ("fp32", "auto"):
            for resampler in ("torch", "pil"):
                options = InferenceOptions(device=device_name, precision=precision, batch_size=128, resampler=resampler,
                                           cache_dir=str(cache), gpu_decode="off")
                print(f"  {real.arch:22s} {precision:4s} {resampler:5s} resize: {rates(options, double)}")
            print(f"  {real.arch:22s} {precision:4s} forward only: {forward_rate(double, precision, 256, device):8.1f} "
                  "images/s (uint8 batches of 256 already on the device)")
    cores = os.cpu_count() or 1
    resnet = get_model("resnet50")
    double = make_test_double(resnet.arch, resnet.label_space, resnet.family, resnet.input_config())
    for n_workers in sorted({4, 8, max(1, cores - 2), cores}):  # is decoding the bound, and where does it stop?
        options = InferenceOptions(device=device_name, batch_size=128, num_workers=n_workers, cache_dir=str(cache),
                                   gpu_decode="off")
        print(f"  {resnet.arch:22s} auto torch resize, {n_workers:2d} decode workers: {rates(options, double)}")


def make_jpeg_folder(root: Path, n: int, distinct: int = 128) -> list[Path]:
    """n JPEG files in root/<wnid>/: ``distinct`` different ones, each a crop of a packaged
    photograph (PHOTOS) of its own size (180-740 px a side, like web images), encoded at
    quality 90, repeated in turn. Every size differs, so a batch of up to ``distinct`` files is
    resized image by image on the device, as a folder of web images would be (same-size images
    are resized as one stack)."""
    folder = root / "n02123045"
    folder.mkdir(parents=True)
    sources = []
    for k in range(distinct):
        image = load_rgb(SITE / PHOTOS[k % len(PHOTOS)])
        w, h = image.size
        crop = image.crop((k // 2, k // 3, k // 2 + w - k, k // 3 + h - k))  # k px narrower and lower
        source = root / f"source-{k:03d}.jpg"
        crop.save(source, format="JPEG", quality=90)
        sources.append(source)
    paths = []
    for i in range(n):
        target = folder / f"{i:05d}.jpg"
        shutil.copyfile(sources[i % len(sources)], target)
        paths.append(target)
    return paths


def crop_difference(paths: list[Path], device: torch.device) -> str:
    """How far the device path's crops (nvJPEG decode, float resize on the GPU) are from the CPU
    path's (Pillow decode, torchvision's uint8 resize), for ResNet-50's and EfficientNet-Lite0's
    geometries, and the decoded images alone."""
    import numpy as np

    from classify.engine.gpu_decode import DeviceDecoder, device_jpeg

    geometries = [get_model("resnet50").input_config().geometry, get_model(DEFAULT_MODEL).input_config().geometry]
    unique = list(dict.fromkeys(p.read_bytes() for p in paths))
    raws = [device_jpeg(data) for data in unique]
    decoder = DeviceDecoder(geometries, device)
    images = decoder.decode_images(raws)
    crops = decoder(raws)
    worst_image = worst = differing = total = 0
    for data, image, (device_crops, reason) in zip(unique, images, crops):
        assert reason is None and image is not None, reason
        reference = torch.from_numpy(np.array(load_rgb(data))).permute(2, 0, 1)
        worst_image = max(worst_image, int((image.cpu().int() - reference.int()).abs().max()))
        pil = load_rgb(data)
        for crop, geometry in zip(device_crops, geometries):
            diff = (crop.cpu().int() - crop_to_tensor(pil, geometry, "torch").int()).abs()
            worst, differing, total = max(worst, int(diff.max())), differing + int((diff > 0).sum()), total + diff.numel()
    return (f"{len(unique)} JPEGs: decoded images at most {worst_image}/255 from Pillow's; crops at most {worst}/255 "
            f"from the CPU path's, {100 * differing / max(total, 1):.2f}% of values differ "
            f"(device path on CPU-equal arithmetic: 2/255 on 0.25%)")


def gpu_decode_section(tmp: Path, n_images: int, repeats: int, cache: Path, device_name: str = "cuda") -> dict:
    """ResNet-50 bf16 from JPEG files: the whole pipeline with the CPU decode workers
    (gpu_decode='off') against JPEG decoding on the GPU ('auto'), steady and whole-call images/s
    as in gpu_section, the ratio, and the decode path each run reported (InferenceReport.decode).
    Random-init weights (throughput only). Returns the figures."""
    from classify.engine.device import default_num_workers

    small_n = max(8, n_images // 8)
    big, small = tmp / "gpu-jpegs", tmp / "gpu-jpegs-small"
    paths = make_jpeg_folder(big, n_images)
    make_jpeg_folder(small, small_n)
    device = torch.device(device_name)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else device_name
    resnet = get_model("resnet50")
    double = make_test_double(resnet.arch, resnet.label_space, resnet.family, resnet.input_config())
    print(f"JPEG decode, CPU workers vs the GPU: {gpu}, torch {torch.__version__}, {os.cpu_count()} CPU cores, "
          f"{default_num_workers(device)} decode workers, {n_images} JPEG files, {resnet.arch} bf16 "
          "(random-init weights: throughput only)")
    figures = {}
    for label, gpu_decode, batch_size in (("CPU decode", "off", 128), ("GPU decode", "auto", 128),
                                          ("GPU decode", "auto", 256)):
        options = InferenceOptions(device=device_name, precision="bf16", batch_size=batch_size, gpu_decode=gpu_decode,
                                   cache_dir=str(cache))
        decode: list[str] = []
        pipeline(small, options, double, None, decode)  # warm-up: cuDNN autotuning, page cache, the probe
        whole, steady = [], []
        for _ in range(repeats):
            t_small = small_n / measure(small_n, pipeline, small, options, double).rate
            t_big = n_images / measure(n_images, pipeline, big, options, double, None, decode).rate
            whole.append(n_images / t_big)
            steady.append((n_images - small_n) / max(t_big - t_small, 1e-9))
        key = f"{label}, batch {batch_size}"
        figures[key] = {"steady": statistics.median(steady), "whole": statistics.median(whole), "decode": decode[-1]}
        print(f"  {key:22s}: {figures[key]['steady']:8.1f} images/s steady, {figures[key]['whole']:8.1f} whole call "
              f"(median of {repeats})  [decode: {decode[-1]}]")
    cpu = figures["CPU decode, batch 128"]
    for key, value in figures.items():
        if key.startswith("GPU"):
            print(f"  {key}: {value['steady'] / cpu['steady']:.2f}x the CPU decode's steady rate, "
                  f"{value['whole'] / cpu['whole']:.2f}x its whole call (target >= 10,000 images/s steady)")
    print(f"  forward only: {forward_rate(double, 'bf16', 256, device):8.1f} images/s (uint8 batches of 256 on the device)")
    print(f"  crops: {crop_difference(paths, device)}")
    return figures


def forward_rate(entry, precision: str, batch: int, device: torch.device) -> float:
    """images/s of normalise + forward + softmax + top-5 on a uint8 batch already on the GPU."""
    from classify.engine.device import autocast_dtype
    from classify.models.weights import load_model

    model = load_model(entry).to(device).eval().to(memory_format=torch.channels_last)
    config = entry.input_config()
    normalize = normalizer(config, device)
    x = torch.randint(0, 256, (batch, 3, config.size, config.size), dtype=torch.uint8, device=device)
    amp = autocast_dtype(precision, device)

    def step():
        with torch.inference_mode(), torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
            logits = model(normalize(x).contiguous(memory_format=torch.channels_last))
            logits.float().softmax(dim=1).topk(5)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    sync()
    start, rounds = time.perf_counter(), 10
    for _ in range(rounds):
        step()
    sync()
    return rounds * batch / (time.perf_counter() - start)


if __name__ == "__main__":
    raise SystemExit(main())
