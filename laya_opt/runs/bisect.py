"""Bisect a failing stack: the first pass whose addition fails its gates, then the layers responsible.

1. The stack runs as the experiment gives it; the first stage with a failed gate names the pass (every
   earlier stage passed, so its addition is what failed).
2. If that pass changes parameters and selects modules by path (quantize_encoder), every encoder layer
   (or Linear) gets the pass alone, on the runtime the pass was applied to, and the units are ranked by
   the decisions they change on the gating suite (decisive changes, every change, right->wrong), then by
   their worst ratio of a drift metric to the stage's own incremental bound (`fidelity.sensitivity`).
3. The fewest top-ranked units whose exclusion lets the stage pass its gates are found by binary search
   over the ranking (re-running the stack up to that pass for each count), and the whole stack is
   re-run with that `exclude:` list to verify it: the verification passes the decision-change gates, and
   the summary states what it proves (the 95% upper bound on the rate of changed decisions).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import yaml

from laya_opt.runs.experiment import Experiment
from laya_opt.fidelity.checker import EvalRequest
from laya_opt.util.console import rich_table
from laya_opt.fidelity.gate_derivation import CALIBRATED_METRICS, PERCENTILE_OF
from laya_opt.fidelity.sensitivity import selects_units, sensitivity_table, unit_sensitivity
from laya_opt.runs.pipeline import PipelineResult, StageResult
from laya_opt.runs.runner import load_inputs, load_reference, precheck_steps
from laya_opt.core.runtime import Runtime
from laya_opt.util.schema import to_plain



@dataclass(frozen=True)
class ExclusionTrial:
    exclude: tuple[str, ...]
    passed: bool
    failed: tuple[str, ...]           # "comparison: message" of each failed gate of the bisected stage


@dataclass(frozen=True, eq=False)  # holds pipeline results: compare fields, not objects
class BisectResult:
    stages: tuple[StageResult, ...]    # the stack as given
    failing: StageResult | None        # the first stage that failed a gate; None: every gate passed
    ranking: tuple[dict, ...] = ()     # per unit, most harmful first (empty: the pass selects no units)
    trials: tuple[ExclusionTrial, ...] = ()
    exclude: tuple[str, ...] | None = None   # the suggested exclusion list (None: none found)
    verified: PipelineResult | None = None   # the whole stack re-run with it
    snippet: str = ""                  # the suggested pass entry as experiment YAML
    seconds: float = 0.0

    @property
    def fixed(self) -> bool:
        """A suggestion exists and the whole stack passes every gate with it."""
        return self.verified is not None and not self.verified.gates_failed


def with_exclusion(experiment: Experiment, step_index: int, exclude: tuple[str, ...]) -> Experiment:
    """The experiment with one pass's `exclude` list replaced (step_index counts the passes, not stage 0)."""
    step = experiment.steps[step_index]
    steps = list(experiment.steps)
    steps[step_index] = dataclasses.replace(step, config=dataclasses.replace(step.config, exclude=exclude))
    return dataclasses.replace(experiment, steps=tuple(steps))


def pass_entry_yaml(experiment: Experiment, step_index: int) -> str:
    """The pass entry as it goes into the experiment's `passes:` list, every setting spelled out."""
    step = experiment.steps[step_index]
    entry = {"name": step.spec.name, "config": to_plain(step.config), "on_fail": step.on_fail}
    return yaml.safe_dump({"passes": [entry]}, sort_keys=False, default_flow_style=None, width=200)


def _run(experiment: Experiment, reference: Runtime, requests: Sequence[EvalRequest],
         steps: int | None = None, reference_outputs=None) -> PipelineResult:
    pipeline = experiment.pipeline() if steps is None else \
        dataclasses.replace(experiment, steps=experiment.steps[:steps]).pipeline()
    return pipeline.run(reference, requests, reference_dtype=experiment.reference_dtype,
                        reference_outputs=reference_outputs)


