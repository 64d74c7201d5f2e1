"""Command line of explain/: ``python -m explain <command>``. A user's mistake (any
``core.errors.WildLensError``) prints ``error: <one line>`` and exits 2; anything else is a bug
and keeps its traceback."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import OptionError, WildLensError, one_line, printable
from core.labels import DEFAULT_LABEL_SPACE, hyponym_classes, label_space_names, senses
from core.userfile import expand_user

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


def _check_out_outside_runs(out) -> Path:
    """``--out DIR`` is never the store's ``runs/`` folder nor inside it (resolved through links):
    `explain metrics FILE --out $WILDLENS_HOME/runs/r1` wrote three CSVs into run r1 (and `--out
    runs` into runs/ itself), as `classify --out` and `crawl --out` no longer may. Before any work.
    Returns DIR with '~' expanded: the folder checked is the one the caller writes to (it checked
    '~/x' expanded and wrote './~/x', into a run from inside its folder; hostile check, 2026-12-07)."""
    from core.runstore import RunStore

    runs = RunStore().runs_dir.resolve()
    given = expand_user(out, "--out")
    where = given.resolve()
    if where == runs or runs in where.parents:
        raise MetricsOutputError(f"--out {out}: that is inside the run store's runs folder ({runs}), which holds "
                                 "WildLens's runs only; give a folder outside it (a run's own tables are in its "
                                 "metrics/, read with --run RUN_ID).")
    return given


@command
def cmd_metrics(args) -> int:
    """Metric tables of a predictions CSV/Parquet (FILE --out DIR) or of a stored run (--run RUN_ID
    [--out DIR]): prints the per-model summary, writes per_model.csv, per_class.csv, confusions.csv."""
    if args.top_k < 0:
        raise OptionError("--top-k must be 0 (all confusions) or a positive number.")
    if (args.predictions is None) == (args.run is None):
        raise OptionError("give either a predictions FILE or --run RUN_ID (python -m explain metrics --help).")
    if (args.raw or args.curated) and not args.run:
        raise OptionError("--raw and --curated choose a view of a run's curation: give --run RUN_ID.")
    if args.engine == "ray" and not args.run:
        raise OptionError("--engine ray computes a stored run's tables on Ray: give --run RUN_ID.")
    from core.raysession import check_engine_arguments

    check_engine_arguments(args)
    if args.out:
        args.out = _check_out_outside_runs(args.out)
    ci = _interval_options(args)
    cache_dir = False if args.no_cache else None
    written: dict = {}
    try:
        if args.run:
            tables = _run_tables(args, cache_dir, ci)
            if args.out:
                from .export import write_metric_tables

                written = write_metric_tables(tables, args.out)
        else:
            from .export import metrics_from_file

            if not args.out:
                raise OptionError("--out DIR is needed with a predictions FILE (the folder for the three CSVs).")
            tables, written = metrics_from_file(args.predictions, args.out, confusion_top_k=args.top_k or None,
                                                cache_dir=cache_dir, ci=ci)
    except OSError as exc:  # e.g. an output folder that cannot be written
        where = f"write the tables to {args.out}" if args.out else f"read or store the tables of run {args.run}"
        raise MetricsOutputError(f"cannot {where}: {_why_not(args.out, exc)}") from None

    import pandas as pd  # here, not at the top: `senses` and --help need no pandas

    def fmt(value) -> str:
        # pd.isna, not `value != value`: the tables' nullable columns hold pd.NA (a model without
        # mistakes has no sibling_rate; one whose every row failed has no accuracy), and pd.NA
        # refuses to be a truth value.
        return "NA" if pd.isna(value) else f"{value:.4f}"

    def with_ci(row, column) -> str:
        low, high = getattr(row, f"{column}_ci_low"), getattr(row, f"{column}_ci_high")
        return fmt(getattr(row, column)) + ("" if pd.isna(low) else f" [{fmt(low)}, {fmt(high)}]")

    print(ci.describe() if ci else "intervals: not computed (--no-ci; the *_ci_* columns are NA)", file=sys.stderr)

    if tables.per_model.empty:
        print("no predictions to count" + (" (the curated view excludes every image: --raw shows the run as "
                                            "collected)" if getattr(args, "_all_excluded", False) else ""),
              file=sys.stderr)
    for row in tables.per_model.itertuples(index=False):  # a model id is outside text: printed escaped
        print(f"{printable(row.model)}\tn={row.n}\taccuracy={with_ci(row, 'accuracy')}\t"
              f"sibling_rate={with_ci(row, 'sibling_rate')}")
    for path in written.values():
        print(f"wrote {path}")
    return 0


def _interval_options(args):
    """--ci / --resamples / --seed as explain.uncertainty.IntervalOptions; None with --no-ci."""
    from .uncertainty import IntervalOptions

    if args.no_ci:
        return None
    level = args.ci / 100 if args.ci >= 1 else args.ci  # --ci 95 and --ci 0.95 both mean 95 %; 1 means 1 %
    try:
        return IntervalOptions(level=level, resamples=args.resamples, seed=args.seed)
    except ValueError as exc:
        raise OptionError(f"--ci/--resamples/--seed: {exc}.") from None


def _run_tables(args, cache_dir, ci):
    """A run's tables: its stored artefact (recomputed and stored only when stale) for the
    artefact's parameters; other --top-k or interval settings are computed and not stored."""
    from core.runstore import RunStore
    from .artefact import PARAMETERS, ensure_metrics
    from .metrics import DEFAULT_INTERVALS
    from .streaming import stream_metric_tables, usable_chunks

    from .curation_view import CURATED, RAW, default_view

    run = RunStore().open_run(args.run)
    view = RAW if args.raw else CURATED if args.curated else default_view(run)
    if view == CURATED and not (args.raw or args.curated):
        print(f"run {run.run_id} has a curation log: the curated view (its relabels and exclusions applied; "
              "--raw for the tables without them)", file=sys.stderr)
    if (args.top_k or None) != PARAMETERS["confusion_top_k"] or ci != DEFAULT_INTERVALS:
        # A chunk of models at a time (explain.streaming): the tables of every prediction, in bounded memory.
        if args.engine == "ray":
            from .ray_metrics import ray_metric_tables

            tables, change = ray_metric_tables(run, view, confusion_top_k=args.top_k or None, ci=ci,
                                               address=args.ray_address, join_timeout=args.ray_join_timeout,
                                               cache_dir=cache_dir)
        else:
            tables, change = stream_metric_tables(run, view, confusion_top_k=args.top_k or None, cache_dir=cache_dir,
                                                  ci=ci)
        print(f"metrics of run {run.run_id}, {view} view" + (f" ({change.describe()})" if view == CURATED else "")
              + f": computed with --top-k {args.top_k} and "
              f"{'no intervals' if ci is None else ci.describe()} (not stored: the run's metrics/ keeps top "
              f"{PARAMETERS['confusion_top_k']} and {DEFAULT_INTERVALS.describe()})", file=sys.stderr)
        return tables
    result = ensure_metrics(run, cache_dir=cache_dir, view=view, engine=args.engine, ray_address=args.ray_address,
                            ray_join_timeout=args.ray_join_timeout)
    print(result.describe(run), file=sys.stderr)
    # Every prediction excluded by the curation (the raw view has rows): counted a chunk at a time.
    args._all_excluded = (view == CURATED and result.tables.per_model.empty
                          and any(len(rows) for rows in usable_chunks(run, RAW)))
    # The per-prediction explanations (relation, severity, error type) of this view, stored beside the
    # tables: what crawl's FiftyOne export reads and tells the user to make with this command. They are
    # typed with every prediction in memory (explain.error_types), so a run larger than one streamed
    # chunk gets its tables only, and the command says so.
    from core.runstore import StoreError
    from .error_types import TooManyToExplain, ensure_explained

    try:
        ensure_explained(run, view, cache_dir=cache_dir)
    except TooManyToExplain as exc:
        print(f"note: {exc}", file=sys.stderr)
    except StoreError as exc:  # a run that cannot be written, or a part damaged since: the tables are still right
        print(f"note: per-prediction explanations not made: {one_line(exc)}", file=sys.stderr)
    return result.tables


