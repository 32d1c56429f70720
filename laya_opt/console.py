"""Terminal output of the CLI: a console that keeps ids and layer names whole, and generic tables."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

PIPED_WIDTH = 240  # piped or captured output: wide enough that ids and layer names stay whole


def output_console() -> Console:
    """A console on stdout; when stdout is no terminal, a wide one instead of rich's 80 columns."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def rich_table(table: dict) -> Table:
    """A generic {title, columns, rows} table (what fidelity tools return) for the console."""
    rendered = Table(title=table.get("title"))
    for column in table["columns"]:
        rendered.add_column(column, overflow="fold")
    for row in table["rows"]:
        rendered.add_row(*map(str, row))
    return rendered
