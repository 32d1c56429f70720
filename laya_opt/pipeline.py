"""Ordered passes, each gated twice by the fidelity checker: vs the previous accepted stage and vs FP32.

A researcher's pipeline in a few lines::

    from fidelity.suites import load_suite
    from laya_opt.pipeline import Pipeline
    from laya_opt.registry import get_pass
    from laya_opt.runtime import load_runtime

    reference = load_runtime("checkpoints/laya-tiny", "float32")
    candidate = load_runtime("checkpoints/laya-tiny", "float16")
    suite = load_suite("fidelity/suites/heldout.jsonl")
    result = Pipeline([(get_pass("head_prune_final"), {}, "reject"),
                       (get_pass("compile_buckets"), {"multiple": 16}, "stop")]).run(reference, candidate, suite)
    for stage in result.stages:
        print(stage.name, stage.verdict, stage.cumulative.metrics["max_abs_dp"])
    fast = result.final_runtime

Stage 0 (`baseline`) is the candidate dtype with no pass, gated cumulatively. A failed gate either
rejects the pass (the next pass starts from its parent) or stops the run; a pass that raises or that
mutates its input runtime ends the run with `PipelineError` (no partial result is returned).
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from fidelity.checker import Outputs, evaluate, requests_from_suite
from fidelity.gates import Gate, GateResult, check_gates, default_gates
from fidelity.metrics import FidelityReport, compare

from .checkpoint import dtype_name
from .passes_api import PassSpec, check_order, config_to_dict
from .runtime import Runtime

OnFail = Literal["reject", "stop"]
ON_FAIL_CHOICES = ("reject", "stop")
Verdict = Literal["accepted", "rejected", "stopped", "error"]
BASELINE = "baseline"
EVALUATION_REPEAT = 2  # every evaluation runs twice so the `deterministic` metric is measured


class PipelineError(RuntimeError):
    """A pass raised or mutated its input: the run ends and `partial` holds the stages up to the failure."""

    def __init__(self, message: str, partial: "PipelineResult"):
        super().__init__(message)
        self.partial = partial


# ---------------------------------------------------------------------------------------------------------------------
# Gates


@dataclass(frozen=True)
class GateSet:
    """Gate overrides for one comparison each; None keeps `fidelity.gates.default_gates`.

    An override replaces the default gate on the same (metric, op) and adds gates on new metrics.
    """

    incremental: tuple[Gate, ...] | None = None
    cumulative: tuple[Gate, ...] | None = None


def merge_gates(base: Sequence[Gate], overrides: Sequence[Gate] | None) -> tuple[Gate, ...]:
    if not overrides:
        return tuple(base)
    keyed = {(gate.metric, gate.op): gate for gate in base}
    for gate in overrides:
        keyed[(gate.metric, gate.op)] = gate
    return tuple(keyed.values())


def resolve_gates(comparison: str, exact: bool, candidate_dtype: str, *layers: GateSet) -> tuple[Gate, ...]:
    """Defaults for (exact, dtype, comparison), then each override layer in order (pipeline, then pass)."""
    gates = tuple(default_gates(exact, candidate_dtype, comparison))
    for layer in layers:
        gates = merge_gates(gates, getattr(layer, comparison))
    return gates


# ---------------------------------------------------------------------------------------------------------------------
# Steps and results


@dataclass(frozen=True)
class Step:
    spec: PassSpec
    config: Any                      # an instance of spec.config_type
    on_fail: OnFail = "stop"
    gates: GateSet = GateSet()

    def __post_init__(self):
        if self.on_fail not in ON_FAIL_CHOICES:
            raise ValueError(f"pass {self.spec.name}: on_fail must be one of {ON_FAIL_CHOICES}, got {self.on_fail!r}")
        if not isinstance(self.config, self.spec.config_type):
            raise TypeError(f"pass {self.spec.name}: config must be a {self.spec.config_type.__name__}, "
                            f"got {type(self.config).__name__}")


def as_step(item: Step | PassSpec | tuple) -> Step:
    """Accept a Step, a bare PassSpec, or (spec, config[, on_fail[, gates]]) with config a mapping or instance."""
    if isinstance(item, Step):
        return item
    if isinstance(item, PassSpec):
        item = (item,)
    if not isinstance(item, tuple) or not 1 <= len(item) <= 4 or not isinstance(item[0], PassSpec):
        raise TypeError(f"a pipeline step must be a Step, a PassSpec or (PassSpec, config, on_fail), got {item!r}")
    spec, config, rest = item[0], item[1] if len(item) > 1 else None, item[2:]
    if config is None or isinstance(config, Mapping):
        config = spec.make_config(config or {})
    return Step(spec, config, *rest)


@dataclass(frozen=True, eq=False)  # holds numpy arrays and runtimes: compare fields, not objects
class StageResult:
    index: int                                   # 0 is the baseline
    name: str                                    # pass name or "baseline"
    config: dict
    exact: bool
    on_fail: OnFail
    verdict: Verdict
    incremental: FidelityReport | None           # vs the previous accepted stage (None for the baseline)
    cumulative: FidelityReport | None            # vs the FP32 reference outputs
    incremental_gates: tuple[GateResult, ...]
    cumulative_gates: tuple[GateResult, ...]
    pass_info: dict                              # what the pass added or changed in runtime.info
    apply_s: float
    evaluate_s: float
    parent: int | None                           # index of the stage this one was applied to
    applied: tuple[str, ...] = ()
    identity: str = ""
    error: str | None = None
    runtime: Runtime | None = field(default=None, compare=False, repr=False)  # kept for accepted stages only

    @property
    def gate_results(self) -> tuple[GateResult, ...]:
        return self.incremental_gates + self.cumulative_gates

    @property
    def failed_gates(self) -> tuple[tuple[str, GateResult], ...]:
        return tuple(("incremental", r) for r in self.incremental_gates if not r.passed) + \
            tuple(("cumulative", r) for r in self.cumulative_gates if not r.passed)

    @property
    def gates_passed(self) -> bool:
        return not self.failed_gates

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"


@dataclass(frozen=True, eq=False)  # holds numpy arrays and runtimes: compare fields, not objects
class PipelineResult:
    stages: tuple[StageResult, ...]
    reference_outputs: Outputs | None = field(compare=False, repr=False)
    final_runtime: Runtime | None = field(compare=False, repr=False)
    planned: tuple[str, ...] = ()                # every pass name in the plan, including those never reached

    @property
    def gates_failed(self) -> bool:
        return any(not stage.gates_passed for stage in self.stages)

    @property
    def accepted_stages(self) -> tuple[StageResult, ...]:
        return tuple(stage for stage in self.stages if stage.accepted)

    @property
    def stopped(self) -> bool:
        return any(stage.verdict == "stopped" for stage in self.stages)

    def stage(self, name: str) -> StageResult:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage named {name!r}; stages: {', '.join(s.name for s in self.stages)}")


# ---------------------------------------------------------------------------------------------------------------------
# Mutation checks


def parameter_fingerprint(model) -> str:
    """Names, shapes, dtypes, object ids and two cheap value sums of every parameter array."""
    flat = tree_flatten(model.parameters())
    digest = hashlib.sha256()
    for name, value in flat:
        digest.update(f"{name}|{value.shape}|{value.dtype}|{id(value)}|".encode())
    if flat:
        # Sum and absolute sum catch writes through `array[...] = ...`, which keep the Python object.
        sums = mx.stack([mx.stack([mx.sum(v.astype(mx.float32)), mx.sum(mx.abs(v.astype(mx.float32)))])
                         for _, v in flat])
        digest.update(np.array(sums).tobytes())
    return digest.hexdigest()


def runtime_fingerprint(runtime: Runtime) -> dict[str, str]:
    """Per field: the object id, plus the parameter fingerprint of the model and a snapshot of `info`.

    A pass that swaps a field on its input (object.__setattr__), replaces a module in place or writes a
    weight array in place changes one of these.
    """
    prints = {f.name: str(id(getattr(runtime, f.name))) for f in dataclasses.fields(runtime)}
    prints["model.parameters"] = parameter_fingerprint(runtime.model)
    prints["info.items"] = repr(sorted((str(key), id(value)) for key, value in runtime.info.items()))
    return prints


def fingerprint_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return [name for name in before if before[name] != after.get(name)]


def info_added(parent: Runtime, child: Runtime) -> dict:
    """Report data a pass left in `runtime.info`: keys that are new or whose value object changed."""
    return {key: value for key, value in child.info.items()
            if key not in parent.info or parent.info[key] is not value}


# ---------------------------------------------------------------------------------------------------------------------
# Requests


def suite_requests(suites: Sequence) -> tuple:
    """Evaluation requests of every suite; record ids are prefixed by the suite name when several are used."""
    requests = []
    for suite in suites:
        for request in requests_from_suite(suite):
            record_id = request.record_id if len(suites) == 1 else f"{suite.name}:{request.record_id}"
            requests.append(dataclasses.replace(request, record_id=record_id))
    return tuple(requests)


# ---------------------------------------------------------------------------------------------------------------------
# The pipeline


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]
    gates: GateSet = GateSet()
    repeat: int = EVALUATION_REPEAT

    def __init__(self, steps: Sequence[Step | PassSpec | tuple] = (), gates: GateSet = GateSet(),
                 repeat: int = EVALUATION_REPEAT):
        object.__setattr__(self, "steps", tuple(as_step(item) for item in steps))
        object.__setattr__(self, "gates", gates)
        object.__setattr__(self, "repeat", repeat)
        check_order([step.spec for step in self.steps])  # refuse an illegal plan before anything runs

    def gates_for(self, step: Step | None, comparison: str, exact: bool, candidate_dtype: str) -> tuple[Gate, ...]:
        layers = (self.gates,) if step is None else (self.gates, step.gates)
        return resolve_gates(comparison, exact, candidate_dtype, *layers)

    def run(self, reference: Runtime, candidate: Runtime, requests: Sequence, progress=None) -> PipelineResult:
        """Evaluate the reference once, gate the baseline, then apply, check and gate every step in order.

        `requests` is a Suite, a list of Suites, or checker EvalRequests.
        `progress(message)` is called before each evaluation, for console feedback.
        """
        say = progress or (lambda message: None)
        check_order([step.spec for step in self.steps])
        if hasattr(requests, "records"):  # a Suite
            requests = suite_requests([requests])
        elif requests and all(hasattr(item, "records") for item in requests):
            requests = suite_requests(list(requests))
        planned = tuple(step.spec.name for step in self.steps)
        reference_print = runtime_fingerprint(reference)
        say("evaluating the reference")
        # Gates read determinism from the candidate side only, so the reference is evaluated once.
        reference_outputs = evaluate(reference, requests, repeat=1)
        candidate_dtype = dtype_name(candidate.dtype)

        say("evaluating stage 0 (baseline)")
        started = time.perf_counter()
        baseline_exact = candidate_dtype == dtype_name(reference.dtype)  # a dtype change is an approximation
        baseline_outputs = evaluate(candidate, requests, repeat=self.repeat)
        baseline_report = compare(reference_outputs, baseline_outputs)
        baseline_gates = tuple(check_gates(baseline_report.metrics,
                                           self.gates_for(None, "cumulative", baseline_exact, candidate_dtype)))
        passed = all(result.passed for result in baseline_gates)
        stages = [StageResult(index=0, name=BASELINE, config={"dtype": candidate_dtype}, exact=baseline_exact,
                              on_fail="stop", verdict="accepted" if passed else "stopped", incremental=None,
                              cumulative=baseline_report, incremental_gates=(), cumulative_gates=baseline_gates,
                              pass_info={}, apply_s=0.0, evaluate_s=time.perf_counter() - started, parent=None,
                              applied=candidate.applied, identity=candidate.identity,
                              runtime=candidate if passed else None)]
        current, current_outputs, current_index = candidate, baseline_outputs, 0
        all_exact = baseline_exact

        for index, step in enumerate(self.steps if passed else (), start=1):
            say(f"stage {index}: applying {step.spec.name}")
            child, apply_s = self._apply(step, current, index, current_index, stages, reference_outputs, planned)
            say(f"stage {index}: evaluating {step.spec.name}")
            started = time.perf_counter()
            outputs = evaluate(child, requests, repeat=self.repeat)
            incremental = compare(current_outputs, outputs)
            cumulative = compare(reference_outputs, outputs)
            exact_so_far = all_exact and step.spec.exact
            incremental_gates = tuple(check_gates(incremental.metrics, self.gates_for(
                step, "incremental", step.spec.exact, candidate_dtype)))
            cumulative_gates = tuple(check_gates(cumulative.metrics, self.gates_for(
                step, "cumulative", exact_so_far, candidate_dtype)))
            ok = all(result.passed for result in incremental_gates + cumulative_gates)
            verdict: Verdict = "accepted" if ok else ("rejected" if step.on_fail == "reject" else "stopped")
            stages.append(StageResult(
                index=index, name=step.spec.name, config=config_to_dict(step.config), exact=step.spec.exact,
                on_fail=step.on_fail, verdict=verdict, incremental=incremental, cumulative=cumulative,
                incremental_gates=incremental_gates, cumulative_gates=cumulative_gates,
                pass_info=info_added(current, child), apply_s=apply_s, evaluate_s=time.perf_counter() - started,
                parent=current_index, applied=child.applied, identity=child.identity,
                runtime=child if ok else None))
            if ok:
                current, current_outputs, current_index, all_exact = child, outputs, index, exact_so_far
            elif verdict == "stopped":
                break

        changed = fingerprint_changes(reference_print, runtime_fingerprint(reference))
        if changed:
            partial = PipelineResult(tuple(stages), reference_outputs, None, planned)
            raise PipelineError(f"the reference runtime was mutated during the run (changed: {', '.join(changed)})",
                                partial)
        return PipelineResult(stages=tuple(stages), reference_outputs=reference_outputs, final_runtime=current,
                              planned=planned)

    def _apply(self, step: Step, parent: Runtime, index: int, parent_index: int, stages: list,
               reference_outputs: Outputs, planned: tuple[str, ...]) -> tuple[Runtime, float]:
        """Apply one pass; raising or mutating the input becomes an `error` stage and a PipelineError."""
        before = runtime_fingerprint(parent)
        started = time.perf_counter()
        try:
            child = step.spec.apply(parent, step.config)
            problem = None if isinstance(child, Runtime) else \
                f"returned {type(child).__name__}, not a Runtime"
        except Exception as exc:  # the pass's own failure: reported as a stage, then the run ends
            child, problem = None, f"raised {type(exc).__name__}: {exc}"
            cause = exc
        else:
            cause = None
        apply_s = time.perf_counter() - started
        if problem is None:
            changed = fingerprint_changes(before, runtime_fingerprint(parent))
            if changed:
                problem = f"mutated its input runtime (changed: {', '.join(changed)})"
        if problem is None:
            return child, apply_s
        message = f"pass {step.spec.name!r} (stage {index}) {problem}"
        stages.append(StageResult(
            index=index, name=step.spec.name, config=config_to_dict(step.config), exact=step.spec.exact,
            on_fail=step.on_fail, verdict="error", incremental=None, cumulative=None, incremental_gates=(),
            cumulative_gates=(), pass_info={}, apply_s=apply_s, evaluate_s=0.0, parent=parent_index,
            error=message))
        raise PipelineError(message, PipelineResult(tuple(stages), reference_outputs, None, planned)) from cause
