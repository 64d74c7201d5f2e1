"""Command line of explain/: ``python -m explain <command>``. A user's mistake (any
``core.errors.WildLensError``) prints ``error: <one line>`` and exits 2; anything else is a bug
and keeps its traceback."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import OptionError, WildLensError, one_line
from core.labels import DEFAULT_LABEL_SPACE, hyponym_classes, label_space_names, senses
from core.runstore import write_bytes_atomic

COMMANDS = {}


def command(func):
    COMMANDS[func.__name__.replace("cmd_", "")] = func
    return func


@command
def cmd_senses(args) -> int:
    """Noun senses of a word: name, class count in the label space, definition."""
    for sense in senses(args.query, args.label_space):
        print(f"{sense.name}\t{sense.n_classes}\t{sense.definition}")
    return 0


@command
def cmd_hyponyms(args) -> int:
    """Classes of the label space under a sense: wnid, tab, display name."""
    for cls in hyponym_classes(args.sense, args.label_space):
        print(f"{cls.wnid}\t{cls.name}" + (f"\t{' > '.join(cls.path)}" if args.paths else ""))
    return 0


class MetricsOutputError(WildLensError, ValueError):
    """The metric tables cannot be written where asked (a folder that is not writable, a full disk)."""


def _check_out_outside_runs(out) -> None:
    """``--out DIR`` is never the store's ``runs/`` folder nor inside it (resolved through links):
    `explain metrics FILE --out $WILDLENS_HOME/runs/r1` wrote three CSVs into run r1 (and `--out
    runs` into runs/ itself), as `classify --out` and `crawl --out` no longer may. Before any work."""
    from core.runstore import RunStore

    runs = RunStore().runs_dir.resolve()
    where = Path(out).expanduser().resolve()
    if where == runs or runs in where.parents:
        raise MetricsOutputError(f"--out {out}: that is inside the run store's runs folder ({runs}), which holds "
                                 "WildLens's runs only; give a folder outside it (a run's own tables are in its "
                                 "metrics/, read with --run RUN_ID).")


@command
def cmd_metrics(args) -> int:
    """Metric tables of a predictions CSV/Parquet (FILE --out DIR) or of a stored run (--run RUN_ID
    [--out DIR]): prints the per-model summary, writes per_model.csv, per_class.csv, confusions.csv."""
    if args.top_k < 0:
        raise OptionError("--top-k must be 0 (all confusions) or a positive number.")
    if (args.predictions is None) == (args.run is None):
        raise OptionError("give either a predictions FILE or --run RUN_ID (python -m explain metrics --help).")
    if args.out:
        _check_out_outside_runs(args.out)
    cache_dir = False if args.no_cache else None
    written: dict = {}
    try:
        if args.run:
            tables = _run_tables(args, cache_dir)
            if args.out:
                from .export import write_metric_tables

                written = write_metric_tables(tables, args.out)
        else:
            from .export import metrics_from_file

            if not args.out:
                raise OptionError("--out DIR is needed with a predictions FILE (the folder for the three CSVs).")
            tables, written = metrics_from_file(args.predictions, args.out, confusion_top_k=args.top_k or None,
                                                cache_dir=cache_dir)
    except OSError as exc:  # e.g. an output folder that cannot be written
        raise MetricsOutputError(f"cannot write the tables to {args.out}: {exc.strerror or exc}") from None

    import pandas as pd  # here, not at the top: `senses` and --help need no pandas

    def fmt(value) -> str:
        # pd.isna, not `value != value`: the tables' nullable columns hold pd.NA (a model without
        # mistakes has no sibling_rate; one whose every row failed has no accuracy), and pd.NA
        # refuses to be a truth value.
        return "NA" if pd.isna(value) else f"{value:.4f}"

    for row in tables.per_model.itertuples(index=False):
        print(f"{row.model}\tn={row.n}\taccuracy={fmt(row.accuracy)}\tsibling_rate={fmt(row.sibling_rate)}")
    for path in written.values():
        print(f"wrote {path}")
    return 0


def _run_tables(args, cache_dir):
    """A run's tables: its stored artefact (recomputed and stored only when stale) for the
    artefact's parameters; other --top-k values are computed and not stored."""
    from core.runstore import RunStore
    from .artefact import PARAMETERS, ensure_metrics
    from .metrics import compute_metric_tables

    run = RunStore().open_run(args.run)
    if (args.top_k or None) != PARAMETERS["confusion_top_k"]:
        tables = compute_metric_tables(run.usable_predictions(), confusion_top_k=args.top_k or None,
                                       cache_dir=cache_dir)
        print(f"metrics of run {run.run_id}: computed with --top-k {args.top_k} (not stored: the run's metrics/ "
              f"keeps top {PARAMETERS['confusion_top_k']})", file=sys.stderr)
        return tables
    result = ensure_metrics(run, cache_dir=cache_dir)
    print(result.describe(run), file=sys.stderr)
    return result.tables


