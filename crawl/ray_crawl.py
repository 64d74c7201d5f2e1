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
* An actor that dies (its process killed, its node lost) loses only its current job, which wrote
  nothing: the slots it held are freed (:meth:`HostSlots.forget`), a new actor takes its place and
  the job runs again from the start, up to :data:`JOB_TRIES` times, then the crawl stops in one line
  (the classes stored so far stay stored; the same command resumes).

* When there are fewer classes than actors, a class still short of k by two result pages or more is
  split by result pages:
  its first search term's first pages (as many as k still needs) go to the actors in ranges, each
  actor's threads sharing one provisional count of the class (kept by the crawl's state actor, as a
  local crawl's threads share its Collector's), so together they stop at k. The ranges are replayed together, by
  rank, with each URL once per class; a class still short after them goes on as one class job (every
  search term in turn, the URLs already seen skipped), as a local crawl would.

An actor's count of accepted images is provisional (a copy of an image another class keeps, or a near
duplicate of one, is only known here): a class that ends short of k after the replay says so, and the
same command run again looks further, as the local crawl's notes say.
"""
from __future__ import annotations

import json
import re
import threading
from contextlib import contextmanager
from typing import Callable


from core.errors import one_line
from core.tables import ipc_bytes, ipc_table

from .crawler import ClassWork, CrawlError, EngineUnreachable, _crawl_class, check_engine, crawl_term
from .engines import get_engine
from .store import Outcome
from .validate import ImageFacts, Rejected

JOB_TRIES = 3  # runs of one job on actors that die before the crawl stops (a job that kills its actor each time)
DEFAULT_PER_HOST = 16  # requests in flight to one host across the cluster (the local crawl's default threads)
_FACTS = ("sha256", "phash", "width", "height", "format", "mode", "bytes")
_PROVENANCE = ("source", "search_term", "url", "rank", "fetched_at")


class HolderGone(RuntimeError):
    """A crawl actor asked for a slot after the driver forgot it (it was taken for dead)."""


class HostSlots:
    """A Ray actor (asyncio), one per crawl: at most ``limit`` requests in flight per host over every
    actor, and the shared counts of classes split over actors (:meth:`take`). Slots are held in the
    name of a ``holder`` (a crawl actor), so a holder that dies can be forgotten with its slots."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.slots: dict = {}
        self.held: dict = {}  # holder -> {host: slots held}
        self.gone: set = set()  # holders forgotten (dead): a slot granted to one afterwards is given back
        self.counts: dict = {}  # class -> provisional accepted images, for classes split over actors
        self.taken: dict = {}  # holder -> {class: its part of counts}, given back when it is forgotten

    async def acquire(self, host: str, holder: int) -> None:
        import asyncio

        slot = self.slots.setdefault(host, asyncio.Semaphore(self.limit))
        if holder in self.gone:
            raise HolderGone(holder)
        await slot.acquire()
        if holder in self.gone:  # asked before it was forgotten, granted after: nobody would release it, and
            slot.release()       # its job's results are dropped (an actor only unreachable must not go over the limit)
            raise HolderGone(holder)
        hosts = self.held.setdefault(holder, {})
        hosts[host] = hosts.get(host, 0) + 1

    async def release(self, host: str, holder: int) -> None:
        hosts = self.held.get(holder, {})
        if hosts.get(host, 0) > 0:  # (a forgotten holder's late release: its slots were given back already)
            hosts[host] -= 1
            self.slots[host].release()

    async def forget(self, holder: int) -> int:
        """Give back every slot ``holder`` holds (its actor died mid-request) and its part of the classes'
        shared counts (its job runs again); returns how many slots."""
        self.gone.add(holder)
        for wnid, n in self.taken.pop(holder, {}).items():
            self.counts[wnid] -= n
        freed = 0
        for host, n in self.held.pop(holder, {}).items():
            for _ in range(n):
                self.slots[host].release()
            freed += n
        return freed

    async def in_use(self, host: str) -> int:
        """Slots of ``host`` taken now (tests)."""
        return sum(hosts.get(host, 0) for hosts in self.held.values())

    # The provisional count of accepted images of each class whose result pages several actors crawl at
    # once (their threads share it, as a local crawl's threads share the Collector's): kept here, in the
    # crawl's one state actor, not in an actor per class (each actor is a process: 8 of them halved the
    # crawl's speed on this 2-core machine).
    async def take(self, wnid: str, limit: int, holder: int) -> bool:
        if holder in self.gone or self.counts.get(wnid, 0) >= limit:
            return False
        self.counts[wnid] = self.counts.get(wnid, 0) + 1
        mine = self.taken.setdefault(holder, {})
        mine[wnid] = mine.get(wnid, 0) + 1
        return True

    async def total(self, wnid: str) -> int:
        return self.counts.get(wnid, 0)


