"""Gates: parsing (string and mapping forms, YAML), evaluation (missing, NaN, label-conditional), defaults."""
from __future__ import annotations

import math

import pytest
import yaml

from gate_fixtures import measured

from laya_opt.util.errors import InputError, SchemaError
from laya_opt.fidelity.gate_derivation import CALIBRATED_METRICS, derive_gates
from laya_opt.fidelity.gates import (SPEC_MAX_ABS_DP_EXACT, Gate, GateResult, check_gates, default_gates,
                                     dump_gates_file, load_gates_file, parse_gate)

PASSING = {"finite": 1.0, "deterministic": 1.0, "token_identity": 1.0, "argmax_agreement": 1.0, "near_tie_flips": 0.0,
           "mcnemar_p": 1.0,
           "argmax_flips": 0.0, "decisive_agreement": 1.0, "decisive_flips": 0.0, "max_abs_dp": 0.0,
           "max_abs_dlogit": 0.0, "kl_logits_max": 0.0, "labelled": 3.0, "accuracy_delta": 0.0}

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


def test_parse_gate_forms_from_yaml():
    text = """
gates:
  - {metric: argmax_agreement, op: ">=", threshold: 1.0}
  - {metric: max_abs_dp, op: "<=", threshold: 1e-4}   # PyYAML reads 1e-4 as a string
  - "token_identity == 1"
  - metric: accuracy_delta
    op: ">="
    threshold: -0.02
"""
    gates = tuple(parse_gate(spec) for spec in yaml.safe_load(text)["gates"])
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
        parse_gate(spec, "stage.gates[0]")


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


SYNTHETIC = derive_gates(measured(), "synthetic")


def _bound(gates, metric="max_abs_dp"):
    return next(gate.threshold for gate in gates if gate.metric == metric and gate.op == "<=")


def test_each_comparison_gets_its_list_of_the_gates_file():
    for dtype in ("float32", "float16", "bfloat16"):
        table = SYNTHETIC.gates[dtype]
        assert default_gates(True, dtype, "incremental", gates_file=SYNTHETIC) == table.exact_incremental
        assert default_gates(False, dtype, "incremental", gates_file=SYNTHETIC) == table.approximate_incremental
        assert default_gates(True, dtype, "cumulative", gates_file=SYNTHETIC) == table.exact_cumulative
        assert default_gates(False, dtype, "cumulative", gates_file=SYNTHETIC) == table.approximate_cumulative
    # The lists differ where the measurements do: a float16 exact pass is bounded by float16 noise,
    # an approximate one by the float16 drift allowance.
    assert _bound(default_gates(True, "float16", "incremental", gates_file=SYNTHETIC)) < \
        _bound(default_gates(False, "float16", "incremental", gates_file=SYNTHETIC))


def test_a_capturing_pass_gets_a_capture_gate_as_tight_as_its_own_bound():
    gates = default_gates(True, "float32", "incremental", captures=True, gates_file=SYNTHETIC)
    capture = gates[-1]
    assert capture.metric == "capture_max_abs_dlogit" and capture.threshold == _bound(gates[:-1], "max_abs_dlogit")
    assert "capture_probe" in capture.derivation
    cumulative = default_gates(True, "float32", "cumulative", captures=True, gates_file=SYNTHETIC)
    assert "capture_max_abs_dlogit" not in {g.metric for g in cumulative}


