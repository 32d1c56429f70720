"""The passes' caches cannot confuse two inputs that differ in one field (issue 22, item 5).

Each test runs pairs from `cache_pairs` (question type, option order, option text, padding pattern at the
same shape) and a changed tokenizer or dtype through the cached path after its partner, and compares
with the uncached path: prefix_cache's prefixes, masks_once's masks, compile_buckets' per-shape compiled
functions. A key that misses the changed field makes the second input reuse the first one's entry.
"""
from __future__ import annotations

import pytest
from cache_pairs import (assert_same_execution, other_codec, padding_pairs, question_pairs, request_pairs,
                         typed_codec, words)
from conftest import TINY_SPECIALS, make_tiny_tokenizer
from hypothesis import given, settings, strategies as st

import laya_opt as lo
from laya_opt.core.prompt import prepare_request
from laya_opt.core.runtime import load_runtime
from laya_opt.core.tokens import codec_from_tokenizer
from laya_opt.passes.compile_buckets import CompileBucketsConfig


@pytest.fixture(scope="module")
def runtime(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=4)


@pytest.fixture(scope="module")
def half(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float16", batch_size=4)


# --- prefix_cache ---------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(question_pairs(), words, st.booleans())
def test_prefix_cache_answers_each_question_of_a_one_field_pair_like_the_reference(runtime, pair, state, together):
    field, base, other = pair
    runtime = runtime.replace(codec=typed_codec())   # the tiny vocabulary has no word for a type: all [UNK]
    cached = lo.apply(runtime, "prefix_cache")
    requests = [{"a": base, "b": other}] if together else [{"q": base}, {"q": other}]
    for questions in requests:
        assert cached.prepare(state, questions) == runtime.prepare(state, questions), field


@settings(max_examples=20, deadline=None)
@given(question_pairs(), words)
def test_prefix_cache_never_serves_one_tokenizer_s_ids_to_another(runtime, pair, state):
    _, question, _ = pair
    cached = lo.apply(runtime, "prefix_cache")
    codec = other_codec()
    first = cached.prepare(state, {"q": question})
    second = cached.preparer(state, {"q": question}, codec, 128, 32)
    assert second == prepare_request(state, {"q": question}, codec, 128, 32)
    if "x" in repr(question):   # the pair is only a pair when the tokenizers disagree
        assert second != first
    same = codec_from_tokenizer(make_tiny_tokenizer(), TINY_SPECIALS)   # an equal tokenizer, another object
    assert cached.preparer(state, {"q": question}, same, 128, 32) == first


# --- masks_once -----------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(request_pairs())
def test_masks_once_builds_each_input_s_own_masks(runtime, pair):
    _, first, second = pair
    candidate = lo.apply(runtime, "masks_once")
    for request in (first, second, first):
        assert_same_execution(runtime, candidate, request)


@settings(max_examples=8, deadline=None)
@given(padding_pairs())
def test_masks_once_builds_masks_in_each_runtime_s_dtype(runtime, half, pair):
    _, first, second = pair
    full_candidate, half_candidate = lo.apply(runtime, "masks_once"), lo.apply(half, "masks_once")
    for reference, candidate, request in ((runtime, full_candidate, first), (half, half_candidate, first),
                                          (runtime, full_candidate, second), (half, half_candidate, second)):
        assert_same_execution(reference, candidate, request)


# --- compile_buckets ------------------------------------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(request_pairs())
def test_compile_buckets_runs_each_input_of_a_pair_like_the_eager_forward(runtime, pair):
    _, first, second = pair
    compiled = lo.apply(runtime, CompileBucketsConfig(buckets=(48, 96)))
    for request in (first, second, first):
        assert_same_execution(runtime, compiled, request, atol=2e-5)
