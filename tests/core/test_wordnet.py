import json
import os
import subprocess
import sys
import textwrap

import pytest

from core.wordnet import (NOUN_MAX_DEPTH, VENDORED_ZIP, get_wordnet, is_wnid, synset_of, wnid_of,
                          wordnet_source)
from tests.conftest import ROOT


def test_loads_wordnet_3_0():
    wn = get_wordnet()
    assert wn.get_version() == "3.0"
    assert wordnet_source().version == "3.0"


def test_spec_reference_values_equal_nltk():
    wn = get_wordnet()
    dog, cat = wn.synset("dog.n.01"), wn.synset("cat.n.01")
    assert dog.path_similarity(cat) == pytest.approx(0.2, abs=1e-15)
    assert dog.lch_similarity(cat) == pytest.approx(2.0281482472922856, abs=1e-12)
    assert dog.wup_similarity(cat) == pytest.approx(0.8571428571428571, abs=1e-12)


@pytest.mark.xdist_group("wordnet-nouns")  # NLTK's parse and depths of every noun, shared with test_wordgraph's
def test_noun_max_depth_constant_matches_nltk():
    # LCH's D: NLTK computes it by walking every noun; our constant must agree.
    assert get_wordnet()._compute_max_depth("n", False) == NOUN_MAX_DEPTH


@pytest.mark.parametrize("wnid,name", [("n02123045", "tabby.n.01"), ("n02121620", "cat.n.01"),
                                       ("n00001740", "entity.n.01"), ("n03710637", "maillot.n.02")])
def test_wnid_round_trip(wnid, name):
    synset = synset_of(wnid)
    assert synset.name() == name
    assert wnid_of(synset) == wnid


@pytest.mark.parametrize("bad", ["n99999999", "n02123046", "x02123045", "n0212", "cat"])
def test_bad_wnid_is_a_clear_error(bad):
    with pytest.raises((KeyError, ValueError), match="wnid|noun synset"):
        synset_of(bad)


def test_is_wnid():
    assert is_wnid("n02123045") and not is_wnid("n0212304a") and not is_wnid("cat.n.01")


def test_vendored_zip_is_small_and_licensed():
    import zipfile

    assert VENDORED_ZIP.stat().st_size < 12_000_000
    names = zipfile.ZipFile(VENDORED_ZIP).namelist()
    assert "wordnet/LICENSE" in names and "wordnet/lexnames" in names
    lexnames = zipfile.ZipFile(VENDORED_ZIP).read("wordnet/lexnames").decode().splitlines()
    assert len(lexnames) == 45 and lexnames[3] == "03\tnoun.Tops\t1"
    assert (VENDORED_ZIP.parent.parent / "WORDNET_LICENSE").read_text().startswith("This software and database")


# The build script and the corpus it builds: tests/core/test_wordnet_build.py.


# A sitecustomize that makes every network attempt fail loudly and leaves a trace.
_NO_NETWORK = textwrap.dedent("""
    import socket, os
    def _refuse(*args, **kwargs):
        with open(os.environ["NETWORK_TRACE"], "a") as fh:
            fh.write(repr(args[:2]) + "\\n")
        raise OSError("network access attempted in an offline test")
    socket.socket.connect = _refuse
    socket.socket.connect_ex = _refuse
    socket.getaddrinfo = _refuse
    socket.create_connection = _refuse
""")


def test_loads_offline_with_empty_nltk_data(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_NO_NETWORK)
    empty = tmp_path / "empty_nltk_data"
    empty.mkdir()
    trace = tmp_path / "trace.txt"
    env = {**os.environ, "NLTK_DATA": str(empty), "HOME": str(tmp_path), "NETWORK_TRACE": str(trace),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    code = ("import json; from core.wordnet import get_wordnet, wordnet_source; wn = get_wordnet(); "
            "s = wn.synset('cat.n.01'); src = wordnet_source(); "
            "print(json.dumps({'kind': src.kind, 'version': src.version, 'cat': s.offset(), "
            "'sim': wn.synset('dog.n.01').path_similarity(s)}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["version"] == "3.0" and result["cat"] == 2121620 and result["sim"] == 0.2
    assert result["kind"] in ("vendored", "user")  # 'user' only if a system-wide corpus exists
    if not any(os.path.exists(p) for p in ("/usr/share/nltk_data", "/usr/local/share/nltk_data",
                                           "/usr/lib/nltk_data", "/usr/local/lib/nltk_data")):
        assert result["kind"] == "vendored"
    assert not trace.exists(), f"network was attempted: {trace.read_text()}"
