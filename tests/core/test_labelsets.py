"""Label sets as label spaces (issue 14 item 2): ``sense:SYNSET`` and ``file:SHA`` read through
``core.labels.get_label_space`` like ImageNet's lists, checked against NLTK's own closure."""
import pandas as pd
import pytest

from core.labels import (QueryError, canonical_label_space, get_label_space, hyponym_classes, is_label_set,
                         label_set_path, label_space_names, store_label_set)
from core.wordnet import get_wordnet, synset_of, wnid_of

TABBY, TIGER_CAT, LYNX = "n02123045", "n02123159", "n02127052"
WILD_TIGER_CAT = "n02126465"  # tiger_cat.n.01, the wild cat: in WordNet, in no ImageNet list


def _nltk_closure(name: str) -> set[str]:
    """NLTK's public closure over hyponyms and instance hyponyms, plus the sense itself."""
    synset = get_wordnet().synset(name)
    below = synset.closure(lambda s: s.hyponyms() + s.instance_hyponyms())
    return {wnid_of(s) for s in [synset, *below]}


def test_sense_label_set_is_the_whole_closure_with_wordnet_only_nouns():
    space = get_label_space("sense:cat.n.01")
    assert space.name == "sense:cat.n.01" and list(space.wnids) == sorted(space.wnids)
    assert set(space.wnids) == _nltk_closure("cat.n.01")
    in21k = {c.wnid for c in hyponym_classes("cat.n.01", "imagenet-21k")}
    assert len(in21k) == 38 and in21k <= set(space.wnids)
    wordnet_only = set(space.wnids) - set(get_label_space("imagenet-21k").wnids)
    assert WILD_TIGER_CAT in wordnet_only and "n02121620" in space  # and cat.n.01 itself
    assert {c.wnid for c in hyponym_classes("cat.n.01", "imagenet-1k")} <= set(space.wnids)
    assert space.display_name(LYNX) == "lynx" and space.definition(TIGER_CAT) == "a cat having a striped coat"
    assert space.definition(WILD_TIGER_CAT) == synset_of(WILD_TIGER_CAT).definition()
    assert "n02084071" not in space  # dog


def test_sense_names_are_canonical():
    assert canonical_label_space("sense:n02121620") == "sense:cat.n.01"
    assert canonical_label_space("  Sense:cat.n.01 ") == "sense:cat.n.01"
    assert canonical_label_space("sense:domestic cat") == "sense:domestic_cat.n.01"  # a word with one noun sense
    with pytest.raises(QueryError, match=r"tiger_cat\.n\.01 .*tiger_cat\.n\.02 \(a cat having a striped coat\)"):
        canonical_label_space("sense:tiger cat")  # two: the wild cat and ImageNet's tiger cat, never guessed
    assert get_label_space("sense:n02121620").wnids == get_label_space("sense:cat.n.01").wnids
    assert is_label_set("sense:cat.n.01") and is_label_set("file:0123456789ab") and not is_label_set("imagenet-1k")
    # The named label spaces are unchanged.
    assert canonical_label_space("IN1K") == "imagenet-1k" and len(get_label_space("imagenet-1k")) == 1000
    assert "sense:cat.n.01" not in label_space_names()


@pytest.mark.parametrize("spec,words", [
    ("sense:cat", ["ambiguous", "8 noun senses", "cat.n.01", "big_cat.n.01"]),
    ("sense:catt", ["not in WordNet", "cat"]),
    ("sense:kat.n.09", ["not a WordNet synset name", "Did you mean"]),
    ("sense:run.v.01", ["not a noun sense"]),
    ("sense:", ["needs a WordNet noun sense"]),
    ("file:xyz", ["12 hex digits"]),
    ("file:0123456789ab", ["not stored on this machine", "--label-set FILE"]),
    ("imagenet-5k", ["Unknown label space", "sense:SYNSET"]),
])
def test_bad_label_sets_are_one_line_errors(spec, words):
    with pytest.raises(QueryError) as info:
        get_label_space(spec)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_stored_set_round_trips_through_the_cache(tmp_path, monkeypatch):
    name = store_label_set([LYNX, TABBY, WILD_TIGER_CAT, TABBY])
    assert name.startswith("file:") and len(name) == len("file:") + 12
    assert store_label_set([WILD_TIGER_CAT, LYNX, TABBY]) == name  # order and duplicates do not matter
    path = label_set_path(name[5:])
    assert path.read_text() == f"{TABBY}\n{WILD_TIGER_CAT}\n{LYNX}\n"
    get_label_space.cache_clear()
    space = get_label_space(name)
    assert space.name == name and space.wnids == (TABBY, WILD_TIGER_CAT, LYNX)
    assert LYNX in space and "n02084071" not in space and space.index[LYNX] == 2
    assert space.display_name(WILD_TIGER_CAT) == "tiger cat" and space.definition(LYNX).startswith("short-tailed")
    assert canonical_label_space(name.upper().replace("FILE", "file")) == name
    # Edited by hand: refused, never misread.
    path.write_text(f"{TABBY}\n")
    get_label_space.cache_clear()
    with pytest.raises(QueryError, match="does not match its name"):
        get_label_space(name)
    with pytest.raises(QueryError, match="not a wnid"):
        store_label_set(["tabby"])
    with pytest.raises(QueryError, match="not a noun synset"):
        store_label_set(["n99999999"])
    with pytest.raises(QueryError, match="at least one"):
        store_label_set([])


def test_metrics_read_predictions_recorded_with_a_label_set():
    """explain/ reads a label set like a label space: in_label_space, NA accuracy outside it."""
    from explain.metrics import compute_metric_tables

    lamp = "n04380533"
    name = store_label_set([TABBY, TIGER_CAT, LYNX])
    persian, siamese = "n02123394", "n02123597"
    for space, rest in (("sense:cat.n.01", [persian, siamese]), (name, [None, None])):
        rows = []  # a top-5 names 5 different classes; a label set of 3 classes ranks only 3
        for true, preds in ((TABBY, [TABBY, TIGER_CAT, LYNX, *rest]),
                            (TIGER_CAT, [LYNX, TIGER_CAT, TABBY, *rest]),
                            (lamp, [TABBY, TIGER_CAT, LYNX, *rest])):
            rows.append({"model": "clip", "true_wnid": true, "pred_wnid": preds[0],
                         **{f"pred_wnid_{k}": preds[k - 1] for k in range(2, 6)}, "label_space": space, "status": "ok"})
        tables = compute_metric_tables(pd.DataFrame(rows), cache_dir=False)
        pc = tables.per_class.set_index("true_wnid")
        assert bool(pc.loc[TABBY, "in_label_space"]) and bool(pc.loc[TIGER_CAT, "in_label_space"])
        assert pc.loc[lamp, "in_label_space"] == False and pd.isna(pc.loc[lamp, "accuracy"])  # noqa: E712
        pm = tables.per_model.set_index("model").loc["clip"]
        assert pm["n_unseen"] == 1 and pm["accuracy"] == 0.5
