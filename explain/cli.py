"""Command line of explain/: ``python -m explain <command>``. Errors print one line, exit 2."""
from __future__ import annotations

import argparse
import sys

from .labels import DEFAULT_LABEL_SPACE, QueryError, hyponym_classes, label_space_names, senses

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
    except (QueryError, ValueError, KeyError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` closed the pipe: not an error
        return 0
