"""What a probe reads from a run: stored features of the usable images, their classes, and (for a
zero-shot model) the text classifier the language-initialised head starts from.

* Features: ``core.features.read_features`` (``features/<model>/``, written by
  ``python -m classify --run RUN_ID --models M --features``). Only the run's **usable** images are
  kept (``core.runstore.Run.usable_images``: accepted, not excluded); an image an analyst excluded
  after its features were stored is left out. The label is the manifest's ``wnid``.
* Classes: the run's classes that have at least two usable images with features (one to train
  on, one to test on); the others are listed in :attr:`ProbeData.dropped` and printed.
* The text classifier (language-initialised variant and N = 0) is read only when the model's
  ``features/<model>/meta.json`` records it, as::

      "text_classifier": {"path": "<.npy, absolute or relative to features/<model>/>",
                          "wnids": ["n…", …],      # its columns, in order
                          "logit_scale": 100.0}

  a float32 ``[dim, len(wnids)]`` matrix of L2-normalised class text embeddings (what
  ``classify.zeroshot`` caches). Without that record the model gets the plain probe only and
  :attr:`ProbeData.language_note` says why; nothing is guessed from the zero-shot cache folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import WildLensError
from core.features import feature_dir, read_feature_meta, read_features
from core.runstore import Run

MIN_IMAGES = 2  # one to train on, one to test on


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

    def subset(self, mask: np.ndarray) -> "ProbeData":
        return ProbeData(self.model, self.images[mask], self.labels[mask], self.features[mask], self.classes,
                         self.kind, self.dropped, self.without_features, self.prior_coef, self.language_note)


def _fix(run: Run, model: str) -> str:
    return f"python -m classify --run {run.run_id} --models {model} --features"


def load_probe_data(run: Run, model: str) -> ProbeData:
    meta = read_feature_meta(run, model)
    if meta is None:
        raise ProbeInputError(f"run {run.run_id} has no stored features of {model}; store them with {_fix(run, model)}.")
    index, array = read_features(run, model)
    usable = run.usable_images()
    usable = usable[usable["file"].notna()][["file", "wnid"]]
    wanted = set(run.info.wnids or usable["wnid"].dropna().unique())
    usable = usable[usable["wnid"].isin(wanted)]
    merged = index.reset_index(names="row").merge(usable, left_on="image", right_on="file", how="inner")
    merged = merged.sort_values("image", kind="stable")
    if merged.empty:
        raise ProbeInputError(f"none of run {run.run_id}'s usable images has stored features of {model}; "
                              f"store them with {_fix(run, model)}.")
    rows = merged["row"].to_numpy(dtype=np.int64)
    images = merged["image"].astype(str).to_numpy()
    labels = merged["wnid"].astype(str).to_numpy()
    counts = merged["wnid"].astype(str).value_counts()
    classes = sorted(c for c, n in counts.items() if n >= MIN_IMAGES)
    dropped = {c: int(n) for c, n in sorted(counts.items()) if n < MIN_IMAGES}
    dropped.update({c: 0 for c in sorted(wanted - set(counts.index))})
    if len(classes) < 2:
        raise ProbeInputError(f"{model} in run {run.run_id}: a probe needs two classes with at least {MIN_IMAGES} "
                              f"usable images with features; {len(classes)} have them.")
    keep = np.isin(labels, classes)
    data = ProbeData(model, images[keep], labels[keep], np.ascontiguousarray(array[rows[keep]]), classes,
                     str(meta["kind"]), dropped, int(len(usable) - len(merged)))
    data.prior_coef, data.language_note = _text_prior(run, model, meta, classes, array.shape[1])
    return data


def _text_prior(run: Run, model: str, meta: dict, classes: list[str], dim: int) -> tuple[np.ndarray | None, str]:
    record = meta.get("text_classifier")
    if record is None:
        if meta["kind"] == "image-embedding":
            return None, (f"{model}: language-init not run: its features' meta.json records no text classifier "
                          "(text_classifier: path, wnids, logit_scale)")
        return None, ""
    try:
        path = Path(record["path"])
        wnids = [str(w) for w in record["wnids"]]
        scale = float(record["logit_scale"])
    except (KeyError, TypeError, ValueError):
        raise ProbeInputError(f"{feature_dir(run, model) / 'meta.json'}: text_classifier needs path, wnids and "
                              f"logit_scale; store the features again with {_fix(run, model)}.") from None
    if not path.is_absolute():
        path = feature_dir(run, model) / path
    try:
        matrix = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ProbeInputError(f"the text classifier of {model} ({path}) cannot be read ({exc}); store the features "
                              f"again with {_fix(run, model)}.") from None
    if matrix.ndim != 2 or matrix.shape != (dim, len(wnids)):
        raise ProbeInputError(f"the text classifier of {model} ({path}) is {matrix.shape}, not [{dim}, {len(wnids)}]; "
                              f"store the features again with {_fix(run, model)}.")
    column = {w: i for i, w in enumerate(wnids)}
    missing = [c for c in classes if c not in column]
    if missing:
        return None, (f"{model}: language-init not run: its text classifier has no column for "
                      f"{len(missing)} of the run's classes ({', '.join(missing[:3])})")
    text = matrix[:, [column[c] for c in classes]].astype(np.float64).T
    text /= np.linalg.norm(text, axis=1, keepdims=True).clip(1e-12)
    return scale * text, ""
