"""Knowledge-driven metrics from raw predictions: per model, per model and true class, and the
most frequent confusions, as tidy tables with stable, documented columns.

Input: a predictions table with the columns of ``core.runstore.PREDICTION_SCHEMA`` (at least
``model``, ``true_wnid``, ``pred_wnid``; optionally ``pred_wnid_2`` ... ``pred_wnid_5``,
``prob_1`` ... ``prob_5``, ``status``). Only rows whose ``status`` is ``'ok'`` count (every row
when there is no ``status`` column); the others are reported as ``n_failed``.

How: wnids are mapped to integer codes once, the rows are reduced to unique
(model, true, pred) triples with counts, each unique (true, pred) pair's WordNet values are looked
up (ImageNet-1k matrices, or computed on demand: :mod:`explain.similarity`), and every table is a
weighted ``bincount`` over integer group codes. Nothing loops over rows in Python.

Conventions (the columns, dtype and meaning, are defined once in :mod:`explain.schema`; their docs
are also in ``compute_metric_tables.__doc__``):

- rates are fractions in [0, 1]; a mean over an empty set (a class without mistakes) is NA, never 0;
- similarities are NLTK's ``truth.<metric>(prediction)`` (the argument order matters for WUP);
- the relation of a mistake is exclusive, first match in this order: hypernym, hyponym, sibling,
  cousin, related, distant (see :mod:`explain.similarity`; related / distant split at a severity
  threshold, :data:`explain.vocabulary.RELATED_MAX_SEVERITY`); ``sibling_count`` is the SPEC's test alone.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.errors import WildLensError
from core.machine import available_cores as _cores  # looked up at each call: a test replaces it
from core.machine import threaded_map
from core.runstore import PREDICTION_STATUSES, TOP_K
from core.wordnet import WORDNET_VERSION, is_wnid
from .schema import (CONFUSION_COLUMNS, CONFUSION_SCHEMA, METRIC_TABLES, PER_CLASS_COLUMNS,  # noqa: F401  (re-exported)
                     PER_CLASS_SCHEMA, PER_MODEL_COLUMNS, PER_MODEL_SCHEMA, docs_of)
from .similarity import (COUSIN, DISTANT, HYPERNYM, HYPONYM, RELATED, PairSimilarities, severities_of_codes,
                         similarities_of_codes, wnid_of_offset)
from .uncertainty import IntervalOptions, model_stream_key
from .vocabulary import RELATIONS
from . import metric_intervals

DEFAULT_INTERVALS = IntervalOptions()

REQUIRED_COLUMNS = ("model", "true_wnid", "pred_wnid")
TOP_K_COLUMNS = tuple(f"pred_wnid_{k}" for k in range(2, TOP_K + 1))
DEFAULT_CONFUSION_TOP_K = 3


class PredictionsError(WildLensError, ValueError):
    """A predictions table that cannot be measured; names the column and (0-based) row."""

    def __init__(self, detail: str, *, column: str | None = None, row: int | None = None,
                 other_row: int | None = None):
        self.detail, self.column, self.row, self.other_row = detail, column, row, other_row
        super().__init__(self.describe())

    def describe(self, line_of_row=None) -> str:
        """The message; ``line_of_row(row) -> str`` lets a caller name file lines instead of rows.
        ``other_row``: an earlier row the problem involves (a conflicting repeat), named at the end."""
        name = line_of_row or (lambda row: f"row {row + 1}")
        where = []
        if self.row is not None:
            where.append(name(self.row))
        if self.column is not None:
            where.append(f"column {self.column!r}")
        text = (", ".join(where) + ": " if where else "") + self.detail
        if self.other_row is not None:
            text = text.rstrip(".") + f" (the earlier row: {name(self.other_row)})."
        return text


@dataclass(frozen=True)
class MetricTables:
    """The three tables, in the dtypes and column order of :mod:`explain.schema`."""

    per_model: pd.DataFrame
    per_class: pd.DataFrame
    confusions: pd.DataFrame
    ci: dict | None = None  # the interval settings (IntervalOptions.as_dict()); None: the *_ci_* columns are NA

    def as_dict(self) -> dict[str, pd.DataFrame]:
        """Keyed by the table names of :data:`explain.schema.METRIC_TABLES` (the stored artefact's file
        names and the CSV export's)."""
        return {"per_model": self.per_model, "per_class": self.per_class, "confusions": self.confusions}


# --------------------------------------------------------------------------- input
@dataclass(frozen=True)
class _Rows:
    models: list[str]  # first-appearance order
    wnids: np.ndarray  # sorted unique wnids (true and predicted)
    model: np.ndarray  # per row: code into models, -1 if missing
    true: np.ndarray  # per row: code into wnids, -1 if missing
    pred: np.ndarray  # per row: code into wnids, -1 if missing or not counted
    ok: np.ndarray  # per row: counted
    top_k_hit: np.ndarray | None  # per row: true class among the top-5; None without the columns
    top: np.ndarray | None  # (TOP_K, rows): codes of pred_wnid, pred_wnid_2 ... (-1 missing); None without them
    top_complete: np.ndarray | None  # per row: a counted row with a complete top-5 (_check_top_k); None without
    spaces: list[str]  # canonical label-space names
    space: np.ndarray  # per row: code into spaces, -1 without the column or for an unknown name
    top_k_job: object = None  # _read_rows(top_k_sums=...): a _Job giving the _TopK; None without top-5 columns
    top_k_asked: bool = False  # _read_rows(top_k_sums=...) was given

    def top_k_sums(self) -> "_TopK":
        """The rows' top-5 severities (:func:`_top_k_sums`); all NaN without top-5 columns. Only for rows read
        with ``_read_rows(df, top_k_sums=cache_dir)``: other rows would read as a table without a top-5."""
        if not self.top_k_asked:
            raise RuntimeError("these rows were read without their top-5 severities: _read_rows(df, top_k_sums=cache_dir)")
        if self.top_k_job is None:
            nan = np.full(len(self.ok), np.nan)
            return _TopK(nan, nan, nan)
        return self.top_k_job()


_NARROW_FROM = 100_000  # keys; below, hashing 8-byte keys is under 5 ms and the min/max scan would be a good part of it


def _unique(keys: np.ndarray, *, inverse: bool = False, counts: bool = False, sort: bool = True):
    """``np.unique(keys, return_inverse=inverse, return_counts=counts)`` for 1-d integer keys, the
    same arrays, by hashing (``pd.factorize(sort=True)``: only the uniques are sorted) instead of
    sorting every key; ``sort=False``: the uniques in first-appearance order. Why: np.unique's
    argsort was half of a warm 21k table; on 5,000,000 keys with 500,000 distinct this takes 0.33 s
    (0.24 s unsorted) against 0.87 s (1M keys: 0.04 s against 0.11 s)."""
    keys = np.asarray(keys)
    narrow = keys
    if keys.dtype.itemsize > 4 and keys.dtype.kind in "iu" and len(keys) >= max(_NARROW_FROM, 1) \
            and keys.min() >= 0 and keys.max() <= np.iinfo(np.uint32).max:
        # Why: pandas hashes 4-byte keys faster (5,000,000 keys, 500,000 distinct: 0.15 s against 0.25 s),
        # and the packed (true, pred) keys of a label space under 65,536 classes fit.
        narrow = keys.astype(np.uint32)
    codes, uniques = pd.factorize(narrow, sort=sort)
    uniques = np.asarray(uniques, dtype=keys.dtype)
    out = [uniques]
    if inverse:
        out.append(codes.astype(np.int64, copy=False))
    if counts:
        out.append(np.bincount(codes, minlength=len(uniques)))
    return out[0] if len(out) == 1 else tuple(out)


_PARALLEL_FROM = 200_000  # rows; below this a thread's start costs more than it overlaps


class _Job:
    """Work started by :func:`_start`: calling it gives the result (its exception re-raised there);
    :meth:`settle` waits for a thread that runs it and drops what it gives (a job never asked for
    runs nowhere)."""

    def __init__(self, func, args, future=None):
        self.func, self.args, self.future = func, args, future

    def __call__(self):
        return self.future.result() if self.future is not None else self.func(*self.args)

    def settle(self) -> None:
        if self.future is not None:
            from concurrent.futures import wait

            wait([self.future])


def _start(func, *args, parallel: bool) -> _Job:
    """Run ``func(*args)`` on a second thread when ``parallel`` and this process has a second core;
    returns a :class:`_Job` giving its result when called. Otherwise, or where no thread can be
    started ("can't start new thread" under an address-space limit), it runs when called, in this
    thread: the same answer either way."""
    if not parallel or _cores() < 2:
        return _Job(func, args)
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wildlens-metrics")
    try:
        future = pool.submit(func, *args)
    except RuntimeError:  # the work item is queued with no thread to take it: dropped with the pool
        pool.shutdown(wait=False, cancel_futures=True)
        return _Job(func, args)
    pool.shutdown(wait=False)
    return _Job(func, args, future)


def _map(func, items: list, *, parallel: bool) -> list:
    """``[func(x) for x in items]``, on two threads when ``parallel`` and a second core is there
    (pandas' and Arrow's hashing release the GIL); an exception is re-raised in item order; one after
    the other where no thread can be started (:func:`core.machine.threaded_map`)."""
    return threaded_map(func, items, limit=2 if parallel and _cores() >= 2 else 1, name="wildlens-metrics")


def _bad_row(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


_EXPECTED_VALUE = {"model": "a model id", "status": "'ok' or 'failed'"}  # other columns: wnids


def _factorize_values(series: pd.Series) -> tuple[np.ndarray, object]:
    """``pd.factorize``, or PredictionsError naming the first value that is not a single value
    (a list or an array, as a Parquet list column gives: pandas cannot hash it)."""
    try:
        return pd.factorize(series)
    except TypeError:
        not_scalar = series.map(lambda v: not isinstance(v, Hashable)).to_numpy(dtype=bool)
        if not not_scalar.any():
            raise
        row = _bad_row(not_scalar)
        value = series.iloc[row]
        kind = {list: "a list", np.ndarray: "an array", dict: "a mapping"}.get(type(value), type(value).__name__)
        expected = _EXPECTED_VALUE.get(str(series.name), "a wnid such as n02123045")
        raise PredictionsError(f"holds {kind} ({str(value.tolist() if isinstance(value, np.ndarray) else value)[:60]}), "
                               f"not a single value; expected {expected}, one per row.",
                               column=str(series.name), row=row) from None


def _status_mask(df: pd.DataFrame) -> np.ndarray:
    if "status" not in df.columns:
        return np.ones(len(df), dtype=bool)
    status = df["status"]
    codes, uniques = _factorize_values(status)
    allowed = set(PREDICTION_STATUSES)
    for code, value in enumerate(uniques):
        if value not in allowed:
            raise PredictionsError(f"unknown status {value!r}; allowed: {', '.join(PREDICTION_STATUSES)} "
                                   "(or leave the column out to count every row).", column="status",
                                   row=_bad_row(codes == code))
    # An empty status cell on a row holding a prediction is no status: it was read as 'failed', so the
    # row's prediction silently left every statistic (n 4 -> 3, exit 0). A row with neither is failed.
    empty = (codes == -1) & df["pred_wnid"].notna().to_numpy() if "pred_wnid" in df.columns else np.zeros(0, bool)
    if empty.any():
        raise PredictionsError(f"empty, but this row has a prediction (pred_wnid); write {' or '.join(PREDICTION_STATUSES)} "
                               "(or leave the column out to count every row).", column="status", row=_bad_row(empty))
    ok_code = list(uniques).index("ok") if "ok" in list(uniques) else -2
    return codes == ok_code


_known_noun_wnids: set[str] = set()  # validated once per process: WordNet does not change under us


def _check_wnids(column: str, factor: "_Factor", *, must_exist: bool) -> None:
    """Every value must look like a wnid, and (``must_exist``) name a WordNet 3.0 noun synset.
    Formats are checked first: a typo is reported without loading WordNet."""
    unknown = [(k, value) for k, value in enumerate(factor.uniques) if value not in _known_noun_wnids]
    for k, value in unknown:
        if not is_wnid(value):  # 'n' and 8 ASCII digits: r'^n\d{8}$' took n٠٢١٢٣٠٤٥ (and a trailing newline)
            raise PredictionsError(f"{value!r} is not a wnid (expected 'n' and 8 digits, e.g. n02123045).",
                                   column=column, row=factor.first_row(k))
    if not must_exist:
        return
    # One lookup in the noun graph's sorted offsets for all of them (core.wordgraph; the same set
    # of offsets as NLTK's noun synsets): 41,876 synset_of calls took 16 s of a cold 21k run, 10.5 s of it
    # loading NLTK, which a metric table needs no more than the query pages do.
    from core.wordgraph import noun_graph

    if not unknown:
        return
    offsets = noun_graph().offsets
    wanted = np.array([int(value[1:]) for _, value in unknown], dtype=np.int64)
    at = np.minimum(np.searchsorted(offsets, wanted), len(offsets) - 1)
    found = offsets[at] == wanted
    for (k, value), ok in zip(unknown, found.tolist()):
        if not ok:
            raise PredictionsError(f"{value} is not a noun synset of WordNet {WORDNET_VERSION}.",
                                   column=column, row=factor.first_row(k))
    _known_noun_wnids.update(value for _, value in unknown)


@dataclass(frozen=True)
class _Factor:
    """A wnid column hashed once (:func:`_factorize`): ``codes`` per row into the column's distinct values (-1:
    missing or not counted), ``used`` the codes of counted rows (ascending, np.unique's order), ``uniques`` their
    values, ``size`` how many distinct values the column holds. Codes into the sorted wnids are one gather away
    (:func:`_recode`). Why not codes into ``uniques`` at once: that was a where, a second gather and another where
    per column, three fresh arrays of the table's length each (144 MB on the six columns of the 21k bench's 1M
    rows; its warm call's minor page faults 64,000 -> 50,000-56,000)."""

    codes: np.ndarray
    used: np.ndarray
    uniques: np.ndarray
    size: int

    def first_row(self, k: int) -> int:
        """The first row holding ``uniques[k]``."""
        return _bad_row(self.codes == self.used[k])


def _factorize(series: pd.Series, counted: np.ndarray) -> _Factor:
    """The column's :class:`_Factor` over its counted rows."""
    codes, uniques = _factorize_values(series)
    if not counted.all():  # a new array: pandas may hand back one it keeps (a categorical's codes)
        codes = np.where(counted, codes, -1)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(uniques)))  # np.unique's order, O(n)
    return _Factor(codes, used, np.asarray(uniques, dtype=object)[used], len(uniques))


