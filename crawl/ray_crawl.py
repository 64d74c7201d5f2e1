"""The crawl on Ray (``python -m crawl fetch --ray``): classes searched, downloaded and validated by actors.

A runner for :func:`crawl.crawler.crawl_run` (``classes=ray_classes(...)``): everything before and
after the classes (the checks, the destination's lock, the journal, the summary) is the local crawl's.
How the classes run:

* Each class still short of k becomes a job for a pool of Ray actors (``--ray-actors N``, spread over
  the nodes). An actor runs the local crawl's own per-class code (:func:`crawl.crawler._crawl_class`:
  the class's search terms in turn, ``config.threads`` download threads, every validation, every
  limit of ``crawl.http.fetch``: public http(s) addresses only, size and time limits, so SSRF and
  size limits apply in the actors as they do here) against a :class:`BufferingCollector`, which
  keeps each verdict and the accepted images' bytes instead of writing anything. The actor's result
  comes back as one Arrow IPC stream (no pickle in the payload).
* This process stays the only writer: it replays each class's verdicts, in the order of the class's
  search terms and the engine's ranks (deterministic whatever the threads did), through the real
  :class:`crawl.store.Collector`, which journals every row before its file is renamed into place and
  decides duplicates against everything stored (other classes included). So a killed crawl resumes
  with the local guarantees: the rows journalled are the rows stored, and a re-run skips what is there.
  Classes are replayed in order (a class's result that arrives early waits), so the accepted set is
  the local crawl's for the same search terms and budget.
* A per-host limit on requests in flight holds across the cluster (``--ray-per-host``): every request
  of every actor holds a slot of one :class:`HostSlots` actor for its host while it runs.

An actor's count of accepted images is provisional (a copy of an image another class keeps, or a near
duplicate of one, is only known here): a class that ends short of k after the replay says so, and the
same command run again looks further, as the local crawl's notes say. Result pages of one class are
not split over actors (one class, one actor).
"""
from __future__ import annotations

import io
import json
import re
import threading
import uuid
from contextlib import contextmanager
from typing import Callable


from .crawler import ClassWork, CrawlError, EngineUnreachable, _crawl_class, check_engine
from .engines import get_engine
from .store import Outcome
from .validate import ImageFacts, Rejected

DEFAULT_PER_HOST = 16  # requests in flight to one host across the cluster (the local crawl's default threads)
_FACTS = ("sha256", "phash", "width", "height", "format", "mode", "bytes")
_PROVENANCE = ("source", "search_term", "url", "rank", "fetched_at")


class HostSlots:
    """A Ray actor (asyncio): at most ``limit`` requests in flight per host, over every actor."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.slots: dict = {}
        self.busy: dict = {}
        self.peak: dict = {}

    async def acquire(self, host: str) -> None:
        import asyncio

        slot = self.slots.setdefault(host, asyncio.Semaphore(self.limit))
        await slot.acquire()
        self.busy[host] = self.busy.get(host, 0) + 1
        self.peak[host] = max(self.peak.get(host, 0), self.busy[host])

    async def release(self, host: str) -> None:
        self.busy[host] -= 1
        self.slots[host].release()

    async def peaks(self) -> dict:
        """The most requests each host had in flight at once."""
        return dict(self.peak)


class BufferingCollector:
    """What a crawl's threads ask of a :class:`crawl.store.Collector`, on an actor: URLs claimed once per
    class, verdicts and accepted bytes kept in memory (:attr:`items`), a provisional count of accepted
    images that stops the class at k. Nothing is written; the driver's Collector decides for real."""

    def __init__(self, wnid: str, usable: int, seen_urls, rows: list[dict]):
        self.wnid = wnid
        self.usable_before = int(usable)
        self.accepted_here = 0
        self.rows = [dict(r) for r in rows]  # {'wnid', 'search_term'} of the class's rows (look-ahead budgets)
        self.items: list[dict] = []
        self._seen = set(seen_urls)
        self._claimed: set = set()
        self._shas: set = set()
        self._lock = threading.Lock()

    def claim_url(self, wnid: str, url: str) -> str:
        with self._lock:
            if url in self._seen or url in self._claimed:
                return "seen"
            self._claimed.add(url)
            return "new"

    def release_url(self, wnid: str, url: str) -> None:
        with self._lock:
            self._claimed.discard(url)

    def usable_count(self, wnid: str) -> int:
        with self._lock:
            return self.usable_before + self.accepted_here

    def reuse(self, wnid: str, other: dict, provenance: dict, *, target: int | None = None):
        return None  # (never offered: claim_url never hands back another class's row)

    def raise_if_store_failed(self) -> None:
        return None  # nothing is stored here

    def record(self, wnid: str, provenance: dict, *, facts: ImageFacts | None = None, data: bytes | None = None,
               rejection: Rejected | None = None, target: int | None = None) -> Outcome:
        with self._lock:
            status = "rejected"
            if rejection is None and facts is not None:
                if facts.sha256 in self._shas:
                    status = "duplicate"
                elif target is not None and self.usable_before + self.accepted_here >= target:
                    return Outcome("surplus")
                else:
                    status = "accepted"
                    self.accepted_here += 1
                    self._shas.add(facts.sha256)
            else:
                rejection = rejection or Rejected("not-image", "no data")
            self.items.append({**{k: provenance.get(k) for k in _PROVENANCE},
                               **{k: (getattr(facts, k) if facts is not None and rejection is None else None)
                                  for k in _FACTS},
                               "data": data if status == "accepted" else None,
                               "reject_code": rejection.code if rejection is not None else None,
                               "reject_detail": rejection.detail if rejection is not None else None})
            self.rows.append({"wnid": wnid, "search_term": provenance.get("search_term")})
            return Outcome(status)


