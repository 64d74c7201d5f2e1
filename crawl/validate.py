"""Decide from the bytes alone whether a download or an imported file is a usable image.

Never trusts a Content-Type header, a URL or a file extension: an "image.jpg" is often an
HTML page (a login wall, a hotlink-protection page, a 404 page served with status 200).
The verdict comes from the file's leading bytes (magic numbers) and a full decode by Pillow
(through ``core.imageio``, the same loader the models use, so what is accepted here loads
there). Rejections carry a reason ``"<code>: <detail>"``; the code is stable and is what the
per-class figures count.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from PIL import Image

from .config import FORMAT_EXTENSIONS, ValidationConfig
from core.imageio import ImageLoadError, load_error, open_rgb, ratio_text

# Reason codes (the part before ':' in a manifest 'reason').
EMPTY = "empty"
HTML = "html"
NOT_IMAGE = "not-image"
UNDECODABLE = "undecodable"  # truncated or corrupt
BOMB = "decompression-bomb"
TOO_SMALL = "too-small"
ASPECT = "aspect-ratio"  # a strip or banner classify would refuse (core.imageio.MAX_ASPECT_RATIO)
FORMAT = "format"
TOO_LARGE = "too-large"
# Entries of an imported folder that are not read (set by crawl.importer; the rule that decides
# them is core.folderscan's, shared with classify --images): unreadable (permission denied, a
# broken link, an I/O error), not-regular (a FIFO, a device, a socket: reading could block or
# never end), outside-src (a symbolic link that leaves the source folder, followed with
# --follow-links), symlink-loop (a link loop, a link to SRC or above it, a second way into a
# folder already read), other-class (a link into another class folder, whose images are read
# there, or into no class folder)
from core.folderscan import NOT_REGULAR, OTHER_CLASS, OUTSIDE_SRC, SYMLINK_LOOP, UNREADABLE  # noqa: E402,F401
# Network codes (set by crawl.http)
HTTP_ERROR = "http-error"
TIMEOUT = "timeout"
CONNECTION = "connection"
BAD_URL = "bad-url"
REDIRECTS = "redirects"
PRIVATE_ADDRESS = "private-address"  # loopback, private, link-local, multicast...: refused unless allowed (SSRF)
# Duplicate codes (status 'duplicate')
EXACT_DUPLICATE = "exact-duplicate"
NEAR_DUPLICATE = "near-duplicate"
# Failures that may pass on a later try: a URL rejected for one of these for one class is
# fetched again for another class rather than copying the verdict.
TRANSIENT_CODES = frozenset({HTTP_ERROR, TIMEOUT, CONNECTION})

_SIGNATURES = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
)
_TEXT_MARKERS = (b"<!doctype", b"<html", b"<head", b"<body", b"<script", b"<?xml", b"<svg", b"{", b"[")


class Rejected(Exception):
    """An image that is not accepted; ``reason`` is '<code>: <detail>'."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail

    @property
    def reason(self) -> str:
        return f"{self.code}: {self.detail}"


def reason_code(reason: str | None) -> str:
    """The stable code of a manifest reason ('http-error: HTTP 404' -> 'http-error')."""
    return (reason or "").split(":", 1)[0].strip()


# HTTP answers that say "not now" rather than "no": a request timeout, too early, too many requests,
# and the server-side failures (RFC 9110 15.5.9, RFC 8470, RFC 6585, RFC 9110 15.6). A 404 or a 403
# is the server's verdict on the URL and is kept.
RETRY_HTTP_STATUS = frozenset({408, 425, 429}) | frozenset(range(500, 600))


def retried_on_resume(reason: str | None) -> bool:
    """Whether a URL rejected with ``reason`` is fetched again by the next run of the same crawl:
    a connection that failed (refused, reset, DNS), a timeout, or an HTTP status of
    :data:`RETRY_HTTP_STATUS`. Its row is then replaced in place (``crawl.store.Collector``)."""
    code = reason_code(reason)
    if code in (CONNECTION, TIMEOUT):
        return True
    if code != HTTP_ERROR:
        return False
    status = _HTTP_STATUS.match((reason or "").split(":", 1)[-1])  # (hand-edited text: ASCII digits only)
    return status is not None and int(status[1]) in RETRY_HTTP_STATUS


