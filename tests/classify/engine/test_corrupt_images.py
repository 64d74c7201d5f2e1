"""Issue 22 item 7, classify's side: one corrupt image is that image's failed row, never a crash.

``classify --images`` crashed on every re-run on a GIF whose second frame is cut short
(``IndexError`` from Pillow's ``is_animated``) and on a JPEG with a corrupt EXIF block
(``struct.error`` in ``exif_transpose``): the decode (``DecodedCrops``, ``load_rgb_draft``) let
anything but OSError/ValueError through. The fuzz here is smaller than crawl's (tests/crawl/
test_corrupt_images.py) because every file goes through the full crop.
"""
import random
import warnings

import pytest

from tests.crawl import fake_engine as T
from tests.crawl.test_corrupt_images import _bases, _mutate
from classify.engine.pipeline import DecodedCrops
from classify.engine.types import ImageTask
from classify.engine.preprocess import load_rgb_draft
from classify.models.registry import Geometry
from core.imageio import ImageLoadError

GEOMETRY = Geometry(32, 36, "bilinear", "center")
HOSTILE = {"cut-frame.gif": T.gif_with_cut_second_frame(950), "bad-exif.jpg": T.jpeg_with_corrupt_exif(951)}


@pytest.mark.parametrize("draft", [False, True])
def test_a_hostile_image_is_a_failed_item_with_its_reason(tmp_path, draft):
    tasks = []
    for name, data in {**HOSTILE, "good.jpg": T.jpeg(952)}.items():
        (tmp_path / name).write_bytes(data)
        tasks.append(ImageTask(name, str(tmp_path / name)))
    dataset = DecodedCrops(tasks, [GEOMETRY], jpeg_draft=draft)
    results = {tasks[i].image: (crops, reason) for i, crops, reason in (dataset[i] for i in range(len(tasks)))}
    assert results["good.jpg"][1] is None and results["good.jpg"][0][0].shape == (3, 32, 32)
    for name in HOSTILE:
        crops, reason = results[name]
        assert crops is None and reason.startswith("cannot decode: "), reason


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_draft_decoder_raises_image_load_errors_only(name):
    with pytest.raises(ImageLoadError, match="^cannot decode: "):
        load_rgb_draft(HOSTILE[name], 16)


def test_fuzzed_files_through_the_decode_and_crop(tmp_path):
    """400 mutated JPEG / PNG / GIF / WEBP files, seeded: crops or a reason, never an exception."""
    rng = random.Random(2222)
    tasks = []
    for fmt, base in _bases().items():
        for i in range(100):
            path = tmp_path / f"{fmt}-{i}"
            path.write_bytes(_mutate(base, rng))
            tasks.append(ImageTask(path.name, str(path)))
    dataset = DecodedCrops(tasks, [GEOMETRY], jpeg_draft=True)
    failed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(len(tasks)):
            index, crops, reason = dataset[i]
            assert index == i and (crops is None) != (reason is None)
            failed += reason is not None
    assert 0 < failed < len(tasks)
