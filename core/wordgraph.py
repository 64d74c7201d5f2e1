"""WordNet 3.0's noun graph as flat NumPy arrays: the questions a query asks without NLTK.

Why: a query (`explain senses cat`, `explain hyponyms cat.n.01`, the Query page) needs the noun
senses of a word, their names, definitions and sense-tagged counts, and the hyponym closure of a
sense. Through NLTK that costs a cold process 5.7-6.4 s (median of 3, 2026-12-03): ``import nltk``
imports scipy.stats and more (1.5-1.8 s), its reader parses ``index.*`` into a dict (1.4 s), and a
closure builds a Python ``Synset`` per node. Read from this module's arrays it costs well under a
second (``benchmarks/bench_query.py``).

What the arrays hold, for the 82,115 noun synsets in offset order (``i`` is a synset's row):

* ``offsets[i]`` (its wnid is ``n%08d``), ``names`` (NLTK's ``Synset.name()``), ``definitions``
  (``Synset.definition()``), ``lemmas`` / ``lemma_counts`` (``lemma_names()`` and each
  ``Lemma.count()``, SemCor's tag count) as a CSR list per synset;
* ``children``: hyponyms and instance hyponyms together, sorted by synset name (NLTK keeps
  relations in sets whose order follows the hash seed; every walk here must not); ``parents``:
  hypernyms and instance hypernyms, sorted by name, ``parents_instance`` 1 where the link is an
  instance hypernym; ``min_depth`` / ``max_depth`` (``Synset.min_depth()`` / ``max_depth()``);
* the noun index (``index.noun``: lemma -> its synsets in WordNet's sense order) and the noun
  exception list (``noun.exc``), from which :meth:`NounGraph.synsets` answers exactly as NLTK's
  ``wn.synsets(word, pos="n")`` (its ``_morphy``, re-stated below).

Every value is NLTK's own answer, read off NLTK's reader by :func:`build_arrays`: NLTK stays the
reference (``tests/core/test_wordgraph.py`` compares every noun synset and every index lemma, and
the similarity functions that users call by name still go through NLTK, :mod:`core.wordnet`).

Where the arrays come from, in order: the file shipped with the package for the vendored corpus
(:func:`packaged_graph_file`, named by a key of the corpus members it derives from, so a changed
corpus looks for another name; rebuilt by ``make wordgraph``), else, when NLTK would load the
user's own WordNet 3.0 corpus instead (see :mod:`core.wordnet`), a copy built from that corpus
once and cached under ``$WILDLENS_HOME/cache`` keyed by its ``data.noun`` (that path imports
NLTK to find it). Stored as ``.npz`` without pickles; strings are UTF-8 blobs split on newlines
(no WordNet name, lemma or definition holds one).
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import threading
import zipfile
from pathlib import Path

import numpy as np

from .errors import WildLensError
from .wordnet import VENDORED_NLTK_DATA, VENDORED_ZIP, WORDNET_VERSION, is_wnid

# Bump when the arrays change meaning or layout: a file of another version is never read.
GRAPH_LAYOUT_VERSION = 2  # 2: parents_instance, min_depth, max_depth
PACKAGED_DATA = Path(__file__).resolve().parent / "data"
# The corpus members the arrays derive from; their CRC-32 and sizes name the packaged file.
_SOURCE_MEMBERS = ("data.noun", "index.noun", "noun.exc", "cntlist.rev")
_STRING_FIELDS = ("names", "definitions", "lemmas", "index_keys", "exception_keys", "exception_values")
_INT_FIELDS = ("offsets", "lemma_at", "lemma_counts", "children_at", "children", "parents_at", "parents",
               "parents_instance", "min_depth", "max_depth", "index_at", "index_synsets")
# NLTK's MORPHOLOGICAL_SUBSTITUTIONS[NOUN] (nltk/corpus/reader/wordnet.py), in its order: the
# order of the forms tried is the order of the senses returned.
NOUN_SUBSTITUTIONS = (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"),
                      ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y"))

# NLTK's substitutions for the other parts of speech (its ADV list is empty), for the one question
# a query asks of them: is a word that is no noun a verb, an adjective or an adverb?
OTHER_SUBSTITUTIONS = {
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
OTHER_POS_LAYOUT_VERSION = 1
_OTHER_MEMBERS = ("index.verb", "index.adj", "index.adv", "verb.exc", "adj.exc", "adv.exc")

_lock = threading.Lock()


class WordGraphUnavailable(WildLensError, RuntimeError):
    """The noun graph could not be read or built; the message says what to do."""


# --------------------------------------------------------------------------- building (NLTK)
def build_arrays(reader=None) -> dict[str, np.ndarray]:
    """The arrays from an NLTK WordNet reader (default: the one :mod:`core.wordnet` loads).
    About 20 s: NLTK parses every noun synset (10 s of it)."""
    if reader is None:
        from .wordnet import get_wordnet

        reader = get_wordnet()
    synsets = sorted(reader.all_synsets("n"), key=lambda s: s.offset())
    row = {s.offset(): i for i, s in enumerate(synsets)}
    names = [s.name() for s in synsets]

    # int32 throughout: offsets are < 2**24 (data.noun is 15 MB), rows < 2**17, counts < 2**31.
    def csr(lists):
        at = np.zeros(len(lists) + 1, dtype=np.int32)
        at[1:] = np.cumsum([len(x) for x in lists])
        flat = [v for x in lists for v in x]
        return at, flat

    lemma_at, lemmas = csr([s.lemma_names() for s in synsets])
    # Lemma.count() is a binary search of cntlist.rev for the line that starts with the lemma's
    # sense key (11.7 s for the 146,312 noun lemmas); one pass over the file into a dict gives the
    # same numbers in 0.1 s (the keys are unique; tests/core/test_wordgraph.py compares with count()).
    with reader.open("cntlist.rev") as stream:
        tagged = {line.split(" ", 1)[0]: int(line.rsplit(" ", 1)[-1]) for line in stream if line.strip()}
    _, counts = csr([[tagged.get(lemma.key(), 0) for lemma in s.lemmas()] for s in synsets])

    def related(s, *kinds):
        found = {row[t.offset()] for kind in kinds for t in getattr(s, kind)()}
        return sorted(found, key=lambda j: names[j])

    children_at, children = csr([related(s, "hyponyms", "instance_hyponyms") for s in synsets])
    parents_at, parents = csr([related(s, "hypernyms", "instance_hypernyms") for s in synsets])
    instance_of = [{row[t.offset()] for t in s.instance_hypernyms()} for s in synsets]
    parents_instance = [int(parents[k] in instance_of[i]) for i in range(len(synsets))
                        for k in range(parents_at[i], parents_at[i + 1])]
    # The raw noun index and exception list, as NLTK's reader holds them (no public accessor
    # returns them unmorphed: wn.synsets applies morphy). Lemma order is index.noun's.
    index_keys = [lemma for lemma in reader.all_lemma_names("n")]
    index_at, index_synsets = csr([[row[o] for o in reader._lemma_pos_offset_map[k]["n"]] for k in index_keys])
    exceptions = reader._exception_map["n"]
    exception_keys = list(exceptions)
    arrays = {
        "offsets": np.array([s.offset() for s in synsets], dtype=np.int32),
        "names": names, "definitions": [s.definition() for s in synsets],
        "lemma_at": lemma_at, "lemmas": lemmas, "lemma_counts": np.array(counts, dtype=np.int32),
        "children_at": children_at, "children": np.array(children, dtype=np.int32),
        "parents_at": parents_at, "parents": np.array(parents, dtype=np.int32),
        "parents_instance": np.array(parents_instance, dtype=np.uint8),
        # NLTK's Synset.min_depth() / max_depth(): 0 at entity.n.01, over hypernyms and instance hypernyms.
        "min_depth": np.array([s.min_depth() for s in synsets], dtype=np.int32),
        "max_depth": np.array([s.max_depth() for s in synsets], dtype=np.int32),
        "index_keys": index_keys, "index_at": index_at, "index_synsets": np.array(index_synsets, dtype=np.int32),
        "exception_keys": exception_keys,
        "exception_values": [" ".join(exceptions[k]) for k in exception_keys],
        "version": np.array([GRAPH_LAYOUT_VERSION], dtype=np.int64),
    }
    for name in _STRING_FIELDS:
        texts = arrays[name]
        if any("\n" in t for t in texts):  # never in WordNet 3.0; a corpus that has one cannot be stored so
            raise WordGraphUnavailable(f"A WordNet {name[:-1]} holds a newline; the noun graph cannot store it.")
        arrays[name] = np.frombuffer("\n".join(texts).encode("utf-8"), dtype=np.uint8)
    return arrays


def build_other_pos_arrays(reader=None) -> dict[str, np.ndarray]:
    """The verb, adjective and adverb index lemmas and exception lists (NLTK's reader's own), for
    :func:`other_parts_of_speech`. Under a second."""
    if reader is None:
        from .wordnet import get_wordnet

        reader = get_wordnet()
    arrays = {"version": np.array([OTHER_POS_LAYOUT_VERSION], dtype=np.int64)}
    for pos in OTHER_SUBSTITUTIONS:
        exceptions = reader._exception_map[pos]
        for name, texts in ((f"keys_{pos}", list(reader.all_lemma_names(pos))),
                            (f"exception_keys_{pos}", list(exceptions)),
                            (f"exception_values_{pos}", [" ".join(v) for v in exceptions.values()])):
            if any("\n" in t for t in texts):
                raise WordGraphUnavailable(f"A WordNet {name} entry holds a newline; it cannot be stored.")
            arrays[name] = np.frombuffer("\n".join(texts).encode("utf-8"), dtype=np.uint8)
    return arrays


def write_arrays(arrays: dict[str, np.ndarray], target: Path) -> None:
    """Write the arrays atomically (core.tables' part file renamed into place; pandas comes with
    that import, so only the builders call this, never a query)."""
    from .tables import write_bytes_atomic

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    write_bytes_atomic(target, buffer.getvalue())  # makes the folder when it is missing


# --------------------------------------------------------------------------- which file
def vendored_key(members: tuple[str, ...] = _SOURCE_MEMBERS) -> str:
    """16 hex digits naming the vendored corpus's files the arrays derive from (CRC-32 and size of
    each member, read from the zip's directory: no member is decompressed)."""
    try:
        with zipfile.ZipFile(VENDORED_ZIP) as archive:
            parts = [f"{m}:{archive.getinfo(f'wordnet/{m}').CRC}:{archive.getinfo(f'wordnet/{m}').file_size}"
                     for m in members]
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise WordGraphUnavailable(f"The vendored WordNet corpus {VENDORED_ZIP} cannot be read ({exc}); restore it "
                                   "with 'git checkout -- core/data'.") from None
    return hashlib.sha256(";".join(parts).encode()).hexdigest()[:16]


