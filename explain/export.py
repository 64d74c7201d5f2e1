"""CSV export of the metric tables, and reading predictions made by any other tool.

``table_to_csv_bytes`` is the one serialisation: the dashboard's download buttons and
``python -m explain metrics`` both call it, so a downloaded file equals the library's table
(UTF-8, header row, no index, '\\n' line ends, NA as an empty field, floats at full precision).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .metrics import REQUIRED_COLUMNS, TOP_K_COLUMNS, MetricTables, PredictionsError, compute_metric_tables
from core.runstore import TOP_K, write_bytes_atomic

METRIC_CSV_NAMES = {"per_model": "per_model.csv", "per_class": "per_class.csv", "confusions": "confusions.csv"}
_STRING_COLUMNS = (*REQUIRED_COLUMNS, *TOP_K_COLUMNS, "image", "label_space", "status", "reason")
_PROB_COLUMNS = tuple(f"prob_{k}" for k in range(1, TOP_K + 1))


def table_to_csv_bytes(df: pd.DataFrame) -> bytes:
    """A table as CSV bytes (see the module docstring for the format)."""
    return df.to_csv(index=False, lineterminator="\n", na_rep="").encode("utf-8")


def write_metric_tables(tables: MetricTables, out_dir: Path | str) -> dict[str, Path]:
    """Write per_model.csv, per_class.csv and confusions.csv atomically; returns their paths."""
    out_dir = Path(out_dir)
    written = {}
    for name, df in tables.as_dict().items():
        target = out_dir / METRIC_CSV_NAMES[name]
        write_bytes_atomic(target, table_to_csv_bytes(df))
        written[name] = target
    return written


def _csv_line(row: int) -> str:
    # +2: rows count from 0 and line 1 is the header.
    return f"row {row + 1} (line {row + 2})"


def _check_parquet_types(path: Path) -> None:
    """A column the metrics read must hold one value per row: a Parquet list, struct or map column
    is named with its Parquet type (pandas would give arrays that cannot be counted)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    for column in (*REQUIRED_COLUMNS, *TOP_K_COLUMNS, "status", *_PROB_COLUMNS):
        if column in schema.names and pa.types.is_nested(schema.field(column).type):
            one = ("one number per row" if column in _PROB_COLUMNS else "one model id per row" if column == "model"
                   else "'ok' or 'failed' per row" if column == "status" else "one wnid per row (e.g. n02123045)")
            raise PredictionsError(f"{path.name}: column {column!r} is {schema.field(column).type} in this Parquet "
                                   f"file, not a single value per row; write {one}.")


def read_predictions_file(path: Path | str) -> tuple[pd.DataFrame, callable]:
    """A predictions CSV (.csv, .tsv) or Parquet (.parquet, .pq) file as a DataFrame, plus a
    function naming a row the way a person finds it in that file. Raises PredictionsError with a
    one-line reason for an unreadable, empty or ill-typed file."""
    path = Path(path)
    if not path.exists():
        raise PredictionsError(f"{path} does not exist.")
    if path.is_dir():
        raise PredictionsError(f"{path} is a folder; give the predictions file (.csv or .parquet).")
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv", ".txt"):
            df = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype={c: "string" for c in _STRING_COLUMNS},
                             keep_default_na=False, na_values=[""], skipinitialspace=True)
            line_of_row = _csv_line
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
            _check_parquet_types(path)
            line_of_row = lambda row: f"row {row + 1}"  # noqa: E731
        else:
            raise PredictionsError(f"{path.name}: unknown file type {suffix or '(none)'}; use .csv, .tsv or .parquet.")
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
                                       "probability (a number).")
            df[column] = values
    return df, line_of_row


def metrics_from_file(predictions: Path | str, out_dir: Path | str, *,
                      confusion_top_k: int | None = 3, cache_dir=None) -> tuple[MetricTables, dict[str, Path]]:
    """Read a predictions file, compute the tables and write them as CSV into ``out_dir``.
    Errors are PredictionsError with the file's own row/line numbers."""
    df, line_of_row = read_predictions_file(predictions)
    try:
        tables = compute_metric_tables(df, confusion_top_k=confusion_top_k, cache_dir=cache_dir)
    except PredictionsError as exc:
        raise PredictionsError(f"{Path(predictions).name}: {exc.describe(line_of_row)}") from None
    return tables, write_metric_tables(tables, out_dir)
