"""Decision changes: exact counts of injected flips (hypothesis), McNemar and Clopper-Pearson values, verdicts."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from gate_fixtures import measured
from hypothesis import given, settings
from hypothesis import strategies as st

from laya_opt.fidelity.checker import Outputs, question_output
from laya_opt.fidelity.decisions import (binomial_cdf, clopper_pearson_upper, compare, decision_changes,
                                         mcnemar_p, near_tie_allowance)
from laya_opt.fidelity.gate_derivation import derive_gates
from laya_opt.fidelity.gates import check_gates, default_gates
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN


# ------------------------------------------------------------------------------------------------------ statistics


def test_binomial_cdf_matches_exact_sums():
    for n, k, p in ((10, 3, 0.5), (7, 0, 0.2), (20, 19, 0.9), (1, 0, 0.3), (50, 10, 0.1)):
        exact = math.fsum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))
        assert binomial_cdf(k, n, p) == pytest.approx(exact, rel=1e-12, abs=1e-15)
    assert binomial_cdf(-1, 5, 0.5) == 0.0 and binomial_cdf(5, 5, 0.5) == 1.0
    assert binomial_cdf(2, 5, 0.0) == 1.0 and binomial_cdf(2, 5, 1.0) == 0.0
    with pytest.raises(ValueError, match="p in"):
        binomial_cdf(1, 5, 1.5)


def test_clopper_pearson_known_values():
    assert clopper_pearson_upper(0, 1000) == pytest.approx(0.002991, abs=5e-7)
    for n in (1, 30, 1157, 100000):  # no change: 1 - 0.05^(1/n); all but one: 0.95^(1/n)
        assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9)
        assert clopper_pearson_upper(n - 1, n) == pytest.approx(0.95 ** (1 / n), rel=1e-9) if n > 1 else True
    assert clopper_pearson_upper(1, 10) == pytest.approx(0.39416, abs=1e-5)     # Beta(0.95; 2, 9)
    assert clopper_pearson_upper(5, 5) == 1.0
    for bad in ((-1, 10), (11, 10), (0, 0)):
        with pytest.raises(ValueError, match="changes <= questions"):
            clopper_pearson_upper(*bad)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.data())
def test_the_upper_bound_leaves_exactly_five_percent_below_it(n, data):
    changes = data.draw(st.integers(0, n - 1))
    bound = clopper_pearson_upper(changes, n)
    assert changes / n < bound <= 1.0
    assert binomial_cdf(changes, n, bound) == pytest.approx(0.05, abs=1e-9)
    if changes + 1 < n:
        assert clopper_pearson_upper(changes + 1, n) > bound


def _excess_tail(changes: int, noise: int) -> float:
    """P(X >= changes), X ~ Binomial(changes + noise, 1/2), summed exactly: the near-tie test's p-value."""
    n = changes + noise
    return sum(math.comb(n, i) for i in range(changes, n + 1)) / 2 ** n


def test_the_near_tie_allowance_is_the_last_count_the_exact_test_accepts():
    assert [near_tie_allowance(noise) for noise in (0, 1, 2, 3, 6, 19)] == [4, 6, 8, 9, 14, 31]
    allowances = [near_tie_allowance(noise) for noise in range(60)]
    for noise, allowed in enumerate(allowances):
        assert _excess_tail(allowed, noise) >= 0.05 > _excess_tail(allowed + 1, noise)
        assert allowed >= noise   # never stricter than the one count it rests on
    assert allowances == sorted(allowances)
    assert near_tie_allowance(3, level=0.01) > near_tie_allowance(3) > near_tie_allowance(3, level=0.2)
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="near_tie_allowance needs a count"):
            near_tie_allowance(bad)
    for level in (0.0, 1.0):
        with pytest.raises(ValueError, match="level"):
            near_tie_allowance(3, level=level)


