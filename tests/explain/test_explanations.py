"""Explanations of a confusion: a real WordNet path through the lowest common subsumer, ready for a graph view."""
import json
import random

import networkx as nx
import pytest

from explain.explanations import RELATION_COLOURS, explain_pair
from core.labels import get_label_space
from explain.similarity import RELATIONS
from core.wordnet import get_wordnet, synset_of, wnid_of
from tests.explain import nltk_reference as ref

IN1K = get_label_space("imagenet-1k").wnids
IN21K = get_label_space("imagenet-21k").wnids


def W(name):
    return wnid_of(get_wordnet().synset(name))


def _pairs():
    rng = random.Random(99)
    pairs = [(rng.choice(IN1K), rng.choice(IN1K)) for _ in range(60)]
    pairs += [(rng.choice(IN21K), rng.choice(IN21K)) for _ in range(30)]
    pairs += [(W(a), W(b)) for a, b in [("tabby.n.01", "egyptian_cat.n.01"), ("tabby.n.01", "cat.n.01"),
                                        ("cat.n.01", "tabby.n.01"), ("sun.n.01", "tabby.n.01"),
                                        ("automatic_rifle.n.01", "machine_gun.n.01"), ("person.n.01", "object.n.01"),
                                        ("accordion.n.01", "bakery.n.01"), ("teddy.n.01", "dog.n.01")]]
    return pairs


@pytest.mark.parametrize("true_wnid,pred_wnid", _pairs())
def test_path_climbs_to_the_lowest_common_subsumer_and_down(true_wnid, pred_wnid):
    g, p = synset_of(true_wnid), synset_of(pred_wnid)
    x = explain_pair(true_wnid, pred_wnid)
    lcs = synset_of(x.lcs_wnid)
    assert lcs == ref.lowest_common_subsumer(g, p)  # the one rule (explain.similarity), NLTK's
    assert x.path_length == g.shortest_path_distance(p)
    assert len(x.edges) == len(x.nodes) - 1 == ref.upward_distances(g)[lcs] + ref.upward_distances(p)[lcs]
    assert x.lcs_steps == ref.severity(g, p) == x.severity
    assert x.nodes[0].wnid == true_wnid and x.nodes[-1].wnid == pred_wnid
    assert "true" in x.nodes[0].roles and "pred" in x.nodes[-1].roles
    assert [n.wnid for n in x.nodes].index(x.lcs_wnid) == sum(e.direction == "up" for e in x.edges)
    for i, edge in enumerate(x.edges):
        child, parent = synset_of(edge.child), synset_of(edge.parent)
        assert {edge.child, edge.parent} == {x.nodes[i].wnid, x.nodes[i + 1].wnid}
        link = parent in child.instance_hypernyms() and "instance_hypernym" or parent in child.hypernyms() and "hypernym"
        assert edge.kind == link, (child, parent)
        assert (edge.child == x.nodes[i].wnid) == (edge.direction == "up")
    assert x.relation == ref.relation(g, p)
    for node in x.nodes:
        synset = synset_of(node.wnid)
        assert node.name == synset.name() and node.definition == synset.definition()
        assert node.lemma_names == tuple(n.replace("_", " ") for n in synset.lemma_names())
        assert node.depth == synset.min_depth()
    assert x.wup == g.wup_similarity(p) and x.path == g.path_similarity(p)


def test_sibling_example_from_the_paper():
    x = explain_pair(W("tabby.n.01"), W("egyptian_cat.n.01"))
    assert [n.name for n in x.nodes] == ["tabby.n.01", "domestic_cat.n.01", "egyptian_cat.n.01"]
    assert [n.roles for n in x.nodes] == [("true",), ("lcs",), ("pred",)]
    assert x.relation == "sibling" and x.is_sibling
    assert x.summary() == "tabby.n.01 > domestic_cat.n.01 < egyptian_cat.n.01 (sibling, 2 steps)"
    assert "tabby cat" in x.nodes[0].lemma_names


