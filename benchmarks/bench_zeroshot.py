"""Zero-shot models on the CPU: text-classifier build speed and memory, image throughput (issue 14).

    .venv/bin/python benchmarks/bench_zeroshot.py [--quick] [--full] [--save]

No CLIP weights install offline, so every CLIP figure here is of a **randomly initialised**
open_clip ViT-B-32 of the real architecture (``pretrained=None``): it does the same arithmetic as
the trained model, so its speed and memory are the real model's, but its outputs are noise and
nothing here is an accuracy result. The output says so on every such line.

1. Prompt generation alone: ``classify.zeroshot.prompts.class_prompts`` for every ImageNet-1k class with
   ``openai80`` (80,000 prompts) and every ImageNet-21k class with ``simple7`` (152,901), seconds,
   each in a fresh process after WordNet is loaded (its load is shown apart).
2. Text-classifier build, ``classify.zeroshot.classifier.build_text_classifier`` (its defaults: 256 classes'
   prompts held at once, 256 prompts through the text tower at once, PyTorch's default threads),
   ViT-B-32, for ImageNet-1k x ``openai80`` and ImageNet-21k x ``simple7``. The whole sets take
   hours on a small CPU (80,000 and 152,901 prompts), so by default a fixed sample of classes,
   evenly spaced through the label space, is built and the full time extrapolated from its
   prompts per second (the build is linear in prompts: chunks of the same size, one after the
   other); ``--full`` builds the whole sets. Each case runs in a fresh child process (spawned), so
   its memory is its own: peak RSS of the build is the kernel's high-water mark (``VmHWM`` of
   /proc/self/status, reset through /proc/self/clear_refs just before the build, so it excludes
   imports, model creation and WordNet's load), shown beside the RSS before the build; where
   the reset is not allowed it falls back to ``resource.getrusage`` ``ru_maxrss`` of the child
   (whole process) and says so. Heap only, not GPU memory (CPU build).
3. Bounded memory over a whole label set: the same chunked builder over all 21,843 ImageNet-21k
   classes x ``simple7`` with the tiny randomly initialised open_clip test double of
   ``tests/classify/zeroshot/test_zeroshot.py`` (its text tower is cheap, so the whole set runs in seconds):
   RSS after each chunk (first, quartiles, last) and the high-water mark; with ``--contrast`` also
   the same set built as one chunk (``chunk_classes`` = all). The double's prompts go through its
   text tower 1,024 at a time (the library's default is 256), only to make the run shorter.
4. Image throughput on the CPU, the library path of ``python -m classify --images``
   (``classify.targets.predict_folder``), on the packaged sample photographs
   (``crawl.sample_photos``: five photos x six views = 30 PNG files, copied ``--copies`` times):
   EfficientNet-Lite0 with its real packaged weights (the default pipeline: ONNX Runtime, exported
   once in a warm-up call) beside a zero-shot ViT-B-32 (random init, saved as a safetensors file and
   given as ``checkpoints``, as ``--checkpoint clip:ViT-B-32=FILE`` does; PyTorch) over the sample
   run's five classes (a label-set file, as ``--label-set run`` stores them) with ``simple7``; its
   text classifier is built in the warm-up call and read from the cache afterwards, as on a second
   run. The zero-shot model runs twice: its image tower on PyTorch (``--backend torch``, the
   yardstick: the path before issue 26) and on ONNX Runtime (the default, exported alone in the
   warm-up call and read from the cache afterwards). Rounds are interleaved (other processes' load
   hits all alike); images/s of the whole call (it includes loading the model and starting decode
   workers) and, with ``--copies`` >= 2, the steady rate (N - 30) / (t(N) - t(30)) that leaves the
   fixed cost out; medians; ratios ONNX Runtime / PyTorch and zero-shot / Lite0. Then the fp32
   ceiling: the tower's GFLOP per image against the best single-thread sgemm of PyTorch and ONNX
   Runtime on its own shape, times the cores (no backend can beat it without dropping precision).
5. The text tower on ONNX Runtime, tried against the library's cut context on PyTorch (same sorted
   batches; the tracer fixes the length, so one export per batch length): prompts/s, the export's
   seconds and the largest embedding difference. Reported, not used by the library.

Defaults: ``--in1k-classes 8`` (x 80 = 640 prompts), ``--in21k-classes 96`` (x 7 = 672), the test
double over all 21,843 classes, ``--copies 4`` (120 images), ``--repeats 2``: 4.3 minutes on a
2-core CPU at a load average of 2-5 from other processes.
``--quick`` (meant for ``make bench``): 1 and 12 classes (80 and 84 prompts), the test double over
2,560 classes (ten chunks), ``--copies 2``, one round: 83 s on that CPU at a load average of 1.3-2.3,
148 s at 5. The functions also run on the test double alone (``build_case('tiny', ...)``,
``image_section(tmp, 1, 1, arch='tiny')``: seconds), for a smoke test. ``make bench`` runs every script without arguments, so it gets the defaults
until its recipe passes ``--quick``. ``--save`` appends the output, with a header, to
``benchmarks/results/zeroshot-<date>.txt``. Every figure comes with the load average: on a shared
machine they are noisy.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import io
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RANDOM = "random init, real architecture: speed and memory only, not accuracy"
CLIP_ARCH = "ViT-B-32"
TINY_BATCH = 1024  # prompts through the test double's text tower at once (its activations are tiny)
LINES: list[str] = []


def say(text: str = "") -> None:
    print(text, flush=True)
    LINES.append(text)


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


# --------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mib() -> float | None:
    kib = _status_kib("VmRSS")
    return None if kib is None else kib / 1024


def reset_high_water() -> bool:
    """Reset the kernel's RSS high-water mark of this process (Linux >= 4.0); False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def high_water_mib(reset_ok: bool) -> tuple[float, str]:
    kib = _status_kib("VmHWM") if reset_ok else None
    if kib is not None:
        return kib / 1024, "VmHWM since reset"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "ru_maxrss, whole child"