def _recode(factor: _Factor, wnids: np.ndarray) -> np.ndarray:
    """Codes into the sorted ``wnids`` per row (-1: missing, not counted or not among them)."""
    if len(factor.uniques) == 0 or len(wnids) == 0:
        return np.full(len(factor.codes), -1, dtype=np.int64)
    values = factor.uniques.astype(str)
    pos = np.minimum(np.searchsorted(wnids, values), len(wnids) - 1)
    table = np.full(factor.size + 1, -1, dtype=np.int64)  # [-1], the last: a row's code -1
    table[factor.used] = np.where(wnids[pos] == values, pos, -1)
    return table[factor.codes]


_NO_TOP_K = object()  # _read_rows: the top-5 severities are not wanted


def _read_rows(df: pd.DataFrame, top_k_sums=_NO_TOP_K) -> _Rows:
    """Validate a predictions table and encode it (see :func:`compute_metric_tables` for what is
    refused and what counts); checks run in the order a person fixes a file: columns and status,
    wnid formats, WordNet, probabilities, label spaces, the top-5, repeated rows. ``top_k_sums``: a
    cache_dir (:func:`compute_metric_tables`') to have the rows' top-5 severities computed
    (:func:`_top_k_sums`, on a second core for a large table: ``rows.top_k_sums()`` gives them)."""
    if not isinstance(df, pd.DataFrame):
        raise PredictionsError(f"expected a pandas DataFrame of predictions, got {type(df).__name__}.")
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise PredictionsError(f"missing (needed: {', '.join(REQUIRED_COLUMNS)}; found: "
                               f"{', '.join(map(str, df.columns)) or 'none'}).", column=missing[0])
    ok = _status_mask(df)
    for column in REQUIRED_COLUMNS:
        empty = ok & df[column].isna().to_numpy()
        if empty.any():
            raise PredictionsError("empty, but a counted prediction needs model, true_wnid and pred_wnid.",
                                   column=column, row=_bad_row(empty))
    has_true = ~df["true_wnid"].isna().to_numpy()
    has_model = ~df["model"].isna().to_numpy()

    # Top-5 columns that are absent, or present but empty in every row (a run store table conforms
    # every predictions table to the full schema, e.g. uploaded top-1 predictions), are no top-5:
    # NA, not a top-5 accuracy equal to the top-1 one. Any one of them filled somewhere makes the
    # table a top-5 table, its absent columns empty ones (then checked like any empty cell).
    top_present = [c for c in TOP_K_COLUMNS if c in df.columns]
    has_top = any(df[c].notna().any() for c in top_present)
    # The top-k columns' wnids are looked up too: hdist@5 and hprec@5 need their WordNet values.
    empty_column = _Factor(np.full(len(df), -1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), 0)
    columns = [("true_wnid", has_true), ("pred_wnid", ok), *((c, ok) for c in TOP_K_COLUMNS if has_top)]
    # The columns read later (model, label_space, image) are hashed here too, on the same threads; what one of
    # them raises is raised where it was read before, so the checks keep their order (docstring).
    later = [c for c in ("model", "label_space", "image") if c in df.columns]

    def factor(job):
        if isinstance(job, str):
            try:
                return _factorize_values(df[job])
            except Exception as exc:  # any error (a TypeError of an unhashable cell too): raised where it was before
                return _Deferred(exc)
        return _factorize(df[job[0]], job[1]) if job[0] in df.columns else empty_column

    factors = _map(factor, [*columns, *later], parallel=len(df) >= _PARALLEL_FROM)
    read_later = dict(zip(later, factors[len(columns):]))
    factors = factors[:len(columns)]
    checked = [(column, factor) for (column, _), factor in zip(columns, factors)]
    # Each distinct value of all columns checked once when every one is a str validated before in
    # this process (exactly: as str, 'n02123045\x00' would pass for n02123045); else column by column.
    distinct = pd.unique(np.concatenate([factor.uniques for factor in factors]))
    if not all(type(v) is str and v in _known_noun_wnids for v in distinct.tolist()):
        for must_exist in (False, True):  # all formats first, then the (slower) WordNet lookups
            for column, factor in checked:
                _check_wnids(column, factor, must_exist=must_exist)
    wnids = np.unique(distinct.astype(str))
    true, pred, *top_codes = _map(lambda f: _recode(f, wnids), factors, parallel=len(df) >= _PARALLEL_FROM)
    pred = np.where(ok, pred, -1)

    model_codes, model_uniques = _read_later(read_later, "model")  # first-appearance order
    models = [str(m) for m in model_uniques]
    _check_probabilities(df)
    spaces, space, sizes = _label_spaces(df, _read_later(read_later, "label_space"))
    _check_one_space_per_model(model_codes, models, space, spaces)

    top = np.stack([pred, *top_codes]) if has_top else None
    top_complete = _check_top_k(top, ok, space, spaces, sizes) if has_top else None
    _check_in_space(top if has_top else pred[None, :], ok, wnids, space, spaces, sizes)
    repeat = _repeated_rows(df, model_codes, _read_later(read_later, "image"))
    # Every check passed: the top-5 severities start on a second core (when top_k_sums is a cache_dir). Not before
    # the last checks: a table refused there left the thread running on, building and caching similarity matrices
    # for a refused table and holding the process's exit (a hostile check).
    top_k_job = None
    if has_top and top_k_sums is not _NO_TOP_K:
        top_k_job = _start(_top_k_sums, top, top_complete, true, wnids, space, spaces, top_k_sums,
                           parallel=len(df) >= _PARALLEL_FROM)
    ok = ok & ~repeat  # an identical repeat of an earlier row counts nowhere: the earlier one is the prediction
    model = np.where(has_model & ~repeat, model_codes, -1)
    top_k_hit = (top == true).any(axis=0) & ok & (true >= 0) if has_top else None  # as codes: any column dtype
    return _Rows(models, wnids, model, true, pred, ok, top_k_hit, top, top_complete, spaces, space, top_k_job,
                 top_k_sums is not _NO_TOP_K)


