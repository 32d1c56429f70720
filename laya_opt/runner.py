"""Run an experiment: load its inputs, run the pipeline and benchmark, write the results directory.

A results directory `<output_dir>/<name>-<UTC timestamp>[-N]/` holds manifest.json, stages.jsonl,
report.md and timings.json. It is built in a hidden staging dir beside the target and renamed into
place at the end, under the first free name, so two runs never collide; any exception (a pass raising
included) removes the staging dir, so a directory with a final name is always complete.
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
from .checkpoint import dtype_name, file_sha256, resolve_checkpoint_dir
from .errors import ExperimentError
from .experiment import Experiment
from .fidelity.suites import load_suite
from .fidelity.workloads import build_workload
from .pipeline import PipelineResult, suite_requests
from .report import (REFERENCE_LABEL, ReportRow, console_table, latency_records, plain, render_report,
                     row_from_record, stage_label, stage_record)
from .runtime import Runtime, load_runtime

SOURCE_DIR = Path(__file__).resolve().parent


def git_state(root: Path = SOURCE_DIR) -> dict:
    """The revision of the laya-opt source that ran (not of the working directory)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if revision else None
    return {"revision": revision, "dirty": bool(status)}


@dataclass(frozen=True)
class RunOutcome:
    results_dir: Path
    pipeline: PipelineResult
    bench: BenchResult | None
    rows: tuple[ReportRow, ...]
    records: tuple[dict, ...]
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
    try:
        checkpoint_dir = resolve_checkpoint_dir(experiment.checkpoint)
    except (FileNotFoundError, ValueError) as exc:
        raise ExperimentError(f"checkpoint: {exc}") from None
    suites = []
    for index, path in enumerate(experiment.suites):
        try:
            suites.append(load_suite(path))
        except ValueError as exc:  # a malformed suite is bad input, named by its key path
            raise ExperimentError(f"suites[{index}]: {exc}") from None
    plan = experiment.benchmark
    if requests is not None and plan is None:
        raise ExperimentError(f"--requests {requests}: the experiment has no benchmark section, so nothing is timed")
    bench_config, workloads = None, ()
    if bench and plan is not None:
        bench_config = plan.config if requests is None else dataclasses.replace(
            plan.config, requests=requests, blocks=min(plan.config.blocks, requests))
        workloads = tuple(build_workload(name) for name in plan.workloads)
    return RunInputs(checkpoint_dir=checkpoint_dir, suites=tuple(suites), requests=suite_requests(suites),
                     bench_config=bench_config, workloads=workloads)


def precheck_steps(experiment: Experiment, reference: Runtime) -> None:
    """Refuse pass settings the checkpoint cannot take before minutes of reference evaluation are spent."""
    for index, step in enumerate(experiment.steps):
        if step.spec.precheck is not None:
            try:
                step.spec.precheck(reference.model, step.config)
            except ValueError as exc:
                raise ExperimentError(f"passes[{index}] ({step.name}): {exc}") from None


def build_manifest(experiment: Experiment, inputs: RunInputs, reference: Runtime, result: PipelineResult,
                   bench_result: BenchResult | None, started: datetime, allow_failed_gates: bool) -> dict:
    seed = inputs.bench_config.seed if inputs.bench_config else 0
    return {
        "experiment": experiment.name, "started_utc": started.isoformat(), "resolved": experiment.resolved(),
        "checkpoint": {"path": str(inputs.checkpoint_dir),
                       "sha256": file_sha256(inputs.checkpoint_dir / "model.safetensors")},
        # The dtype the reference's weights are in (Pipeline.run refused it if that is not the declared one).
        "reference": {"identity": reference.identity, "dtype": dtype_name(reference.dtype),
                      "declared_dtype": experiment.reference_dtype},
        "suites": [{"name": s.name, "version": s.version, "path": str(s.path), "sha256": s.sha256,
                    "records": len(s.records)} for s in inputs.suites],
        "token_sha256": prepared_digest([reference.prepare(r.state, r.questions) for r in inputs.requests]),
        "workloads": [] if bench_result is None else plain(bench_result.workloads),
        "git": git_state(), "environment": bench_result.environment if bench_result else environment(),
        "seeds": {"mlx": seed, "bootstrap": seed if inputs.bench_config else None},
        "allow_failed_gates": allow_failed_gates, "gates_failed": result.gates_failed,
        "planned_passes": list(result.planned),
    }


