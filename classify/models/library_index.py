"""What timm, torchvision and open_clip hold, listed once per installed version and kept in the run store's
cache, so a new process can answer without importing them (timm imports torchvision, whose ops import
torch._dynamo: 2.5-4 s of CPU on this 2-core machine).

The listings (:data:`LISTINGS`), each a JSON file keyed on the libraries' versions, a fingerprint of their
model files (:func:`library_versions`) and WildLens's code that builds it (:func:`code_digest`), with a
SHA-256 of its content: :mod:`classify.models.zoo`'s names index (``model-names-*.json``: is a name any
library's model, and its close matches) and where each library's pretrained weights live
(``timm-weights-*``, ``torchvision-weights-*``, ``clip-weights-*``: :func:`weight_places`, which the
Models page's weight status needs for every registry model); :func:`cached_listing` also keeps the
registry's input configs (:func:`classify.models.registry.listed_input_configs`). A listing that is
missing, damaged, hand-edited, of the wrong types or values or too large is listed again by the
libraries. The callers take from a listing only what cannot load the wrong file: a name it lacks is
asked of the library, and a file found through it is read only after the library, imported by then,
names it too (:func:`classify.models.weights.confirm_listed`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Callable


def package_files(package: str, folder: str = "models") -> str:
    """Where ``package`` is and a cheap fingerprint of its model files (count, newest mtime, sizes of the
    .py and .json files in its ``folder``, or in each of several folders separated by commas), found without
    importing it (~1 ms): a timm upgraded or edited in place under the same version string, or another venv
    sharing this cache, keys another listing (code review; open_clip's image sizes are in model_configs/*.json)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise ValueError(f"{package} is not installed")
    stats = [entry.stat() for part in folder.split(",") for entry in os.scandir(Path(spec.origin).parent / part)
             if entry.name.endswith((".py", ".json"))]
    return f"{spec.origin}|{len(stats)}|{max((st.st_mtime_ns for st in stats), default=0)}|" \
           f"{sum(st.st_size for st in stats)}"


TIMM_AND_TORCHVISION = {"timm": "models", "torchvision": "models"}  # package -> folder of its model files
# open_clip's pretrained configs are in its package folder, its architectures' (image sizes) in model_configs/
OPEN_CLIP = {"open_clip": ".,model_configs", "timm": "models"}


def library_versions(packages: dict[str, str] = TIMM_AND_TORCHVISION) -> dict | None:
    """The ``packages``' versions and :func:`package_files`, or None when they cannot be read."""
    from importlib import metadata

    try:
        return {**{p: metadata.version("open_clip_torch" if p == "open_clip" else p) for p in packages},
                **{f"{p}_files": package_files(p, folder) for p, folder in packages.items()}}
    except (metadata.PackageNotFoundError, OSError, ValueError):
        return None


def _digest_of(lists: dict) -> str:
    return hashlib.sha256(json.dumps(lists, sort_keys=True).encode()).hexdigest()


def code_digest(files: tuple[str, ...]) -> str:
    """SHA-256 of WildLens's own files that turn the libraries' answers into a listing's content: a fix to
    them keys another listing without anyone remembering to bump a version (code review)."""
    digest = hashlib.sha256()
    for name in files:
        digest.update(Path(name).read_bytes())
    return digest.hexdigest()[:16]


def cached_listing(cache_dir: Path, stem: str, build: Callable[[], dict], valid: Callable[[dict], bool],
                   packages: dict[str, str] = TIMM_AND_TORCHVISION, max_bytes: int = 4 << 20,
                   code: tuple[str, ...] = ()) -> dict | None:
    return _read_or_build(cache_dir, stem, build, valid, packages, max_bytes, code)[0]


def _read_or_build(cache_dir: Path, stem: str, build: Callable[[], dict], valid: Callable[[dict], bool],
                   packages: dict[str, str] = TIMM_AND_TORCHVISION, max_bytes: int = 4 << 20,
                   code: tuple[str, ...] = ()) -> tuple[dict | None, bool]:
    """``build()`` (a dict of JSON values, made by importing the libraries), kept in
    ``cache_dir/<stem>-<key>.json`` for the installed ``packages`` (:func:`library_versions`) and this
    module's and ``code``'s files (:func:`code_digest`), and read back while its versions, its SHA-256 and
    ``valid`` hold; None when the versions cannot be read. A cache that cannot be written is listed again
    by the next process."""
    from core.tables import read_stored_bytes, write_json_atomic

    versions = library_versions(packages)
    if versions is None:
        return None, False
    try:
        versions["code"] = code_digest((__file__, *code))
    except OSError:
        return None, False
    key = hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir / f"{stem}-{key}.json"
    raw = read_stored_bytes(path, max_bytes)
    try:
        stored = json.loads(raw) if raw is not None else None
        lists = stored["lists"] if isinstance(stored, dict) else None
        if (isinstance(lists, dict) and stored.get("versions") == versions and valid(lists)
                and stored.get("sha256") == _digest_of(lists)):
            return lists, False
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
        pass  # missing, damaged or hand-edited: listed again
    lists = build()
    try:
        write_json_atomic(path, {"versions": versions, "lists": lists, "sha256": _digest_of(lists)})
    except OSError:  # a read-only cache: listed again next process
        pass
    return lists, True


# --------------------------------------------------------------------------- where weights are
WEIGHT_PLACES_VERSION = 1
# What a name or a place may hold: a model name, a Hub repository id, a file name or a URL as timm and
# open_clip write them; printable ASCII without spaces or quotes, so a hand-made listing puts no control
# character on a screen.
_PLACE_RE = re.compile(r"[A-Za-z0-9_.\-/:%+~=?&#@]{0,500}\Z")
_MAX_PLACES = 50_000


# Hugging Face's own rules for what a listing may name (huggingface_hub's validate_repo_id: 'org/name' of
# letters, digits, '-', '_', '.', no '--' or '..'), a revision as a plain name, a file as a relative path
# without '..': a hand-made listing crashed the Models page with huggingface_hub's HFValidationError, or
# named a revision '../../../big' that made a fresh process read a 1 GB file (hostile campaign).
_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9_.\-]{1,96}\Z")
_REVISION_RE = re.compile(r"[A-Za-z0-9_.\-]{1,100}\Z")
_FILE_RE = re.compile(r"[A-Za-z0-9_.\-]{1,200}(/[A-Za-z0-9_.\-]{1,200}){0,4}\Z")
_URL_RE = re.compile(r"https?://[A-Za-z0-9_.\-/:%+~=?&#@]{1,480}\Z")


