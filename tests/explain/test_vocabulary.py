"""One vocabulary of relations (explain.vocabulary): complete, self-consistent, and the only place
pages get a relation's name, colour or sentence from."""
import ast
import colorsys
import re

import pytest

from explain import similarity, vocabulary
from explain.vocabulary import (MARKDOWN_COLOURS, RELATION_COLOURS, RELATIONS, VOCABULARY, path_caption, relation,
                                relation_help, relation_sentence)
from tests.conftest import ROOT

# Streamlit 1.x light theme: the default hex of each Markdown text colour (':blue[...]').
STREAMLIT_MARKDOWN_HEX = {"red": "#ff4b4b", "orange": "#ffa421", "yellow": "#faca2b", "green": "#21c354",
                          "blue": "#1c83e1", "violet": "#803df5", "gray": "#a3a8b8"}
PAGE_FILES = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
EXPLAIN_FILES = [p for p in sorted((ROOT / "explain").glob("*.py")) if p.name != "vocabulary.py"]


def _hls(hex_colour: str):
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hls(r, g, b)


def _family(hex_colour: str) -> str:
    """The Streamlit Markdown colour nearest in hue (gray for an unsaturated colour)."""
    hue, _, saturation = _hls(hex_colour)
    if saturation < 0.15:
        return "gray"

    def distance(name):
        other = _hls(STREAMLIT_MARKDOWN_HEX[name])[0]
        return min(abs(hue - other), 1 - abs(hue - other))

    return min((n for n in STREAMLIT_MARKDOWN_HEX if n != "gray"), key=distance)


def test_the_vocabulary_covers_every_relation_the_library_computes():
    assert RELATIONS == tuple(VOCABULARY) == tuple(RELATION_COLOURS)
    assert len(set(RELATIONS)) == len(RELATIONS) == 7
    # similarity's codes index the vocabulary; every code it assigns has an entry
    codes = {similarity.SAME, similarity.HYPERNYM, similarity.HYPONYM, similarity.SIBLING, similarity.COUSIN,
             similarity.RELATED, similarity.DISTANT}
    assert codes == set(range(len(RELATIONS)))
    assert similarity.RELATIONS is vocabulary.RELATIONS
    values = similarity.similarities(["n02123045"] * 6, ["n02123045", "n02121808", "n02123045", "n02123159",
                                                         "n02125311", "n07920052"])
    assert {RELATIONS[c] for c in values.relation} <= set(RELATIONS)


@pytest.mark.parametrize("name", RELATIONS)
def test_each_relation_has_every_field_and_one_colour_family(name):
    entry = relation(name)
    assert re.fullmatch(r"#[0-9a-f]{6}", entry.colour), entry.colour
    assert entry.markdown in MARKDOWN_COLOURS and entry.markdown in STREAMLIT_MARKDOWN_HEX
    assert entry.sentence and entry.gloss and entry.colour_word and "\n" not in entry.sentence + entry.gloss
    assert _family(entry.colour) == entry.markdown, (name, entry.colour, entry.markdown)
    assert relation_sentence(name) == f":{entry.markdown}[{entry.sentence}]"
    assert relation_sentence(name, markdown=False) == entry.sentence


def test_relations_are_told_apart_and_follow_the_spec():
    assert len(set(RELATION_COLOURS.values())) == len(RELATIONS)
    assert len({relation(r).markdown for r in RELATIONS}) == len(RELATIONS)
    assert (relation("sibling").markdown, relation("hypernym").colour_word, relation("distant").markdown) == \
        ("blue", "magenta", "red")  # SPEC: blue sibling, magenta hypernym, red distant
    text = relation_help(markdown=False)
    assert all(name in text for name in RELATIONS if name != "same") and "blue sibling" in text
    assert all(relation(r).coloured() in relation_help() for r in RELATIONS if r != "same")
    assert relation("cousin").coloured() in path_caption("cousin")
    with pytest.raises(KeyError, match="unknown relation 'nephew'"):
        relation("nephew")


