"""The fidelity checker end to end on tiny random checkpoints: identical, perturbed, re-tokenized, NaN, noisy."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

from laya_opt.suites.suite_file import label_index
from laya_opt.fidelity.checker import (EvalRequest, Outputs, evaluate, predicted_index, question_output,
                              requests_from_suite)
# The comparison the pipeline makes: drift and agreement (metrics) with the decision changes (decisions).
from laya_opt.fidelity.decisions import compare
from laya_opt.fidelity.gates import check_gates, default_gates
from laya_opt.core.batching import insertion_order_planner
from laya_opt.core.prompt import prepare_request
from laya_opt.core.runtime import Runtime, clone_model, eager_forward, load_runtime

QUESTIONS = {
    "topic": {"type": "choice", "instructions": "hello", "criteria": ["a", "b", "c"]},
    "level": {"type": "score", "instructions": "hello level", "criteria": ["low", "mid", "high"]},
    "yes": {"type": "noul", "instructions": "hello hello"},
}
REQUESTS = (
    EvalRequest("r0", "hello world", QUESTIONS, labels={"topic": "b", "level": 2, "yes": True},
                tags={"topic": {"language": "en"}, "yes": {"language": "de"}}),
    EvalRequest("r1", {"text": "hello hello hello"}, {"pair": {"type": "choice", "instructions": "pick hello",
                                                               "criteria": {"x": "hello", "y": None}}},
                labels={"pair": "y"}),
    EvalRequest("r2", [{"role": "user", "content": "hello there"}], dict(QUESTIONS)),
)
QUESTION_COUNT = 7

def all_passed(results) -> bool:
    return all(result.passed for result in results)



@pytest.fixture(scope="module")
def runtime(tiny_checkpoint_dir) -> Runtime:
    return load_runtime(tiny_checkpoint_dir)


@pytest.fixture(scope="module")
def reference(runtime) -> Outputs:
    return evaluate(runtime, REQUESTS, repeat=2)


def _passes(report, exact=True, comparison="incremental"):
    return all_passed(check_gates(report.metrics, default_gates(exact, "float32", comparison)))


def with_scorer_change(runtime: Runtime, name: str, delta: float) -> Runtime:
    model = clone_model(runtime.model)
    layer = model.scorer.layers[3]
    setattr(layer, name, getattr(layer, name) + delta * mx.random.normal(getattr(layer, name).shape,
                                                                         key=mx.random.key(3)))
    return runtime.replace(model=model, identity=runtime.identity + "+perturbed")


# ---------------------------------------------------------------------------------------------------------------------
# What the checker records


def test_records_every_question_in_request_order(reference):
    assert reference.keys == ("r0/topic", "r0/level", "r0/yes", "r1/pair", "r2/topic", "r2/level", "r2/yes")
    by_key = {q.key: q for q in reference.questions}
    topic, level, yes = by_key["r0/topic"], by_key["r0/level"], by_key["r0/yes"]
    assert (topic.k, level.k, yes.k) == (3, 3, 2)
    for question in reference.questions:
        assert question.probabilities.dtype == np.float64 and question.finite
        assert abs(question.probabilities.sum() - 1.0) < 1e-6
        assert question.model_input is not None and question.model_input.ids[0] == 2  # [CLS]
        assert question.deterministic is True
    assert yes.p_true == yes.probabilities[1] and topic.p_true is None
    assert level.score_expectation == pytest.approx(float(np.dot([0, 1, 2], level.probabilities)))
    assert topic.argmax == int(np.argmax(topic.probabilities))
    assert 0.0 <= yes.act_probability <= 1.0
    # labels resolve to option indices; tags are kept per question
    assert (topic.label_index, level.label_index, yes.label_index) == (1, 2, 1)
    assert by_key["r1/pair"].label_index == 1 and by_key["r2/topic"].label_index is None
    assert yes.tags == {"language": "de"} and level.tags == {}


def test_probabilities_match_the_public_decoder(runtime, reference):
    answers = runtime.predict(REQUESTS[0].state, REQUESTS[0].questions)["answers"]
    by_key = {q.key: q for q in reference.questions}
    assert answers["topic"]["probabilities"] == {key: round(float(p), 4) for key, p
                                                 in zip("abc", by_key["r0/topic"].probabilities)}
    assert answers["yes"]["noul"] == round(by_key["r0/yes"].p_true, 4)
    assert answers["level"]["score"] == pytest.approx(by_key["r0/level"].score_expectation, abs=1e-4)


def test_identical_runtimes_agree_exactly(runtime, reference):
    report = compare(reference, evaluate(runtime, REQUESTS, repeat=2))
    metrics = report.metrics
    assert metrics["argmax_agreement"] == 1.0 and metrics["argmax_flips"] == 0.0
    assert metrics["max_abs_dp"] == 0.0 and metrics["js_max"] == 0.0 and metrics["token_identity"] == 1.0
    assert metrics["finite"] == 1.0 and metrics["deterministic"] == 1.0
    assert metrics["accuracy_delta"] == 0.0 and metrics["labelled"] == 4.0
    assert report.first_token_mismatch is None
    for exact in (True, False):
        for comparison in ("incremental", "cumulative"):
            assert _passes(report, exact, comparison)


def test_batch_planner_change_is_an_exact_pass(runtime, reference):
    one_by_one = runtime.replace(planner=insertion_order_planner(1))
    reversed_plan = runtime.replace(planner=lambda items: [tuple(reversed(range(len(items))))])
    for candidate in (one_by_one, reversed_plan):
        report = compare(reference, evaluate(candidate, REQUESTS, repeat=2))
        assert report.metrics["token_identity"] == 1.0
        assert report.metrics["max_abs_dp"] <= 1e-6
        assert _passes(report)


def test_perturbed_scorer_weights_fail_the_gates(runtime, reference):
    candidate = with_scorer_change(runtime, "weight", 2.0)
    report = compare(reference, evaluate(candidate, REQUESTS, repeat=2))
    assert report.metrics["max_abs_dp"] > 1e-3 and report.metrics["js_max"] > 0.0
    assert report.metrics["token_identity"] == 1.0  # the inputs did not change, only the outputs
    assert report.candidate_identity.endswith("+perturbed")
    assert not _passes(report)
    failed = [r.gate.metric for r in check_gates(report.metrics, default_gates(True, "float32", "incremental"))
              if not r.passed]
    assert "max_abs_dp" in failed
    worst = report.worst(2)
    assert worst[0].max_abs_dp == report.metrics["max_abs_dp"] >= worst[1].max_abs_dp
    assert np.max(np.abs(worst[0].dp)) == worst[0].max_abs_dp


def test_scorer_bias_shift_leaves_probabilities_unchanged(runtime, reference):
    # The final scorer bias adds one constant to every option logit: softmax (and action features) ignore it.
    candidate = with_scorer_change(runtime, "bias", 2.0)
    outputs = evaluate(candidate, REQUESTS)
    assert any(not np.array_equal(a.logits, b.logits) for a, b in zip(reference.questions, outputs.questions))
    assert compare(reference, outputs).metrics["max_abs_dp"] < 1e-5


def swapping_preparer(*args):
    """Swaps the last two state tokens of each request's first question: a preparation bug."""
    prepared = list(prepare_request(*args))
    ids = list(prepared[0].ids)
    ids[-3], ids[-2] = ids[-2], ids[-3]
    prepared[0] = dataclasses.replace(prepared[0], ids=tuple(ids))
    return tuple(prepared)


