"""Every CSV that WildLens writes, serialised in one place, safe to open in a spreadsheet.

A text cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run as a
formula by Excel, LibreOffice and Google Sheets (CSV or formula injection: ``=HYPERLINK(...)`` in a
model id, a class name, a search term, a URL or a file name). :func:`to_csv_bytes` neutralises
such a cell the way OWASP recommends, with a single quote in front (``'=HYPERLINK(...)``): the
spreadsheet shows the text and runs nothing. Everything that writes a CSV calls it:

- the dashboard's download buttons and ``python -m explain metrics`` (``explain.export.table_to_csv_bytes``);
- ``python -m classify --images ... --out FILE.csv`` and crawl's ``DIR/manifest.csv``
  (``core.runstore.write_table``, CSV branch).

Only text is touched: cells of number columns (a negative probability, -0.5) are numbers, not
formulas, and are written as they are; so are NA cells. Column names are text and follow the rule.

Reading back (:func:`read_csv`, :func:`restore_frame`) gives the original values exactly: the rule
also adds one quote to a text that already begins with quotes followed by one of those characters
(``'=x`` is written ``''=x``), and reading removes one leading quote from every text cell of that
form (quotes, then ``=+-@``, tab or CR), and from no other. So ``read(write(x)) == x`` for every
text, which crawl's resume relies on (it re-reads ``manifest.csv`` to know which URLs and files it
has seen). A CSV made by another tool whose cell begins with ``'=`` loses that quote on reading,
which is also what a spreadsheet shows of it.
"""
from __future__ import annotations

import csv
import re

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Written with one more quote: a formula start, after any number of quotes (0 or more).
_NEEDS_QUOTE = re.compile(r"'*[=+\-@\t\r]")
# Read back with one quote less: a formula start after at least one quote.
_QUOTED = re.compile(r"'+[=+\-@\t\r]")


def neutralise(text: str) -> str:
    """One text cell as written: a quote in front when a spreadsheet would run it (module docstring)."""
    return "'" + text if _NEEDS_QUOTE.match(text) else text


def restore(text: str) -> str:
    """One text cell as read back: the inverse of :func:`neutralise`."""
    return text[1:] if _QUOTED.match(text) else text


def _map_text(series: pd.Series, pattern: re.Pattern, change) -> pd.Series:
    """``change`` applied to the text cells of ``series`` that match ``pattern``; numbers, NA and
    other non-text cells are left as they are. The series itself when nothing matches."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = series.cat.categories
        if not (categories.dtype == object or isinstance(categories.dtype, pd.StringDtype)):
            return series
        renamed = [change(c) if isinstance(c, str) and pattern.match(c) else c for c in categories]
        return series if renamed == list(categories) else series.cat.rename_categories(renamed)
    if not (series.dtype == object or isinstance(series.dtype, pd.StringDtype)):
        return series  # numbers, booleans, dates: never formulas
    try:
        hits = series.str.match(pattern.pattern, na=False).to_numpy(dtype=bool)
    except AttributeError:  # an object column without a single text cell
        return series
    if not hits.any():
        return series
    out = series.copy()
    out[hits] = [change(v) for v in series[hits]]
    return out


def _map_frame(df: pd.DataFrame, pattern: re.Pattern, change) -> pd.DataFrame:
    columns = {}
    for i, name in enumerate(df.columns):
        column = df.iloc[:, i]
        mapped = _map_text(column, pattern, change)
        if mapped is not column:
            columns[i] = mapped
    labels = [change(c) if isinstance(c, str) and pattern.match(c) else c for c in df.columns]
    if not columns and labels == list(df.columns):
        return df
    out = df.copy(deep=False)
    for i, mapped in columns.items():
        out.isetitem(i, mapped)
    out.columns = labels
    return out


def neutralise_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text cell and column name neutralised (a shallow copy; ``df`` itself when
    nothing needs it)."""
    return _map_frame(df, _NEEDS_QUOTE, neutralise)


def restore_frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as it was before :func:`neutralise_frame`: for a table read from a CSV WildLens wrote."""
    return _map_frame(df, _QUOTED, restore)


def _has_carriage_return(df: pd.DataFrame) -> bool:
    if any(isinstance(c, str) and "\r" in c for c in df.columns):
        return True
    for i in range(df.shape[1]):
        column = df.iloc[:, i]
        if isinstance(column.dtype, pd.CategoricalDtype):
            column = pd.Series(column.cat.categories)
        if column.dtype == object or isinstance(column.dtype, pd.StringDtype):
            try:
                if column.str.contains("\r", regex=False, na=False).to_numpy(dtype=bool).any():
                    return True
            except AttributeError:  # no text in this object column
                continue
    return False


def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """The CSV of ``df``: text cells neutralised, UTF-8, a header row, no index, '\\n' line ends,
    NA as an empty field, floats at full precision.

    A table with a carriage return inside any text is written with every text cell quoted:
    pandas quotes only a field holding the line terminator ('\\n'), and a bare CR ends the row for
    pandas and spreadsheets alike, so what follows it would start a row (and a formula)."""
    quoting = csv.QUOTE_NONNUMERIC if _has_carriage_return(df) else csv.QUOTE_MINIMAL
    return neutralise_frame(df).to_csv(index=False, lineterminator="\n", na_rep="", quoting=quoting).encode("utf-8")


def read_csv(source, **kwargs) -> pd.DataFrame:
    """``pd.read_csv(source, **kwargs)`` with the neutralised cells given back (:func:`restore_frame`)."""
    return restore_frame(pd.read_csv(source, **kwargs))
