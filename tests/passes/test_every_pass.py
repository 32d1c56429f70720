"""Every built-in pass through the real pipeline and its default gates, in every candidate dtype, on a tiny suite."""
from __future__ import annotations

import pytest
from fake_passes import write_tiny_suite

from laya_opt.suites.suite_file import load_suite
from laya_opt.passes import pass_modules
from laya_opt.runs.pipeline import Pipeline
from laya_opt.core.runtime import load_runtime

# Settings that fit the tiny model (D 128, I 96, window 4); every other pass runs with its defaults.
CONFIGS = {"quantize_encoder": {"bits": 8, "group_size": 32}, "local_window_attention": {"block_size": 8},
           "compile_buckets": {"multiple": 16}}
PASSES = [module.PASS for module in pass_modules() if module.PASS.name != "cast_dtype"]  # cast_dtype is stage 0
# MLX's CPU matmul on packed half-precision weights is slow: those two runs are opt-in (-m slow).
CASES = [pytest.param(spec, dtype, id=f"{spec.name}-{dtype}",
                      marks=[pytest.mark.slow] if not spec.exact and dtype != "float32" else [])
         for spec in PASSES for dtype in ("float32", "float16", "bfloat16")]


@pytest.fixture(scope="module")
def reference(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=2)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return load_suite(write_tiny_suite(tmp_path_factory.mktemp("suite") / "tiny.jsonl", records=3))


@pytest.mark.parametrize("spec, dtype", CASES)
def test_every_built_in_pass_passes_its_default_gates(reference, suite, spec, dtype):
    result = Pipeline([(spec, CONFIGS.get(spec.name, {}), "stop")], candidate_dtype=dtype).run(reference, suite)
    failed = [(stage.name, comparison, gate.message) for stage in result.stages for comparison, gate in
              stage.failed_gates]
    assert failed == [] and [stage.verdict for stage in result.stages] == ["accepted", "accepted"]
    stage = result.stages[1]
    assert stage.exact == spec.exact and stage.runtime.applied == ("cast_dtype", spec.name)
    gated = {result.gate.metric for result in stage.incremental_gates + stage.cumulative_gates if not result.skipped}
    drift = ("max_abs_dp", "max_abs_dlogit", "kl_logits_max") if spec.exact else \
        ("p99_abs_dp", "p99_abs_dlogit", "p99_kl_logits", "decisive_flips", "near_tie_flips", "mcnemar_p")
    assert {*drift, "token_identity", "deterministic"} <= gated
    assert ("capture_max_abs_dlogit" in gated) == bool(spec.captures)
    assert ("kernel_rounding_error" in gated) == (spec.exact and "kernels" in spec.replaces and dtype != "float32")
