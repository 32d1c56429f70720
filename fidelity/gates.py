"""Fidelity gates: thresholds on the named metrics of `fidelity.metrics`, parsed from experiment YAML.

A gate never passes by omission: a missing metric or a NaN measurement fails it. The only exception is a
gate flagged `requires_labels` when the comparison had no labelled questions; it is reported as skipped.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from laya_opt.errors import SchemaError
from laya_opt.schema import parse

from .metrics import LABEL_METRICS, METRIC_NAMES

OPS = (">=", "<=", "==")
DTYPE_NAMES = ("float32", "float16", "bfloat16")
COMPARISONS = ("incremental", "cumulative")
_GATE_TEXT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==)\s*(\S+)\s*$")
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

    @classmethod
    def from_value(cls, value: Any, path: str) -> "Gate":
        """A gate written as text or as a mapping (the schema validator's hook)."""
        return parse_gate(value, path)

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


# ---------------------------------------------------------------------------------------------------------------------
# Parsing (experiment YAML)


@dataclass(frozen=True)
class GateFields:
    """The mapping form of a gate, read by the one validator (laya_opt.schema)."""

    metric: str = field(metadata={"choices": tuple(sorted(METRIC_NAMES))})
    op: Literal[">=", "<=", "=="] = field()
    threshold: float = field()
    requires_labels: bool | None = None   # default: true for the accuracy/ECE metrics


def parse_gate(spec: str | Mapping, path: str = "gate") -> Gate:
    """`"max_abs_dp <= 1e-4"` or `{metric: ..., op: ..., threshold: ..., requires_labels: ...}`; errors name the path."""
    if isinstance(spec, str):
        match = _GATE_TEXT.match(spec)
        if not match:
            raise SchemaError(f"{path}: cannot parse gate {spec!r}; expected '<metric> <op> <number>' "
                              f"with op in {', '.join(OPS)}")
        spec = dict(zip(("metric", "op", "threshold"), match.groups()))
    elif not isinstance(spec, Mapping):
        raise SchemaError(f"{path}: a gate is a string or a mapping, got {type(spec).__name__}")
    fields = parse(GateFields, spec, path)
    requires_labels = fields.metric in LABEL_METRICS if fields.requires_labels is None else fields.requires_labels
    return Gate(fields.metric, fields.op, fields.threshold, requires_labels)


def parse_gates(specs: Any, path: str = "gates") -> tuple[Gate, ...]:
    if isinstance(specs, (str, Mapping)) or not isinstance(specs, Sequence):
        raise SchemaError(f"{path}: expected a list of gates, got {type(specs).__name__}")
    return tuple(parse_gate(spec, f"{path}[{index}]") for index, spec in enumerate(specs))


# ---------------------------------------------------------------------------------------------------------------------
# Defaults


# Spec §11.5: the MLX port held max |dp| <= 1e-4 in FP32 and <= 0.02 in FP16, tolerances fixed in advance;
# spec §11.6 allows 2e-4 for compiled + bucketed vs eager (padding changes the GEMM shapes, so the BLAS
# sums in another order). The stand-in, sharpened by temperatures of 0.5, moves 1.04e-4 under compile
# with 16-token buckets on `smoke` in FP32, so the exact FP32 bound is the spec's 2e-4.
# Spec §11.8: bf16 backends drift up to ~0.06 (envelope <= 0.06) and flip near ties (46-47/48 choice).
MAX_ABS_DP_EXACT = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 6e-2}
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
      * exact passes (compile, batching, kernels): argmax_agreement >= 1.0 and max_abs_dp <= 2e-4 in FP32
        (§11.5 tolerance; reassociated sums stay ~1e-6); in FP16/BF16 decisive_agreement >= 0.99 and
        max_abs_dp <= 0.02 (FP16, §11.5) or 0.06 (BF16, §11.8 envelope).
      * approximate passes (quantization, pruning): decisive_agreement >= 0.95 and, with labels, accuracy
        may drop at most 0.02 (§12.12.6: approximate changes are judged on held-out labelled quality).
    cumulative (candidate vs the FP32 reference, the whole stack so far):
      finite, token_identity, accuracy_delta >= -0.02 (with labels); an all-exact FP32 stack must still match
      the reference (argmax_agreement >= 1.0, max_abs_dp <= 2e-4); anything else decisive_agreement >= 0.95
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
