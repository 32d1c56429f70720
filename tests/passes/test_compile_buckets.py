"""Compiled, bucketed forward: equals eager, counts shapes and fallbacks, refuses stale models, plans buckets."""
import itertools
import json

import numpy as np
import pytest
from fake_passes import write_suite_file
from hypothesis import given, settings, strategies as st

import laya_opt as lo
from laya_opt.fidelity.capture_probe import capture_drift
from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.gates import check_gates, default_gates
from laya_opt.fidelity.metrics import compare
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord
from laya_opt.passes.contract import check_order
from laya_opt.util.schema import parse
from laya_opt.passes.contract import runtime_fingerprint
from laya_opt.core.runtime import clone_model, eager_forward, load_runtime
from laya_opt.passes import compile_buckets
from laya_opt.passes import head_prune_final
from laya_opt.passes import local_window_attention
from laya_opt.passes.compile_buckets import (PASS, BucketedForward, CompileBucketsConfig, bucket_for, multiple_buckets,
                                    plan_buckets)


# ----------------------------------------------------------------------------- bucket planning


def padded_tokens(histogram, buckets):
    return sum(bucket_for(length, buckets) * rows for length, rows in histogram.items())


histograms = st.dictionaries(st.integers(1, 300), st.integers(1, 20), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(histograms, st.floats(0.0, 0.5), st.integers(1, 6))
def test_plan_uses_the_fewest_buckets_within_budget_and_the_least_waste_otherwise(histogram, budget, max_buckets):
    plan = plan_buckets(histogram, budget, max_buckets)
    lengths = sorted(histogram)
    real = sum(length * rows for length, rows in histogram.items())
    assert plan.buckets[-1] == lengths[-1] and set(plan.buckets) <= set(lengths)
    assert plan.waste == pytest.approx(1 - real / padded_tokens(histogram, plan.buckets))
    # Brute force over every subset that keeps the longest length.
    best_by_count = {}
    for count in range(1, min(max_buckets, len(lengths)) + 1):
        best_by_count[count] = min(padded_tokens(histogram, subset + (lengths[-1],))
                                   for subset in itertools.combinations(lengths[:-1], count - 1))
    feasible = [count for count, padded in best_by_count.items() if 1 - real / padded <= budget + 1e-12]
    if feasible:
        assert plan.within_budget and len(plan.buckets) == min(feasible)
        assert padded_tokens(histogram, plan.buckets) == best_by_count[min(feasible)]
    else:
        assert not plan.within_budget and len(plan.buckets) == len(best_by_count)
        assert padded_tokens(histogram, plan.buckets) == min(best_by_count.values())


def test_plan_edges():
    assert plan_buckets({93: 4}, 0.0, 8).buckets == (93,)
    assert plan_buckets({10: 5, 20: 5, 30: 1, 100: 1}, 0.0, 8).buckets == (10, 20, 30, 100)
    assert plan_buckets({64: 49, 1024: 1}, 0.5, 1).buckets == (1024,)
    for bad in ({}, {0: 3}, {10: 0}, {10.5: 1}):
        with pytest.raises(ValueError, match="histogram"):
            plan_buckets(bad, 0.1, 4)


def test_bucket_lookup_and_multiples_never_exceed_max_len():
    assert multiple_buckets(16, 128) == tuple(range(16, 129, 16))
    assert multiple_buckets(48, 128) == (48, 96, 128)
    assert multiple_buckets(200, 128) == (128,)
    assert bucket_for(93, (64, 96, 128)) == 96 and bucket_for(96, (64, 96)) == 96 and bucket_for(97, (64, 96)) is None


@pytest.mark.parametrize("values, field", [
    ({"buckets": [64, 64]}, "buckets"), ({"buckets": [96, 64]}, "buckets"), ({"buckets": [0, 64]}, "buckets"),
    ({"buckets": [64], "plan_from": "heldout"}, "buckets"), ({"multiple": 0}, "multiple"),
    ({"max_padding_waste": 1.0}, "max_padding_waste"), ({"max_padding_waste": -0.1}, "max_padding_waste"),
    ({"max_buckets": 0}, "max_buckets"), ({"plan_from": ""}, "plan_from"), ({"buckets": 64}, "buckets"),
    ({"bucket": [64]}, "bucket"),
])
def test_bad_config_raises_naming_the_field(values, field):
    with pytest.raises(ValueError, match=field):
        parse(CompileBucketsConfig, values, "compile_buckets")


def test_compile_must_come_after_every_pass_that_changes_model_or_kernels():
    with pytest.raises(ValueError, match="compile_buckets"):
        check_order([compile_buckets.PASS, head_prune_final.PASS])
    check_order([head_prune_final.PASS, local_window_attention.PASS, compile_buckets.PASS])


# ----------------------------------------------------------------------------- the compiled forward


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=4)


