"""Crawl k images per class into a run (or a folder), resumably.

``crawl_run(run, wnids, k)`` is what the dashboard and ``python -m crawl fetch`` call. For each
class it tops the class up to k accepted images: classes that already have k are skipped
without contacting the engine; for the others, search terms are tried in turn (the class's
ImageNet lemmas, a lemma shared with another class qualified by the hypernym as in 'crane bird',
optionally with a context word; or the terms the caller gives, ``search_terms={wnid: [...]}``)
and URLs already in the manifest for that class are never fetched again. The manifest is
written every few images and after each class.

Offline, step by step (no network, DNS failing, or the engine blocked):
1. Before any request for images (and only if some class is short of k), ``check_engine``
   sends one HEAD request to the engine with a hard deadline (``probe_timeout``, 5 s by
   default; name resolution runs in a helper thread because it has no timeout of its own).
2. If that fails, ``crawl_run`` raises ``EngineUnreachable`` at once: "cannot reach
   www.bing.com: <why>. No internet? Use local import: python -m crawl import SRC --out DIR ...".
   Nothing is written or created; a run's existing manifest and images are untouched.
3. If the network drops during a crawl, the first result page that cannot be fetched
   (connection error or timeout) stops the class, and five image hosts in a row failing on
   DNS or routing trigger the same check as in step 1. The manifest is saved with every image
   finished so far, then ``EngineUnreachable`` is raised; re-running later resumes.
Classes that end short of k are said so per class (``short_by`` and a note), with what really
happened for each search term: the engine listed no more images (an empty result page), the
crawl stopped after N result pages because the look-ahead budget of this run was spent (the
next run looks further), the engine rate-limited the crawl (HTTP 429: the class's other terms
are not tried, the next run resumes), or result pages failed (each failure has its own note).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

import pandas as pd

from core.errors import OptionError
from core.labels import DEFAULT_LABEL_SPACE, get_label_space
from core.wordgraph import noun_graph, noun_of as synset_of  # NLTK's nouns as arrays
from core.wordnet import wnid_of
from core.progress import ProgressCallback, report
from core.runstore import Run

from .config import CrawlConfig
from .engines import ENGINES, EngineCrawler, TermJob, get_engine
from .http import Reachability, probe
from .store import (CollectError, Collector, as_destination, check_manifest, check_writable, exclusive, leftover_notes,
                    summarise, sweep_leftovers)

# Threads that store accepted files (crawl.store.Collector), as an import does (crawl.importer).
# Why: with none, a file that could not be stored (a full disk) raised inside a download thread,
# whose catch-all logged it and went on: the crawl "finished" short and never said the disk was
# full (tests/crawl/test_engine.py). Writers record the failure, and the next save ends the crawl
# with the one-line error; rows are journalled before their files are handed over and every save
# waits for the files it lists. Speed: no measurable change here (fsync is cheap on this disk).
CRAWL_WRITERS = 4

IMPORT_HINT = ("Use local import: python -m crawl import SRC --out DIR "
               "(SRC holds one folder of images per class, named by wnid or class name)")


class CrawlError(CollectError):
    """A crawl that cannot go on; ``summary`` holds what was done before it stopped."""

    def __init__(self, message: str, summary: "CrawlSummary | None" = None):
        super().__init__(message)
        self.summary = summary


class EngineUnreachable(CrawlError):
    """The search engine cannot be reached (no internet, DNS failure, blocked)."""


def unreachable_message(host: str, detail: str) -> str:
    return f"cannot reach {host}: {detail}. No internet? {IMPORT_HINT}."


# --------------------------------------------------------------------------- engine checks
def engine_base_url(engine: str, config: CrawlConfig = CrawlConfig()) -> str:
    return (config.base_url or get_engine(engine).base_url).rstrip("/")


def check_engine(engine: str = "bing", config: CrawlConfig = CrawlConfig()) -> Reachability:
    """Whether the engine answers at all, within ``config.probe_timeout`` seconds. Cheap: one
    HEAD request, no search. The dashboard can call it before offering to crawl."""
    return probe(engine_base_url(engine, config) + "/", timeout=config.probe_timeout, user_agent=config.user_agent)


def _api_key(engine_name: str, config: CrawlConfig) -> str | None:
    engine = get_engine(engine_name)
    if not engine.needs_api_key:
        return None
    key = config.api_key or os.environ.get("FLICKR_APIKEY")
    if not key:
        raise CrawlError(f"{engine.name} needs an API key: create one at https://www.flickr.com/services/apps/create/ "
                         "and pass --api-key KEY (or set FLICKR_APIKEY). Bing needs no key.")
    return key


# --------------------------------------------------------------------------- search terms
def _is_noun_wnid(wnid: str) -> bool:
    try:
        synset_of(wnid)
    except (KeyError, ValueError):
        return False
    return True


def homonyms(wnid: str, label_space: str = DEFAULT_LABEL_SPACE) -> dict[str, list[str]]:
    """The class's lemmas that also name another class of the label space -> those classes'
    wnids. ImageNet-1k has 'crane' twice (n02012849 the bird, n03126707 the machine), 'maillot',
    'panther', 'tub', 'horn', ...: a search for the bare lemma brings images of the other class.
    Matching is on WordNet noun lemmas, case-insensitive ('Cardigan' the corgi, 'cardigan' the
    sweater), without stemming."""
    space = get_label_space(label_space)
    graph = noun_graph()  # wn.synsets(key, pos="n") with NLTK's morphology, without starting NLTK
    out: dict[str, list[str]] = {}
    for lemma in _lemmas(wnid, label_space):
        key = "_".join(lemma.split()).lower()
        others = [wnid_of(s) for s in graph.synsets(key)
                  if wnid_of(s) != wnid and wnid_of(s) in space and key in {n.lower() for n in s.lemma_names()}]
        if others:
            out[lemma] = others
    return out


def _lemmas(wnid: str, label_space: str) -> list[str]:
    return [lemma.strip() for lemma in get_label_space(label_space).lemmas(wnid).split(",") if lemma.strip()]


def _qualifier(wnid: str, lemma: str) -> str | None:
    """A word from the class's hypernym that the lemma lacks: its head noun ('wading bird' ->
    'bird'), else its other words ('colubrid snake' -> 'colubrid' for 'grass snake')."""
    synset = synset_of(wnid)
    words = set(lemma.lower().split())
    # Hypernyms, then instance hypernyms, each sorted by name (NLTK's own order is a set's, which
    # changed with the process's hash seed when a class has two).
    for hypernym in synset.hypernyms() + synset.instance_hypernyms():
        name = hypernym.lemma_names()[0].replace("_", " ").split()
        if name[-1].lower() not in words:
            return name[-1]
        extra = [w for w in name if w.lower() not in words]
        if extra:
            return " ".join(extra)
    return None


def search_terms(wnid: str, label_space: str = DEFAULT_LABEL_SPACE, context: str | None = None,
                 max_terms: int = 3) -> list[str]:
    """The class's ImageNet lemmas in order ('tabby', 'tabby cat'), without repeats. Lemmas, not
    display strings, because the wnid's own names are what it means. Two rules add a word:

    1. Disambiguation: a lemma that also names another class of the label space (see
       ``homonyms``) gets the head noun of the class's hypernym: the bird n02012849 is searched
       as 'crane bird' (hypernym: wading bird), the machine n03126707 as 'crane device'
       (hypernym: lifting device), never as 'crane' alone.
    2. Context: the context word, if given, is appended unless the term already contains it
       ('Persian cat' stays, 'tabby' + 'cat' -> 'tabby cat').
    ``default_search_terms`` gives these for many classes; ``crawl_run(search_terms=...)`` replaces them."""
    ambiguous = homonyms(wnid, label_space)
    terms: list[str] = []
    for lemma in _lemmas(wnid, label_space):
        term = lemma
        if lemma in ambiguous:
            qualifier = _qualifier(wnid, lemma)
            term = f"{lemma} {qualifier}" if qualifier else lemma
        if context and context.strip().lower() not in term.lower().split():
            term = f"{term} {context.strip()}"
        if term.lower() not in {t.lower() for t in terms}:
            terms.append(term)
    return terms[:max(1, max_terms)]


def default_search_terms(wnids, label_space: str = DEFAULT_LABEL_SPACE, context: str | None = None,
                         max_terms: int = CrawlConfig().max_terms) -> dict[str, list[str]]:
    """wnid -> the search terms ``crawl_run`` tries for it, in order, unless told otherwise: what a
    page shows for editing before a crawl (``python -m crawl terms`` prints them). A wnid that is
    neither a class of the label space nor a WordNet 3.0 noun is CrawlError (one line; it was a
    KeyError traceback)."""
    wnids = list(dict.fromkeys(wnids))
    check_wnids(wnids, label_space)
    return {wnid: search_terms(wnid, label_space, context, max_terms) for wnid in wnids}


def check_wnids(wnids, label_space: str = DEFAULT_LABEL_SPACE) -> None:
    """CrawlError naming every wnid that can be neither crawled nor searched for: not a class of the
    label space and no WordNet 3.0 noun (an ImageNet-21k-only hyponym is fine: its lemmas are its terms)."""
    space = get_label_space(label_space)
    missing = [w for w in wnids if w not in space and not _is_noun_wnid(w)]
    if missing:
        raise CrawlError(f"Not WordNet 3.0 noun ids: {', '.join(missing)}; give wnids such as n02123045.")


MAX_TERM_CHARS = 200


def clean_search_terms(terms) -> list[str]:
    """One class's search terms as given by a person: a list, or one text with terms separated by
    ';' ('crane bird; whooping crane'). Whitespace is collapsed, empty and repeated terms dropped."""
    items = terms.split(";") if isinstance(terms, str) else list(terms or [])
    out: list[str] = []
    for item in items:
        term = " ".join(str(item).split())
        if not term or term.lower() in {t.lower() for t in out}:
            continue
        if len(term) > MAX_TERM_CHARS:
            raise OptionError(f"A search term is {len(term)} characters long; at most {MAX_TERM_CHARS}: {term[:40]}…")
        out.append(term)
    return out


def _term_plan(wnids: list[str], label_space: str, config: CrawlConfig, given) -> dict[str, list[str]]:
    """The terms to search per class: the defaults, with the classes in ``given`` replaced."""
    plan = default_search_terms(wnids, label_space, config.context, config.max_terms)
    if not given:
        return plan
    unknown = [w for w in given if w not in plan]
    if unknown:
        raise OptionError(f"Search terms given for {', '.join(unknown)}, which this crawl does not collect "
                          f"(its classes: {', '.join(wnids)}).")
    for wnid, terms in given.items():
        cleaned = clean_search_terms(terms)
        if not cleaned:
            raise OptionError(f"No search term left for {wnid} ({get_label_space(label_space).display_name(wnid)}): "
                              "give at least one, or leave the class out to search its default terms.")
        plan[wnid] = cleaned
    return plan


# --------------------------------------------------------------------------- summary
@dataclass
class CrawlSummary:
    """What a crawl did. ``per_class``: see crawl.store.summarise (requested, accepted,
    duplicate, rejected, rejected:<reason>, short_by)."""

    engine: str
    k: int
    destination: str
    per_class: pd.DataFrame
    new_rows: int = 0
    new_accepted: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # human lines: engine caveats, short classes
    removed_leftovers: int = 0

    @property
    def complete(self) -> bool:
        return bool((self.per_class["short_by"] == 0).all()) if len(self.per_class) else True


# --------------------------------------------------------------------------- crawl
@dataclass
class ClassWork:
    """What a runner of a crawl's classes needs (``crawl_run(classes=...)``): the classes still short of
    k in order, their search terms, the engine and its settings, and the crawl's callbacks."""

    collector: Collector
    todo: list[str]
    k: int
    spec: object  # crawl.engines.Engine
    config: CrawlConfig
    base_url: str
    api_key: str | None
    label_space: str
    plan: dict[str, list[str]]
    tick: Callable[[str], None]  # progress after a class (or during one), from the caller's thread
    network_check: Callable[[], str | None]


