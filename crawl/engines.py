"""Search engines through icrawler 0.6.10, with WildLens's own fetching and storage.

icrawler splits a crawl into a feeder (result-page URLs), a parser (page -> image URLs) and a
downloader (image URL -> stored file), each a pool of threads joined by queues. WildLens keeps
that structure and icrawler's engine knowledge (its Bing/Google/Baidu filters and parsers) but
replaces what is unsafe or lossy for provenance:

- every request goes through ``crawl.http.fetch`` (http(s) only, also after redirects; public
  addresses only, except the engine's own and unless ``allow_private_hosts``; size, redirect
  limits and one deadline for the whole request; an honest User-Agent) instead of icrawler's
  unlimited session;
- the downloader validates bytes in memory and hands them to the ``Collector``, which stores
  accepted files by content hash atomically; icrawler's counter-named files and its
  extension-from-URL rule are gone. ``process_meta`` records each image's provenance
  (search term, engine, URL, rank) in the manifest;
- the engine's base URL is injectable (tests point it at a loopback server);
- a failure to reach the engine stops the crawl with a message instead of icrawler's logged
  retries, and all loops stop promptly on a shared ``stop`` signal.

Known engine caveats: icrawler's own Bing parser only keeps URLs that contain '.jpg' (it
matches ``murl":"(.*?)\\.jpg``), so PNG/WebP results were dropped or mangled; ours reads the
``m`` attribute as JSON. Google changes its result page often and icrawler's Google parser
breaks (open upstream reports): an empty Google result is reported as such. Flickr needs an
API key (https://www.flickr.com/services/apps/create/); icrawler's Flickr parser made one
extra, unlimited API call per photo, ours asks for image URLs in the search call (``extras``).
"""
from __future__ import annotations

import html
import json
import logging
import os
import queue
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import quote_plus, urlencode, urlsplit

from icrawler import Crawler, ImageDownloader
from icrawler.builtin.baidu import BaiduFeeder, BaiduParser
from icrawler.builtin.bing import BingFeeder, BingParser
from icrawler.builtin.flickr import FlickrFeeder, FlickrParser
from icrawler.builtin.google import GoogleFeeder, GoogleParser
from icrawler.storage import BaseStorage
from icrawler.utils import Session, Signal

from core.errors import OptionError
from core.runstore import now_iso

from .config import CrawlConfig
from .http import FetchLimits, fetch, origin
from .store import CollectError, Collector, Outcome
from .validate import CONNECTION, HTTP_ERROR, TIMEOUT, Rejected, validate_image

logger = logging.getLogger("wildlens.crawl")
_POLL = 0.05  # seconds between checks of queues and signals: short, so stopping is prompt
# Full decodes at once, across all download threads: decoding is CPU-bound (more would not be
# faster) and an image of up to MAX_IMAGE_PIXELS takes ~200 MB as RGB, so this bounds memory.
_DECODE_SLOTS = threading.BoundedSemaphore(max(2, os.cpu_count() or 2))


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Engine:
    name: str
    base_url: str  # scheme://host of the real engine
    feeder_cls: type
    parser_cls: type
    page_size: int
    max_results: int = 1000
    needs_api_key: bool = False
    note: str = ""


ENGINES: dict[str, Engine] = {}


def register_engine(name: str, *, parser, base_url: str, page_size: int, max_results: int = 1000,
                    needs_api_key: bool = False, note: str = ""):
    """Class decorator for a feeder: registers the engine it feeds."""

    def decorate(feeder_cls):
        ENGINES[name] = Engine(name, base_url, feeder_cls, parser, page_size, max_results, needs_api_key, note)
        return feeder_cls

    return decorate


def get_engine(name: str) -> Engine:
    key = (name or "").strip().lower()
    if key not in ENGINES:
        raise OptionError(f"Unknown engine {name!r}; choose one of: {', '.join(ENGINES)}.")
    return ENGINES[key]