_HTTP_STATUS = re.compile(r"\s*HTTP (\d{3})\b", re.ASCII)


@dataclass(frozen=True)
class ImageFacts:
    """What is recorded about an accepted image. ``width``/``height`` are as displayed (EXIF
    orientation applied), i.e. what a model sees; ``mode`` is the file's own mode."""

    sha256: str
    phash: str  # 16 hex digits
    width: int
    height: int
    format: str
    mode: str
    bytes: int

    @property
    def extension(self) -> str:
        return FORMAT_EXTENSIONS[self.format]

    def stored_name(self, wnid: str) -> str:
        """'<wnid>/<sha256[:16]>.<ext>': the manifest's 'file'. 64 bits of the hash are plenty
        to name files uniquely within one run, and short enough to read."""
        return f"{wnid}/{self.sha256[:16]}.{self.extension}"


def sniff(data: bytes) -> str | None:
    """The image format the leading bytes announce, 'HTML'/'TEXT' for markup or text, or
    None when they announce nothing known (Pillow still gets the final word)."""
    for magic, name in _SIGNATURES:
        if data.startswith(magic):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()  # BOM and blank lines before markup
    if head.startswith(_TEXT_MARKERS):
        return "HTML" if b"<html" in head or b"<!doctype html" in head or b"<body" in head or b"<head" in head else "TEXT"
    return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def validate_image(data: bytes, config: ValidationConfig = ValidationConfig()) -> ImageFacts:
    """Accept ``data`` as an image or raise Rejected. Never alters the bytes: unusual modes,
    animation and EXIF orientation are handled at load time by core.imageio. Raises nothing but
    Rejected: whatever else goes wrong with one file (a decoder's own exception, an odd header
    that breaks the perceptual hash) is that file's rejection, ``undecodable: <why>``."""
    try:
        return _validate(data, config)
    except Rejected:
        raise
    except Exception as exc:  # noqa: BLE001 - one hostile file is one rejection, never a crashed import
        raise Rejected(UNDECODABLE, str(load_error(exc))) from None


def _validate(data: bytes, config: ValidationConfig) -> ImageFacts:
    if not data:
        raise Rejected(EMPTY, "0 bytes")
    if len(data) > config.max_bytes:
        raise Rejected(TOO_LARGE, f"{len(data)} bytes > limit {config.max_bytes}")
    announced = sniff(data)
    if announced == "HTML":
        raise Rejected(HTML, "an HTML page, not an image")
    if announced == "TEXT":
        raise Rejected(NOT_IMAGE, "text or markup (XML, SVG, JSON), not a raster image")
    try:
        rgb, fmt, mode = open_rgb(bytes(data))  # one full decode: truncation fails here
    except ImageLoadError as exc:
        message = str(exc)
        if message.startswith("decompression bomb"):
            raise Rejected(BOMB, message.split(":", 1)[-1].strip() or "too many pixels") from None
        if message.startswith("not an image"):
            raise Rejected(NOT_IMAGE, f"unknown signature {data[:8].hex()}") from None
        raise Rejected(UNDECODABLE, message) from None
    if fmt not in FORMAT_EXTENSIONS or fmt not in config.formats:
        raise Rejected(FORMAT, f"{fmt or 'unknown'} is not allowed (allowed: {', '.join(config.formats)})")
    width, height = rgb.size
    if width < config.min_width or height < config.min_height:
        raise Rejected(TOO_SMALL, f"{width}x{height} < minimum {config.min_width}x{config.min_height}")
    long, short = max(width, height), min(width, height)
    if long > config.max_aspect_ratio * short:
        raise Rejected(ASPECT, f"{width}x{height} ({ratio_text(long, short)}:1) is over the {config.max_aspect_ratio:g}:1 "
                               "that classify reads")
    return ImageFacts(sha256_hex(data), perceptual_hash(rgb), width, height, fmt, mode, len(data))


def perceptual_hash(rgb: Image.Image) -> str:
    """64-bit DCT perceptual hash (imagehash.phash) as 16 hex digits."""
    import imagehash

    return str(imagehash.phash(rgb))


def phash_int(value: str) -> int:
    return int(value, 16)
