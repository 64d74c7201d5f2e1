"""A run's stored image for a page: its file, or a caption saying why there is none (uploaded
predictions have no image files; a name that climbs out of the run is refused by the run store)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.runstore import Run, StoreError

from pages.text import escape_markdown


def stored_picture(run: Run, image: str) -> Path | None:
    """The path of ``image``'s file in ``run``, or None after a caption naming what is missing."""
    try:
        path = run.image_path(image)
        found = path is not None and path.is_file()
    except (StoreError, OSError):  # OSError: a name longer than the file system allows (ENAMETOOLONG)
        found = False
    if not found:
        st.caption(f"No image file: {escape_markdown(image)}")
        return None
    return path