def test_reordered_tokens_break_token_identity(runtime, reference):
    candidate = runtime.replace(preparer=swapping_preparer)
    report = compare(reference, evaluate(candidate, REQUESTS, repeat=2))
    # r0 and r1 end "hello [UNK] [SEP]" (the swap changes them); r2 ends "[UNK] [UNK] [SEP]" (it does not).
    assert report.metrics["token_identity"] == pytest.approx(5 / QUESTION_COUNT)
    assert report.first_token_mismatch == "r0/topic"
    length = len(reference.questions[0].model_input.ids)
    assert report.first_token_mismatch_detail.startswith(f"ids differ at position {length - 3}")
    assert not _passes(report) and not _passes(report, exact=False, comparison="cumulative")


def nan_forward(model, kernels, batch):
    logits, action = eager_forward(model, kernels, batch)
    poisoned = mx.arange(logits.shape[0])[:, None] == 0  # first row of every batch
    return mx.where(poisoned, mx.array(float("nan")), logits), action


def test_nan_outputs_are_recorded_and_fail_the_finite_gate(runtime, reference):
    outputs = evaluate(runtime.replace(forward=nan_forward), REQUESTS, repeat=2)
    bad = [q.key for q in outputs.questions if not q.finite]
    assert bad == ["r0/topic", "r1/pair", "r2/topic"]
    assert outputs.questions[0].argmax == -1 and np.all(np.isnan(outputs.questions[0].probabilities))
    # NaN bits repeat identically: non-finite is not the same failure as non-deterministic
    assert outputs.deterministic is True
    report = compare(reference, outputs)
    assert report.metrics["finite"] == 0.0 and np.isnan(report.metrics["max_abs_dp"])
    assert report.metrics["argmax_flips"] == 3.0
    results = {r.gate.metric: r for r in check_gates(report.metrics, default_gates(True, "float32", "incremental"))}
    assert not results["finite"].passed and not results["max_abs_dp"].passed
    assert report.worst(1)[0].key == "r0/topic"


