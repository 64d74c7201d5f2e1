"""Senses ordered by their classes, the sense a page may pick, and several senses combined (issue 12 item 3)."""
import pytest

from core.labels import (QueryError, classes_table, combined_classes, hyponym_classes, preselected_sense,
                         preselection_note, senses)

CRANE_BIRD, CRANE_MACHINE = "n02012849", "n03126707"


def test_senses_with_classes_come_first_empty_ones_last():
    found = senses("crane")
    assert [(s.name, s.n_classes) for s in found] == [
        ("crane.n.04", 1), ("crane.n.05", 1),  # as many classes: WordNet's order
        ("crane.n.01", 0), ("crane.n.02", 0), ("grus.n.01", 0),  # no class: last, in WordNet's order
    ]
    cat = [s.name for s in senses("cat")]
    assert cat[:2] == ["cat.n.01", "big_cat.n.01"] and cat[2] == "guy.n.01"  # 7, 6, then the empty ones
    counts = [s.n_classes for s in senses("dog", "imagenet-21k")]
    assert counts == sorted(counts, reverse=True)


def test_a_sense_is_picked_only_when_it_is_clearly_meant():
    assert preselected_sense(senses("crane")) is None  # the machine and the bird: ask
    assert preselected_sense(senses("panda")) is None  # giant and lesser panda, neither tagged more
    assert preselected_sense(senses("cat")).name == "cat.n.01"  # tagged 18 times; big_cat.n.01 never
    assert preselected_sense(senses("tiger cat")).name == "tiger_cat.n.02"  # the only one with a class
    assert preselected_sense(senses("cat.n.01")).name == "cat.n.01"
    assert preselected_sense(senses("guy.n.01")) is None


def test_combined_senses_give_the_union_tagged_by_sense():
    classes = combined_classes(["crane.n.04", "crane.n.05"])
    assert [(c.wnid, c.senses) for c in classes] == [(CRANE_BIRD, ("crane.n.05",)), (CRANE_MACHINE, ("crane.n.04",))]
    table = classes_table(classes)
    assert table["senses"].tolist() == ["crane.n.05", "crane.n.04"]
    # a union by wnid: a class under two chosen senses appears once, tagged with both
    both = combined_classes(["cat.n.01", "feline.n.01"])
    lynx = next(c for c in both if c.wnid == "n02127052")
    assert lynx.senses == ("cat.n.01", "feline.n.01") and lynx.path[0] == "cat.n.01"
    assert len(both) == len({c.wnid for c in both}) == len(hyponym_classes("feline.n.01"))
    cats = combined_classes(["cat.n.01", "big_cat.n.01", "guy.n.01"])  # an empty sense adds nothing
    assert len(cats) == 13 and [c.index for c in cats] == sorted(c.index for c in cats)
    # one sense: the same classes and table as hyponym_classes
    assert classes_table(combined_classes(["cat.n.01"])).equals(classes_table(hyponym_classes("cat.n.01")))


def test_combining_nothing_or_only_empty_senses_is_a_clear_error():
    with pytest.raises(QueryError, match="Pick at least one sense"):
        combined_classes([])
    with pytest.raises(QueryError, match="No class of imagenet-1k lies under crane.n.01 or crane.n.02"):
        combined_classes(["crane.n.01", "crane.n.02"])
    with pytest.raises(QueryError, match="noun senses"):
        combined_classes(["crane"])


def test_the_preselection_says_why_and_names_the_usual_sense_when_it_has_no_class():
    """A UI review: 'cat' said why cat.n.01 was picked, 'bank' picked the piggy bank without a word; a code
    review: 'table' was said to be used most often in the sense picked (table.n.01 has more tags, no class)."""
    def note(word, space="imagenet-1k"):
        return preselection_note(senses(word, space), word, space)

    assert note("cat") == ("cat.n.01 is picked: of the senses of ‘cat’ with a class in imagenet-1k, the one WordNet's "
                           "sense-tagged texts use most often. Tick other senses to add their classes to the same run.")
    assert note("bank") == ("savings_bank.n.02 is picked: the only one of the 10 noun senses of ‘bank’ with a class in "
                            "imagenet-1k. Its most used sense of all, bank.n.01 (sloping land (especially the "
                            "slope beside a body of water)), has none; imagenet-21k has 3 classes under it (pick it "
                            "as the label space to see them).")
    assert "mouse.n.01 (any of numerous small rodents typically resembling diminutive rats having…), has none; " \
           "imagenet-21k has 12 classes under it" in note("mouse")  # cut at a word
    assert "Its most used sense of all, table.n.01 (a set of data arranged in rows and columns), has none. Tick " \
           "other senses" in note("table")
    assert note("palm", "imagenet-21k").endswith("palm.n.01 (the inner surface of the hand from the wrist to the base "
                                                 "of the fingers), has none.")  # no larger space to point to
    assert note("tiger cat").endswith("with a class in imagenet-1k.")  # its other sense is never tagged either
    assert note("crane") is None and note("cat.n.01") is None  # asked; one sense
