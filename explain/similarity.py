"""WordNet similarities between classes, computed in bulk and equal to NLTK's own functions.

Everything here is indexed ``[true, pred]``: the first argument is the ground-truth class g,
the second the prediction p, and the values are those of NLTK's ``g.<metric>(p)``. The order
matters for Wu-Palmer: NLTK picks ``self`` as the subsumer when it ties with other lowest common
hypernyms, so ``wup(g, p)`` and ``wup(p, g)`` can differ when one class is an ancestor of the other.

What is computed for a pair (g, p) of noun synsets (WordNet 3.0, hypernyms *and* instance
hypernyms followed, as NLTK's ``_shortest_hypernym_paths`` does):

- ``path_distance``: NLTK's ``shortest_path_distance``: min over common ancestors a of
  d(g, a) + d(p, a), with d the shortest upward distance (0 for a synset itself).
- ``path``  = 1 / (path_distance + 1)                 (NLTK ``path_similarity``)
- ``lch``   = -log((path_distance + 1) / (2 * 19))    (NLTK ``lch_similarity``; 19 is the
  noun taxonomy depth, no simulated root for WordNet 3.0 nouns: ``_needs_root`` is False)
- ``wup``   NLTK ``wup_similarity``: the subsumer is g if g is among the lowest common hypernyms
  by *min_depth* (``use_min_depth=True``), else the first of them sorted by synset name;
  depth = max_depth(subsumer) + 1; wup = 2 depth / (spd(g, s) + spd(p, s) + 2 depth).
- ``lin``   ImageNet-CoG's Lin similarity (see :class:`InformationContent`):
  2 IC(a) / (IC(g) + IC(p)), a = the common ancestor of the largest IC (Lin's definition: a number,
  not the named ``lcs`` below).
- ``lcs``: **the lowest common subsumer**, the one common ancestor of the pair that every view names
  (the Confusions table's ``lcs_wnid``, the Explain page's path, the matrix's "other: under ..."
  columns, "both felines, 3 steps up"): NLTK's ``g.lowest_common_hypernyms(p)``, i.e. among the
  common hypernyms (each synset counts as its own, instance hypernyms followed) those of the largest
  ``max_depth``, and of several the first by synset name (NLTK returns them sorted by name). Why
  this rule: it is NLTK's, it is the *lowest* ancestor the two share (the top of a shortest path is
  not: tench and Chihuahua meet at vertebrate.n.01, but their shortest path climbs over
  animal.n.01 through domestic_animal.n.01), and with ``max_depth`` a class is the lowest common
  subsumer of itself and any of its hyponyms (with ``min_depth`` an ancestor reached by a longer
  chain can beat it). Ties are rare (24 of the 999,000 ordered ImageNet-1k pairs). One function
  computes it, for every pair: :func:`_compute_block` (scalar form :func:`lowest_common_subsumer`).
- ``severity``: Bertinetto et al.'s mistake severity, "height of the lowest common ancestor": the
  number of hypernym steps from the *true* class up to ``lcs`` (the shortest upward route). In the
  paper's tree, where every leaf has the same depth, this is exactly the LCA's height; measured
  from g it does not depend on how deep the prediction sits, and it is 0 exactly when p is g or one
  of its hyponyms. (Before issue 22 it was the distance to the *nearest* common ancestor, which in
  a DAG can be another node than the one named: Tibetan mastiff -> jay met 5 steps up, at
  animal.n.01 through domestic_animal.n.01, where the two are vertebrates 8 steps up.)
- ``relation``: one of :data:`RELATIONS`, the first that applies in this order (why: ancestry
  is the more specific statement, and a class is never "its own sibling"):
  ``same`` (p == g) > ``hypernym`` (p is an ancestor of g) > ``hyponym`` (p is a descendant
  of g) > ``sibling`` (they share an immediate hypernym) > ``cousin`` (they share a grandparent,
  i.e. a hypernym of a hypernym) > ``related`` (severity <= :data:`RELATED_MAX_SEVERITY`, the
  threshold and its reasons are in :mod:`explain.vocabulary`) > ``distant``.
- ``is_sibling``: the SPEC's sibling test alone (share an immediate hypernym, p != g), kept
  apart from ``relation`` so the sibling percentage follows the SPEC even in the rare DAG case
  where a prediction is both a parent and a sibling of the truth.
- ``is_hypernym`` / ``is_hyponym``: p is a proper ancestor / descendant of g.
- ``subsumer``: the WUP subsumer's offset: NLTK's own choice inside ``wup_similarity`` (by
  ``min_depth``, g itself when it is among them), kept only so WUP equals NLTK's; it names nothing.

How it is fast: each synset's ancestor -> distance map is computed once (a dynamic programme over
the hypernym DAG, equal to NLTK's breadth-first search), and a batch of pairs is evaluated with
numpy: every pair's true-class ancestors are matched against the prediction's ancestor table with
one ``searchsorted``, and per-pair minima/maxima are segment reductions. The ImageNet-1k matrices
(1000 x 1000) are built that way once and cached on disk (``.npz``, no pickle) under the run
store's cache folder, keyed by a hash of the WordNet noun database and
:data:`SIMILARITY_CODE_VERSION`; pairs outside ImageNet-1k (21k/22k predictions) are computed on
demand and cached in memory.
"""
from __future__ import annotations

import functools
import math
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from core.errors import WildLensError
from core.wordnet import NOUN_MAX_DEPTH, is_wnid
from .vocabulary import RELATED_MAX_SEVERITY, RELATIONS

# Bump when any value below changes meaning: cached matrices with another version are ignored.
SIMILARITY_CODE_VERSION = 3  # 2: the 'related' relation (codes shifted: distant is 6); 3: lcs and severity
# follow NLTK's lowest common hypernym (issue 22 item 15)

