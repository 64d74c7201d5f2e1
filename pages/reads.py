"""Cached reads of a run, apart from rendering: ``st.cache_resource`` / ``st.cache_data`` hold
read-only shared objects (a run's predictions and metric tables, keyed by ``core.runstore``'s
fingerprints of the stored files, so a new inference run invalidates them), and pages never
mutate what they get. No metric is computed here: the tables come from the run's stored artefact
(``explain.artefact``), the confusions and browse indexes from ``explain``.

Views (explain.curation_view): every read of predictions or tables takes the view the page shows
(``pages.run_state.current_view``: raw, or curated with the run's curation log applied); the
curated reads are keyed by the log's fingerprint too, so a tag or relabel made on the Image page
or by ``python -m crawl curate`` is seen on the next rerun."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from core.runstore import Run, StoreError, manifest_fingerprint, predictions_fingerprint
from core.tables import is_member

from pages.text import show_error


@st.cache_resource(max_entries=4, show_spinner="Reading predictions…")
def _predictions(run_path: str, fingerprint: str) -> pd.DataFrame:
    return Run(run_path).read_predictions()


def predictions(run: Run) -> pd.DataFrame:
    """The run's stored predictions (shared, read-only)."""
    return _predictions(str(run.path), predictions_fingerprint(run))


@st.cache_data(max_entries=8, show_spinner=False)
def _manifest(run_path: str, fingerprint: str) -> pd.DataFrame:
    return Run(run_path).read_manifest()


def manifest(run: Run) -> pd.DataFrame:
    return _manifest(str(run.path), manifest_fingerprint(run))


@st.cache_resource(max_entries=8, show_spinner="Reading the metric tables…")
def _metric_tables(run_path: str, predictions_fp: str, manifest_fp: str, view: str = "raw", curation_fp: str = ""):
    from explain.artefact import ensure_metrics

    return ensure_metrics(Run(run_path), view=view)


VIEW_PARAM = "view"  # ?view=raw|curated: which view of the predictions every page shows (explain.curation_view)


def current_view(run: Run) -> str:
    """The view every page shows: ``?view=`` when it names one, else curated once the run has a
    curation log (explain.curation_view.default_view), else raw."""
    from explain.curation_view import VIEWS, default_view

    wanted = st.query_params.get(VIEW_PARAM)
    return wanted if wanted in VIEWS else default_view(run)


def _view_of(run: Run, view: str | None) -> str:
    return current_view(run) if view is None else view


def _curation_fp(run: Run, view: str) -> str:
    from core.curation import curation_fingerprint

    return curation_fingerprint(run) if view == "curated" else ""


def metrics_result(run: Run, view: str | None = None):
    """explain.artefact.ensure_metrics of the run in ``view`` (default: the page's), shared and
    read-only: its ``tables``, and for the curated view what the curation ``change``d. Read from
    the run's stored artefact (``metrics/``, :mod:`explain.artefact`); when the predictions, the
    manifest or (curated) the curation log changed since it was written, the changed fingerprint
    misses this cache, and the artefact, found stale, is recomputed and rewritten once.
    Predictions the metrics refuse (a copied or hand-edited run: a probability of 7.5, a class
    outside its label space) and a run deleted meanwhile are the error's one line, and the page
    stops there."""
    from core.errors import WildLensError

    view = _view_of(run, view)
    try:
        return _metric_tables(str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view,
                              _curation_fp(run, view))
    except WildLensError as exc:
        show_error(exc, note="The run's metrics cannot be shown until that is fixed.")
        st.stop()


def metric_tables(run: Run, view: str | None = None):
    """explain.metrics tables of the run's usable predictions in ``view`` (default: the view the
    page shows), shared and read-only: :func:`metrics_result`'s tables."""
    return metrics_result(run, view).tables


@st.cache_resource(max_entries=4, show_spinner="Applying the curation…")
def _view_rows(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str) -> pd.DataFrame:
    from core.curation import read_curation
    from explain.curation_view import apply_curation

    rows = _usable_rows(run_path, predictions_fp, manifest_fp)
    if view != "curated":
        return rows
    return apply_curation(rows, read_curation(Run(run_path)))[0]


