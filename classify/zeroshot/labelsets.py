"""The label set of a zero-shot run (issue 14): which WordNet nouns the text tower chooses from.

A zero-shot (language-augmented) model has no fixed output list: its classes are whatever prompts
it is given. The label set is chosen per run with ``--label-set``:

==================  ==========================================================  ====================
spec                classes                                                     recorded as
==================  ==========================================================  ====================
``run`` (default)   the run's classes (``run.json``'s wnids)                    ``file:<sha12>``
``imagenet-1k`` …   a label space of ``core.labels`` (its own order)            ``imagenet-1k`` …
``sense:cat.n.01``  the sense and its whole hyponym closure (instance hyponyms  ``sense:cat.n.01``
                    included), WordNet nouns outside every ImageNet list too
``file:<sha12>``    a set stored before                                         ``file:<sha12>``
``FILE``            one wnid a line (first field; blank lines and ``#``         ``file:<sha12>``
                    comments skipped; ``python -m explain hyponyms`` output
                    works as it is)
==================  ==========================================================  ====================

``LabelSet.name`` is what predictions record in their ``label_space`` column, and
``core.labels.get_label_space(name)`` reads it back (names, definitions, ``in_label_space``), so
every metric, page and export works unchanged. A run's classes and a FILE are stored once under
``$WILDLENS_HOME/cache/labelsets/<sha12>.txt`` (``core.labels.store_label_set``), named by the
hash of the sorted wnids: the same classes give the same name whatever their order in the file.
Class order: a label space keeps its own order (the model-output order of a classifier); every
other set is sorted by wnid.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.errors import OptionError, WildLensError
from core.labels import (FILE_PREFIX, SENSE_PREFIX, QueryError, canonical_label_space, get_label_space,
                         is_label_set, label_space_names, store_label_set)
from core.wordgraph import noun_of as synset_of  # NLTK's nouns as arrays (core.wordgraph)
from core.wordnet import is_wnid

RUN = "run"
DEFAULT_LABEL_SET = RUN


class LabelSetError(OptionError):
    """A --label-set that cannot be resolved; the message says what to pass instead."""


@dataclass(frozen=True)
class LabelSet:
    """The classes of a zero-shot run, in output order; ``name`` is the recorded label space."""

    name: str
    wnids: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.wnids)


def _usage(spec: str) -> str:
    return (f"Unknown label set {spec!r}: use run (the run's classes), a label space ({', '.join(label_space_names())}), "
            "sense:SYNSET (e.g. sense:cat.n.01), file:SHA (stored before) or a file of wnids, one a line.")


def _run_wnids(run) -> tuple[str, tuple[str, ...]]:
    from core.runstore import RunStore

    if run is None:
        raise LabelSetError("--label-set run needs a run (--run RUN_ID); with --images pass another label set, "
                            "e.g. --label-set imagenet-1k or --label-set sense:cat.n.01.")
    if isinstance(run, str):
        run = RunStore().open_run(run)
    wnids = list(run.info.wnids)
    if not wnids:  # an older run without its class list: the classes it has images for
        try:
            manifest = run.usable_images()
        except (WildLensError, OSError):
            manifest = None
        if manifest is not None and "wnid" in manifest.columns:
            wnids = sorted(set(manifest["wnid"].dropna().astype(str)))
    if not wnids:
        raise LabelSetError(f"Run {run.run_id} has no classes yet (no wnids in run.json, no images); "
                            "pass another label set, e.g. --label-set imagenet-1k.")
    return run.run_id, tuple(wnids)


def read_wnid_file(path: Path | str) -> tuple[str, ...]:
    """The wnids of a file, one a line: the first field of each line (so ``wnid<TAB>name`` lines
    work); blank lines and lines starting with '#' are skipped; duplicates count once. A line
    whose first field is not a WordNet 3.0 noun wnid is an error naming its line number."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark is no part of the first wnid
    except UnicodeDecodeError:
        raise LabelSetError(f"{path} is not a text file; a label-set file has one wnid a line.") from None
    except OSError as exc:
        raise LabelSetError(f"Cannot read the label-set file {path}: {exc.strerror or exc}.") from None
    wnids: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        wnid = fields[0]
        if not is_wnid(wnid):
            raise LabelSetError(f"{path}, line {number}: {wnid!r} is not a wnid ('n' and 8 digits, e.g. n02123045); "
                                "a label-set file has one wnid a line ('python -m explain hyponyms SENSE' prints them).")
        try:
            synset_of(wnid)
        except KeyError:
            raise LabelSetError(f"{path}, line {number}: {wnid} is not a noun of WordNet 3.0; remove the line or fix "
                                "the id.") from None
        wnids[wnid] = None
    if not wnids:
        raise LabelSetError(f"{path} has no wnid; a label-set file has one wnid a line, e.g. n02123045.")
    return tuple(sorted(wnids))


def resolve_label_set(spec: str, run=None) -> LabelSet:
    """The label set a ``--label-set`` value names (see the module docstring); ``run`` (a
    ``core.runstore.Run`` or a run id) is needed for ``run``. Stores a run's classes or a FILE
    in the cache. Raises ``LabelSetError`` (one line, with the fix)."""
    text = (spec or DEFAULT_LABEL_SET).strip()
    if text.lower() == RUN:
        _, wnids = _run_wnids(run)
        name = store_label_set(wnids)
        return LabelSet(name, get_label_space(name).wnids)
    if is_label_set(text):
        try:
            space = get_label_space(canonical_label_space(text))
        except QueryError as exc:
            raise LabelSetError(str(exc)) from None
        return LabelSet(space.name, space.wnids)
    try:
        space = get_label_space(canonical_label_space(text))
        return LabelSet(space.name, space.wnids)
    except QueryError:
        pass
    path = Path(text).expanduser()
    if path.is_file():
        wnids = read_wnid_file(path)
        name = store_label_set(wnids)
        return LabelSet(name, get_label_space(name).wnids)
    if path.exists():
        raise LabelSetError(f"{text} is not a regular file; a label-set file has one wnid a line.")
    raise LabelSetError(_usage(text))


__all__ = ["DEFAULT_LABEL_SET", "FILE_PREFIX", "RUN", "SENSE_PREFIX", "LabelSet", "LabelSetError", "read_wnid_file",
           "resolve_label_set"]