# --------------------------------------------------------------------------- models
def register_tiny() -> str:
    """The tests' tiny open_clip architecture (a test double), added to open_clip's configs."""
    from open_clip.factory import _MODEL_CONFIGS

    from tests.classify.zeroshot.test_zeroshot import TINY, TINY_CONFIG

    _MODEL_CONFIGS.setdefault(TINY, json.loads(json.dumps(TINY_CONFIG)))
    return TINY


def create_clip(arch: str):
    """(model, tokenizer): open_clip ``arch`` with random weights (``pretrained=None``), eval mode."""
    import open_clip
    import torch

    from classify.models.registry import get_source
    from classify.models.sources.openclip_source import clip_entry

    if arch == "tiny":
        arch = register_tiny()
    entry = clip_entry(f"clip:{arch}")
    torch.manual_seed(0)
    model = get_source(entry).create(entry, device="cpu").eval()
    return model, open_clip.get_tokenizer(entry.arch)


def sample_wnids(label_space: str, n: int | None) -> tuple[str, ...]:
    """``n`` classes evenly spaced through the label space (all of them when n is None)."""
    from core.labels import get_label_space

    wnids = get_label_space(label_space).wnids
    if n is None or n >= len(wnids):
        return tuple(wnids)
    step = len(wnids) / n
    return tuple(wnids[int(i * step)] for i in range(n))


# --------------------------------------------------------------------------- 1. prompt generation
def prompt_generation(space: str, templates: str) -> dict:
    """Seconds of class_prompts for every class of ``space`` with ``templates`` (the default recipe
    otherwise), after WordNet is loaded (a call on two classes of another label space, timed apart).
    Meant for a fresh process (:func:`in_child`), so no cache of an earlier case helps."""
    from classify.zeroshot.prompts import Recipe, class_prompts

    start = time.perf_counter()
    class_prompts(sample_wnids("imagenet-r", 2), Recipe(templates="simple7"))  # loads WordNet
    wordnet = time.perf_counter() - start
    wnids = sample_wnids(space, None)
    start = time.perf_counter()
    prompts = class_prompts(wnids, Recipe(templates=templates))
    return {"wordnet_load_s": wordnet, "classes": len(wnids), "prompts": sum(map(len, prompts.values())),
            "seconds": time.perf_counter() - start}


