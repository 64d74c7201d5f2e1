"""The vectorised similarity engine equals NLTK's own functions, pair by pair."""
import math
import random

import numpy as np
import pytest

from explain import similarity
from core.labels import get_label_space
from explain.similarity import (RELATIONS, information_content, label_space_matrices, similarities,
                                wnid_of_offset)
from core.wordnet import get_wordnet, synset_of, wnid_of
from tests.explain import nltk_reference as ref
from tests.explain.nltk_reference import nltk_noun_depth  # noqa: F401  (fixture)

IN1K = get_label_space("imagenet-1k").wnids
IN21K = get_label_space("imagenet-21k").wnids
N_RANDOM_1K = 1200
CHUNK = 100


def _random_pairs(wnids, n, seed):
    rng = random.Random(seed)
    return [(rng.choice(wnids), rng.choice(wnids)) for _ in range(n)]


RANDOM_1K_PAIRS = _random_pairs(IN1K, N_RANDOM_1K, seed=20231129)


def _by_name(*pairs):
    wn = get_wordnet()
    return [(wnid_of(wn.synset(a)), wnid_of(wn.synset(b))) for a, b in pairs]


def _mismatches(pairs, values):
    """Pairs where a value differs from NLTK's g.<metric>(p) by more than 1e-12."""
    bad = []
    for i, (g_wnid, p_wnid) in enumerate(pairs):
        g, p = synset_of(g_wnid), synset_of(p_wnid)
        expected = {"path_distance": g.shortest_path_distance(p), "path": g.path_similarity(p),
                    "lch": g.lch_similarity(p), "wup": g.wup_similarity(p)}
        for name, want in expected.items():
            got = getattr(values, name)[i].item()
            if want is None or abs(got - want) > 1e-12:
                bad.append(f"{g.name()} vs {p.name()}: {name} = {got!r}, NLTK {want!r}")
    return bad


@pytest.fixture(scope="module")
def matrices_1k():
    return label_space_matrices("imagenet-1k", cache_dir=False)


