"""Near-duplicate groups among a probe's images, so that no split puts a picture on both sides.

Two images are near duplicates when their perceptual hashes (the manifest's ``phash``, 64 bits,
written by the crawl or import) are at most :data:`NEAR_DUPLICATE_DISTANCE` bits apart (the
crawl's own threshold, ``core.phash``). Groups are the connected components of that relation
(single linkage: A~B and B~C put A, B and C in one group even when A and C are further apart), so a
split by group keeps every close pair on one side. An image without a usable pHash (NA, not 16 hex
digits) is a group of its own.

The crawl already turns a near copy of an accepted image into a ``duplicate`` row that is never
probed; accepted near duplicates come from collecting with a lower or disabled
``--phash-threshold``, or from images stored before their twin was recorded differently. Why it
matters: a twin of a training shot in the test set is a free hit (the probe "recognises" the
picture, not the class), which made N = 1 read 100 %.

Cost: every pair is compared (XOR and popcount in NumPy, in chunks of about ``chunk_pairs``
pairs; equal hashes are compared once): 1-2 s for 20,000 distinct hashes on this machine's
shared 2-core CPU.
"""
from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from core.phash import NEAR_DUPLICATE_DISTANCE

_HEX16 = re.compile(r"^[0-9a-f]{16}$")
CHUNK_PAIRS = 4_000_000


def _parse(values: Iterable) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes, rows that have one) of pHash strings; anything else has none."""
    hashes, rows = [], []
    for i, value in enumerate(values):
        text = value.strip().lower() if isinstance(value, str) else ""
        if _HEX16.match(text):
            hashes.append(int(text, 16))
            rows.append(i)
    return np.array(hashes, dtype=np.uint64), np.array(rows, dtype=np.int64)


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
    hashes, rows = _parse(phashes)
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
        i, j = np.nonzero(np.bitwise_count(block[:, None] ^ values[None, start:]) <= threshold)  # j >= i only
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
