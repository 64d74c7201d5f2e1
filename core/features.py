"""Frozen features kept as part files: the stored artefact of ``python -m classify --features``.

Layout, under a run folder (or any folder given as a path)::

    features/<model_dir>/                 model_dir as core.parts maps a model id ('/' -> '_')
      meta.json                           {"model", "dim", "kind", "normalised", "created",
                                           "classify_version", "schema_version"}
      part-<n>.npy                        float32 [rows, dim], np.save(allow_pickle=False)
      part-<n>.parquet                    the index: image (the manifest's file), true_wnid,
                                          row (0..rows-1, the row of the .npy)

* ``<n>`` is ``<UTC time, 20 digits>-<6 hex>``: name order is write order.
* ``kind`` is ``'pre-logit'`` (a classifier's pooled features, the input of its last linear
  layer) or ``'image-embedding'`` (a zero-shot model's image tower output); ``normalised`` says
  whether the vectors were L2-normalised before storing (classify stores them un-normalised:
  a probe normalises itself).
* Writes are atomic and ordered: the ``.npy`` is written (temporary file + rename) first, the
  ``.parquet`` last, so a part exists exactly when its ``.parquet`` does. A killed writer leaves at
  most a temporary file (``.part-….tmp``) or a ``.npy`` without its ``.parquet``; readers ignore
  both and :func:`sweep_features` (called holding the run's lock) removes them.
* An image stored twice (in two parts) is read from the **latest** part: last one wins, as for
  predictions.
* Never pickle: arrays are saved and loaded with ``allow_pickle=False``; an object array is a
  damaged part. A part whose files disagree (rows, dim, dtype, ``row`` values) raises
  :class:`FeatureStoreError` with one line naming the part and the fix.
* Confined reads: every file read here (``meta.json``, the parts, a file ``meta.json`` names such
  as the text classifier) must resolve inside the run's ``features/`` folder (a link out of it, a
  path in ``meta.json`` such as ``/etc/…`` or ``../../…``, a ``features/<model>`` that links
  elsewhere: refused) and be a regular file, checked on the opened file (a FIFO or a device is
  refused at once instead of blocking or filling memory): :class:`FeatureStoreError`, one line.

Functions: :func:`write_feature_part`, :func:`read_features`, :func:`feature_models`,
:func:`featured_images`, :func:`read_feature_meta`, :func:`load_meta_array`, :func:`compact_features`,
:func:`sweep_features`, :func:`features_root`, :func:`feature_dir`.
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Sequence, Union

import numpy as np
import pandas as pd

from .runstore import (_RUN_ID_RE, SCHEMA_VERSION, StoreError, atomic_path, now_iso, read_parquet_bytes,
                       write_bytes_atomic, write_json_atomic, write_table)
from .tables import MODEL_ID_RULE

FEATURES_DIR = "features"
META_NAME = "meta.json"
FEATURE_KINDS = ("pre-logit", "image-embedding")
FEATURE_INDEX_SCHEMA: dict[str, str] = {
    "image": "string",  # the manifest's 'file' (relative to the images root)
    "true_wnid": "string",
    "row": "Int64",  # the row of this image in the part's .npy
}
_PART_STEM = r"part-\d{20}-[0-9a-f]{6}"
_PART_RE = re.compile(rf"^{_PART_STEM}\.parquet$")
_NPY_RE = re.compile(rf"^{_PART_STEM}\.npy$")
_TEMP_RE = re.compile(rf"^\.(?:{_PART_STEM}\.(?:npy|parquet)|{re.escape(META_NAME)})\.[0-9a-f]{{12}}\.tmp$")
WRITE_PROBE_PREFIX = ".write-probe."  # a writer's probe file in features/: '.write-probe.<12 hex>.tmp'
_PROBE_RE = re.compile(rf"^{re.escape(WRITE_PROBE_PREFIX)}[0-9a-f]{{12}}\.tmp$")
MAX_META_BYTES = 64 * 1024 * 1024  # a meta.json (a text classifier's 21k wnids are ~250 kB)
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOFOLLOW", 0))

RunLike = Union["object", Path, str]  # a core.runstore.Run (anything with .path) or a folder


class FeatureStoreError(StoreError):
    """A features folder that cannot be read or written as asked; one line with the fix."""


# --------------------------------------------------------------------------- layout
def features_root(run: RunLike) -> Path:
    """``<run>/features``: ``run`` is a ``core.runstore.Run`` or the path of a folder."""
    base = Path(run.path) if hasattr(run, "path") else Path(run)
    return base / FEATURES_DIR


def feature_dir(run: RunLike, model: str) -> Path:
    """The folder of one model's features; refuses ids that could name another folder."""
    name = str(model).replace("/", "_")
    if not _RUN_ID_RE.match(name):
        raise FeatureStoreError(f"{model!r} is not a usable model id: {MODEL_ID_RULE}.")
    return features_root(run) / name


