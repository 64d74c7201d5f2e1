"""The WordNet noun graph (core/wordgraph.py) against NLTK, its reference, on every noun synset
and every index lemma; the packaged file current; a query answered without importing NLTK."""
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from core import wordgraph
from core.wordgraph import WordGraphUnavailable, noun_graph, packaged_graph_file
from core.wordnet import VENDORED_NLTK_DATA, get_wordnet
from tests.conftest import ROOT

pytestmark = pytest.mark.xdist_group("wordnet-nouns")  # NLTK's parse of every noun once (tests/conftest.py)


@pytest.fixture(scope="module")
def nltk_nouns():
    return sorted(get_wordnet().all_synsets("n"), key=lambda s: s.offset())


def test_the_packaged_graph_is_the_vendored_corpus_and_current():
    target = packaged_graph_file()  # named by the corpus members it derives from and the layout
    assert target.is_file(), "run 'make wordgraph' and commit core/data/wordnet-nouns-*.npz"
    assert [p.name for p in target.parent.glob("wordnet-nouns-*.npz")] == [target.name], "a stale graph file"
    other = wordgraph.packaged_other_pos_file()
    assert [p.name for p in other.parent.glob("wordnet-other-pos-*.npz")] == [other.name], "run 'make wordgraph'"
    assert len(noun_graph()) == 82_115


@pytest.mark.long
def test_a_fresh_build_equals_the_packaged_file_array_for_array():
    fresh = wordgraph.build_arrays(get_wordnet())
    packaged = wordgraph._read(packaged_graph_file())
    assert set(fresh) == set(packaged)
    for name in fresh:
        assert fresh[name].dtype == packaged[name].dtype and np.array_equal(fresh[name], packaged[name]), name


@pytest.mark.long
def test_every_noun_synset_equals_nltk(nltk_nouns):
    graph = noun_graph()
    assert graph.offsets.tolist() == [s.offset() for s in nltk_nouns]
    assert graph.names == [s.name() for s in nltk_nouns]
    assert graph.definitions == [s.definition() for s in nltk_nouns]
    assert graph._arrays["min_depth"].tolist() == [s.min_depth() for s in nltk_nouns]
    assert graph._arrays["max_depth"].tolist() == [s.max_depth() for s in nltk_nouns]
    for row, synset in enumerate(nltk_nouns):
        noun = graph.noun(row)
        assert noun.lemma_names() == synset.lemma_names()
        children = set(synset.hyponyms() + synset.instance_hyponyms())
        assert [c.name() for c in noun.children()] == sorted(c.name() for c in children)
        assert [p.name() for p in noun.parents()] == sorted(
            p.name() for p in set(synset.hypernyms() + synset.instance_hypernyms()))
        assert sorted(graph.offsets[r] for r in graph.instance_parent_rows(row)) == sorted(
            p.offset() for p in synset.instance_hypernyms())
    # Lemma.count() (a binary search per lemma, 80 us each) on every lemma the corpus tags and as
    # many untagged ones, drawn with a fixed seed.
    lemmas = [(row, k, lemma) for row, s in enumerate(nltk_nouns) for k, lemma in enumerate(s.lemmas())]
    tagged = [item for item in lemmas if graph.lemma_counts(item[0])[item[1]] > 0]
    untagged = random.Random(0).sample([item for item in lemmas if graph.lemma_counts(item[0])[item[1]] == 0], 3000)
    assert len(tagged) > 16_000
    for row, k, lemma in tagged + untagged:
        assert graph.lemma_counts(row)[k] == lemma.count(), lemma


@pytest.mark.long
def test_every_index_lemma_and_inflected_form_gives_nltks_senses(nltk_nouns):
    wn, graph = get_wordnet(), noun_graph()
    assert graph.index_keys == list(wn.all_lemma_names("n"))
    words = list(graph.index_keys)
    rng = random.Random(1)
    sample = rng.sample(words, 5000)
    words += [w + suffix for w in sample for suffix in ("s", "es", "ies", "ves", "men")]  # morphy's rules
    words += list(graph._exceptions)  # noun.exc: 'mice', 'geese', 'oxen', ...
    words += [w.upper() for w in sample[:500]] + ["", "s", "ses", "cat.n.01", "qwzx"]
    for word in words:
        assert [n.offset() for n in graph.synsets(word)] == [s.offset() for s in wn.synsets(word, pos="n")], word
    for word in rng.sample(words, 3000):
        base = graph.morphy(word.lower())
        assert (base[0] if base else None) == wn.morphy(word.lower(), "n"), word


@pytest.mark.long
def test_a_word_that_is_no_noun_gets_nltks_other_parts_of_speech():
    """'beautiful' -> adjective, 'quickly' -> adverb: the packaged lists answer as wn.synsets(word)
    does, on every exception form and a fixed sample of each part of speech's lemmas, inflected."""
    wn = get_wordnet()
    fresh = wordgraph.build_other_pos_arrays(wn)
    with np.load(wordgraph.packaged_other_pos_file(), allow_pickle=False) as packaged:
        assert set(packaged.files) == set(fresh) and all(np.array_equal(packaged[k], fresh[k]) for k in fresh)
    rng = random.Random(2)
    words = [w for pos in "var" for w in rng.sample(list(wn.all_lemma_names(pos)), 800)]
    words += [w + suffix for w in words[:1200] for suffix in ("s", "es", "ed", "ing", "er", "est")]
    words += [w for pos in "var" for w in wn._exception_map[pos]]  # 'ran', 'better', 'best', ...
    words += rng.sample(list(noun_graph().index_keys), 500) + ["qwzx", "", "Beautiful", "RUNNING"]
    kinds = {"v": "v", "a": "a", "s": "a", "r": "r"}
    for word in words:
        theirs = sorted({kinds[s.pos()] for s in wn.synsets(word) if s.pos() != "n"}, key="var".index)
        assert wordgraph.other_parts_of_speech(word) == theirs, word


