"""The choices classify offers, in one light module (no torch import): the command line's
``--help`` and the Models page list them from here, and ``device``/``preprocess`` check against
them. Building the parser used to import torch for the resampler list (3 s instead of 0.3 s)."""
from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda", "mps")  # and 'cuda:N'
PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")
# Results of different precisions are different models to compare: rows computed in a precision
# other than the device's default carry the model id 'efficientnet_lite0--bf16' ('--int8',
# '--fp16', '--fp32'); the default keeps the plain id - fp32 on the CPU, bf16 (or fp16) autocast
# on a GPU, what each stored before precisions were told apart - so existing runs stay valid and
# resume as before. Why '--': a model id names a folder of part files (core.parts: letters, digits,
# '_', '.', '-'), '.' is timm's arch.tag separator (classify.models.zoo parses it), and no timm,
# torchvision or Hugging Face Hub name contains '--' (the Hub forbids it), so the suffix is never
# part of a model's own name.
PRECISION_SEPARATOR = "--"
# int8 is a cascade (classify.engine.quantize.Int8Cascade): int8 on every image, fp32 again on those
# whose int8 top-1 margin is at or below a gate chosen on the calibration set. '--int8-recheck none'
# gives int8 alone, stored as 'MODEL--int8-plain': another model to compare, never mixed on resume
# with the cascade's rows (rows stored as '--int8' before the cascade existed are int8 alone, and
# their int8_rechecked column reads NA: 'not recorded').
INT8_RECHECK = ("auto", "none")  # auto: the gate from the calibration set; none: int8 alone
PLAIN_INT8 = "int8-plain"
SUFFIXED_PRECISIONS = ("fp32", "bf16", "fp16", "int8", PLAIN_INT8)  # the suffixes a stored model id can carry


def stored_precision(precision: str, int8_recheck: str = "auto") -> str:
    """The precision a stored model id carries: ``precision`` (resolved), except int8 alone
    (``int8_recheck='none'``), which is :data:`PLAIN_INT8`."""
    if int8_recheck not in INT8_RECHECK:
        from core.errors import OptionError

        raise OptionError(f"--int8-recheck {int8_recheck!r}: choose one of {', '.join(INT8_RECHECK)}.")
    return PLAIN_INT8 if precision == "int8" and int8_recheck == "none" else precision


def precision_model_id(model_id: str, precision: str, default: str = "fp32") -> str:
    """The id results of ``model_id`` computed in ``precision`` are stored under, where the
    device's default precision (which keeps the plain id) is ``default``."""
    base, _ = split_model_id(model_id)
    return base if precision == default else f"{base}{PRECISION_SEPARATOR}{precision}"


def split_model_id(model_id: str) -> tuple[str, str | None]:
    """'efficientnet_lite0--int8' -> ('efficientnet_lite0', 'int8'); a plain id -> (id, None):
    the device's default precision. The registry knows the base id
    (``classify.models.lookup.get_model(base)``): pages and explain/ look a stored id's family and name
    up through this."""
    base, sep, precision = model_id.rpartition(PRECISION_SEPARATOR)
    if sep and base and precision in SUFFIXED_PRECISIONS:
        return base, precision
    return model_id, None


BACKENDS = ("auto", "torch", "onnxruntime")
RESAMPLERS = ("torch", "pil")  # the choices the command line and the Models page offer
DEFAULT_RESAMPLER = "torch"

# 'local': this process. 'ray': Ray Data actors (classify.engine.ray_engine), on a local Ray instance or
# the cluster --ray-address / RAY_ADDRESS names; ray is optional (pip install 'wildlens[ray]').
ENGINES = ("local", "ray")


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        from core.errors import OptionError

        raise OptionError(f"engine {engine!r}: choose one of {', '.join(ENGINES)}.")
    return engine

# JPEG decoding on the device (classify.engine.gpu_decode): 'auto' = on a CUDA device where torchvision's
# nvJPEG decode works (probed once), with the CPU path for other formats and as the fallback; 'off'.
GPU_DECODE = ("auto", "off")
