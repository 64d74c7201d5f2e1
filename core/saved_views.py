"""Named views of a run (issue 24 item 5): a page and its filters under a name the analyst chose,
listed in the dashboard's sidebar and shareable as a URL (the page with the same parameters).

Stored per run in ``runs/<run_id>/views.json`` ({"views": [{"name", "page", "params", "saved"}]}),
rewritten atomically under the run's lock for it (two tabs saving at once both keep their view);
a file that cannot be read is reported, never overwritten (saving then says what to do).
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .errors import WildLensError
from .runstore import Run, now_iso, waiting_lock, write_json_atomic

VIEWS_FILE = "views.json"
LOCK_NAME = ".wildlens-views.lock"
MAX_NAME_CHARS = 60
MAX_VIEWS = 200
MAX_PARAMS_BYTES = 16_000  # a view's parameters as JSON (a lasso of 500 images fits)
MAX_FILE_BYTES = 4 << 20


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
        out[key] = values
    if len(json.dumps(out)) > MAX_PARAMS_BYTES:
        raise SavedViewError(f"this view's filters are longer than {MAX_PARAMS_BYTES:,} characters; pick fewer images.")
    return out


def read_views(run: Run) -> tuple[list[SavedView], str]:
    """(the run's saved views in the order saved, a one-line problem or ''): a damaged file gives no
    views and says so."""
    path = _path(run)
    try:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return [], f"{path} is not a regular file; move it away to save views."
        if path.exists() and path.stat().st_size > MAX_FILE_BYTES:
            return [], f"{path} is larger than {MAX_FILE_BYTES >> 20} MiB; move it away to save views."
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"views": []}
    except (OSError, ValueError) as exc:
        return [], f"{path} cannot be read ({str(exc)[:80]}); move it away to save views."
    views = []
    for item in data.get("views", []) if isinstance(data, dict) else []:
        try:
            views.append(SavedView(_clean_name(item["name"]), str(item["page"]), _clean_params(item["params"]),
                                   str(item.get("saved", ""))))
        except (KeyError, TypeError, SavedViewError):
            continue
    return views, ""


def save_view(run: Run, name: str, page: str, params: dict) -> SavedView:
    """Save (or replace, by name) a view of ``run``; SavedViewError when it cannot be."""
    from .locking import RunGone, run_presence_lock

    view = SavedView(_clean_name(name), page, _clean_params(params), now_iso())
    try:
        with run_presence_lock(run.path, f"Run {run.run_id} is gone; nothing was saved."), \
                waiting_lock(run.path, LOCK_NAME):
            views, problem = read_views(run)
            if problem:
                raise SavedViewError(problem)
            views = [v for v in views if v.name != view.name] + [view]
            if len(views) > MAX_VIEWS:
                raise SavedViewError(f"run {run.run_id} has {MAX_VIEWS} saved views already; remove one first.")
            write_json_atomic(_path(run), {"views": [v.__dict__ for v in views]})
    except RunGone as exc:
        raise SavedViewError(str(exc)) from None
    except OSError as exc:
        raise SavedViewError(f"cannot save the view in {run.path} ({exc.strerror or exc}).") from None
    return view


def remove_view(run: Run, name: str) -> bool:
    """Remove the view named ``name`` (what the analyst asked for); False when there is none."""
    from .locking import RunGone, run_presence_lock

    try:
        with run_presence_lock(run.path, f"Run {run.run_id} is gone."), waiting_lock(run.path, LOCK_NAME):
            views, problem = read_views(run)
            if problem:
                raise SavedViewError(problem)
            kept = [v for v in views if v.name != name]
            if len(kept) == len(views):
                return False
            write_json_atomic(_path(run), {"views": [v.__dict__ for v in kept]})
    except RunGone as exc:
        raise SavedViewError(str(exc)) from None
    except OSError as exc:
        raise SavedViewError(f"cannot change the saved views in {run.path} ({exc.strerror or exc}).") from None
    return True
