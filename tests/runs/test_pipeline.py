"""Pipeline: the baseline step, reject/stop, token identity, contract and ordering checks, the reference check."""
from __future__ import annotations

import copy
import dataclasses

import pytest
from fake_passes import (BROKEN, CAPTURE, EXPLODE, MUTATIONS, NOISY, NOTE, REPLACE_MODEL, REQUESTS, REVERSE,
                         ROUND_ONCE, SNEAKY, NoiseConfig, mutating_spec, write_tiny_suite)

from laya_opt.util.errors import InputError
from laya_opt.fidelity.gates import Gate, check_gates, load_gates_file
from laya_opt.passes.contract import fingerprint_changes, runtime_fingerprint
from laya_opt.passes.registry import get_pass
from laya_opt.runs.pipeline import Pipeline, PipelineError
from laya_opt.runs.steps import GateSet, Step, merge_gates
from laya_opt.core.runtime import load_runtime

@pytest.fixture
def reference(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32")


def run(steps, reference, requests=REQUESTS, dtype="float32", **kwargs):
    # float32 candidates: the tiny random model's near-tie answers must not depend on half-precision rounding.
    return Pipeline(steps, candidate_dtype=dtype, **kwargs).run(reference, requests)


def failed_metrics(stage) -> set[str]:
    return {result.gate.metric for _, result in stage.failed_gates}


# ----------------------------------------------------------------------------------------------------------- tests


def test_baseline_is_a_cast_step_and_an_exact_pass_is_accepted_with_its_report(reference):
    result = run([(NOTE, {"note": "hi"}, "stop")], reference)
    baseline, note = result.stages
    assert (baseline.name, baseline.verdict, baseline.parent) == ("baseline", "accepted", None)
    assert baseline.config == {"dtype": "float32"} and baseline.exact
    assert baseline.incremental is baseline.cumulative  # stage 0 compares with the reference once
    assert note.verdict == "accepted" and note.parent == 0
    assert note.incremental.metrics["max_abs_dp"] == 0.0  # nothing changed vs the previous stage
    assert note.report == {"text": "hi"} and result.final_runtime.info["note"] == {"text": "hi"}
    assert {r.gate.metric for r in note.incremental_gates} >= {"token_identity", "deterministic", "finite"}
    assert result.final_runtime.applied == ("cast_dtype", "note") and not result.gates_failed
    assert result.final_runtime.identity.endswith("+cast_dtype(dtype=float32)+note(note=hi)")


def test_a_half_precision_baseline_casts_a_clone_and_leaves_the_reference(reference):
    unlabelled = [dataclasses.replace(request, labels=None) for request in REQUESTS]
    result = run([], reference, unlabelled, dtype="float16")
    candidate = result.stages[0].runtime
    assert candidate.dtype.size == 2 and reference.dtype.size == 4 and not result.stages[0].exact
    assert candidate.model is not reference.model and candidate.model.scorer.layers[1].weight.dtype.size == 2


def _float16_exact_bound(bound: float):
    """The bundled gates with the float16 exact max |dp| bound set to `bound`."""
    bundled = load_gates_file("standin")
    table = bundled.gates["float16"]
    gates = tuple(dataclasses.replace(gate, threshold=bound) if gate.metric == "max_abs_dp" else gate
                  for gate in table.exact_incremental)
    return dataclasses.replace(bundled, gates={**bundled.gates,
                                               "float16": dataclasses.replace(table, exact_incremental=gates)})


def test_a_kernel_that_rounds_once_is_judged_by_its_distance_to_the_reference(reference):
    # Every encoder layer in float32, rounded once: about 4e-4 from its float16 parent on the tiny model, yet
    # closer to the float32 reference. A bound of 1e-4 stands for the stand-in's float16 bound (9.8e-4), which
    # the same change exceeds there (1.8e-3 from the parent on 24 `gate` requests, 1.6e-3 closer to float32).
    gates_file = _float16_exact_bound(1e-4)
    rounded = run([(ROUND_ONCE, {}, "reject")], reference, dtype="float16", gates_file=gates_file).stages[1]
    metrics = rounded.incremental.metrics
    assert rounded.verdict == "accepted", rounded.failed_gates
    assert metrics["max_abs_dp"] > 1e-4 and metrics["ref_excess_max_abs_dp"] < 0 and metrics["decisive_flips"] == 0
    assert metrics["kernel_rounding_error"] == 0.0   # the encoder stack alone: judged end to end, not probed
    exact = gates_file.gates["float16"].exact_incremental   # what judged it before: the drift from the parent
    assert [r.gate.metric for r in check_gates(metrics, exact) if not r.passed] == ["max_abs_dp"]
    # The same kernel 2% off: no decisive change either, but farther from the reference than its parent.
    skewed = run([(ROUND_ONCE, {"skew": 0.02}, "reject")], reference, dtype="float16",
                 gates_file=gates_file).stages[1]
    assert skewed.verdict == "rejected" and skewed.incremental.metrics["decisive_flips"] == 0
    assert failed_metrics(skewed) == {"ref_excess_p99_abs_dp"}
    assert skewed.incremental.metrics["ref_excess_max_abs_dp"] > 1e-4   # farther at the max too: reported


def test_the_worst_question_is_judged_against_the_farther_of_the_parent_and_the_cast(reference):
    # round_once, then the same rounding at another place in each layer (no worse): the second stage's max
    # |dp| from the reference is measured beyond the larger of its parent's and stage 0's (the float16 cast).
    result = run([(ROUND_ONCE, {}, "reject"), (ROUND_ONCE, {"place": "midlayer"}, "reject")], reference,
                 dtype="float16")
    cast, parent, stage = (s.cumulative.metrics for s in result.stages)
    excess = result.stages[2].incremental.metrics
    assert cast["max_abs_dp"] > parent["max_abs_dp"] > 0.0   # the parent rounds once: closer than the cast
    assert excess["ref_excess_max_abs_dp"] == pytest.approx(stage["max_abs_dp"] - cast["max_abs_dp"])
    assert excess["ref_excess_p99_abs_dp"] == pytest.approx(stage["p99_abs_dp"] - parent["p99_abs_dp"])
    assert result.stages[2].verdict == "accepted", result.stages[2].failed_gates
    assert result.stages[1].incremental.metrics["ref_excess_max_abs_dp"] == pytest.approx(
        parent["max_abs_dp"] - cast["max_abs_dp"])   # a child of stage 0: its parent is the cast


def test_a_half_precision_compile_is_gated_by_its_distance_to_the_reference(reference):
    # compile_buckets replaces the forward: in float16 its drift from the parent is a diagnostic (its generated
    # kernels round otherwise on CUDA) and it has no kernel probe; in float32 the exact bounds decide.
    half = run([(get_pass("compile_buckets"), {}, "reject")], reference, dtype="float16").stages[1]
    gates = {result.gate.metric: result for result in half.incremental_gates}
    assert half.verdict == "accepted", half.failed_gates
    assert gates["max_abs_dp"].gate.diagnostic and not gates["ref_excess_p99_abs_dp"].gate.diagnostic
    assert {"ref_excess_p99_abs_dp", "capture_max_abs_dlogit"} <= set(gates) and "kernel_rounding_error" not in gates
    full = run([(get_pass("compile_buckets"), {}, "reject")], reference).stages[1]
    assert not {result.gate.metric: result for result in full.incremental_gates}["max_abs_dp"].gate.diagnostic


def test_corrupting_pass_is_rejected_and_the_run_continues_from_its_parent(reference):
    result = run([(NOISY, {}, "reject"), (NOTE, {}, "stop")], reference)
    assert [s.verdict for s in result.stages] == ["accepted", "rejected", "accepted"]
    noisy, note = result.stages[1:]
    assert "max_abs_dp" in failed_metrics(noisy) and noisy.runtime is None
    assert note.parent == 0 and result.final_runtime.applied == ("cast_dtype", "note")
    assert result.gates_failed


def test_corrupting_pass_with_stop_ends_the_run(reference):
    result = run([(NOISY, {}, "stop"), (NOTE, {}, "stop")], reference)
    assert [s.verdict for s in result.stages] == ["accepted", "stopped"]
    assert result.final_runtime is result.stages[0].runtime
    assert result.planned == ("baseline", "noisy_scorer", "note")


def test_reordered_tokens_fail_token_identity(reference):
    result = run([(REVERSE, {}, "reject")], reference)
    stage = result.stages[1]
    assert stage.verdict == "rejected"
    assert "token_identity" in failed_metrics(stage)
    assert stage.incremental.metrics["token_identity"] < 1.0
    assert stage.cumulative.first_token_mismatch == "r0/topic"


def test_gate_overrides_replace_the_default_on_the_same_metric(reference):
    drift = (Gate("max_abs_dp", "<=", 1.0), Gate("max_abs_dlogit", "<=", 100.0), Gate("kl_logits_max", "<=", 10.0),
             Gate("argmax_flips", "<=", 10.0))
    lax = GateSet(incremental=drift, cumulative=drift + (Gate("accuracy_delta", ">=", -1.0, requires_labels=True),))
    result = run([Step(NOISY, NoiseConfig(), "stop", lax)], reference)
    assert result.stages[1].verdict == "accepted"
    assert sum(r.gate.metric == "max_abs_dp" for r in result.stages[1].incremental_gates) == 1
    replaced = next(r.gate for r in result.stages[1].incremental_gates if r.gate.metric == "max_abs_dp")
    # The override says where it came from, and the measured noise floor of the metric is still shown.
    assert replaced.derivation == "set by the experiment" and replaced.noise_floor is not None
    merged = merge_gates((Gate("finite", "==", 1.0), Gate("max_abs_dp", "<=", 1e-4)), (Gate("max_abs_dp", "<=", 0.5),))
    assert merged == (Gate("finite", "==", 1.0), Gate("max_abs_dp", "<=", 0.5))
    assert GateSet(cumulative=["max_abs_dp <= 0.5"]).cumulative == (Gate("max_abs_dp", "<=", 0.5),)


@pytest.mark.parametrize("how", sorted(MUTATIONS))
def test_a_pass_that_mutates_its_input_is_an_error(reference, how):
    with pytest.raises(PipelineError, match="mutated its input runtime") as caught:
        run([(mutating_spec(MUTATIONS[how]), {}, "reject")], reference)
    assert [s.verdict for s in caught.value.partial.stages] == ["accepted", "error"]


def test_a_pass_changing_a_part_it_did_not_declare_is_an_error(reference):
    with pytest.raises(PipelineError, match="'sneaky_codec' changed codec without declaring it"):
        run([(SNEAKY, {}, "reject")], reference)


def test_fingerprint_sees_each_mutation(tiny_checkpoint_dir):
    for how, mutate in MUTATIONS.items():
        runtime = load_runtime(tiny_checkpoint_dir)
        before = runtime_fingerprint(runtime)
        mutate(runtime)
        assert fingerprint_changes(before, runtime_fingerprint(runtime)), how


def test_a_raising_pass_ends_the_run_with_an_error_stage(reference):
    with pytest.raises(PipelineError, match="'explode' \\(stage 2\\) raised RuntimeError: boom") as caught:
        run([(NOTE, {}, "stop"), (EXPLODE, {}, "reject"), (NOTE, {}, "stop")], reference)
    stages = caught.value.partial.stages
    assert [s.verdict for s in stages] == ["accepted", "accepted", "error"]
    assert isinstance(caught.value.__cause__, RuntimeError)
    # a Ray worker copies the exception its trial raised (copy.copy rebuilds it): message and partial survive
    copied = copy.copy(caught.value)
    assert type(copied) is PipelineError and str(copied) == str(caught.value)
    assert copied.partial is caught.value.partial


def test_capture_then_replace_is_refused_before_anything_runs():
    calls = []
    spy = dataclasses.replace(REPLACE_MODEL, apply=lambda runtime, config, data: calls.append(config))
    with pytest.raises(ValueError, match="'replace_model' replaces the model that 'capture_model' captured"):
        Pipeline([(CAPTURE, {}, "stop"), (spy, {}, "stop")])
    assert calls == []
    Pipeline([(spy, {}, "stop"), (CAPTURE, {}, "stop")])  # the legal order is accepted


def test_bad_steps_name_the_pass():
    with pytest.raises(ValueError, match="noisy_scorer: on_fail must be one of"):
        Pipeline([(NOISY, {}, "ignore")])
    with pytest.raises(ValueError, match="noisy_scorer.scale: expected a number"):
        Pipeline([(NOISY, {"scale": "big"})])
    with pytest.raises(TypeError, match="a pipeline step must be"):
        Pipeline([("noisy_scorer", {})])


def test_a_reference_in_another_dtype_than_declared_is_refused(tiny_checkpoint_dir, reference):
    half = load_runtime(tiny_checkpoint_dir, "float16")
    with pytest.raises(InputError, match="the reference runtime is float16, but the run declares a float32"):
        Pipeline([]).run(half, REQUESTS, reference_dtype="float32")
    mixed = reference.replace(model=half.model)  # says float32, holds float16 weights
    with pytest.raises(InputError, match="float32 reference holds weights in another dtype"):
        Pipeline([]).run(mixed, REQUESTS)


def test_run_accepts_a_suite_file(reference, tmp_path):
    from laya_opt.suites.suite_file import load_suite

    suite = load_suite(write_tiny_suite(tmp_path / "tiny.jsonl", records=2))
    result = run([], reference, suite)
    assert [q.key for q in result.stages[0].cumulative.questions][:3] == ["r0/topic", "r0/level", "r0/yes"]
    assert result.stages[0].cumulative.questions[0].tags["language"] == "en"
    assert result.stages[0].cumulative.metrics["labelled"] == 6.0


def test_a_stage_whose_runtime_raises_while_answering_fails_and_the_run_goes_on(reference):
    result = run([(BROKEN, {}, "reject"), (NOTE, {}, "stop")], reference)
    assert [s.verdict for s in result.stages] == ["accepted", "rejected", "accepted"]
    broken = result.stages[1]
    assert broken.error == "evaluation raised RuntimeError: kernel launch failed" and not broken.gates_passed
    assert result.stages[2].parent == 0
    stopped = run([(BROKEN, {}, "stop"), (NOTE, {}, "stop")], reference)
    assert [s.verdict for s in stopped.stages] == ["accepted", "stopped"]


def test_the_default_gates_come_from_the_gates_file_the_pipeline_is_given(reference, tmp_path):
    import laya_opt as lo
    from laya_opt.fidelity.gates import load_gates_file

    suite = lo.load_suite(str(write_tiny_suite(tmp_path / "tiny.jsonl", records=1)))
    for name in ("spec", "standin"):
        result = lo.run_pipeline(reference, [(NOTE, {})], suite=suite, dtype="float32", gates_file=name)
        note = result.stages[1]
        assert [r.gate for r in note.incremental_gates] == \
            list(load_gates_file(name).gates["float32"].exact_incremental)
    assert Pipeline([], gates_file="spec").gates_file is load_gates_file("spec")