def packaged_graph_file() -> Path:
    return PACKAGED_DATA / f"wordnet-nouns-v{GRAPH_LAYOUT_VERSION}-{vendored_key()}.npz"


def packaged_other_pos_file() -> Path:
    return PACKAGED_DATA / f"wordnet-other-pos-v{OTHER_POS_LAYOUT_VERSION}-{vendored_key(_OTHER_MEMBERS)}.npz"


@functools.lru_cache(maxsize=1)
def _other_pos() -> dict[str, tuple[frozenset[str], dict[str, list[str]]]]:
    """pos -> (its index lemmas, its exception list), from the packaged file for the vendored
    corpus, else (a user corpus, or the file missing) from NLTK's reader."""
    arrays = None
    if not user_corpus_may_exist():
        try:
            with np.load(packaged_other_pos_file(), allow_pickle=False) as loaded:
                arrays = {name: loaded[name] for name in loaded.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError):
            arrays = None
        if arrays is not None and arrays.get("version", np.zeros(0)).tolist() != [OTHER_POS_LAYOUT_VERSION]:
            arrays = None
    if arrays is None:
        arrays = build_other_pos_arrays()
    out = {}
    for pos in OTHER_SUBSTITUTIONS:
        values = _strings(arrays[f"exception_values_{pos}"])
        exceptions = {k: v.split() for k, v in zip(_strings(arrays[f"exception_keys_{pos}"]), values)}
        out[pos] = (frozenset(_strings(arrays[f"keys_{pos}"])), exceptions)
    return out


