"""Tables on a page: column labels, help and formats from the metric tables' column docs (data,
``explain.schema``), styled cells, en dashes for undefined values, and CSV downloads made
spreadsheet-safe (``core.csvsafe``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.intervals import finite_or_none, format_level


def download_csv(df, filename: str, key: str, label: str = "Download CSV",
                 label_space: str | None = None) -> None:
    """A download button whose file is exactly the library's CSV of ``df`` (explain.export's
    ``table_to_csv_bytes``: a class-name column after each wnid column, named in ``label_space``,
    the run's where known, ImageNet-1k otherwise; core.csvsafe, formula-like text cells quoted for
    spreadsheets). The bytes are made only when the button is clicked (1M-prediction runs have
    30,000-row tables), and the click does not rerun the page. ``df``: the table, or a function
    that gives it (Browse's selection: taken from the shared table only when clicked)."""
    from explain.export import table_to_csv_bytes

    space = label_space or "imagenet-1k"
    st.download_button(label, data=lambda: table_to_csv_bytes(df() if callable(df) else df, space), file_name=filename,
                       mime="text/csv", key=key, icon=":material/download:", on_click="ignore")


# ---------------------------------------------------------------- table columns: labels, help, formats
# One number format for the whole dashboard: shares (accuracy, sibling %, MF, ...) as percentages
# with one decimal (tables: "{:.1%}", Plotly: PERCENT_D3), similarities with three decimals, means
# of hypernym steps (severity, hDist) with two. Missing values (a mean over no mistakes, accuracy of
# a class the model cannot name) read as an en dash, explained in every such column's help.
PERCENT_D3 = ".1%"  # Plotly's (d3-format) spelling of the tables' percent format


RATE_COLUMNS = frozenset({"accuracy", "accuracy_hier", "accuracy_top5", "accuracy_balanced", "sibling_rate",
                          "hypernym_rate", "hyponym_rate", "cousin_rate", "related_rate", "distant_rate",
                          "hprec_at_5", "share_nearest", "share_nearest_unseen", "mf", "share_of_samples"})


# A model's probabilities and the margin between its top two, shown in percent as the thumbnails' captions and
# Browse's sliders read them (a UI review: "0.8123" in the table beside "81.2 %" under the picture).
PROBABILITY_COLUMNS = frozenset({*(f"prob_{k}" for k in range(1, 6)), "margin", "a_prob", "b_prob"})

SIMILARITY_COLUMNS = frozenset({"path_mistakes", "lch_mistakes", "wup_mistakes", "lin_mistakes", "path_all",
                                "lch_all", "wup_all", "lin_all", "lin_vs_best", "lin_vs_best_unseen",
                                "sim_to_seen", "path", "lch", "wup", "lin"})


STEP_COLUMNS = frozenset({"severity", "hdist_at_1", "hdist_at_5"})  # means of hypernym steps


NA_DASH = "\u2013"


NA_HELP = f"{NA_DASH} : not defined, e.g. no mistakes (a mean over nothing), or a class outside the model's label space."


# Columns the pages add beside the library's (names, families) and other tables' columns.
EXTRA_LABELS = {"family": "Family", "class_name": "Class", "true_name": "True class", "pred_name": "Predicted class",
                "lcs_name": "Common ancestor", "name": "Name", "wnid": "Class id"}


EXTRA_DOCS = {"family": "The model's family in the registry: CNN, transformer, or other (a model WildLens "
                        "does not know, e.g. from uploaded predictions).",
              "class_name": "ImageNet's name of the true class (WordNet's for a class outside the label space).",
              "true_name": "ImageNet's name of the true class.", "pred_name": "ImageNet's name of the predicted class.",
              "lcs_name": "The lowest common subsumer's name."}


STYLE_MAX_CELLS = 20_000  # above this a table keeps Streamlit's own rendering (styling costs ~0.3 s per 20k cells)


def _is_float(dtype) -> bool:
    return pd.api.types.is_float_dtype(dtype)


def _label(column: str, labels: dict) -> str:
    if labels.get(column) or EXTRA_LABELS.get(column):
        return labels.get(column) or EXTRA_LABELS[column]
    text = column.replace("_", " ")
    return text[:1].upper() + text[1:]


VIEW_SUFFIXES = ("_raw", "_curated", "_change")  # explain.curation_view.compare_views' columns


def _base(column: str) -> str:
    """A column's metric: 'accuracy' for 'accuracy_curated' (the raw / curated comparison's columns)."""
    for suffix in VIEW_SUFFIXES:
        if column.endswith(suffix):
            return column[:-len(suffix)]
    return column


def is_rate(column: str) -> bool:
    """A share (shown as a percentage): the tables' rates, any '*_rate' or '*_share' (explain.error_types), a
    probability or margin (:data:`PROBABILITY_COLUMNS`)."""
    base = _base(column)
    return (base in RATE_COLUMNS or base in PROBABILITY_COLUMNS or base.endswith(("_rate", "_share"))
            or base == "accuracy_clean")


def points(value) -> str:
    """A change of a share in percentage points, signed: '+6.7 points', as the claims write differences."""
    return f"{float(value) * 100:+.1f} points"


def _cell_format(column: str, dtype):
    """Python format of a number column's cells (the Styler's: a format string or a function), None for other
    columns."""
    if is_rate(column):
        # A change between views in points, as the claims write a difference of shares (a UI review: "+0.0%").
        return points if column.endswith("_change") else "{:.1%}"
    if _base(column) in SIMILARITY_COLUMNS and _is_float(dtype):
        return "{:.3f}"
    if _base(column) in STEP_COLUMNS and _is_float(dtype):
        return "{:.2f}"
    if _is_float(dtype):
        return "{:.4g}"
    return None


def table_column_config(table: str | None, columns, df: pd.DataFrame | None = None, *,
                        docs: dict | None = None, labels: dict | None = None, formats: bool = True,
                        bounded=()) -> dict:
    """st.column_config for a table's ``columns``: the readable label (explain.schema's labels for a
    metric table: 'per_model', 'per_class', 'confusions'; ``labels`` or a tidy form of the name
    otherwise), help = "`raw_name`: its doc" (explain.schema's docs, or ``docs``), percent with one
    decimal for shares, three decimals for similarities, two for means of steps, and for columns
    that can be missing, what the en dash means. ``df`` (optional) gives the dtypes. ``formats=False``
    for a table drawn through ``styled``: Streamlit shows a Styler's text only in number columns
    without a format of their own. ``bounded``: the columns whose cells carry their interval
    (styled), said in their help."""
    from explain.schema import METRIC_TABLES, TABLE_LABELS

    schema = METRIC_TABLES.get(table or "", {})
    all_labels = {**(TABLE_LABELS.get(table or "", {})), **(labels or {})}
    all_docs = {**{k: c.doc for k, c in schema.items()}, **EXTRA_DOCS, **(docs or {})}
    config = {}
    for column in columns:
        column = str(column)
        dtype = df[column].dtype if df is not None and column in df.columns else \
            (schema[column].dtype if column in schema else None)
        doc = all_docs.get(column, "")
        help_text = f"`{column}`" + (f": {doc}" if doc else "")
        if dtype is not None and (_is_float(dtype) or str(dtype) in ("Int64", "boolean")):
            if "NA" in doc or is_rate(column) or _base(column) in SIMILARITY_COLUMNS:
                help_text += f"\n\n{NA_HELP}"
        if column in bounded:
            help_text += "\n\n" + interval_help()
        label = _label(column, all_labels)
        base = column[:-len(INTERVAL_SUFFIX)] if column.endswith(INTERVAL_SUFFIX) else None
        if base is not None and base in bounded:  # a large table: the bounds beside the number
            config[column] = st.column_config.Column(f"{_label(base, all_labels)} interval",
                                                     help=f"`{base}_ci_low`, `{base}_ci_high`: " + interval_help())
            continue
        if dtype is not None and _is_float(dtype) and not formats:
            # A cell carrying its interval ('100.0% [61.0, 100.0]') is wider than the number Streamlit sizes the
            # column by, and a number column is right-aligned: the text lost its start ('.0% [61.0, 100.0]', read
            # as 0 %; a UI review). "medium" (200 px) holds the widest, '100.0% [100.0, 100.0]'.
            config[column] = st.column_config.NumberColumn(label, help=help_text,
                                                           width="medium" if column in bounded else None)
        elif dtype is not None and _is_float(dtype):
            if is_rate(column):
                # step 0.001: Streamlit's "percent" then shows one decimal, like "{:.1%}" and PERCENT_D3.
                config[column] = st.column_config.NumberColumn(label, help=help_text, format="percent", step=0.001)
            else:
                fmt = _cell_format(column, dtype)
                config[column] = st.column_config.NumberColumn(label, help=help_text,
                                                               format="%" + fmt[2:-1] if fmt else None)
        else:
            config[column] = st.column_config.Column(label, help=help_text)
    return config


def percent_rounded(df: pd.DataFrame, columns) -> pd.DataFrame:
    """``df`` with ``columns`` (shares shown in Streamlit's "percent" format, one decimal) rounded for
    display to the percentage "{:.1%}" writes. Why: shown as they are, 0.640803 read 64.0 % in Browse's
    table and 64.1 % on the cards beside it (a UI review); rounded first, the table reads as the cards."""
    columns = [c for c in columns if c in df.columns and _is_float(df[c].dtype)]
    return df.assign(**{c: _percent_column(df[c]) for c in columns}) if columns else df


def _percent_column(column: pd.Series) -> pd.Series:
    # "{:.1%}" is format(v * 100, ".1f"): the product first (0.0125 reads 1.2 %, though 0.0125 rounds to 0.013)
    # then tenths of a percent over 1000: the double nearest the decimal (64.1 / 100 is 0.6409999999999999)
    percent = rounded_as_formatted(column.to_numpy(dtype="float64", na_value=np.nan) * 100.0, 1)
    values = np.rint(percent * 10.0) / 1000.0
    if isinstance(column.dtype, pd.api.extensions.ExtensionDtype):  # Float64: NA stays NA
        return pd.Series(pd.arrays.FloatingArray(values, column.isna().to_numpy()), index=column.index, name=column.name)
    return pd.Series(values, index=column.index, name=column.name)


def styled(df: pd.DataFrame):
    """``df`` for st.dataframe with the dashboard's number formats, rounded as the charts round, and
    each value with an interval as one cell (``with_intervals``: '63.3% [45.5, 78.1]').

    Missing values: st.dataframe's ``placeholder`` draws them as an en dash in every table (without
    it Streamlit writes "None"); show_table passes it. Formats: a pandas Styler's display values
    ("{:.1%}" for shares, ...) are drawn while st.dataframe still sorts by the underlying numbers
    (the Styler only changes what is drawn); Streamlit uses them in number columns that have no
    format of their own (table_column_config(formats=False)). Tables over STYLE_MAX_CELLS cells are
    returned as DataFrames (styling 30,000 rows x 40 columns would take seconds on every rerun):
    there the column formats apply, with the same digits (Streamlit's "percent" format may cut the
    last digit of a percentage where the Styler rounds it), and a value with an interval keeps its
    number (sorted as a number: as text, '9.5%' sorted above '63.3%', code review) with a
    '<column>_interval' text column of its bounds beside it. A table without interval columns that is
    not styled is ``df`` itself."""
    bounded = interval_columns_in(df)
    shown = without_bounds(df) if bounded else df
    if shown.size > STYLE_MAX_CELLS or shown.empty:
        if bounded and not shown.empty:  # the number stays (it sorts as a number); its interval beside it
            texts = _interval_cells("bounds", tuple(bounded), df)
            for c in reversed(bounded):
                shown.insert(shown.columns.get_loc(c) + 1, f"{c}{INTERVAL_SUFFIX}", pd.array(texts[c], dtype="string"))
        return percent_rounded(shown, [c for c in shown.columns if is_rate(str(c))])
    formats = {c: _cell_format(str(c), shown[c].dtype) for c in shown.columns}
    styler = shown.style.format(na_rep=NA_DASH)
    numbers = {c: f for c, f in formats.items() if f}
    if numbers:
        styler = styler.format(numbers, na_rep=NA_DASH)
    texts = _interval_cells("values", tuple(bounded), df) if bounded else {}
    for column in bounded:  # each cell's own text: the value and its interval (the number stays for sorting)
        _cell_texts(styler, shown.columns.get_loc(column), texts[column])
    return styler


def frame_digest(df: pd.DataFrame) -> str:
    """A digest of ``df``'s columns, dtypes, index and every value in order (pandas' per-row hashes;
    an object column's values hash by their text, so its values' types are hashed too: True and
    'True' differ). 6.7 ms for Results' 10,000 x 86 per-class table."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(repr((list(map(str, df.columns)), list(map(str, df.dtypes)))).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    for name in df.columns[(df.dtypes == object).to_numpy()]:
        h.update(repr([type(v).__name__ for v in df[name].tolist()]).encode())
    return h.hexdigest()


def _interval_digest(df: pd.DataFrame, columns: list[str]) -> str:
    """A digest of what the interval texts of ``columns`` are made of, exactly: the column names and
    each value and bound as float64 (:func:`_floats`), in row order."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(repr(list(columns)).encode())
    for column in columns:
        for name in (column, f"{column}{CI_LOW}", f"{column}{CI_HIGH}"):
            h.update(_floats(df, name).tobytes())
    return h.hexdigest()


CACHED_TEXTS_FROM = 1_000  # rows; smaller tables format in under a millisecond, and a page shows many of them


def _interval_cells(kind: str, columns: tuple, df: pd.DataFrame) -> dict:
    """Per interval column of ``df``: its bounds' texts (``kind`` 'bounds', :func:`_bound_array`) or
    :func:`interval_texts` ('values'). Tables of CACHED_TEXTS_FROM rows or more are kept per content
    (:func:`_interval_digest`):
    every rerun of Results formatted its 240,000 interval texts again (0.19 s of a 0.6 s render at
    1,000,000 predictions). Smaller ones are formatted each time: Confusions draws ten a rerun, and
    through the 4-entry cache they pushed each other out."""
    if len(df) < CACHED_TEXTS_FROM:
        return _format_cells(kind, columns, df)
    return _cached_interval_cells(_interval_digest(df, list(columns)), kind, columns, df)


def _format_cells(kind: str, columns: tuple, df: pd.DataFrame) -> dict:
    """'bounds': Arrow string arrays (a large table's interval columns take them as they are); 'values':
    lists (a styled table draws each cell's text)."""
    texts = _bound_array if kind == "bounds" else interval_texts
    return {c: texts(df, c) for c in columns}


@st.cache_resource(max_entries=4, show_spinner=False)  # ~4 MB each for Results' per-class table (Arrow strings)
def _cached_interval_cells(digest: str, kind: str, columns: tuple, _df: pd.DataFrame) -> dict:
    return _format_cells(kind, columns, _df)  # shared, read-only


def _cell_texts(styler, column: int, texts: list) -> None:
    """Draw ``texts`` (one per row; None: the en dash) in column position ``column`` of ``styler``.
    pandas' Styler keeps one display function per cell (``_display_funcs``, keyed by row and column
    position); one public ``format`` call per cell would cost ~0.2 ms each."""
    funcs = getattr(styler, "_display_funcs", None)
    for row, text in enumerate(texts):
        shown = NA_DASH if text is None else text
        if funcs is not None:
            funcs[(row, column)] = lambda _value, _shown=shown: _shown
        else:  # pragma: no cover - a pandas without the per-cell table
            styler.format(lambda _value, _shown=shown: _shown,
                          subset=(styler.data.index[[row]], styler.data.columns[[column]]))


def show_table(df: pd.DataFrame, table: str | None = None, *, docs: dict | None = None, labels: dict | None = None,
               widths: dict | None = None, **kwargs) -> None:
    """st.dataframe of ``df`` (no index, full width) with table_column_config and styled's formats;
    ``<column>_ci_low`` / ``_ci_high`` pairs shown in their column's cells (``with_intervals``).
    ``widths``: column -> "small", "medium" or "large" (its label and help kept). ``kwargs`` go to
    st.dataframe (a ``column_config`` entry there replaces the derived one)."""
    data = styled(df)
    frame = data if isinstance(data, pd.DataFrame) else data.data
    config = table_column_config(table, frame.columns, frame, docs=docs, labels=labels,
                                 formats=isinstance(data, pd.DataFrame), bounded=interval_columns_in(df))
    for column, width in (widths or {}).items():
        if column in frame.columns:
            config[column] = {**(config.get(column) or {}), "width": width}
    config.update(kwargs.pop("column_config", None) or {})
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    kwargs.setdefault("placeholder", NA_DASH)
    st.dataframe(data, column_config=config, **kwargs)


# ---------------------------------------------------------------- intervals (issue 23): one format
# A value with an interval reads '63.3% [45.5, 78.1]' (a share: percent, one decimal, the bounds in
# points), '0.781 [0.770, 0.792]' (a similarity: three decimals), '1.50 [1.20, 1.80]' (a mean of
# hypernym steps: two); the value alone where its interval is not defined (NA bounds: one image, or
# the tables were computed with --no-ci), an en dash where the value is.
CI_LOW, CI_HIGH = "_ci_low", "_ci_high"
INTERVAL_SUFFIX = "_interval"  # a large table's '[low, high]' column beside its number (styled)


def interval_columns_in(df: pd.DataFrame) -> list[str]:
    """Columns of ``df`` that have both bound columns (``<column>_ci_low``, ``<column>_ci_high``) beside them."""
    names = set(map(str, df.columns))
    return [str(c) for c in df.columns if f"{c}{CI_LOW}" in names and f"{c}{CI_HIGH}" in names]


def without_bounds(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the bound columns of its interval columns (their cells carry the interval)."""
    bounds = [f"{c}{side}" for c in interval_columns_in(df) for side in (CI_LOW, CI_HIGH)]
    return df.drop(columns=bounds)


def _interval_style(column: str) -> tuple[float, int, str]:
    """(scale, decimals, unit) of a column's value in the one interval format."""
    if is_rate(column):
        return 100.0, 1, "%"  # '63.3% [45.5, 78.1]': as "{:.1%}" and the charts write a share (a UI review: "63.3 %" beside "63.3%")
    if _base(column) in STEP_COLUMNS:
        return 1.0, 2, ""
    return 1.0, 3, ""


def _floats(df: pd.DataFrame, column: str) -> np.ndarray:
    """``column`` as float64, NaN wherever it is NA or no number (finite_or_none's 'not defined')."""
    return pd.to_numeric(df[column], errors="coerce").astype("float64").to_numpy(na_value=float("nan"))


def _scaled(v: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(NaN mask, |v| x 10**digits, where only Python's format rounds as Python does: within the product's
    rounding error of a half, or too large for exact whole units); see :func:`fixed_texts`."""
    nan = np.isnan(v)
    with np.errstate(invalid="ignore", over="ignore"):  # above ~1.8e307 the product is inf: Python formats it
        scaled = np.abs(v) * 10.0 ** digits
        near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= 1e-9 * np.maximum(scaled, 1.0)
        python = (~nan & ~(scaled < 2.0 ** 52)) | near_half
    return nan, scaled, python


def rounded_as_formatted(values: np.ndarray, digits: int) -> np.ndarray:
    """Every float of ``values`` rounded to ``digits`` decimals as ``f"{v:.{digits}f}"`` rounds it (NaN
    kept): NumPy's round works on the product, which float64 may put exactly on a half (23/80 = 0.2875
    -> 287.5 -> 0.288, where "{:.1%}" reads 28.7 %, a hostile check); those go through Python's format."""
    v = np.asarray(values, dtype="float64")
    nan, scaled, python = _scaled(v, digits)
    out = np.copysign(np.rint(np.where(python | nan, 0.0, scaled)), v) / 10.0 ** digits
    if python.any():
        out[python] = [float(f"{x:.{digits}f}") for x in v[python].tolist()]
    out[nan] = np.nan
    return out


def fixed_texts(values: np.ndarray, digits: int):
    """``f"{v + 0.0:.{digits}f}"`` of every float in ``values`` (digits >= 1), as an Arrow string array, null
    where a value is NaN: the same text as Python's, built by Arrow's string kernels instead of one Python
    format call per cell (Results' 240,000 interval bounds at 1,000,000 predictions: 0.21 s -> ~0.05 s).

    Why exact: ``|v| * 10**digits`` is rounded to the nearest whole number in float64, which is Python's
    correctly rounded decimal except where the product lies within its rounding error of a half (or is
    exactly one: 0.125 at two digits, where Python rounds the binary value half to even). Those values, and
    infinities and values too large for int64, are formatted by Python; -0.0 reads '0.0' (the + 0.0), a
    small negative keeps its sign ('-0.0', as Python writes -0.04)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    v = np.asarray(values, dtype="float64") + 0.0
    nan, scaled, python = _scaled(v, digits)
    whole_units = np.where(python | nan, 0.0, np.rint(scaled)).astype(np.int64)
    unit = 10 ** digits
    whole = pa.array(whole_units // unit, mask=nan).cast(pa.string())
    part = pc.utf8_lpad(pa.array(whole_units % unit, mask=nan).cast(pa.string()), width=digits, padding="0")
    text = pc.binary_join_element_wise(whole, part, ".")
    negative = np.signbit(v) & ~nan
    if negative.any():
        text = pc.if_else(pa.array(negative), pc.binary_join_element_wise("-", text, ""), text)
    if python.any():
        text = pc.replace_with_mask(text, pa.array(python),
                                    pa.array([f"{x:.{digits}f}" for x in v[python].tolist()], pa.string()))
    return text


SMALL_TEXTS = 64  # rows: up to here every text is Python's own format, one call a cell (see _python_texts)


def _python_texts(values: np.ndarray, digits: int) -> list:
    """:func:`fixed_texts` of a few values as Python lists them: the definition itself, one format call a
    value. Why: Arrow's kernels cost ~0.1 ms a call whatever the length, and one interval text takes about
    ten of them (a 3-row table of Confusions: 2 ms, Results' 10-row per-model table of 24 interval columns:
    26 ms a render); for SMALL_TEXTS rows or fewer this is faster."""
    return [None if v != v else f"{v + 0.0:.{digits}f}" for v in np.asarray(values, dtype="float64").tolist()]


def _bound_list(df: pd.DataFrame, column: str) -> list:
    """:func:`bound_texts` of a small table (:data:`SMALL_TEXTS`), in Python."""
    scale, digits, _ = _interval_style(column)
    lows, highs = (_python_texts(_floats(df, f"{column}{side}") * scale, digits) for side in (CI_LOW, CI_HIGH))
    return [None if low is None or high is None else f"[{low}, {high}]" for low, high in zip(lows, highs)]


def _bound_array(df: pd.DataFrame, column: str):
    """:func:`bound_texts` as an Arrow string array (null where a bound is not defined)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(df) <= SMALL_TEXTS:
        return pa.array(_bound_list(df, column), pa.string())
    scale, digits, _ = _interval_style(column)
    lows, highs = (fixed_texts(_floats(df, f"{column}{side}") * scale, digits) for side in (CI_LOW, CI_HIGH))
    return pc.binary_join_element_wise("[", lows, ", ", highs, "]", "")  # null where either bound is


def bound_texts(df: pd.DataFrame, column: str) -> list:
    """'[45.5, 78.1]' per row: ``column``'s bounds in the one format (None where they are NA, NaN or no
    number: finite_or_none's 'not defined')."""
    return _bound_list(df, column) if len(df) <= SMALL_TEXTS else _bound_array(df, column).to_pylist()


def interval_texts(df: pd.DataFrame, column: str) -> list:
    """Every row's ``column`` and bounds in the one format above, '63.3% [45.5, 78.1]' (the value alone
    where the bounds are NA; None where the value is)."""
    import pyarrow.compute as pc

    scale, digits, unit = _interval_style(column)
    if len(df) <= SMALL_TEXTS:
        values = _python_texts(_floats(df, column) * scale, digits)
        return [None if value is None else f"{value}{unit}" if bounds is None else f"{value}{unit} {bounds}"
                for value, bounds in zip(values, _bound_list(df, column))]
    value = pc.binary_join_element_wise(fixed_texts(_floats(df, column) * scale, digits), unit, "")
    bounds = _bound_array(df, column)
    both = pc.binary_join_element_wise(value, " ", bounds, "")
    return pc.if_else(pc.is_valid(bounds), both, value).to_pylist()


def interval_help(level: float | None = None) -> str:
    """What a cell 'value [low, high]' means, for a header's help and a page's caption."""
    shown = format_level(level) if level else "95%"
    return (f"[low, high]: its {shown} interval (Wilson for a share, a bootstrap over images for a mean); the CSV "
            "has the bounds as `<column>_ci_low` and `<column>_ci_high`.")
