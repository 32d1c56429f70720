"""Progress bars with an ETA for the long evaluations (reference, stages, benchmark); silent unless asked.

A `Track` is what the pipeline and the runner are handed: `with track(description, total) as advance:`
then `advance(steps)` after each unit of work. `silent` draws nothing; `bar_tracker(console)` draws a
rich bar that disappears when its work is done, so the console keeps only the summary lines.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Callable, ContextManager, Iterator

Advance = Callable[[int], None]
Track = Callable[[str, int], ContextManager[Advance]]


def silent(description: str, total: int) -> ContextManager[Advance]:
    return nullcontext(lambda steps=1: None)


def progress_bar(enabled: bool = True, console=None):
    """A transient rich Progress: description, bar, done/total, elapsed and the estimated time left."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, disable=not enabled, transient=True)


def bar_tracker(console=None) -> Track:
    """A Track drawing one bar per piece of work on `console` (a terminal; callers decide when to draw)."""
    @contextmanager
    def track(description: str, total: int) -> Iterator[Advance]:
        with progress_bar(True, console) as progress:
            task = progress.add_task(description, total=total)
            yield lambda steps=1: progress.advance(task, steps)

    return track


def checked(track: Track, check: Callable[[], None]) -> Track:
    """`track`, calling `check()` before every advance: what it raises stops the work between two batches
    (a sweep's budget running out mid-trial)."""
    @contextmanager
    def wrapped(description: str, total: int) -> Iterator[Advance]:
        with track(description, total) as advance:
            def advance_checked(steps=1):
                check()
                advance(steps)

            yield advance_checked

    return wrapped
