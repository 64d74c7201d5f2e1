"""int8 bias correction (classify.engine.quantize.correct_biases, issue 26 item 5): each quantized
Conv's bias minus the output shift its rounded weights cause on average; and activation ranges
calibrated on every batch.

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


# 48 pixels a side: a bias is one number per channel, and on 16 pixels the three 3x3 layers' borders (where
# the rounding's effect differs) are a third of the positions: the correction removed 29 % of the logits'
# shift there, 83 % on 48 (2026-12-06).
SIDE = 48


class Tiny(torch.nn.Module):
    """Every kind of Conv the mapping from output channels to input channels can get wrong: a full
    one, depthwise, two groups of 4 inputs and 3 outputs, depthwise with two outputs per input, and a
    grouped 1x1 without a bias."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.g2 = torch.nn.Conv2d(8, 6, 3, padding=1, groups=2)
        self.dw2 = torch.nn.Conv2d(6, 12, 3, padding=1, groups=6)
        self.pw = torch.nn.Conv2d(12, 6, 1, groups=2, bias=False)
        self.head = torch.nn.Linear(6, 5)

    CONVS = ("stem", "dw", "g2", "dw2", "pw")

    def forward(self, x):
        for name in self.CONVS[:-1]:
            x = torch.nn.functional.relu6(getattr(self, name)(x))
        return self.head(self.pw(x).mean((2, 3)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    model = Tiny().eval()
    with torch.no_grad():
        for name in Tiny.CONVS:
            conv = getattr(model, name)
            w = conv.weight
            w.uniform_(-0.05, 0.05)
            w.view(len(w), -1)[:, 0] = 3.0  # one large weight per output channel sets its int8 scale
            if conv.bias is not None:
                conv.bias.uniform_(-0.1, 0.1)
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, SIDE, SIDE), str(path), input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}}, opset_version=17, dynamo=False)
    rng = np.random.default_rng(0)
    # Input channels of different means, so that a channel read in the wrong group shows.
    scale = np.array([1.0, 3.0, 5.0], dtype=np.float32)[None, :, None, None]
    batches = [rng.uniform(0.0, 1.0, (8, 3, SIDE, SIDE)).astype(np.float32) * scale for _ in range(4)]
    return model, path, batches


def _quantized_and_shifts(path, batches) -> tuple[bytes, bytes, float, float]:
    """The int8 model without and with bias correction, and the summed |mean logit shift| of each from fp32."""
    fp32 = _logits(path.read_bytes(), batches)
    plain = quantize.quantize_bytes(path, batches)
    corrected = quantize.quantize_bytes(path, batches, bias_batches=batches)
    shift_plain, shift_corrected = (np.abs((_logits(data, batches) - fp32).mean(0)).sum() for data in (plain, corrected))
    return plain, corrected, shift_plain, shift_corrected


def _logits(data, batches) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"input": b})[0] for b in batches])


