"""Issue 22 item 7: one corrupt image is one rejection, never a crashed import or crawl.

A GIF whose second frame is cut short (``IndexError`` from Pillow's ``is_animated``) and a JPEG
whose EXIF block is corrupt (``struct.error`` in ``exif_transpose``) aborted ``crawl import``
(nothing imported) and the crawler dropped their URL without a manifest row. A seeded fuzz test
(thousands of mutated JPEG / PNG / GIF / WEBP files) holds the loader and the validator to it:
``core.imageio.load_rgb`` raises ImageLoadError only, ``crawl.validate.validate_image`` Rejected only.
"""
import io
import random
import warnings

import pytest
from PIL import Image

from tests.crawl import fake_engine as T
from crawl.cli import main
from crawl.config import ValidationConfig
from crawl.store import FolderDestination
from crawl.validate import ImageFacts, Rejected, validate_image
from core.imageio import ImageLoadError, load_rgb

TABBY = "n02123045"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


HOSTILE = {"cut-frame.gif": T.gif_with_cut_second_frame(900), "bad-exif.jpg": T.jpeg_with_corrupt_exif(901)}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_loader_and_the_validator_reject_the_hostile_files(name):
    # The reason names the exception as a reader can look it up: 'struct.error', not a bare 'error'.
    kind = {"cut-frame.gif": "IndexError", "bad-exif.jpg": "struct.error"}[name]
    with pytest.raises(ImageLoadError, match=rf"^cannot decode: {kind}: "):
        load_rgb(HOSTILE[name])
    with pytest.raises(Rejected) as info:
        validate_image(HOSTILE[name])
    assert info.value.code == "undecodable" and "\n" not in info.value.reason


def test_import_rejects_each_hostile_file_and_imports_the_others(tmp_path, capsys):
    src = tmp_path / "src" / TABBY
    src.mkdir(parents=True)
    for name, data in HOSTILE.items():
        (src / name).write_bytes(data)
    (src / "good.jpg").write_bytes(T.jpeg(902))
    out = tmp_path / "out"
    assert main(["import", str(tmp_path / "src"), "--out", str(out), "--no-progress"]) == 0
    manifest = FolderDestination(out).read_manifest().set_index("original_name")
    assert manifest.loc[f"{TABBY}/good.jpg", "status"] == "accepted"
    for name in HOSTILE:
        row = manifest.loc[f"{TABBY}/{name}"]
        assert row["status"] == "rejected" and row["reason"].startswith("undecodable: cannot decode: "), row["reason"]
    assert main(["import", str(tmp_path / "src"), "--out", str(out), "--no-progress"]) == 0  # the re-run too
    captured = capsys.readouterr()
    assert "0 accepted, 3 already imported" in captured.out + captured.err


# The crawler's download path: tests/crawl/test_engine.py's zoo serves both files; each gets its
# 'undecodable' row (before, the URL was dropped with no row).


# --------------------------------------------------------------------------- fuzz
def _bases() -> dict[str, bytes]:
    exif = Image.Exif()
    exif[0x0112] = 6
    exif[0x0128] = 2
    exif[0x011A] = (72, 1)
    frames = [T.pattern(910 + i, (24, 20)) for i in range(3)]
    webp = io.BytesIO()
    frames[0].save(webp, "WEBP", save_all=True, append_images=frames[1:], duration=50, quality=60)
    return {
        "jpeg": T.encode(T.pattern(911, (32, 24)), "JPEG", quality=80, exif=exif.tobytes()),
        "png": T.encode(T.pattern(912, (24, 24)).convert("P", palette=Image.ADAPTIVE, colors=16), "PNG",
                        transparency=0),
        "gif": T.encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0),
        "webp": webp.getvalue(),
    }


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # cut short
        del b[rng.randrange(1, len(b)):]
    elif kind == 2:  # insert junk
        at = rng.randrange(len(b))
        b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 3:  # repeat a chunk
        at, size = rng.randrange(len(b)), rng.randint(1, 64)
        b[at:at] = b[at:at + size]
    elif kind == 4:  # zero a range
        at, size = rng.randrange(len(b)), rng.randint(1, 32)
        b[at:at + size] = bytes(len(b[at:at + size]))
    else:  # an extreme length or offset
        at = rng.randrange(max(1, len(b) - 4))
        b[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00", b"\x00\x00\xff\xff"])
    return bytes(b)


FUZZ_PER_FORMAT = 800


def test_fuzzed_images_are_accepted_or_rejected_never_a_crash():
    """3,200 mutated files, seeded: each one loads or is refused with a reason, never another exception."""
    rng = random.Random(22)
    config = ValidationConfig(min_width=1, min_height=1)
    outcomes = {"accepted": 0, "rejected": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pillow warns about corrupt EXIF: that is the point
        for fmt, base in _bases().items():
            for _ in range(FUZZ_PER_FORMAT):
                data = _mutate(base, rng)
                try:
                    facts = validate_image(data, config)
                except Rejected as exc:
                    assert "\n" not in exc.reason
                    outcomes["rejected"] += 1
                else:
                    assert isinstance(facts, ImageFacts)
                    outcomes["accepted"] += 1
                try:
                    load_rgb(data)
                except ImageLoadError:
                    pass
    assert outcomes["accepted"] > 100 and outcomes["rejected"] > 100, outcomes  # both sides exercised
