"""Run an experiment: load its inputs, run the pipeline and benchmark, write the results directory.

A results directory `<output_dir>/<name>-<UTC timestamp>[-N]/` holds manifest.json, stages.jsonl,
report.md and timings.json. It is built in a hidden staging dir beside the target (`laya_opt.util.staging`)
and renamed into place at the end, under the first free name, so two runs never collide; any
exception, Ctrl-C or SIGTERM removes the staging dir (and an output root that the run created and
left empty), so a directory with a final name is always complete. A run whose every candidate fails
its gates is written all the same (report.md names the stage closest to passing). `preflight` checks
everything that can be checked without a weight (checkpoint files, suites, workloads, pass prechecks
on a model built from the configs); `explain` runs it too.

Around the pipeline: the reference outputs come from the reference cache when every key component
matches (`refcache`), an accepted stage can be exported as a quantized checkpoint (`export`), and the
finished run is appended to the run history (`history`). `bench` (headtohead) writes the same format through
these functions (docs/results.md), its manifest's `kind` saying which command wrote it.
"""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import mlx.core as mx

from laya_opt.timing.bench import BenchConfig, BenchResult, benchmark, environment, prepared_digest, tail_warning
from laya_opt.core.checkpoint import CheckpointFiles, dtype_name, file_sha256, inspect_checkpoint, load_checkpoint
from laya_opt.util.console import print_table
from laya_opt.util.errors import ExperimentError, InputError
from laya_opt.runs.experiment import Experiment, check_export_free
from laya_opt.runs.export import export_stage
from laya_opt.fidelity.rerun import RERUN_SEED
from laya_opt.suites.suite_file import load_suite
from laya_opt.suites.workloads import build_workload
from laya_opt.runs.history import append_run
from laya_opt.runs.next_steps import next_steps
from laya_opt.runs.pipeline import PipelineResult, StageResult, check_reference, evaluate_reference, suite_requests
from laya_opt.runs.plots import available as plots_available, write_run_plots
from laya_opt.util.progress import bar_tracker, checked, silent
from laya_opt.runs.refcache import CacheResult, cached_reference, reference_key
from laya_opt.runs.stagecache import StageCache
from laya_opt.runs.decision_table import console_decision_table
from laya_opt.runs.report import (ID_COLUMNS, REFERENCE_LABEL, ReportRow, best_rejected, best_rejected_line,
                                  console_table, latency_records, plain, render_report, row_from_record, row_styles,
                                  stage_label, stage_record)
from laya_opt.core.runtime import Runtime, runtime_from_checkpoint
from laya_opt.util.staging import check_creatable, publish, staging_dir
from laya_opt.util.system import mlx_backend
from laya_opt.util.jsonio import write_json

SOURCE_DIR = Path(__file__).resolve().parent