# --------------------------------------------------------------------------- the job
@dataclass
class TermJob:
    """One (class, search term) crawl: what every component thread needs."""

    wnid: str
    term: str
    target: int  # accepted images wanted for the class, in total
    engine: Engine
    config: CrawlConfig
    collector: Collector
    base_url: str
    api_key: str | None = None
    notes: list[str] = field(default_factory=list)
    pages: int = 0  # result pages fetched
    results: int = 0  # image URLs the engine listed
    rate_limited: bool = False  # the engine answered HTTP 429 (Too Many Requests): this term was stopped
    last_page_full: bool = False  # the last result page read listed a whole page of URLs (there may be more)
    # A context manager around every request, given the URL: crawl.ray_crawl's holds a slot of the
    # cluster-wide per-host limit; here, nothing.
    gate: Callable[[str], AbstractContextManager] = field(default=lambda url: nullcontext(), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def page_limits(self) -> FetchLimits:
        return self._limits(5 * 1024 * 1024)

    @property
    def image_limits(self) -> FetchLimits:
        return self._limits(self.config.validation.max_bytes)

    def _limits(self, max_bytes: int) -> FetchLimits:
        """Limits of a request; the engine's own address is trusted (the user chose it, and a
        loopback mirror must serve its own pages and images), every other host must be public
        unless ``allow_private_hosts``."""
        c = self.config
        return FetchLimits(c.connect_timeout, c.read_timeout, c.file_deadline, max_bytes, c.max_redirects,
                           allow_private_hosts=c.allow_private_hosts, trusted_origins=frozenset({origin(self.base_url)}))

    def note(self, text: str) -> None:
        with self._lock:
            if text not in self.notes:
                self.notes.append(text)


@dataclass(frozen=True)
class PageTask:
    url: str
    offset: int  # results listed before this page, so an image's rank = offset + position on the page


@dataclass(frozen=True)
class PageResponse:
    """The part of a requests.Response that icrawler's parse() methods read."""

    url: str
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "ignore")


def _put(pool, item, signal, *stop_names) -> bool:
    """Put ``item`` on ``pool``'s output queue unless a stop signal is raised meanwhile.
    Calls ``queue.Queue.put`` itself: icrawler's CachedQueue.put marks an item as seen before
    the put succeeds, so retrying after a full queue silently drops it (de-duplication is the
    Collector's job here)."""
    while not any(signal.get(name) for name in stop_names):
        try:
            queue.Queue.put(pool.out_queue, item, timeout=_POLL)
            return True
        except queue.Full:
            continue
    return False


# --------------------------------------------------------------------------- parsers
class _LimitedParser:
    """Mixin: fetch result pages through crawl.http, rank and de-duplicate image URLs, stop
    on signal, and turn a failure to reach the engine into a stop with a reason."""

    def __init__(self, thread_num, signal, session, **kwargs):
        super().__init__(thread_num, signal, session, **kwargs)
        self.logger = logging.getLogger("wildlens.crawl.parser")

    def parse_kwargs(self, job: TermJob) -> dict:
        return {}

    def worker_exec(self, job: TermJob, **_):
        host = urlsplit(job.base_url).hostname
        while not self.signal.get("stop"):
            try:
                page = self.in_queue.get(timeout=_POLL)
            except queue.Empty:
                if self.signal.get("feeder_exited"):
                    break
                continue
            try:
                with job.gate(page.url):
                    fetched = fetch(page.url, job.page_limits, job.config.user_agent, headers={"Referer": job.base_url})
            except Rejected as exc:
                if exc.code in (CONNECTION, TIMEOUT):
                    # The engine itself cannot be reached: retrying every page would only hang.
                    self.signal.set(engine_error=f"{host}: {exc.detail}", stop=True)
                    break
                if exc.reason == f"{HTTP_ERROR}: HTTP 429":
                    # Too Many Requests: asking for the next pages would only prolong the block.
                    job.rate_limited = True
                    job.note(f"{job.engine.name} result page at offset {page.offset} for {job.term!r}: {exc.reason} "
                             "(rate-limited)")
                    self.signal.set(feed_stop=True)
                    break
                job.note(f"{job.engine.name} result page at offset {page.offset} for {job.term!r}: {exc.reason}")
                continue
            with job._lock:
                job.pages += 1
            try:
                tasks = list(self.parse(PageResponse(fetched.url, fetched.status, fetched.content), **self.parse_kwargs(job)) or [])
            except Exception as exc:  # an engine changed its page: report, do not crash the crawl
                job.note(f"{job.engine.name} result page for {job.term!r} could not be read "
                         f"({type(exc).__name__}: {str(exc)[:160]}); the engine may have changed its page format")
                tasks = []
            if not tasks:
                if page.offset == 0 and job.pages == 1:
                    job.note(f"{job.engine.name} listed no images for {job.term!r}")
                self.signal.set(feed_stop=True, exhausted=True)  # no more results: later pages are empty too
                break
            with job._lock:
                job.results += len(tasks)
                job.last_page_full = len(tasks) >= job.engine.page_size
            for position, task in enumerate(tasks, start=1):
                url = task.get("file_url") if isinstance(task, dict) else None
                if not isinstance(url, str):
                    continue
                claim = job.collector.claim_url(job.wnid, url)
                if claim == "seen":  # already in the manifest for this class, or being fetched
                    continue
                item = {"file_url": url, "rank": page.offset + position,
                        "reuse": claim if isinstance(claim, dict) else None}
                if not _put(self, item, self.signal, "stop"):
                    job.collector.release_url(job.wnid, url)
                    break


