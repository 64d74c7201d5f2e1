"""The registry: complete, consistent with timm/torchvision, right label spaces and class orders."""
import pytest
import torch

from classify.engine.preprocess import crop_to_tensor, normalizer
from classify.models.registry import (CROP_MODES, DEFAULT_MODEL, FAMILIES, INTERPOLATIONS, InputConfig, UnknownModelError, class_wnids, list_models)
from classify.models.lookup import get_model, resolve_models
from classify.models.registry import SOURCES
from classify.models.weights import count_parameters
from core.labels import get_label_space, label_space_names
from tests.classify.doubles import is_test_double, make_test_double

PAPER_MODELS = {"VGG16", "VGG19", "ResNet50", "ResNet101", "ResNet152", "InceptionV3", "InceptionResNetV2", "Xception",
                "MobileNetV2", "NASNetLarge", "DenseNet121", "DenseNet169", "DenseNet201", "EfficientNetB7",
                "ConvNeXt", "ViT", "DeiT", "BEiT", "SwinV2", "CLIP", "RegNetX"}
# Our label-space names -> timm's names for the same lists (timm.data.imagenet_info).
TIMM_SUBSET = {"imagenet-1k": "imagenet-1k", "imagenet-21k": "imagenet-21k-goog", "imagenet-22k": "imagenet-22k",
               "imagenet-12k": "imagenet-12k"}


def test_entries_are_well_formed():
    entries = list_models()
    assert entries[0].id == DEFAULT_MODEL
    assert len({e.id for e in entries}) == len(entries)
    for e in entries:
        assert e.family in FAMILIES and e.source in SOURCES and e.label_space in label_space_names()
        cfg = e.input_config()
        assert cfg.crop_mode in CROP_MODES and cfg.interpolation in INTERPOLATIONS
        assert 64 <= cfg.size <= cfg.resize_size <= 1024
        assert not is_test_double(e) and not e.id.startswith("test-double-")
    # The paper's CNNs and transformers, and the zero-shot CLIP models; 'hybrid' only for zoo models.
    assert {e.family for e in entries} == {"CNN", "transformer", "language-augmented"}
    assert {"CNN", "transformer"} < set(FAMILIES)


def test_every_paper_model_is_registered():
    assert PAPER_MODELS <= {e.paper for e in list_models()}


def test_larger_label_spaces_are_present():
    spaces = {e.label_space for e in list_models()}
    assert {"imagenet-21k", "imagenet-22k", "imagenet-12k"} <= spaces


def test_timm_entries_match_timm_pretrained_configs():
    from timm.data import infer_imagenet_subset
    from timm.models import get_pretrained_cfg

    for e in list_models():
        if e.source != "timm":
            continue
        cfg = get_pretrained_cfg(e.timm_name)
        assert cfg is not None, e.timm_name
        assert cfg.num_classes == len(class_wnids(e)) == e.num_classes, e.id
        assert infer_imagenet_subset(cfg.to_dict()) == TIMM_SUBSET[e.label_space], e.id


def test_recorded_parameter_counts_equal_a_meta_device_build():
    for e in list_models():
        assert e.num_params == count_parameters(e), e.id


def test_swin_22k_heads_use_microsofts_class_order():
    """Swin's IN-22k dataset: Google's 21,843 list with classes 21841/21842 moved into the two
    image-less slots 9205/15027. Spot checks from Swin's data/map22kto1k.txt (1k class -> 22k index)."""
    swin = class_wnids(get_model("swinv2_base_window12_192.ms_in22k"))
    sorted22k = get_label_space("imagenet-22k").wnids
    assert len(swin) == 21841 and set(swin) == set(sorted22k) and swin != sorted22k
    for wnid, index in [("n01440764", 359), ("n02123045", 2397), ("n07920052", 13982)]:  # tench, tabby, espresso
        assert swin[index] == wnid
    assert sorted22k[13982] != "n07920052"  # the sorted list would misname Swin's espresso output
    assert class_wnids(get_model("beit_base_patch16_224.in22k_ft_in22k")) == sorted22k


def test_input_configs_come_from_the_pretrained_configs():
    vit = get_model("vit").input_config()
    assert (vit.size, vit.resize_size, vit.interpolation, vit.mean) == (224, 248, "bicubic", (0.5, 0.5, 0.5))
    tv = get_model("torchvision/resnet50.IMAGENET1K_V2").input_config()
    assert (tv.size, tv.resize_size, tv.interpolation) == (224, 232, "bilinear")
    b7 = get_model("efficientnet_b7").input_config()
    assert (b7.size, b7.interpolation) == (600, "bicubic")
    assert get_model("vgg16").input_config().geometry == get_model("resnet50").input_config().geometry