@st.cache_data(max_entries=8, show_spinner=False)
def _folders_of_models(run_path: str, predictions_fp: str) -> dict[str, set[str]]:
    return Run(run_path).prediction_parts.folders_of_models()


def model_view_predictions(run: Run, model: str, view: str | None = None) -> pd.DataFrame:
    """:func:`view_predictions`' rows of ``model`` alone, read from its folder (:func:`_model_view_rows`);
    shared, read-only."""
    return _guarded(_model_view_rows, *_key(run, view), model)


@st.cache_resource(max_entries=8, show_spinner=False)
def _model_view_rows(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str,
                     model: str) -> pd.DataFrame:
    """:func:`_view_rows` of one model: the same rows in the same order, read from that model's folder
    alone (usable images, curation and the latest-row rule all work per row or per (model, image)).
    Why: Confusions' first load read all 1,000,000 predictions for one model's matrix and mistakes."""
    from core.curation import read_curation
    from core.parts import usable_model_id
    from explain.curation_view import apply_curation

    run = Run(run_path)
    own = model.replace("/", "_")
    if not usable_model_id(model) or _folders_of_models(run_path, predictions_fp).get(model, {own}) != {own}:
        # Rows filed outside the model's own folder (a hand-made run): only the whole view has the latest of each.
        whole = _view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp)
        return whole[whole["model"] == model].reset_index(drop=True)
    preds = run.prediction_parts.read([model])
    preds = preds[preds["model"] == model].reset_index(drop=True)  # 'a/b' and 'a_b' share a folder
    usable = _usable_files(run_path, manifest_fp)
    rows = preds if usable is None else preds[is_member(preds["image"], usable)]
    return rows if view != "curated" else apply_curation(rows, read_curation(run))[0]


def view_predictions(run: Run, view: str | None = None) -> pd.DataFrame:
    """The run's usable predictions in ``view`` (default: the page's): raw, or with the curation
    log's relabels and exclusions applied (explain.curation_view). Shared, read-only."""
    view = _view_of(run, view)
    return _guarded(_view_rows, str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view,
                    _curation_fp(run, view))


def _key(run: Run, view: str | None) -> tuple:
    """The cache key of a view's rows: the run, its fingerprints, the view and (curated) the log's."""
    view = _view_of(run, view)
    return str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view, _curation_fp(run, view)


# cache_resource, not cache_data: class_name looks a level up for every class shown (200 heatmap
# rows), and cache_data would hand out a fresh copy of this 21,843-row table for each (shared, read-only).
@st.cache_resource(max_entries=4, show_spinner="Ranking every ImageNet-21k concept by its similarity to the seen classes…")
def concepts_table(seen: str) -> pd.DataFrame:
    """explain.concepts' table (ImageNet-CoG: sim to the seen label space, eligibility, level) for
    every ImageNet-21k concept, indexed by wnid (seconds cold, then cached on disk and here).
    Shared and read-only: callers never modify it."""
    from explain.concepts import concept_levels

    return concept_levels(seen).table.set_index("wnid")


@st.cache_data(max_entries=512, show_spinner=False)
def model_family(model_id: str) -> str:
    """'CNN', 'transformer' or 'hybrid' from the model registry, or inferred from the architecture for
    any timm / torchvision name (classify.models.zoo; built on the meta device once, then cached here);
    'other' for predictions of models no library here knows (an uploaded predictions file)."""
    from classify.engine.options import split_model_id
    from classify.models.lookup import get_model
    from core.errors import WildLensError

    try:  # 'efficientnet_lite0--int8': the same model in another precision (classify.engine.options)
        return get_model(split_model_id(model_id)[0]).family
    except (WildLensError, KeyError, ValueError):
        return "other"


LEVELS_SEEN = "imagenet-1k"  # CoG's levels are defined against the concepts of ImageNet-1k


