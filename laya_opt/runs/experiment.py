"""Experiment files: a flat YAML schema validated completely before any weight is loaded.

    name: stack_exact                      # results go to <output_dir>/<name>-<UTC timestamp>-<id>
    checkpoint: standin                    # the bundled stand-in, or a checkpoint directory
    reference_dtype: float32               # the reference every stage is compared with (cumulative)
    candidate_dtype: float16               # stage 0 "baseline": cast_dtype to this dtype
    batch_size: 16
    rerun: 128                             # requests evaluated a second time per stage and compared bit for bit
                                           # (the `deterministic` gate, which fails unmeasured with 0)
    suites: [gate]                         # bundled suite names or paths to .jsonl files
    plugins: [my_package.my_passes]        # modules imported explicitly to register third-party passes
    passes:
      - name: head_prune_final
        config: {}
        on_fail: reject                    # reject: drop and continue from the parent; stop (default): end
        gates: {incremental: ["max_abs_dp <= 1e-3"]}
    gates_file: standin                    # default gates: a calibration (`laya-opt calibrate-gates`), by bundled
                                           # name or path; `spec` for the spec's fixed tolerances
    gates:                                 # overrides of fidelity.gates.default_gates for every stage
      incremental: [{metric: argmax_agreement, op: ">=", threshold: 1.0}]
      cumulative: ["max_abs_dp <= 0.05"]
    benchmark:                             # absent: no timing
      workloads: [short-1, short-16, long-1]
      requests: 200                        # timed requests per workload, runtime and mode
      warmup: 10
      blocks: 10
      forward_only: true                   # also time pre-collated batches through the forward
      seed: 0
    output_dir: results
    export: {stage: quantize_encoder, path: exports/enc8}   # write that stage's quantized checkpoint
                                                            # (only if it is accepted; never overwrites)

Relative paths (checkpoint, suite files, output_dir) resolve from the current working directory.
Errors name the key path (`passes[1].config.group_size: ...`). YAML is read with a safe loader that
refuses duplicate keys, and no module is imported unless `plugins` names it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

from laya_opt.timing.bench import BenchConfig
from laya_opt.util.errors import ExperimentError, InputError
from laya_opt.fidelity.gates import GatesFile, load_gates_file
from laya_opt.fidelity.rerun import DEFAULT_RERUN
from laya_opt.suites.workloads import WORKLOADS, check_requests_name
from laya_opt.passes.contract import check_order
from laya_opt.runs.pipeline import Pipeline
from laya_opt.runs.steps import BASELINE, GateSet, Step
from laya_opt.passes.registry import Registry, build_registry
from laya_opt.util.resources import checkpoint_path, suite_path
from laya_opt.util.jsonio import read_yaml
from laya_opt.util.schema import convert, parse, to_plain

DTYPE = Literal["float32", "float16", "bfloat16"]
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# ---------------------------------------------------------------------------------------------------------------------
# The file, as the validator reads it


@dataclass(frozen=True)
class PassEntry:
    name: str
    config: Mapping[str, Any] = field(default_factory=dict)   # checked against the pass's own config type
    on_fail: Literal["reject", "stop"] = "stop"
    gates: GateSet = GateSet()


@dataclass(frozen=True)
class ExportEntry:
    stage: str       # a stage name: a pass's name (or label), or "baseline"
    path: str        # a directory that must not exist yet


@dataclass(frozen=True)
class ExperimentFile:
    name: str
    checkpoint: str = "standin"
    reference_dtype: DTYPE = "float32"
    candidate_dtype: DTYPE = "float16"
    batch_size: int = field(default=16, metadata={"min": 1})
    rerun: int = field(default=DEFAULT_RERUN, metadata={"min": 0})
    suites: tuple[str, ...] = field(default=("gate",), metadata={"nonempty": True})
    plugins: tuple[str, ...] = ()
    passes: tuple[PassEntry, ...] = ()
    gates_file: str = field(default="standin", metadata={"nonempty": True})
    gates: GateSet = GateSet()
    benchmark: Mapping[str, Any] | None = None   # workloads + BenchConfig fields
    output_dir: str = "results"
    export: ExportEntry | None = None

    def __post_init__(self):
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"name: {self.name!r} must be letters, digits, '.', '_' or '-' (it names a directory)")


@dataclass(frozen=True)
class BenchmarkPlan:
    workloads: tuple[str, ...]
    config: BenchConfig


@dataclass(frozen=True)
class ExportPlan:
    stage: str
    path: Path
    path_key: str = "export.path"    # how errors name the path: the YAML key or the command-line option


def export_plan(stage: str, path: str | Path, steps: tuple[Step, ...], stage_key: str = "export.stage",
                path_key: str = "export.path") -> ExportPlan:
    """An export of the stage named `stage`, which must be one stage of the plan (the runner checks that
    `path` is free before it loads any weight)."""
    names = [BASELINE] + [step.name for step in steps]
    if names.count(stage) != 1:
        problem = "no stage is" if stage not in names else f"{names.count(stage)} stages are"
        raise ExperimentError(f"{stage_key}: {problem} named {stage!r}; stages: {', '.join(names)}")
    return ExportPlan(stage, Path(path).expanduser(), path_key)


def check_export_free(plan: ExportPlan) -> None:
    if plan.path.exists():
        raise ExperimentError(f"{plan.path_key}: {plan.path} already exists (an export never overwrites)")


@dataclass(frozen=True)
class Experiment:
    name: str
    source: Path | None
    checkpoint: Path
    reference_dtype: str
    candidate_dtype: str
    batch_size: int
    suites: tuple[Path, ...]
    steps: tuple[Step, ...]          # the passes; the pipeline puts the baseline step first
    gates: GateSet
    gates_file: GatesFile
    plugins: tuple[str, ...]
    benchmark: BenchmarkPlan | None
    output_dir: Path
    registry: Registry
    export: ExportPlan | None = None
    checkpoint_key: str = "checkpoint"     # how errors name the checkpoint: the YAML key, or `--checkpoint`
    command_options: tuple[str, ...] = ()  # command-line options that overrode the file, e.g. ("--suite", "smoke")
    rerun: int = DEFAULT_RERUN             # requests re-run per stage for the `deterministic` gate (fidelity.rerun)

    def pipeline(self) -> Pipeline:
        return Pipeline(self.steps, gates=self.gates, candidate_dtype=self.candidate_dtype,
                        reference_dtype=self.reference_dtype, gates_file=self.gates_file, rerun=self.rerun)

    def resolved(self) -> dict:
        """Every setting after defaults, as plain data (for the manifest)."""
        return {
            "name": self.name, "source": str(self.source) if self.source else None,
            "checkpoint": str(self.checkpoint), "reference_dtype": self.reference_dtype,
            "candidate_dtype": self.candidate_dtype, "batch_size": self.batch_size, "rerun": self.rerun,
            "suites": [str(path) for path in self.suites], "plugins": list(self.plugins),
            "passes": [{"name": step.name, "exact": step.is_exact, "config": to_plain(step.config),
                        "on_fail": step.on_fail, "source": self.registry.sources.get(step.spec.name)}
                       for step in self.steps],
            "gates_file": {"name": self.gates_file.name, "description": self.gates_file.description,
                           "source": dict(self.gates_file.source)},
            "gates": {step.name: {"incremental": [str(g) for g in incremental],
                                  "cumulative": [str(g) for g in cumulative]}
                      for step, incremental, cumulative in self.pipeline().plan()},
            "benchmark": None if self.benchmark is None else {
                "workloads": list(self.benchmark.workloads), **to_plain(self.benchmark.config)},
            "output_dir": str(self.output_dir),
            "export": None if self.export is None else {"stage": self.export.stage, "path": str(self.export.path)},
            "command_options": list(self.command_options),
        }


# ---------------------------------------------------------------------------------------------------------------------
# Parsing


def _step(entry: PassEntry, path: str, registry: Registry) -> Step:
    try:
        spec = registry.get(entry.name)
    except InputError as exc:
        raise ExperimentError(f"{path}.name: {exc}") from None
    config = spec.make_config(entry.config, path=f"{path}.config")
    for field_name, (kind, name) in spec.data_names(config).items():
        check_requests_name(name, f"{path}.config.{field_name}")
    return Step(spec, config, entry.on_fail, entry.gates)


def _benchmark(section: Mapping[str, Any]) -> BenchmarkPlan:
    settings = dict(section)
    if "workloads" not in settings:
        raise ExperimentError("benchmark.workloads: missing")
    workloads = convert(settings.pop("workloads"), tuple[str, ...], "benchmark.workloads")
    if not workloads:
        raise ExperimentError("benchmark.workloads: name at least one workload")
    for index, name in enumerate(workloads):
        if name not in WORKLOADS:
            raise ExperimentError(f"benchmark.workloads[{index}]: unknown workload {name!r}; "
                                  f"known: {', '.join(WORKLOADS)}")
    return BenchmarkPlan(workloads=workloads, config=parse(BenchConfig, settings, "benchmark"))


def parse_experiment(raw: Any, source: Path | None = None, extra_passes: tuple = ()) -> Experiment:
    """Validate a loaded YAML document; `extra_passes` registers passes without a module (tests, notebooks)."""
    try:
        return _parse(raw, source, extra_passes)
    except InputError as exc:
        raise ExperimentError(f"{source}: {exc}" if source else str(exc)) from None


def _parse(raw: Any, source: Path | None, extra_passes: tuple) -> Experiment:
    document = parse(ExperimentFile, raw)
    try:
        registry = build_registry(plugins=document.plugins, extra=extra_passes)
    except InputError as exc:
        raise ExperimentError(str(exc) if str(exc).startswith("plugins") else f"plugins: {exc}") from None
    steps = tuple(_step(entry, f"passes[{index}]", registry) for index, entry in enumerate(document.passes))
    try:
        check_order([step.spec for step in steps])
    except ValueError as exc:
        raise ExperimentError(f"passes: {exc}") from None
    return Experiment(
        name=document.name, source=source, checkpoint=checkpoint_path(document.checkpoint),
        reference_dtype=document.reference_dtype, candidate_dtype=document.candidate_dtype,
        batch_size=document.batch_size, rerun=document.rerun,
        suites=tuple(suite_path(value, f"suites[{index}]") for index, value in enumerate(document.suites)),
        steps=steps, gates=document.gates, gates_file=load_gates_file(document.gates_file), plugins=document.plugins,
        benchmark=None if document.benchmark is None else _benchmark(document.benchmark),
        output_dir=Path(document.output_dir).expanduser(), registry=registry,
        export=None if document.export is None else export_plan(document.export.stage, document.export.path, steps))


def load_experiment(path: str | Path, extra_passes: tuple = ()) -> Experiment:
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"experiment file {path} does not exist")
    return parse_experiment(read_yaml(path, ExperimentError), path, extra_passes)


# ---------------------------------------------------------------------------------------------------------------------
# explain


def _parts(names: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(names)) + "}"


def _gates_line(gates: tuple) -> str:
    def text(gate) -> str:
        floor = "" if gate.noise_floor is None else f" (noise {gate.noise_floor:.3g})"
        return str(gate) + floor + (" (if labelled)" if gate.requires_labels else "")

    return ", ".join(text(gate) for gate in gates) or "-"


def explain(experiment: Experiment) -> str:
    """The resolved plan as text: stages in order with contracts and gates, then the benchmark plan."""
    checkpoint_state = "" if experiment.checkpoint.is_dir() else "  [missing: run will fail]"
    lines = [
        f"experiment  {experiment.name}" + (f"  ({experiment.source})" if experiment.source else ""),
        f"checkpoint  {experiment.checkpoint}{checkpoint_state}",
        f"dtypes      reference {experiment.reference_dtype}, candidate {experiment.candidate_dtype}; "
        f"batch_size {experiment.batch_size}",
        f"re-run      {experiment.rerun} requests per stage, compared bit for bit (the `deterministic` gate)",
        "suites      " + ", ".join(str(path) for path in experiment.suites),
        "plugins     " + (", ".join(experiment.plugins) or "-"),
        f"gates file  {experiment.gates_file.name}" + (f" ({experiment.gates_file.description})"
                                                       if experiment.gates_file.description else ""),
        "",
        "stages (incremental = vs previous accepted stage, cumulative = vs the "
        f"{experiment.reference_dtype} reference):",
    ]
    for index, (step, incremental, cumulative) in enumerate(experiment.pipeline().plan()):
        spec = step.spec
        if index == 0:
            lines.append(f"  0. baseline  {spec.name} to {experiment.candidate_dtype}  "
                         f"{'exact' if step.is_exact else 'approximate'}  on_fail=stop")
        else:
            lines.append(f"  {index}. {step.name}  {'exact' if step.is_exact else 'approximate'}  "
                         f"on_fail={step.on_fail}  replaces={_parts(spec.replaces)} captures={_parts(spec.captures)}"
                         f"  [{experiment.registry.sources.get(spec.name, '?')}]")
            lines.append(f"       {spec.description}")
            lines.append(f"       config: {to_plain(step.config)}")
        lines.append(f"       incremental gates: {_gates_line(incremental)}")
        lines.append(f"       cumulative gates: {_gates_line(cumulative)}")
    lines.append("")
    plan = experiment.benchmark
    if plan is None:
        lines.append("benchmark   none (no `benchmark:` section)")
    else:
        modes = "end-to-end and forward-only" if plan.config.forward_only else "end-to-end"
        lines.append(f"benchmark   workloads {', '.join(plan.workloads)}; {modes}; {plan.config.requests} timed "
                     f"requests in {plan.config.blocks} rotating blocks after {plan.config.warmup} warmup, "
                     f"seed {plan.config.seed}")
        lines.append(f"            baseline = the {experiment.reference_dtype} reference; every accepted stage "
                     "is timed against it")
    lines.append(f"output      {experiment.output_dir}/{experiment.name}-<UTC timestamp>/")
    if experiment.export is not None:
        lines.append(f"export      stage {experiment.export.stage} -> {experiment.export.path} (its quantized "
                     "checkpoint, written only if the stage is accepted)")
    return "\n".join(lines)