def _string_constants(tree):
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


@pytest.mark.parametrize("path", PAGE_FILES + EXPLAIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_relation_colour_name_or_sentence_is_retyped(path):
    tree = ast.parse(path.read_text())
    strings = _string_constants(tree)
    colours = {c.lower() for c in RELATION_COLOURS.values()}
    hex_found = {c for s in strings for c in re.findall(r"#[0-9a-fA-F]{6}\b", s) if c.lower() in colours}
    assert not hex_found, f"{path.name} hard-codes relation colours {hex_found}: use explain.vocabulary"
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            assert not keys & set(RELATIONS), f"{path.name} re-types a relation mapping {keys & set(RELATIONS)}"
    if path in PAGE_FILES:
        markup = [s for s in strings if re.search(r":(%s|grey)\[" % "|".join(MARKDOWN_COLOURS), s)]
        assert not markup, f"{path.name} colours text by hand: {markup}; use explain.vocabulary"
        for entry in VOCABULARY.values():
            phrases = (entry.sentence,) if entry.name == "same" else (entry.sentence, entry.gloss)  # 'the true class' is common
            assert not any(phrase in s for phrase in phrases for s in strings), \
                f"{path.name} re-types the sentence of {entry.name}"


# --------------------------------------------------------------------------- related vs distant, the lcs phrase
TABBY, JAGUAR, DUMBBELL, ESPRESSO = "n02123045", "n02128925", "n03255030", "n07920052"
MILITARY_UNIFORM, ACADEMIC_GOWN = "n03763968", "n02669723"


def test_related_is_a_severity_threshold_and_distant_stays_for_far_pairs():
    from explain.explanations import confusion_lcs_phrase, explain_pair

    values = similarity.similarities([TABBY, MILITARY_UNIFORM, TABBY, TABBY],
                                     [JAGUAR, ACADEMIC_GOWN, DUMBBELL, ESPRESSO], cache_dir=False)
    assert [RELATIONS[c] for c in values.relation] == ["related", "related", "distant", "distant"]
    assert values.severity.tolist() == [3, 2, 6, 8]
    assert all(s <= vocabulary.RELATED_MAX_SEVERITY for s in values.severity[:2])
    assert all(s > vocabulary.RELATED_MAX_SEVERITY for s in values.severity[2:])
    tabby_jaguar = explain_pair(TABBY, JAGUAR)
    assert tabby_jaguar.relation == "related" and tabby_jaguar.lcs_steps == 3
    assert tabby_jaguar.lcs_phrase() == "both felines, 3 steps up from tabby"
    assert confusion_lcs_phrase(TABBY, tabby_jaguar.lcs_wnid, "tabby cat") == "both felines, 3 steps up from tabby cat"
    assert explain_pair(MILITARY_UNIFORM, ACADEMIC_GOWN).lcs_phrase() == \
        "both clothing, 2 steps up from military uniform"
    # the threshold is stated where a reader hovers: the help caption names it for both relations
    text = relation_help(markdown=False)
    assert f"at most {vocabulary.RELATED_MAX_SEVERITY} steps up" in text
    assert f"more than {vocabulary.RELATED_MAX_SEVERITY} steps up" in text


def test_lcs_phrase_names_the_subsumer_in_plural_and_the_steps():
    assert vocabulary.lcs_phrase("feline.n.01", 3, "tabby") == "both felines, 3 steps up from tabby"
    assert vocabulary.lcs_phrase("big_cat", 1, "jaguar") == "both big cats, 1 step up from jaguar"
    assert vocabulary.lcs_phrase("domestic_cat.n.01", 0, "domestic cat") == \
        "both domestic cats: domestic cat is itself the common ancestor"
    assert [vocabulary.plural(w) for w in ("butterfly", "box", "clothing", "equipment", "wolf", "monkey")] == \
        ["butterflies", "boxes", "clothing", "equipment", "wolves", "monkeys"]