def git_state() -> dict:
    """The revision of the laya-opt source that ran (not of the working directory)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(SOURCE_DIR), *args], capture_output=True, text=True, timeout=10)
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
    reference_cache: CacheResult | None = None
    export: dict | None = None       # what export_stage reported; None: no export asked for
    history: str = ""                # where the run was recorded, or why it was not
    bench_skipped: str | None = None  # why a benchmark the experiment asked for was not run
    manifest: dict = dataclasses.field(default_factory=dict)  # manifest.json as written

    @property
    def gates_failed(self) -> bool:
        return self.pipeline.gates_failed

    @property
    def export_failed(self) -> bool:
        return self.export is not None and self.export["status"] == "failed"

    @property
    def exit_code(self) -> int:
        if self.gates_failed and not self.allow_failed_gates:
            return 3
        return 1 if self.export_failed else 0


@dataclass(frozen=True)
class RunInputs:
    """Everything a run reads, validated before any weight is loaded."""

    checkpoint: CheckpointFiles      # configs, tokenizer, tensor header; its model holds no weights yet
    suites: tuple
    requests: tuple                  # checker EvalRequests over every suite
    bench_config: BenchConfig | None  # None: no benchmark
    workloads: tuple


def _named(experiment: Experiment, message: str) -> ExperimentError:
    return ExperimentError(f"{experiment.source}: {message}" if experiment.source else message)


def load_inputs(experiment: Experiment, bench: bool = True, requests: int | None = None) -> RunInputs:
    """Checkpoint files, suites and workloads; problems are ExperimentErrors naming the key path."""
    try:
        checkpoint = inspect_checkpoint(experiment.checkpoint)
    except InputError as exc:  # named by the YAML key, or by the command-line option that overrode it
        message = f"{experiment.checkpoint_key}: {exc}"
        raise (_named(experiment, message) if experiment.checkpoint_key == "checkpoint" else
               ExperimentError(message)) from None
    suites = []
    for index, path in enumerate(experiment.suites):
        try:
            suites.append(load_suite(path))
        except InputError as exc:  # a malformed suite is bad input, named by its key path
            raise _named(experiment, f"suites[{index}]: {exc}") from None
    plan = experiment.benchmark
    if requests is not None and plan is None:
        raise _named(experiment, f"--requests {requests}: the experiment has no benchmark section, so nothing is "
                                 "timed")
    bench_config, workloads = None, ()
    if bench and plan is not None:
        bench_config = plan.config if requests is None else dataclasses.replace(
            plan.config, requests=requests, blocks=min(plan.config.blocks, requests))
        workloads = tuple(build_workload(name) for name in plan.workloads)
    return RunInputs(checkpoint=checkpoint, suites=tuple(suites), requests=suite_requests(suites),
                     bench_config=bench_config, workloads=workloads)


def precheck_steps(experiment: Experiment, model) -> None:
    """Refuse pass settings the checkpoint cannot take (selectors matching nothing, a quantized model) up front."""
    for index, step in enumerate(experiment.steps):
        step.spec.check(model, step.config, f"{experiment.source or 'experiment'}: passes[{index}] ({step.name})",
                        ExperimentError)


def load_reference(experiment: Experiment, inputs: RunInputs) -> Runtime:
    """The experiment's reference runtime from the inspected checkpoint, refused if not in the declared dtype."""
    reference = runtime_from_checkpoint(load_checkpoint(inputs.checkpoint, experiment.reference_dtype),
                                        experiment.batch_size)
    check_reference(reference, experiment.reference_dtype)
    return reference


def preflight(experiment: Experiment, bench: bool = True, requests: int | None = None,
              output_dir: str | Path | None = None) -> RunInputs:
    """Every check a run makes before it reads a weight: what `explain` runs, and `run` first."""
    inputs = load_inputs(experiment, bench, requests)
    precheck_steps(experiment, inputs.checkpoint.model)
    check_creatable(Path(output_dir) if output_dir is not None else experiment.output_dir, "output directory")
    return inputs


@dataclass(frozen=True)
class RunFacts:
    """What a run measures once and records: hashes, the platform, the reference cache and the export."""

    weights_sha256: str
    token_sha256: str
    platform: dict                   # bench.environment() before the benchmark
    reference_cache: CacheResult
    export: dict | None


def build_manifest(experiment: Experiment, inputs: RunInputs, reference: Runtime, result: PipelineResult,
                   bench_result: BenchResult | None, started: datetime, allow_failed_gates: bool,
                   facts: RunFacts, kind: str = "run") -> dict:
    seed = inputs.bench_config.seed if inputs.bench_config else 0
    return {
        "kind": kind,  # "run" or "bench": which command wrote the directory (same format either way)
        "experiment": experiment.name, "started_utc": started.isoformat(), "resolved": experiment.resolved(),
        "checkpoint": {"path": str(inputs.checkpoint.path), "sha256": facts.weights_sha256},
        # The dtype the reference's weights are in (Pipeline.run refused it if that is not the declared one).
        "reference": {"identity": reference.identity, "dtype": dtype_name(reference.dtype),
                      "declared_dtype": experiment.reference_dtype, "cache": facts.reference_cache.to_json()},
        "suites": [{"name": s.name, "version": s.version, "path": str(s.path), "sha256": s.sha256,
                    "records": len(s.records)} for s in inputs.suites],
        "token_sha256": facts.token_sha256,
        "workloads": [] if bench_result is None else plain(bench_result.workloads),
        "git": git_state(), "environment": bench_result.environment if bench_result else facts.platform,
        "seeds": {"mlx": seed, "bootstrap": seed if inputs.bench_config else None},
        "allow_failed_gates": allow_failed_gates, "gates_failed": result.gates_failed,
        "planned_passes": list(result.planned), "export": facts.export,
        # How each stage's outputs were obtained (laya_opt.runs.reuse) and the re-run sample (fidelity.rerun).
        "evaluation": {"rerun": result.rerun, "rerun_seed": RERUN_SEED,
                       "stages": [{"index": stage.index, "stage": stage.name,
                                   "eval_path": None if stage.eval_path is None else stage.eval_path.describe()}
                                  for stage in result.stages]},
    }


