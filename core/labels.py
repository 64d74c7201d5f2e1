"""ImageNet label spaces and the WordNet questions WildLens asks of them.

A label space is an ordered list of wnids: position i is output i of a model trained on it.
The lists, lemmas and definitions are the ones timm ships (``timm/data/_info``); they are read
as files, without importing timm (which would import torch), so this module stays light.

Query flow: ``senses("cat", "imagenet-1k")`` lists the noun senses of a word with how many
classes lie under each; ``hyponym_classes("cat.n.01", "imagenet-1k")`` gives those classes.
"Under" means the transitive closure over ``hyponyms()`` and ``instance_hyponyms()``, the sense
itself included, matched by wnid (WordNet offset), never by class-name strings.
"""
from __future__ import annotations

import csv
import difflib
import functools
import importlib.util
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .errors import WildLensError
from .wordnet import get_wordnet, is_wnid, synset_of, wnid_of


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
        return lemmas.get(wnid) or ", ".join(l.replace("_", " ") for l in synset_of(wnid).lemma_names())

    def display_name(self, wnid: str) -> str:
        """The first lemma ('tabby'). Not unique (two 'crane's, two 'maillot's): identity is the wnid."""
        return self.lemmas(wnid).split(",")[0].strip()

    def definition(self, wnid: str) -> str:
        definitions = _imagenet_lemmas_and_definitions()[1]
        return definitions.get(wnid) or synset_of(wnid).definition()


def label_space_names() -> list[str]:
    return list(_LABEL_SPACE_FILES)


def canonical_label_space(name: str) -> str:
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, _ALIASES.get(key.replace("-", ""), key))
    if key not in _LABEL_SPACE_FILES:
        raise QueryError(f"Unknown label space {name!r}. Known: {', '.join(_LABEL_SPACE_FILES)}.")
    return key


@functools.lru_cache(maxsize=None)
def get_label_space(name: str = DEFAULT_LABEL_SPACE) -> LabelSpace:
    key = canonical_label_space(name)
    filename, description = _LABEL_SPACE_FILES[key]
    wnids = tuple(line.strip() for line in (_timm_info_dir() / filename).read_text().splitlines() if line.strip())
    return LabelSpace(key, description, wnids, {w: i for i, w in enumerate(wnids)})


# --------------------------------------------------------------------------- senses of a query
@dataclass(frozen=True)
class Sense:
    name: str  # 'cat.n.01'
    wnid: str
    definition: str
    lemma_names: tuple[str, ...]
    n_classes: int  # classes of the label space under this sense (itself included)


def _normalise_word(query: str) -> str:
    return "_".join(query.strip().split()).lower()


def _suggestions(word: str, limit: int = 5) -> list[str]:
    wn = get_wordnet()
    # Comparing against all 117k noun lemmas takes seconds; same first letter is enough to suggest.
    pool = [lemma for lemma in wn.all_lemma_names("n") if lemma[:1] == word[:1]]
    return [s.replace("_", " ") for s in difflib.get_close_matches(word, pool, n=limit, cutoff=0.75)]


def resolve_noun_synsets(query: str) -> list:
    """The noun synsets a query names: a word ('cat', 'Cats', 'tiger cat'), a synset name
    ('cat.n.01') or a wnid ('n02121620'). Raises QueryError with advice otherwise."""
    wn = get_wordnet()
    text = query.strip()
    if not text:
        raise QueryError("Type a word, e.g. 'cat', a synset name such as 'cat.n.01', or a wnid.")
    if is_wnid(text):
        try:
            return [synset_of(text)]
        except KeyError as exc:
            raise QueryError(str(exc.args[0])) from None
    if text.count(".") >= 2 and text.rsplit(".", 2)[-2] in "nvasr" and text.rsplit(".", 1)[-1].isdigit():
        from nltk.corpus.reader.wordnet import WordNetError

        try:
            synset = wn.synset(text)
        except (WordNetError, ValueError):
            raise QueryError(f"{text!r} is not a WordNet synset name. Try the word alone, e.g. "
                             f"{text.split('.')[0]!r}, and pick a sense.") from None
        if synset.pos() != "n":
            raise QueryError(f"{text} is not a noun sense; ImageNet classes are nouns.")
        return [synset]
    word = _normalise_word(text)
    synsets = wn.synsets(word, pos="n")  # morphy inside: 'cats' -> 'cat'
    if synsets:
        return synsets
    other_pos = sorted({s.pos() for s in wn.synsets(word)})
    if other_pos:
        names = {"v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
        kinds = " and ".join(sorted({names[p] for p in other_pos}))
        raise QueryError(f"{text!r} has no noun sense in WordNet (WordNet lists it as: {kinds}). "
                         "ImageNet classes are nouns: try a noun such as 'dog' or 'car'.")
    hint = _suggestions(word)
    raise QueryError(f"{text!r} is not in WordNet." + (f" Did you mean: {', '.join(hint)}?" if hint else
                                                        " Check the spelling, or try a more common word."))


def _hyponym_closure(sense) -> dict:
    """Every synset under ``sense`` (itself included) -> its parent on one shortest path back
    up to the sense (None for the sense). Breadth-first, so paths are shortest."""
    parent = {sense: None}
    queue = deque([sense])
    while queue:
        current = queue.popleft()
        # Instance hyponyms count: e.g. a named breed or place is an instance, not a subclass.
        for child in current.hyponyms() + current.instance_hyponyms():
            if child not in parent:
                parent[child] = current
                queue.append(child)
    return parent


def _classes_under(sense, space: LabelSpace) -> list[tuple[int, object]]:
    closure = _hyponym_closure(sense)
    hits = [(space.index[wnid_of(s)], s) for s in closure if wnid_of(s) in space.index]
    return sorted(hits, key=lambda item: item[0])


def senses(query: str, label_space: str = DEFAULT_LABEL_SPACE) -> list[Sense]:
    """The noun senses of a query in WordNet's order, each with its class count."""
    space = get_label_space(label_space)
    out = []
    for synset in resolve_noun_synsets(query):
        out.append(Sense(synset.name(), wnid_of(synset), synset.definition(),
                         tuple(synset.lemma_names()), len(_classes_under(synset, space))))
    return out


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


def _resolve_sense(sense, space: LabelSpace) -> object:
    if hasattr(sense, "offset"):
        return sense
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


def classes_table(classes: list[ClassInfo]):
    """Classes as a table (wnid, index, name, lemmas, definition, synset, path as 'a > b > c')."""
    import pandas as pd

    return pd.DataFrame([{"wnid": c.wnid, "index": c.index, "name": c.name, "lemmas": c.lemmas,
                          "definition": c.definition, "synset": c.synset, "path": " > ".join(c.path)}
                         for c in classes],
                        columns=["wnid", "index", "name", "lemmas", "definition", "synset", "path"])


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