def test_lookup_by_alias_and_helpful_errors():
    assert get_model("ResNet50").id == "resnet50.tv_in1k"
    assert get_model("default").id == DEFAULT_MODEL
    assert [e.id for e in resolve_models("vit, efficientnet_lite0,vit")] == [
        "vit_base_patch16_224.augreg2_in21k_ft_in1k", DEFAULT_MODEL]
    with pytest.raises(UnknownModelError, match="Did you mean: resnet50.tv_in1k"):
        get_model("resnet5")
    with pytest.raises(UnknownModelError):
        resolve_models(" , ")


def test_test_doubles_are_never_registered():
    double = make_test_double("test_vit", "imagenet-21k", family="transformer")
    assert double.id == "test-double-test_vit-imagenet-21k" and is_test_double(double)
    assert double.num_classes == 21843 and double.num_params > 0
    assert double.id not in {e.id for e in list_models()}
    with pytest.raises(UnknownModelError):
        get_model(double.id)
    assert get_model(double) is double  # entries pass through


CONFIGS = [
    InputConfig(224, 0.875, "bicubic", (127 / 255,) * 3, (128 / 255,) * 3),
    InputConfig(224, 224 / 232, "bilinear", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    InputConfig(192, 0.9, "bicubic", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    InputConfig(160, 0.95, "bicubic", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), crop_mode="squash"),
    InputConfig(448, 1.0, "bicubic", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),  # upsamples the 301 px side
    InputConfig(224, 0.875, "lanczos", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),  # no tensor kernel: Pillow
]


def noise_image(seed: int = 0):
    from PIL import Image

    rng = torch.Generator().manual_seed(seed)
    return Image.fromarray(torch.randint(0, 256, (301, 437, 3), generator=rng, dtype=torch.uint8).numpy())


@pytest.mark.parametrize("config", CONFIGS)
def test_pillow_resampler_equals_timms_eval_transform(config):
    from timm.data import create_transform

    image = noise_image()
    expected = create_transform(input_size=(3, config.size, config.size), interpolation=config.interpolation,
                                mean=config.mean, std=config.std, crop_pct=config.crop_pct,
                                crop_mode=config.crop_mode)(image)
    ours = normalizer(config, torch.device("cpu"))(crop_to_tensor(image, config.geometry, "pil")[None])[0]
    assert ours.shape == expected.shape
    assert torch.allclose(ours, expected, atol=1e-5)


@pytest.mark.parametrize("config", CONFIGS)
def test_torch_resampler_is_within_a_rounding_step_of_pillows(config):
    """Noise is the hardest case for rounding (every pixel an edge): at most 2/255 apart, on at
    most 2% of the values (measured: 1/255 on 0.25-0.5% when shrinking, 2/255 on 1% enlarging)."""
    image = noise_image(1)
    pil = crop_to_tensor(image, config.geometry, "pil")
    fast = crop_to_tensor(image, config.geometry, "torch")
    assert fast.shape == pil.shape == (3, config.size, config.size) and fast.dtype == torch.uint8
    diff = (pil.int() - fast.int()).abs()
    assert diff.max() <= 2 and (diff > 0).float().mean() < 0.02
    if config.interpolation == "lanczos":
        assert torch.equal(pil, fast)


def test_a_greyscale_image_takes_the_pillow_path():
    grey = noise_image().convert("L")
    config = CONFIGS[0]
    assert torch.equal(crop_to_tensor(grey, config.geometry, "torch"), crop_to_tensor(grey, config.geometry, "pil"))
    assert crop_to_tensor(grey, config.geometry).shape == (1, config.size, config.size)


def test_unknown_resampler_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="choose one of torch, pil"):
        crop_to_tensor(noise_image(), CONFIGS[0].geometry, "opencv")


def test_sources_are_found_by_name_and_only_results_are_registered():
    from dataclasses import replace

    from classify.models.registry import register_models
    from classify.models.registry import UnknownSourceError, get_source

    assert get_source("timm").name == "timm" and get_source(get_model(DEFAULT_MODEL)).packaged
    with pytest.raises(UnknownSourceError, match="known sources: .*timm.*torchvision"):
        get_source("open_clip")
    double = make_test_double("test_efficientnet")
    with pytest.raises(ValueError, match="never registered"):
        register_models(lambda: replace(double, id="random-but-renamed", aliases=()))
    assert "random-but-renamed" not in {e.id for e in list_models()}
