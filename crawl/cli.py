"""Command line of crawl/: ``python -m crawl <command>``.

  fetch   crawl k images per class of a query into a run or a folder (resumes)
  terms   print the search terms fetch would use per class (change them with fetch --term)
  import  copy a local folder SRC/<wnid or class name>/<images> into a run or a folder; a new
          run is created only when an image is accepted; --map FOLDER=CLASS / --skip FOLDER
          decide folders whose name is ambiguous or unknown
  check   tell whether a search engine can be reached from this machine
  summary per-class figures of a run's or a folder's manifest
  curate  tag, relabel, exclude or include images of a run, undo an entry, or list the log
          (core.curation: an append-only log; images and the manifest are never changed)
  export  a run's curated image set (--raw: as collected) as an image folder or a FiftyOne image
          classification dataset, into a new or empty folder (crawl/export.py)

Exit status: 0 done; 1 done but some class is short of k; 2 bad input or other error;
3 the search engine cannot be reached (no internet?).
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from pathlib import Path

import pandas as pd

from core.errors import OptionError, WildLensError, one_line, printable
from core.intervals import DEFAULT_HALF_WIDTH, format_half_width, images_needed
from core.labels import DEFAULT_LABEL_SPACE, hyponym_classes, label_space_names
from core.progress import TerminalProgress
from core.runstore import RunStore, StoreError
from core.userfile import expand_user

from .config import DEFAULT_FORMATS, CrawlConfig, ValidationConfig
from .crawler import (EngineUnreachable, available_engines, check_engine, crawl_run, default_search_terms,
                      unreachable_message)
from .importer import import_folder, import_new_run, resolve_class_name
from .store import CollectError, FolderDestination, summarise

EXIT_SHORT, EXIT_ERROR, EXIT_OFFLINE = 1, 2, 3


def _size(text: str) -> tuple[int, int]:
    """'64' -> (64, 64); '200x100' -> (200, 100)."""
    parts = text.lower().split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or WxH, e.g. 64 or 200x100") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or WxH with positive numbers")
    return values[0], values[1]


def _validation(args) -> ValidationConfig:
    if not (math.isfinite(args.max_mb) and args.max_mb > 0):  # int(nan * 2**20) and int(inf) were tracebacks
        raise OptionError(f"--max-mb must be a positive number of MiB (default 20), not {args.max_mb}.")
    formats = tuple(f.strip().upper().replace("JPG", "JPEG") for f in args.formats.split(",") if f.strip())
    return ValidationConfig(min_width=args.min_size[0], min_height=args.min_size[1], formats=formats,
                            max_bytes=int(args.max_mb * 1024 * 1024), phash_threshold=args.phash_threshold)


def _add_validation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-size", type=_size, default=(64, 64), metavar="N|WxH", help="smallest accepted image (default 64)")
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS), help="accepted formats (default: %(default)s)")
    p.add_argument("--max-mb", type=float, default=20.0, help="largest accepted file in MiB (default 20)")
    p.add_argument("--phash-threshold", type=int, default=ValidationConfig().phash_threshold,
                   help="near-duplicate pHash distance, of 64 bits (default %(default)s; -1 turns it off)")


def _add_destination_args(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", metavar="RUN_ID", help="a run of the run store ($WILDLENS_HOME); created if missing")
    where.add_argument("--out", type=Path, metavar="DIR", help="a folder: DIR/<wnid>/<hash>.<ext> and DIR/manifest.csv")
    p.add_argument("--label-space", default=None, choices=label_space_names(),
                   help=f"classes to resolve against (default: the run's, else {DEFAULT_LABEL_SPACE})")


def _destination(args, **new_run_info):
    if args.out is not None:
        return args.out, args.label_space or DEFAULT_LABEL_SPACE
    store = RunStore()
    try:
        run = store.open_run(args.run)
    except StoreError:
        try:
            run = store.create_run(run_id=args.run, label_space=args.label_space or DEFAULT_LABEL_SPACE, **new_run_info)
        except OSError as exc:  # a read-only $WILDLENS_HOME: one line, not a traceback
            raise CollectError(f"Cannot create run {args.run} in {store.runs_dir}: {exc.strerror or exc}; set "
                               "$WILDLENS_HOME to a folder you can write to, or use --out DIR.") from None
        print(f"created run {run.run_id} in {store.runs_dir}", file=sys.stderr)
    return run, args.label_space or run.info.label_space


def _run_exists(run_id: str) -> bool:
    try:
        RunStore().open_run(run_id)
        return True
    except StoreError:
        return False


def _print_table(df: pd.DataFrame) -> None:
    # printable: the cells come from a manifest a person may have edited (a wnid cell holding an escape
    # sequence reached the terminal raw; hostile check, 2026-12-07).
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print("\n".join(map(printable, df.to_string(index=False).split("\n"))) if len(df) else "(no classes)")


MAX_K = 1_000_000  # images per class: an engine returns a few hundred a term; 99999999999999999999 was an OverflowError


def _check_k(k: int | None) -> None:
    if k is not None and not 1 <= k <= MAX_K:
        raise OptionError(f"--k must be a whole number from 1 to {MAX_K:,}, not {k}.")


def _classes(args, label_space: str) -> list[str]:
    if args.wnids is not None:  # '' fell through to the query, None, and resolved the word "none"
        wnids = [w.strip() for w in args.wnids.split(",") if w.strip()]
        if not wnids:
            raise OptionError("--wnids needs at least one wnid, e.g. --wnids n02123045,n02123159.")
        return wnids
    return [c.wnid for c in hyponym_classes(args.query, label_space)]


def _terms(items: list[str] | None) -> dict[str, list[str]] | None:
    """--term WNID=TEXT, repeatable: WNID -> its terms, in the order given."""
    bad = [item for item in items or [] if "=" not in item]
    if bad:
        raise OptionError(f"--term expects WNID=TEXT (e.g. n02012849='crane bird'), not {', '.join(bad)}")
    terms: dict[str, list[str]] = {}
    for item in items or []:
        wnid, text = item.split("=", 1)
        terms.setdefault(wnid.strip(), []).append(text)
    return terms or None


def cmd_terms(args) -> int:
    label_space = args.label_space or DEFAULT_LABEL_SPACE
    for wnid, terms in default_search_terms(_classes(args, label_space), label_space, args.context,
                                            args.max_terms).items():
        print(f"{wnid}\t{'; '.join(terms)}")
    return 0


def cmd_fetch(args) -> int:
    _check_k(args.k)
    given = [flag for flag, value in (("--ray-address", args.ray_address), ("--ray-actors", args.ray_actors),
                                      ("--ray-per-host", args.ray_per_host)) if value is not None]
    if given and not args.ray:
        raise OptionError(f"{given[0]} is for --ray (the crawl on Ray actors); add --ray or drop it.")
    kwargs = {}
    if args.ray:  # the actor counts checked before any work
        from .ray_crawl import DEFAULT_PER_HOST, ray_classes

        kwargs["classes"] = ray_classes(args.ray_address, args.ray_actors,
                                        DEFAULT_PER_HOST if args.ray_per_host is None else args.ray_per_host)
    label_space = args.label_space or (RunStore().open_run(args.run).info.label_space
                                       if args.run and _run_exists(args.run) else DEFAULT_LABEL_SPACE)
    wnids = _classes(args, label_space)
    terms = _terms(args.term)
    validation = _validation(args)
    bad = [item for item in args.filter or [] if "=" not in item]
    if bad:
        raise OptionError(f"--filter expects KEY=VALUE (e.g. type=photo), not {', '.join(bad)}")
    filters = dict(item.split("=", 1) for item in args.filter) if args.filter else None
    config = CrawlConfig(engine=args.engine, base_url=args.base_url, api_key=args.api_key, threads=args.threads,
                         connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
                         file_deadline=args.deadline, context=args.context, filters=filters, validation=validation,
                         allow_private_hosts=args.allow_private_hosts)
    if args.run is not None and not _run_exists(args.run):
        reach = check_engine(args.engine, config)  # offline: say so before creating an empty run
        if not reach.ok:
            print(f"error: {unreachable_message(reach.host, reach.detail)}", file=sys.stderr)
            return EXIT_OFFLINE
    target, _ = _destination(args, query=args.query or "", sense=args.query or "", wnids=wnids,
                             images_per_class=args.k, source=f"crawl:{args.engine}")
    progress = None if args.no_progress else TerminalProgress()
    try:
        summary = crawl_run(target, wnids, args.k, engine=args.engine, config=config, progress=progress,
                            label_space=label_space, search_terms=terms, **kwargs)
    except EngineUnreachable as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_OFFLINE
    finally:
        if progress is not None:
            progress.close()
    _print_summary(summary, f"{summary.new_accepted} new images accepted in {summary.seconds:.1f}s -> {summary.destination}")
    # What k buys (issue 23 item 4): the widest accuracy interval a class of k images can have. After the
    # crawl, not before: a refused destination stays a one-line error.
    print(f"{format_half_width(args.k)}; \u00b110 points needs {images_needed(DEFAULT_HALF_WIDTH)} images per class",
          file=sys.stderr)
    return 0 if summary.complete else EXIT_SHORT


def _print_summary(summary, last_line: str) -> None:
    """The per-class table on stdout; notes and a one-line total on stderr."""
    _print_table(summary.per_class)
    for note in summary.notes:
        print(f"note: {note}", file=sys.stderr)
    print(last_line, file=sys.stderr)


def _import_mapping(args, label_space: str) -> dict:
    """--map NAME=CLASS (a wnid, a synset name or a class name) and --skip NAME as {folder: wnid or None}."""
    mapping = {}
    for item in args.map or []:
        # At the last '=': no class name, synset name or wnid holds one, while a folder may ('cats=2023';
        # a hostile-input campaign, 2026-12-06: such a folder could never be mapped).
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value.strip():
            raise OptionError(f"--map expects FOLDER=CLASS (e.g. missile=n03773504), not {item!r}")
        wnid = resolve_class_name(value, label_space)
        if mapping.get(name, wnid) != wnid:  # the last one won: a folder's class is never guessed
            raise OptionError(f"--map gives folder {name!r} two classes ({mapping[name]} and {wnid}); keep the one "
                              "--map you mean.")
        mapping[name] = wnid
    for name in args.skip or []:
        if mapping.get(name) is not None:  # the --skip won, silently
            raise OptionError(f"folder {name!r} is both mapped (--map {name}={mapping[name]}) and skipped (--skip "
                              f"{name}); keep one of the two.")
        mapping[name] = None
    return mapping


def cmd_import(args) -> int:
    validation = _validation(args)
    progress = None if args.no_progress else TerminalProgress()
    new_run = args.run is not None and not _run_exists(args.run)
    try:
        if new_run:  # staged: the run exists only once an image is accepted
            label_space = args.label_space or DEFAULT_LABEL_SPACE
            store = RunStore()
            try:
                summary = import_new_run(args.src, _import_mapping(args, label_space), store, title=args.title or "",
                                         label_space=label_space, run_id=args.run, progress=progress,
                                         validation=validation, follow_links=args.follow_links)
            except KeyboardInterrupt:
                print("interrupted: no run was created yet; run the same command again to resume the import",
                      file=sys.stderr)
                return 130
            print(f"created run {summary.run_id} in {store.runs_dir}", file=sys.stderr)
        else:
            target, label_space = _destination(args)
            summary = import_folder(args.src, target, label_space=label_space, progress=progress,
                                    validation=validation, follow_links=args.follow_links,
                                    mapping=_import_mapping(args, label_space))
    finally:
        if progress is not None:
            progress.close()
    for folder, why in summary.folders_skipped.items():
        print(f"note: folder {folder!r} not imported: {why}", file=sys.stderr)
    _print_summary(summary, f"{summary.files_seen} files read, {summary.new_accepted} accepted, "
                            f"{summary.already_imported} already imported, in {summary.seconds:.1f}s -> {summary.destination}")
    return 0


def cmd_check(args) -> int:
    config = CrawlConfig(engine=args.engine, base_url=args.base_url, probe_timeout=args.timeout)
    reach = check_engine(args.engine, config)
    if reach.ok:
        print(f"{reach.host} answers ({reach.detail}, {reach.seconds:.2f}s)")
        return 0
    print(f"error: {unreachable_message(reach.host, reach.detail)}", file=sys.stderr)
    return EXIT_OFFLINE


def cmd_summary(args) -> int:
    _check_k(args.k)
    if args.out is not None:
        if not expand_user(args.out, "--out").is_dir():  # a typo printed '(no classes)', exit 0
            raise OptionError(f"--out {args.out} is not a folder; give the folder an import or crawl wrote "
                              "(it holds manifest.csv).")
        dest = FolderDestination(args.out)
        if not os.path.lexists(dest.manifest_path):  # an empty or unrelated folder printed '(no classes)', exit 0
            raise OptionError(f"--out {args.out} holds no manifest.csv: no import or crawl wrote there; give the folder "
                              "one wrote, or fill this one with 'python -m crawl import SRC --out DIR'.")
        manifest = dest.read_manifest()
    else:
        manifest = RunStore().open_run(args.run).read_manifest()
    _print_table(summarise(manifest, k=args.k))
    return 0


def _images_named(args) -> list[str]:
    """The images of a curate command: its arguments, then one per line of --from FILE ('-': stdin)."""
    images = list(args.images or [])
    if args.images_from:
        if args.images_from == "-":
            text = sys.stdin.read()
        else:
            from core.userfile import read_user_bytes

            try:
                text = read_user_bytes(args.images_from, what=f"--from {args.images_from}",
                                       max_bytes=256 << 20).decode("utf-8")
            except UnicodeDecodeError:
                raise OptionError(f"--from {args.images_from} is not UTF-8 text; give one image name per line.") from None
        images += [line.strip() for line in text.splitlines() if line.strip()]
    return images


def _print_log(run, state) -> None:
    for entry in state.entries:
        status = " (undone)" if entry.seq in state.undone else ""
        note = f"  note: {entry.note}" if entry.note else ""
        # every text in an entry is printable (core.curation refuses control characters): no terminal escapes
        print(f"{entry.describe()}{status}  {entry.time}  by {entry.by or '?'}{note}")
    for problem in state.problems:
        print(f"skipped {problem}", file=sys.stderr)
    print(f"{len(state.entries)} entries; in effect: {state.summary()}")


def cmd_curate(args) -> int:
    """Record one curation action of a run's images (core.curation), or list the log."""
    from core.curation import read_curation, record, run_images, undo

    run = RunStore().open_run(args.run)
    if args.list:
        _print_log(run, read_curation(run))
        return 0
    if args.undo is not None:
        entry = undo(run, args.undo, note=args.note or "", by="cli")
    else:
        images = _images_named(args)
        if not images:
            raise OptionError("name the images to curate (as the run names them, e.g. n02123045/3f2a9c01d4e5b6a7.jpg), "
                              "or --from FILE with one per line.")
        action, value = next((a, v) for a, v in (("tag", args.tag), ("untag", args.untag), ("relabel", args.relabel),
                                                 ("exclude", args.exclude or None), ("include", args.include or None))
                             if v is not None)
        entry = record(run, action, images, None if action in ("exclude", "include") else value,
                       note=args.note or "", by="cli", known_images=run_images(run))
    print(f"recorded {entry.describe()} in run {run.run_id}; in effect: {read_curation(run).summary()}")
    return 0


