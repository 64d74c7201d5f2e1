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
grandparent is weak evidence of a sensible mistake, between sibling and distant.
"""
from __future__ import annotations

from dataclasses import dataclass

MARKDOWN_COLOURS = ("red", "orange", "yellow", "green", "blue", "violet", "gray")  # Streamlit's text colours


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
    Relation("distant", "#d62728", "red", "red", "related only high up",
             "distant: related only high up in WordNet"),
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


def path_caption(relation_name: str) -> str:
    """The caption under a drawn WordNet path, naming the colours actually used (Markdown)."""
    same = VOCABULARY["same"]
    return PATH_CAPTION.format(true=same.coloured(same.colour_word.capitalize()),
                               relation=relation(relation_name).coloured())
