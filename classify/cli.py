"""Command line of classify/, for headless runs (a GPU server, a cron job).

    python -m classify --images DIR --models efficientnet_lite0[,...] --out FILE.csv|FILE.parquet
    python -m classify --run RUN_ID --models ...
    python -m classify models [--family CNN|transformer|hybrid]
    python -m classify models --search TEXT        # any timm / torchvision / hf-hub name, beyond the registry
    python -m classify prompts (--wnids W1,W2 | --label-set SET | --run RUN_ID) [--names ...] [--knowledge ...]
                               [--templates ...] [--style ...] [--coverage]   # what a zero-shot text tower reads

--models takes registry ids and aliases and any other timm name (``arch.tag``),
``torchvision/ARCH.WEIGHTS`` or ``hf-hub:ORG/NAME`` (:mod:`classify.models.zoo`); ``--checkpoint
MODEL=PATH`` gives a local file, whose head decides the label space (``--label-space`` and
``--family`` override what is inferred).

FILE has the columns ``python -m explain metrics`` reads (model, image, true_wnid, pred_wnid,
pred_wnid_2..5, prob_1..5, then label_space, status, reason, weights_sha256, class_order, family),
so the two commands chain. The batches of a folder run are kept beside FILE (``.FILE.parts/``):
re-running the same command resumes and skips what is done, for the same model only (another
checkpoint, label space or family under a stored id is refused:
``classify.targets.check_stored_models``). An existing FILE is replaced only when WildLens wrote
it for the same DIR and models (``classify.targets.check_out_claim``; ``--overwrite`` replaces
any), and never inside the store's runs/. Entries of DIR that are not read (links out of DIR,
FIFOs, unreadable folders, other files) are listed on stderr with their reasons. Errors a person can
fix (``core.errors.WildLensError``) print one line and exit with status 2. The option lists
(precisions, backends, resamplers, families) are the library's own (``classify.engine.device``,
``classify.engine.preprocess``, ``classify.models.registry``).
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from core.errors import OptionError, WildLensError, one_line
from core.progress import TerminalProgress
from core.runstore import Run, RunStore
from core.userfile import expand_user

from classify.models.registry import DEFAULT_MODEL, FAMILIES, list_models


def _checkpoints(items: list[str]) -> dict[str, str]:
    """--checkpoint MODEL=PATH (repeated) -> {MODEL as written: PATH}; classify.models.zoo matches the
    names to --models (any name of the model)."""
    out = {}
    for item in items or []:
        model, sep, path = item.partition("=")
        if not sep or not model or not path:
            raise OptionError(f"--checkpoint {item!r}: write MODEL=PATH, e.g. resnet50=/data/resnet50.safetensors.")
        out[model.strip()] = path
    return out


def _per_model(option: str, items: list[str], example: str) -> dict[str, str]:
    """--label-space / --family as [MODEL=]VALUE (repeated) -> {MODEL or '*': VALUE}."""
    out = {}
    for item in items or []:
        model, sep, value = item.rpartition("=")
        if sep and not model or not value:
            raise OptionError(f"{option} {item!r}: write [MODEL=]VALUE, e.g. {example}.")
        out[model.strip() if sep else "*"] = value.strip()
    return out


def _model_selection(args):
    """(entries, checkpoints by entry id) for --models with --checkpoint/--label-space/--family:
    any timm / torchvision / hf-hub name resolves (classify.models.zoo), label space and family inferred;
    zero-shot names (clip:...) resolve with the label set and prompt recipe (_zero_shot_selection)."""
    from classify.models.sources.openclip_source import is_clip_name
    from classify.models.zoo import resolve_models

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    checkpoints = _checkpoints(args.checkpoint)
    zero_shot = [n for n in names if is_clip_name(n)]
    clip_checkpoints = {k: v for k, v in checkpoints.items() if is_clip_name(k)}
    entries, by_id = _zero_shot_selection(args, zero_shot, clip_checkpoints)
    others = [n for n in names if not is_clip_name(n)]
    if others or not zero_shot:
        found, found_ids = resolve_models(
            others or args.models, {k: v for k, v in checkpoints.items() if k not in clip_checkpoints},
            _per_model("--label-space", args.label_space, "convnext_tiny.fb_in1k=imagenet-12k"),
            _per_model("--family", args.family, "coatnet_0_rw_224.sw_in1k=hybrid"))
        entries, by_id = found + entries, {**found_ids, **by_id}  # classifiers first, then zero-shot models
    return entries, by_id


ZERO_SHOT_OPTIONS = ("label_set", "names", "knowledge", "knowledge_file", "templates", "style")


def _zero_shot_selection(args, names: list[str], checkpoints: dict[str, str]):
    """Zero-shot entries for --models clip:... with --label-set and the prompt options (a recipe
    for the names that carry none in their id: clip:ViT-B-32.openai+def)."""
    from classify.models.sources.openclip_source import is_clip_name
    from classify.zeroshot_runs import zero_shot_models

    given = [o for o in ZERO_SHOT_OPTIONS if getattr(args, o, None) is not None]
    if not names:
        if given:
            raise OptionError(f"--{given[0].replace('_', '-')} is for zero-shot models; add one to --models, e.g. "
                              "clip:ViT-B-32.openai ('python -m classify models --family language-augmented').")
        return [], {}
    recipe = None
    if any(o != "label_set" for o in given):
        from classify.zeroshot.prompts import Recipe

        fields = {o: getattr(args, o) for o in ("names", "knowledge", "templates", "style", "knowledge_file")
                  if getattr(args, o) is not None}
        recipe = Recipe(**fields)
    stray = [k for k in (_per_model("--label-space", args.label_space, "x=imagenet-1k")
                         | _per_model("--family", args.family, "x=CNN")) if k != "*" and is_clip_name(k)]
    if stray:
        raise OptionError(f"--label-space/--family name {stray[0]}: a zero-shot model's classes are its label set "
                          "(--label-set SPEC) and its family is language-augmented.")
    return zero_shot_models(names, args.label_set, recipe, checkpoints, run=args.run)


def build_predict_parser() -> argparse.ArgumentParser:
    from classify.engine.options import BACKENDS, DEFAULT_RESAMPLER, ENGINES, GPU_DECODE, INT8_RECHECK, PRECISIONS, RESAMPLERS

    p = argparse.ArgumentParser(
        prog="python -m classify",
        description="Classify images with ImageNet models; top-5 wnids per (model, image). "
                    "'python -m classify models' lists the models and whether their weights are here.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--images", metavar="DIR", help="folder with one sub-folder per class, named by wnid")
    where.add_argument("--run", metavar="RUN_ID", help="a run of the run store ($WILDLENS_HOME); stores predictions there")
    p.add_argument("--out", metavar="FILE", help="with --images: output file, .csv or .parquet; never inside the run "
                   "store's runs/. An existing FILE is resumed only when WildLens wrote it for the same DIR and its "
                   "models are among --models; anything else is refused (see --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="with --out: replace FILE whatever it holds (a regular file); its batches start over")
    p.add_argument("--models", default=DEFAULT_MODEL,
                   help=f"comma-separated model ids or aliases (default {DEFAULT_MODEL}), or any timm name (arch.tag), "
                        "torchvision/ARCH.WEIGHTS or hf-hub:ORG/NAME; 'python -m classify models --search TEXT' finds them")
    p.add_argument("--batch-size", type=int, help="images per forward pass (default: 8 on CPU, 64 on CUDA)")
    p.add_argument("--workers", type=int,
                   help="decode worker processes (default: half the cores on CPU, up to 8 with a GPU; 0 = none)")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="auto: bf16/fp16 autocast on a GPU, fp32 on the CPU. On the CPU also bf16 (PyTorch "
                        "autocast, where the CPU has AVX-512 BF16 or AMX) and int8 (CNNs: ONNX Runtime static "
                        "quantization, calibrated on a fixed packaged set, with fp32 re-checking the images it is "
                        "unsure of: --int8-recheck). Rows of a precision other than fp32 are stored as MODEL--bf16, "
                        "MODEL--int8, ...")
    p.add_argument("--int8-recheck", choices=INT8_RECHECK,
                   help="with --precision int8. auto (default): the fp32 model classifies again every image whose "
                        "int8 top-1 probability margin is at or below a gate chosen on the packaged calibration set "
                        "(never the evaluated images), for >= 99.5%% top-1 agreement with fp32; each row says "
                        "whether it was re-checked (int8_rechecked). none: int8 alone, stored as MODEL--int8-plain")
    p.add_argument("--backend", default="auto", choices=BACKENDS,
                   help="auto: ONNX Runtime on the CPU where installed and verified against PyTorch (exports are "
                        "cached in $WILDLENS_HOME/cache/onnx), PyTorch otherwise and on GPUs")
    r = p.add_argument_group("engine (Ray Data for a cluster; classify.engine.ray_engine)")
    r.add_argument("--engine", default="local", choices=ENGINES,
                   help="local (default): this process. ray: Ray Data actors, each holding the models once, on the "
                        "cluster --ray-address or RAY_ADDRESS names, else a local Ray instance; same rows, same resume. "
                        "Needs ray: pip install -e '.[ray]'")
    r.add_argument("--ray-address", metavar="ADDRESS", help="with --engine ray: the cluster to join (e.g. "
                   "ray://head:10001, which needs ray[client], or auto); default RAY_ADDRESS, else a local instance")
    r.add_argument("--ray-join-timeout", type=float, metavar="SECONDS",
                   help="with --engine ray and a cluster address: seconds to join it (connect, check that it answers "
                        "as Ray, ray.init), then a one-line error (default 30)")
    r.add_argument("--ray-actors", type=int, metavar="N",
                   help="with --engine ray: actors (default one per GPU of the cluster, else 1)")
    r.add_argument("--ray-gpus-per-actor", type=float, metavar="G",
                   help="with --engine ray: GPUs per actor (default 1 when the cluster has GPUs; 0: CPU actors)")
    p.add_argument("--gpu-decode", default="auto", choices=GPU_DECODE,
                   help="auto (default): on a CUDA device, decode, resize and crop JPEGs on the GPU (nvJPEG; other "
                        "formats and any JPEG it refuses on the CPU; the summary says which path ran); off: CPU workers")
    p.add_argument("--jpeg-draft", action="store_true",
                   help="decode large JPEGs at a reduced scale (2-4x faster decoding; slightly different pixels, "
                        "so predictions can differ a little from a full decode)")
    p.add_argument("--resampler", default=DEFAULT_RESAMPLER, choices=RESAMPLERS,
                   help="torch (default): torchvision's uint8 resize, 2-3x faster, within 1/255 of Pillow on under "
                        "1%% of the values; pil: Pillow, pixels equal to timm's eval transform to the bit")
    p.add_argument("--checkpoint", action="append", metavar="MODEL=PATH",
                   help="use a local weights file for MODEL (.safetensors or a state dict; read with weights_only); "
                        "its head decides the label space")
    p.add_argument("--label-space", action="append", metavar="[MODEL=]SPACE",
                   help="the label space of MODEL's outputs (default: inferred from the head size or its config's "
                        "label names): imagenet-1k, imagenet-21k, imagenet-22k, imagenet-22k-ms, imagenet-12k or "
                        "swin-22k (Microsoft's Swin order); without MODEL= for every model")
    p.add_argument("--family", action="append", metavar="[MODEL=]FAMILY",
                   help=f"override the inferred family ({', '.join(FAMILIES)}); without MODEL= for every model")
    z = p.add_argument_group("zero-shot models (--models clip:MODEL[.TAG][+RECIPE], e.g. clip:ViT-B-32.openai+def)")
    z.add_argument("--label-set", metavar="SPEC",
                   help="the classes a zero-shot model chooses from: run (default with --run: the run's classes), a "
                        "label space (imagenet-1k, ...; the default with --images), sense:SYNSET (e.g. sense:cat.n.01, "
                        "its whole hyponym closure), or a file of wnids, one a line; recorded as the rows' label_space")
    z.add_argument("--names", help="class names in the prompts: wordnet (default) or openai (OpenAI's ImageNet-1k names)")
    z.add_argument("--knowledge", help="knowledge after the name: name (none, the default), def (WordNet definition), "
                                       "path (hypernyms) or def+path")
    z.add_argument("--knowledge-file", metavar="TSV", help="knowledge from a file, lines 'wnid<TAB>text'")
    z.add_argument("--templates", help="openai80 (default), simple7, or a file of templates with '{}' for the name")
    z.add_argument("--style", help="with knowledge: plain (a sentence, default) or elevater (ELEVATER's format)")
    p.add_argument("--download", action="store_true",
                   help="download missing weights from timm/torchvision hubs (needs internet; HF_HUB_OFFLINE wins)")
    p.add_argument("--features", action="store_true",
                   help="with --run: also store each image's frozen features in the run (features/<model>/: a "
                        "classifier's pooled pre-logit features, a zero-shot model's image embedding), from the same "
                        "forward pass as the predictions; runs on PyTorch; resumes like predictions")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def build_models_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m classify models",
                                description="The model registry, with whether each model's weights are on this machine.")
    p.add_argument("--family", choices=FAMILIES)
    p.add_argument("--available", action="store_true", help="only models that can run now")
    p.add_argument("--search", metavar="TEXT",
                   help="list pretrained names containing TEXT across timm, torchvision and the Hub models in the "
                        "Hugging Face cache (not only the registry), with whether their weights are here and the "
                        "command that fetches them; any listed name works with --models")
    p.add_argument("--limit", type=int, default=50, help="with --search: at most this many rows (0: all; default 50)")
    return p


def build_prompts_parser() -> argparse.ArgumentParser:
    from classify.zeroshot.labelsets import DEFAULT_LABEL_SET
    from classify.zeroshot.prompts import KNOWLEDGE, NAMES, STYLES, TEMPLATES

    p = argparse.ArgumentParser(
        prog="python -m classify prompts",
        description="The prompts a zero-shot model's text tower reads, built from each class's wnid: one "
                    "'wnid<TAB>prompt' line per class and template (classify/zeroshot/prompts.py). --coverage instead counts, "
                    "per label set, the classes with a WordNet definition and a hypernym path.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--wnids", help="comma-separated wnids, e.g. n02127052,n02123159")
    which.add_argument("--label-set", metavar="SET",
                       help=f"run (the --run's classes; the default with --run), a label space (imagenet-1k, "
                            f"imagenet-21k, …), sense:SYNSET (e.g. sense:cat.n.01: the sense and every WordNet noun "
                            f"under it), file:SHA, or a FILE of wnids (one a line); default {DEFAULT_LABEL_SET}")
    p.add_argument("--run", metavar="RUN_ID", help="the run whose classes --label-set run means")
    p.add_argument("--names", choices=NAMES, default="wordnet",
                   help="class names: WordNet lemmas (default) or OpenAI's curated ImageNet-1k names")
    p.add_argument("--knowledge", choices=[k for k in KNOWLEDGE if k != "file"], default="name",
                   help="added knowledge: none (name, default), the WordNet definition, the hypernym path, or both")
    p.add_argument("--knowledge-file", metavar="TSV", help="knowledge from a file: lines 'wnid<TAB>text'")
    p.add_argument("--templates", default="openai80",
                   help=f"{' or '.join(TEMPLATES)} (default openai80) or a FILE, one template a line with {{}}")
    p.add_argument("--style", choices=STYLES, default="plain",
                   help="how knowledge joins the template: a plain sentence (default) or ELEVATER's exact format")
    p.add_argument("--coverage", action="store_true",
                   help="print, per label set (every label space if none is chosen), how many classes have a "
                        "definition, a hypernym path, an OpenAI name (and a --knowledge-file line)")
    return p


def cmd_prompts(argv: list[str]) -> int:
    from core.labels import label_space_names

    from classify.zeroshot.labelsets import LabelSet, resolve_label_set
    from classify.zeroshot.prompts import Recipe, class_prompts, coverage

    parser = build_prompts_parser()
    args = parser.parse_args(argv)
    if args.coverage:
        if args.wnids:
            sets = [LabelSet("wnids", tuple(w.strip() for w in args.wnids.split(",") if w.strip()))]
        elif args.label_set or args.run:
            sets = [resolve_label_set(args.label_set or "run", run=args.run)]
        else:
            sets = [resolve_label_set(name) for name in label_space_names()]
        columns = ["classes", "definition", "path", "openai_name"] + (["knowledge_file"] if args.knowledge_file else [])
        print("\t".join(["label_set", *columns]))
        for label_set in sets:
            counts = coverage(label_set.wnids, knowledge_file=args.knowledge_file)
            print("\t".join([label_set.name, *(str(counts[c]) for c in columns)]))
        return 0
    if args.wnids:
        wnids = [w.strip() for w in args.wnids.split(",") if w.strip()]
        if not wnids:
            raise OptionError("--wnids is empty; give wnids separated by commas, e.g. n02127052,n02123159.")
        name = "wnids"
    elif args.label_set or args.run:
        label_set = resolve_label_set(args.label_set or "run", run=args.run)
        wnids, name = list(label_set.wnids), label_set.name
    else:
        parser.error("choose the classes: --wnids W1,W2, --label-set SET or --run RUN_ID")
    recipe = Recipe(names=args.names, knowledge=args.knowledge, templates=args.templates, style=args.style,
                    knowledge_file=args.knowledge_file)
    prompts = class_prompts(wnids, recipe)
    try:
        for wnid, texts in prompts.items():
            sys.stdout.write("".join(f"{wnid}\t{text}\n" for text in texts))
        sys.stdout.flush()
    except BrokenPipeError:  # '| head': the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    n_prompts = sum(len(t) for t in prompts.values())
    print(f"{len(prompts)} classes ({name}), {n_prompts} prompts; recipe tag {recipe.tag() or '(default)'}",
          file=sys.stderr)
    return 0


def _print_table(header: tuple[str, ...], rows: list[tuple]) -> None:
    """Columns padded to their widest cell; the last (a long command) is left unpadded."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)) + "  " + str(row[-1]))


