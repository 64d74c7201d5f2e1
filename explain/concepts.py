"""Concepts a model has not seen: ImageNet-CoG's similarity to the seen classes, its eligible
unseen concepts and its five concept-generalization levels (Sariyildiz et al. 2021, sections 3.2
and 3.3 and supplementary A.1), over every concept of ImageNet-21k (Google's 21,843-class list).

Similarity to a seen label space S (CoG Eq. 2)::

    sim(S, c) = max over s in S of Lin(s, c),  Lin(s, c) = 2 IC(lcs) / (IC(s) + IC(c))

with the information content of :mod:`explain.similarity` (IN-21K concepts and their ancestors as
the corpus) and NLTK's lcs for Lin, the common ancestor of highest IC. It is computed without the
21.8M pairs: for a fixed common ancestor a, 2 IC(a) / (IC(s) + IC(c)) is largest for the seen class
under a with the smallest IC, and a common ancestor other than the lcs can only give less, so

    sim(S, c) = max over ancestors a of c (c included) of 2 IC(a) / (m(a) + IC(c)),
    m(a) = min IC(s) over the seen classes s under a (a included).

That is one pass over the seen classes' ancestors and one over each concept's (~12 each); the
test compares it with the direct maximum over all 1,000 pairs, to 1e-12. The nearest seen class
is the s that gives the maximum (ties: the smaller wnid). A seen class outside the IC corpus (only
teddy bear n04399382 among ImageNet-1k's) has no Lin value and is left out of the maximum.

Eligible unseen concepts (CoG A.1, applied in this order; ``reason`` names the first rule that
removed a concept):

1. ``seen``: the concept is a class of S;
2. ``ancestor_of_seen``: it is a hypernym (any distance, instance links included) of a class of S
   ("cat" is removed because "tiger cat" is in IN-1k);
3. ``person``: it lies under ``person.n.01`` (itself included);
4. ``few_images``: with ``image_counts``, fewer than 782 images (IN-1k's smallest class); a concept
   missing from the counts counts as 0. Image counts do not ship offline: without them this rule
   is not applied, and the output says so;
5. ``has_eligible_descendant``: it is an ancestor of a concept still eligible after 1-4 (CoG keeps
   the leaves of the eligible subgraph: "we discard c1 if c1 is a parent of c2").

With S = ImageNet-1k and no image counts this leaves 14,248 concepts (the SPEC's figure; CoG,
with counts: 5,146).

Levels: the eligible concepts ranked by decreasing sim (ties: wnid), cut into five levels of 1000
consecutive concepts that span the whole ranked list with equal gaps between them (CoG: "we
utilize the full span of the ranked list and end up with small gaps between levels"): level k
(k = 0..4) starts at round(k * (1000 + g)) with g = (N - 5000) / 4, so L1 starts at rank 0 and
L5 ends at the last rank. With fewer than 5000 eligible concepts the ranked list is cut into five
equal parts (np.array_split: the first parts take the remainder).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import WildLensError
from core.labels import canonical_label_space, get_label_space

UNIVERSE = "imagenet-21k"  # CoG starts from the Fall 2011 IN-21K: Google's 21,843-class list
PERSON = "person.n.01"
MIN_IMAGES = 782  # IN-1k's smallest class; CoG keeps concepts with at least this many images
LEVELS = 5
LEVEL_SIZE = 1000
MAX_IMAGE_COUNTS_BYTES = 64 << 20  # an image-count CSV of all 21,843 concepts is about 400 kB
REASONS = ("seen", "ancestor_of_seen", "person", "few_images", "has_eligible_descendant")

CONCEPT_COLUMNS: dict[str, tuple[str, str]] = {
    "wnid": ("string", "The concept (WordNet 3.0 id), one row per ImageNet-21k concept, in Google's list order."),
    "name": ("string", "ImageNet's first lemma of the concept."),
    "synset": ("string", "The WordNet synset name."),
    "eligible": ("boolean", "An eligible unseen concept (ImageNet-CoG A.1)."),
    "reason": ("string", "Why the concept is not eligible: seen, ancestor_of_seen, person, few_images or "
                         "has_eligible_descendant (the first rule that removed it); empty when eligible."),
    "sim_to_seen": ("Float64", "sim(S, c) = max over the seen classes s of Lin(s, c) (CoG Eq. 2); 1 for a seen class."),
    "nearest_seen_wnid": ("string", "The seen class that gives sim_to_seen (ties: the smaller wnid)."),
    "nearest_seen_name": ("string", "ImageNet's first lemma of nearest_seen_wnid."),
    "rank": ("Int64", "1 = the eligible concept most similar to the seen classes; NA when not eligible."),
    "level": ("Int64", "Concept-generalization level 1-5 (L1 closest to the seen classes); NA outside the levels."),
}


class ConceptsError(WildLensError, ValueError):
    """Concepts cannot be computed as asked (a bad image-count file, an unknown label space)."""


@dataclass(frozen=True)
class ConceptLevels:
    """The concepts table and what the command line prints about it."""

    table: pd.DataFrame  # CONCEPT_COLUMNS
    seen: str
    image_counts_used: bool
    seconds: float

    @property
    def eligible(self) -> pd.DataFrame:
        return self.table[self.table["eligible"]].sort_values("rank")

    def counts(self) -> dict[str, int]:
        t = self.table
        out = {"concepts": len(t), "eligible": int(t["eligible"].sum())}
        out.update({f"removed_{r}": int((t["reason"] == r).sum()) for r in REASONS})
        out.update({f"L{k}": int((t["level"] == k).sum()) for k in range(1, LEVELS + 1)})
        return out


def read_image_counts(path: str | Path) -> dict[str, int]:
    """A CSV with a wnid column and a count column (``count``, ``images`` or ``n_images``)."""
    from core.userfile import UserFileError, open_user_file

    path = Path(path)
    try:
        # A regular file of bounded size (a FIFO blocked here for ever, /dev/zero ran out of memory).
        source = open_user_file(path, what=f"--image-counts {path}", max_bytes=MAX_IMAGE_COUNTS_BYTES)
    except UserFileError as exc:
        raise ConceptsError(str(exc)) from None
    try:
        df = pd.read_csv(source, dtype={"wnid": "string"})
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ConceptsError(f"--image-counts {path} is not a readable CSV ({str(exc).splitlines()[0][:200]}).") from None
    column = next((c for c in ("count", "images", "n_images") if c in df.columns), None)
    if "wnid" not in df.columns or column is None:
        raise ConceptsError(f"--image-counts {path}: expected the columns wnid and count (found: "
                            f"{', '.join(map(str, df.columns)) or 'none'}).")
    counts = pd.to_numeric(df[column], errors="coerce")
    bad = counts.isna() | (counts < 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ConceptsError(f"--image-counts {path}: line {row + 2}: {df[column].iloc[row]!r} is not an image count.")
    return dict(zip(df["wnid"].astype(str), counts.astype(int)))


def level_bounds(n_eligible: int) -> list[tuple[int, int]]:
    """(start, stop) ranks (0-based, stop exclusive) of the five levels over n ranked concepts."""
    if n_eligible >= LEVELS * LEVEL_SIZE:
        gap = (n_eligible - LEVELS * LEVEL_SIZE) / (LEVELS - 1)
        starts = [int(round(k * (LEVEL_SIZE + gap))) for k in range(LEVELS)]
        return [(s, s + LEVEL_SIZE) for s in starts]
    parts = np.array_split(np.arange(n_eligible), LEVELS)
    return [(int(p[0]), int(p[-1]) + 1) if len(p) else (0, 0) for p in parts]


def _seen_minima(taxonomy, ic_of_node: dict[int, float], seen_nodes: list[int], seen_wnids: list[str]) -> dict:
    """ancestor node -> (smallest IC of a seen class under it, that class's wnid)."""
    best: dict[int, tuple[float, str]] = {}
    for node, wnid in zip(seen_nodes, seen_wnids):
        ic = ic_of_node[node]
        if ic != ic:  # NaN: outside the IC corpus (teddy bear), no Lin value
            continue
        for ancestor in taxonomy.ancestors[node]:
            here = best.get(ancestor)
            if here is None or (ic, wnid) < here:
                best[ancestor] = (ic, wnid)
    return best


CONCEPTS_CODE_VERSION = 1  # bump when a rule or a column changes: cached tables are then rebuilt


def _cache_target(cache_dir, seen: str, image_counts: dict[str, int] | None) -> Path | None:
    from .similarity import SIMILARITY_CODE_VERSION, _resolve_cache_dir, wordnet_fingerprint

    folder = _resolve_cache_dir(cache_dir)
    if folder is None:
        return None
    counts = "none" if image_counts is None else hashlib.sha256(
        json.dumps(sorted(image_counts.items())).encode()).hexdigest()[:12]
    return folder / (f"concepts-{seen}-counts-{counts}-v{CONCEPTS_CODE_VERSION}.{SIMILARITY_CODE_VERSION}-"
                     f"{wordnet_fingerprint()}.parquet")


def concept_levels(seen: str = "imagenet-1k", image_counts: dict[str, int] | None = None, *,
                   cache_dir=None) -> ConceptLevels:
    """The concepts table of every ImageNet-21k concept against the seen label space, from the
    cache (``$WILDLENS_HOME/cache``, Parquet keyed by the seen space, the image counts, the code
    version and WordNet's fingerprint) or computed (about 5 s cold on a 2-core CPU, most of it
    loading the 21,843 synsets). ``cache_dir=False`` skips the disk."""
    from core.runstore import read_table, write_table

    started = time.perf_counter()
    seen = canonical_label_space(seen)
    target = _cache_target(cache_dir, seen, image_counts)
    if target is not None and target.is_file():
        try:
            table = read_table(target, {c: d for c, (d, _) in CONCEPT_COLUMNS.items()}, table="concepts")
            if len(table) == len(get_label_space(UNIVERSE)):
                return ConceptLevels(table, seen, image_counts is not None, time.perf_counter() - started)
        except WildLensError:  # damaged: computed again and rewritten
            pass
    table = _compute(seen, image_counts, cache_dir)
    if target is not None:
        try:
            write_table(table, target)
        except OSError:  # a read-only cache only costs the time next run
            pass
    return ConceptLevels(table, seen, image_counts is not None, time.perf_counter() - started)


def _compute(seen: str, image_counts: dict[str, int] | None, cache_dir) -> pd.DataFrame:
    from .similarity import get_taxonomy, information_content

    universe = get_label_space(UNIVERSE)
    seen_space = get_label_space(seen)
    taxonomy = get_taxonomy()
    info = information_content(cache_dir=cache_dir)
    nodes = [taxonomy.node_of_wnid(w) for w in universe.wnids]
    seen_nodes = [taxonomy.node_of_wnid(w) for w in seen_space.wnids]
    all_nodes = sorted(set(nodes) | {a for n in nodes + seen_nodes for a in taxonomy.ancestors[n]})
    ic_values = info.of_offsets(np.array([taxonomy.offsets[n] for n in all_nodes], dtype=np.int64))
    ic_of_node = dict(zip(all_nodes, ic_values.tolist()))

    minima = _seen_minima(taxonomy, ic_of_node, seen_nodes, list(seen_space.wnids))
    sims, nearest = [], []
    for node in nodes:
        ic_c = ic_of_node[node]
        value, which = -1.0, None
        for ancestor in taxonomy.ancestors[node]:
            found = minima.get(ancestor)
            if found is None:
                continue
            denominator = found[0] + ic_c
            lin = 2.0 * ic_of_node[ancestor] / denominator if denominator > 0 else 1.0  # both IC 0: entity itself
            if lin > value or (lin == value and found[1] < which):
                value, which = lin, found[1]
        sims.append(value if which is not None else np.nan)
        nearest.append(which)

    # Eligibility, rule by rule (see the module docstring); the first rule that applies is the reason.
    seen_set = set(seen_nodes)
    ancestors_of_seen = {a for n in seen_nodes for a in taxonomy.ancestors[n]} - seen_set
    person = taxonomy.node_of_synset(synset_of_name(PERSON))
    reason: list[str | None] = []
    for node, wnid in zip(nodes, universe.wnids):
        if node in seen_set:
            reason.append("seen")
        elif node in ancestors_of_seen:
            reason.append("ancestor_of_seen")
        elif person in taxonomy.ancestors[node]:
            reason.append("person")
        elif image_counts is not None and image_counts.get(wnid, 0) < MIN_IMAGES:
            reason.append("few_images")
        else:
            reason.append(None)
    candidates = {node for node, r in zip(nodes, reason) if r is None}
    # Leaves of the eligible subgraph: drop every candidate that is an ancestor of another candidate.
    above = {a for n in candidates for a in taxonomy.ancestors[n] if a != n}
    reason = [("has_eligible_descendant" if r is None and node in above else r) for node, r in zip(nodes, reason)]

    table = pd.DataFrame({
        "wnid": list(universe.wnids),
        "name": [universe.display_name(w) for w in universe.wnids],
        "synset": [taxonomy.names[n] for n in nodes],
        "eligible": [r is None for r in reason],
        "reason": [r or "" for r in reason],
        "sim_to_seen": sims,
        "nearest_seen_wnid": nearest,
        "nearest_seen_name": [seen_space.display_name(w) if w else None for w in nearest],
    })
    ranked = table[table["eligible"]].sort_values(["sim_to_seen", "wnid"], ascending=[False, True], kind="stable")
    rank = pd.Series(pd.NA, index=table.index, dtype="Int64")
    rank[ranked.index] = np.arange(1, len(ranked) + 1)
    level = pd.Series(pd.NA, index=table.index, dtype="Int64")
    for k, (start, stop) in enumerate(level_bounds(len(ranked)), 1):
        level[ranked.index[start:stop]] = k
    table["rank"], table["level"] = rank, level
    return table.astype({column: dtype for column, (dtype, _) in CONCEPT_COLUMNS.items()})


# Why a concept has no level, as (one, several) completing "N of the classes ...": the first rule of
# A.1 that removed it, an eligible concept in a gap between two levels, or no ImageNet-21k concept.
NO_LEVEL_WHY = {
    "seen": ("is a class of {seen}", "are classes of {seen}"),
    "ancestor_of_seen": ("is an ancestor of a class of {seen}", "are ancestors of classes of {seen}"),
    "person": ("lies under person.n.01", "lie under person.n.01"),
    "few_images": ("has too few images", "have too few images"),
    "has_eligible_descendant": ("has an unseen concept under it (CoG keeps the leaves)",
                                "have unseen concepts under them (CoG keeps the leaves)"),
    "gap": ("falls in a gap between two levels", "fall in gaps between two levels"),
    "outside": ("is not an ImageNet-21k concept", "are not ImageNet-21k concepts"),
}


def why_no_level(wnids, table: pd.DataFrame, seen: str = "imagenet-1k") -> str:
    """One line saying that none of ``wnids`` (a run's classes) has a CoG level, and why; '' when
    one of them has a level (or there are none). ``table``: :func:`concept_levels`' table against
    ``seen`` (indexed by wnid or with a wnid column). Levels exist only for the eligible unseen
    ImageNet-21k concepts (module docstring: A.1), so a run of ImageNet-1k classes, of their
    ancestors or of classes outside ImageNet-21k has none."""
    wnids = list(dict.fromkeys(str(w) for w in wnids))
    if not wnids:
        return ""
    if "wnid" in table.columns:
        table = table.set_index("wnid")
    rows = table.reindex(wnids)
    if rows["level"].notna().any():
        return ""
    known = rows.index.isin(table.index)
    why = np.where(~known, "outside", np.where(rows["reason"].fillna("").astype(str) == "", "gap",
                                               rows["reason"].fillna("").astype(str)))
    counts = pd.Series(why).value_counts(sort=False)
    counts = counts.reindex([k for k in NO_LEVEL_WHY if k in counts.index])
    n = len(wnids)
    why = (f"CoG's levels rank only the ImageNet-21k concepts unseen by {seen} (not its classes or their "
           "ancestors, no people, leaves only).")
    if n == 1:
        said = NO_LEVEL_WHY[counts.index[0]][0].format(seen=seen)
        return f"This run's one class has no ImageNet-CoG level: it {said}. {why}"
    parts = []
    for key, count in counts.items():
        one, several = NO_LEVEL_WHY[key]
        said = (one if count == 1 else several).format(seen=seen)
        parts.append(f"{'all ' if count == n else ''}{count:,} {said}")
    return f"None of this run's {n:,} classes has an ImageNet-CoG level: {', '.join(parts)}. {why}"


def synset_of_name(name: str):
    from core.wordgraph import noun_graph

    return noun_graph().synset(name)


def column_docs() -> dict[str, str]:
    return {column: doc for column, (_, doc) in CONCEPT_COLUMNS.items()}


# --------------------------------------------------------------------------- any concepts, for the metric tables
_NEAREST_MEMO: dict[tuple, tuple] = {}


def _seen_minima_all(taxonomy, ic_of_node: dict[int, float], seen_nodes: list[int]) -> dict:
    """Like :func:`_seen_minima`, keeping every tied class: ancestor node -> (smallest IC of a seen
    class under it, the nodes of all seen classes under it with that IC)."""
    best: dict[int, tuple[float, set]] = {}
    for node in seen_nodes:
        ic = ic_of_node[node]
        if ic != ic:  # outside the IC corpus: no Lin value
            continue
        for ancestor in taxonomy.ancestors[node]:
            here = best.get(ancestor)
            if here is None or ic < here[0]:
                best[ancestor] = (ic, {node})
            elif ic == here[0]:
                here[1].add(node)
    return best


def similarity_to_seen(wnids, seen: str = "imagenet-1k", *, cache_dir=None) -> tuple[np.ndarray, list[frozenset]]:
    """sim(S, c) (CoG Eq. 2) and the nodes (:func:`explain.similarity.get_taxonomy`) of *every*
    nearest seen class (all the classes of S that attain the maximum; Lin ties are common, e.g.
    leaves under the same lowest common subsumer) for each wnid of ``wnids`` (any WordNet noun).
    Same reduction as :func:`concept_levels` (one pass over the seen classes' ancestors, one over
    each concept's): a seen s attains the maximum exactly when it has the smallest IC under an
    ancestor a of c that attains it. NaN and an empty set for a concept outside the IC corpus."""
    from .similarity import get_taxonomy, information_content, wordnet_fingerprint

    seen = canonical_label_space(seen)
    taxonomy = get_taxonomy()
    info = information_content(cache_dir=cache_dir)
    key = (seen, wordnet_fingerprint())
    if key not in _NEAREST_MEMO:
        seen_nodes = [taxonomy.node_of_wnid(w) for w in get_label_space(seen).wnids]
        above = sorted({a for n in seen_nodes for a in taxonomy.ancestors[n]})
        ic = info.of_offsets(np.array([taxonomy.offsets[n] for n in above], dtype=np.int64))
        ic_of_node = dict(zip(above, ic.tolist()))
        _NEAREST_MEMO[key] = (_seen_minima_all(taxonomy, ic_of_node, seen_nodes), ic_of_node)
    minima = _NEAREST_MEMO[key][0]
    sims = np.full(len(wnids), np.nan)
    nearest: list[frozenset] = []
    for i, wnid in enumerate(wnids):
        node = taxonomy.node_of_wnid(str(wnid))
        ancestors = list(taxonomy.ancestors[node])
        ic = info.of_offsets(np.array([taxonomy.offsets[a] for a in ancestors], dtype=np.int64))
        ic_c = ic[ancestors.index(node)]
        value, which = -1.0, set()
        if ic_c == ic_c:
            for ancestor, ic_a in zip(ancestors, ic.tolist()):
                found = minima.get(ancestor)
                if found is None:
                    continue
                denominator = found[0] + ic_c
                lin = 2.0 * ic_a / denominator if denominator > 0 else 1.0
                if lin > value:
                    value, which = lin, set(found[1])
                elif lin == value:
                    which |= found[1]
        if which:
            sims[i] = value
        nearest.append(frozenset(which))
    return sims, nearest