def class_name(wnid: str, label_space: str = "imagenet-1k") -> str:
    """ImageNet's name of a class, falling back to WordNet for wnids outside the label space, with
    its sense when the name is ambiguous ('crane (wading bird)'): core.names.class_name, the one
    rule for every page and CSV. With the sidebar's "ImageNet-CoG levels" on, a class in one of
    CoG's five levels reads 'leopard cat · L2' on every page (explain.concepts; levels against ImageNet-1k)."""
    from core.names import class_name as library_name

    name = str(library_name(wnid, label_space))
    if st.session_state.get("show_levels"):
        levels = concepts_table(LEVELS_SEEN)
        level = levels["level"].get(wnid) if wnid in levels.index else None
        if level is not None and not pd.isna(level):
            name += f" · L{int(level)}"
    return name


@st.cache_resource(max_entries=4, show_spinner=False)
def _usable_files(run_path: str, fingerprint: str) -> frozenset | None:
    usable = Run(run_path).usable_files()  # None (fingerprint 'none'): predictions imported from elsewhere
    return None if usable is None else frozenset(usable)


def usable_files(run: Run) -> frozenset | None:
    """Files of the run's accepted, not excluded images (shared, read-only); None for a run without
    a manifest (predictions imported from elsewhere), where every prediction counts, as in
    ``core.runstore.Run.usable_predictions``."""
    return _usable_files(str(run.path), manifest_fingerprint(run))


def predictions_only(run: Run) -> bool:
    """A run that holds predictions and no images: one made from an uploaded predictions file
    (explain.export.import_predictions_as_run: source 'upload', no manifest, no image files), or one
    copied that way. Nothing in it can be classified again, probed or shown as a picture."""
    if run.info.source == "upload":
        return True
    has_files = run.images_dir.is_dir() and next(run.images_dir.iterdir(), None) is not None
    return bool(run.info.models) and not run.manifest_path.exists() and not has_files


def predictions_only_note(cannot: str, instead: str) -> None:
    """The one answer of every page whose work needs images, on a predictions-only run: what it
    cannot do and why, what to do instead, and the link to the Import page (issue 22 item 21)."""
    st.info(f"This run holds predictions only (uploaded from a file, no images), so {cannot}. {instead}",
            icon=":material/info:")
    st.page_link("pages/import_page.py", label="Import the images as a new run",
                 icon=":material/drive_folder_upload:")


@st.cache_resource(max_entries=8, show_spinner="Indexing the mistakes…")
def _mistakes_by_class(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str,
                       model: str) -> dict:
    from explain.browse import usable_rows

    # status 'ok' of the view's rows of this model (usable images; with a manifest, each distinct image looked
    # up once; no manifest: every status-ok prediction counts, Run.usable_predictions)
    ok = usable_rows(_model_view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp, model))
    wrong = ok[ok["pred_wnid"] != ok["true_wnid"]][_MISTAKE_COLUMNS]
    # One stable sort by (model, true class) and the bounds of each run of rows, not a frame per
    # group: 10,000 groups of a 1M-prediction run took 2 s to split (groupby's iterator), this 0.1 s.
    # Within a group the rows keep their stored order, as groupby(sort=False) gave them.
    model_codes, models = pd.factorize(wrong["model"])
    true_codes, trues = pd.factorize(wrong["true_wnid"])
    keyed = (model_codes >= 0) & (true_codes >= 0)  # groupby left rows with an NA key out
    key = model_codes.astype("int64") * max(len(trues), 1) + true_codes
    order = np.flatnonzero(keyed)[np.argsort(key[keyed], kind="stable")]
    rows = wrong.take(order).reset_index(drop=True)
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    stops = np.r_[starts[1:], len(key)]
    bounds = {(models[k // max(len(trues), 1)], trues[k % max(len(trues), 1)]): (int(a), int(b))
              for k, a, b in zip(key[starts].tolist(), starts.tolist(), stops.tolist())}
    return {"rows": rows, "bounds": bounds}


_MISTAKE_COLUMNS = ["model", "true_wnid", "image", "pred_wnid", "prob_1"]


def misclassified_images(run: Run, model: str, true_wnid: str, view: str | None = None) -> pd.DataFrame:
    """The predictions of ``model`` on usable images of ``true_wnid`` (in ``view``, default the
    page's) whose top-1 is wrong (image, pred_wnid, prob_1); every status-ok prediction of a run
    without a manifest. Indexed once per change of the predictions, the manifest or the log."""
    index = _guarded(_mistakes_by_class, *_key(run, view), model)
    where = index["bounds"].get((model, true_wnid))
    if where is None:
        return pd.DataFrame(columns=_MISTAKE_COLUMNS)
    return index["rows"].iloc[where[0]:where[1]].reset_index(drop=True)


@st.cache_data(max_entries=16, show_spinner=False)
def _most_confused(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, model: str,
                   classes_digest: str, n: int, _classes: tuple) -> list:
    from explain.matrix import most_confused

    return most_confused(_model_view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp, model), model,
                         list(_classes), n)


@st.cache_data(max_entries=16, show_spinner="Counting the confusions…")
def _confusion_counts(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, model: str,
                      classes_digest: str, outside: str, shown: tuple | None, _classes: tuple) -> pd.DataFrame:
    from explain.matrix import confusion_matrix

    return confusion_matrix(_model_view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp, model), model,
                            list(_classes), outside=outside, shown=list(shown) if shown is not None else None)