def local_classes(work: ClassWork) -> list[str]:
    """The classes one after another in this process (``crawl_run``'s default runner): each class's
    search terms in turn, its images fetched by ``config.threads`` threads; the manifest saved after
    each class. Returns the notes."""
    notes: list[str] = []
    if work.todo:
        work.tick(work.todo[0])
    for wnid in work.todo:
        notes += _crawl_class(work.collector, wnid, work.k, work.spec, work.config, work.base_url, work.api_key,
                              work.label_space, work.plan[wnid], on_tick=lambda w=wnid: work.tick(w),
                              network_check=work.network_check)
        work.collector.save()
        work.tick(wnid)
    return notes


def crawl_run(run, wnids, k: int, engine: str | None = None, config: CrawlConfig = CrawlConfig(),
              progress: ProgressCallback | None = None, label_space: str | None = None,
              search_terms: dict | None = None, classes: Callable[[ClassWork], list[str]] = local_classes) -> CrawlSummary:
    """Top every class in ``wnids`` up to ``k`` accepted images in ``run`` (a Run, or a folder
    path for a plain DIR/<wnid>/ + DIR/manifest.csv layout). Raises EngineUnreachable (with the
    partial summary) when the engine cannot be reached, CrawlError for other blocking problems.

    ``search_terms``: {wnid: [terms]} (or {wnid: 'term; term'}) replaces the default terms of those
    classes (``default_search_terms``), tried in the order given; each image's manifest row
    records the term that found it (``search_term``). Checked before anything is contacted.

    ``classes`` runs the classes still short of k (:func:`local_classes` here;
    ``crawl.ray_crawl.ray_classes`` on Ray actors); this process stays the only writer either way."""
    engine_name = (engine or config.engine).lower()
    spec = get_engine(engine_name)
    config = config.with_changes(engine=engine_name)
    wnids = list(dict.fromkeys(wnids))
    if k < 1:
        raise OptionError(f"k must be at least 1, not {k}.")
    dest = as_destination(run)
    label_space = label_space or (run.info.label_space if isinstance(run, Run) else DEFAULT_LABEL_SPACE)
    # A class outside the label space (an ImageNet-21k-only hyponym such as leopard cat for an
    # IN-1k run) is crawled like any other: its search terms are its WordNet lemmas. Only a wnid
    # that is no WordNet 3.0 noun is refused.
    check_wnids(wnids, label_space)
    space = get_label_space(label_space)
    plan = _term_plan(wnids, label_space, config, search_terms)
    api_key = _api_key(engine_name, config)
    base_url = engine_base_url(engine_name, config)
    host = urlsplit(base_url).hostname or base_url
    started = time.monotonic()

    check_writable(dest, wnids)  # a read-only destination, a missing or damaged manifest: say so before any work
    check_manifest(dest)
    before = summarise(dest.read_manifest(), wnids, k)
    if (before["short_by"] > 0).any():  # only then is the engine needed; offline, nothing is touched
        reach = check_engine(engine_name, config)
        if not reach.ok:
            raise EngineUnreachable(unreachable_message(host, reach.detail), CrawlSummary(engine_name, k, dest.describe(), before))

    with exclusive(dest):
        collector = Collector(dest, config.validation, save_every=config.save_every, writers=CRAWL_WRITERS)
        removed, unrecorded = sweep_leftovers(dest, collector.manifest(), wnids)
        summary = CrawlSummary(engine_name, k, dest.describe(), summarise(collector.manifest(), wnids, k),
                               removed_leftovers=removed)
        summary.notes += leftover_notes(removed, unrecorded, "run")
        todo = [w for w in wnids if collector.usable_count(w) < k]
        total = k * len(wnids)

        last_event: list = [None]

        def tick(current: str):
            """Report from the caller's thread (Streamlit cannot be updated from others), on change only."""
            done = sum(min(k, collector.usable_count(w)) for w in wnids)
            message = f"{space.display_name(current)} ({current}): {collector.usable_count(current)}/{k} accepted"
            if last_event[0] != (done, message):
                last_event[0] = (done, message)
                report(progress, "crawl", done, total, dest.describe(), message)

        def network_check() -> str | None:
            reach = check_engine(engine_name, config)
            return None if reach.ok else f"{host}: {reach.detail}"

        try:
            summary.notes += classes(ClassWork(collector, todo, k, spec, config, base_url, api_key, label_space, plan,
                                               tick, network_check))
        except CrawlError as exc:
            exc.summary = summary
            raise
        finally:  # finished, failed or interrupted (Ctrl-C, a cancelled dashboard): keep what was done
            collector.close()
            collector.save()
            _finish(summary, collector, wnids, k, started)
            if isinstance(run, Run) and summary.new_rows:
                _update_run_info(run, wnids, k, engine_name, label_space)
    return summary


