"""Reading a stored table into the run store's schema: ``core.tables.conform`` against converting
column by column (how it was written until 2026-12-07), in the same run.

Run from the repository root: ``python benchmarks/bench_tables.py``.

Every table a page or a command reads (predictions, manifests, metrics) passes through ``conform``
after Arrow gives pandas its columns; the page tests spent ~14 % of their CPU there (py-spy,
2026-12-07). Two frames per size: as Arrow's ``to_pandas`` gives it (NaN-backed 'str', float64,
object: every column converted) and one already conformed (a second read of a cached frame: no
column converted). Figures: the median of ``--repeat`` rounds of many calls, milliseconds a call,
and the ratio old / new.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from core.tables import PREDICTION_SCHEMA, StoreError, conform  # noqa: E402


def column_by_column(df: pd.DataFrame, schema: dict[str, str], *, table: str = "table", extra: str = "keep"):
    """The yardstick: conform as it was (one insert and one astype per column)."""
    out = pd.DataFrame(index=df.index)
    for col, dtype in schema.items():
        if col in df.columns:
            try:
                out[col] = df[col].astype(dtype)
            except (TypeError, ValueError) as exc:
                raise StoreError(f"{table}: column {col!r} cannot be read as {dtype}: {exc}") from None
        else:
            out[col] = pd.Series(pd.NA, index=df.index, dtype=dtype)
    if extra == "keep":
        for col in df.columns:
            if col not in schema:
                out[col] = df[col]
    return out.reset_index(drop=True)


def predictions_as_read(n: int) -> pd.DataFrame:
    """A predictions part as Arrow hands it to pandas: n rows of 3 models, top-5 wnids and probabilities."""
    rng = np.random.default_rng(0)
    data = {"model": [f"m{i % 3}" for i in range(n)], "image": [f"n02123045/{i:08x}.jpg" for i in range(n)],
            "true_wnid": ["n02123045"] * n, "pred_wnid": ["n02123159"] * n}
    data.update({f"pred_wnid_{k}": ["n02124075"] * n for k in range(2, 6)})
    data.update({f"prob_{k}": rng.random(n) for k in range(1, 6)})
    data.update(label_space=["imagenet-1k"] * n, status=["ok"] * n, reason=[None] * n)
    return pa.table(data).to_pandas()


def timed(func, df: pd.DataFrame, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        func(df, PREDICTION_SCHEMA, table="predictions")
    return (time.perf_counter() - start) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("conform (one frame, only differing dtypes converted) against column by column; ms a call, median of "
          f"{args.repeat}")
    for rows in (30, 10_000, 1_000_000):
        raw = predictions_as_read(rows)
        for label, df in (("as read", raw), ("conformed", conform(raw, PREDICTION_SCHEMA))):
            pd.testing.assert_frame_equal(conform(df, PREDICTION_SCHEMA), column_by_column(df, PREDICTION_SCHEMA))
            calls = max(1, 3_000 // max(1, rows // 30)) if rows < 100_000 else 1
            old, new = [], []
            for _ in range(args.repeat):  # alternating: the machine's speed drifts alike for both
                old.append(timed(column_by_column, df, calls))
                new.append(timed(conform, df, calls))
            o, n = statistics.median(old), statistics.median(new)
            print(f"  {rows:>9,} rows {label:>9}: column by column {o * 1e3:8.2f} ms   conform {n * 1e3:8.2f} ms   "
                  f"{o / n:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
