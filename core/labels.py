"""ImageNet label spaces and the WordNet questions WildLens asks of them.

A label space is an ordered list of wnids: position i is output i of a model trained on it.
The lists, lemmas and definitions are the ones timm ships (``timm/data/_info``); they are read
as files, without importing timm (which would import torch), so this module stays light.

Query flow: ``senses("cat", "imagenet-1k")`` lists the noun senses of a word with how many
classes lie under each, those with the most classes first; ``preselected_sense`` says whether one
of them is the word's clear meaning (else a page asks); ``hyponym_classes("cat.n.01",
"imagenet-1k")`` gives the classes of one sense, ``combined_classes(["crane.n.04", "crane.n.05"])``
those of several senses together, each class tagged with the sense(s) it lies under.
"Under" means the transitive closure over ``hyponyms()`` and ``instance_hyponyms()``, the sense
itself included, matched by wnid (WordNet offset), never by class-name strings.

Label sets (issue 14, zero-shot models) are label spaces too, so ``get_label_space`` and
everything built on it (names, definitions, ``in_label_space``) read them like ImageNet's lists:

* ``sense:<synset>`` (``sense:cat.n.01``; a wnid or an unambiguous word works and is stored as
  the synset name): the sense's whole hyponym closure, the sense itself included, over
  ``hyponyms()`` and ``instance_hyponyms()`` as for a query, so WordNet nouns outside every
  ImageNet list belong to it;
* ``file:<sha256[:12]>``: a set of wnids saved once under
  ``$WILDLENS_HOME/cache/labelsets/<sha12>.txt`` (:func:`store_label_set`), named by the hash of
  its sorted wnids, so any later reader on this machine resolves it.

A label set's class order is sorted by wnid (ImageNet-1k's own order is that too).
"""
from __future__ import annotations

import csv
import dataclasses
import difflib
import functools
import hashlib
import importlib.util
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .errors import WildLensError
from .wordgraph import Noun, noun_graph, other_parts_of_speech
from .wordnet import get_wordnet, is_wnid, wnid_of
from .userfile import expand_user


class QueryError(WildLensError, ValueError):
    """A query WildLens cannot answer; the message tells the person what to do instead."""


# name -> (file in timm/data/_info, description). Names are what users type and runs store.
_LABEL_SPACE_FILES = {
    "imagenet-1k": ("imagenet_synsets.txt", "ImageNet-1k (ILSVRC-2012), 1,000 classes"),
    "imagenet-21k": ("imagenet21k_goog_synsets.txt", "ImageNet-21k, Google's 21,843-class release (fall 2011)"),
    "imagenet-22k": ("imagenet22k_synsets.txt", "ImageNet-22k, 21,841 classes (timm's in22k ordering)"),
    "imagenet-22k-ms": ("imagenet22k_ms_synsets.txt", "ImageNet-22k, Microsoft ordering (1k classes first)"),
    "imagenet-12k": ("imagenet12k_synsets.txt", "ImageNet-12k, timm's 11,821-class subset of 22k"),
    "imagenet-a": ("imagenet_a_synsets.txt", "ImageNet-A, 200-class subset of 1k"),
    "imagenet-r": ("imagenet_r_synsets.txt", "ImageNet-R, 200-class subset of 1k"),
}
_ALIASES = {
    "in1k": "imagenet-1k", "imagenet1k": "imagenet-1k", "1k": "imagenet-1k",
    "in21k": "imagenet-21k", "imagenet21k": "imagenet-21k", "imagenet-21k-goog": "imagenet-21k",
    "in22k": "imagenet-22k", "imagenet22k": "imagenet-22k",
    "imagenet22kms": "imagenet-22k-ms", "in22k-ms": "imagenet-22k-ms",
    "in12k": "imagenet-12k", "imagenet12k": "imagenet-12k",
}
DEFAULT_LABEL_SPACE = "imagenet-1k"


def _timm_info_dir() -> Path:
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("timm is not installed; run 'make test' or 'pip install -r requirements.txt'.")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "_info"


