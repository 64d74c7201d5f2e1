"""ImageNet-CoG's similarity to the seen classes, eligible unseen concepts and levels
(explain.concepts), against a direct Lin computation and hand-checked WordNet cases."""
from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from core.labels import get_label_space
from core.wordnet import get_wordnet, synset_of, wnid_of
from explain.concepts import (CONCEPT_COLUMNS, LEVEL_SIZE, ConceptsError, concept_levels, level_bounds,
                              read_image_counts)
from tests.conftest import ROOT
from tests.explain import nltk_reference as ref


@pytest.fixture(scope="module")
def in1k(tmp_path_factory):
    return concept_levels("imagenet-1k", cache_dir=tmp_path_factory.mktemp("cache"))


def test_every_in21k_concept_has_a_row_with_the_documented_columns(in1k):
    table = in1k.table
    assert list(table.columns) == list(CONCEPT_COLUMNS)
    assert tuple(table["wnid"]) == get_label_space("imagenet-21k").wnids
    assert table["sim_to_seen"].between(0, 1).all()


def test_the_spec_count_of_eligible_concepts(in1k):
    # SPEC: S = IN-1k and no image-count filter leaves 14,248 of Google's 21,843.
    counts = in1k.counts()
    assert counts["concepts"] == 21_843 and counts["eligible"] == 14_248
    assert counts["removed_seen"] == 999  # teddy bear (n04399382) is not in IN-21k


def test_sim_to_seen_equals_the_direct_maximum_over_every_seen_class(in1k):
    seen = [synset_of(w) for w in get_label_space("imagenet-1k").wnids]
    table = in1k.table.set_index("wnid")
    rng = random.Random(7)
    wnids = rng.sample(list(table.index), 4) + ["n02123478", "n02126317"]  # + Angora, leopard cat
    for wnid in wnids:
        concept = synset_of(wnid)
        values = [ref.lin(s, concept) for s in seen]
        best = max(v for v in values if not math.isnan(v))
        assert abs(table.loc[wnid, "sim_to_seen"] - best) <= 1e-12, wnid
        nearest = synset_of(table.loc[wnid, "nearest_seen_wnid"])
        assert abs(ref.lin(nearest, concept) - best) <= 1e-12, wnid


def _wnid(name: str) -> str:
    return wnid_of(get_wordnet().synset(name))


@pytest.mark.parametrize("name, reason", [
    ("tabby.n.01", "seen"),
    ("cat.n.01", "ancestor_of_seen"),  # CoG's own example: "tiger cat" is in IN-1k
    ("feline.n.01", "ancestor_of_seen"),
    ("angora.n.04", ""),  # an IN-21k-only cat: eligible
    ("leopard_cat.n.01", ""),
])
def test_hand_checked_reasons(in1k, name, reason):
    row = in1k.table.set_index("wnid").loc[_wnid(name)]
    assert row["reason"] == reason and bool(row["eligible"]) == (reason == "")


def test_person_subtree_and_non_leaves(in1k):
    table = in1k.table.set_index("wnid")
    person = get_wordnet().synset("person.n.01")
    in21k = set(table.index)
    under_person = [wnid_of(s) for s in person.closure(lambda s: s.hyponyms() + s.instance_hyponyms())]
    checked = [w for w in under_person if w in in21k][:50]
    assert checked and all(table.loc[w, "reason"] in ("person", "seen", "ancestor_of_seen") for w in checked)
    # A concept removed as a non-leaf has an eligible concept under it; an eligible one has none.
    eligible = set(table.index[table["eligible"]])
    non_leaves = list(table.index[table["reason"] == "has_eligible_descendant"])
    for wnid in random.Random(3).sample(non_leaves, 10):
        below = {wnid_of(s) for s in synset_of(wnid).closure(lambda s: s.hyponyms() + s.instance_hyponyms())}
        assert below & eligible, wnid
    for wnid in random.Random(4).sample(sorted(eligible), 10):
        below = {wnid_of(s) for s in synset_of(wnid).closure(lambda s: s.hyponyms() + s.instance_hyponyms())}
        assert not below & eligible, wnid


def test_levels_are_monotone_and_of_the_stated_size(in1k):
    table = in1k.table
    levels = [table[table["level"] == k] for k in range(1, 6)]
    assert [len(level) for level in levels] == [LEVEL_SIZE] * 5
    for closer, farther in zip(levels, levels[1:]):
        assert closer["sim_to_seen"].min() >= farther["sim_to_seen"].max()
    assert levels[0]["rank"].min() == 1 and levels[-1]["rank"].max() == in1k.counts()["eligible"]
    ranked = table[table["eligible"]].sort_values("rank")
    assert ranked["sim_to_seen"].is_monotonic_decreasing


