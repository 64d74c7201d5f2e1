"""CSV export of the metric tables, and reading predictions made by any other tool (a CSV, a
Parquet file, or a FiftyOne export: ``explain.fiftyone_import``).

``table_to_csv_bytes`` is the one serialisation: the dashboard's download buttons and
``python -m explain metrics`` both call it, so a downloaded file equals the library's table
(UTF-8, header row, no index, '\\n' line ends, NA as an empty field, floats at full precision).
It is ``core.csvsafe.to_csv_bytes``, the serialisation of every CSV WildLens writes: a text cell
that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR first) gets a single
quote in front. A predictions CSV is read with ``core.csvsafe.read_csv``, which gives such cells
back as they were, so classify's ``--out FILE.csv`` reads back unchanged.

Names everywhere: an exported table with a wnid column also has the matching name column right
after it (``true_wnid`` -> ``true_name``, ``pred_wnid_2`` -> ``pred_name_2``, ``lcs_wnid`` ->
``lcs_name``, ``wnid`` -> ``name``; ``core.names.with_names``), named in the run's label space
(ImageNet-1k by default; WordNet's name for a wnid outside it). The name cells pass through the
same formula neutralisation as every other text cell. The stored tables (``metrics/``, Parquet)
keep wnids only: names are for the reader, identity is the wnid.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .metrics import (DEFAULT_INTERVALS, REQUIRED_COLUMNS, TOP_K_COLUMNS, MetricTables, PredictionsError,
                      compute_metric_tables)
from core.csvsafe import read_csv, to_csv_bytes
from core.errors import WildLensError
from core.labels import DEFAULT_LABEL_SPACE, get_label_space
from core.names import with_names
from core.runstore import TOP_K, write_bytes_atomic

METRIC_CSV_NAMES = {"per_model": "per_model.csv", "per_class": "per_class.csv", "confusions": "confusions.csv"}
_STRING_COLUMNS = (*REQUIRED_COLUMNS, *TOP_K_COLUMNS, "image", "label_space", "status", "reason")
_PROB_COLUMNS = tuple(f"prob_{k}" for k in range(1, TOP_K + 1))
# The largest predictions file read (core.userfile): about 15 million CSV rows of a top-5 classifier.
MAX_PREDICTIONS_BYTES = 2 << 30


def table_to_csv_bytes(df: pd.DataFrame, label_space: str | None = DEFAULT_LABEL_SPACE, *,
                       names: bool = True) -> bytes:
    """A table as CSV bytes (see the module docstring for the format): ``core.csvsafe.to_csv_bytes``
    of the table with a name column after each wnid column (``core.names.with_names`` in
    ``label_space``; ``names=False`` writes the table as it is)."""
    if names:
        df = with_names(df, label_space or DEFAULT_LABEL_SPACE)
    return to_csv_bytes(df)


def write_metric_tables(tables: MetricTables, out_dir: Path | str,
                        label_space: str | None = DEFAULT_LABEL_SPACE) -> dict[str, Path]:
    """Write per_model.csv, per_class.csv and confusions.csv atomically, class names beside the
    wnids (``label_space``: the run's, where known); returns their paths."""
    out_dir = Path(out_dir)
    written = {}
    for name, df in tables.as_dict().items():
        target = out_dir / METRIC_CSV_NAMES[name]
        write_bytes_atomic(target, table_to_csv_bytes(df, label_space))
        written[name] = target
    return written


def _check_csv_fields(data: bytes, name: str, sep: str):
    """Every row of a CSV (``data``, the file ``name``'s bytes) must have as many fields as its
    header: pandas would otherwise take the
    first field of rows one field longer than the header as an index and shift every column left
    (a model column holding wnids), or fill the fields missing from a short row with NA. Raises
    PredictionsError naming the first line whose count differs. Blank lines are skipped, as pandas
    skips them. Returns ``line_of_row``: data row (0-based) -> "row N (line L)", L being the row's
    first physical line.

    A file without a double quote is counted as bytes (a field is what lies between separators:
    0.6 s per million rows); a file with one is read as CSV, where a quoted separator or line
    break belongs to its value (1.4 s per million rows)."""
    if b'"' in data:
        starts = _csv_record_starts(data, name, sep)
    else:
        starts = _plain_line_starts(data, name, sep)

    def line_of_row(row: int) -> str:
        return f"row {row + 1} (line {starts[row]})" if 0 <= row < len(starts) else f"row {row + 1}"

    return line_of_row


def _check_csv_header_unique(data: bytes, name: str, sep: str) -> None:
    """No column name twice in a CSV's header: pandas renames the second 'pred_wnid' to
    'pred_wnid.1' and reads the first one only, so a file with two pred_wnid columns was scored on
    whichever came first, exit 0. PredictionsError naming the column and both positions."""
    import csv
    import io

    head = data[:1 << 20].decode("utf-8", "replace").lstrip("\ufeff")
    record = next((r for r in csv.reader(io.StringIO(head), delimiter=sep) if any(f.strip() for f in r)), [])
    seen: dict[str, int] = {}
    for position, field in enumerate((f.strip() for f in record), start=1):
        if field and field in seen:
            raise PredictionsError(f"{name}: column {field!r} appears twice in the header (columns {seen[field]} "
                                   f"and {position}); keep one of them.")
        seen.setdefault(field, position)


def _plain_line_starts(data: bytes, name: str, sep: str) -> np.ndarray:
    from operator import methodcaller

    lines = data.split(b"\n")
    counts = np.fromiter(map(methodcaller("count", sep.encode()), lines), dtype=np.int64, count=len(lines))
    header_at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if header_at is None:  # nothing but blank lines: pandas says the file is empty
        return np.zeros(0, dtype=np.int64)
    blank = []
    for i in np.flatnonzero(counts != counts[header_at]).tolist():  # in a sound file: blank lines only
        if not lines[i].strip():
            blank.append(i)
        elif i > header_at:
            header, record = (lines[j].decode("utf-8", "replace").lstrip("\ufeff").rstrip("\r").split(sep)
                              for j in (header_at, i))
            raise PredictionsError(f"{name}: {_field_count_problem(i + 1, record, header, sep)}")
    is_row = np.ones(len(lines), dtype=bool)
    is_row[:header_at + 1] = False
    is_row[blank] = False
    return np.flatnonzero(is_row) + 1


def _csv_record_starts(data: bytes, name: str, sep: str) -> list[int]:
    import csv
    import io
    from array import array

    starts = array("q")
    with io.StringIO(data.decode("utf-8-sig"), newline="") as fh:
        reader = csv.reader(fh, delimiter=sep, skipinitialspace=True)
        header, previous_end = None, 0
        try:
            for record in reader:
                first, previous_end = previous_end + 1, reader.line_num
                if not record or (len(record) == 1 and not record[0].strip()):  # a blank line, as pandas sees it
                    continue
                if header is None:
                    header = record
                elif len(record) != len(header):
                    raise PredictionsError(f"{name}: {_field_count_problem(first, record, header, sep)}")
                else:
                    starts.append(first)
        except csv.Error as exc:
            raise PredictionsError(f"{name} cannot be read: {exc} (line {reader.line_num}).") from None
    return starts


def _field_count_problem(line: int, record: list[str], header: list[str], sep: str) -> str:
    """What is wrong with a row whose field count differs from the header's, and the fix."""
    mark = "comma" if sep == "," else "tab"
    columns = ", ".join(header) if len(header) <= 8 else ", ".join(header[:8]) + ", ..."
    problem = f"line {line} has {len(record)} fields but the header has {len(header)} ({columns})"
    if len(record) < len(header):
        return problem + "; every row needs one field per column (leave a field empty, not out)."
    extra = record[len(header):]
    if not any(field.strip() for field in extra):
        return problem + (f": a trailing {mark} after the last field; remove it" if len(extra) == 1 else
                          f": {len(extra)} trailing {mark}s after the last field; remove them") + \
            " (or name the extra column in the header)."
    return problem + f"; quote a value that contains a {mark} (\"a{sep}b\"), or add the missing column name to the header."


def _check_parquet_types(data: bytes, name: str) -> None:
    """A column the metrics read must hold one value per row: a Parquet list, struct or map column
    is named with its Parquet type (pandas would give arrays that cannot be counted)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(io.BytesIO(data))
    for column in (*REQUIRED_COLUMNS, *TOP_K_COLUMNS, "status", *_PROB_COLUMNS):
        if column in schema.names and pa.types.is_nested(schema.field(column).type):
            one = ("one number per row" if column in _PROB_COLUMNS else "one model id per row" if column == "model"
                   else "'ok' or 'failed' per row" if column == "status" else "one wnid per row (e.g. n02123045)")
            raise PredictionsError(f"{name}: column {column!r} is {schema.field(column).type} in this Parquet "
                                   f"file, not a single value per row; write {one}.")


def read_predictions_file(path: Path | str) -> tuple[pd.DataFrame, callable]:
    """A predictions CSV (.csv, .tsv) or Parquet (.parquet, .pq) file as a DataFrame, plus a
    function naming a row the way a person finds it in that file (a CSV row by its physical line).
    A folder or a .json file is a FiftyOne export (``explain.fiftyone_import``: FiftyOne's
    FiftyOneDataset or FiftyOneImageClassificationDataset, a row named by its sample and model).
    Raises PredictionsError with a one-line reason for an unreadable, empty or ill-typed file, and
    for a CSV row whose field count differs from the header's (never read shifted)."""
    import io

    from core.userfile import UserFileError, read_user_bytes

    path = Path(path)
    from .fiftyone_import import is_fiftyone_source, read_fiftyone_predictions

    if is_fiftyone_source(path):  # a FiftyOne export: its folder, labels.json or samples.json
        return read_fiftyone_predictions(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".tsv", ".txt", ".parquet", ".pq"):
        raise PredictionsError(f"{path.name}: unknown file type {suffix or '(none)'}; use .csv, .tsv or .parquet, or "
                               "a FiftyOne export (its folder, labels.json or samples.json).")
    try:
        # Read once, as a regular file of bounded size (a FIFO blocked here for ever, /dev/zero read
        # until MemoryError); everything below parses these bytes.
        data = read_user_bytes(path, max_bytes=MAX_PREDICTIONS_BYTES)
    except UserFileError as exc:
        raise PredictionsError(str(exc)) from None
    try:
        if suffix in (".csv", ".tsv", ".txt"):
            sep = "\t" if suffix == ".tsv" else ","
            nul = data.find(b"\x00")
            if nul >= 0:  # a sparse or binary file: text never holds NUL (a 2 GiB one took 27 s and 6 GB to say "line 6 has 1 fields")
                line = data.count(b"\n", 0, nul) + 1
                raise PredictionsError(f"{path.name}: line {line} holds a NUL byte (binary "
                                       "data, e.g. a damaged or sparse file), not CSV text; export the predictions again.")
            line_of_row = _check_csv_fields(data, path.name, sep)
            _check_csv_header_unique(data, path.name, sep)
            # index_col=False: the first column is data, never an index (the field counts are checked above).
            df = read_csv(io.BytesIO(data), sep=sep, dtype={c: "string" for c in _STRING_COLUMNS}, index_col=False,
                          keep_default_na=False, na_values=[""], skipinitialspace=True)
        else:
            df = pd.read_parquet(io.BytesIO(data))
            _check_parquet_types(data, path.name)
            line_of_row = lambda row: f"row {row + 1}"  # noqa: E731
        del data
    except PredictionsError:
        raise
    except pd.errors.EmptyDataError:
        raise PredictionsError(f"{path} is empty; expected a header with {', '.join(REQUIRED_COLUMNS)} and one row "
                               "per prediction.") from None
    except UnicodeDecodeError:
        raise PredictionsError(f"{path} is not UTF-8 text; is it really a CSV file?") from None
    except (ValueError, OSError) as exc:  # parser errors, damaged Parquet, unreadable file
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PredictionsError(f"{path} cannot be read: {first_line[:300]}") from None
    if len(df) == 0:
        raise PredictionsError(f"{path} has no rows (columns found: {', '.join(map(str, df.columns)) or 'none'}).")
    for column in _PROB_COLUMNS:
        if column in df.columns and not pd.api.types.is_numeric_dtype(df[column]):
            values = pd.to_numeric(df[column], errors="coerce")
            bad = values.isna() & df[column].notna()
            if bad.any():
                row = int(bad.to_numpy().nonzero()[0][0])
                raise PredictionsError(f"{line_of_row(row)}, column {column!r}: {df[column].iloc[row]!r} is not a "
                                       "probability (a number between 0 and 1).")
            df[column] = values
    return df, line_of_row


def metrics_from_file(predictions: Path | str, out_dir: Path | str, *, confusion_top_k: int | None = 3,
                      cache_dir=None, ci=DEFAULT_INTERVALS) -> tuple[MetricTables, dict[str, Path]]:
    """Read a predictions file, compute the tables and write them as CSV into ``out_dir``.
    Errors are PredictionsError with the file's own row/line numbers. ``ci``: the interval settings
    (explain.uncertainty.IntervalOptions; None: the interval columns are NA)."""
    df, line_of_row = read_predictions_file(predictions)
    try:
        tables = compute_metric_tables(df, confusion_top_k=confusion_top_k, cache_dir=cache_dir, ci=ci)
    except PredictionsError as exc:
        raise PredictionsError(f"{Path(predictions).name}: {exc.describe(line_of_row)}") from None
    return tables, write_metric_tables(tables, out_dir, _one_label_space(df))


def _one_label_space(df: pd.DataFrame) -> str:
    """The predictions' label space when they name exactly one (names in exports), else ImageNet-1k."""
    from core.labels import canonical_label_space

    values = df["label_space"].dropna().unique().tolist() if "label_space" in df.columns else []
    spaces = {canonical_label_space(str(v)) for v in values}  # checked by compute_metric_tables: no error here
    return spaces.pop() if len(spaces) == 1 else DEFAULT_LABEL_SPACE


def _check_model_ids(df: pd.DataFrame) -> None:
    """A PredictionsError naming the first row whose model id cannot name a folder of the run (core.tables'
    MODEL_ID_RULE). Why here: the run store refused it only while storing, in one line without the row or the
    rule (a UI review: "'hf-hub:org/m1' is not a usable model id.")."""
    from core.parts import usable_model_id
    from core.tables import MODEL_ID_RULE

    models = df["model"]
    for model in pd.unique(models.dropna()):
        if not usable_model_id(str(model)):
            row = int(np.flatnonzero((models == model).to_numpy(dtype=bool, na_value=False))[0])
            raise PredictionsError(f"{str(model)[:80]!r} is not a usable model id: {MODEL_ID_RULE}.", column="model",
                                   row=row)


def import_predictions_as_run(predictions: Path | str, store, title: str = "") -> tuple[object, MetricTables]:
    """Bring your own predictions: a predictions file (the columns ``python -m explain metrics``
    reads) becomes a new run of ``store`` (a core.runstore.RunStore) whose tables every page shows.

    The file is read and measured first, so a bad file is a PredictionsError naming its line and
    nothing is created; the run is made only then (source 'upload', its classes the file's true
    wnids). A row without an ``image`` gets 'row-<line>' as its identity (the run store keys
    predictions by model and image); a run has no images, so pages that show images say so."""
    from core.runstore import RunInfo, new_run_id

    from .artefact import refresh_metrics

    from core.serving import check_upload_bytes, check_upload_table

    path = Path(predictions)
    # Caps first (core/serving.py): a file of 9,600 model ids took 160 s and made 9,600 folders.
    check_upload_bytes(path.name, path.stat().st_size if path.is_file() else 0)
    df, line_of_row = read_predictions_file(path)
    check_upload_table(path.name, len(df), df["model"].nunique() if "model" in df.columns else 0)
    try:  # the validation of `python -m explain metrics FILE` (label spaces included: metrics.check_label_space)
        tables = compute_metric_tables(df)
        _check_model_ids(df)
    except PredictionsError as exc:
        raise PredictionsError(f"{path.name}: {exc.describe(line_of_row).rstrip('.')}. No run was created.") from None
    df = df.copy()
    if "image" not in df.columns:
        df["image"] = pd.NA
    # +2: rows count from 0 and line 1 of a CSV is the header (the same numbering as the errors).
    missing = df["image"].isna()
    # A name no row of the file already holds: 'row-3' given to line 3 beside a row whose image is
    # 'row-3' made one (model, image) of two predictions, and the run kept one of them.
    taken = set(df.loc[~missing, "image"].astype(str))
    prefix = "row-"
    while any(f"{prefix}{i + 2}" in taken for i in np.flatnonzero(missing.to_numpy())):
        prefix = "_" + prefix
    df.loc[missing, "image"] = [f"{prefix}{i + 2}" for i in np.flatnonzero(missing.to_numpy())]
    if "status" not in df.columns:
        df["status"] = "ok"
    wnids = sorted(set(df["true_wnid"].dropna().astype(str)))
    label_space = _one_label_space(df)  # a label space compute_metric_tables has checked: every page names classes in it
    info = RunInfo(run_id=new_run_id(title or path.stem), title=title or path.name, source="upload", wnids=wnids,
                   label_space=label_space,
                   notes=f"predictions uploaded from {path.name}; no images")
    run = store.create_run(info)
    try:
        run.append_predictions(df)  # StoreError: e.g. a model id that cannot name a folder, in one line
    except Exception:
        import shutil

        shutil.rmtree(run.path)  # the run folder this call made a moment ago: no run is left half made
        raise
    run.update_info(models=list(dict.fromkeys(df["model"].astype(str))))
    refresh_metrics(run)
    return run, tables