def encode_items(items: list[dict], meta: dict) -> bytes:
    """A class's verdicts as one Arrow IPC stream; ``meta`` (notes, error) as JSON in its schema."""
    import pyarrow as pa

    columns = {
        **{k: pa.array([i[k] for i in items], type=pa.string()) for k in ("source", "search_term", "url", "fetched_at",
                                                                         "sha256", "phash", "format", "mode",
                                                                         "reject_code", "reject_detail")},
        **{k: pa.array([i[k] for i in items], type=pa.int64()) for k in ("rank", "width", "height", "bytes")},
        "data": pa.array([i["data"] for i in items], type=pa.binary()),
    }
    table = pa.table(columns).replace_schema_metadata({"wildlens": json.dumps(meta)})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def decode_items(blob: bytes) -> tuple[list[dict], dict]:
    import pyarrow as pa

    table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    meta = json.loads((table.schema.metadata or {}).get(b"wildlens", b"{}"))
    return table.to_pylist(), meta


class CrawlActor:
    """A Ray actor that crawls whole classes (:meth:`crawl_class`) with the local crawl's code."""

    def __init__(self, slots=None):
        self.slots = slots

    @contextmanager
    def _gate(self, url: str):
        from urllib.parse import urlsplit

        import ray

        if self.slots is None:
            yield
            return
        host = (urlsplit(url).hostname or "").lower()
        ray.get(self.slots.acquire.remote(host))
        try:
            yield
        finally:
            self.slots.release.remote(host)

    def crawl_class(self, job: dict) -> bytes:
        wnid, config = job["wnid"], job["config"]
        spec = get_engine(config.engine)
        collector = BufferingCollector(wnid, job["usable"], job["seen_urls"], job["rows"])
        meta: dict = {"notes": [], "error": None, "unreachable": False}

        def network_check() -> str | None:
            reach = check_engine(config.engine, config)
            return None if reach.ok else f"{reach.host}: {reach.detail}"

        try:
            meta["notes"] = _crawl_class(collector, wnid, job["k"], spec, config, job["base_url"], job["api_key"],
                                         job["label_space"], job["terms"], on_tick=lambda: None,
                                         network_check=network_check, gate=self._gate)
        except CrawlError as exc:  # the engine lost: what was found so far still goes back to be stored
            meta.update(error=str(exc), unreachable=isinstance(exc, EngineUnreachable))
        return encode_items(collector.items, meta)


def _job(work: ClassWork, wnid: str) -> dict:
    rows = [r for r in work.collector.rows if r.get("wnid") == wnid]
    return {"wnid": wnid, "k": work.k, "terms": list(work.plan[wnid]), "usable": work.collector.usable_count(wnid),
            "seen_urls": sorted({r["url"] for r in rows if isinstance(r.get("url"), str)}),
            "rows": [{"wnid": wnid, "search_term": r.get("search_term")} for r in rows], "config": work.config,
            "base_url": work.base_url, "api_key": work.api_key, "label_space": work.label_space}


