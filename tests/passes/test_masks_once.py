"""masks_once: additive masks built once per forward equal what SDPA makes of the boolean ones."""
import mlx.core as mx
import numpy as np
import pytest
from exactness import assert_runtimes_match

import laya_opt as lo
from laya_opt.core.model import boolean_masks, key_padding_mask, sliding_mask
from laya_opt.passes.masks_once import additive_masks
from laya_opt.core.runtime import load_runtime


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_masks_are_zero_where_allowed_and_minus_infinity_elsewhere(dtype):
    valid = mx.array([[True] * 7 + [False] * 3, [True] * 10])
    ctx = additive_masks(valid, 2, dtype)
    assert ctx.key_mask.dtype == dtype and ctx.sliding_mask.shape == (2, 1, 10, 10)
    for additive, boolean in ((ctx.key_mask, key_padding_mask(valid)), (ctx.sliding_mask, sliding_mask(valid, 2))):
        values, allowed = np.array(additive.astype(mx.float32)), np.array(boolean)
        assert np.all(values[allowed] == 0) and np.all(np.isneginf(values[~allowed]))
    assert boolean_masks(valid, 2, dtype).sliding_mask is None  # the reference builds it per layer


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_pass_is_bit_identical_across_shapes_and_dtypes(wide_checkpoint_dir, dtype):
    runtime = load_runtime(wide_checkpoint_dir, dtype, batch_size=4)
    candidate = lo.apply(runtime, lo.passes.MasksOnceConfig())
    assert candidate.kernels.attention_masks is additive_masks and runtime.kernels.attention_masks is boolean_masks
    assert_runtimes_match(runtime, candidate)


def test_composes_with_banded_attention_and_compile(wide_checkpoint_dir):
    runtime = load_runtime(wide_checkpoint_dir, "float32", batch_size=4)
    banded = lo.apply(runtime, "local_window_attention", block_size=8)
    stacked = lo.apply(lo.apply(banded, "masks_once"), "compile_buckets", multiple=16)
    assert_runtimes_match(banded, stacked, bit_identical=False, atol=2e-5)