def cmd_search(args) -> int:
    from classify.models.zoo import search

    rows, total = search(args.search, args.limit or None)
    if args.available:
        rows = [r for r in rows if r.weights_here]
    _print_table(("name", "library", "in registry", "label space", "weights here", "fetch command"),
                 [(r.name, r.library, r.in_registry or "-", r.label_space, "yes" if r.weights_here else "no",
                   r.fetch_command) for r in rows])
    shown = f"{len(rows)} shown" + (f" (--limit 0 shows all {total})" if args.limit and total > args.limit else "")
    print(f"{total} names contain {args.search!r}; {shown}. Any of them works with --models (its label space and "
          "family are inferred; --checkpoint MODEL=PATH for a local file).", file=sys.stderr)
    return 0


def cmd_models(argv: list[str]) -> int:
    from classify.models.registry import listed_input_configs
    from classify.models.weights import weights_status

    args = build_models_parser().parse_args(argv)
    if args.search is not None:
        return cmd_search(args)
    header = ("id", "family", "source", "label space", "params", "input", "weights")
    rows = []
    entries = list_models(args.family)
    statuses = [weights_status(entry) for entry in entries]
    inputs = listed_input_configs(entries)  # without importing timm, torchvision or open_clip (the cache's listing)
    for entry, status in zip(entries, statuses):
        if args.available and not status.available:
            continue
        cfg = inputs[entry.id]
        rows.append((entry.id, entry.family, entry.source, entry.label_space, f"{entry.num_params / 1e6:.1f}M",
                     f"{cfg.size}px crop {cfg.crop_pct:.3g} {cfg.interpolation}",
                     f"ready ({status.kind})" if status.available else f"missing: {status.fetch_command}"))
    _print_table(header, rows)
    return 0