def cmd_export(args) -> int:
    """Export a run's image set (crawl.export.export_run): the summary on stdout, notes on stderr."""
    from .export import CURATED, RAW, export_run

    run = RunStore().open_run(args.run)
    progress = None if args.no_progress else TerminalProgress()
    try:
        summary = export_run(run, args.out, args.format, view=RAW if args.raw else CURATED, link=args.link,
                             progress=progress)
    except KeyboardInterrupt:
        print(f"interrupted: nothing was exported; {printable(args.out)} is as it was", file=sys.stderr)
        return 130
    finally:
        if progress is not None:
            progress.close()
    for line in summary.describe():  # they name the destination the user typed: escaped as an error would be
        print(printable(line), file=sys.stderr if line.startswith("note: ") else sys.stdout)
    shown = 5  # the first few by name, so the user can look; the counts above say how many in all
    for image, why in summary.skipped_images[:shown]:
        print(f"skipped {image!r}: {why}", file=sys.stderr)
    if len(summary.skipped_images) > shown:
        print(f"... and {len(summary.skipped_images) - shown} more skipped", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m crawl", description="Collect images for WildLens: crawl or import.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each request")
    sub = parser.add_subparsers(dest="command", required=True)
    engines = list(available_engines())

    p = sub.add_parser("fetch", help="crawl k images per class into a run or a folder (resumes)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="a sense such as cat.n.01 (its ImageNet hyponyms are crawled), or a wnid")
    what.add_argument("--wnids", help="comma-separated wnids to crawl exactly")
    p.add_argument("--k", type=int, default=20, help="accepted images per class (default 20)")
    p.add_argument("--engine", default="bing", choices=engines, help="search engine (default bing; flickr needs --api-key)")
    p.add_argument("--context", help="word appended to each class name, e.g. 'cat' -> 'Persian cat'")
    p.add_argument("--term", action="append", metavar="WNID=TEXT",
                   help="search TEXT for class WNID instead of its default terms (see 'python -m crawl terms'); "
                        "repeat for more terms or classes, e.g. --term n02012849='crane bird'")
    p.add_argument("--threads", type=int, default=CrawlConfig().threads,
                   help=f"parallel downloads, 1-32 (default {CrawlConfig().threads})")
    p.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to connect (default 5)")
    p.add_argument("--read-timeout", type=float, default=10.0, help="seconds to wait for the next byte (default 10)")
    p.add_argument("--deadline", type=float, default=CrawlConfig().file_deadline,
                   help="seconds for one whole request: name lookup, connect, headers, redirects and body "
                        "(default %(default)g)")
    p.add_argument("--base-url", help="the engine's address (a mirror, or a local test server); it may be a "
                                      "private or loopback address")
    p.add_argument("--allow-private-hosts", action="store_true",
                   help="also fetch image URLs that resolve to loopback, private, link-local or multicast addresses "
                        "(refused by default as 'private-address': a result list must not reach into your network)")
    p.add_argument("--api-key", help="Flickr API key (else $FLICKR_APIKEY)")
    p.add_argument("--filter", action="append", metavar="KEY=VALUE", help="icrawler engine filter, e.g. type=photo")
    p.add_argument("--ray", action="store_true",
                   help="crawl the classes on Ray actors (a local Ray instance, or the cluster at --ray-address / "
                        "RAY_ADDRESS): they search, download and validate; this process stores every image")
    p.add_argument("--ray-address", metavar="HOST:PORT", help="with --ray: the Ray cluster to join")
    p.add_argument("--ray-actors", type=int, metavar="N",
                   help="with --ray: crawling actors (default one per CPU of the cluster, at most the classes)")
    p.add_argument("--ray-per-host", type=int, metavar="N", default=None,
                   help="with --ray: requests in flight to one host across all actors (default 16)")
    p.add_argument("--no-progress", action="store_true")
    _add_destination_args(p)
    _add_validation_args(p)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("terms", help="print the search terms fetch would use per class (WNID<TAB>term; term)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="a sense such as crane.n.05, or a wnid")
    what.add_argument("--wnids", help="comma-separated wnids")
    p.add_argument("--context", help="word appended to each class name, as for fetch")
    p.add_argument("--max-terms", type=int, default=CrawlConfig().max_terms, help="terms per class (default %(default)s)")
    p.add_argument("--label-space", default=None, choices=label_space_names(),
                   help=f"classes to resolve against (default {DEFAULT_LABEL_SPACE})")
    p.set_defaults(func=cmd_terms)

    p = sub.add_parser("import", help="import SRC/<wnid or class name>/<images> into a run or a folder")
    p.add_argument("src", type=Path, help="folder with one sub-folder of images per class; only its regular files "
                                           "are read (FIFOs, devices, link loops are skipped and recorded)")
    p.add_argument("--follow-links", action="store_true",
                   help="follow symbolic links that lead out of SRC (default: such links are skipped and recorded); "
                        "what they lead to counts for the class folder holding the link. Without or with it, an "
                        "image is read once, under the class folder holding it by its real path: links into "
                        "another class folder, or to SRC or above, are skipped and recorded")
    p.add_argument("--map", action="append", metavar="FOLDER=CLASS",
                   help="the class of a folder whose name is ambiguous or unknown: a wnid, a synset name "
                        "(missile.n.01) or a class name; repeatable")
    p.add_argument("--skip", action="append", metavar="FOLDER", help="leave this class folder out; repeatable")
    p.add_argument("--title", help="the title of a new run (default 'Import of <SRC name>')")
    p.add_argument("--no-progress", action="store_true")
    _add_destination_args(p)
    _add_validation_args(p)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("check", help="can the search engine be reached?")
    p.add_argument("--engine", default="bing", choices=engines)
    p.add_argument("--base-url")
    p.add_argument("--timeout", type=float, default=5.0)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("summary", help="per-class figures of a manifest")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", metavar="RUN_ID")
    where.add_argument("--out", type=Path, metavar="DIR")
    p.add_argument("--k", type=int, help="requested images per class, to show short_by")
    p.set_defaults(func=cmd_summary)

    from core.curation import BUILTIN_TAGS

    p = sub.add_parser("curate", help="tag, relabel, exclude or include images of a run (an append-only log; "
                                      "images and the manifest are never changed), undo an entry, or list the log")
    p.add_argument("--run", metavar="RUN_ID", required=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--tag", metavar="TAG", help=f"add a tag: one of {', '.join(BUILTIN_TAGS)} or a word of your own")
    what.add_argument("--untag", metavar="TAG", help="remove a tag")
    what.add_argument("--relabel", metavar="WNID", help="give the images another true class: the wnid of any WordNet "
                                                          "noun (find one with: python -m explain senses WORD)")
    what.add_argument("--exclude", action="store_true", help="leave the images out of the curated metrics")
    what.add_argument("--include", action="store_true", help="take excluded images back in")
    what.add_argument("--undo", type=int, metavar="N", help="take entry #N of the log back (see --list)")
    what.add_argument("--list", action="store_true", help="print the log and what is in effect")
    p.add_argument("--note", help="why, in one line (kept with the entry)")
    p.add_argument("--from", dest="images_from", metavar="FILE", help="more images, one per line ('-': standard input)")
    p.add_argument("images", nargs="*", metavar="IMAGE", help="images as the run names them (the manifest's file)")
    p.set_defaults(func=cmd_curate)

    from .export import FORMATS, IMAGEFOLDER

    p = sub.add_parser("export", help="export a run's curated image set as an image folder or a FiftyOne dataset")
    p.add_argument("--run", metavar="RUN_ID", required=True)
    p.add_argument("--out", type=Path, metavar="DIR", required=True,
                   help="a new or empty folder outside the run store (nothing in it is overwritten)")
    p.add_argument("--format", choices=FORMATS, default=IMAGEFOLDER,
                   help="imagefolder: DIR/<wnid>/<file> and DIR/export_manifest.csv; fiftyone: FiftyOne's "
                        "FiftyOneImageClassificationDataset (DIR/data/, DIR/labels.json) with each model's top-1 "
                        "(default %(default)s)")
    p.add_argument("--raw", action="store_true", help="the run as collected: without the curation log's relabels "
                                                      "and exclusions (default: the curated view)")
    p.add_argument("--link", action="store_true", help="hard links to the run's stored files instead of copies (no "
                                                       "second copy on disk, but editing an exported image in place "
                                                       "then changes the run's copy too)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except WildLensError as exc:
        # A longer limit than one_line's default: a list of class folders to map runs past 500 characters.
        print(f"error: {one_line(exc, limit=2000)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted: what was finished is saved; run the same command again to resume", file=sys.stderr)
        return 130
