"""Configuration of image collection: what an image must be to be kept, and how to fetch it.

Two dataclasses, so the dashboard, the command line and the tests set the same knobs:
``ValidationConfig`` (applies to crawled and imported images alike) and ``CrawlConfig``
(network limits and engine choice; it holds a ``ValidationConfig``).
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field, replace

from core.errors import OptionError
from core.imageio import MAX_ASPECT_RATIO
from core.phash import NEAR_DUPLICATE_DISTANCE

VERSION = "0.1"
PROJECT_URL = "https://github.com/wildlens/wildlens"
# Honest: says who we are and where to read about us, so a site operator can tell and complain.
USER_AGENT = f"WildLens/{VERSION} (+{PROJECT_URL})"

# Pillow format name -> extension of the stored file. The extension always comes from the
# decoded format, never from a URL or an uploaded file's name.
FORMAT_EXTENSIONS = {
    "JPEG": "jpg",
    "MPO": "jpg",  # multi-picture JPEG from phones and cameras: a JPEG with extra frames
    "PNG": "png",
    "GIF": "gif",
    "WEBP": "webp",
    "BMP": "bmp",
    "TIFF": "tif",
}
DEFAULT_FORMATS = tuple(FORMAT_EXTENSIONS)

# Near duplicates: pHash Hamming distance <= 8 of 64 bits (core.phash: the measurement; the probe
# keeps such images on one side of its splits).
MAX_PHASH_THRESHOLD = 63  # 64 or more makes any two images near duplicates
DEFAULT_PHASH_THRESHOLD = NEAR_DUPLICATE_DISTANCE


@dataclass(frozen=True)
class ValidationConfig:
    """What an image must satisfy to be accepted (crawled or imported)."""

    min_width: int = 64
    min_height: int = 64
    formats: tuple[str, ...] = DEFAULT_FORMATS  # Pillow format names
    max_bytes: int = 20 * 1024 * 1024  # per file; a crawl stops reading past this
    phash_threshold: int = DEFAULT_PHASH_THRESHOLD  # <0 turns near-duplicate detection off
    # Longer side over shorter side: classify refuses images beyond it (core.imageio), so none is accepted.
    max_aspect_ratio: float = MAX_ASPECT_RATIO

    def __post_init__(self):
        unknown = sorted(set(f.upper() for f in self.formats) - set(FORMAT_EXTENSIONS))
        if unknown:
            raise OptionError(f"Unknown image format(s) {unknown}; known: {', '.join(FORMAT_EXTENSIONS)}.")
        object.__setattr__(self, "formats", tuple(f.upper() for f in self.formats))
        if self.min_width < 1 or self.min_height < 1 or self.max_bytes < 1:
            raise OptionError("min_width, min_height and max_bytes must be positive.")
        if isinstance(self.max_aspect_ratio, bool) or not 1 <= self.max_aspect_ratio <= MAX_ASPECT_RATIO:
            raise OptionError(f"max_aspect_ratio must be between 1 and {MAX_ASPECT_RATIO} (what classify reads).")
        if self.phash_threshold > MAX_PHASH_THRESHOLD:  # a 64-bit distance is at most 64: every image a duplicate
            raise OptionError(f"phash threshold {self.phash_threshold}: a pHash distance is out of 64 bits; use 0 to "
                              f"{MAX_PHASH_THRESHOLD} (default {DEFAULT_PHASH_THRESHOLD}), or -1 to turn the "
                              "near-duplicate check off.")


@dataclass(frozen=True)
class CrawlConfig:
    """How to fetch: engine, limits, threads. Timeouts are seconds."""

    engine: str = "bing"
    base_url: str | None = None  # the engine's address; None = the real one (tests point it at loopback)
    api_key: str | None = None  # Flickr only (else $FLICKR_APIKEY)
    # Parallel downloads. 16, Scrapy's CONCURRENT_REQUESTS default: on the 2-core machine against
    # the loopback engine at 50 ms per image (benchmarks/bench_crawl.py) 4 / 8 / 16 / 24 threads
    # accepted about 62 / 105-112 / 135-156 / 122-130 images/s; past 16 the threads contend for the
    # GIL and the CPU and the rate falls. Image URLs of a search come from many hosts.
    threads: int = 16
    connect_timeout: float = 5.0
    read_timeout: float = 10.0  # between two bytes, per request
    file_deadline: float = 30.0  # whole request for one file (DNS, connect, headers, redirects, body), so a drip-feeding server cannot hold a thread
    max_redirects: int = 5
    oversample: float = 3.0  # look at up to this many new results per image still needed, per search term
    max_results: int = 1000  # engines serve at most ~1000 results per term
    max_terms: int = 3  # search terms tried per class (one per lemma) before giving up
    context: str | None = None  # word appended to lemmas for context, e.g. 'cat' -> 'Persian cat'
    filters: dict | None = None  # icrawler's engine filters, e.g. {'type': 'photo'} for Bing
    offline_after: int = 5  # this many DNS/network failures in a row -> check whether the engine is still reachable
    save_every: int = 10  # write the manifest after at least this many new rows and a quarter of the manifest (and after each class)
    probe_timeout: float = 5.0  # the reachability check's whole budget
    user_agent: str = USER_AGENT
    # Fetch image URLs that resolve to loopback, private, link-local or multicast addresses too. Off:
    # a result list must not make WildLens request pages inside the user's network (SSRF). The
    # engine's own address (base_url) is exempt either way: the user chose it.
    allow_private_hosts: bool = False
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def __post_init__(self):
        if not 1 <= self.threads <= 32:
            raise OptionError(f"threads must be between 1 and 32, not {self.threads}.")
        if self.max_redirects < 0:
            raise OptionError("max_redirects must be 0 or more.")
        timeouts = (self.connect_timeout, self.read_timeout, self.file_deadline, self.probe_timeout)
        # Finite too: nan passed min(...) <= 0 and left no deadline at all (every comparison with it
        # is false); inf is no deadline either, the one guard against a drip-feeding server.
        if not all(math.isfinite(t) and t > 0 for t in timeouts):
            raise OptionError("timeouts must be positive numbers of seconds (--deadline, --connect-timeout, "
                              f"--read-timeout), not {', '.join(str(t) for t in timeouts if not (math.isfinite(t) and t > 0))}.")

    def with_changes(self, **changes) -> "CrawlConfig":
        return replace(self, **changes)
