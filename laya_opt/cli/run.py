"""`laya-opt run` and `laya-opt explain`: experiment files from the command line.

Exit codes of `run` (the contract of `laya_opt.cli.contract`): 0 all gates passed (or failed gates waived
with --allow-failed-gates), 1 a pass raised or mutated its input (no results directory is written) or
an asked-for export could not be written (the results directory is), 2 bad input (usage, invalid
experiment file, checkpoint, suite or pass setting, an export path that exists), 3 a gate failed,
130 interrupted (nothing half-written is left).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from laya_opt.util.console import output_console, progress_printer


def load_for_run(experiment_file: str, candidate_dtype: str | None, suites: tuple[str, ...],
                 checkpoint: str | None = None, rerun: int | None = None):
    """The experiment with the --checkpoint, --candidate-dtype, --suite and --rerun overrides of `run` (`bisect`,
    `explain`) applied; the options are kept (`command_options`) so that the next steps a run prints repeat them.

    The checkpoint is checked later, where the YAML key's is (`runner.load_inputs`), and named `--checkpoint`."""
    from laya_opt.runs.experiment import load_experiment
    from laya_opt.util.resources import checkpoint_path, suite_path

    experiment = load_experiment(Path(experiment_file))
    options: list[str] = []
    if checkpoint is not None:
        experiment = dataclasses.replace(experiment, checkpoint=checkpoint_path(checkpoint),
                                         checkpoint_key="--checkpoint")
        options += ["--checkpoint", checkpoint]
    if candidate_dtype:
        experiment = dataclasses.replace(experiment, candidate_dtype=candidate_dtype)
        options += ["--candidate-dtype", candidate_dtype]
    if suites:
        experiment = dataclasses.replace(experiment, suites=tuple(suite_path(name, f"--suite {name}")
                                                                  for name in suites))
        options += [item for name in suites for item in ("--suite", name)]
    if rerun is not None:
        experiment = dataclasses.replace(experiment, rerun=rerun)
        options += ["--rerun", str(rerun)]
    return dataclasses.replace(experiment, command_options=tuple(options))


candidate_dtype_option = click.option(
    "--candidate-dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default=None,
    help="Override the experiment's candidate dtype (e.g. float32 for quantized runs on a CPU, where "
         "MLX's float16 quantized matmul is very slow); recorded in the manifest.")
checkpoint_option = click.option(
    "--checkpoint", default=None,
    help="Use this checkpoint instead of the experiment's `checkpoint:` (a directory, or `standin` for the bundled "
         "one); checked like the YAML key, before any weight is read.")
rerun_option = click.option(
    "--rerun", type=click.IntRange(min=0), default=None,
    help="Requests evaluated a second time per stage and compared bit for bit for the `deterministic` gate "
         "(overrides the experiment's `rerun:`, 128 by default). 0 re-runs none and evaluates every stage; the "
         "default `deterministic` gate then fails as unmeasured, so use 0 only with gates that drop it.")
suite_option = click.option(
    "--suite", "suites", multiple=True,
    help="Gate on this suite instead of the experiment's suites (repeatable; a bundled suite name "
         "or a .jsonl path), e.g. --suite smoke for a quick look; `laya-opt suites` lists them.")


@click.command("explain")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@checkpoint_option
@candidate_dtype_option
@suite_option
@rerun_option
def explain(experiment_file: str, checkpoint: str | None, candidate_dtype: str | None,
            suites: tuple[str, ...], rerun: int | None) -> None:
    """Check EXPERIMENT_FILE like `run`, without loading weights, and print its plan.

    The checks are those `run` makes before it reads a weight: the checkpoint's files, the suites, the
    output directory, and every pass's settings against the checkpoint (selectors, group widths, a
    quantized checkpoint). The plan lists stages, contracts, gates and workloads, then which pass owns
    each kernel field after each stage. --checkpoint, --candidate-dtype, --suite and --rerun override the
    file as they do for `run`."""
    from laya_opt.passes.contract import kernel_ownership_lines
    from laya_opt.runs.experiment import explain as render_plan
    from laya_opt.runs.runner import preflight

    experiment = load_for_run(experiment_file, candidate_dtype, suites, checkpoint, rerun)
    preflight(experiment)
    click.echo(render_plan(experiment))
    click.echo("\n".join(["", *kernel_ownership_lines([step.spec for step in experiment.pipeline().steps])]))


@click.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--allow-failed-gates", is_flag=True,
              help="Exit 0 even if a gate failed; the report marks those gates WAIVED (reject/stop still apply).")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Write the results directory here instead of the experiment's output_dir.")
