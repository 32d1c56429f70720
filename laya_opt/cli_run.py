"""`laya-opt run` and `laya-opt explain`: experiment files from the command line.

Exit codes of `run`: 0 all gates passed (or failed gates waived with --allow-failed-gates), 1 a pass
raised or mutated its input (no results directory is written), 2 bad input (usage, invalid experiment
file, missing checkpoint or suite), 3 a gate failed.
"""
from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path

import click
from rich.console import Console

from .console import output_console

BAD_INPUT = 2
PASS_FAILED = 1


def _fail(message: str, code: int) -> None:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)


def _load(path: str):
    from .experiment import load_experiment

    try:
        return load_experiment(Path(path))
    except (ValueError, FileNotFoundError, TypeError) as exc:
        _fail(str(exc), BAD_INPUT)


@click.command("explain")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
def explain(experiment_file: str) -> None:
    """Print the resolved plan of EXPERIMENT_FILE (stages, contracts, gates, workloads) without loading weights."""
    from .experiment import explain as render_plan

    click.echo(render_plan(_load(experiment_file)))


def load_for_run(experiment_file: str, candidate_dtype: str | None, suites: tuple[str, ...]):
    """The experiment with the --candidate-dtype and --suite overrides of `run` (and `bisect`) applied."""
    experiment = _load(experiment_file)
    if candidate_dtype:
        experiment = dataclasses.replace(experiment, candidate_dtype=candidate_dtype)
    if suites:
        from .errors import InputError
        from .resources import suite_path

        try:
            resolved = tuple(suite_path(name, f"--suite {name}") for name in suites)
        except InputError as exc:
            _fail(str(exc), BAD_INPUT)
        experiment = dataclasses.replace(experiment, suites=resolved)
    return experiment


candidate_dtype_option = click.option(
    "--candidate-dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default=None,
    help="Override the experiment's candidate dtype (e.g. float32 for quantized runs on a CPU, where "
         "MLX's float16 quantized matmul is very slow); recorded in the manifest.")
suite_option = click.option(
    "--suite", "suites", multiple=True,
    help="Gate on this suite instead of the experiment's suites (repeatable; a bundled suite name "
         "or a .jsonl path), e.g. --suite heldout for a full fidelity run of a CPU-sized experiment.")


@click.command("run")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--allow-failed-gates", is_flag=True,
              help="Exit 0 even if a gate failed; the report marks those gates WAIVED (reject/stop still apply).")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Write the results directory here instead of the experiment's output_dir.")
@click.option("--requests", type=click.IntRange(min=1), default=None,
              help="Timed requests per workload, runtime and mode (overrides benchmark.requests).")
@click.option("--no-bench", is_flag=True, help="Gate the stages but skip the benchmark.")
@candidate_dtype_option
@suite_option
@click.option("--quiet", is_flag=True, help="No progress output; the stage table is still printed.")
@click.option("--bisect", "then_bisect", is_flag=True,
              help="When a gate fails, bisect the stack (see `laya-opt bisect`) and print what it found.")
def run(experiment_file: str, allow_failed_gates: bool, output_dir: str | None, requests: int | None,
        no_bench: bool, candidate_dtype: str | None, suites: tuple[str, ...], quiet: bool,
        then_bisect: bool) -> None:
    """Run EXPERIMENT_FILE: gate every pass against the reference, benchmark accepted stages, write results."""
    from .errors import InputError
    from .pipeline import PipelineError
    from .runner import print_outcome, run_experiment

    experiment = load_for_run(experiment_file, candidate_dtype, suites)
    console = output_console()
    say = (lambda message: None) if quiet else (lambda message: console.print(f"[dim]· {message}[/]",
                                                                              highlight=False))
    # SIGTERM becomes SystemExit so that run_experiment removes its temp dir on the way out.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        outcome = run_experiment(experiment, output_dir=output_dir, requests=requests, bench=not no_bench,
                                 allow_failed_gates=allow_failed_gates,
                                 show_progress=not quiet and console.is_terminal, say=say)
    except PipelineError as exc:
        _fail(f"{exc}; no results directory was written", PASS_FAILED)
    except (InputError, FileNotFoundError, FileExistsError) as exc:  # ExperimentError is an InputError
        _fail(str(exc), BAD_INPUT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_outcome(outcome, console)
    if then_bisect and outcome.gates_failed:
        from .bisect import bisect_experiment, print_bisect

        print_bisect(bisect_experiment(experiment, outcome.pipeline, say=say), console)
    if outcome.gates_failed and not allow_failed_gates:
        console.print("[bold red]gates failed[/] (exit 3); --allow-failed-gates waives them", highlight=False)
    sys.exit(outcome.exit_code)
