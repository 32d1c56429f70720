"""The capture probe: a pass that freezes the wrong model or kernels is seen on outputs, an honest one is not."""
from __future__ import annotations

import pytest
from fake_passes import REQUESTS, GroupConfig

from laya_opt.fidelity.capture_probe import capture_drift, probe_kernels, probe_model, probed_parent
from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.metrics import compare
from laya_opt.core.model import DEFAULT_KERNELS
from laya_opt.passes.contract import PassSpec
from laya_opt.runs.pipeline import Pipeline
from laya_opt.passes.registry import get_pass
from laya_opt.core.runtime import eager_forward, load_runtime

COMPILE = get_pass("compile_buckets")


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=4)


def default_kernel_forward(runtime, config, data):
    """The audit's bug: a captured forward that runs the model's default kernels, not the runtime's."""
    return runtime.replace(forward=lambda model, kernels, batch: eager_forward(runtime.model, DEFAULT_KERNELS,
                                                                               batch)), {}


FORGETFUL = PassSpec(name="forgetful_compile", config_type=GroupConfig, apply=default_kernel_forward, exact=True,
                     description="test: captures model and kernels, then runs the defaults",
                     replaces=frozenset({"forward"}), captures=frozenset({"model", "kernels"}))


def test_the_probe_is_visible_on_outputs(runtime):
    base = evaluate(runtime, REQUESTS)
    for parts in ({"kernels"}, {"model"}):
        probed = probed_parent(runtime, frozenset(parts))
        assert probed.identity != runtime.identity
        assert compare(base, evaluate(probed, REQUESTS)).metrics["max_abs_dp"] > 1e-2
    assert probe_kernels(DEFAULT_KERNELS).action_dtype == DEFAULT_KERNELS.action_dtype
    assert probe_model(runtime.model) is not runtime.model  # a clone: the input keeps its arrays


def test_compile_honours_what_it_captured(runtime):
    drift = capture_drift(COMPILE, COMPILE.make_config({"multiple": 16}), {}, runtime, REQUESTS)
    assert drift is not None and drift <= 1e-5


def test_a_pass_that_drops_the_captured_kernels_is_seen(runtime):
    assert capture_drift(FORGETFUL, GroupConfig(), {}, runtime, REQUESTS) > 1e-2
    assert capture_drift(get_pass("head_prune_final"), get_pass("head_prune_final").make_config({}), {}, runtime,
                         REQUESTS) is None  # it captures nothing


def test_the_pipeline_gates_the_capture_probe(runtime):
    result = Pipeline([(get_pass("head_prune_final"), {}, "stop"), (FORGETFUL, {}, "reject"),
                       (COMPILE, {"multiple": 16}, "stop")], candidate_dtype="float32").run(runtime, REQUESTS)
    forgetful, compiled = result.stages[2:]
    # Head pruning is exact, so dropping it moves no output: only the probe tells.
    assert forgetful.verdict == "rejected"
    assert [result.gate.metric for _, result in forgetful.failed_gates] == ["capture_max_abs_dlogit"]
    assert compiled.verdict == "accepted" and compiled.incremental.metrics["capture_max_abs_dlogit"] <= 1e-5
    assert "capture_max_abs_dlogit" not in result.stages[1].incremental.metrics