@pytest.mark.parametrize("n", [14_248, 5_146, 5_000, 4_999, 7])
def test_level_bounds(n):
    bounds = level_bounds(n)
    assert len(bounds) == 5 and bounds[0][0] == 0 and bounds[-1][1] == n
    if n >= 5000:
        assert all(stop - start == LEVEL_SIZE for start, stop in bounds)
        gaps = [b[0] - a[1] for a, b in zip(bounds, bounds[1:])]
        assert max(gaps) - min(gaps) <= 1 and min(gaps) >= 0
    else:  # five equal parts, no gaps
        assert all(b[0] == a[1] for a, b in zip(bounds, bounds[1:]))
        assert max(s - a for a, s in bounds) - min(s - a for a, s in bounds) <= 1


def test_image_counts_apply_cogs_782_rule(tmp_path):
    counts = {_wnid("angora.n.04"): 1300, _wnid("leopard_cat.n.01"): 781}
    path = tmp_path / "counts.csv"
    pd.DataFrame({"wnid": list(counts), "count": list(counts.values())}).to_csv(path, index=False)
    result = concept_levels("imagenet-1k", read_image_counts(path), cache_dir=tmp_path / "cache")
    table = result.table.set_index("wnid")
    assert result.image_counts_used and result.counts()["eligible"] == 1
    assert bool(table.loc[_wnid("angora.n.04"), "eligible"])
    assert table.loc[_wnid("leopard_cat.n.01"), "reason"] == "few_images"
    assert table.loc[_wnid("cat.n.01"), "reason"] == "ancestor_of_seen"  # earlier rules first


def test_a_bad_image_count_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConceptsError, match="no such file"):
        read_image_counts(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("wnid,count\nn02123478,many\n")
    with pytest.raises(ConceptsError, match="line 2: 'many' is not an image count"):
        read_image_counts(bad)
    (tmp_path / "cols.csv").write_text("id,n\nx,1\n")
    with pytest.raises(ConceptsError, match="expected the columns wnid and count"):
        read_image_counts(tmp_path / "cols.csv")


def test_the_cache_returns_the_same_table(tmp_path, in1k):
    first = concept_levels("imagenet-1k", cache_dir=tmp_path)
    assert list(tmp_path.glob("concepts-imagenet-1k-*.parquet"))
    again = concept_levels("imagenet-1k", cache_dir=tmp_path)
    pd.testing.assert_frame_equal(first.table, again.table)
    pd.testing.assert_frame_equal(first.table, in1k.table)


def test_cli_writes_concepts_csv_and_prints_the_counts(tmp_path):
    out = subprocess.run([sys.executable, "-m", "explain", "concepts", "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "eligible unseen: 14,248" in out.stdout and "image counts: not applied" in out.stdout
    assert out.stdout.count("1,000 concepts") == 5
    table = pd.read_csv(tmp_path / "concepts.csv", dtype={"wnid": str})
    assert {"wnid", "name", "eligible", "reason", "sim_to_seen", "nearest_seen_wnid", "level"} <= set(table.columns)
    assert len(table) == 21_843 and np.isclose(table["sim_to_seen"].max(), 1.0)
    missing = subprocess.run([sys.executable, "-m", "explain", "concepts", "--out", str(tmp_path), "--image-counts",
                              str(tmp_path / "nope.csv")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and missing.stderr.startswith("error: --image-counts") and \
        missing.stderr.count("\n") == 1


def test_why_no_level_names_each_reason_and_stays_quiet_when_a_class_has_one():
    """Issue 22 item 21: the levels switch says why no class of a run has a level."""
    from explain.concepts import why_no_level

    table = pd.DataFrame({"wnid": ["n1", "n2", "n3", "n4", "n5", "n6"],
                          "reason": ["seen", "seen", "ancestor_of_seen", "person", "", ""],
                          "level": pd.array([None, None, None, None, None, 3], dtype="Int64")})
    assert why_no_level(["n1", "n2"], table) == (
        "None of this run's 2 classes has an ImageNet-CoG level: all 2 are classes of imagenet-1k. CoG's levels "
        "rank only the ImageNet-21k concepts unseen by imagenet-1k (not its classes or their ancestors, no people, "
        "leaves only).")
    mixed = why_no_level(["n1", "n2", "n3", "n4", "n5", "n0"], table)
    assert mixed.startswith("None of this run's 6 classes has an ImageNet-CoG level: 2 are classes of imagenet-1k, "
                            "1 is an ancestor of a class of imagenet-1k, 1 lies under person.n.01, 1 falls in a gap "
                            "between two levels, 1 is not an ImageNet-21k concept. ")
    assert why_no_level(["n3"], table.set_index("wnid")).startswith(
        "This run's one class has no ImageNet-CoG level: it is an ancestor of a class of imagenet-1k. ")
    assert why_no_level(["n1", "n6"], table) == ""  # n6 has a level
    assert why_no_level([], table) == ""


def test_why_no_level_on_the_real_table(in1k):
    from explain.concepts import why_no_level

    sample = ["n02123045", "n03763968", "n03877845", "n04485082", "n07920052"]  # the sample run's IN-1k classes
    assert "all 5 are classes of imagenet-1k" in why_no_level(sample, in1k.table)
    assert why_no_level(sample + ["n01514752"], in1k.table) == ""  # gamecock: level 1
