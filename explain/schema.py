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

from .vocabulary import RELATED_MAX_SEVERITY


@dataclass(frozen=True)
class Column:
    dtype: str  # pandas dtype name
    doc: str  # one line: what the value means, how it is computed, when it is NA


def _int(doc: str) -> Column:
    return Column("Int64", doc)


def _float(doc: str) -> Column:
    return Column("Float64", doc)


MODEL = Column("string", "The model's registry id.")

_UNSEEN = ("NA for a class outside its model's label space (in_label_space false: the model cannot name it, "
           "so 0 would be meaningless).")
# Every statistic of a per-model row is over one population (issue 22 item 12: accuracy over the
# in-space classes beside images and mistakes over all classes read "18 images, 13 mistakes,
# accuracy 83.3 %"); appended to each statistic's doc in PER_MODEL.
_PER_MODEL_POPULATION = ("Per model: over the model's in-space predictions (those of its classes inside its label "
                         "space, or every prediction when the label space is unknown); the predictions of classes "
                         "outside it are counted apart, in n_unseen and the *_unseen columns.")
_TOP5_NA = ("NA when the table has no top-5 (pred_wnid_2 ... pred_wnid_5 absent or empty in every row) or a counted "
            "row of the group has pred_wnid alone (a row's top-5 is complete with 5 classes, or with as many as its "
            "label space has when that is fewer than 5).")

# Per model and per (model, true class): the same statistics over different groups.
_STATISTICS: dict[str, Column] = {
    "n": _int("Predictions counted: rows with status 'ok' (every row when the table has no status column); a row "
              "repeating an earlier one of the same model and image exactly counts once."),
    "n_mistakes": _int("Counted predictions whose top-1 class is not the true class (strict)."),
    "accuracy": _float("Strict top-1 accuracy: share of n with pred_wnid == true_wnid. " + _UNSEEN),
    "accuracy_hier": _float("Hierarchically correct: share of n whose prediction is the true class or any hyponym "
                            "of it (what the 2023 paper's notebooks counted as correct). Always >= accuracy. Defined "
                            "for every class, also one outside the label space: a hyponym prediction is right "
                            "whatever the truth (coffee, which ImageNet-1k lacks, predicted as espresso)."),
    "n_mistakes_hier": _int("Mistakes in the hierarchical sense: counted predictions that are neither the true class "
                            "nor a hyponym of it (n_mistakes minus hyponym_count; n * (1 - accuracy_hier)). Defined "
                            "for every class, also one outside the label space."),
    "accuracy_top5": _float("Share of n whose true class is among pred_wnid, pred_wnid_2 ... pred_wnid_5. "
                            + _TOP5_NA + " " + _UNSEEN),
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
    "wup_all": _float("Mean WUP similarity over all n predictions (a correct one scores NLTK's wup(c, c): 1, but "
                      "less for the 107 ImageNet-1k classes with hypernym paths of different lengths, e.g. tabby "
                      "cat 0.875, Chihuahua 0.8125)."),
    "lin_all": _float("Mean Lin similarity over all n predictions where defined (a correct one scores 1)."),
    "severity": _float("Mean mistake severity (Bertinetto et al. 2020) over the mistakes: hypernym steps from the "
                       "true class up to their lowest common subsumer (lcs_wnid; 0 for a hyponym). "
                       "NA without mistakes."),
    "hypernym_count": _int("Mistakes whose prediction is an ancestor (hypernym at any distance) of the true class."),
    "hyponym_count": _int("Mistakes whose prediction is a descendant (hyponym) of the true class."),
    "cousin_count": _int("Mistakes whose prediction shares a grandparent but no parent with the true class "
                         "(and is neither its ancestor nor descendant)."),
    "related_count": _int("Mistakes with none of the relations above whose severity is at most "
                          f"{RELATED_MAX_SEVERITY} (their lowest common subsumer is at most {RELATED_MAX_SEVERITY} "
                          "hypernym steps above the true class: the same family, e.g. tabby -> jaguar, both felines)."),
    "distant_count": _int("Mistakes with none of the relations above: severity above "
                          f"{RELATED_MAX_SEVERITY}. hypernym + hyponym + sibling + cousin + related + "
                          "distant counts add up to n_mistakes, except for the rare WordNet pair that is both a "
                          "sibling and an ancestor/descendant, which counts in both."),
    **{f"{relation}_rate": _float(f"{relation}_count / n_mistakes: the {relation} relation's share of the mistakes. "
                                  "NA without mistakes.")
       for relation in ("hypernym", "hyponym", "cousin", "related", "distant")},
    "n_failed": _int("Rows whose status is not 'ok' (e.g. an image that failed to decode): counted nowhere else. "
                     "Per model: every such row of the model, whatever their class (a failed row has no prediction, "
                     "so it belongs to neither population)."),
    # Making Better Mistakes (Bertinetto et al. 2020), over the top-k; d(g, p) = severity (0 when p is g or
    # a hyponym of g).
    "accuracy_balanced": _float("Mean per-class recall (CLIP_benchmark's mean_per_class_recall): per model, the "
                                "unweighted mean of per_class accuracy over its in-space classes with n > 0; per "
                                "class it equals accuracy. " + _UNSEEN),
    "hdist_at_1": _float("Mean over samples of d(truth, top-1 prediction), d = severity (hypernym steps from the "
                         "truth up to their lowest common subsumer; 0 for a correct prediction or a hyponym). "
                         "Per class: defined for an unseen class too."),
    "hdist_at_5": _float("Mean over samples of (1/5) sum_{j=1..5} d(truth, pred_j), pred_1..5 = pred_wnid, "
                         "pred_wnid_2 ... pred_wnid_5 (MBM's hierarchical distance@5; 1/k over the k classes of a "
                         "label space of k < 5). " + _TOP5_NA),
    "hprec_at_5": _float("Hierarchical precision@5, per image: sum_i sum_{j=1..5} (1 - d(g_i, pred_ij) / D) / "
                         "sum_i best(g_i), over the group's samples i (truth g_i, top-5 pred_i1..pred_i5 = pred_wnid, "
                         "pred_wnid_2 ... pred_wnid_5); d = severity (hypernym steps from the truth up to the lowest "
                         "common subsumer), D = the largest d between two classes of the label space, best(c) = sum "
                         "over the 5 classes nearest c (smallest d from c, c itself first) of 1 - d(c, .) / D: 1 = "
                         "every top-5 as good as the label space allows. Making Better Mistakes' code (run_xent.py) "
                         "divides differently: per batch of B images, sum over the batch of the same numerator / "
                         "sum_c best(c) over all C classes of the label space (not the batch's truths), averaged "
                         "over the batches (drop_last). On the same images (a multiple of B) MBM's number = "
                         "hprec_at_5 * B * mean_i best(g_i) / sum_c best(c) (explain.metrics.mbm_hprec_factor); "
                         "hprec_at_5 * B / C when the images cover every class equally (ImageNet's validation set): "
                         "256/1000 of it with MBM's default batch of 256 on ImageNet-1k. MBM's d comes from its own "
                         "tree's distance file, this one from WordNet 3.0. Only for imagenet-1k rows (d and D "
                         "from its dense 1000 x 1000 matrices): NA for other label spaces (the best top-5 and D "
                         "need all pairs of the space: 21k^2 = 477M for ImageNet-21k), for classes outside the "
                         "label space, and " + _TOP5_NA[0].lower() + _TOP5_NA[1:]),
}

