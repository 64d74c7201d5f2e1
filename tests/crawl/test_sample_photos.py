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
