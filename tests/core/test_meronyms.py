"""WordNet's part-whole links (core/meronyms.py) against NLTK, their reference, on every noun synset
(meronyms and holonyms, both directions); the packaged file current; read without NLTK."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from core import meronyms
from core.meronyms import KINDS, packaged_meronym_file, part_whole_links, part_whole_rows
from core.wordgraph import WordGraphUnavailable, noun_graph
from core.wordnet import get_wordnet
from tests.conftest import ROOT

pytestmark = pytest.mark.xdist_group("wordnet-nouns")  # NLTK's parse of every noun once (tests/conftest.py)

CAR, CAR_WHEEL, MOTOR_VEHICLE = "n02958343", "n02974003", "n03791235"


@pytest.fixture(scope="module")
def nltk_links():
    """offset -> kind -> the targets' offsets, as NLTK gives them (sorted by synset name: NLTK's own
    order follows the hash seed), for every noun synset (one pass)."""
    return {s.offset(): {kind: [t.offset() for t in sorted(getattr(s, kind)(), key=lambda t: t.name())]
                         for kind in KINDS}
            for s in get_wordnet().all_synsets("n")}


def test_the_packaged_file_is_the_vendored_corpus_and_current():
    target = packaged_meronym_file()  # named by data.noun's CRC and size and the layout
    assert target.is_file(), "run 'make wordgraph' and commit core/data/wordnet-meronyms-*.npz"
    assert [p.name for p in target.parent.glob("wordnet-meronyms-*.npz")] == [target.name], "a stale meronym file"


@pytest.mark.long
def test_every_noun_synsets_meronyms_and_holonyms_equal_nltks(nltk_links):
    graph, links = noun_graph(), part_whole_links()
    offsets = graph.offsets
    assert len(nltk_links) == len(graph) == 82_115
    for offset, expected in nltk_links.items():
        got = part_whole_rows(graph.row_of_offset(offset))
        assert {kind: [int(offsets[r]) for r in rows] for kind, rows in got.items()} == expected, offset
    # and nothing else: the file holds exactly NLTK's links, each once
    assert len(links) == sum(len(v) for kinds in nltk_links.values() for v in kinds.values()) == 44_374
    car = part_whole_rows(graph.from_wnid(CAR).row)["part_meronyms"]
    assert len(car) == 29 and graph.names[car[0]] == "accelerator.n.01"


@pytest.mark.long
def test_nltks_holonyms_are_exactly_the_inverse_of_its_meronyms(nltk_links):
    """Checked, not assumed: the file stores both as NLTK gives them, and this is why a reader may
    follow either direction alone in WordNet 3.0."""
    for meronym, holonym in zip(KINDS[:3], KINDS[3:]):
        forward = {(s, t) for s, kinds in nltk_links.items() for t in kinds[meronym]}
        backward = {(t, s) for s, kinds in nltk_links.items() for t in kinds[holonym]}
        assert forward == backward and len(forward) in (9_097, 12_293, 797), meronym


def test_the_links_of_many_synsets_at_once_equal_one_by_one():
    graph, links = noun_graph(), part_whole_links()
    rows = [graph.from_wnid(w).row for w in (CAR, CAR_WHEEL, "n02123045", CAR)]  # tabby has none; car twice
    which, target, kind = links.of_rows(rows)
    for k, row in enumerate(rows):
        mine = part_whole_rows(row)
        assert sorted(zip(kind[which == k].tolist(), target[which == k].tolist())) == sorted(
            (KINDS.index(name), t) for name, targets in mine.items() for t in targets)
    wheel = part_whole_rows(graph.from_wnid(CAR_WHEEL).row)
    assert [graph.names[r] for r in wheel["part_holonyms"]] == ["motor_vehicle.n.01"]
    assert meronyms.kind_phrase("part_holonyms") == "a part of" and meronyms.is_meronym_kind("member_meronyms")


def test_a_missing_or_damaged_file_says_how_to_rebuild(monkeypatch, tmp_path):
    real = packaged_meronym_file()
    target = tmp_path / real.name
    target.write_bytes(real.read_bytes()[:1000])  # cut short
    assert meronyms.read_arrays(target) is None
    arrays = meronyms.read_arrays(real)
    arrays["version"] = np.array([meronyms.MERONYM_LAYOUT_VERSION + 1])  # another layout: never read
    from core.wordgraph import write_arrays

    write_arrays(arrays, target)
    assert meronyms.read_arrays(target) is None
    monkeypatch.setattr(meronyms, "PACKAGED_DATA", tmp_path)
    monkeypatch.setenv("WILDLENS_VENDORED_WORDNET", "1")
    with pytest.raises(WordGraphUnavailable, match="make wordgraph"):
        meronyms._arrays()


READ = """
import json, sys
from core.meronyms import part_whole_rows
from core.wordgraph import noun_graph
graph = noun_graph()
wheel = part_whole_rows(graph.from_wnid("n02974003").row)
print(json.dumps({"holonyms": [graph.names[r] for r in wheel["part_holonyms"]],
                  "heavy": sorted(m for m in ("nltk", "pandas", "scipy") if m in sys.modules)}))
"""


def test_reading_the_links_imports_no_nltk():
    out = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "WILDLENS_VENDORED_WORDNET": "1"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result == {"holonyms": ["motor_vehicle.n.01"], "heavy": []}