def _metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("predictions", nargs="?", help="CSV or Parquet with model, image, true_wnid, pred_wnid "
                                                  "[, pred_wnid_2..5, prob_1..5, status], or a FiftyOne export "
                                                  "(its folder, labels.json or samples.json: ground_truth is the "
                                                  "truth, every other Classification field a model's top-1)")
    p.add_argument("--run", metavar="RUN_ID", help="a stored run instead of a FILE: its metrics/ tables, "
                                                   "recomputed only when its predictions or manifest changed")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--raw", action="store_true", help="with --run: the tables without the run's curation "
                                                         "(default once the run has a curation log: --curated)")
    view.add_argument("--curated", action="store_true", help="with --run: the curation log's relabels and "
                                                             "exclusions applied (python -m crawl curate)")
    p.add_argument("--out", help="folder for per_model.csv, per_class.csv, confusions.csv (needed with FILE)")
    p.add_argument("--top-k", type=int, default=3, help="confusions kept per true class (0 = all; default 3)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk similarity cache")
    _interval_arguments(p)
    p.add_argument("--no-ci", action="store_true", help="no intervals (the *_ci_low / *_ci_high columns stay NA)")
    from core.raysession import add_engine_arguments

    add_engine_arguments(p, "with --run: each chunk of models a Ray Data task; nodes read the shared run store")