def classes_key(classes: tuple) -> str:
    """A digest of ``classes`` (each name and its order, as a JSON list: no two lists write the same text),
    the cache key of the tuple itself. Why: Streamlit hashed a 1,000-class tuple element by element on every
    call (4.7 ms; Confusions makes two calls a rerun). Not names joined by a separator: a run.json may hold
    any text, and ('a\\0', 'b') and ('a', '\\0b') joined alike (a hostile check: a stale matrix)."""
    import hashlib
    import json

    return hashlib.blake2b(json.dumps([str(c) for c in classes]).encode(), digest_size=16).hexdigest()


def confusion_matrix(run: Run, model: str, classes, *, outside: str = "ancestor",
                     cap: int | None = None, view: str | None = None) -> tuple[pd.DataFrame, list | None]:
    """``explain.matrix.confusion_matrix`` of ``model`` on the run's usable predictions in ``view``
    (default the page's; every prediction of a run without a manifest) as counts, and the classes
    it shows: with ``cap``, ``explain.matrix.most_confused``'s ``cap`` classes, else None (all).
    Cached per model, classes (:func:`classes_key`), grouping and cap, keyed by the fingerprints of the
    predictions, the manifest and (curated) the log; what it returns is a copy."""
    classes = tuple(classes)
    key = _key(run, view) + (model, classes_key(classes))
    shown = _guarded(_most_confused, *key, int(cap), classes) if cap else None
    counts = _guarded(_confusion_counts, *key, outside, tuple(shown) if shown is not None else None, classes)
    return counts, shown


def _usable_rows(run_path: str, predictions_fp: str, manifest_fp: str) -> pd.DataFrame:
    """The run's usable predictions (Run.usable_predictions) from the cached reads."""
    preds = _predictions(run_path, predictions_fp)
    usable = _usable_files(run_path, manifest_fp)
    # is_member, not Series.isin: isin on Arrow strings turned the 100,000 usable names into an
    # array on every call (0.4 s of Confusions' first load at 1M predictions).
    return preds if usable is None else preds[is_member(preds["image"], usable)]


CLAIMS_AUTO_ROWS = 200_000  # above this many predictions the Results page computes the claims when asked


@st.cache_data(max_entries=8, show_spinner="Comparing every pair of models and of families…")
def _claims(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, families: tuple,
            ci: tuple) -> list:
    from explain.claims import run_claims
    from explain.uncertainty import IntervalOptions

    return run_claims(_view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp), families=dict(families),
                      options=IntervalOptions(*ci))


def claims(run: Run, families: dict[str, str], ci: dict | None, view: str | None = None) -> list:
    """explain.claims.run_claims of the run's usable predictions in ``view`` (default the page's):
    every pair of models and of families (``families``: model -> family, as the page shows them),
    at the metric tables' interval settings (``ci``: MetricTables.ci; the defaults where the tables
    have none). Cached per change of the predictions, the manifest or the log, as the other reads."""
    from explain.uncertainty import IntervalOptions

    options = IntervalOptions(**{k: ci[k] for k in ("level", "resamples", "seed")}) if ci else IntervalOptions()
    return _claims(*_key(run, view), tuple(sorted(families.items())), (options.level, options.resamples, options.seed))