def test_mcnemar_known_values():
    assert mcnemar_p(5, 0) == pytest.approx(1 / 32)       # the smallest loss significant at 5%
    assert mcnemar_p(4, 0) == pytest.approx(1 / 16)
    assert mcnemar_p(6, 1) == pytest.approx(8 / 128)
    assert mcnemar_p(7, 1) == pytest.approx(9 / 256)
    assert mcnemar_p(3, 3) == pytest.approx(42 / 64)
    assert mcnemar_p(0, 0) == mcnemar_p(0, 7) == 1.0
    with pytest.raises(ValueError, match="counts >= 0"):
        mcnemar_p(-1, 2)


# -------------------------------------------------------------------------------------------- injected flips


@dataclass(frozen=True)
class Injected:
    type_name: str        # choice (3 options) or score (5 options)
    near_tie: bool
    labelled: bool
    reference_right: bool
    change: str           # none | away (the reference's answer replaced) | to_label | other


DECISIVE_GAP, TIE_GAP = 0.3, NEAR_TIE_MARGIN / 2


def _probabilities(k: int, top: int, second: int, gap: float) -> np.ndarray:
    rest = (1.0 - 0.5 - (0.5 - gap)) / (k - 2)
    p = np.full(k, rest)
    p[top], p[second] = 0.5, 0.5 - gap
    return p


def _pair(index: int, spec: Injected):
    k = 3 if spec.type_name == "choice" else 5
    label = 0
    reference_top = label if spec.reference_right else 1
    wrong_other = 2 if reference_top == 1 else 1
    candidate_top = {"none": reference_top, "to_label": label,
                     "away": wrong_other if spec.reference_right else wrong_other,
                     "other": wrong_other}[spec.change]
    reference_p = _probabilities(k, reference_top, (reference_top + 1) % k, TIE_GAP if spec.near_tie else DECISIVE_GAP)
    candidate_p = _probabilities(k, candidate_top, (candidate_top + 1) % k, 0.2)
    extra = {"label": label if spec.labelled else None, "label_index": label if spec.labelled else None}
    key = f"q{index}"
    return (question_output(key, spec.type_name, reference_p, 0.5, **extra),
            question_output(key, spec.type_name, candidate_p, 0.5, **extra))


def _expected_outcome(spec: Injected) -> str | None:
    if spec.change == "none" or (spec.change == "to_label" and spec.reference_right):
        return None
    if not spec.labelled:
        return "unlabelled"
    if spec.reference_right:
        return "right_to_wrong"
    return "wrong_to_right" if spec.change == "to_label" else "wrong_to_other_wrong"


injected = st.builds(Injected, st.sampled_from(("choice", "score")), st.booleans(), st.booleans(), st.booleans(),
                     st.sampled_from(("none", "none", "away", "to_label", "other")))


def _outputs(specs):
    pairs = [_pair(index, spec) for index, spec in enumerate(specs)]
    return (Outputs("ref", tuple(p[0] for p in pairs)), Outputs("cand", tuple(p[1] for p in pairs)))


def _exact_mcnemar(losses: int, gains: int) -> float:
    n = losses + gains
    return 1.0 if losses == 0 else sum(math.comb(n, i) for i in range(losses, n + 1)) / 2 ** n


@settings(max_examples=150, deadline=None)
@given(st.lists(injected, min_size=1, max_size=40))
def test_injected_flips_are_counted_exactly_by_kind_margin_and_type(specs):
    reference, candidate = _outputs(specs)
    changes = decision_changes(reference, candidate)
    for kind, near in (("decisive", False), ("near_tie", True)):
        counts = getattr(changes.overall, kind)
        members = [s for s in specs if s.near_tie == near]
        assert counts.questions == len(members) and counts.labelled == sum(s.labelled for s in members)
        for name in ("right_to_wrong", "wrong_to_right", "wrong_to_other_wrong", "unlabelled"):
            assert getattr(counts, name) == sum(_expected_outcome(s) == name for s in members), (kind, name)
    for qtype, split in changes.by_type.items():
        assert split.total.changes == sum(_expected_outcome(s) is not None for s in specs if s.type_name == qtype)
    assert set(changes.by_type) == {s.type_name for s in specs}
    changed = [f"q{i}" for i, s in enumerate(specs) if _expected_outcome(s) is not None]
    assert list(changes.changed_keys) == changed
    losses = sum(_expected_outcome(s) == "right_to_wrong" for s in specs)
    gains = sum(_expected_outcome(s) == "wrong_to_right" for s in specs)
    metrics = compare(reference, candidate).metrics
    assert metrics["mcnemar_p"] == pytest.approx(_exact_mcnemar(losses, gains), rel=1e-9)
    assert metrics["decision_changes"] == len(changed)
    assert metrics["change_rate_upper"] == pytest.approx(clopper_pearson_upper(len(changed), len(specs)))
    # The decision counts agree with the drift comparison's own flip counts.
    assert metrics["decisive_flips"] == changes.overall.decisive.changes
    assert metrics["near_tie_flips"] == changes.overall.near_tie.changes


