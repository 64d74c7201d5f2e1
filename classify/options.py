"""The choices classify offers, in one light module (no torch import): the command line's
``--help`` and the Models page list them from here, and ``device``/``preprocess`` check against
them. Building the parser used to import torch for the resampler list (3 s instead of 0.3 s)."""
from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda", "mps")  # and 'cuda:N'
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
# Results of different precisions are different models to compare: rows computed in a precision
# other than fp32 carry the model id 'efficientnet_lite0--bf16' ('--int8', '--fp16'); fp32 keeps the
# plain id, so runs stored before precisions were told apart stay what they were. Why '--': a
# model id names a folder of part files (core.parts: letters, digits, '_', '.', '-'), '.' is
# timm's arch.tag separator (classify.zoo parses it), and no timm, torchvision or Hugging Face
# Hub name contains '--' (the Hub forbids it), so the suffix is never part of a model's own name.
PRECISION_SEPARATOR = "--"
REDUCED_PRECISIONS = ("bf16", "fp16", "int8")  # the suffixes a stored model id can carry


def precision_model_id(model_id: str, precision: str) -> str:
    """The id results of ``model_id`` computed in ``precision`` are stored under."""
    base, _ = split_model_id(model_id)
    return base if precision == "fp32" else f"{base}{PRECISION_SEPARATOR}{precision}"


def split_model_id(model_id: str) -> tuple[str, str]:
    """'efficientnet_lite0--int8' -> ('efficientnet_lite0', 'int8'); a plain id -> (id, 'fp32').
    The registry knows the base id (``classify.registry.get_model(base)``): pages and explain/
    look a stored id's family and name up through this."""
    base, sep, precision = model_id.rpartition(PRECISION_SEPARATOR)
    if sep and base and precision in REDUCED_PRECISIONS:
        return base, precision
    return model_id, "fp32"
BACKENDS = ("auto", "torch", "onnxruntime")
RESAMPLERS = ("torch", "pil")  # the choices the command line and the Models page offer
DEFAULT_RESAMPLER = "torch"
