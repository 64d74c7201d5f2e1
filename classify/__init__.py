"""classify/: the model registry and batched inference.

``registry`` (which models exist, as data), ``weights`` (where their weights are; loading them
safely), ``preprocess`` (image -> input), ``optimize`` (exact inference speed-ups),
``onnx_backend`` (ONNX Runtime on the CPU, exports cached and checked against PyTorch),
``inference`` (batched, resumable runs into the run store), ``sample`` (the offline sample run)
and ``cli`` (``python -m classify``). Import the submodules; this package imports nothing heavy,
so that listing the registry stays cheap.
"""
