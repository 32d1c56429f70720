"""Model-level invariants; parity with Hugging Face / PyTorch lives in tests/test_parity.py."""
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.model import Kernels, action_features, sliding_mask

from conftest import write_tiny_checkpoint


@pytest.fixture(scope="module")
def wide_checkpoint(wide_checkpoint_dir):
    return wide_checkpoint_dir


def random_rows(rng, count, vocab=128, max_len=60):
    rows = []
    for _ in range(count):
        length = int(rng.integers(8, max_len))
        ids = rng.integers(5, vocab, size=length)
        ids[0] = 2
        markers = sorted(rng.choice(np.arange(2, length), size=int(rng.integers(1, min(6, length - 2))),
                                    replace=False).tolist())
        rows.append((ids, markers, int(rng.integers(0, 3))))
    return rows


def collate_rows(rows, length=None, slots=None):
    length = length or max(len(ids) for ids, _, _ in rows)
    slots = slots or max(2, max(len(m) for _, m, _ in rows))
    ids = np.zeros((len(rows), length), np.int32)
    mask = np.zeros((len(rows), length), bool)
    pos = np.zeros((len(rows), slots), np.int32)
    pmask = np.zeros((len(rows), slots), bool)
    for r, (row_ids, markers, _) in enumerate(rows):
        ids[r, :len(row_ids)] = row_ids
        mask[r, :len(row_ids)] = True
        pos[r, :len(markers)] = markers
        pmask[r, :len(markers)] = True
    qtype = np.array([q for _, _, q in rows], np.int32)
    return [mx.array(a) for a in (ids, mask, pos, pmask, qtype)]


def run(model, arrays, kernels=Kernels()):
    logits, action = model(*arrays, kernels=kernels)
    mx.eval(logits, action)
    return np.array(logits), np.array(action)


def test_sliding_mask_is_inclusive_band_with_padded_queries_seeing_valid_keys():
    length, window = 140, 64
    valid = mx.ones((1, length), dtype=mx.bool_)
    mask = np.array(sliding_mask(valid, window))[0, 0]
    assert mask[70, 6] and mask[70, 134] and not mask[70, 5] and not mask[70, 135]
    assert mask[70].sum() == 2 * window + 1
    valid = mx.array([[True] * 10 + [False] * 130])
    mask = np.array(sliding_mask(valid, 4))[0, 0]
    assert mask[:, 10:].sum() == 0                  # padding is never a key
    assert mask[100, :10].all()                     # far padded query sees every valid key
    assert mask[3].tolist()[:10] == [True] * 8 + [False] * 2


def test_padding_and_batch_composition_do_not_change_answers(wide_checkpoint):
    model = load_checkpoint(wide_checkpoint).model
    rows = random_rows(np.random.default_rng(0), 16)
    batched_logits, batched_action = run(model, collate_rows(rows))
    for r, row in enumerate(rows):
        single_logits, single_action = run(model, collate_rows([row]))
        k = len(row[1])
        np.testing.assert_allclose(batched_logits[r, :k], single_logits[0, :k], atol=1e-5, rtol=0)
        np.testing.assert_allclose(batched_action[r], single_action[0], atol=1e-4, rtol=1e-5)
        assert (batched_logits[r, k:] == -1e4).all()


def test_extra_padding_columns_and_marker_slots_change_nothing(wide_checkpoint):
    model = load_checkpoint(wide_checkpoint).model
    rows = random_rows(np.random.default_rng(1), 4)
    base_logits, base_action = run(model, collate_rows(rows))
    wide_logits, wide_action = run(model, collate_rows(rows, length=128, slots=9))
    np.testing.assert_allclose(wide_logits[:, :base_logits.shape[1]], base_logits, atol=1e-5)
    np.testing.assert_allclose(wide_action, base_action, atol=1e-4, rtol=1e-5)


def test_padded_rows_are_finite_in_every_dtype(wide_checkpoint):
    rows = [(np.array([2, 9, 3, 4, 7, 3, 11, 3]), [3], 2), (np.array([2] + [9] * 90), [5, 6, 7], 0)]
    for dtype in ("float32", "float16", "bfloat16"):
        model = load_checkpoint(wide_checkpoint, dtype=dtype).model
        ids, mask, pos, pmask, qtype = collate_rows(rows)
        hidden = model.head_states(model.encoder(ids, mask), mask, qtype)
        logits, action = run(model, [ids, mask, pos, pmask, qtype])
        assert np.isfinite(np.array(hidden.astype(mx.float32))).all(), dtype
        assert np.isfinite(logits).all() and np.isfinite(action).all(), dtype
        assert logits.dtype == np.float32 and action.dtype == np.float32


def test_action_head_runs_in_the_explicit_activation_dtype(wide_checkpoint):
    model = load_checkpoint(wide_checkpoint, dtype="float16").model
    arrays = collate_rows(random_rows(np.random.default_rng(2), 3))
    _, action32 = run(model, arrays, Kernels(action_dtype=mx.float32))
    _, action16 = run(model, arrays, Kernels(action_dtype=mx.float16))
    # Same fp16 weights, but FP32 activations in the action head: the results must differ in low bits only.
    assert not np.array_equal(action32, action16)
    np.testing.assert_allclose(action32, action16, atol=5e-2)


def test_action_features_one_option_and_k_floor():
    logits = mx.array([[3.0, -1e4, -1e4], [1.0, 1.0, -1e4]])
    mask = mx.array([[True, False, False], [True, True, False]])
    features = np.array(action_features(logits, mask))
    np.testing.assert_allclose(features[0], [1.0, 1.0, 0.0, 2 / 255], atol=1e-6)   # top2 = 0, k = 2
    np.testing.assert_allclose(features[1], [0.5, 0.0, 1.0, 2 / 255], atol=1e-6)   # uniform: entropy 1


def test_head_layers_zero_runs(tmp_path):
    path = write_tiny_checkpoint(tmp_path / "nohead", agent_overrides={"head_layers": 0})
    model = load_checkpoint(path).model
    assert "head" not in model
    logits, action = run(model, collate_rows(random_rows(np.random.default_rng(3), 2)))
    assert np.isfinite(logits).all() and action.shape == (2, 2)


@settings(max_examples=15, deadline=None)
@given(length=st.integers(min_value=3, max_value=40), window=st.integers(min_value=1, max_value=12),
       valid=st.integers(min_value=1, max_value=40))
def test_sliding_mask_matches_definition(length, window, valid):
    valid = min(valid, length)
    mask = np.array(sliding_mask(mx.array([[True] * valid + [False] * (length - valid)]), window))[0, 0]
    for i in range(length):
        for j in range(length):
            expected = j < valid and (abs(i - j) <= window or i >= valid)
            assert mask[i, j] == expected
