"""Every metric column has a readable label, defined once in explain.schema beside its dtype and doc."""
import pytest

from explain.schema import METRIC_TABLES, labels_of


@pytest.mark.parametrize("table", list(METRIC_TABLES))
def test_every_column_has_a_readable_label(table):
    labels = labels_of(table)
    assert list(labels) == list(METRIC_TABLES[table])
    assert all(label and label != column for column, label in labels.items() if "_" in column), labels
    assert len(set(labels.values())) == len(labels), "two columns of one table read the same"


def test_labels_named_in_the_issue():
    per_model = labels_of("per_model")
    assert per_model["accuracy_top5"] == "Top-5 accuracy"
    assert per_model["sibling_rate"] == "Sibling %"
    assert per_model["lch_mistakes"] == "LCH (mistakes)"
