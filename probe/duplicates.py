"""Near-duplicate groups among a probe's images, so that no split puts a picture on both sides.

Two images are near duplicates when their perceptual hashes (the manifest's ``phash``) are at most
:data:`NEAR_DUPLICATE_DISTANCE` bits apart (the crawl's own threshold); groups are the connected
components of that relation. The grouping itself lives on the ground floor (:mod:`core.phash`),
since explain's error types name near duplicates too; this module re-exports it for the probe.

The crawl already turns a near copy of an accepted image into a ``duplicate`` row that is never
probed; accepted near duplicates come from collecting with a lower or disabled
``--phash-threshold``, or from images stored before their twin was recorded differently. Why it
matters: a twin of a training shot in the test set is a free hit (the probe "recognises" the
picture, not the class), which made N = 1 read 100 %.
"""
from __future__ import annotations

from core.phash import CHUNK_PAIRS, NEAR_DUPLICATE_DISTANCE, group_summary, near_duplicate_groups

__all__ = ["CHUNK_PAIRS", "NEAR_DUPLICATE_DISTANCE", "group_summary", "near_duplicate_groups"]
