"""The trainer's device-resident data: banks per padded length, the in-step batch gather and token
replacement, the batch plan and the learning-rate schedule."""
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from laya_opt.suites.synthetic.generator import generate
from laya_opt.core.prompt import prepare_request
from laya_opt.core.tokens import load_codec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from standin_data import batch_arrays, pack, stop_token_ids  # noqa: E402
from train_standin import batch_plan, fact_token_table, gather_batch, host_banks, learning_rate  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    codec = load_codec(ROOT / "checkpoints" / "tokenizer")
    records = generate("train", 40, seed=3)
    items = [(item, 0, None) for r in records for item in prepare_request(r.state, r.questions, codec, 256, 96)]
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    return codec, pack(items), stops, fact_token_table(codec, stops)


def test_every_question_lands_in_one_bank_of_its_padded_length(setup):
    codec, packed, stops, table = setup
    banks = host_banks(packed, codec, 21, stops, table, multiple=64, workers=1)
    assert sum(len(b["labels"]) for b in banks) == len(packed)
    for bank in banks:
        length = bank["input_ids"].shape[1]
        assert length % 64 == 0 and (bank["lengths"] <= length).all() and (bank["lengths"] > length - 64).all()


def test_the_gathered_batch_is_what_batch_arrays_builds_and_replacement_acts_where_allowed(setup):
    codec, packed, stops, table = setup
    banks = host_banks(packed, codec, 21, stops, table, multiple=64, workers=1)
    bank = max(banks, key=lambda b: len(b["labels"]))
    length = bank["input_ids"].shape[1]
    members = np.flatnonzero(-(-packed.lengths // 64) * 64 == length)
    rows = np.arange(min(8, len(members)))
    device = {k: mx.array(v) for k, v in bank.items()}
    pool = mx.array(np.array([4000, 4001]))
    got = gather_batch(device, mx.array(rows), 0.0, pool)
    want = batch_arrays(packed, members[rows], codec.pad_id, codec.sep_id, 21, stops, multiple=64, fact_tokens=table)
    assert want["input_ids"].shape[1] <= length
    for key, value in want.items():
        value = np.asarray(value)
        mine = np.array(got[key])[:, :value.shape[1]] if value.ndim == 2 and key in (
            "input_ids", "attention_mask", "state_region") else np.array(got[key])
        assert np.array_equal(mine, value), key
    noisy = gather_batch(device, mx.array(rows), 1.0, pool)
    where = bank["replace_where"][rows]
    changed = np.array(noisy["input_ids"]) != np.array(got["input_ids"])
    assert where.any() and not (changed & ~where).any()
    assert set(np.array(noisy["input_ids"])[where].tolist()) <= {4000, 4001}


def test_the_batch_plan_visits_each_bank_in_full_batches_without_repeats():
    plan = batch_plan([10, 3, 25], 4, seed=0)
    epoch = [next(plan) for _ in range(2 + 6)]            # 10 // 4 + 3 // 4 + 25 // 4 batches per epoch
    assert all(len(rows) == 4 for _, rows in epoch)
    for bank, size in ((0, 10), (2, 25)):
        seen = np.concatenate([rows for b, rows in epoch if b == bank])
        assert len(set(seen.tolist())) == len(seen) and seen.max() < size
    assert not any(b == 1 for b, _ in epoch)
    with pytest.raises(ValueError):
        next(batch_plan([3], 4, seed=0))


@pytest.mark.parametrize("skip", [0, 1, 7, 8, 9, 21])
def test_a_resumed_batch_plan_continues_the_same_sequence(skip):
    whole = batch_plan([10, 3, 25], 4, seed=3)
    expected = [next(whole) for _ in range(skip + 12)][skip:]
    resumed = batch_plan([10, 3, 25], 4, seed=3, skip=skip)
    got = [next(resumed) for _ in range(12)]
    assert [b for b, _ in got] == [b for b, _ in expected]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, expected))
    other = batch_plan([10, 3, 25], 4, seed=4)
    assert any(not np.array_equal(a, b) for (_, a), (_, b) in zip([next(other) for _ in range(8)], expected))


def test_the_learning_rate_warms_up_then_decays_to_five_percent():
    values = [learning_rate(p, 1e-3, 0.1) for p in np.linspace(0, 1, 101)]
    peak = int(np.argmax(values))
    assert values[0] < 1e-5 and values[peak] == pytest.approx(1e-3) and 9 <= peak <= 11
    assert all(a >= b for a, b in zip(values[peak:], values[peak + 1:]))
    assert values[-1] == pytest.approx(5e-5)
