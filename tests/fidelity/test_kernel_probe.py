"""The kernel probe: exact half-precision kernels agree with the kernels they replace within one rounding,
a kernel that computes attention in the half dtype does not, and the pipeline gates it."""
from __future__ import annotations

import dataclasses

import mlx.core as mx
import numpy as np
import pytest
from fake_passes import EmptyConfig, REQUESTS

import laya_opt as lo
from laya_opt.fidelity.gates import KERNEL_ROUNDING_BOUND
from laya_opt.fidelity.kernel_probe import EPSILON, ROUNDING_STEPS, kernel_rounding_error, rounding_error
from laya_opt.core.model import sliding_mask
from laya_opt.passes.contract import PassSpec
from laya_opt.runs.pipeline import Pipeline
from laya_opt.core.runtime import clone_model, load_runtime

LONG = REQUESTS[-1:]   # 30+ tokens: wider than the window (w = 4)


def half_precision_window(q, k, v, ctx, scale):
    """Dense sliding attention without the float32 upcast of laya_opt.core.model.sdpa: the audit's FP16-only bug."""
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=sliding_mask(ctx.valid, ctx.window))


HALF_WINDOW = PassSpec(name="half_window", config_type=EmptyConfig, exact=True, replaces=frozenset({"kernels"}),
                       kernels=frozenset({"sliding_attention"}),
                       apply=lambda runtime, config, data: (runtime.replace(kernels=dataclasses.replace(
                           runtime.kernels, sliding_attention=half_precision_window)), {}),
                       description="test: sliding attention computed in the half dtype")


@pytest.fixture(scope="module", params=["float16", "bfloat16"])
def half(request, wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, request.param, batch_size=4)


def test_exact_kernels_agree_within_one_rounding_and_a_half_precision_one_does_not(half):
    for name, config in (("local_window_attention", {"block_size": 8, "min_length": 0}), ("head_prune_final", {})):
        error = kernel_rounding_error(half, lo.apply(half, name, **config), LONG)
        assert error is not None and error <= KERNEL_ROUNDING_BOUND, name
    planted = half.replace(kernels=dataclasses.replace(half.kernels, sliding_attention=half_precision_window))
    assert kernel_rounding_error(half, planted, LONG) > KERNEL_ROUNDING_BOUND


def test_the_pipeline_rejects_a_half_precision_kernel_on_the_probe(half):
    dtype = "float16" if half.dtype == mx.float16 else "bfloat16"
    result = Pipeline([(HALF_WINDOW, {}, "reject")], candidate_dtype=dtype).run(
        load_runtime(half.info["checkpoint"], "float32"), LONG)
    stage = result.stages[1]
    assert stage.verdict == "rejected" and stage.incremental.metrics["kernel_rounding_error"] > KERNEL_ROUNDING_BOUND
    assert "kernel_rounding_error" in {gate.gate.metric for _, gate in stage.failed_gates}


def test_nothing_to_probe_without_a_replaced_kernel_or_with_another_model(half):
    assert kernel_rounding_error(half, lo.apply(half, "length_sorted_batching"), LONG) is None
    other = lo.apply(half, "head_prune_final").replace(model=clone_model(half.model))
    assert kernel_rounding_error(half, other, LONG) is None


def test_rounding_error_is_measured_in_units_of_the_reference_dtype():
    reference = mx.array([1.0, -2.0, 0.0, 4.0], dtype=mx.float16)
    one_unit = mx.array([1.0 + 2 ** -10, -2.0, 0.0, 4.0], dtype=mx.float16)
    rows = np.ones(4, dtype=bool)
    assert rounding_error(reference, reference, rows) == 0.0
    assert rounding_error(one_unit, reference, rows) == pytest.approx(1.0)
    # Near zero, the scale is a twentieth of the largest value: 0.2 at 4.0, so 2**-10 there is 1/0.2 units.
    near_zero = mx.array([1.0, -2.0, 2 ** -10, 4.0], dtype=mx.float16)
    assert rounding_error(near_zero, reference, rows) == pytest.approx(1 / 0.2)
    assert rounding_error(one_unit, reference, np.array([False, True, True, True])) == 0.0


def test_the_encoder_stack_is_left_to_the_output_gates_and_its_leaf_kernels_are_probed(half):
    # A fused encoder stack differs by one rounding per layer where it fuses (GeGLU), amplified through
    # the layers after it: no one-rounding bound holds for 28 layers, so only the attention it replaces
    # is probed, and the stack itself is judged on outputs (0.0: nothing probed, and the gate not failed
    # by a missing metric, which rejected every fused_encoder without rope in half precision).
    assert kernel_rounding_error(half, lo.apply(half, "fused_encoder", rope=False), LONG) == 0.0
    error = kernel_rounding_error(half, lo.apply(half, "fused_encoder"), LONG)
    assert error is not None and error <= KERNEL_ROUNDING_BOUND


def _units_off(kernel, units):
    def off(*args):
        out = kernel(*args)
        return (out.astype(mx.float32) * (1 + units * EPSILON[out.dtype])).astype(out.dtype)
    return off


def test_kernels_of_several_rounded_steps_are_measured_per_step(half):
    head = half.replace(kernels=dataclasses.replace(
        half.kernels, final_head_layer=_units_off(half.kernels.final_head_layer, 2.5)))
    window = half.replace(kernels=dataclasses.replace(
        half.kernels, sliding_attention=_units_off(half.kernels.sliding_attention, 3)))
    # 2.5 units off (plus the cast's rounding) is within one rounding per step for the head layer (two
    # steps); 3 units off is not for attention (one step).
    assert ROUNDING_STEPS["final_head_layer"] == 2 and "sliding_attention" not in ROUNDING_STEPS
    assert 1.0 < kernel_rounding_error(half, head, LONG) <= KERNEL_ROUNDING_BOUND
    assert kernel_rounding_error(half, window, LONG) > KERNEL_ROUNDING_BOUND
