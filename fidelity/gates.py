"""Fidelity gates: thresholds on the named metrics of `fidelity.metrics`, and where the default ones come from.

A gate never passes by omission: a missing metric or a NaN measurement fails it. The only exception is a
gate flagged `requires_labels` when the comparison had no labelled questions; it is reported as skipped.

Default thresholds are measured, not picked: `laya-opt calibrate-gates` measures the noise of the
checkpoint on a suite and writes a gates file (the stand-in's is `fidelity/gate_files/standin.yaml`, shipped
as package data); `fidelity.gate_derivation` turns the measurements into thresholds, and every gate in
the file carries its derivation and the measured noise floor it rests on. In short:

* exact pass, same dtype (incremental): each drift metric <= 2 x the largest same-dtype noise measured
  (re-running, other matmul shapes, batch sizes, orders and padding), or a floor of one rounding in that
  dtype where the outputs were bit-identical; no argmax flip (float32) or decisive flip (half precision).
* the FP16-vs-FP32 drift of the cast, times a margin of 2 for the gap between one suite's maximum and
  another's, is the bound of a cross-dtype comparison.
* approximate pass (gates file version 2): judged by the decisions it changes (`fidelity.decisions`): no
  decisive change, near-tie changes no more than an exact test can tell from the number the FP16 cast flips
  on the calibration suite (`near_tie_allowance`: 9 where the cast flips 3), and no
  significant loss (McNemar's exact one-sided test, p >= 0.05). Its drift is a *diagnostic* (reported
  against its bound, never deciding): 2 x the p99 of the FP16 cast's per-question drift (older
  measurements: 2 x the cast's maximum). Version-1 files are upgraded so on reading (`upgrade_version_1`).
* cumulative: the exact bounds plus the cast drift of the candidate dtype; a stack holding an approximate
  pass gets the decision gates against the reference (near ties: the dtype's cast flips plus the allowance).
* always: finite, deterministic (incremental), token identity; with labels, accuracy drops at most 0.02.
* exact half-precision pass that replaces kernels or compiles the forward, incremental: its drift from the parent
  is a diagnostic; it is judged by its distance to the reference, whose p99 |dp| may exceed the parent's by at
  most the exact max |dp| bound (`rounding_kernel_gates`: a kernel that rounds once instead of per op is no
  error). Its worst question is bounded by the cumulative envelope, not by the parent's worst (a diagnostic).
* probes, incremental: a pass that captures runtime parts must reproduce its parent with those parts
  perturbed within its own max |Δ logit| bound (`capture_probe`); an exact half-precision pass that
  replaces kernels must agree with the replaced kernels within KERNEL_ROUNDING_BOUND units of one
  rounding, on the inputs they receive (`kernel_probe`).

Without a calibration for the candidate dtype, the spec's tolerances stand in (`spec_gates`): exact
max |dp| 2e-4 / 0.02 / 0.06 (FP32 / FP16 / BF16, spec §11.5, §11.6, §11.8), approximate 0.02 (§11.5).
Experiments choose a file with `gates_file:` (`standin`, `spec` or a path) and override single gates.

Why one module of ~480 lines: the gate, the file format and the default tables depend on each other in a
circle (reading a file falls back to the spec tables and upgrades version 1 with the decision gates; the
tables are made of gates), and every floor above imports them from here. Splitting it would move names
other modules import while they are being edited in parallel; docs/gates.md is the reader's guide.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml

from laya_opt.util.errors import SchemaError
from laya_opt.util.jsonio import read_yaml
from laya_opt.util.resources import STANDIN, gates_file_path
from laya_opt.util.schema import parse, to_plain

from laya_opt.fidelity.decisions import near_tie_allowance
from laya_opt.fidelity.metrics import LABEL_METRICS, METRIC_NAMES

OPS = (">=", "<=", "==")
DTYPE_NAMES = ("float32", "float16", "bfloat16")
COMPARISONS = ("incremental", "cumulative")
_GATE_TEXT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==)\s*(\S+)\s*$")
_MISSING_HINTS = {"deterministic": "re-run a sample of the candidate's requests (rerun >= 1)"}


@dataclass(frozen=True)
class Gate:
    metric: str
    op: str
    threshold: float
    requires_labels: bool = False   # skipped (not failed) when the suite has no labelled questions
    # A diagnostic is measured and reported against its bound but never decides the verdict (approximate
    # passes' drift: they are judged by the decisions they change, fidelity.decisions).
    diagnostic: bool = False
    # What the threshold rests on: the measured noise (or drift) of the same metric, and how it was derived.
    noise_floor: float | None = field(default=None, compare=False)
    derivation: str = field(default="", compare=False)

    def __post_init__(self):
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(f"gate metric must be a non-empty string, got {self.metric!r}")
        if self.op not in OPS:
            raise ValueError(f"gate on {self.metric}: op {self.op!r} is not one of {', '.join(OPS)}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not math.isfinite(self.threshold):
            raise ValueError(f"gate on {self.metric}: threshold must be a finite number, got {self.threshold!r}")

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}{' (diagnostic)' if self.diagnostic else ''}"

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
    exceeded: bool = False   # a diagnostic outside its bound (it passes: diagnostics never decide)


def _diagnosed(result: GateResult) -> GateResult:
    """A diagnostic gate's result: passed whatever was measured; outside its bound is recorded, not failed."""
    if not result.gate.diagnostic or result.passed:
        return result
    return dataclasses.replace(result, passed=True, exceeded=True,
                               message=f"diagnostic, does not decide: {result.message}")


