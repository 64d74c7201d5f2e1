"""pages.pictures: a run's stored image for a page, or a caption saying why there is none; grid thumbnails."""
import pytest


def test_a_stored_picture_with_a_name_too_long_for_the_file_system_is_a_caption(tmp_path):
    """pages.pictures.stored_picture: a name over 255 bytes (ENAMETOOLONG from the file system) is 'No
    image file', not an error that stops the grid (hostile-input campaign)."""
    from core.runstore import RunInfo, RunStore
    from pages.pictures import stored_picture

    run = RunStore(tmp_path).create_run(RunInfo(run_id="r", label_space="imagenet-1k"))
    run.images_dir.mkdir(parents=True, exist_ok=True)
    assert stored_picture(run, "x" * 300) is None


def test_grid_thumbnails_are_made_together_kept_per_file_and_say_what_is_missing(tmp_path, monkeypatch):
    """pages.pictures.grid_thumbnails: each image with a file gets letterboxed's bytes (a damaged one None),
    an image without a file is left out (the card says so), a replaced file is made again, one made before
    is not; the store keeps its most recently used and makes a grid's misses on several threads."""
    import io
    import itertools
    import os
    import threading

    from PIL import Image

    import core.machine as machine
    import pages.pictures as pictures
    from core.runstore import RunInfo, RunStore

    run = RunStore(tmp_path).create_run(RunInfo(run_id="r", label_space="imagenet-1k"))
    (run.images_dir / "c").mkdir(parents=True)
    for name, colour in (("a", (200, 0, 0)), ("b", (0, 200, 0))):
        Image.new("RGB", (64, 48), colour).save(run.images_dir / "c" / f"{name}.jpg")
    (run.images_dir / "c" / "bad.jpg").write_bytes(b"not a jpeg")
    store = pictures.ThumbnailStore(limit=3)
    monkeypatch.setattr(pictures, "_thumbnail_store", lambda: store)
    made = []
    real = pictures.letterboxed
    together = threading.Barrier(2, timeout=10)  # the grid's first two thumbnails are made at the same time

    calls = itertools.count()

    def counted(path, box):
        made.append(os.path.basename(path))
        if next(calls) < 2:
            together.wait()
        return real(path, box)

    monkeypatch.setattr(pictures, "letterboxed", counted)
    monkeypatch.setattr(machine, "available_cores", lambda: 2)
    got = pictures.grid_thumbnails(run, ["c/a.jpg", "c/b.jpg", "c/bad.jpg", "c/gone.jpg", "c/a.jpg"], (32, 24))
    assert set(got) == {"c/a.jpg", "c/b.jpg", "c/bad.jpg"} and got["c/bad.jpg"] is None
    assert Image.open(io.BytesIO(got["c/a.jpg"])).size == (32, 24)
    assert sorted(made) == ["a.jpg", "b.jpg", "bad.jpg"], "each made once (two of them at once: the barrier)"
    made.clear()
    again = pictures.grid_thumbnails(run, ["c/a.jpg", "c/b.jpg"], (32, 24))
    assert again == {k: got[k] for k in ("c/a.jpg", "c/b.jpg")} and made == [], "kept"
    Image.new("RGB", (64, 48), (0, 0, 200)).save(run.images_dir / "c" / "a.jpg")
    os.utime(run.images_dir / "c" / "a.jpg", ns=(1, 1))  # another modification time: another file
    replaced = pictures.grid_thumbnails(run, ["c/a.jpg"], (32, 24))
    assert made == ["a.jpg"] and replaced["c/a.jpg"] != got["c/a.jpg"]
    # cp -p: another picture put in place under the same modification time (a leftover of the last review)
    made.clear()
    Image.new("RGB", (48, 64), (0, 200, 0)).save(run.images_dir / "c" / "a.jpg")
    os.utime(run.images_dir / "c" / "a.jpg", ns=(1, 1))
    green = pictures.grid_thumbnails(run, ["c/a.jpg"], (32, 24))
    assert made == ["a.jpg"] and green["c/a.jpg"] != replaced["c/a.jpg"], "a new picture under the old mtime"
    assert len(store._items) == 3, "the least recently used left"


def test_a_thumbnail_that_fails_is_not_kept_and_the_rest_are_and_no_thread_is_needed(tmp_path, monkeypatch):
    """A review: one picture's failure (out of memory, an encoder's error) raised through the pool and threw
    away every thumbnail made beside it; without a thread to be had the grid raised. Now that one is None
    and tried again next time, the others are kept, and the grid is made one after the other."""
    import threading

    import core.machine as machine
    import pages.pictures as pictures

    def make(key):
        if key == "bad":
            raise MemoryError
        return key.encode()

    store = pictures.ThumbnailStore()
    assert store.many(["a", "bad", "b"], make) == {"a": b"a", "bad": None, "b": b"b"}
    assert set(store._items) == {"a", "b"}, "the failure is not kept: the next grid tries it again"

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    monkeypatch.setattr(machine, "available_cores", lambda: 2)
    assert store.many(["c", "d"], make) == {"c": b"c", "d": b"d"}


def test_thumbnails_read_files_as_inference_does_and_refuse_what_it_refuses(tmp_path, monkeypatch):
    """letterboxed reads by core.imageio.read_image_file (a review: a 300 MB file was read whole, a FIFO
    put in a picture's place blocked the grid) and core.imageio refuses a picture over MAX_IMAGE_PIXELS by
    its size, not by a warnings filter (two thumbnails at once undid each other's filter: a hostile check);
    a NUL in a name is no file, not an error that stops the grid."""
    import os

    from PIL import Image

    import core.imageio as imageio
    import pages.pictures as pictures
    from core.runstore import RunInfo, RunStore

    picture = tmp_path / "p.png"
    Image.new("RGB", (20, 20), (1, 2, 3)).save(picture)
    assert pictures.letterboxed(str(picture), (8, 6)) is not None
    monkeypatch.setattr(imageio, "MAX_IMAGE_PIXELS", 399)  # Pillow's own limit unchanged: the size check alone
    assert pictures.letterboxed(str(picture), (8, 6)) is None
    with pytest.raises(imageio.ImageLoadError, match="decompression bomb refused"):
        imageio.load_rgb(picture)
    monkeypatch.undo()
    os.mkfifo(tmp_path / "pipe.png")
    assert pictures.letterboxed(str(tmp_path / "pipe.png"), (8, 6)) is None, "at once, not waiting for a writer"
    monkeypatch.setattr(imageio, "MAX_IMAGE_BYTES", 10)
    assert pictures.letterboxed(str(picture), (8, 6)) is None, "over the size limit: not read"
    run = RunStore(tmp_path / "home").create_run(RunInfo(run_id="r", label_space="imagenet-1k"))
    run.images_dir.mkdir(parents=True, exist_ok=True)
    assert pictures.picture_path(run, "a\0b") is None


def test_only_pages_pictures_turns_an_image_into_a_path():
    """Every page draws a stored image through pages.pictures (read as inference reads files, a damaged one
    said): the Images and Probes pages drew theirs with st.image(path) after the other grids had moved, and
    a damaged file stopped both pages. A page that calls Run.image_path itself is caught here."""
    import re

    from tests.conftest import ROOT

    scripts = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]
    callers = [p.name for p in scripts if p.name != "pictures.py" and re.search(r"\bimage_path\(", p.read_text())]
    assert callers == []
