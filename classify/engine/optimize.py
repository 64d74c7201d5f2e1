"""Inference-only speed-ups that must not change a single prediction.

Two rewrites live here: batch-norm folding (below) and static 'SAME' padding
(:func:`static_same_padding`), which ONNX export needs (``classify.engine.onnx_backend``).

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
import torch.nn.functional as F
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


# --------------------------------------------------------------------------- static 'SAME' padding
class StaticPadConv2d(nn.Conv2d):
    """A TensorFlow 'SAME' convolution for one input size: the zero padding is a fixed tuple.

    timm's ``Conv2dSame`` computes its (possibly asymmetric) padding from the input shape on every
    call; traced for ONNX that becomes Shape/Ceil/Sub/... nodes and a Pad whose amounts are only
    known at run time, which stops ONNX Runtime from folding the Pad into the Conv (and breaks
    its blocked-layout chain: on EfficientNet-Lite0 a quarter of the run time went to re-ordering
    around 5 such Pads). With the amounts fixed the graph is Conv after Conv. The arithmetic is
    timm's own (``pad_same_arg``), so the output is identical for the recorded input size; any
    other size is refused rather than padded wrongly."""

    static_pad: tuple[int, int, int, int]
    input_size: tuple[int, int]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_tracing() and tuple(x.shape[-2:]) != self.input_size:
            raise ValueError(f"this convolution was fixed for {self.input_size} inputs, got {tuple(x.shape[-2:])}")
        return F.conv2d(F.pad(x, self.static_pad), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


def static_same_padding(model: nn.Module, size: int) -> int:
    """Fix the padding of every timm ``Conv2dSame`` in ``model`` (in place) for ``size`` x ``size``
    inputs; returns how many were fixed. The input size each one sees is recorded on a probe pass."""
    from timm.layers.conv2d_same import Conv2dSame
    from timm.layers.padding import pad_same_arg

    seen: dict[str, tuple[int, int]] = {}
    hooks = [module.register_forward_pre_hook(lambda _m, args, name=name: seen.__setitem__(name, tuple(args[0].shape[-2:])))
             for name, module in model.named_modules() if type(module) is Conv2dSame]
    if not hooks:
        return 0
    try:
        with torch.inference_mode():
            model(torch.zeros(1, 3, size, size))
    finally:
        for hook in hooks:
            hook.remove()
    for name, input_size in seen.items():
        conv = model.get_submodule(name)
        pad = pad_same_arg(list(input_size), list(conv.weight.shape[-2:]), list(conv.stride), list(conv.dilation))
        conv.__class__ = StaticPadConv2d  # same parameters and buffers; only forward changes
        conv.static_pad = tuple(int(v) for v in pad)
        conv.input_size = input_size
    return len(seen)
