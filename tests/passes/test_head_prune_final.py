"""Final head layer pruned to [CLS] + marker rows: equal to the full layer at kept rows, exact end to end."""
import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_map
import pytest
from hypothesis import example, given, settings, strategies as st

import laya_opt as lo
from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.gates import KERNEL_ROUNDING_BOUND
from laya_opt.fidelity.kernel_probe import ROUNDING_STEPS, rounding_error
from laya_opt.fidelity.metrics import compare
from laya_opt.core.config import architecture
from laya_opt.core.model import HeadLayer, full_final_layer, key_padding_mask
from laya_opt.util.schema import parse
from laya_opt.passes.contract import runtime_fingerprint
from laya_opt.core.runtime import clone_model, load_runtime
from laya_opt.passes.head_prune_final import (FINAL_LAYERS, HeadPruneFinalConfig, flop_reduction, saved_flops,
                                     selected_q_final_layer, split_projection_final_layer)

from conftest import write_tiny_checkpoint

HEAD_LAYER = HeadLayer(128)  # two heads of 64, random init


def marker_layout(draw_rows, seed, slots):
    """Per row: length, marker positions (1..len-1, distinct, 1..slots of them); unused slots point at 0."""
    rng = np.random.default_rng(seed)
    length = max(len_ for len_, _ in draw_rows)
    valid = np.zeros((len(draw_rows), length), bool)
    select = np.zeros((len(draw_rows), 1 + slots), np.int32)
    for row, (row_length, count) in enumerate(draw_rows):
        valid[row, :row_length] = True
        markers = rng.choice(np.arange(1, row_length), size=min(count, row_length - 1), replace=False)
        select[row, 1:1 + len(markers)] = np.sort(markers)
    return mx.array(valid), mx.array(select)


layouts = st.integers(1, 16).flatmap(lambda slots: st.tuples(
    st.just(slots),
    st.lists(st.tuples(st.integers(2, 40), st.integers(1, slots)), min_size=1, max_size=4),
    st.integers(0, 2**31 - 1)))