def _interval_arguments(p: argparse.ArgumentParser) -> None:
    from .uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED

    p.add_argument("--ci", type=float, default=95.0, metavar="LEVEL",
                   help="interval level in percent or as a fraction (default 95)")
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                   help=f"bootstrap resamples over images (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")


cmd_metrics.add_arguments = _metrics_arguments


@command
def cmd_compare(args) -> int:
    """Two models on the images both classified: McNemar on accuracy, paired bootstrap of every mean,
    q-values over the classes; prints the overall row and the classes with evidence, writes compare.csv
    (--out DIR). --family-a/--family-b: the two-level bootstrap of two families instead."""
    from .compare import compare_models, family_claims

    if (args.predictions is None) == (args.run is None):
        raise OptionError("give either a predictions FILE or --run RUN_ID (python -m explain compare --help).")
    args.no_ci = False
    ci = _interval_options(args)
    if args.out:
        args.out = _check_out_outside_runs(args.out)
    df = _compare_input(args)
    families = _parse_families(args.family, _models_of(df))
    if args.family_a or args.family_b:
        if not (args.family_a and args.family_b):
            raise OptionError("give both --family-a and --family-b (e.g. --family-a transformer --family-b CNN).")
        if args.models or args.model_a or args.model_b:
            raise OptionError("give either --models A,B (or --model-a/--model-b) or --family-a/--family-b, not both.")
        claims = family_claims(df, args.family_a, args.family_b, families=families, options=ci)
        if not claims.possible:
            print(f"no family claim: {claims.reason} (python -m explain compare ... --models A,B)")
            if args.out:
                print("nothing written: there is no family claim to write", file=sys.stderr)
            return 0
        table = claims.table
        print(f"{claims.family_a} ({len(claims.models_a)} models) vs {claims.family_b} ({len(claims.models_b)} "
              f"models), {ci.describe()}")
        for row in table.itertuples(index=False):
            print(f"{row.statistic}\t{_num(row.value_a)} vs {_num(row.value_b)}\tdiff {_num(row.diff, '+')} "
                  f"[{_num(row.diff_ci_low, '+')}, {_num(row.diff_ci_high, '+')}]\tp={_num(row.p, fmt='.4g')}\t"
                  f"q={_num(row.q, fmt='.4g')}\t{row.verdict} (models: {row.n_models_a} vs {row.n_models_b})")
        return _write_table(table, args.out, "family_claims.csv")
    model_a, model_b = _model_pair(args, _models_of(df))
    comparison = compare_models(df, model_a, model_b, options=ci)
    table = comparison.table
    overall = comparison.overall
    print(f"A = {printable(model_a)}, B = {printable(model_b)}: {int(overall['n'])} paired images; {ci.describe()}")
    for note in comparison.notes:
        print(f"note: {note}", file=sys.stderr)
    from .compare import STATISTICS

    for s in STATISTICS:
        o = {k: overall[f"{s.name}_{k}"] for k in ("a", "b", "diff", "diff_ci_low", "diff_ci_high", "p", "q", "verdict")}
        print(f"overall {s.name}\t{_num(o['a'])} vs {_num(o['b'])}\tdiff {_num(o['diff'], '+')} "
              f"[{_num(o['diff_ci_low'], '+')}, {_num(o['diff_ci_high'], '+')}]\tp={_num(o['p'], fmt='.4g')}\t"
              f"q={_num(o['q'], fmt='.4g')}\t{o['verdict']}")
    classes = table[table["scope"] == "class"]
    shown = classes[classes["verdict"].isin(["A better", "B better"])]
    print(f"classes: {len(classes)}; accuracy differs with q < 0.05 in {len(shown)}"
          + (":" if len(shown) else ""))
    for row in shown.itertuples(index=False):
        print(f"  {row.true_wnid}\tn={row.n}\tdiff {_num(row.accuracy_diff, '+')}\tp={_num(row.p, fmt='.4g')}\t"
              f"q={_num(row.q, fmt='.4g')}\t{row.verdict}")
    return _write_table(table, args.out, "compare.csv")