def nan_action_forward(model, kernels, batch):
    logits, action = eager_forward(model, kernels, batch)
    return logits, action + mx.array(float("inf"))


def test_non_finite_action_alone_keeps_the_probabilities(runtime, reference):
    outputs = evaluate(runtime.replace(forward=nan_action_forward), REQUESTS)
    assert not any(q.finite for q in outputs.questions)
    assert all(np.isnan(q.act_probability) for q in outputs.questions)
    report = compare(reference, outputs)
    assert report.metrics["finite"] == 0.0 and report.metrics["max_abs_dp"] == 0.0
    assert np.isnan(report.metrics["act_probability_drift_max"])


def noisy_forward(model, kernels, batch):
    logits, action = eager_forward(model, kernels, batch)
    return logits + 1e-6 * mx.random.normal(logits.shape), action


def test_nondeterministic_forward_is_detected(runtime, reference):
    report = compare(reference, evaluate(runtime.replace(forward=noisy_forward), REQUESTS, repeat=2))
    assert report.metrics["deterministic"] == 0.0
    results = {r.gate.metric: r for r in check_gates(report.metrics, default_gates(True, "float32", "incremental"))}
    assert not results["deterministic"].passed


def test_determinism_unmeasured_with_one_run_fails_the_gate(runtime, reference):
    once = evaluate(runtime, REQUESTS)
    assert once.deterministic is None and all(q.deterministic is None for q in once.questions)
    report = compare(reference, once)
    assert "deterministic" not in report.metrics
    result = next(r for r in check_gates(report.metrics, default_gates(True, "float32", "incremental"))
                  if r.gate.metric == "deterministic")
    assert not result.passed and "rerun >= 1" in result.message


# ---------------------------------------------------------------------------------------------------------------------
# Bad inputs