def _metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("predictions", nargs="?", help="CSV or Parquet with model, image, true_wnid, pred_wnid "
                                                  "[, pred_wnid_2..5, prob_1..5, status]")
    p.add_argument("--run", metavar="RUN_ID", help="a stored run instead of a FILE: its metrics/ tables, "
                                                   "recomputed only when its predictions or manifest changed")
    p.add_argument("--out", help="folder for per_model.csv, per_class.csv, confusions.csv (needed with FILE)")
    p.add_argument("--top-k", type=int, default=3, help="confusions kept per true class (0 = all; default 3)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk similarity cache")


cmd_metrics.add_arguments = _metrics_arguments


@command
def cmd_concepts(args) -> int:
    """ImageNet-CoG's unseen concepts: every ImageNet-21k concept with its similarity to the seen
    classes, eligibility and level; writes DIR/concepts.csv and prints the counts."""
    from .concepts import MIN_IMAGES, LEVELS, concept_levels, level_bounds, read_image_counts
    from .export import table_to_csv_bytes

    _check_out_outside_runs(args.out)
    counts = read_image_counts(args.image_counts) if args.image_counts else None
    result = concept_levels(args.seen, counts)
    target = Path(args.out) / "concepts.csv"
    try:
        write_bytes_atomic(target, table_to_csv_bytes(result.table))
    except OSError as exc:
        raise MetricsOutputError(f"cannot write {target}: {exc.strerror or exc}; choose a writable --out folder.") \
            from None
    c = result.counts()
    print(f"seen: {result.seen}; concepts: {c['concepts']:,} (ImageNet-21k); eligible unseen: {c['eligible']:,}")
    print("removed: " + ", ".join(f"{r} {c['removed_' + r]:,}" for r in
                                   ("seen", "ancestor_of_seen", "person", "few_images", "has_eligible_descendant")))
    if not result.image_counts_used:
        print(f"image counts: not applied (they do not ship offline; --image-counts CSV applies CoG's "
              f"{MIN_IMAGES}-image rule, with which CoG keeps 5,146 concepts)")
    bounds = level_bounds(c["eligible"])
    for k in range(1, LEVELS + 1):
        level = result.table[result.table["level"] == k]
        print(f"L{k}: {c[f'L{k}']:,} concepts, ranks {bounds[k - 1][0] + 1}-{bounds[k - 1][1]}, "
              f"sim_to_seen {level['sim_to_seen'].max():.4f} .. {level['sim_to_seen'].min():.4f}")
    print(f"wrote {target} ({result.seconds:.1f} s)")
    return 0


def _concepts_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seen", default=DEFAULT_LABEL_SPACE, choices=label_space_names(),
                   help=f"the label space the model has seen (default {DEFAULT_LABEL_SPACE})")
    p.add_argument("--image-counts", metavar="CSV",
                   help="wnid,count per ImageNet-21k concept: applies CoG's rule of at least 782 images")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for concepts.csv")


cmd_concepts.add_arguments = _concepts_arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m explain", description="WordNet queries and metrics for WildLens.")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_label_space(p):
        p.add_argument("--label-space", default=DEFAULT_LABEL_SPACE, choices=label_space_names(),
                       help=f"classes to count/list (default {DEFAULT_LABEL_SPACE})")

    p = sub.add_parser("senses", help=cmd_senses.__doc__)
    p.add_argument("query", help="a word ('cat'), a synset name ('cat.n.01') or a wnid")
    add_label_space(p)
    p = sub.add_parser("hyponyms", help=cmd_hyponyms.__doc__)
    p.add_argument("sense", help="a synset name such as cat.n.01 (or a word with a single noun sense)")
    add_label_space(p)
    p.add_argument("--paths", action="store_true", help="also print the WordNet path from the sense")
    for name, func in COMMANDS.items():
        if name not in sub.choices and getattr(func, "add_arguments", None):
            func.add_arguments(sub.add_parser(name, help=func.__doc__))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except WildLensError as exc:  # a user's mistake: one line that says the fix; anything else is a bug
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        return 0
