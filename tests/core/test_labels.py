import pytest

from core.labels import (QueryError, canonical_label_space, get_label_space, hyponym_classes, hyponym_tree,
                         label_space_names, senses)
from core.wordnet import synset_of, wnid_of

CAT_CLASSES = {
    "n02123045": "tabby", "n02123159": "tiger cat", "n02123394": "Persian cat", "n02123597": "Siamese cat",
    "n02124075": "Egyptian cat", "n02125311": "cougar", "n02127052": "lynx",
}


def test_cat_in_imagenet_1k_is_exactly_seven_classes():
    classes = hyponym_classes("cat.n.01", "imagenet-1k")
    assert {c.wnid: c.name for c in classes} == CAT_CLASSES
    # The notebooks' string matching put these in; exact matching must not.
    assert "n02328150" not in {c.wnid for c in classes}  # Angora: the rabbit, matched by name in the notebooks
    assert "n02128385" not in {c.wnid for c in classes}  # leopard: a big cat, not cat.n.01
    assert [c.index for c in classes] == sorted(c.index for c in classes)
    assert all(c.path[0] == "cat.n.01" and c.path[-1] == c.synset for c in classes)


@pytest.mark.parametrize("name,size", [("imagenet-1k", 1000), ("imagenet-21k", 21843), ("imagenet-22k", 21841),
                                       ("imagenet-12k", 11821)])
def test_every_wnid_of_the_label_spaces_resolves(name, size):
    space = get_label_space(name)
    assert len(space) == size and len(set(space.wnids)) == size
    for wnid in space.wnids:
        assert wnid_of(synset_of(wnid)) == wnid


def test_label_space_names_and_definitions():
    space = get_label_space("imagenet-1k")
    assert space.wnids[0] == "n01440764" and space.display_name("n01440764") == "tench"
    assert "cat" in space.definition("n02123045") or "striped" in space.definition("n02123045")
    assert canonical_label_space("IN1K") == "imagenet-1k" and canonical_label_space("imagenet_21k") == "imagenet-21k"
    assert set(label_space_names()) >= {"imagenet-1k", "imagenet-21k", "imagenet-22k", "imagenet-12k"}
    with pytest.raises(QueryError, match="Unknown label space"):
        get_label_space("imagenet-5k")


def test_senses_of_cat_counts_classes():
    found = {s.name: s for s in senses("cat")}
    assert found["cat.n.01"].n_classes == 7
    assert found["guy.n.01"].n_classes == 0
    assert found["big_cat.n.01"].n_classes == 6
    assert list(found)[0] == "cat.n.01"  # WordNet's order: most frequent sense first
    assert "feline" in found["cat.n.01"].definition


@pytest.mark.parametrize("query,first", [("cats", "cat.n.01"), ("  Tiger  Cat ", "tiger_cat.n.02"),  # the one with a class
                                         ("cat.n.01", "cat.n.01"), ("n02123045", "tabby.n.01")])
def test_query_forms(query, first):
    assert senses(query)[0].name == first


@pytest.mark.parametrize("query,message", [
    ("qwzxv", "not in WordNet"),
    ("catt", "Did you mean"),
    ("beautiful", "no noun sense"),
    ("", "Type a word"),
    ("cat.n.99", "not a WordNet synset"),
    ("cat.n." + "1" * 4301, "not a WordNet synset"),  # past int()'s 4,300 digits: a ValueError inside, as in NLTK
    ("n99999999", "not a noun synset"),
])
def test_bad_queries_are_clear_errors(query, message):
    with pytest.raises(QueryError, match=message):
        senses(query)


def test_sense_without_classes_and_ambiguous_word():
    with pytest.raises(QueryError, match="No class of imagenet-1k lies under guy.n.01"):
        hyponym_classes("guy.n.01")
    with pytest.raises(QueryError, match="cat.n.01 \\(7 classes"):
        hyponym_classes("cat")


def test_instance_hyponyms_are_followed():
    # Instance hyponyms are part of the closure: a sense with only instance children still finds them.
    classes = hyponym_classes("entity.n.01", "imagenet-21k")
    assert len(classes) == 21843


def test_larger_label_space_and_tree():
    assert len(hyponym_classes("cat.n.01", "imagenet-21k")) > 7
    edges = hyponym_tree("cat.n.01")
    assert ("cat.n.01", "domestic_cat.n.01") in edges and ("domestic_cat.n.01", "tabby.n.01") in edges