@pytest.fixture(scope="module")
def compiled(runtime):
    return lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96)))


def request_questions(words, options):
    return {f"q{index}": {"type": "choice", "instructions": "pick " * count,
                          "criteria": [f"o{i}" for i in range(options[index % len(options)])]}
            for index, count in enumerate(words)}


def run_both(runtime, compiled_runtime, state_words, words, options):
    prepared = runtime.prepare("hello " * state_words, request_questions(words, options))
    batch = runtime.collate(prepared)
    eager = eager_forward(runtime.model, runtime.kernels, batch)
    fast = compiled_runtime.forward(compiled_runtime.model, compiled_runtime.kernels, batch)
    for a, b in zip(eager, fast):
        np.testing.assert_allclose(np.array(a), np.array(b), atol=1e-5, rtol=0)
    return batch.shape, sum(item.length for item in prepared)


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 30), st.lists(st.integers(1, 12), min_size=1, max_size=3),
       st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_compiled_equals_eager_for_any_shape_inside_a_bucket(runtime, compiled, state_words, words, options):
    (batch_size, length, _), _ = run_both(runtime, compiled, state_words, words, options)
    assert length <= 96 and batch_size == len(words)


def test_compiled_equals_eager_across_shape_changes_and_counts_them(runtime):
    fresh = lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96)))
    runs = [run_both(runtime, fresh, state, words, [3]) for state, words in
            [(5, [2, 3]), (40, [1]), (6, [4, 1]), (60, [2]), (7, [5, 6])]]
    # (2, <=48, 3) three times with different lengths and contents, (1, 49..96, 3) twice: two compiles.
    assert all(shape[1] <= 48 for shape, _ in runs[0::2]) and all(48 < shape[1] <= 96 for shape, _ in runs[1::2])
    stats = fresh.info["compile_buckets"]["stats"]
    assert stats["compiles"] == 2 and stats["recompiles"] == 1 and stats["calls"] == 5
    assert stats["shape_changes"] == 4 and stats["fallbacks"] == 0
    assert set(stats["shapes"]) == {"2x48x3", "1x96x3"} and stats["shapes"]["2x48x3"]["calls"] == 3
    assert stats["shapes"]["2x48x3"]["first_call_s"] > 0 and stats["shapes"]["2x48x3"]["steady_s"] > 0
    assert stats["evaluated_tokens"] == 3 * 2 * 48 + 2 * 96
    assert stats["real_tokens"] == sum(real for _, real in runs)
    assert stats["padding_waste"] == pytest.approx(1 - stats["real_tokens"] / stats["evaluated_tokens"])
    bucket_padding = sum(shape[0] * (bucket_for(shape[1], (48, 96)) - shape[1]) for shape, _ in runs)
    assert stats["bucket_waste"] == pytest.approx(bucket_padding / stats["evaluated_tokens"])
    json.dumps(stats)  # plain data


def test_longer_than_every_bucket_runs_at_exact_length_and_counts_a_fallback(runtime):
    fresh = lo.apply(runtime, CompileBucketsConfig(buckets=(32,)))
    (_, length, _), _ = run_both(runtime, fresh, 50, [2], [2])
    stats = fresh.info["compile_buckets"]["stats"]
    assert stats["fallbacks"] == 1 and list(stats["shapes"]) == [f"1x{length}x2"] and stats["bucket_waste"] == 0


def test_compiled_forward_refuses_another_model_or_kernels(runtime, compiled):
    prepared = runtime.prepare("hello", request_questions([1], [2]))
    swapped = compiled.replace(model=clone_model(compiled.model))
    with pytest.raises(RuntimeError, match="re-applied after parameter-changing passes"):
        swapped.predict("hello", request_questions([1], [2]))
    pruned = lo.apply(compiled, head_prune_final.HeadPruneFinalConfig())
    with pytest.raises(RuntimeError, match="compile must be re-applied"):
        pruned.execute(prepared)
    # Re-applying compile binds the new kernels.
    recompiled = lo.apply(pruned, CompileBucketsConfig(buckets=(48, 96)))
    assert recompiled.forward.kernels is pruned.kernels
    recompiled.execute(prepared)


def test_buckets_beyond_max_len_and_replaced_forwards_are_refused(runtime):
    with pytest.raises(ValueError, match="buckets.*max_len 128"):
        lo.apply(runtime, CompileBucketsConfig(buckets=(64, 256)))
    other = runtime.replace(forward=lambda model, kernels, batch: eager_forward(model, kernels, batch))
    with pytest.raises(ValueError, match="forward"):
        lo.apply(other, CompileBucketsConfig())


def test_default_buckets_are_multiples_up_to_max_len(runtime):
    candidate = lo.apply(runtime, CompileBucketsConfig(multiple=48))
    assert candidate.forward.buckets == (48, 96, 128) and candidate.info["compile_buckets"]["buckets"] == [48, 96, 128]