@st.cache_data(max_entries=16, show_spinner="Testing the two models…")
def _paired_test(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, model_a: str,
                 model_b: str) -> pd.DataFrame:
    from explain.compare import compare_models

    return compare_models(_view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp), model_a,
                          model_b).table


def paired_test(run: Run, model_a: str, model_b: str, view: str | None = None) -> pd.DataFrame:
    """explain.compare.compare_models(...).table of two models on the run's usable predictions in
    ``view``: one row per class and the overall row (McNemar's b, c, p, q and the verdict), cached per pair."""
    return _paired_test(*_key(run, view), model_a, model_b)


# --------------------------------------------------------------------------- images, curation, explanations
def curation(run: Run):
    """The run's curation log replayed (core.curation.read_curation), read on every rerun: it is a
    small file, and a tag made in another tab or by the command line must show at once. A log that
    cannot be read is its one line, and the page stops there."""
    from core.curation import CurationError, read_curation

    try:
        return read_curation(run)
    except CurationError as exc:
        show_error(exc, note="Curation is unavailable until that is fixed; nothing was changed.")
        st.stop()


def _explained_rows(run: Run, view: str) -> pd.DataFrame | None:
    """The view's per-prediction explanations (error types): explain.error_types.ensure_explained
    when that module is installed, else the stored ones when fresh (core.explained), else None."""
    try:
        from explain.error_types import ensure_explained
    except ImportError:
        from core.explained import read_explained

        return read_explained(run, view)
    return ensure_explained(run, view)


@st.cache_resource(max_entries=4, show_spinner="Building the per-image table…")
def _browse_table(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str,
                  issues_fp: str, label_space: str) -> tuple:
    """(the image table, its explain.browse.TableCodes): explain.browse_store.ensure_browse."""
    from explain.browse_store import ensure_browse

    run = Run(run_path)

    def build() -> pd.DataFrame:  # explain.browse.run_image_table's table, from the rows cached here
        from core.curation import read_curation
        from explain.browse import annotated_table

        rows = _view_rows(run_path, predictions_fp, manifest_fp, view, curation_fp if view == "curated" else "")
        return annotated_table(rows, lambda: _explained(run_path, predictions_fp, manifest_fp, view, curation_fp,
                                                         issues_fp), read_curation(run).tags, label_space)

    # Stored after the first build (explain.browse_store): a new server reads it instead of building it again.
    # The rows build() reads are cached under this key: the store is used only while the run is as the key says.
    inputs = {"view": view, "predictions": predictions_fp, "manifest": manifest_fp, "curation": curation_fp,
              "label_issues": issues_fp}
    return ensure_browse(run, view, label_space, build, inputs=inputs, background=True)


def _image_table(*key) -> pd.DataFrame:
    return _browse_table(*key)[0]


def _guarded(read, *args):
    """``read(*args)``, or the error's one line on the page and a stop: a damaged curation log, a
    label-issues file that is no table, predictions the metrics refuse."""
    from core.errors import WildLensError

    try:
        return read(*args)
    except WildLensError as exc:  # (a run too large for its explanations was stopped before: _stop_if_refused)
        show_error(exc, note="Nothing was changed; the page shows nothing more until that is fixed.")
        st.stop()


def image_table_key(run: Run, view: str | None = None) -> tuple:
    """What the annotated image table of ``view`` (default the page's) depends on: the fingerprints of
    the predictions, the manifest, the curation log and the label issues, and the run's label space
    (its class names). A page reads it once per rerun and passes it on (:func:`image_table`,
    :func:`browse_rows`, :func:`resolve_selection`, :func:`known_images`), so each of them sees one
    version of the run, and the part files are listed and stat'ed once."""
    from core.curation import curation_fingerprint
    from core.explained import label_issues_fingerprint

    return (str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), _view_of(run, view),
            curation_fingerprint(run), label_issues_fingerprint(run), run.info.label_space or "imagenet-1k")