@pytest.mark.parametrize("chunk", range(N_RANDOM_1K // CHUNK))
def test_random_imagenet_1k_pairs_equal_nltk(chunk, matrices_1k, nltk_noun_depth):
    pairs = RANDOM_1K_PAIRS[chunk * CHUNK:(chunk + 1) * CHUNK]
    index = matrices_1k.index
    values = matrices_1k.take([index[g] for g, _ in pairs], [index[p] for _, p in pairs])
    bad = _mismatches(pairs, values)
    assert not bad, f"{len(bad)} mismatches, first: " + "; ".join(bad[:5])


EDGE_PAIRS = _by_name(
    # same class, including the root
    ("tabby.n.01", "tabby.n.01"), ("entity.n.01", "entity.n.01"), ("entity.n.01", "dog.n.01"), ("dog.n.01", "entity.n.01"),
    # parent and child (both IN-21k classes), both orders; NLTK's WUP is asymmetric for these
    ("domestic_cat.n.01", "tabby.n.01"), ("tabby.n.01", "domestic_cat.n.01"),
    ("football.n.01", "american_football.n.01"), ("american_football.n.01", "football.n.01"),
    ("welsh_terrier.n.01", "sealyham_terrier.n.01"), ("sealyham_terrier.n.01", "welsh_terrier.n.01"),
    ("ptarmigan.n.01", "red_grouse.n.01"), ("red_grouse.n.01", "ptarmigan.n.01"),
    # instance hyponyms (IN-21k): the sun is an instance of star
    ("sun.n.01", "star.n.01"), ("star.n.01", "sun.n.01"), ("sun.n.01", "tabby.n.01"), ("munro.n.01", "mountain.n.01"),
    ("genet.n.01", "tabby.n.01"), ("stoker.n.01", "person.n.01"),
    # synsets with two hypernyms (IN-1k classes)
    ("accordion.n.01", "bakery.n.01"), ("computer_keyboard.n.01", "accordion.n.01"),
    ("bath_towel.n.01", "brassiere.n.01"), ("bulletproof_vest.n.01", "croquet_ball.n.01"),
    # a parent that is also a sibling (machine_gun is a parent of automatic_rifle and a child of
    # its other parent); NLTK's distance to a subsumer that beats the upward one (person/object)
    ("automatic_rifle.n.01", "machine_gun.n.01"), ("machine_gun.n.01", "automatic_rifle.n.01"),
    ("hand_shovel.n.01", "shovel.n.01"), ("person.n.01", "object.n.01"),
    # outside the IN-21K corpus (IN-1k's teddy bear)
    ("teddy.n.01", "teddy.n.01"), ("teddy.n.01", "dog.n.01"), ("dog.n.01", "teddy.n.01"),
)


def test_edge_cases_equal_nltk(nltk_noun_depth):
    values = similarities([g for g, _ in EDGE_PAIRS], [p for _, p in EDGE_PAIRS], cache_dir=False)
    bad = _mismatches(EDGE_PAIRS, values)
    assert not bad, "; ".join(bad)


def test_wup_follows_argument_order_where_nltk_is_asymmetric():
    wn = get_wordnet()
    general, specific = wn.synset("football.n.01"), wn.synset("american_football.n.01")
    assert general.wup_similarity(specific) != specific.wup_similarity(general)  # the premise
    values = similarities([wnid_of(general), wnid_of(specific)], [wnid_of(specific), wnid_of(general)], cache_dir=False)
    assert values.wup[0] == general.wup_similarity(specific)  # [true, pred] = true.wup_similarity(pred)
    assert values.wup[1] == specific.wup_similarity(general)


def test_edge_case_list_covers_what_it_claims():
    wn = get_wordnet()
    assert all(len(ref.parents(synset_of(g))) == 2 for g, _ in EDGE_PAIRS[18:22])
    assert wn.synset("sun.n.01").instance_hypernyms() and not wn.synset("sun.n.01").hypernyms()
    assert all(g in IN21K and p in IN21K for g, p in EDGE_PAIRS[4:12])


def test_random_imagenet_21k_pairs_equal_nltk(nltk_noun_depth):
    pairs = _random_pairs(IN21K, 300, seed=7)
    values = similarities([g for g, _ in pairs], [p for _, p in pairs], cache_dir=False)
    bad = _mismatches(pairs, values)
    assert not bad, f"{len(bad)} mismatches, first: " + "; ".join(bad[:5])


def test_matrices_and_on_demand_pairs_agree(matrices_1k):
    pairs = RANDOM_1K_PAIRS[:400]
    index = matrices_1k.index
    from_matrix = matrices_1k.take([index[g] for g, _ in pairs], [index[p] for _, p in pairs])
    taxonomy = similarity.get_taxonomy()
    nodes = {w: taxonomy.node_of_wnid(w) for pair in pairs for w in pair}
    direct = similarity.compute_pairs(np.array([nodes[g] for g, _ in pairs]), np.array([nodes[p] for _, p in pairs]))
    for name in ("path_distance", "wup", "lin", "severity", "relation", "is_sibling", "lcs", "subsumer"):
        np.testing.assert_array_equal(getattr(direct, name), getattr(from_matrix, name), err_msg=name)


def test_sparse_lookup_path_equals_dense(monkeypatch):
    """Large batches look ancestors up by sorted keys instead of a dense array: same values."""
    pairs = _random_pairs(IN1K, 300, seed=3) + EDGE_PAIRS
    taxonomy = similarity.get_taxonomy()
    t = np.array([taxonomy.node_of_wnid(g) for g, _ in pairs])
    p = np.array([taxonomy.node_of_wnid(w) for _, w in pairs])
    dense = similarity.compute_pairs(t, p)
    monkeypatch.setattr(similarity._AncestorTable, "_DENSE_MAX_CELLS", 0)
    sparse = similarity.compute_pairs(t, p)
    for name in ("path_distance", "wup", "lin", "severity", "relation", "is_sibling", "lcs", "subsumer"):
        np.testing.assert_array_equal(getattr(dense, name), getattr(sparse, name), err_msg=name)


@pytest.mark.parametrize("hashed_from", [10**9, 1])
def test_severities_of_codes_are_the_similarities_severities(matrices_1k, monkeypatch, hashed_from):
    """The top-5 severities' path (severities_of_codes: one value gathered) gives similarities_of_codes' severity for
    ImageNet-1k pairs (the matrices), others (on demand) and both mixed, in the callers' order; the on-demand
    cache's lookup by a hash index (large batches) finds what its binary search finds."""
    monkeypatch.setattr(similarity, "_HASHED_LOOKUP_FROM", hashed_from)
    pairs = _random_pairs(IN1K, 200, seed=21) + _random_pairs(IN21K, 200, seed=22) + EDGE_PAIRS
    wnids = np.array(sorted({w for pair in pairs for w in pair}))
    index = {w: k for k, w in enumerate(wnids)}
    true = np.array([index[g] for g, _ in pairs] * 2)  # each pair twice: found in the cache the second time
    pred = np.array([index[p] for _, p in pairs] * 2)
    similarity.clear_memory_caches()
    both = similarity.similarities_of_codes(wnids, true, pred, cache_dir=False)
    for name in ("path_distance", "wup", "lin", "severity", "relation", "lcs"):
        np.testing.assert_array_equal(getattr(both, name)[:len(pairs)], getattr(both, name)[len(pairs):], err_msg=name)
    for part in (slice(None), slice(0, 200), slice(200, None)):
        np.testing.assert_array_equal(similarity.severities_of_codes(wnids, true[part], pred[part], cache_dir=False),
                                      both.severity[part])
    direct = similarity.similarities([g for g, _ in pairs], [p for _, p in pairs])
    np.testing.assert_array_equal(both.severity[:len(pairs)], direct.severity)


# --------------------------------------------------------------------------- Lin
LIN_PAIRS = _random_pairs(IN1K, 150, seed=11) + _random_pairs(IN21K, 60, seed=12) + EDGE_PAIRS


def test_information_content_equals_direct_count():
    info = information_content(cache_dir=False)
    corpus, _ = ref._corpus()
    assert info.corpus_size == len(corpus) and info.corpus_size > len(IN21K)  # ancestors join the 21,843
    wn = get_wordnet()
    # (entity.n.01 would walk all 82k nouns; every corpus concept is under it by definition)
    assert info.counts[np.searchsorted(info.offsets, wn.synset("entity.n.01").offset())] == len(corpus)
    for name in ("feline.n.01", "domestic_cat.n.01", "tabby.n.01", "dog.n.01", "musical_instrument.n.01"):
        synset = wn.synset(name)
        # Counted downwards here (hyponym closure), upwards in the engine: two routes, one number.
        under = ({synset} | set(synset.closure(lambda s: s.hyponyms() + s.instance_hyponyms()))) & corpus
        assert info.counts[np.searchsorted(info.offsets, synset.offset())] == len(under), name
        assert info.of_offsets([synset.offset()])[0] == pytest.approx(-math.log(len(under) / len(corpus)), abs=1e-12)
    assert info.of_offsets([wn.synset("entity.n.01").offset()])[0] == 0.0


def test_the_packaged_information_content_is_current_and_equals_a_fresh_build():
    from explain import similarity

    target = similarity.packaged_ic_file()
    assert target.is_file(), f"{target.name} is not shipped for this corpus and code version: run `make ic`"
    assert sorted(p.name for p in target.parent.glob("ic-in21k-*.npz")) == [target.name], "a stale table is shipped"
    packaged = similarity._ic_from_arrays(similarity._load_npz(target, similarity._IC_LAYOUT))
    fresh = similarity.build_information_content()
    assert packaged.corpus_size == fresh.corpus_size
    for name in ("offsets", "counts", "ic"):
        assert np.array_equal(getattr(packaged, name), getattr(fresh, name)), name


def test_a_cold_process_reads_the_packaged_table_and_builds_nothing(tmp_path, monkeypatch):
    from explain import similarity

    saved = dict(similarity._memo)
    similarity.clear_memory_caches()
    monkeypatch.setattr(similarity, "build_information_content", lambda: pytest.fail("built, not read"))
    try:
        info = information_content(cache_dir=tmp_path)
        assert info.corpus_size == 23_547 and not list(tmp_path.iterdir()), "nothing written to the user's cache"
    finally:
        similarity._memo.clear()
        similarity._memo.update(saved)


def test_lin_equals_direct_formula():
    values = similarities([g for g, _ in LIN_PAIRS], [p for _, p in LIN_PAIRS], cache_dir=False)
    bad = []
    for i, (g, p) in enumerate(LIN_PAIRS):
        want, got = ref.lin(synset_of(g), synset_of(p)), values.lin[i]
        if not ((math.isnan(want) and math.isnan(got)) or abs(want - got) <= 1e-12):
            bad.append(f"{g} vs {p}: {got!r} != {want!r}")
    assert not bad, "; ".join(bad[:5])


def test_lin_conventions():
    wn = get_wordnet()
    teddy, dog, entity = (wnid_of(wn.synset(n)) for n in ("teddy.n.01", "dog.n.01", "entity.n.01"))
    values = similarities([dog, teddy, teddy, entity, dog], [dog, teddy, dog, entity, entity], cache_dir=False)
    assert values.lin.tolist()[:2] == [1.0, 1.0]  # identity, even outside the corpus
    assert math.isnan(values.lin[2])  # teddy bear is not an IN-21K concept: undefined
    assert values.lin[3] == 1.0 and values.lin[4] == 0.0  # lcs = entity, IC 0


# --------------------------------------------------------------------------- severity, relations
RELATION_PAIRS = _random_pairs(IN1K, 300, seed=5) + _random_pairs(IN21K, 100, seed=6) + EDGE_PAIRS + _by_name(
    ("tabby.n.01", "egyptian_cat.n.01"), ("tabby.n.01", "cat.n.01"), ("cat.n.01", "tabby.n.01"),
    ("tabby.n.01", "cougar.n.01"), ("siamese_cat.n.01", "lynx.n.02"), ("tabby.n.01", "leopard.n.02"),
    ("welsh_terrier.n.01", "airedale.n.01"), ("rifle.n.01", "automatic_rifle.n.01"))


def test_severity_and_relations_equal_direct_definitions():
    values = similarities([g for g, _ in RELATION_PAIRS], [p for _, p in RELATION_PAIRS], cache_dir=False)
    bad = []
    for i, (g_wnid, p_wnid) in enumerate(RELATION_PAIRS):
        g, p = synset_of(g_wnid), synset_of(p_wnid)
        expected = {"severity": ref.severity(g, p), "relation": ref.relation(g, p), "is_sibling": ref.is_sibling(g, p),
                    "is_hypernym": g != p and p in ref.ancestors(g), "is_hyponym": g != p and g in ref.ancestors(p)}
        got = {"severity": int(values.severity[i]), "relation": RELATIONS[values.relation[i]],
               "is_sibling": bool(values.is_sibling[i]), "is_hypernym": bool(values.is_hypernym[i]),
               "is_hyponym": bool(values.is_hyponym[i])}
        if got != expected:
            bad.append(f"{g.name()} vs {p.name()}: {got} != {expected}")
    assert not bad, f"{len(bad)} mismatches: " + "; ".join(bad[:5])
    seen = {RELATIONS[r] for r in values.relation}
    assert seen == set(RELATIONS), f"the pairs should exercise every relation, saw {seen}"


def test_known_relations_and_severities():
    rows = _by_name(("tabby.n.01", "egyptian_cat.n.01"), ("tabby.n.01", "domestic_cat.n.01"),
                    ("domestic_cat.n.01", "tabby.n.01"), ("tabby.n.01", "tabby.n.01"), ("tabby.n.01", "cat.n.01"),
                    ("automatic_rifle.n.01", "machine_gun.n.01"), ("machine_gun.n.01", "automatic_rifle.n.01"))
    values = similarities([g for g, _ in rows], [p for _, p in rows], cache_dir=False)
    # Ancestry outranks the sibling relation; is_sibling still reports the shared parent.
    assert [RELATIONS[r] for r in values.relation] == ["sibling", "hypernym", "hyponym", "same", "hypernym",
                                                       "hypernym", "hyponym"]
    # tabby -> domestic_cat is 1 step; a hyponym prediction or the class itself: 0; cat is 2 up.
    assert values.severity.tolist() == [1, 1, 0, 0, 2, 1, 0]
    assert values.is_sibling.tolist() == [True, False, False, False, False, True, True]


def test_lcs_is_a_common_hypernym_with_none_below_it():
    """(Until issue 22 the lcs was the top of a shortest path, which can lie above another common
    ancestor: tench -> Chihuahua over animal.n.01, below which both are vertebrates.)"""
    pairs = RELATION_PAIRS[:150]
    values = similarities([g for g, _ in pairs], [p for _, p in pairs], cache_dir=False)
    for i, (g_wnid, p_wnid) in enumerate(pairs):
        g, p, lcs = synset_of(g_wnid), synset_of(p_wnid), synset_of(wnid_of_offset(values.lcs[i]))
        common = set(g.common_hypernyms(p))
        assert lcs in common
        assert not any(lcs in ref.ancestors(other) for other in common), (g, p, lcs)  # nothing shared lies lower


# --------------------------------------------------------------------------- disk cache
@pytest.fixture
def counted_builds(monkeypatch):
    """Real matrix builds, recorded; each ``fresh(cache_dir)`` call starts without the in-memory copy."""
    builds, real_build = [], similarity.build_label_space_matrices

    def counting_build(name, **kwargs):
        builds.append(name)
        return real_build(name, **kwargs)

    monkeypatch.setattr(similarity, "build_label_space_matrices", counting_build)

    def fresh(cache_dir):
        similarity.clear_memory_caches(include_information_content=False)
        return label_space_matrices("imagenet-a", cache_dir=cache_dir)  # 200 classes: quick

    yield builds, fresh
    similarity.clear_memory_caches(include_information_content=False)


def test_matrices_are_cached_as_plain_npz_and_reloaded(tmp_path, counted_builds):
    builds, fresh = counted_builds
    first = fresh(tmp_path)
    files = list(tmp_path.glob("similarity-imagenet-a-v*.npz"))
    assert len(files) == 1 and builds == ["imagenet-a"]
    with np.load(files[0], allow_pickle=False) as data:  # no pickled object arrays inside
        assert data["wup"].shape == (200, 200) and all(data[k].dtype != object for k in data.files)
    second = fresh(tmp_path)
    assert builds == ["imagenet-a"], "the second call must load from disk"
    for name in ("path", "lch", "wup", "lin", "severity", "relation", "lcs"):
        np.testing.assert_array_equal(getattr(first.values, name), getattr(second.values, name))


@pytest.mark.parametrize("change", ["code_version", "wordnet", "damaged"])
def test_matrix_cache_is_invalidated(tmp_path, monkeypatch, counted_builds, change):
    builds, fresh = counted_builds
    fresh(tmp_path)
    if change == "code_version":
        monkeypatch.setattr(similarity, "SIMILARITY_CODE_VERSION", similarity.SIMILARITY_CODE_VERSION + 1)
    elif change == "wordnet":
        monkeypatch.setattr(similarity, "wordnet_fingerprint", lambda: "0123456789abcdef")
    else:
        for f in tmp_path.glob("similarity-*.npz"):
            f.write_bytes(f.read_bytes()[:1000])
    rebuilt = fresh(tmp_path)
    assert builds == ["imagenet-a", "imagenet-a"]
    assert rebuilt.values.wup.shape == (200, 200)
    assert len(list(tmp_path.glob("similarity-imagenet-a-*.npz"))) == (1 if change == "damaged" else 2)


def test_wordnet_fingerprint_is_stable_hex():
    fp = similarity.wordnet_fingerprint()
    assert len(fp) == 16 and int(fp, 16) >= 0 and fp == similarity.wordnet_fingerprint()


def test_similarities_rejects_unknown_wnid():
    with pytest.raises((KeyError, ValueError)):
        similarities(["n99999999"], [IN1K[0]], cache_dir=False)


# --------------------------------------------------------------------------- the common ancestor (issue 22 item 15)
LCS_PAIRS = _random_pairs(IN1K, 400, seed=15) + _random_pairs(IN21K, 100, seed=16) + EDGE_PAIRS + _by_name(
    ("tench.n.01", "chihuahua.n.03"), ("chihuahua.n.03", "tabby.n.01"), ("wall_clock.n.01", "petri_dish.n.01"),
    ("peacock.n.02", "quail.n.02"))


def test_the_common_ancestor_is_nltks_lowest_common_hypernym(nltk_noun_depth):
    """One rule for the common ancestor everywhere: lcs = NLTK's lowest_common_hypernyms (largest
    max_depth), ties to the smallest synset name; severity = hypernym steps from the truth up to it."""
    values = similarities([g for g, _ in LCS_PAIRS], [p for _, p in LCS_PAIRS], cache_dir=False)
    bad = []
    for i, (g_wnid, p_wnid) in enumerate(LCS_PAIRS):
        g, p = synset_of(g_wnid), synset_of(p_wnid)
        want = ref.lowest_common_subsumer(g, p)
        got = wnid_of_offset(int(values.lcs[i]))
        if got != wnid_of(want) or int(values.severity[i]) != ref.upward_distances(g)[want]:
            bad.append(f"{g.name()} vs {p.name()}: {synset_of(got).name()}, {int(values.severity[i])} != "
                       f"{want.name()}, {ref.upward_distances(g)[want]}")
    assert not bad, f"{len(bad)} mismatches: " + "; ".join(bad[:5])


def test_the_common_ancestor_is_the_lowest_not_the_top_of_a_shortest_path():
    wn = get_wordnet()
    tench, chihuahua = wnid_of(wn.synset("tench.n.01")), wnid_of(wn.synset("chihuahua.n.03"))
    record = similarity.pair_similarity(tench, chihuahua)
    # The shortest path (14 edges) climbs over animal.n.01 (Chihuahua is a domestic animal); the two
    # meet lower, at vertebrate.n.01, 8 steps above the tench: that is their common ancestor.
    assert synset_of(record["lcs"]).name() == "vertebrate.n.01" and record["severity"] == 8
    assert record["path_distance"] == wn.synset("tench.n.01").shortest_path_distance(wn.synset("chihuahua.n.03"))
