"""Direct, per-pair reference implementations of the explain/ metrics, written from the SPEC's
definitions with NLTK's public API only (no code shared with explain.similarity). Slow on
purpose: the tests compare the vectorised engine against these, pair by pair."""
from __future__ import annotations

import functools
import math
from collections import Counter

import pytest

from core.labels import get_label_space
from core.wordnet import NOUN_MAX_DEPTH, get_wordnet, synset_of
from explain.vocabulary import RELATED_MAX_SEVERITY


def _up(synset):
    return synset.hypernyms() + synset.instance_hypernyms()


@pytest.fixture(scope="module")
def nltk_noun_depth():
    """NLTK's LCH needs the noun taxonomy depth and finds it by walking all 82,115 noun synsets
    (~20 s). tests/core/test_wordnet.py checks that walk equals NOUN_MAX_DEPTH; here NLTK's memo is
    seeded with it, and the seed is removed afterwards so that check still does the walk."""
    wn = get_wordnet()
    key = ("n", False)
    seeded = key not in wn._max_depth
    if seeded:
        wn._max_depth[key] = NOUN_MAX_DEPTH
    yield
    if seeded:
        wn._max_depth.pop(key, None)


def ancestors(synset) -> set:
    """Proper ancestors over hypernyms and instance hypernyms (NLTK's closure)."""
    return set(synset.closure(_up))


def parents(synset) -> set:
    return set(_up(synset))


def grandparents(synset) -> set:
    return {g for p in _up(synset) for g in _up(p)}


def upward_distances(synset) -> dict:
    """Shortest number of hypernym links from ``synset`` to each ancestor (itself at 0), from
    NLTK's public hypernym_distances()."""
    out = {}
    for node, distance in synset.hypernym_distances():
        out[node] = min(distance, out.get(node, distance))
    return out


def relation(true, pred) -> str:
    """Exclusive relation, in explain.similarity's documented precedence."""
    if true == pred:
        return "same"
    if pred in ancestors(true):
        return "hypernym"
    if true in ancestors(pred):
        return "hyponym"
    if parents(true) & parents(pred):
        return "sibling"
    if grandparents(true) & grandparents(pred):
        return "cousin"
    return "related" if severity(true, pred) <= RELATED_MAX_SEVERITY else "distant"


def is_sibling(true, pred) -> bool:
    return true != pred and bool(parents(true) & parents(pred))


def lowest_common_subsumer(true, pred):
    """WildLens's one common ancestor of a pair: NLTK's ``true.lowest_common_hypernyms(pred)`` (the
    common hypernyms, each synset its own, of the largest max_depth), the first by synset name."""
    return sorted(true.lowest_common_hypernyms(pred))[0]


def severity(true, pred) -> int:
    """Hypernym steps from the true class up to the pair's lowest common subsumer (its height)."""
    return upward_distances(true)[lowest_common_subsumer(true, pred)]


@functools.lru_cache(maxsize=1)
def _corpus():
    """ImageNet-CoG's corpus: every IN-21K concept and all its ancestors; and for each corpus
    member the set of itself and its ancestors (a memoised walk over NLTK's hypernym links)."""
    up_sets = {}

    def up(synset) -> frozenset:
        if synset not in up_sets:
            up_sets[synset] = frozenset({synset}).union(*(up(p) for p in _up(synset)))
        return up_sets[synset]

    corpus = set()
    for wnid in get_label_space("imagenet-21k").wnids:
        corpus |= up(synset_of(wnid))
    return corpus, {c: up_sets[c] for c in corpus}


@functools.lru_cache(maxsize=1)
def _under_counts() -> Counter:
    """Corpus concept -> how many corpus concepts are it or lie under it, straight from the
    definition: each corpus member counts once for itself and for each of its ancestors."""
    corpus, up_sets = _corpus()
    counts = Counter()
    for member in corpus:
        counts.update(up_sets[member])
    return counts


def concepts_under(synset) -> int:
    return _under_counts()[synset]


def information_content(synset) -> float:
    corpus, _ = _corpus()
    return -math.log(concepts_under(synset) / len(corpus))


def in_corpus(synset) -> bool:
    return synset in _corpus()[0]


def lin(true, pred) -> float:
    """2 IC(lcs) / (IC(a) + IC(b)), lcs = the common hypernym with the largest IC; 1 for a == b;
    NaN when a synset lies outside the corpus."""
    if true == pred:
        return 1.0
    if not (in_corpus(true) and in_corpus(pred)):
        return math.nan
    ic_lcs = max(information_content(c) for c in true.common_hypernyms(pred))
    denominator = information_content(true) + information_content(pred)
    return 2 * ic_lcs / denominator if denominator > 0 else 0.0
