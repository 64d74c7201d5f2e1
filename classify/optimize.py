"""Inference-only speed-ups that must not change a single prediction.

Folding batch-norm into the convolution before it removes one pass over every activation map;
on a small CPU, where depthwise networks such as EfficientNet-Lite are memory-bound, it makes
EfficientNet-Lite0 about a quarter faster (benchmarks/bench_inference.py). In eval mode BN is
the per-channel affine map y = gamma (x - mu) / sqrt(var + eps) + beta, so
conv(x) followed by BN equals a conv with weights scaled by s = gamma / sqrt(var + eps) and bias
(b - mu) s + beta.

Which BN follows which conv is read from module registration order, which is the data-flow order
in EfficientNet, MobileNet, ResNet, RegNet, ... but not in pre-activation designs (DenseNet puts
BN *before* its convs). So the folded copy is checked on a probe input against the original and
used only if the outputs agree; otherwise the original model is kept. Wrong folding can cost
speed, never correctness.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

# Relative tolerance of the probe check: float32 re-association noise is ~1e-6 of the logits.
PROBE_TOLERANCE = 1e-4


def _fold_pairs(model: nn.Module) -> int:
    """Fold every BatchNorm2d into the Conv2d registered just before it (same channel count).
    The BN module is replaced by what it applies after normalising (timm's BatchNormAct2d keeps a
    dropout and an activation), or by Identity. Returns the number of folded pairs."""
    folded = 0
    last_conv: nn.Conv2d | None = None
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Conv2d):
            last_conv = module
            continue
        if not isinstance(module, nn.BatchNorm2d):
            continue
        conv, last_conv = last_conv, None
        if conv is None or conv.out_channels != module.num_features or module.running_var is None:
            continue
        with torch.no_grad():
            scale = (module.weight if module.affine else torch.ones_like(module.running_var)) / torch.sqrt(
                module.running_var + module.eps)
            shift = module.bias if module.affine else torch.zeros_like(module.running_mean)
            bias = conv.bias if conv.bias is not None else torch.zeros_like(module.running_mean)
            conv.weight.mul_(scale.view(-1, 1, 1, 1))
            conv.bias = nn.Parameter((bias - module.running_mean) * scale + shift)
        after = [m for m in (getattr(module, "drop", None), getattr(module, "act", None)) if isinstance(m, nn.Module)]
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, nn.Sequential(*after) if after else nn.Identity())
        folded += 1
    return folded


def fold_batchnorm(model: nn.Module, probe: torch.Tensor) -> tuple[nn.Module, int]:
    """A copy of ``model`` (eval mode) with batch-norm folded into convolutions, if that copy
    gives the same outputs on ``probe``; else ``model`` itself. Returns (model, pairs folded)."""
    if not any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        return model, 0
    folded = copy.deepcopy(model).eval()
    pairs = _fold_pairs(folded)
    if pairs == 0:
        return model, 0
    with torch.inference_mode():
        expected = model.eval()(probe)
        got = folded(probe)
    scale = expected.abs().max().clamp_min(1.0)
    if got.shape != expected.shape or not bool(((got - expected).abs().max() / scale) <= PROBE_TOLERANCE):
        return model, 0
    return folded, pairs