def test_synset_names_resolve_like_nltk():
    wn, graph = get_wordnet(), noun_graph()
    for row in range(0, len(graph), 97):
        assert graph.synset(graph.names[row]).row == row
    assert graph.synset("Cat.N.01").name() == wn.synset("Cat.N.01").name() == "cat.n.01"
    assert graph.synset("cat.n.00").name() == wn.synset("cat.n.00").name()  # NLTK: index -1, the last sense
    from nltk.corpus.reader.wordnet import WordNetError

    for name, error in (("cat.n.99", IndexError), ("qwzx.n.01", KeyError)):
        with pytest.raises(error):
            graph.synset(name)
        with pytest.raises(WordNetError):
            wn.synset(name)


def test_nouns_answer_as_synsets_do():
    graph, wn = noun_graph(), get_wordnet()
    cat = graph.from_wnid("n02121620")
    assert (cat.name(), cat.offset(), cat.pos(), cat.definition(), cat.lemma_names()) == (
        "cat.n.01", 2121620, "n", wn.synset("cat.n.01").definition(), ["cat", "true_cat"])
    assert cat == graph.synset("cat.n.01") and len({cat, graph.synset("cat.n.01")}) == 1
    with pytest.raises(KeyError, match="not a noun synset of WordNet 3.0"):
        graph.from_wnid("n00000001")
    for text in ("n٠٢١٢١٦٢٠", "n2121620", "n 2121620", "N02121620"):  # int() would take the first as cat's offset
        with pytest.raises(ValueError, match="is not a wnid"):
            graph.from_wnid(text)


def test_nltk_data_path_is_nltks(monkeypatch, tmp_path):
    # NLTK reads NLTK_DATA when nltk.data is imported: ask a fresh process (reloading nltk.data
    # here would leave this worker's reader checking paths against a list without the vendored copy).
    env = {**os.environ, "NLTK_DATA": os.pathsep.join([str(tmp_path / "mine"), str(tmp_path / "theirs")])}
    code = ("import json, nltk.data; from core import wordgraph; "
            "print(json.dumps([nltk.data.path, wordgraph._nltk_data_path()]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    nltks, ours = json.loads(out.stdout)
    assert ours == [p for p in nltks if p != str(VENDORED_NLTK_DATA)] and ours[:2] == env["NLTK_DATA"].split(os.pathsep)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "mine"))
    monkeypatch.delenv("WILDLENS_VENDORED_WORDNET", raising=False)
    (tmp_path / "mine" / "corpora" / "wordnet").mkdir(parents=True)
    assert wordgraph.user_corpus_may_exist()  # then the reader decides, and the graph is built from it
    monkeypatch.setenv("WILDLENS_VENDORED_WORDNET", "1")
    assert not wordgraph.user_corpus_may_exist()


def test_a_missing_or_damaged_graph_file_says_how_to_rebuild(monkeypatch, tmp_path):
    real = packaged_graph_file()
    target = tmp_path / real.name
    target.write_bytes(real.read_bytes()[:100_000])  # cut short
    assert wordgraph._read(target) is None
    monkeypatch.setattr(wordgraph, "PACKAGED_DATA", tmp_path)
    with pytest.raises(WordGraphUnavailable, match="make wordgraph"):
        wordgraph._vendored_graph()
    arrays = wordgraph._read(real)
    arrays["version"] = np.array([wordgraph.GRAPH_LAYOUT_VERSION + 1])  # another layout: never read
    wordgraph.write_arrays(arrays, target)
    assert wordgraph._read(target) is None
    target.unlink()
    with pytest.raises(WordGraphUnavailable, match="missing or damaged"):
        wordgraph._vendored_graph()


QUERY = """
import json, sys, time
started = time.perf_counter()
from core.labels import hyponym_classes, senses
found = senses("cat")
classes = hyponym_classes("cat.n.01")
print(json.dumps({"senses": [s.name for s in found], "tabby": [c.path for c in classes if c.name == "tabby"],
                  "heavy": sorted(m for m in ("nltk", "pandas", "scipy", "torch") if m in sys.modules)}))
from core.labels import QueryError
for word in ("beautiful", "qwzxv"):  # the error paths too: another part of speech, a spelling
    try:
        senses(word)
    except QueryError:
        pass
assert "nltk" not in sys.modules
"""


def test_a_query_reads_the_graph_without_importing_nltk_or_pandas():
    out = subprocess.run([sys.executable, "-c", QUERY], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "WILDLENS_VENDORED_WORDNET": "1"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["heavy"] == []
    assert result["senses"][:2] == ["cat.n.01", "big_cat.n.01"]
    assert result["tabby"] == [["cat.n.01", "domestic_cat.n.01", "tabby.n.01"]]
    cli = subprocess.run([sys.executable, "-m", "explain", "senses", "cat"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "WILDLENS_VENDORED_WORDNET": "1"})
    assert cli.returncode == 0 and cli.stdout.splitlines()[0].startswith("cat.n.01\t7\tfeline mammal"), cli.stderr