def image_table(run: Run, view: str | None = None, *, key: tuple | None = None) -> pd.DataFrame:
    """explain.browse.image_table of the run's usable predictions in ``view`` (default the page's),
    annotated (explain.browse.annotate: margin, error type and reason, curation tags): one row per
    (model, image). Shared, read-only; keyed by :func:`image_table_key` (given, or read here), so a
    tag shows on the next rerun."""
    key = image_table_key(run, view) if key is None else key
    refused = explanations_refused(run)
    if refused is not None:  # the table is drawn without error types: say why
        from pages.text import escape_markdown

        st.info(escape_markdown(refused) + " Shown here without error types.", icon=":material/info:")
    return _guarded(_image_table, *key)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False  # shared by every session through the cache
    return array


def _image_codes(*key) -> tuple[np.ndarray, pd.Index]:
    """The table's images as codes into their sorted names (explain.browse.TableCodes, read with the stored
    table; NA: the code after them): the cards' rows are found by them, and the grid's order uses them as ranks."""
    codes = _browse_table(*key)[1]
    return codes.image, codes.images


def image_codes(key: tuple) -> np.ndarray:
    """The images of the image table of ``key`` (:func:`image_table_key`) as codes into their sorted
    names, row for row (explain.browse.sorted_codes; shared, read-only): what compare_models and
    selection_images pair and order by instead of the names."""
    return _guarded(_image_codes, *key)[0]


@st.cache_resource(max_entries=8, show_spinner="Selecting the images…")
def _browse_positions(key: tuple, filters: tuple) -> np.ndarray:
    from explain.browse import annotated_mask, image_mask

    models, true, pred, outcome, relations, conf_min, conf_max, error_types, tags, margin_max = filters
    table = _image_table(*key)
    # Positions, not the rows: a selection of a 1,000,000-row table is a 380 MB copy, and 8 of them are kept.
    keep = image_mask(table, list(models), true or None, pred or None, outcome, list(relations) or None, conf_min,
                      conf_max)
    keep &= annotated_mask(table, error_types=list(error_types) or None, tags=list(tags) or None,
                           margin_max=margin_max)
    return _read_only(np.flatnonzero(keep))


@st.cache_resource(max_entries=8, show_spinner="Ordering the images…")
def _browse_images(key: tuple, filters: tuple, sort: str) -> pd.DataFrame:
    from explain.browse import selection_images

    table, codes = _browse_table(*key)
    ordering = table[[c for c in ("image", "true_wnid", "prob_1", "margin") if c in table.columns]]
    positions = _browse_positions(key, filters)
    return selection_images(ordering.take(positions), sort, image_codes=codes.image[positions],
                            true_codes=codes.true[positions])