class WildLensBingParser(_LimitedParser, BingParser):
    """Bing's async result page: ``<a class="iusc" m='{"murl": "<image url>", ...}'>``."""

    def parse(self, response, **_):
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(response.content.decode("utf-8", "ignore"), "lxml")
        for anchor in soup.find_all("a", attrs={"m": True}):
            raw = anchor["m"]
            for text in (raw, html.unescape(raw)):  # BeautifulSoup already unescapes once
                try:
                    meta = json.loads(text)
                    break
                except ValueError:
                    meta = None
            if isinstance(meta, dict) and isinstance(meta.get("murl"), str):
                yield {"file_url": meta["murl"]}


class WildLensGoogleParser(_LimitedParser, GoogleParser):
    pass


class WildLensBaiduParser(_LimitedParser, BaiduParser):
    pass


class WildLensFlickrParser(_LimitedParser, FlickrParser):
    """flickr.photos.search with ``extras`` listing image URLs: one API call per page."""

    _SIZES = ("url_l", "url_c", "url_z", "url_m")

    def parse(self, response, **_):
        content = json.loads(response.content.decode("utf-8", "ignore"))
        if content.get("stat") != "ok":
            raise ValueError(f"Flickr says: {content.get('message', content.get('stat'))}")
        for photo in content.get("photos", {}).get("photo", []):
            url = next((photo[k] for k in self._SIZES if photo.get(k)), None)
            if url:
                yield {"file_url": url}


# --------------------------------------------------------------------------- feeders
class _PagedFeeder:
    """Mixin: result pages of ``page_size`` from an injectable ``base_url``; stops on signal."""

    def __init__(self, thread_num, signal, session, base_url: str, page_size: int):
        super().__init__(thread_num, signal, session)
        self.base_url = base_url.rstrip("/")
        self.page_size = page_size
        self.logger = logging.getLogger("wildlens.crawl.feeder")

    def page_url(self, keyword: str, offset: int, **kwargs) -> str:
        raise NotImplementedError

    def feed(self, keyword: str, offset: int, max_num: int, **kwargs):
        for page_offset in range(offset, offset + max_num, self.page_size):
            if not _put(self, PageTask(self.page_url(keyword, page_offset, **kwargs), page_offset),
                        self.signal, "stop", "feed_stop"):
                return


@register_engine("bing", parser=WildLensBingParser, base_url="https://www.bing.com", page_size=20,
                 note="default; the engine icrawler supports best")
class WildLensBingFeeder(_PagedFeeder, BingFeeder):
    def page_url(self, keyword, offset, filters=None, **_):
        filter_str = self.get_filter().apply(filters)  # icrawler's Bing filter syntax (type, color, size, ...)
        url = f"{self.base_url}/images/async?q={quote_plus(keyword)}&first={offset}&count={self.page_size}"
        return url + (f"&qft={quote_plus(filter_str)}" if filter_str else "")


@register_engine("google", parser=WildLensGoogleParser, base_url="https://www.google.com", page_size=100,
                 note="icrawler's Google parser breaks often (Google changes its page)")
