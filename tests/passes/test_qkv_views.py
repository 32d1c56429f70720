"""qkv_views: q, k, v sliced as views, no Gather, same values."""
import mlx.core as mx
import pytest
from exactness import assert_runtimes_match

import laya_opt as lo
from laya_opt.core.model import reference_self_attention
from laya_opt.passes.qkv_views import view_self_attention
from laya_opt.core.runtime import load_runtime


def primitives(array) -> list[str]:
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".dot") as handle:
        mx.export_to_dot(handle.name, array)
        return [line.split('label ="')[1].split('"')[0] for line in open(handle.name) if 'label ="' in line]


def test_the_split_is_a_slice_not_a_gather():
    qkv = mx.zeros((2, 5, 3, 4, 8))
    mx.eval(qkv)
    transposed = qkv.transpose(2, 0, 3, 1, 4)
    assert "Gather" in primitives(transposed[0]) and "Gather" not in primitives(transposed[0, ...])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_pass_is_bit_identical_across_shapes_and_dtypes(wide_checkpoint_dir, dtype):
    runtime = load_runtime(wide_checkpoint_dir, dtype, batch_size=4)
    candidate = lo.apply(runtime, lo.passes.QkvViewsConfig())
    assert candidate.kernels.self_attention is view_self_attention
    assert runtime.kernels.self_attention is reference_self_attention
    assert candidate.info["qkv_views"]["gathers_removed_per_forward"] == 3 * runtime.encoder_config.num_hidden_layers
    assert_runtimes_match(runtime, candidate)
