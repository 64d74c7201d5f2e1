"""A run's stored image for a page: its file, or a caption saying why there is none (uploaded
predictions have no image files; a name that climbs out of the run is refused by the run store);
and grid thumbnails, made for a whole grid at once on the machine's cores."""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterable

import streamlit as st

from core.runstore import Run, StoreError

from pages.text import escape_markdown


def picture_path(run: Run, image: str) -> Path | None:
    """The path of ``image``'s file in ``run``, or None where there is none (nothing shown)."""
    try:
        path = run.image_path(image)
        found = path is not None and path.is_file()
    except (StoreError, OSError):  # OSError: a name longer than the file system allows (ENAMETOOLONG)
        found = False
    return path if found else None


def stored_picture(run: Run, image: str) -> Path | None:
    """The path of ``image``'s file in ``run``, or None after a caption naming what is missing."""
    path = picture_path(run, image)
    if path is None:
        st.caption(f"No image file: {escape_markdown(image)}")
    return path


def letterboxed(path: str, box: tuple[int, int]) -> bytes | None:
    """The whole image at ``path`` letterboxed into ``box`` (JPEG bytes), so a grid's rows line up; None
    when it cannot be decoded (core.imageio's checks)."""
    import io

    from PIL import ImageOps

    from core.imageio import ImageLoadError, load_rgb

    try:
        picture = ImageOps.pad(load_rgb(path), box, color=(240, 242, 246))
    except ImageLoadError:
        return None
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return out.getvalue()


class ThumbnailStore:
    """(path, mtime_ns, box) -> :func:`letterboxed` bytes (None: undecodable), the ``limit`` most recently
    used kept; safe to share between sessions. :meth:`many` makes a grid's missing thumbnails on up to
    ``os.cpu_count()`` threads (Pillow decodes, resizes and encodes without the GIL). Why: 24 photographs
    of 512 x 600 took 0.13 s one after the other and 0.06 s on this machine's two cores, and Browse draws
    two grids (48 thumbnails) on its first load."""

    def __init__(self, limit: int = 1024):
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def many(self, keys: Iterable[tuple], make: Callable[[tuple], bytes | None]) -> dict:
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            found = {k: self._items[k] for k in wanted if k in self._items}
            for k in found:
                self._items.move_to_end(k)
        missing = [k for k in wanted if k not in found]
        workers = min(len(missing), os.cpu_count() or 1)
        if workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wildlens-thumbnail") as pool:
                made = list(pool.map(make, missing))
        else:
            made = [make(k) for k in missing]
        with self._lock:
            for k, value in zip(missing, made):
                self._items[k] = value
                self._items.move_to_end(k)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        found.update(zip(missing, made))
        return found


@st.cache_resource(show_spinner=False)
def _thumbnail_store() -> ThumbnailStore:
    return ThumbnailStore()  # cleared with Streamlit's other caches


def grid_thumbnails(run: Run, images: Iterable[str], box: tuple[int, int]) -> dict[str, bytes | None]:
    """image -> its thumbnail (:func:`letterboxed`; None: undecodable) for the ``images`` that have a file,
    made together (:class:`ThumbnailStore`) and kept per file and modification time (a replaced file is
    read again). Images without a file are left out: :func:`stored_picture` says so where each is drawn."""
    keys = {}
    for image in dict.fromkeys(map(str, images)):
        path = picture_path(run, image)
        if path is not None:
            try:
                keys[image] = (str(path), path.stat().st_mtime_ns, tuple(box))
            except OSError:  # gone meanwhile: drawn as missing
                continue
    made = _thumbnail_store().many(keys.values(), lambda key: letterboxed(key[0], key[2]))
    return {image: made[key] for image, key in keys.items()}
