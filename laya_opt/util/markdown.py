"""Markdown tables: the one renderer behind report.md, the suite report and TRAINING.md."""
from __future__ import annotations

from typing import Any, Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    def escape(text: Any) -> str:
        return str(text).replace("\\", "\\\\").replace("|", "\\|")

    align = align or "l" * len(header)
    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
