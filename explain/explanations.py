"""Why a model confused two classes, in WordNet's words: the path between them.

``explain_pair(true_wnid, pred_wnid)`` returns the WordNet path from the true class up to their
lowest common subsumer (``explain.similarity``'s one rule: NLTK's ``lowest_common_hypernyms``, the
first by name; the Confusions table's ``lcs_wnid`` and the matrix's outside columns name the same
node) and down to the prediction, each half a shortest climb, with lemma names and definitions, the
relation kind and the similarity values. ``path_length`` is NLTK's ``shortest_path_distance`` (the
number path and LCH similarity use); the drawn path has ``len(edges)`` edges, the same for most
pairs and more where the shortest path climbs past the lowest common subsumer (tench -> Chihuahua:
14 over animal.n.01, drawn 15 through vertebrate.n.01, where the two meet). The result is plain data (``to_dict()`` is JSON-ready) for a
networkx/plotly graph: ``nodes`` in path order, ``edges[i]`` joining ``nodes[i]`` and
``nodes[i + 1]``, each edge stated as "child IS-A parent".
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from core.wordgraph import noun_of
from core.wordnet import wnid_of
from .similarity import get_taxonomy, pair_similarity, steps_up, wnid_of_offset
from .vocabulary import RELATION_COLOURS, lcs_phrase  # noqa: F401  (re-exported: the colours live in explain.vocabulary)


@dataclass(frozen=True)
class PathNode:
    """A synset on the path. ``roles`` holds any of 'true', 'pred', 'lcs' (a node may hold
    several: the true class is the lcs when the prediction is its hyponym); other nodes have
    ('path',). ``depth`` is NLTK's min_depth, handy as a layer in a layered layout."""

    wnid: str
    name: str  # synset name, e.g. 'tabby.n.01'
    lemma_names: tuple[str, ...]  # with spaces: ('tabby', 'tabby cat')
    definition: str
    roles: tuple[str, ...]
    depth: int


@dataclass(frozen=True)
class PathEdge:
    """``child`` IS-A ``parent`` (a hypernym or instance-hypernym link); ``direction`` says how
    the path walks it: 'up' from the true class to the lcs, 'down' from the lcs to the prediction."""

    child: str  # wnid
    parent: str  # wnid
    kind: str  # 'hypernym' or 'instance_hypernym'
    direction: str  # 'up' or 'down'


@dataclass(frozen=True)
class PairExplanation:
    true_wnid: str
    pred_wnid: str
    relation: str  # same, hypernym, hyponym, sibling, cousin, related, distant (see explain.similarity)
    is_sibling: bool
    path_length: int  # NLTK shortest_path_distance(true, pred); the drawn path has len(edges) >= it
    lcs_wnid: str  # top of the path: the lowest common subsumer (explain.similarity.lowest_common_subsumer)
    subsumer_wnid: str  # Wu-Palmer's subsumer inside NLTK's wup_similarity (by min_depth; may differ from lcs_wnid)
    path: float
    lch: float
    wup: float
    lin: float  # NaN where undefined (a synset outside the IN-21K corpus)
    severity: int
    nodes: tuple[PathNode, ...]
    edges: tuple[PathEdge, ...]

    @property
    def lcs_steps(self) -> int:
        """Hypernym steps from the true class up to ``lcs_wnid`` on the path: the severity."""
        return sum(edge.direction == "up" for edge in self.edges)

    def lcs_phrase(self, true_name: str | None = None) -> str:
        """'both felines, 3 steps up from tabby' (:func:`explain.vocabulary.lcs_phrase`); the true
        class is named by ``true_name`` or its first lemma."""
        lcs = next(n for n in self.nodes if n.wnid == self.lcs_wnid)
        return lcs_phrase(lcs.name, self.lcs_steps, true_name or self.nodes[0].lemma_names[0])

    def to_dict(self) -> dict:
        """Plain, JSON-ready data (an undefined Lin becomes None)."""
        data = asdict(self)
        if math.isnan(data["lin"]):
            data["lin"] = None
        return data

    def shortest_path_apex(self) -> str | None:
        """The common hypernym through which WordNet's shortest path between the two runs (the deepest of
        them, NLTK's min_depth, where several give the shortest length), or None where the path drawn is a
        shortest one. Why: tabby and dog are 3 edges apart through domestic_animal, while the path drawn
        climbs to their lowest common subsumer, carnivore (6 edges): a page that shows "path length 3"
        beside six edges must say where the 3 comes from."""
        if self.path_length == len(self.edges):
            return None
        taxonomy = get_taxonomy()
        mine = taxonomy.ancestors[taxonomy.node_of_wnid(self.true_wnid)]
        theirs = taxonomy.ancestors[taxonomy.node_of_wnid(self.pred_wnid)]
        shortest = [c for c in mine.keys() & theirs.keys() if mine[c] + theirs[c] == self.path_length]
        if not shortest or taxonomy.node_of_wnid(self.lcs_wnid) in shortest:
            return None
        return wnid_of_offset(int(taxonomy.offsets[max(shortest, key=lambda c: (taxonomy.min_depth[c], -c))]))

    def path_table(self):
        """The path as a table, one row per synset from the true class to the prediction."""
        import pandas as pd

        return pd.DataFrame([{"step": i, "synset": n.name, "wnid": n.wnid, "role": ", ".join(n.roles),
                              "lemmas": ", ".join(n.lemma_names), "definition": n.definition, "depth": n.depth}
                             for i, n in enumerate(self.nodes)])

    def summary(self) -> str:
        """One line: 'tabby.n.01 > domestic_cat.n.01 < egyptian_cat.n.01 (sibling, 2 steps)'."""
        text = self.nodes[0].name
        for node, edge in zip(self.nodes[1:], self.edges):
            text += (" > " if edge.direction == "up" else " < ") + node.name
        steps = len(self.edges)
        return f"{text} ({self.relation}, {steps} step{'s' if steps != 1 else ''})"


