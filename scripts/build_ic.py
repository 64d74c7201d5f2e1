"""Write the information content table shipped with the package (explain/data/ic-in21k-v<code>-<corpus>.npz).

Run by `make ic` after a change to the vendored WordNet or to explain.similarity.SIMILARITY_CODE_VERSION;
tests/explain/test_similarity.py fails until it is current, and checks it equals a fresh build.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from explain import similarity

    target = similarity.packaged_ic_file()
    info = similarity.build_information_content()
    similarity.write_information_content(info, target)
    for old in target.parent.glob("ic-in21k-*.npz"):  # another corpus or code version: never read again
        if old != target:
            old.unlink()
            print(f"removed {old.name}")
    print(f"wrote {target.relative_to(Path.cwd()) if target.is_relative_to(Path.cwd()) else target} "
          f"({info.corpus_size:,} concepts, {target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
