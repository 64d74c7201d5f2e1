"""Zero-shot classification: the text classifier of an open_clip model over a label set, cached.

ELEVATER's language-augmented evaluation: each class of the label set (a wnid) becomes prompts
(``classify.zeroshot.prompts.class_prompts``: class names, knowledge and templates of a
:class:`~classify.zeroshot.prompts.Recipe`), the text tower embeds them, and the prompt ensemble is built
exactly as open_clip builds it (``open_clip.zero_shot_classifier.build_zero_shot_classifier``):
each prompt embedding L2-normalised, averaged per class, the mean renormalised. The result is a
float32 ``[embedding dim, classes]`` matrix whose column i is the i-th wnid of the label set, in
the order ``core.labels.get_label_space(name).wnids`` gives (the order the pipeline reads outputs
in, ``classify.models.registry.class_wnids``).

* Bounded memory: classes are taken ``chunk_classes`` at a time (their prompts generated, tokenised
  and encoded ``batch_prompts`` at a time), so an ImageNet-21k set (21,843 classes x 80 templates,
  1.7 M prompts) never holds more than one chunk's prompts and tokens; only the result is whole
  (21,843 x 512 x 4 bytes = 45 MB for ViT-B/32). Progress goes through ``core.progress``
  (stage ``text classifier``, one unit per class).
* Cache: ``$WILDLENS_HOME/cache/zeroshot/<model>-<digest>.npy`` (plain ``.npy``, read with
  ``allow_pickle=False``), written atomically. The digest (:class:`ClassifierKey`) covers the
  model (architecture and tag), the sha256 of its weights file (a ``--checkpoint`` or the cached
  download), the label set's name and its wnids in order, the recipe tag, the sha256 of every
  prompt in order (so a changed knowledge file or template list is a new file), the embedding
  width, and the open_clip version. A different recipe or label set is a different file.
* :class:`ZeroShotHead` is what the pipeline runs: the image tower, the classifier as a buffer,
  and the logit scale (and bias); ``forward(images)`` returns ``scale * normalise(image) @ W (+ bias)``,
  logits over the label set, so softmax, top-5 and the prediction rows are a classifier's.

How the build is reported and on which device it runs is set around the inference call with
:func:`build_settings` (the command line passes its progress bar and device); without it the
build is silent, on the CPU.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import io
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from core.progress import ProgressCallback, report


CACHE_SUBDIR = "zeroshot"
CACHE_FORMAT = 1
STAGE = "text classifier"
CHUNK_CLASSES = 256  # classes whose prompts are held at once
BATCH_PROMPTS = 256  # prompts through the text tower at once


@dataclass(frozen=True)
class _Settings:
    progress: ProgressCallback | None = None
    device: str | torch.device = "cpu"
    cache_dir: Path | None = None
    chunk_classes: int = CHUNK_CLASSES
    batch_prompts: int = BATCH_PROMPTS


_SETTINGS: contextvars.ContextVar[_Settings] = contextvars.ContextVar("wildlens_zeroshot", default=_Settings())


@contextlib.contextmanager
def build_settings(progress: ProgressCallback | None = None, device: str | torch.device | None = None,
                   cache_dir: str | Path | None = None, chunk_classes: int | None = None,
                   batch_prompts: int | None = None) -> Iterator[None]:
    """Within the block, text classifiers are built on ``device`` with progress to ``progress``
    and cached in ``cache_dir`` (default ``$WILDLENS_HOME/cache/zeroshot``)."""
    current = _SETTINGS.get()
    token = _SETTINGS.set(_Settings(progress if progress is not None else current.progress,
                                    device if device is not None else current.device,
                                    Path(cache_dir) if cache_dir is not None else current.cache_dir,
                                    chunk_classes or current.chunk_classes, batch_prompts or current.batch_prompts))
    try:
        yield
    finally:
        _SETTINGS.reset(token)


def current_settings() -> _Settings:
    """Where and with what progress a text classifier is built now (:func:`build_settings`)."""
    return _SETTINGS.get()


def default_cache_dir() -> Path:
    from core.runstore import RunStore

    return RunStore().cache_dir / CACHE_SUBDIR


# --------------------------------------------------------------------------- building
def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    size = size or len(items) or 1
    for start in range(0, len(items), size):
        yield items[start:start + size]


# --------------------------------------------------------------------------- the text context
# Why a prompt's context can be cut: a CLIP text tower with a causal attention mask, pooled at the
# end-of-text token, computes that token's output from the positions up to it and never from the
# padding after it (the mask's -inf gives those positions a weight of exactly 0). So a batch run
# with the context cut after its longest prompt gives the same embeddings as the full 77 tokens, to
# float rounding (the matrix shapes change the order of the sums: 1e-7 measured on ViT-B-32), at a
# fraction of the work: ImageNet prompts are 8-14 tokens, and attention is quadratic in the
# context (ViT-B-32 on 2 cores: 10 prompts/s at 77 tokens, 98-115 cut; bench_zeroshot.py).
# Prompts are sorted by length into batches so that few pad far. Where the rule does not hold
# (a tower that attends both ways, pools another position, appends a class token, masks padding,
# or is not open_clip's own transformer), the full context is kept and the reason is reported.
CUT_REASON = "causal text tower pooled at its end-of-text token: context cut after each batch's longest prompt"


def text_context_rule(model) -> tuple[object | None, str]:
    """(the text tower whose context may be cut, why) or (None, why the full context is kept)."""
    tower = getattr(model, "text", None)  # CustomTextCLIP: a TextTransformer (or a Hugging Face tower)
    if tower is None or not hasattr(tower, "token_embedding"):
        tower = model if hasattr(model, "token_embedding") else None  # CLIP keeps the tower's parts on itself
    if tower is None or not all(hasattr(tower, a) for a in ("positional_embedding", "transformer", "ln_final")):
        return None, "full context: the text tower is not open_clip's own transformer"
    mask = getattr(tower, "attn_mask", None)
    if mask is None or mask.dim() != 2:
        return None, "full context: the text tower attends both ways (no causal mask), so every position counts"
    causal = torch.ones(mask.shape, dtype=torch.bool, device=mask.device).triu(1)
    if not (torch.equal(torch.isneginf(mask), causal) and bool((mask[~causal] == 0).all())):
        return None, "full context: the text tower's attention mask is not the causal mask"
    if getattr(tower, "cls_emb", None) is not None or getattr(tower, "use_pad_mask", False):
        return None, "full context: the text tower appends a class token or masks padding"
    pool = getattr(tower, "text_pool_type", getattr(tower, "pool_type", None))
    if pool not in ("argmax", "eos"):
        return None, f"full context: the text tower pools the {pool!r} position, not the end-of-text token"
    if pool == "eos" and getattr(tower, "text_eos_id", getattr(tower, "eos_id", None)) is None:
        return None, "full context: the text tower pools an end-of-text token it does not name"
    return tower, CUT_REASON


def _pool_index(tower, tokens: torch.Tensor) -> torch.Tensor:
    """The position each prompt is pooled at, as open_clip's ``text_global_pool`` picks it."""
    if getattr(tower, "text_pool_type", getattr(tower, "pool_type", None)) == "argmax":
        return tokens.argmax(dim=-1)
    eos = getattr(tower, "text_eos_id", getattr(tower, "eos_id", None))
    return (tokens == eos).int().argmax(dim=-1)


