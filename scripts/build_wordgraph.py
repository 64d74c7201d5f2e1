"""Write the WordNet noun graph shipped with the package (core/data/wordnet-nouns-v<layout>-<corpus>.npz).

Run by `make wordgraph` after a change to the vendored WordNet or to core.wordgraph.GRAPH_LAYOUT_VERSION;
tests/core/test_wordgraph.py fails until it is current, and checks it equals a fresh build.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["WILDLENS_VENDORED_WORDNET"] = "1"  # the packaged graph is the vendored corpus's, never a user's


def main() -> int:
    from core import wordgraph

    target = wordgraph.packaged_graph_file()
    started = time.perf_counter()
    arrays = wordgraph.build_arrays()
    wordgraph.write_arrays(arrays, target)
    other = wordgraph.packaged_other_pos_file()
    wordgraph.write_arrays(wordgraph.build_other_pos_arrays(), other)
    for pattern, keep in (("wordnet-nouns-*.npz", target), ("wordnet-other-pos-*.npz", other)):
        for old in target.parent.glob(pattern):  # another corpus or layout: never read again
            if old != keep:
                old.unlink()
                print(f"removed {old.name}")
    print(f"wrote {other.name} ({other.stat().st_size:,} bytes)")
    print(f"wrote {target.relative_to(Path.cwd()) if target.is_relative_to(Path.cwd()) else target} "
          f"({len(arrays['offsets']):,} noun synsets, {target.stat().st_size:,} bytes, "
          f"{time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