def test_a_half_precision_kernel_pass_is_judged_by_its_distance_to_the_reference():
    exact = default_gates(True, "float16", "incremental", gates_file=SYNTHETIC)
    kernel = default_gates(True, "float16", "incremental", replaces_kernels=True, gates_file=SYNTHETIC)
    bound = _bound(exact)
    by_metric = {gate.metric: gate for gate in kernel}
    for metric in ("max_abs_dp", "max_abs_dlogit", "kl_logits_max"):   # drift from the parent: diagnostics
        assert by_metric[metric].diagnostic and "distance to the reference" in by_metric[metric].derivation
    for metric in ("ref_excess_p99_abs_dp", "ref_excess_max_abs_dp"):
        assert by_metric[metric].threshold == bound
    # the p99 decides; the worst question is a draw: reported, and bounded by the cumulative envelope instead
    assert not by_metric["ref_excess_p99_abs_dp"].diagnostic and by_metric["ref_excess_max_abs_dp"].diagnostic
    assert not by_metric["decisive_flips"].diagnostic and by_metric["kernel_rounding_error"].metric
    rounded = {**PASSING, "max_abs_dp": 10 * bound, "max_abs_dlogit": 1.0, "kl_logits_max": 1.0,
               "ref_excess_p99_abs_dp": -bound, "ref_excess_max_abs_dp": 0.5 * bound, "kernel_rounding_error": 0.0}
    assert all(result.passed for result in check_gates(rounded, kernel))   # rounds otherwise, no farther away
    assert not all(result.passed for result in check_gates(rounded, exact))
    farther = {**rounded, "ref_excess_p99_abs_dp": 2 * bound}
    assert [r.gate.metric for r in check_gates(farther, kernel) if not r.passed] == ["ref_excess_p99_abs_dp"]
    worst = {**rounded, "ref_excess_max_abs_dp": 2 * bound}    # its worst question farther: noted, not failed
    noted = {r.gate.metric: r for r in check_gates(worst, kernel)}
    assert all(r.passed for r in noted.values()) and noted["ref_excess_max_abs_dp"].exceeded
    cumulative = default_gates(True, "float16", "cumulative", replaces_kernels=True, gates_file=SYNTHETIC)
    envelope = _bound(cumulative)     # what bounds that question: its distance from the reference, cumulatively
    assert not next(r for r in check_gates({**PASSING, "max_abs_dp": 1.5 * envelope}, cumulative)
                    if r.gate.metric == "max_abs_dp").passed
    missing = {k: v for k, v in rounded.items() if k != "ref_excess_p99_abs_dp"}
    assert [r.gate.metric for r in check_gates(missing, kernel) if not r.passed] == ["ref_excess_p99_abs_dp"]
    # float32 kernels, and passes that replace no kernel, keep the exact gates
    assert default_gates(True, "float32", "incremental", replaces_kernels=True, gates_file=SYNTHETIC) == \
        SYNTHETIC.gates["float32"].exact_incremental
    assert default_gates(True, "float16", "cumulative", replaces_kernels=True, gates_file=SYNTHETIC) == \
        SYNTHETIC.gates["float16"].exact_cumulative


def test_a_half_precision_compile_is_judged_by_its_distance_to_the_reference_without_a_kernel_probe():
    # mx.compile fuses elementwise chains into kernels it generates, which round once where the ops rounded per
    # step (on an H100, compile_buckets moved `gate` answers 2.3e-3 from its parent and none farther from float32)
    compiled = default_gates(True, "float16", "incremental", compiles=True, gates_file=SYNTHETIC)
    kernel = default_gates(True, "float16", "incremental", replaces_kernels=True, gates_file=SYNTHETIC)
    assert compiled == tuple(gate for gate in kernel if gate.metric != "kernel_rounding_error")
    by_metric = {gate.metric: gate for gate in compiled}
    assert by_metric["max_abs_dp"].diagnostic and not by_metric["ref_excess_p99_abs_dp"].diagnostic
    assert "kernel_rounding_error" not in by_metric
    bound = _bound(default_gates(True, "float16", "incremental", gates_file=SYNTHETIC))
    rounded = {**PASSING, "max_abs_dp": 3 * bound, "max_abs_dlogit": 1.0, "kl_logits_max": 1.0,
               "ref_excess_p99_abs_dp": 0.0, "ref_excess_max_abs_dp": 0.0}
    assert all(result.passed for result in check_gates(rounded, compiled))
    farther = {**rounded, "ref_excess_p99_abs_dp": 2 * bound}
    assert [r.gate.metric for r in check_gates(farther, compiled) if not r.passed] == ["ref_excess_p99_abs_dp"]
    # float32 compiles and approximate stacks keep their tables
    assert default_gates(True, "float32", "incremental", compiles=True, gates_file=SYNTHETIC) == \
        SYNTHETIC.gates["float32"].exact_incremental
    assert default_gates(False, "float16", "incremental", compiles=True, gates_file=SYNTHETIC) == \
        SYNTHETIC.gates["float16"].approximate_incremental


def test_the_defaults_are_the_bundled_calibration_and_every_gate_says_why():
    bundled = load_gates_file("standin")
    assert load_gates_file(None) is bundled and set(bundled.gates) == {"float32", "float16", "bfloat16"}
    assert bundled.source["checkpoint"] == "standin" and bundled.version == 2
    # calibrated on the suite that gates the shipped experiments
    assert [suite["name"] for suite in bundled.measured["suites"]] == ["gate"]
    expected = {True: {"finite", "token_identity", "max_abs_dp", "max_abs_dlogit", "kl_logits_max"},
                False: {"finite", "token_identity", "decisive_flips", "near_tie_flips", "mcnemar_p", "p99_abs_dp",
                        "p99_abs_dlogit", "p99_kl_logits"}}
    for dtype in bundled.gates:
        for exact in (True, False):
            for comparison in ("incremental", "cumulative"):
                gates = default_gates(exact, dtype, comparison)
                assert gates == default_gates(exact, dtype, comparison, gates_file=bundled)
                assert all(gate.derivation for gate in gates)
                assert all(gate.noise_floor is not None for gate in gates if gate.metric in CALIBRATED_METRICS)
                assert expected[exact] <= {gate.metric for gate in gates}
                # drift bounds the decisions of an approximate pass only as diagnostics
                assert exact or all(gate.diagnostic for gate in gates if gate.metric.startswith("p99_"))


