"""Write the WordNet meronym links shipped with the package (core/data/wordnet-meronyms-v<layout>-<corpus>.npz).

Run by `make wordgraph` after a change to the vendored WordNet or to core.meronyms.MERONYM_LAYOUT_VERSION;
tests/core/test_meronyms.py fails until it is current, and checks it equals a fresh build.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["WILDLENS_VENDORED_WORDNET"] = "1"  # the packaged links are the vendored corpus's, never a user's


def main() -> int:
    from core import meronyms, wordgraph

    target = meronyms.packaged_meronym_file()
    started = time.perf_counter()
    arrays = meronyms.build_meronym_arrays()
    wordgraph.write_arrays(arrays, target)
    for old in target.parent.glob("wordnet-meronyms-*.npz"):  # another corpus or layout: never read again
        if old != target:
            old.unlink()
            print(f"removed {old.name}")
    counts = {kind: int((arrays["kind"] == code).sum()) for code, kind in enumerate(meronyms.KINDS)}
    print(f"wrote {target.name} ({len(arrays['kind']):,} links: "
          + ", ".join(f"{n:,} {kind}" for kind, n in counts.items())
          + f"; {target.stat().st_size:,} bytes, {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