@functools.lru_cache(maxsize=1)
def _imagenet_lemmas_and_definitions() -> tuple[dict[str, str], dict[str, str]]:
    info = _timm_info_dir()

    def read(name):
        with open(info / name, newline="", encoding="utf-8") as fh:
            return {row[0]: row[1] for row in csv.reader(fh, delimiter="\t") if len(row) >= 2}

    return read("imagenet_synset_to_lemma.txt"), read("imagenet_synset_to_definition.txt")


@dataclass(frozen=True)
class LabelSpace:
    """An ordered wnid list with ImageNet's names and definitions for each class."""

    name: str
    description: str
    wnids: tuple[str, ...]
    index: dict[str, int] = field(repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.wnids)

    def __contains__(self, wnid: str) -> bool:
        return wnid in self.index

    def lemmas(self, wnid: str) -> str:
        """ImageNet's lemma line, e.g. 'tabby, tabby cat'."""
        lemmas = _imagenet_lemmas_and_definitions()[0]
        return lemmas.get(wnid) or ", ".join(l.replace("_", " ") for l in noun_graph().from_wnid(wnid).lemma_names())

    def display_name(self, wnid: str) -> str:
        """The first lemma ('tabby'). Not unique (two 'crane's, two 'maillot's): identity is the wnid."""
        return self.lemmas(wnid).split(",")[0].strip()

    def definition(self, wnid: str) -> str:
        definitions = _imagenet_lemmas_and_definitions()[1]
        return definitions.get(wnid) or noun_graph().from_wnid(wnid).definition()


def label_space_names() -> list[str]:
    return list(_LABEL_SPACE_FILES)


def canonical_label_space(name: str) -> str:
    """The stored name of a label space or label set: 'IN1K' -> 'imagenet-1k',
    'sense:n02121620' -> 'sense:cat.n.01', 'file:ABC…' -> 'file:abc…'."""
    text = str(name).strip()
    prefix = text.split(":", 1)[0].lower() if ":" in text else ""
    if prefix == SENSE_PREFIX[:-1]:
        return SENSE_PREFIX + _label_set_sense(text[len(SENSE_PREFIX):]).name()
    if prefix == FILE_PREFIX[:-1]:
        sha = text[len(FILE_PREFIX):].strip().lower()
        if not _SHA12_RE.match(sha):
            raise QueryError(f"{text!r} is not a stored label set: 'file:' takes the 12 hex digits WildLens printed "
                             "when it stored the set; pass the file of wnids itself to store it.")
        return FILE_PREFIX + sha
    key = text.lower().replace("_", "-")
    key = _ALIASES.get(key, _ALIASES.get(key.replace("-", ""), key))
    if key not in _LABEL_SPACE_FILES:
        raise QueryError(f"Unknown label space {name!r}. Known: {', '.join(_LABEL_SPACE_FILES)}, or a label set: "
                         "sense:SYNSET (e.g. sense:cat.n.01) or file:SHA.")
    return key


@functools.lru_cache(maxsize=None)
def get_label_space(name: str = DEFAULT_LABEL_SPACE) -> LabelSpace:
    key = canonical_label_space(name)
    if key.startswith(SENSE_PREFIX) or key.startswith(FILE_PREFIX):
        return _label_set_space(key)
    filename, description = _LABEL_SPACE_FILES[key]
    wnids = tuple(line.strip() for line in (_timm_info_dir() / filename).read_text().splitlines() if line.strip())
    return LabelSpace(key, description, wnids, {w: i for i, w in enumerate(wnids)})


# --------------------------------------------------------------------------- label sets
SENSE_PREFIX = "sense:"
FILE_PREFIX = "file:"
LABEL_SET_CACHE = "labelsets"  # under $WILDLENS_HOME/cache
_SHA12_RE = re.compile(r"^[0-9a-f]{12}$")


def is_label_set(name: str) -> bool:
    """A label-set name ('sense:…', 'file:…') rather than one of ImageNet's label spaces."""
    return str(name).strip().lower().startswith((SENSE_PREFIX, FILE_PREFIX))