def test_the_spec_fallback_holds_the_spec_tolerances():
    spec = load_gates_file("spec")
    for dtype, tolerance in SPEC_MAX_ABS_DP_EXACT.items():
        assert _bound(default_gates(True, dtype, "incremental", gates_file=spec)) == tolerance
        assert _bound(default_gates(False, dtype, "incremental", gates_file="spec")) == 0.02
        assert all("not calibrated" in g.derivation for g in default_gates(True, dtype, "cumulative", gates_file=spec)
                   if g.metric == "max_abs_dp")
    with pytest.raises(InputError, match=r"gates_file: gates file 'nosuch' not found .*bundled: standin"):
        load_gates_file("nosuch")


def test_defaults_apply_to_metrics():
    assert all_passed(check_gates(PASSING, default_gates(True, "float32", "incremental", gates_file=SYNTHETIC)))
    unlabelled = {key: value for key, value in PASSING.items() if key != "accuracy_delta"} | {"labelled": 0.0}
    results = check_gates(unlabelled, default_gates(False, "float32", "cumulative", gates_file=SYNTHETIC))
    assert all_passed(results) and [r.gate.metric for r in results if r.skipped] == ["accuracy_delta"]
    drifted = dict(PASSING, max_abs_dp=0.01)
    assert not all_passed(check_gates(drifted, default_gates(True, "float32", "incremental", gates_file=SYNTHETIC)))
    assert all_passed(check_gates(drifted, default_gates(False, "float32", "incremental", gates_file=SYNTHETIC)))
    flipped = dict(PASSING, decisive_flips=1.0)
    assert not all_passed(check_gates(flipped, default_gates(False, "float16", "cumulative", gates_file=SYNTHETIC)))


def test_default_gates_reject_unknown_settings():
    with pytest.raises(ValueError, match="dtype_name 'fp16'"):
        default_gates(True, "fp16", "incremental")
    with pytest.raises(ValueError, match="comparison 'previous'"):
        default_gates(True, "float32", "previous")


def test_a_gates_file_by_path_is_read_through_the_schema_and_errors_name_file_and_key(tmp_path):
    good = tmp_path / "mine.yaml"
    good.write_text(dump_gates_file(SYNTHETIC))
    assert load_gates_file(str(good)).gates["float16"].exact_cumulative == SYNTHETIC.gates["float16"].exact_cumulative
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("op: <=, threshold:", "op: <, threshold:", 1))
    with pytest.raises(SchemaError, match=r"bad.yaml: gates.float32.exact_incremental\[3\].op: '<' is not one of"):
        load_gates_file(str(bad))
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: x\ngates: {float8: {}}\n")
    with pytest.raises(SchemaError, match="unknown.yaml: gates.float8"):
        load_gates_file(str(unknown))


def test_a_version_1_file_is_upgraded_on_reading_and_a_bad_version_is_named(tmp_path):
    (tmp_path / "v1.yaml").write_text(dump_gates_file(SYNTHETIC).replace("version: 2", "version: 1"))
    assert yaml.safe_load((tmp_path / "v1.yaml").read_text())["version"] == 1
    upgraded = load_gates_file(str(tmp_path / "v1.yaml"))
    assert upgraded.version == 2 and "upgraded on reading" in upgraded.description
    for dtype, table in upgraded.gates.items():
        assert table.exact_incremental == SYNTHETIC.gates[dtype].exact_incremental   # exact passes: as written
        for gates in (table.approximate_incremental, table.approximate_cumulative):
            deciding = {gate.metric for gate in gates if not gate.diagnostic}
            assert {"decisive_flips", "near_tie_flips", "mcnemar_p"} <= deciding
            assert not deciding & {"max_abs_dp", "max_abs_dlogit", "kl_logits_max"}
    bad = tmp_path / "v3.yaml"
    bad.write_text(dump_gates_file(SYNTHETIC).replace("version: 2", "version: 3"))
    with pytest.raises(SchemaError, match=r"v3.yaml: version: 3 is not one of"):
        load_gates_file(str(bad))


def test_a_diagnostic_gate_never_fails_but_says_it_was_exceeded():
    over, = check_gates({"max_abs_dp": 0.5}, (Gate("max_abs_dp", "<=", 0.1, diagnostic=True),))
    assert over.passed and over.exceeded and "does not decide" in over.message
    within, = check_gates({"max_abs_dp": 0.05}, (Gate("max_abs_dp", "<=", 0.1, diagnostic=True),))
    assert within.passed and not within.exceeded
    assert str(Gate("max_abs_dp", "<=", 0.1, diagnostic=True)) == "max_abs_dp <= 0.1 (diagnostic)"
