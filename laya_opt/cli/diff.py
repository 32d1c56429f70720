"""`laya-opt diff`: two results directories side by side, and whether they are comparable at all."""
from __future__ import annotations

import json

import click

from laya_opt.util.console import output_console, print_table


@click.command("diff")
@click.argument("results_a", type=click.Path(file_okay=False, exists=True))
@click.argument("results_b", type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff(results_a: str, results_b: str, as_json: bool) -> None:
    """Compare RESULTS_A with RESULTS_B: resolved-config delta, verdicts, metric and latency deltas.

    Latency rows carry each run's bootstrap interval of the speed-up. The first line says plainly when
    the runs are not comparable (different checkpoint, suite or token hashes, devices, backend, BLAS or
    library versions).
    """
    from laya_opt.runs.diff import diff_results, diff_tables, verdict_lines
    from laya_opt.util.errors import InputError
    from laya_opt.runs.report import load_results

    try:
        comparison = diff_results(load_results(results_a), load_results(results_b))
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from None
    except KeyError as exc:  # results written by another tool, or by hand
        raise InputError(f"{results_a} / {results_b}: the results lack {exc}") from None
    if as_json:
        click.echo(json.dumps(comparison.to_json(), indent=2, ensure_ascii=False))
        return
    console = output_console()
    console.print(f"a: {comparison.a}\nb: {comparison.b}", highlight=False, soft_wrap=True)
    for line in verdict_lines(comparison):
        style = "bold red" if line.startswith("NOT COMPARABLE") else None
        console.print(line, style=style, highlight=False, soft_wrap=True, markup=False)
    for table in diff_tables(comparison):
        print_table(console, table, id_columns=1 if table["columns"][0] != "runtime" else 3)