def encode_text_cut(tower, tokens: torch.Tensor) -> torch.Tensor:
    """open_clip's ``encode_text(tokens, normalize=True)`` (``CLIP.encode_text`` /
    ``TextTransformer.forward``) with the context cut after the batch's last pooled position."""
    index = _pool_index(tower, tokens)
    length = int(index.max()) + 1
    tokens = tokens[:, :length]
    cast = tower.transformer.get_cast_dtype()
    x = tower.token_embedding(tokens).to(cast) + tower.positional_embedding[:length].to(cast)
    x = tower.transformer(x, attn_mask=tower.attn_mask[:length, :length])
    x = tower.ln_final(x)
    x = x[torch.arange(x.shape[0], device=x.device), index]
    projection = tower.text_projection
    if projection is not None:
        x = projection(x) if isinstance(projection, torch.nn.Module) else x @ projection
    return F.normalize(x, dim=-1)


def encode_class_prompts(model, tokenizer, prompts: Sequence[Sequence[str]], *, batch_prompts: int = BATCH_PROMPTS,
                         device: str | torch.device = "cpu", cut_context: bool = True) -> torch.Tensor:
    """``[dim, len(prompts)]``: per class, its prompts' embeddings normalised, averaged and
    renormalised (open_clip's ensemble; classes may have different numbers of prompts). Where
    :func:`text_context_rule` allows (and ``cut_context``), prompts go through the tower sorted by
    length with the context cut per batch; otherwise in order at full context, as before."""
    flat = [p for class_prompts in prompts for p in class_prompts]
    owner = torch.repeat_interleave(torch.arange(len(prompts)), torch.tensor([len(p) for p in prompts]))
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every class needs at least one prompt")
    tower = text_context_rule(model)[0] if cut_context else None
    sums = None
    with torch.inference_mode():
        if tower is not None:
            tokens = tokenizer(list(flat))
            order = torch.argsort(_pool_index(tower, tokens), stable=True)
            batches = ((tokens[order[s:s + batch_prompts]], owner[order[s:s + batch_prompts]])
                       for s in range(0, len(flat), batch_prompts))
        else:
            batches = ((tokenizer(list(flat[s:s + batch_prompts])), owner[s:s + batch_prompts])
                       for s in range(0, len(flat), batch_prompts))
        for batch, owners in batches:
            batch = batch.to(device)
            emb = (encode_text_cut(tower, batch) if tower is not None else model.encode_text(batch, normalize=True))
            emb = emb.float()
            if sums is None:
                sums = torch.zeros(len(prompts), emb.shape[1], dtype=torch.float32, device=emb.device)
            sums.index_add_(0, owners.to(emb.device), emb)
        counts = torch.tensor([len(p) for p in prompts], dtype=torch.float32, device=sums.device)
        means = sums / counts[:, None]
        means = means / means.norm(dim=1, keepdim=True)
    return means.T.cpu()