@settings(max_examples=40, deadline=None)
@given(layouts, st.sampled_from(sorted(FINAL_LAYERS)))
def test_pruned_rows_equal_the_full_layer_for_random_marker_layouts(layout, variant):
    slots, rows, seed = layout
    valid, select = marker_layout(rows, seed, slots)
    h = mx.array(np.random.default_rng(seed).standard_normal((*valid.shape, 128)).astype(np.float32))
    key_mask = key_padding_mask(valid)
    pruned = FINAL_LAYERS[variant](HEAD_LAYER, h, key_mask, select)
    full = full_final_layer(HEAD_LAYER, h, key_mask, select)
    assert pruned.shape == full.shape == (*select.shape, 128)
    np.testing.assert_allclose(np.array(pruned), np.array(full), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kernel", [selected_q_final_layer, split_projection_final_layer])
@pytest.mark.parametrize("rows, slots", [
    ([(12, 1)], 1),                       # one option
    ([(40, 16), (30, 9)], 16),            # many options, variable counts
    ([(20, 1), (40, 5), (9, 3)], 6),      # padded marker slots and padded rows in one batch
])
def test_named_layouts(kernel, rows, slots):
    valid, select = marker_layout(rows, 3, slots)
    h = mx.array(np.random.default_rng(3).standard_normal((*valid.shape, 128)).astype(np.float32))
    key_mask = key_padding_mask(valid)
    np.testing.assert_allclose(np.array(kernel(HEAD_LAYER, h, key_mask, select)),
                               np.array(full_final_layer(HEAD_LAYER, h, key_mask, select)), atol=1e-5, rtol=0)


HALF_EPSILON = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


@settings(max_examples=10, deadline=None)
@given(layouts, st.sampled_from(sorted(FINAL_LAYERS)), st.sampled_from(sorted(HALF_EPSILON)))
@example((11, [(9, 4)], 139651), "selected_q", "float16")  # 2.008 units: over one step's bound
def test_pruned_rows_equal_the_full_layer_within_one_rounding_in_half_precision(layout, variant, dtype):
    slots, rows, seed = layout
    valid, select = marker_layout(rows, seed, slots)
    layer = clone_model(HEAD_LAYER)
    layer.update(tree_map(lambda value: value.astype(getattr(mx, dtype)), layer.parameters()))
    h = mx.array(np.random.default_rng(seed).standard_normal((*valid.shape, 128)).astype(np.float32)).astype(
        getattr(mx, dtype))
    key_mask = key_padding_mask(valid)
    pruned, full = (kernel(layer, h, key_mask, select).astype(mx.float32)
                    for kernel in (FINAL_LAYERS[variant], full_final_layer))
    # The kernel probe's rule, in its units (entries near zero judged against max |full| / 20): the residual
    # sums cancel, so an elementwise relative bound would hold small entries to a rounding of terms far larger
    # than themselves. The head layer has two rounded steps (attention, then the feed-forward), each allowed
    # KERNEL_ROUNDING_BOUND units: hypothesis found 2.008 units in float16, over one step's bound but within
    # the gate's. Computing in the half dtype gives hundreds.
    error = rounding_error(pruned.astype(getattr(mx, dtype)), full.astype(getattr(mx, dtype)),
                           np.ones(pruned.shape, dtype=bool))
    assert error / ROUNDING_STEPS["final_head_layer"] <= KERNEL_ROUNDING_BOUND


def test_split_projection_refuses_a_quantized_in_proj():
    layer = HeadLayer(128)
    layer.self_attn.in_proj = nn.QuantizedLinear.from_linear(layer.self_attn.in_proj, group_size=64, bits=8)
    valid, select = marker_layout([(8, 2)], 0, 2)
    with pytest.raises(TypeError, match="in_proj"):
        split_projection_final_layer(layer, mx.zeros((1, 8, 128)), key_padding_mask(valid), select)


# ----------------------------------------------------------------------------- FLOP report


@pytest.mark.parametrize("arch, length, fused, split", [
    ("laya-large", 93, 2.44, 2.70), ("laya-large", 512, 2.60, 2.86),
    ("laya-multilingual", 93, 4.03, 4.47), ("laya-multilingual", 1024, 4.22, 4.58),
])
def test_flop_share_reproduces_the_spec_table(arch, length, fused, split):
    encoder, agent = architecture(arch)
    shapes = [(1, length, 4)]  # R = 5
    assert round(100 * flop_reduction(encoder, agent.head_layers, shapes, "selected_q")["share"], 2) == fused
    assert round(100 * flop_reduction(encoder, agent.head_layers, shapes, "split_projection")["share"], 2) == split


def test_flop_reduction_sums_over_shapes_and_is_zero_without_head():
    encoder, _ = architecture("tiny")
    one = flop_reduction(encoder, 2, [(2, 64, 3)], "selected_q")
    two = flop_reduction(encoder, 2, [(2, 64, 3), (2, 64, 3)], "selected_q")
    assert two["saved_flops"] == 2 * one["saved_flops"] and two["share"] == pytest.approx(one["share"])
    assert one["saved_flops"] == saved_flops(128, 2, 64, 4, "selected_q") \
        == 18 * 2 * 60 * 128**2 + 4 * 2 * 64 * 60 * 128
    assert flop_reduction(encoder, 0, [(2, 64, 3)], "selected_q")["saved_flops"] == 0
    with pytest.raises(ValueError, match="shapes"):
        flop_reduction(encoder, 2, [(2, 64)], "selected_q")
    with pytest.raises(ValueError, match="variant"):
        saved_flops(128, 1, 10, 2, "fused")


@pytest.mark.parametrize("values", [{"variant": "fused"}, {"variant": 3}, {"rows": 5}])
def test_bad_config_raises_naming_the_field(values):
    with pytest.raises(ValueError, match="variant" if "variant" in values else "rows"):
        parse(HeadPruneFinalConfig, values, "head_prune_final")
    if "variant" in values:
        with pytest.raises(ValueError, match="variant"):
            HeadPruneFinalConfig(**values)


# ----------------------------------------------------------------------------- end to end


def tiny_runtime(tmp_path_factory, head_layers):
    path = write_tiny_checkpoint(tmp_path_factory.mktemp(f"prune{head_layers}") / "ckpt",
                                 encoder_overrides={"hidden_size": 128, "num_attention_heads": 2,
                                                    "local_attention": 8},
                                 agent_overrides={"head_layers": head_layers})
    return load_runtime(path, "float32", batch_size=4)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return tiny_runtime(tmp_path_factory, 2)


OPTIONS = [f"option {index} hello" for index in range(12)]
REQUESTS = [
    EvalRequest("one", "hello " * 30, {"only": {"type": "choice", "instructions": "pick", "criteria": OPTIONS[:1]}}),
    EvalRequest("varied", "hello " * 50, {
        "many": {"type": "choice", "instructions": "pick one", "criteria": OPTIONS},
        "two": {"type": "choice", "instructions": "pick", "criteria": OPTIONS[:2]},
        "s": {"type": "score", "instructions": "rate", "criteria": ["low", "mid", "high"]},
        "n": {"type": "noul", "instructions": "is it"},
        "five": {"type": "choice", "instructions": "pick " * 5, "criteria": OPTIONS[:5]}}),
]


@pytest.mark.parametrize("variant", ["selected_q", "split_projection"])
def test_pass_is_exact_end_to_end_and_leaves_its_input_unchanged(runtime, variant):
    before = runtime_fingerprint(runtime)
    candidate = lo.apply(runtime, HeadPruneFinalConfig(variant=variant))
    assert runtime_fingerprint(runtime) == before and runtime.kernels.final_head_layer is full_final_layer
    assert candidate.kernels.final_head_layer is FINAL_LAYERS[variant]
    assert candidate.kernels.sliding_attention is runtime.kernels.sliding_attention
    metrics = compare(evaluate(runtime, REQUESTS), evaluate(candidate, REQUESTS)).metrics
    assert metrics["max_abs_dp"] <= 1e-5
    assert metrics["argmax_agreement"] == 1.0 and metrics["token_identity"] == 1.0
    assert candidate.applied == ("head_prune_final",) \
        and candidate.identity.startswith(runtime.identity + "+head_prune_final")
    report = candidate.info["head_prune_final"]
    assert report["variant"] == variant and report["pruned"] and 0 < report["at_max_len_r5"]["share"] < 1


def test_split_projection_pass_refuses_a_quantized_final_in_proj(runtime):
    model = clone_model(runtime.model)
    in_proj = model.head_layers[-1].self_attn.in_proj
    model.head_layers[-1].self_attn.in_proj = nn.QuantizedLinear.from_linear(in_proj, group_size=64, bits=8)
    with pytest.raises(ValueError, match="variant"):
        lo.apply(runtime.replace(model=model), HeadPruneFinalConfig(variant="split_projection"))


def test_without_head_layers_nothing_is_pruned(tmp_path_factory):
    runtime = tiny_runtime(tmp_path_factory, 0)
    candidate = lo.apply(runtime, HeadPruneFinalConfig())
    assert candidate.info["head_prune_final"]["pruned"] is False
    assert candidate.info["head_prune_final"]["at_max_len_r5"]["saved_flops"] == 0
    metrics = compare(evaluate(runtime, REQUESTS[:1]), evaluate(candidate, REQUESTS[:1])).metrics
    assert metrics["max_abs_dp"] == 0.0
