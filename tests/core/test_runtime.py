
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from laya_opt.core.batching import collate, insertion_order_planner
from laya_opt.core.runtime import clone_model, load_runtime

QUESTIONS = {
    "topic": {"type": "choice", "instructions": "hello?", "criteria": ["a", "b", "c"]},
    "level": {"type": "score", "instructions": "hello", "criteria": ["low", "high"]},
    "yes": {"type": "noul", "instructions": "hello"},
    "only": {"type": "choice", "instructions": "x", "criteria": ["only"]},
}


@pytest.fixture(scope="module")
def runtime(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir)


def many_questions(count):
    return {f"q{i}": {"type": ("choice", "score", "noul")[i % 3], "instructions": "hello " * (i % 7),
                      **({"criteria": ["a", "b", "c", "d"][: 1 + i % 4]} if i % 3 == 0 else {}),
                      **({"criteria": ["lo", "mid", "hi"]} if i % 3 == 1 else {})} for i in range(count)}


def test_predict_envelope_and_fixture_expectations(runtime):
    result = runtime.predict("hello " * 3, QUESTIONS)
    assert result["model"] == "laya-rl-agent" and list(result["answers"]) == list(QUESTIONS)
    assert result["usage"]["output_tokens"] == 0
    assert result["usage"]["input_tokens"] == sum(len(p.ids) for p in runtime.prepare("hello " * 3, QUESTIONS))
    assert 0.0 <= result["answers"]["yes"]["noul"] <= 1.0
    assert 0.0 <= result["answers"]["level"]["score"] <= 1.0
    assert result["answers"]["only"]["probabilities"] == {"only": 1.0}
    assert runtime.predict("hello", {}) == {"model": "laya-rl-agent", "answers": {},
                                            "usage": {"input_tokens": 0, "output_tokens": 0}}


def test_truncates_to_exactly_max_len(runtime):
    prepared = runtime.prepare("hello " * 1000, {"only": QUESTIONS["only"]})
    assert prepared[0].length == runtime.agent_config.max_len == 128


def test_batch_16_equals_batch_1_in_fp32(runtime):
    questions = many_questions(20)
    batched = runtime.predict("hello world " * 9, questions)
    single = runtime.replace(planner=insertion_order_planner(1)).predict("hello world " * 9, questions)
    assert batched == single


def test_execution_traces_unpadded_model_inputs(runtime):
    prepared = runtime.prepare("hello", many_questions(5))
    execution = runtime.execute(prepared, trace=True)
    for item, fed in zip(prepared, execution.inputs):
        assert fed.ids == item.ids and fed.markers == item.markers and fed.qtype == item.qtype


def test_reversing_planner_keeps_caller_order(runtime):
    def reversed_pairs(items):
        order = list(range(len(items)))[::-1]
        return [tuple(order[i:i + 2]) for i in range(0, len(order), 2)]

    questions = many_questions(9)
    expected = runtime.predict("hello", questions)
    got = runtime.replace(planner=reversed_pairs).predict("hello", questions)
    assert list(got["answers"]) == list(questions)
    for qid in questions:
        for key, value in expected["answers"][qid].items():
            if isinstance(value, float):
                assert abs(value - got["answers"][qid][key]) <= 1e-4
        assert expected["answers"][qid].get("choice") == got["answers"][qid].get("choice")


def test_planner_that_loses_a_question_is_an_error(runtime):
    with pytest.raises(RuntimeError, match="invalid plan"):
        runtime.replace(planner=lambda items: [tuple(range(len(items) - 1))]).predict("hello", many_questions(3))


def test_non_finite_outputs_raise(runtime):
    def nan_forward(model, kernels, batch):
        logits, action = model(batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask,
                               batch.qtype, kernels=kernels)
        return logits * mx.array(float("nan")), action

    with pytest.raises(FloatingPointError, match=r"question topic: non-finite logits .* in float32, from finite"):
        runtime.replace(forward=nan_forward).predict("hello", {"topic": QUESTIONS["topic"]})
    half = runtime.replace(forward=nan_forward, dtype=mx.float16)
    with pytest.raises(FloatingPointError, match=r"in float16; retry in float32$"):
        half.predict("hello", {"topic": QUESTIONS["topic"]})


def test_replace_and_clone_never_touch_the_original(runtime):
    before = np.array(runtime.model.scorer.layers[3].weight)
    clone = clone_model(runtime.model)
    clone.scorer.layers[3].weight = clone.scorer.layers[3].weight * 3.0  # a bias shift would cancel in softmax
    changed = runtime.replace(model=clone)
    assert np.array_equal(np.array(runtime.model.scorer.layers[3].weight), before)
    assert changed.predict("hello", QUESTIONS) != runtime.predict("hello", QUESTIONS)
    assert runtime.model is not changed.model


def test_collate_layout():
    from laya_opt.core.prompt import PreparedQuestion

    items = [PreparedQuestion("a", "choice", 0, (2, 5, 3, 4, 5, 3), (3,), ("x",)),
             PreparedQuestion("b", "noul", 2, (2, 5, 3, 4, 4, 3, 5, 5, 3), (3, 4), ("false", "true"))]
    batch = collate(items, pad_id=0)
    assert batch.input_ids.dtype == mx.int32 and batch.attention_mask.dtype == mx.bool_
    assert batch.shape == (2, 9, 2)
    assert np.array(batch.input_ids)[0].tolist() == [2, 5, 3, 4, 5, 3, 0, 0, 0]
    assert np.array(batch.marker_pos).tolist() == [[3, 0], [3, 4]]
    assert np.array(batch.marker_mask).tolist() == [[True, False], [True, True]]
    with pytest.raises(ValueError):
        collate([], pad_id=0)