_SIM_TO_SEEN = ("sim(S, truth) = max over the classes s of the model's label space S of Lin(s, truth) "
                "(ImageNet-CoG Eq. 2, explain.concepts.similarity_to_seen)")
_NEAREST = ("a nearest seen class of the truth (any class of S attaining sim(S, truth); Lin ties are common) "
            "or a hyponym of one")
PER_MODEL: dict[str, Column] = {
    "model": MODEL,
    **{name: column if name == "n_failed" else Column(column.dtype, f"{column.doc} {_PER_MODEL_POPULATION}")
       for name, column in _STATISTICS.items()},
    "n_unseen": _int("Counted predictions of classes outside the model's label space (in_label_space false): "
                     "in no other column of the per-model row but the *_unseen ones (n + n_unseen = every "
                     "counted prediction of the model)."),
    "lin_vs_best_unseen": _float("Mean over those n_unseen predictions (where Lin is defined) of "
                                 "Lin(truth, prediction) / sim(S, truth), " + _SIM_TO_SEEN + ": 1 = as close as "
                                 "the label space allows. NA without unseen classes."),
    "share_nearest_unseen": _float("Share of the n_unseen predictions that are " + _NEAREST + ". NA without "
                                   "unseen classes."),
}
PER_CLASS: dict[str, Column] = {
    "model": MODEL, "true_wnid": Column("string", "The true class (WordNet 3.0 id)."), **_STATISTICS,
    "in_label_space": Column("boolean", "The true class is a class of the model's label space (the predictions' "
                                        "label_space column). NA when that column is missing or names an unknown "
                                        "label space (the class then counts as in-space)."),
    "lin_vs_best": _float("For a class outside the label space: mean over its predictions (where Lin is defined) "
                          "of Lin(truth, prediction) / sim(S, truth), " + _SIM_TO_SEEN + ": 1 = every "
                          "prediction as close as the label space allows. NA for an in-space class."),
    "share_nearest": _float("For a class outside the label space: share of its n predictions that are "
                            + _NEAREST + ". NA for an in-space class."),
    "sim_to_seen": _float("For a class outside the label space: " + _SIM_TO_SEEN + ", the best Lin similarity "
                          "any class the model knows has to the truth (lin_vs_best divides by it). NA for an "
                          "in-space class."),
}
CONFUSIONS: dict[str, Column] = {
    "model": MODEL,
    "true_wnid": Column("string", "The true class g."),
    "pred_wnid": Column("string", "A class f the model predicted (top-1) instead of g."),
    "count": _int("How many of g's counted predictions were f."),
    "mf": _float("Misclassification frequency MF(g -> f): count / n_mistakes of g."),
    "rank": _int("1 = g's most frequent confusion; ties broken by pred_wnid, ascending."),
    "relation": Column("string", "hypernym (f is an ancestor of g), hyponym (f under g), sibling (a shared immediate "
                                 "hypernym), cousin (a shared grandparent, no shared parent), related (severity <= "
                                 f"{RELATED_MAX_SEVERITY}) or distant (severity > {RELATED_MAX_SEVERITY}); first "
                                 "match in that order."),
    "share_of_samples": _float("count / n of g: the share of all of g's predictions that were f."),
    "is_sibling": Column("boolean", "f and g share an immediate hypernym (the SPEC's sibling test, independent of "
                                    "relation)."),
    "path_distance": _int("NLTK shortest_path_distance(g, f): edges on the WordNet path between them."),
    "path": _float("NLTK path_similarity(g, f)."),
    "lch": _float("NLTK lch_similarity(g, f)."),
    "wup": _float("NLTK wup_similarity(g, f)."),
    "lin": _float("Lin similarity (ImageNet-CoG IC); NA where undefined."),
    "severity": _int("Hypernym steps from g up to lcs_wnid (its height above g: Bertinetto et al.'s LCA height)."),
    "lcs_wnid": Column("string", "Their lowest common subsumer, the one common ancestor every view names: NLTK's "
                                 "g.lowest_common_hypernyms(f) (the common hypernyms of the largest max_depth), the "
                                 "first by synset name (explain.similarity.lowest_common_subsumer)."),
}


