"""Gate derivation: every threshold follows its stated rule from the measured noise, floors and drift."""
from __future__ import annotations

import math

import pytest
from gate_fixtures import DRIFT, FLOAT16_NOISE, FLOAT32_NOISE, MAX_ABS_LOGIT, SCALE, measured

from laya_opt.fidelity.gate_derivation import (EPSILON, NOISE_MULTIPLE, DRIFT_MARGIN, combined, derive_gates,
                                               rounded_up)
from laya_opt.fidelity.gates import dump_gates_file, read_gates_file, spec_gates


def bounds(gates) -> dict:
    return {gate.metric: gate for gate in gates if gate.op == "<="}


def test_rounded_up_keeps_three_digits_and_never_goes_below():
    for value in (2.2649e-4, 0.0268, 1.0, 9.765625e-4, 0.12345, 7e-9, 123456.0):
        assert value <= rounded_up(value) <= value * 1.01
        assert float(f"{rounded_up(value):.3g}") == rounded_up(value)


def test_exact_bounds_are_twice_the_largest_same_dtype_noise():
    table = derive_gates(measured(), "t").gates["float32"]
    gates = bounds(table.exact_incremental)
    largest = max(FLOAT32_NOISE.values())
    assert gates["max_abs_dp"].threshold == rounded_up(NOISE_MULTIPLE * largest)
    assert gates["max_abs_dlogit"].threshold == rounded_up(NOISE_MULTIPLE * largest * SCALE["max_abs_dlogit"])
    # KL is quadratic in a logit change: the factor is squared.
    assert gates["kl_logits_max"].threshold == rounded_up(NOISE_MULTIPLE ** 2 * largest * SCALE["kl_logits_max"])
    assert gates["max_abs_dp"].noise_floor == pytest.approx(largest)
    assert "largest source: padded_16" in gates["max_abs_dp"].derivation
    assert gates["argmax_flips"].threshold == 0.0
    assert "deterministic" in {gate.metric for gate in table.exact_incremental}
    # float16: only padding was measured as noisy; its noise sets the bound, not the bit-identical sources.
    half = bounds(derive_gates(measured(), "t").gates["float16"].exact_incremental)
    assert half["max_abs_dp"].threshold == rounded_up(NOISE_MULTIPLE * FLOAT16_NOISE["padded_16"])
    assert "decisive_flips" in half  # half precision: decisive flips only


def test_bit_identical_outputs_get_the_floor_of_one_rounding():
    gates = bounds(derive_gates(measured(), "t").gates["bfloat16"].exact_incremental)
    assert gates["max_abs_dp"].threshold == rounded_up(EPSILON["bfloat16"])
    assert gates["max_abs_dlogit"].threshold == rounded_up(EPSILON["bfloat16"] * MAX_ABS_LOGIT)
    assert gates["kl_logits_max"].threshold == rounded_up(2 * EPSILON["bfloat16"] ** 2)
    assert "bit-identical" in gates["max_abs_dp"].derivation and gates["max_abs_dp"].noise_floor == 0.0


def test_cross_dtype_and_approximate_bounds_rest_on_the_cast_drift():
    gates = derive_gates(measured(), "t").gates
    allowance = DRIFT_MARGIN * DRIFT["float16"]
    for dtype in ("float32", "float16", "bfloat16"):
        incremental = bounds(gates[dtype].approximate_incremental)
        assert incremental["max_abs_dp"].threshold == rounded_up(allowance)
        assert incremental["kl_logits_max"].threshold == rounded_up(DRIFT_MARGIN ** 2 * DRIFT["float16"]
                                                                    * SCALE["kl_logits_max"])
        assert incremental["decisive_flips"].threshold == 0.0
    half = bounds(gates["float16"].exact_cumulative)
    exact16 = NOISE_MULTIPLE * FLOAT16_NOISE["padded_16"]
    assert half["max_abs_dp"].threshold == rounded_up(DRIFT_MARGIN * DRIFT["float16"] + exact16)
    assert half["max_abs_dp"].noise_floor == pytest.approx(DRIFT["float16"])  # the cast's own drift
    exact32 = NOISE_MULTIPLE * max(FLOAT32_NOISE.values())
    assert bounds(gates["float32"].exact_cumulative)["max_abs_dp"].threshold == rounded_up(exact32)
    assert bounds(gates["float32"].approximate_cumulative)["max_abs_dp"].threshold == rounded_up(exact32 + allowance)
    kl = bounds(gates["float32"].approximate_cumulative)["kl_logits_max"].threshold
    expected = (math.sqrt(NOISE_MULTIPLE ** 2 * max(FLOAT32_NOISE.values()) * SCALE["kl_logits_max"])
                + math.sqrt(DRIFT_MARGIN ** 2 * DRIFT["float16"] * SCALE["kl_logits_max"])) ** 2
    assert kl == rounded_up(expected) and combined("max_abs_dp", 1.0, 2.0) == 3.0


def test_a_float32_only_calibration_falls_back_to_the_spec_for_the_rest():
    file = derive_gates(measured(("float32",)), "t")
    assert set(file.gates) == {"float32"}
    spec = spec_gates().gates
    assert file.for_dtype("float16") is spec["float16"]
    assert bounds(file.gates["float32"].approximate_incremental)["max_abs_dp"].threshold == \
        bounds(spec["float32"].approximate_incremental)["max_abs_dp"].threshold == 0.02
    assert bounds(spec["float16"].exact_incremental)["max_abs_dp"].threshold == 0.02


