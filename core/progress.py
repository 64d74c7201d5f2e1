"""One progress protocol for every long stage (crawl, import, inference, metrics).

A stage calls ``progress(ProgressEvent(...))``; the terminal passes ``TerminalProgress()``
(a tqdm bar), the dashboard passes a callback that updates ``st.progress``. Stages never
import either: they just call the function they were given, or nothing when it is None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class ProgressEvent:
    stage: str  # 'crawl', 'import', 'inference', ...
    done: int  # units finished so far within this stage (and task)
    total: int  # units expected; 0 when unknown
    task: str = ""  # what the units belong to: a model id, a wnid, ...
    message: str = ""  # one human line: 'tabby: 12/20 accepted'

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


ProgressCallback = Callable[[ProgressEvent], None]


def report(progress: Optional[ProgressCallback], *args, **kwargs) -> None:
    """Call ``progress`` with a ProgressEvent, or do nothing when it is None."""
    if progress is not None:
        progress(ProgressEvent(*args, **kwargs))


class TerminalProgress:
    """A tqdm bar per (stage, task), for command lines."""

    def __init__(self, **tqdm_kwargs):
        self._bars = {}
        self._kwargs = {"dynamic_ncols": True, **tqdm_kwargs}

    def __call__(self, event: ProgressEvent) -> None:
        from tqdm import tqdm

        key = (event.stage, event.task)
        bar = self._bars.get(key)
        if bar is None:
            desc = f"{event.stage} {event.task}".strip()
            bar = self._bars[key] = tqdm(total=event.total or None, desc=desc, **self._kwargs)
        if event.total and bar.total != event.total:
            bar.total = event.total
        bar.n = event.done
        if event.message:
            bar.set_postfix_str(event.message[:60], refresh=False)
        bar.refresh()
        if event.total and event.done >= event.total:
            bar.close()
            del self._bars[key]

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