def test_buckets_planned_from_a_suite(runtime, tmp_path):
    records = []
    for index, words in enumerate([3, 3, 3, 40]):
        questions = {"q": {"type": "noul", "instructions": "is it " * words}}
        tags = {"q": QuestionTag(type="noul", language="en", options=2, length_class="short")}
        records.append(SuiteRecord(f"r{index}", "hello " * 5, questions, {"q": True}, tags))
    write_suite_file(tmp_path / "lengths.jsonl", records, "lengths")
    candidate = lo.apply(runtime, CompileBucketsConfig(plan_from=str(tmp_path / "lengths.jsonl"),
                                                       max_padding_waste=0.0))
    lengths = sorted({item.length for record in records for item in runtime.prepare(record.state, record.questions)})
    assert candidate.forward.buckets == tuple(lengths)
    info = candidate.info["compile_buckets"]
    assert info["within_budget"] and info["planned_waste"] == 0.0 and info["histogram_rows"] == 4
    one = lo.apply(runtime, CompileBucketsConfig(plan_from=str(tmp_path / "lengths.jsonl"), max_buckets=1))
    assert one.forward.buckets == (lengths[-1],) and not one.info["compile_buckets"]["within_budget"]
    with pytest.raises(ValueError, match="missing.jsonl"):
        lo.apply(runtime, CompileBucketsConfig(plan_from=str(tmp_path / "missing.jsonl")))


def test_buckets_planned_from_a_workload_and_unknown_names_refused(runtime):
    candidate = lo.apply(runtime, CompileBucketsConfig(plan_from="short-16", max_buckets=2))
    info = candidate.info["compile_buckets"]
    assert info["source"] == "planned from short-16" and info["histogram_rows"] == 16
    assert 1 <= len(info["buckets"]) <= 2 and info["buckets"][-1] <= runtime.agent_config.max_len
    with pytest.raises(ValueError, match="'no-such-suite' is neither a suite"):
        lo.apply(runtime, CompileBucketsConfig(plan_from="no-such-suite"))


REQUESTS = [
    EvalRequest("a", "hello " * 12, {**request_questions([1, 4, 9], [1, 3, 5]),
                                     "n": {"type": "noul", "instructions": "is it"}}),
    EvalRequest("b", "hello " * 90, {"s": {"type": "score", "instructions": "rate", "criteria": ["low", "high"]}}),
]


def test_pass_is_exact_end_to_end_and_leaves_its_input_unchanged(runtime):
    before = runtime_fingerprint(runtime)
    candidate = lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96)))
    assert runtime_fingerprint(runtime) == before and runtime.forward is eager_forward
    assert isinstance(candidate.forward, BucketedForward) and candidate.forward.model is runtime.model
    metrics = compare(evaluate(runtime, REQUESTS), evaluate(candidate, REQUESTS)).metrics
    assert metrics["max_abs_dp"] <= 1e-5
    assert metrics["argmax_agreement"] == 1.0 and metrics["token_identity"] == 1.0
    assert candidate.applied == ("compile_buckets",) \
        and candidate.identity.endswith("+compile_buckets(buckets=[48, 96])")
    stats = candidate.info["compile_buckets"]["stats"]
    info = candidate.info["compile_buckets"]
    assert info["buckets"] == [48, 96] and info["source"] == "given"
    shapes = [(len(group), max(prepared[i].length for i in group)) for request in REQUESTS
              for prepared in [runtime.prepare(request.state, request.questions)] for group in runtime.plan(prepared)]
    assert stats["calls"] == len(shapes)
    assert stats["fallbacks"] == sum(length > 96 for _, length in shapes) == 1
    assert stats["evaluated_tokens"] == sum(rows * (bucket_for(length, (48, 96)) or length) for rows, length in shapes)


def test_batch_and_slot_buckets_pad_rows_and_slots_without_changing_answers(runtime):
    from exactness import assert_runtimes_match

    fresh = lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96, 128), batch_buckets=(2, 4), slot_buckets=(4, 8)))
    assert_runtimes_match(runtime, fresh, bit_identical=False, atol=2e-5)
    stats = fresh.info["compile_buckets"]["stats"]
    shapes = [tuple(int(part) for part in key.split("x")) for key in stats["shapes"]]
    assert {rows for rows, _, _ in shapes} <= {2, 4}  # batches of 1, 3 ran padded with dummy rows
    assert all(slots in (4, 8) or slots > 8 for _, _, slots in shapes) and any(slots > 8 for *_, slots in shapes)
    assert stats["bucket_padding_tokens"] > 0
    with pytest.raises(ValueError, match="batch_buckets must be strictly increasing"):
        CompileBucketsConfig(batch_buckets=(4, 2))


