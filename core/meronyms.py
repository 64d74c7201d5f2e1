"""WordNet 3.0's part-whole links between noun synsets (meronyms and holonyms) as flat arrays, read
without NLTK.

Why a file of its own: the noun graph (:mod:`core.wordgraph`) holds the hypernym DAG only, and
explain's ``part-whole`` error type (car wheel predicted as car: a car wheel is a part of motor
vehicle, one step above car) needs NLTK's ``part_meronyms``, ``member_meronyms``,
``substance_meronyms`` and the three ``*_holonyms`` of every class it sees. Through NLTK that is
its 5-10 s load; this file (``core/data/wordnet-meronyms-v<layout>-<corpus>.npz``, 0.18 MB) is read
in milliseconds.

What it holds: one row per link as NLTK gives it, ``(source offset, target offset, kind)`` with
``kind`` an index into :data:`KINDS`; sorted by source offset, then kind, then the target's synset
name (NLTK keeps relations in sets whose order follows the hash seed). Both directions are stored
as NLTK's reader returns them, not derived from each other: in WordNet 3.0 every holonym link is
the inverse of a meronym link (9,097 part, 12,293 member and 797 substance links each way;
``tests/core/test_meronyms.py`` compares every noun synset with NLTK), but a user's corpus need not
be so tidy.

Where it comes from: the file shipped with the package for the vendored corpus (named by the CRC
and size of its ``data.noun``, like the noun graph; rebuilt by ``make wordgraph``,
``scripts/build_meronyms.py``), else, when NLTK would load the user's own corpus (see
:mod:`core.wordnet`), built from NLTK's reader once per process.
"""
from __future__ import annotations

import functools
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .wordgraph import PACKAGED_DATA, WordGraphUnavailable, noun_graph, user_corpus_may_exist, vendored_key

# Bump when the arrays change meaning or layout: a file of another version is never read.
MERONYM_LAYOUT_VERSION = 1
# NLTK's Synset methods, in this order: a link's kind is its index here.
KINDS = ("part_meronyms", "member_meronyms", "substance_meronyms", "part_holonyms", "member_holonyms",
         "substance_holonyms")
# What a link says, as "<part> is <phrase> <whole>": a meronym of X is a part of X; X is a part of its holonym.
PHRASES = {"part": "a part of", "member": "a member of", "substance": "a substance of"}
_SOURCE_MEMBERS = ("data.noun",)  # every pointer of a noun synset is in its data.noun line
_FIELDS = ("source", "target", "kind")

_lock = threading.Lock()


def kind_phrase(kind: str) -> str:
    """'a part of' for part_meronyms / part_holonyms (and member, substance likewise)."""
    return PHRASES[kind.split("_", 1)[0]]


def is_meronym_kind(kind: str) -> bool:
    """A meronym link's target is the part (car -> car door); a holonym link's target the whole."""
    return kind.endswith("_meronyms")


# --------------------------------------------------------------------------- building (NLTK)
def build_meronym_arrays(reader=None) -> dict[str, np.ndarray]:
    """The links of every noun synset, from an NLTK WordNet reader (default: the one
    :mod:`core.wordnet` loads). About 10 s, NLTK parsing every noun synset."""
    if reader is None:
        from .wordnet import get_wordnet

        reader = get_wordnet()
    rows = []
    for synset in sorted(reader.all_synsets("n"), key=lambda s: s.offset()):
        for code, kind in enumerate(KINDS):
            for target in sorted(getattr(synset, kind)(), key=lambda t: t.name()):
                if target.pos() != "n":  # never in WordNet 3.0: meronymy links nouns only
                    raise WordGraphUnavailable(f"{synset.name()} has a {kind} link to {target.name()}, no noun.")
                rows.append((synset.offset(), target.offset(), code))
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return {"source": table[:, 0].astype(np.int32), "target": table[:, 1].astype(np.int32),
            "kind": table[:, 2].astype(np.uint8), "version": np.array([MERONYM_LAYOUT_VERSION], dtype=np.int64)}


