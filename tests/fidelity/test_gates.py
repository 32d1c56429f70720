"""Gates: parsing (string and mapping forms, YAML), evaluation (missing, NaN, label-conditional), defaults."""
from __future__ import annotations

import math

import pytest
import yaml

from laya_opt.fidelity.gates import (Gate, GateResult, check_gates, default_gates, parse_gate, parse_gates)

PASSING = {"finite": 1.0, "deterministic": 1.0, "token_identity": 1.0, "argmax_agreement": 1.0,
           "decisive_agreement": 1.0,
           "max_abs_dp": 0.0, "labelled": 3.0, "accuracy_delta": 0.0}

def all_passed(results) -> bool:
    return all(result.passed for result in results)



def test_gate_ops():
    assert Gate("max_abs_dp", "<=", 1e-4).holds(1e-4) and not Gate("max_abs_dp", "<=", 1e-4).holds(1.1e-4)
    assert Gate("argmax_agreement", ">=", 0.95).holds(0.95) and not Gate("argmax_agreement", ">=", 0.95).holds(0.9)
    assert Gate("finite", "==", 1).holds(1.0) and not Gate("finite", "==", 1).holds(0.0)
    assert str(Gate("max_abs_dp", "<=", 1e-4)) == "max_abs_dp <= 0.0001"
    for bad in (("max_abs_dp", "<", 1.0), ("max_abs_dp", "<=", float("nan")), ("max_abs_dp", "<=", True),
                ("", "<=", 1.0), ("max_abs_dp", "<=", "0.1")):
        with pytest.raises(ValueError):
            Gate(*bad)


def test_parse_string_and_mapping_forms():
    assert parse_gate("max_abs_dp <= 1e-4") == Gate("max_abs_dp", "<=", 1e-4)
    assert parse_gate("  argmax_agreement>=0.99 ") == Gate("argmax_agreement", ">=", 0.99)
    assert parse_gate("max_abs_dp.noul <= 0.02") == Gate("max_abs_dp.noul", "<=", 0.02)
    assert parse_gate("accuracy_delta >= -0.02") == Gate("accuracy_delta", ">=", -0.02, requires_labels=True)
    assert parse_gate({"metric": "argmax_agreement", "op": ">=", "threshold": 1.0}) == \
        Gate("argmax_agreement", ">=", 1.0)
    assert parse_gate({"metric": "ece_delta", "op": "<=", "threshold": 0.05, "requires_labels": False}) == \
        Gate("ece_delta", "<=", 0.05, requires_labels=False)


def test_parse_gates_from_yaml():
    text = """
gates:
  - {metric: argmax_agreement, op: ">=", threshold: 1.0}
  - {metric: max_abs_dp, op: "<=", threshold: 1e-4}   # PyYAML reads 1e-4 as a string
  - "token_identity == 1"
  - metric: accuracy_delta
    op: ">="
    threshold: -0.02
"""
    gates = parse_gates(yaml.safe_load(text)["gates"])
    assert gates == (Gate("argmax_agreement", ">=", 1.0), Gate("max_abs_dp", "<=", 1e-4),
                     Gate("token_identity", "==", 1.0), Gate("accuracy_delta", ">=", -0.02, requires_labels=True))


