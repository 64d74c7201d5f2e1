"""A run's stored image for a page: its file, or a caption saying why there is none (uploaded
predictions have no image files; a name that climbs out of the run is refused by the run store);
and grid thumbnails, made for a whole grid at once on the machine's cores."""
from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterable

import streamlit as st

from core.machine import threaded_map
from core.runstore import Run, StoreError

from pages.text import escape_markdown


def picture_path(run: Run, image: str) -> Path | None:
    """The path of ``image``'s file in ``run``, or None where there is none (nothing shown)."""
    try:
        path = run.image_path(image)
        found = path is not None and path.is_file()
    except (StoreError, OSError, ValueError):  # ENAMETOOLONG; ValueError: a NUL in the name
        found = False
    return path if found else None


def file_version(path: Path) -> tuple[int, int, int, int]:
    """What tells one version of a file from another for a cache: modification and change times, size and
    inode. Why not the modification time alone: ``cp -p`` (or ``touch -r``) puts a new picture in place under
    the old one's mtime, and its old thumbnail was shown; the change time cannot be set back. Raises OSError."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino


def stored_picture(run: Run, image: str) -> Path | None:
    """The path of ``image``'s file in ``run``, or None after a caption naming what is missing."""
    path = picture_path(run, image)
    if path is None:
        say_no_file(image)
    return path


def say_no_file(image: str) -> None:
    """The caption of an image without a file (gone, never stored, or not a regular file)."""
    st.caption(f"No image file: {escape_markdown(image)}")


def letterboxed(path: str, box: tuple[int, int]) -> bytes | None:
    """The whole image at ``path`` letterboxed into ``box`` (JPEG bytes), so a grid's rows line up; None
    when it cannot be read or decoded: core.imageio's checks, the file's as inference reads it (a regular
    file of at most MAX_IMAGE_BYTES, a FIFO opened without waiting) and the picture's (bombs refused)."""
    import io

    from PIL import ImageOps

    from core.imageio import ImageLoadError, load_rgb, read_image_file

    try:
        picture = ImageOps.pad(load_rgb(read_image_file(path)), box, color=(240, 242, 246))
    except ImageLoadError:
        return None
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return out.getvalue()


class ThumbnailStore:
    """(path, :func:`file_version`, box) -> :func:`letterboxed` bytes (None: undecodable), the ``limit`` most recently
    used kept; safe to share between sessions. :meth:`many` makes a grid's missing thumbnails on up to
    MAX_WORKERS of the cores this process may use (Pillow decodes, resizes and encodes without the GIL). Why: 24 photographs
    of 512 x 600 took 0.13 s one after the other and 0.06 s on this machine's two cores, and Browse draws
    two grids (48 thumbnails) on its first load."""

    def __init__(self, limit: int = 1024):
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def many(self, keys: Iterable[tuple], make: Callable[[tuple], bytes | None]) -> dict:
        """key -> ``make(key)`` for ``keys``, the missing ones made together. A key whose ``make`` raised is
        None here and not kept (the next grid tries it again); the others are kept whatever one raised."""
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            found = {k: self._items[k] for k in wanted if k in self._items}
            for k in found:
                self._items.move_to_end(k)
        missing = [k for k in wanted if k not in found]

        def attempt(key):
            try:
                return True, make(key)
            except Exception:  # noqa: BLE001 - one picture's failure (out of memory, an encoder's error)
                return False, None

        made = threaded_map(attempt, missing, limit=MAX_WORKERS, name="wildlens-thumbnail")
        with self._lock:
            for k, (ok, value) in zip(missing, made):
                if ok:
                    self._items[k] = value
                    self._items.move_to_end(k)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        found.update((k, value) for k, (_, value) in zip(missing, made))
        return found


MAX_WORKERS = 4  # pictures decoded at once: each may hold up to MAX_IMAGE_BYTES and MAX_IMAGE_PIXELS


@st.cache_resource(show_spinner=False)
def _thumbnail_store() -> ThumbnailStore:
    return ThumbnailStore()  # cleared with Streamlit's other caches


def grid_thumbnails(run: Run, images: Iterable[str], box: tuple[int, int]) -> dict[str, bytes | None]:
    """image -> its thumbnail (:func:`letterboxed`; None: undecodable) for the ``images`` that have a file,
    made together (:class:`ThumbnailStore`) and kept per file and :func:`file_version` (a replaced file is
    read again). Images without a file are left out: :func:`stored_picture` says so where each is drawn."""
    keys = {}
    for image in dict.fromkeys(map(str, images)):
        path = picture_path(run, image)
        if path is not None:
            try:
                keys[image] = (str(path), file_version(path), tuple(box))
            except OSError:  # gone meanwhile: drawn as missing
                continue
    made = _thumbnail_store().many(keys.values(), lambda key: letterboxed(key[0], key[2]))
    return {image: made[key] for image, key in keys.items()}


THUMBNAIL = (320, 240)  # pixels of a grid image (4:3, the whole picture letterboxed): Browse's and Confusions'


def show_thumbnail(run: Run, image: str, thumbnails: dict, caption: str | None = None) -> None:
    """``image``'s thumbnail from :func:`grid_thumbnails`' ``thumbnails`` (``caption`` under it, Markdown: escape
    outside text), "Cannot decode …" for a file that does not decode, or :func:`stored_picture`'s note where
    the run has no file for it (uploaded predictions)."""
    thumbnail = thumbnails.get(image)
    if thumbnail is not None:
        st.image(thumbnail, width="stretch", caption=caption)
        return
    if image not in thumbnails:
        stored_picture(run, image)  # says why there is none
    else:
        st.caption(f"Cannot decode {escape_markdown(image)}")
    if caption:  # what the card says of the image (a prediction) stays (a review: it went with the picture)
        st.caption(caption)

