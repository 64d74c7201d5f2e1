"""Validation of image bytes: every rejection has a reason; odd but valid images are accepted."""
import itertools

import imagehash
import pytest
from PIL import Image

from tests.crawl import fake_engine as T
from crawl.config import DEFAULT_PHASH_THRESHOLD, ValidationConfig
from core.errors import OptionError
from core.imageio import load_rgb
from crawl.validate import Rejected, reason_code, sniff, validate_image


def code_of(data, config=ValidationConfig()):
    with pytest.raises(Rejected) as info:
        validate_image(data, config)
    return info.value.code


def test_rejections_have_reasons():
    assert code_of(b"") == "empty"
    assert code_of(T.html_page()) == "html"
    assert code_of(b"\n\n  <html><body>hi</body></html>") == "html"
    assert code_of(b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>') == "not-image"
    assert code_of(b'{"error": "rate limited"}') == "not-image"
    assert code_of(bytes(range(256)) * 4) == "not-image"
    assert code_of(T.truncated(T.jpeg(1))) == "undecodable"
    assert code_of(T.truncated(T.png(1), 0.6)) == "undecodable"
    assert code_of(T.bomb_png()) == "decompression-bomb"
    assert code_of(T.jpeg(1, size=(20, 20))) == "too-small"
    assert code_of(T.jpeg(1, size=(200, 40))) == "too-small"  # both sides must reach the minimum
    # what classify would refuse (core.imageio.MAX_ASPECT_RATIO) is never accepted: at the limit it is
    assert code_of(T.jpeg(1, size=(64 * 20 + 1, 64))) == code_of(T.jpeg(1, size=(64, 64 * 20 + 1))) == "aspect-ratio"
    assert validate_image(T.jpeg(1, size=(64 * 20, 64))).width == 1280
    with pytest.raises(Rejected, match=r"aspect-ratio: 1281x64 \(20.016:1\) is over the 20:1 that classify reads"):
        validate_image(T.jpeg(1, size=(1281, 64)))
    for bad in (21, 0.5, float("nan"), True):
        with pytest.raises(OptionError, match="max_aspect_ratio"):
            ValidationConfig(max_aspect_ratio=bad)
    assert code_of(T.encode(T.pattern(1), "ICO")) == "format"
    assert code_of(T.png(1), ValidationConfig(formats=("JPEG",))) == "format"
    assert code_of(T.jpeg(1), ValidationConfig(max_bytes=100)) == "too-large"


def test_reason_text_is_code_then_detail():
    with pytest.raises(Rejected) as info:
        validate_image(T.jpeg(1, size=(20, 30)))
    assert info.value.reason == "too-small: 20x30 < minimum 64x64"
    assert reason_code(info.value.reason) == "too-small"


def test_html_named_jpg_is_judged_by_its_bytes_not_its_name():
    assert sniff(T.html_page()) == "HTML"
    assert sniff(T.jpeg(1)) == "JPEG" and sniff(T.png(1)) == "PNG"
    assert sniff(T.encode(T.pattern(1), "WEBP")) == "WEBP"


@pytest.mark.parametrize("make, mode, fmt", [
    (T.cmyk_jpeg, "CMYK", "JPEG"),
    (T.palette_png_with_transparency, "P", "PNG"),
    (T.png_16bit, "I;16", "PNG"),
    (T.animated_gif, "P", "GIF"),
    (lambda s: T.encode(T.pattern(s), "WEBP"), "RGB", "WEBP"),
])
def test_unusual_modes_are_accepted_and_recorded_as_stored(make, mode, fmt):
    data = make(3)
    facts = validate_image(data)
    assert (facts.mode, facts.format) == (mode, fmt)
    assert facts.bytes == len(data) and len(facts.sha256) == 64 and len(facts.phash) == 16
    assert load_rgb(data).mode == "RGB"


def test_exif_rotation_is_applied_to_the_recorded_size_only():
    data = T.exif_rotated_jpeg(4)
    with Image.open(__import__("io").BytesIO(data)) as raw:
        assert raw.size == (160, 100)
    facts = validate_image(data)
    assert (facts.width, facts.height) == (100, 160)  # as displayed, what a model sees
    assert facts.stored_name("n02123045") == f"n02123045/{facts.sha256[:16]}.jpg"


def test_stored_extension_comes_from_the_decoded_format():
    assert validate_image(T.png(2)).extension == "png"
    assert validate_image(T.animated_gif(2)).extension == "gif"


def test_phash_threshold_separates_copies_from_distinct_test_images():
    """The generated test pictures behave like the photographs the threshold was chosen on."""
    hashes = [imagehash.phash(T.pattern(seed)) for seed in range(40)]
    distinct = min(a - b for a, b in itertools.combinations(hashes, 2))
    copies = max(imagehash.phash(load_rgb(T.near_copy(T.jpeg(seed)))) - hashes[seed] for seed in range(40))
    assert copies <= DEFAULT_PHASH_THRESHOLD < distinct


def test_validation_config_checks_itself():
    with pytest.raises(ValueError, match="Unknown image format"):
        ValidationConfig(formats=("JPEG", "SVG"))
    assert ValidationConfig(formats=("jpeg",)).formats == ("JPEG",)