@dataclass(frozen=True)
class _Deferred:
    """What factorising a column read later raised on :func:`_read_rows`' threads, raised where the column is read
    (the checks keep their order: a hostile check found a TypeError of an unhashable cell raised first)."""

    error: Exception


def _read_later(read: dict, column: str):
    """A column's factorisation from :func:`_read_rows`' threads (None when the table has no such column);
    what it raised is raised here."""
    factor = read.get(column)
    if isinstance(factor, _Deferred):
        raise factor.error
    return factor


_PROB_COLUMNS = tuple(f"prob_{k}" for k in range(1, TOP_K + 1))


def _check_probabilities(df: pd.DataFrame) -> None:
    """prob_1 ... prob_5, where given, are numbers in [0, 1] (empty is allowed: they are optional)."""
    for column in _PROB_COLUMNS:
        if column not in df.columns:
            continue
        raw = df[column]
        given = raw.notna().to_numpy()
        # True, a complex number, a date or a duration is no probability, though each converts to a number (True ->
        # 1.0, Timestamp(0) -> 0: taken as they were, a hostile check): refused at the first such cell.
        _refuse_first(raw, given & _not_real_numbers(raw), column)  # before converting: a period has no float
        # A numeric column is read as it is (pd.to_numeric was 3.4 of a column's 4.5 ms on 1M rows).
        numbers = raw if pd.api.types.is_numeric_dtype(raw.dtype) else pd.to_numeric(raw, errors="coerce")
        values = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
        # A NaN in a float column is pandas' empty cell; any other non-number, inf or value outside
        # [0, 1] is no probability (7.5, -3 and inf were taken as they were).
        is_empty_float = np.isnan(values) & pd.api.types.is_float_dtype(raw.dtype)
        _refuse_first(raw, given & ~is_empty_float & ~((values >= 0.0) & (values <= 1.0)), column)


def _refuse_first(raw: pd.Series, bad: np.ndarray, column: str) -> None:
    """PredictionsError naming the first ``bad`` cell of a probability column, written as the user wrote it."""
    if bad.any():
        row = _bad_row(bad)
        value = raw.iloc[row]
        value = value.item() if isinstance(value, np.generic) else value  # 7.5 and True, not np.float64(7.5)
        raise PredictionsError(f"{value!r} is not a probability (a number between 0 and 1); fix it or leave the cell "
                               "empty.", column=column, row=row)


_NOT_REAL_KINDS = "bcmM"  # numpy dtype kinds: bool, complex, timedelta, datetime
_NOT_REAL_TYPES = (bool, np.bool_, complex, np.complexfloating, np.datetime64, np.timedelta64, pd.Timestamp,
                   pd.Timedelta, pd.Period)


def _not_real_numbers(raw: pd.Series) -> np.ndarray:
    """Per cell: a value of a type that is no real number (bools, complex numbers, dates, durations), by the
    column's dtype, or cell by cell in an object or category column (text such as '0.5' is a number's text)."""
    kind = getattr(raw.dtype, "kind", "O")
    if kind in _NOT_REAL_KINDS or isinstance(raw.dtype, pd.PeriodDtype):
        return np.ones(len(raw), dtype=bool)
    if kind != "O":
        return np.zeros(len(raw), dtype=bool)
    values = raw.astype(object) if isinstance(raw.dtype, pd.CategoricalDtype) else raw
    return np.fromiter((isinstance(v, _NOT_REAL_TYPES) for v in values), dtype=bool, count=len(raw))


def _label_spaces(df: pd.DataFrame, factor) -> tuple[list[str], np.ndarray, list[int]]:
    """The rows' label spaces as codes into canonical names (-1: an empty cell or no column, then no
    class counts as outside it), and each name's class count. A value that names no label space or
    label set WildLens can read is refused (:func:`check_label_space`). ``factor``: the column's
    ``_factorize_values`` already made."""
    if "label_space" not in df.columns:
        return [], np.full(len(df), -1, dtype=np.int64), []
    codes, uniques = factor
    names, sizes, remap = [], [], np.full(len(uniques) + 1, -1, dtype=np.int64)
    for i, value in enumerate(uniques):
        try:
            name, size = check_label_space(value)
        except PredictionsError as exc:
            raise PredictionsError(exc.detail, column="label_space", row=_bad_row(codes == i)) from None
        if name not in names:
            names.append(name)
            sizes.append(size)
        remap[i] = names.index(name)
    return names, remap[codes], sizes