@pytest.mark.parametrize("reduce", [False, True], ids=["8-bit", "7-bit weights"])
def test_the_corrected_biases_remove_the_roundings_mean_output(tiny, tmp_path, reduce):
    """The reference is PyTorch's: each Conv's input captured by a hook, the rounding (ONNX Runtime's
    symmetric per-channel int8) convolved with it by torch's conv2d (its padding, groups), averaged."""
    import onnx
    from onnx import numpy_helper

    model, path, batches = tiny
    inputs: dict[str, list[torch.Tensor]] = {}
    hooks = [getattr(model, name).register_forward_hook(
        lambda m, args, out, name=name: inputs.setdefault(name, []).append(args[0].double()))
        for name in Tiny.CONVS]
    with torch.no_grad():
        for b in batches:
            model(torch.from_numpy(b))
    for hook in hooks:
        hook.remove()
    levels = 64 if reduce else 127  # ONNX Runtime's symmetric int8 weights: [-127, 127], reduced: [-64, 64]
    expected = {}
    for name in Tiny.CONVS:
        conv = getattr(model, name)
        w = conv.weight.detach().double()
        scale = w.abs().reshape(len(w), -1).amax(1)[:, None, None, None] / levels
        rounded = torch.round(w / scale) * scale
        shift = torch.nn.functional.conv2d(torch.cat(inputs[name]), rounded - w, padding=conv.padding,
                                           groups=conv.groups).mean((0, 2, 3))
        bias = conv.bias.detach().double() if conv.bias is not None else torch.zeros(len(w), dtype=torch.float64)
        expected[name] = (bias - shift).numpy()

    float_model = onnx.load(str(path))
    quantize.name_nodes(float_model)
    named = tmp_path / "named.onnx"
    onnx.save(float_model, str(named))
    quantized = tmp_path / "q.onnx"
    quantize._quantize(named, quantized, batches, reduce=reduce)
    rounded = quantize._dequantized_conv_weights(onnx.load(str(quantized)))
    assert quantize.correct_biases(float_model, quantize.rounding_shifts(named, rounded, batches)) == len(Tiny.CONVS)
    inits = {i.name: numpy_helper.to_array(i) for i in float_model.graph.initializer}
    convs = [node for node in float_model.graph.node if node.op_type == "Conv"]
    for node, name in zip(convs, Tiny.CONVS):
        np.testing.assert_allclose(inits[node.input[2]], expected[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_convs_are_matched_by_names_of_their_own_and_odd_biases_are_left_alone():
    """The code review's cases: two unnamed Convs were both corrected with the first one's weights; a
    bias shared by two Convs was corrected twice; a bias computed by another node was replaced."""
    from onnx import TensorProto, helper, numpy_helper

    w = np.full((2, 2, 1, 1), 0.3, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y0"]), helper.make_node("Conv", ["y0", "w", "b"], ["y1"]),
         helper.make_node("ReduceMean", ["b"], ["b_computed"], keepdims=1),
         helper.make_node("Conv", ["y1", "w", "b_computed"], ["y2"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([0.1, 0.2], dtype=np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    quantize.name_nodes(model)
    first, second, third = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len({first.name, second.name, third.name}) == 3 and all((first.name, second.name, third.name))
    # The int8 weights as ONNX Runtime writes them: an int8 initializer through a per-channel DequantizeLinear.
    q_nodes, q_inits = [], []
    for k, node in enumerate((first, second, third)):
        q_inits += [numpy_helper.from_array(np.full((2, 2, 1, 1), 100 + k, dtype=np.int8), f"q{k}"),
                    numpy_helper.from_array(np.full(2, 0.004, dtype=np.float32), f"s{k}")]
        q_nodes += [helper.make_node("DequantizeLinear", [f"q{k}", f"s{k}"], [f"dq{k}"], axis=0),  # no zero point: 0
                    helper.make_node("Conv", ["in", f"dq{k}"], [f"out{k}"], name=node.name)]
    rounded = quantize._dequantized_conv_weights(helper.make_model(helper.make_graph(q_nodes, "q", [], [], q_inits)))
    assert {name: float(v.flat[0]) for name, v in rounded.items()} == pytest.approx(
        {first.name: 0.4, second.name: 0.404, third.name: 0.408})
    shifts = {first.name: np.array([1.0, 2.0]), second.name: np.array([3.0, 4.0]), third.name: np.array([5.0, 6.0])}
    assert quantize.correct_biases(model, shifts) == 2  # the third Conv's bias is computed: left alone
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    np.testing.assert_allclose(inits[first.input[2]], [0.1 - 1.0, 0.2 - 2.0], rtol=1e-6)
    np.testing.assert_allclose(inits[second.input[2]], [0.1 - 3.0, 0.2 - 4.0], rtol=1e-6)
    assert first.input[2] != second.input[2]  # the shared bias copied, not corrected twice
    assert third.input[2] == "b_computed"


def test_bias_correction_removes_the_rounding_shift_and_keeps_the_int8_weights(tiny):
    import onnx

    _, path, batches = tiny
    plain, corrected, shift_plain, shift_corrected = _quantized_and_shifts(path, batches)
    assert shift_corrected < shift_plain / 4, (shift_plain, shift_corrected)

    def int8_weights(data):
        model = onnx.load_from_string(data)
        return {i.name: i.raw_data for i in model.graph.initializer if i.data_type == onnx.TensorProto.INT8}

    # Only the biases change: the second pass rounds the same weights onto the same grid.
    assert int8_weights(plain) == int8_weights(corrected) and int8_weights(plain)


def test_every_calibration_batch_sets_the_activation_ranges(tiny, tmp_path):
    """The input's uint8 range is the mean of the batches' maxima (MinMax with a moving average,
    quantize._quantize). With ONNX Runtime's CalibMaxIntermediateOutputs=2, which the quantizer passed
    before, only the last batch counted (an odd count) or the call failed (an even one)."""
    import onnx
    from onnx import numpy_helper

    _, path, batches = tiny
    batches = [b * factor for b, factor in zip(batches, (10.0, 1.0, 1.0, 1.0))]  # the first batch's range is 10x
    quantized = tmp_path / "q.onnx"
    quantize._quantize(path, quantized, batches, reduce=False)
    model = onnx.load(str(quantized))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    [node] = [n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "input"]
    expected = np.mean([b.max() for b in batches]) - np.mean([min(b.min(), 0.0) for b in batches])
    np.testing.assert_allclose(float(inits[node.input[1]]), expected / 255, rtol=1e-5)


class WithConv1d(torch.nn.Module):
    """timm's ECA attention: a Conv1d over the pooled channels (the hostile check: every ECA model
    failed in int8, the channel means taken over two position axes of a 3-D tensor)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.eca = torch.nn.Conv1d(1, 1, 3, padding=1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.nn.functional.relu6(self.stem(x))
        gate = torch.sigmoid(self.eca(x.mean((2, 3)).unsqueeze(1))).squeeze(1)
        return self.head(x.mean((2, 3)) * gate)


def test_a_conv1d_is_corrected_over_its_one_position_axis(tmp_path):
    import onnx

    torch.manual_seed(0)
    path, model = tmp_path / "eca.onnx", WithConv1d().eval()
    torch.onnx.export(model, torch.zeros(1, 3, 24, 24), str(path), input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}}, opset_version=17,
                      dynamo=False)
    batches = [np.random.default_rng(k).uniform(0, 1, (8, 3, 24, 24)).astype(np.float32) for k in range(3)]
    quantized = tmp_path / "q.onnx"
    quantize._quantize(path, quantized, batches, reduce=False)
    rounded = quantize._dequantized_conv_weights(onnx.load(str(quantized)))
    shifts = quantize.rounding_shifts(path, rounded, batches)
    assert sorted(v.shape for v in shifts.values()) == [(1,), (8,)]
    # The Conv1d's shift against PyTorch's conv1d of its input with the rounding (ONNX Runtime's symmetric int8).
    [name] = [n for n, w in rounded.items() if w.ndim == 3]
    inputs = []
    model.eca.register_forward_hook(lambda m, args, out: inputs.append(args[0].double()))
    with torch.no_grad():
        for b in batches:
            model(torch.from_numpy(b))
    w = model.eca.weight.detach().double()
    scale = w.abs().reshape(len(w), -1).amax(1)[:, None, None] / 127
    delta = torch.round(w / scale) * scale - w
    expected = torch.nn.functional.conv1d(torch.cat(inputs), delta, padding=1).mean((0, 2)).numpy()
    np.testing.assert_allclose(shifts[name], expected, rtol=1e-4, atol=1e-9)
    assert quantize.quantize_bytes(path, batches, bias_batches=batches)


def test_a_damaged_calibration_photograph_is_named_with_the_fix(tmp_path, monkeypatch):
    broken = tmp_path / "coins.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    monkeypatch.setattr(quantize, "calibration_files", lambda: [broken] * len(quantize.CALIBRATION_PHOTOS))
    with pytest.raises(quantize.CalibrationError, match=r"^the int8 calibration image skimage/data/hubble_deep_field.jpg "
                                                        r"cannot be read \(.*\); pip install --force-reinstall"):
        quantize.calibration_images()


def _unnamed_convs_model(path, names=("", "")):
    """Two 3x3 Convs with ReLU between, built with onnx.helper: no node names unless given (torch's
    exporter always names them, so the tiny model never shows this)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    inits = []
    for k, (cin, cout) in enumerate([(3, 6), (6, 4)]):
        w = rng.uniform(-0.05, 0.05, (cout, cin, 3, 3)).astype(np.float32)
        w.reshape(cout, -1)[:, 0] = 3.0
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(np.zeros(cout, np.float32), f"b{k}")]
    nodes = [helper.make_node("Conv", ["input", "w0", "b0"], ["c0"], name=names[0], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], name=names[1], pads=[1, 1, 1, 1]),
             helper.make_node("ReduceMean", ["c1"], ["logits"], axes=[2, 3], keepdims=0)]  # the head, unnamed too
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 24, 24])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def test_unnamed_convs_are_quantized_and_corrected(tmp_path):
    """The final review: without names of their own, the head's exclusion by name ("") took every unnamed
    node out of quantization, and the correction matched no Conv."""
    import onnx

    path = _unnamed_convs_model(tmp_path / "unnamed.onnx")
    batches = [np.random.default_rng(k).uniform(0, 1, (8, 3, 24, 24)).astype(np.float32) for k in range(3)]
    _, corrected, shift_plain, shift_corrected = _quantized_and_shifts(path, batches)
    assert sum(n.op_type == "DequantizeLinear" for n in onnx.load_from_string(corrected).graph.node) >= 2
    assert shift_corrected < shift_plain / 4, (shift_plain, shift_corrected)


def test_names_the_model_already_uses_are_never_taken(tmp_path):
    """The final review: a Conv already named like a generated name got a twin ("two nodes with same
    node name"), and a tensor named like a generated one silently replaced the rounding's weight."""
    import onnx

    path = _unnamed_convs_model(tmp_path / "named.onnx", names=("wildlens_conv_2", ""))  # what the 3rd node would get
    model = onnx.load(str(path))
    quantize.name_nodes(model)
    names = [n.name for n in model.graph.node]
    assert len(names) == len(set(names)) and all(names)
    # An initializer named as the rounding's first weight would be: the shifts still use the Convs' own.
    for init in model.graph.initializer:
        if init.name == "w0":
            init.name = "wildlens_rounding_0"
    for node in model.graph.node:
        node.input[:] = ["wildlens_rounding_0" if i == "w0" else i for i in node.input]
    clash = tmp_path / "clash.onnx"
    onnx.save(model, str(clash))
    batches = [np.random.default_rng(k).uniform(0, 1, (8, 3, 24, 24)).astype(np.float32) for k in range(3)]
    _, _, shift_plain, shift_corrected = _quantized_and_shifts(clash, batches)
    assert shift_corrected < shift_plain / 4, (shift_plain, shift_corrected)


def test_opset_18_models_take_reduce_means_axes_as_an_input(tiny, tmp_path):
    """ReduceMean's axes became an input in opset 18 (rounding_shifts adds one per Conv)."""
    import onnx

    model, _, batches = tiny
    path = tmp_path / "tiny18.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, SIDE, SIDE), str(path), input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}}, opset_version=18, dynamo=False)
    assert onnx.load(str(path)).opset_import[0].version == 18
    _, _, shift_plain, shift_corrected = _quantized_and_shifts(path, batches)
    assert shift_corrected < shift_plain / 4, (shift_plain, shift_corrected)


def test_the_product_path_corrects_the_biases_on_the_calibration_views(monkeypatch, tmp_path):
    """int8_classifier passes the calibration batches for the correction (not the gate views)."""
    from classify.engine import onnx_backend
    from classify.models.registry import InputConfig

    seen = {}

    def fake_quantize_bytes(path, batches, reduce=False, bias_batches=None, threads=1):
        seen["bias"] = bias_batches
        seen["batches"] = batches
        raise RuntimeError("stop here")

    class Fp32:
        path = tmp_path / "fp32.onnx"

    monkeypatch.setattr(quantize, "quantize_bytes", fake_quantize_bytes)
    monkeypatch.setattr(quantize, "onnx_classifier", lambda *a, **k: (Fp32(), None))
    monkeypatch.setattr(quantize, "calibration_batches", lambda config, images=None: ["calibration"])
    key = onnx_backend.ExportKey.for_part("tiny", "0" * 64, 16, "timm")
    config = InputConfig(16, 1.0, "bilinear", (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    with pytest.raises(onnx_backend.OnnxBackendError, match="stop here"):
        quantize.int8_classifier(key, onnx_backend.OnnxCache(tmp_path), config, 1, lambda: None)
    assert seen["bias"] == seen["batches"] == ["calibration"]
