"""Batch-norm folding: faster, and never a different prediction."""
import pytest
import timm
import torch
from torch import nn

from classify.engine.optimize import fold_batchnorm
from classify.models.sources.package_source import load_efficientnet_lite0_package


def _randomise_batchnorm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Fresh models have identity-like BN statistics, which would hide a wrong fold."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.5)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.2)
    return model.eval()


def test_lite0_folds_every_batchnorm_and_keeps_its_outputs():
    model = load_efficientnet_lite0_package()
    probe = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    folded, pairs = fold_batchnorm(model, probe)
    assert pairs == 49 and folded is not model
    assert not any(isinstance(m, nn.BatchNorm2d) for m in folded.modules())
    x = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert torch.allclose(folded(x), model(x), atol=1e-4)
    assert any(isinstance(m, nn.BatchNorm2d) for m in model.modules())  # the original is untouched


@pytest.mark.parametrize("arch", ["test_resnet", "test_efficientnet"])
def test_post_activation_networks_fold(arch):
    model = _randomise_batchnorm(timm.create_model(arch, num_classes=10))
    probe = torch.randn(2, 3, 96, 96)
    folded, pairs = fold_batchnorm(model, probe)
    assert pairs > 0
    with torch.inference_mode():
        assert torch.allclose(folded(probe), model(probe), rtol=1e-4, atol=1e-4)


def test_pre_activation_networks_are_left_alone():
    """DenseNet normalises *before* each conv: folding by registration order would be wrong, the
    probe check sees it, and the original model is returned."""
    model = _randomise_batchnorm(timm.create_model("densenet121", num_classes=10))
    folded, pairs = fold_batchnorm(model, torch.randn(1, 3, 64, 64))
    assert folded is model and pairs == 0


def test_models_without_batchnorm_are_returned_as_they_are():
    vit = timm.create_model("test_vit", num_classes=10).eval()
    assert fold_batchnorm(vit, torch.randn(1, 3, 160, 160)) == (vit, 0)


def test_static_same_padding_is_exact_and_refuses_other_sizes():
    """TF 'SAME' padding fixed for one input size gives bit-identical outputs (the padding amounts
    are timm's own), and the fixed model refuses an input of another size instead of misaligning."""
    from classify.engine.optimize import StaticPadConv2d, static_same_padding

    model = load_efficientnet_lite0_package()
    fixed = load_efficientnet_lite0_package()
    assert static_same_padding(fixed, 224) == 5  # the stem and the four stride-2 depthwise convs
    assert sum(isinstance(m, StaticPadConv2d) for m in fixed.modules()) == 5
    assert fixed.conv_stem.static_pad == (0, 1, 0, 1)  # TF pads the odd pixel bottom/right
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        assert torch.equal(fixed(x), model(x))
        with pytest.raises(ValueError, match="fixed for \\(224, 224\\)"):
            fixed(torch.zeros(1, 3, 240, 240))
    assert static_same_padding(timm.create_model("test_resnet", num_classes=10).eval(), 96) == 0