def check_gates(metrics: Mapping[str, float], gates: Sequence[Gate]) -> tuple[GateResult, ...]:
    """Evaluate every gate; missing and NaN measurements fail with a message saying why (diagnostics: are noted)."""
    return tuple(_diagnosed(result) for result in _check(metrics, gates))


def _check(metrics: Mapping[str, float], gates: Sequence[Gate]) -> tuple[GateResult, ...]:
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
    """The mapping form of a gate, read by the one validator (laya_opt.util.schema)."""

    metric: str = field(metadata={"choices": tuple(sorted(METRIC_NAMES))})
    op: Literal[">=", "<=", "=="] = field()
    threshold: float = field()
    requires_labels: bool | None = None   # default: true for the accuracy/ECE metrics
    diagnostic: bool = False
    noise_floor: float | None = None
    derivation: str = ""


def parse_gate(spec: str | Mapping, path: str = "gate") -> Gate:
    """`"max_abs_dp <= 1e-4"` or `{metric: ..., op: ..., threshold: ..., requires_labels: ...}`; errors name the
    path."""
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
    return Gate(fields.metric, fields.op, fields.threshold, requires_labels, fields.diagnostic, fields.noise_floor,
                fields.derivation)


# ---------------------------------------------------------------------------------------------------------------------
# Gates files


@dataclass(frozen=True)
class DtypeGates:
    """Every default gate list of one candidate dtype."""

    exact_incremental: tuple[Gate, ...]         # an exact pass vs the previous stage (same dtype)
    exact_cumulative: tuple[Gate, ...]          # a stack of exact passes vs the float32 reference
    approximate_incremental: tuple[Gate, ...]   # an approximate pass vs the previous stage
    approximate_cumulative: tuple[Gate, ...]    # a stack holding an approximate pass vs the reference


GATES_FILE_VERSION = 2


@dataclass(frozen=True)
class GatesFile:
    """A gates file (YAML through the schema): thresholds per candidate dtype, with what they rest on."""

    name: str
    gates: Mapping[str, DtypeGates]
    # 2: approximate passes are judged by decision changes (near-tie allowance, McNemar), their drift is a
    # diagnostic. 1 (before): approximate passes were judged by drift bounds; read_gates_file upgrades it.
    version: int = field(default=GATES_FILE_VERSION, metadata={"choices": (1, GATES_FILE_VERSION)})
    description: str = ""
    source: Mapping[str, Any] = field(default_factory=dict)     # checkpoint, suites, device, command
    factors: Mapping[str, float] = field(default_factory=dict)  # the multipliers the derivation used
    measured: Mapping[str, Any] = field(default_factory=dict)   # the noise and drift measurements

    def __post_init__(self):
        unknown = sorted(set(self.gates) - set(DTYPE_NAMES))
        if unknown:
            raise ValueError(f"gates: unknown dtype(s) {', '.join(unknown)}; known: {', '.join(DTYPE_NAMES)}")

    def for_dtype(self, dtype_name: str) -> DtypeGates:
        """This file's gates for the dtype; the spec tolerances when the file has none for it."""
        if dtype_name in self.gates:
            return self.gates[dtype_name]
        return spec_gates().gates[dtype_name]


def read_gates_file(path: str | Path) -> GatesFile:
    """A gates file through the schema; a version-1 file comes back upgraded (`upgrade_version_1`)."""
    path = Path(path)
    try:
        gates_file = parse(GatesFile, read_yaml(path, SchemaError))
        return upgrade_version_1(gates_file) if gates_file.version == 1 else gates_file
    except SchemaError as exc:
        message = str(exc)
        raise SchemaError(message if message.startswith(str(path)) else f"{path}: {message}") from None