@pytest.mark.parametrize("spec, message", [
    ("max_abs_dp < 1e-4", r"stage\.gates\[0\]: cannot parse gate 'max_abs_dp < 1e-4'"),
    ("max_abs_dp <= tiny", r"stage\.gates\[0\]\.threshold: expected a number, got 'tiny'"),
    ("max_abs_dp <= inf", r"stage\.gates\[0\]\.threshold: expected a finite number"),
    ("argmax_agreemnt >= 1", r"stage\.gates\[0\]\.metric: 'argmax_agreemnt' is not one of .*argmax_agreement"),
    ({"metric": "max_abs_dp", "op": "<="}, r"stage\.gates\[0\]\.threshold: missing"),
    ({"metric": "max_abs_dp", "op": "<", "threshold": 1}, r"stage\.gates\[0\]\.op: '<' is not one of"),
    ({"metric": "max_abs_dp", "op": "<=", "threshold": True}, r"stage\.gates\[0\]\.threshold: expected a number"),
    ({"metric": "max_abs_dp", "op": "<=", "threshold": [1]}, r"stage\.gates\[0\]\.threshold: expected a number"),
    ({"metric": 3, "op": "<=", "threshold": 1}, r"stage\.gates\[0\]\.metric: expected a string, got integer 3"),
    ({"metric": "max_abs_dp", "op": "<=", "threshold": 1, "thresh": 2}, r"stage\.gates\[0\]: unknown key\(s\) thresh"),
    ({"metric": "accuracy_delta", "op": ">=", "threshold": 0, "requires_labels": "yes"},
     r"stage\.gates\[0\]\.requires_labels: expected true/false"),
    (3.5, r"stage\.gates\[0\]: a gate is a string or a mapping, got float"),
])
def test_parse_errors_name_the_key_path(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_gates([spec], "stage.gates")


def test_parse_gates_needs_a_list():
    for bad in ("max_abs_dp <= 1", {"metric": "max_abs_dp"}, 7):
        with pytest.raises(ValueError, match="stage.gates: expected a list of gates"):
            parse_gates(bad, "stage.gates")


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation


def test_passing_and_failing_measurements():
    gates = (Gate("max_abs_dp", "<=", 1e-4), Gate("argmax_agreement", ">=", 1.0))
    results = check_gates({"max_abs_dp": 5e-5, "argmax_agreement": 0.9}, gates)
    assert results[0] == GateResult(gates[0], 5e-5, True, "")
    assert not results[1].passed and results[1].measured == 0.9
    assert results[1].message == "argmax_agreement = 0.9 violates argmax_agreement >= 1"
    assert not all_passed(results) and all_passed(results[:1])


def test_missing_metric_fails_with_a_message():
    result, = check_gates({"max_abs_dp": 0.0}, [Gate("token_identity", "==", 1.0)])
    assert not result.passed and result.measured is None and not result.skipped
    assert "'token_identity' missing" in result.message


def test_nan_and_non_numbers_fail():
    gate = Gate("max_abs_dp", "<=", 1.0)
    nan_result, = check_gates({"max_abs_dp": float("nan")}, [gate])
    assert not nan_result.passed and math.isnan(nan_result.measured) and "NaN" in nan_result.message
    for value in (None, "0.0", True):
        result, = check_gates({"max_abs_dp": value}, [gate])
        assert not result.passed and "not a number" in result.message


def test_label_gates_skip_only_when_there_are_no_labels():
    gate = Gate("accuracy_delta", ">=", -0.02, requires_labels=True)
    skipped, = check_gates({"labelled": 0.0}, [gate])
    assert skipped.passed and skipped.skipped and "no labelled questions" in skipped.message
    # labels present but the metric absent, or no count at all: a failure, not a skip
    for metrics in ({"labelled": 4.0}, {}):
        result, = check_gates(metrics, [gate])
        assert not result.passed and not result.skipped
    # without the flag a missing label metric fails even with no labels
    result, = check_gates({"labelled": 0.0}, [Gate("accuracy_delta", ">=", -0.02)])
    assert not result.passed
    dropped, = check_gates({"labelled": 4.0, "accuracy_delta": -0.05}, [gate])
    assert not dropped.passed and dropped.measured == -0.05


# ---------------------------------------------------------------------------------------------------------------------
# Defaults


def _table(gates):
    return {(g.metric, g.op): g.threshold for g in gates}


def test_default_incremental_exact():
    fp32 = _table(default_gates(True, "float32", "incremental"))
    assert fp32 == {("finite", "=="): 1.0, ("deterministic", "=="): 1.0, ("token_identity", "=="): 1.0,
                    ("argmax_agreement", ">="): 1.0, ("max_abs_dp", "<="): 2e-4}
    fp16, bf16 = (_table(default_gates(True, name, "incremental")) for name in ("float16", "bfloat16"))
    assert fp16[("max_abs_dp", "<=")] == 2e-2 and bf16[("max_abs_dp", "<=")] == 6e-2
    assert fp16[("decisive_agreement", ">=")] == bf16[("decisive_agreement", ">=")] == 0.99
    assert ("argmax_agreement", ">=") not in fp16  # half precision: near-tie flips are not decisions


def test_default_incremental_approximate():
    gates = default_gates(False, "float16", "incremental")
    assert _table(gates) == {("finite", "=="): 1.0, ("deterministic", "=="): 1.0, ("token_identity", "=="): 1.0,
                             ("decisive_agreement", ">="): 0.95, ("accuracy_delta", ">="): -0.02}
    assert [g.metric for g in gates if g.requires_labels] == ["accuracy_delta"]


def test_default_cumulative():
    loose = _table(default_gates(False, "float32", "cumulative"))
    assert loose == {("finite", "=="): 1.0, ("token_identity", "=="): 1.0, ("decisive_agreement", ">="): 0.95,
                     ("max_abs_dp", "<="): 0.25, ("accuracy_delta", ">="): -0.02}
    assert _table(default_gates(True, "float16", "cumulative")) == loose
    strict = _table(default_gates(True, "float32", "cumulative"))
    assert strict[("argmax_agreement", ">=")] == 1.0 and strict[("max_abs_dp", "<=")] == 2e-4
    assert ("deterministic", "==") not in strict


def test_defaults_apply_to_metrics():
    assert all_passed(check_gates(PASSING, default_gates(True, "float32", "incremental")))
    unlabelled = {key: value for key, value in PASSING.items() if key != "accuracy_delta"} | {"labelled": 0.0}
    results = check_gates(unlabelled, default_gates(False, "float32", "cumulative"))
    assert all_passed(results) and [r.gate.metric for r in results if r.skipped] == ["accuracy_delta"]
    drifted = dict(PASSING, max_abs_dp=0.01, argmax_agreement=0.99)
    assert not all_passed(check_gates(drifted, default_gates(True, "float32", "incremental")))
    assert all_passed(check_gates(drifted, default_gates(True, "float16", "incremental")))


def test_default_gates_reject_unknown_settings():
    with pytest.raises(ValueError, match="dtype_name 'fp16'"):
        default_gates(True, "fp16", "incremental")
    with pytest.raises(ValueError, match="comparison 'previous'"):
        default_gates(True, "float32", "previous")
