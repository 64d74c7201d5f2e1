"""One vocabulary for the WordNet relation of a confusion: names, colours and sentences.

Every view that names or colours a relation reads it from here: :mod:`explain.similarity`
(the codes), :mod:`explain.metrics` (the ``relation`` column), :mod:`explain.explanations`,
the dashboard's charts, Confusions and Explain pages, and exports. Pages never re-type a relation
name, colour or sentence (``tests/explain/test_vocabulary.py`` checks that).

The order of :data:`RELATIONS` is the precedence of :mod:`explain.similarity` (the first that
applies wins) and the integer codes of ``PairSimilarities.relation``; do not reorder it.

Colours follow the SPEC (blue sibling, magenta hypernym, red distant). Each relation has a hex
colour (charts, table cells) and the Streamlit Markdown colour of the same family (coloured text
only comes in ``red, orange, yellow, green, blue, violet, gray``), so a relation looks the same in
a chart and in a sentence. Magenta has no Markdown name; violet is its family. Hyponym is orange,
not a second purple, so it cannot be mistaken for a hypernym; cousin is gray: a shared
grandparent is weak evidence of a sensible mistake, between sibling and distant. ``related``
(a common ancestor at most :data:`RELATED_MAX_SEVERITY` steps up, none of the closer relations) is
yellow, the one Markdown colour left; red ``distant`` is kept for mistakes that meet only far up.

Every confusion also states its lowest common subsumer and how far up it is:
:func:`lcs_phrase` ("both felines, 3 steps up from tabby").
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# The rule between 'related' and 'distant' (the SPEC's sense: a threshold on the mistake severity =
# hypernym steps from the true class up to the pair's lowest common subsumer, the common ancestor
# every view names, see explain.similarity). A pair that is neither hypernym, hyponym, sibling nor
# cousin is 'related' when severity <= RELATED_MAX_SEVERITY, else 'distant'.
# Why 3, from the ImageNet-1k pairs (999,000 ordered pairs of WordNet 3.0, 990,116 of them neither
# hypernym, hyponym, sibling nor cousin): tabby -> jaguar / tiger meet at feline.n.01, 3 steps up;
# military uniform -> academic gown at clothing.n.01, 2 up; tabby -> dumbbell meets at whole.n.02,
# 6 up (tabby -> espresso: 8). Among those pairs, the share whose common ancestor is one of
# WordNet's catch-all top nodes (min_depth <= 4: entity, physical entity, object, whole, artifact,
# living thing) grows with severity: 0% at 1, 17% at 2, 27% at 3, 46% at 4, 65% at 5, 75% at 6, 87%
# at 8. Up to 3 steps the ancestor is mostly a real family (feline, dog, clothing, musical
# instrument, vehicle); from tabby the 4th step is already organism.n.01 and the 6th whole.n.02.
# Severities 1-3 are 11% of those pairs (112,912; median severity 6), so red still marks most
# mistakes between unrelated classes. (Counted again for issue 22, when severity became the height
# of the named lowest common subsumer instead of the nearest common ancestor: 44%, 63% and 92% at
# 4, 5 and 8 then, 116,936 pairs at 1-3.)
RELATED_MAX_SEVERITY = 3

MARKDOWN_COLOURS = ("red", "orange", "yellow", "green", "blue", "violet", "gray")  # Streamlit's text colours


def unmatched(markdown: str) -> str:
    """A card line the filters did not match (explain.browse.card_rows): in italics and in no colour,
    not greyed, because gray is cousin's colour here and a greyed line would read as a cousin."""
    return f"_{markdown}_"


@dataclass(frozen=True)
class Relation:
    name: str  # as stored in the confusions table's 'relation' column
    colour: str  # hex: charts and table cells
    markdown: str  # Streamlit Markdown colour of the same family: ':blue[text]'
    colour_word: str  # the colour as a person says it, for help text
    gloss: str  # a few words: the help caption's '(shared parent)'
    sentence: str  # the prediction is ...: the Explain page's verdict

    def coloured(self, text: str | None = None) -> str:
        """``text`` (default: the name) as Streamlit Markdown in the relation's colour."""
        return f":{self.markdown}[{self.name if text is None else text}]"


_VOCABULARY = (
    Relation("same", "#2ca02c", "green", "green", "the true class",
             "the same class"),
    Relation("hypernym", "#d62fd6", "violet", "magenta", "an ancestor: too general",
             "a hypernym: the prediction is an ancestor of the true class (too general)"),
    Relation("hyponym", "#ff7f0e", "orange", "orange", "a kind of the true class: too specific",
             "a hyponym: the prediction is a kind of the true class (too specific, hierarchically correct)"),
    Relation("sibling", "#1f77b4", "blue", "blue", "shared parent",
             "a sibling: they share an immediate hypernym"),
    Relation("cousin", "#7f7f7f", "gray", "gray", "shared grandparent, no shared parent",
             "a cousin: they share a grandparent but no parent"),
    Relation("related", "#bcbd22", "yellow", "yellow",
             f"same family: a common ancestor at most {RELATED_MAX_SEVERITY} steps up",
             f"related: same family, their lowest common subsumer is at most {RELATED_MAX_SEVERITY} hypernym "
             "steps above the true class (but no shared parent or grandparent)"),
    Relation("distant", "#d62728", "red", "red",
             f"common ancestor more than {RELATED_MAX_SEVERITY} steps up",
             f"distant: their lowest common subsumer is more than {RELATED_MAX_SEVERITY} hypernym steps above "
             "the true class"),
)

