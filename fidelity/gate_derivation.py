"""From measured noise to gate thresholds: the rules `laya-opt calibrate-gates` applies, each one stated.

Measurements (`fidelity.calibration`), per candidate dtype d, on a suite:

* same-dtype noise, per source: the d runtime (batch 16, insertion order, eager) against itself
  re-run (`run_to_run`), with every batch split into single rows at the same padded length
  (`row_split`: other matmul shapes, same padding), with batches of 1 and of 4 (`batch_1`, `batch_4`),
  length-sorted (`length_sorted`) and padded to a multiple of 16 tokens (`padded_16`);
* the cast drift of d: the d runtime against the float32 reference (float16 and bfloat16);
* the largest |logit| on the suite, which sets the size of one rounding at the logits.

Each drift metric (max |dp|, max |Δ logit|, max KL on logits) gets a threshold:

1. Same-dtype noise: the largest over the sources. One source per class is not enough: on the stand-in
   in float16, splitting batches into rows is bit-identical, yet any exact kernel that rounds one
   intermediate differently (the banded window) moves saturated answers as far as padding does, because
   one float16 unit at a logit near 60 is amplified by temperatures of 0.5.
2. Exact, same dtype: NOISE_MULTIPLE x the noise, at least the floor of one rounding in d
   (max |dp|: the dtype's epsilon; max |Δ logit|: epsilon x the largest |logit|). Where the outputs were
   bit-identical the floor is the bound: near zero, not the cross-dtype tolerance.
3. Cross-dtype: DRIFT_MARGIN x the measured cast drift. The drift is a maximum over one suite's
   questions; another suite's maximum is another draw, and the margin covers that.
4. Approximate pass: judged by the decisions it changes (gates.decision_gates): no decisive change; near-tie
   changes up to the most that an exact test (at 0.05) does not tell from the number the float16 cast flips
   on the calibration suite (`near_tie_flips` of the float16 drift: the reference's own noise breaks that
   many near ties; `decisions.near_tie_allowance`: 4 for none, 9 for 3, because that number is one noisy
   draw); McNemar p >= 0.05. Its drift is a
   diagnostic bounded by APPROXIMATE_SHARE x DRIFT_MARGIN x the p99 of the float16 cast's per-question drift
   (`p99_*` metrics): an approximate pass may move answers as far as casting to FP16 does. p99, not the
   maximum: a maximum grows with the suite, so a bound set on one suite's maximum fails a bigger suite; on
   1,000 questions p99 rests on the 10 worst. Measurements without percentiles (version 1) keep the
   maximum-based rule-3 allowance, as a diagnostic.
5. Cumulative (vs the float32 reference): the exact bound in d, plus the cast drift bound of d (stage 0,
   the cast itself, is gated by this envelope). Once the stack holds an approximate pass: the decision
   gates (near ties: the cast to d's flips plus the rule-4 allowance), and as diagnostics the p99 cast
   bound of d plus the approximate allowance.

KL is quadratic in a small logit change (KL ≈ ½ Var(Δ logit)), so its factors are squared, its floor is
2 ε² (one unit moved in an even split, see `floors`), and bounds add as (√a + √b)²; the other metrics add
linearly. Flips: none in exact
float32 comparisons, no decisive flip (reference gap >= 0.05) anywhere else. docs/gates.md explains it all.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from laya_opt.fidelity.gates import (DTYPE_NAMES, DtypeGates, Gate, GatesFile, gate_table, near_tie_allowances,
                                     spec_bounds)
from laya_opt.fidelity.metrics import DRIFT_PERCENTILE

NOISE_SOURCES = ("run_to_run", "row_split", "batch_1", "batch_4", "length_sorted", "padded_16")
CALIBRATED_METRICS = ("max_abs_dp", "max_abs_dlogit", "kl_logits_max")
# The approximate drift diagnostics: each maximum's percentile counterpart (fidelity.metrics.PERCENTILE_METRICS).
PERCENTILE_OF = {"max_abs_dp": "p99_abs_dp", "max_abs_dlogit": "p99_abs_dlogit", "kl_logits_max": "p99_kl_logits"}
QUADRATIC = frozenset({"kl_logits_max", "p99_kl_logits"})
# Machine epsilon: one unit in the last place at 1.0 in each candidate dtype.
EPSILON = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
NOISE_MULTIPLE = 2.0      # rule 2
DRIFT_MARGIN = 2.0        # rule 3
APPROXIMATE_SHARE = 1.0   # rule 4
FACTORS = {"noise_multiple": NOISE_MULTIPLE, "drift_margin": DRIFT_MARGIN, "approximate_share": APPROXIMATE_SHARE}


def scaled(metric: str, value: float, factor: float) -> float:
    return value * factor ** (2 if metric in QUADRATIC else 1)


def combined(metric: str, first: float, second: float) -> float:
    return (math.sqrt(first) + math.sqrt(second)) ** 2 if metric in QUADRATIC else first + second


def floors(dtype: str, max_abs_logit: float) -> dict[str, float]:
    """One rounding in `dtype`, per calibrated metric.

    max |dp|: one unit at 1.0; max |Δ logit|: one unit at the largest |logit|; KL: what one unit moved
    between the two options of an even split costs (KL ≈ ½ χ² = ½ Σ Δp² / p = 2 ε²). The logit floor
    would overstate KL: the largest logits belong to saturated answers, whose KL a rounding cannot move.
    """
    epsilon = EPSILON[dtype]
    return {"max_abs_dp": epsilon, "max_abs_dlogit": epsilon * max_abs_logit, "kl_logits_max": 2 * epsilon ** 2}


def rounded_up(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits, never below it (a threshold must not shrink when written)."""
    if value <= 0:
        return value
    step = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return float(f"{math.ceil(value / step - 1e-9) * step:.{digits}g}")


