"""WordNet 3.0 through NLTK's own reader, offline, and the wnid <-> synset mapping.

Where the corpus comes from, in order:

1. the user's own NLTK ``wordnet`` corpus, when NLTK finds one on its data path and it is
   WordNet 3.0 (ImageNet's wnids are WordNet 3.0 offsets; another version would map them to
   the wrong concepts, so it is skipped with a warning);
2. else the copy vendored in this package (``core/data/nltk_data/corpora/wordnet.zip``,
   built by ``scripts/build_wordnet.py`` from Princeton's database files).

Nothing here ever downloads. The reader is NLTK's ``WordNetCorpusReader`` with one change:
``map_wn`` is skipped. NLTK builds, at every start, a map from WordNet 3.0 sense keys to the
loaded version's synsets for its multilingual (OMW) functions; it compares the version string
with the corpus *name* ("3.0" != "wordnet"), so it always re-reads ``index.sense`` twice, which
is about three quarters of the cold start. With WordNet 3.0 loaded that map is the identity, and
WildLens does not use OMW, so skipping it changes no synset, lemma or similarity value.

Queries (senses of a word, the classes under a sense) do not come here: :mod:`core.wordgraph`
answers them from flat arrays read off this reader once, without importing NLTK.
"""
from __future__ import annotations

import functools
import os
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import WildLensError

VENDORED_NLTK_DATA = Path(__file__).resolve().parent / "data" / "nltk_data"
VENDORED_ZIP = VENDORED_NLTK_DATA / "corpora" / "wordnet.zip"
WORDNET_VERSION = "3.0"
# NLTK's LCH depth for WordNet 3.0 nouns: max_depth() over all noun synsets (19) with no
# simulated root, since every noun already descends from entity.n.01.
NOUN_MAX_DEPTH = 19

_lock = threading.Lock()


class WordNetUnavailable(WildLensError, RuntimeError):
    """WordNet 3.0 could not be loaded; the message says what to do."""


@dataclass(frozen=True)
class WordNetSource:
    """Which corpus was loaded: ``kind`` is ``"user"`` or ``"vendored"``."""

    kind: str
    location: str
    version: str


def _reader_class():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class OfflineWordNetReader(WordNetCorpusReader):
        """NLTK's reader minus the OMW version map (see the module docstring)."""

        def map_wn(self, version="wordnet"):
            return None

    return OfflineWordNetReader


def _find_user_corpus():
    """The user's own NLTK wordnet corpus (directory or zip), or None. Never downloads."""
    import nltk.data

    for name in ("corpora/wordnet", "corpora/wordnet.zip/wordnet/"):
        try:
            return nltk.data.find(name, paths=[p for p in nltk.data.path if Path(p) != VENDORED_NLTK_DATA])
        except LookupError:
            continue
        except (OSError, ValueError):  # unreadable or refused path: fall back to ours
            continue
    return None


def _find_vendored_corpus():
    import nltk.data

    if not VENDORED_ZIP.is_file():
        raise WordNetUnavailable(
            f"The vendored WordNet 3.0 corpus is missing ({VENDORED_ZIP}). Restore it with "
            "'git checkout -- core/data' or rebuild it with 'python scripts/build_wordnet.py'."
        )
    # NLTK only reads corpora from directories on its data path.
    if str(VENDORED_NLTK_DATA) not in nltk.data.path:
        nltk.data.path.append(str(VENDORED_NLTK_DATA))
    try:
        return nltk.data.find("corpora/wordnet.zip/wordnet/", paths=[str(VENDORED_NLTK_DATA)])
    except LookupError as exc:
        raise WordNetUnavailable(
            f"NLTK refused to read the vendored WordNet at {VENDORED_ZIP}. NLTK only reads data "
            "folders that are private to their owner: run 'chmod -R go-w core/data'. "
            f"NLTK said: {str(exc).strip()[:400]}"
        ) from exc


def _open(pointer):
    with warnings.catch_warnings():
        # "The multilingual functions are not available": expected, OMW is not used.
        warnings.simplefilter("ignore", UserWarning)
        return _reader_class()(pointer, None)


@functools.lru_cache(maxsize=1)
def _load():
    user = None if os.environ.get("WILDLENS_VENDORED_WORDNET") == "1" else _find_user_corpus()
    if user is not None:
        reader = _open(user)
        version = reader.get_version()
        if version == WORDNET_VERSION:
            return reader, WordNetSource("user", str(user), version)
        warnings.warn(
            f"Your NLTK 'wordnet' corpus at {user} is WordNet {version}; ImageNet needs "
            f"WordNet {WORDNET_VERSION}, so WildLens uses its vendored copy instead.",
            stacklevel=3,
        )
    reader = _open(_find_vendored_corpus())
    version = reader.get_version()
    if version != WORDNET_VERSION:
        raise WordNetUnavailable(f"The vendored corpus reports WordNet {version}, expected {WORDNET_VERSION}.")
    return reader, WordNetSource("vendored", str(VENDORED_ZIP), version)


def get_wordnet():
    """NLTK's WordNet 3.0 reader, loaded once per process (thread-safe)."""
    with _lock:
        return _load()[0]


def wordnet_source() -> WordNetSource:
    with _lock:
        return _load()[1]


def wnid_of(synset) -> str:
    """ImageNet's id for a noun synset: 'n' + the 8-digit WordNet 3.0 offset."""
    if synset.pos() != "n":
        raise ValueError(f"{synset.name()} is not a noun synset; ImageNet classes are nouns.")
    return f"n{synset.offset():08d}"


_WNID_RE = re.compile(r"n[0-9]{8}")  # ASCII digits only: str.isdigit() and \d take '٠٢١٢٣٠٤٥' too


def is_wnid(text: str) -> bool:
    """'n' and 8 ASCII digits. Other digits are refused: int('٠٢١٢٣٠٤٥') is 2123045, so such a
    string named tabby's synset while being another string, a second class beside n02123045."""
    return isinstance(text, str) and _WNID_RE.fullmatch(text) is not None


def synset_of(wnid: str):
    """The noun synset of a wnid, by offset (never by name: names are ambiguous)."""
    if not is_wnid(wnid):
        raise ValueError(f"{wnid!r} is not a wnid: expected 'n' followed by 8 digits, e.g. n02123045.")
    reader = get_wordnet()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns and returns None for a bad offset
        try:
            synset = reader.synset_from_pos_and_offset("n", int(wnid[1:]))
        except Exception:  # an offset past the end of data.noun
            synset = None
    if synset is None:
        raise KeyError(f"{wnid} is not a noun synset of WordNet {WORDNET_VERSION}.")
    return synset


def vendored_corpus_bytes() -> int:
    return VENDORED_ZIP.stat().st_size if VENDORED_ZIP.exists() else 0
