"""Banded sliding attention: kernel equals the dense band mask, the pass is exact end to end."""
import dataclasses

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import laya_opt as lo
from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.metrics import compare
from laya_opt.core.model import (AttentionInputs, dense_sliding_attention, global_attention, key_padding_mask, sdpa,
                                 sliding_mask)
from laya_opt.util.schema import parse
from laya_opt.passes.contract import runtime_fingerprint
from laya_opt.core.runtime import load_runtime
from laya_opt.passes.local_window_attention import (LocalWindowAttentionConfig, attention_pairs, banded_attention,
                                                    block_masks, make_local_window_attention)



def random_attention(seed, batch, heads, length, head_dim, lengths):
    rng = np.random.default_rng(seed)
    q, k, v = (mx.array(rng.standard_normal((batch, heads, length, head_dim)).astype(np.float32)) for _ in range(3))
    valid = mx.array(np.arange(length)[None, :] < np.asarray(lengths)[:, None])
    return q, k, v, valid


def valid_rows(out, valid):
    """[B, H, L, hd] -> the rows of valid queries, [n_valid, H, hd]."""
    return np.array(out).transpose(0, 2, 1, 3)[np.array(valid)]


attention_shapes = st.integers(1, 3).flatmap(lambda batch: st.tuples(
    st.just(batch), st.integers(1, 2), st.integers(1, 80), st.sampled_from([2, 4, 8]), st.integers(0, 20),
    st.integers(1, 40), st.lists(st.floats(0.0, 1.0), min_size=batch, max_size=batch), st.integers(0, 2**31 - 1)))


@settings(max_examples=60, deadline=None)
@given(attention_shapes)
def test_banded_equals_dense_band_mask_for_random_lengths_windows_blocks_and_padding(shape):
    batch, heads, length, head_dim, window, block_size, fractions, seed = shape
    lengths = [round(fraction * length) for fraction in fractions]
    q, k, v, valid = random_attention(seed, batch, heads, length, head_dim, lengths)
    out = banded_attention(q, k, v, valid, window, block_size, 0.5)
    reference = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=sliding_mask(valid, window))
    assert out.shape == q.shape
    assert np.all(np.isfinite(np.array(out))), "padded query rows must stay finite"
    # MLX's CPU kernel averages a fully masked row, fused GPU kernels give NaN: no mask row may be empty.
    _, mask = block_masks(valid, window, block_size, -(-length // block_size))
    assert np.all(np.array(mask).any(axis=-1))
    np.testing.assert_allclose(valid_rows(out, valid), valid_rows(reference, valid), atol=1e-5, rtol=0)


HALF_EPSILON = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


@settings(max_examples=20, deadline=None)
@given(attention_shapes, st.sampled_from(sorted(HALF_EPSILON)))
def test_banded_equals_dense_within_one_rounding_in_half_precision(shape, dtype):
    # Dense attention on half inputs runs in float32 on the CPU (model.sdpa): so must the banded kernel,
    # or its scores and softmax round in the half dtype, several units off where dense is within one.
    batch, heads, length, head_dim, window, block_size, fractions, seed = shape
    lengths = [round(fraction * length) for fraction in fractions]
    q, k, v, valid = (x.astype(getattr(mx, dtype)) if x.dtype == mx.float32 else x
                      for x in random_attention(seed, batch, heads, length, head_dim, lengths))
    out = banded_attention(q, k, v, valid, window, block_size, 0.5)
    reference = sdpa(q, k, v, scale=0.5, mask=sliding_mask(valid, window))
    assert out.dtype == q.dtype
    eps = HALF_EPSILON[dtype]
    np.testing.assert_allclose(valid_rows(out.astype(mx.float32), valid),
                               valid_rows(reference.astype(mx.float32), valid), rtol=eps, atol=eps / 20)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1), st.integers(1, 16))
