"""Sampled re-runs: the seeded sample, bit-for-bit comparison, and the deterministic metric measured on it."""
from __future__ import annotations

import itertools

import pytest
from fake_passes import REQUESTS
from hypothesis import given, settings, strategies as st

from laya_opt.core.runtime import eager_forward
from laya_opt.fidelity.checker import evaluate as evaluate_all
from laya_opt.fidelity.metrics import compare
from laya_opt.fidelity.rerun import check_rerun, evaluate, rerun_check, sample_indices
from laya_opt.util.errors import InputError


@given(total=st.integers(0, 600), rerun=st.integers(0, 700), seed=st.integers(0, 5))
@settings(max_examples=60, deadline=None)
def test_the_sample_is_seeded_sorted_distinct_and_at_most_rerun(total, rerun, seed):
    chosen = sample_indices(total, rerun, seed)
    assert chosen == sample_indices(total, rerun, seed)
    assert list(chosen) == sorted(set(chosen)) and all(0 <= index < total for index in chosen)
    assert len(chosen) == min(total, rerun)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_a_rerun_that_is_not_a_non_negative_int_is_refused_naming_it(bad):
    with pytest.raises(InputError, match="rerun must be a non-negative integer"):
        check_rerun(bad)


def test_a_deterministic_runtime_is_measured_deterministic_on_the_sample_only(reference):
    outputs = evaluate(reference, REQUESTS, rerun=2)
    measured = [q for q in outputs.questions if q.deterministic is not None]
    assert outputs.rerun == 2 and outputs.deterministic is True
    assert len(measured) == 2 * len(REQUESTS[0].questions) and all(q.deterministic for q in measured)
    assert compare(evaluate_all(reference, REQUESTS), outputs).metrics["deterministic"] == 1.0


def test_rerun_zero_measures_nothing(reference):
    outputs = evaluate(reference, REQUESTS, rerun=0)
    assert outputs.deterministic is None
    assert "deterministic" not in compare(outputs, outputs).metrics


def noisy_forward():
    """A forward whose every call adds a different offset: run-to-run non-deterministic."""
    calls = itertools.count()

    def forward(model, kernels, batch):
        logits, action = eager_forward(model, kernels, batch)
        return logits + 1e-3 * next(calls), action

    return forward


def test_a_non_deterministic_runtime_fails_the_deterministic_metric(reference):
    runtime = reference.replace(forward=noisy_forward())
    outputs = evaluate(runtime, REQUESTS, rerun=1)
    assert outputs.deterministic is False
    assert compare(evaluate_all(reference, REQUESTS), outputs).metrics["deterministic"] == 0.0


def test_rerun_check_names_the_questions_that_differ(reference):
    outputs = evaluate_all(reference, REQUESTS)
    same = rerun_check(reference, REQUESTS, outputs, rerun=len(REQUESTS))
    assert same.identical and same.requests == len(REQUESTS) and "identical" in same.describe()
    changed = reference.replace(forward=lambda m, k, b: (lambda lo, ac: (lo * 1.0001, ac))(*eager_forward(m, k, b)))
    differs = rerun_check(changed, REQUESTS, outputs, rerun=1)
    assert not differs.identical and set(differs.differing) == set(differs.keys) and len(differs.keys) == 3
    assert "differ bit for bit" in differs.describe()
