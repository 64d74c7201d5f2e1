"""core.phash: the near-duplicate grouping on the ground floor (explain's error types and the probe
share it; probe.duplicates re-exports it) and the Hamming distance between hashes."""
import numpy as np

from core import phash
from core.phash import NEAR_DUPLICATE_DISTANCE, hamming, near_duplicate_groups, parse_phashes


def test_the_probe_uses_the_ground_floors_grouping():
    import probe.duplicates as duplicates

    assert duplicates.near_duplicate_groups is near_duplicate_groups
    assert duplicates.group_summary is phash.group_summary
    assert duplicates.NEAR_DUPLICATE_DISTANCE == NEAR_DUPLICATE_DISTANCE == 8


def test_hamming_counts_differing_bits_and_parse_skips_what_is_no_hash():
    hashes, rows = parse_phashes(["0f0f0f0f0f0f0f0f", None, "xyz", " 0F0F0F0F0F0F0F0E ", 7])
    assert rows.tolist() == [0, 3] and hashes.dtype == np.uint64
    assert hamming(hashes[0], hashes[1]) == 1
    a = np.array([0, 0xFFFF_FFFF_FFFF_FFFF], dtype=np.uint64)
    assert hamming(a[:, None], a[None, :]).tolist() == [[0, 64], [64, 0]]
    assert near_duplicate_groups(["0f0f0f0f0f0f0f0f", "0f0f0f0f0f0f0f0e", "f0f0f0f0f0f0f0f0"]).tolist() == [0, 0, 2]