def packaged_meronym_file() -> Path:
    return PACKAGED_DATA / f"wordnet-meronyms-v{MERONYM_LAYOUT_VERSION}-{vendored_key(_SOURCE_MEMBERS)}.npz"


def read_arrays(source: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a meronym file, or None if it is missing, damaged or of another layout."""
    try:
        with np.load(source, allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in (*_FIELDS, "version")}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError):
        return None
    if arrays["version"].tolist() != [MERONYM_LAYOUT_VERSION]:
        return None
    if not len(arrays["source"]) == len(arrays["target"]) == len(arrays["kind"]):
        return None
    return arrays


# --------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class PartWholeLinks:
    """Every link as rows of :func:`core.wordgraph.noun_graph` (``source``, ``target``: int64 arrays;
    ``kind``: index into :data:`KINDS`), sorted by source row; ``at``: CSR offsets, the links of row
    ``r`` are ``at[r]:at[r + 1]``."""

    source: np.ndarray
    target: np.ndarray
    kind: np.ndarray
    at: np.ndarray

    def __len__(self) -> int:
        return len(self.source)

    def of_rows(self, rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The links of many synsets at once: (position in ``rows`` of each link's source, target
        row, kind), in the order of ``rows`` and, per row, the file's order. No Python loop."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.at[rows], self.at[rows + 1]
        counts = ends - starts
        which = np.repeat(np.arange(len(rows)), counts)
        first = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        links = first + np.arange(int(counts.sum()))
        return which, self.target[links], self.kind[links]


def _arrays() -> dict[str, np.ndarray]:
    if user_corpus_may_exist():
        from .wordnet import get_wordnet, wordnet_source

        if wordnet_source().kind != "vendored":
            return build_meronym_arrays(get_wordnet())
    source = packaged_meronym_file()
    arrays = read_arrays(source)
    if arrays is None:
        raise WordGraphUnavailable(
            f"The WordNet meronym file {source.name} is missing or damaged in {source.parent}; rebuild it with "
            "'make wordgraph' (or restore it with 'git checkout -- core/data').")
    return arrays


@functools.lru_cache(maxsize=1)
def _load() -> PartWholeLinks:
    arrays = _arrays()
    graph = noun_graph()
    offsets = graph.offsets.astype(np.int64)
    rows = []
    for name in ("source", "target"):
        wanted = arrays[name].astype(np.int64)
        at = np.minimum(np.searchsorted(offsets, wanted), len(offsets) - 1)
        if len(wanted) and not (offsets[at] == wanted).all():
            raise WordGraphUnavailable("The WordNet meronym file names synsets the noun graph lacks; rebuild both "
                                       "with 'make wordgraph'.")
        rows.append(at)
    source, target = rows
    kind = arrays["kind"].astype(np.int64)
    if len(kind) and (kind.max() >= len(KINDS)):
        raise WordGraphUnavailable("The WordNet meronym file holds an unknown link kind; rebuild it with "
                                   "'make wordgraph'.")
    order = np.argsort(source, kind="stable")  # already sorted by offset = by row; kept stable to be sure
    source, target, kind = source[order], target[order], kind[order]
    at = np.searchsorted(source, np.arange(len(offsets) + 1)).astype(np.int64)
    return PartWholeLinks(source, target, kind, at)


def part_whole_links() -> PartWholeLinks:
    """Every meronym and holonym link of the loaded WordNet's nouns, once per process (thread-safe)."""
    with _lock:
        return _load()


def part_whole_rows(row: int) -> dict[str, list[int]]:
    """NLTK's ``part_meronyms()`` ... ``substance_holonyms()`` of the noun at ``row`` of the noun
    graph, as noun-graph rows sorted by synset name; every kind of :data:`KINDS` is a key."""
    links = part_whole_links()
    start, end = int(links.at[row]), int(links.at[row + 1])
    out: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for target, kind in zip(links.target[start:end].tolist(), links.kind[start:end].tolist()):
        out[KINDS[kind]].append(target)
    return out
