"""Near-duplicate groups among a probe's images (issue 22 item 14): pHash Hamming distance at or
below the crawl's threshold, linked transitively; images without a usable pHash stand alone."""
import numpy as np

from probe.duplicates import NEAR_DUPLICATE_DISTANCE, near_duplicate_groups


def test_the_threshold_is_the_crawls():
    from crawl.config import DEFAULT_PHASH_THRESHOLD, ValidationConfig

    assert NEAR_DUPLICATE_DISTANCE == DEFAULT_PHASH_THRESHOLD == ValidationConfig().phash_threshold == 8


def _flip(value: int, bits) -> int:
    for b in bits:
        value ^= 1 << b
    return value


def test_groups_are_linked_transitively_at_distance_8_and_not_9():
    a = 0x0F0F_0F0F_0F0F_0F0F
    b = _flip(a, range(8))  # 8 from a
    c = _flip(b, range(8, 16))  # 8 from b, 16 from a: linked through b
    d = _flip(a, range(40, 49))  # 9 from a, 17+ from b and c: alone
    hashes = [f"{v:016x}" for v in (d, a, b, c)] + [None, "not hex", f"{a:016x}"]
    groups = near_duplicate_groups(hashes)
    assert groups.tolist() == [0, 1, 1, 1, 4, 5, 1]  # a group is named by its first row
    assert near_duplicate_groups(hashes, threshold=-1).tolist() == list(range(7))
    assert near_duplicate_groups([]).tolist() == []


def test_many_hashes_in_chunks_give_the_same_groups():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2 ** 63, size=300)
    values = [int(v) for v in base] + [_flip(int(v), [1, 5, 9]) for v in base[:50]]
    hashes = [f"{v:016x}" for v in values]
    groups = near_duplicate_groups(hashes, chunk_pairs=1000)  # many small chunks
    assert np.array_equal(groups, near_duplicate_groups(hashes))
    assert groups[300:].tolist() == list(range(50)) and len(set(groups.tolist())) == 300