def valid_hub_id(text: str) -> bool:
    """'org/name' or 'org/name@revision' as the Hub allows them; '' (none) passes."""
    if not text:
        return True
    repo, at, revision = text.partition("@")
    return (bool(_REPO_RE.match(repo)) and "--" not in repo and ".." not in repo
            and (not at or (bool(_REVISION_RE.match(revision)) and ".." not in revision)))


def valid_file(text: str) -> bool:
    """A file name or relative path within a repository, no '.' or '..' part; '' (none) passes."""
    return not text or (bool(_FILE_RE.match(text)) and all(part not in (".", "..") for part in text.split("/")))


def valid_url(text: str) -> bool:
    return not text or bool(_URL_RE.match(text))


def valid_clip_hub(text: str) -> bool:
    """open_clip's ``hf_hub``: 'org/name/' or 'org/name/file' ('' passes)."""
    if not text:
        return True
    repo, file = os.path.split(text)  # as openclip_source._hub and open_clip's download_pretrained split it
    return bool(repo) and valid_hub_id(repo) and valid_file(file)


def _valid_places(*fields: Callable[[str], bool]) -> Callable[[dict], bool]:
    """A listing's validator: {name: [one string per field]}, each string printable ASCII and as its field allows."""
    def valid(lists: dict) -> bool:
        places = lists.get("places")
        return (set(lists) == {"places"} and isinstance(places, dict) and len(places) <= _MAX_PLACES
                and all(isinstance(name, str) and _PLACE_RE.match(name) and isinstance(where, list)
                        and len(where) == len(fields)
                        and all(isinstance(p, str) and _PLACE_RE.match(p) and ok(p) for p, ok in zip(where, fields))
                        for name, where in places.items()))
    return valid


def _timm_places() -> dict:
    import timm
    from timm.models import get_pretrained_cfg

    places = {}
    for name in timm.list_pretrained():
        cfg = get_pretrained_cfg(name)
        if cfg is not None:
            url = cfg.url[0] if isinstance(cfg.url, (tuple, list)) else cfg.url
            places[name] = [cfg.hf_hub_id or "", cfg.hf_hub_filename or "", url or ""]
    return {"places": places}


def _clip_places() -> dict:
    import open_clip

    return {"places": {f"{model}.{tag}": [str((open_clip.get_pretrained_cfg(model, tag) or {}).get("hf_hub", ""))]
                       for model, tag in open_clip.list_pretrained()}}