def _label_set_sense(text: str):
    """The one noun synset a ``sense:`` label set names (a synset name, a wnid or an unambiguous
    word); QueryError with close matches or the candidate senses otherwise."""
    text = text.strip()
    if not text:
        raise QueryError("'sense:' needs a WordNet noun sense, e.g. sense:cat.n.01 "
                         "('python -m explain senses cat' lists them).")
    try:
        synsets = resolve_noun_synsets(text)
    except QueryError as exc:
        word = text.split(".")[0] if text.count(".") >= 2 else text
        unknown_name = word != text and "not a WordNet synset name" in str(exc)
        hint = _suggestions(_normalise_word(word)) if unknown_name else []
        more = f" Did you mean: {', '.join(hint)}? 'python -m explain senses WORD' lists a word's senses." if hint else ""
        raise QueryError(f"sense:{text}: {exc}{more}") from None
    if len(synsets) > 1:
        listed = "; ".join(f"{s.name()} ({s.definition()})" for s in synsets[:8])
        raise QueryError(f"sense:{text} is ambiguous: {text!r} has {len(synsets)} noun senses; name one, e.g. "
                         f"sense:{synsets[0].name()}. They are: {listed}" + ("; …" if len(synsets) > 8 else "") + ".")
    return synsets[0]


def sense_label_set_wnids(sense) -> tuple[str, ...]:
    """The wnids of a ``sense:`` label set: the sense and every synset under it (hyponyms and
    instance hyponyms, transitively), sorted by wnid."""
    synset = sense if hasattr(sense, "offset") else _label_set_sense(str(sense))
    return tuple(sorted(f"n{s.offset():08d}" for s in _hyponym_closure(synset)))


def label_set_text(wnids) -> str:
    """The stored form of a set of wnids: sorted, unique, one a line (its hash names the set)."""
    return "".join(f"{w}\n" for w in sorted(set(wnids)))


def label_set_sha(wnids) -> str:
    return hashlib.sha256(label_set_text(wnids).encode()).hexdigest()[:12]


def label_set_path(sha: str, root: Path | str | None = None) -> Path:
    """Where ``file:<sha>`` is kept: ``$WILDLENS_HOME/cache/labelsets/<sha>.txt`` (or under ``root``)."""
    from .runstore import default_root

    base = expand_user(root) if root else default_root()
    return base / "cache" / LABEL_SET_CACHE / f"{sha}.txt"


def checked_wnids(wnids, error: type[Exception] = QueryError) -> list[str]:
    """``wnids`` without repeats, each a WordNet 3.0 noun wnid, else ``error`` with a one-line fix."""
    out = list(dict.fromkeys(wnids))
    graph = noun_graph()
    for wnid in out:
        if not is_wnid(wnid):
            raise error(f"{wnid!r} is not a wnid ('n' and 8 digits, e.g. n02123045).")
        try:
            graph.from_wnid(wnid)
        except KeyError as exc:
            raise error(str(exc.args[0])) from None
    return out


def store_label_set(wnids, root: Path | str | None = None) -> str:
    """Save a set of noun wnids once (atomic write) and return its name, 'file:<sha12>'."""
    from .runstore import write_bytes_atomic

    wnids = list(wnids)
    if not wnids:
        raise QueryError("A label set needs at least one wnid.")
    checked_wnids(wnids)
    sha = label_set_sha(wnids)
    target = label_set_path(sha, root)
    if not target.is_file() or target.read_text(encoding="utf-8") != label_set_text(wnids):
        write_bytes_atomic(target, label_set_text(wnids).encode())
    return FILE_PREFIX + sha


def _read_stored_label_set(sha: str) -> tuple[str, ...]:
    path = label_set_path(sha)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise QueryError(f"Label set file:{sha} is not stored on this machine ({path}); run the command again with "
                         "--label-set FILE (the file of wnids) to store it.") from None
    except OSError as exc:
        raise QueryError(f"Label set file:{sha} cannot be read ({path}: {exc.strerror}).") from None
    wnids = tuple(line.strip() for line in text.splitlines() if line.strip())
    if label_set_sha(wnids) != sha or not all(is_wnid(w) for w in wnids):
        raise QueryError(f"The stored label set {path} does not match its name file:{sha} (edited or damaged); "
                         "delete it and store the set again from its file of wnids.")
    return wnids


