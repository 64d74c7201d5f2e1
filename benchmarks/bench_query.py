"""Cold start of a WordNet query, beside the same answers through NLTK (issue 26, target 1).

Run from the repository root: ``python benchmarks/bench_query.py [--repeats 5]``.

Prints, each the median wall time of ``--repeats`` fresh processes (the figure a user waits for):

1. ``python -m explain senses cat`` and ``python -m explain hyponyms cat.n.01 --paths`` as shipped:
   the compact noun graph (:mod:`core.wordgraph`), no NLTK, no pandas. Target <= 1.0 s each.
2. The yardstick, in the same run: a process that gives the same answers the way WildLens did
   before the graph (NLTK's reader through :mod:`core.wordnet`: ``wn.synsets``, the hyponym
   closure over ``Synset`` objects, ``Lemma.count()``), with ``explain.cli``'s imports of that
   time (``core.runstore``, hence pandas). Its output is checked equal to the shipped command's.
3. The Query page answering a new word (``streamlit.testing.v1.AppTest``, server side): the page
   first loaded with 'cat', then each of a few new words typed; median of those renders. Target
   <= 0.5 s.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NEW_WORDS = ("dog", "crane", "car", "bird", "tree", "guitar", "boat")

# The pre-graph path: what `explain senses cat` / `explain hyponyms cat.n.01 --paths` computed.
YARDSTICK = r"""
import sys
from collections import deque
import core.runstore  # explain.cli imported it at the top (pandas)
from core.labels import get_label_space
from core.wordnet import get_wordnet, wnid_of
wn = get_wordnet()
space = get_label_space("imagenet-1k")

def closure(sense):
    parent, queue = {sense: None}, deque([sense])
    while queue:
        current = queue.popleft()
        for child in sorted(current.hyponyms() + current.instance_hyponyms(), key=lambda s: s.name()):
            if child not in parent:
                parent[child] = current
                queue.append(child)
    return parent

if sys.argv[1] == "senses":
    word = sys.argv[2]
    base = wn.morphy(word, "n") or word
    rows = []
    for s in wn.synsets(word, pos="n"):
        n = sum(1 for c in closure(s) if wnid_of(c) in space)
        tags = sum(l.count() for l in s.lemmas() if l.name().lower() in {word, base.lower()})
        rows.append((s.name(), n, s.definition(), tags))
    for name, n, definition, _ in sorted(rows, key=lambda r: -r[1]):
        print(f"{name}\t{n}\t{definition}")
else:
    sense = wn.synset(sys.argv[2])
    tree = closure(sense)
    hits = sorted((space.index[wnid_of(s)], s) for s in tree if wnid_of(s) in space.index)
    for _, cls in hits:
        path, node = [], cls
        while node is not None:
            path.append(node.name())
            node = tree[node]
        print(f"{wnid_of(cls)}\t{space.display_name(wnid_of(cls))}\t{' > '.join(reversed(path))}")
"""


def timed(argv: list[str], repeats: int) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times, out = [], ""
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - started)
        out = done.stdout
    return statistics.median(times), out


def query_page_new_word(repeats: int) -> float:
    from streamlit.testing.v1 import AppTest
    import tempfile

    with tempfile.TemporaryDirectory(prefix="wildlens-bench-query-") as home:
        os.environ["WILDLENS_HOME"] = home
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
        at.switch_page("pages/query_page.py")
        at.run()
        at.text_input(key="query").set_value("cat").run()  # the page and its caches warm
        times = []
        for word in NEW_WORDS[:max(repeats, 1)]:
            started = time.perf_counter()
            at.text_input(key="query").set_value(word).run()
            times.append(time.perf_counter() - started)
            if at.exception:
                raise RuntimeError(f"query page, {word!r}: {at.exception[0].value}")
        return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-page", action="store_true", help="skip the Query page (AppTest)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"median of {args.repeats} fresh processes")
    py = sys.executable
    rows = []
    for label, shipped, yard in (
            ("explain senses cat", [py, "-m", "explain", "senses", "cat"], [py, "-c", YARDSTICK, "senses", "cat"]),
            ("explain hyponyms cat.n.01 --paths", [py, "-m", "explain", "hyponyms", "cat.n.01", "--paths"],
             [py, "-c", YARDSTICK, "hyponyms", "cat.n.01"])):
        fast, fast_out = timed(shipped, args.repeats)
        slow, slow_out = timed(yard, args.repeats)
        if fast_out != slow_out:
            print(f"MISMATCH in {label}:\n{fast_out}\n---\n{slow_out}")
            return 1
        rows.append((label, fast, slow))
    print(f"{'command':36s} {'graph':>8s} {'NLTK':>8s} {'speed-up':>9s}  target")
    for label, fast, slow in rows:
        verdict = "met" if fast <= 1.0 else "NOT met"
        print(f"{label:36s} {fast:7.2f}s {slow:7.2f}s {slow / fast:8.1f}x  <= 1.0 s: {verdict}")
    if not args.no_page:
        page = query_page_new_word(args.repeats)
        print(f"{'Query page, a new word (server side)':36s} {page:7.2f}s {'':>8s} {'':>9s}  <= 0.5 s: "
              f"{'met' if page <= 0.5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
