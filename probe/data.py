"""What a probe reads from a run: stored features of the usable images, their classes, and (for a
zero-shot model) the text classifier the language-initialised head starts from.

* Features: ``core.features.read_features`` (``features/<model>/``, written by
  ``python -m classify --run RUN_ID --models M --features``). Only the run's **usable** images are
  kept (``core.runstore.Run.usable_images``: accepted, not excluded); an image an analyst excluded
  after its features were stored is left out. The label is the manifest's ``wnid``.
* Classes: the run's classes that have at least two distinct usable images with features (one to
  train on, one to test on; near duplicates count once); the others are listed in
  :attr:`ProbeData.dropped` and printed.
* Features must be finite: a NaN or an infinity in any probed image's vector is refused (one
  line: how many images, the first few by name, the fix), never probed. (NaN in half the rows had
  made every class fall to chance, the clean ones too, with exit 0.)
* Near duplicates (:mod:`probe.duplicates`, the manifest's ``phash``): :attr:`ProbeData.groups`
  gives each image its group; the draws keep a group on one side, and the command warns.
* The text classifier (language-initialised variant and N = 0) is read only when the model's
  ``features/<model>/meta.json`` records it, as::

      "text_classifier": {"path": "<.npy, absolute or relative to features/<model>/>",
                          "wnids": ["n…", …],      # its columns, in order
                          "logit_scale": 100.0}

  a float32 ``[dim, len(wnids)]`` matrix of L2-normalised class text embeddings (what
  ``classify.zeroshot.classifier`` caches). The path must resolve inside the run's ``features/`` folder and
  be a regular file (``core.features.load_meta_array``); anything else is a one-line error naming
  ``meta.json``. Without that record the model gets the plain probe only and
  :attr:`ProbeData.language_note` says why; nothing is guessed from the zero-shot cache folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np
import pandas as pd

from core.errors import WildLensError
from core.features import feature_dir, load_meta_array, read_feature_meta, read_features
from core.runstore import Run

from .duplicates import near_duplicate_groups

MIN_IMAGES = 2  # one to train on, one to test on
NAMED = 3  # images a refusal names (then the count says the rest)


class ProbeInputError(WildLensError, ValueError):
    """A probe's input that is missing or unusable; one line with the fix."""


@dataclass
class ProbeData:
    model: str
    images: np.ndarray  # the manifest's 'file' of each row, sorted
    labels: np.ndarray  # wnid of each row
    features: np.ndarray  # float32 [rows, dim], as stored (the probe normalises)
    classes: list[str]  # probed classes, sorted
    kind: str  # 'pre-logit' or 'image-embedding'
    dropped: dict[str, int] = field(default_factory=dict)  # class -> usable images with features (< 2)
    without_features: int = 0  # usable images with no stored features
    prior_coef: np.ndarray | None = None  # [classes, dim]: logit_scale x text embeddings, rows as `classes`
    language_note: str = ""  # why there is no language-initialised variant (empty when there is one)
    groups: np.ndarray | None = None  # per row, its near-duplicate group (the group's first row); None: all alone
    all_duplicates: set[str] = field(default_factory=set)  # dropped classes whose images are all near duplicates

    def subset(self, mask: np.ndarray) -> "ProbeData":
        groups = None if self.groups is None else self.groups[mask]
        return ProbeData(self.model, self.images[mask], self.labels[mask], self.features[mask], self.classes,
                         self.kind, self.dropped, self.without_features, self.prior_coef, self.language_note,
                         groups, self.all_duplicates)


def _fix(run: Run, model: str) -> str:
    return f"python -m classify --run {run.run_id} --models {model} --features"


