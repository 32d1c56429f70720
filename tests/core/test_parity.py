"""FP32 parity with independent references: HF `ModernBertModel` + torch `TransformerEncoderLayer`.

Golden fixtures come from tests/core/parity/make_golden.py (run where torch and transformers exist);
this test needs neither. Tolerances from spec §11.6.
"""
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.model import key_padding_mask

GOLDEN = Path(__file__).parent / "parity" / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "cases.npz").is_file())


def max_error(actual, expected, where=None):
    diff = np.abs(actual - expected)
    return float((diff[where] if where is not None else diff).max())


@pytest.fixture(scope="module", params=CASES)
def case(request):
    data = dict(np.load(GOLDEN / request.param / "cases.npz"))
    return request.param, load_checkpoint(GOLDEN / request.param / "checkpoint", dtype="float32"), data


def test_fixtures_present():
    assert {"small", "rope160k"} <= set(CASES)


def test_logits_and_action_match_reference(case):
    name, checkpoint, data = case
    inputs = [mx.array(data[k]) for k in ("input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype")]
    logits, action = checkpoint.model(*inputs)
    logits, action = np.array(logits), np.array(action)
    np.testing.assert_allclose(logits, data["logits"], atol=3e-5, rtol=3e-5, err_msg=name)
    np.testing.assert_allclose(action, data["action"], atol=3e-5, rtol=3e-5, err_msg=name)
    assert (logits[~data["marker_mask"]] == -1e4).all()


def test_hidden_states_match_reference_on_valid_tokens(case):
    name, checkpoint, data = case
    model = checkpoint.model
    ids, mask, qtype = mx.array(data["input_ids"]), mx.array(data["attention_mask"]), mx.array(data["qtype"])
    encoder_hidden = model.encoder(ids, mask)
    head_hidden = model.head_states(encoder_hidden, mask, qtype)
    if model.head_layers:
        head_hidden = model.head_layers[-1](head_hidden, key_padding_mask(mask))
    valid = data["attention_mask"]
    enc, head = np.array(encoder_hidden), np.array(head_hidden)
    assert np.isfinite(enc).all() and np.isfinite(head).all()   # padded rows too
    np.testing.assert_allclose(enc[valid], data["encoder_hidden"][valid], atol=2e-5, rtol=2e-5, err_msg=name)
    np.testing.assert_allclose(head[valid], data["head_hidden"][valid], atol=2e-5, rtol=2e-5, err_msg=name)


def test_parity_checkpoints_cover_the_intended_structure(case):
    name, checkpoint, data = case
    enc = checkpoint.encoder_config
    assert "sliding_attention" in enc.layer_types and "full_attention" in enc.layer_types
    assert data["input_ids"].shape[1] > 2 * enc.window + 1          # windows narrower than the sequence
    assert (~data["attention_mask"]).any()                            # padding present
    counts = data["marker_mask"].sum(axis=1)
    assert counts.min() == 1 and counts.max() > 3                     # one and many options
    assert set(data["qtype"].tolist()) == {0, 1, 2}
