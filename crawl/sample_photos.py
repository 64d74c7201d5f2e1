"""The embedded sample: photographs that installed Python packages ship, labelled by hand.

WildLens must open on real results on a machine without internet. Five photographs that
scikit-image, scikit-learn and matplotlib install show an ImageNet-1k class clearly enough to
label; each is labelled with the wnid of its main subject (decided from the picture, not from
any model's output). Every photograph is used in six views (the whole picture, a mirror image
and four crops), so that a model's answers vary a little and the tables have something to show.
It is a small sample, never a benchmark, and the dashboard says so.

The views are written as PNG files named by content hash, exactly like crawled images, with a
manifest row each whose ``source`` is 'sample' and ``original_name`` says which package file
and which view it came from.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from PIL import Image, ImageOps

from core.runstore import Run, now_iso
from core.userfile import file_sha256

from core.imageio import load_rgb


@dataclass(frozen=True)
class SamplePhoto:
    package: str  # the importable package that ships the file
    relpath: str  # path inside that package
    wnid: str  # ImageNet-1k class of the main subject
    subject: str  # why this label: what the picture shows


SAMPLE_PHOTOS = (
    SamplePhoto("skimage", "data/chelsea.png", "n02123045", "Chelsea, a tabby cat"),
    SamplePhoto("skimage", "data/coffee.png", "n07920052", "a cup of espresso on a saucer"),
    SamplePhoto("skimage", "data/camera.png", "n04485082", "a cameraman behind a camera on a tripod (greyscale)"),
    SamplePhoto("sklearn", "datasets/images/china.jpg", "n03877845",
                "the Tower of Buddhist Incense in Beijing's Summer Palace"),
    SamplePhoto("matplotlib", "mpl-data/sample_data/grace_hopper.jpg", "n03763968",
                "Rear Admiral Grace Hopper in US Navy uniform"),
)

# (name, function) pairs; crops keep the subject, which all five photographs centre.
VIEWS = (
    ("whole", lambda im: im),
    ("mirror", ImageOps.mirror),
    ("centre 80%", lambda im: _crop(im, 0.8, 0.5, 0.5)),
    ("centre 60%", lambda im: _crop(im, 0.6, 0.5, 0.5)),
    ("left 80%", lambda im: _crop(im, 0.8, 0.0, 0.5)),
    ("right 80%", lambda im: _crop(im, 0.8, 1.0, 0.5)),
)


def _crop(im: Image.Image, scale: float, fx: float, fy: float) -> Image.Image:
    """A crop of ``scale`` times each side, its top-left corner at fraction (fx, fy) of the slack."""
    w, h = im.size
    cw, ch = round(w * scale), round(h * scale)
    left, top = round((w - cw) * fx), round((h - ch) * fy)
    return im.crop((left, top, left + cw, top + ch))


def photo_path(photo: SamplePhoto) -> Path:
    spec = importlib.util.find_spec(photo.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {photo.package!r} is not installed (pip install -r requirements.txt)")
    path = Path(list(spec.submodule_search_locations)[0]) / photo.relpath
    if not path.exists():
        raise FileNotFoundError(f"{photo.package} no longer ships {photo.relpath}")
    return path


def _png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


@functools.cache
def _encoded_views() -> tuple[tuple[SamplePhoto, str, bytes, str, int, int], ...]:
    """Each (photo, view name, PNG bytes, sha256, width, height), encoded once per process. Why: the
    30 PNG encodings cost 1.3 CPU-seconds, paid by every sample run a process writes (the test suite
    writes dozens); the photographs are files of installed packages, fixed while the process lives.
    The bytes (8.2 MB) stay for the process: a server writes the sample once, beside its models' hundreds."""
    views = []
    for photo in SAMPLE_PHOTOS:
        original = load_rgb(photo_path(photo))
        for view_name, view in VIEWS:
            image = view(original)
            data = _png_bytes(image)
            views.append((photo, view_name, data, hashlib.sha256(data).hexdigest(), *image.size))
    return tuple(views)


def write_sample_images(run: Run) -> pd.DataFrame:
    """Write the views into the run's images folder and its manifest; return the manifest.
    Idempotent: files already present with the view's bytes are not rewritten. Anything else at a
    view's name (other bytes, a link, a folder) is refused, and left as it is: it was kept and
    recorded under the view's hash before (a hostile check)."""
    from core.runstore import write_bytes_atomic
    from core.tables import StoreError

    def refuse(path: Path, what: str) -> StoreError:
        return StoreError(f"{path} is {what} where the sample run's images go; move it out of the run and start again.")

    rows, checked = [], set()
    for photo, view_name, data, sha, width, height in _encoded_views():
        file = f"{photo.wnid}/{sha[:16]}.png"
        target = run.images_dir / file
        # A link or a file on the way (the images folder, the class folder) is refused as at the view's own name:
        # a linked class folder took the views into a folder of the person's (a hostile check). Each folder once.
        for folder in (run.images_dir, target.parent):
            if folder not in checked and (folder.is_symlink() or (folder.exists() and not folder.is_dir())):
                raise refuse(folder, "a link" if folder.is_symlink() else "not a folder")
            checked.add(folder)
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise refuse(target, "a link" if target.is_symlink() else "not a file")
        if not target.exists():
            write_bytes_atomic(target, data)
        elif target.stat().st_size != len(data) or file_sha256(target) != sha:  # (the size first: a 3 GB file was read whole)
            raise StoreError(f"{target} holds other bytes than the sample view it is named after ({photo.relpath} "
                             f"[{view_name}]); move it out of the run's images folder and start again.")
        rows.append({
            "wnid": photo.wnid, "file": file, "sha256": sha, "width": width, "height": height,
            "format": "PNG", "mode": "RGB", "bytes": len(data), "source": "sample",
            "search_term": photo.subject, "original_name": f"{photo.package}/{photo.relpath} [{view_name}]",
            "fetched_at": now_iso(), "status": "accepted", "excluded": False,
        })
    manifest = pd.DataFrame(rows)
    run.write_manifest(manifest)
    return run.read_manifest()
