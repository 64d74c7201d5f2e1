"""core.names: ImageNet's display names beside wnids, WordNet's outside the label space."""
import pandas as pd
import pytest

from core.labels import get_label_space
from core.names import class_name, name_column, names_of, with_names
from core.wordnet import synset_of

TABBY, TIGER_CAT, LEOPARD_CAT, FELINE = "n02123045", "n02123159", "n02126317", "n02120997"


def test_names_equal_the_label_space_names():
    space = get_label_space("imagenet-1k")
    for wnid in space.wnids[:50] + (TABBY, TIGER_CAT):
        assert class_name(wnid) == space.display_name(wnid)
    assert class_name(TABBY) == "tabby" and class_name(TIGER_CAT) == "tiger cat"


def test_outside_the_label_space_wordnet_names_the_class():
    assert LEOPARD_CAT not in get_label_space("imagenet-1k")
    assert class_name(LEOPARD_CAT) == get_label_space("imagenet-21k").display_name(LEOPARD_CAT) == "leopard cat"
    assert class_name(FELINE, "imagenet-1k") == synset_of(FELINE).lemma_names()[0].replace("_", " ")


def test_non_wnids_and_na():
    assert class_name("n99999999") == "n99999999"
    assert class_name("not a wnid") == "not a wnid"
    assert class_name(None) is pd.NA and class_name(pd.NA) is pd.NA and class_name(float("nan")) is pd.NA
    assert class_name(TABBY, "no-such-space") == "tabby"  # an unknown space named in run.json: ImageNet-1k's names


@pytest.mark.parametrize("column, name", [("true_wnid", "true_name"), ("pred_wnid", "pred_name"),
                                          ("pred_wnid_2", "pred_name_2"), ("pred_wnid_5", "pred_name_5"),
                                          ("lcs_wnid", "lcs_name"), ("nearest_seen_wnid", "nearest_seen_name"),
                                          ("wnid", "name"), ("wnids", None), ("other_wnids", None),
                                          ("model", None), ("wnid_count", None)])
def test_name_column(column, name):
    assert name_column(column) == name


def test_with_names_puts_each_name_right_after_its_wnid():
    df = pd.DataFrame({"model": ["m", "m", "m"], "true_wnid": [TABBY, TABBY, LEOPARD_CAT],
                       "pred_wnid": [TIGER_CAT, None, TABBY], "pred_wnid_2": [TABBY, TABBY, TABBY],
                       "lcs_wnid": [FELINE, FELINE, FELINE], "count": [1, 2, 3]})
    out = with_names(df)
    assert list(out.columns) == ["model", "true_wnid", "true_name", "pred_wnid", "pred_name", "pred_wnid_2",
                                 "pred_name_2", "lcs_wnid", "lcs_name", "count"]
    assert out["true_name"].tolist() == ["tabby", "tabby", "leopard cat"]
    assert out["pred_name"].iloc[0] == "tiger cat" and pd.isna(out["pred_name"].iloc[1])
    assert str(out["true_name"].dtype) == "string"
    assert list(df.columns) == ["model", "true_wnid", "pred_wnid", "pred_wnid_2", "lcs_wnid", "count"]  # untouched
    pd.testing.assert_frame_equal(out[df.columns], df)


def test_with_names_keeps_existing_name_columns_and_tables_without_wnids():
    df = pd.DataFrame({"wnid": [TABBY], "name": ["my own"], "nearest_seen_wnid": [TIGER_CAT],
                       "nearest_seen_name": ["kept"]})
    assert with_names(df) is df
    plain = pd.DataFrame({"model": ["m"], "accuracy": [0.5]})
    assert with_names(plain) is plain
    partly = pd.DataFrame({"true_wnid": [TABBY], "pred_wnid": [TIGER_CAT], "pred_name": ["given"]})
    assert list(with_names(partly).columns) == ["true_wnid", "true_name", "pred_wnid", "pred_name"]
    assert with_names(partly)["pred_name"].tolist() == ["given"]


def test_names_are_looked_up_once_per_distinct_wnid(monkeypatch):
    import core.names as names

    calls = []
    real = names.class_name
    monkeypatch.setattr(names, "class_name", lambda w, space="imagenet-1k": calls.append(w) or real(w, space))
    series = pd.Series([TABBY, TIGER_CAT] * 5000 + [None])
    out = names_of(series)
    assert sorted(calls) == [TABBY, TIGER_CAT]
    assert out.iloc[0] == "tabby" and out.iloc[1] == "tiger cat" and pd.isna(out.iloc[-1]) and len(out) == 10001


CRANE_BIRD, CRANE_MACHINE = "n02012849", "n03126707"


def test_ambiguous_imagenet_1k_names_carry_their_sense():
    """Issue 22 item 21: a top-5 read 'crane' with no way to tell the bird from the machine. Every
    name that two of the 1000 classes share gets a distinct display string, and no other changes."""
    from core.names import ambiguous_names

    space = get_label_space("imagenet-1k")
    shared = ambiguous_names("imagenet-1k")
    assert shared == {"crane": (CRANE_BIRD, CRANE_MACHINE), "Cardigan": ("n02113186", "n02963159"),
                      "maillot": ("n03710637", "n03710721")}
    assert {w: class_name(w) for group in shared.values() for w in group} == {
        CRANE_BIRD: "crane (wading bird)", CRANE_MACHINE: "crane (lifting device)",
        "n02113186": "Cardigan (corgi)", "n02963159": "cardigan (sweater)",
        "n03710637": "maillot (tights)", "n03710721": "maillot (swimsuit)"}
    names = [class_name(w) for w in space.wnids]
    assert len({n.casefold() for n in names}) == 1000  # every class reads differently
    ambiguous = {w for group in shared.values() for w in group}
    assert all(class_name(w) == space.display_name(w) for w in space.wnids if w not in ambiguous)


def test_outside_the_label_space_a_shared_name_carries_its_sense_too():
    """A prediction of an ImageNet-21k model is named from ImageNet-21k's lists, ambiguous there or
    against the run's classes; where the hypernym does not tell two apart the wnid does."""
    space = get_label_space("imagenet-21k")
    names = [class_name(w, "imagenet-21k") for w in space.wnids]
    assert len({n.casefold() for n in names}) == len(space.wnids)  # 1,470 shared names, all told apart
    outside = [w for w in space.wnids if w not in get_label_space("imagenet-1k")]
    plant = next(w for w in outside if space.display_name(w) == "plant" and synset_of(w).name() == "plant.n.02")
    assert class_name(plant) == "plant (organism)"
    # Two tabbies under domestic cat in ImageNet-21k (the cat, and the female cat n02122878): the
    # hypernym cannot tell them apart, the wnid does. In ImageNet-1k only one is a class: it stays
    # 'tabby', and a 21k model's prediction of the other reads with its wnid.
    assert class_name(TABBY, "imagenet-21k") == "tabby (n02123045)"
    assert class_name("n02122878", "imagenet-21k") == class_name("n02122878") == "tabby (n02122878)"
    assert class_name(TABBY) == "tabby"


def test_pages_show_the_library_name():
    from pages.reads import class_name as page_name

    for wnid in (CRANE_BIRD, CRANE_MACHINE, TABBY, LEOPARD_CAT, "n99999999"):
        assert page_name(wnid) == class_name(wnid)
