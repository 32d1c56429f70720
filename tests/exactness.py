"""Shared exactness check for passes: a candidate runtime against its reference across awkward shapes.

Requests cover lengths at the tiny models' window edges (w = 4 or 8: 2w, 2w + 1, 2w + 2) and bucket
edges (16, 32, 48 tokens and one past), 1 to 20 options, every question type, a long state truncated
to max_len, and mixed lengths in one batch (padding).
"""
from __future__ import annotations

import numpy as np

from laya_opt.fidelity.checker import EvalRequest

STATE_WORDS = (0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 200)


def shape_requests() -> list[EvalRequest]:
    requests = []
    for index, words in enumerate(STATE_WORDS):
        options = 1 + (index * 3) % 20
        questions = {
            "pick": {"type": "choice", "instructions": "pick hello " * (index % 3 + 1),
                     "criteria": [f"o{i}" for i in range(options)]},
            "rate": {"type": "score", "instructions": "rate", "criteria": ["low", "mid", "high"][: 2 + index % 2]},
            "holds": {"type": "noul", "instructions": "hello " * (index % 4)},
        }
        requests.append(EvalRequest(f"s{index}", "hello " * words, questions))
    return requests


def assert_runtimes_match(reference, candidate, *, bit_identical: bool = True, atol: float = 0.0) -> None:
    """Same token inputs; logits and action equal (bitwise, or within atol) for every request."""
    for request in shape_requests():
        prepared = reference.prepare(request.state, request.questions)
        assert candidate.prepare(request.state, request.questions) == prepared, request.record_id
        want, got = reference.execute(prepared, trace=True), candidate.execute(prepared, trace=True)
        assert got.inputs == want.inputs, request.record_id
        for a, b in zip(want.logits + want.action, got.logits + got.action):
            if bit_identical:
                assert a.tobytes() == b.tobytes(), request.record_id
            else:
                np.testing.assert_allclose(b, a, atol=atol, rtol=0, err_msg=request.record_id)
