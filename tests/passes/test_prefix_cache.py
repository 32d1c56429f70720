"""prefix_cache: cached prefixes are byte-identical to the uncached preparer, under mutation and eviction."""
from dataclasses import replace

import pytest
from exactness import assert_runtimes_match, shape_requests
from hypothesis import given, settings, strategies as st

import laya_opt as lo
from laya_opt.core.prompt import prepare_request
from laya_opt.core.runtime import load_runtime


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=4)


def stats(runtime):
    return runtime.info["prefix_cache"]["stats"]


def test_pass_is_exact_end_to_end_and_counts_hits(runtime):
    cached = lo.apply(runtime, lo.passes.PrefixCacheConfig(capacity=64))
    assert_runtimes_match(runtime, cached)
    first = dict(stats(cached))
    assert first["misses"] > 0 and first["evictions"] == 0
    assert_runtimes_match(runtime, cached)  # the same questions again: every prefix is a hit
    assert stats(cached)["misses"] == first["misses"] and stats(cached)["hits"] > first["hits"]


def test_label_sets_and_masks_make_different_entries(runtime):
    cached = lo.apply(runtime, "prefix_cache")
    noul = {"type": "noul", "instructions": "hello [MASK] hello"}
    for questions in ({"q": noul}, {"q": {**noul, "labels": {"false": "B", "true": "A"}}},
                      {"q": {**noul, "criteria": {"true": "hello"}}}, {"q": noul}):
        assert cached.prepare("[MASK] hello", questions) == runtime.prepare("[MASK] hello", questions)
    assert stats(cached)["misses"] == 3 and stats(cached)["hits"] == 1


words = st.lists(st.sampled_from(["hello", "x", "[MASK]", "ü", ""]), max_size=12).map(" ".join)
questions = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.one_of(
    st.builds(lambda text, k: {"type": "choice", "instructions": text, "criteria": [f"o{i}" for i in range(k)]},
              words, st.integers(1, 20)),
    st.builds(lambda text: {"type": "noul", "instructions": text}, words),
    st.builds(lambda text, k: {"type": "score", "instructions": text, "criteria": ["lo", "hi", "top"][:k]},
              words, st.integers(1, 3))), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(words, questions), min_size=1, max_size=6))
def test_cached_preparer_equals_the_reference_under_forced_evictions(runtime, requests):
    cached = lo.apply(runtime, lo.passes.PrefixCacheConfig(capacity=3))
    for state, qs in requests:
        assert cached.prepare(state, qs) == runtime.prepare(state, qs)
    assert stats(cached)["evictions"] == max(0, stats(cached)["misses"] - 3)


def test_a_request_with_more_new_questions_than_the_capacity_still_prepares_all(runtime):
    cached = lo.apply(runtime, lo.passes.PrefixCacheConfig(capacity=1))
    request = shape_requests()[5]
    assert cached.prepare(request.state, request.questions) == runtime.prepare(request.state, request.questions)
    assert stats(cached)["evictions"] == len(request.questions) - 1


def test_a_replaced_tokenizer_never_reuses_entries(runtime):
    cached = lo.apply(runtime, "prefix_cache")
    request = shape_requests()[3]
    cached.prepare(request.state, request.questions)
    other = replace(runtime.codec, tokenizer=runtime.codec.tokenizer.__class__.from_str(
        runtime.codec.tokenizer.to_str()))
    assert cached.preparer(request.state, request.questions, other, 128, 32) == \
        prepare_request(request.state, request.questions, other, 128, 32)
    assert stats(cached)["hits"] == 0
