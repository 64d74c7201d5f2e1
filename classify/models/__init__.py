"""classify/models/: which models exist and how each is named, built and given its weights.

The table and the source protocol (``registry``), the registered models (``catalog``), any name
to an entry (``lookup``, ``zoo``), weights files and loading (``weights``) and the sources (``sources/``).
"""
from classify.models import catalog  # noqa: F401  (fills the registry's table, as timm's models/__init__ does)