def _label_set_space(key: str) -> LabelSpace:
    if key.startswith(SENSE_PREFIX):
        synset = _label_set_sense(key[len(SENSE_PREFIX):])
        wnids = sense_label_set_wnids(synset)
        description = (f"{synset.name()} ({synset.definition()}) and every WordNet noun under it: "
                       f"{len(wnids):,} classes")
    else:
        wnids = _read_stored_label_set(key[len(FILE_PREFIX):])
        description = f"a stored set of {len(wnids):,} WordNet nouns ({label_set_path(key[len(FILE_PREFIX):])})"
    return LabelSpace(key, description, wnids, {w: i for i, w in enumerate(wnids)})


# --------------------------------------------------------------------------- senses of a query
@dataclass(frozen=True)
class Sense:
    name: str  # 'cat.n.01'
    wnid: str
    definition: str
    lemma_names: tuple[str, ...]
    n_classes: int  # classes of the label space under this sense (itself included)
    # How often the query word was tagged with this sense in WordNet's sense-tagged corpus
    # (SemCor; ``Lemma.count()``): 18 for 'cat' as cat.n.01, 0 for every sense of 'crane'.
    tag_count: int = 0


def _normalise_word(query: str) -> str:
    return "_".join(query.strip().split()).lower()


def _suggestions(word: str, limit: int = 5) -> list[str]:
    # Comparing against all 117k noun lemmas takes seconds; same first letter is enough to suggest.
    pool = [lemma for lemma in noun_graph().index_keys if lemma[:1] == word[:1]]
    return [s.replace("_", " ") for s in difflib.get_close_matches(word, pool, n=limit, cutoff=0.75)]


NEIGHBOUR_LEVELS = 3  # hypernym levels climbed looking for classes next to a word
_NEIGHBOUR_VISITS = 20_000  # synsets looked at per sense at most (a shallow word's ancestors hold all WordNet)


def neighbour_classes(word: str, label_space: str = DEFAULT_LABEL_SPACE, limit: int = 5) -> list[str]:
    """The classes of ``label_space`` next to ``word`` in WordNet, nearest first: for a word that
    is a WordNet noun but not a class (a folder named 'motorcycle' for ImageNet-1k), the classes
    under its senses (moped, under motorcycle > minibike), then under its hypernym (go-kart,
    golfcart, under motor vehicle), then under the hypernym's hypernym, up to
    :data:`NEIGHBOUR_LEVELS` levels. Ranked by (level climbed, steps down from there, sense rank in
    WordNet, name); a sense stops climbing once it has found ``limit`` classes, or any class at a
    level above itself (astronaut: ballplayer, scuba diver, groom, under person). [] for a word
    WordNet does not know as a noun (spelling neighbours are then the only help). Import offers
    these before its spelling neighbours (they suggested unicycle and tricycle for motorcycle)."""
    space = get_label_space(label_space)
    text = _normalise_word(word)
    if not text:
        return []
    synsets = noun_graph().synsets(text)
    ranked: dict[str, tuple] = {}
    for sense_rank, synset in enumerate(synsets):
        found: set[str] = set()
        frontier, visits = [synset], 0
        for level in range(NEIGHBOUR_LEVELS + 1):
            for top in sorted(frontier, key=lambda s: s.name()):
                depth_of = {top: 0}
                queue = deque([top])
                while queue and visits < _NEIGHBOUR_VISITS:
                    node = queue.popleft()
                    visits += 1
                    wnid = f"n{node.offset():08d}"
                    if wnid in space:
                        key = (level, depth_of[node], sense_rank, space.display_name(wnid))
                        found.add(wnid)
                        if wnid not in ranked or key < ranked[wnid]:
                            ranked[wnid] = key
                    for child in node.children():  # hyponyms and instance hyponyms, by name
                        if child not in depth_of:
                            depth_of[child] = depth_of[node] + 1
                            queue.append(child)
            if len(found) >= limit or (level and found):
                break  # enough, or the nearest level above the sense that has any: farther ones are far-fetched
            frontier = sorted({h for s in frontier for h in s.parents()}, key=lambda s: s.name())
            if not frontier:
                break
    return sorted(ranked, key=ranked.__getitem__)[:limit]


def _is_ascii_number(text: str) -> bool:
    """ASCII digits only ('cat.n.٠١' is no synset name: str.isdigit() would say it is)."""
    return text.isascii() and text.isdigit()