def _check_one_space_per_model(model_codes: np.ndarray, models: list[str], space: np.ndarray,
                               spaces: list[str]) -> None:
    """A model has one label space: rows of one model naming two (imagenet-1k here, imagenet-21k
    there) made the same true class unseen in some rows and seen in others of one per-model row,
    whose populations are defined by the model's label space. Refused, naming the first row of the
    second space (empty cells are not a second space)."""
    if len(spaces) < 2:
        return
    rows = np.flatnonzero((space >= 0) & (model_codes >= 0))
    if not len(rows):
        return
    model, code = model_codes[rows], space[rows]
    first_code = np.full(len(models), -1, dtype=np.int64)
    seen, first_at = np.unique(model, return_index=True)
    first_code[seen] = code[first_at]
    other = code != first_code[model]
    if other.any():
        at = int(np.argmax(other))
        m, row = int(model[at]), int(rows[at])
        raise PredictionsError(f"model {models[m]!r} has rows in two label spaces ({spaces[first_code[m]]} before, "
                               f"{spaces[code[at]]} here); a model has one label space: fix the column, or give each "
                               "head its own model id.", column="label_space", row=row)


def check_label_space(value) -> tuple[str, int]:
    """(canonical name, class count) of a predictions file's ``label_space`` value, or
    PredictionsError saying why it names no label space or label set WildLens can read here: the one
    check of both ``python -m explain metrics FILE`` and the dashboard's upload
    (:func:`explain.export.import_predictions_as_run`), since both compute their tables here."""
    from core.labels import get_label_space

    try:
        space = get_label_space(str(value))
    except WildLensError as exc:
        raise PredictionsError(f"{str(value)!r} is not a label space WildLens knows ({str(exc).rstrip('.')}); fix "
                               "the column, or leave the cell empty (then every class counts as in the space).") \
            from None
    return space.name, len(space)


def _check_top_k(top: np.ndarray, ok: np.ndarray, space: np.ndarray, spaces: list[str],
                 sizes: list[int]) -> np.ndarray:
    """Refuse a counted row whose top-5 names a class twice, leaves a gap (an empty column before a
    filled one) or is cut short; returns per row whether it holds a complete top-5. Complete: all 5
    columns, or, when the row's label space has fewer than 5 classes, exactly that many (a label
    set of 3 classes can only rank 3). A row with pred_wnid alone has no top-5 (legal: its group's
    top-5 columns are NA)."""
    filled = (top >= 0) & ok
    # The same class twice: the truth twice made top-5 accuracy 1.0. Any such row is looked for first with
    # one running "or" (a third of the work: 45 -> 15 ms on 1M rows); the exact column only when there is one.
    twice = np.zeros(top.shape[1], dtype=bool)
    for j in range(1, TOP_K):
        same = top[j] == top[0]
        for i in range(1, j):
            same |= top[j] == top[i]
        twice |= same & filled[j]
    twice_at = np.full(top.shape[1], TOP_K)  # per row: the first column repeating an earlier one
    for j in range(1, TOP_K) if twice.any() else ():
        for i in range(j):
            twice_at[filled[j] & (top[j] == top[i]) & (twice_at == TOP_K)] = j
    if (twice_at < TOP_K).any():
        row = _bad_row(twice_at < TOP_K)
        j = int(twice_at[row])
        first = next(c for c in range(j) if top[c, row] == top[j, row])
        raise PredictionsError(f"the same class twice in one top-5 (also in {_TOP_NAMES[first]}); a top-5 names 5 "
                               "different classes.", column=_TOP_NAMES[j], row=row)
    later = filled.copy()  # later[j]: a column >= j is filled (np.logical_or.accumulate over the reversed
    for j in range(TOP_K - 2, -1, -1):  # rows took 20 ms on 1M rows: it walks the strided axis; this, under 1)
        later[j] |= later[j + 1]
    for j in range(1, TOP_K - 1):
        gap = ~filled[j] & later[j + 1] & ok
        if gap.any():
            row = _bad_row(gap)
            after = next(c for c in range(j + 1, TOP_K) if filled[c, row])
            raise PredictionsError(f"empty, but {_TOP_NAMES[after]} is not: a top-5 fills pred_wnid, pred_wnid_2 "
                                   "... pred_wnid_5 in order.", column=_TOP_NAMES[j], row=row)
    k = filled.sum(axis=0)
    size = np.asarray(sizes + [TOP_K], dtype=np.int64)[space]  # -1 (no label space) picks the TOP_K at the end
    wanted = np.minimum(size, TOP_K)
    short = ok & (k > 1) & (k < wanted)
    if short.any():
        row = _bad_row(short)
        named = (f"{spaces[space[row]]} has {size[row]:,}" if space[row] >= 0 else
                 "name it in the label_space column")
        raise PredictionsError(f"empty: a top-5 lists 5 classes (fewer only when the row's label space has fewer "
                               f"than 5 classes; {named}).", column=_TOP_NAMES[k[row]], row=row)
    return ok & (k == wanted)


def _check_in_space(top: np.ndarray, ok: np.ndarray, wnids: np.ndarray, space: np.ndarray, spaces: list[str],
                    sizes: list[int]) -> None:
    """Every predicted class of a counted row is a class of the row's label space (when it names
    one): a model cannot predict outside it, so such a row names the wrong label space."""
    from core.labels import get_label_space

    for code, name in enumerate(spaces):
        here = ok & (space == code)
        if not here.any():
            continue
        index = get_label_space(name).index
        member = np.array([w in index for w in wnids.tolist()] + [True], dtype=bool)  # [-1]: an empty cell
        outside = ~member[top] & here
        if outside.any():
            row, j = (int(v[0]) for v in np.nonzero(outside.T))  # the first row, then its first column
            raise PredictionsError(f"{wnids[top[j, row]]} is not a class of this row's label space {name} "
                                   f"({sizes[code]:,} classes): a model predicts only classes of its label space; "
                                   "fix the label_space column, or leave it empty.", column=_TOP_NAMES[j], row=row)


_TOP_NAMES = ("pred_wnid", *TOP_K_COLUMNS)
_IDENTITY_COLUMNS = ("model", "image")


def _repeated_rows(df: pd.DataFrame, model_codes: np.ndarray, image_factor) -> np.ndarray:
    """Per row: an identical repeat of an earlier row with the same (model, image) (counted once:
    a file concatenated with itself holds the same prediction twice); a repeat that differs in
    any column of the predictions schema is refused, naming both rows: which one is the model's
    prediction cannot be known. Rows without an image (or without an ``image`` column) are
    predictions of their own. ``image_factor``: the image column's ``_factorize_values`` already made."""
    from core.runstore import PREDICTION_SCHEMA

    repeat = np.zeros(len(df), dtype=bool)
    if "image" not in df.columns:
        return repeat
    image_codes, _ = image_factor
    keyed = (image_codes >= 0) & (model_codes >= 0)
    key = model_codes.astype(np.int64) * (int(image_codes.max(initial=0)) + 1) + image_codes
    # Rows without model or image are predictions of their own: only keyed rows are compared. Hashed as 4-byte
    # keys where they fit (1M rows: 6 ms against 18).
    keyed_key = key[keyed]
    if len(keyed_key) and keyed_key.max() <= np.iinfo(np.uint32).max:
        keyed_key = keyed_key.astype(np.uint32)
    repeated = np.zeros(len(df), dtype=bool)
    repeated[keyed] = pd.Series(keyed_key).duplicated(keep=False).to_numpy()
    positions = np.flatnonzero(repeated)
    if not len(positions):
        return repeat
    columns = [c for c in PREDICTION_SCHEMA if c in df.columns]
    # Compared as text: the same value reads the same whatever the column's dtype; NA is '<NA>'.
    content = df.iloc[positions][columns].astype("string").fillna("<NA>").reset_index(drop=True)
    same = content.duplicated(keep="first").to_numpy()
    repeat[positions[same]] = True
    distinct = positions[~same]
    clash = pd.Series(key[distinct]).duplicated(keep="first").to_numpy()
    if clash.any():
        row = int(distinct[clash][0])
        earlier = int(distinct[(key[distinct] == key[row])][0])
        here, there = (content.iloc[int(np.searchsorted(positions, r))] for r in (row, earlier))
        column = next(c for c in columns if here[c] != there[c])
        raise PredictionsError(f"model {str(df['model'].iloc[row])!r} and image {str(df['image'].iloc[row])!r} "
                               f"again, with another {column} ({there[column]!r} before, {here[column]!r} here); keep "
                               "one row per model and image.", column=column, row=row, other_row=earlier)
    return repeat