@pytest.mark.parametrize("broken, message", [
    (lambda m: m["noise"].pop("float32"), "float32 noise is required"),
    (lambda m: m["noise"]["float16"].pop("padded_16"), r"measured.noise.float16: missing padded_16.max_abs_dp"),
    (lambda m: m["drift"].pop("bfloat16"), "bfloat16 noise was measured but not its cast drift"),
    (lambda m: m["noise"].update(float8={}), "unknown dtype 'float8'"),
])
def test_incomplete_measurements_are_refused(broken, message):
    values = measured()
    broken(values)
    with pytest.raises(ValueError, match=message):
        derive_gates(values, "t")


def test_a_written_gates_file_reads_back_with_every_threshold_and_derivation(tmp_path):
    file = derive_gates(measured(), "t", "synthetic", {"suite": "none"})
    path = tmp_path / "t.yaml"
    path.write_text(dump_gates_file(file, header="synthetic\nmeasurements"), encoding="utf-8")
    assert path.read_text().startswith("# synthetic\n# measurements\n")
    read = read_gates_file(path)
    for dtype in file.gates:
        for name in ("exact_incremental", "exact_cumulative", "approximate_incremental", "approximate_cumulative"):
            written, loaded = getattr(file.gates[dtype], name), getattr(read.gates[dtype], name)
            assert [(g, g.noise_floor, g.derivation) for g in written] == \
                [(g, g.noise_floor, g.derivation) for g in loaded]
    assert read.source == {"suite": "none"} and read.factors["noise_multiple"] == NOISE_MULTIPLE


# ------------------------------------------------------------------------------------- version 2: decision gates


def _with_percentiles(near_ties: dict[str, float]) -> dict:
    """Measurements as calibrate-gates now records them: the casts' p99 drift and near-tie flips."""
    values = measured()
    for dtype, drift in values["drift"].items():
        drift.update(p99_abs_dp=DRIFT[dtype] / 4, p99_abs_dlogit=DRIFT[dtype] * 2.5,
                     p99_kl_logits=DRIFT[dtype] * SCALE["kl_logits_max"] / 16, near_tie_flips=near_ties[dtype])
    return values


def test_approximate_drift_bounds_come_from_the_p99_of_the_cast_and_are_diagnostics():
    gates = derive_gates(_with_percentiles({"float16": 3.0, "bfloat16": 5.0}), "t").gates
    p99 = DRIFT["float16"] / 4
    for dtype in ("float32", "float16", "bfloat16"):
        incremental = bounds(gates[dtype].approximate_incremental)
        assert incremental["p99_abs_dp"].threshold == rounded_up(DRIFT_MARGIN * p99)
        assert incremental["p99_kl_logits"].threshold == rounded_up(DRIFT_MARGIN ** 2 * DRIFT["float16"]
                                                                    * SCALE["kl_logits_max"] / 16)
        assert "p99" in incremental["p99_abs_dp"].derivation
        assert all(gate.diagnostic for gate in incremental.values() if gate.metric.startswith("p99_"))
        assert "max_abs_dp" not in incremental   # no maximum over the suite decides or bounds an approximate pass
    cumulative = bounds(gates["bfloat16"].approximate_cumulative)
    assert cumulative["p99_abs_dp"].threshold == rounded_up(DRIFT_MARGIN * DRIFT["bfloat16"] / 4 + DRIFT_MARGIN * p99)
    # Exact passes keep their same-dtype noise bounds, untouched by the new measurements.
    assert gates["float16"].exact_incremental == derive_gates(measured(), "t").gates["float16"].exact_incremental


def test_near_tie_allowances_rest_on_what_the_casts_flip():
    gates = derive_gates(_with_percentiles({"float16": 3.0, "bfloat16": 5.0}), "t").gates
    allowance = {dtype: (bounds(gates[dtype].approximate_incremental)["near_tie_flips"].threshold,
                         bounds(gates[dtype].approximate_cumulative)["near_tie_flips"].threshold) for dtype in gates}
    # The pass may change 9 (what an exact test can't tell from the FP16 cast's 3); vs the reference, the cast
    # to the candidate dtype adds its own flips.
    assert allowance == {"float32": (9.0, 9.0), "float16": (9.0, 12.0), "bfloat16": (9.0, 14.0)}
    noise = {dtype: (bounds(gates[dtype].approximate_incremental)["near_tie_flips"].noise_floor,
                     bounds(gates[dtype].approximate_cumulative)["near_tie_flips"].noise_floor) for dtype in gates}
    assert noise == {"float32": (3.0, 3.0), "float16": (3.0, 6.0), "bfloat16": (3.0, 8.0)}   # the measured counts
    assert "does not tell from the 3" in bounds(gates["float32"].approximate_incremental)["near_tie_flips"].derivation
    for dtype in gates:
        for table in (gates[dtype].approximate_incremental, gates[dtype].approximate_cumulative):
            metrics = [(gate.metric, gate.op, gate.threshold) for gate in table if not gate.diagnostic]
            assert ("decisive_flips", "<=", 0.0) in metrics and ("mcnemar_p", ">=", 0.05) in metrics
    # Measurements from before near-tie flips were recorded: argmax minus decisive flips.
    old = measured()
    old["drift"]["float16"].update(argmax_flips=2.0, decisive_flips=0.0)
    assert bounds(derive_gates(old, "t").gates["float32"].approximate_incremental)["near_tie_flips"].threshold == 8.0


def test_a_version_2_file_with_diagnostics_reads_back(tmp_path):
    file = derive_gates(_with_percentiles({"float16": 1.0, "bfloat16": 0.0}), "t")
    path = tmp_path / "t.yaml"
    path.write_text(dump_gates_file(file), encoding="utf-8")
    read = read_gates_file(path)
    assert read.version == 2 and "diagnostic: true" in path.read_text()
    assert read.gates["float16"].approximate_cumulative == file.gates["float16"].approximate_cumulative
