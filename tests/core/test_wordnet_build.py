"""The vendored WordNet 3.0 corpus is Princeton's, and scripts/build_wordnet.py rebuilds it where
core/wordnet.py reads it (issue 22, items 22 and 23).

Most tests need nothing but the repository; the full rebuild runs only where Debian's source
package and grind are present (``make wordnet`` fetches them) and says so when skipped.
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core.wordnet import VENDORED_NLTK_DATA, VENDORED_ZIP

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_wordnet.py"


def _script():
    spec = importlib.util.spec_from_file_location("build_wordnet", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _member(name: str) -> bytes:
    with zipfile.ZipFile(VENDORED_ZIP) as zf:
        return zf.read(f"wordnet/{name}")


@pytest.fixture(scope="module")
def vendored():
    """NLTK's reader over the vendored zip itself (not a user's corpus that get_wordnet may prefer)."""
    from core.wordnet import _find_vendored_corpus, _open

    return _open(_find_vendored_corpus())


# ---------------------------------------------------------------- item 22: where the script writes
def test_build_script_writes_the_zip_and_licence_that_core_reads():
    build = _script()
    assert build.OUT == VENDORED_ZIP
    assert build.LICENSE_OUT == VENDORED_NLTK_DATA / "WORDNET_LICENSE"


def test_build_script_zip_writer_reproduces_the_vendored_zip_byte_for_byte():
    """The zip layout half of the build, without Debian: re-packing the vendored members gives
    the vendored file, and its README is the script's."""
    build = _script()
    with zipfile.ZipFile(VENDORED_ZIP) as zf:
        members = {info.filename.removeprefix("wordnet/"): zf.read(info) for info in zf.infolist() if not info.is_dir()}
    assert members["README"] == build.README.encode()
    assert members["LICENSE"] == (VENDORED_NLTK_DATA / "WORDNET_LICENSE").read_bytes()
    assert build.zip_bytes(members) == VENDORED_ZIP.read_bytes()


