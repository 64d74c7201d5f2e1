"""Test doubles: small randomly initialised timm models, for tests and throughput benchmarks only.

Registered from here, never from library code, as a model source of their own
(:class:`RandomInitSource`, ``ModelEntry.source == 'test-double'``) whose flags keep their output
from passing for a real model's: ``records_results = False`` (never registered, never added to a
run's ``models``) and ``weights_file = False`` (nothing for an ONNX export to be keyed on). Their
ids start with ``test-double-`` and their names say 'random init'.

    from tests.classify.doubles import make_test_double
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from classify.models.registry import InputConfig, ModelEntry
from classify.models.weights import build_untrained, count_parameters
from classify.models.registry import register_source
from classify.models.sources.timm_source import TimmSource, timm_input_config
from classify.models.registry import WeightsStatus
from core.labels import canonical_label_space, get_label_space

TEST_DOUBLE_SOURCE = "test-double"
TEST_DOUBLE_PREFIX = "test-double-"


@register_source
class RandomInitSource(TimmSource):
    """A timm architecture with random weights: what a test double runs (a checkpoint, if one is
    given, loads as for any timm model)."""

    name = TEST_DOUBLE_SOURCE
    description = "test double (random weights)"
    weights_file = False
    records_results = False

    def model_name(self, entry: ModelEntry) -> str:
        return entry.arch

    def input_config(self, entry: ModelEntry) -> InputConfig:
        """The input of the architecture's first pretrained tag, as if it had real weights."""
        import timm

        tags = timm.list_pretrained(f"{entry.arch}.*")
        return timm_input_config(tags[0] if tags else entry.arch)

    def fetch_command(self, entry: ModelEntry) -> str:
        return "(none: a test double has no weights)"

    def locate(self, entry: ModelEntry) -> WeightsStatus:
        return WeightsStatus(entry.id, True, "random-init", None, (), self.fetch_command(entry))

    def load(self, entry: ModelEntry, path: Path | None):
        if path is None:  # no weights anywhere: the random ones, the same at every load (seeded by the id)
            # Why seeded: unseeded, a double's answers followed the global RNG, so whatever ran before in
            # the test process chose them; test_metrics' unseen-class test failed in one order (Lin 0).
            import zlib

            import torch

            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(zlib.crc32(entry.id.encode()))
                return build_untrained(entry)
        return super().load(entry, path)


def is_test_double(entry: ModelEntry) -> bool:
    return entry.source == TEST_DOUBLE_SOURCE


def make_test_double(arch: str, label_space: str = "imagenet-1k", family: str = "CNN",
                     input_config: InputConfig | None = None) -> ModelEntry:
    """An unregistered, randomly initialised timm model for tests and throughput benchmarks
    (``input_config``: borrow a real entry's input pipeline). Its id says what it is, so its
    output can never pass for a real model's."""
    space = canonical_label_space(label_space)
    entry = ModelEntry(id=f"{TEST_DOUBLE_PREFIX}{arch}-{space}", name=f"{arch} (random init, test double)",
                       family=family, source=TEST_DOUBLE_SOURCE, arch=arch, weights="random-init",
                       label_space=space, num_params=0, input_override=input_config)
    return replace(entry, num_params=count_parameters(entry, len(get_label_space(space))))


def write_photo_folder(folder):
    """A class folder per wnid with one real photograph each (tabby: chelsea, espresso: coffee,
    both shipped by scikit-image), named by wnid as `python -m classify --images` reads them."""
    import torch

    site = Path(torch.__file__).resolve().parent.parent
    for wnid, path in {"n02123045": "skimage/data/chelsea.png", "n07920052": "skimage/data/coffee.png"}.items():
        (folder / wnid).mkdir(parents=True)
        (folder / wnid / Path(path).name).write_bytes((site / path).read_bytes())
    return folder


# A tiny open_clip architecture for zero-shot plumbing tests (random weights, saved by the tests as
# a safetensors checkpoint): added to open_clip's model configs by the tests, never by the library.
TINY_CLIP = "test-double-tiny-clip"
TINY_CLIP_CONFIG = {"embed_dim": 16,
                    "vision_cfg": {"image_size": 64, "layers": 1, "width": 32, "patch_size": 32, "head_width": 16},
                    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


def register_tiny_clip() -> str:
    """Add :data:`TINY_CLIP` to open_clip's model configs."""
    import json

    from open_clip.factory import _MODEL_CONFIGS

    _MODEL_CONFIGS.setdefault(TINY_CLIP, json.loads(json.dumps(TINY_CLIP_CONFIG)))
    return TINY_CLIP
