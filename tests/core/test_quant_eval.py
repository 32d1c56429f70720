"""The dense-dequantized evaluation path of quantized Linears (laya_opt/core/quant_eval.py) and its check."""
import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten

import laya_opt as lo
from laya_opt.core import quant_eval
from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.checkpoint_write import save_quantized
from laya_opt.core.quant_eval import (DENSE, PACKED, DensePathMismatch, DequantizedLinear, dense_path_check,
                                      eval_path_of, probe_batch, question_batches, require_agreement,
                                      resolve_eval_path, with_eval_path)
from laya_opt.core.runtime import eager_forward, load_runtime
from laya_opt.passes.quantize_encoder import PASS

from conftest import write_tiny_checkpoint

REQUESTS = (
    ("hello world hello", {
        "pick": {"type": "choice", "instructions": "hello", "criteria": {"A": "hello", "B": "world", "C": "x"}},
        "holds": {"type": "noul", "instructions": "hello there", "labels": {"false": "B", "true": "A"}}}),
    ({"notes": "hello hello", "turns": 2}, {
        "rate": {"type": "score", "instructions": "hello hello", "criteria": ["low", "mid", "high", "top"]}}),
)
LINEARS = 12  # the tiny encoder: 3 layers x (Wqkv, attn.Wo, mlp.Wi, mlp.Wo)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    runtime = load_runtime(write_tiny_checkpoint(tmp_path_factory.mktemp("qeval") / "tiny"), "float32")
    return lo.apply(runtime, PASS.make_config({"group_size": 32}))


def linears(model):
    return {path: module for path, module in model.named_modules() if isinstance(module, nn.QuantizedLinear)}


def test_dense_twin_holds_the_same_packed_arrays_and_leaves_the_input_alone(packed):
    dense = with_eval_path(packed.model, DENSE)
    assert {type(m) for m in linears(dense).values()} == {DequantizedLinear}
    assert {type(m) for m in linears(packed.model).values()} == {nn.QuantizedLinear}  # input untouched
    assert len(linears(dense)) == LINEARS
    before, after = dict(tree_flatten(packed.model.parameters())), dict(tree_flatten(dense.parameters()))
    assert before.keys() == after.keys() and all(after[name] is before[name] for name in before)
    back = with_eval_path(dense, PACKED)
    assert {type(m) for m in linears(back).values()} == {nn.QuantizedLinear}


def test_dense_weight_is_exactly_the_dequantized_values(packed):
    module = linears(with_eval_path(packed.model, DENSE))["encoder.layers.1.mlp.Wi"]
    expected = mx.dequantize(module.weight, module.scales, module.biases, group_size=32, bits=8)
    assert np.array_equal(np.array(module.dense_weight()), np.array(expected))
    x = mx.random.normal((5, module.dense_weight().shape[1]), key=mx.random.key(1))
    packed_out = nn.QuantizedLinear.__call__(module, x)
    np.testing.assert_allclose(np.array(module(x)), np.array(packed_out), rtol=0, atol=1e-5)


def test_eval_path_of_labels_what_a_benchmark_would_measure(packed):
    assert eval_path_of(packed.model) == PACKED
    assert eval_path_of(with_eval_path(packed.model, DENSE)) == DENSE
    one = with_eval_path(packed.model, DENSE)
    one.encoder.layers[0].attn.Wqkv = with_eval_path(packed.model, PACKED).encoder.layers[0].attn.Wqkv
    assert eval_path_of(one) == "mixed"
    assert eval_path_of(nn.Linear(4, 4)) is None


def test_with_eval_path_refuses_an_unknown_path(packed):
    with pytest.raises(ValueError, match="eval path 'fast' is not one of packed, dense-dequantized"):
        with_eval_path(packed.model, "fast")


def test_resolve_eval_path_by_setting_and_device():
    cpu, gpu = mx.Device(mx.cpu), mx.Device(mx.gpu)
    assert resolve_eval_path("auto", cpu)[0] == DENSE and "CPU backend" in resolve_eval_path("auto", cpu)[1]
    assert resolve_eval_path("auto", gpu)[0] == PACKED
    assert resolve_eval_path("packed", cpu)[0] == PACKED and "slow" in resolve_eval_path("packed", cpu)[1]
    path, why = resolve_eval_path("dense", gpu)
    assert path == DENSE and "not the packed kernel" in why
    with pytest.raises(ValueError, match="eval_path 'gpu' is not one of auto, packed, dense"):
        resolve_eval_path("gpu", cpu)


def test_check_agrees_within_rounding_on_questions_and_on_the_probe(packed):
    for batches, inputs in ((question_batches(packed, REQUESTS, 2), "questions"), ([probe_batch(packed)], "probe")):
        check = dense_path_check(packed, batches, inputs)
        assert check.ok and check.inputs == inputs and check.calls == LINEARS * len(batches)
        assert 0 <= check.rounding_units <= check.bound == quant_eval.ROUNDING_BOUND
        assert check.worst_module in linears(packed.model) and 0 < check.rows <= quant_eval.CHECK_ROWS * check.calls
        require_agreement(check)  # does not raise
    probe = dense_path_check(packed, [probe_batch(packed)], "probe", rows_per_call=8)
    assert probe.rows == 8 * LINEARS  # the probe's 4 x 128 token rows, sampled down to 8 per call


def test_dense_forward_matches_the_packed_forward(packed):
    batch = question_batches(packed, REQUESTS, 2)[0]
    dense = with_eval_path(packed.model, DENSE)
    (a, b), (c, d) = (eager_forward(m, packed.kernels, batch) for m in (packed.model, dense))
    np.testing.assert_allclose(np.array(c), np.array(a), atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.array(d), np.array(b), atol=1e-4, rtol=0)


@pytest.mark.parametrize("corrupt", [
    lambda weight: weight.astype(mx.float16).astype(mx.float32),   # dequantized through a narrower dtype
    lambda weight: weight * (1 + 2 ** -12),                        # a scale off by a part in 4096
])
def test_check_refuses_a_dense_path_that_is_not_the_packed_kernel(packed, monkeypatch, corrupt):
    original = DequantizedLinear.dense_weight
    monkeypatch.setattr(DequantizedLinear, "dense_weight", lambda self: corrupt(original(self)))
    check = dense_path_check(packed, [probe_batch(packed)], "probe")
    assert not check.ok and check.rounding_units > check.bound
    with pytest.raises(DensePathMismatch, match=r"disagrees with MLX's packed quantized matmul at encoder\.layers\."
                                                r".*above the kernel-rounding bound 2, on probe; "
                                                r"evaluate with eval_path: packed"):
        require_agreement(check)


def test_check_needs_questions_and_quantized_linears(packed):
    with pytest.raises(ValueError, match="needs at least one question"):
        question_batches(packed, [("hello", {})], 2)
    dense_runtime = load_runtime(packed.info["checkpoint"], "float32")
    with pytest.raises(ValueError, match="ran no quantized Linear"):
        dense_path_check(dense_runtime, [probe_batch(dense_runtime)], "probe")


def test_export_of_a_dense_path_model_is_the_packed_checkpoint(packed, tmp_path):
    dense = packed.replace(model=with_eval_path(packed.model, DENSE))
    first, second = save_quantized(packed, tmp_path / "packed"), save_quantized(dense, tmp_path / "dense")
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    assert (first / "mlx_config.json").read_text() == (second / "mlx_config.json").read_text()
    loaded = load_checkpoint(second, "float32").model
    assert {type(m) for m in linears(loaded).values()} == {nn.QuantizedLinear}
