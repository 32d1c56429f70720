"""Run an experiment: load its inputs, run the pipeline and benchmark, write the results directory.

A results directory `<output_dir>/<name>-<UTC timestamp>/` holds manifest.json, stages.jsonl,
report.md and timings.json. It is built in a hidden temp dir beside the target and renamed into place
at the end; any exception (a pass raising included) removes the temp dir, so a directory with the
final name is always complete.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import mlx.core as mx

from .bench import BenchConfig, BenchResult, benchmark, environment, prepared_digest
from .checkpoint import file_sha256, resolve_checkpoint_dir
from .experiment import PROJECT_ROOT, SUITES_DIR, Experiment, ExperimentError
from .pipeline import PipelineResult, suite_requests
from .quantization import coverage_summary, stage_coverage
from .report import (REFERENCE_LABEL, ReportRow, console_table, plain, render_report, stage_label, stage_record,
                     stage_row)

# ---------------------------------------------------------------------------------------------------------------------
# Manifest facts


def git_state(root: Path = PROJECT_ROOT) -> dict:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if revision else None
    return {"revision": revision, "dirty": bool(status)}


# ---------------------------------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class RunOutcome:
    results_dir: Path
    pipeline: PipelineResult
    bench: BenchResult | None
    rows: tuple[ReportRow, ...]
    workloads: tuple[str, ...]
    allow_failed_gates: bool

    @property
    def gates_failed(self) -> bool:
        return self.pipeline.gates_failed

    @property
    def exit_code(self) -> int:
        return 3 if self.gates_failed and not self.allow_failed_gates else 0


def utc_stamp(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(plain(data), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class RunInputs:
    """Everything a run reads besides the weights, validated before any weight is loaded."""

    checkpoint_dir: Path
    suites: tuple
    requests: tuple                  # checker EvalRequests over every suite
    bench_config: BenchConfig | None  # None: no benchmark
    workloads: tuple


def load_inputs(experiment: Experiment, bench: bool = True, requests: int | None = None) -> RunInputs:
    """Checkpoint files, suites and workloads; problems are ExperimentErrors naming the key path."""
    from fidelity.suites import load_suite
    from fidelity.workloads import build_workload

    try:
        checkpoint_dir = resolve_checkpoint_dir(experiment.checkpoint)
    except FileNotFoundError as exc:
        raise ExperimentError(f"checkpoint: {exc}") from None
    suites = []
    for index, path in enumerate(experiment.suites):
        try:
            suites.append(load_suite(path))
        except ValueError as exc:  # a malformed suite is bad input, named by its key path
            raise ExperimentError(f"suites[{index}]: {exc}") from None
    plan = experiment.benchmark if bench else None
    bench_config, workloads = None, []
    if plan is not None:
        bench_config = plan.config if requests is None else dataclasses.replace(
            plan.config, requests=requests, blocks=min(plan.config.blocks, requests))
        for index, name in enumerate(plan.workloads):
            try:
                workloads.append(build_workload(name, SUITES_DIR))
            except (ValueError, FileNotFoundError) as exc:
                raise ExperimentError(f"benchmark.workloads[{index}]: {exc}") from None
    return RunInputs(checkpoint_dir=checkpoint_dir, suites=tuple(suites), requests=suite_requests(suites),
                     bench_config=bench_config, workloads=tuple(workloads))


def build_manifest(experiment: Experiment, inputs: RunInputs, reference, result: PipelineResult,
                   bench_result: BenchResult | None, started: datetime, allow_failed_gates: bool) -> dict:
    seed = inputs.bench_config.seed if inputs.bench_config else 0
    return {
        "experiment": experiment.name, "started_utc": started.isoformat(), "resolved": experiment.resolved(),
        "checkpoint": {"path": str(inputs.checkpoint_dir),
                       "sha256": file_sha256(inputs.checkpoint_dir / "model.safetensors")},
        "suites": [{"name": s.name, "version": s.version, "path": str(s.path), "sha256": s.sha256,
                    "records": len(s.records)} for s in inputs.suites],
        "token_sha256": prepared_digest([reference.prepare(r.state, r.questions) for r in inputs.requests]),
        "workloads": [] if bench_result is None else plain(bench_result.workloads),
        "git": git_state(), "environment": bench_result.environment if bench_result else environment(),
        "seeds": {"mlx": seed, "bootstrap": seed if inputs.bench_config else None},
        "allow_failed_gates": allow_failed_gates, "gates_failed": result.gates_failed,
        "planned_passes": list(result.planned),
    }


def write_results(directory: Path, experiment: Experiment, result: PipelineResult, bench_result: BenchResult | None,
                  rows: Sequence[ReportRow], manifest: dict, allow_failed_gates: bool) -> None:
    _write_json(directory / "manifest.json", manifest)
    (directory / "stages.jsonl").write_text(
        "".join(json.dumps(stage_record(stage, bench_result, allow_failed_gates), ensure_ascii=False) + "\n"
                for stage in result.stages), encoding="utf-8")
    (directory / "report.md").write_text(render_report(experiment, result, bench_result, rows, manifest,
                                                       allow_failed_gates), encoding="utf-8")
    _write_json(directory / "timings.json", {
        "baseline": REFERENCE_LABEL, "config": None if bench_result is None else bench_result.config,
        "samples": {} if bench_result is None else bench_result.samples()})


def run_experiment(experiment: Experiment, *, output_dir: str | Path | None = None, requests: int | None = None,
                   bench: bool = True, allow_failed_gates: bool = False, show_progress: bool = False,
                   say: Callable[[str], None] = lambda message: None, now: datetime | None = None) -> RunOutcome:
    """Load, gate every stage, benchmark the accepted ones and write the results directory atomically."""
    from .runtime import load_runtime

    started = now or datetime.now(timezone.utc)
    out_root = Path(output_dir) if output_dir is not None else experiment.output_dir
    target = out_root / f"{experiment.name}-{utc_stamp(started)}"
    if target.exists():
        raise FileExistsError(f"results directory {target} already exists; refusing to overwrite it")
    inputs = load_inputs(experiment, bench, requests)
    out_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=out_root))
    try:
        mx.random.seed(inputs.bench_config.seed if inputs.bench_config else 0)
        say(f"loading {inputs.checkpoint_dir} as {experiment.reference_dtype} (reference) and "
            f"{experiment.candidate_dtype} (candidate)")
        reference = load_runtime(inputs.checkpoint_dir, experiment.reference_dtype, experiment.batch_size)
        candidate = load_runtime(inputs.checkpoint_dir, experiment.candidate_dtype, experiment.batch_size)
        result = experiment.pipeline().run(reference, candidate, inputs.requests, progress=say)
        bench_result = None
        if inputs.bench_config is not None:
            runtimes = {REFERENCE_LABEL: reference}
            runtimes.update({stage_label(stage): stage.runtime for stage in result.accepted_stages})
            say(f"benchmarking {len(runtimes)} runtimes on {', '.join(w.name for w in inputs.workloads)}")
            bench_result = benchmark(REFERENCE_LABEL, runtimes, inputs.workloads, inputs.bench_config, show_progress)
        workload_names = tuple(w.name for w in inputs.workloads)
        rows = tuple(stage_row(stage, bench_result, workload_names, allow_failed_gates) for stage in result.stages)
        manifest = build_manifest(experiment, inputs, reference, result, bench_result, started, allow_failed_gates)
        write_results(staging, experiment, result, bench_result, rows, manifest, allow_failed_gates)
        if target.exists():
            raise FileExistsError(f"results directory {target} appeared during the run; refusing to overwrite it")
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; results are ordinary files
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunOutcome(results_dir=target, pipeline=result, bench=bench_result, rows=rows, workloads=workload_names,
                      allow_failed_gates=allow_failed_gates)


def print_outcome(outcome: RunOutcome, console) -> None:
    """The stage table, any failed or waived gates, and where the results are."""
    console.print(console_table(outcome.rows, outcome.workloads, title=outcome.results_dir.name))
    for stage in outcome.pipeline.stages:
        manifest = stage_coverage(stage.pass_info)
        if manifest is not None:
            console.print(f"coverage, stage {stage.index} {stage.name}: {coverage_summary(manifest)} "
                          "(per module: report.md)", highlight=False, soft_wrap=True)
    for stage in outcome.pipeline.stages:
        for comparison, result in stage.failed_gates:
            tag = "WAIVED" if outcome.allow_failed_gates else "FAILED"
            console.print(f"[bold {'yellow' if outcome.allow_failed_gates else 'red'}]{tag}[/] stage {stage.index} "
                          f"{stage.name} {comparison}: {result.message or result.gate}", highlight=False,
                          soft_wrap=True)
    console.print(f"results: {outcome.results_dir}", highlight=False, soft_wrap=True)
