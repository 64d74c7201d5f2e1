"""Synthetic runs with stored features for the probe tests: a run folder, a manifest of accepted
images (files need not exist: a probe reads features only) and features written through
``core.features.write_feature_part``, J1's artefact API."""
from __future__ import annotations

import numpy as np
import pandas as pd

from core.features import write_feature_part
from core.runstore import RunInfo, RunStore

WNIDS = ("n02123045", "n02123159", "n02123394", "n02123597", "n02124075", "n02125311", "n02127052",
         "n07920052", "n03773504", "n04591713")


def blobs(n_per_class, n_classes: int = 4, dim: int = 16, spread: float = 0.35, seed: int = 0):
    """Gaussian clusters around random unit centres: (features float32, labels as wnids)."""
    rng = np.random.default_rng(seed)
    counts = [n_per_class] * n_classes if np.isscalar(n_per_class) else list(n_per_class)
    centres = rng.normal(size=(len(counts), dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = np.repeat(np.array(WNIDS[:len(counts)]), counts)
    codes = np.repeat(np.arange(len(counts)), counts)
    x = centres[codes] + spread * rng.normal(size=(len(codes), dim)) / np.sqrt(dim)
    return x.astype(np.float32), labels


def make_run(features: np.ndarray, labels, run_id: str = "synth", model: str = "synthnet", *,
             excluded: set[int] = frozenset(), kind: str = "pre-logit", parts: int = 1, phashes=None):
    """A run whose usable images are ``labels`` (row i -> image '<wnid>/img-<i>.png'), with
    ``features`` stored for ``model``; rows in ``excluded`` are marked excluded in the manifest.
    ``phashes`` (16 hex digits per row, or None) fills the manifest's pHash column."""
    labels = np.asarray(labels)
    store = RunStore()
    run = store.create_run(RunInfo(run_id=run_id, wnids=sorted(set(labels.tolist())), source="import"))
    files = [f"{w}/img-{i:04d}.png" for i, w in enumerate(labels)]
    manifest = pd.DataFrame({"wnid": labels, "file": files, "status": "accepted", "source": "import",
                             "excluded": [i in excluded for i in range(len(files))]})
    if phashes is not None:
        manifest["phash"] = list(phashes)
    run.write_manifest(manifest)
    index = pd.DataFrame({"image": files, "true_wnid": labels})
    # shuffled and split in parts: the probe must not depend on the order features were stored in
    order = np.random.default_rng(1).permutation(len(files))
    for chunk in np.array_split(order, parts):
        write_feature_part(run, model, index.iloc[chunk].reset_index(drop=True), features[chunk], kind=kind)
    return run, files


def twin_phashes(groups, seed: int = 3, flip: int = 8) -> list[str]:
    """A pHash per row such that rows with the same ``groups`` value are near duplicates (each
    later member ``flip`` bits from the group's first) and different groups are far apart (random
    64-bit values: about 32 bits apart)."""
    rng = np.random.default_rng(seed)
    base: dict = {}
    out = []
    for g in groups:
        if g not in base:
            base[g] = int(rng.integers(0, 2 ** 63)) | (int(rng.integers(0, 2)) << 63)
            out.append(f"{base[g]:016x}")
        else:
            bits = rng.choice(64, size=flip, replace=False)
            value = base[g]
            for b in bits:
                value ^= 1 << int(b)
            out.append(f"{value:016x}")
    return out