# --------------------------------------------------------------------------- 2./3. text-classifier build
def build_case(arch: str, label_space: str, templates: str, n_classes: int | None,
               chunk_classes: int | None = None, trace: bool = False, batch_prompts: int | None = None,
               cut_context: bool = True) -> dict:
    """Build the text classifier of ``arch`` (random init; 'tiny' = the tests' double) over
    ``n_classes`` of ``label_space`` (None: all) with ``templates``: prompts, seconds, prompts/s,
    RSS before the build and its high-water mark during it; with ``trace``, RSS after each chunk.
    Meant for a fresh process (:func:`in_child`): the high-water mark is the process's."""
    import torch

    from classify.zeroshot.prompts import Recipe
    from classify.zeroshot.classifier import CHUNK_CLASSES, build_text_classifier

    model, tokenizer = create_clip(arch)
    wnids = sample_wnids(label_space, n_classes)
    recipe = Recipe(templates=templates)
    n_prompts = len(wnids) * len(recipe.template_list)
    chunk = chunk_classes or CHUNK_CLASSES
    with torch.inference_mode():  # warm-up: first-call allocations and oneDNN kernels, not timed
        model.encode_text(tokenizer(["a photo of a cat."] * 4))
    from classify.zeroshot.prompts import class_prompts

    class_prompts(sample_wnids("imagenet-r", 2), recipe)  # loads WordNet (~250 MB), not counted as the build's
    import gc

    gc.collect()
    before = rss_mib()
    reset_ok = reset_high_water()
    rss_trace: list[tuple[int, float]] = []

    def progress(event) -> None:
        if trace and event.done:
            rss_trace.append((event.done, rss_mib() or float("nan")))

    start = time.perf_counter()
    out = build_text_classifier(model, tokenizer, wnids, recipe, chunk_classes=chunk, progress=progress,
                                cut_context=cut_context, **({"batch_prompts": batch_prompts} if batch_prompts else {}))
    seconds = time.perf_counter() - start
    peak, how = high_water_mib(reset_ok)
    return {"arch": arch, "label_space": label_space, "templates": templates, "classes": len(wnids),
            "prompts": n_prompts, "seconds": seconds, "prompts_per_s": n_prompts / seconds,
            "rss_before_mib": before, "peak_mib": peak, "peak_how": how, "chunk_classes": chunk,
            "result_mib": out.nbytes / 2**20, "threads": torch.get_num_threads(), "trace": rss_trace,
            "classifier": out if len(wnids) <= 1024 else None}


