"""`laya-opt history`: past runs and their stages from the run history, filtered, newest first."""
from __future__ import annotations

import json
from pathlib import Path

import click

from laya_opt.util.console import output_console, print_table
from laya_opt.runs.report import NO_VALUE, format_cell, speedup_text


def _speedups(latency: dict) -> str:
    cells = []
    for workload, modes in latency.items():
        speedup = (modes.get("end_to_end") or {}).get("speedup")
        if speedup:
            cells.append(f"{workload} {speedup_text(speedup, '.2f')}")
    return ", ".join(cells) or NO_VALUE


def history_table(rows: list[dict]) -> dict:
    columns = ["run", "kind", "started (UTC)", "experiment", "stage", "verdict", "argmax agree", "max Δp cum",
               "accuracy", "wall s", "p50 speed-up", "checkpoint", "git", "mlx", "device", "reference"]
    cells = [[row["run_id"], row["kind"], row["started_utc"], row["experiment"],
              f"{row['stage_index']} {row['stage']}", row["verdict"], format_cell(row["argmax_agreement"], ".4f"),
              format_cell(row["max_abs_dp"], ".2e"),
              format_cell(row["accuracy_candidate"], ".4f"), format_cell(row["wall_s"], ".1f"),
              _speedups(row["latency"]), (row["checkpoint_sha256"] or NO_VALUE)[:12],
              (row["git_revision"] or "unknown")[:10] + ("+dirty" if row["git_dirty"] else ""),
              row["mlx_version"] or NO_VALUE, f"{row['device']} {row['backend'] or ''} {row['blas'] or ''}".strip(),
              row["reference_cache"] or NO_VALUE] for row in rows]
    return {"title": f"{len({row['run_id'] for row in rows})} run(s)", "columns": columns, "rows": cells}


@click.command("history")
@click.option("--experiment", default=None, help="Only runs of this experiment (its `name:`).")
@click.option("--stage", default=None, help="Only this stage (a pass name, or baseline).")
@click.option("--checkpoint", default=None, help="Only runs of the checkpoint whose weights SHA-256 starts so.")
@click.option("--kind", type=click.Choice(["run", "bench"]), default=None,
              help="Only results of this command (`run` or `bench`).")
@click.option("--since", default=None, help="Only runs started since: an ISO date/time (UTC) or an age (7d, 12h).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest runs shown.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The history database (default: <user data dir>/laya-opt/history.sqlite3, "
                   "or $LAYA_OPT_DATA_DIR/history.sqlite3).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def history(experiment, stage, checkpoint, kind, since, limit, db_path, as_json) -> None:
    """List past runs, one row per stage: verdict, fidelity, wall time, speed-ups and what they ran on.

    Every `laya-opt run` and `laya-opt bench` appends to this history (the kind column says which), so a
    stage's speed and fidelity can be followed across versions, checkpoints and machines.
    """
    from laya_opt.runs.history import HistoryFilter, history_path, parse_since, query

    path = db_path or history_path()
    where = HistoryFilter(experiment=experiment, stage=stage, checkpoint=checkpoint, kind=kind,
                          since=None if since is None else parse_since(since), limit=limit)
    rows = query(path, where)  # bad filters and a damaged database are InputErrors: exit 2, one line
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    console = output_console()
    if not rows:
        console.print(f"no runs recorded{' that match' if any([experiment, stage, checkpoint, kind, since]) else ''} "
                      f"in {path}", highlight=False, soft_wrap=True)
        return
    print_table(console, history_table(rows), id_columns=5)