def _bound(metric: str, threshold: float, noise: float, derivation: str) -> Gate:
    return Gate(metric, "<=", rounded_up(threshold), noise_floor=float(f"{noise:.3g}"), derivation=derivation)


def _n(value: float) -> str:
    return f"{value:.3g}"


def largest_noise(noise: Mapping[str, Mapping[str, float]], metric: str) -> tuple[float, str]:
    """Rule 1: the largest measured same-dtype noise, and the source it came from."""
    source = max(NOISE_SOURCES, key=lambda name: noise[name][metric])
    return noise[source][metric], source


def exact_bounds(dtype: str, noise: Mapping, floor: Mapping[str, float],
                 sample: str = "") -> dict[str, tuple[float, float, str]]:
    """metric -> (threshold, noise floor, derivation) of rule 2; `sample` says on what the noise was measured."""
    out = {}
    for metric in CALIBRATED_METRICS:
        value, source = largest_noise(noise, metric)
        multiple = scaled(metric, value, NOISE_MULTIPLE)
        factor = f"{NOISE_MULTIPLE:g}{'²' if metric in QUADRATIC else ''}"
        if multiple >= floor[metric] and value > 0:
            text = f"{factor} x the {dtype} same-dtype noise {_n(value)} (largest source: {source}{sample})"
        else:
            state = "bit-identical" if value == 0 else f"{factor} x that is smaller"
            text = f"floor: one {dtype} rounding ({_n(floor[metric])}); measured same-dtype noise {_n(value)}, " \
                   f"{state}{sample}"
        out[metric] = (max(multiple, floor[metric]), value, text)
    return out


def drift_bounds(dtype: str, drift: Mapping[str, float]) -> dict[str, tuple[float, float, str]]:
    """metric -> (threshold, measured drift, derivation) of rule 3."""
    factor = lambda metric: f"{DRIFT_MARGIN:g}{'²' if metric in QUADRATIC else ''}"  # noqa: E731
    return {metric: (scaled(metric, drift[metric], DRIFT_MARGIN), drift[metric],
                     f"{factor(metric)} x the {dtype}-vs-float32 cast drift {_n(drift[metric])}")
            for metric in CALIBRATED_METRICS}