def _prompt_chunks(wnids: Sequence[str], recipe, chunk_classes: int) -> Iterator[tuple[Sequence[str], list[list[str]]]]:
    """(classes, their prompts) a chunk at a time, equal to ``class_prompts(wnids, recipe)``.

    A class name depends on the whole label set (``classify.zeroshot.prompts.class_names`` makes shared
    names unique: 'crane (wading bird)'), so each chunk's prompts are made together with every
    class of the set that shares a name with one of the chunk's (a few), and the names are checked
    against the whole set's."""
    from collections import defaultdict

    from classify.zeroshot.prompts import class_names, class_prompts

    wnids = list(wnids)
    full = class_names(wnids, recipe.names)
    own = {w: class_names([w], recipe.names)[w].lower() for w in wnids}  # before any clash is resolved
    sharing: dict[str, list[str]] = defaultdict(list)
    for w in wnids:
        sharing[own[w]].append(w)
    for chunk in _chunks(wnids, chunk_classes):
        context = list(dict.fromkeys([*chunk, *(p for w in chunk for p in sharing[own[w]])]))
        names = class_names(context, recipe.names)
        if any(names[w] != full[w] for w in chunk):  # pragma: no cover - a names rule beyond shared names
            raise RuntimeError("class names of a chunk differ from the label set's; build with chunk_classes=None")
        by_wnid = class_prompts(context, recipe)
        yield chunk, [list(by_wnid[w]) for w in chunk]


def prompts_sha256(wnids: Sequence[str], recipe, chunk_classes: int = CHUNK_CLASSES) -> str:
    """sha256 over every class's prompts, in class order (generated a chunk at a time)."""
    digest = hashlib.sha256()
    for chunk, prompts in _prompt_chunks(wnids, recipe, chunk_classes):
        for wnid, class_prompts in zip(chunk, prompts):
            digest.update(json.dumps([wnid, class_prompts], ensure_ascii=False).encode("utf-8"))
            digest.update(b"\n")
    return digest.hexdigest()


def build_text_classifier(model, tokenizer, wnids: Sequence[str], recipe, *, chunk_classes: int = CHUNK_CLASSES,
                          batch_prompts: int = BATCH_PROMPTS, device: str | torch.device = "cpu",
                          progress: ProgressCallback | None = None, task: str = "",
                          cut_context: bool = True) -> np.ndarray:
    """float32 ``[dim, len(wnids)]``, column i for ``wnids[i]``, in bounded memory (module docstring).
    ``cut_context=False`` keeps the full context even where the rule allows the cut (benchmarks)."""
    out: np.ndarray | None = None
    done = 0
    rule = text_context_rule(model)[1] if cut_context else "full context, as asked"
    report(progress, STAGE, 0, len(wnids), task=task, message=f"encoding prompts ({rule})")
    for chunk, prompts in _prompt_chunks(wnids, recipe, chunk_classes):
        weights = encode_class_prompts(model, tokenizer, prompts, batch_prompts=batch_prompts, device=device,
                                       cut_context=cut_context)
        if out is None:
            out = np.empty((weights.shape[0], len(wnids)), dtype=np.float32)
        out[:, done:done + len(chunk)] = weights.numpy()
        done += len(chunk)
        report(progress, STAGE, done, len(wnids), task=task, message=f"{done}/{len(wnids)} classes")
    if out is None:
        raise ValueError("a label set needs at least one class")
    return out


