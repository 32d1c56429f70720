"""Length-sorted planner: valid plans within limits, caller order restored, answers independent of batching."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import laya_opt as lo
from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.metrics import compare
from laya_opt.core.batching import check_plan, insertion_order_planner
from laya_opt.util.schema import parse
from laya_opt.passes.contract import runtime_fingerprint
from laya_opt.core.runtime import load_runtime
from laya_opt.passes.length_sorted_batching import LengthSortedBatchingConfig, sorted_groups



@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 300), max_size=60), st.integers(1, 20), st.integers(1, 2000))
def test_groups_cover_every_index_once_sorted_and_within_limits(lengths, max_questions, token_budget):
    groups = sorted_groups(lengths, max_questions, token_budget)
    check_plan(groups, len(lengths))
    order = [index for group in groups for index in group]
    # Sorting is stable: by length, then by caller index.
    assert order == sorted(range(len(lengths)), key=lambda index: (lengths[index], index))
    for group in groups:
        assert len(group) <= max_questions
        assert len(group) == 1 or len(group) * max(lengths[i] for i in group) <= token_budget


def test_a_question_longer_than_the_budget_runs_alone():
    assert sorted_groups([5, 50, 5], max_questions=8, token_budget=20) == [(0, 2), (1,)]


@pytest.mark.parametrize("values, field", [
    ({"max_questions": 0}, "max_questions"), ({"token_budget": -1}, "token_budget"),
    ({"max_questions": True}, "max_questions"), ({"token_budget": 1.5}, "token_budget"), ({"budget": 8}, "budget"),
])
def test_bad_config_raises_naming_the_field(values, field):
    with pytest.raises(ValueError, match=field):
        parse(LengthSortedBatchingConfig, values, "length_sorted_batching")


def test_bad_config_values_raise_in_the_dataclass():
    with pytest.raises(ValueError, match="max_questions"):
        LengthSortedBatchingConfig(max_questions=0)
    with pytest.raises(ValueError, match="token_budget"):
        LengthSortedBatchingConfig(token_budget=0)


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=16)


def question(kind, words, options):
    if kind == "choice":
        return {"type": "choice", "instructions": "pick " * words, "criteria": [f"o{i}" for i in range(options)]}
    if kind == "score":
        return {"type": "score", "instructions": "rate " * words, "criteria": ["low", "high"][:options]}
    return {"type": "noul", "instructions": "is it " * words}


questions_strategy = st.lists(st.tuples(st.sampled_from(["choice", "score", "noul"]), st.integers(1, 60),
                                        st.integers(1, 2)), min_size=1, max_size=9)


@settings(max_examples=15, deadline=None)
@given(questions_strategy, st.integers(1, 5), st.integers(1, 400))
def test_answers_keep_caller_order_and_do_not_depend_on_batch_composition(runtime, specs, max_questions, budget):
    questions = {f"q{index}": question(*spec) for index, spec in enumerate(specs)}
    prepared = runtime.prepare("hello " * 10, questions)
    sorted_runtime = lo.apply(runtime, LengthSortedBatchingConfig(max_questions=max_questions, token_budget=budget))
    execution = sorted_runtime.execute(prepared, trace=True)
    alone = runtime.replace(planner=insertion_order_planner(1)).execute(prepared, trace=True)
    assert [item.qid for item in execution.prepared] == list(questions)
    assert execution.inputs == alone.inputs
    for item, logits, single in zip(prepared, execution.logits, alone.logits):
        k = item.option_count
        np.testing.assert_allclose(logits[:k], single[:k], atol=1e-5, rtol=0)
    for action, single in zip(execution.action, alone.action):
        np.testing.assert_allclose(action, single, atol=1e-5, rtol=0)


MIXED = [EvalRequest("mixed", "hello " * 10, {
    **{f"short{index}": question("choice", 1 + index % 3, 2) for index in range(9)},
    "long": question("noul", 70, 2),
    **{f"more{index}": question("score", 2, 2) for index in range(4)}})]


def test_pass_is_exact_end_to_end_and_leaves_its_input_unchanged(runtime):
    before = runtime_fingerprint(runtime)
    candidate = lo.apply(runtime, LengthSortedBatchingConfig(max_questions=4, token_budget=256))
    assert runtime_fingerprint(runtime) == before
    metrics = compare(evaluate(runtime, MIXED), evaluate(candidate, MIXED)).metrics
    assert metrics["max_abs_dp"] <= 1e-5
    assert metrics["argmax_agreement"] == 1.0 and metrics["token_identity"] == 1.0
    assert candidate.applied == ("length_sorted_batching",) \
        and candidate.identity.startswith(runtime.identity + "+length_sorted_batching")
    assert candidate.info["length_sorted_batching"]["token_budget"] == 256
    prepared = runtime.prepare(MIXED[0].state, MIXED[0].questions)
    padded = {planner: sum(len(group) * max(prepared[i].length for i in group) for group in planner(prepared))
              for planner in (runtime.planner, candidate.planner)}
    assert padded[candidate.planner] < padded[runtime.planner]