class _GateMapping(dict):
    """A gate in a gates file: written on one line, without the fields left at their defaults."""


class _GatesDumper(yaml.SafeDumper):
    pass


_GatesDumper.add_representer(_GateMapping, lambda dumper, data: dumper.represent_mapping(
    "tag:yaml.org,2002:map", data, flow_style=True))


def _compact(value: Any) -> Any:
    if isinstance(value, Gate):
        defaults = {"requires_labels": value.metric in LABEL_METRICS, "diagnostic": False, "noise_floor": None,
                    "derivation": ""}
        return _GateMapping({key: item for key, item in to_plain(value).items()
                             if key not in defaults or item != defaults[key]})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _compact(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: _compact(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_compact(item) for item in value]
    return value


def dump_gates_file(gates_file: GatesFile, header: str = "") -> str:
    """YAML text of a gates file (what `read_gates_file` reads back); `header` lines become comments."""
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comments + yaml.dump(_compact(gates_file), Dumper=_GatesDumper, sort_keys=False, allow_unicode=True,
                                width=120)


@lru_cache(maxsize=None)
def _read_cached(path: str, modified_ns: int) -> GatesFile:
    return read_gates_file(path)


def load_gates_file(value: str | Path | GatesFile | None = None, what: str = "gates_file") -> GatesFile:
    """`standin` (or None): the bundled stand-in calibration; `spec`: the spec tolerances; else a file path."""
    if isinstance(value, GatesFile):
        return value
    if value is not None and str(value) == SPEC:
        return spec_gates()
    path = gates_file_path(STANDIN if value is None else value, what)
    return _read_cached(str(path), path.stat().st_mtime_ns)


# ---------------------------------------------------------------------------------------------------------------------
# Defaults


SPEC = "spec"
# Spec §11.5: the MLX port held max |dp| <= 1e-4 in FP32 and <= 0.02 in FP16, tolerances fixed in advance;
# §11.6 allows 2e-4 for compiled + bucketed vs eager; §11.8: bf16 backends drift up to ~0.06.
SPEC_MAX_ABS_DP_EXACT = {"float32": 2e-4, "float16": 2e-2, "bfloat16": 6e-2}
SPEC_MAX_ABS_DP_APPROXIMATE = 2e-2
SPEC_MAX_ABS_DLOGIT = 3e-5   # §11.6: logits vs the independent references (atol = rtol = 3e-5)
ACCURACY_DROP = -0.02   # §12.12.6: approximate changes are judged on held-out labelled quality
MCNEMAR_LEVEL = 0.05    # a loss of right answers significant at 5% (fidelity.decisions.mcnemar_p) rejects
NEAR_TIE_LEVEL = 0.05   # near-tie changes beyond the noise's, significant at 5% (decisions.near_tie_allowance), reject


def common_gates(comparison: str) -> tuple[Gate, ...]:
    """Gates of every stage: finite, token identity, determinism (incremental: a sample of the candidate re-run)."""
    finite = Gate("finite", "==", 1.0, derivation="a NaN answer is never a speed-up")
    tokens = Gate("token_identity", "==", 1.0, derivation="§12.12.5: no pass may change what reaches the model")
    if comparison == "cumulative":
        return finite, tokens
    return finite, Gate("deterministic", "==", 1.0, derivation="same input, same bits (§11.5 ran 600 repeats)"), \
        tokens


def flip_gate(exact_float32: bool) -> Gate:
    if exact_float32:
        return Gate("argmax_flips", "<=", 0.0, derivation="exact in float32: no answer may change, near ties included")
    return Gate("decisive_flips", "<=", 0.0, derivation="no answer may change where the reference decided by a "
                "top-two gap of at least 0.05; near-tie flips are counted and bounded by max_abs_dp")


def decisive_gate() -> Gate:
    return Gate("decisive_flips", "<=", 0.0, derivation="no decision may change where the reference decided by a "
                                                        "top-two gap of at least 0.05 (fidelity.decisions)")


def near_tie_gate(allowance: float, derivation: str, noise: float | None = None) -> Gate:
    """Near-tie changes up to what the reference's own noise does to them (an FP16 cast, on the same suite);
    `noise`: the measured count the allowance rests on (the allowance itself when not given)."""
    return Gate("near_tie_flips", "<=", float(allowance), noise_floor=float(allowance if noise is None else noise),
                derivation=derivation)


def mcnemar_gate() -> Gate:
    return Gate("mcnemar_p", ">=", MCNEMAR_LEVEL,
                derivation="no significant loss: McNemar's exact one-sided test of right->wrong against "
                           f"wrong->right, at {MCNEMAR_LEVEL:g}")


def decision_gates(near_tie: Gate) -> tuple[Gate, ...]:
    """The verdict of an approximate pass: no decisive change, near-tie changes within the noise, no loss."""
    return decisive_gate(), near_tie, mcnemar_gate()


def as_diagnostics(gates: Sequence[Gate]) -> tuple[Gate, ...]:
    return tuple(dataclasses.replace(gate, diagnostic=True) for gate in gates)


def accuracy_gate() -> Gate:
    return Gate("accuracy_delta", ">=", ACCURACY_DROP, requires_labels=True,
                derivation="§12.12.6: held-out labelled quality may drop by at most 0.02")


def gate_table(float32: bool, exact: tuple[Gate, ...], exact_cumulative: tuple[Gate, ...],
               approximate: tuple[Gate, ...], approximate_cumulative: tuple[Gate, ...],
               near_ties: tuple[Gate, Gate]) -> DtypeGates:
    """One dtype's default gate lists from their bound gates; the common, flip and accuracy gates around them
    are the same in every gates file. Approximate lists: the decision gates decide (`near_ties`: the
    incremental and cumulative near-tie allowances), the drift bounds become diagnostics."""
    flips = flip_gate(float32)
    return DtypeGates(
        exact_incremental=common_gates("incremental") + (flips, *exact),
        exact_cumulative=common_gates("cumulative") + (flips, *exact_cumulative, accuracy_gate()),
        approximate_incremental=common_gates("incremental") + decision_gates(near_ties[0])
        + as_diagnostics(approximate) + (accuracy_gate(),),
        approximate_cumulative=common_gates("cumulative") + decision_gates(near_ties[1])
        + as_diagnostics(approximate_cumulative) + (accuracy_gate(),))


def _recorded_near_tie_flips(measured: Mapping[str, Any], dtype: str) -> float | None:
    """Near-tie flips of the cast to `dtype` as a calibration recorded them (version 1 recorded argmax and
    decisive flips only: their difference); 0 for float32 (no cast), None when not measured."""
    if dtype == "float32":
        return 0.0
    drift = (measured.get("drift") or {}).get(dtype)
    if not isinstance(drift, Mapping):
        return None
    if "near_tie_flips" in drift:
        return float(drift["near_tie_flips"])
    if "argmax_flips" in drift and "decisive_flips" in drift:
        return float(drift["argmax_flips"]) - float(drift["decisive_flips"])
    return None


def near_tie_allowances(measured: Mapping[str, Any], dtype: str) -> tuple[Gate, Gate]:
    """(incremental, cumulative) near-tie gates of an approximate pass in `dtype`. Incremental: the most near-tie
    changes an exact test does not tell from the FP16 cast's on the calibration suite (`near_tie_allowance`).
    Cumulative, vs the float32 reference: the near ties the cast to `dtype` flips, plus that allowance.
    None measured: no near-tie change allowed."""
    half = _recorded_near_tie_flips(measured, "float16")
    own = _recorded_near_tie_flips(measured, dtype)
    if half is None or own is None:
        text = "not calibrated: no near-tie change allowed"
        return near_tie_gate(0.0, text), near_tie_gate(0.0, text)
    allowed = near_tie_allowance(int(round(half)), NEAR_TIE_LEVEL)
    near_ties = measured.get("near_ties")
    of = f" of its {near_ties:g} near ties" if isinstance(near_ties, (int, float)) else ""
    incremental = (f"the most near-tie changes that an exact one-sided test (two counts, equal rates, "
                   f"{NEAR_TIE_LEVEL:g}) does not tell from the {half:g}{of} the float16 cast flips on the "
                   "calibration suite (fidelity.decisions.near_tie_allowance)")
    if dtype == "float32":
        return near_tie_gate(allowed, incremental, half), near_tie_gate(allowed, incremental, half)
    cumulative = f"the {own:g} near ties the {dtype} cast flips, plus the pass's {allowed:g}: {incremental}"
    return near_tie_gate(allowed, incremental, half), near_tie_gate(own + allowed, cumulative, own + half)


def upgrade_version_1(gates_file: GatesFile) -> GatesFile:
    """A version-1 file as version 2: its exact lists as written; each approximate list gets the decision gates
    (near-tie allowance from its recorded FP16 cast flips) and keeps its drift bounds as diagnostics. Its drift
    bounds are maxima over the calibration suite; `calibrate-gates --from-measurements` re-derives the file."""
    tables = {}
    for dtype, table in gates_file.gates.items():
        near_ties = near_tie_allowances(gates_file.measured, dtype)

        def upgraded(gates: tuple[Gate, ...], near_tie: Gate) -> tuple[Gate, ...]:
            kept = tuple(gate for gate in gates if gate.metric not in ("decisive_flips", "argmax_flips",
                                                                       "near_tie_flips", "mcnemar_p"))
            common = tuple(gate for gate in kept if gate.op == "==")
            rest = tuple(gate for gate in kept if gate.op != "==" and gate.metric not in LABEL_METRICS)
            labels = tuple(gate for gate in kept if gate.op != "==" and gate.metric in LABEL_METRICS)
            return common + decision_gates(near_tie) + as_diagnostics(rest) + labels

        tables[dtype] = dataclasses.replace(
            table, approximate_incremental=upgraded(table.approximate_incremental, near_ties[0]),
            approximate_cumulative=upgraded(table.approximate_cumulative, near_ties[1]))
    return dataclasses.replace(gates_file, gates=tables, version=GATES_FILE_VERSION,
                               description=f"{gates_file.description} [version 1, upgraded on reading: approximate "
                                           "passes judged by decision changes, drift maxima as diagnostics]")


def spec_bounds(name: str) -> tuple[Gate, Gate, Gate]:
    """The spec's max |dp| bounds of a dtype: (exact, one approximate pass, the two together)."""
    def dp(threshold: float, derivation: str) -> Gate:
        return Gate("max_abs_dp", "<=", threshold, derivation=derivation)

    tolerance = SPEC_MAX_ABS_DP_EXACT[name]
    return (dp(tolerance, f"spec tolerance for {name} (§11.5/§11.6/§11.8; not calibrated)"),
            dp(SPEC_MAX_ABS_DP_APPROXIMATE, "spec §11.5 FP16 tolerance as the allowance of one approximate "
                                            "pass (not calibrated)"),
            dp(tolerance + SPEC_MAX_ABS_DP_APPROXIMATE, "exact tolerance plus one approximate allowance "
                                                        "(not calibrated)"))


@lru_cache(maxsize=None)
def spec_gates() -> GatesFile:
    """The fallback: the spec's fixed tolerances, for a dtype no calibration covers (or `gates_file: spec`)."""
    tables = {}
    for name in SPEC_MAX_ABS_DP_EXACT:
        exact, approximate, both = spec_bounds(name)
        tables[name] = gate_table(name == "float32", (exact,), (exact,), (approximate,), (both,),
                                  near_tie_allowances({}, name))
    return GatesFile(name=SPEC, gates=tables, description="the spec's tolerances, fixed in advance (no measurement)")


def capture_gate(gates: tuple[Gate, ...]) -> Gate:
    """A capturing pass must reproduce its probed parent as closely as its own max |Δ logit| gate allows."""
    bound = next((gate for gate in gates if gate.metric == "max_abs_dlogit" and gate.op == "<="), None)
    if bound is None:  # a gates file without logit bounds (the spec fallback): the spec's FP32 logit tolerance
        bound = Gate("max_abs_dlogit", "<=", SPEC_MAX_ABS_DLOGIT, derivation="spec §11.6 logit tolerance")
    return Gate("capture_max_abs_dlogit", "<=", bound.threshold, noise_floor=bound.noise_floor,
                derivation="the pass rebuilt on probed parts (fidelity.capture_probe) must match them within its "
                           f"max_abs_dlogit bound ({bound.derivation})")


# Two results that each round once from (almost) the same float32 value differ by at most one unit in the
# last place, which is at most epsilon x |value|; 2 leaves room for values just below a power of two.
# Kernels of several rounded steps are measured per step (kernel_probe.ROUNDING_STEPS).
KERNEL_ROUNDING_BOUND = 2.0


def kernel_gate() -> Gate:
    return Gate("kernel_rounding_error", "<=", KERNEL_ROUNDING_BOUND,
                derivation="an exact half-precision kernel must agree with the kernel it replaces within one "
                           "rounding of the dtype per rounding step, on the inputs that kernel receives "
                           "(fidelity.kernel_probe); "
                           "float32 kernels that reassociate sums differ by more, and the float32 noise bound "
                           "gates them end to end")


# The drift gates a kernel-replacing exact half-precision pass keeps as diagnostics (`rounding_kernel_gates`).
_PARENT_DRIFT_METRICS = ("max_abs_dp", "max_abs_dlogit", "kl_logits_max")


def rounding_kernel_gates(gates: Sequence[Gate]) -> tuple[Gate, ...]:
    """The incremental gates of an exact half-precision pass that replaces kernels (or compiles), from the exact ones.

    A kernel may round once where the ops it replaces round after each step: it moves answers from its parent's
    by about what the cast to the dtype does, ten times the same-dtype noise of the exact bound, while sitting no
    farther from the float32 reference (docs/gates.md, "Exact half-precision kernels that round differently").
    So its drift from the parent becomes a diagnostic, and it is judged by its distance to the reference: its p99
    |dp| from the reference may exceed its parent's by at most the exact max |dp| bound. Its max beyond the
    larger of its parent's and the dtype cast's is reported, not gated: one question's distance is a draw that
    no test on one question can tell from a worse kernel (docs/gates.md, "The worst question"); the cumulative
    envelope bounds how far any question may sit from the reference. The rest stays: no decisive change from
    the parent, the kernel probe (added by `default_gates`), determinism, finiteness. A table without a max |dp|
    gate is returned unchanged."""
    bound = next((gate for gate in gates if gate.metric == "max_abs_dp" and gate.op == "<="), None)
    if bound is None:
        return tuple(gates)
    note = ("; a diagnostic here: a kernel that rounds differently moves answers from its parent's by about the "
            "cast's drift, and is judged by its distance to the reference (ref_excess_p99_abs_dp)")
    kept = tuple(dataclasses.replace(gate, diagnostic=True, derivation=gate.derivation + note)
                 if gate.metric in _PARENT_DRIFT_METRICS else gate for gate in gates)
    judged = Gate("ref_excess_p99_abs_dp", "<=", bound.threshold, noise_floor=bound.noise_floor,
                  derivation=f"the stage's p99 |dp| from the reference may exceed its parent's by at most the exact "
                             f"same-dtype bound ({bound.threshold:.3g}): rounding differently is allowed, drifting "
                             "farther from the float32 answers is not")
    worst = Gate("ref_excess_max_abs_dp", "<=", bound.threshold, noise_floor=bound.noise_floor, diagnostic=True,
                 derivation="the stage's max |dp| from the reference beyond the larger of its parent's and the dtype "
                            "cast's, reported: the worst question of a kernel that rounds elsewhere is a draw (on one "
                            "H100 fused_encoder's, the parent's worst question, sat 3.6e-3 farther while it was closer "
                            "at the p99 and on more questions); the cumulative max |dp| gate bounds it")
    return kept + (judged, worst)


def default_gates(exact: bool, dtype_name: str, comparison: str, captures: bool = False,
                  replaces_kernels: bool = False, compiles: bool = False,
                  gates_file: GatesFile | str | None = None) -> tuple[Gate, ...]:
    """The gates a stage must pass when the experiment names none.

    `exact`: incremental, the pass is exact; cumulative, every stage so far is. `captures` adds the
    capture-probe gate to the incremental comparison; `replaces_kernels`, for exact half-precision passes, the
    kernel-probe gate and the distance to the reference in place of the drift from the parent
    (`rounding_kernel_gates`); `compiles` (a pass that compiles the forward), the distance to the reference
    alone: mx.compile fuses elementwise chains into kernels it generates, which round once where the ops
    rounded after each step (on CUDA, measured: benchmarks/results/2026-12-07-h100-study), and there is no
    kernel of its own to probe. `gates_file` defaults to the bundled calibration.
    """
    if dtype_name not in DTYPE_NAMES:
        raise ValueError(f"dtype_name {dtype_name!r} is not one of {', '.join(DTYPE_NAMES)}")
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison {comparison!r} is not one of {', '.join(COMPARISONS)}")
    table = load_gates_file(gates_file).for_dtype(dtype_name)
    if comparison == "cumulative":
        return table.exact_cumulative if exact else table.approximate_cumulative
    gates = table.exact_incremental if exact else table.approximate_incremental
    exact_half = exact and dtype_name != "float32"
    if exact_half and (replaces_kernels or compiles):
        gates = rounding_kernel_gates(gates)
    probes = ((capture_gate(gates),) if captures else ()) + \
        ((kernel_gate(),) if exact_half and replaces_kernels else ())
    return gates + probes
