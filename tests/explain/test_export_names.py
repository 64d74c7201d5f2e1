"""Names in every exported table: a wnid column comes with its name column, safely quoted."""
import io

import pandas as pd

from core.csvsafe import read_csv, to_csv_bytes
from core.labels import get_label_space
from explain.export import table_to_csv_bytes, write_metric_tables
from explain.metrics import compute_metric_tables

TABBY, TIGER_CAT, EGYPTIAN_CAT, LEOPARD_CAT = "n02123045", "n02123159", "n02124075", "n02126317"


def _predictions() -> pd.DataFrame:
    return pd.DataFrame({"model": ["m"] * 4, "image": list("abcd"),
                         "true_wnid": [TABBY, TABBY, TIGER_CAT, TIGER_CAT],
                         "pred_wnid": [TABBY, EGYPTIAN_CAT, TABBY, LEOPARD_CAT],
                         # imagenet-21k: the one model predicts leopard cat, which ImageNet-1k lacks
                         "label_space": "imagenet-21k", "status": "ok"})


def test_metric_csvs_carry_names_after_their_wnids(tmp_path):
    tables = compute_metric_tables(_predictions())
    written = write_metric_tables(tables, tmp_path)
    per_class = pd.read_csv(written["per_class"], dtype=str)
    cols = list(per_class.columns)
    assert cols[:3] == ["model", "true_wnid", "true_name"]
    assert cols[3:] == [c for c in tables.per_class.columns if c not in ("model", "true_wnid")]
    space = get_label_space("imagenet-1k")
    assert (per_class["true_name"] == per_class["true_wnid"].map(space.display_name)).all()
    confusions = pd.read_csv(written["confusions"], dtype=str)
    cols = list(confusions.columns)
    for wnid_col, name_col in (("true_wnid", "true_name"), ("pred_wnid", "pred_name"), ("lcs_wnid", "lcs_name")):
        assert cols.index(name_col) == cols.index(wnid_col) + 1
    names = dict(zip(confusions["pred_wnid"], confusions["pred_name"]))
    assert names[EGYPTIAN_CAT] == "Egyptian cat" and names[LEOPARD_CAT] == "leopard cat"  # outside IN-1k: WordNet
    per_model = pd.read_csv(written["per_model"], dtype=str)
    assert list(per_model.columns) == list(tables.per_model.columns)  # no wnid column, nothing added


def test_name_cells_are_neutralised_and_read_back():
    # A wnid column holding formula-like text (an uploaded file's stray value): its "name" is the same
    # text, and both cells get the spreadsheet quote.
    df = pd.DataFrame({"true_wnid": ["=HYPERLINK(\"http://x\")", TABBY], "n": [1, 2]})
    data = table_to_csv_bytes(df)
    raw = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    assert raw["true_wnid"].iloc[0] == raw["true_name"].iloc[0] == "'=HYPERLINK(\"http://x\")"
    back = read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)
    assert back["true_name"].tolist() == ["=HYPERLINK(\"http://x\")", "tabby"]


def test_table_to_csv_bytes_without_names_is_the_plain_csv():
    df = pd.DataFrame({"wnid": [TABBY], "n": [1]})
    assert table_to_csv_bytes(df, names=False) == to_csv_bytes(df)
    assert table_to_csv_bytes(df).decode().splitlines()[0] == "wnid,name,n"


def test_the_manifest_and_path_tables_get_names():
    from explain.explanations import explain_pair

    path = explain_pair(TABBY, EGYPTIAN_CAT).path_table()
    back = pd.read_csv(io.BytesIO(table_to_csv_bytes(path)), dtype=str)
    assert list(back.columns[:4]) == ["step", "synset", "wnid", "name"]
    assert back["name"].iloc[0] == "tabby" and back["name"].iloc[-1] == "Egyptian cat"