def test_same_class_and_hypernym_prediction():
    same = explain_pair(W("tabby.n.01"), W("tabby.n.01"))
    assert same.path_length == 0 and same.edges == () and same.nodes[0].roles == ("true", "pred", "lcs")
    up = explain_pair(W("tabby.n.01"), W("cat.n.01"))
    assert up.relation == "hypernym" and all(e.direction == "up" for e in up.edges)
    assert up.nodes[-1].roles == ("pred", "lcs")
    down = explain_pair(W("cat.n.01"), W("tabby.n.01"))
    assert down.relation == "hyponym" and all(e.direction == "down" for e in down.edges)


def test_instance_link_is_labelled():
    x = explain_pair(W("sun.n.01"), W("star.n.01"))
    assert [(e.child, e.parent, e.kind) for e in x.edges] == [(W("sun.n.01"), W("star.n.01"), "instance_hypernym")]


def test_plain_data_builds_a_graph():
    data = explain_pair(W("teddy.n.01"), W("tabby.n.01")).to_dict()
    text = json.dumps(data, allow_nan=False)  # valid JSON: Lin undefined for teddy is None
    assert json.loads(text)["lin"] is None
    graph = nx.Graph()
    graph.add_nodes_from((n["wnid"], n) for n in data["nodes"])
    graph.add_edges_from((e["child"], e["parent"], {"kind": e["kind"]}) for e in data["edges"])
    assert nx.is_connected(graph) and graph.number_of_edges() == len(data["edges"])
    assert nx.shortest_path_length(graph, data["true_wnid"], data["pred_wnid"]) == len(data["edges"])


def test_the_path_goes_through_the_lowest_common_subsumer_not_over_it():
    """Issue 22 item 15: tench -> Chihuahua's shortest path (14) climbs over animal.n.01 (a Chihuahua
    is a domestic animal); the drawn path goes through vertebrate.n.01, where the two meet, as the
    Confusions table and the matrix name it."""
    x = explain_pair(W("tench.n.01"), W("chihuahua.n.03"))
    assert synset_of(x.lcs_wnid).name() == "vertebrate.n.01" and "vertebrate.n.01" in [n.name for n in x.nodes]
    assert x.path_length == 14 and len(x.edges) == 15 and x.lcs_steps == x.severity == 8
    assert x.lcs_phrase("tench") == "both vertebrates, 8 steps up from tench"


def test_every_relation_has_a_colour():
    assert set(RELATION_COLOURS) == set(RELATIONS)
    assert RELATION_COLOURS["sibling"] != RELATION_COLOURS["distant"] != RELATION_COLOURS["hypernym"]


def test_unknown_wnid_is_an_error():
    with pytest.raises((KeyError, ValueError)):
        explain_pair("n99999999", W("tabby.n.01"))


def test_the_shortest_paths_apex_is_named_where_the_drawn_path_is_longer():
    """The Explain page showed "Path length 3" for tabby -> dog beside a drawn path of six edges (a UI
    review): PairExplanation.shortest_path_apex names the common hypernym the shortest path runs
    through (NLTK's distances add up to NLTK's shortest_path_distance), None where the drawn path is a
    shortest one."""
    assert explain_pair(W("tabby.n.01"), W("dog.n.01")).shortest_path_apex() == W("domestic_animal.n.01")
    longer = 0
    for true_wnid, pred_wnid in _pairs():
        g, p = synset_of(true_wnid), synset_of(pred_wnid)
        x = explain_pair(true_wnid, pred_wnid)
        apex = x.shortest_path_apex()
        if x.path_length == len(x.edges):
            assert apex is None
            continue
        longer += 1
        a = synset_of(apex)
        assert a in set(g.common_hypernyms(p)) and a != synset_of(x.lcs_wnid)
        assert g.shortest_path_distance(a) + p.shortest_path_distance(a) == g.shortest_path_distance(p)
    assert longer >= 1