# Names, colours and sentences live in explain.vocabulary; a relation's code is its index there.
SAME, HYPERNYM, HYPONYM, SIBLING, COUSIN, RELATED, DISTANT = map(
    RELATIONS.index, ("same", "hypernym", "hyponym", "sibling", "cousin", "related", "distant"))

# Noun shortest paths in WordNet 3.0 are at most 2 * 19 edges; 64 leaves room for any 3.0 corpus.
_MAX_DISTANCE = 64
# Lookup tables built with Python's math (what NLTK uses), so every value is bit-identical to
# NLTK's rather than numpy's vectorised log (which may differ in the last bit).
PATH_BY_DISTANCE = np.array([1.0 / (d + 1) for d in range(_MAX_DISTANCE)])
LCH_BY_DISTANCE = np.array([-math.log((d + 1) / (2.0 * NOUN_MAX_DEPTH)) for d in range(_MAX_DISTANCE)])

# Offsets in data.noun are < 2**24 (the file is ~15 MB); a pair key packs two of them.
_PAIR_KEY_SHIFT = np.int64(1 << 26)
_CHUNK_PAIRS = 65_536  # pairs per vectorised block: bounds memory (~15 ancestors per pair)
_DENSE_MAX_CLASSES = 4_000  # a full matrix beyond this is too big: ask for pairs instead
IMAGENET_1K = "imagenet-1k"
CORPUS_LABEL_SPACE = "imagenet-21k"  # ImageNet-CoG's IC corpus: Google's 21,843 IN-21K concepts

_lock = threading.RLock()


class SimilarityError(WildLensError, ValueError):
    """A similarity that cannot be computed as asked; the message says why."""


# --------------------------------------------------------------------------- WordNet identity
def wordnet_fingerprint() -> str:
    """sha256 (16 hex digits) of the loaded corpus's ``data.noun``: the noun hypernym graph and
    names every cached value derives from. Works for the vendored zip and a user's corpus alike,
    so a changed corpus can never reuse another corpus's cache (``core.wordgraph.noun_data_sha256``:
    the vendored zip is read without starting NLTK)."""
    from core.wordgraph import noun_data_sha256

    return noun_data_sha256()[:16]


def offset_of_wnid(wnid: str) -> int:
    return int(wnid[1:])


def wnid_of_offset(offset: int) -> str:
    return f"n{int(offset):08d}"


# --------------------------------------------------------------------------- the hypernym graph
class Taxonomy:
    """The part of WordNet's noun hypernym DAG that WildLens has touched, as integer node ids.

    A synset is registered with all its ancestors (parents first). Per node it keeps the NLTK
    quantities the metrics need: parents (``hypernyms() + instance_hypernyms()``, sorted by name:
    NLTK's own order follows the process's hash seed), ``min_depth``/``max_depth`` and the
    ancestor -> shortest upward distance map (the node itself at 0), which equals NLTK's
    ``_shortest_hypernym_paths(simulate_root=False)``.

    Read from the noun graph (:mod:`core.wordgraph`: NLTK's relations as arrays, compared with
    NLTK on every noun synset), not from NLTK's ``Synset`` objects: a cold 21k metric run spent
    5 s building 23,547 of them, and NLTK's load (4.8 s) was needed for nothing else.
    """

    def __init__(self, graph=None):
        from core.wordgraph import noun_graph

        self.graph = graph if graph is not None else noun_graph()
        self._node_of_offset: dict[int, int] = {}
        self.offsets: list[int] = []
        self.names: list[str] = []
        self.parents: list[tuple[int, ...]] = []
        self.instance_parents: list[frozenset[int]] = []  # parents reached by an instance link
        self.min_depth: list[int] = []
        self.max_depth: list[int] = []
        self.ancestors: list[dict[int, int]] = []
        self._spd: dict[int, dict[int, int]] = {}
        self._grandparents: dict[int, np.ndarray] = {}
        self._arrays: tuple[int, dict[str, np.ndarray]] = (-1, {})

    def __len__(self) -> int:
        return len(self.offsets)

    # registration -------------------------------------------------------------------
    def node_of_wnid(self, wnid: str) -> int:
        """Node id of a wnid's synset; raises ValueError for a string that is not a wnid and
        KeyError for one that names no WordNet 3.0 noun synset (``synset_of``'s words)."""
        with _lock:
            node = self._node_of_offset.get(offset_of_wnid(wnid)) if is_wnid(wnid) else None
            if node is not None:
                return node
            return self._register(self.graph.from_wnid(wnid).row)

    def node_of_synset(self, synset) -> int:
        """Node id of an NLTK noun synset (or a :class:`core.wordgraph.Noun`)."""
        with _lock:
            found = self._node_of_offset.get(synset.offset())
            if found is not None:
                return found
            if synset.pos() != "n":
                raise SimilarityError(f"{synset.name()} is not a noun synset; ImageNet classes are nouns.")
            return self._register(self.graph.from_wnid(f"n{synset.offset():08d}").row)

    def _register(self, row: int) -> int:
        graph, known = self.graph, self._node_of_offset
        offsets = graph.offsets
        stack = [row]  # iterative post-order: a node is added after all its parents
        while stack:
            current = stack[-1]
            if int(offsets[current]) in known:
                stack.pop()
                continue
            missing = [p for p in graph.parent_rows(current) if int(offsets[p]) not in known]
            if missing:
                if len(stack) > 10_000:
                    raise SimilarityError(f"The hypernym graph above {graph.names[row]} has a cycle or is absurdly deep.")
                stack.extend(missing)
                continue
            stack.pop()
            self._add(current)
        return known[int(offsets[row])]

    def _add(self, row: int) -> None:
        graph, known = self.graph, self._node_of_offset
        node = len(self.offsets)
        parents = tuple(known[int(graph.offsets[p])] for p in graph.parent_rows(row))
        ancestors = {node: 0}
        for parent in parents:
            for ancestor, distance in self.ancestors[parent].items():
                if distance + 1 < ancestors.get(ancestor, _MAX_DISTANCE * 4):
                    ancestors[ancestor] = distance + 1
        offset = int(graph.offsets[row])
        known[offset] = node
        self.offsets.append(offset)
        self.names.append(graph.names[row])
        self.parents.append(parents)
        self.instance_parents.append(frozenset(known[int(graph.offsets[p])] for p in graph.instance_parent_rows(row)))
        # NLTK: 0 for a root, else 1 + min/max over hypernyms + instance hypernyms.
        self.min_depth.append(1 + min(self.min_depth[p] for p in parents) if parents else 0)
        self.max_depth.append(1 + max(self.max_depth[p] for p in parents) if parents else 0)
        self.ancestors.append(ancestors)

    # derived, lazily ------------------------------------------------------------------
    def spd_to_ancestors(self, node: int) -> dict[int, int]:
        """ancestor a -> NLTK's ``shortest_path_distance(node, a)``. Not simply d(node, a): NLTK
        takes the minimum over *all* common ancestors b of d(node, b) + d(a, b), and a route
        over a higher b can be shorter than the upward distance to a."""
        cached = self._spd.get(node)
        if cached is None:
            mine = self.ancestors[node]
            cached = {a: min(mine[b] + d_ab for b, d_ab in self.ancestors[a].items()) for a in mine}
            self._spd[node] = cached
        return cached

    def grandparents(self, node: int) -> np.ndarray:
        """Nodes reachable by exactly two hypernym links (any parent's parents), sorted."""
        cached = self._grandparents.get(node)
        if cached is None:
            cached = np.array(sorted({g for p in self.parents[node] for g in self.parents[p]}), dtype=np.int64)
            self._grandparents[node] = cached
        return cached

    def arrays(self) -> dict[str, np.ndarray]:
        """min_depth, max_depth, offset and name rank of every node as numpy arrays."""
        size, cached = self._arrays
        if size != len(self):
            cached = {"min_depth": np.array(self.min_depth, dtype=np.int64),
                      "max_depth": np.array(self.max_depth, dtype=np.int64),
                      "offset": np.array(self.offsets, dtype=np.int64)}
            self._arrays = (len(self), cached)
        return cached


