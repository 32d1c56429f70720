"""Ordered passes, each gated twice by the fidelity checker: vs the previous accepted stage and vs the reference.

Each stage is evaluated once on the suite, and a seeded sample of `rerun` requests is evaluated again and compared
bit for bit (`fidelity.rerun`: the `deterministic` gate). A stage whose pass changed none of the parts its answers
depend on reuses its parent's outputs after that sample came out identical (`runs.reuse`).

Stage 0 (`baseline`) is a step like the others: the `cast_dtype` pass turns the reference into the
candidate dtype. A failed gate either rejects the pass (the next pass starts from its parent) or
stops the run; a pass that raises or breaks its contract ends the run with `PipelineError`.
Passes that need data (a suite to plan buckets from) get it from `resolve_data`; they never read
the disk. The public API (`laya_opt.run_pipeline`) wraps this module.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import mlx.core as mx
from mlx.utils import tree_flatten

from laya_opt.core.checkpoint import dtype_name
from laya_opt.util.errors import InputError, PassError
from laya_opt.fidelity.capture_probe import capture_drift
from laya_opt.fidelity.checker import EvalRequest, Outputs, evaluate, requests_from_suite
from laya_opt.fidelity.rerun import DEFAULT_RERUN, check_rerun, rerun_check, rerun_count, with_rerun
from laya_opt.fidelity.decisions import compare
from laya_opt.fidelity.gates import Gate, GateResult, GatesFile, check_gates, load_gates_file
from laya_opt.fidelity.kernel_probe import kernel_rounding_error
from laya_opt.fidelity.metrics import FidelityReport, reference_excess
from laya_opt.suites.workloads import named_requests
from laya_opt.passes.contract import (PassSpec, apply_pass, changed_parts, check_order, fingerprint_changes,
                                     runtime_fingerprint)
from laya_opt.util.progress import Track, silent
from laya_opt.core.runtime import Runtime
from laya_opt.runs.reuse import EvalPath, can_reuse, mismatch_message
from laya_opt.runs.stagecache import StageCache
from laya_opt.runs.steps import GateSet, OnFail, Step, as_step, baseline_step, keeps_exact_chain, stage_gates
from laya_opt.util.schema import to_plain

Verdict = Literal["accepted", "rejected", "stopped", "error"]
# resolve_data(kind, name) -> the data a pass needs (kind "requests": (state, questions) pairs)
DataResolver = Callable[[str, str], Any]


class PipelineError(PassError):
    """A pass raised or broke its contract: the run ends and `partial` holds the stages up to the failure."""

    def __init__(self, message: str, partial: "PipelineResult"):
        super().__init__(message)
        self.partial = partial

    def __reduce__(self):
        # copy and pickle rebuild an exception from its args (the message alone); a Ray worker copies the
        # exception a trial raised, and without `partial` that copy raised a TypeError instead
        return type(self), (str(self), self.partial)


def default_resolver(kind: str, name: str) -> Any:
    if kind != "requests":
        raise InputError(f"unknown data kind {kind!r}")
    return named_requests(name)


def pass_data(spec: PassSpec, config: Any, resolve: DataResolver = default_resolver) -> dict[str, Any]:
    """config field -> the data it names (e.g. `plan_from`'s requests), for every need the config uses."""
    return {field_name: resolve(kind, name) for field_name, (kind, name) in spec.data_names(config).items()}


# ---------------------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, eq=False)  # holds numpy arrays and runtimes: compare fields, not objects
class StageResult:
    index: int                                   # 0 is the baseline
    name: str                                    # step label: "baseline" or the pass name
    config: dict
    exact: bool
    on_fail: OnFail
    verdict: Verdict
    incremental: FidelityReport | None           # vs the previous accepted stage (the reference for stage 0)
    cumulative: FidelityReport | None            # vs the reference outputs
    incremental_gates: tuple[GateResult, ...]
    cumulative_gates: tuple[GateResult, ...]
    report: dict                                 # what the pass reported (runtime.info[pass name])
    apply_s: float
    evaluate_s: float
    parent: int | None                           # index of the stage this one was applied to (None: the reference)
    applied: tuple[str, ...] = ()
    identity: str = ""
    error: str | None = None
    eval_path: EvalPath | None = None            # evaluated or reused, and the re-run sample (None: not evaluated)
    runtime: Runtime | None = field(default=None, compare=False, repr=False)  # kept for accepted stages only

    def __post_init__(self):
        # A stage is compared with an earlier stage or the reference, never with itself: a comparison whose
        # two sides are one runtime would pass every gate whatever the pass did.
        if self.parent is not None and not 0 <= self.parent < self.index:
            raise ValueError(f"stage {self.index} {self.name}: its parent must be an earlier stage, got {self.parent}")
        for comparison, report in (("incremental", self.incremental), ("cumulative", self.cumulative)):
            if report is not None and report.reference_identity == report.candidate_identity:
                raise ValueError(f"stage {self.index} {self.name}: the {comparison} comparison compares "
                                 f"{report.candidate_identity} with itself")

    @property
    def failed_gates(self) -> tuple[tuple[str, GateResult], ...]:
        return tuple(("incremental", r) for r in self.incremental_gates if not r.passed) + \
            tuple(("cumulative", r) for r in self.cumulative_gates if not r.passed)

    @property
    def failure_messages(self) -> tuple[str, ...]:
        """`comparison: message` of each failed gate."""
        return tuple(f"{comparison}: {result.message or result.gate}" for comparison, result in self.failed_gates)

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
    planned: tuple[str, ...] = ()                # every stage name in the plan, including those never reached
    rerun: int | None = None                     # the pipeline's re-run sample size (None: not recorded)

    @property
    def gates_failed(self) -> bool:
        return any(not stage.gates_passed for stage in self.stages)

    @property
    def accepted_stages(self) -> tuple[StageResult, ...]:
        return tuple(stage for stage in self.stages if stage.accepted)

    def stage(self, name: str) -> StageResult:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage named {name!r}; stages: {', '.join(s.name for s in self.stages)}")


# ---------------------------------------------------------------------------------------------------------------------
# Requests and the reference


def suite_requests(suites: Sequence) -> tuple[EvalRequest, ...]:
    """Evaluation requests of every suite; record ids are prefixed by the suite name when several are used."""
    requests = []
    for suite in suites:
        for request in requests_from_suite(suite):
            record_id = request.record_id if len(suites) == 1 else f"{suite.name}:{request.record_id}"
            requests.append(dataclasses.replace(request, record_id=record_id))
    return tuple(requests)


def as_requests(requests: Any) -> tuple[EvalRequest, ...]:
    """A Suite, a list of Suites, or EvalRequests."""
    if hasattr(requests, "records"):
        return suite_requests([requests])
    requests = tuple(requests)
    if requests and all(hasattr(item, "records") for item in requests):
        return suite_requests(requests)
    return requests


def check_reference(reference: Runtime, declared_dtype: str | None = None) -> None:
    """The reference is what it says: every floating weight in its dtype, and that dtype the declared one."""
    actual = dtype_name(reference.dtype)
    if declared_dtype is not None and actual != declared_dtype:
        raise InputError(f"the reference runtime is {actual}, but the run declares a {declared_dtype} reference")
    wrong = [name for name, value in tree_flatten(reference.model.parameters())
             if mx.issubdtype(value.dtype, mx.floating) and value.dtype != reference.dtype]
    if wrong:
        raise InputError(f"the {actual} reference holds weights in another dtype: {', '.join(wrong[:3])}"
                         f"{' ...' if len(wrong) > 3 else ''}")


def evaluate_reference(reference: Runtime, requests: Sequence[EvalRequest], track: Track = silent) -> Outputs:
    """The reference's outputs; gates read determinism from the candidate side only, so it runs once."""
    with track("reference", len(requests)) as advance:
        return evaluate(reference, requests, repeat=1, advance=advance)


# ---------------------------------------------------------------------------------------------------------------------
# The pipeline


@dataclass(frozen=True)
class Pipeline:
    steps: tuple[Step, ...]          # baseline first
    gates: GateSet = GateSet()
    rerun: int = DEFAULT_RERUN       # requests of a seeded sample evaluated twice per stage (fidelity.rerun)
    resolve_data: DataResolver = default_resolver
    gates_file: GatesFile | None = None   # where the default gates come from

    def __init__(self, steps: Sequence[Any] = (), gates: GateSet = GateSet(), candidate_dtype: str = "float16",
                 reference_dtype: str = "float32", rerun: int = DEFAULT_RERUN,
                 resolve_data: DataResolver = default_resolver, gates_file: GatesFile | str | None = None):
        """`gates_file`: a GatesFile, `standin` (None: the bundled calibration), `spec` or a path; `rerun`: how many
        requests (a seeded sample) each stage evaluates a second time, compared bit for bit (0: none, so the
        `deterministic` gate fails and no stage's outputs are reused)."""
        check_rerun(rerun)
        steps = tuple(as_step(item) for item in steps)
        if not steps or steps[0].spec.name != "cast_dtype":
            steps = (baseline_step(candidate_dtype, reference_dtype),) + steps
        check_order([step.spec for step in steps])  # refuse an illegal plan before anything runs
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "gates", gates)
        object.__setattr__(self, "rerun", rerun)
        object.__setattr__(self, "resolve_data", resolve_data)
        object.__setattr__(self, "gates_file", load_gates_file(gates_file))

    @property
    def candidate_dtype(self) -> str:
        return self.steps[0].config.dtype

    def plan(self) -> list[tuple[Step, tuple[Gate, ...], tuple[Gate, ...]]]:
        """Every step with its gates, assuming every earlier stage is accepted (what `explain` shows)."""
        rows, chain = [], True
        for step in self.steps:
            rows.append((step, *stage_gates(step, chain, self.candidate_dtype, self.gates, self.gates_file)))
            chain = chain and keeps_exact_chain(step)
        return rows

    def run(self, reference: Runtime, requests: Any, progress: Callable[[str], None] | None = None,
            reference_dtype: str | None = None, track: Track = silent,
            reference_outputs: Outputs | None = None, stage_cache: StageCache | None = None) -> PipelineResult:
        """Evaluate the reference once, then apply, check and gate every step in order.

        `requests` is a Suite, a list of Suites, or checker EvalRequests; `progress(message)` is called
        before each evaluation and after each stage; `track` draws a bar per evaluation (one step per
        request); `reference_dtype`, when given, must be the reference's actual dtype;
        `reference_outputs`, when given, are the reference's outputs on these requests (the runner's
        reference cache) and the reference is not evaluated again; `stage_cache`, when given, shares evaluated
        stages' outputs with earlier runs (laya_opt.runs.stagecache: a sweep's trials).
        """
        say = progress or (lambda message: None)
        check_reference(reference, reference_dtype)
        for index, step in enumerate(self.steps):  # settings the model cannot take, before minutes of evaluation
            step.spec.check(reference.model, step.config, f"stage {index} ({step.name})")
        requests = as_requests(requests)
        planned = tuple(step.name for step in self.steps)
        reference_print = runtime_fingerprint(reference)
        if reference_outputs is None:
            say("evaluating the reference")
            reference_outputs = evaluate_reference(reference, requests, track)
        stages: list[StageResult] = []
        current, current_outputs, current_index, chain = reference, reference_outputs, None, True
        cacheable = stage_cache is not None   # the lineage took no data (a suite's content is not in the key)
        for index, step in enumerate(self.steps):
            say(f"stage {index}: applying {step.name}")
            child, probes, apply_s = self._apply(step, current, index, current_index, stages, reference_outputs,
                                                 planned, requests)
            changed = changed_parts(current, child)
            reuse = can_reuse(changed, self.rerun)
            child_cacheable = cacheable and not step.spec.data_names(step.config)
            say(f"stage {index}: {'re-running a sample of' if reuse else 'evaluating'} {step.name}")
            started = time.perf_counter()
            try:
                outputs, path = self._evaluate(child, requests, current_outputs, current_index, changed, reuse,
                                               f"stage {index} {step.name}", track,
                                               stage_cache if child_cacheable else None)
            except Exception as exc:  # e.g. a kernel that fails on this device: the stage fails, the run goes on
                stages.append(self._failed_evaluation(step, index, current_index, exc, time.perf_counter() - started))
                if step.on_fail == "stop" or index == 0:
                    break
                continue
            if reuse and not path.rerun.identical:  # the change set missed something: never gate on such outputs
                message = mismatch_message(index, step.name, current_index, path.rerun)
                stages.append(StageResult(
                    index=index, name=step.name, config=to_plain(step.config), exact=step.is_exact,
                    on_fail=step.on_fail, verdict="error", incremental=None, cumulative=None, incremental_gates=(),
                    cumulative_gates=(), report=dict(child.info.get(step.spec.name, {})), apply_s=apply_s,
                    evaluate_s=time.perf_counter() - started, parent=current_index, applied=child.applied,
                    identity=child.identity, error=message, eval_path=path))
                raise PipelineError(message, PipelineResult(tuple(stages), reference_outputs, None, planned))
            cumulative = compare(reference_outputs, outputs)
            incremental = cumulative   # stage 0 compares with the reference once
            if current is not reference:
                incremental = compare(current_outputs, outputs)
                incremental = dataclasses.replace(incremental, metrics={**incremental.metrics, **reference_excess(
                    cumulative.metrics, stages[current_index].cumulative.metrics, stages[0].cumulative.metrics)})
            if probes:
                incremental = dataclasses.replace(incremental, metrics={**incremental.metrics, **probes})
            incremental_gates, cumulative_gates = (
                tuple(check_gates(report.metrics, gates)) for report, gates in
                zip((incremental, cumulative), stage_gates(step, chain, self.candidate_dtype, self.gates,
                                                           self.gates_file)))
            ok = all(result.passed for result in incremental_gates + cumulative_gates)
            verdict: Verdict = "accepted" if ok else ("rejected" if step.on_fail == "reject" else "stopped")
            stages.append(StageResult(
                index=index, name=step.name, config=to_plain(step.config), exact=step.is_exact,
                on_fail=step.on_fail, verdict=verdict, incremental=incremental, cumulative=cumulative,
                incremental_gates=incremental_gates, cumulative_gates=cumulative_gates,
                report=dict(child.info.get(step.spec.name, {})), apply_s=apply_s,
                evaluate_s=time.perf_counter() - started, parent=current_index, applied=child.applied,
                identity=child.identity, eval_path=path, runtime=child if ok else None))
            say(f"stage {index} {step.name}: {verdict} in {apply_s + stages[-1].evaluate_s:.1f} s "
                f"(apply {apply_s:.1f} s, evaluate {stages[-1].evaluate_s:.1f} s: {path.describe()})")
            if ok:
                current, current_outputs, current_index = child, outputs, index
                chain = chain and keeps_exact_chain(step)
                cacheable = child_cacheable
            elif verdict == "stopped":
                break
        changed = fingerprint_changes(reference_print, runtime_fingerprint(reference))
        if changed:
            partial = PipelineResult(tuple(stages), reference_outputs, None, planned)
            raise PipelineError(f"the reference runtime was mutated during the run (changed: {', '.join(changed)})",
                                partial)
        final = current if current is not reference else None
        return PipelineResult(stages=tuple(stages), reference_outputs=reference_outputs, final_runtime=final,
                              planned=planned, rerun=self.rerun)

    def _evaluate(self, child: Runtime, requests: tuple[EvalRequest, ...], parent_outputs: Outputs,
                  parent_index: int | None, changed: frozenset[str], reuse: bool, label: str, track: Track,
                  cache: StageCache | None = None) -> tuple[Outputs, EvalPath]:
        """The stage's outputs and how they were obtained: the parent's, checked on the re-run sample (`reuse`);
        an earlier run's from `cache`, checked on the sample; or every request evaluated once and the sample a
        second time."""
        sample = rerun_count(len(requests), self.rerun)
        changed_names = tuple(sorted(changed))
        with track(label, sample + (0 if reuse else len(requests))) as advance:
            if reuse:
                check = rerun_check(child, requests, parent_outputs, self.rerun, advance=advance)
                return (with_rerun(parent_outputs, check, child.identity),
                        EvalPath("reused", source=parent_index, rerun=check))
            note = ""
            evaluate_all = lambda: evaluate(child, requests, advance=advance)
            if cache is not None and sample:  # a hit is trusted only once its sample answers bit for bit alike
                key = cache.key(child)
                found = cache.outputs(key, evaluate_all)
                outputs = found.outputs
                if found.status == "hit":
                    advance(len(requests))   # the bar counted a full evaluation: the entry stands in for it
                    check = rerun_check(child, requests, outputs, self.rerun, advance=advance)
                    if check.identical:
                        return with_rerun(outputs, check), EvalPath("cached", changed=changed_names, rerun=check)
                    note = (f"the stage cache's entry {key.digest[:12]}… answered otherwise on the re-run sample "
                            f"({len(check.differing)} question(s)): evaluated in full, entry replaced")
                    outputs = cache.replace(key, evaluate_all)
            else:
                outputs = evaluate_all()
            check = rerun_check(child, requests, outputs, self.rerun, advance=advance) if sample else None
            return (outputs if check is None else with_rerun(outputs, check),
                    EvalPath("evaluated", changed=changed_names, rerun=check, note=note))

    @staticmethod
    def _failed_evaluation(step: Step, index: int, parent_index: int | None, exc: Exception,
                           evaluate_s: float) -> StageResult:
        """A stage whose runtime raised while answering: it fails the `finite` gate, naming the error."""
        message = f"evaluation raised {type(exc).__name__}: {exc}"
        failed = (GateResult(Gate("finite", "==", 1.0), None, False, message),)
        return StageResult(index=index, name=step.name, config=to_plain(step.config), exact=step.is_exact,
                           on_fail=step.on_fail, verdict="rejected" if step.on_fail == "reject" else "stopped",
                           incremental=None, cumulative=None, incremental_gates=failed, cumulative_gates=(),
                           report={}, apply_s=0.0, evaluate_s=evaluate_s, parent=parent_index, error=message)

    def _apply(self, step: Step, parent: Runtime, index: int, parent_index: int | None, stages: list,
               reference_outputs: Outputs, planned: tuple[str, ...], requests: tuple[EvalRequest, ...]
               ) -> tuple[Runtime, dict[str, float], float]:
        """Apply one step and run its probes: (runtime, probe metrics, seconds spent applying).

        Probes: what a capturing pass captured (fidelity.capture_probe), the kernels an exact pass replaced
        (fidelity.kernel_probe). Raising or breaking the contract (in the pass or a probe) becomes an `error`
        stage and a PipelineError.
        """
        started = time.perf_counter()
        try:
            data = pass_data(step.spec, step.config, self.resolve_data)
            child = apply_pass(step.spec, parent, step.config, data)
            apply_s = time.perf_counter() - started
            # Kernels are probed in half precision, where one rounding is a meaningful bound (see the gate).
            kernels = step.is_exact and parent.dtype != mx.float32
            probes = {"capture_max_abs_dlogit": capture_drift(step.spec, step.config, data, parent, requests),
                      "kernel_rounding_error": kernel_rounding_error(parent, child, requests) if kernels else None}
            return child, {name: value for name, value in probes.items() if value is not None}, apply_s
        except Exception as exc:  # the pass's own failure: reported as a stage, then the run ends
            problem = str(exc) if isinstance(exc, PassError) else f"raised {type(exc).__name__}: {exc}"
            cause = exc
        message = problem if problem.startswith("pass ") else f"pass {step.spec.name!r} (stage {index}) {problem}"
        stages.append(StageResult(
            index=index, name=step.name, config=to_plain(step.config), exact=step.is_exact,
            on_fail=step.on_fail, verdict="error", incremental=None, cumulative=None, incremental_gates=(),
            cumulative_gates=(), report={}, apply_s=time.perf_counter() - started, evaluate_s=0.0,
            parent=parent_index, error=message))
        raise PipelineError(message, PipelineResult(tuple(stages), reference_outputs, None, planned)) from cause
