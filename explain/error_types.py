"""Error types (issue 24 item 4): every top-1 mistake gets exactly one, the first that applies in the
order of :data:`ERROR_TYPES`, with its reason in one line (shown on hover and in CSVs).

1. ``label``: the image's label is in doubt: tagged ``wrong-class`` or ``not-a-photo`` in the run's
   curation log (:mod:`core.curation`), relabelled to another class (raw view only: in the curated
   view the relabel *is* the truth), or flagged by the label-issue probe (``core.explained``'s
   label issues, ``is_issue`` for any model; in the curated view only while the image keeps the
   class the probe judged).
2. ``duplicate``: the image is a near duplicate (pHash at most ``core.phash.NEAR_DUPLICATE_DISTANCE``
   bits apart, the manifest's ``phash``) of a usable image of the run whose truth in this view is
   another class, or it was found for other classes too (the manifest's ``other_wnids``).
3. ``unseen``: the truth is outside the model's label space (the metric tables' rule,
   ``explain.metrics._unseen_groups``, reused: the model cannot name it).
4. ``fine-grained``: the prediction is a sibling or cousin of the truth (:mod:`explain.similarity`).
5. ``hierarchy``: a hypernym (too general) or hyponym (too specific).
6. ``part-whole``: WordNet links the two as part and whole (a part, member or substance meronym or
   holonym, :mod:`core.meronyms`), directly or between one of them and a hypernym of the other at
   most :data:`PART_WHOLE_MAX_STEPS` steps up (car wheel -> car: "car wheel is a part of motor
   vehicle, 1 step above car").
7. ``related``: relation ``related`` (same family: the lowest common subsumer at most
   ``explain.vocabulary.RELATED_MAX_SEVERITY`` steps above the truth).
8. ``model-failure``: anything else (relation ``distant``).

Rules 1-2 are about the data (the "mistake" may be the label's), rule 3 about the label space, and
4-8 about the model. The anchor is ETH SRI's "Automated Classification of Model Errors on ImageNet"
(NeurIPS 2023), whose types are fine-grained, fine-grained out-of-vocabulary, spurious correlation,
non-prototypical and model failure; here every type is decided from WordNet and the run's own
records, never by another model.

How it is fast: rows are encoded once (``explain.metrics._read_rows``: the rows the metric tables
count, refused with the same words), the relation of each unique (true, pred) pair is looked up
once (:func:`explain.similarity.similarities_of_codes`), the part-whole test joins the links of the
classes seen with their hypernyms 0-2 steps up (per unique class, never per row), reasons are
written once per unique (relation, common ancestor, steps, truth), per unique pair or per flagged
image, and rows pick their type with array indexing. 1,000,000 predictions of 10 models: see
``benchmarks/bench_metrics.py --error-types``.

Stored: :func:`ensure_explained` keeps each view's rows in ``core.explained`` (``metrics/images.parquet``
and ``metrics/curated/images.parquet``), recomputed when the predictions, manifest, curation log,
label issues or this module's :func:`explained_versions` changed.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.curation import Curation, read_curation
from core.errors import WildLensError
from core.explained import (CURATED, ERROR_TYPES_CODE_VERSION, EXPLAINED_SCHEMA, RAW, inputs_fingerprint,
                            read_explained, read_label_issues, write_explained)
from core.intervals import DEFAULT_LEVEL, format_share, wilson_interval
from core.phash import NEAR_DUPLICATE_DISTANCE, hamming, near_duplicate_groups, parse_phashes
from core.runstore import Run, StoreError
from .curation_view import check_view, view_predictions
from .metrics import _read_rows, _unique, _unseen_rows
from .schema import Column, docs_of, schema_of
from .similarity import (COUSIN, DISTANT, HYPERNYM, HYPONYM, RELATED, SIBLING, SIMILARITY_CODE_VERSION,
                         PairSimilarities, similarities_of_codes, wnid_of_offset)
from .vocabulary import RELATED_MAX_SEVERITY, RELATIONS, lcs_phrase, plural

PART_WHOLE_MAX_STEPS = 2  # the issue's rule: a hypernym of the other class at most 2 steps up
LABEL_TAGS = ("wrong-class", "not-a-photo")  # core.curation.BUILTIN_TAGS that put the label in doubt
_NOTE_CHARS = 120  # a tag's note shown in a reason (notes hold up to 500): one line stays readable


class ErrorTypeError(WildLensError, ValueError):
    """Explanations that cannot be summarised as asked; one line saying what to pass instead."""


@dataclass(frozen=True)
class ErrorType:
    name: str  # as stored in the explanations' error_type column
    label: str  # column headers and legends
    colour: str  # hex: charts and table cells
    blame: str  # 'data', 'label space' or 'model': whose problem a mistake of this type is
    doc: str  # one line: when a mistake has this type


_TYPES = (
    # Data problems in browns (a label or a picture in doubt, not the model), the label space in
    # cyan, the model's own kinds of mistake in the families of the relation colours
    # (explain.vocabulary) without reusing one: blue fine-grained (sibling), purple hierarchy
    # (hypernym), pink part-whole, olive related, and a dark red for the model's failure.
    ErrorType("label", "Label", "#8c564b", "data",
              "The image's label is in doubt: tagged wrong-class or not-a-photo in the run's curation log, relabelled "
              "to another class (raw view only: in the curated view the relabel is the truth), or flagged by the "
              "label-issue probe (any model)."),
    ErrorType("duplicate", "Duplicate", "#c49c94", "data",
              f"The image is a near duplicate (pHash at most {NEAR_DUPLICATE_DISTANCE} bits apart) of a usable image "
              "of the run whose truth in this view is another class, or it was found for other classes too (the "
              "manifest's other_wnids): its class is ambiguous."),
    ErrorType("unseen", "Unseen class", "#17becf", "label space",
              "The true class is outside the model's label space: the model cannot name it (the metric tables' "
              "unseen classes)."),
    ErrorType("fine-grained", "Fine-grained", "#4a90d9", "model",
              "The prediction is a sibling or a cousin of the true class (a shared parent or grandparent): a "
              "confusion between close classes."),
    ErrorType("hierarchy", "Hierarchy", "#9467bd", "model",
              "The prediction is a hypernym (too general) or a hyponym (too specific) of the true class."),
    ErrorType("part-whole", "Part-whole", "#e377c2", "model",
              "WordNet links the two as part and whole (a part, member or substance meronym or holonym), directly "
              f"or between one and a hypernym of the other at most {PART_WHOLE_MAX_STEPS} steps up (car wheel -> "
              "car): the model named what the object belongs to or holds."),
    ErrorType("related", "Related", "#8c8c3c", "model",
              f"Same family: their lowest common subsumer is at most {RELATED_MAX_SEVERITY} hypernym steps above the "
              "true class, and none of the closer links holds."),
    ErrorType("model-failure", "Model failure", "#a50f15", "model",
              "None of the above: the two meet only far up in WordNet (relation distant); the model's own failure."),
)
ERROR_TYPES: tuple[str, ...] = tuple(t.name for t in _TYPES)  # precedence order: the first that applies wins
ERROR_TYPE_INFO: dict[str, ErrorType] = {t.name: t for t in _TYPES}
ERROR_TYPE_COLOURS: dict[str, str] = {t.name: t.colour for t in _TYPES}
ERROR_TYPE_DOCS: dict[str, str] = {t.name: t.doc for t in _TYPES}
(LABEL, DUPLICATE, UNSEEN, FINE_GRAINED, HIERARCHY, PART_WHOLE, RELATED_TYPE, MODEL_FAILURE) = range(len(ERROR_TYPES))

# The stored explanations' columns (core.explained.EXPLAINED_SCHEMA) with their meaning.
EXPLAINED_COLUMNS: dict[str, Column] = {
    "model": Column("string", "The model's registry id."),
    "image": Column("string", "The image: its file in the run, or the row id of uploaded predictions."),
    "true_wnid": Column("string", "The true class in this view (in the curated view a relabel is the truth)."),
    "pred_wnid": Column("string", "The model's top-1 prediction."),
    "prob_1": Column("Float64", "The model's probability of its top-1 (NA when not stored)."),
    "correct": Column("boolean", "The top-1 is the true class (strict)."),
    "in_label_space": Column("boolean", "The true class is a class of the model's label space (False: the model cannot "
                                        "name it, an unseen class; the metric tables' in_label_space)."),
    "relation": Column("string", "WordNet relation of the top-1 to the truth: " + ", ".join(RELATIONS)
                                 + " ('same' when correct; explain.vocabulary)."),
    "severity": Column("Int64", "Mistake severity: hypernym steps from the true class up to the pair's lowest common "
                                "subsumer (0 when correct or for a hyponym), as the metric tables count it."),
    "error_type": Column("string", "The mistake's error type, the first that applies of " + ", ".join(ERROR_TYPES)
                                   + " (explain.error_types); NA for a correct top-1."),
    "error_reason": Column("string", "Why the mistake has that type, in one line; NA for a correct top-1."),
}
assert schema_of(EXPLAINED_COLUMNS) == EXPLAINED_SCHEMA, "explain.error_types and core.explained disagree"

FLAG_SCHEMA = {"image": "string", "label_reason": "string", "duplicate_reason": "string"}


class _Reasons:
    """Distinct reason texts and their codes: each text is stored once, rows hold codes."""

    def __init__(self):
        self.texts: list[str] = []
        self._code: dict[str, int] = {}

    def code(self, text: str) -> int:
        found = self._code.get(text)
        if found is None:
            found = self._code[text] = len(self.texts)
            self.texts.append(text)
        return found

    def codes(self, texts) -> np.ndarray:
        return np.fromiter((self.code(t) for t in texts), dtype=np.int64)


def _name(wnid: str) -> str:
    from core.names import class_name

    return str(class_name(wnid))


def _article(name: str) -> str:
    return "an" if name[:1].lower() in "aeiou" else "a"


def _steps(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- per image: label and duplicate
def _tag_notes(curation: Curation) -> dict[str, str]:
    """image -> the note of the latest entry still in effect that tagged it with a label tag (and had a note)."""
    notes: dict[str, str] = {}
    for entry in curation.entries:  # seq order: a later entry replaces an earlier one's note, an untag ends it
        if entry.action not in ("tag", "untag") or entry.value not in LABEL_TAGS or entry.seq in curation.undone:
            continue
        note = entry.note if len(entry.note) <= _NOTE_CHARS else entry.note[:_NOTE_CHARS - 1] + "…"
        for image in entry.images:
            if entry.action == "tag" and note:
                notes[image] = note
            else:  # untagged, or tagged again without a note: the old note is no longer what was said
                notes.pop(image, None)
    return notes


def _stored_classes(run: Run, images) -> dict[str, str]:
    """image -> the class it is stored under (the manifest's wnid; a run without a manifest row for
    it: its predictions' true_wnid), for the given images only."""
    wanted = set(images)
    if not wanted:
        return {}
    manifest = run.read_manifest()
    known = manifest[manifest["file"].isin(wanted)]
    out = dict(zip(known["file"].astype(str), known["wnid"].astype(object)))
    missing = wanted - set(out)
    if missing and run.predictions_dir.exists():
        rows = run.read_predictions()
        rows = rows[rows["image"].isin(missing)]
        out.update(zip(rows["image"].astype(str), rows["true_wnid"].astype(object)))
    return out


def _label_reasons(run: Run, view: str, curation: Curation) -> dict[str, list[str]]:
    reasons: dict[str, list[str]] = {}
    notes = _tag_notes(curation)
    for image, tags in curation.tags.items():
        hit = [t for t in LABEL_TAGS if t in tags]
        if not hit:
            continue
        others = sorted(tags - set(LABEL_TAGS))
        text = "tagged " + " and ".join(hit) + (f" (also {', '.join(others)})" if others else "")
        reasons.setdefault(image, []).append(text + (f": {notes[image]}" if image in notes else ""))
    if view == RAW and curation.relabels:
        stored = _stored_classes(run, curation.relabels)
        for image, wnid in curation.relabels.items():
            if stored.get(image) != wnid:  # a relabel to the class it has changes nothing (curation_view)
                reasons.setdefault(image, []).append(f"relabelled to {_name(wnid)} ({wnid})")
    try:
        issues = read_label_issues(run)
    except StoreError:  # a damaged probe file: no probe flags here (the Images page says what is wrong with it)
        issues = None
    if issues is not None and len(issues):
        flagged = issues[issues["is_issue"].fillna(False).to_numpy(dtype=bool)]
        if view == CURATED and curation.relabels:  # a relabel settles what the probe doubted
            relabel = flagged["image"].map(curation.relabels)
            flagged = flagged[~(relabel.notna() & (relabel != flagged["true_wnid"])).to_numpy(dtype=bool)]
        quality = flagged["label_quality"].astype("Float64").fillna(np.inf)
        flagged = flagged.assign(_q=quality).sort_values(["image", "_q", "model"], kind="stable")
        models = flagged.groupby("image", sort=False)["model"].nunique()
        for row in flagged.drop_duplicates("image").itertuples(index=False):
            q = "" if pd.isna(row.label_quality) else f" (label quality {float(row.label_quality):.2f})"
            more = int(models[row.image]) - 1
            text = f"flagged by the label-issue probe on {row.model}{q}"
            reasons.setdefault(str(row.image), []).append(
                text + (f" and {more} more model{'' if more == 1 else 's'}" if more else ""))
    return reasons


def _duplicate_reasons(run: Run, view: str, curation: Curation) -> dict[str, list[str]]:
    """Near duplicates of another class's usable image, and images found for other classes too."""
    if not run.manifest_path.exists():
        return {}
    images = run.usable_images()
    images = images[images["file"].notna()]
    if view == CURATED and curation.excluded:
        images = images[~images["file"].isin(curation.excluded)]
    files = images["file"].astype(str).tolist()
    truth = images["wnid"].astype(object).tolist()
    if view == CURATED and curation.relabels:
        truth = [curation.relabels.get(f, t) for f, t in zip(files, truth)]
    reasons: dict[str, list[str]] = {}
    groups = near_duplicate_groups(images["phash"].tolist())
    frame = pd.DataFrame({"group": groups, "truth": pd.array(truth, dtype="string")})
    classes = frame.groupby("group")["truth"].nunique()
    mixed = classes.index[classes.to_numpy() > 1]
    if len(mixed):
        hashes, hashed = parse_phashes(images["phash"].tolist())
        value_of = dict(zip(hashed.tolist(), hashes.tolist()))
        members = np.flatnonzero(np.isin(groups, mixed.to_numpy()))
        # One loop per mixed group (few: the crawl rejects near copies), the pairs inside it compared at once:
        # a group is single linkage, so its members are checked pairwise against the threshold itself.
        for group in np.unique(groups[members]).tolist():
            inside = [i for i in members[groups[members] == group].tolist() if i in value_of]
            values = np.array([value_of[i] for i in inside], dtype=np.uint64)
            distance = hamming(values[:, None], values[None, :])
            for a, i in enumerate(inside):
                candidates = [(int(distance[a, b]), files[j], j) for b, j in enumerate(inside)
                              if truth[j] != truth[i] and distance[a, b] <= NEAR_DUPLICATE_DISTANCE]
                if candidates:
                    bits, other, j = min(candidates)
                    name = _name(str(truth[j]))
                    reasons.setdefault(files[i], []).append(
                        f"near duplicate of {other}, {_article(name)} {name} ({bits} bit{'' if bits == 1 else 's'} "
                        "apart)")
    if "other_wnids" in images:
        for file, own, others in zip(files, truth, images["other_wnids"].tolist()):
            if not isinstance(others, str) or not others.strip():
                continue
            if view == CURATED and file in curation.relabels:  # the analyst's relabel settles which class it is
                continue
            also = [w for w in dict.fromkeys(w.strip() for w in others.split(",")) if w and w != own]
            if also:
                named = ", ".join(f"{_name(w)} ({w})" for w in also[:3]) + (f" and {len(also) - 3} more"
                                                                               if len(also) > 3 else "")
                reasons.setdefault(file, []).append(f"also found for {named}")
    return reasons


def image_flags(run: Run, view: str = RAW, *, curation: Curation | None = None) -> pd.DataFrame:
    """The images of ``run`` whose mistakes are ``label`` or ``duplicate`` mistakes in ``view``, one
    row each (:data:`FLAG_SCHEMA`: ``image``, ``label_reason``, ``duplicate_reason``; NA where that
    rule does not apply; several reasons of one rule joined by '; '), sorted by image.
    ``curation``: the run's log replayed, when the caller has read it already."""
    check_view(view)
    curation = curation if curation is not None else read_curation(run)
    label = _label_reasons(run, view, curation)
    duplicate = _duplicate_reasons(run, view, curation)
    images = sorted(set(label) | set(duplicate))
    return pd.DataFrame({
        "image": pd.array(images, dtype="string"),
        "label_reason": pd.array(["; ".join(label[i]) if i in label else None for i in images], dtype="string"),
        "duplicate_reason": pd.array(["; ".join(duplicate[i]) if i in duplicate else None for i in images],
                                     dtype="string")})


# --------------------------------------------------------------------------- per pair: part-whole
def _ancestors_within(graph, rows: list[int], steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position in ``rows``, ancestor row, steps up) for each row's hypernyms and instance hypernyms
    0..``steps`` up (itself at 0), the fewest steps per ancestor. One Python pass per class."""
    where, ancestor, up = [], [], []
    for k, row in enumerate(rows):
        seen = {row: 0}
        frontier = [row]
        for step in range(1, steps + 1):
            frontier = [p for r in frontier for p in graph.parent_rows(r) if p not in seen]
            for p in frontier:
                seen.setdefault(p, step)
        where += [k] * len(seen)
        ancestor += list(seen)
        up += list(seen.values())
    return np.array(where, dtype=np.int64), np.array(ancestor, dtype=np.int64), np.array(up, dtype=np.int64)


def _part_whole(wnids, true_codes: np.ndarray, pred_codes: np.ndarray) -> dict[int, tuple[int, str]]:
    """Pair index -> (hypernym steps, its part-whole reason), for the pairs (codes into ``wnids``) that WordNet links as
    part and whole (module docstring, rule 6); pairs without one are absent. Vectorised: every link of
    the classes involved (both directions as stored, core.meronyms) joined with every class's
    ancestors 0-2 steps up on the linked synset; the fewest steps win."""
    from core.meronyms import KINDS, is_meronym_kind, kind_phrase, part_whole_links
    from core.wordgraph import noun_graph

    if not len(true_codes):
        return {}
    graph, links = noun_graph(), part_whole_links()
    used = np.unique(np.concatenate([true_codes, pred_codes]))
    rows = [graph.from_wnid(str(wnids[c])).row for c in used.tolist()]
    # Links touching a class: its own (the class is the source) and those of others pointing at it.
    which, target, kind = links.of_rows(rows)
    used_rows = np.array(rows, dtype=np.int64)
    incoming = np.flatnonzero(np.isin(links.target, used_rows))
    position = {r: k for k, r in enumerate(rows)}
    x = np.concatenate([which, np.array([position[r] for r in links.target[incoming].tolist()], dtype=np.int64)])
    y = np.concatenate([target, links.source[incoming]])
    link_kind = np.concatenate([kind, links.kind[incoming]])
    x_is_source = np.concatenate([np.ones(len(which), bool), np.zeros(len(incoming), bool)])
    if not len(x):
        return {}
    where, ancestor, up = _ancestors_within(graph, rows, PART_WHOLE_MAX_STEPS)
    statements = pd.DataFrame({"x": x, "y": y, "kind": link_kind, "x_is_source": x_is_source})
    above = pd.DataFrame({"w": where, "y": ancestor, "up": up})
    joined = statements.merge(above, on="y")  # x linked to y, y being w itself or its hypernym `up` steps up
    if joined.empty:
        return {}
    n_rows = len(rows)
    pair_keys = pd.Index(np.searchsorted(used, true_codes) * n_rows + np.searchsorted(used, pred_codes))
    x_, w_ = joined["x"].to_numpy(), joined["w"].to_numpy()
    # the link is the truth's (x = truth, y above the prediction) or the prediction's (x = prediction)
    both = pd.concat([joined.assign(pair=pair_keys.get_indexer(x_ * n_rows + w_), role=0),
                      joined.assign(pair=pair_keys.get_indexer(w_ * n_rows + x_), role=1)], ignore_index=True)
    both = both[(both["pair"] >= 0) & (both["x"] != both["w"])]
    if both.empty:
        return {}
    both = both.assign(family=both["kind"] % 3, name=[graph.names[r] for r in both["y"].tolist()])
    best = both.sort_values(["pair", "up", "family", "role", "name"], kind="stable").drop_duplicates("pair")
    out = {}
    for pair, x_pos, y_row, kind_code, from_x, w_pos, steps in zip(
            best["pair"].tolist(), best["x"].tolist(), best["y"].tolist(), best["kind"].tolist(),
            best["x_is_source"].tolist(), best["w"].tolist(), best["up"].tolist()):
        kind_name = KINDS[kind_code]
        source, target_ = (rows[x_pos], y_row) if from_x else (y_row, rows[x_pos])
        part, whole = (target_, source) if is_meronym_kind(kind_name) else (source, target_)
        name = {r: _name(wnid_of_offset(int(graph.offsets[r]))) for r in (part, whole, rows[w_pos])}
        phrase = kind_phrase(kind_name)
        if steps == 0:
            text = f"{name[part]} is {phrase} {name[whole]}"
        elif y_row == whole:
            text = f"{name[part]} is {phrase} {name[whole]}, {_steps(steps)} above {name[rows[w_pos]]}"
        else:
            text = f"{name[part]}, {_steps(steps)} above {name[rows[w_pos]]}, is {phrase} {name[whole]}"
        out[int(pair)] = (int(steps), text)
    return out


# --------------------------------------------------------------------------- per prediction
def _relation_reasons(wnids, values: PairSimilarities, true_codes, pred_codes, relation, reasons: _Reasons,
                      pairs: np.ndarray) -> np.ndarray:
    """Reason codes of the given pairs (indexes into ``values``) by their relation: siblings, cousins,
    related and distant pairs once per (relation, common ancestor, steps, truth); hypernym and
    hyponym pairs once per pair."""
    from core.wordgraph import noun_graph

    graph = noun_graph()
    out = np.full(len(pairs), -1, dtype=np.int64)
    rel = relation[pairs]
    ancestral = (rel == HYPERNYM) | (rel == HYPONYM)
    for k in np.flatnonzero(ancestral).tolist():
        p = int(pairs[k])
        t_name, p_name = _name(str(wnids[true_codes[p]])), _name(str(wnids[pred_codes[p]]))
        out[k] = reasons.code(f"hypernym: {p_name} is an ancestor of {t_name} (too general)" if rel[k] == HYPERNYM
                              else f"hyponym: {p_name} is a kind of {t_name} (too specific)")
    rest = np.flatnonzero(~ancestral)
    if not len(rest):
        return out
    chosen = pairs[rest]
    lcs = values.lcs[chosen].astype(np.int64)
    severity = values.severity[chosen].astype(np.int64)
    is_sibling = rel[rest] == SIBLING
    truth = np.where(is_sibling, -1, true_codes[chosen])  # a sibling's reason names the parent only
    steps = np.where(is_sibling, 0, severity)
    n = len(wnids) + 1
    key = ((lcs * 64 + steps) * 8 + rel[rest].astype(np.int64)) * n + (truth + 1)
    unique, inverse = _unique(key, inverse=True, sort=False)
    # Each (relation, ancestor, steps) phrased once with a stand-in for the truth, each truth named once:
    # on 1,000,000 ImageNet-21k predictions (43,000 distinct reasons) one lcs_phrase call per reason was
    # 0.9 s of 1.9 s.
    shape, t_code = np.divmod(unique, n)
    shapes, shape_of = _unique(shape, inverse=True, sort=False)
    templates = []
    for value in shapes.tolist():
        offset_steps, r = divmod(value, 8)
        offset, steps_up = divmod(offset_steps, 64)
        row = graph.row_of_offset(offset)
        lcs_name = graph.names[row] if row is not None else wnid_of_offset(offset)
        templates.append(f"sibling: both {plural(lcs_name.rsplit('.', 2)[0])}" if r == SIBLING else
                         f"{RELATIONS[r]}: {lcs_phrase(lcs_name, steps_up, _TRUTH)}")
    truths, truth_of = _unique(t_code, inverse=True, sort=False)
    names = [_name(str(wnids[t - 1])) if t > 0 else "" for t in truths.tolist()]
    texts = [templates[a].replace(_TRUTH, names[b]) for a, b in zip(shape_of.tolist(), truth_of.tolist())]
    out[rest] = reasons.codes(texts)[inverse]
    return out


_TRUTH = "\x00"  # stands for the true class's name in a phrase (no WordNet lemma holds it)


def _string_column(texts, codes: np.ndarray):
    """texts[codes] as a pandas string array, NA where a code is -1; only the distinct texts are converted."""
    return pd.array(np.asarray(list(texts), dtype=object), dtype="string").take(np.asarray(codes, np.int64),
                                                                                allow_fill=True)


def _flag_codes(images: pd.Series, flags: pd.DataFrame | None, reasons: _Reasons) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``images``: the reason code of its label flag and of its duplicate flag (-1: none).
    The flagged images (few) are hashed, then the rows matched against them."""
    label = np.full(len(images), -1, dtype=np.int64)
    duplicate = label.copy()
    if flags is None or not len(flags) or not len(images):
        return label, duplicate
    flags = flags.drop_duplicates("image", keep="last")
    flag_images = flags["image"].astype(object)
    hit = np.flatnonzero(images.isin(set(flag_images.dropna())).to_numpy(dtype=bool))
    if not len(hit):
        return label, duplicate
    at = pd.Index(flag_images).get_indexer(images.iloc[hit].astype(object))
    for column, out in (("label_reason", label), ("duplicate_reason", duplicate)):
        if column not in flags:
            continue
        values = flags[column].astype(object).tolist()
        codes = np.array([reasons.code(str(v)) if isinstance(v, str) and v else -1 for v in values], dtype=np.int64)
        out[hit] = codes[at]
    return label, duplicate


def explain_predictions(predictions: pd.DataFrame, flags: pd.DataFrame | None = None, *,
                        cache_dir=None) -> pd.DataFrame:
    """One row per (model, image) prediction that the metric tables count (status 'ok', an exact repeat
    once), in input order, with exactly the columns of ``core.explained.EXPLAINED_SCHEMA``: its
    WordNet relation ('same' when correct), its severity, and for a mistake its error type (the first
    rule of :data:`ERROR_TYPES` that applies) and reason. ``flags``: :func:`image_flags` of the run
    and view (None: no image is a label or duplicate mistake). Malformed predictions raise
    ``explain.metrics.PredictionsError``, as the metric tables do."""
    rows = _read_rows(predictions)
    counted = rows.ok & (rows.model >= 0) & (rows.true >= 0) & (rows.pred >= 0)
    idx = np.flatnonzero(counted)
    n = max(len(rows.wnids), 1)
    true, pred = rows.true[idx], rows.pred[idx]
    pairs, pair_of_row = _unique(true * n + pred, inverse=True, sort=False)
    pair_true, pair_pred = pairs // n, pairs % n
    values = (similarities_of_codes(rows.wnids, pair_true, pair_pred, cache_dir=cache_dir) if len(pairs)
              else PairSimilarities.empty())
    relation = values.relation.astype(np.int64)
    reasons = _Reasons()

    # Per pair: the model's kinds of mistake (rules 4-8) and their reasons.
    pair_type = np.full(len(pairs), -1, dtype=np.int64)
    pair_type[(relation == SIBLING) | (relation == COUSIN)] = FINE_GRAINED
    pair_type[(relation == HYPERNYM) | (relation == HYPONYM)] = HIERARCHY
    pair_type[relation == RELATED] = RELATED_TYPE
    pair_type[relation == DISTANT] = MODEL_FAILURE
    mistake_pairs = np.flatnonzero(pair_type >= 0)
    pair_reason = np.full(len(pairs), -1, dtype=np.int64)
    pair_reason[mistake_pairs] = _relation_reasons(rows.wnids, values, pair_true, pair_pred, relation, reasons,
                                                   mistake_pairs)
    loose = np.flatnonzero((relation == RELATED) | (relation == DISTANT))
    for k, (_, text) in _part_whole(rows.wnids, pair_true[loose], pair_pred[loose]).items():
        pair_type[loose[k]] = PART_WHOLE
        pair_reason[loose[k]] = reasons.code(text)

    # Per row: the pair's type, then the rules that come before it, the first rule written last.
    error_type = pair_type[pair_of_row]
    reason = pair_reason[pair_of_row]
    mistake = error_type >= 0
    outside = _unseen_rows(rows)[idx]  # the truth is no class of the row's label space
    unseen = mistake & outside
    if unseen.any():
        space_of = rows.space[idx]
        keys, inverse = _unique(space_of[unseen] * n + true[unseen], inverse=True, sort=False)
        texts = [f"{_name(str(rows.wnids[k % n]))} ({rows.wnids[k % n]}) is not a class of {rows.spaces[k // n]}, "
                 "the model's label space" for k in keys.tolist()]
        error_type[unseen] = UNSEEN
        reason[unseen] = reasons.codes(texts)[inverse]
    images = (predictions["image"].iloc[idx] if "image" in predictions.columns
              else pd.Series(pd.NA, index=range(len(idx)), dtype="string"))
    label, duplicate = _flag_codes(images, flags, reasons)
    for flagged, kind in ((duplicate, DUPLICATE), (label, LABEL)):
        here = mistake & (flagged >= 0)
        error_type[here] = kind
        reason[here] = flagged[here]

    severity = values.severity.astype(np.int64)[pair_of_row]
    if "prob_1" in predictions.columns:
        prob = pd.to_numeric(predictions["prob_1"].iloc[idx], errors="coerce").astype("Float64").array
    else:
        prob = pd.array([pd.NA] * len(idx), dtype="Float64")
    image_column = (images.array if isinstance(images.dtype, pd.StringDtype)
                    else pd.array(images.astype(object).to_numpy(), dtype="string"))
    out = pd.DataFrame({
        "model": _string_column(rows.models, rows.model[idx]),
        "image": image_column,
        "true_wnid": _string_column(rows.wnids, true),
        "pred_wnid": _string_column(rows.wnids, pred),
        "prob_1": prob,
        "correct": pd.arrays.BooleanArray(true == pred, np.zeros(len(idx), dtype=bool)),
        "in_label_space": pd.arrays.BooleanArray(~outside, np.zeros(len(idx), dtype=bool)),
        "relation": _string_column(RELATIONS, relation[pair_of_row]),
        "severity": pd.arrays.IntegerArray(severity, np.zeros(len(idx), dtype=bool)),
        "error_type": _string_column(ERROR_TYPES, error_type),
        "error_reason": _string_column(reasons.texts, reason),
    }, copy=False)
    return out.astype({c: t for c, t in EXPLAINED_SCHEMA.items() if str(out[c].dtype) != t})


# --------------------------------------------------------------------------- per model
_SHARE = "of the model's mistakes"
ERROR_TYPE_TABLE: dict[str, Column] = {
    "model": Column("string", "The model's registry id."),
    "family": Column("string", "The family the model ran as (CNN, transformer, hybrid, language-augmented), from "
                               "the predictions' family column; NA when not recorded."),
    "n": Column("Int64", "Predictions counted (status 'ok'; an exact repeat once) over the model's in-space classes, "
                         "as the metric tables' per-model n."),
    "n_unseen": Column("Int64", "Predictions of classes outside the model's label space (every one a mistake of "
                                "type unseen, or label / duplicate before it), as the metric tables' n_unseen."),
    "n_mistakes": Column("Int64", "Mistakes typed: counted predictions whose top-1 is not the true class (strict), "
                                  "unseen classes included: the denominator of every share."),
    "accuracy": Column("Float64", "Strict top-1 accuracy over n, the in-space classes: the metric tables' per-model "
                                  "accuracy (NA for n = 0)."),
    "accuracy_ci_low": Column("Float64", "Lower bound of accuracy: Wilson score interval over n, at the table's level "
                                         "(default 95 %), as the metric tables' per-model accuracy_ci_low."),
    "accuracy_ci_high": Column("Float64", "Upper bound of accuracy (Wilson, as its lower bound)."),
    "accuracy_clean": Column("Float64", "The accuracy the model would have if its label and duplicate mistakes were "
                                        "not counted: correct / (n - its in-space label and duplicate mistakes). NA "
                                        "when nothing is left."),
    "accuracy_clean_ci_low": Column("Float64", "Lower bound of accuracy_clean: Wilson score interval over n less "
                                               "those mistakes, at the table's level (default 95 %)."),
    "accuracy_clean_ci_high": Column("Float64", "Upper bound of accuracy_clean (Wilson, as its lower bound)."),
}
for _t in _TYPES:
    ERROR_TYPE_TABLE.update({
        f"{_t.name}_count": Column("Int64", f"Mistakes of type {_t.name}: {_t.doc}"),
        f"{_t.name}_share": Column("Float64", f"{_t.name}_count / n_mistakes: the share {_SHARE} that are {_t.name} "
                                              "(the shares of a model sum to 1). NA without mistakes."),
        f"{_t.name}_share_ci_low": Column("Float64", f"Lower bound of {_t.name}_share: Wilson score interval over "
                                                     "n_mistakes, at the table's level (default 95 %). NA without "
                                                     "mistakes."),
        f"{_t.name}_share_ci_high": Column("Float64", f"Upper bound of {_t.name}_share (Wilson, as its lower bound)."),
    })
ERROR_TYPE_TABLE_SCHEMA = schema_of(ERROR_TYPE_TABLE)
# Readable column headers (the raw name stays in the CSV and in each header's help), as explain.schema.LABELS.
ERROR_TYPE_TABLE_LABELS: dict[str, str] = {
    "model": "Model", "family": "Family", "n": "Images", "n_unseen": "Images (unseen classes)",
    "n_mistakes": "Mistakes", "accuracy": "Accuracy", "accuracy_ci_low": "Accuracy low", "accuracy_ci_high": "Accuracy high",
    "accuracy_clean": "Accuracy without label and duplicate mistakes", "accuracy_clean_ci_low": "Accuracy (clean) low",
    "accuracy_clean_ci_high": "Accuracy (clean) high",
    **{f"{t.name}{suffix}": f"{t.label}{words}" for t in _TYPES for suffix, words in (
        ("_count", ""), ("_share", " %"), ("_share_ci_low", " % low"), ("_share_ci_high", " % high"))},
}
assert list(ERROR_TYPE_TABLE_LABELS) == list(ERROR_TYPE_TABLE)
ERROR_TYPE_TABLE_DOCS = docs_of(ERROR_TYPE_TABLE)


def model_families(predictions: pd.DataFrame) -> dict[str, str]:
    """model -> the family its predictions record (the first non-empty ``family``), for the models
    that record one; {} without the column."""
    if "family" not in predictions.columns or "model" not in predictions.columns:
        return {}
    known = predictions[["model", "family"]].dropna().drop_duplicates("model")
    return {str(m): str(f) for m, f in zip(known["model"], known["family"])}


def error_type_table(explained: pd.DataFrame, *, families: Mapping[str, str] | pd.DataFrame | None = None,
                     level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """Per model (in first-appearance order), the columns of :data:`ERROR_TYPE_TABLE`: n, mistakes,
    accuracy, each type's count and share of the mistakes with its Wilson interval, and the accuracy
    without the label and duplicate mistakes. ``explained``: :func:`explain_predictions`' rows (or
    ``ensure_explained``'s); ``families``: model -> family, or the predictions themselves (their
    ``family`` column); ``level``: the intervals' confidence level."""
    if isinstance(families, pd.DataFrame):
        families = model_families(families)
    families = dict(families or {})
    if "family" in explained.columns:
        families = {**model_families(explained), **families}
    model_codes, models = pd.factorize(explained["model"])
    n_models = len(models)
    keep = model_codes >= 0
    model_codes = model_codes[keep]
    correct = explained["correct"].to_numpy(dtype=bool, na_value=False)[keep]
    # The metric tables' per-model population: the model's in-space classes (an unseen class's strict
    # accuracy is NA, never 0, SPEC); its unseen mistakes still count among the mistakes typed.
    seen = (explained["in_label_space"].to_numpy(dtype=bool, na_value=True)[keep]
            if "in_label_space" in explained.columns else np.ones(len(correct), dtype=bool))
    codes, found = pd.factorize(explained["error_type"])  # hashing: pd.Categorical's lookup took 0.9 s of 1M rows
    unknown = [str(t) for t in found if t not in ERROR_TYPE_INFO]
    if unknown:
        raise ErrorTypeError(f"unknown error type {unknown[0][:40]!r} in the explanations; give rows of "
                             f"explain_predictions or ensure_explained (types: {', '.join(ERROR_TYPES)}).")
    position = np.array([ERROR_TYPES.index(t) for t in found] + [-1], dtype=np.int64)
    type_codes = position[codes][keep]  # codes -1 (NA) pick the -1 at the end
    n = np.bincount(model_codes[seen], minlength=n_models)
    n_unseen = np.bincount(model_codes[~seen], minlength=n_models)
    right = np.bincount(model_codes[correct & seen], minlength=n_models)
    n_mistakes = n + n_unseen - right  # every mistake typed, those of unseen classes included

    def type_counts(mask: np.ndarray) -> np.ndarray:
        typed = mask & (type_codes >= 0)
        counted = np.bincount(model_codes[typed] * len(ERROR_TYPES) + type_codes[typed],
                              minlength=n_models * len(ERROR_TYPES))
        return counted.reshape(n_models, len(ERROR_TYPES)).astype(np.int64)

    counts = type_counts(np.ones(len(type_codes), dtype=bool))
    in_space = type_counts(seen)
    clean_n = n - in_space[:, LABEL] - in_space[:, DUPLICATE]
    with np.errstate(invalid="ignore", divide="ignore"):
        columns: dict[str, np.ndarray] = {
            "model": np.asarray([str(m) for m in models], dtype=object),
            "family": np.asarray([families.get(str(m)) for m in models], dtype=object),
            "n": n, "n_unseen": n_unseen, "n_mistakes": n_mistakes,
            "accuracy": np.where(n > 0, right / np.maximum(n, 1), np.nan),
            "accuracy_clean": np.where(clean_n > 0, right / np.maximum(clean_n, 1), np.nan),
        }
        columns["accuracy_ci_low"], columns["accuracy_ci_high"] = wilson_interval(right, n, level)
        columns["accuracy_clean_ci_low"], columns["accuracy_clean_ci_high"] = wilson_interval(right, clean_n, level)
        for k, name in enumerate(ERROR_TYPES):
            columns[f"{name}_count"] = counts[:, k]
            columns[f"{name}_share"] = np.where(n_mistakes > 0, counts[:, k] / np.maximum(n_mistakes, 1), np.nan)
            columns[f"{name}_share_ci_low"], columns[f"{name}_share_ci_high"] = wilson_interval(counts[:, k],
                                                                                              n_mistakes, level)
    out = {}
    for name, dtype in ERROR_TYPE_TABLE_SCHEMA.items():
        values = columns[name]
        if dtype == "Float64":
            values = np.asarray(values, dtype=np.float64)
            out[name] = pd.arrays.FloatingArray(values, np.isnan(values))
        elif dtype == "Int64":
            out[name] = pd.array(np.asarray(values, dtype=np.int64), dtype="Int64")
        else:
            out[name] = pd.array(values, dtype=dtype)
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- stored per view
def explained_versions() -> dict:
    """What stored explanations were computed by (core.explained.inputs_fingerprint's ``versions``):
    a change to any of these rules makes them stale."""
    from core.meronyms import MERONYM_LAYOUT_VERSION

    return {"error_types": ERROR_TYPES_CODE_VERSION, "similarity": SIMILARITY_CODE_VERSION,
            "meronyms": MERONYM_LAYOUT_VERSION, "near_duplicate_distance": NEAR_DUPLICATE_DISTANCE,
            "related_max_severity": RELATED_MAX_SEVERITY, "part_whole_max_steps": PART_WHOLE_MAX_STEPS}


class TooManyToExplain(WildLensError):
    """A run with more stored predictions than :data:`explain.streaming.EXPLAINED_IN_MEMORY`: its
    per-prediction explanations are typed with every prediction in memory, so they are not made."""


def check_explainable(run: Run) -> None:
    """Raise :class:`TooManyToExplain` (one line) when the run stores more predictions than are typed
    in memory (their Parquet footers only; the metric tables stream and have no such limit)."""
    from . import streaming  # (read at call time: the limit is the streaming chunk's)

    stored = sum(streaming.part_rows(run).values())
    if stored > streaming.EXPLAINED_IN_MEMORY:
        raise TooManyToExplain(
            f"Run {run.run_id} holds {stored:,} predictions, more than the {streaming.EXPLAINED_IN_MEMORY:,} whose "
            "error types are typed in memory: its per-prediction explanations (error types on Results and Browse, "
            "the FiftyOne export's fields) are not made; its metric tables are complete (python -m explain "
            f"metrics --run {run.run_id}).")


def ensure_explained(run: Run, view: str = RAW, *, cache_dir=None, store: bool = True,
                     force: bool = False) -> pd.DataFrame:
    """The per-prediction explanations of ``view`` (:func:`explain_predictions` of
    ``explain.curation_view.view_predictions(run, view)`` with the run's :func:`image_flags`): the
    stored ones while they match the run now (``core.explained.read_explained``), else recomputed
    and (``store``) written back. A run whose folder cannot be written still gets its rows; ``force``
    recomputes fresh ones. A run too large to type in memory raises :class:`TooManyToExplain`
    (:func:`check_explainable`) before anything is read: 45,000,000 predictions were ~15 GB."""
    check_view(view)
    check_explainable(run)
    versions = explained_versions()
    fingerprint = inputs_fingerprint(run, view, versions)  # before reading: a change meanwhile leaves it stale
    if not force:
        stored = read_explained(run, view, versions)
        if stored is not None:
            return stored
    curation = read_curation(run)
    predictions, _ = view_predictions(run, view, curation)
    rows = explain_predictions(predictions, image_flags(run, view, curation=curation), cache_dir=cache_dir)
    if store:
        try:
            write_explained(run, view, rows, fingerprint)
        except StoreError:  # read-only, full or deleted meanwhile: the rows are still right
            pass
    return rows


TABLE_COLUMNS = ("model", "correct", "in_label_space", "error_type")  # what error_type_table reads of the rows


def stored_for_table(run: Run, view: str = RAW) -> pd.DataFrame | None:
    """The columns :func:`error_type_table` reads (:data:`TABLE_COLUMNS`) of the stored explanations of
    ``view``, decoded alone, while they are fresh (as :func:`ensure_explained` would read them back);
    else None. Why: Results' first load decoded every column of 1,000,000 explanations for its
    per-model error-type table (0.12-0.56 s; these four: 0.02-0.05 s). No size check: stored
    explanations exist only for runs small enough to type (ensure_explained checks before typing)."""
    check_view(view)
    return read_explained(run, view, explained_versions(), columns=list(TABLE_COLUMNS))


def explained_for_table(run: Run, view: str = RAW, *, cache_dir=None) -> pd.DataFrame:
    """:func:`stored_for_table`, else those columns of :func:`ensure_explained`'s rows (typed, stored)."""
    stored = stored_for_table(run, view)
    if stored is not None:
        return stored
    return ensure_explained(run, view, cache_dir=cache_dir)[list(TABLE_COLUMNS)]


MISTAKE_RELATIONS = ("hypernym", "hyponym", "sibling", "cousin", "related", "distant")  # a mistake's relations


def mistake_shares(*, types: pd.DataFrame | None = None, per_model: pd.DataFrame | None = None) -> pd.DataFrame:
    """The share of each model's mistakes per error type (``types``: :func:`error_type_table`) or
    per WordNet relation (``per_model``: explain.metrics' per-model table, its ``<relation>_count``
    and ``_rate`` columns), one row per (model, kind) in the order of the types or relations:
    ``model``, ``kind``, ``count``, ``share``, ``share_ci_low``, ``share_ci_high``, ``n_mistakes``.
    What the dashboard stacks into one bar per model and opens images from."""
    rows = []
    if types is not None:
        for record in types.to_dict("records"):
            for name in ERROR_TYPES:
                rows.append({"model": record["model"], "kind": name, "count": record[f"{name}_count"],
                             "share": record[f"{name}_share"], "share_ci_low": record[f"{name}_share_ci_low"],
                             "share_ci_high": record[f"{name}_share_ci_high"], "n_mistakes": record["n_mistakes"]})
    if per_model is not None:
        for record in per_model.to_dict("records"):
            for name in MISTAKE_RELATIONS:
                rows.append({"model": record["model"], "kind": name, "count": record.get(f"{name}_count"),
                             "share": record.get(f"{name}_rate"), "share_ci_low": record.get(f"{name}_rate_ci_low"),
                             "share_ci_high": record.get(f"{name}_rate_ci_high"),
                             "n_mistakes": record.get("n_mistakes")})
    out = pd.DataFrame(rows, columns=["model", "kind", "count", "share", "share_ci_low", "share_ci_high",
                                      "n_mistakes"])
    return out.astype({"model": "string", "kind": "string", "count": "Int64", "share": "Float64",
                       "share_ci_low": "Float64", "share_ci_high": "Float64", "n_mistakes": "Int64"})


def data_problem_sentence(row) -> str:
    """'efficientnet_lite0: 2 of 11 mistakes are label or duplicate problems; accuracy 63.3% [51.2, 74.0]
    -> 69.0% [56.1, 79.7] without them' for a row of :func:`error_type_table`, each accuracy with its
    Wilson interval as the tables write it (outside text: escape it where Markdown is read)."""
    def pct(column: str) -> str:
        return format_share(row.get(column), row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high"))

    data, mistakes = int(row["label_count"]) + int(row["duplicate_count"]), int(row["n_mistakes"])
    if data == 0:  # nothing to take out: no arrow from a number to itself (a UI review)
        return (f"{row['model']}: none of its {mistakes} mistake{'s' if mistakes != 1 else ''} is a label or duplicate "
                f"problem; accuracy {pct('accuracy')}")
    return (f"{row['model']}: {data} of {mistakes} mistakes {'is a' if data == 1 else 'are'} label or duplicate "
            f"problem{'s' if data != 1 else ''}; accuracy {pct('accuracy')} -> {pct('accuracy_clean')} without "
            f"{'it' if data == 1 else 'them'}")
