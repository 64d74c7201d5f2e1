"""The metric tables' columns, defined once: name -> (pandas dtype, one-line meaning).

Column docs are data: the schemas the run store writes with (:data:`METRIC_SCHEMAS`), the
dashboard's column help (``explain.metrics.column_docs``) and the column reference in
``compute_metric_tables.__doc__`` all derive from the dicts below, so a column cannot be added
without its meaning, nor documented with a dtype the tables do not have.

Dtypes are pandas' nullable ones ("string", "Int64", "Float64", "boolean"): a missing value or a
mean over nothing is NA, never a sentinel or 0.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    dtype: str  # pandas dtype name
    doc: str  # one line: what the value means, how it is computed, when it is NA


def _int(doc: str) -> Column:
    return Column("Int64", doc)


def _float(doc: str) -> Column:
    return Column("Float64", doc)


MODEL = Column("string", "The model's registry id.")

# Per model and per (model, true class): the same statistics over different groups.
_STATISTICS: dict[str, Column] = {
    "n": _int("Predictions counted: rows with status 'ok' (every row when the table has no status column)."),
    "n_mistakes": _int("Counted predictions whose top-1 class is not the true class (strict)."),
    "accuracy": _float("Strict top-1 accuracy: share of n with pred_wnid == true_wnid."),
    "accuracy_hier": _float("Hierarchically correct: share of n whose prediction is the true class or any hyponym "
                            "of it (what the 2023 paper's notebooks counted as correct). Always >= accuracy."),
    "accuracy_top5": _float("Share of n whose true class is among pred_wnid, pred_wnid_2 ... pred_wnid_5. "
                            "NA when the table lacks any of pred_wnid_2 ... pred_wnid_5."),
    "sibling_count": _int("Mistakes whose prediction shares an immediate hypernym with the true class (every "
                          "hypernym and instance hypernym counts, not only the first)."),
    "sibling_rate": _float("sibling_count / n_mistakes (the paper's sibling percentage, as a fraction). "
                           "NA without mistakes."),
    "path_mistakes": _float("Mean NLTK path_similarity(truth, prediction) over the mistakes. NA without mistakes."),
    "lch_mistakes": _float("Mean NLTK lch_similarity (Leacock-Chodorow, D = 19) over the mistakes. "
                           "NA without mistakes."),
    "wup_mistakes": _float("Mean NLTK wup_similarity (Wu-Palmer, truth first) over the mistakes. NA without mistakes."),
    "lin_mistakes": _float("Mean Lin similarity with ImageNet-CoG's information content (IN-21K corpus) over the "
                           "mistakes where it is defined (not for n04399382 teddy bear, which IN-21K lacks). "
                           "NA if none."),
    "path_all": _float("Mean path similarity over all n predictions (a correct one scores 1)."),
    "lch_all": _float("Mean LCH similarity over all n predictions (a correct one scores -log(1/38) = 3.6376)."),
    "wup_all": _float("Mean WUP similarity over all n predictions (a correct one scores 1)."),
    "lin_all": _float("Mean Lin similarity over all n predictions where defined (a correct one scores 1)."),
    "severity": _float("Mean mistake severity (Bertinetto et al. 2020) over the mistakes: hypernym steps from the "
                       "true class up to its nearest common ancestor with the prediction (0 for a hyponym). "
                       "NA without mistakes."),
    "hypernym_count": _int("Mistakes whose prediction is an ancestor (hypernym at any distance) of the true class."),
    "hyponym_count": _int("Mistakes whose prediction is a descendant (hyponym) of the true class."),
    "cousin_count": _int("Mistakes whose prediction shares a grandparent but no parent with the true class "
                         "(and is neither its ancestor nor descendant)."),
    "distant_count": _int("Mistakes with none of the relations above. hypernym + hyponym + sibling + cousin + "
                          "distant counts add up to n_mistakes, except for the rare WordNet pair that is both a "
                          "sibling and an ancestor/descendant, which counts in both."),
    "n_failed": _int("Rows whose status is not 'ok' (e.g. an image that failed to decode): counted nowhere else."),
}

PER_MODEL: dict[str, Column] = {"model": MODEL, **_STATISTICS}
PER_CLASS: dict[str, Column] = {"model": MODEL, "true_wnid": Column("string", "The true class (WordNet 3.0 id)."),
                                **_STATISTICS}
CONFUSIONS: dict[str, Column] = {
    "model": MODEL,
    "true_wnid": Column("string", "The true class g."),
    "pred_wnid": Column("string", "A class f the model predicted (top-1) instead of g."),
    "count": _int("How many of g's counted predictions were f."),
    "mf": _float("Misclassification frequency MF(g -> f): count / n_mistakes of g."),
    "rank": _int("1 = g's most frequent confusion; ties broken by pred_wnid, ascending."),
    "relation": Column("string", "hypernym (f is an ancestor of g), hyponym (f under g), sibling (a shared immediate "
                                 "hypernym), cousin (a shared grandparent, no shared parent) or distant; first match "
                                 "in that order."),
    "share_of_samples": _float("count / n of g: the share of all of g's predictions that were f."),
    "is_sibling": Column("boolean", "f and g share an immediate hypernym (the SPEC's sibling test, independent of "
                                    "relation)."),
    "path_distance": _int("NLTK shortest_path_distance(g, f): edges on the WordNet path between them."),
    "path": _float("NLTK path_similarity(g, f)."),
    "lch": _float("NLTK lch_similarity(g, f)."),
    "wup": _float("NLTK wup_similarity(g, f)."),
    "lin": _float("Lin similarity (ImageNet-CoG IC); NA where undefined."),
    "severity": _int("Hypernym steps from g up to its nearest common ancestor with f."),
    "lcs_wnid": Column("string", "The top of the shortest path between g and f (their lowest common subsumer on "
                                 "that path)."),
}

METRIC_TABLES: dict[str, dict[str, Column]] = {"per_model": PER_MODEL, "per_class": PER_CLASS,
                                               "confusions": CONFUSIONS}


def schema_of(columns: dict[str, Column]) -> dict[str, str]:
    """Column -> dtype, what ``core.runstore.write_table``/``read_table``/``conform`` take."""
    return {name: column.dtype for name, column in columns.items()}


def docs_of(columns: dict[str, Column]) -> dict[str, str]:
    """Column -> one-line meaning."""
    return {name: column.doc for name, column in columns.items()}


PER_MODEL_SCHEMA = schema_of(PER_MODEL)
PER_CLASS_SCHEMA = schema_of(PER_CLASS)
CONFUSION_SCHEMA = schema_of(CONFUSIONS)
METRIC_SCHEMAS: dict[str, dict[str, str]] = {name: schema_of(cols) for name, cols in METRIC_TABLES.items()}

PER_MODEL_COLUMNS = docs_of(PER_MODEL)
PER_CLASS_COLUMNS = docs_of(PER_CLASS)
CONFUSION_COLUMNS = docs_of(CONFUSIONS)