def _num(value, sign: str = "", fmt: str = ".4f") -> str:
    """A number for the terminal; NA (pandas' NA, NaN, None) as 'NA', as explain metrics prints it."""
    import pandas as pd

    if value is None or pd.isna(value):
        return "NA"
    return f"{float(value):{sign}{fmt}}"


def _compare_input(args):
    if args.run:
        from core.runstore import RunStore

        return RunStore().open_run(args.run).usable_predictions()
    from .export import read_predictions_file
    from .metrics import PredictionsError

    df, line_of_row = read_predictions_file(args.predictions)
    try:  # validated here so that a bad row is named by its file line, as explain metrics does
        from .metrics import _read_rows

        _read_rows(df)
    except PredictionsError as exc:
        raise PredictionsError(f"{Path(args.predictions).name}: {exc.describe(line_of_row)}") from None
    return df


def _models_of(df) -> list[str]:
    """The model ids of a predictions table, as compare reads them (str of each non-empty value)."""
    return [str(m) for m in df["model"].dropna().unique()] if "model" in df.columns else []


MAX_MODEL_COMMAS = 256  # commas --models is cut at; past that, --model-a/--model-b (each cut is a copy of the text)


def _model_pair(args, models: list[str]) -> tuple[str, str]:
    """The two models to compare: ``--model-a``/``--model-b`` as given, or ``--models A,B`` cut at the
    comma that leaves a model of these predictions on both sides. Why: an uploaded table's model ids
    are anyone's text ("resnet50,ft" is a fine id); cutting at every comma made such a model impossible
    to name. One comma and no such cut: the two halves, reported as unknown by the comparison."""
    if args.model_a is not None or args.model_b is not None:
        if args.models is not None:
            raise OptionError("give either --models A,B or --model-a A --model-b B, not both.")
        if not (args.model_a and args.model_b):
            raise OptionError("give both --model-a and --model-b, each a model id (or --models A,B).")
        return args.model_a, args.model_b
    text = args.models or ""
    commas = text.count(",")
    if not commas:
        raise OptionError("--models A,B names the two models to compare (two model ids, comma-separated; "
                          "--model-a A --model-b B for ids that hold commas).")
    if commas > MAX_MODEL_COMMAS:
        raise OptionError(f"--models holds {commas:,} commas; give --model-a A --model-b B.")
    known, fits, at = set(models), [], -1
    while (at := text.find(",", at + 1)) >= 0:
        a, b = text[:at].strip(), text[at + 1:].strip()
        if a in known and b in known and a != b:  # a model against itself is no reading (refused anyway)
            fits.append((a, b))
    if len(fits) == 1:
        return fits[0]
    if len(fits) > 1:
        readings = "; ".join(f"{printable(repr(a))} and {printable(repr(b))}" for a, b in fits[:3])
        more = f" (and {len(fits) - 3} more)" if len(fits) > 3 else ""
        raise OptionError(f"--models can be read as {readings}{more}: give --model-a A --model-b B.")
    if commas == 1:
        a, b = (side.strip() for side in text.split(","))
        if not (a and b):
            raise OptionError("--models A,B: one side of the comma is empty; give two model ids.")
        return a, b
    from .compare import shown_models

    raise OptionError(f"--models: none of its {commas} commas leaves a model of these predictions on both sides "
                      f"(the models are: {shown_models(models) or 'none'}); give --model-a A --model-b B.")


def _family_items(value: str, known: set[str]) -> list[str]:
    """One ``--family`` value cut into MODEL=FAMILY items: the one way of cutting it at commas into items
    whose model (before the item's last '=') is a model of these predictions, when there is exactly
    one (refused where there are several); else each piece without '=' (empty too) with the next piece
    (``a,b=CNN`` is model ``a,b``), whose unknown model the comparison then names. Why the models:
    ``vit=b,16=ViT`` reads as model ``vit=b,16`` only if the predictions have it (the plain rule cut it
    into ``vit`` and ``16``)."""
    pieces = value.split(",")
    if len(pieces) - 1 > MAX_MODEL_COMMAS:
        raise OptionError(f"--family holds {len(pieces) - 1:,} commas; give one --family MODEL=FAMILY per model.")

    def fits(i: int, j: int) -> bool:
        item = ",".join(pieces[i:j])
        return "=" in item and item.rpartition("=")[0].strip() in known

    ways = [0] * len(pieces) + [1]  # ways[i]: cuts of pieces[i:] into known items, counted up to 2
    for i in range(len(pieces) - 1, -1, -1):
        ways[i] = min(2, sum(ways[j] for j in range(i + 1, len(pieces) + 1) if ways[j] and fits(i, j)))
    if ways[0] > 1:
        raise OptionError(f"--family {printable(repr(value))} can be cut into models of these predictions in more than "
                          "one way; write the families in the predictions' family column instead.")
    if ways[0] == 1:
        items, i = [], 0
        while i < len(pieces):
            j = next(j for j in range(i + 1, len(pieces) + 1) if ways[j] and fits(i, j))
            items.append(",".join(pieces[i:j]))
            i = j
        return items
    items, pending = [], None
    for piece in pieces:
        item = piece if pending is None else f"{pending},{piece}"
        pending = None if "=" in item else item
        if pending is None:
            items.append(item)
    if pending is not None:
        raise OptionError(f"--family {printable(repr(pending))}: give MODEL=FAMILY (e.g. vit_base=transformer).")
    return items