def results_timings(bench_result: BenchResult | None, baseline: str = REFERENCE_LABEL,
                    baseline_stage: int | None = None) -> dict:
    """timings.json: every timed cell's summary and raw samples, against `baseline` (stage `baseline_stage`'s
    runtime, or None: the reference's)."""
    return {"baseline": baseline, "baseline_stage": baseline_stage,
            "config": None if bench_result is None else plain(bench_result.config),
            "summary": [] if bench_result is None else latency_records(bench_result),
            "samples": {} if bench_result is None else bench_result.samples()}


def write_results(directory: Path, manifest: dict, records: Sequence[dict], timings: dict,
                  render: Callable[[dict, Sequence[dict], dict], str] = render_report,
                  draw: Callable[[Sequence[dict], dict, Path], list] = write_run_plots) -> None:
    """The four files of a results directory; `render` writes report.md and `draw` the plots (their names)."""
    manifest["plots"] = draw(records, plain(timings), directory) if plots_available() else None
    write_json(directory / "manifest.json", plain(manifest))
    (directory / "stages.jsonl").write_text("".join(json.dumps(record, ensure_ascii=False) + "\n"
                                                    for record in records), encoding="utf-8")
    write_json(directory / "timings.json", plain(timings))
    (directory / "report.md").write_text(render(plain(manifest), records, plain(timings)), encoding="utf-8")


def publish_unique(staging: Path, out_root: Path, base_name: str) -> Path:
    """Rename the finished staging dir to the first free `<base>`, `<base>-2`, ...: a rename never overwrites."""
    for number in range(1, 1000):
        target = out_root / (base_name if number == 1 else f"{base_name}-{number}")
        if target.exists():
            continue
        try:
            publish(staging, target)  # fails if another run created the name meanwhile
            return target
        except OSError:
            if not target.exists():
                raise
    raise FileExistsError(f"no free results directory name for {out_root / base_name}")


def reference_outputs(reference: Runtime, inputs: RunInputs, measured: dict, cache: bool, track,
                      say: Callable[[str], None]) -> CacheResult:
    """The reference's outputs on the run's requests: from the cache when every key component matches."""
    def compute():
        say("evaluating the reference" + ("" if cache else " (cache off)"))
        return evaluate_reference(reference, inputs.requests, track)

    key = reference_cache_key(reference, inputs.requests, inputs.checkpoint.path, measured) if cache else None
    return cached_reference(key, compute)


def reference_cache_key(reference: Runtime, requests: Sequence, checkpoint_dir: Path, measured: dict | None = None):
    """The reference cache key of `reference` on `requests`, as a run files it (calibrate-gates files its
    reference and cast outputs under the same key, so that the runs after it find them); `measured`: what
    `measure_inputs` returned, measured here when not given."""
    measured = measured or measure_inputs(reference, requests, checkpoint_dir)
    return reference_key(reference, requests, checkpoint_dir, measured["token_sha256"], measured["platform"],
                         measured["weights_sha256"])


def measure_inputs(reference: Runtime, requests: Sequence, checkpoint_dir: Path) -> dict:
    """What the reference cache key and the manifest need measured once: weights and token hashes, the platform."""
    return {"weights_sha256": file_sha256(Path(checkpoint_dir) / "model.safetensors"),
            "token_sha256": prepared_digest([reference.prepare(r.state, r.questions) for r in requests]),
            "platform": environment()}


