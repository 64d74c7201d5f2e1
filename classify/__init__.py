"""classify/: which models exist, how images become their predictions, and where the rows go.

Sub-packages by concern (each ``__init__`` says what it owns):

- ``models/``: the registry (entries, sources, tables), the registered models, name lookup and
  the zoo, weights, one module per model source
- ``engine/``: the shared data types, option lists, device and precision policy, decode and
  crops, batch-norm folding, ONNX Runtime and int8, GPU JPEG decoding, the local pipeline, the
  Ray Data engine, and ``dispatch`` (the engine choice every caller uses)
- ``zeroshot/``: label sets, prompt recipes, the cached text classifier and the zero-shot head

At the top, what runs and where rows go:

- ``targets``: a run of the store (``predict_run``, ``extract_features``) or a plain folder
  (``predict_folder``, read by ``scan_folder`` without following links out of it); one classify
  run per parts folder (a lock), checked writable before any work
- ``sinks``: where rows go batch by batch (``PredictionSink``), ``OutputError``
- ``features``: frozen features: the tap the engine is given, the feature sink, throughput
- ``cli``: ``python -m classify`` (``__main__`` wires it to the next stage)

It imports ``core`` and nothing of the other stages, and no two of its modules import each other
(``tests/core/test_architecture.py``). Import the submodules; importing ``classify.models``
registers the catalogue (no torch, no timm), so listing the registry stays cheap.
"""