_taxonomy_memo: dict[int, Taxonomy] = {}


def get_taxonomy() -> Taxonomy:
    """The process-wide taxonomy over the loaded WordNet's noun graph."""
    from core.wordgraph import noun_graph

    graph = noun_graph()
    with _lock:
        if id(graph) not in _taxonomy_memo:
            _taxonomy_memo[id(graph)] = Taxonomy(graph)
        return _taxonomy_memo[id(graph)]


# --------------------------------------------------------------------------- information content
@dataclass(frozen=True)
class InformationContent:
    """ImageNet-CoG's information content: IC(c) = -log p(c), p(c) = (concepts under c, c
    included, within the corpus) / (concepts in the corpus); the corpus is every IN-21K concept
    (Google's 21,843 list) plus all their ancestors up to entity.n.01.

    A synset outside the corpus has no IC (NaN) and its Lin similarity to anything else is
    undefined (NaN): inventing a count would shift every other IC. Among the label spaces this
    happens only for ``teddy.n.01`` (n04399382, ImageNet-1k's "teddy bear", also in ImageNet-A),
    which Google's 21k list lacks; the metric tables average Lin over the pairs where it is defined.
    """

    offsets: np.ndarray  # sorted WordNet offsets of the corpus
    counts: np.ndarray  # concepts under each, itself included
    ic: np.ndarray  # -log(count / corpus_size), computed with math.log like a direct implementation
    corpus_size: int

    def of_offsets(self, offsets: np.ndarray) -> np.ndarray:
        offsets = np.asarray(offsets, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.offsets, offsets), len(self.offsets) - 1)
        return np.where(self.offsets[pos] == offsets, self.ic[pos], np.nan)


def _build_information_content(taxonomy: Taxonomy) -> InformationContent:
    from core.labels import get_label_space

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        members = [taxonomy.node_of_wnid(w) for w in get_label_space(CORPUS_LABEL_SPACE).wnids]
    corpus = set()
    for node in members:
        corpus.update(taxonomy.ancestors[node])  # the node itself and every ancestor
    under = Counter()
    for node in corpus:
        under.update(taxonomy.ancestors[node].keys())  # node counts for itself and each ancestor
    offsets = np.array(sorted(taxonomy.offsets[n] for n in corpus), dtype=np.int64)
    count_of_offset = {taxonomy.offsets[n]: c for n, c in under.items()}
    counts = np.array([count_of_offset[o] for o in offsets], dtype=np.int64)
    size = len(corpus)
    ic = np.array([0.0 - math.log(c / size) for c in counts.tolist()])  # 0.0 - : IC(entity) is +0.0, not -0.0
    return InformationContent(offsets, counts, ic, size)


# --------------------------------------------------------------------------- the values of pairs
_PAIR_FIELDS = {
    "path_distance": np.int16, "path": np.float64, "lch": np.float64, "wup": np.float64,
    "lin": np.float64, "severity": np.int16, "relation": np.int8, "is_sibling": np.bool_,
    "is_hypernym": np.bool_, "is_hyponym": np.bool_, "lcs": np.int32, "subsumer": np.int32,
}