def write_results(directory: Path, manifest: dict, records: Sequence[dict], bench_result: BenchResult | None) -> None:
    timings = {"baseline": REFERENCE_LABEL, "config": None if bench_result is None else plain(bench_result.config),
               "summary": [] if bench_result is None else latency_records(bench_result),
               "samples": {} if bench_result is None else bench_result.samples()}
    _write_json(directory / "manifest.json", manifest)
    (directory / "stages.jsonl").write_text("".join(json.dumps(record, ensure_ascii=False) + "\n"
                                                    for record in records), encoding="utf-8")
    _write_json(directory / "timings.json", timings)
    (directory / "report.md").write_text(render_report(plain(manifest), records, plain(timings)), encoding="utf-8")


def publish(staging: Path, out_root: Path, base_name: str) -> Path:
    """Rename the finished staging dir to the first free `<base>`, `<base>-2`, ...: a rename never overwrites."""
    os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it private; results are ordinary files
    for number in range(1, 1000):
        target = out_root / (base_name if number == 1 else f"{base_name}-{number}")
        if target.exists():
            continue
        try:
            os.rename(staging, target)  # fails if another run created the name meanwhile
            return target
        except OSError:
            if not target.exists():
                raise
    raise FileExistsError(f"no free results directory name for {out_root / base_name}")


def run_experiment(experiment: Experiment, *, output_dir: str | Path | None = None, requests: int | None = None,
                   bench: bool = True, allow_failed_gates: bool = False, show_progress: bool = False,
                   say: Callable[[str], None] = lambda message: None, now: datetime | None = None) -> RunOutcome:
    """Load, gate every stage, benchmark the accepted ones and write the results directory atomically."""
    started = now or datetime.now(timezone.utc)
    out_root = Path(output_dir) if output_dir is not None else experiment.output_dir
    inputs = load_inputs(experiment, bench, requests)
    say(f"loading {inputs.checkpoint_dir} as {experiment.reference_dtype} (reference)")
    reference = load_runtime(inputs.checkpoint_dir, experiment.reference_dtype, experiment.batch_size)
    precheck_steps(experiment, reference)
    out_root.mkdir(parents=True, exist_ok=True)
    base_name = f"{experiment.name}-{utc_stamp(started)}"
    staging = Path(tempfile.mkdtemp(prefix=f".{base_name}.", dir=out_root))
    try:
        mx.random.seed(inputs.bench_config.seed if inputs.bench_config else 0)
        result = experiment.pipeline().run(reference, inputs.requests, progress=say,
                                           reference_dtype=experiment.reference_dtype)
        bench_result = None
        if inputs.bench_config is not None:
            runtimes = {REFERENCE_LABEL: reference}
            runtimes.update({stage_label(stage): stage.runtime for stage in result.accepted_stages})
            say(f"benchmarking {len(runtimes)} runtimes on {', '.join(w.name for w in inputs.workloads)}")
            bench_result = benchmark(REFERENCE_LABEL, runtimes, inputs.workloads, inputs.bench_config, show_progress)
        workload_names = tuple(w.name for w in inputs.workloads)
        records = tuple(stage_record(stage, bench_result, allow_failed_gates) for stage in result.stages)
        rows = tuple(row_from_record(record, workload_names) for record in records)
        manifest = build_manifest(experiment, inputs, reference, result, bench_result, started, allow_failed_gates)
        write_results(staging, manifest, records, bench_result)
        target = publish(staging, out_root, base_name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunOutcome(results_dir=target, pipeline=result, bench=bench_result, rows=rows, records=records,
                      workloads=workload_names, allow_failed_gates=allow_failed_gates)


def print_outcome(outcome: RunOutcome, console) -> None:
    """The stage table, pass summaries, any failed or waived gates, and where the results are."""
    console.print(console_table(outcome.rows, outcome.workloads, title=outcome.results_dir.name))
    for record in outcome.records:
        summary = (record.get("report") or {}).get("summary")
        if summary:
            console.print(f"stage {record['index']} {record['stage']}: {summary} (details: report.md)",
                          highlight=False, soft_wrap=True)
    for stage in outcome.pipeline.stages:
        for comparison, result in stage.failed_gates:
            tag = "WAIVED" if outcome.allow_failed_gates else "FAILED"
            console.print(f"[bold {'yellow' if outcome.allow_failed_gates else 'red'}]{tag}[/] stage {stage.index} "
                          f"{stage.name} {comparison}: {result.message or result.gate}", highlight=False,
                          soft_wrap=True)
    console.print(f"results: {outcome.results_dir}", highlight=False, soft_wrap=True)
