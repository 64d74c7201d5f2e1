"""Command line of probe/: ``python -m probe --run RUN_ID --models M1,M2 [--shots …] [--seeds …]``.

Reads stored features only (``features/<model>/`` under the run); writes ``probes/results.parquet``
and ``probes/per_class.parquet``, or with ``--label-issues`` ``probes/label_issues.parquet``.
A user's mistake (any ``core.errors.WildLensError``) prints ``error: <one line>`` and exits 2;
anything else is a bug and keeps its traceback."""
from __future__ import annotations

import argparse
import sys

from core.errors import OptionError, WildLensError, one_line

from .fewshot import SEEDS, SHOTS


SEED_MAX = 2 ** 32 - 1  # numpy.random.default_rng takes more, but the tables' Int64 column and the legacy
# seeding (RandomState, scikit-learn's random_state) stop at 2**32 - 1: one range everywhere


def _int_list(option: str, text: str, minimum: int, maximum: int | None = None) -> list[int]:
    values = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = int(item)
        except ValueError:
            raise OptionError(f"{option}: {item!r} is not a whole number (give e.g. {option} 1,2,4,8).") from None
        if maximum is not None and not minimum <= value <= maximum:
            shown = item if len(item) <= 30 else item[:27] + "..."
            raise OptionError(f"{option}: {shown} is outside {minimum} to {maximum}; give whole numbers in that range "
                              f"(e.g. {option} 22,37,45).")
        if value < minimum:
            raise OptionError(f"{option}: {value} is below {minimum}.")
        values.append(value)
    if not values:
        raise OptionError(f"{option} needs at least one value (e.g. {option} 1,2,4,8).")
    return sorted(set(values))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m probe",
        description="Linear probes (multinomial logistic regression on L2-normalised stored features, C chosen on a "
                    "validation split of the training shots), few-shot over N images per class and several seeds; "
                    "or cleanlab's label issues (--label-issues).")
    p.add_argument("--run", required=True, metavar="RUN_ID", help="the run whose stored features to probe")
    p.add_argument("--models", required=True, metavar="M1,M2",
                   help="model ids with stored features (python -m classify --run RUN_ID --models M --features)")
    p.add_argument("--shots", default=",".join(map(str, SHOTS)), metavar="N1,N2",
                   help=f"images per class to train on (default {','.join(map(str, SHOTS))}; capped at each class's "
                        "distinct images minus one, stated in per_class.parquet; N above what every class holds "
                        "runs once, as the largest N they allow)")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), metavar="S1,S2",
                   help=f"random seeds of the draws, whole numbers from 0 to {2 ** 32 - 1} (default ImageNet-CoG's "
                        f"{','.join(map(str, SEEDS))})")
    p.add_argument("--label-issues", action="store_true",
                   help="instead of the few-shot sweep: cleanlab's find_label_issues on out-of-fold probe "
                        "probabilities, written to probes/label_issues.parquet")
    from core.raysession import add_engine_arguments

    add_engine_arguments(p, "each (model, N, seed, variant) fit a Ray task; bit for bit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except WildLensError as exc:  # a user's mistake: one line that says the fix; anything else is a bug
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        return 0


def _run(args) -> int:
    from core.runstore import RunStore

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models:
        raise OptionError("--models needs at least one model id (e.g. --models efficientnet_lite0).")
    models = list(dict.fromkeys(models))
    shots = _int_list("--shots", args.shots, 1)
    seeds = _int_list("--seeds", args.seeds, 0, SEED_MAX)
    from core.raysession import check_engine_arguments

    check_engine_arguments(args)
    if args.engine == "ray" and args.label_issues:
        raise OptionError("--label-issues runs in this process (one cross-validated fit per model); drop --engine ray.")
    run = RunStore().open_run(args.run)

    from .artefact import LABEL_ISSUES, PER_CLASS, RESULTS, probes_dir, run_label_issues, run_probes

    def note(line: str) -> None:
        print(line if line.startswith("warning: ") else f"note: {line}")

    if args.label_issues:
        table = run_label_issues(run, models, notes=note)
        for model, group in table.groupby("model", sort=True):
            flagged = group[group["is_issue"]]
            print(f"{model}\timages={len(group)}\tissues={len(flagged)}\tC={group['C'].iloc[0]:g}")
            for row in flagged.itertuples(index=False):
                print(f"  {row.image}\t{row.true_wnid} -> {row.suggested_wnid}\tlabel_quality={row.label_quality:.3f}")
        print(f"wrote {probes_dir(run) / LABEL_ISSUES}")
        return 0

    import pandas as pd  # here, not at the top: --help needs no pandas

    fits = None
    if args.engine == "ray":
        from .ray_fits import ray_fits

        fits = ray_fits(args.ray_address, args.ray_join_timeout)
    results, _ = run_probes(run, models, shots, seeds, notes=note, fits=fits)
    summary = (results.groupby(["model", "variant", "shots"], sort=True)
               .agg(seeds=("top1", "size"), n_train=("n_train", "first"), capped=("capped_classes", "first"),
                    top1=("top1", "mean"), top1_std=("top1", "std"), top5=("top5", "mean"),
                    hp=("hp_source", "first")).reset_index())
    for row in summary.itertuples(index=False):
        std = "" if row.seeds < 2 else f" ±{row.top1_std:.4f}"
        top5 = "NA" if pd.isna(row.top5) else f"{row.top5:.4f}"
        print(f"{row.model}\t{row.variant}\tN={row.shots}\tseeds={row.seeds}\tn_train={row.n_train}"
              f"\tcapped_classes={row.capped}\ttop1={row.top1:.4f}{std}\ttop5={top5}\tC:{row.hp}")
    print(f"wrote {probes_dir(run) / RESULTS}")
    print(f"wrote {probes_dir(run) / PER_CLASS}")
    return 0