def load_probe_data(run: Run, model: str) -> ProbeData:
    meta = read_feature_meta(run, model)
    if meta is None:
        raise ProbeInputError(f"run {run.run_id} has no stored features of {model}; store them with {_fix(run, model)}.")
    index, array = read_features(run, model)
    usable = run.usable_images()
    usable = usable[usable["file"].notna()][["file", "wnid", "phash"]]
    wanted = set(run.info.wnids or usable["wnid"].dropna().unique())
    usable = usable[usable["wnid"].isin(wanted)]
    merged = index.reset_index(names="row").merge(usable, left_on="image", right_on="file", how="inner")
    merged = merged.sort_values("image", kind="stable").reset_index(drop=True)
    if merged.empty:
        raise ProbeInputError(f"none of run {run.run_id}'s usable images has stored features of {model}; "
                              f"store them with {_fix(run, model)}.")
    rows = merged["row"].to_numpy(dtype=np.int64)
    images = merged["image"].astype(str).to_numpy()
    labels = merged["wnid"].astype(str).to_numpy()
    groups = near_duplicate_groups(merged["phash"].tolist())
    counts = merged["wnid"].astype(str).value_counts()
    distinct = pd.Series(groups).groupby(labels).nunique()
    classes = sorted(c for c in counts.index if distinct[c] >= MIN_IMAGES)
    dropped = {c: int(n) for c, n in sorted(counts.items()) if c not in classes}
    all_duplicates = {c for c in dropped if dropped[c] >= MIN_IMAGES}  # enough images, all one picture
    dropped.update({c: 0 for c in sorted(wanted - set(counts.index))})
    if len(classes) < 2:
        raise ProbeInputError(f"{model} in run {run.run_id}: a probe needs two classes with at least {MIN_IMAGES} "
                              f"distinct usable images with features; {len(classes)} have them.")
    keep = np.isin(labels, classes)
    features = np.ascontiguousarray(array[rows[keep]])
    _refuse_non_finite(run, model, images[keep], features)
    kept_groups = groups[keep]
    # renumber as rows of the kept images (a group is named by its first kept row)
    _, first, inverse = np.unique(kept_groups, return_index=True, return_inverse=True)
    data = ProbeData(model, images[keep], labels[keep], features, classes, str(meta["kind"]), dropped,
                     int(len(usable) - len(merged)), groups=first[inverse].astype(np.int64),
                     all_duplicates=all_duplicates)
    data.prior_coef, data.language_note = _text_prior(run, model, meta, classes, array.shape[1])
    return data


def _refuse_non_finite(run: Run, model: str, images: np.ndarray, features: np.ndarray) -> None:
    bad = ~np.isfinite(features).all(axis=1)
    if not bad.any():
        return
    names = images[bad].tolist()
    shown = ", ".join(names[:NAMED]) + (", …" if len(names) > NAMED else "")
    raise ProbeInputError(
        f"{model} in run {run.run_id}: {len(names)} images have non-finite features (NaN or Inf): {shown}; "
        f"exclude them (Images page) or remove {feature_dir(run, model)} and store the features again with "
        f"{_fix(run, model)}.")


def _text_prior(run: Run, model: str, meta: dict, classes: list[str], dim: int) -> tuple[np.ndarray | None, str]:
    record = meta.get("text_classifier")
    if record is None:
        if meta["kind"] == "image-embedding":
            return None, (f"{model}: language-init not run: its features' meta.json records no text classifier "
                          "(text_classifier: path, wnids, logit_scale)")
        return None, ""
    try:
        path_value = record["path"]
        wnids = [str(w) for w in record["wnids"]]
        scale = float(record["logit_scale"])
    except (KeyError, TypeError, ValueError):
        raise ProbeInputError(f"{feature_dir(run, model) / 'meta.json'}: text_classifier needs path, wnids and "
                              f"logit_scale; store the features again with {_fix(run, model)}.") from None
    matrix = load_meta_array(run, model, path_value, "text_classifier.path")  # confined, a regular file, no pickle
    path = feature_dir(run, model) / str(path_value)
    if matrix.ndim != 2 or matrix.shape != (dim, len(wnids)):
        raise ProbeInputError(f"the text classifier of {model} ({path}) is {matrix.shape}, not [{dim}, {len(wnids)}]; "
                              f"store the features again with {_fix(run, model)}.")
    if not np.isfinite(matrix).all():
        raise ProbeInputError(f"the text classifier of {model} ({path}) holds NaN or Inf; store the features again "
                              f"with {_fix(run, model)}.")
    column = {w: i for i, w in enumerate(wnids)}
    missing = [c for c in classes if c not in column]
    if missing:
        return None, (f"{model}: language-init not run: its text classifier has no column for "
                      f"{len(missing)} of the run's classes ({', '.join(missing[:3])})")
    text = matrix[:, [column[c] for c in classes]].astype(np.float64).T
    text /= np.linalg.norm(text, axis=1, keepdims=True).clip(1e-12)
    return scale * text, ""