def smallest_passing(units: Sequence[str], passes: Callable[[int], bool]) -> int | None:
    """The fewest leading units (1 .. len - 1) whose exclusion passes, assuming more exclusions never hurt;
    None when even all but one do not (excluding every unit would leave the pass nothing to do)."""
    low, high = 1, len(units) - 1
    if high < low or not passes(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle + 1
    return low


def bisect_stack(experiment: Experiment, reference: Runtime, requests: Sequence[EvalRequest],
                 result: PipelineResult | None = None, unit: str = "layer",
                 say: Callable[[str], None] = lambda message: None) -> BisectResult:
    """Bisect the experiment's stack on `requests`; `result` reuses a run of the same stack."""
    started = time.perf_counter()
    if result is None:
        say("running the stack")
        result = _run(experiment, reference, requests)
    failing = next((stage for stage in result.stages if not stage.gates_passed), None)
    if failing is None or failing.index == 0:  # nothing failed, or the baseline itself: no pass to blame
        return BisectResult(result.stages, failing, seconds=time.perf_counter() - started)
    step_index = failing.index - 1   # stage i applies the experiment's pass i - 1 (stage 0 is the baseline)
    step = experiment.steps[step_index]
    parent = result.stages[failing.parent].runtime
    if not selects_units(step.spec, step.config) or parent is None:
        return BisectResult(result.stages, failing, seconds=time.perf_counter() - started)
    say(f"ranking {unit}s by what {step.name} alone does to each")
    bounds = {result.gate.metric: result.gate.threshold for result in failing.incremental_gates
              if result.gate.op == "<=" and result.gate.metric in CALIBRATED_METRICS + tuple(PERCENTILE_OF.values())}
    ranking = tuple(unit_sensitivity(parent, requests, step.spec, step.config, unit, bounds))
    units = [row["unit"] for row in ranking]
    trials: dict[int, ExclusionTrial] = {}

    def passes(count: int) -> bool:
        exclude = tuple(step.config.exclude) + tuple(units[:count])
        say(f"gating {step.name} with exclude {list(exclude)}")
        trial = _run(with_exclusion(experiment, step_index, exclude), reference, requests, steps=step_index + 1,
                     reference_outputs=result.reference_outputs)  # the reference is the same in every trial
        stage = trial.stages[-1]
        passed = stage.index == failing.index and stage.gates_passed
        trials[count] = ExclusionTrial(exclude, passed, stage.failure_messages)
        return passed

    count = smallest_passing(units, passes)
    ordered = tuple(trials[key] for key in sorted(trials))
    if count is None:
        return BisectResult(result.stages, failing, ranking, ordered, seconds=time.perf_counter() - started)
    exclude = trials[count].exclude
    fixed = with_exclusion(experiment, step_index, exclude)
    say(f"verifying the whole stack with exclude {list(exclude)}")
    verified = _run(fixed, reference, requests, reference_outputs=result.reference_outputs)
    return BisectResult(result.stages, failing, ranking, ordered, exclude, verified,
                        pass_entry_yaml(fixed, step_index), time.perf_counter() - started)


def bisect_experiment(experiment: Experiment, result: PipelineResult | None = None, unit: str = "layer",
                      say: Callable[[str], None] = lambda message: None) -> BisectResult:
    """Load the experiment's reference and suites (no benchmark), then `bisect_stack`."""
    inputs = load_inputs(experiment, bench=False)
    say(f"loading {inputs.checkpoint.path} as {experiment.reference_dtype} (reference)")
    precheck_steps(experiment, inputs.checkpoint.model)
    reference = load_reference(experiment, inputs)
    return bisect_stack(experiment, reference, inputs.requests, result, unit, say)


def summary_lines(outcome: BisectResult) -> list[str]:
    """What bisect found, in plain lines (the tables are rendered separately)."""
    if outcome.failing is None:
        return ["every gate passed: nothing to bisect"]
    lines = [f"first failing stage: {outcome.failing.index} {outcome.failing.name}"]
    lines += [f"  {text}" for text in outcome.failing.failure_messages]
    if outcome.failing.index == 0:
        return lines + ["the baseline (the cast to the candidate dtype) fails: no pass to bisect"]
    if not outcome.ranking:
        return lines + [f"{outcome.failing.name} does not select modules by include/exclude: no layers to rank"]
    if outcome.exclude is None:
        return lines + ["no exclusion list short of excluding every unit lets the stage pass"]
    verdict = "passes every gate" if outcome.fixed else \
        f"still fails ({', '.join(s.name for s in outcome.verified.stages if not s.gates_passed)})"
    proof = verified_proof(outcome)
    return lines + [f"suggested exclude ({len(outcome.exclude)}): {', '.join(outcome.exclude)}; "
                    f"the whole stack re-run with it {verdict}"] + ([f"verified: {proof}"] if proof else []) + \
        [f"bisect took {outcome.seconds:.1f} s"]


def verified_proof(outcome: BisectResult) -> str | None:
    """What the verification run proves about the bisected stage's decisions against the reference."""
    if outcome.verified is None or outcome.failing is None:
        return None
    stage = next((s for s in outcome.verified.stages if s.index == outcome.failing.index), None)
    if stage is None or stage.cumulative is None or stage.cumulative.decisions is None:
        return None
    return stage.cumulative.decisions.proof()


def trials_table(outcome: BisectResult) -> dict:
    return {"title": "exclusion trials (the stack up to the bisected pass)",
            "columns": ["exclude", "gates", "failed"],
            "rows": [[", ".join(trial.exclude), "pass" if trial.passed else "FAIL", "; ".join(trial.failed) or "—"]
                     for trial in outcome.trials]}


def print_bisect(outcome: BisectResult, console) -> None:
    """The ranking and trial tables, what was found, and the suggested pass entry, on a rich console."""
    if outcome.ranking:
        console.print(rich_table(sensitivity_table(outcome.ranking, f"{outcome.failing.name}: one unit at a time, "
                                                                    "most harmful first")))
    if outcome.trials:
        console.print(rich_table(trials_table(outcome)))
    for line in summary_lines(outcome):
        console.print(line, highlight=False, soft_wrap=True)
    if outcome.snippet:
        console.print("suggested pass entry (verified):" if outcome.fixed else "suggested pass entry (NOT verified):")
        console.print(outcome.snippet, highlight=False, soft_wrap=True, markup=False)


def as_json(outcome: BisectResult) -> dict[str, Any]:
    return {"failing_stage": None if outcome.failing is None else
            {"index": outcome.failing.index, "name": outcome.failing.name, "failed": outcome.failing.failure_messages},
            "ranking": list(outcome.ranking),
            "trials": [dataclasses.asdict(trial) for trial in outcome.trials],
            "exclude": None if outcome.exclude is None else list(outcome.exclude), "fixed": outcome.fixed,
            "verified_proof": verified_proof(outcome),
            "snippet": outcome.snippet, "seconds": outcome.seconds}