# --------------------------------------------------------------------------- the cache
@dataclass(frozen=True)
class ClassifierKey:
    """Everything a text classifier depends on; its digest names the cached file."""

    model: str  # open_clip 'arch.tag' (or 'arch' with a checkpoint)
    weights_sha256: str
    label_set: str
    wnids_sha256: str
    recipe: str  # Recipe.tag() ('' for the default)
    prompts_sha256: str
    embed_dim: int
    open_clip: str
    format: int = CACHE_FORMAT

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    @property
    def stem(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.model).strip("._")[:60] or "model"
        return f"{safe}-{self.digest[:24]}"


def wnids_sha256(wnids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(wnids).encode("ascii")).hexdigest()


def cache_path(key: ClassifierKey, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / f"{key.stem}.npy"


def read_cached(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    """The cached matrix, or None when absent or not what the key promises (rebuilt then)."""
    if not path.is_file():
        return None
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if array.dtype != np.float32 or array.shape != shape:
        return None
    return array


def write_cached(path: Path, array: np.ndarray) -> None:
    from core.runstore import write_bytes_atomic

    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array, dtype=np.float32), allow_pickle=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, buffer.getvalue())


def cached_text_classifier(model, tokenizer, key_model: str, weights_sha256: str, label_set: str,
                           wnids: Sequence[str], recipe, *, cache_dir: Path | None = None,
                           chunk_classes: int = CHUNK_CLASSES, batch_prompts: int = BATCH_PROMPTS,
                           device: str | torch.device = "cpu", progress: ProgressCallback | None = None,
                           task: str = "") -> tuple[np.ndarray, Path]:
    """The text classifier from the cache, else built (:func:`build_text_classifier`) and cached."""
    import open_clip

    embed_dim = _embed_dim(model, tokenizer, device)
    key = ClassifierKey(key_model, weights_sha256, label_set, wnids_sha256(wnids), recipe.tag(),
                        prompts_sha256(wnids, recipe, chunk_classes), embed_dim, open_clip.__version__)
    path = cache_path(key, cache_dir)
    cached = read_cached(path, (embed_dim, len(wnids)))
    if cached is not None:
        report(progress, STAGE, len(wnids), len(wnids), task=task, message="cached")
        return cached, path
    array = build_text_classifier(model, tokenizer, wnids, recipe, chunk_classes=chunk_classes,
                                  batch_prompts=batch_prompts, device=device, progress=progress, task=task)
    if array.shape[0] != embed_dim:  # pragma: no cover - guarded by _embed_dim
        raise ValueError(f"text embeddings have {array.shape[0]} dimensions, expected {embed_dim}")
    write_cached(path, array)
    return array, path


def _embed_dim(model, tokenizer, device) -> int:
    with torch.inference_mode():
        return int(model.encode_text(tokenizer(["a"]).to(device)).shape[-1])


# --------------------------------------------------------------------------- the module the pipeline runs
class ZeroShotHead(torch.nn.Module):
    """Image tower + text classifier: ``forward(images) -> [n, classes]`` logits over the label set."""

    def __init__(self, image_encoder: torch.nn.Module, classifier: np.ndarray | torch.Tensor,
                 logit_scale: float | torch.Tensor, logit_bias: float | torch.Tensor | None = None):
        super().__init__()
        self.image_encoder = image_encoder
        self.register_buffer("classifier", torch.as_tensor(np.asarray(classifier), dtype=torch.float32).clone())
        self.register_buffer("logit_scale", torch.as_tensor(logit_scale, dtype=torch.float32).detach().clone().reshape(()))
        bias = None if logit_bias is None else torch.as_tensor(logit_bias, dtype=torch.float32).detach().clone().reshape(())
        self.register_buffer("logit_bias", bias)

    def logit_bound(self, features: torch.Tensor, other: torch.Tensor) -> float:
        """The largest difference that image features ``other`` instead of ``features`` can make to
        a logit over any label set: logit_scale x the largest distance between the normalised rows
        (every classifier column has norm 1, so by Cauchy-Schwarz no logit moves further; the bias
        cancels). ``classify.engine.onnx_backend.onnx_part`` checks an exported image tower with it."""
        a, b = F.normalize(features.float(), dim=-1), F.normalize(other.float(), dim=-1)
        return float(self.logit_scale) * float((a - b).norm(dim=-1).max())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.image_encoder(images)
        if isinstance(features, (tuple, list)):  # CoCa-style towers return (pooled, tokens)
            features = features[0]
        features = F.normalize(features.float(), dim=-1)
        logits = self.logit_scale * (features @ self.classifier)
        return logits if self.logit_bias is None else logits + self.logit_bias


