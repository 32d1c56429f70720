"""Random pass stacks on the tiny model (a hypothesis state machine, bounded for CI).

Legal and illegal sequences of built-in passes with random settings: an illegal order is refused with a
named error before anything runs; every exact stage matches the reference within the calibrated float32
noise (its default gates) with token identity; the reference is never mutated; answers come back in the
caller's order; no stage is compared with itself.
"""
from __future__ import annotations

import pytest
from fake_passes import QUESTIONS, REQUESTS
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from laya_opt.util.errors import PlanError
from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.metrics import compare
from laya_opt.passes.contract import fingerprint_changes, runtime_fingerprint
from laya_opt.runs.pipeline import Pipeline
from laya_opt.passes.registry import get_pass
from laya_opt.core.runtime import load_runtime

from conftest import write_tiny_checkpoint

MAX_LEN = 128   # the tiny model's agent max_len
CONFIGS = {
    "length_sorted_batching": st.fixed_dictionaries({"max_questions": st.integers(1, 5),
                                                     "token_budget": st.integers(8, 512)}),
    "head_prune_final": st.fixed_dictionaries({"variant": st.sampled_from(["selected_q", "split_projection"])}),
    "local_window_attention": st.fixed_dictionaries({"block_size": st.integers(1, 16),
                                                     "min_length": st.integers(0, 40)}),
    "compile_buckets": st.one_of(
        st.fixed_dictionaries({"multiple": st.integers(8, 64)}),  # every bucket compiles: keep them few
        st.lists(st.integers(1, MAX_LEN), min_size=1, max_size=3, unique=True).map(
            lambda buckets: {"buckets": sorted(buckets)})),
    "quantize_encoder": st.fixed_dictionaries({"bits": st.sampled_from([4, 8]), "group_size": st.just(32)}),
}
# Written out here, not read from the passes' declarations: compile freezes the model and kernels, so no
# pass that changes either may follow it.
CHANGES_MODEL_OR_KERNELS = {"head_prune_final", "local_window_attention", "quantize_encoder"}


def legal(names: list[str]) -> bool:
    compiled = False
    for name in names:
        if compiled and name in CHANGES_MODEL_OR_KERNELS:
            return False
        compiled = compiled or name == "compile_buckets"
    return True


class RandomStacks(RuleBasedStateMachine):
    reference = None   # set once per session by the test below

    @initialize()
    def start(self):
        self.steps: list[tuple[str, dict]] = []
        self.fingerprint = runtime_fingerprint(self.reference)

    @precondition(lambda self: len(self.steps) < 5)
    @rule(name=st.sampled_from(sorted(CONFIGS)), data=st.data())
    def add_pass(self, name, data):
        if name == "quantize_encoder" and any(step == name for step, _ in self.steps):
            return  # a second quantization is refused by the pass at run time (the model is packed), not an order
        self.steps.append((name, data.draw(CONFIGS[name], label=name)))

    @precondition(lambda self: self.steps)
    @rule()
    def run_stack(self):
        names = [name for name, _ in self.steps]
        plan = [(get_pass(name), config, "reject") for name, config in self.steps]
        if not legal(names):
            with pytest.raises(PlanError, match="captured earlier"):
                Pipeline(plan, candidate_dtype="float32")  # refused while building: nothing has run
            self.steps.pop()
            return
        result = Pipeline(plan, candidate_dtype="float32").run(self.reference, REQUESTS)
        assert [stage.name for stage in result.stages] == ["baseline"] + names
        chain_exact = True
        for stage in result.stages:
            assert stage.incremental.metrics["token_identity"] == 1.0
            parent = result.stages[stage.parent] if stage.parent is not None else None
            assert stage.identity.startswith(parent.identity if parent else self.reference.identity)
            for report in (stage.incremental, stage.cumulative):
                assert report.reference_identity != report.candidate_identity
            if stage.exact:
                # Within the calibrated float32 noise of the previous stage (its default incremental gates),
                # and of the reference too while every stage so far was exact.
                gates = stage.incremental_gates + stage.cumulative_gates if chain_exact else stage.incremental_gates
                assert all(result.passed for result in gates), [result.message for _, result in stage.failed_gates]
            if stage.accepted:
                chain_exact = chain_exact and stage.exact
        self.check_caller_order(result.final_runtime, chain_exact)

    def check_caller_order(self, runtime, chain_exact: bool):
        # Questions in an order no planner sorts into, one of them long: each answer must come back under its
        # own id, in the caller's order, with the reference's numbers while the stack is exact.
        questions = dict(reversed(list(QUESTIONS.items())))
        questions["long"] = {"type": "noul", "instructions": "hello " * 40}
        request = EvalRequest("order", REQUESTS[-1].state, questions)
        assert list(runtime.predict(request.state, questions)["answers"]) == list(questions)
        if chain_exact:
            candidate = evaluate(runtime.replace(identity=runtime.identity + "+order"), [request])
            report = compare(evaluate(self.reference, [request]), candidate)
            assert [q.key for q in report.questions] == [f"order/{qid}" for qid in questions]
            assert report.metrics["max_abs_dp"] <= 1e-3

    @invariant()
    def reference_is_never_mutated(self):
        assert fingerprint_changes(self.fingerprint, runtime_fingerprint(self.reference)) == []


@pytest.fixture(scope="module")
def tiny_reference(tmp_path_factory):
    return load_runtime(write_tiny_checkpoint(tmp_path_factory.mktemp("stacks") / "tiny"), "float32", batch_size=3)


def test_random_pass_stacks(tiny_reference):
    RandomStacks.reference = tiny_reference
    RandomStacks.TestCase.settings = settings(max_examples=6, stateful_step_count=6, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
    RandomStacks.TestCase().runTest()