def _parts(folder: Path) -> list[Path]:
    """The complete parts (their .parquet), oldest first."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _PART_RE.match(p.name))


def _fix(run: RunLike, model: str) -> str:
    return (f"remove {feature_dir(run, model)} (or the damaged part's .npy and .parquet) and run "
            f"python -m classify --run RUN_ID --models {model} --features again")


class _NotConfined(FeatureStoreError):
    """A file of a features folder that resolves outside it, or is not a regular file."""


def _confined(run: RunLike, path: Path) -> Path:
    """``path`` with every link resolved; refuses one outside the run's ``features/`` folder (the
    run folder is resolved, ``features`` itself is not: a features folder that is a link out of
    the run is refused too)."""
    base = Path(run.path) if hasattr(run, "path") else Path(run)
    root = Path(os.path.realpath(base)) / FEATURES_DIR
    real = Path(os.path.realpath(path))
    if real != root and root not in real.parents:
        where = f"{path} is" if real == Path(os.path.abspath(path)) else f"{path} resolves to {real}, which is"
        raise _NotConfined(f"{where} outside the run's features folder {root}")
    return real


def _open_regular(run: RunLike, path: Path):
    """A binary handle on ``path``: confined (:func:`_confined`) and a regular file, checked on the
    opened file (O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; O_NOFOLLOW: a
    link swapped in after the check is refused). FileNotFoundError passes through."""
    real = _confined(run, path)
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _NotConfined(f"{path} cannot be opened ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _NotConfined(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")


def _read_regular(run: RunLike, path: Path, limit: int | None = None) -> bytes:
    with _open_regular(run, path) as handle:
        data = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise _NotConfined(f"{path} is over {limit} bytes")
    return data


# --------------------------------------------------------------------------- meta
def read_feature_meta(run: RunLike, model: str) -> dict | None:
    """The model's ``meta.json`` as a dict, or None when no features were stored."""
    path = feature_dir(run, model) / META_NAME
    try:
        meta = json.loads(_read_regular(run, path, MAX_META_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except _NotConfined as exc:
        raise FeatureStoreError(f"{exc}; {_fix(run, model)}.") from None
    except (OSError, ValueError) as exc:
        raise FeatureStoreError(f"{path} is damaged ({exc}); {_fix(run, model)}.") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("dim"), int) or meta.get("kind") not in FEATURE_KINDS:
        raise FeatureStoreError(f"{path} is damaged (no integer dim or known kind); {_fix(run, model)}.")
    if int(meta.get("schema_version", 0)) > SCHEMA_VERSION:
        raise FeatureStoreError(f"{path} was written by a newer WildLens; upgrade WildLens.")
    return meta


def load_meta_array(run: RunLike, model: str, path_value: object, field: str) -> np.ndarray:
    """An array that the model's ``meta.json`` names in ``field`` (e.g. ``text_classifier.path``):
    ``path_value`` relative to ``features/<model>/`` (or absolute) must resolve inside the run's
    ``features/`` folder and be a regular ``.npy`` file; loaded without pickle. Anything else is
    one line naming ``meta.json`` and the fix."""
    meta_path = feature_dir(run, model) / META_NAME
    if not isinstance(path_value, str) or not path_value or "\x00" in path_value:
        raise FeatureStoreError(f"{meta_path}: {field} is not a file name ({path_value!r}); {_fix(run, model)}.")
    path = feature_dir(run, model) / path_value  # an absolute path_value replaces the folder
    try:
        with _open_regular(run, path) as handle:
            return np.load(handle, allow_pickle=False)
    except _NotConfined as exc:
        raise FeatureStoreError(f"{meta_path}: {field} {path_value!r}: {exc}; {_fix(run, model)}.") from None
    except FileNotFoundError:
        raise FeatureStoreError(f"{meta_path}: {field} {path_value!r}: {path} does not exist; {_fix(run, model)}.") from None
    except (OSError, ValueError, EOFError) as exc:
        raise FeatureStoreError(f"{meta_path}: {field} {path_value!r}: {path} cannot be read "
                                f"({str(exc).splitlines()[0][:160]}); {_fix(run, model)}.") from None


def _ensure_meta(run: RunLike, model: str, dim: int, kind: str, normalised: bool, classify_version: str) -> dict:
    if kind not in FEATURE_KINDS:
        raise FeatureStoreError(f"features: kind {kind!r} is not one of {FEATURE_KINDS}.")
    meta = read_feature_meta(run, model)
    if meta is not None:
        if meta["dim"] != dim or meta["kind"] != kind or bool(meta.get("normalised")) != bool(normalised):
            raise FeatureStoreError(
                f"{model}: stored features are {meta['kind']} dim {meta['dim']} normalised={meta.get('normalised')}, "
                f"new ones {kind} dim {dim} normalised={normalised}; remove {feature_dir(run, model)} to start over.")
        return meta
    meta = {"model": str(model), "dim": int(dim), "kind": kind, "normalised": bool(normalised),
            "created": now_iso(), "classify_version": str(classify_version), "schema_version": SCHEMA_VERSION}
    write_json_atomic(feature_dir(run, model) / META_NAME, meta)
    return meta


TEXT_CLASSIFIER_NAME = "text_classifier.npy"  # a zero-shot model's text classifier, beside its features


def write_text_classifier(run: RunLike, model: str, classifier: np.ndarray, wnids: Sequence[str],
                          logit_scale: float) -> None:
    """Keep a zero-shot model's text classifier ([dim, classes], columns in ``wnids`` order) beside
    its image embeddings, and record it in meta.json as ``text_classifier: {path, wnids,
    logit_scale}``: probe/'s language-initialised head and its N = 0 point read it from there (a
    stage reads stored artefacts only, never classify's cache). Call after the model's first part."""
    array = np.ascontiguousarray(np.asarray(classifier, dtype=np.float32))
    if array.ndim != 2 or array.shape[1] != len(wnids):
        raise FeatureStoreError(f"{model}: a text classifier of shape {array.shape} for {len(wnids)} classes.")
    meta = read_feature_meta(run, model)
    if meta is None or int(meta["dim"]) != array.shape[0]:
        raise FeatureStoreError(f"{model}: the text classifier has {array.shape[0]} dimensions, the stored features "
                                f"{None if meta is None else meta['dim']}; {_fix(run, model)}.")
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    write_bytes_atomic(feature_dir(run, model) / TEXT_CLASSIFIER_NAME, buffer.getvalue())
    meta["text_classifier"] = {"path": TEXT_CLASSIFIER_NAME, "wnids": [str(w) for w in wnids],
                               "logit_scale": float(logit_scale)}
    write_json_atomic(feature_dir(run, model) / META_NAME, meta)


# --------------------------------------------------------------------------- write
def write_feature_part(run: RunLike, model: str, index_df: pd.DataFrame, array: np.ndarray, *,
                       kind: str = "pre-logit", normalised: bool = False, classify_version: str = "") -> Path | None:
    """Store one batch of features as a new part: ``array`` (float32-able, [len(index_df), dim])
    row i belongs to ``index_df`` row i (columns ``image``, ``true_wnid``). Writes ``meta.json``
    on the model's first part and refuses a part whose dim/kind/normalised differ from it. The
    ``.npy`` is written first and the ``.parquet`` last, each atomically. Returns the .parquet
    path (None for an empty batch)."""
    array = np.asarray(array)
    if array.dtype == object or array.ndim != 2:
        raise FeatureStoreError(f"features of {model}: expected a 2-D numeric array, got {array.dtype} {array.shape}.")
    if len(index_df) != array.shape[0]:
        raise FeatureStoreError(f"features of {model}: {len(index_df)} index rows for {array.shape[0]} vectors.")
    missing = {"image", "true_wnid"} - set(index_df.columns)
    if missing:
        raise FeatureStoreError(f"features of {model}: the index lacks {sorted(missing)}.")
    if not len(index_df):
        return None
    if index_df["image"].isna().any() or index_df["image"].duplicated().any():
        raise FeatureStoreError(f"features of {model}: image names must be present and unique within a part.")
    array = np.ascontiguousarray(array, dtype=np.float32)
    _ensure_meta(run, model, int(array.shape[1]), kind, normalised, classify_version)
    folder = feature_dir(run, model)
    stem = f"part-{_dt.datetime.now(_dt.timezone.utc):%Y%m%d%H%M%S%f}-{secrets.token_hex(3)}"
    with atomic_path(folder / f"{stem}.npy") as tmp:
        with open(tmp, "wb") as fh:  # a handle: np.save on a name would append '.npy' to the temp name
            np.save(fh, array, allow_pickle=False)
    index = pd.DataFrame({"image": index_df["image"].to_numpy(), "true_wnid": index_df["true_wnid"].to_numpy(),
                          "row": np.arange(len(index_df))})
    write_table(index, folder / f"{stem}.parquet", FEATURE_INDEX_SCHEMA, table="feature index")
    return folder / f"{stem}.parquet"


# --------------------------------------------------------------------------- read
def _read_part(run: RunLike, model: str, parquet: Path, dim: int) -> tuple[pd.DataFrame, np.ndarray]:
    npy = parquet.with_suffix(".npy")
    fix = _fix(run, model)
    index = _read_index(run, model, parquet)
    try:
        with _open_regular(run, npy) as handle:
            array = np.load(handle, allow_pickle=False)
    except _NotConfined as exc:
        raise FeatureStoreError(f"feature part {exc}; {fix}.") from None
    except FileNotFoundError:
        raise FeatureStoreError(f"feature part {parquet} has no {npy.name}; {fix}.") from None
    except (ValueError, OSError, EOFError) as exc:
        raise FeatureStoreError(f"feature part {npy} is damaged ({str(exc).splitlines()[0][:160]}); {fix}.") from None
    if array.dtype != np.float32 or array.ndim != 2 or array.shape[1] != dim:
        raise FeatureStoreError(f"feature part {npy} holds {array.dtype} {array.shape}, not float32 [rows, {dim}]; {fix}.")
    rows = index["row"]
    if (rows.isna().any() or index["image"].isna().any() or index["image"].duplicated().any()
            or not rows.between(0, array.shape[0] - 1).all() or rows.duplicated().any()):
        raise FeatureStoreError(f"feature part {parquet} has missing, repeated or out-of-range rows for "
                                f"{npy.name} ({array.shape[0]} vectors); {fix}.")
    return index, array


def _read_index(run: RunLike, model: str, parquet: Path) -> pd.DataFrame:
    try:
        data = _read_regular(run, parquet)
        return read_parquet_bytes(data, FEATURE_INDEX_SCHEMA, table="feature index", source=parquet)
    except _NotConfined as exc:
        raise FeatureStoreError(f"feature part {exc}; {_fix(run, model)}.") from None
    except (StoreError, OSError) as exc:
        raise FeatureStoreError(f"feature part {parquet} is damaged ({str(exc).splitlines()[0][:160]}); "
                                f"{_fix(run, model)}.") from None


def read_features(run: RunLike, model: str) -> tuple[pd.DataFrame, np.ndarray]:
    """All stored features of ``model``: an index (columns ``image``, ``true_wnid``; sorted by
    image, RangeIndex) and the matching float32 array [len(index), dim]. Where an image was stored
    twice the latest part wins. No features: an empty index and a [0, dim] (or [0, 0]) array."""
    meta = read_feature_meta(run, model)
    empty = pd.DataFrame({"image": pd.Series(dtype="string"), "true_wnid": pd.Series(dtype="string")})
    parts = _parts(feature_dir(run, model))
    if meta is None:
        if parts:
            raise FeatureStoreError(f"{feature_dir(run, model)} has parts but no {META_NAME}; {_fix(run, model)}.")
        return empty, np.zeros((0, 0), dtype=np.float32)
    dim = meta["dim"]
    indexes, arrays = [], []
    offset = 0
    for parquet in parts:
        index, array = _read_part(run, model, parquet, dim)
        indexes.append(index.assign(row=index["row"].astype("int64") + offset))
        arrays.append(array)
        offset += array.shape[0]
    if not indexes:
        return empty, np.zeros((0, dim), dtype=np.float32)
    index = pd.concat(indexes, ignore_index=True).drop_duplicates("image", keep="last")
    index = index.sort_values("image", kind="stable").reset_index(drop=True)
    stacked = np.concatenate(arrays, axis=0)
    array = np.ascontiguousarray(stacked[index["row"].to_numpy(dtype=np.int64)])
    return index[["image", "true_wnid"]].reset_index(drop=True), array


def featured_images(run: RunLike, model: str) -> set[str]:
    """Images of ``model`` with stored features (what a resumed ``--features`` run skips); reads
    the indexes only."""
    images: set[str] = set()
    for parquet in _parts(feature_dir(run, model)):
        images.update(_read_index(run, model, parquet)["image"].dropna())
    return images


def feature_models(run: RunLike) -> list[str]:
    """Model ids with stored features (a readable ``meta.json``: a regular file inside the run's
    features folder), sorted."""
    root = features_root(run)
    if not root.is_dir():
        return []
    models = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            meta = json.loads(_read_regular(run, folder / META_NAME, MAX_META_BYTES).decode("utf-8"))
        except (OSError, ValueError, FeatureStoreError):
            continue
        if isinstance(meta, dict) and isinstance(meta.get("model"), str):
            models.append(meta["model"])
    return sorted(models)


# --------------------------------------------------------------------------- maintenance
def compact_features(run: RunLike, model: str) -> None:
    """Merge a model's parts into one: the merged part is written as the newest before the old
    ones go, so a kill at any point loses nothing (at worst a duplicate that reads the same)."""
    folder = feature_dir(run, model)
    parts = _parts(folder)
    if len(parts) < 2:
        return
    meta = read_feature_meta(run, model)
    index, array = read_features(run, model)
    write_feature_part(run, model, index, array, kind=meta["kind"], normalised=bool(meta.get("normalised")),
                       classify_version=str(meta.get("classify_version", "")))
    for parquet in parts:
        parquet.unlink()  # the index first: its part is gone before its array
        parquet.with_suffix(".npy").unlink(missing_ok=True)


def sweep_features(run: RunLike) -> int:
    """Remove what a killed writer left under ``features/``: temporary files, write probes and
    ``.npy`` files without their ``.parquet``; the number removed. Call it holding the run's lock."""
    root = features_root(run)
    if not root.is_dir():
        return 0
    removed = 0
    for probe in list(root.iterdir()):
        if _PROBE_RE.match(probe.name) and probe.is_file() and not probe.is_symlink():
            probe.unlink(missing_ok=True)
            removed += 1
    for folder in root.iterdir():
        if not folder.is_dir() or folder.is_symlink():
            continue
        for path in list(folder.iterdir()):
            orphan = _NPY_RE.match(path.name) and not path.with_suffix(".parquet").exists()
            if (orphan or _TEMP_RE.match(path.name)) and path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed += 1
    return removed