class WildLensGoogleFeeder(_PagedFeeder, GoogleFeeder):
    def page_url(self, keyword, offset, filters=None, language=None, **_):
        params = dict(q=keyword, ijn=offset // 100, start=offset, tbs=self.get_filter().apply(filters, sep=","), tbm="isch")
        if language:
            params["lr"] = "lang_" + language
        return f"{self.base_url}/search?{urlencode(params)}"


@register_engine("baidu", parser=WildLensBaiduParser, base_url="https://image.baidu.com", page_size=30)
class WildLensBaiduFeeder(_PagedFeeder, BaiduFeeder):
    def page_url(self, keyword, offset, filters=None, **_):
        filter_str = self.get_filter().apply(filters, sep="&")
        url = (f"{self.base_url}/search/acjson?tn=resultjson_com&ipn=rj&word={quote_plus(keyword)}"
               f"&pn={offset}&rn={self.page_size}")
        return url + (f"&{filter_str}" if filter_str else "")


@register_engine("flickr", parser=WildLensFlickrParser, base_url="https://api.flickr.com", page_size=100, max_results=4000,
                 needs_api_key=True, note="needs a Flickr API key (--api-key or $FLICKR_APIKEY)")
class WildLensFlickrFeeder(_PagedFeeder, FlickrFeeder):
    def page_url(self, keyword, offset, apikey=None, **_):
        params = {"method": "flickr.photos.search", "api_key": apikey, "text": keyword, "format": "json",
                  "nojsoncallback": 1, "per_page": self.page_size, "page": offset // self.page_size + 1,
                  "sort": "relevance", "content_type": 1, "media": "photos",
                  "extras": "url_l,url_c,url_z,url_m"}
        return f"{self.base_url}/services/rest/?{urlencode(params)}"


# --------------------------------------------------------------------------- downloader
class _NoStorage(BaseStorage):
    """icrawler insists on a storage backend; files are stored by the Collector instead."""

    def write(self, id, data):
        raise RuntimeError("WildLens stores files through crawl.store.Collector")

    def exists(self, id):
        return False

    def max_file_idx(self):
        return 0


class ValidatingDownloader(ImageDownloader):
    """Fetch within limits, validate in memory, record through the Collector."""

    job: TermJob

    def __init__(self, thread_num, signal, session, storage):
        super().__init__(thread_num, signal, session, storage)
        self.logger = logging.getLogger("wildlens.crawl.downloader")
        self._network_failures = 0  # consecutive connection-level failures, all threads

    def worker_exec(self, job: TermJob, **_):
        while not self.signal.get("stop"):
            try:
                task = self.in_queue.get(timeout=_POLL)
            except queue.Empty:
                if self.signal.get("parser_exited"):
                    break
                continue
            try:
                self.download(task)
                self.process_meta(task)
            except CollectError as exc:  # the destination cannot take more (a full disk): stop every thread now;
                # the collector keeps the error and the save that ends the class raises its one line
                self.logger.warning("stopping the downloads: %s", exc)
                job.collector.release_url(job.wnid, task.get("file_url"))
                self.signal.set(stop=True)
            except Exception:  # never lose the thread (and the crawl) to one odd image
                self.logger.exception("unexpected error on %s", task.get("file_url"))
                job.collector.release_url(job.wnid, task.get("file_url"))
            finally:
                self.in_queue.task_done()

    def start(self, job: TermJob, **kwargs):
        self.job = job
        super().start(0, job=job)

    def download(self, task, default_ext=None, timeout=None, **kwargs):
        """Fetch and validate; the verdict goes into ``task`` for process_meta."""
        job = self.job
        task["fetched_at"] = now_iso()
        if task.get("reuse"):
            outcome = job.collector.reuse(job.wnid, task["reuse"], self._provenance(task), target=job.target)
            if outcome is not None:
                task["outcome"] = outcome
                return False
        try:
            with job.gate(task["file_url"]):
                fetched = fetch(task["file_url"], job.image_limits, job.config.user_agent)
            task["data"] = fetched.content
            with _DECODE_SLOTS:
                task["facts"] = validate_image(fetched.content, job.config.validation)
            with self.lock:
                self._network_failures = 0
            return True
        except Rejected as exc:
            task["rejection"] = exc
            if exc.code == CONNECTION and exc.detail in ("the name cannot be resolved (DNS)", "network is unreachable"):
                with self.lock:
                    self._network_failures += 1
                    if self._network_failures >= job.config.offline_after:  # many hosts in a row: the network, not the hosts
                        self._network_failures = 0
                        self.signal.set(network_suspect=True)
            return False

    def _provenance(self, task) -> dict:
        job = self.job
        return {"source": job.engine.name, "search_term": job.term, "url": task["file_url"], "rank": task.get("rank"),
                "fetched_at": task.get("fetched_at")}

    def process_meta(self, task):
        """Record the image's provenance and verdict in the manifest (icrawler's hook)."""
        job = self.job
        outcome: Outcome = task.get("outcome") or job.collector.record(
            job.wnid, self._provenance(task), facts=task.get("facts"), data=task.get("data"),
            rejection=task.get("rejection"), target=job.target)
        self.logger.info("%s %s rank %s: %s %s", job.wnid, task["file_url"], task.get("rank"), outcome.status,
                         (outcome.row or {}).get("reason") or "")
        if outcome.status == "surplus":
            job.collector.release_url(job.wnid, task["file_url"])
        elif outcome.status == "accepted":
            with self.lock:
                self.fetched_num += 1
        if job.collector.usable_count(job.wnid) >= job.target:
            self.signal.set(stop=True, reach_max_num=True)


# --------------------------------------------------------------------------- crawler
class EngineCrawler(Crawler):
    """icrawler's Crawler with WildLens components, no root-logger set-up, an honest
    User-Agent and a run loop that polls every 50 ms (icrawler's sleeps 1 s) and can be
    interrupted."""

    def __init__(self, engine: Engine, config: CrawlConfig, base_url: str):
        super().__init__(
            feeder_cls=engine.feeder_cls, parser_cls=engine.parser_cls, downloader_cls=ValidatingDownloader,
            feeder_threads=1, parser_threads=1, downloader_threads=config.threads, storage=_NoStorage(),
            extra_feeder_args={"base_url": base_url, "page_size": engine.page_size})
        self.session.headers["User-Agent"] = config.user_agent

    def set_logger(self, log_level=logging.INFO):
        self.logger = logger  # a library must not call logging.basicConfig (icrawler does)

    def init_signal(self):
        self.signal = Signal()
        self.signal.set(feeder_exited=False, parser_exited=False, reach_max_num=False, stop=False, feed_stop=False,
                        exhausted=False, engine_error=None, network_suspect=False)

    def set_session(self, headers=None):
        self.session = Session(self.proxy_pool)  # kept for icrawler's constructor; WildLens fetches through crawl.http

    def run(self, job: TermJob, feeder_kwargs: dict, on_tick=None, on_network_suspect=None) -> None:
        """Start the three pools and wait for them. ``on_tick()`` is called from this (the
        caller's) thread about every 50 ms, e.g. to report progress; if it raises (Ctrl-C,
        a cancelled dashboard), every pool is told to stop before the exception propagates.
        ``on_network_suspect()`` returns 'host: why' when the engine turned unreachable."""
        self.feeder.start(**feeder_kwargs)
        self.parser.start(job=job)
        self.downloader.start(job=job)
        try:
            while self.downloader.is_alive():
                if not self.feeder.is_alive():
                    self.signal.set(feeder_exited=True)
                if not self.parser.is_alive():
                    self.signal.set(parser_exited=True)
                if self.signal.get("network_suspect") and on_network_suspect is not None:
                    self.signal.set(network_suspect=False)
                    error = on_network_suspect()
                    if error:
                        self.signal.set(engine_error=error, stop=True)
                if on_tick is not None:
                    on_tick()
                time.sleep(_POLL)
        finally:
            self.signal.set(stop=True)
            deadline = time.monotonic() + 2.0  # grace for in-flight downloads; they are bounded by timeouts anyway
            for pool in (self.feeder, self.parser, self.downloader):
                for worker in pool.workers:
                    worker.join(max(0.0, deadline - time.monotonic()))
