"""The embedded sample's views (crawl.sample_photos): encoded once per process, written like crawled images."""
import hashlib
import io

from PIL import Image

from core.runstore import RunInfo, RunStore
from crawl import sample_photos
from crawl.sample_photos import SAMPLE_PHOTOS, VIEWS, write_sample_images


def test_two_sample_runs_hold_the_same_files_and_the_views_are_encoded_once(tmp_path, monkeypatch):
    sample_photos._encoded_views.cache_clear()
    encoded = []
    real = sample_photos._png_bytes
    monkeypatch.setattr(sample_photos, "_png_bytes", lambda im: encoded.append(im.size) or real(im))
    store = RunStore(tmp_path)
    manifests = [write_sample_images(store.create_run(RunInfo(run_id=f"s{i}", label_space="imagenet-1k")))
                 for i in range(2)]
    assert len(encoded) == len(SAMPLE_PHOTOS) * len(VIEWS), "each view encoded once for both runs"
    first, second = manifests
    assert first.drop(columns="fetched_at").equals(second.drop(columns="fetched_at"))
    for run_id, manifest in zip(("s0", "s1"), manifests):
        run = store.open_run(run_id)
        for row in manifest.itertuples():
            data = (run.images_dir / row.file).read_bytes()
            assert hashlib.sha256(data).hexdigest() == row.sha256 and row.file.endswith(f"{row.sha256[:16]}.png")
            assert Image.open(io.BytesIO(data)).size == (row.width, row.height) and row.bytes == len(data)


def test_a_file_already_at_a_views_name_is_kept_when_it_is_the_view_and_refused_otherwise(tmp_path):
    """A second call rewrites nothing; other bytes, a link or a folder where a view goes are refused in
    one line naming the path, and left as they are (other bytes were recorded under the view's hash)."""
    import os

    import pytest

    from core.tables import StoreError

    store = RunStore(tmp_path / "store")
    run = store.create_run(RunInfo(run_id="s", label_space="imagenet-1k"))
    manifest = write_sample_images(run)
    target = run.images_dir / manifest["file"].iloc[0]
    stamp = target.stat().st_mtime_ns
    write_sample_images(run)
    assert target.stat().st_mtime_ns == stamp, "the view is not written again"
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"a person's own file")
    for kind in ("other bytes", "a link", "a folder"):
        target.unlink() if not target.is_dir() else target.rmdir()
        if kind == "other bytes":
            target.write_bytes(b"a person's own file")
        elif kind == "a link":
            os.symlink(mine, target)
        else:
            target.mkdir()
        with pytest.raises(StoreError) as caught:
            write_sample_images(run)
        assert str(caught.value).startswith(str(target)) and "move it out" in str(caught.value)
        assert "\n" not in str(caught.value)
        assert target.is_dir() if kind == "a folder" else target.read_bytes() == b"a person's own file"
    assert mine.read_bytes() == b"a person's own file"


def test_a_link_or_a_file_on_the_way_to_the_views_is_refused_and_nothing_is_written_through_it(tmp_path):
    """A hostile check: a class folder (or the images folder) that is a link took the sample views into the
    folder it points to, a person's; a file there gave a raw errno naming a temporary file."""
    import os

    import pytest

    from core.tables import StoreError

    store = RunStore(tmp_path / "store")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    for case in ("class folder link", "images folder link", "class folder file"):
        run = store.create_run(RunInfo(run_id=case.replace(" ", "-"), label_space="imagenet-1k"))
        wnid = SAMPLE_PHOTOS[0].wnid
        if case == "images folder link":
            run.images_dir.rmdir() if run.images_dir.is_dir() else None
            os.symlink(theirs, run.images_dir)
            where = run.images_dir
        else:
            run.images_dir.mkdir(parents=True, exist_ok=True)
            where = run.images_dir / wnid
            os.symlink(theirs, where) if case == "class folder link" else where.write_bytes(b"mine")
        with pytest.raises(StoreError) as caught:
            write_sample_images(run)
        assert str(caught.value).startswith(str(where)) and "move it out of the run" in str(caught.value)
        assert not list(theirs.iterdir()), "nothing written through the link"