# ----------------------------------------------------------------------------- compile on top of other passes

EARLIER = {"length_sorted_batching": {"max_questions": 3, "token_budget": 256}, "head_prune_final": {},
           "local_window_attention": {"block_size": 8, "min_length": 0}}
COMBINATIONS = [combo for count in range(len(EARLIER) + 1) for combo in itertools.combinations(EARLIER, count)]


def stacked(runtime, names):
    for name in names:
        runtime = lo.apply(runtime, name, **EARLIER[name])
    return runtime


def compiled_stack_verdict(runtime, names, dtype, requests=REQUESTS):
    stack = stacked(runtime, names)
    config = CompileBucketsConfig(multiple=16)
    compiled = lo.apply(stack, config)
    report = compare(evaluate(stack, requests), evaluate(compiled, requests, repeat=2))
    metrics = dict(report.metrics, capture_max_abs_dlogit=capture_drift(PASS, config, {}, stack, requests))
    gates = default_gates(True, dtype, "incremental", captures=True)
    return [result for result in check_gates(metrics, gates) if not result.passed]


@pytest.mark.parametrize("names", COMBINATIONS, ids=lambda names: "+".join(names) or "alone")
def test_the_compiled_stack_equals_the_uncompiled_stack_on_outputs(runtime, names):
    # Within the calibrated float32 noise. The earlier passes are exact, so they move no
    # output: the capture probe (their kernels reweighted) is what shows that compile ran them.
    assert compiled_stack_verdict(runtime, names, "float32") == []


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_compiled_stack_equals_the_uncompiled_stack_in_half_precision(wide_checkpoint_dir, dtype):
    half = load_runtime(wide_checkpoint_dir, dtype, batch_size=4)  # one short request: half is slow on the CPU
    assert compiled_stack_verdict(half, tuple(EARLIER), dtype, REQUESTS[:1]) == []


# ----------------------------------------------------------------------------- padding at collation (issue 23)

def stats_without_times(stats):
    return {key: ({shape: {k: v for k, v in entry.items() if not k.endswith("_s")} for shape, entry in value.items()}
                  if key == "shapes" else value) for key, value in stats.items()}


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 30), st.lists(st.integers(1, 12), min_size=1, max_size=3),
       st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_batches_collated_at_the_bucket_shape_give_the_same_bits_and_stats(runtime, state_words, words, options):
    """The runtime's numpy-padded batch against the old path (an unpadded batch padded by MLX ops in the forward)."""
    config = CompileBucketsConfig(buckets=(48, 96, 128), batch_buckets=(2, 4), slot_buckets=(4, 8))
    new, old = lo.apply(runtime, config), lo.apply(runtime, config)
    prepared = runtime.prepare("hello " * state_words, request_questions(words, options))
    prepadded, unpadded = new.collate(prepared), runtime.collate(prepared)
    assert prepadded.shape == new.forward.padded_shape(*unpadded.shape) and prepadded.content_shape == unpadded.shape
    fresh = [new.forward(new.model, new.kernels, prepadded), old.forward(old.model, old.kernels, unpadded)]
    for a, b in zip(*fresh):
        assert a.shape == b.shape and np.array_equal(np.array(a), np.array(b))
    assert stats_without_times(new.info["compile_buckets"]["stats"]) == \
        stats_without_times(old.info["compile_buckets"]["stats"])
    # end to end: a forward without `padded_shape` is the old path (the runtime collates unpadded)
    legacy = old.replace(forward=lambda model, kernels, batch: old.forward(model, kernels, batch))
    executions = [new.execute(prepared), legacy.execute(prepared)]
    for name in ("logits", "action"):
        pairs = zip(*(getattr(execution, name) for execution in executions))
        assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in pairs)
    assert new.decode(executions[0]) == legacy.decode(executions[1])


def test_a_runtime_collated_batch_adds_no_padding_op_to_the_forward(runtime, monkeypatch):
    fresh = lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96), batch_buckets=(4,), slot_buckets=(8,)))
    prepared = runtime.prepare("hello", request_questions([2, 3], [3]))
    fresh.predict("hello", request_questions([2, 3], [3]))  # compiles the shape

    def padding(name):
        original = getattr(compile_buckets, name)

        def checked(batch, *args):
            result = original(batch, *args)
            assert result is batch, f"{name} built padding ops for a runtime-collated batch"
            return result
        return checked

    for name in ("pad_batch", "pad_rows", "pad_slots"):
        monkeypatch.setattr(compile_buckets, name, padding(name))
    batch = fresh.collate(prepared)
    assert batch.shape == (4, 48, 8) and batch.content_shape == (2, batch.content_shape[1], 3)
    logits, action = fresh.forward(fresh.model, fresh.kernels, batch)
    assert logits.shape == (2, 3) and action.shape[0] == 2  # sliced back to the questions' own rows and slots