def test_the_source_extract_writes_only_the_wanted_regular_files(tmp_path, monkeypatch):
    """Only dict/ files and lexnames.5 come out of the source tarball, as plain files (a link, a file
    named '.' or '..', or a path outside the pattern is left in it), on every Python 3.11 (tarfile's extraction filters
    came in 3.11.4; Debian's packaged 3.11.2 has none)."""
    import io
    import tarfile

    orig = tmp_path / "wordnet.orig.tar.gz"
    with tarfile.open(orig, "w:gz") as tf:
        def add(name: str, data: bytes = b"", **kind):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o444
            for key, value in kind.items():
                setattr(info, key, value)
            tf.addfile(info, io.BytesIO(data) if data else None)

        add("WordNet-3.0/dict/data.noun", b"nouns")
        add("WordNet-3.0/dict/dbfiles/noun.animal", b"animals")
        add("WordNet-3.0/doc/man/lexnames.5", b"lexnames")
        add("WordNet-3.0/dict/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add("WordNet-3.0/src/grind.c", b"int main;")
        for name in ("WordNet-3.0/dict/..", "WordNet-3.0/dict/.", "WordNet-3.0/dict/dbfiles/..", "WordNet-3.0/dict/dbfiles"):
            add(name, b"a file named after a folder")  # (it crashed the extract: IsADirectoryError, FileExistsError)
    for name in ("extractall", "extract"):  # whose filter= argument Python 3.11.2 lacks
        monkeypatch.setattr(tarfile.TarFile, name, lambda *a, **k: pytest.fail("tarfile extracted it"))
    top = _script()._extract(orig, tmp_path / "out")
    found = {str(p.relative_to(top)): p.read_bytes() for p in top.rglob("*") if p.is_file() or p.is_symlink()}
    assert found == {"dict/data.noun": b"nouns", "dict/dbfiles/noun.animal": b"animals",
                     "doc/man/lexnames.5": b"lexnames"}


def test_build_script_without_its_inputs_says_what_to_fetch(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--check", "--source", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and "apt-get source" in out.stderr


# ---------------------------------------------------------------- item 23: Princeton's files
def test_verbs_are_princetons_restrain_and_inhibit(vendored):
    """Debian's verb.social patch moved inhibit.v.04 under suppress and shifted 9,026 verbs by
    18 bytes; Princeton's (and NLTK's) restrain.v.01 is 02422663, with inhibit.v.04 below it
    (NLTK's own wordnet.doctest prints that list)."""
    restrain = vendored.synset("restrain.v.01")
    inhibit = vendored.synset("inhibit.v.04")
    assert restrain.offset() == 2422663 and inhibit.offset() == 2423762
    assert sorted(s.name() for s in restrain.hyponyms()) == ["confine.v.03", "control.v.02", "hold.v.36", "inhibit.v.04"]
    # WordNet 3.0's one hypernym cycle, as released (NLTK's code guards against it).
    assert inhibit.hypernyms() == [restrain] and restrain.hypernyms() == [inhibit]
    assert vendored.synset_from_pos_and_offset("v", 2422663) == restrain
    assert vendored.lemma_from_key("restrain%2:41:01::").synset() == restrain  # index.sense agrees
    line = _member("data.verb")[2422663:].split(b"\n", 1)[0]
    assert line.startswith(b"02422663 41 v 04 restrain 1 keep 0 keep_back 0 hold_back 0 007 @ 02423762 v 0000")


def test_adjectives_are_princetons_gloss_unpatched(vendored):
    """Debian's adj.all patch added a space to laid.s.01's gloss, moving 8,946 adjectives by one byte."""
    laid = vendored.synset_from_pos_and_offset("s", 1681307)
    assert laid.name() == "laid.s.01"
    assert laid.definition().startswith("set down according to a plan:")
    assert b'plan:"a carefully laid table' in _member("data.adj")
    assert vendored.synset("planned.a.01").offset() == 1797148  # after laid: Debian's is 01797149


def _noun_graph_digest(data_noun: bytes) -> str:
    """sha256 of data.noun with the targets of pointers to verbs and adjectives masked: every noun
    offset, lemma, gloss and noun-to-noun pointer (the hypernym graph ImageNet's wnids live in)."""
    digest = hashlib.sha256()
    for line in data_noun.split(b"\n"):
        head, sep, gloss = line.partition(b" | ")
        digest.update(re.sub(rb"\d{8} ([vasr]) ([0-9a-f]{4})", rb"-------- \1 \2", head) + sep + gloss + b"\n")
    return digest.hexdigest()


def test_nouns_did_not_move():
    """Hashes taken before the rebuild (from Debian's files, the previous vendored corpus):
    index.noun is byte-identical, and data.noun is the same but for the 8-digit targets of its
    pointers to verbs and adjectives, which follow those files' offsets."""
    assert hashlib.sha256(_member("index.noun")).hexdigest() == \
        "a490d99d93d017bf4822fe2f0ffa51fd73911ce271dc7535fade21f8814b5a04"
    data_noun = _member("data.noun")
    assert len(data_noun) == 15300280
    assert _noun_graph_digest(data_noun) == "3e483a71c526073ef6c8b7d753826e1980850254286b9c5ed550cec0a8bffd92"
    # Princeton's data.noun itself (its derivation pointers to abstract.v.?? etc.):
    assert hashlib.sha256(data_noun).hexdigest() == "489f145e0f68877c0be5bd0eb4117adaaac52f38f6204eb8d85dbe2158b614cc"


def test_synset_counts_are_wordnet_3_0s():
    """wnstats(7) of WordNet 3.0: 82,115 noun, 13,767 verb, 18,156 adjective, 3,621 adverb synsets."""
    counts = {}
    for pos in ("noun", "verb", "adj", "adv"):
        counts[pos] = sum(1 for line in _member(f"data.{pos}").split(b"\n") if line[:1].isdigit())
    assert counts == {"noun": 82115, "verb": 13767, "adj": 18156, "adv": 3621}


# ---------------------------------------------------------------- the full rebuild, where possible
def _rebuild_inputs():
    build = _script()
    if shutil.which("grind") is None:
        pytest.skip("grind is missing (apt-get install wordnet-grind); `make wordnet` installs it")
    try:
        build.find_inputs(build.SOURCE_DIR)
    except build.BuildError as exc:
        pytest.skip(f"no WordNet source package: {exc}")
    return build


def test_build_script_rebuilds_the_vendored_zip_when_inputs_exist():
    _rebuild_inputs()
    out = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("identical"), out.stdout + out.stderr


def test_build_with_debians_patches_is_debians_wordnet_base():
    """The same pipeline with Debian's two database patches gives Debian's installed files byte
    for byte: what differs from Princeton's is those patches and nothing else."""
    build = _rebuild_inputs()
    installed = Path("/usr/share/wordnet")
    if not (installed / "data.verb").exists() or not (installed / "index.sense").exists():
        pytest.skip("Debian's wordnet-base and wordnet-sense-index are not installed")
    members = build.build_members(debian=True)
    for name in build.GRIND_FILES + build.DICT_FILES:
        assert members[name] == (installed / name).read_bytes(), name
