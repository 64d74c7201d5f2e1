"""CSV formula injection (issue 11 item 14): every CSV WildLens writes goes through
core.csvsafe; a text cell a spreadsheet would run gets a quote in front, numbers are left alone,
and what WildLens reads back of its own CSVs is the original text (crawl's resume needs it).
The explain metrics CSVs are tested in tests/explain, the dashboard's downloads in tests/pages."""
import io

import numpy as np
import pandas as pd
import pytest

from core.csvsafe import neutralise, neutralise_frame, read_csv, restore, restore_frame, to_csv_bytes
from core.runstore import MANIFEST_SCHEMA, PREDICTION_SCHEMA, write_table

FORMULAS = ["=HYPERLINK(\"https://evil.invalid\",\"x\")", "+1+2", "-2+3", "@SUM(A1:A9)", "\t=1", "\r=1",
            "=cmd|' /C calc'!A0"]
TRICKY = ["'=already quoted", "''-twice", "'plain quote", "", "=", "-", "a=b", "n02123045", "tabby cat",
          "cat.jpg\r=HYPERLINK(1)", "two\nlines", "'"]


def _read_back(data: bytes) -> pd.DataFrame:
    return read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""])


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_gets_a_quote_and_comes_back(text):
    assert neutralise(text) == "'" + text and restore(neutralise(text)) == text


@pytest.mark.parametrize("text", TRICKY)
def test_every_text_round_trips(text):
    assert restore(neutralise(text)) == text
    assert neutralise(text)[:1] not in ("=", "+", "-", "@", "\t", "\r")


def test_only_text_cells_and_names_are_touched():
    df = pd.DataFrame({
        "model": pd.array(["=evil", "resnet50", None], dtype="string"),
        "image": ["-x.jpg", "ok.jpg", "@y.jpg"],  # object
        "prob_1": [-0.5, 0.25, np.nan],  # numbers are numbers, not formulas
        "count": pd.array([-3, 4, None], dtype="Int64"),
        "mixed": ["+1", 2, -3.5],  # an object column: only its text cells
        "relation": pd.Categorical(["=cat", "sibling", "sibling"]),
        "=header": [1, 2, 3],
    })
    safe = neutralise_frame(df)
    assert safe["model"].tolist()[:2] == ["'=evil", "resnet50"] and pd.isna(safe["model"].iloc[2])
    assert safe["image"].tolist() == ["'-x.jpg", "ok.jpg", "'@y.jpg"]
    pd.testing.assert_series_equal(safe["prob_1"], df["prob_1"])
    pd.testing.assert_series_equal(safe["count"], df["count"])
    assert safe["mixed"].tolist() == ["'+1", 2, -3.5]
    assert safe["relation"].tolist() == ["'=cat", "sibling", "sibling"]
    assert list(safe.columns)[-1] == "'=header"
    assert df["model"].iloc[0] == "=evil" and list(df.columns)[-1] == "=header"  # the input is not changed
    text = to_csv_bytes(df).decode()
    assert "-0.5" in text and ",-3," in text and "'-0.5" not in text
    back = restore_frame(neutralise_frame(df))
    pd.testing.assert_frame_equal(back, df)


def test_a_clean_frame_is_not_copied():
    df = pd.DataFrame({"model": ["resnet50"], "n": [3]})
    assert neutralise_frame(df) is df


def test_csv_round_trip_of_every_tricky_text():
    df = pd.DataFrame({"text": FORMULAS + TRICKY[:-1] + [TRICKY[-1]]})
    data = to_csv_bytes(df)
    as_written = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)["text"]  # what a spreadsheet gets
    assert len(as_written) == len(df), "a carriage return inside a cell must not end its row"
    for cell in as_written:
        assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r"), cell
    back = _read_back(data)
    assert back["text"].fillna("").tolist() == df["text"].tolist()


def test_write_table_csv_branch_is_neutralised(tmp_path):
    """``python -m classify --images ... --out FILE.csv`` writes with core.runstore.write_table."""
    table = pd.DataFrame({"model": ["=evil", "efficientnet_lite0"], "image": ["n02123045/a.jpg", "n02123045/b.jpg"],
                          "true_wnid": "n02123045", "pred_wnid": "n02123045", "prob_1": [-0.5, 0.9],
                          "status": ["failed", "ok"], "reason": ["@cannot decode", None]})
    out = tmp_path / "predictions.csv"
    write_table(table, out, PREDICTION_SCHEMA, table="predictions")
    text = out.read_text()
    assert "'=evil" in text and "'@cannot decode" in text and ",-0.5," in text
    back = read_csv(out, dtype={"model": "string", "reason": "string"})
    assert back["model"].tolist() == ["=evil", "efficientnet_lite0"] and back["reason"].iloc[0] == "@cannot decode"


def test_crawl_manifest_csv_is_neutralised_and_resume_reads_the_original(tmp_path):
    """crawl's --out DIR/manifest.csv (written by write_table) is re-read on resume: the rows it
    knows must be recognised, so reading gives back the original URL, file name and search term."""
    from crawl.config import ValidationConfig
    from crawl.store import Collector, FolderDestination

    wnid = "n02123045"
    rows = pd.DataFrame([
        {"wnid": wnid, "file": f"{wnid}/0123456789abcdef.jpg", "sha256": "ab" * 32, "phash": "00ff00ff00ff00ff",
         "width": 64, "height": 48, "format": "JPEG", "mode": "RGB", "bytes": 1000, "source": "import",
         "search_term": None, "url": None, "rank": None, "original_name": "=HYPERLINK(\"x\")/-cat.jpg",
         "fetched_at": "2024-01-01T00:00:00Z", "status": "accepted", "excluded": False},
        {"wnid": wnid, "source": "bing", "search_term": "+tabby", "url": "@http://evil.invalid/c.jpg", "rank": 1,
         "status": "rejected", "reason": "-not-image: no data", "excluded": True, "excluded_reason": "\t=1"},
    ])
    dest = FolderDestination(tmp_path / "out")
    dest.write_manifest(rows)
    text = dest.manifest_path.read_text()
    for cell in ("'=HYPERLINK", "'+tabby", "'@http://evil.invalid/c.jpg", "'-not-image"):
        assert cell in text, cell
    back = dest.read_manifest()
    for column in ("original_name", "search_term", "url", "reason", "excluded_reason"):
        assert back[column].fillna("<NA>").tolist() == rows[column].fillna("<NA>").tolist(), column
    collector = Collector(dest, ValidationConfig())
    assert collector.has_import(wnid, "=HYPERLINK(\"x\")/-cat.jpg", "ab" * 32)
    assert collector.claim_url(wnid, "@http://evil.invalid/c.jpg") == "seen"