def confusion_lcs_phrase(true_wnid: str, lcs_wnid: str, true_name: str) -> str:
    """The lcs phrase of a confusions-table row (its ``true_wnid`` and ``lcs_wnid``) without building
    the path: 'both felines, 3 steps up from tabby'; the same as ``explain_pair(...).lcs_phrase()``."""
    return lcs_phrase(noun_of(lcs_wnid).name(), steps_up(true_wnid, lcs_wnid), true_name)


def _climb(taxonomy, start: int, target: int) -> list[int]:
    """A shortest upward path start -> target (target an ancestor). At each step the first parent
    (NLTK's order: hypernyms, then instance hypernyms) that stays on a shortest path."""
    path = [start]
    while path[-1] != target:
        here = path[-1]
        remaining = taxonomy.ancestors[here][target]
        step = next(p for p in taxonomy.parents[here] if taxonomy.ancestors[p].get(target) == remaining - 1)
        path.append(step)
    return path


def _node(taxonomy, node: int, roles: tuple[str, ...]) -> PathNode:
    synset = noun_of(f"n{taxonomy.offsets[node]:08d}")
    return PathNode(wnid_of(synset), synset.name(), tuple(n.replace("_", " ") for n in synset.lemma_names()),
                    synset.definition(), roles, taxonomy.min_depth[node])


def explain_pair(true_wnid: str, pred_wnid: str) -> PairExplanation:
    """The WordNet path true -> ... -> lcs -> ... -> pred, with relation and similarities.
    Raises KeyError/ValueError for a wnid that is not a WordNet 3.0 noun synset."""
    values = pair_similarity(true_wnid, pred_wnid)
    taxonomy = get_taxonomy()
    true_node, pred_node = taxonomy.node_of_wnid(true_wnid), taxonomy.node_of_wnid(pred_wnid)
    lcs_node = taxonomy.node_of_wnid(values["lcs"])
    up = _climb(taxonomy, true_node, lcs_node)
    down = list(reversed(_climb(taxonomy, pred_node, lcs_node)))[1:]  # lcs excluded: it ends `up`
    chain = up + down
    assert len(chain) - 1 >= values["path_distance"], "no path is shorter than NLTK's shortest one"

    def roles(node: int) -> tuple[str, ...]:
        found = tuple(r for r, n in (("true", true_node), ("pred", pred_node), ("lcs", lcs_node)) if n == node)
        return found or ("path",)

    nodes = tuple(_node(taxonomy, n, roles(n)) for n in chain)
    edges = []
    for i, (a, b) in enumerate(zip(chain, chain[1:])):
        going_up = i < len(up) - 1
        child, parent = (a, b) if going_up else (b, a)
        kind = "instance_hypernym" if parent in taxonomy.instance_parents[child] else "hypernym"
        edges.append(PathEdge(nodes[i if going_up else i + 1].wnid, nodes[i + 1 if going_up else i].wnid, kind,
                              "up" if going_up else "down"))
    return PairExplanation(
        true_wnid=true_wnid, pred_wnid=pred_wnid, relation=values["relation"], is_sibling=values["is_sibling"],
        path_length=values["path_distance"], lcs_wnid=values["lcs"], subsumer_wnid=values["subsumer"],
        path=values["path"], lch=values["lch"], wup=values["wup"], lin=values["lin"], severity=values["severity"],
        nodes=nodes, edges=tuple(edges))