@pytest.mark.parametrize("batch_size", [0, -3, 1.5])
def test_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        insertion_order_planner(batch_size)


@settings(max_examples=30, deadline=None)
@given(count=st.integers(min_value=0, max_value=60), batch_size=st.integers(min_value=1, max_value=17))
def test_chunking_covers_every_question_in_order(count, batch_size):
    groups = insertion_order_planner(batch_size)([None] * count)
    assert [i for group in groups for i in group] == list(range(count))
    assert all(1 <= len(group) <= batch_size for group in groups)


def test_padding_a_batch_never_shrinks_it_and_equal_sizes_are_a_no_op(tiny_codec):
    from laya_opt.core.batching import pad_batch, pad_rows, pad_slots
    from laya_opt.core.prompt import PreparedQuestion

    item = PreparedQuestion(qid="q", type_name="noul", qtype=2, ids=(2, 4, 4, 3, 5, 3), markers=(1, 2),
                            option_keys=("false", "true"))
    batch = collate([item], tiny_codec.pad_id)
    rows, length, slots = batch.shape
    assert pad_batch(batch, length, 0) is batch and pad_rows(batch, rows, 0) is batch \
        and pad_slots(batch, slots) is batch
    assert pad_batch(batch, length + 2, 0).shape == (rows, length + 2, slots)
    assert pad_rows(batch, rows + 1, 0).shape == (rows + 1, length, slots)
    assert pad_slots(batch, slots + 3).shape == (rows, length, slots + 3)
    with pytest.raises(ValueError, match=f"cannot pad a batch of length {length} down to {length - 1}"):
        pad_batch(batch, length - 1, 0)
    with pytest.raises(ValueError, match=f"cannot pad a batch of {rows} rows down to 0"):
        pad_rows(batch, 0, 0)
    with pytest.raises(ValueError, match=f"cannot pad {slots} option slots down to 1"):
        pad_slots(batch, 1)


# ----------------------------------------------------------------------------- padding at collation (issue 23)

def batch_arrays(batch) -> list[np.ndarray]:
    return [np.array(a) for a in (batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask,
                                  batch.qtype)]


prepared_items = st.lists(st.tuples(st.lists(st.integers(1, 50), min_size=1, max_size=12),
                                    st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(items=prepared_items, extra=st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 3)),
       only=st.sampled_from([None, 0, 1, 2]), pad_id=st.integers(0, 3))
def test_collating_at_a_padded_shape_equals_collating_then_padding(items, extra, only, pad_id):
    """The numpy path gives the arrays pad_batch/pad_rows/pad_slots give, padding one dimension or all three."""
    from laya_opt.core.batching import pad_batch, pad_rows, pad_slots
    from laya_opt.core.prompt import PreparedQuestion

    questions = [PreparedQuestion(f"q{i}", "choice", qtype, tuple(ids), tuple(range(min(markers, len(ids)))),
                                  ("a",)) for i, (ids, markers, qtype) in enumerate(items)]
    extra = extra if only is None else tuple(value if axis == only else 0 for axis, value in enumerate(extra))
    plain = collate(questions, pad_id)
    rows, length, slots = plain.shape
    target = (rows + extra[0], length + extra[1], slots + extra[2])
    seen = []
    padded = collate(questions, pad_id, lambda *shape: seen.append(shape) or target)
    old = pad_slots(pad_rows(pad_batch(plain, target[1], pad_id), target[0], pad_id), target[2])
    assert seen == [plain.shape] and padded.shape == old.shape == target
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(batch_arrays(padded), batch_arrays(old)))
    assert padded.content_shape == old.content_shape == plain.shape == plain.content_shape
    assert (padded.content is None) == (target == plain.shape) and padded.real_tokens == plain.real_tokens


def test_a_padded_shape_that_would_shrink_the_batch_is_refused():
    from laya_opt.core.prompt import PreparedQuestion

    item = PreparedQuestion("q", "noul", 2, (2, 4, 3), (1, 2), ("false", "true"))
    for shape in [(0, 3, 2), (1, 2, 2), (1, 3, 1)]:
        with pytest.raises(ValueError, match="padding cannot shrink a batch"):
            collate([item], 0, lambda *_: shape)


def test_the_runtime_collates_at_its_forwards_padded_shape(tiny_checkpoint_dir):
    runtime = load_runtime(tiny_checkpoint_dir)
    prepared = runtime.prepare("hello", QUESTIONS)
    assert runtime.collate(prepared).content is None  # the eager forward pads nothing

    def forward(model, kernels, batch):
        return runtime.forward(model, kernels, batch)

    forward.padded_shape = lambda rows, length, slots: (rows + 1, length + 3, slots + 1)
    batch = runtime.replace(forward=forward).collate(prepared)
    plain = runtime.collate(prepared)
    assert batch.content_shape == plain.shape and batch.shape == forward.padded_shape(*plain.shape)