class BufferingCollector:
    """What a crawl's threads ask of a :class:`crawl.store.Collector`, on an actor: URLs claimed once per
    class, verdicts and accepted bytes kept in memory (:attr:`items`), a provisional count of accepted
    images that stops the class at k. Nothing is written; the driver's Collector decides for real."""

    def __init__(self, wnid: str, usable: int, seen_urls, rows: list[dict], shared=None, holder: int = 1):
        self.wnid = wnid
        self.holder = holder  # the actor's name in the shared counts
        self.usable_before = int(usable)
        self.accepted_here = 0
        self.shared = shared  # the crawl's HostSlots actor when the class's pages are split: its count is shared there
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
        if self.shared is not None:
            import ray

            return self.usable_before + int(ray.get(self.shared.total.remote(self.wnid)))
        with self._lock:
            return self.usable_before + self.accepted_here

    def reuse(self, wnid: str, other: dict, provenance: dict, *, target: int | None = None):
        return None  # (never offered: claim_url never hands back another class's row)

    def raise_if_store_failed(self) -> None:
        return None  # nothing is stored here

    def _accept(self, target: int) -> bool:
        """Whether one more image may be accepted for the class (and counted, when shared)."""
        if self.shared is None:
            return self.usable_before + self.accepted_here < target
        import ray

        return bool(ray.get(self.shared.take.remote(self.wnid, target - self.usable_before, self.holder)))


    def record(self, wnid: str, provenance: dict, *, facts: ImageFacts | None = None, data: bytes | None = None,
               rejection: Rejected | None = None, target: int | None = None) -> Outcome:
        with self._lock:
            status = "rejected"
            if rejection is None and facts is not None:
                if facts.sha256 in self._shas:
                    status = "duplicate"
                elif target is not None and self._accept(target) is False:
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
    return ipc_bytes(pa.table(columns).replace_schema_metadata({"wildlens": json.dumps(meta)}))


def decode_items(blob: bytes) -> tuple[list[dict], dict]:
    table = ipc_table(blob)
    meta = json.loads((table.schema.metadata or {}).get(b"wildlens", b"{}"))
    return table.to_pylist(), meta


class CrawlActor:
    """A Ray actor that crawls whole classes (:meth:`crawl_class`) with the local crawl's code."""

    def __init__(self, slots, holder: int = 1):
        self.slots = slots  # the crawl's HostSlots actor
        self.holder = holder  # the name this actor's requests hold their slots in

    @contextmanager
    def _gate(self, url: str):
        from urllib.parse import urlsplit

        import ray

        host = (urlsplit(url).hostname or "").lower()
        ray.get(self.slots.acquire.remote(host, self.holder))
        try:
            yield
        finally:
            self.slots.release.remote(host, self.holder)

    @staticmethod
    def _network_check(config) -> Callable[[], str | None]:
        """The local crawl's check after many image hosts fail: is the engine still reachable?"""
        def check() -> str | None:
            reach = check_engine(config.engine, config)
            return None if reach.ok else f"{reach.host}: {reach.detail}"
        return check

    def crawl_class(self, job: dict) -> bytes:
        wnid, config = job["wnid"], job["config"]
        collector = BufferingCollector(wnid, job["usable"], job["seen_urls"], job["rows"])
        meta: dict = {"notes": [], "error": None, "unreachable": False}
        try:
            meta["notes"] = _crawl_class(collector, wnid, job["k"], get_engine(config.engine), config, job["base_url"],
                                         job["api_key"], job["label_space"], job["terms"], on_tick=lambda: None,
                                         network_check=self._network_check(config), gate=self._gate)
        except CrawlError as exc:  # the engine lost: what was found so far still goes back to be stored
            meta.update(error=str(exc), unreachable=isinstance(exc, EngineUnreachable))
        return encode_items(collector.items, meta)

    def crawl_pages(self, job: dict) -> bytes:
        """One range of result pages of a class's first search term (``offset``, ``max_num``), with the
        class's count shared with the other actors crawling its other pages (:meth:`HostSlots.take`)."""
        from core.labels import get_label_space

        wnid, config = job["wnid"], job["config"]
        name = get_label_space(job["label_space"]).display_name(wnid)
        collector = BufferingCollector(wnid, job["usable"], job["seen_urls"], job["rows"], shared=self.slots,
                                       holder=self.holder)
        meta: dict = {"notes": [], "error": None, "unreachable": False}
        try:
            crawl_term(collector, wnid, job["term"], job["k"], get_engine(config.engine), config, job["base_url"],
                       job["api_key"], job["offset"], job["max_num"], None, self._network_check(config), self._gate,
                       notes=lambda texts: meta["notes"].extend(f"{wnid} {name}: {t}" for t in texts))
        except CrawlError as exc:
            meta.update(error=str(exc), unreachable=isinstance(exc, EngineUnreachable))
        return encode_items(collector.items, meta)