# --------------------------------------------------------------------------- issue 23: intervals
# Every rate and mean gets <column>_ci_low and <column>_ci_high, appended after the point estimates in
# the order below. Rates k/n: Wilson score (core.intervals); means over images: a percentile interval of
# a Poisson bootstrap with the image as the unit (explain.uncertainty). The level, resamples and seed
# are the tables' interval settings (MetricTables.ci; the artefact's fingerprint.json parameters.ci).
_RELATION_RATES = ("sibling_rate", "hypernym_rate", "hyponym_rate", "cousin_rate", "related_rate", "distant_rate")
WILSON_DENOMINATORS: dict[str, dict[str, str]] = {  # rate column -> the count column it is a share of
    "per_class": {"accuracy": "n", "accuracy_hier": "n", "accuracy_top5": "n", "accuracy_balanced": "n",
                  **{r: "n_mistakes" for r in _RELATION_RATES}, "share_nearest": "n"},
    "per_model": {"accuracy": "n", "accuracy_hier": "n", "accuracy_top5": "n",
                  **{r: "n_mistakes" for r in _RELATION_RATES}, "share_nearest_unseen": "n_unseen"},
    # (the top-ranked confusions are the largest of several shares: their interval does not allow for
    # that choice, the winner's curse; it is the interval of that one share as observed)
    "confusions": {"mf": "n_mistakes of the true class", "share_of_samples": "n of the true class"},
}
_MEANS = ("path_mistakes", "lch_mistakes", "wup_mistakes", "lin_mistakes", "path_all", "lch_all", "wup_all",
          "lin_all", "severity", "hdist_at_1", "hdist_at_5", "hprec_at_5")
BOOTSTRAP_COLUMNS: dict[str, tuple[str, ...]] = {
    "per_class": (*_MEANS, "lin_vs_best"),
    "per_model": ("accuracy_balanced", *_MEANS, "lin_vs_best_unseen"),
    "confusions": (),
}
_CI_SETTINGS = ("at the tables' interval level (default 95 %; MetricTables.ci, the artefact's fingerprint.json "
                "parameters.ci); NA where the value is NA or the intervals were not computed (--no-ci)")


def interval_columns(table: str) -> tuple[str, ...]:
    """The columns of ``table`` that have an interval, in table order."""
    names = set(WILSON_DENOMINATORS[table]) | set(BOOTSTRAP_COLUMNS[table])
    return tuple(c for c in _BASE_TABLES[table] if c in names)


