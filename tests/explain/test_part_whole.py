"""The part-whole rule of explain.error_types against NLTK, its reference: on every ordered pair of
ImageNet-1k classes that have a meronym or holonym link near them (and a sample of others), the
vectorised join finds exactly the pairs NLTK's part_meronyms ... substance_holonyms and hypernyms
find, with the same fewest hypernym steps."""
from __future__ import annotations

import random

import numpy as np

from core.labels import get_label_space
from core.wordnet import get_wordnet
from explain.error_types import PART_WHOLE_MAX_STEPS, _part_whole

KINDS = ("part_meronyms", "member_meronyms", "substance_meronyms", "part_holonyms", "member_holonyms",
         "substance_holonyms")


def _linked(synset) -> set:
    """Every synset NLTK links to ``synset`` as part or whole, either way (its own lists and, since a
    link may be stored on one side only, the lists of others naming it: in WordNet 3.0 the holonyms
    are the meronyms' inverse, tests/core/test_meronyms.py, so its own lists hold both)."""
    return {t for kind in KINDS for t in getattr(synset, kind)()}


def _up(synset) -> dict:
    """ancestor -> fewest steps up (0..PART_WHOLE_MAX_STEPS; itself at 0), hypernyms and instance hypernyms."""
    seen, frontier = {synset: 0}, [synset]
    for step in range(1, PART_WHOLE_MAX_STEPS + 1):
        frontier = [p for s in frontier for p in s.hypernyms() + s.instance_hypernyms() if p not in seen]
        for p in frontier:
            seen.setdefault(p, step)
    return seen


def test_part_whole_pairs_and_steps_equal_nltks():
    wn = get_wordnet()
    wnids = list(get_label_space("imagenet-1k").wnids)
    synsets = [wn.synset_from_pos_and_offset("n", int(w[1:])) for w in wnids]
    linked = [_linked(s) for s in synsets]
    up = [_up(s) for s in synsets]
    near = [i for i in range(len(wnids)) if any(_linked(a) for a in up[i])]
    others = random.Random(0).sample([i for i in range(len(wnids)) if i not in set(near)], 40)
    chosen = sorted(near + others)
    pairs = [(t, p) for t in chosen for p in chosen if t != p]
    expected = {}
    for k, (t, p) in enumerate(pairs):
        steps = [s for h, s in up[p].items() if h in linked[t]] + [s for h, s in up[t].items() if h in linked[p]]
        if steps:
            expected[k] = min(steps)
    t_codes = np.array([t for t, _ in pairs], dtype=np.int64)
    p_codes = np.array([p for _, p in pairs], dtype=np.int64)
    got = _part_whole(np.asarray(wnids, dtype=object), t_codes, p_codes)
    assert {k: steps for k, (steps, _) in got.items()} == expected
    assert len(near) > 50 and len(expected) > 100  # the rule has something to find among ImageNet's classes
    car_wheel, sports_car = wnids.index("n02974003"), wnids.index("n04285008")
    k = pairs.index((car_wheel, sports_car))
    assert got[k] == (2, "car wheel is a part of motor vehicle, 2 steps above sports car")