class _CutText:
    """``classify.zeroshot.classifier.encode_text_cut`` as a module of (tokens cut to the batch's length,
    pooled positions), for the ONNX export of the text tower (the tracer fixes the length, so one
    export per length)."""

    @staticmethod
    def make(tower):
        import torch
        import torch.nn.functional as F

        class Cut(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.tower = tower

            def forward(self, tokens, index):
                length = tokens.shape[1]
                x = tower.token_embedding(tokens) + tower.positional_embedding[:length]
                x = tower.transformer(x, attn_mask=tower.attn_mask[:length, :length])
                x = tower.ln_final(x)[torch.arange(tokens.shape[0]), index]
                return F.normalize(x @ tower.text_projection, dim=-1)

        return Cut().eval()


def text_onnx_case(arch: str, label_space: str, templates: str, n_classes: int) -> dict:
    """The library's cut text tower on PyTorch against the same batches on ONNX Runtime (issue 26
    item 4, 'also try ONNX Runtime for the text tower'): prompts/s of each, the export's seconds
    apart, the largest embedding difference. Same prompts, order and batches as the library."""
    import tempfile as _tempfile
    import warnings

    import numpy as np
    import torch

    from classify.engine.onnx_backend import make_session
    from classify.zeroshot.classifier import BATCH_PROMPTS, _pool_index, encode_text_cut, text_context_rule
    from classify.zeroshot.prompts import Recipe, class_prompts

    model, tokenizer = create_clip(arch)
    tower = text_context_rule(model)[0]
    prompts = [p for ps in class_prompts(sample_wnids(label_space, n_classes), Recipe(templates=templates)).values()
               for p in ps]
    tokens = tokenizer(prompts)
    index = _pool_index(tower, tokens)
    order = torch.argsort(index, stable=True)
    batches = [(tokens[order[s:s + BATCH_PROMPTS]], index[order[s:s + BATCH_PROMPTS]])
               for s in range(0, len(prompts), BATCH_PROMPTS)]
    cut = _CutText.make(tower)
    threads = torch.get_num_threads()
    sessions, export_s = {}, 0.0
    with _tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        for batch, where in batches:
            length = int(where.max()) + 1
            if length not in sessions:
                start = time.perf_counter()
                path = Path(tmp) / f"text-{length}.onnx"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    torch.onnx.export(cut, (batch[:, :length], where), str(path), dynamo=False,
                                      input_names=["tokens", "index"], output_names=["emb"], opset_version=17,
                                      do_constant_folding=True,
                                      dynamic_axes={"tokens": {0: "batch"}, "index": {0: "batch"}, "emb": {0: "batch"}})
                sessions[length] = make_session(path, threads)
                export_s += time.perf_counter() - start
        encode_text_cut(tower, batches[0][0])  # warm-up, not timed
        start = time.perf_counter()
        reference = [encode_text_cut(tower, batch).numpy() for batch, _ in batches]
        torch_s = time.perf_counter() - start
        feeds = [{"tokens": b[:, :int(w.max()) + 1].numpy(), "index": w.numpy()} for b, w in batches]
        sessions[int(batches[0][1].max()) + 1].run(None, feeds[0])  # warm-up
        start = time.perf_counter()
        got = [sessions[int(w.max()) + 1].run(None, feed)[0] for (_, w), feed in zip(batches, feeds)]
        onnx_s = time.perf_counter() - start
    diff = max(float(np.abs(a - b).max()) for a, b in zip(got, reference))
    return {"prompts": len(prompts), "torch": len(prompts) / torch_s, "onnx": len(prompts) / onnx_s,
            "export_s": export_s, "lengths": len(sessions), "diff": diff, "threads": threads}


def in_child(fn, *args, **kwargs):
    """fn(*args, **kwargs) in a freshly spawned process: its memory figures are its own."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(fn, args, kwargs)


def text_section(args) -> None:
    import numpy as np

    from classify.zeroshot.prompts import templates_of

    say(f"Prompt generation (classify.zeroshot.prompts.class_prompts, default recipe but templates), each in a fresh "
        f"process after WordNet is loaded; {load()}")
    for space, templates in (("imagenet-1k", "openai80"), ("imagenet-21k", "simple7")):
        g = in_child(prompt_generation, space, templates)
        say(f"  {space} x {templates}: {g['classes']:6d} classes, {g['prompts']:7d} prompts in {g['seconds']:5.1f} s "
            f"({g['prompts'] / g['seconds']:8.0f} prompts/s; WordNet load before it {g['wordnet_load_s']:.1f} s)  "
            f"[{load()}]")

    say()
    say(f"Text-classifier build, classify.zeroshot.classifier.build_text_classifier, open_clip {CLIP_ARCH} ({RANDOM}), "
        f"CPU, each case in a fresh process; {load()}")
    cases = [("imagenet-1k", "openai80", None if args.full else args.in1k_classes),
             ("imagenet-21k", "simple7", None if args.full else args.in21k_classes)]
    for space, templates, n in cases:
        total_classes = len(sample_wnids(space, None))
        total = total_classes * len(templates_of(templates))
        r = in_child(build_case, CLIP_ARCH, space, templates, n)
        whole = r["classes"] == total_classes
        what = "the whole set" if whole else f"a sample of {r['classes']} class(es) evenly spaced through the set"
        say(f"  {space} x {templates}: {what}, {r['prompts']} prompts in {r['seconds']:.1f} s = "
            f"{r['prompts_per_s']:.1f} prompts/s ({r['threads']} threads; context cut per batch)  [{load()}]")
        if not whole or args.full_context:
            # The yardstick: the same build at open_clip's full 77-token context (the path before the cut).
            f = in_child(build_case, CLIP_ARCH, space, templates, n, cut_context=False)
            diff = (float(np.abs(r["classifier"] - f["classifier"]).max())
                    if r["classifier"] is not None and f["classifier"] is not None else float("nan"))
            say(f"    full 77-token context (the yardstick): {f['prompts_per_s']:.1f} prompts/s; the cut is "
                f"{r['prompts_per_s'] / f['prompts_per_s']:.1f}x, classifiers equal to {diff:.1e} (target 1e-5)  "
                f"[{load()}]")
        if not whole:
            hours = total / r["prompts_per_s"] / 3600
            say(f"    extrapolated to all {total_classes} classes ({total} prompts): {hours:.1f} h at that rate "
                f"(linear in prompts; --full measures it)")
        say(f"    RSS before the build {r['rss_before_mib']:.0f} MiB (model, PyTorch, WordNet); build peak "
            f"{r['peak_mib']:.0f} MiB ({r['peak_how']}), +{r['peak_mib'] - r['rss_before_mib']:.0f} MiB; "
            f"result {r['result_mib']:.1f} MiB")
        if not whole:
            full_result = r["result_mib"] / r["classes"] * total_classes
            say(f"    the whole set's result matrix adds {full_result:.1f} MiB; chunks hold {r['chunk_classes']} "
                "classes' prompts at once whatever the set (next section), so its peak stays near this one's")

    say()
    say(f"Text tower on ONNX Runtime (tried; the library stays on PyTorch's cut context): open_clip {CLIP_ARCH} "
        f"({RANDOM}), the same sorted batches; {load()}")
    o = in_child(text_onnx_case, CLIP_ARCH, "imagenet-1k", "openai80", args.in1k_classes)
    say(f"  imagenet-1k x openai80, {o['prompts']} prompts: PyTorch (cut) {o['torch']:.1f} prompts/s, ONNX Runtime "
        f"{o['onnx']:.1f} prompts/s ({o['threads']} threads each) -> {o['onnx'] / o['torch']:.2f}x, embeddings equal "
        f"to {o['diff']:.1e}; plus {o['export_s']:.1f} s exporting {o['lengths']} graph(s), one per batch length  "
        f"[{load()}]")

    say()
    what = "all ImageNet-21k classes" if args.tiny_classes is None else f"{args.tiny_classes} ImageNet-21k classes"
    say(f"Bounded memory: {what} x simple7 with the tiny open_clip TEST DOUBLE of tests/classify/zeroshot/test_zeroshot.py "
        f"(random init, embed dim 16: memory behaviour only), prompts {TINY_BATCH} at a time; {load()}")
    r = in_child(build_case, "tiny", "imagenet-21k", "simple7", args.tiny_classes, None, True, TINY_BATCH)
    trace = r["trace"]
    picks = sorted({0, len(trace) // 4, len(trace) // 2, 3 * len(trace) // 4, len(trace) - 1})
    steps = ", ".join(f"{trace[i][0]}: {trace[i][1]:.0f}" for i in picks)
    say(f"  chunked ({r['chunk_classes']} classes at once): {r['prompts']} prompts in {r['seconds']:.1f} s; "
        f"RSS before {r['rss_before_mib']:.0f} MiB, after classes {steps} MiB; peak {r['peak_mib']:.0f} MiB "
        f"({r['peak_how']}), +{r['peak_mib'] - r['rss_before_mib']:.0f} MiB  [{load()}]")
    rss = [m for _, m in trace]
    say(f"  RSS from the first chunk to the last: {rss[0]:.0f} -> {rss[-1]:.0f} MiB "
        f"({rss[-1] - rss[0]:+.0f} MiB over {len(trace)} chunks; the result is {r['result_mib']:.1f} MiB, "
        f"allocated whole at the first chunk)")
    if args.contrast:
        one = in_child(build_case, "tiny", "imagenet-21k", "simple7", args.tiny_classes, 10**6, False, TINY_BATCH)
        say(f"  as one chunk (all prompts at once): {one['seconds']:.1f} s, peak {one['peak_mib']:.0f} MiB, "
            f"+{one['peak_mib'] - one['rss_before_mib']:.0f} MiB  [{load()}]")


# --------------------------------------------------------------------------- 4. image throughput
def write_sample_views(root: Path, copies: int) -> list[Path]:
    """The sample photographs' six views each as PNG files in root/<wnid>/, ``copies`` times."""
    from crawl.sample_photos import SAMPLE_PHOTOS, VIEWS, photo_path
    from core.imageio import load_rgb

    paths = []
    for number, photo in enumerate(SAMPLE_PHOTOS):
        folder = root / photo.wnid
        folder.mkdir(parents=True, exist_ok=True)
        original = load_rgb(photo_path(photo))
        for k, (_, view) in enumerate(VIEWS):
            data = io.BytesIO()
            view(original).save(data, format="PNG")
            for copy in range(copies):
                path = folder / f"{number}-{k}-{copy}.png"
                path.write_bytes(data.getvalue())
                paths.append(path)
    return paths


def save_random_clip(path: Path, arch: str = CLIP_ARCH) -> Path:
    """A randomly initialised open_clip ``arch`` as a safetensors file (a --checkpoint)."""
    from safetensors.torch import save_file

    model, _ = create_clip(arch)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def zero_shot_selection(tmp: Path, checkpoint: Path, arch: str = CLIP_ARCH):
    """(entries, checkpoints by id) for clip:ARCH over the sample run's classes with simple7."""
    from classify.zeroshot.prompts import Recipe
    from classify.zeroshot_runs import zero_shot_models
    from crawl.sample_photos import SAMPLE_PHOTOS

    label_file = tmp / "sample-classes.txt"
    label_file.write_text("".join(f"{w}\n" for w in sorted({p.wnid for p in SAMPLE_PHOTOS})))
    return zero_shot_models([f"clip:{arch}"], str(label_file), Recipe(templates="simple7"),
                            {f"clip:{arch}": str(checkpoint)})


def classify_folder(folder: Path, models, options) -> tuple[int, dict]:
    from classify.targets import predict_folder

    table, result = predict_folder(folder, models, options=options)
    assert (table["status"] == "ok").all(), table[table["status"] != "ok"]
    return len(table), result.backends


def timed(folder: Path, models, options) -> tuple[float, int]:
    start = time.perf_counter()
    n, _ = classify_folder(folder, models, options)
    return time.perf_counter() - start, n


def _best_gflops(fn, flops: float) -> float:
    best = float("inf")
    for _ in range(6):  # the best of 6 rounds of 10: a ceiling, not an average
        start = time.perf_counter()
        for _ in range(10):
            fn()
        best = min(best, (time.perf_counter() - start) / 10)
    return flops / best / 1e9


def tower_ceiling(arch: str) -> dict:
    """What no fp32 backend can beat: the image tower's floating-point operations per image
    (``torch.utils.flop_counter``: 2 per multiply-add) against the best single-thread sgemm rate
    of PyTorch and of ONNX Runtime (its MLAS kernels are the faster on AMD EPYC: 111 against 92
    GFLOP/s measured) on the tower's own MLP shape (a CPU batch's tokens x width x 4 width), times
    the cores."""
    import numpy as np
    import onnx
    import torch
    from onnx import TensorProto, helper, numpy_helper
    from torch.utils.flop_counter import FlopCounterMode

    from classify.engine.device import DEFAULT_BATCH
    from classify.engine.onnx_backend import make_session

    model, _ = create_clip(arch)
    visual = model.visual
    size = int(getattr(visual, "image_size", (224, 224))[0]) if hasattr(visual, "image_size") else 224
    # Not under inference_mode: there nn.MultiheadAttention takes its fused fast path, whose
    # projections the counter does not see (5.9 instead of 8.7 GFLOP for ViT-B-32).
    with FlopCounterMode(display=False) as counter:
        visual(torch.zeros(1, 3, size, size))
    flops = counter.get_total_flops()
    width = int(getattr(getattr(visual, "transformer", None), "width", 768))
    grid = getattr(visual, "grid_size", (7, 7))
    tokens = DEFAULT_BATCH["cpu"] * (int(grid[0]) * int(grid[1]) + 1)  # one CPU batch's tokens
    a = np.random.default_rng(0).standard_normal((tokens, width), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((width, 4 * width), dtype=np.float32)
    gemm = 2.0 * tokens * width * 4 * width
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rates = {"PyTorch": _best_gflops(lambda: ta @ tb, gemm)}
    finally:
        torch.set_num_threads(previous)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "sgemm",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [tokens, 4 * width])],
                              initializer=[numpy_helper.from_array(b, "b")])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sgemm.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
        session = make_session(path, 1)
        rates["ONNX Runtime"] = _best_gflops(lambda: session.run(None, {"a": a}), gemm)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    best = max(rates.values())
    return {"gflop_per_image": flops / 1e9, "rates": rates, "cores": cores, "ceiling": cores * best * 1e9 / flops}