def timed_stages(result: PipelineResult) -> tuple[tuple[StageResult, ...], str | None]:
    """(the stages to time against the reference, why none are): every accepted stage, unless the experiment
    has passes and none of them was accepted. Then the only accepted stage is stage 0, the reference itself
    or its cast, and timing it would print "speed-ups" of a run that found nothing (noise, when the dtype
    stays). An experiment without passes is timed as before: stage 0 is what it asks to measure.
    """
    accepted = result.accepted_stages
    if len(result.planned) > 1 and not any(stage.index > 0 for stage in accepted):
        return (), "no candidate stage was accepted, so nothing was timed against the reference"
    return accepted, None


def record_history(manifest: dict, records: Sequence[dict], results_dir: Path, exit_code: int) -> str:
    """Append the run to the history; a history that cannot be written costs a warning, not the results."""
    try:
        run_id = append_run(manifest, records, results_dir, exit_code)
    except (sqlite3.Error, OSError, ValueError) as exc:
        return f"not recorded in the run history: {type(exc).__name__}: {exc}"
    return f"run {run_id} in the history"


def _checked_say(say: Callable[[str], None], check: Callable[[], None]) -> Callable[[str], None]:
    def checked_say(message: str) -> None:
        check()
        say(message)

    return checked_say


def run_experiment(experiment: Experiment, *, output_dir: str | Path | None = None, requests: int | None = None,
                   bench: bool = True, allow_failed_gates: bool = False, show_progress: bool = False,
                   say: Callable[[str], None] = lambda message: None, now: datetime | None = None,
                   cache: bool = True, history: bool = True, check: Callable[[], None] | None = None,
                   share_stages: bool = False) -> RunOutcome:
    """Check, load, gate every stage, benchmark the accepted ones and write the results directory atomically.

    `cache=False` evaluates the reference even when the reference cache holds its outputs; `share_stages`
    (a sweep's trials) takes a stage's outputs from an earlier run's evaluation of the same runtime once a
    re-run sample matches them (laya_opt.runs.stagecache; needs `cache`);
    `history=False` leaves the run out of the run history; `show_progress` draws progress bars. `check()`
    is called before every progress message (between stages), every evaluated batch and every timed block;
    what it raises abandons the run and nothing is published (a sweep's budget: `sweep.BudgetExhausted`).
    """
    started = now or datetime.now(timezone.utc)
    out_root = Path(output_dir) if output_dir is not None else experiment.output_dir
    inputs = preflight(experiment, bench, requests, out_root)
    if experiment.export is not None:
        check_export_free(experiment.export)
    track = bar_tracker() if show_progress else silent
    if check is not None:
        track, say = checked(track, check), _checked_say(say, check)
    say(f"backend {mlx_backend()} ({mx.default_device()}); loading {inputs.checkpoint.path} as "
        f"{experiment.reference_dtype} (reference)")
    reference = load_reference(experiment, inputs)
    measured = measure_inputs(reference, inputs.requests, inputs.checkpoint.path)
    base_name = f"{experiment.name}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    with staging_dir(out_root, base_name) as staging:
        mx.random.seed(inputs.bench_config.seed if inputs.bench_config else 0)
        cached = reference_outputs(reference, inputs, measured, cache, track, say)
        say(f"reference: {cached.describe()}")
        result = experiment.pipeline().run(reference, inputs.requests, progress=say,
                                           reference_dtype=experiment.reference_dtype, track=track,
                                           reference_outputs=cached.outputs,
                                           stage_cache=StageCache(cached.key) if share_stages and cached.key else None)
        bench_result, bench_skipped = None, None
        if inputs.bench_config is not None:
            timed, bench_skipped = timed_stages(result)
            if bench_skipped:
                say(f"benchmark skipped: {bench_skipped}")
            else:
                runtimes = {REFERENCE_LABEL: reference}
                runtimes.update({stage_label(stage): stage.runtime for stage in timed})
                say(f"benchmarking {len(runtimes)} runtimes on {', '.join(w.name for w in inputs.workloads)}")
                bench_result = benchmark(REFERENCE_LABEL, runtimes, inputs.workloads, inputs.bench_config,
                                         show_progress, check=check)
        exported = None
        if experiment.export is not None:
            exported = export_stage(experiment.export, result, experiment.registry)
            say(f"export: {exported['summary']}")
        facts = RunFacts(reference_cache=cached, export=exported, **measured)
        workload_names = tuple(w.name for w in inputs.workloads) if bench_result is not None else ()
        records = tuple(stage_record(stage, bench_result, allow_failed_gates) for stage in result.stages)
        rows = tuple(row_from_record(record, workload_names) for record in records)
        manifest = build_manifest(experiment, inputs, reference, result, bench_result, started, allow_failed_gates,
                                  facts)
        manifest["benchmark_skipped"] = bench_skipped
        write_results(staging, manifest, records, results_timings(bench_result))
        target = publish_unique(staging, out_root, base_name)
    outcome = RunOutcome(results_dir=target, pipeline=result, bench=bench_result, rows=rows, records=records,
                         workloads=workload_names, allow_failed_gates=allow_failed_gates, reference_cache=cached,
                         export=exported, bench_skipped=bench_skipped, manifest=plain(manifest))
    if history:
        outcome = dataclasses.replace(outcome, history=record_history(plain(manifest), records, target,
                                                                      outcome.exit_code))
    return outcome


