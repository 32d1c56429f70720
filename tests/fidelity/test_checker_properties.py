"""The checker checked: generated output pairs with a known injected drift or flip give exactly the expected
metrics and gate verdicts; an identical candidate passes every gate; no stage can be compared with itself."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from laya_opt.fidelity.checker import Outputs, question_output
# The comparison the pipeline makes: drift and agreement (metrics) with the decision changes (decisions).
from laya_opt.fidelity.decisions import compare
from laya_opt.fidelity.gates import Gate, check_gates, default_gates, load_gates_file
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN
from laya_opt.runs.pipeline import StageResult
from laya_opt.core.runtime import ModelInput

TYPES = {"choice": (1, 6), "score": (3, 7), "noul": (2, 2)}
# Logits on a grid of 1/8 keep every sum exact; the drift is a multiple of 1/64.
logit_rows = st.sampled_from(sorted(TYPES)).flatmap(lambda kind: st.tuples(
    st.just(kind), st.integers(*TYPES[kind]).flatmap(
        lambda k: st.lists(st.integers(-64, 64).map(lambda n: n / 8), min_size=k, max_size=k))))
suites = st.lists(logit_rows, min_size=1, max_size=8)


def softmax(logits):
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def outputs(rows, identity, label_offset=0):
    questions = [question_output(f"r{index}/q", kind, softmax(logits), 0.5,
                                 ModelInput(ids=(2, index, 3), markers=tuple(range(1, len(logits) + 1)), qtype=0),
                                 logits=np.asarray(logits, dtype=np.float32), deterministic=True)
                 for index, (kind, logits) in enumerate(rows)]
    return Outputs(identity=identity, questions=tuple(questions), repeat=2)


def margin(logits):
    top = np.sort(softmax(logits))[::-1]
    return top[0] - top[1] if top.size > 1 else 1.0


def predicted(kind, logits):
    p = softmax(logits)
    return int(p[1] >= 0.5) if kind == "noul" else int(np.argmax(p))


@settings(max_examples=80, deadline=None)
@given(suites, st.data())
def test_an_injected_logit_drift_gives_exactly_the_expected_metrics_and_verdicts(rows, data):
    target = data.draw(st.integers(0, len(rows) - 1), label="question")
    kind, logits = rows[target]
    option = data.draw(st.integers(0, len(logits) - 1), label="option")
    drift = data.draw(st.integers(-256, 256).map(lambda n: n / 64), label="drift")
    moved = list(logits)
    moved[option] += drift
    candidate_rows = [row if index != target else (kind, moved) for index, row in enumerate(rows)]
    metrics = compare(outputs(rows, "ref"), outputs(candidate_rows, "cand")).metrics

    k = len(logits)
    shift = np.full(k, -drift / k)
    shift[option] += drift
    assert metrics["max_abs_dlogit"] == pytest.approx(float(np.max(np.abs(shift))), rel=1e-12, abs=1e-15)
    p, q = softmax(logits), softmax(moved)
    assert metrics["max_abs_dp"] == pytest.approx(float(np.max(np.abs(q - p))), rel=1e-9, abs=1e-15)
    kl = float(np.sum(p * (np.log(p) - np.log(q)))) if np.all(p > 0) and np.all(q > 0) else None
    if kl is not None and kl > 1e-12:
        assert metrics["kl_logits_max"] == pytest.approx(kl, rel=1e-6)
    flipped = predicted(kind, logits) != predicted(kind, moved)
    assert metrics["argmax_flips"] == float(flipped)
    assert metrics["decisive_flips"] == float(flipped and margin(logits) >= NEAR_TIE_MARGIN)
    assert metrics["near_tie_flips"] == float(flipped and margin(logits) < NEAR_TIE_MARGIN)
    assert metrics["token_identity"] == 1.0 and metrics["finite"] == 1.0
    # A gate at the measured value passes; one a hair below fails; the flip gate follows the flip.
    for name in ("max_abs_dlogit", "max_abs_dp"):
        value = metrics[name]
        assert check_gates(metrics, [Gate(name, "<=", value)])[0].passed
        if value > 0:
            assert not check_gates(metrics, [Gate(name, "<=", value * (1 - 1e-9))])[0].passed
    assert check_gates(metrics, [Gate("argmax_flips", "<=", 0.0)])[0].passed == (not flipped)


@settings(max_examples=60, deadline=None)
@given(suites, st.data())
def test_an_injected_flip_is_counted_as_decisive_exactly_when_the_reference_decided(rows, data):
    choices = [index for index, (kind, logits) in enumerate(rows) if kind != "noul" and len(set(logits)) > 1]
    if not choices:
        return
    target = data.draw(st.sampled_from(choices), label="question")
    kind, logits = rows[target]
    top = int(np.argmax(logits))
    other = data.draw(st.sampled_from([i for i in range(len(logits)) if logits[i] != logits[top]]), label="other")
    swapped = list(logits)
    swapped[top], swapped[other] = swapped[other], swapped[top]
    candidate_rows = [row if index != target else (kind, swapped) for index, row in enumerate(rows)]
    metrics = compare(outputs(rows, "ref"), outputs(candidate_rows, "cand")).metrics
    decisive = margin(logits) >= NEAR_TIE_MARGIN
    assert metrics["argmax_flips"] == 1.0 and metrics["decisive_flips"] == float(decisive)
    assert metrics["argmax_agreement"] == pytest.approx(1 - 1 / len(rows))
    swap = abs(logits[top] - logits[other])
    assert metrics["max_abs_dlogit"] == pytest.approx(swap, rel=1e-12)
    # The default gates stop any decisive flip; float32 exact gates stop every flip.
    half = {r.gate.metric: r.passed for r in check_gates(metrics, default_gates(False, "float16", "cumulative"))}
    exact = {r.gate.metric: r.passed for r in check_gates(metrics, default_gates(True, "float32", "cumulative"))}
    assert half["decisive_flips"] == (not decisive) and exact["argmax_flips"] is False


GATES_FILES = ("standin", "spec")


@settings(max_examples=30, deadline=None)
@given(suites)
def test_an_identical_candidate_passes_every_default_gate(rows):
    metrics = compare(outputs(rows, "ref"), outputs(rows, "copy")).metrics
    for name in GATES_FILES:
        file = load_gates_file(name)
        for dtype in ("float32", "float16", "bfloat16"):
            for exact in (True, False):
                for comparison in ("incremental", "cumulative"):
                    gates = default_gates(exact, dtype, comparison, gates_file=file)
                    failed = [r.message for r in check_gates(metrics, gates) if not r.passed]
                    assert failed == [], (name, dtype, exact, comparison)


def stage(index, parent, incremental, cumulative):
    return StageResult(index=index, name="s", config={}, exact=True, on_fail="stop", verdict="accepted",
                       incremental=incremental, cumulative=cumulative, incremental_gates=(), cumulative_gates=(),
                       report={}, apply_s=0.0, evaluate_s=0.0, parent=parent)


def test_a_stage_compared_with_itself_cannot_be_built():
    rows = [("noul", [0.0, 1.0])]
    ref, same = outputs(rows, "ref"), outputs(rows, "ref")
    honest = compare(ref, outputs(rows, "cand"))
    stage(1, 0, honest, honest)
    with pytest.raises(ValueError, match="incremental comparison compares ref with itself"):
        stage(1, 0, compare(ref, same), honest)
    with pytest.raises(ValueError, match="cumulative comparison compares ref with itself"):
        stage(1, 0, honest, compare(ref, same))
    for parent in (1, 2, -1):
        with pytest.raises(ValueError, match="parent must be an earlier stage"):
            stage(1, parent, honest, honest)