def test_window_at_least_the_sequence_equals_full_attention(length, seed, block_size):
    lengths = [length, max(1, length // 2)]
    q, k, v, valid = random_attention(seed, 2, 2, length, 4, lengths)
    out = banded_attention(q, k, v, valid, length, block_size, 0.5)
    full = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=key_padding_mask(valid))
    np.testing.assert_allclose(valid_rows(out, valid), valid_rows(full, valid), atol=1e-5, rtol=0)


def test_padded_queries_far_from_any_valid_key_stay_finite():
    # Row 1 is entirely padding; row 0's padded tail lies several blocks beyond its last valid key.
    q, k, v, valid = random_attention(0, 2, 1, 64, 4, [3, 0])
    out = np.array(banded_attention(q, k, v, valid, 2, 4, 0.5))
    assert np.all(np.isfinite(out))


def test_min_length_keeps_the_dense_path_below_it():
    # Padded query rows tell the paths apart: dense gives them every valid key, banded only its slice.
    q, k, v, valid = random_attention(1, 1, 1, 48, 4, [6])
    ctx = AttentionInputs(valid=valid, key_mask=key_padding_mask(valid), window=2)
    dense = np.array(dense_sliding_attention(q, k, v, ctx, 0.5))
    kept = np.array(make_local_window_attention(
        LocalWindowAttentionConfig(block_size=8, min_length=49))(q, k, v, ctx, 0.5))
    banded = np.array(make_local_window_attention(
        LocalWindowAttentionConfig(block_size=8, min_length=48))(q, k, v, ctx, 0.5))
    assert np.array_equal(kept, dense)
    assert not np.allclose(banded[0, 0, 40:], dense[0, 0, 40:])
    np.testing.assert_allclose(banded[0, 0, :6], dense[0, 0, :6], atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(0, 70), st.integers(1, 64))
def test_pair_counts_match_brute_force(length, window, block_size):
    positions = np.arange(length)
    brute = int(np.sum(np.abs(positions[:, None] - positions[None, :]) <= window))
    pairs = attention_pairs(length, window, block_size)
    assert pairs["valid_pairs"] == brute
    assert pairs["dense_pairs"] == length * length
    assert pairs["computed_pairs"] == -(-length // block_size) * block_size * (block_size + 2 * window)


def test_pair_counts_follow_the_spec_formula_at_r64():
    pairs = attention_pairs(512, 64, 64)
    assert pairs["valid_pairs"] == 129 * 512 - 4160
    assert pairs["computed_pairs"] == 512 * (64 + 128)
    assert attention_pairs(100, 64, 64, min_length=200)["computed_pairs"] == 100 * 100


@pytest.mark.parametrize("values, field", [
    ({"block_size": 0}, "block_size"), ({"block_size": -3}, "block_size"), ({"min_length": -1}, "min_length"),
])
def test_bad_config_values_raise_naming_the_field(values, field):
    with pytest.raises(ValueError, match=field):
        LocalWindowAttentionConfig(**values)
    with pytest.raises(ValueError, match=field):
        parse(LocalWindowAttentionConfig, values, "local_window_attention")


@pytest.mark.parametrize("values, field", [({"block_size": True}, "block_size"), ({"min_length": "8"}, "min_length"),
                                           ({"window": 8}, "window")])
def test_wrong_types_and_unknown_keys_raise(values, field):
    with pytest.raises(ValueError, match=field):
        parse(LocalWindowAttentionConfig, values, "local_window_attention")


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    # w = 4 with sequences up to 128 tokens: most keys lie outside the band.
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=3)


REQUESTS = [
    EvalRequest("short", "hello", {"c": {"type": "choice", "instructions": "pick", "criteria": ["a", "b", "c"]}}),
    EvalRequest("mixed", "hello " * 70, {
        "c": {"type": "choice", "instructions": "pick one", "criteria": ["x", "y"]},
        "s": {"type": "score", "instructions": "rate " * 9, "criteria": ["low", "mid", "high"]},
        "n": {"type": "noul", "instructions": "is it"},
        "one": {"type": "choice", "instructions": "only", "criteria": ["single"]}}),
    EvalRequest("long", "hello " * 400, {"n": {"type": "noul", "instructions": "true?"}}),
]


@pytest.mark.parametrize("block_size, min_length", [(8, 0), (5, 0), (16, 60)])
def test_pass_is_exact_end_to_end_and_leaves_its_input_unchanged(runtime, block_size, min_length):
    before = runtime_fingerprint(runtime)
    candidate = lo.apply(runtime, LocalWindowAttentionConfig(block_size=block_size, min_length=min_length))
    assert runtime_fingerprint(runtime) == before
    assert runtime.kernels.sliding_attention is dense_sliding_attention and runtime.applied == ()
    metrics = compare(evaluate(runtime, REQUESTS), evaluate(candidate, REQUESTS)).metrics
    assert metrics["max_abs_dp"] <= 1e-5
    assert metrics["argmax_agreement"] == 1.0 and metrics["token_identity"] == 1.0
    # Only the sliding kernel changes: full layers and the head keep theirs.
    assert dataclasses.replace(candidate.kernels, sliding_attention=dense_sliding_attention) == runtime.kernels
    assert candidate.applied == ("local_window_attention",)
    assert candidate.identity.startswith(runtime.identity + "+local_window_attention")
    report = candidate.info["local_window_attention"]
    assert report["window"] == 4 and report["sliding_layers"] == 2 and report["block_size"] == block_size


def test_only_sliding_layers_use_the_kernel(runtime):
    seen = []

    def spy(q, k, v, ctx, scale):
        seen.append(q.shape)
        return global_attention(q, k, v, ctx, scale)

    prepared = runtime.prepare("hello " * 20, {"c": {"type": "choice", "instructions": "x", "criteria": ["a"]}})
    runtime.replace(kernels=dataclasses.replace(runtime.kernels, sliding_attention=spy)).execute(prepared)
    assert len(seen) == sum(kind == "sliding_attention" for kind in runtime.encoder_config.layer_types)