RELATIONS: tuple[str, ...] = tuple(r.name for r in _VOCABULARY)
VOCABULARY: dict[str, Relation] = {r.name: r for r in _VOCABULARY}
RELATION_COLOURS: dict[str, str] = {r.name: r.colour for r in _VOCABULARY}
RELATION_MARKDOWN_COLOURS: dict[str, str] = {r.name: r.markdown for r in _VOCABULARY}
RELATION_SENTENCES: dict[str, str] = {r.name: r.sentence for r in _VOCABULARY}

# Nodes of a drawn WordNet path other than the prediction (which takes its relation's colour).
# The true class is drawn in the colour of 'same': it is the prediction every other one is measured against.
PATH_ROLE_COLOURS: dict[str, str] = {"true": VOCABULARY["same"].colour, "lcs": "#444444", "path": "#bbbbbb"}
PATH_CAPTION = ("{true}: the true class; the prediction in the colour of its relation ({relation}); dark: their "
                "lowest common subsumer. Hover a node for its lemmas and definition.")


def relation(name: str) -> Relation:
    """The vocabulary entry of a relation name; an unknown name is a bug, so KeyError names the known ones."""
    try:
        return VOCABULARY[name]
    except KeyError:
        raise KeyError(f"unknown relation {name!r}; known: {', '.join(RELATIONS)}") from None


def relation_help(markdown: bool = True) -> str:
    """The help caption of a relation-coloured view: each relation in its colour (Markdown) or
    with its colour word (plain text, for exports and terminals)."""
    items = [f"{r.coloured()} ({r.gloss})" if markdown else f"{r.colour_word} {r.name} ({r.gloss})"
             for r in _VOCABULARY if r.name != "same"]
    return "Colour = relation of the predicted class to the true class in WordNet: " + ", ".join(items) + "."


def relation_sentence(name: str, markdown: bool = True) -> str:
    """'The prediction is <sentence>', coloured for Markdown or plain."""
    entry = relation(name)
    return entry.coloured(entry.sentence) if markdown else entry.sentence


# Lemmas whose simple plural reads wrong (mass nouns, irregular plurals); anything else gets -s/-es/-ies.
_IRREGULAR_PLURALS = {"person": "people", "man": "men", "woman": "women", "child": "children", "mouse": "mice",
                      "goose": "geese", "foot": "feet", "tooth": "teeth", "wolf": "wolves", "knife": "knives",
                      "shelf": "shelves", "leaf": "leaves", "calf": "calves"}
_UNCOUNTED = {"armor", "armour", "attire", "furniture", "hosiery", "makeup", "fish", "produce", "food", "sheep",
              "deer", "swine", "matter", "goods", "starches", "bread", "jewelry", "wildlife", "gear", "brass"}
_UNCOUNTED_ENDINGS = ("ing", "ware", "wear", "ment", "ery")


def plural(lemma: str) -> str:
    """A simple English plural of a WordNet lemma ('feline' -> 'felines', 'big_cat' -> 'big cats',
    'canine' -> 'canines', 'butterfly' -> 'butterflies'); the last word alone changes. Mass nouns and
    words whose simple plural would be wrong stay as they are ('clothing', 'equipment', 'footwear'),
    so the phrase reads 'both clothing' rather than 'both clothings'."""
    words = lemma.replace("_", " ").split(" ")
    last = words[-1]
    lower = last.lower()
    if lower in _IRREGULAR_PLURALS:
        last = _IRREGULAR_PLURALS[lower]
    elif lower in _UNCOUNTED or lower.endswith(_UNCOUNTED_ENDINGS) or not lower.isalpha():
        pass
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return " ".join(words[:-1] + [last])


def lcs_phrase(lcs: str, steps: int, true_name: str) -> str:
    """Where a confusion meets in WordNet, in words: ``lcs_phrase('feline.n.01', 3, 'tabby')`` ->
    'both felines, 3 steps up from tabby'.

    ``lcs`` is the lowest common subsumer as a synset name ('feline.n.01') or a lemma ('big_cat');
    its first lemma is named, pluralised simply (:func:`plural`). ``steps`` is the number of
    hypernym steps from the true class up to it (what the drawn path climbs); 0 when the true class
    is itself the common ancestor (a hyponym prediction). ``true_name`` is the true class as shown."""
    lemma = lcs.rsplit(".", 2)[0] if re.fullmatch(r".+\.n\.[0-9]+", lcs) else lcs
    group = f"both {plural(lemma)}"
    if steps == 0:
        return f"{group}: {true_name} is itself the common ancestor"
    return f"{group}, {steps} step{'' if steps == 1 else 's'} up from {true_name}"


def path_caption(relation_name: str) -> str:
    """The caption under a drawn WordNet path, naming the colours actually used (Markdown)."""
    same = VOCABULARY["same"]
    return PATH_CAPTION.format(true=same.coloured(same.colour_word.capitalize()),
                               relation=relation(relation_name).coloured())