def resolve_noun_synsets(query: str) -> list[Noun]:
    """The noun synsets a query names: a word ('cat', 'Cats', 'tiger cat'), a synset name
    ('cat.n.01') or a wnid ('n02121620'), as :class:`core.wordgraph.Noun` (NLTK's answers, read
    without NLTK). Raises QueryError with advice otherwise."""
    graph = noun_graph()
    text = query.strip()
    if not text:
        raise QueryError("Type a word, e.g. 'cat', a synset name such as 'cat.n.01', or a wnid.")
    if is_wnid(text):
        try:
            return [graph.from_wnid(text)]
        except KeyError as exc:
            raise QueryError(str(exc.args[0])) from None
    if text.count(".") >= 2 and text.rsplit(".", 2)[-2] in "nvasr" and _is_ascii_number(text.rsplit(".", 1)[-1]):
        if text.lower().rsplit(".", 2)[1] == "n":
            try:
                return [graph.synset(text)]
            except (KeyError, IndexError, ValueError):  # ValueError: a number past int()'s 4,300 digits, as NLTK's
                pass
        else:  # another part of speech (or none): NLTK says whether it names a synset at all
            from nltk.corpus.reader.wordnet import WordNetError

            try:
                get_wordnet().synset(text)
            except (WordNetError, ValueError):
                pass
            else:
                raise QueryError(f"{text} is not a noun sense; ImageNet classes are nouns.")
        raise QueryError(f"{text!r} is not a WordNet synset name. Try the word alone, e.g. "
                         f"{text.split('.')[0]!r}, and pick a sense.")
    word = _normalise_word(text)
    synsets = graph.synsets(word)  # morphy inside: 'cats' -> 'cat'
    if synsets:
        return synsets
    # No noun: which other parts of speech WordNet has it as (NLTK's answer, from packaged lists).
    other_pos = other_parts_of_speech(word)
    if other_pos:
        names = {"v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
        kinds = " and ".join(sorted({names[p] for p in other_pos}))
        raise QueryError(f"{text!r} has no noun sense in WordNet (WordNet lists it as: {kinds}). "
                         "ImageNet classes are nouns: try a noun such as 'dog' or 'car'.")
    hint = _suggestions(word)
    raise QueryError(f"{text!r} is not in WordNet." + (f" Did you mean: {', '.join(hint)}?" if hint else
                                                        " Check the spelling, or try a more common word."))


def _as_noun(sense) -> Noun:
    """A :class:`Noun` for a Noun or an NLTK noun synset (callers and tests may pass either)."""
    if isinstance(sense, Noun):
        return sense
    return noun_graph().from_wnid(wnid_of(sense))


def _hyponym_closure(sense) -> dict:
    """Every synset under ``sense`` (itself included) -> its parent on one shortest path back
    up to the sense (None for the sense). Breadth-first, so paths are shortest."""
    sense = _as_noun(sense)
    parent = {sense: None}
    queue = deque([sense])
    while queue:
        current = queue.popleft()
        # Instance hyponyms count: e.g. a named breed or place is an instance, not a subclass.
        # Sorted by name (Noun.children): NLTK keeps a synset's relations in a set, whose order
        # changes with each process's hash seed; with several shortest paths the first one found
        # must not depend on it.
        for child in current.children():
            if child not in parent:
                parent[child] = current
                queue.append(child)
    return parent


def _classes_under(sense, space: LabelSpace) -> list[tuple[int, object]]:
    closure = _hyponym_closure(sense)
    hits = [(space.index[wnid_of(s)], s) for s in closure if wnid_of(s) in space.index]
    return sorted(hits, key=lambda item: item[0])


def _tag_count(synset, word: str) -> int:
    """SemCor count of ``word`` (or its base form) as a lemma of ``synset``; 0 for a synset-name or wnid query."""
    if not word:
        return 0
    base = noun_graph().morphy(word)  # NLTK's morphy(word, "n"): the first form found, else None
    forms = {word, (base[0] if base else word).lower()}
    return sum(count for name, count in zip(synset.lemma_names(), synset.lemma_counts()) if name.lower() in forms)


def senses(query: str, label_space: str = DEFAULT_LABEL_SPACE) -> list[Sense]:
    """The noun senses of a query, each with its class count in the label space.

    Order: most classes first, senses without a class last; senses with as many classes keep
    WordNet's order (its most frequent sense first). For 'crane' in ImageNet-1k that is the
    machine (crane.n.04) and the bird (crane.n.05), one class each, then the two writers and the
    constellation, which have none."""
    space = get_label_space(label_space)
    synsets = resolve_noun_synsets(query)
    text = query.strip()
    word = "" if is_wnid(text) or len(synsets) == 1 and synsets[0].name() == text else _normalise_word(text)
    out = [Sense(synset.name(), wnid_of(synset), synset.definition(), tuple(synset.lemma_names()),
                 len(_classes_under(synset, space)), _tag_count(synset, word))
           for synset in synsets]
    return sorted(out, key=lambda s: -s.n_classes)  # stable: ties keep WordNet's order


def preselected_sense(found: list[Sense]) -> Sense | None:
    """The sense a page may pick for the reader, or None when it must ask.

    A sense is picked when it is the only one with classes, or when it is the word's usual
    meaning: WordNet's sense-tagged corpus counts the word in it (tag_count > 0) more often than
    in every other sense with classes. 'cat' -> cat.n.01 (18 tags; big_cat.n.01, 6 classes, has
    none); 'crane' -> None (the machine and the bird both have a class and neither is tagged)."""
    with_classes = [s for s in found if s.n_classes]
    if len(with_classes) == 1:
        return with_classes[0]
    if not with_classes:
        return None
    best = max(with_classes, key=lambda s: s.tag_count)
    if best.tag_count > 0 and all(s.tag_count < best.tag_count for s in with_classes if s is not best):
        return best
    return None


def preselection_note(found: list[Sense], word: str, label_space: str) -> str | None:
    """Why :func:`preselected_sense` picked its sense, in plain sentences (None when it picked none or the
    word has one sense): the sense tagged most among those with a class ('cat'), or the only one with a
    class ('bank': the piggy bank). When the sense WordNet's tagged texts use most has no class here
    (bank.n.01, sloping land; 'mouse' the rodent; 'table' the furniture), the note names it, and the
    classes ImageNet-21k has under it: a reader who meant it learns why it is not offered (a UI review)."""
    picked = preselected_sense(found)
    if picked is None or len(found) < 2:
        return None
    several = sum(1 for s in found if s.n_classes) >= 2
    note = (f"{picked.name} is picked: of the senses of ‘{word}’ with a class in {label_space}, the one WordNet's "
            "sense-tagged texts use most often." if several else
            f"{picked.name} is picked: the only one of the {len(found)} noun senses of ‘{word}’ with a class in "
            f"{label_space}.")
    usual = max(found, key=lambda s: s.tag_count)  # ties: the first in WordNet's order
    if usual.n_classes == 0 and usual.tag_count > picked.tag_count:
        meaning = usual.definition if len(usual.definition) <= 80 else usual.definition[:80].rsplit(" ", 1)[0] + "…"
        note += f" Its most used sense of all, {usual.name} ({meaning}), has none"
        larger = senses(usual.name, "imagenet-21k")[0].n_classes if label_space != "imagenet-21k" else 0
        note += (f"; imagenet-21k has {larger} class{'es' if larger != 1 else ''} under it (pick it as the label "
                 "space to see them)." if larger else ".")
    return note + (" Tick other senses to add their classes to the same run." if several else "")


# --------------------------------------------------------------------------- classes of a sense
@dataclass(frozen=True)
class ClassInfo:
    wnid: str
    index: int  # position in the label space = the model output index
    name: str  # ImageNet's first lemma
    lemmas: str
    definition: str
    synset: str  # WordNet synset name, e.g. 'tabby.n.01'
    path: tuple[str, ...]  # synset names from the query sense down to this class (a shortest path)
    senses: tuple[str, ...] = ()  # combined_classes only: the chosen senses this class lies under


def _resolve_sense(sense, space: LabelSpace) -> object:
    if hasattr(sense, "offset"):
        return _as_noun(sense)
    synsets = resolve_noun_synsets(str(sense))
    if len(synsets) > 1:
        counted = [(s, len(_classes_under(s, space))) for s in synsets]
        with_classes = [f"{s.name()} ({n} classes: {s.definition()})" for s, n in counted if n]
        raise QueryError(
            f"{sense!r} has {len(synsets)} noun senses; name one. "
            + (f"Those with {space.name} classes: {'; '.join(with_classes)}." if with_classes
               else f"None of them has a {space.name} class.")
        )
    return synsets[0]


def hyponym_classes(sense, label_space: str = DEFAULT_LABEL_SPACE) -> list[ClassInfo]:
    """Classes of the label space under ``sense``, in label-space order, with their paths."""
    space = get_label_space(label_space)
    synset = _resolve_sense(sense, space)
    closure = _hyponym_closure(synset)
    out = []
    for index, cls in _classes_under(synset, space):
        path, node = [], cls
        while node is not None:
            path.append(node.name())
            node = closure[node]
        wnid = wnid_of(cls)
        out.append(ClassInfo(wnid, index, space.display_name(wnid), space.lemmas(wnid),
                             space.definition(wnid), cls.name(), tuple(reversed(path))))
    if not out:
        raise QueryError(f"No class of {space.name} lies under {synset.name()} ({synset.definition()}). "
                         f"Pick another sense, a more general word, or a larger label space such as imagenet-21k.")
    return out


def combined_classes(sense_names, label_space: str = DEFAULT_LABEL_SPACE) -> list[ClassInfo]:
    """The classes of several senses together ('crane.n.04' and 'crane.n.05': the machine and the
    bird), in label-space order: the union by wnid, each class's ``senses`` naming the chosen
    senses it lies under (in the order given) and its ``path`` running from the first of them.
    Senses without a class add nothing; if none has one, QueryError as for ``hyponym_classes``."""
    space = get_label_space(label_space)
    names = list(dict.fromkeys(str(getattr(n, "name", n)) for n in sense_names))
    if not names:
        raise QueryError("Pick at least one sense.")
    by_wnid: dict[str, ClassInfo] = {}
    tags: dict[str, list[str]] = {}
    empty = []
    for name in names:
        try:
            found = hyponym_classes(name, space.name)
        except QueryError:
            if len(resolve_noun_synsets(name)) > 1:  # an ambiguous word, not an empty sense: say so
                raise
            empty.append(name)
            continue
        sense_name = _resolve_sense(name, space).name()
        for cls in found:
            by_wnid.setdefault(cls.wnid, cls)
            tags.setdefault(cls.wnid, []).append(sense_name)
    if not by_wnid:
        raise QueryError(f"No class of {space.name} lies under {' or '.join(empty)}. Pick another sense, a more "
                         "general word, or a larger label space such as imagenet-21k.")
    out = [dataclasses.replace(cls, senses=tuple(dict.fromkeys(tags[w]))) for w, cls in by_wnid.items()]
    return sorted(out, key=lambda c: c.index)


def classes_table(classes: list[ClassInfo]):
    """Classes as a table (wnid, index, name, lemmas, definition, synset, path as 'a > b > c'),
    plus a ``senses`` column ('crane.n.05') when the classes come from more than one sense."""
    import pandas as pd

    columns = ["wnid", "index", "name", "lemmas", "definition", "synset", "path"]
    several = len({s for c in classes for s in c.senses}) > 1
    if several:
        columns.insert(6, "senses")
    return pd.DataFrame([{"wnid": c.wnid, "index": c.index, "name": c.name, "lemmas": c.lemmas,
                          "definition": c.definition, "synset": c.synset, "senses": ", ".join(c.senses),
                          "path": " > ".join(c.path)}
                         for c in classes],
                        columns=columns)


def hyponym_tree(sense, label_space: str = DEFAULT_LABEL_SPACE) -> list[tuple[str, str]]:
    """(parent, child) synset-name edges of the part of the hyponym tree that leads from the
    sense to its classes, for a tree view. Only nodes on a class's shortest path appear."""
    edges = []
    seen = set()
    for cls in hyponym_classes(sense, label_space):
        for parent, child in zip(cls.path, cls.path[1:]):
            if (parent, child) not in seen:
                seen.add((parent, child))
                edges.append((parent, child))
    return edges
