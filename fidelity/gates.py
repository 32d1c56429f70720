"""Fidelity gates: thresholds on the named metrics of `fidelity.metrics`, parsed from experiment YAML.

A gate never passes by omission: a missing metric or a NaN measurement fails it. The only exception is a
gate flagged `requires_labels` when the comparison had no labelled questions; it is reported as skipped.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .metrics import LABEL_METRICS, METRIC_NAMES

OPS = (">=", "<=", "==")
DTYPE_NAMES = ("float32", "float16", "bfloat16")
COMPARISONS = ("incremental", "cumulative")
_GATE_TEXT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==)\s*(\S+)\s*$")
_GATE_KEYS = ("metric", "op", "threshold", "requires_labels")
_MISSING_HINTS = {"deterministic": "evaluate the candidate with repeat >= 2"}


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str
    threshold: float
    requires_labels: bool = False   # skipped (not failed) when the suite has no labelled questions

    def __post_init__(self):
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(f"gate metric must be a non-empty string, got {self.metric!r}")
        if self.op not in OPS:
            raise ValueError(f"gate on {self.metric}: op {self.op!r} is not one of {', '.join(OPS)}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not math.isfinite(self.threshold):
            raise ValueError(f"gate on {self.metric}: threshold must be a finite number, got {self.threshold!r}")

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"

    def holds(self, measured: float) -> bool:
        if self.op == ">=":
            return measured >= self.threshold
        if self.op == "<=":
            return measured <= self.threshold
        return measured == self.threshold


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    measured: float | None   # None when the metric was missing
    passed: bool
    message: str = ""
    skipped: bool = False


def check_gates(metrics: Mapping[str, float], gates: Sequence[Gate]) -> tuple[GateResult, ...]:
    """Evaluate every gate; missing and NaN measurements fail with a message saying why."""
    results = []
    for gate in gates:
        if gate.metric not in metrics:
            if gate.requires_labels and metrics.get("labelled") == 0.0:
                results.append(GateResult(gate, None, True, "skipped: no labelled questions", skipped=True))
                continue
            hint = _MISSING_HINTS.get(gate.metric, "the comparison did not produce it")
            results.append(GateResult(gate, None, False, f"metric {gate.metric!r} missing ({hint})"))
            continue
        measured = metrics[gate.metric]
        if isinstance(measured, bool) or not isinstance(measured, (int, float)):
            results.append(GateResult(gate, None, False, f"metric {gate.metric!r} is not a number: {measured!r}"))
        elif math.isnan(measured):
            results.append(GateResult(gate, float(measured), False, f"{gate.metric} is NaN"))
        else:
            passed = gate.holds(measured)
            results.append(GateResult(gate, float(measured), passed,
                                      "" if passed else f"{gate.metric} = {measured:.6g} violates {gate}"))
    return tuple(results)


def all_passed(results: Sequence[GateResult]) -> bool:
    return all(result.passed for result in results)


# ---------------------------------------------------------------------------------------------------------------------
# Parsing (experiment YAML)


def _metric(value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in METRIC_NAMES:
        raise ValueError(f"{path}: unknown metric {value!r}; known: {', '.join(sorted(METRIC_NAMES))}")
    return value


def _op(value: Any, path: str) -> str:
    if value not in OPS:
        raise ValueError(f"{path}: op {value!r} is not one of {', '.join(OPS)}")
    return value


def _threshold(value: Any, path: str) -> float:
    # PyYAML reads `1e-4` (no dot) as a string, so numeric strings are accepted.
    if isinstance(value, bool):
        raise ValueError(f"{path}: threshold must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: threshold must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{path}: threshold must be finite, got {value!r}")
    return number


def parse_gate(spec: str | Mapping, path: str = "gate") -> Gate:
    """`"max_abs_dp <= 1e-4"` or `{metric: ..., op: ..., threshold: ..., requires_labels: ...}`.

    `requires_labels` defaults to true for the accuracy/ECE metrics. Errors name the key path.
    """
    if isinstance(spec, str):
        match = _GATE_TEXT.match(spec)
        if not match:
            raise ValueError(f"{path}: cannot parse gate {spec!r}; expected '<metric> <op> <number>' "
                             f"with op in {', '.join(OPS)}")
        metric, op, threshold = match.groups()
        metric = _metric(metric, f"{path} (metric)")
        return Gate(metric, op, _threshold(threshold, f"{path} (threshold)"), metric in LABEL_METRICS)
    if not isinstance(spec, Mapping):
        raise ValueError(f"{path}: a gate is a string or a mapping, got {type(spec).__name__}")
    unknown = sorted(str(key) for key in spec if key not in _GATE_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_GATE_KEYS)}")
    for key in ("metric", "op", "threshold"):
        if key not in spec:
            raise ValueError(f"{path}.{key}: missing")
    metric = _metric(spec["metric"], f"{path}.metric")
    requires_labels = spec.get("requires_labels", metric in LABEL_METRICS)
    if not isinstance(requires_labels, bool):
        raise ValueError(f"{path}.requires_labels: expected true/false, got {requires_labels!r}")
    return Gate(metric, _op(spec["op"], f"{path}.op"), _threshold(spec["threshold"], f"{path}.threshold"),
                requires_labels)


def parse_gates(specs: Any, path: str = "gates") -> tuple[Gate, ...]:
    if isinstance(specs, (str, Mapping)) or not isinstance(specs, Sequence):
        raise ValueError(f"{path}: expected a list of gates, got {type(specs).__name__}")
    return tuple(parse_gate(spec, f"{path}[{index}]") for index, spec in enumerate(specs))


# ---------------------------------------------------------------------------------------------------------------------
# Defaults


# Spec §11.5: the MLX port held max |dp| <= 1e-4 in FP32 and <= 0.02 in FP16, tolerances fixed in advance.
# Spec §11.8: bf16 backends drift up to ~0.06 (envelope <= 0.06) and flip near ties (46-47/48 choice).
MAX_ABS_DP_EXACT = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 6e-2}
AGREEMENT_EXACT = {"float32": 1.0, "float16": 0.99, "bfloat16": 0.99}
AGREEMENT_APPROXIMATE = 0.95
MAX_ABS_DP_CUMULATIVE = 0.25
ACCURACY_DROP = -0.02


def default_gates(exact: bool, dtype_name: str, comparison: str) -> tuple[Gate, ...]:
    """The gates a stage must pass when the experiment names none.

    Outside FP32 exactness, agreement gates read `decisive_agreement`: the argmax agreement over questions
    whose reference top-two gap is at least 0.05 (fidelity.metrics.NEAR_TIE_MARGIN). Near-tie flips
    are still counted (`near_tie_flips`) and bounded by the max_abs_dp gates. Spec §11.8 lists near-tie
    flips as expected of half-precision backends.

    incremental (candidate vs the previous stage, same dtype):
      * every pass: finite == 1 (a NaN answer is never a speed-up), deterministic == 1 (same input, same
        bits; §11.5 ran 600 repeats), token_identity == 1 (§12.12.5: no pass may change what reaches the model).
      * exact passes (compile, batching, kernels): argmax_agreement >= 1.0 and max_abs_dp <= 1e-4 in FP32
        (§11.5 tolerance; reassociated sums stay ~1e-6); in FP16/BF16 decisive_agreement >= 0.99 and
        max_abs_dp <= 0.02 (FP16, §11.5) or 0.06 (BF16, §11.8 envelope).
      * approximate passes (quantization, pruning): decisive_agreement >= 0.95 and, with labels, accuracy
        may drop at most 0.02 (§12.12.6: approximate changes are judged on held-out labelled quality).
    cumulative (candidate vs the FP32 reference, the whole stack so far):
      finite, token_identity, accuracy_delta >= -0.02 (with labels); an all-exact FP32 stack must still match
      the reference (argmax_agreement >= 1.0, max_abs_dp <= 1e-4); anything else decisive_agreement >= 0.95
      and max_abs_dp <= 0.25, which catches stacked drift like the unusable 4-bit export (0.13 on one pass, §11.5).
    """
    if dtype_name not in DTYPE_NAMES:
        raise ValueError(f"dtype_name {dtype_name!r} is not one of {', '.join(DTYPE_NAMES)}")
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison {comparison!r} is not one of {', '.join(COMPARISONS)}")
    finite, tokens = Gate("finite", "==", 1.0), Gate("token_identity", "==", 1.0)
    accuracy = Gate("accuracy_delta", ">=", ACCURACY_DROP, requires_labels=True)
    if comparison == "incremental":
        deterministic = Gate("deterministic", "==", 1.0)
        if exact:
            agreement = "argmax_agreement" if dtype_name == "float32" else "decisive_agreement"
            return (finite, deterministic, tokens, Gate(agreement, ">=", AGREEMENT_EXACT[dtype_name]),
                    Gate("max_abs_dp", "<=", MAX_ABS_DP_EXACT[dtype_name]))
        return (finite, deterministic, tokens, Gate("decisive_agreement", ">=", AGREEMENT_APPROXIMATE), accuracy)
    if exact and dtype_name == "float32":
        return (finite, tokens, Gate("argmax_agreement", ">=", 1.0),
                Gate("max_abs_dp", "<=", MAX_ABS_DP_EXACT["float32"]), accuracy)
    return (finite, tokens, Gate("decisive_agreement", ">=", AGREEMENT_APPROXIMATE),
            Gate("max_abs_dp", "<=", MAX_ABS_DP_CUMULATIVE), accuracy)
