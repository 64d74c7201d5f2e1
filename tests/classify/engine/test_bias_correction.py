"""int8 bias correction (classify.engine.quantize.correct_biases, issue 26 item 5): each quantized
Conv's bias minus the output shift its rounded weights cause on average.

A tiny CNN exported to ONNX (a stem, a depthwise and a pointwise convolution with ReLU6, a linear
head) whose convolutions each have one large weight per output channel: ONNX Runtime's per-channel
scale is set by it, so the other weights round coarsely and, with inputs whose mean is not zero,
shift every output of the channel the same way (as BN-folded depthwise kernels do in
EfficientNet-Lite). The references are independent of the code under test: the channel means from
PyTorch forward hooks, the rounding as ONNX Runtime documents it (symmetric int8 per output channel,
scale = max |w| / 127).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from classify.engine import quantize  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = torch.nn.Conv2d(8, 6, 1)
        self.head = torch.nn.Linear(6, 5)

    def forward(self, x):
        x = torch.nn.functional.relu6(self.stem(x))
        x = torch.nn.functional.relu6(self.dw(x))
        x = self.pw(x)
        return self.head(x.mean((2, 3)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    model = Tiny().eval()
    with torch.no_grad():
        for conv in (model.stem, model.dw, model.pw):
            w = conv.weight
            w.uniform_(-0.05, 0.05)
            w.view(len(w), -1)[:, 0] = 3.0  # one large weight per output channel sets its int8 scale
            conv.bias.uniform_(-0.1, 0.1)
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, 16, 16), str(path), input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}}, opset_version=17, dynamo=False)
    rng = np.random.default_rng(0)
    # 5 batches: with ONNX Runtime 1.31, MinMax with CalibMaxIntermediateOutputs=2 (quantize._quantize) on an
    # even number of batches raises "No data is collected" (the product calibrates on 7).
    batches = [rng.uniform(0.0, 1.0, (8, 3, 16, 16)).astype(np.float32) for _ in range(5)]
    return model, path, batches


def _logits(data, batches) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"input": b})[0] for b in batches])


def test_the_corrected_biases_are_the_rounding_times_the_input_means(tiny, tmp_path):
    import onnx
    from onnx import numpy_helper

    model, path, batches = tiny
    inputs: dict[str, list[np.ndarray]] = {}
    hooks = [getattr(model, name).register_forward_hook(
        lambda m, args, out, name=name: inputs.setdefault(name, []).append(args[0].mean((2, 3)).double().numpy()))
        for name in ("stem", "dw", "pw")]
    with torch.no_grad():
        for b in batches:
            model(torch.from_numpy(b))
    for hook in hooks:
        hook.remove()
    expected = {}
    for name in ("stem", "dw", "pw"):
        conv = getattr(model, name)
        w = conv.weight.detach().double().numpy()
        scale = np.abs(w).reshape(len(w), -1).max(1) / 127
        rounded = np.round(w / scale[:, None, None, None]) * scale[:, None, None, None]
        mean = np.concatenate(inputs[name]).mean(0)
        per_output = mean[np.arange(len(w))][:, None] if conv.groups > 1 else mean[None, :]
        expected[name] = conv.bias.detach().double().numpy() - ((rounded - w).sum((2, 3)) * per_output).sum(1)

    float_model = onnx.load(str(path))
    means = quantize.conv_input_means(path, batches)
    quantized = tmp_path / "q.onnx"
    quantize._quantize(path, quantized, batches, reduce=False)
    assert quantize.correct_biases(float_model, onnx.load(str(quantized)), means) == 3
    inits = {i.name: numpy_helper.to_array(i) for i in float_model.graph.initializer}
    convs = [node for node in float_model.graph.node if node.op_type == "Conv"]
    for node, name in zip(convs, ("stem", "dw", "pw")):
        np.testing.assert_allclose(inits[node.input[2]], expected[name], rtol=1e-5, atol=1e-6)


def test_bias_correction_removes_the_rounding_shift_and_keeps_the_int8_weights(tiny):
    import onnx

    _, path, batches = tiny
    fp32 = _logits(path.read_bytes(), batches)
    plain = quantize.quantize_bytes(path, batches)
    corrected = quantize.quantize_bytes(path, batches, bias_batches=lambda: batches)
    shift_plain = np.abs((_logits(plain, batches) - fp32).mean(0)).sum()
    shift_corrected = np.abs((_logits(corrected, batches) - fp32).mean(0)).sum()
    assert shift_corrected < shift_plain / 4, (shift_plain, shift_corrected)

    def int8_weights(data):
        model = onnx.load_from_string(data)
        return {i.name: i.raw_data for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8}

    # Only the biases change: the second pass rounds the same weights onto the same grid.
    assert int8_weights(plain) == int8_weights(corrected) and int8_weights(plain)