def cmd_predict(argv: list[str], after_run: Callable[[Run], object] | None = None) -> int:
    parser = build_predict_parser()
    args = parser.parse_args(argv)  # before torch loads: --help and usage errors answer at once
    from classify.engine.types import InferenceOptions
    from classify.targets import check_folder_target, predict_folder, predict_run, result_entries

    if args.images and not args.out:
        parser.error("--images needs --out FILE (.csv or .parquet)")
    if args.run and args.out:
        parser.error("--out is for --images; with --run the predictions are stored in the run")
    if args.overwrite and not args.out:
        parser.error("--overwrite is for --images ... --out FILE")
    if args.int8_recheck is not None and args.precision != "int8":
        parser.error("--int8-recheck is for --precision int8 (the int8 -> fp32 cascade)")
    ray_given = [o for o in ("ray_address", "ray_actors", "ray_gpus_per_actor", "ray_join_timeout")
                 if getattr(args, o) is not None]
    if ray_given and args.engine != "ray":
        parser.error(f"--{ray_given[0].replace('_', '-')} is for --engine ray")
    if args.features and not args.run:
        parser.error("--features is for --run RUN_ID: features are stored in the run (import the folder first: "
                     "python -m crawl import DIR --run RUN_ID)")
    models, checkpoints = _model_selection(args)  # no PyTorch for the registry's models
    options = InferenceOptions(batch_size=args.batch_size, num_workers=args.workers, device=args.device,
                               precision=args.precision, int8_recheck=args.int8_recheck or "auto",
                               allow_download=args.download, backend=args.backend,
                               jpeg_draft=args.jpeg_draft, resampler=args.resampler,
                               checkpoints=checkpoints, engine=args.engine, ray_address=args.ray_address,
                               ray_actors=args.ray_actors, ray_gpus_per_actor=args.ray_gpus_per_actor,
                               gpu_decode=args.gpu_decode,
                               **({} if args.ray_join_timeout is None else {"ray_join_timeout": args.ray_join_timeout}))
    if args.features:  # PyTorch backend; ONNX-only choices refused (classify.features)
        from classify.features import feature_options

        options = feature_options(options)
    # The options' own mistakes first (above); then what is wrong with the run, the folder or --out, one
    # line before PyTorch loads (~2 s of CPU; --features has loaded it): 0.7 s for a folder that does not
    # exist, 2.7 s before (2026-12-06).
    run = RunStore().open_run(args.run) if args.run else None
    if args.images:
        check_folder_target(args.images, args.out)
    progress = None if args.no_progress else TerminalProgress(file=sys.stderr)
    from classify.engine.device import select_device
    from classify.zeroshot.classifier import build_settings
    from classify.zeroshot_runs import check_stored_label_sets

    try:
        # zero-shot models build their text classifier while loading: on the inference device, with a bar
        # (with --engine ray the actors build it on theirs: the driver's device is not asked for)
        with build_settings(progress=progress, device=None if args.engine == "ray" else select_device(args.device)):
            if run is not None:
                check_stored_label_sets(run.prediction_parts, result_entries(models, options), f"Run {run.run_id}")
                result = predict_run(run, models, options, progress)
                target = f"run {run.run_id}"
            else:
                from pathlib import Path

                from core.parts import PredictionParts

                from classify.targets import parts_folder_for

                if not args.overwrite:  # --overwrite: its batches start over, whatever label sets they hold
                    check_stored_label_sets(PredictionParts(parts_folder_for(expand_user(args.out))),
                                            result_entries(models, options), f"--out {args.out}")
                table, result = predict_folder(args.images, models, args.out, options, progress, overwrite=args.overwrite)
                target = f"{args.out} ({len(table)} rows)"
    finally:
        if progress is not None:
            progress.close()
    print(f"{result.summary()} -> {target}")
    if args.features:
        from classify.features import features_summary

        print(features_summary(run, list(result.models)))
    failed = sum(m.failed for m in result.models.values())
    if failed:
        print(f"{failed} (model, image) pairs failed: images not read, not decoded or refused; their rows say why "
              "(status 'failed').", file=sys.stderr)
    _print_skipped(result.skipped, args.images)
    if run is not None and after_run is not None:
        sys.stdout.flush()  # this stage's summary first, then the next stage's (a child process)
        after_run(run)
    return 0


