"""Stage reuse: a pass that changes no output-determining part reuses its parent's outputs after a sample re-run;
one that changes weights is evaluated in full; a hidden change is caught by the re-run and ends the run."""
from __future__ import annotations

import pytest
from fake_passes import NOISY, NOTE, REQUESTS, EmptyConfig

from laya_opt.core.runtime import eager_forward, load_runtime
from laya_opt.passes.contract import PassSpec
from laya_opt.runs.pipeline import Pipeline, PipelineError
from laya_opt.util.errors import InputError


@pytest.fixture
def reference(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32")


def run(steps, reference, **kwargs):
    return Pipeline(steps, candidate_dtype="float32", **kwargs).run(reference, REQUESTS)


def test_a_pass_that_changes_nothing_is_reused_and_its_sample_re_run(reference):
    result = run([(NOTE, {}, "stop")], reference, rerun=2)
    baseline, note = result.stages
    for stage, source in ((baseline, None), (note, 0)):
        path = stage.eval_path
        assert (path.kind, path.source, path.changed) == ("reused", source, ())
        assert path.rerun.requests == 2 and path.rerun.identical and len(path.rerun.keys) == 6
        assert "reused from" in path.describe() and "sample of 2 requests re-run" in path.describe()
    assert note.verdict == "accepted" and note.incremental.metrics["deterministic"] == 1.0
    assert note.incremental.metrics["max_abs_dp"] == 0.0 and note.cumulative.candidate_identity == note.identity
    assert result.rerun == 2


def test_a_pass_that_changes_weights_is_evaluated_in_full(reference):
    result = run([(NOISY, {"scale": 0.01}, "reject")], reference, rerun=2)
    path = result.stages[1].eval_path
    assert (path.kind, path.changed, path.rerun.requests) == ("evaluated", ("model",), 2)
    assert len(result.stages[1].cumulative.questions) == 3 * len(REQUESTS)
    assert "evaluated (changed: model" in path.describe()


def test_rerun_zero_evaluates_in_full_and_measures_no_determinism(reference):
    result = run([(NOTE, {}, "stop")], reference, rerun=0)
    baseline = result.stages[0]  # nothing to check a reuse with, so evaluated; the missing metric fails its gate
    assert (baseline.eval_path.kind, baseline.eval_path.rerun, baseline.verdict) == ("evaluated", None, "stopped")
    assert "deterministic" in {r.gate.metric for _, r in baseline.failed_gates}


class Flag:
    noisy = False


def flag_forward(model, kernels, batch):
    """Reads a global flag: a change that no runtime part shows."""
    logits, action = eager_forward(model, kernels, batch)
    return (logits + 1e-3 if Flag.noisy else logits), action


def flip_flag(runtime, config, data):
    Flag.noisy = True
    return runtime, {}


FLIP = PassSpec(name="flip_flag", config_type=EmptyConfig, apply=flip_flag, exact=True,
                description="test: changes answers through global state", replaces=frozenset())


def test_a_hidden_change_is_caught_by_the_re_run_with_an_error_naming_the_stage(reference):
    Flag.noisy = False
    try:
        with pytest.raises(PipelineError, match=r"stage 1 \(flip_flag\).*differ bit for bit") as caught:
            run([(FLIP, {}, "stop")], reference.replace(forward=flag_forward), rerun=1)
    finally:
        Flag.noisy = False
    failed = caught.value.partial.stages[-1]
    assert failed.verdict == "error" and failed.eval_path.kind == "reused" and not failed.eval_path.rerun.identical


def test_a_non_deterministic_pass_fails_the_deterministic_gate(reference):
    counter = iter(range(10**6))

    def drifting(model, kernels, batch):
        logits, action = eager_forward(model, kernels, batch)
        return logits + 1e-3 * next(counter), action

    spec = PassSpec(name="drifting_forward", config_type=EmptyConfig, exact=True, description="test: drifts",
                    apply=lambda runtime, config, data: (runtime.replace(forward=drifting), {}),
                    replaces=frozenset({"forward"}))
    result = run([(spec, {}, "reject")], reference, rerun=1)
    stage = result.stages[1]
    assert stage.eval_path.kind == "evaluated" and not stage.eval_path.rerun.identical
    assert stage.verdict == "rejected" and "deterministic" in {r.gate.metric for _, r in stage.failed_gates}


@pytest.mark.parametrize("bad", [-1, 2.0, "128", True])
def test_a_bad_rerun_is_refused_before_anything_runs(bad):
    with pytest.raises(InputError, match="rerun must be a non-negative integer"):
        Pipeline([], candidate_dtype="float32", rerun=bad)