def crawl_term(collector, wnid: str, term: str, k: int, spec, config: CrawlConfig, base_url: str, api_key: str | None,
               offset: int, max_num: int, on_tick, network_check, gate=None, notes=None) -> tuple[TermJob, EngineCrawler]:
    """One search term's result pages ``offset`` .. ``offset + max_num`` for class ``wnid``, until the
    collector has k accepted images; returns the term's job and crawler (how it ended). ``notes``
    receives the term's notes before an unreachable engine is raised (EngineUnreachable)."""
    job = TermJob(wnid, term, k, spec, config, collector, base_url, api_key)
    if gate is not None:
        job.gate = gate
    crawler = EngineCrawler(spec, config, base_url)
    feeder_kwargs = {"keyword": term, "offset": offset, "max_num": max_num}
    feeder_kwargs.update({"apikey": api_key} if spec.needs_api_key else {"filters": config.filters})
    crawler.run(job, feeder_kwargs, on_tick=on_tick, on_network_suspect=network_check)
    collector.raise_if_store_failed()  # a full disk: the crawl's error, not the next term's crawl
    if notes is not None:
        notes(job.notes)
    error = crawler.signal.get("engine_error")
    if error:
        host, _, detail = error.partition(": ")
        raise EngineUnreachable(unreachable_message(host, detail or error) + " Re-run later to resume.")
    return job, crawler


