"""`laya-opt run` and `laya-opt explain`: experiment files from the command line.

Exit codes of `run` (the contract of `laya_opt.cli_errors`): 0 all gates passed (or failed gates waived
with --allow-failed-gates), 1 a pass raised or mutated its input (no results directory is written),
2 bad input (usage, invalid experiment file, checkpoint, suite or pass setting), 3 a gate failed,
130 interrupted (nothing half-written is left).
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from .console import output_console


@click.command("explain")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
def explain(experiment_file: str) -> None:
    """Check EXPERIMENT_FILE like `run`, without loading weights, and print its plan.

    The checks are those `run` makes before it reads a weight: the checkpoint's files, the suites, the
    output directory, and every pass's settings against the checkpoint (selectors, group widths, a
    quantized checkpoint). The plan lists stages, contracts, gates and workloads."""
    from .experiment import explain as render_plan, load_experiment
    from .runner import preflight

    experiment = load_experiment(Path(experiment_file))
    preflight(experiment)
    click.echo(render_plan(experiment))


@click.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--allow-failed-gates", is_flag=True,
              help="Exit 0 even if a gate failed; the report marks those gates WAIVED (reject/stop still apply).")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Write the results directory here instead of the experiment's output_dir.")
@click.option("--requests", type=click.IntRange(min=1), default=None,
              help="Timed requests per workload, runtime and mode (overrides benchmark.requests).")
@click.option("--no-bench", is_flag=True, help="Gate the stages but skip the benchmark.")
@click.option("--candidate-dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default=None,
              help="Override the experiment's candidate dtype (e.g. float32 for quantized runs on a CPU, where "
                   "MLX's float16 quantized matmul is very slow); recorded in the manifest.")
@click.option("--suite", "suites", multiple=True,
              help="Gate on this suite instead of the experiment's suites (repeatable; a bundled suite name "
                   "or a .jsonl path), e.g. --suite heldout for a full fidelity run of a CPU-sized experiment.")
@click.option("--quiet", is_flag=True, help="No progress output; the stage table is still printed.")
def run(experiment_file: str, allow_failed_gates: bool, output_dir: str | None, requests: int | None,
        no_bench: bool, candidate_dtype: str | None, suites: tuple[str, ...], quiet: bool) -> None:
    """Run EXPERIMENT_FILE: gate every pass against the reference, benchmark accepted stages, write results."""
    from rich.markup import escape

    from .experiment import load_experiment
    from .pipeline import PipelineError
    from .resources import suite_path
    from .runner import print_outcome, run_experiment

    experiment = load_experiment(Path(experiment_file))
    if candidate_dtype:
        experiment = dataclasses.replace(experiment, candidate_dtype=candidate_dtype)
    if suites:
        experiment = dataclasses.replace(experiment, suites=tuple(suite_path(name, f"--suite {name}")
                                                                  for name in suites))
    console = output_console()
    say = (lambda message: None) if quiet else (lambda message: console.print(f"[dim]· {escape(message)}[/]",
                                                                              highlight=False))
    try:
        outcome = run_experiment(experiment, output_dir=output_dir, requests=requests, bench=not no_bench,
                                 allow_failed_gates=allow_failed_gates,
                                 show_progress=not quiet and console.is_terminal, say=say)
    except PipelineError as exc:
        raise PipelineError(f"{exc}; no results directory was written", exc.partial) from exc
    print_outcome(outcome, console)
    if outcome.gates_failed and not allow_failed_gates:
        console.print("[bold red]gates failed[/] (exit 3); --allow-failed-gates waives them", highlight=False)
    sys.exit(outcome.exit_code)
