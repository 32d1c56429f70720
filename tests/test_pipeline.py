"""Pipeline: baseline stage, reject/stop, token identity, mutation and ordering checks, built-in passes.

The test passes here are also a plugin module (`PASSES`) that experiment files in the other test
files import with `plugins: [test_pipeline]`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mlx.core as mx
import pytest

from fidelity.checker import EvalRequest
from fidelity.gates import Gate
from laya_opt.batching import insertion_order_planner
from laya_opt.passes_api import PassSpec
from laya_opt.pipeline import (GateSet, Pipeline, PipelineError, Step, fingerprint_changes, merge_gates,
                               runtime_fingerprint)
from laya_opt.registry import build_registry
from laya_opt.runtime import clone_model, load_runtime
from laya_opt.tokens import TextCodec

# ----------------------------------------------------------------------------------------------------------- test passes


@dataclass(frozen=True)
class NoiseConfig:
    scale: float = 5.0
    seed: int = 0


def add_scorer_noise(runtime, config):
    """Corrupts outputs on a clone: noise on the scorer's hidden bias changes every option's score."""
    model = clone_model(runtime.model)
    layer = model.scorer.layers[1]
    noise = config.scale * mx.random.normal(layer.bias.shape, key=mx.random.key(config.seed))
    layer.bias = layer.bias + noise.astype(layer.bias.dtype)
    return runtime.replace(model=model, applied=runtime.applied + ("noisy_scorer",),
                           identity=runtime.identity + "+noisy")


NOISY = PassSpec(name="noisy_scorer", config_type=NoiseConfig, apply=add_scorer_noise, exact=True,
                 description="test: adds noise to the scorer bias", replaces=frozenset({"model"}))


@dataclass(frozen=True)
class NoteConfig:
    note: str = "hello"


def leave_note(runtime, config):
    return runtime.replace(info={**runtime.info, "note": {"text": config.note}}, applied=runtime.applied + ("note",))


NOTE = PassSpec(name="note", config_type=NoteConfig, apply=leave_note, exact=True,
                description="test: changes nothing but runtime.info", replaces=frozenset({"planner"}))


@dataclass(frozen=True)
class ReversingCodec(TextCodec):
    """Reverses the ids of every tokenized piece: the model sees the same tokens in another order."""

    def encode(self, text: str) -> list[int]:
        return super().encode(text)[::-1]


@dataclass(frozen=True)
class EmptyConfig:
    pass


def reverse_tokens(runtime, config):
    codec = ReversingCodec(**{f.name: getattr(runtime.codec, f.name) for f in dataclasses.fields(runtime.codec)})
    return runtime.replace(codec=codec, applied=runtime.applied + ("reverse_tokens",))


REVERSE = PassSpec(name="reverse_tokens", config_type=EmptyConfig, apply=reverse_tokens, exact=True,
                   description="test: permutes token ids before the model", replaces=frozenset())


def explode(runtime, config):
    raise RuntimeError("boom")


EXPLODE = PassSpec(name="explode", config_type=EmptyConfig, apply=explode, exact=True,
                   description="test: raises", replaces=frozenset({"kernels"}))


@dataclass(frozen=True)
class GroupConfig:
    group_size: int = 64


def capture_model(runtime, config):
    return runtime.replace(forward=lambda model, kernels, batch: runtime.forward(model, kernels, batch))


CAPTURE = PassSpec(name="capture_model", config_type=GroupConfig, apply=capture_model, exact=True,
                   description="test: captures the model in a new forward", replaces=frozenset({"forward"}),
                   captures=frozenset({"model"}))
REPLACE_MODEL = PassSpec(name="replace_model", config_type=NoiseConfig, apply=add_scorer_noise, exact=False,
                         description="test: swaps the model", replaces=frozenset({"model"}))

PASSES = (NOISY, NOTE, REVERSE, EXPLODE, CAPTURE, REPLACE_MODEL)


def _swap_bias(runtime):
    layer = runtime.model.scorer.layers[1]
    layer.bias = layer.bias + 1.0


def _write_in_place(runtime):
    bias = runtime.model.scorer.layers[1].bias
    bias[0] = 100.0  # keeps the Python object: only the value check can see it


def _set_field(runtime):
    object.__setattr__(runtime, "planner", insertion_order_planner(1))


def _write_info(runtime):
    runtime.info["written"] = True


MUTATIONS = {"module attribute": _swap_bias, "array in place": _write_in_place, "runtime field": _set_field,
             "info entry": _write_info}


def mutating_spec(mutate) -> PassSpec:
    def apply(runtime, config):
        mutate(runtime)
        return runtime.replace()

    return PassSpec(name="mutator", config_type=EmptyConfig, apply=apply, exact=True,
                    description="test: mutates its input", replaces=frozenset({"model"}))


# ----------------------------------------------------------------------------------------------------------- fixtures

QUESTIONS = {
    "topic": {"type": "choice", "instructions": "pick hello", "criteria": ["a", "b", "c"]},
    "level": {"type": "score", "instructions": "rate hello", "criteria": ["low", "mid", "high"]},
    "yes": {"type": "noul", "instructions": "hello hello"},
}
# States start "hello hello x": reversing a piece's ids changes them (all other words map to [UNK]).
REQUESTS = tuple(EvalRequest(f"r{i}", "hello hello x " + "hello world " * (3 * i), QUESTIONS,
                             labels={"topic": "a", "level": 1, "yes": True})
                 for i in range(4))


def write_tiny_suite(path, name: str = "tiny", records: int = 3):
    """A labelled suite file in the fidelity format, built from REQUESTS-like records."""
    from fidelity.suites import QuestionTag, SuiteRecord, write_suite

    tags = {qid: QuestionTag(type=q["type"], language="en", options=len(q.get("criteria") or (0, 0)),
                             length_class="short") for qid, q in QUESTIONS.items()}
    rows = [SuiteRecord(id=f"r{i}", state=REQUESTS[i % len(REQUESTS)].state, questions=QUESTIONS,
                        labels=dict(REQUESTS[0].labels), tags=tags) for i in range(records)]
    write_suite(path, name, rows, description="tiny test suite")
    return path


@pytest.fixture
def runtimes(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32"), load_runtime(tiny_checkpoint_dir, "float16")


def failed_metrics(stage) -> set[str]:
    return {result.gate.metric for _, result in stage.failed_gates}


# ----------------------------------------------------------------------------------------------------------- tests


def test_baseline_and_exact_pass_are_accepted_and_report_info(runtimes):
    reference, candidate = runtimes
    result = Pipeline([(NOTE, {"note": "hi"}, "stop")]).run(reference, candidate, REQUESTS)
    baseline, note = result.stages
    assert (baseline.name, baseline.verdict, baseline.incremental) == ("baseline", "accepted", None)
    assert baseline.cumulative.metrics["argmax_agreement"] >= 0.95 and baseline.cumulative_gates
    assert note.verdict == "accepted" and note.parent == 0
    assert note.incremental.metrics["max_abs_dp"] == 0.0  # nothing changed vs the previous stage
    assert note.pass_info == {"note": {"text": "hi"}}
    assert {r.gate.metric for r in note.incremental_gates} >= {"token_identity", "deterministic", "finite"}
    assert result.final_runtime.applied == ("note",) and not result.gates_failed


def test_corrupting_pass_is_rejected_and_the_run_continues_from_its_parent(runtimes):
    reference, candidate = runtimes
    result = Pipeline([(NOISY, {}, "reject"), (NOTE, {}, "stop")]).run(reference, candidate, REQUESTS)
    assert [s.verdict for s in result.stages] == ["accepted", "rejected", "accepted"]
    noisy, note = result.stages[1:]
    assert "max_abs_dp" in failed_metrics(noisy) and noisy.runtime is None
    assert note.parent == 0 and result.final_runtime.applied == ("note",)
    assert result.gates_failed


def test_corrupting_pass_with_stop_ends_the_run(runtimes):
    reference, candidate = runtimes
    result = Pipeline([(NOISY, {}, "stop"), (NOTE, {}, "stop")]).run(reference, candidate, REQUESTS)
    assert [s.verdict for s in result.stages] == ["accepted", "stopped"]
    assert result.final_runtime is candidate and result.planned == ("noisy_scorer", "note")


def test_reordered_tokens_fail_token_identity(runtimes):
    reference, candidate = runtimes
    result = Pipeline([(REVERSE, {}, "reject")]).run(reference, candidate, REQUESTS)
    stage = result.stages[1]
    assert stage.verdict == "rejected"
    assert "token_identity" in failed_metrics(stage)
    assert stage.incremental.metrics["token_identity"] < 1.0
    assert stage.cumulative.first_token_mismatch == "r0/topic"


def test_gate_overrides_replace_the_default_on_the_same_metric(runtimes):
    reference, candidate = runtimes
    lax = GateSet(incremental=(Gate("max_abs_dp", "<=", 1.0), Gate("argmax_agreement", ">=", 0.0)),
                  cumulative=(Gate("max_abs_dp", "<=", 1.0), Gate("argmax_agreement", ">=", 0.0),
                              Gate("accuracy_delta", ">=", -1.0, requires_labels=True)))
    result = Pipeline([Step(NOISY, NoiseConfig(), "stop", lax)]).run(reference, candidate, REQUESTS)
    assert result.stages[1].verdict == "accepted"
    assert sum(r.gate.metric == "max_abs_dp" for r in result.stages[1].incremental_gates) == 1
    merged = merge_gates((Gate("finite", "==", 1.0), Gate("max_abs_dp", "<=", 1e-4)), (Gate("max_abs_dp", "<=", 0.5),))
    assert merged == (Gate("finite", "==", 1.0), Gate("max_abs_dp", "<=", 0.5))


@pytest.mark.parametrize("how", sorted(MUTATIONS))
def test_a_pass_that_mutates_its_input_is_an_error(runtimes, how):
    reference, candidate = runtimes
    with pytest.raises(PipelineError, match="mutated its input runtime") as caught:
        Pipeline([(mutating_spec(MUTATIONS[how]), {}, "reject")]).run(reference, candidate, REQUESTS)
    assert [s.verdict for s in caught.value.partial.stages] == ["accepted", "error"]


def test_fingerprint_sees_each_mutation(tiny_checkpoint_dir):
    for how, mutate in MUTATIONS.items():
        runtime = load_runtime(tiny_checkpoint_dir)
        before = runtime_fingerprint(runtime)
        mutate(runtime)
        assert fingerprint_changes(before, runtime_fingerprint(runtime)), how


def test_a_raising_pass_ends_the_run_with_an_error_stage(runtimes):
    reference, candidate = runtimes
    with pytest.raises(PipelineError, match="'explode' \\(stage 2\\) raised RuntimeError: boom") as caught:
        Pipeline([(NOTE, {}, "stop"), (EXPLODE, {}, "reject"), (NOTE, {}, "stop")]).run(reference, candidate,
                                                                                          REQUESTS)
    stages = caught.value.partial.stages
    assert [s.verdict for s in stages] == ["accepted", "accepted", "error"]
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_capture_then_replace_is_refused_before_anything_runs():
    calls = []
    spy = dataclasses.replace(REPLACE_MODEL, apply=lambda runtime, config: calls.append(config))
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


TINY_CONFIGS = {"quantize_encoder": {"group_size": 32}}  # the tiny MLP width 96 is not a multiple of 64


@pytest.mark.parametrize("name", build_registry(include_entry_points=False).names)
def test_builtin_passes_never_mutate_their_input(tiny_checkpoint_dir, name):
    spec = build_registry(include_entry_points=False).get(name)
    runtime = load_runtime(tiny_checkpoint_dir, "float16")
    before = runtime_fingerprint(runtime)
    result = spec.apply(runtime, spec.make_config(TINY_CONFIGS.get(name, {})))
    assert result is not runtime
    assert fingerprint_changes(before, runtime_fingerprint(runtime)) == []


def test_run_accepts_a_suite_file(runtimes, tmp_path):
    from fidelity.suites import load_suite

    reference, candidate = runtimes
    suite = load_suite(write_tiny_suite(tmp_path / "tiny.jsonl", records=2))
    result = Pipeline([]).run(reference, candidate, suite)
    assert [q.key for q in result.stages[0].cumulative.questions][:3] == ["r0/topic", "r0/level", "r0/yes"]
    assert result.stages[0].cumulative.questions[0].tags["language"] == "en"
    assert result.stages[0].cumulative.metrics["labelled"] == 6.0