def _crawl_class(collector: Collector, wnid: str, k: int, spec, config: CrawlConfig, base_url: str,
                 api_key: str | None, label_space: str, terms: list[str], on_tick, network_check,
                 gate=None) -> list[str]:
    """One class's search terms in turn until it has k accepted images; its notes. ``gate(url)``: a
    context manager around each request (crawl.ray_crawl's cluster-wide per-host limit)."""
    notes: list[str] = []
    name = get_label_space(label_space).display_name(wnid)
    ends: list[tuple[str, str, TermJob]] = []  # (term, how its crawl ended, its job), for a short class's note
    for term in terms:
        needed = k - collector.usable_count(wnid)
        if needed <= 0:
            break
        seen_for_term = sum(1 for row in collector.rows if row["wnid"] == wnid and row["search_term"] == term)
        budget = min(spec.max_results, config.max_results, seen_for_term + math.ceil(needed * config.oversample))
        budget = max(spec.page_size, math.ceil(budget / spec.page_size) * spec.page_size)  # whole pages
        job, crawler = crawl_term(collector, wnid, term, k, spec, config, base_url, api_key, 0, budget, on_tick,
                                  network_check, gate, notes=lambda texts: notes.extend(f"{wnid} {name}: {t}" for t in texts))
        if job.rate_limited:
            ends.append((term, "rate-limited", job))
            break  # the engine asked to slow down: the class's other terms would be refused too
        # An empty or short last page: the engine has no more. A full one at the end of the
        # budget: the engine may have more, the next run looks further.
        exhausted = crawler.signal.get("exhausted") or (job.pages and not job.last_page_full)
        ends.append((term, "exhausted" if exhausted else "budget" if job.pages * spec.page_size >= budget else "failed",
                     job))
    usable = collector.usable_count(wnid)
    if usable < k:
        notes.append(f"{wnid} {name}: {usable}/{k} accepted; {_why_short(ends, spec.name)}")
    return notes


