"""Named views of a run (issue 24 item 5): a page and its filters under a name the analyst chose,
listed in the dashboard's sidebar and shareable as a URL (the page with the same parameters).

Stored per run in ``runs/<run_id>/views.json`` ({"views": [{"name", "page", "params", "saved"}]}),
rewritten atomically under the run's lock for it (two tabs saving at once both keep their view);
a file that cannot be read is reported, never overwritten (saving then says what to do).
"""
from __future__ import annotations

import json
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import WildLensError
from .runstore import Run, now_iso, waiting_lock, write_json_atomic

VIEWS_FILE = "views.json"
LOCK_NAME = ".wildlens-views.lock"
MAX_NAME_CHARS = 60
MAX_VIEWS = 200
MAX_PARAMS_BYTES = 64_000  # a view's parameters as JSON: a lasso of 500 images (about 17,000) fits
MAX_FILE_BYTES = 4 << 20
# URL parameters a page link may not set (Streamlit reserves them, any case, and raises StreamlitAPIException for a
# link naming one: a views file holding one broke the sidebar on every page; a hostile check): left out of a view.
RESERVED_PARAMS = frozenset({"embed", "embed_options"})


def reserved(key: str) -> bool:
    return key.lower() in RESERVED_PARAMS


class SavedViewError(WildLensError, ValueError):
    """A view that cannot be saved, or a views file that cannot be read; one line."""


@dataclass(frozen=True)
class SavedView:
    name: str
    page: str  # the page's url path: 'browse', 'image', ...
    params: dict[str, list[str]]
    saved: str = ""


def _path(run: Run) -> Path:
    return Path(run.path) / VIEWS_FILE


def _clean_name(name) -> str:
    text = " ".join(str(name).split()) if isinstance(name, str) else ""
    if not text or len(text) > MAX_NAME_CHARS or any(unicodedata.category(c).startswith("C") for c in text):
        raise SavedViewError(f"a view's name is one line of 1 to {MAX_NAME_CHARS} printable characters; "
                             f"{str(name)[:20]!r} is not.")
    return text


def _clean_params(params) -> dict[str, list[str]]:
    if not isinstance(params, dict):
        raise SavedViewError("a view's parameters are a mapping of names to values.")
    out = {}
    for key, values in params.items():
        values = [values] if isinstance(values, str) else list(values)
        if not isinstance(key, str) or not all(isinstance(v, str) for v in values):
            raise SavedViewError("a view's parameters are text.")
        if not reserved(key):
            out[key] = values
    if len(json.dumps(out)) > MAX_PARAMS_BYTES:
        raise SavedViewError(f"this view's filters are longer than {MAX_PARAMS_BYTES:,} characters; pick fewer images.")
    return out


def read_views(run: Run) -> tuple[list[SavedView], str]:
    """(the run's saved views in the order saved, a one-line problem or ''): a damaged file gives no
    views and says so."""
    from .tables import read_stored_bytes

    path = _path(run)
    if not path.exists() and not path.is_symlink():
        return [], ""
    raw = read_stored_bytes(path, MAX_FILE_BYTES)  # a link, a FIFO or a giant file: never read
    if raw is None:
        return [], f"{path} is not a regular file of at most {MAX_FILE_BYTES >> 20} MiB; move it away to save views."
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return [], f"{path} cannot be read ({str(exc)[:80]}); move it away to save views."
    items = data.get("views") if isinstance(data, dict) else None
    if not isinstance(items, list) or set(data) - {"views"}:
        return [], f"{path} is not a views file this WildLens wrote; move it away to save views."
    views = []
    for item in items:
        try:
            views.append(SavedView(_clean_name(item["name"]), str(item["page"]), _clean_params(item["params"]),
                                   str(item.get("saved", ""))))
        except (KeyError, TypeError, AttributeError, SavedViewError):
            # Never dropped silently: a save would rewrite the file without it (hostile campaign).
            return views, (f"{path} holds a view this WildLens cannot read ({str(item)[:40]!r}); fix or move the file "
                           "away to save views.")
    return views, ""


@contextmanager
def _changing(run: Run):
    """The run's saved views, read under its lock and presence (a deleted run is never made again)
    for one change: yields the list; what the block leaves in it is written atomically."""
    from .locking import RunGone, run_presence_lock
    from .tables import StoreError

    try:
        with run_presence_lock(run.path, f"Run {run.run_id} is gone; nothing was saved."), \
                waiting_lock(run.path, LOCK_NAME, required=True):
            views, problem = read_views(run)
            if problem:
                raise SavedViewError(problem)
            before = list(views)
            yield views
            if views != before:
                write_json_atomic(_path(run), {"views": [v.__dict__ for v in views]})
    except (RunGone, StoreError) as exc:
        raise SavedViewError(str(exc)) from None
    except OSError as exc:
        raise SavedViewError(f"cannot change the saved views in {run.path} ({exc.strerror or exc}).") from None


def save_view(run: Run, name: str, page: str, params: dict) -> SavedView:
    """Save (or replace, by name) a view of ``run``; SavedViewError when it cannot be."""
    view = SavedView(_clean_name(name), page, _clean_params(params), now_iso())
    with _changing(run) as views:
        kept = [v for v in views if v.name != view.name]
        if len(kept) + 1 > MAX_VIEWS:
            raise SavedViewError(f"run {run.run_id} has {MAX_VIEWS} saved views already; remove one first.")
        views[:] = kept + [view]
    return view


def remove_view(run: Run, name: str) -> bool:
    """Remove the view named ``name`` (what the analyst asked for); False when there is none."""
    with _changing(run) as views:
        kept = [v for v in views if v.name != name]
        removed = len(kept) < len(views)
        views[:] = kept
    return removed