def test_evaluate_rejects_bad_inputs(runtime):
    with pytest.raises(ValueError, match="repeat"):
        evaluate(runtime, REQUESTS, repeat=0)
    with pytest.raises(ValueError, match="duplicate question key 'r0/topic'"):
        evaluate(runtime, (REQUESTS[0], REQUESTS[0]))
    with pytest.raises(TypeError, match="EvalRequest"):
        evaluate(runtime, [("hello", QUESTIONS)])
    with pytest.raises(ValueError, match=r"request r9: labels for unknown question\(s\) \['nope'\]"):
        evaluate(runtime, [EvalRequest("r9", "hello", QUESTIONS, labels={"nope": "a"})])
    with pytest.raises(ValueError, match="r9/topic: choice label 'z'"):
        evaluate(runtime, [EvalRequest("r9", "hello", QUESTIONS, labels={"topic": "z"})])
    # invalid question definitions surface from prepare, with the request named
    with pytest.raises(ValueError, match="request r9: question 'topic'"):
        evaluate(runtime, [EvalRequest("r9", "hello", {"topic": {"type": "choice", "instructions": "x"}})])


def test_label_index_rules():
    assert label_index("k", "choice", ("a", "b"), "b") == 1
    assert label_index("k", "choice", ("1", "2"), 2) == 1  # str(label), as the answer keys
    assert label_index("k", "score", ("0", "1", "2"), 0) == 0
    assert label_index("k", "noul", ("false", "true"), False) == 0
    assert label_index("k", "noul", ("false", "true"), None) is None
    for type_name, label in (("score", 3), ("score", True), ("score", "1"), ("noul", 1), ("noul", "true")):
        with pytest.raises(ValueError, match="question k"):
            label_index("k", type_name, ("0", "1", "2") if type_name == "score" else ("false", "true"), label)


def test_noul_tie_predicts_true_unlike_numpy_argmax():
    tie = np.array([0.5, 0.5])
    assert predicted_index("noul", tie) == 1 and predicted_index("choice", tie) == 0
    assert predicted_index("noul", np.array([0.5000001, 0.4999999])) == 0
    assert question_output("x/q", "noul", tie, 1.0).argmax == 1


def test_empty_request_contributes_nothing(runtime):
    assert evaluate(runtime, [EvalRequest("empty", "hello", {})]).questions == ()


# ---------------------------------------------------------------------------------------------------------------------
# Request sources


def test_requests_from_suite_groups_records_by_id():
    record = SimpleNamespace
    suite = SimpleNamespace(name="toy", records=[
        record(id="a", state="hello", questions={"q1": QUESTIONS["topic"]}, labels={"q1": "a"},
               tags={"q1": {"language": "en"}}),
        record(id="b", state="other", questions={"q1": QUESTIONS["yes"]}, labels={}, tags={}),
        record(id="a", state="hello", questions={"q2": QUESTIONS["yes"]}, labels={"q2": False}, tags=None),
    ])
    requests = requests_from_suite(suite)
    assert [r.record_id for r in requests] == ["a", "b"]
    assert list(requests[0].questions) == ["q1", "q2"]
    assert requests[0].labels == {"q1": "a", "q2": False} and requests[0].tags == {"q1": {"language": "en"}}
    suite.records.append(record(id="a", state="changed", questions={"q3": QUESTIONS["yes"]}, labels={}, tags={}))
    with pytest.raises(ValueError, match="suite toy: records with id 'a' have different states"):
        requests_from_suite(suite)
    suite.records[-1] = record(id="a", state="hello", questions={"q1": QUESTIONS["yes"]}, labels={}, tags={})
    with pytest.raises(ValueError, match="record 'a' repeats question 'q1'"):
        requests_from_suite(suite)


def test_requests_from_a_real_suite_evaluate(runtime):
    from pathlib import Path

    from laya_opt.suites.suite_file import load_suite

    suite = load_suite(Path(__file__).resolve().parents[2] / "laya_opt" / "suites" / "data" / "smoke.jsonl")
    requests = requests_from_suite(suite)
    assert all(isinstance(tag, dict) for request in requests for tag in request.tags.values())
    outputs = evaluate(runtime, requests[:2])
    assert outputs.questions and all(q.tags["language"] for q in outputs.questions)