def _parse_families(values, models=()) -> dict[str, str]:
    """``--family MODEL=FAMILY[,MODEL=FAMILY...]`` (:func:`_family_items` says how a value is cut; the
    family is after an item's last '=', since a model id may hold '='). A model given two families is
    refused."""
    out: dict[str, str] = {}
    known = set(models)
    for value in values or []:
        for item in _family_items(value, known):
            model, _, family = item.rpartition("=")
            model, family = model.strip(), family.strip()
            if not model or not family:
                raise OptionError(f"--family {printable(repr(item))}: give MODEL=FAMILY (e.g. vit_base=transformer).")
            if out.get(model, family) != family:
                raise OptionError(f"--family gives {printable(repr(model))} two families ({out[model]}, {family}); "
                                  "give one.")
            out[model] = family
    return out


def _why_not(out, exc: OSError) -> str:
    """Why ``out`` could not be written, in words: a symbolic link to nowhere made the folder's mkdir say
    'File exists' (a hostile-input campaign, 2026-12-06), which named no fix."""
    from core.userfile import broken_link_reason

    broken = broken_link_reason(out) if out else None
    return f"{broken}; give a folder that exists, or a new name" if broken else f"{exc.strerror or exc}"


def _write_table(table, out, name: str) -> int:
    if out is None:
        return 0
    if not str(out).strip():
        raise OptionError("--out is empty: give the folder to write to (e.g. --out results/).")
    from .export import table_to_csv_bytes

    target = Path(out) / name
    try:
        from core.runstore import write_bytes_atomic

        write_bytes_atomic(target, table_to_csv_bytes(table))
    except OSError as exc:
        raise MetricsOutputError(f"cannot write {target}: {_why_not(out, exc)}; choose a writable --out folder.") \
            from None
    print(f"wrote {target}")
    return 0


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("predictions", nargs="?", help="CSV or Parquet of predictions with an image column")
    p.add_argument("--run", metavar="RUN_ID", help="a stored run instead of a FILE")
    p.add_argument("--models", metavar="A,B", help="the two models to compare (an id starting with '-': --models=-a,b)")
    p.add_argument("--model-a", metavar="A", help="model A by its exact id (for ids that hold commas; --model-a=-a)")
    p.add_argument("--model-b", metavar="B", help="model B by its exact id")
    p.add_argument("--family-a", metavar="FAMILY", help="compare two families instead (e.g. transformer)")
    p.add_argument("--family-b", metavar="FAMILY", help="the other family (e.g. CNN)")
    p.add_argument("--family", action="append", metavar="MODEL=FAMILY",
                   help="a model's family where the predictions have no family column (repeatable, comma-separated)")
    p.add_argument("--out", metavar="DIR", help="folder for compare.csv (or family_claims.csv)")
    _interval_arguments(p)


cmd_compare.add_arguments = _compare_arguments


@command
def cmd_concepts(args) -> int:
    """ImageNet-CoG's unseen concepts: every ImageNet-21k concept with its similarity to the seen
    classes, eligibility and level; writes DIR/concepts.csv and prints the counts."""
    from .concepts import MIN_IMAGES, LEVELS, concept_levels, level_bounds, read_image_counts
    from .export import table_to_csv_bytes

    args.out = _check_out_outside_runs(args.out)
    counts = read_image_counts(args.image_counts) if args.image_counts else None
    result = concept_levels(args.seen, counts)
    target = Path(args.out) / "concepts.csv"
    try:
        from core.runstore import write_bytes_atomic

        write_bytes_atomic(target, table_to_csv_bytes(result.table))
    except OSError as exc:
        raise MetricsOutputError(f"cannot write {target}: {_why_not(args.out, exc)}; choose a writable --out "
                                 "folder.") from None
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
