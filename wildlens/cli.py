"""The ``wildlens`` console command: one entry point for every stage and the dashboard.

    wildlens crawl ...      same as python -m crawl ...
    wildlens classify ...   same as python -m classify ...
    wildlens explain ...    same as python -m explain ...
    wildlens app [...]      the dashboard, exactly as `make run` starts it

Each subcommand hands the rest of the command line to that stage's own ``main`` (so ``wildlens
classify --help`` is the stage's help), through the same function its ``python -m`` form uses.
"""
from __future__ import annotations

import sys

USAGE = """usage: wildlens <command> [options]

WildLens: how ImageNet classifiers fail on web images, explained through WordNet.

commands:
  crawl      collect images from the web or import a local folder (wildlens crawl --help)
  classify   run models over a run's images or a folder (wildlens classify --help)
  explain    WordNet queries and metric tables (wildlens explain --help)
  app        start the dashboard on 127.0.0.1 (--share: beyond this machine; other options go to
             'streamlit run', e.g. --server.port 8502)
"""


def _crawl(argv: list[str]) -> int:
    from crawl.cli import main

    return main(argv)


def _classify(argv: list[str]) -> int:
    from classify.__main__ import main

    return main(argv)


def _explain(argv: list[str]) -> int:
    from explain.cli import main

    return main(argv)


def _app(argv: list[str]) -> int:
    from pages.launcher import serve

    return serve(argv)


COMMANDS = {"crawl": _crawl, "classify": _classify, "explain": _explain, "app": _app}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from . import __version__

        print(f"wildlens {__version__}")
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        print(f"error: unknown command {argv[0]!r}; choose one of {', '.join(COMMANDS)} (wildlens --help).",
              file=sys.stderr)
        return 2
    return int(command(argv[1:]) or 0)
