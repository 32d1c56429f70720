"""Fidelity metrics on hand-made outputs: JS, ECE, agreement, drift, token identity, tables, order invariance."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laya_opt.fidelity.checker import Outputs, question_output
from laya_opt.fidelity.metrics import (METRIC_NAMES, accuracy, accuracy_table, compare, ece, js_divergence,
                                       logit_drift)
from laya_opt.core.runtime import ModelInput

LN2 = math.log(2)


def make_question(key, type_name, probabilities, act=0.9, label_index=None, tags=None, ids=(2, 5, 3)):
    return question_output(key, type_name, np.array(probabilities, dtype=np.float64), act,
                           ModelInput(ids=tuple(ids), markers=(1,) * len(probabilities), qtype=0),
                           label_index=label_index, tags=tags or {}, deterministic=True)


def make_outputs(questions, identity="ref", repeat=2) -> Outputs:
    return Outputs(identity=identity, questions=tuple(questions), repeat=repeat)


REFERENCE = make_outputs([
    make_question("r/a", "choice", [0.7, 0.2, 0.1], label_index=0, tags={"language": "en", "options": 3}),
    make_question("r/b", "score", [0.1, 0.3, 0.6], act=0.5, label_index=2, tags={"language": "de"}),
    make_question("r/c", "noul", [0.45, 0.55], label_index=1, tags={"language": "en"}),
    make_question("s/a", "choice", [0.5, 0.5], label_index=1),
])
CANDIDATE = make_outputs([
    make_question("r/a", "choice", [0.7, 0.2, 0.1], label_index=0, tags={"language": "en", "options": 3}),
    make_question("r/b", "score", [0.25, 0.3, 0.45], act=0.6, label_index=2, tags={"language": "de"}),
    make_question("r/c", "noul", [0.55, 0.45], label_index=1, tags={"language": "en"}),
    make_question("s/a", "choice", [0.5, 0.5], label_index=1, ids=(2, 5, 5, 3)),
], identity="cand")


# ---------------------------------------------------------------------------------------------------------------------
# Elementary measures


def test_js_divergence_known_values():
    assert js_divergence([0.3, 0.7], [0.3, 0.7]) == 0.0
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(LN2, abs=1e-9)
    # JS([1, 0], [0.5, 0.5]) = 0.5 ln(1/0.75) + 0.5 (0.5 ln(0.5/0.75) + 0.5 ln(0.5/0.25))
    expected = 0.5 * math.log(1 / 0.75) + 0.5 * (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(2))
    assert js_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(expected, rel=1e-9)
    assert math.isnan(js_divergence([np.nan, 0.5], [0.5, 0.5]))
    with pytest.raises(ValueError, match="equal shapes"):
        js_divergence([0.5, 0.5], [0.2, 0.3, 0.5])


# Tiny weights become exact zeros: the float64 oracle below would divide subnormals to inf.
weights = st.floats(0.0, 1.0).map(lambda x: x if x > 1e-100 else 0.0)
distributions = st.integers(2, 8).flatmap(lambda k: st.tuples(
    *(st.lists(weights, min_size=k, max_size=k).filter(lambda v: sum(v) > 1e-3) for _ in range(2))))


@settings(max_examples=150, deadline=None)
@given(distributions)
def test_js_divergence_is_symmetric_bounded_and_zero_on_identity(pair):
    p, q = (np.array(v) / np.sum(v) for v in pair)
    value = js_divergence(p, q)
    assert 0.0 <= value <= LN2
    assert value == js_divergence(q, p)
    assert js_divergence(p, p) == 0.0
    # Agrees with the unclipped definition wherever both are defined (the clip only guards log(0)).
    m = (p + q) / 2
    kl = lambda a: sum(float(x * math.log(x / y)) for x, y in zip(a, m) if x > 0)
    assert value == pytest.approx(0.5 * (kl(p) + kl(q)), abs=1e-9)


def test_ece_on_toy_data():
    # bin 0.9: conf 0.95, 0.95 with one hit -> |0.5 - 0.95| = 0.45, weight 2/4
    # bin 0.6: conf 0.6, 0.6 with two hits -> |1.0 - 0.6| = 0.4, weight 2/4
    assert ece([0.95, 0.95, 0.6, 0.6], [True, False, True, True]) == pytest.approx(0.5 * 0.45 + 0.5 * 0.4)
    assert ece([1.0, 1.0], [True, True]) == 0.0  # 1.0 lands in the last bin, not out of range
    assert ece([0.25, 0.75], [False, True]) == pytest.approx(0.5 * 0.25 + 0.5 * 0.25)
    assert ece([0.5, 0.5, 0.5, 0.5], [True, False, True, False]) == 0.0
    # two confidences in different bins are not pooled: each bin is off by 0.45; one bin pools them to 0.0
    assert ece([0.45, 0.55], [False, True], bins=10) == pytest.approx(0.45)
    assert ece([0.45, 0.55], [False, True], bins=1) == pytest.approx(0.0)
    assert math.isnan(ece([np.nan, 0.5], [True, False]))
    for bad in (([], []), ([0.5], [True, False]), ([1.5], [True])):
        with pytest.raises(ValueError, match="ece"):
            ece(*bad)


def test_accuracy_counts_non_finite_as_wrong():
    questions = [make_question("a/q", "choice", [0.9, 0.1], label_index=0),
                 make_question("b/q", "choice", [np.nan, 0.1], label_index=0),
                 make_question("c/q", "choice", [0.9, 0.1])]
    assert questions[1].argmax == -1 and not questions[1].finite
    assert accuracy(questions) == 0.5
    with pytest.raises(ValueError, match="labelled"):
        accuracy(questions[2:])


# ---------------------------------------------------------------------------------------------------------------------
# compare()


def test_near_tie_flips_are_counted_apart_from_decisive_agreement():
    reference = make_outputs([make_question("a", "noul", [0.49, 0.51]), make_question("b", "noul", [0.47, 0.53]),
                              make_question("c", "choice", [0.2, 0.8]), make_question("d", "choice", [1.0])])
    candidate = make_outputs([make_question("a", "noul", [0.51, 0.49]), make_question("b", "noul", [0.53, 0.47]),
                              make_question("c", "choice", [0.2, 0.8]), make_question("d", "choice", [1.0])])
    metrics = compare(reference, candidate).metrics
    # a (gap 0.02) is a near tie; b (gap 0.06) is decisive and flipped; one option (d) is always decisive.
    assert metrics["argmax_agreement"] == 0.5 and metrics["near_tie_flips"] == 1.0
    assert metrics["decisive_agreement"] == pytest.approx(2 / 3)
    same = compare(reference, reference).metrics
    assert same["decisive_agreement"] == 1.0 and same["near_tie_flips"] == 0.0


def test_compare_aggregates():
    report = compare(REFERENCE, CANDIDATE)
    metrics = report.metrics
    assert set(metrics) <= METRIC_NAMES
    assert metrics["argmax_agreement"] == 0.75 and metrics["argmax_flips"] == 1.0  # noul 0.55 -> 0.45 flips
    # The noul gap was 0.10, a decisive flip; s/a is an exact tie, left out of decisive agreement.
    assert metrics["decisive_agreement"] == pytest.approx(2 / 3) and metrics["near_tie_flips"] == 0.0
    assert metrics["max_abs_dp"] == pytest.approx(0.15)
    assert metrics["mean_abs_dp"] == pytest.approx((0.15 + 0.15 + 0.1 + 0.1) / 10)  # over all 10 options
    assert metrics["score_drift_max"] == pytest.approx(abs((0.3 + 0.9) - (0.3 + 1.2)))
    assert metrics["act_probability_drift_max"] == pytest.approx(0.1)
    js_score = js_divergence([0.1, 0.3, 0.6], [0.25, 0.3, 0.45])
    js_noul = js_divergence([0.45, 0.55], [0.55, 0.45])
    assert metrics["js_max"] == max(js_score, js_noul) and metrics["js_mean"] == pytest.approx((js_score + js_noul) / 4)
    assert metrics["token_identity"] == 0.75 and metrics["finite"] == 1.0 and metrics["deterministic"] == 1.0
    assert report.first_token_mismatch == "s/a"
    assert report.first_token_mismatch_detail == "ids differ at position 2 (lengths 3 vs 4): (3,) vs (5,)"
    # labels: reference right on a, b, c (3/4); candidate loses c; s/a ties predict option 0 on both sides
    assert metrics["labelled"] == 4.0
    assert metrics["accuracy_reference"] == 0.75 and metrics["accuracy_candidate"] == 0.5
    assert metrics["accuracy_delta"] == -0.25
    assert metrics["ece_delta"] == pytest.approx(metrics["ece_candidate"] - metrics["ece_reference"])
    assert report.per_type["noul"] == {"count": 1.0, "argmax_agreement": 0.0, "max_abs_dp": pytest.approx(0.1)}
    assert report.per_type["choice"]["argmax_agreement"] == 1.0 and report.per_type["choice"]["max_abs_dp"] == 0.0
    assert metrics["argmax_agreement.noul"] == 0.0 and metrics["max_abs_dp.score"] == pytest.approx(0.15)


def test_ece_uses_answer_confidence_with_noul_predicted_class_probability():
    report = compare(REFERENCE, REFERENCE)
    confidences = [0.7, 0.6, 0.55, 0.5]
    hits = [True, True, True, False]
    assert report.metrics["ece_reference"] == pytest.approx(ece(confidences, hits))
    noul = make_question("n/q", "noul", [0.8, 0.2], label_index=0)
    assert noul.answer_confidence == 0.8 and noul.argmax == 0


def test_worst_orders_by_max_abs_dp_and_carries_context():
    worst = compare(REFERENCE, CANDIDATE).worst(2)
    assert [w.key for w in worst] == ["r/b", "r/c"]
    assert worst[0].tags == {"language": "de"}
    np.testing.assert_allclose(worst[0].dp, [0.15, 0.0, -0.15])
    assert (worst[1].reference_argmax, worst[1].candidate_argmax) == (1, 0)


def test_non_finite_side_makes_drift_nan_and_finite_zero():
    broken = make_outputs([make_question("r/a", "choice", [np.nan, 0.5, 0.5], label_index=0)]
                          + list(CANDIDATE.questions[1:]))
    report = compare(REFERENCE, broken)
    assert report.metrics["finite"] == 0.0
    assert math.isnan(report.metrics["max_abs_dp"]) and math.isnan(report.metrics["js_max"])
    assert report.worst(1)[0].key == "r/a"


def test_deterministic_comes_from_the_candidate_only():
    noisy = make_outputs([dataclasses.replace(q, deterministic=(q.key != "r/c")) for q in CANDIDATE.questions])
    assert compare(REFERENCE, noisy).metrics["deterministic"] == 0.0
    assert "deterministic" not in compare(REFERENCE, make_outputs(CANDIDATE.questions, repeat=1)).metrics
    assert compare(make_outputs(REFERENCE.questions, repeat=1), CANDIDATE).metrics["deterministic"] == 1.0


def test_compare_requires_identical_question_lists():
    swapped = make_outputs([CANDIDATE.questions[1], CANDIDATE.questions[0]] + list(CANDIDATE.questions[2:]))
    with pytest.raises(ValueError, match="question 0 differs: reference 'r/a', candidate 'r/b'"):
        compare(REFERENCE, swapped)
    with pytest.raises(ValueError, match="only the reference has question 's/a'"):
        compare(REFERENCE, make_outputs(CANDIDATE.questions[:3]))
    with pytest.raises(ValueError, match="only the candidate has question 'x/extra'"):
        compare(REFERENCE, make_outputs(CANDIDATE.questions + (make_question("x/extra", "noul", [0.5, 0.5]),)))
    wider = make_outputs([make_question("r/a", "choice", [0.7, 0.2, 0.05, 0.05])] + list(CANDIDATE.questions[1:]))
    with pytest.raises(ValueError, match="question r/a: reference is choice with 3 options, candidate choice with 4"):
        compare(REFERENCE, wider)
    relabelled = make_outputs([dataclasses.replace(CANDIDATE.questions[0], label_index=1)]
                              + list(CANDIDATE.questions[1:]))
    with pytest.raises(ValueError, match="question r/a: labels differ"):
        compare(REFERENCE, relabelled)
    with pytest.raises(ValueError, match="empty"):
        compare(make_outputs([]), make_outputs([]))


def test_no_labels_means_no_label_metrics():
    unlabelled = make_outputs([dataclasses.replace(q, label_index=None) for q in REFERENCE.questions])
    metrics = compare(unlabelled, unlabelled).metrics
    assert metrics["labelled"] == 0.0
    assert not any(name.startswith(("accuracy", "ece")) for name in metrics)


probability_rows = st.lists(st.tuples(st.lists(st.floats(0.01, 1.0), min_size=2, max_size=5),
                                      st.floats(-0.05, 0.05)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(probability_rows, st.randoms(use_true_random=False))
def test_aggregates_are_invariant_to_question_order(rows, rng):
    reference, candidate = [], []
    for index, (weights, shift) in enumerate(rows):
        p = np.array(weights) / np.sum(weights)
        q = np.clip(p + shift * np.arange(len(p)), 1e-6, None)
        type_name = "noul" if len(p) == 2 else "score"
        reference.append(make_question(f"r{index}/q", type_name, p, label_index=0))
        candidate.append(make_question(f"r{index}/q", type_name, q / q.sum(), act=0.9 + shift, label_index=0))
    order = list(range(len(rows)))
    rng.shuffle(order)
    straight = compare(make_outputs(reference), make_outputs(candidate)).metrics
    shuffled = compare(make_outputs([reference[i] for i in order]),
                       make_outputs([candidate[i] for i in order])).metrics
    assert straight == shuffled


# ---------------------------------------------------------------------------------------------------------------------
# Quality tables


def test_accuracy_table_breaks_down_by_each_field():
    rows = accuracy_table(REFERENCE, by=("type", "language", "options"))
    table = {(row.grouping, row.value): row for row in rows}
    assert rows[0].grouping == "all" and rows[0].count == 4 and rows[0].accuracy == 0.75
    assert table[("type", "choice")].count == 2 and table[("type", "choice")].accuracy == 0.5
    assert table[("language", "en")].count == 2 and table[("language", "unknown")].count == 1
    # the options tag wins when present, else the checker's k
    assert table[("options", "3")].count == 2 and table[("options", "2")].count == 2
    assert [row.value for row in rows if row.grouping == "options"] == ["2", "3"]
    with pytest.raises(ValueError, match="no labelled questions"):
        accuracy_table(make_outputs([make_question("r/a", "choice", [0.5, 0.5])], identity="unl"))


# ---------------------------------------------------------------------------------------------------------------------
# Logit-level drift


def with_logits(question, logits):
    return dataclasses.replace(question, logits=np.asarray(logits, dtype=np.float32))


def test_logit_drift_ignores_a_shared_shift_and_sees_what_saturation_hides():
    assert logit_drift(np.array([1.0, 2.0, 3.0]), np.array([11.0, 12.0, 13.0])) == (0.0, 0.0)
    # Both sides answer option 0 with p = 1.00 to many places; the logits still moved by 4.
    saturated_ref, saturated_cand = np.array([60.0, 0.0]), np.array([56.0, 0.0])
    max_abs, kl = logit_drift(saturated_ref, saturated_cand)
    assert max_abs == 2.0  # the change minus the shift shared by both options: (-4, 0) - (-2)
    assert 0.0 <= kl < 1e-20
    # KL(p || q) on softmax of the logits, in nats: p = (e/(1+e), 1/(1+e)), q = (1/2, 1/2)
    p1 = math.e / (1 + math.e)
    expected = p1 * math.log(p1 / 0.5) + (1 - p1) * math.log((1 - p1) / 0.5)
    assert logit_drift(np.array([1.0, 0.0]), np.array([0.0, 0.0]))[1] == pytest.approx(expected, rel=1e-12)
    assert logit_drift(np.array([3.0]), np.array([-2.0])) == (0.0, 0.0)  # one option: nothing to decide
    assert all(math.isnan(value) for value in logit_drift(np.array([np.nan, 1.0]), np.array([0.0, 1.0])))
    with pytest.raises(ValueError, match="equal non-empty"):
        logit_drift(np.array([1.0, 2.0]), np.array([1.0]))


def test_compare_reports_logit_metrics_only_when_both_sides_have_logits():
    logits = [[2.0, 0.5, -1.0], [0.0, 1.0, 3.0], [-1.0, 1.0], [0.0, 0.0]]
    reference = make_outputs([with_logits(q, row) for q, row in zip(REFERENCE.questions, logits)])
    moved = [[2.0, 0.5, -1.0], [0.5, 1.0, 2.25], [-1.0, 1.0], [0.0, 0.0]]
    candidate = make_outputs([with_logits(q, row) for q, row in zip(CANDIDATE.questions, moved)], identity="cand")
    metrics = compare(reference, candidate).metrics
    assert {"max_abs_dlogit", "kl_logits_max", "kl_logits_mean"} <= set(metrics) <= METRIC_NAMES
    # r/b moved by (0.5, 0, -0.75): minus the mean shift -1/12 the largest is |-0.75 + 1/12| = 2/3.
    assert metrics["max_abs_dlogit"] == pytest.approx(2 / 3)
    kl_b = logit_drift(np.array(logits[1]), np.array(moved[1]))[1]
    assert metrics["kl_logits_max"] == pytest.approx(kl_b) and metrics["kl_logits_mean"] == pytest.approx(kl_b / 4)
    assert "max_abs_dlogit" not in compare(REFERENCE, CANDIDATE).metrics  # hand-made outputs without logits


def test_decisive_flips_count_the_flips_outside_near_ties():
    metrics = compare(REFERENCE, CANDIDATE).metrics
    assert metrics["decisive_flips"] == 1.0 and metrics["near_tie_flips"] == 0.0  # the noul gap was 0.10
    assert compare(REFERENCE, REFERENCE).metrics["decisive_flips"] == 0.0


def test_reference_excess_is_the_stage_drift_from_the_reference_beyond_its_parents():
    from laya_opt.fidelity.metrics import reference_excess

    stage, parent = {"p99_abs_dp": 0.003, "max_abs_dp": 0.005}, {"p99_abs_dp": 0.004, "max_abs_dp": 0.002}
    excess = reference_excess(stage, parent)
    assert excess["ref_excess_p99_abs_dp"] == pytest.approx(-0.001)
    assert excess["ref_excess_max_abs_dp"] == pytest.approx(0.003)
    assert reference_excess(stage, None) == {"ref_excess_p99_abs_dp": 0.003, "ref_excess_max_abs_dp": 0.005}
    assert all(math.isnan(v) for v in reference_excess({}, parent).values())     # never passes by omission
    assert all(math.isnan(v) for v in reference_excess(stage, {}).values())
    # the max is judged beyond the larger of the parent's and the cast's; the p99 beyond the parent's alone
    cast = {"p99_abs_dp": 0.009, "max_abs_dp": 0.004}
    assert reference_excess(stage, parent, cast) == pytest.approx(
        {"ref_excess_p99_abs_dp": -0.001, "ref_excess_max_abs_dp": 0.001})
    assert reference_excess(stage, parent, {"max_abs_dp": 0.001})["ref_excess_max_abs_dp"] == pytest.approx(0.003)
    assert math.isnan(reference_excess(stage, parent, {})["ref_excess_max_abs_dp"])    # a cast without it
    assert reference_excess(stage, None, cast)["ref_excess_max_abs_dp"] == pytest.approx(0.001)
