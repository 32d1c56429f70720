"""The reference cache cannot confuse two inputs that differ in one field (issue 22, item 5).

For one-field pairs (`cache_pairs`: question type, option order, option text, padding pattern) and for a
changed tokenizer or dtype, the second input of a pair looked up after the first is answered exactly as
evaluating it uncached answers it; and each key component that is meant to see a field sees it on its own.
"""
from __future__ import annotations

from cache_pairs import other_codec, request_pairs
from hypothesis import given, settings

from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import evaluate
from laya_opt.runs.refcache import cached_reference, reference_key, requests_digest
from laya_opt.timing.bench import prepared_digest


def lookup(runtime, request, checkpoint_dir, platform, cache_dir):
    tokens = prepared_digest([runtime.prepare(request.state, request.questions)])
    key = reference_key(runtime, [request], checkpoint_dir, tokens, platform)
    return cached_reference(key, lambda: evaluate(runtime, [request]), cache_dir)


def assert_answers_like_uncached(runtime, request, result):
    want = evaluate(runtime, [request])
    assert result.outputs.keys == want.keys
    for got, expected in zip(result.outputs.questions, want.questions):
        assert got.probabilities.tobytes() == expected.probabilities.tobytes(), got.key
        assert got.model_input == expected.model_input, got.key


@settings(max_examples=12, deadline=None)
@given(request_pairs())
def test_the_second_input_of_a_one_field_pair_is_never_answered_from_the_first_s_entry(
        reference, tiny_checkpoint_dir, platform, tmp_path_factory, pair):
    field, first, second = pair
    cache_dir = tmp_path_factory.mktemp("refcache")
    assert lookup(reference, first, tiny_checkpoint_dir, platform, cache_dir).status == "computed"
    result = lookup(reference, second, tiny_checkpoint_dir, platform, cache_dir)
    assert result.status == "computed", field
    assert_answers_like_uncached(reference, second, result)


@settings(max_examples=25, deadline=None)
@given(request_pairs())
def test_the_requests_digest_alone_tells_every_pair_apart(pair):
    """The requests component must not lean on the token digest (a caller may hash other tokens)."""
    field, first, second = pair
    assert requests_digest([first]) != requests_digest([second]), field


@settings(max_examples=10, deadline=None)
@given(request_pairs())
def test_a_changed_tokenizer_or_dtype_is_a_miss_answered_like_uncached(reference, tiny_checkpoint_dir, platform,
                                                                      tmp_path_factory, pair):
    _, request, _ = pair
    cache_dir = tmp_path_factory.mktemp("refcache")
    lookup(reference, request, tiny_checkpoint_dir, platform, cache_dir)
    for other in (reference.replace(codec=other_codec()), load_runtime(tiny_checkpoint_dir, "float16")):
        result = lookup(other, request, tiny_checkpoint_dir, platform, cache_dir)
        assert result.status == "computed"
        assert_answers_like_uncached(other, request, result)