def image_section(tmp: Path, copies: int, repeats: int, arch: str = CLIP_ARCH) -> dict:
    """Lite0 (real weights) and zero-shot ``arch`` (random init) through predict_folder on the
    sample views: images/s (whole call, and steady with copies >= 2) and the ratio; returns them."""
    from classify.engine.types import InferenceOptions
    from classify.models.registry import DEFAULT_MODEL
    from classify.zeroshot.classifier import build_settings

    if arch == "tiny":  # the tests' double: a smoke run in seconds
        arch = register_tiny()
    small, big = tmp / "views-1", tmp / f"views-{copies}"
    n_small = len(write_sample_views(small, 1))
    n_big = len(write_sample_views(big, copies)) if copies > 1 else n_small
    checkpoint = save_random_clip(tmp / f"{arch}-random.safetensors", arch)
    entries, by_id = zero_shot_selection(tmp, checkpoint, arch)
    # onnx_export_min_images=1: the warm-up call exports Lite0 and the image tower (a user's second
    # run reads the cached exports); zs-torch is the yardstick, the image tower on PyTorch as before.
    cache = str(tmp / "onnx")
    options = {"lite0": ([DEFAULT_MODEL], InferenceOptions(device="cpu", cache_dir=cache, onnx_export_min_images=1)),
               "zs-torch": (entries, InferenceOptions(device="cpu", cache_dir=cache, checkpoints=by_id, backend="torch")),
               "zs-onnx": (entries, InferenceOptions(device="cpu", cache_dir=cache, checkpoints=by_id,
                                                     onnx_export_min_images=1))}
    what = f"clip:{arch}+simple7, 5 classes ({RANDOM if arch == CLIP_ARCH else 'test double'})"
    label = {"lite0": f"{DEFAULT_MODEL} (packaged weights)", "zs-torch": f"{what}, image tower on PyTorch",
             "zs-onnx": f"{what}, image tower on ONNX Runtime"}
    say(f"Image throughput on the CPU, classify.targets.predict_folder, sample photographs ({n_small} views"
        f"{f', and {n_big} = {copies} copies' if copies > 1 else ''}), {os.cpu_count()} cores; {load()}")
    figures: dict = {}
    with build_settings(cache_dir=tmp / "zeroshot"):
        for key, (models, opts) in options.items():  # warm-up: ONNX export / text classifier build, page cache
            start = time.perf_counter()
            _, backends = classify_folder(small, models, opts)
            say(f"  warm-up {label[key]}: {time.perf_counter() - start:.1f} s for {n_small} images "
                f"[{'; '.join(f'{m}: {b}' for m, b in backends.items())}]")
        whole = {k: [] for k in options}
        steady = {k: [] for k in options}
        for i in range(repeats):
            for key, (models, opts) in options.items():
                t_big, n = timed(big, models, opts)
                whole[key].append(n / t_big)
                line = f"  round {i + 1} {key:8s}: {n / t_big:6.1f} images/s whole call ({n} in {t_big:.1f} s)"
                if copies > 1:
                    t_small, _ = timed(small, models, opts)
                    steady[key].append((n_big - n_small) / max(t_big - t_small, 1e-9))
                    line += f", steady {steady[key][-1]:6.1f} images/s ({n_small} in {t_small:.1f} s)"
                say(f"{line}  [{load()}]")
    for kind, rates in (("whole call", whole), ("steady", steady)):
        if not rates["lite0"]:
            continue
        medians = {k: statistics.median(v) for k, v in rates.items()}
        figures[kind] = medians
        say(f"  {kind:10s} (median of {repeats}): Lite0 {medians['lite0']:.1f} images/s; zero-shot {arch}: image "
            f"tower on PyTorch {medians['zs-torch']:.1f}, on ONNX Runtime {medians['zs-onnx']:.1f} images/s -> "
            f"ONNX Runtime/PyTorch {medians['zs-onnx'] / medians['zs-torch']:.2f}x (target 1.5x); "
            f"zero-shot/Lite0 {medians['zs-onnx'] / medians['lite0']:.2f}x")
    if arch == CLIP_ARCH and figures:
        c = in_child(tower_ceiling, arch)
        kind = "steady" if "steady" in figures else "whole call"
        medians = figures[kind]
        rates = ", ".join(f"{k} {v:.0f}" for k, v in c["rates"].items())
        say(f"  the fp32 ceiling: the {arch} image tower is {c['gflop_per_image']:.1f} GFLOP per image; one core's best "
            f"sgemm on its MLP shape: {rates} GFLOP/s; x {c['cores']} cores -> at most {c['ceiling']:.1f} images/s "
            f"from any fp32 backend with no time left for decoding: "
            f"{c['ceiling'] / medians['zs-torch']:.2f}x the PyTorch {kind} rate  [{load()}]")
        figures["ceiling"] = c["ceiling"]
    return figures