@dataclass(frozen=True)
class PairSimilarities:
    """Values for a batch of (true, pred) pairs; every array has the batch's shape. See the
    module docstring for each field. ``lcs``/``subsumer`` are WordNet offsets (see
    :func:`wnid_of_offset`)."""

    path_distance: np.ndarray
    path: np.ndarray
    lch: np.ndarray
    wup: np.ndarray
    lin: np.ndarray
    severity: np.ndarray
    relation: np.ndarray
    is_sibling: np.ndarray
    is_hypernym: np.ndarray
    is_hyponym: np.ndarray
    lcs: np.ndarray
    subsumer: np.ndarray

    def __len__(self) -> int:
        return len(self.path)

    def take(self, index) -> "PairSimilarities":
        return PairSimilarities(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def reshape(self, *shape) -> "PairSimilarities":
        return PairSimilarities(**{f.name: getattr(self, f.name).reshape(*shape) for f in fields(self)})

    @staticmethod
    def concatenate(parts: Sequence["PairSimilarities"]) -> "PairSimilarities":
        return PairSimilarities(**{name: np.concatenate([getattr(p, name) for p in parts]).astype(dtype, copy=False)
                                   for name, dtype in _PAIR_FIELDS.items()})

    @staticmethod
    def empty() -> "PairSimilarities":
        return PairSimilarities(**{name: np.zeros(0, dtype=dtype) for name, dtype in _PAIR_FIELDS.items()})

    def record(self, i) -> dict:
        """One pair as plain Python values (relation as its name, lcs/subsumer as wnids)."""
        out = {name: getattr(self, name)[i].item() for name in _PAIR_FIELDS}
        out["relation"] = RELATIONS[out["relation"]]
        out["lcs"] = wnid_of_offset(out["lcs"])
        out["subsumer"] = wnid_of_offset(out["subsumer"])
        return out


def _lookup(sorted_keys: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, position) of each query in a sorted key array."""
    if len(sorted_keys) == 0:
        return np.zeros(len(queries), dtype=bool), np.zeros(len(queries), dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, queries), len(sorted_keys) - 1)
    return sorted_keys[pos] == queries, pos


class _AncestorTable:
    """Everything a batch needs about a set of synsets, in local ids.

    ``nodes`` are the synsets' ancestors (each synset is its own ancestor), sorted; per node:
    min/max depth, offset, IC and its rank in WUP's order of preference. Per synset: its ancestor
    entries as blocks (to expand a pair's true-class ancestors) and a lookup
    (synset, ancestor) -> (upward distance, NLTK shortest_path_distance): a dense array when it
    is small (ImageNet-1k: 1000 x ~1800), else sorted packed keys and ``searchsorted``.
    """

    _DENSE_MAX_CELLS = 24_000_000

    def __init__(self, taxonomy: Taxonomy, information: InformationContent, synsets: np.ndarray):
        self.synsets = synsets  # sorted unique node ids
        blocks_a, blocks_d, blocks_s, lengths = [], [], [], []
        for node in synsets.tolist():
            anc = taxonomy.ancestors[node]
            spd = taxonomy.spd_to_ancestors(node)
            blocks_a.append(np.fromiter(anc.keys(), np.int64, len(anc)))
            blocks_d.append(np.fromiter(anc.values(), np.int64, len(anc)))
            blocks_s.append(np.fromiter((spd[a] for a in anc), np.int64, len(anc)))
            lengths.append(len(anc))
        ancestor = np.concatenate(blocks_a)
        self.nodes = np.unique(ancestor)
        self.ancestor = np.searchsorted(self.nodes, ancestor)  # local ids
        self.distance = np.concatenate(blocks_d)
        spd = np.concatenate(blocks_s)
        self.lengths = np.array(lengths, dtype=np.int64)
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.synset_local = np.searchsorted(self.nodes, synsets)  # synset i -> its local node id

        arrays = taxonomy.arrays()
        self.min_depth = arrays["min_depth"][self.nodes]
        self.max_depth = arrays["max_depth"][self.nodes]
        self.offset = arrays["offset"][self.nodes]
        self.ic = information.of_offsets(self.offset)
        # WUP's order among lowest common hypernyms: larger min_depth first, then smaller name.
        name_rank = np.empty(len(self.nodes), dtype=np.int64)
        names = np.array([taxonomy.names[n] for n in self.nodes.tolist()])
        name_rank[np.argsort(names, kind="stable")] = np.arange(len(self.nodes))
        self.by_preference = np.lexsort((-name_rank, self.min_depth))  # local ids, ascending preference
        self.preference = np.empty(len(self.nodes), dtype=np.int64)
        self.preference[self.by_preference] = np.arange(len(self.nodes))
        # The lowest common subsumer's order (NLTK's lowest_common_hypernyms): larger max_depth first,
        # then smaller name.
        self.by_lcs_preference = np.lexsort((-name_rank, self.max_depth))
        self.lcs_preference = np.empty(len(self.nodes), dtype=np.int64)
        self.lcs_preference[self.by_lcs_preference] = np.arange(len(self.nodes))

        owner = np.repeat(np.arange(len(synsets), dtype=np.int64), self.lengths)
        self.n_nodes = np.int64(len(self.nodes))
        if len(synsets) * len(self.nodes) <= self._DENSE_MAX_CELLS:
            self.dense_distance = np.full((len(synsets), len(self.nodes)), -1, dtype=np.int8)
            self.dense_distance[owner, self.ancestor] = self.distance
            self.dense_spd = np.full((len(synsets), len(self.nodes)), -1, dtype=np.int8)
            self.dense_spd[owner, self.ancestor] = spd
            self.keys = None
        else:
            keys = owner * self.n_nodes + self.ancestor
            order = np.argsort(keys, kind="stable")
            self.keys, self.key_distance, self.key_spd = keys[order], self.distance[order], spd[order]

        gp_blocks = [taxonomy.grandparents(n) for n in synsets.tolist()]
        # A grandparent is an ancestor, so it is among self.nodes. One searchsorted for all (one per
        # synset cost 0.9 s over the 21,843 classes of a 21k run).
        self.gp_lengths = np.array([len(b) for b in gp_blocks], dtype=np.int64)
        self.gp_starts = np.cumsum(self.gp_lengths) - self.gp_lengths
        self.gp = (np.searchsorted(self.nodes, np.concatenate(gp_blocks)).astype(np.int64) if gp_blocks
                   else np.zeros(0, np.int64))
        self.gp_keys = np.sort(np.repeat(np.arange(len(synsets), dtype=np.int64), self.gp_lengths) * self.n_nodes + self.gp)

    def lookup(self, synset_index: np.ndarray, node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(is an ancestor, upward distance, shortest_path_distance) of local node ``node`` for
        synset number ``synset_index``; distances are meaningless where not an ancestor."""
        if self.keys is None:
            distance = self.dense_distance[synset_index, node].astype(np.int64)
            return distance >= 0, distance, self.dense_spd[synset_index, node].astype(np.int64)
        found, pos = _lookup(self.keys, synset_index * self.n_nodes + node)
        return found, self.key_distance[pos], self.key_spd[pos]


def _expand(starts: np.ndarray, lengths: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate the blocks ``which`` of a CSR layout: (flat index, owner pair, segment starts)."""
    lens = lengths[which]
    seg = np.cumsum(lens) - lens
    total = int(lens.sum())
    flat = np.repeat(starts[which] - seg, lens) + np.arange(total, dtype=np.int64)
    owner = np.repeat(np.arange(len(which), dtype=np.int64), lens)
    return flat, owner, seg


def _compute_block(table: _AncestorTable, t: np.ndarray, p: np.ndarray) -> PairSimilarities:
    """All values for pairs (t[i], p[i]) given as synset numbers of ``table``, vectorised.
    Mirrors NLTK step by step (see the module docstring)."""
    n = len(t)
    t_node, p_node = table.synset_local[t], table.synset_local[p]  # local node ids of the pair

    # Every ancestor a of the true class, matched against the prediction's ancestors.
    flat, owner, seg = _expand(table.starts, table.lengths, t)
    a = table.ancestor[flat]
    d_true = table.distance[flat]
    common, d_pred, _ = table.lookup(p[owner], a)
    pref_a = np.where(common, table.preference[a], -1)

    # Shortest path: min over common ancestors of d_true + d_pred (NLTK's shortest_path_distance).
    huge = np.int64(_MAX_DISTANCE * 4)
    path_distance = np.minimum.reduceat(np.where(common, d_true + d_pred, huge), seg)
    if path_distance.max(initial=0) >= _MAX_DISTANCE:  # no common ancestor: impossible for WN 3.0 nouns
        raise SimilarityError("A pair of synsets shares no ancestor; WordNet 3.0 nouns always share entity.n.01.")

    # The lowest common subsumer, the one common ancestor every view names (see lowest_common_subsumer):
    # NLTK's lowest_common_hypernyms, the common ancestors of the largest max_depth, the smallest name
    # first. Severity is its height: the hypernym steps from the true class up to it.
    lcs = table.by_lcs_preference[np.maximum.reduceat(np.where(common, table.lcs_preference[a], -1), seg)]
    _, severity, _ = table.lookup(t, lcs)

    # Wu-Palmer, exactly as NLTK: subsumers = common hypernyms with the largest min_depth, sorted
    # by name; the true class wins if it is one of them (it is then an ancestor of p).
    subsumer = table.by_preference[np.maximum.reduceat(pref_a, seg)]
    true_is_ancestor, _, _ = table.lookup(p, t_node)  # t is p or an ancestor of p
    subsumer = np.where(true_is_ancestor & (table.min_depth[t_node] == table.min_depth[subsumer]), t_node, subsumer)
    found1, _, spd1 = table.lookup(t, subsumer)
    found2, _, spd2 = table.lookup(p, subsumer)
    assert found1.all() and found2.all(), "the WUP subsumer must be an ancestor of both synsets"
    depth = table.max_depth[subsumer] + 1  # NLTK: +1 because its path lengths count both end nodes
    wup = (2.0 * depth) / ((spd1 + depth) + (spd2 + depth))

    # Lin (ImageNet-CoG): lcs = the common ancestor with the largest IC.
    ic_lcs = np.maximum.reduceat(np.where(common, table.ic[a], -np.inf), seg)
    ic_sum = table.ic[t_node] + table.ic[p_node]
    same = t == p
    with np.errstate(invalid="ignore", divide="ignore"):
        lin = np.where(ic_sum > 0, 2.0 * ic_lcs / ic_sum, 0.0)  # ic_sum == 0 only for entity vs entity
    lin = np.where(np.isnan(ic_sum), np.nan, lin)  # a synset outside the IC corpus
    lin = np.where(same, 1.0, lin)  # identity: lin(a, a) = 1 by definition

    # Relations.
    sibling_hits = common & (d_true == 1) & (d_pred == 1)  # d == 1 exactly for a direct parent
    is_sibling = (np.bincount(owner[sibling_hits], minlength=n) > 0) & ~same
    gp_flat, gp_owner, _ = _expand(table.gp_starts, table.gp_lengths, t)
    gp_common, _ = _lookup(table.gp_keys, p[gp_owner] * table.n_nodes + table.gp[gp_flat])
    shares_grandparent = np.bincount(gp_owner[gp_common], minlength=n) > 0
    pred_is_ancestor, _, _ = table.lookup(t, p_node)
    is_hypernym = pred_is_ancestor & ~same
    is_hyponym = true_is_ancestor & ~same
    relation = np.full(n, DISTANT, dtype=np.int8)
    relation[severity <= RELATED_MAX_SEVERITY] = RELATED
    relation[shares_grandparent] = COUSIN  # later assignments take precedence
    relation[is_sibling] = SIBLING
    relation[is_hyponym] = HYPONYM
    relation[is_hypernym] = HYPERNYM
    relation[same] = SAME

    return PairSimilarities(
        path_distance=path_distance.astype(np.int16), path=PATH_BY_DISTANCE[path_distance],
        lch=LCH_BY_DISTANCE[path_distance], wup=wup, lin=lin, severity=severity.astype(np.int16),
        relation=relation, is_sibling=is_sibling, is_hypernym=is_hypernym, is_hyponym=is_hyponym,
        lcs=table.offset[lcs].astype(np.int32), subsumer=table.offset[subsumer].astype(np.int32))


def compute_pairs(true_nodes: np.ndarray, pred_nodes: np.ndarray, *, taxonomy: Taxonomy | None = None,
                  information: InformationContent | None = None) -> PairSimilarities:
    """Values for pairs of taxonomy node ids, computed now (no cache), in bounded-memory blocks."""
    taxonomy = taxonomy or get_taxonomy()
    information = information or information_content()
    t = np.asarray(true_nodes, dtype=np.int64).ravel()
    p = np.asarray(pred_nodes, dtype=np.int64).ravel()
    if len(t) != len(p):
        raise SimilarityError("true and predicted arrays differ in length.")
    if len(t) == 0:
        return PairSimilarities.empty()
    with _lock:
        synsets = np.unique(np.concatenate([t, p]))
        table = _AncestorTable(taxonomy, information, synsets)
        t, p = np.searchsorted(synsets, t), np.searchsorted(synsets, p)
        parts = [_compute_block(table, t[i:i + _CHUNK_PAIRS], p[i:i + _CHUNK_PAIRS])
                 for i in range(0, len(t), _CHUNK_PAIRS)]
    return PairSimilarities.concatenate(parts)


# --------------------------------------------------------------------------- disk cache
def default_cache_dir() -> Path:
    from core.runstore import RunStore

    return RunStore().cache_dir


def _cache_file(cache_dir: Path, stem: str) -> Path:
    return Path(cache_dir) / f"{stem}-v{SIMILARITY_CODE_VERSION}-{wordnet_fingerprint()}.npz"


def _save_npz(target: Path, arrays: dict[str, np.ndarray]) -> None:
    """Atomic .npz write; a read-only cache folder only costs a warning."""
    from core.runstore import atomic_path

    try:
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as fh:  # a file object: np.savez would append '.npz' to a path
                np.savez(fh, **arrays)
    except OSError as exc:
        warnings.warn(f"Could not write the similarity cache {target} ({exc}); values are recomputed next time.", stacklevel=3)


def _load_npz(source: Path, expected: dict[str, tuple]) -> dict[str, np.ndarray] | None:
    """The arrays of a cache file, or None when absent, damaged or of another layout."""
    try:
        with np.load(source, allow_pickle=False) as data:
            out = {name: data[name] for name in expected}
    except FileNotFoundError:
        return None
    except Exception:  # damaged, truncated, foreign: recompute and overwrite
        return None
    for name, (dtype, shape) in expected.items():
        if out[name].dtype != np.dtype(dtype) or (shape is not None and out[name].shape != shape):
            return None
    return out


_memo: dict[tuple, object] = {}


def _resolve_cache_dir(cache_dir) -> Path | None:
    if cache_dir is False:
        return None
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


_IC_LAYOUT = {"offsets": (np.int64, None), "counts": (np.int64, None), "ic": (np.float64, None),
              "corpus_size": (np.int64, ())}
# The IC of the vendored WordNet 3.0, shipped with the package (566 KB), named like a cache file: a
# changed corpus or code version looks for another name and builds. Why: building it parses the
# 23,547 corpus synsets through NLTK, 2.0-3.5 s of every cold process that computes a metric
# (an `explain metrics` subprocess: 8.0 s cold, 4.5 s with it). Rebuilt by `make ic`; a test
# checks that it equals a fresh build array for array (tests/explain/test_similarity.py).
PACKAGED_DATA = Path(__file__).resolve().parent / "data"


def packaged_ic_file() -> Path:
    return _cache_file(PACKAGED_DATA, "ic-in21k")


def _ic_from_arrays(loaded: dict | None) -> InformationContent | None:
    if loaded is None or not len(loaded["offsets"]) == len(loaded["counts"]) == len(loaded["ic"]):
        return None
    return InformationContent(loaded["offsets"], loaded["counts"], loaded["ic"], int(loaded["corpus_size"]))


def build_information_content() -> InformationContent:
    """The IC built from the loaded WordNet (no cache, no packaged table): what `make ic` stores."""
    return _build_information_content(get_taxonomy())


def write_information_content(info: InformationContent, target: Path) -> None:
    _save_npz(target, {"offsets": info.offsets, "counts": info.counts, "ic": info.ic,
                       "corpus_size": np.array(info.corpus_size, dtype=np.int64)})


def information_content(*, cache_dir: Path | str | None | bool = None) -> InformationContent:
    """The IN-21K information content, from memory, else the disk cache, else the table shipped
    with the package (:func:`packaged_ic_file`, for the vendored corpus), else built (seconds: it
    loads the 21,843 synsets). ``cache_dir=False`` skips the user's disk cache."""
    key = ("ic", wordnet_fingerprint(), SIMILARITY_CODE_VERSION)
    with _lock:
        if key in _memo:
            return _memo[key]
        folder = _resolve_cache_dir(cache_dir)
        target = _cache_file(folder, "ic-in21k") if folder else None
        info = _ic_from_arrays(_load_npz(target, _IC_LAYOUT)) if target else None
        if info is None:
            info = _ic_from_arrays(_load_npz(packaged_ic_file(), _IC_LAYOUT))
        if info is None:
            info = build_information_content()
            if target:
                write_information_content(info, target)
        _memo[key] = info
        return info


# --------------------------------------------------------------------------- label-space matrices
@dataclass(frozen=True)
class SimilarityMatrices:
    """All ordered pairs of a label space: ``values.<field>[i, j]`` is for true class
    ``wnids[i]`` and prediction ``wnids[j]``."""

    label_space: str
    wnids: tuple[str, ...]
    values: PairSimilarities

    @functools.cached_property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.wnids)}

    def take(self, true_index: np.ndarray, pred_index: np.ndarray) -> PairSimilarities:
        return self.values.take((np.asarray(true_index), np.asarray(pred_index)))


def _matrix_cache_layout(n: int) -> dict[str, tuple]:
    layout = {name: (dtype, (n, n)) for name, dtype in _PAIR_FIELDS.items() if name not in ("path", "lch")}
    layout["wnids"] = (np.dtype("<U9"), (n,))
    return layout


def build_label_space_matrices(label_space: str = IMAGENET_1K, *,
                               cache_dir: Path | str | None | bool = None) -> SimilarityMatrices:
    """Compute the matrices of a label space (``cache_dir`` only serves the IC); refuses spaces
    too big for a matrix."""
    from core.labels import get_label_space

    space = get_label_space(label_space)
    if len(space) > _DENSE_MAX_CLASSES:
        raise SimilarityError(f"{space.name} has {len(space):,} classes: a full matrix would hold "
                              f"{len(space) ** 2:,} pairs. Use similarities() for the pairs you need.")
    taxonomy = get_taxonomy()
    with _lock:
        nodes = np.array([taxonomy.node_of_wnid(w) for w in space.wnids], dtype=np.int64)
    n = len(nodes)
    values = compute_pairs(np.repeat(nodes, n), np.tile(nodes, n), taxonomy=taxonomy,
                           information=information_content(cache_dir=cache_dir))
    return SimilarityMatrices(space.name, space.wnids, values.reshape(n, n))


def label_space_matrices(label_space: str = IMAGENET_1K, *, cache_dir: Path | str | None | bool = None,
                         build: bool = True) -> SimilarityMatrices | None:
    """The matrices of a label space from memory, else the disk cache, else built and cached.
    With ``build=False`` returns None instead of building."""
    from core.labels import canonical_label_space

    name = canonical_label_space(label_space)
    key = ("matrices", name, wordnet_fingerprint(), SIMILARITY_CODE_VERSION)
    with _lock:
        if key in _memo:
            return _memo[key]
        folder = _resolve_cache_dir(cache_dir)
        target = _cache_file(folder, f"similarity-{name}") if folder else None
        from core.labels import get_label_space

        wnids = get_label_space(name).wnids
        loaded = _load_npz(target, _matrix_cache_layout(len(wnids))) if target else None
        if loaded is not None and tuple(loaded.pop("wnids").tolist()) == wnids:
            distance = loaded["path_distance"]
            values = PairSimilarities(path=PATH_BY_DISTANCE[distance], lch=LCH_BY_DISTANCE[distance], **loaded)
            matrices = SimilarityMatrices(name, wnids, values)
        elif not build:
            return None
        else:
            matrices = build_label_space_matrices(name, cache_dir=cache_dir)
            if target:
                arrays = {f: getattr(matrices.values, f) for f in _PAIR_FIELDS if f not in ("path", "lch")}
                _save_npz(target, {**arrays, "wnids": np.array(wnids, dtype="<U9")})
        _memo[key] = matrices
        return matrices


def clear_memory_caches(*, include_information_content: bool = True) -> None:
    """Forget in-memory matrices, pairs and (optionally) the IC; the disk cache stays. For tests
    and benchmarks that need a cold start."""
    with _lock:
        for key in list(_memo):
            if include_information_content or key[0] != "ic":
                del _memo[key]
        _pair_cache.clear()


# --------------------------------------------------------------------------- any pairs, on demand
class _PairCache:
    """Pairs computed on demand (outside ImageNet-1k), kept sorted by packed offsets."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.values = PairSimilarities.empty()
        self.fingerprint = None
        self._index = None  # a hash index of keys, made at the first large lookup after each change

    def get(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, position) of each key; a position of a key not found is 0."""
        if len(keys) < _HASHED_LOOKUP_FROM or len(self.keys) == 0:
            return _lookup(self.keys, keys)
        # Why: searchsorted's binary search of 430,000 keys in as many cost 76 ms (the top-5 severities of the
        # 21k bench, warm); a hash index of the keys, made once per change of the cache (8 ms), 16 ms.
        if self._index is None:
            import pandas as pd

            self._index = pd.Index(self.keys)
        pos = self._index.get_indexer(keys)
        found = pos >= 0
        return found, np.where(found, pos, 0)

    def add(self, keys: np.ndarray, values: PairSimilarities) -> None:
        merged_keys = np.concatenate([self.keys, keys])
        order = np.argsort(merged_keys, kind="stable")
        merged = PairSimilarities.concatenate([self.values, values])
        self.keys, self.values = merged_keys[order], merged.take(order)
        self._index = None


_HASHED_LOOKUP_FROM = 50_000  # keys looked up at once; below, searchsorted needs no index and no pandas
_pair_cache = _PairCache()
# Building the 1k matrices from scratch costs about a second: worth it only for many 1k pairs.
_BUILD_1K_FROM = 50_000


def similarities(true_wnids: Iterable[str], pred_wnids: Iterable[str], *,
                 cache_dir: Path | str | None | bool = None) -> PairSimilarities:
    """Values for each (true_wnids[i], pred_wnids[i]). Pairs inside ImageNet-1k come from its
    cached matrices (built when many are asked for); any other pair (21k/22k classes) is
    computed once and kept in memory. Raises KeyError/ValueError for a wnid that is not a
    WordNet 3.0 noun synset."""
    true_wnids = np.asarray(list(true_wnids) if not isinstance(true_wnids, np.ndarray) else true_wnids, dtype=object)
    pred_wnids = np.asarray(list(pred_wnids) if not isinstance(pred_wnids, np.ndarray) else pred_wnids, dtype=object)
    if true_wnids.shape != pred_wnids.shape:
        raise SimilarityError("true and predicted wnid lists differ in length.")
    if true_wnids.size == 0:
        return PairSimilarities.empty()
    uniques, codes = np.unique(np.concatenate([true_wnids, pred_wnids]).astype(str), return_inverse=True)
    n = len(true_wnids)
    pair_codes = codes[:n].astype(np.int64) * len(uniques) + codes[n:]
    unique_pairs, inverse = np.unique(pair_codes, return_inverse=True)
    values = similarities_of_codes(uniques, unique_pairs // len(uniques), unique_pairs % len(uniques), cache_dir=cache_dir)
    return values.take(inverse.reshape(true_wnids.shape))


def similarities_of_codes(wnids: Sequence[str], true_codes: np.ndarray, pred_codes: np.ndarray, *,
                          cache_dir: Path | str | None | bool = None) -> PairSimilarities:
    """Values for pairs given as codes into ``wnids`` (the metric tables' fast path: the caller
    has already reduced its rows to unique pairs)."""
    return _of_codes(wnids, true_codes, pred_codes, cache_dir, None)


def severities_of_codes(wnids: Sequence[str], true_codes: np.ndarray, pred_codes: np.ndarray, *,
                        cache_dir: Path | str | None | bool = None) -> np.ndarray:
    """``similarities_of_codes(...).severity`` without gathering the other values (the top-5 severities:
    430,000 pairs of the 21k bench, where the other eleven values were two gathers each)."""
    return _of_codes(wnids, true_codes, pred_codes, cache_dir, "severity")


def _of_codes(wnids: Sequence[str], true_codes: np.ndarray, pred_codes: np.ndarray, cache_dir,
              only: str | None):
    """:func:`similarities_of_codes` (``only`` None) or one of its values' arrays (``only``: its name)."""
    from core.labels import get_label_space

    wnids = [str(w) for w in wnids]
    true_codes = np.asarray(true_codes, dtype=np.int64)
    pred_codes = np.asarray(pred_codes, dtype=np.int64)
    space = get_label_space(IMAGENET_1K)
    in_1k = np.array([space.index.get(w, -1) for w in wnids], dtype=np.int64)
    both_1k = (in_1k[true_codes] >= 0) & (in_1k[pred_codes] >= 0)
    matrices = label_space_matrices(IMAGENET_1K, cache_dir=cache_dir,
                                    build=int(both_1k.sum()) >= _BUILD_1K_FROM)
    parts, where = [], []
    if matrices is not None and both_1k.any():
        idx = np.flatnonzero(both_1k)
        rows, cols = in_1k[true_codes[idx]], in_1k[pred_codes[idx]]
        parts.append(matrices.take(rows, cols) if only is None else getattr(matrices.values, only)[rows, cols])
        where.append(idx)
        rest = np.flatnonzero(~both_1k)
    else:
        rest = np.arange(len(true_codes))
    if len(rest):
        parts.append(_on_demand(wnids, true_codes[rest], pred_codes[rest], cache_dir, only))
        where.append(rest)
    merged = PairSimilarities.concatenate(parts) if only is None else np.concatenate(parts)
    order = np.empty(len(true_codes), dtype=np.int64)
    order[np.concatenate(where)] = np.arange(len(true_codes))
    return merged.take(order) if only is None else merged[order]


def _on_demand(wnids: Sequence[str], true_codes: np.ndarray, pred_codes: np.ndarray, cache_dir,
               only: str | None = None):
    offsets = np.array([offset_of_wnid(w) for w in wnids], dtype=np.int64)
    keys = offsets[true_codes] * _PAIR_KEY_SHIFT + offsets[pred_codes]
    fingerprint = wordnet_fingerprint()
    with _lock:
        if _pair_cache.fingerprint != fingerprint:
            _pair_cache.clear()
            _pair_cache.fingerprint = fingerprint
        found, pos = _pair_cache.get(keys)
        missing = ~found
        if missing.any():
            taxonomy = get_taxonomy()
            new_keys, first = np.unique(keys[missing], return_index=True)
            idx = np.flatnonzero(missing)[first]
            node_of_code = {}
            for code in np.unique(np.concatenate([true_codes[idx], pred_codes[idx]])).tolist():
                node_of_code[code] = taxonomy.node_of_wnid(wnids[code])
            t_nodes = np.array([node_of_code[c] for c in true_codes[idx].tolist()], dtype=np.int64)
            p_nodes = np.array([node_of_code[c] for c in pred_codes[idx].tolist()], dtype=np.int64)
            _pair_cache.add(new_keys, compute_pairs(t_nodes, p_nodes, taxonomy=taxonomy,
                                                    information=information_content(cache_dir=cache_dir)))
            found, pos = _pair_cache.get(keys)  # looked up again only when the cache grew
        # Taken under the lock: another thread's add reorders the cache.
        return _pair_cache.values.take(pos) if only is None else getattr(_pair_cache.values, only)[pos]


def lowest_common_subsumer(true_wnid: str, pred_wnid: str) -> str:
    """The pair's one common ancestor, as a wnid (the rule is in the module docstring, ``lcs``):
    what the Confusions table, the Explain page and the matrix name. Raises KeyError/ValueError for a
    wnid that is not a WordNet 3.0 noun synset."""
    return pair_similarity(true_wnid, pred_wnid)["lcs"]


def steps_up(true_wnid: str, ancestor_wnid: str) -> int:
    """Hypernym steps from a class up to one of its ancestors (0 for the class itself), e.g. from a
    confusion's true class to its ``lcs_wnid``: the climb of the drawn path, for
    :func:`explain.vocabulary.lcs_phrase`. Raises SimilarityError if it is not an ancestor."""
    taxonomy = get_taxonomy()
    with _lock:
        node, ancestor = taxonomy.node_of_wnid(true_wnid), taxonomy.node_of_wnid(ancestor_wnid)
        found = taxonomy.ancestors[node].get(ancestor)
    if found is None:
        raise SimilarityError(f"{ancestor_wnid} is not an ancestor of {true_wnid}.")
    return found


def pair_similarity(true_wnid: str, pred_wnid: str) -> dict:
    """One pair as plain values (see :meth:`PairSimilarities.record`)."""
    return similarities([true_wnid], [pred_wnid]).record(0)