def _print_skipped(skipped: list[tuple[str, str]], folder: str | None, shown: int = 20) -> None:
    """The entries of an images folder that were not read, with their reasons (stderr): nothing
    in DIR vanishes without a word."""
    if not skipped:
        return
    print(f"{len(skipped)} entries of {folder} were skipped, not read:", file=sys.stderr)
    for entry, reason in skipped[:shown]:
        print(f"  {entry}: {reason}", file=sys.stderr)
    if len(skipped) > shown:
        print(f"  ... and {len(skipped) - shown} more", file=sys.stderr)


def main(argv: list[str] | None = None, after_run: Callable[[Run], object] | None = None) -> int:
    """``after_run(run)``: called once a run's predictions are stored. The entry point
    (``classify/__main__.py``) passes the next stage's refresh of the run's derived tables; this
    library module cannot import that stage."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["models"]:
            return cmd_models(argv[1:])
        if argv[:1] == ["prompts"]:
            return cmd_prompts(argv[1:])
        return cmd_predict(argv, after_run)
    except WildLensError as exc:
        # A missing-weights message ends in the fetch command and runs to ~510 characters with this
        # machine's cache paths: a longer limit than one_line's default, so the fix is never cut off.
        print(f"error: {one_line(exc, limit=2000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished batches are stored; run the same command again to resume.", file=sys.stderr)
        return 130