def _torchvision_places() -> dict:
    import torchvision.models as tvm

    return {"places": {f"{arch}.{weights.name}": [weights.url] for arch in tvm.list_models()
                       for weights in tvm.get_model_weights(arch)}}


def weight_places(cache_dir: Path, kind: str) -> dict[str, tuple[str, ...]] | None:
    """Where each pretrained name's weights live, for ``kind`` 'timm' (name 'arch.tag' -> (Hub repository
    id, Hub file name, URL), '' where timm names none: 1,826 names), 'torchvision' ('ARCH.WEIGHTS' -> (URL,):
    166) or 'clip' (open_clip 'MODEL.TAG' -> (its ``hf_hub``,): 196); None when the versions cannot be read.
    ~10 ms to read all listings against 2.5-4 s to import the libraries."""
    lists = _listings(cache_dir)[kind]
    return None if lists is None else {name: tuple(where) for name, where in lists["places"].items()}


_LIBRARY_OF = {"timm": "timm", "torchvision": "torchvision", "clip": "open_clip"}  # kind -> its module


def listed_place(kind: str, name: str) -> tuple[str, ...] | None:
    """``name``'s entry of :func:`weight_places` (the run store's cache) while the library of ``kind`` is
    not imported; None once it is (it then answers itself, a model registered in this process included)
    or when the listing lacks the name. What the sources' ``locate`` asks first."""
    import sys

    if _LIBRARY_OF[kind] in sys.modules:
        return None
    from core.runstore import RunStore

    places = weight_places(RunStore().cache_dir, kind)
    return None if places is None else places.get(name)


# --------------------------------------------------------------------------- timm's and torchvision's names
NAME_INDEX_VERSION = 1
NAME_LISTS = ("timm_archs", "timm_models", "timm_pretrained", "torchvision")
# What a listed name may be (timm's and torchvision's are letters, digits, '_', '.', '-'), and how many: a
# hand-made list of control characters or 600,000 near-names is listed again, never printed or searched.
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,200}\Z")
_MAX_NAMES = 50_000


def _list_names() -> dict:
    import timm
    import torchvision.models as tvm
    from timm.models import _registry

    return {"timm_archs": sorted(_registry._model_entrypoints), "timm_models": list(timm.list_models()),
            "timm_pretrained": list(timm.list_pretrained()), "torchvision": list(tvm.list_models(module=tvm))}


def _valid_names(lists: dict) -> bool:
    return set(lists) == set(NAME_LISTS) and all(
        isinstance(v, list) and len(v) <= _MAX_NAMES and all(isinstance(n, str) and _NAME_RE.match(n) for n in v)
        for v in lists.values())


def model_names(cache_dir: Path) -> dict | None:
    """timm's architectures, models and pretrained names and torchvision's classifiers
    (:data:`NAME_LISTS`), as :mod:`classify.models.zoo`'s names index reads them; None when the versions
    cannot be read."""
    return _listings(cache_dir)["names"]


# --------------------------------------------------------------------------- all listings, filled together
# name -> (file stem, builder, validator, packages keyed on)
LISTINGS = {"names": (f"model-names-{NAME_INDEX_VERSION}", _list_names, _valid_names, TIMM_AND_TORCHVISION),
            "timm": (f"timm-weights-{WEIGHT_PLACES_VERSION}", _timm_places,
                     _valid_places(valid_hub_id, valid_file, valid_url), TIMM_AND_TORCHVISION),
            "torchvision": (f"torchvision-weights-{WEIGHT_PLACES_VERSION}", _torchvision_places, _valid_places(valid_url),
                            TIMM_AND_TORCHVISION),
            "clip": (f"clip-weights-{WEIGHT_PLACES_VERSION}", _clip_places, _valid_places(valid_clip_hub), OPEN_CLIP)}


@functools.lru_cache(maxsize=4)
def _listings(cache_dir: Path) -> dict[str, dict | None]:
    """Every listing of :data:`LISTINGS`, read together (~10 ms), and any missing listed at once: asked one
    at a time, a listing built by importing timm made the sources ask the libraries themselves for the
    rest, so a new server filled the cache over three starts (a look at `make run`, 2026-12-06)."""
    found = {}
    for name, (stem, build, valid, packages) in LISTINGS.items():
        found[name] = _read_or_build(cache_dir, stem, build, valid, packages)[0]
    return found
