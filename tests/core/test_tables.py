"""core.tables helpers that the pages lean on at scale, against pandas as the reference."""
import numpy as np
import pandas as pd
import pytest

from core.tables import is_member


@pytest.mark.parametrize("values", [
    pd.Series(["a.jpg", "b.jpg", None, "a.jpg", "c.jpg"], dtype="string"),
    pd.Series(["a.jpg", "b.jpg", None, "a.jpg", float("nan")], dtype=object),
    pd.Series([1, 2, None, 3, 1], dtype="Int64"),
    pd.Series([1.0, np.nan, 2.5, 1.0]),
    pd.Series([], dtype="string"),
])
@pytest.mark.parametrize("members", [set(), {"a.jpg", "c.jpg"}, {"a.jpg", None}, {1, 2.5}, [1, pd.NA], ("b.jpg",),
                                     frozenset({float("nan")})])
def test_is_member_answers_as_series_isin(values, members):
    """Each distinct value looked up once: a present value as Series.isin answers; a missing value
    matches when the members hold a NA of any spelling (pandas' own answer for NA depends on the
    dtype; for the Arrow strings the pages pass it is this one, checked below)."""
    def missing(v):
        return v is None or v is pd.NA or (isinstance(v, float) and v != v)

    present = [m for m in members if not missing(m)]
    has_na = any(missing(m) for m in members)
    expected = np.where(values.isna().to_numpy(), has_na, values.isin(present).fillna(False).to_numpy(dtype=bool))
    assert is_member(values, members).tolist() == expected.tolist()
    if values.dtype == "string":
        assert is_member(values, members).tolist() == values.isin(members).fillna(False).tolist()


def test_is_member_refuses_one_str():
    with pytest.raises(TypeError, match="not the str"):
        is_member(pd.Series(["a"]), "a")


def test_a_column_whose_type_contradicts_its_pandas_metadata_is_a_one_line_store_error():
    """A hand-edited file (a boolean column rewritten as text, its pandas metadata kept) made pyarrow's
    to_pandas raise TypeError past every reader's StoreError handling (Results and Browse showed an
    exception; hostile campaign); now it reads as damaged, in one line."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from core.tables import StoreError, read_parquet_bytes

    table = pa.Table.from_pandas(pd.DataFrame({"correct": pd.array([True, False], dtype="boolean")}))
    table = table.set_column(0, "correct", pa.array(["True", "False"]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    with pytest.raises(StoreError, match="does not read as the explained table") as caught:
        read_parquet_bytes(buffer.getvalue(), {"correct": "boolean"}, table="explained", source="x.parquet")
    assert "\n" not in str(caught.value)
