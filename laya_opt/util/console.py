"""Terminal output of the CLI: a console that keeps ids and layer names whole, and generic tables."""
from __future__ import annotations

from typing import Callable, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

PIPED_WIDTH = 240  # piped or captured output: wide enough that ids and layer names stay whole
BORDER = 3         # a column's padding and rule in rich's default box


def output_console() -> Console:
    """A console on stdout; when stdout is no terminal, a wide one instead of rich's 80 columns."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def progress_printer(console: Console, quiet: bool = False) -> Callable[[str], None]:
    """`say(message)` for a command's progress lines (`· message`, dim); the message is printed as text, so
    a path or pass name holding [brackets] is not taken for markup."""
    if quiet:
        return lambda message: None
    return lambda message: console.print(f"[dim]· {escape(message)}[/]", highlight=False)


def whole_width(header: str, cells) -> int:
    """The width that keeps every cell of a column on one line, unbroken."""
    return max([len(header)] + [len(str(cell)) for cell in cells])


def _longest_word(texts) -> int:
    return max([len(word) for text in texts for word in str(text).split()] or [1])


def min_table_width(table: dict, id_columns: int = 1) -> int:
    """The narrowest a table draws without breaking a word: id cells whole, other columns at their longest word."""
    width = 1
    for index, column in enumerate(table["columns"]):
        cells = [row[index] for row in table["rows"]]
        width += BORDER + (whole_width(column, cells) if index < id_columns else _longest_word([column, *cells]))
    return width


def rich_table(table: dict, id_columns: int = 1, row_styles: Sequence[str | None] = ()) -> Table:
    """A generic {title, columns, rows} table (what fidelity tools return) for the console.

    The first `id_columns` columns (ids, layer and stage names) never wrap or shrink; the others fold.
    """
    rendered = Table(title=table.get("title"))
    rows = [[str(cell) for cell in row] for row in table["rows"]]
    for index, column in enumerate(table["columns"]):
        justify = (table.get("justify") or {}).get(index, "left")
        if index < id_columns:
            rendered.add_column(column, justify=justify, no_wrap=True,
                                min_width=whole_width(column, [row[index] for row in rows]))
        else:
            rendered.add_column(column, justify=justify, overflow="fold")
    for index, row in enumerate(rows):
        rendered.add_row(*row, style=row_styles[index] if index < len(row_styles) else None)
    return rendered


def print_table(console: Console, table: dict, id_columns: int = 1, row_styles: Sequence[str | None] = ()) -> None:
    """The table when it fits the console; on a narrower one, one line per row (`ids: column value; ...`),
    so that no id is cut and no number is squeezed out of sight."""
    if min_table_width(table, id_columns) <= console.width:
        console.print(rich_table(table, id_columns, row_styles))
        return
    if table.get("title"):
        console.print(table["title"], style="italic", highlight=False, markup=False)
    for index, row in enumerate(table["rows"]):
        head = " ".join(str(cell) for cell in row[:id_columns])
        rest = "; ".join(f"{column} {cell}" for column, cell in zip(table["columns"][id_columns:], row[id_columns:]))
        console.print(f"{head}: {rest}", style=row_styles[index] if index < len(row_styles) else None,
                      highlight=False, markup=False)