# --------------------------------------------------------------------------- tables
def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN (NA in the tables) where den is 0: a mean over nothing is unknown, not 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _typed_frame(columns: dict, schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame in the schema's column order and nullable dtypes, built straight from numpy
    (``runstore.conform`` converts column by column and dominated small tables' time)."""
    assert list(columns) == list(schema), "columns must follow the schema"
    out = {}
    used: set[int] = set()
    for name, dtype in schema.items():
        values = columns[name]
        if dtype == "Float64":
            values = np.asarray(values, dtype=np.float64)
            # A shared NA bound (metric_intervals.na_array) or one array under two names
            # (accuracy_balanced is accuracy per class): each column owns its data, so a write to one
            # never shows in another (hostile campaign).
            if not values.flags.writeable or id(values) in used:
                values = values.copy()
            used.add(id(values))
            out[name] = pd.arrays.FloatingArray(values, np.isnan(values))  # NaN -> NA
        elif dtype == "Int64":
            values = np.asarray(values, dtype=np.int64)
            out[name] = pd.arrays.IntegerArray(values, np.zeros(len(values), dtype=bool))
        elif dtype == "boolean" and isinstance(values, pd.arrays.BooleanArray):
            out[name] = values  # keeps its NA
        elif dtype == "boolean":
            values = np.asarray(values, dtype=bool)
            out[name] = pd.arrays.BooleanArray(values, np.zeros(len(values), dtype=bool))
        else:
            out[name] = values if isinstance(values, pd.api.extensions.ExtensionArray) else pd.array(values, dtype=dtype)
    return pd.DataFrame(out, copy=False)


def _strings(uniques, codes: np.ndarray):
    """uniques[codes] as a pandas string array, converting only the few unique values."""
    return pd.array(np.asarray(uniques, dtype=object), dtype="string").take(np.asarray(codes, dtype=np.int64))


def _group_stats(groups: np.ndarray, n_groups: int, count: np.ndarray, values: PairSimilarities,
                 mistake: np.ndarray) -> dict[str, np.ndarray]:
    """Sums per group over unique (model, true, pred) triples weighted by their counts."""

    def total(weights) -> np.ndarray:
        return np.bincount(groups, weights=weights, minlength=n_groups)

    miss = count * mistake
    lin_defined = ~np.isnan(values.lin)
    lin = np.where(lin_defined, values.lin, 0.0)
    out = {
        "n": total(count),
        "n_mistakes": total(miss),
        "correct": total(count * ~mistake),
        "correct_hier": total(count * (~mistake | values.is_hyponym)),
        "mistakes_hier": total(count * (mistake & ~values.is_hyponym)),
        "sibling_count": total(miss * values.is_sibling),
        "severity_sum": total(miss * values.severity),
        "severity_sum_all": total(count * values.severity),
        "lin_n_mistakes": total(miss * lin_defined),
        "lin_n_all": total(count * lin_defined),
    }
    for name in ("path", "lch", "wup"):
        v = getattr(values, name)
        out[f"{name}_sum_mistakes"] = total(miss * v)
        out[f"{name}_sum_all"] = total(count * v)
    out["lin_sum_mistakes"] = total(miss * lin)
    out["lin_sum_all"] = total(count * lin)
    # Mistakes per (group, relation) in one bincount, not one per relation (27 -> 8 ms on 630,000 triples); the
    # same sums: a bin adds the same counts in the same order, without the other relations' zeros.
    n_relations = len(RELATIONS)
    by_relation = np.bincount(groups * n_relations + values.relation, weights=miss,
                              minlength=n_groups * n_relations).reshape(n_groups, n_relations)
    for code, column in ((HYPERNYM, "hypernym_count"), (HYPONYM, "hyponym_count"), (COUSIN, "cousin_count"),
                         (RELATED, "related_count"), (DISTANT, "distant_count")):
        out[column] = by_relation[:, code].copy()  # each column its own contiguous array, as before
    return out


def _stat_columns(stats: dict[str, np.ndarray], top_k_hits: np.ndarray | None, failed: np.ndarray) -> dict:
    n, n_mistakes = stats["n"], stats["n_mistakes"]
    columns = {
        "n": n.round().astype(np.int64),
        "n_mistakes": n_mistakes.round().astype(np.int64),
        "accuracy": _ratio(stats["correct"], n),
        "accuracy_hier": _ratio(stats["correct_hier"], n),
        "n_mistakes_hier": stats["mistakes_hier"].round().astype(np.int64),
        "accuracy_top5": _ratio(top_k_hits, n) if top_k_hits is not None else np.full(len(n), np.nan),
        "sibling_count": stats["sibling_count"].round().astype(np.int64),
        "sibling_rate": _ratio(stats["sibling_count"], n_mistakes),
    }
    for name in ("path", "lch", "wup"):
        columns[f"{name}_mistakes"] = _ratio(stats[f"{name}_sum_mistakes"], n_mistakes)
    columns["lin_mistakes"] = _ratio(stats["lin_sum_mistakes"], stats["lin_n_mistakes"])
    for name in ("path", "lch", "wup"):
        columns[f"{name}_all"] = _ratio(stats[f"{name}_sum_all"], n)
    columns["lin_all"] = _ratio(stats["lin_sum_all"], stats["lin_n_all"])
    columns["severity"] = _ratio(stats["severity_sum"], n_mistakes)
    for column in ("hypernym_count", "hyponym_count", "cousin_count", "related_count", "distant_count"):
        columns[column] = stats[column].round().astype(np.int64)
        columns[column.replace("_count", "_rate")] = _ratio(stats[column], n_mistakes)
    columns["n_failed"] = failed.astype(np.int64)
    return columns


# --------------------------------------------------------------------------- issue 16: label spaces, top-k
# NA for a class outside the label space: the model cannot name it. Not accuracy_hier: a hyponym
# prediction is hierarchically right whatever the truth (coffee predicted as espresso, issue 22 item 13).
_ACCURACY_COLUMNS = ("accuracy", "accuracy_top5")
HPREC_LABEL_SPACE = "imagenet-1k"  # hprec@5 needs every pair of the label space: its dense matrices


def _rows_in_space(rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the label space is known, and the true class is one of its classes."""
    from core.labels import get_label_space

    known = (rows.space >= 0) & (rows.true >= 0)
    inside = np.zeros(len(known), dtype=bool)
    for code, name in enumerate(rows.spaces):
        index = get_label_space(name).index
        member = np.array([w in index for w in rows.wnids.tolist()], dtype=bool)
        here = known & (rows.space == code)
        inside[here] = member[rows.true[here]]
    return known, inside


def _unseen_groups(rows: _Rows, group_of_row: np.ndarray, has_group: np.ndarray,
                   n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (model, true class) group: (unseen, every row's label space known, every row's truth inside
    it), and per row whether its label space is known. Unseen: every row of the group names its label
    space and the truth is outside it; a group with a row of unknown label space counts as seen (the
    tables before issue 16). The one rule of "outside the label space" (explain.error_types' too)."""
    row_known, row_in = _rows_in_space(rows)
    rows_of_group = np.bincount(group_of_row[has_group], minlength=n_groups)
    group_known = np.bincount(group_of_row[has_group & row_known], minlength=n_groups) == rows_of_group
    group_in = np.bincount(group_of_row[has_group & row_in], minlength=n_groups) == rows_of_group
    return group_known & ~group_in, group_known, group_in, row_known


def _unseen_rows(rows: _Rows) -> np.ndarray:
    """Per row: its (model, true class) group is unseen (:func:`_unseen_groups`), grouped as the
    per-class table groups (every row with a model and a truth, counted or failed)."""
    has_group = (rows.model >= 0) & (rows.true >= 0)
    if not has_group.any():
        return has_group
    n_wnids = max(len(rows.wnids), 1)
    keys, group_of = _unique((rows.model * n_wnids + rows.true)[has_group], inverse=True, sort=False)
    group_of_row = np.zeros(len(has_group), dtype=np.int64)
    group_of_row[has_group] = group_of
    unseen = _unseen_groups(rows, group_of_row, has_group, len(keys))[0]
    return has_group & unseen[group_of_row]


@dataclass(frozen=True)
class _TopK:
    hdist: np.ndarray  # per row: mean severity over the top-5; NaN when not all five are there
    hprec_num: np.ndarray  # per row: sum over the top-5 of 1 - d/D; NaN where hprec@5 is not computed
    hprec_den: np.ndarray  # per row: the same sum for the best possible top-5; NaN likewise


def _severity_lookup(wnids: np.ndarray, keys: np.ndarray, cache_dir) -> np.ndarray:
    """Severity of each packed (true * n + pred) key: unique pairs found without sorting when a
    dense marker fits (n^2 <= 16M), looked up once each, then gathered."""
    n = len(wnids)
    if keys.size == 0:
        return np.zeros(keys.shape, dtype=np.int16)
    if n * n <= 1 << 24:
        mark = np.zeros(n * n, dtype=bool)
        mark[keys.ravel()] = True
        unique = np.flatnonzero(mark)
        table = np.zeros(n * n, dtype=np.int16)
        table[unique] = severities_of_codes(wnids, unique // n, unique % n, cache_dir=cache_dir)
        return table[keys]
    unique, inverse = _unique(keys.ravel(), inverse=True, sort=False)  # any order: looked up, then gathered
    unique = unique.astype(np.int64, copy=False)  # 4-byte keys (_top_k_sums): the codes' arithmetic in int64
    return severities_of_codes(wnids, unique // n, unique % n, cache_dir=cache_dir)[inverse].reshape(keys.shape)


def _best_top_k(cache_dir) -> tuple[np.ndarray, float, tuple[str, ...]]:
    """For the hprec label space: per class, the sum over its TOP_K nearest classes (itself first) of
    1 - d/D, with D the largest d over the space's ordered pairs; D; the space's wnids."""
    from .similarity import label_space_matrices

    matrices = label_space_matrices(HPREC_LABEL_SPACE, cache_dir=cache_dir)
    d = matrices.values.severity.astype(np.float64)
    big = float(d.max())
    nearest = np.partition(d, TOP_K - 1, axis=1)[:, :TOP_K].sum(axis=1)
    return TOP_K - nearest / big, big, matrices.wnids


MBM_BATCH_SIZE = 256  # Making Better Mistakes' default --batch-size (scripts/start_training.py)


def mbm_hprec_factor(true_wnids, *, batch_size: int = MBM_BATCH_SIZE, cache_dir=None) -> float:
    """What ``hprec_at_5`` is multiplied by to give Making Better Mistakes' printed hierarchical
    precision@5 on the same images: ``batch_size * mean_i best(g_i) / sum_c best(c)``, over the images'
    true classes g_i (one entry per image) and the 1000 classes c of ImageNet-1k.

    Why: MBM's run_xent.py divides each batch's sum of 1 - d/D over its top-5s by
    ``np.sum(best_hier_similarities[:, :5])``, the best top-5 of every class of the label space, and
    averages over the batches; ``hprec_at_5`` divides by the best top-5 of each image's own truth.
    Exact when the images are a multiple of ``batch_size`` (MBM's loader drops the rest); ``B / 1000``
    (0.256 for 256) when they cover the 1000 classes equally."""
    best, _, wnids = _best_top_k(cache_dir)
    index = {w: i for i, w in enumerate(wnids)}
    truths = [str(w) for w in true_wnids]
    outside = sorted({w for w in truths if w not in index})
    if outside:
        raise ValueError(f"{len(outside)} true class(es) outside {HPREC_LABEL_SPACE} (e.g. {outside[0]}): "
                         "hprec_at_5 is not defined for them")
    if not truths or batch_size < 1:
        raise ValueError("mbm_hprec_factor needs at least one true class and a batch size >= 1")
    return float(batch_size * best[[index[w] for w in truths]].mean() / best.sum())


def _top_k_sums(top: np.ndarray, top_complete: np.ndarray, true: np.ndarray, wnids: np.ndarray, space: np.ndarray,
                spaces: list[str], cache_dir) -> _TopK:
    """Per row of :func:`_read_rows` (its ``top``, ``top_complete``, ``true``, ``wnids``, ``space`` and
    ``spaces``): the mean severity over its complete top-5 and hprec@5's numerator and denominator."""
    n_rows = len(true)
    nan = np.full(n_rows, np.nan)
    complete = top_complete & (true >= 0)
    idx = np.flatnonzero(complete)
    n = max(len(wnids), 1)
    top = top[:, idx]
    filled = top >= 0  # all 5, or as many as a label space of fewer than 5 classes has
    k = filled.sum(axis=0)
    true_idx = true[idx]
    # Packed (true, top) keys in 4 bytes where n^2 fits: half the memory traffic of int64 for the same keys.
    key_type = np.uint32 if n * n <= np.iinfo(np.uint32).max else np.int64
    keys = np.where(filled, top, true_idx).astype(key_type)  # an empty slot: looked up as d = 0, not summed
    keys += (true_idx * n).astype(key_type)
    severity = _severity_lookup(wnids, keys, cache_dir).astype(np.float64) * filled
    total = severity.sum(axis=0)
    hdist = nan.copy()
    hdist[idx] = total / k
    num, den = nan.copy(), nan.copy()
    if HPREC_LABEL_SPACE in spaces:
        from core.labels import get_label_space

        index = get_label_space(HPREC_LABEL_SPACE).index
        position = np.array([index.get(w, -1) for w in wnids.tolist()], dtype=np.int64)
        eligible = ((space[idx] == spaces.index(HPREC_LABEL_SPACE)) & (position[true_idx] >= 0) & (k == TOP_K))
        if eligible.any():
            best, big, _ = _best_top_k(cache_dir)
            where = idx[eligible]
            num[where] = TOP_K - total[eligible] / big
            den[where] = best[position[true[where]]]
    return _TopK(hdist, num, den)


def _top_hits(group_of_row: np.ndarray, counted: np.ndarray, rows: _Rows, n_groups: int) -> np.ndarray | None:
    """Per group: counted rows whose truth is among their top-5; NaN for a group with a counted row
    without a complete top-5 (a top-1 only row's "top-5 hit" would be its top-1 hit); None without
    top-5 columns."""
    if rows.top_k_hit is None:
        return None
    hits = np.bincount(group_of_row[counted & rows.top_k_hit], minlength=n_groups).astype(np.float64)
    incomplete = np.bincount(group_of_row[counted & ~rows.top_complete], minlength=n_groups) > 0
    return np.where(incomplete, np.nan, hits)


def _complete_ratio(groups: np.ndarray, num: np.ndarray, den: np.ndarray, n_groups: int) -> np.ndarray:
    """sum(num) / sum(den) per group over the given rows; NA for a group with no rows or with a row
    whose value is missing (NaN): a mean over part of a class would not be that class's."""
    missing = np.isnan(num) | np.isnan(den)
    incomplete = np.bincount(groups[missing], minlength=n_groups) > 0
    ok = ~missing
    out = _ratio(np.bincount(groups[ok], num[ok], n_groups), np.bincount(groups[ok], den[ok], n_groups))
    return np.where(incomplete, np.nan, out)


def _unseen_triples(rows: _Rows, unseen: np.ndarray, space: np.ndarray, true_of: np.ndarray, pred_of: np.ndarray,
                    lin: np.ndarray, cache_dir) -> tuple[np.ndarray, np.ndarray]:
    """Per (model, true, pred) triple of an unseen class: Lin(truth, pred) / sim(S, truth) (NaN where
    either is undefined) and whether pred is a nearest seen class of the truth or a hyponym of one.
    Python runs once per unique label space and unseen truth, and once per unique unseen pair."""
    from .concepts import similarity_to_seen
    from .similarity import get_taxonomy

    ratio = np.full(len(unseen), np.nan)
    sim = np.full(len(unseen), np.nan)
    nearest = np.zeros(len(unseen), dtype=bool)
    idx = np.flatnonzero(unseen)
    if not len(idx):
        return ratio, nearest, sim
    taxonomy = get_taxonomy()
    for code, name in enumerate(rows.spaces):
        here = idx[space[idx] == code]
        if not len(here):
            continue
        truths, inverse = np.unique(true_of[here], return_inverse=True)
        sims, nearest_nodes = similarity_to_seen(rows.wnids[truths].tolist(), name, cache_dir=cache_dir)
        sim[here] = sims[inverse]
        ratio[here] = lin[here] / sims[inverse]  # NaN propagates: Lin or sim undefined
        pairs, pair_inverse = np.unique(np.stack([inverse, pred_of[here]]), axis=1, return_inverse=True)
        hit = np.array([bool(nearest_nodes[t] & taxonomy.ancestors[taxonomy.node_of_wnid(str(rows.wnids[p]))].keys())
                        for t, p in pairs.T.tolist()], dtype=bool)
        nearest[here] = hit[pair_inverse.ravel()]
    return ratio, nearest, sim



def compute_metric_tables(predictions: pd.DataFrame, *, confusion_top_k: int | None = DEFAULT_CONFUSION_TOP_K,
                          cache_dir: Path | str | None | bool = None,
                          ci: IntervalOptions | None = DEFAULT_INTERVALS) -> MetricTables:
    """Per-model, per-class and confusion tables from raw predictions (see the module docstring).

    ``confusion_top_k``: confusions kept per (model, true class), most frequent first; None or 0
    keeps all. ``cache_dir``: where similarity matrices are cached (default: the run store's
    cache folder; False: memory only). ``ci``: the interval settings of the ``*_ci_low`` /
    ``*_ci_high`` columns (:mod:`explain.uncertainty`; default 95 %, 2000 resamples, seed 0);
    None leaves them NA (``--no-ci``). Raises :class:`PredictionsError` for malformed input.

    Refused, one line naming the row and column (``explain metrics FILE`` and the dashboard's upload
    both come here, so they refuse the same rows with the same words): a missing required column,
    an unknown status, an empty model / true_wnid / pred_wnid in a counted row, a wnid that is not
    'n' and 8 ASCII digits or no WordNet 3.0 noun, a probability that is not a number in [0, 1]
    (7.5, -3, inf), a ``label_space`` that names no label space or readable label set ('foo',
    'sense:../../etc/passwd', a 'file:' set not stored here; an empty cell is allowed), a predicted
    class outside the row's label space, a top-5 naming a class twice, with a gap (an empty
    pred_wnid_3 before a filled pred_wnid_4) or cut short (fewer than 5 classes, legal only when
    the row's label space has fewer than 5 classes: then exactly that many), and two rows of the
    same model and image that differ. Two rows of the same model and image that are identical in
    every column of the predictions schema count once (a file concatenated with itself); rows
    without an image are predictions of their own.
    """
    # The top-5 severities (one lookup per distinct (truth, top-k) pair) need only the rows: once every check
    # has passed they run beside everything below on a second core (the hashing and lookups release the GIL);
    # a lock in explain.similarity builds the taxonomy and IC once when both threads ask at once.
    rows = _read_rows(predictions, top_k_sums=cache_dir)
    started = [rows.top_k_job] if rows.top_k_job is not None else []
    try:
        return _metric_tables(rows, confusion_top_k, cache_dir, ci, started)
    except BaseException:
        # Nothing left running after an error (a review: a job on a thread outlived the call, held the process's
        # exit and lost its own error): each started job is waited for, its answer dropped.
        for job in started:
            job.settle()
        raise


def _metric_tables(rows: _Rows, confusion_top_k, cache_dir, ci, started: list) -> MetricTables:
    """:func:`compute_metric_tables` from its rows; each job it starts goes into ``started``."""
    n_models, n_wnids = len(rows.models), max(len(rows.wnids), 1)  # max: keeps the codes' arithmetic valid
    counted = rows.ok & (rows.model >= 0)

    # Unique (model, true, pred) triples and their counts: all later work is per triple. The (true, pred)
    # pairs first, sorted, then (model, pair code): both keys fit 4 bytes where (model, true, pred) packed
    # did not (21k space, 10 models: 4.4e9), and the triples come out in (model, true, pred) order as before.
    unique_pairs, pair_of_row = _unique(rows.true[counted] * n_wnids + rows.pred[counted], inverse=True)
    n_pairs = max(len(unique_pairs), 1)
    triples, count = _unique(rows.model[counted] * n_pairs + pair_of_row, counts=True)
    model_of, pair_of_triple = triples // n_pairs, triples % n_pairs
    pair_key = unique_pairs[pair_of_triple]
    true_of, pred_of = pair_key // n_wnids, pair_key % n_wnids
    pair_values = similarities_of_codes(rows.wnids, unique_pairs // n_wnids, unique_pairs % n_wnids,
                                        cache_dir=cache_dir) if len(unique_pairs) else PairSimilarities.empty()
    values = pair_values.take(pair_of_triple)
    mistake = true_of != pred_of
    count = count.astype(np.float64)

    # Per (model, true class): every class with a row, counted or failed.
    has_group = (rows.model >= 0) & (rows.true >= 0)
    row_group_key = rows.model * n_wnids + rows.true
    group_keys, group_inverse = _unique(row_group_key[has_group], inverse=True)
    group_of_triple = np.searchsorted(group_keys, model_of * n_wnids + true_of)
    class_stats = _group_stats(group_of_triple, len(group_keys), count, values, mistake)
    group_of_row = np.zeros(len(row_group_key), dtype=np.int64)  # read only where has_group
    group_of_row[has_group] = group_inverse
    class_top = _top_hits(group_of_row, has_group & rows.ok, rows, len(group_keys))
    class_failed = np.bincount(group_of_row[has_group & ~rows.ok], minlength=len(group_keys))
    class_columns = _stat_columns(class_stats, class_top, class_failed)

    # Label spaces: a class outside its model's label space ("unseen") gets NA accuracies.
    n_groups = len(group_keys)
    unseen, group_known, group_in, row_known = _unseen_groups(rows, group_of_row, has_group, n_groups)
    group_space = np.full(n_groups, -1, dtype=np.int64)
    group_space[group_of_row[has_group & row_known]] = rows.space[has_group & row_known]
    for column in _ACCURACY_COLUMNS:
        class_columns[column] = np.where(unseen, np.nan, class_columns[column])
    class_columns["accuracy_balanced"] = class_columns["accuracy"]
    # The confusions table reads what is computed above and nothing below writes it: built on another thread
    # beside the per-class and per-model columns (and beside the top-5 severities while they last). Measured
    # with the 21k bench's 1M rows, this and the 4-byte keys together: 1.02-1.11 -> 0.88-0.99 s a call (the
    # file benchmarks/results/metrics-21k-2026-12-07.txt).
    confusions_job = _start(_confusions, rows, group_of_triple, group_keys, class_stats, count, values, mistake,
                            model_of, true_of, pred_of, confusion_top_k, ci, parallel=len(rows.ok) >= _PARALLEL_FROM)
    started.append(confusions_job)
    topk = rows.top_k_sums()
    counted_row = has_group & rows.ok
    group_row = group_of_row[counted_row]
    class_columns["hdist_at_1"] = _ratio(class_stats["severity_sum_all"], class_stats["n"])
    class_columns["hdist_at_5"] = _complete_ratio(group_row, topk.hdist[counted_row], np.ones(len(group_row)),
                                                  n_groups)
    class_columns["hprec_at_5"] = np.where(unseen, np.nan, _complete_ratio(
        group_row, topk.hprec_num[counted_row], topk.hprec_den[counted_row], n_groups))
    ratio, nearest, sim = _unseen_triples(rows, unseen[group_of_triple], group_space[group_of_triple], true_of, pred_of,
                                     values.lin, cache_dir)
    ratio_defined = ~np.isnan(ratio)
    class_columns["lin_vs_best"] = _ratio(np.bincount(group_of_triple, count * np.where(ratio_defined, ratio, 0.0),
                                                      n_groups),
                                          np.bincount(group_of_triple, count * ratio_defined, n_groups))
    group_sim = np.full(n_groups, np.nan)
    group_sim[group_of_triple] = sim  # one value per (model, truth): every triple of a group has the same
    class_columns["sim_to_seen"] = group_sim
    class_columns["share_nearest"] = np.where(unseen, _ratio(np.bincount(group_of_triple, count * nearest, n_groups),
                                                             class_stats["n"]), np.nan)
    in_space = pd.arrays.BooleanArray(group_in, ~group_known)
    class_columns.update(metric_intervals.wilson_bounds(class_columns, "per_class", ci) if ci else
                         metric_intervals.no_bounds("per_class", n_groups))

    # Per model: the same sums over the model's in-space classes only, every column alike (one
    # population per row: accuracy over the in-space classes beside images and mistakes over all
    # read "18 images, 13 mistakes, accuracy 83.3 %"); the unseen classes are the *_unseen columns.
    seen_triple = ~unseen[group_of_triple]
    # A model's sums are its seen classes' sums (a class's triples are all seen or all unseen): one bincount
    # over the classes, not _group_stats over the triples again (21k space: 206k classes, 630k triples, 0.07 s).
    seen_group, group_model = ~unseen, group_keys // n_wnids
    seen_stats = {name: np.bincount(group_model[seen_group], sums[seen_group], n_models)
                  for name, sums in class_stats.items()}
    has_model = rows.model >= 0
    seen_row = np.zeros(len(rows.ok), dtype=bool)
    seen_row[has_group] = ~unseen[group_of_row[has_group]]
    seen_row |= has_model & ~has_group  # rows without a true class count nowhere but n_failed
    model_top = _top_hits(rows.model, has_model & rows.ok & seen_row, rows, n_models)
    model_failed = np.bincount(rows.model[has_model & ~rows.ok], minlength=n_models)
    model_columns = _stat_columns(seen_stats, model_top, model_failed)
    model_of_group = group_keys // n_wnids
    balanced = ~unseen & (class_stats["n"] > 0)
    model_columns["accuracy_balanced"] = _ratio(
        np.bincount(model_of_group[balanced], class_columns["accuracy"][balanced], n_models),
        np.bincount(model_of_group[balanced], minlength=n_models).astype(np.float64))
    model_columns["hdist_at_1"] = _ratio(seen_stats["severity_sum_all"], seen_stats["n"])
    model_row = rows.model[counted_row & seen_row]
    model_columns["hdist_at_5"] = _complete_ratio(model_row, topk.hdist[counted_row & seen_row],
                                                  np.ones(len(model_row)), n_models)
    model_columns["hprec_at_5"] = _complete_ratio(model_row, topk.hprec_num[counted_row & seen_row],
                                                  topk.hprec_den[counted_row & seen_row], n_models)
    unseen_triple = ~seen_triple
    model_columns["n_unseen"] = np.bincount(model_of[unseen_triple], count[unseen_triple], n_models).round()
    defined = unseen_triple & ratio_defined
    model_columns["lin_vs_best_unseen"] = _ratio(np.bincount(model_of[defined], count[defined] * ratio[defined],
                                                             n_models),
                                                 np.bincount(model_of[defined], count[defined], n_models))
    model_columns["share_nearest_unseen"] = _ratio(
        np.bincount(model_of[unseen_triple], count[unseen_triple] * nearest[unseen_triple], n_models),
        model_columns["n_unseen"])
    model_columns.update(metric_intervals.wilson_bounds(model_columns, "per_model", ci) if ci else
                         metric_intervals.no_bounds("per_model", n_models))
    if ci and len(group_keys):
        top_rows = counted_row & ~np.isnan(topk.hdist)
        class_bounds, model_bounds = metric_intervals.bootstrap_bounds(
            group_of_triple=group_of_triple, count=count, values=values, mistake=mistake, seen_triple=seen_triple,
            lin_ratio=ratio, group_model=model_of_group, n_models=n_models, balanced=balanced,
            top_group=group_of_row[top_rows], top_count=np.ones(int(top_rows.sum())), top_hdist=topk.hdist[top_rows],
            top_num=topk.hprec_num[top_rows], top_den=topk.hprec_den[top_rows], top_seen=seen_row[top_rows],
            options=ci, model_keys=np.array([model_stream_key(m) for m in rows.models], dtype=np.uint64))
        class_columns.update(class_bounds)
        model_columns.update(model_bounds)
    for columns_, table, size in ((class_columns, "per_class", n_groups), (model_columns, "per_model", n_models)):
        missing = [c for c in metric_intervals.bound_names(table) if c not in columns_]
        columns_.update(dict.fromkeys(missing, metric_intervals.na_array(size)))  # no groups: NA bounds
    if ci:  # without intervals every bound is NA already: nothing to mask (0.06 s of a warm 21k table)
        metric_intervals.mask_undefined(class_columns, "per_class")
        metric_intervals.mask_undefined(model_columns, "per_model")
    columns = {"model": _strings(rows.models, group_keys // n_wnids),
               "true_wnid": _strings(rows.wnids, group_keys % n_wnids), **class_columns, "in_label_space": in_space}
    per_class = _typed_frame({c: columns[c] for c in PER_CLASS_SCHEMA}, PER_CLASS_SCHEMA)
    columns = {"model": _strings(rows.models, np.arange(n_models)), **model_columns}
    per_model = _typed_frame({c: columns[c] for c in PER_MODEL_SCHEMA}, PER_MODEL_SCHEMA)

    # group_keys are sorted by (model code, true code): rows are in model order (first
    # appearance in the input), then true_wnid (codes follow the sorted wnids).
    return MetricTables(per_model, per_class, confusions_job(), ci=ci.as_dict() if ci else None)


def _confusions(rows: _Rows, group_of_triple, group_keys, class_stats, count, values: PairSimilarities, mistake,
                model_of, true_of, pred_of, top_k, ci) -> pd.DataFrame:
    """Mistake triples ranked within (model, true class) by count, then pred wnid; the rows come
    out in per-class order (groups are sorted like per_class), then by rank."""
    idx = np.flatnonzero(mistake)
    group = group_of_triple[idx]
    # Triples are sorted by (model, true, pred) codes and wnids are sorted, so within a group idx
    # already runs by pred_wnid: a stable sort on (group, -count) keeps that as the tie-break (one
    # int64 key: 0.05 s against lexsort's 0.19 s on 700,000 mistakes).
    most = int(count.max(initial=0)) + 1
    order = idx[np.argsort(group * most + (most - 1 - count[idx].astype(np.int64)), kind="stable")]
    group = group_of_triple[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(group)])
    rank = np.arange(len(group)) - np.repeat(starts, sizes) + 1
    if top_k:
        keep = rank <= top_k
        order, group, rank = order[keep], group[keep], rank[keep]
    v = values.take(order)
    n_mistakes, n = class_stats["n_mistakes"][group], class_stats["n"][group]
    lcs_codes, lcs = _unique(v.lcs, inverse=True)
    bounds = (metric_intervals.confusion_bounds(count[order], n_mistakes, n, ci) if ci else
              metric_intervals.no_bounds("confusions", len(order)))
    return _typed_frame({
        "model": _strings(rows.models, model_of[order]),
        "true_wnid": _strings(rows.wnids, true_of[order]),
        "pred_wnid": _strings(rows.wnids, pred_of[order]),
        "count": count[order].round().astype(np.int64),
        "mf": count[order] / n_mistakes,
        "rank": rank.astype(np.int64),
        "relation": _strings(RELATIONS, v.relation),
        "share_of_samples": count[order] / n,
        "is_sibling": v.is_sibling,
        "path_distance": v.path_distance.astype(np.int64),
        "path": v.path, "lch": v.lch, "wup": v.wup, "lin": v.lin,
        "severity": v.severity.astype(np.int64),
        "lcs_wnid": _strings([wnid_of_offset(o) for o in lcs_codes.tolist()], lcs),
        **bounds,
    }, CONFUSION_SCHEMA)


def column_docs(table: str) -> dict[str, str]:
    """Column -> one-line meaning, for 'per_model', 'per_class' or 'confusions' (dashboard help)."""
    return docs_of(METRIC_TABLES[table])


def _column_reference() -> str:
    parts = []
    for title, columns in METRIC_TABLES.items():
        parts.append(f"\n    {title} columns:\n" + "\n".join(f"      {k} ({c.dtype}): {c.doc}" for k, c in columns.items()))
    return "".join(parts)


compute_metric_tables.__doc__ += _column_reference()
