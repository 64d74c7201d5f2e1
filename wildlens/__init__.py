"""wildlens: the application layer above the stages.

``wildlens`` (the console command, :mod:`wildlens.cli`) runs ``crawl``, ``classify``, ``explain``
and the dashboard (``app``); :mod:`wildlens.sample` builds the embedded sample run; the
dashboard starts through :mod:`pages.launcher`. Like ``app.py`` and ``pages/``, this package may import
every stage; the stages (``crawl``, ``classify``, ``explain``) import only ``core``.
"""
__version__ = "0.3.0"