class BrowseRows:
    """The rows of an image table that Browse's filters matched, and their images in the chosen order
    (:func:`browse_rows`). The matched rows are kept as positions into the shared table and taken
    only where shown: the grid's cards, the first rows of the table, the CSV when it is clicked."""

    def __init__(self, table: pd.DataFrame, positions: np.ndarray, images: pd.DataFrame, image_codes: tuple):
        self.table, self.positions, self.images = table, positions, images
        self._codes, self._uniques = image_codes

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def empty(self) -> bool:
        return len(self.positions) == 0

    def head(self, n: int) -> pd.DataFrame:
        return self.table.take(self.positions[:n]).reset_index(drop=True)

    def frame(self) -> pd.DataFrame:
        """Every matched row (a copy: as large as the selection)."""
        return self.table.take(self.positions).reset_index(drop=True)

    def of_images(self, images) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(every row of the table of these images, the matched ones among them): what
        explain.browse.card_rows needs for one page of cards, found by integer image codes."""
        wanted = self._uniques.get_indexer(pd.Index([str(i) for i in images]))
        wanted = wanted[wanted >= 0]
        return (self.table.take(np.flatnonzero(np.isin(self._codes, wanted))),
                self.table.take(self.positions[np.isin(self._codes[self.positions], wanted)]))


def _browse(key: tuple, filters: tuple, sort: str) -> BrowseRows:
    return BrowseRows(_image_table(*key), _browse_positions(key, filters), _browse_images(key, filters, sort),
                      _image_codes(*key))


def browse_rows(key: tuple, *, models, true: str, pred: str, outcome: str, relations, conf_min, conf_max,
                error_types, tags, margin_max, sort: str) -> BrowseRows:
    """explain.browse.filter_images and filter_annotated of the image table of ``key``
    (:func:`image_table_key`; call :func:`image_table` first: it says why a table is drawn without
    error types), and selection_images of what they matched in ``sort`` order; the matched rows
    cached per filters, their order per filters and sort. Why: every rerun of Browse at 1,000,000
    predictions (a page turned, a card's expander opened) filtered and ordered the whole table again
    (0.35-0.4 s)."""
    filters = (tuple(models), true, pred, outcome, tuple(relations), conf_min, conf_max, tuple(error_types),
               tuple(tags), margin_max)
    return _guarded(_browse, key, filters, sort)


@st.cache_resource(max_entries=4, show_spinner=False)
def _known_images(key: tuple) -> frozenset:
    return frozenset(str(i) for i in _image_codes(*key)[1]) | frozenset(_manifest(key[0], key[2])["file"].dropna())


def known_images(key: tuple) -> frozenset:
    """Every image the image table of ``key`` (:func:`image_table_key`) or the manifest names (what a
    curation entry may name: core.curation.record's ``known_images``); shared, cached per table and
    manifest."""
    return _guarded(_known_images, key)


@st.cache_resource(max_entries=16, show_spinner="Selecting the images…")
def _resolved(key: tuple, selection, _issues: pd.DataFrame | None) -> pd.DataFrame:
    from explain.selection import resolve

    return resolve(selection, _image_table(*key), _issues)  # (the issues' fingerprint is in key)


def resolve_selection(run: Run, key: tuple, selection) -> pd.DataFrame:
    """explain.selection.resolve of ``selection`` (an explain.selection.Selection) on the image table
    of ``key`` (:func:`image_table_key`; call :func:`image_table` first), label issues read for an
    ``issues`` selection: the selection's images in order; cached per table and selection (shared,
    read-only). Why: the Image page resolved its selection on every Next (0.4 s at 1,000,000
    predictions). Label issues that could not be read (said on the page) are not cached as none."""
    table = _guarded(_image_table, *key)  # cached: a store error is its one line here; a BrowseError goes up
    if selection.source != "issues":
        return _resolved(key, selection, None)
    issues = label_issues(run)
    if issues is None:  # none stored, or unreadable now (its one line is shown): nothing cached either way
        from explain.selection import resolve

        return resolve(selection, table, None)
    return _resolved(key, selection, issues)


@st.cache_data(max_entries=16, show_spinner=False)
def _explanations_refused(run_path: str, predictions_fp: str) -> str | None:
    from core.errors import one_line
    from explain.error_types import TooManyToExplain, check_explainable

    from core.errors import WildLensError

    try:
        check_explainable(Run(run_path))
    except TooManyToExplain as exc:
        return one_line(exc)
    except WildLensError:  # a part that cannot be read: the page's next read says so in its one line
        return None
    return None


def _stop_if_refused(run: Run) -> None:
    """The page stops here, with the one line, for a run too large for its explanations: from the cached check
    (a raised TooManyToExplain is not cached, so each rerun would read every part's footer again)."""
    refused = explanations_refused(run)
    if refused is not None:
        from pages.text import escape_markdown

        st.info(escape_markdown(refused) + " The rest of this page is not shown for such a run yet; the tables above "
                "and their CSVs are complete.", icon=":material/info:")
        st.stop()


def explanations_refused(run: Run) -> str | None:
    """explain.error_types.check_explainable's line when the run is too large for its per-prediction
    explanations, else None; keyed by the predictions' fingerprint (the parts' footers read once)."""
    return _explanations_refused(str(run.path), predictions_fingerprint(run))


def label_issues(run: Run) -> pd.DataFrame | None:
    """The probe stage's label issues of the run (core.explained.read_label_issues), or None; a file
    that cannot be read is said in one line (and counts as none)."""
    from core.explained import read_label_issues
    from core.runstore import StoreError

    try:
        return read_label_issues(run)
    except StoreError as exc:
        show_error(exc, note="The label issues are left out until that is fixed.")
        return None


@st.cache_resource(max_entries=4, show_spinner="Typing every mistake…")
def _explained(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str,
               issues_fp: str) -> pd.DataFrame:
    return _explained_rows(Run(run_path), view)


def explained(run: Run, view: str | None = None) -> pd.DataFrame:
    """explain.error_types.ensure_explained of the run in ``view`` (default the page's): one row per
    counted prediction with its relation, severity, error type and reason. Shared, read-only; keyed
    by the fingerprints of the predictions, the manifest, the curation log and the label issues."""
    from core.curation import curation_fingerprint
    from core.explained import label_issues_fingerprint

    view = _view_of(run, view)
    _stop_if_refused(run)
    return _guarded(_explained, str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view,
                    curation_fingerprint(run), label_issues_fingerprint(run))


@st.cache_data(max_entries=8, show_spinner=False)
def _error_types(run_path: str, predictions_fp: str, manifest_fp: str, view: str, curation_fp: str, issues_fp: str,
                 level: float) -> pd.DataFrame:
    from explain.error_types import error_type_table, stored_for_table

    # The four columns the table reads, decoded alone from the stored explanations while they are fresh
    # (explain.error_types.stored_for_table); else the typed rows shared with Browse and the segment clicks
    # (_explained: typed once, with its spinner, also where they cannot be stored).
    rows = stored_for_table(Run(run_path), view)
    if rows is None:
        rows = _explained(run_path, predictions_fp, manifest_fp, view, curation_fp, issues_fp)
    return error_type_table(rows, families=_recorded_families(run_path, predictions_fp), level=level)


@st.cache_data(max_entries=8, show_spinner=False)
def _recorded_families(run_path: str, predictions_fp: str) -> dict[str, str]:
    from core.runstore import StoreError

    try:
        return Run(run_path).prediction_parts.recorded_families()
    except (StoreError, OSError):  # a damaged part or one compacted away meanwhile: the registry's families
        return {}


def model_families(run: Run, models) -> dict[str, str]:
    """model -> family for ``models``: the family the run's rows record (the model they ran as,
    ``--family`` included), else :func:`model_family`'s from the registry or the architecture."""
    recorded = _recorded_families(str(run.path), predictions_fingerprint(run))
    return {m: recorded.get(m) or model_family(m) for m in models}


def error_types(run: Run, view: str | None = None, level: float = 0.95) -> pd.DataFrame:
    """explain.error_types.error_type_table of the run in ``view``: per model each error type's
    share of the mistakes with its Wilson interval, and the accuracy without the label and
    duplicate mistakes (a copy)."""
    from core.curation import curation_fingerprint
    from core.explained import label_issues_fingerprint

    view = _view_of(run, view)
    _stop_if_refused(run)
    return _guarded(_error_types, str(run.path), predictions_fingerprint(run), manifest_fingerprint(run), view,
                    curation_fingerprint(run), label_issues_fingerprint(run), float(level))


def no_predictions_note(run: Run, view: str | None = None) -> None:
    """What a page says when the view has no prediction to show: the run has none yet, or the
    curated view excludes every image (then how to see them again), and a link that helps."""
    view = _view_of(run, view)
    if view == "curated" and not view_predictions(run, "raw").empty:
        st.info("The curated view excludes every image of this run (the curation log). Switch the sidebar to the raw "
                "view to see them, or take the exclusions back on the Image page (its curation history has an Undo "
                "per entry) or with python -m crawl curate --include.", icon=":material/filter_alt_off:")
        st.page_link("pages/image_page.py", label="Open the Image page on the raw view",
                     icon=":material/arrow_forward:", query_params={"run": run.run_id, VIEW_PARAM: "raw"})
    else:
        st.info("No predictions in this run yet: run models on the Models page.")
        st.page_link("pages/models_page.py", label="Models", icon=":material/memory:", query_params={"run": run.run_id})
