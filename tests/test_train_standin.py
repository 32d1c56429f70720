"""The stand-in trainer's data packing, fixed-shape batches and training-only matching loss."""
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laya_opt.prompt import prepare_request
from laya_opt.tokens import load_codec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "checkpoints"))

from standin_data import (OPTION_TOKENS, batch_arrays, fixed_batches, load_packed, pack,  # noqa: E402
                          save_packed, stop_token_ids)
from train_standin import MatchProbe, matching_loss  # noqa: E402

QUESTIONS = {
    "product": {"type": "choice", "instructions": "Which product is it?",
                "criteria": {"printer": "cartridge, toner", "router": "wifi, network", "phone": "smartphone"}},
    "mood": {"type": "score", "instructions": "Rate the mood.", "criteria": ["furious", "calm", "happy"]},
    "callback": {"type": "noul", "instructions": "The customer wants a call back."},
}
STATE = "My printer shows a cartridge error, the wifi works. I am calm."


@pytest.fixture(scope="module")
def codec():
    return load_codec(ROOT / "checkpoints" / "tokenizer")


@pytest.fixture(scope="module")
def items(codec):
    prepared = prepare_request(STATE, QUESTIONS, codec, 256, 96)
    labels = {"product": 0, "mood": 1, "callback": 0}
    return [(item, labels[item.qid], None) for item in prepared]


def test_pack_round_trips_and_a_stale_cache_is_ignored(items, tmp_path):
    packed = pack(items)
    assert len(packed) == 3 and list(packed.lengths) == [item.length for item, _, _ in items]
    path = tmp_path / "data.npz"
    save_packed(packed, path, key="k1")
    again = load_packed(path, key="k1")
    for field in ("ids", "offsets", "markers", "marker_offsets", "qtype", "label"):
        assert np.array_equal(getattr(again, field), getattr(packed, field))
    assert load_packed(path, key="other") is None and load_packed(tmp_path / "missing.npz", key="k1") is None
    assert [p.name for p in tmp_path.iterdir()] == ["data.npz"]  # no temp file left behind


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=400), st.integers(1, 32), st.integers(0, 9))
def test_fixed_batches_have_one_shape_and_never_repeat_a_question(lengths, batch_size, seed):
    lengths = np.array(lengths)
    batches = list(fixed_batches(lengths, batch_size, np.random.default_rng(seed)))
    assert all(len(b) == batch_size for b in batches)
    seen = np.concatenate(batches) if batches else np.array([], dtype=int)
    assert len(set(seen.tolist())) == len(seen)
    # Only each 50-batch window's ragged tail is dropped.
    assert len(seen) >= len(lengths) - (batch_size - 1) * -(-len(lengths) // (batch_size * 50))


def test_stop_tokens_are_marks_punctuation_and_digits_not_words(codec):
    vocab = codec.tokenizer.get_vocab()
    stops = set(stop_token_ids(vocab).tolist())
    assert {vocab["\u2581"], vocab[":"], vocab["."], vocab["7"]} <= stops
    assert vocab["\u2581urgent"] not in stops and vocab["\u2581card"] not in stops


def test_batch_arrays_mark_the_state_and_each_options_content_tokens(items, codec):
    packed = pack(items)
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    arrays = batch_arrays(packed, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops)
    assert arrays["input_ids"].shape[1] % 16 == 0 and arrays["marker_pos"].shape == (3, 4)
    state_ids = codec.encode(STATE)
    for row, (item, label, _) in enumerate(items):
        ids = arrays["input_ids"][row]
        region = np.flatnonzero(arrays["state_region"][row])
        assert list(ids[region]) == state_ids  # the state's tokens, exactly
        assert arrays["marker_mask"][row].sum() == len(item.markers) and arrays["labels"][row] == label
        for k in range(len(item.markers)):
            kept = [t for t in arrays["option_tokens"][row, k] if t >= 0]
            assert len(kept) <= OPTION_TOKENS and not set(kept) & set(stops.tolist())
            end = item.markers[k + 1] if k + 1 < len(item.markers) else region[0] - 1
            assert set(kept) <= set(item.ids[item.markers[k] + 1:end])
        assert (arrays["option_tokens"][row, len(item.markers):] == -1).all()
    product = next(row for row, (item, _, _) in enumerate(items) if item.qid == "product")
    printer = arrays["option_tokens"][product, 0]
    assert codec.encode(" printer")[-1] in printer.tolist()


def _loss(scores, ids, options, marker_mask, region):
    return matching_loss(mx.array(scores, dtype=mx.float32), mx.array(ids), mx.array(options),
                         mx.array(marker_mask), mx.array(region)).item()


def test_matching_loss_rewards_attention_on_matching_state_tokens():
    ids = np.array([[2, 10, 3, 4, 11, 4, 12, 3, 50, 11, 51, 3]])   # state = positions 8..10, "11" matches option 0
    options = np.array([[[11, -1], [12, -1]]])
    marker_mask = np.array([[True, True]])
    region = np.zeros((1, 12), dtype=bool)
    region[0, 8:11] = True
    on_match = np.zeros((1, 2, 12))
    on_match[0, 0, 9] = 20.0
    off_match = np.zeros((1, 2, 12))
    off_match[0, 0, 8] = 20.0
    assert _loss(on_match, ids, options, marker_mask, region) < 1e-6
    assert _loss(off_match, ids, options, marker_mask, region) > 10
    # Scores outside the state region do not count, whatever they are.
    noisy = on_match.copy()
    noisy[0, 0, 4] = 100.0
    assert _loss(noisy, ids, options, marker_mask, region) < 1e-6


def test_matching_loss_ignores_tokens_every_option_shares_and_questions_without_matches():
    ids = np.array([[2, 3, 4, 11, 4, 11, 3, 11, 60, 3]])
    region = np.zeros((1, 10), dtype=bool)
    region[0, 7:9] = True
    shared = np.array([[[11, -1], [11, -1]]])
    scores = np.zeros((1, 2, 10))
    assert _loss(scores, ids, shared, np.array([[True, True]]), region) == 0.0
    # A padded (masked) marker slot never contributes, even when its tokens would match.
    padded = np.array([[[60, -1], [11, -1]]])
    with_pad = _loss(scores, ids, padded, np.array([[True, False]]), region)
    assert with_pad == pytest.approx(np.log(2.0), abs=1e-5)


def test_match_probe_scores_every_marker_against_every_position():
    probe = MatchProbe(dims=32, width=8)
    encoded = mx.random.normal((2, 12, 32))
    scores = probe(encoded, mx.array([[3, 5, 0], [4, 0, 0]]))
    assert scores.shape == (2, 3, 12)