def _sum(first: Mapping, second: Mapping) -> dict[str, tuple[float, float, str]]:
    """Rule 5: add two bound tables; the noise floor is the first's."""
    return {metric: (combined(metric, first[metric][0], second[metric][0]), first[metric][1],
                     f"({first[metric][2]}) + ({second[metric][2]})") for metric in CALIBRATED_METRICS}


def _gates(bounds: Mapping[str, tuple[float, float, str]]) -> tuple[Gate, ...]:
    return tuple(_bound(metric, *bounds[metric]) for metric in CALIBRATED_METRICS)


def has_percentiles(measured: Mapping[str, Any], dtype: str) -> bool:
    """Whether the cast drift of `dtype` was recorded with its percentiles (calibrations before version 2 were not)."""
    drift = measured.get("drift", {}).get(dtype) or {}
    return all(PERCENTILE_OF[metric] in drift for metric in CALIBRATED_METRICS)


def percentile_bounds(dtype: str, drift: Mapping[str, float]) -> dict[str, tuple[float, float, str]]:
    """Rule 4 (version 2): p99 metric -> (DRIFT_MARGIN x the cast's p99 drift, that drift, derivation)."""
    out = {}
    for metric in CALIBRATED_METRICS:
        name = PERCENTILE_OF[metric]
        factor = f"{DRIFT_MARGIN:g}{'²' if name in QUADRATIC else ''}"
        out[name] = (scaled(name, drift[name], DRIFT_MARGIN), drift[name],
                     f"{factor} x the p{DRIFT_PERCENTILE:g} of the {dtype}-vs-float32 cast's per-question drift "
                     f"{_n(drift[name])}")
    return out


def approximate_allowance(measured: Mapping[str, Any]) -> dict[str, tuple[float, float, str]] | None:
    """Rule 4, or None when float16 was not measured (the spec's allowance then stands in).

    With percentiles recorded: bounds on the p99 metrics; without (older measurements): on the maxima."""
    drift = measured.get("drift", {}).get("float16")
    if drift is None:
        return None
    bounds = percentile_bounds("float16", drift) if has_percentiles(measured, "float16") else \
        drift_bounds("float16", drift)
    return {metric: (scaled(metric, threshold, APPROXIMATE_SHARE), value,
                     f"{APPROXIMATE_SHARE:g} x [{text}]: an approximate pass may move answers as far as the FP16 "
                     "cast (a diagnostic: the decisions it changes decide)")
            for metric, (threshold, value, text) in bounds.items()}


def _add(first: Mapping, second: Mapping) -> dict[str, tuple[float, float, str]]:
    """Add two bound tables over the same metrics; the noise floor is the first's."""
    return {metric: (combined(metric, first[metric][0], second[metric][0]), first[metric][1],
                     f"({first[metric][2]}) + ({second[metric][2]})") for metric in first}


def _table_gates(bounds: Mapping[str, tuple[float, float, str]]) -> tuple[Gate, ...]:
    return tuple(_bound(metric, *values) for metric, values in bounds.items())


def approximate_gates(dtype: str, measured: Mapping[str, Any], allowance: Mapping, exact: Mapping,
                      cumulative_exact: Mapping) -> tuple[tuple[Gate, ...], tuple[Gate, ...]]:
    """(incremental, cumulative) drift diagnostics of an approximate pass in `dtype` (rules 4 and 5)."""
    if any(metric in PERCENTILE_OF.values() for metric in allowance):
        # Percentiles: the pass's own comparison is bounded by the allowance; vs the reference, the cast's
        # p99 drift bound in `dtype` (none in float32) plus the allowance. Same-dtype noise is a maximum, so
        # it does not add to a percentile: the margin covers it.
        cumulative = allowance if dtype == "float32" else \
            _add(percentile_bounds(dtype, measured["drift"][dtype]), allowance)
        return _table_gates(allowance), _table_gates(cumulative)
    # An approximate pass's own comparison carries the same-dtype noise of the dtype.
    own = {metric: (threshold, exact[metric][1], text) for metric, (threshold, _, text) in allowance.items()}
    return _gates(own), _gates(_sum(cumulative_exact, allowance))