def _gates(cast_near_tie_flips: int):
    values = measured()
    values["drift"]["float16"]["near_tie_flips"] = float(cast_near_tie_flips)
    return derive_gates(values, "t")


@settings(max_examples=150, deadline=None)
@given(st.lists(injected, min_size=1, max_size=40), st.integers(0, 6))
def test_the_approximate_verdict_is_exactly_the_three_rules(specs, noise):
    reference, candidate = _outputs(specs)
    metrics = compare(reference, candidate).metrics
    decisive = sum(_expected_outcome(s) is not None and not s.near_tie for s in specs)
    near = sum(_expected_outcome(s) is not None and s.near_tie for s in specs)
    losses = sum(_expected_outcome(s) == "right_to_wrong" for s in specs)
    gains = sum(_expected_outcome(s) == "wrong_to_right" for s in specs)
    # Near ties: rejected once the exact test tells the pass's changes from the FP16 cast's `noise`.
    expected = decisive == 0 and _excess_tail(near, noise) >= 0.05 and _exact_mcnemar(losses, gains) >= 0.05
    gates = default_gates(False, "float32", "incremental", gates_file=_gates(noise))
    # finite/deterministic/token identity and accuracy are not what is tested here: measured as passing.
    metrics.update(deterministic=1.0, token_identity=1.0, accuracy_delta=0.0)
    results = check_gates(metrics, gates)
    assert all(r.passed for r in results) == expected
    # Drift never decides an approximate verdict: every drift gate is a diagnostic.
    assert all(r.gate.diagnostic for r in results if r.gate.metric.startswith(("max_abs", "kl_", "p99_")))


def test_one_decisive_flip_rejects_and_drift_without_a_change_passes():
    gates = default_gates(False, "float16", "incremental", gates_file=_gates(1))
    base = dict(deterministic=1.0, token_identity=1.0, accuracy_delta=0.0)
    flipped = _outputs([Injected("choice", False, True, False, "other")] + [Injected("score", False, True, True,
                                                                                    "none")] * 9)
    results = check_gates({**compare(*flipped).metrics, **base}, gates)
    assert [r.gate.metric for r in results if not r.passed] == ["decisive_flips"]
    # No decision changes, yet every probability moved far beyond the drift bound: accepted, drift reported.
    reference, candidate = _outputs([Injected("choice", False, True, True, "none")] * 10)
    metrics = {**compare(reference, candidate).metrics, **base}
    assert metrics["max_abs_dp"] > 0.05
    results = check_gates(metrics, gates)
    assert all(r.passed for r in results) and any(r.exceeded for r in results)


def test_different_questions_or_labels_are_refused():
    reference, candidate = _outputs([Injected("choice", False, True, True, "none")] * 2)
    with pytest.raises(ValueError, match="same questions"):
        decision_changes(reference, Outputs("c", candidate.questions[:1]))
    relabelled = Outputs("c", (candidate.questions[0], question_output("q1", "choice", np.array([0.5, 0.3, 0.2]), 0.5,
                                                                      label=1, label_index=1)))
    with pytest.raises(ValueError, match="q1: labels differ"):
        decision_changes(reference, relabelled)


def test_the_proof_states_the_bound_on_the_questions_gated():
    reference, candidate = _outputs([Injected("choice", False, True, True, "none")] * 1000)
    assert decision_changes(reference, candidate).proof() == \
        "no decision changed in 1000 questions: the change rate is below 0.00299 at 95%"