def _why_short(ends: list[tuple[str, str, TermJob]], engine: str) -> str:
    """What ended each search term's crawl of a class that is short of k, in one line."""
    if ends and ends[-1][1] == "rate-limited":
        term, _, job = ends[-1]
        return (f"{engine} rate-limited the crawl (HTTP 429) at {term!r} after {job.pages} result page(s): wait a few "
                "minutes, then run the same command again to resume")
    if all(end == "exhausted" for _, end, _ in ends):
        return (f"the engine listed no more usable images for {', '.join(repr(t) for t, _, _ in ends)}"
                " (add a context word, another engine, or import images)")
    parts = []
    for term, end, job in ends:
        if end == "exhausted":
            parts.append(f"{term!r}: the engine listed no more usable images")
        elif end == "budget":
            parts.append(f"{term!r}: stopped after {job.pages} result page(s) ({job.results} image URLs), the "
                         "look-ahead budget of this run")
        else:
            parts.append(f"{term!r}: result pages failed ({job.pages} read; see the notes above)")
    advice = ("run the same command again to look further" if any(end == "budget" for _, end, _ in ends)
              else "add a context word, another engine, or import images")
    return "; ".join(parts) + f": {advice}"


def _finish(summary: CrawlSummary, collector: Collector, wnids, k, started) -> CrawlSummary:
    new = collector.new_rows
    summary.per_class = summarise(collector.manifest(), wnids, k)
    summary.new_rows = len(new)
    summary.new_accepted = sum(1 for r in new if r["status"] == "accepted")
    summary.seconds = time.monotonic() - started
    return summary


def _update_run_info(run: Run, wnids, k: int, engine: str, label_space: str) -> None:
    info = run.info
    space = get_label_space(label_space)
    merged = sorted(set(info.wnids) | set(wnids), key=lambda w: space.index.get(w, len(space)))
    source = f"crawl:{engine}"
    sources = [s for s in (info.source or "").split("+") if s]
    run.update_info(wnids=merged, images_per_class=max(k, info.images_per_class or 0),
                    source="+".join(sources + [source]) if source not in sources else info.source)


def available_engines() -> dict[str, str]:
    """Engine name -> a note for a select box."""
    return {name: spec.note for name, spec in ENGINES.items()}
