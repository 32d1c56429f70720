"""Experiment files: a flat YAML schema validated completely before any weight is loaded.

    name: stack_exact                      # results go to <output_dir>/<name>-<UTC timestamp>
    checkpoint: checkpoints/laya-tiny      # default; relative paths are relative to the project root
    reference_dtype: float32               # the reference every stage is compared with (cumulative)
    candidate_dtype: float16               # stage 0 "baseline": this dtype, no pass
    batch_size: 16
    suites: [heldout]                      # names in fidelity/suites/ or paths to .jsonl files
    plugins: [my_package.my_passes]        # modules imported explicitly to register third-party passes
    passes:
      - name: head_prune_final
        config: {}
        on_fail: reject                    # reject: drop and continue from the parent; stop (default): end
        gates: {incremental: ["max_abs_dp <= 1e-3"]}
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

Errors name the key path (`passes[1].config.group_size: ...`). Only `yaml.safe_load` is used, and no
module is imported unless `plugins` names it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from fidelity.gates import parse_gates

from .bench import BenchConfig
from .checkpoint import DTYPES
from .passes_api import PassSpec, check_order, config_to_dict
from .pipeline import ON_FAIL_CHOICES, GateSet, Pipeline, Step, resolve_gates
from .registry import Registry, UnknownPass, build_registry

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CHECKPOINT = "checkpoints/laya-tiny"
SUITES_DIR = PROJECT_ROOT / "fidelity" / "suites"
DEFAULT_OUTPUT_DIR = "results"
TOP_KEYS = ("name", "checkpoint", "reference_dtype", "candidate_dtype", "batch_size", "suites", "passes", "gates",
            "plugins", "benchmark", "output_dir")
PASS_KEYS = ("name", "config", "on_fail", "gates")
GATE_KEYS = ("incremental", "cumulative")
BENCHMARK_KEYS = ("workloads", "requests", "warmup", "blocks", "forward_only", "seed")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ExperimentError(ValueError):
    """An invalid experiment file; the message starts with the file and the key path."""


@dataclass(frozen=True)
class PassEntry:
    spec: PassSpec
    config: Any
    on_fail: str
    gates: GateSet

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class BenchmarkPlan:
    workloads: tuple[str, ...]
    config: BenchConfig


@dataclass(frozen=True)
class Experiment:
    name: str
    source: Path | None
    checkpoint: Path
    reference_dtype: str
    candidate_dtype: str
    batch_size: int
    suites: tuple[Path, ...]
    passes: tuple[PassEntry, ...]
    gates: GateSet
    plugins: tuple[str, ...]
    benchmark: BenchmarkPlan | None
    output_dir: Path
    registry: Registry

    def pipeline(self) -> Pipeline:
        return Pipeline([Step(entry.spec, entry.config, entry.on_fail, entry.gates) for entry in self.passes],
                        gates=self.gates)

    def stage_gates(self) -> list[tuple[str, tuple, tuple]]:
        """(stage name, incremental gates, cumulative gates) as resolved for each stage, baseline first.

        Cumulative exactness assumes every earlier pass is accepted (what the plan intends).
        """
        exact_so_far = self.candidate_dtype == self.reference_dtype  # as Pipeline.run decides for stage 0
        rows = [("baseline", (), resolve_gates("cumulative", exact_so_far, self.candidate_dtype, self.gates))]
        for entry in self.passes:
            exact_so_far = exact_so_far and entry.spec.exact
            rows.append((entry.name,
                         resolve_gates("incremental", entry.spec.exact, self.candidate_dtype, self.gates, entry.gates),
                         resolve_gates("cumulative", exact_so_far, self.candidate_dtype, self.gates, entry.gates)))
        return rows

    def resolved(self) -> dict:
        """Every setting after defaults, as plain data (for the manifest)."""
        return {
            "name": self.name, "source": str(self.source) if self.source else None,
            "checkpoint": str(self.checkpoint), "reference_dtype": self.reference_dtype,
            "candidate_dtype": self.candidate_dtype, "batch_size": self.batch_size,
            "suites": [str(path) for path in self.suites], "plugins": list(self.plugins),
            "passes": [{"name": entry.name, "exact": entry.spec.exact, "config": config_to_dict(entry.config),
                        "on_fail": entry.on_fail, "source": self.registry.sources.get(entry.name)}
                       for entry in self.passes],
            "gates": {name: {"incremental": [str(g) for g in incremental], "cumulative": [str(g) for g in cumulative]}
                      for name, incremental, cumulative in self.stage_gates()},
            "benchmark": None if self.benchmark is None else {
                "workloads": list(self.benchmark.workloads), "requests": self.benchmark.config.requests,
                "warmup": self.benchmark.config.warmup, "blocks": self.benchmark.config.blocks,
                "forward_only": self.benchmark.config.forward_only, "seed": self.benchmark.config.seed,
                "bootstrap": self.benchmark.config.bootstrap},
            "output_dir": str(self.output_dir),
        }


# ---------------------------------------------------------------------------------------------------------------------
# Validation helpers


def _type_name(value: Any) -> str:
    return {dict: "mapping", list: "list", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _mapping(value: Any, path: str, known: tuple[str, ...]) -> Mapping:
    if not isinstance(value, Mapping):
        raise ExperimentError(f"{path}: expected a mapping, got {_type_name(value)}")
    unknown = [str(key) for key in value if key not in known]
    if unknown:
        raise ExperimentError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ExperimentError(f"{path}: expected a non-empty string, got {_type_name(value)} {value!r}")
    return value


def _string_list(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ExperimentError(f"{path}: expected a list, got {_type_name(value)}")
    return tuple(_string(item, f"{path}[{index}]") for index, item in enumerate(value))


def _integer(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExperimentError(f"{path}: expected an integer, got {_type_name(value)} {value!r}")
    if value < minimum:
        raise ExperimentError(f"{path}: must be >= {minimum}, got {value}")
    return value


def _dtype(value: Any, path: str) -> str:
    if value not in DTYPES:
        raise ExperimentError(f"{path}: unknown dtype {value!r}; choose one of {', '.join(DTYPES)}")
    return value


def project_path(value: str) -> Path:
    """Relative paths are anchored at the project root, so a run does not depend on the working directory."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def available_suites() -> list[str]:
    return sorted(path.stem for path in SUITES_DIR.glob("*.jsonl")) if SUITES_DIR.is_dir() else []


