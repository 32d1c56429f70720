"""fused_encoder: off CUDA every fused op takes its MLX fallback, so the pass is bit-identical; it says so."""
import pytest
from exactness import assert_runtimes_match

import laya_opt as lo
from laya_opt.core import fused
from laya_opt.core.runtime import load_runtime

VARIANTS = [{}, {"gemm": True}, {"rope": False}, {"norms": False, "geglu": False}]


def variant_id(settings: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in settings.items()) or "all"


# Every variant in float32, and every fallback op at once in each half dtype; a partial variant in half
# precision only switches ops back to the reference path already tested, so those run with -m slow.
CASES = [pytest.param(settings, dtype, id=f"{variant_id(settings)}-{dtype}",
                      marks=() if dtype == "float32" or not settings else pytest.mark.slow)
         for settings in VARIANTS for dtype in ("float32", "float16", "bfloat16")]


@pytest.mark.parametrize("settings, dtype", CASES)
def test_pass_is_bit_identical_on_the_fallback_across_shapes_and_dtypes(wide_checkpoint_dir, dtype, settings):
    runtime = load_runtime(wide_checkpoint_dir, dtype, batch_size=4)
    candidate = lo.apply(runtime, "fused_encoder", **settings)
    assert_runtimes_match(runtime, candidate)


def test_the_report_names_each_ops_path_and_why(wide_checkpoint_dir):
    candidate = lo.apply(load_runtime(wide_checkpoint_dir), lo.passes.FusedEncoderConfig(gemm=True))
    report = candidate.info["fused_encoder"]
    assert set(report["ops"]) == {"add_layer_norm", "qkv_rope", "geglu", "linear"}
    for op, path in report["ops"].items():
        assert path["implementation"] == fused.implementation(op) == "mlx_fallback"  # no CUDA here
        assert path["reason"]
    assert "add_layer_norm mlx_fallback" in report["summary"]
    assert "linear" not in lo.apply(load_runtime(wide_checkpoint_dir), "fused_encoder").info["fused_encoder"]["ops"]


def test_stacks_with_banded_attention_pruning_quantization_and_compile(wide_checkpoint_dir):
    runtime = load_runtime(wide_checkpoint_dir, "float32", batch_size=4)
    quantized = lo.apply(runtime, "quantize_encoder", bits=8, group_size=32)
    base = lo.apply(lo.apply(quantized, "local_window_attention", block_size=8), "head_prune_final")
    fused_stack = lo.apply(base, "fused_encoder", gemm=True)  # packed Linears keep their own kernel
    assert_runtimes_match(base, fused_stack)
    compiled = lo.apply(fused_stack, "compile_buckets", multiple=16)
    assert_runtimes_match(fused_stack, compiled, bit_identical=False, atol=2e-5)