def noise_sample_note(measured: Mapping[str, Any]) -> str:
    """", on a sample of N of M requests" when the noise variants ran on a sample (calibrate-gates --noise-sample)."""
    sampled, total = measured.get("noise_requests"), measured.get("requests")
    return f", on a seeded sample of {sampled} of {total} requests" if sampled and total and sampled < total else ""


def dtype_gates(dtype: str, measured: Mapping[str, Any], allowance: Mapping | None) -> DtypeGates:
    noise = measured["noise"][dtype]
    floor = floors(dtype, measured["max_abs_logit"])
    exact = exact_bounds(dtype, noise, floor, noise_sample_note(measured))
    float32 = dtype == "float32"
    cumulative_exact = exact if float32 else _sum(drift_bounds(dtype, measured["drift"][dtype]), exact)
    if allowance is None:  # the spec's allowance, on max |dp| only
        _, approximate, both = spec_bounds(dtype)
        approximate_bounds, approximate_cumulative = (approximate,), (both,)
    else:
        approximate_bounds, approximate_cumulative = approximate_gates(dtype, measured, allowance, exact,
                                                                       cumulative_exact)
    return gate_table(float32, _gates(exact), _gates(cumulative_exact), approximate_bounds, approximate_cumulative,
                      near_tie_allowances(measured, dtype))


def check_measured(measured: Mapping[str, Any]) -> None:
    noise = measured.get("noise", {})
    if "float32" not in noise:
        raise ValueError("measured: the float32 noise is required (it bounds every exact float32 pass)")
    for dtype, sources in noise.items():
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"measured.noise: unknown dtype {dtype!r}")
        missing = [f"{source}.{metric}" for source in NOISE_SOURCES for metric in CALIBRATED_METRICS
                   if metric not in sources.get(source, {})]
        if missing:
            raise ValueError(f"measured.noise.{dtype}: missing {', '.join(missing)}")
        if dtype != "float32" and dtype not in measured.get("drift", {}):
            raise ValueError(f"measured.drift: {dtype} noise was measured but not its cast drift")


def derive_gates(measured: Mapping[str, Any], name: str, description: str = "",
                 source: Mapping[str, Any] | None = None) -> GatesFile:
    """The gates file for every dtype whose noise was measured (others fall back to the spec tolerances)."""
    check_measured(measured)
    allowance = approximate_allowance(measured)
    return GatesFile(name=name, description=description, source=dict(source or {}), factors=dict(FACTORS),
                     measured=dict(measured),
                     gates={dtype: dtype_gates(dtype, measured, allowance) for dtype in DTYPE_NAMES
                            if dtype in measured["noise"]})


def derivation_table(gates_file: GatesFile) -> dict:
    """Every measured threshold of a gates file with its derivation (what calibrate-gates prints): the bounds
    resting on a measurement and the near-tie allowances; the fixed gates (finite, no decisive change,
    McNemar at 5%, accuracy) say theirs in the file."""
    rows = [[dtype, name, str(gate), gate.derivation]
            for dtype, table in gates_file.gates.items()
            for name in ("exact_incremental", "exact_cumulative", "approximate_incremental", "approximate_cumulative")
            for gate in getattr(table, name) if gate.noise_floor is not None]
    return {"title": f"derived thresholds of {gates_file.name} (version {gates_file.version})",
            "columns": ["dtype", "comparison", "gate", "derivation"], "rows": rows}

