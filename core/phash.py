"""Near duplicates by perceptual hash, shared by the stages: the crawl rejects a new image this close
to an accepted one (``crawl.config.DEFAULT_PHASH_THRESHOLD``), the probe keeps images this close on
one side of every train/test split (``probe.duplicates``), and explain's error types call a mistake
on an image this close to another class's image a ``duplicate`` (``explain.error_types``). Here so
no stage imports another.

Two images are near duplicates when their perceptual hashes (the manifest's ``phash``, 64 bits as
16 hex digits, written by the crawl or import) are at most :data:`NEAR_DUPLICATE_DISTANCE` bits
apart. :func:`near_duplicate_groups` links them into groups, the connected components of that
relation (single linkage: A~B and B~C put A, B and C in one group even when A and C are further
apart), so a split by group keeps every close pair on one side. An image without a usable pHash
(NA, not 16 hex digits) is a group of its own.

Cost: every pair is compared (XOR and popcount in NumPy, in chunks of about ``chunk_pairs``
pairs; equal hashes are compared once): 1-2 s for 20,000 distinct hashes on this machine's
shared 2-core CPU.
"""
from __future__ import annotations

import re
from typing import Iterable

import numpy as np

# Perceptual-hash Hamming distance (of 64 bits) at or below which two images are near
# duplicates. Measured on the 31 photographs that scikit-image, scikit-learn and matplotlib
# ship: resizing to 1/2 or 1/4 and re-encoding as JPEG (quality 90/75/50) moved a photo's
# pHash by 0-6 bits; two different photographs were 20 bits apart or more (1st percentile 20,
# median 32), except a stereo pair of the same motorcycle (4: a near duplicate indeed).
# 8 leaves a margin on both sides. A synthetic chessboard moved 15 bits (aliasing): such
# graphics may escape near-duplicate detection, which only costs a redundant image.
NEAR_DUPLICATE_DISTANCE = 8

_HEX16 = re.compile(r"^[0-9a-f]{16}$")
CHUNK_PAIRS = 4_000_000


def parse_phashes(values: Iterable) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes, the positions that have one) of pHash strings; anything else has none."""
    hashes, rows = [], []
    for i, value in enumerate(values):
        text = value.strip().lower() if isinstance(value, str) else ""
        if _HEX16.match(text):
            hashes.append(int(text, 16))
            rows.append(i)
    return np.array(hashes, dtype=np.uint64), np.array(rows, dtype=np.int64)


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits that differ between uint64 hashes, elementwise (broadcasting)."""
    return np.bitwise_count(np.asarray(a, dtype=np.uint64) ^ np.asarray(b, dtype=np.uint64))


def near_duplicate_groups(phashes: Iterable, threshold: int = NEAR_DUPLICATE_DISTANCE, *,
                          chunk_pairs: int = CHUNK_PAIRS) -> np.ndarray:
    """Per image (in the order given), its near-duplicate group, named by the group's first row:
    ``groups[i] == i`` for an image alone or first of its group. ``threshold < 0``: every image
    alone (the crawl's way of turning detection off)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    phashes = list(phashes)
    n = len(phashes)
    groups = np.arange(n, dtype=np.int64)
    hashes, rows = parse_phashes(phashes)
    if threshold < 0 or len(hashes) < 2:
        return groups
    # equal hashes are one group whatever the threshold: compare the distinct values only
    values, of_row = np.unique(hashes, return_inverse=True)
    m = len(values)
    # component of each distinct value (0..m-1), merged chunk by chunk: each chunk's close pairs, as
    # pairs of current components, go through one (linear) connected-components pass
    component = np.arange(m, dtype=np.int64)
    step = max(1, int(chunk_pairs) // m)
    for start in range(0, m, step):
        block = values[start:start + step]
        i, j = np.nonzero(hamming(block[:, None], values[None, start:]) <= threshold)  # j >= i only
        i, j = i + start, j + start
        if not (j > i).any():
            continue
        a, b = component[i], component[j]
        differ = a != b
        if not differ.any():
            continue
        graph = coo_matrix((np.ones(int(differ.sum()), dtype=np.int8), (a[differ], b[differ])), shape=(m, m))
        _, merged = connected_components(graph, directed=False)
        component = merged[component].astype(np.int64)
    component = component[of_row]  # back to the hashed rows
    # name each group by its first row (in the order given)
    first = np.full(component.max() + 1, n, dtype=np.int64)
    np.minimum.at(first, component, rows)
    groups[rows] = first[component]
    return groups


def group_summary(groups: np.ndarray) -> tuple[int, int]:
    """(groups of two or more images, images in them)."""
    _, counts = np.unique(np.asarray(groups), return_counts=True)
    shared = counts[counts > 1]
    return int(len(shared)), int(shared.sum())
