"""`laya-opt bisect`: the first pass whose addition fails, the layers responsible, a verified `exclude:` list."""
from __future__ import annotations

import json
import sys

import click

from laya_opt.cli.run import candidate_dtype_option, checkpoint_option, load_for_run, rerun_option, suite_option
from laya_opt.util.console import output_console, progress_printer

FOUND_NOTHING = 3   # a gate fails and no verified exclusion list makes the stack pass (as `run` exits 3)


@click.command("bisect")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@checkpoint_option
@candidate_dtype_option
@suite_option
@rerun_option
@click.option("--unit", type=click.Choice(["layer", "linear"]), default="layer", show_default=True,
              help="Rank (and exclude) whole encoder layers, or single Linears.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bisect(experiment_file: str, checkpoint: str | None, candidate_dtype: str | None, suites: tuple[str, ...],
           rerun: int | None, unit: str, as_json: bool) -> None:
    """Find why EXPERIMENT_FILE fails its gates: the first pass whose addition fails, then, for a pass that
    changes parameters (quantize_encoder), the encoder layers ranked by the decisive answers, then all the
    answers, each one changes alone, and the fewest top-ranked layers whose exclusion makes the stack pass, verified by
    re-running the gates. Exit 0 when nothing fails or the suggestion is verified, 3 otherwise.
    """
    from laya_opt.runs.bisect import as_json as bisect_json, bisect_experiment, print_bisect

    experiment = load_for_run(experiment_file, candidate_dtype, suites, checkpoint, rerun)
    console = output_console()
    say = progress_printer(console, as_json)
    outcome = bisect_experiment(experiment, unit=unit, say=say)
    if as_json:
        click.echo(json.dumps(bisect_json(outcome), indent=2))
    else:
        print_bisect(outcome, console)
    sys.exit(0 if outcome.failing is None or outcome.fixed else FOUND_NOTHING)
