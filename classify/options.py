"""The choices classify offers, in one light module (no torch import): the command line's
``--help`` and the Models page list them from here, and ``device``/``preprocess`` check against
them. Building the parser used to import torch for the resampler list (3 s instead of 0.3 s)."""
from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda", "mps")  # and 'cuda:N'
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
BACKENDS = ("auto", "torch", "onnxruntime")
RESAMPLERS = ("torch", "pil")  # the choices the command line and the Models page offer
DEFAULT_RESAMPLER = "torch"
