"""Sweep files: a base experiment, a search space over its pass settings and order, objectives, a sampler, a budget.

    name: quant_grid                      # results go to <output_dir>/<name>/
    base: ../quant_enc8.yaml              # an experiment file, relative to this file
    suites: [smoke]                       # optional: overrides the base experiment's suites
    checkpoint: standin                   # optional: overrides the base experiment's checkpoint
    benchmark: {workloads: [short-1], requests: 4, warmup: 1, blocks: 2}   # optional override
    space:
      quantize_encoder.bits: {type: categorical, choices: [8, 6, 5, 4]}
      quantize_encoder.group_size: {type: int, low: 32, high: 128, step: 32}
      noisy.scale: {type: float, low: 0.001, high: 1.0, log: true}
      order: {type: order}                # every legal order of the base experiment's passes
      prefix_cache.enabled: {type: categorical, choices: [true, false]}   # a pass subset: with or without it
    objectives: [speedup, decision_changes]   # speedup | decision_changes | accuracy_delta | max_abs_dp
    speedup: {workload: short-1, mode: end_to_end}
    sampler: {kind: tpe, seed: 0}         # tpe | grid | random
    budget: {trials: 12, minutes: 10}     # at least one of the two
    output_dir: results/sweeps

Every trial is a normal gated run of the base experiment with the sampled settings; a trial whose gates
fail is recorded but is never the best. Validation is strict and happens before anything runs: unknown
keys, a parameter naming a pass the base experiment does not have or a setting that pass does not take,
an empty or inverted range, a float range under the grid sampler, an unknown objective or sampler are
refused with an ExperimentError that names the file and the key.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from laya_opt.passes.contract import check_order
from laya_opt.runs.experiment import NAME_PATTERN, Experiment, load_experiment
from laya_opt.util.errors import ExperimentError, InputError
from laya_opt.util.jsonio import read_yaml
from laya_opt.util.schema import parse

OBJECTIVES = {"speedup": "maximize", "decision_changes": "minimize", "accuracy_delta": "maximize",
              "max_abs_dp": "minimize"}
SAMPLERS = ("tpe", "grid", "random")
ORDER = "order"
ENABLED = "enabled"   # PASS.enabled: whether the trial keeps that pass of the base experiment (pass subsets)
BACKENDS = ("optuna", "ray")


@dataclass(frozen=True)
class ParamEntry:
    type: Literal["categorical", "int", "float", "order"]
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False


@dataclass(frozen=True)
class SpeedupEntry:
    workload: str = "short-1"
    mode: Literal["end_to_end", "forward_only"] = "end_to_end"


@dataclass(frozen=True)
class SamplerEntry:
    kind: str = "tpe"
    seed: int = field(default=0, metadata={"min": 0})


@dataclass(frozen=True)
class BudgetEntry:
    trials: int | None = field(default=None, metadata={"min": 1})
    minutes: float | None = field(default=None, metadata={"min": 0})


@dataclass(frozen=True)
class SweepDocument:
    name: str
    base: str
    space: Mapping[str, ParamEntry]
    budget: BudgetEntry
    objectives: tuple[str, ...] = ("speedup", "decision_changes")
    speedup: SpeedupEntry = SpeedupEntry()
    sampler: SamplerEntry = SamplerEntry()
    suites: tuple[str, ...] | None = None
    checkpoint: str | None = None
    benchmark: Mapping[str, Any] | None = None
    output_dir: str = "results/sweeps"


@dataclass(frozen=True)
class Param:
    """One dimension of the search: `key` is `PASS.SETTING` or `order`."""

    key: str
    kind: str                        # categorical | int | float | order
    choices: tuple[Any, ...] = ()    # categorical and order (order: tuples of pass indices into the base)
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    def grid_values(self) -> tuple[Any, ...]:
        if self.kind in ("categorical", "order"):
            return self.choices
        if self.kind == "int":
            return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        raise ExperimentError(f"space.{self.key}: a float range has no grid; give `type: categorical` choices")


@dataclass(frozen=True)
class Sweep:
    name: str
    source: Path
    base_path: Path
    base: Experiment                 # with the sweep's overrides applied
    params: tuple[Param, ...]
    objectives: tuple[str, ...]
    speedup: SpeedupEntry
    sampler: str
    seed: int
    max_trials: int | None
    minutes: float | None
    output_dir: Path
    overrides: Mapping[str, Any]     # the raw overrides, for best.yaml

    @property
    def directions(self) -> list[str]:
        return [OBJECTIVES[name] for name in self.objectives]

    @property
    def results_dir(self) -> Path:
        return self.output_dir / self.name

    def grid(self) -> dict[str, list]:
        return {param.key: list(range(len(param.grid_values()))) for param in self.params}

    def grid_size(self) -> int:
        size = 1
        for param in self.params:
            size *= len(param.grid_values())
        return size


def _fail(source: Path, message: str) -> ExperimentError:
    return ExperimentError(f"{source}: {message}")


def _legal_orders(base: Experiment) -> tuple[tuple[int, ...], ...]:
    orders = []
    for order in itertools.permutations(range(len(base.steps))):
        try:
            check_order([base.steps[index].spec for index in order])
        except ValueError:
            continue
        orders.append(order)
    return tuple(orders)


def _param(key: str, entry: ParamEntry, base: Experiment) -> Param:
    where = f"space.{key}"
    if key == ORDER:
        if entry.type != "order":
            raise ExperimentError(f"{where}: the `order` parameter takes `type: order`")
        if len(base.steps) < 2:
            raise ExperimentError(f"{where}: the base experiment has {len(base.steps)} pass(es); nothing to order")
        return Param(key, "order", _legal_orders(base))
    pass_name, dot, setting = key.partition(".")
    names = [step.name for step in base.steps]
    if not dot or not setting:
        raise ExperimentError(f"{where}: a parameter is `PASS.SETTING` (or `order`)")
    if pass_name not in names:
        raise ExperimentError(f"{where}: unknown pass {pass_name!r}; the base experiment's passes: "
                              f"{', '.join(names) or 'none'}")
    step = base.steps[names.index(pass_name)]
    settings = [f.name for f in __import__("dataclasses").fields(step.spec.config_type)]
    if setting == ENABLED:
        if entry.type != "categorical" or not entry.choices or any(not isinstance(c, bool) for c in entry.choices):
            raise ExperimentError(f"{where}: `enabled` keeps or drops the pass: `type: categorical` with choices "
                                  f"from [true, false]")
        return Param(key, "categorical", tuple(dict.fromkeys(entry.choices)))
    if setting not in settings:
        raise ExperimentError(f"{where}: pass {pass_name} has no setting {setting!r}; its settings: "
                              f"{', '.join(settings)} (and `{ENABLED}`, to keep or drop it)")
    if entry.type == "order":
        raise ExperimentError(f"{where}: `type: order` is only for the `order` parameter")
    if entry.type == "categorical":
        if not entry.choices:
            raise ExperimentError(f"{where}.choices: give at least one choice")
        for index, choice in enumerate(entry.choices):  # each choice must make a valid config
            try:
                step.spec.make_config({**_plain(step.config), setting: choice}, path=f"{where}.choices[{index}]")
            except InputError as exc:
                raise ExperimentError(str(exc)) from None
        return Param(key, "categorical", tuple(entry.choices))
    if entry.low is None or entry.high is None:
        raise ExperimentError(f"{where}: an {entry.type} range needs `low` and `high`")
    if entry.choices is not None:
        raise ExperimentError(f"{where}.choices: only a categorical parameter has choices")
    if entry.low > entry.high:
        raise ExperimentError(f"{where}: low {entry.low} is above high {entry.high}")
    if entry.log and entry.low <= 0:
        raise ExperimentError(f"{where}: a log range needs low > 0, got {entry.low}")
    if entry.step is not None and entry.step <= 0:
        raise ExperimentError(f"{where}.step: must be positive, got {entry.step}")
    if entry.type == "int" and any(v is not None and float(v) != int(v) for v in (entry.low, entry.high, entry.step)):
        raise ExperimentError(f"{where}: an int range takes whole numbers")
    return Param(key, entry.type, (), entry.low, entry.high, entry.step, entry.log)


def _plain(config) -> dict:
    from laya_opt.util.schema import to_plain

    return to_plain(config)


def parse_sweep(raw: Any, source: Path) -> Sweep:
    try:
        document = parse(SweepDocument, raw)
    except InputError as exc:
        raise _fail(source, str(exc)) from None
    if not NAME_PATTERN.match(document.name):
        raise _fail(source, f"name: {document.name!r} must be letters, digits, '.', '_' or '-'")
    if document.budget.trials is None and document.budget.minutes is None:
        raise _fail(source, "budget: give `trials`, `minutes` or both")
    if not document.objectives:
        raise _fail(source, "objectives: name at least one")
    for index, name in enumerate(document.objectives):
        if name not in OBJECTIVES:
            raise _fail(source, f"objectives[{index}]: unknown objective {name!r}; known: {', '.join(OBJECTIVES)}")
    if len(set(document.objectives)) != len(document.objectives):
        raise _fail(source, "objectives: an objective is named twice")
    if document.sampler.kind not in SAMPLERS:
        raise _fail(source, f"sampler.kind: unknown sampler {document.sampler.kind!r}; known: {', '.join(SAMPLERS)}")
    if not document.space:
        raise _fail(source, "space: give at least one parameter")
    base_path = (source.parent / document.base).resolve()
    if not base_path.is_file():
        raise _fail(source, f"base: experiment file {base_path} does not exist")
    overrides = {key: value for key, value in (("suites", document.suites), ("checkpoint", document.checkpoint),
                                                ("benchmark", document.benchmark)) if value is not None}
    try:
        base = base_experiment(base_path, overrides)
    except InputError as exc:
        raise _fail(source, f"base: {exc}") from None
    try:
        params = tuple(_param(str(key), entry, base) for key, entry in document.space.items())
        sweep = Sweep(name=document.name, source=source, base_path=base_path, base=base, params=params,
                      objectives=document.objectives, speedup=document.speedup, sampler=document.sampler.kind,
                      seed=document.sampler.seed, max_trials=document.budget.trials,
                      minutes=document.budget.minutes, output_dir=Path(document.output_dir).expanduser(),
                      overrides=overrides)
        if sweep.sampler == "grid":
            sweep.grid_size()  # a float range has no grid
    except InputError as exc:
        raise _fail(source, str(exc)) from None
    if "speedup" in sweep.objectives and base.benchmark is None:
        raise _fail(source, "objectives: speedup needs a benchmark (in the base experiment or `benchmark:`)")
    if base.benchmark is not None and "speedup" in sweep.objectives \
            and sweep.speedup.workload not in base.benchmark.workloads:
        raise _fail(source, f"speedup.workload: {sweep.speedup.workload!r} is not benchmarked; workloads: "
                            f"{', '.join(base.benchmark.workloads)}")
    return sweep


def base_document(base_path: Path, overrides: Mapping[str, Any]) -> dict:
    """The base experiment's YAML document with the sweep's overrides applied."""
    raw = read_yaml(base_path, ExperimentError)
    if not isinstance(raw, dict):
        raise ExperimentError(f"{base_path}: expected a mapping")
    return {**raw, **overrides}


def base_experiment(base_path: Path, overrides: Mapping[str, Any]) -> Experiment:
    if not overrides:
        return load_experiment(base_path)
    from laya_opt.runs.experiment import parse_experiment

    return parse_experiment(base_document(base_path, overrides), base_path)


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"sweep file {path} does not exist")
    return parse_sweep(read_yaml(path, ExperimentError), path)