def resolve_suite(value: str, path: str) -> Path:
    """A bare name means fidelity/suites/<name>.jsonl; anything with a slash or .jsonl is a path."""
    is_path = "/" in value or value.endswith(".jsonl")
    resolved = project_path(value) if is_path else SUITES_DIR / f"{value}.jsonl"
    if not resolved.is_file():
        known = ", ".join(available_suites()) or "none"
        raise ExperimentError(f"{path}: suite file {resolved} does not exist (suites in {SUITES_DIR}: {known})")
    return resolved


def known_workloads() -> tuple[str, ...]:
    from fidelity.workloads import WORKLOADS

    return tuple(WORKLOADS)


# ---------------------------------------------------------------------------------------------------------------------
# Sections


def _gate_set(value: Any, path: str) -> GateSet:
    section = _mapping(value, path, GATE_KEYS)
    try:
        return GateSet(**{key: parse_gates(section[key], f"{path}.{key}") for key in GATE_KEYS if key in section})
    except ValueError as exc:
        if isinstance(exc, ExperimentError):
            raise
        raise ExperimentError(str(exc)) from None


def _pass_entry(value: Any, path: str, registry: Registry) -> PassEntry:
    entry = _mapping(value, path, PASS_KEYS)
    if "name" not in entry:
        raise ExperimentError(f"{path}.name: missing")
    name = _string(entry["name"], f"{path}.name")
    try:
        spec = registry.get(name)
    except UnknownPass as exc:
        raise ExperimentError(f"{path}.name: {exc}") from None
    config_values = entry.get("config") or {}
    try:
        config = spec.make_config(config_values, path=f"{path}.config")
    except (TypeError, ValueError) as exc:
        raise ExperimentError(str(exc)) from None
    on_fail = entry.get("on_fail", "stop")
    if on_fail not in ON_FAIL_CHOICES:
        raise ExperimentError(f"{path}.on_fail: {on_fail!r} is not one of {', '.join(ON_FAIL_CHOICES)}")
    gates = _gate_set(entry["gates"], f"{path}.gates") if "gates" in entry else GateSet()
    return PassEntry(spec=spec, config=config, on_fail=on_fail, gates=gates)


def _benchmark(value: Any, path: str) -> BenchmarkPlan:
    section = _mapping(value, path, BENCHMARK_KEYS)
    if "workloads" not in section:
        raise ExperimentError(f"{path}.workloads: missing")
    workloads = _string_list(section["workloads"], f"{path}.workloads")
    if not workloads:
        raise ExperimentError(f"{path}.workloads: name at least one workload")
    known = known_workloads()
    for index, name in enumerate(workloads):
        if name not in known:
            raise ExperimentError(f"{path}.workloads[{index}]: unknown workload {name!r}; known: {', '.join(known)}")
    defaults = BenchConfig()
    numbers = {key: _integer(section.get(key, getattr(defaults, key)), f"{path}.{key}", minimum)
               for key, minimum in (("requests", 1), ("warmup", 0), ("blocks", 1), ("seed", 0))}
    forward_only = section.get("forward_only", defaults.forward_only)
    if not isinstance(forward_only, bool):
        raise ExperimentError(f"{path}.forward_only: expected true/false, got {_type_name(forward_only)}")
    try:
        config = BenchConfig(forward_only=forward_only, **numbers)
    except ValueError as exc:
        raise ExperimentError(str(exc)) from None
    return BenchmarkPlan(workloads=workloads, config=config)


