"""Image collection for WildLens: web crawling (icrawler) and local-folder import, with a
provenance manifest in the run store.

Entry points (imported lazily, so ``import crawl`` stays light):

- ``crawl_run(run, wnids, k, engine='bing', config=CrawlConfig(), progress=None) -> CrawlSummary``
- ``import_folder(src, run_or_dir, label_space=None, progress=None, validation=..., follow_links=False)
  -> ImportSummary`` (regular files inside SRC only; what is skipped is recorded with a reason)
- ``check_engine(engine='bing', config=CrawlConfig()) -> Reachability`` (fast: is it reachable?)
- ``summarise(manifest, wnids=None, k=None) -> DataFrame`` (per-class figures)
- ``CrawlConfig`` (``allow_private_hosts``: image URLs on non-public addresses are refused by
  default), ``ValidationConfig``; errors ``CrawlError``, ``EngineUnreachable``,
  ``FolderImportError`` (all ``CollectError``).
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "crawl_run": "crawler", "check_engine": "crawler", "search_terms": "crawler", "CrawlSummary": "crawler",
    "CrawlError": "crawler", "EngineUnreachable": "crawler", "available_engines": "crawler",
    "import_folder": "importer", "ImportSummary": "importer", "FolderImportError": "importer",
    "resolve_class_folder": "importer",
    "CrawlConfig": "config", "ValidationConfig": "config", "USER_AGENT": "config",
    "summarise": "store", "CollectError": "store",
    "validate_image": "validate", "Rejected": "validate",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'crawl' has no attribute {name!r}")