# --------------------------------------------------------------------------- main
def header(argv: list[str]) -> str:
    import open_clip
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"# benchmarks/bench_zeroshot.py {' '.join(argv)}\n"
            f"# {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores ({cpu}), "
            f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the start; torch {torch.__version__}, "
            f"open_clip {open_clip.__version__}. CLIP models: {RANDOM}.\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples, one round (under 2 minutes)")
    parser.add_argument("--full", action="store_true", help="build the whole IN-1k and IN-21k classifiers (hours)")
    parser.add_argument("--full-context", action="store_true",
                        help="with --full, also build the whole sets at full context (the yardstick; hours more)")
    parser.add_argument("--in1k-classes", type=int, default=8, help="ImageNet-1k classes built (x 80 templates)")
    parser.add_argument("--in21k-classes", type=int, default=96, help="ImageNet-21k classes built (x 7 templates)")
    parser.add_argument("--tiny-classes", type=int, default=None,
                        help="ImageNet-21k classes of the test double's bounded-memory run (default: all 21,843)")
    parser.add_argument("--contrast", action="store_true",
                        help="also build the test double's set as one chunk (all prompts held at once)")
    parser.add_argument("--copies", type=int, default=4, help="copies of the 30 sample views (images = 30 x copies)")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved image-throughput rounds")
    parser.add_argument("--skip-text", action="store_true", help="only the image throughput")
    parser.add_argument("--skip-images", action="store_true", help="only the prompts and text classifier")
    parser.add_argument("--save", action="store_true",
                        help="append the output to benchmarks/results/zeroshot-<date>.txt")
    args = parser.parse_args(argv)
    if args.quick:
        args.in1k_classes, args.in21k_classes, args.copies, args.repeats = 1, 12, 2, 1
        args.tiny_classes = args.tiny_classes or 2560
    top = header(argv)
    print(top, end="")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="wildlens-bench-zs-") as tmp:
        previous = os.environ.get("WILDLENS_HOME")
        os.environ["WILDLENS_HOME"] = str(Path(tmp) / "home")  # label-set files and caches stay in here
        try:
            if not args.skip_text:
                text_section(args)
                say()
            if not args.skip_images:
                image_section(Path(tmp), args.copies, args.repeats)
        finally:
            if previous is None:
                os.environ.pop("WILDLENS_HOME", None)
            else:
                os.environ["WILDLENS_HOME"] = previous
    say(f"({time.perf_counter() - start:.0f} s in all; {load()})")
    if args.save:
        out = ROOT / "benchmarks" / "results" / f"zeroshot-{_dt.date.today():%Y-%m-%d}.txt"
        separator = "\n" if out.exists() and out.stat().st_size else ""
        with out.open("a", encoding="utf-8") as f:
            f.write(separator + top + "\n".join(LINES) + "\n")
        print(f"appended to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
