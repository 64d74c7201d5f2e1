"""core/: the ground floor every stage stands on. It imports no stage.

- ``runstore``: where a run's artefacts live (layout, atomic files, schema versions), the
  manifest and prediction schemas every stage reads and writes, fingerprints of both
- ``parts``: prediction part files in any folder (a run's, or beside a plain folder's output)
- ``locking``: one writer per folder
- ``csvsafe``: the one serialisation of every CSV WildLens writes (formula-like text cells get a
  quote in front) and the reading that gives them back
- ``wordnet``: WordNet 3.0 through NLTK, offline (vendored corpus under ``core/data``)
- ``labels``: ImageNet label spaces, senses of a query, hyponym classes
- ``imageio``: any web image -> RGB, without touching the stored file
- ``progress``: progress events that know nothing of tqdm or Streamlit
- ``errors``: :class:`~core.errors.WildLensError`, the one user-facing error base

Import the submodules; this package imports nothing heavy.
"""