def _morphy_candidates(form: str, exceptions: dict[str, list[str]], substitutions) -> list[str]:
    """NLTK's ``_morphy`` before its index filter: the form itself, then its exception list's
    base forms if it has any, else every form one substitution away (in NLTK's order)."""
    if form in exceptions:
        return [form, *exceptions[form]]
    return [form, *(form[: -len(old)] + new for old, new in substitutions if form.endswith(old))]


def other_parts_of_speech(word: str) -> list[str]:
    """The parts of speech other than noun that NLTK's ``wn.synsets(word)`` finds ``word`` in:
    'v', 'a' (adjectives, satellites included) and 'r', in that order; NLTK's ``_morphy`` per
    part of speech, re-stated as :meth:`NounGraph.morphy` is for nouns."""
    word = word.lower()
    found = []
    for pos, (keys, exceptions) in _other_pos().items():
        if any(form in keys for form in _morphy_candidates(word, exceptions, OTHER_SUBSTITUTIONS[pos])):
            found.append(pos)
    return found


def _nltk_data_path() -> list[str]:
    """NLTK's default data path (``nltk.data.path``, nltk/data.py), computed without importing
    NLTK (whose package init is 1.5 s). A test checks it against ``nltk.data.path``."""
    import sys

    path = [d for d in os.environ.get("NLTK_DATA", "").split(os.pathsep) if d]
    if "APPENGINE_RUNTIME" not in os.environ and os.path.expanduser("~/") != "~/":
        path.append(os.path.expanduser("~/nltk_data"))
    if sys.platform.startswith("win"):
        path += [os.path.join(sys.prefix, "nltk_data"), os.path.join(sys.prefix, "share", "nltk_data"),
                 os.path.join(sys.prefix, "lib", "nltk_data"),
                 os.path.join(os.environ.get("APPDATA", "C:\\"), "nltk_data"),
                 r"C:\nltk_data", r"D:\nltk_data", r"E:\nltk_data"]
    else:
        path += [os.path.join(sys.prefix, "nltk_data"), os.path.join(sys.prefix, "share", "nltk_data"),
                 os.path.join(sys.prefix, "lib", "nltk_data"), "/usr/share/nltk_data",
                 "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]
    return path


def user_corpus_may_exist() -> bool:
    """Whether :mod:`core.wordnet` could load the user's own NLTK corpus rather than the vendored
    one: a ``corpora/wordnet`` folder or ``corpora/wordnet.zip`` on NLTK's data path. A cheap test
    on names only; when it says yes, the reader itself decides (and the graph is built from it)."""
    if os.environ.get("WILDLENS_VENDORED_WORDNET") == "1":
        return False
    for folder in _nltk_data_path():
        if Path(folder) == VENDORED_NLTK_DATA:
            continue
        corpora = Path(folder) / "corpora"
        if (corpora / "wordnet").exists() or (corpora / "wordnet.zip").exists():
            return True
    return False


def _read(source: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a graph file, or None if it is missing, damaged or of another layout."""
    try:
        with np.load(source, allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in (*_STRING_FIELDS, *_INT_FIELDS, "version")}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError):
        return None
    if arrays["version"].tolist() != [GRAPH_LAYOUT_VERSION]:
        return None
    return arrays


@functools.lru_cache(maxsize=1)
def noun_data_sha256() -> str:
    """sha256 of the ``data.noun`` of the corpus :mod:`core.wordnet` loads (every noun relation and
    name derives from it): read from the vendored zip without NLTK (0.1 s), or through NLTK's
    reader when a user corpus may be the one loaded."""
    digest = hashlib.sha256()
    if not user_corpus_may_exist():
        with zipfile.ZipFile(VENDORED_ZIP) as archive, archive.open("wordnet/data.noun") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    from .wordnet import get_wordnet

    stream = get_wordnet().root.join("data.noun").open()
    try:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block if isinstance(block, bytes) else block.encode("utf-8"))
    finally:
        stream.close()
    return digest.hexdigest()


def _user_corpus_graph() -> dict[str, np.ndarray]:
    """The arrays for the corpus NLTK loads when it is the user's own: cached per ``data.noun``."""
    from .runstore import default_root
    from .wordnet import get_wordnet, wordnet_source

    reader = get_wordnet()
    if wordnet_source().kind == "vendored":
        return _vendored_graph()
    target = default_root() / "cache" / f"wordnet-nouns-v{GRAPH_LAYOUT_VERSION}-user-{noun_data_sha256()[:16]}.npz"
    arrays = _read(target)
    if arrays is None:
        arrays = build_arrays(reader)
        try:
            write_arrays(arrays, target)
        except OSError:  # a read-only store: the graph still serves this process
            pass
    return arrays


def _vendored_graph() -> dict[str, np.ndarray]:
    source = packaged_graph_file()
    arrays = _read(source)
    if arrays is None:
        raise WordGraphUnavailable(
            f"The WordNet noun graph {source.name} is missing or damaged in {source.parent}; rebuild it with "
            "'make wordgraph' (or restore it with 'git checkout -- core/data').")
    return arrays


@functools.lru_cache(maxsize=1)
def _load() -> "NounGraph":
    return NounGraph(_user_corpus_graph() if user_corpus_may_exist() else _vendored_graph())


def noun_graph() -> "NounGraph":
    """The noun graph of the WordNet :mod:`core.wordnet` loads, once per process (thread-safe)."""
    with _lock:
        return _load()


def noun_of(wnid: str) -> "Noun":
    """``core.wordnet.synset_of`` from the graph: the noun of a wnid (same ValueError / KeyError)."""
    return noun_graph().from_wnid(wnid)


# --------------------------------------------------------------------------- reading
def _strings(blob: np.ndarray) -> list[str]:
    return blob.tobytes().decode("utf-8").split("\n") if blob.size else []


class NounGraph:
    """The arrays with the lookups a query needs; rows are synsets in offset order."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self._arrays = arrays
        self.offsets = arrays["offsets"]
        self.version = WORDNET_VERSION

    def __len__(self) -> int:
        return len(self.offsets)

    @functools.cached_property
    def names(self) -> list[str]:
        return _strings(self._arrays["names"])

    @functools.cached_property
    def definitions(self) -> list[str]:
        return _strings(self._arrays["definitions"])

    @functools.cached_property
    def _lemmas(self) -> list[str]:
        return _strings(self._arrays["lemmas"])

    @functools.cached_property
    def _lists(self) -> dict[str, list[int]]:
        return {name: self._arrays[name].tolist() for name in
                ("lemma_at", "lemma_counts", "children_at", "children", "parents_at", "parents",
                 "parents_instance", "max_depth", "index_at", "index_synsets")}

    @functools.cached_property
    def index_keys(self) -> list[str]:
        """index.noun's lemmas in its order (NLTK's ``all_lemma_names("n")``)."""
        return _strings(self._arrays["index_keys"])

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {key: k for k, key in enumerate(self.index_keys)}

    @functools.cached_property
    def _exceptions(self) -> dict[str, list[str]]:
        values = _strings(self._arrays["exception_values"])
        return {key: value.split() for key, value in zip(_strings(self._arrays["exception_keys"]), values)}

    # -- one synset
    def noun(self, row: int) -> "Noun":
        return Noun(self, int(row))

    @functools.cached_property
    def _row_of_offset(self) -> dict[int, int]:
        # A dict, not np.searchsorted per call: with a Python int against the int32 array that
        # converted the whole array each time (23 us a call, 1.4 s of a 21k metric run).
        return {offset: row for row, offset in enumerate(self.offsets.tolist())}

    def row_of_offset(self, offset: int) -> int | None:
        return self._row_of_offset.get(offset)

    def from_wnid(self, wnid: str) -> "Noun":
        """The noun of a wnid; ValueError for a text that is not one and KeyError when no noun has
        it (core.wordnet.synset_of's words for both)."""
        if not is_wnid(wnid):  # int() reads 'n٠٢١٢٣٠٤٥' as tabby's offset: the format comes first
            raise ValueError(f"{wnid!r} is not a wnid: expected 'n' followed by 8 digits, e.g. n02123045.")
        row = self.row_of_offset(int(wnid[1:]))
        if row is None:
            raise KeyError(f"{wnid} is not a noun synset of WordNet {WORDNET_VERSION}.")
        return self.noun(row)

    def max_depth(self, row: int) -> int:
        return self._lists["max_depth"][row]

    def min_depth(self, row: int) -> int:
        return int(self._arrays["min_depth"][row])

    def lemma_names(self, row: int) -> list[str]:
        at = self._lists["lemma_at"]
        return self._lemmas[at[row]:at[row + 1]]

    def lemma_counts(self, row: int) -> list[int]:
        at = self._lists["lemma_at"]
        return self._lists["lemma_counts"][at[row]:at[row + 1]]

    def children_rows(self, row: int) -> list[int]:
        at = self._lists["children_at"]
        return self._lists["children"][at[row]:at[row + 1]]

    def parent_rows(self, row: int) -> list[int]:
        """Hypernyms and instance hypernyms, sorted by name."""
        at = self._lists["parents_at"]
        return self._lists["parents"][at[row]:at[row + 1]]

    def instance_parent_rows(self, row: int) -> list[int]:
        """The parents reached by an instance-hypernym link."""
        at = self._lists["parents_at"]
        flags = self._lists["parents_instance"][at[row]:at[row + 1]]
        return [p for p, flag in zip(self._lists["parents"][at[row]:at[row + 1]], flags) if flag]

    # -- the noun index
    def index_rows(self, lemma: str) -> list[int]:
        """The synsets index.noun lists for ``lemma`` (lower case, '_' for spaces), in its order."""
        k = self._index.get(lemma)
        if k is None:
            return []
        at = self._lists["index_at"]
        return self._lists["index_synsets"][at[k]:at[k + 1]]

    def morphy(self, form: str) -> list[str]:
        """NLTK's ``_morphy(form, "n")``: the exception list's base forms if ``form`` is in it,
        else the forms one substitution away; the form itself first; those in index.noun, once."""
        seen: list[str] = []
        for candidate in _morphy_candidates(form, self._exceptions, NOUN_SUBSTITUTIONS):
            if candidate in self._index and candidate not in seen:
                seen.append(candidate)
        return seen

    def synsets(self, word: str) -> list["Noun"]:
        """NLTK's ``wn.synsets(word, pos="n")``: lower-cased, morphy, each form's senses in order."""
        word = word.lower()
        return [self.noun(r) for form in self.morphy(word) for r in self.index_rows(form)]

    def synset(self, name: str) -> "Noun":
        """NLTK's ``wn.synset(name)`` for a noun name ('cat.n.01'); KeyError or IndexError as
        NLTK's WordNetError would say. Like NLTK, 'cat.n.00' names the last sense (index -1)."""
        lemma, pos, number = name.lower().rsplit(".", 2)
        if pos != "n":
            raise KeyError(f"{name!r} is not a noun synset name")
        rows = self.index_rows(lemma)
        if not rows:
            raise KeyError(f"No lemma {lemma!r} with part of speech 'n'")
        return self.noun(rows[int(number) - 1])


class Noun:
    """One noun synset of the graph, answering as NLTK's ``Synset`` does for what queries use
    (``name``, ``offset``, ``pos``, ``definition``, ``lemma_names``, ``hypernyms``,
    ``instance_hypernyms``, ``min_depth``, ``max_depth``), plus ``children`` / ``parents`` (both
    relation kinds, sorted by name) and ``lemma_counts`` (SemCor tags).
    Equal when the row is; hashable, so it keys dicts as synsets do."""

    __slots__ = ("graph", "row")

    def __init__(self, graph: NounGraph, row: int):
        self.graph = graph
        self.row = row

    def offset(self) -> int:
        return int(self.graph.offsets[self.row])

    def pos(self) -> str:
        return "n"

    def name(self) -> str:
        return self.graph.names[self.row]

    def definition(self) -> str:
        return self.graph.definitions[self.row]

    def lemma_names(self) -> list[str]:
        return self.graph.lemma_names(self.row)

    def lemma_counts(self) -> list[int]:
        return self.graph.lemma_counts(self.row)

    def children(self) -> list["Noun"]:
        return [Noun(self.graph, r) for r in self.graph.children_rows(self.row)]

    def parents(self) -> list["Noun"]:
        return [Noun(self.graph, r) for r in self.graph.parent_rows(self.row)]

    def hypernyms(self) -> list["Noun"]:
        """NLTK's ``hypernyms()`` (no instance links), sorted by name (NLTK's order is a set's)."""
        instance = set(self.graph.instance_parent_rows(self.row))
        return [Noun(self.graph, r) for r in self.graph.parent_rows(self.row) if r not in instance]

    def instance_hypernyms(self) -> list["Noun"]:
        return [Noun(self.graph, r) for r in self.graph.instance_parent_rows(self.row)]

    def max_depth(self) -> int:
        return self.graph.max_depth(self.row)

    def min_depth(self) -> int:
        return self.graph.min_depth(self.row)

    def __eq__(self, other) -> bool:
        return isinstance(other, Noun) and other.row == self.row and other.graph is self.graph

    def __hash__(self) -> int:
        return self.row

    def __repr__(self) -> str:
        return f"Noun('{self.name()}')"