@click.option("--requests", type=click.IntRange(min=1), default=None,
              help="Timed requests per workload, runtime and mode (overrides benchmark.requests).")
@click.option("--no-bench", is_flag=True, help="Gate the stages but skip the benchmark.")
@checkpoint_option
@candidate_dtype_option
@suite_option
@rerun_option
@click.option("--quiet", is_flag=True, help="No progress lines or bars; the stage table is still printed.")
@click.option("--no-cache", is_flag=True,
              help="Evaluate the reference even if the reference cache holds its outputs (the cache is keyed by "
                   "checkpoint, suite and token hashes, dtype, MLX version and backend, and the model source).")
@click.option("--reuse-stages", is_flag=True,
              help="Take a stage's outputs from the stage cache when an earlier run, sweep trial or calibrate-gates "
                   "evaluated the same runtime (checkpoint, dtype, passes and settings, code, MLX and device) on "
                   "the same requests; each such stage is re-run on its sample and used only if that answers bit "
                   "for bit alike (report.md says `cached`). Needs the reference cache.")
@click.option("--export-stage", default=None,
              help="Export the quantized checkpoint of this stage (a pass name) if it is accepted; with --export-dir.")
@click.option("--export-dir", type=click.Path(file_okay=False), default=None,
              help="Where --export-stage writes the checkpoint; it must not exist (exports never overwrite).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the outcome (results dir, exit code, reference cache, stage rows, export) as JSON.")
@click.option("--bisect", "then_bisect", is_flag=True,
              help="When a gate fails, bisect the stack (see `laya-opt bisect`) and print what it found.")
def run(experiment_file: str, allow_failed_gates: bool, output_dir: str | None, requests: int | None,
        no_bench: bool, checkpoint: str | None, candidate_dtype: str | None, suites: tuple[str, ...],
        rerun: int | None, quiet: bool, no_cache: bool, reuse_stages: bool, export_stage: str | None,
        export_dir: str | None, as_json: bool, then_bisect: bool) -> None:
    """Run EXPERIMENT_FILE: gate every pass against the reference, benchmark accepted stages, write results.

    The reference outputs come from the reference cache when nothing they depend on changed (the console
    and report.md say "cache hit" or "computed"); every run is appended to the run history
    (`laya-opt history`). A run whose every candidate fails is still written, naming the stage closest
    to passing, and is not benchmarked (there is nothing to time against the reference). A rejected stage
    prints next steps: bisect, explain and the suite to change. With --bisect, a failed gate is followed by
    a bisection of the stack. --checkpoint, --candidate-dtype, --suite and --rerun override the file's
    settings.
    """
    from laya_opt.util.errors import ExperimentError, InputError
    from laya_opt.runs.experiment import export_plan
    from laya_opt.runs.pipeline import PipelineError
    from laya_opt.runs.runner import outcome_json, print_outcome, run_experiment

    experiment = load_for_run(experiment_file, candidate_dtype, suites, checkpoint, rerun)
    if reuse_stages and no_cache:
        raise InputError("--reuse-stages takes stages filed under the reference cache's key: drop --no-cache")
    if (export_stage is None) != (export_dir is None):
        raise ExperimentError("--export-stage and --export-dir go together")
    if export_stage is not None:
        experiment = dataclasses.replace(experiment, export=export_plan(
            export_stage, export_dir, experiment.steps, "--export-stage", "--export-dir"))
    quiet = quiet or as_json
    console = output_console()
    say = progress_printer(console, quiet)
    try:
        outcome = run_experiment(experiment, output_dir=output_dir, requests=requests, bench=not no_bench,
                                 allow_failed_gates=allow_failed_gates,
                                 show_progress=not quiet and console.is_terminal, say=say, cache=not no_cache,
                                 share_stages=reuse_stages)
    except PipelineError as exc:
        raise PipelineError(f"{exc}; no results directory was written", exc.partial) from exc
    if as_json:
        click.echo(json.dumps(outcome_json(outcome), indent=2, ensure_ascii=False))
        sys.exit(outcome.exit_code)
    print_outcome(outcome, console)
    if then_bisect and outcome.gates_failed:
        from laya_opt.runs.bisect import bisect_experiment, print_bisect

        print_bisect(bisect_experiment(experiment, outcome.pipeline, say=say), console)
    if outcome.gates_failed and not allow_failed_gates:
        console.print("[bold red]gates failed[/] (exit 3); --allow-failed-gates waives them", highlight=False)
    elif outcome.export_failed:
        console.print("[bold red]export failed[/] (exit 1); the results directory is complete", highlight=False)
    sys.exit(outcome.exit_code)