def _interval_doc(table: str, column: str, side: str) -> str:
    if column in WILSON_DENOMINATORS[table]:
        how = f"Wilson score interval of the rate over {WILSON_DENOMINATORS[table][column]}"
        if table == "confusions":
            how += (" (of this confusion as observed: a top-ranked confusion is the largest of the class's shares, "
                    "and the interval does not allow for having picked it)")
    elif table == "per_model" and column == "accuracy_balanced":
        how = ("percentile interval of a bootstrap over images stratified by class (each class's images "
               "resampled, the unweighted mean over classes recomputed)")
    else:
        how = ("expanded percentile interval (Hesterberg 2015) of a Poisson bootstrap over images (the image is the "
               "unit: per model, the model's images; per class, the class's), resamples and seed as set; NA with "
               "fewer than 10 observations (images, or mistakes for a mean over them); from 10 to 30 its coverage "
               "may fall short of the level (79-97 % measured)")
    return f"{side} bound of {column}: {how}, {_CI_SETTINGS}."


_BASE_TABLES = {"per_model": PER_MODEL, "per_class": PER_CLASS, "confusions": CONFUSIONS}
for _table, _columns in _BASE_TABLES.items():
    _columns.update({f"{c}_ci_{side}": _float(_interval_doc(_table, c, side.capitalize()))
                     for c in interval_columns(_table) for side in ("low", "high")})
assert all(c in _BASE_TABLES[t] for t in WILSON_DENOMINATORS for c in (*WILSON_DENOMINATORS[t], *BOOTSTRAP_COLUMNS[t]))

METRIC_TABLES: dict[str, dict[str, Column]] = {"per_model": PER_MODEL, "per_class": PER_CLASS,
                                               "confusions": CONFUSIONS}


# Readable labels for the dashboard's column headers: short, capitalised, units in words ("%" for a
# share shown as a percentage). The raw column name stays in the CSV and in each header's help.
# Shared by the three tables; CONFUSION_LABELS overrides where a confusion's column means one pair.
LABELS: dict[str, str] = {
    "model": "Model", "true_wnid": "True class id", "in_label_space": "In label space",
    "n": "Images", "n_mistakes": "Mistakes", "accuracy": "Accuracy", "accuracy_hier": "Hier. accuracy",
    "n_mistakes_hier": "Hier. mistakes",
    "accuracy_top5": "Top-5 accuracy", "accuracy_balanced": "Balanced accuracy",
    "sibling_count": "Siblings", "sibling_rate": "Sibling %",
    "path_mistakes": "Path (mistakes)", "lch_mistakes": "LCH (mistakes)", "wup_mistakes": "WUP (mistakes)",
    "lin_mistakes": "Lin (mistakes)", "path_all": "Path (all)", "lch_all": "LCH (all)", "wup_all": "WUP (all)",
    "lin_all": "Lin (all)", "severity": "Severity",
    "hypernym_count": "Hypernyms", "hyponym_count": "Hyponyms", "cousin_count": "Cousins",
    "related_count": "Related", "distant_count": "Distant", "n_failed": "Failed",
    "hypernym_rate": "Hypernym %", "hyponym_rate": "Hyponym %", "cousin_rate": "Cousin %", "related_rate": "Related %",
    "distant_rate": "Distant %",
    "hdist_at_1": "hDist@1", "hdist_at_5": "hDist@5", "hprec_at_5": "hPrec@5",
    "n_unseen": "Unseen images", "lin_vs_best_unseen": "Lin / best (unseen)",
    "share_nearest_unseen": "Nearest % (unseen)",
    "lin_vs_best": "Lin / best", "share_nearest": "Nearest %", "sim_to_seen": "Sim. to seen",
}
CONFUSION_LABELS: dict[str, str] = {
    **LABELS, "pred_wnid": "Predicted class id", "count": "Count", "mf": "MF", "rank": "Rank",
    "relation": "Relation", "share_of_samples": "Share of images", "is_sibling": "Sibling",
    "path_distance": "Path length", "path": "Path sim.", "lch": "LCH", "wup": "WUP", "lin": "Lin",
    "lcs_wnid": "LCS id",
}
for _labels in (LABELS, CONFUSION_LABELS):  # '<label> low' / '<label> high' for every interval bound
    _labels.update({f"{c}_ci_{side}": f"{label} {side}" for c, label in list(_labels.items()) for side in ("low", "high")})
TABLE_LABELS: dict[str, dict[str, str]] = {"per_model": LABELS, "per_class": LABELS, "confusions": CONFUSION_LABELS}


def labels_of(table: str) -> dict[str, str]:
    """Column -> readable label for 'per_model', 'per_class' or 'confusions' (every column has one)."""
    return {name: TABLE_LABELS[table][name] for name in METRIC_TABLES[table]}


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