def _job(work: ClassWork, wnid: str) -> dict:
    rows = [r for r in work.collector.rows if r.get("wnid") == wnid]
    return {"wnid": wnid, "k": work.k, "terms": list(work.plan[wnid]), "usable": work.collector.usable_count(wnid),
            "seen_urls": sorted({r["url"] for r in rows if isinstance(r.get("url"), str)
                                 and not work.collector.will_retry(wnid, r["url"])}),  # (fetched again: a failure that may pass)
            "rows": [{"wnid": wnid, "search_term": r.get("search_term")} for r in rows], "config": work.config,
            "base_url": work.base_url, "api_key": work.api_key, "label_space": work.label_space}


SPLIT_FROM_PAGES = 2  # a class still short of k by this many result pages or more is split over actors


def _jobs(work: ClassWork, index: int, wnid: str, actors: int) -> list[tuple[int, str, dict]]:
    """A class's jobs: one class job (every search term in turn, as a local crawl), or, for a class
    short by :data:`SPLIT_FROM_PAGES` result pages or more with several actors, the first term's first
    pages (as many as k still needs) split into ranges over the actors, sharing one count; a class
    still short after them goes on as one class job (its seen URLs skipped)."""
    job = _job(work, wnid)
    page = work.spec.page_size
    need = work.k - job["usable"]
    pages = -(-need // page)
    # Only when the classes alone cannot keep the actors busy: splitting costs a round trip to the shared
    # count per image and a class waits for all its ranges (bench_crawl.py: 8 classes on 2 actors, 81 images/s
    # split against 94 whole).
    if actors < 2 or pages < SPLIT_FROM_PAGES or len(work.todo) >= actors:
        return [(index, "class", job)]
    parts = min(actors, pages)
    bounds = [round(p * pages / parts) for p in range(parts + 1)]
    return [(index, "pages", {**job, "term": job["terms"][0], "offset": a * page, "max_num": (b - a) * page})
            for a, b in zip(bounds, bounds[1:]) if b > a]


def _replay(work: ClassWork, wnid: str, items: list[dict]) -> None:
    """A class's verdicts through the real Collector, in term order then rank (deterministic)."""
    order = {term: i for i, term in enumerate(work.plan[wnid])}
    items = sorted(items, key=lambda i: (order.get(i["search_term"], len(order)),
                                         i["rank"] if i["rank"] is not None else 1 << 62))
    for item in items:
        provenance = {k: item[k] for k in _PROVENANCE}
        url = item["url"]
        # One row per (class, URL): an engine that lists a URL on two pages crawled by two actors.
        if url and work.collector.claim_url(wnid, url) == "seen":
            continue
        if item["reject_code"] is not None:
            outcome = work.collector.record(wnid, provenance, rejection=Rejected(item["reject_code"],
                                                                                 item["reject_detail"] or ""),
                                            target=work.k)
        else:
            facts = ImageFacts(*(item[k] for k in _FACTS))
            outcome = work.collector.record(wnid, provenance, facts=facts, data=item["data"], target=work.k)
        if outcome.status == "surplus" and url:
            work.collector.release_url(wnid, url)
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
    ``crawl_run(classes=...)``: ``actors`` (default: one per CPU of the cluster)
    on the cluster at ``address`` (else ``RAY_ADDRESS``, else a local instance), ``per_host``
    requests in flight per host across them."""
    from core.errors import OptionError

    if actors is not None and not 1 <= actors <= 1024:
        raise OptionError(f"--ray-actors {actors}: give 1 to 1024 actors.")
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
            # Never more actors than jobs: classes, or page ranges where there are fewer classes than actors.
            wanted = max(1, actors or max(1, cpus))
            queue = [entry for index, wnid in enumerate(work.todo) for entry in _jobs(work, index, wnid, wanted)]
            size = min(wanted, len(queue))  # planned for fewer actors, the jobs would be the same ones
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # On the driver's node: the crawl's state lives as long as the driver does.
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            slots = ray.remote(num_cpus=0)(HostSlots).options(max_concurrency=1000, scheduling_strategy=here).remote(per_host)
            holders = iter(range(1, 1 << 62))  # each actor, replacements included, holds slots in its own name

            def new_actor():
                holder = next(holders)
                return holder, ray.remote(num_cpus=0, max_restarts=0)(CrawlActor).options(
                    scheduling_strategy="SPREAD", max_concurrency=1).remote(slots, holder)

            pool = [new_actor() for _ in range(size)]
            from collections import Counter, defaultdict

            from ray.exceptions import RayActorError

            outstanding = Counter(index for index, _, _ in queue)  # a class's jobs not back yet
            results = defaultdict(list)  # class index -> its jobs' results (blobs)
            split = {index for index, kind, _ in queue if kind == "pages"}
            free = list(range(size))
            busy = {}  # future -> (actor index, class index, kind, job)
            tries = Counter()  # (class index, kind, first result page) -> runs of that job on an actor that died
            done_to = 0
            work.tick(work.todo[0])
            try:
                while done_to < len(work.todo):
                    while free and queue:
                        actor, (index, kind, job) = free.pop(), queue.pop(0)
                        handle = pool[actor][1]
                        method = handle.crawl_pages if kind == "pages" else handle.crawl_class
                        busy[method.remote(job)] = (actor, index, kind, job)
                    ready, _ = ray.wait(list(busy), num_returns=1, timeout=0.2)
                    for future in ready:
                        actor, index, kind, job = busy.pop(future)
                        try:
                            blob = ray.get(future)
                        except RayActorError as exc:  # the actor died with the job: it wrote nothing, run it again
                            try:
                                ray.get(slots.forget.remote(pool[actor][0]))
                            except RayActorError as lost:  # the crawl's state actor itself
                                raise CrawlError(f"the crawl's state on Ray was lost ({one_line(lost, 200)}); the classes "
                                                 "stored so far stay stored: run the same command again to resume") from None
                            ray.kill(pool[actor][1])  # (if only unreachable, not dead: gone for good)
                            pool[actor] = new_actor()
                            free.append(actor)
                            key = (index, kind, job.get("offset"))
                            tries[key] += 1
                            if tries[key] >= JOB_TRIES:
                                raise CrawlError(f"{work.todo[index]}: its crawl on Ray lost its actor {tries[key]} "
                                                 f"times ({one_line(exc, 200)}); the classes stored so far stay stored: "
                                                 "run the same command again to resume") from None
                            queue.insert(0, (index, kind, job))
                            continue
                        free.append(actor)
                        results[index].append(blob)
                        outstanding[index] -= 1
                    # Classes are replayed in order (a class done early waits): the accepted set is the local crawl's.
                    while done_to < len(work.todo) and outstanding[done_to] == 0:
                        wnid = work.todo[done_to]
                        items, meta = [], {"notes": [], "error": None, "unreachable": False}
                        futures = results.pop(done_to)
                        for blob in futures:
                            more, part = decode_items(blob)
                            items += more
                            meta["notes"] += [n for n in part["notes"] if n not in meta["notes"]]
                            if part["error"] and not meta["error"]:
                                meta.update(error=part["error"], unreachable=part["unreachable"])
                        _replay(work, wnid, items)
                        work.collector.save()
                        if done_to in split and not meta["error"]:
                            split.discard(done_to)
                            notes += [n for n in meta["notes"] if not _SHORT.match(n)]
                            notes.append(f"{wnid}: its first result pages were crawled by {len(futures)} actors at once")
                            if work.collector.usable_count(wnid) < work.k:  # the rest as a local crawl would go on
                                queue.insert(0, (done_to, "class", _job(work, wnid)))
                                outstanding[done_to] += 1
                                break
                            meta["notes"] = []
                        notes += _class_notes(work, wnid, meta["notes"])
                        work.tick(wnid)
                        if meta["error"]:
                            raise (EngineUnreachable if meta["unreachable"] else CrawlError)(meta["error"])
                        done_to += 1
                    if not ready and busy and done_to < len(work.todo):
                        work.tick(work.todo[done_to])
            finally:
                for handle in [*(h for _, h in pool), slots]:
                    ray.kill(handle)
        return notes

    return run