def parse_experiment(raw: Any, source: Path | None = None, extra_passes: tuple[PassSpec, ...] = ()) -> Experiment:
    """Validate a loaded YAML document; `extra_passes` registers passes without a module (tests, notebooks)."""
    where = f"{source}: " if source else ""
    try:
        return _parse(raw, source, extra_passes)
    except ExperimentError as exc:
        raise ExperimentError(f"{where}{exc}") from None


def _parse(raw: Any, source: Path | None, extra_passes: tuple[PassSpec, ...]) -> Experiment:
    document = _mapping(raw, "(top level)", TOP_KEYS)
    if "name" not in document:
        raise ExperimentError("name: missing")
    name = _string(document["name"], "name")
    if not NAME_PATTERN.match(name):
        raise ExperimentError(f"name: {name!r} must be letters, digits, '.', '_' or '-' (it names a directory)")
    plugins = _string_list(document.get("plugins", []), "plugins")
    try:
        registry = build_registry(plugins=plugins, extra=extra_passes)
    except (ValueError, TypeError) as exc:
        raise ExperimentError(str(exc) if str(exc).startswith("plugins") else f"plugins: {exc}") from None
    passes_raw = document.get("passes", [])
    if not isinstance(passes_raw, list):
        raise ExperimentError(f"passes: expected a list, got {_type_name(passes_raw)}")
    passes = tuple(_pass_entry(item, f"passes[{index}]", registry) for index, item in enumerate(passes_raw))
    try:
        check_order([entry.spec for entry in passes])
    except ValueError as exc:
        raise ExperimentError(f"passes: {exc}") from None
    suites_raw = document.get("suites", ["heldout"])
    suite_names = _string_list(suites_raw, "suites")
    if not suite_names:
        raise ExperimentError("suites: name at least one suite")
    return Experiment(
        name=name, source=source,
        checkpoint=project_path(_string(document.get("checkpoint", DEFAULT_CHECKPOINT), "checkpoint")),
        reference_dtype=_dtype(document.get("reference_dtype", "float32"), "reference_dtype"),
        candidate_dtype=_dtype(document.get("candidate_dtype", "float16"), "candidate_dtype"),
        batch_size=_integer(document.get("batch_size", 16), "batch_size", 1),
        suites=tuple(resolve_suite(value, f"suites[{index}]") for index, value in enumerate(suite_names)),
        passes=passes,
        gates=_gate_set(document["gates"], "gates") if "gates" in document else GateSet(),
        plugins=plugins,
        benchmark=_benchmark(document["benchmark"], "benchmark") if "benchmark" in document else None,
        output_dir=project_path(_string(document.get("output_dir", DEFAULT_OUTPUT_DIR), "output_dir")),
        registry=registry,
    )


def load_experiment(path: str | Path, extra_passes: tuple[PassSpec, ...] = ()) -> Experiment:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: invalid YAML ({exc})") from None
    return parse_experiment(raw, path, extra_passes)


# ---------------------------------------------------------------------------------------------------------------------
# explain


def _parts(names: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(names)) + "}" if names else "{}"


def _gates_line(gates: tuple) -> str:
    return ", ".join(str(gate) + (" (if labelled)" if gate.requires_labels else "") for gate in gates) or "-"


def explain(experiment: Experiment) -> str:
    """The resolved plan as text: stages in order with contracts and gates, then the benchmark plan."""
    checkpoint_state = "" if experiment.checkpoint.is_dir() else "  [missing: run will fail]"
    lines = [
        f"experiment  {experiment.name}" + (f"  ({experiment.source})" if experiment.source else ""),
        f"checkpoint  {experiment.checkpoint}{checkpoint_state}",
        f"dtypes      reference {experiment.reference_dtype}, candidate {experiment.candidate_dtype}; "
        f"batch_size {experiment.batch_size}",
        "suites      " + ", ".join(str(path) for path in experiment.suites),
        "plugins     " + (", ".join(experiment.plugins) or "-"),
        "",
        "stages (incremental = vs previous accepted stage, cumulative = vs the "
        f"{experiment.reference_dtype} reference):",
    ]
    for index, (name, incremental, cumulative) in enumerate(experiment.stage_gates()):
        if index == 0:
            lines.append(f"  0. baseline  {experiment.candidate_dtype}, no pass  on_fail=stop")
        else:
            entry = experiment.passes[index - 1]
            spec = entry.spec
            lines.append(f"  {index}. {name}  {'exact' if spec.exact else 'approximate'}  on_fail={entry.on_fail}  "
                         f"replaces={_parts(spec.replaces)} captures={_parts(spec.captures)}  "
                         f"[{experiment.registry.sources.get(name, '?')}]")
            lines.append(f"       {spec.description}")
            lines.append(f"       config: {config_to_dict(entry.config)}")
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
    return "\n".join(lines)