def print_outcome(outcome: RunOutcome, console) -> None:
    """The stage table, pass summaries, any failed or waived gates, and where the results are."""
    def line(text: str) -> None:
        console.print(text, highlight=False, soft_wrap=True)

    if outcome.reference_cache is not None:
        line(f"reference: {outcome.reference_cache.describe()}")
    print_table(console, console_table(outcome.rows, outcome.workloads, title=outcome.results_dir.name), ID_COLUMNS,
                row_styles(outcome.rows))
    decisions = console_decision_table(outcome.records)
    if decisions is not None:
        print_table(console, decisions, ID_COLUMNS)
    if outcome.bench is not None and outcome.bench.measurements:
        warning = tail_warning(min(m.summary.n for m in outcome.bench.measurements))
        if warning:
            line(f"[yellow]warning:[/] latency {warning} (report.md marks them)")
    for record in outcome.records:
        summary = (record.get("report") or {}).get("summary")
        if summary:
            line(f"stage {record['index']} {record['stage']}: {summary} (details: report.md)")
    tag, colour = ("WAIVED", "yellow") if outcome.allow_failed_gates else ("FAILED", "red")
    for stage in outcome.pipeline.stages:
        for comparison, result in stage.failed_gates:
            line(f"[bold {colour}]{tag}[/] stage {stage.index} {stage.name} {comparison}: "
                 f"{result.message or result.gate}")
    best = best_rejected(outcome.records)
    if best is not None:
        line(f"[bold red]{best_rejected_line(best)}[/]; every stage's numbers are in the results")
    if outcome.bench_skipped:
        line(f"[yellow]benchmark skipped:[/] {outcome.bench_skipped} (no speed-up is claimed)")
    steps = next_steps(outcome.manifest, outcome.records)
    if steps:
        line("[bold]next steps:[/]")
        for step in steps:
            console.print(f"  - {step}", highlight=False, soft_wrap=True, markup=False)
    if outcome.export is not None:
        style = {"written": "green", "skipped": "yellow"}.get(outcome.export["status"], "bold red")
        line(f"[{style}]export {outcome.export['status']}:[/] {outcome.export['summary']}")
    line(f"results: {outcome.results_dir}")
    if outcome.history:
        line(f"[dim]history: {outcome.history}[/]")


def outcome_json(outcome: RunOutcome) -> dict:
    """`run --json`: what the console shows, as data."""
    cache = outcome.reference_cache
    return plain({"results_dir": str(outcome.results_dir), "exit_code": outcome.exit_code,
                  "gates_failed": outcome.gates_failed,
                  "reference": None if cache is None else {"status": cache.status, "summary": cache.describe(),
                                                           "key": cache.key.digest if cache.key else None},
                  "stages": [dataclasses.asdict(row) for row in outcome.rows], "export": outcome.export,
                  "history": outcome.history, "benchmark_skipped": outcome.bench_skipped})