def _replay(work: ClassWork, wnid: str, items: list[dict]) -> None:
    """A class's verdicts through the real Collector, in term order then rank (deterministic)."""
    order = {term: i for i, term in enumerate(work.plan[wnid])}
    items = sorted(items, key=lambda i: (order.get(i["search_term"], len(order)),
                                         i["rank"] if i["rank"] is not None else 1 << 62))
    for item in items:
        provenance = {k: item[k] for k in _PROVENANCE}
        if item["reject_code"] is not None:
            work.collector.record(wnid, provenance, rejection=Rejected(item["reject_code"], item["reject_detail"] or ""),
                                  target=work.k)
        else:
            facts = ImageFacts(*(item[k] for k in _FACTS))
            work.collector.record(wnid, provenance, facts=facts, data=item["data"], target=work.k)
    work.collector.raise_if_store_failed()


_SHORT = re.compile(r"^(?P<head>n\d{8} [^:]*: )(?P<usable>\d+)/(?P<k>\d+) accepted; ")


def _class_notes(work: ClassWork, wnid: str, notes: list[str]) -> list[str]:
    """The actor's notes with its provisional count of accepted images replaced by the stored one."""
    usable = work.collector.usable_count(wnid)
    out, short_said = [], False
    for note in notes:
        match = _SHORT.match(note)
        if match and note.startswith(f"{wnid} "):
            short_said = True
            if usable >= work.k:
                continue
            note = f"{match['head']}{usable}/{work.k} accepted; " + note[match.end():]
        out.append(note)
    if usable < work.k and not short_said:
        from core.labels import get_label_space

        name = get_label_space(work.label_space).display_name(wnid)
        out.append(f"{wnid} {name}: {usable}/{work.k} accepted; some images found were copies of images already "
                   "kept (for this or another class): run the same command again to look further")
    return out


def ray_classes(address: str | None = None, actors: int | None = None, per_host: int = DEFAULT_PER_HOST,
                join_timeout: float | None = None) -> Callable[[ClassWork], list[str]]:
    """A runner of a crawl's classes on Ray actors (the module docstring says how), for
    ``crawl_run(classes=...)``: ``actors`` (default: one per CPU of the cluster, at most the classes)
    on the cluster at ``address`` (else ``RAY_ADDRESS``, else a local instance), ``per_host``
    requests in flight per host across them."""
    from core.errors import OptionError

    if actors is not None and actors < 1:
        raise OptionError(f"--ray-actors {actors}: give at least 1.")
    if not 1 <= int(per_host) <= 1024:
        raise OptionError(f"--ray-per-host {per_host}: give 1 to 1024 requests in flight per host.")

    def run(work: ClassWork) -> list[str]:
        from core.raysession import _import_ray, ray_session

        ray = _import_ray()
        notes: list[str] = []
        if not work.todo:
            return notes
        with ray_session(address, join_timeout):
            cpus = int(sum(float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")))
            size = max(1, min(actors or max(1, cpus), len(work.todo)))
            slots = ray.remote(num_cpus=0)(HostSlots).options(name=f"wildlens-host-slots-{uuid.uuid4().hex[:12]}",
                                                            max_concurrency=1000).remote(per_host)
            pool = [ray.remote(num_cpus=0, max_restarts=0)(CrawlActor).options(
                scheduling_strategy="SPREAD", max_concurrency=1).remote(slots) for _ in range(size)]
            pending = {}  # class index -> its actor's result
            queue = list(enumerate(work.todo))
            free = list(range(size))
            busy = {}  # future -> (actor index, class index)
            done_to = 0
            work.tick(work.todo[0])
            try:
                while done_to < len(work.todo):
                    while free and queue:
                        actor, (index, wnid) = free.pop(), queue.pop(0)
                        busy[pool[actor].crawl_class.remote(_job(work, wnid))] = (actor, index)
                    ready, _ = ray.wait(list(busy), num_returns=1, timeout=0.2)
                    for future in ready:
                        actor, index = busy.pop(future)
                        free.append(actor)
                        pending[index] = future
                    while done_to in pending:  # replay in class order: the accepted set is the local crawl's
                        wnid = work.todo[done_to]
                        items, meta = decode_items(ray.get(pending.pop(done_to)))
                        _replay(work, wnid, items)
                        work.collector.save()
                        notes += _class_notes(work, wnid, meta["notes"])
                        work.tick(wnid)
                        if meta["error"]:
                            raise (EngineUnreachable if meta["unreachable"] else CrawlError)(meta["error"])
                        done_to += 1
                    if not ready and busy:
                        work.tick(work.todo[done_to])
            finally:
                for handle in pool:
                    ray.kill(handle)
                ray.kill(slots)
        return notes

    run.per_host = per_host
    return run
