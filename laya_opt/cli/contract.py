"""The command line's error contract, in one place: every `laya-opt` command runs inside `ContractGroup.invoke`.

    0    success (run: every gate passed, or failed gates waived)
    1    a pass raised or broke its contract (the message names the pass), or an unexpected error
    2    bad input: a file, path, setting, tensor or question, named in one line (usage errors too)
    3    run: a gate failed
    130  interrupted (Ctrl-C); 143 terminated (SIGTERM). Work in progress is removed on the way out.

Tracebacks are printed only with `laya-opt --debug`. Input accepted with a change the user must see
(`InputWarning`, e.g. clamped temperatures) prints as one `warning:` line.
"""
from __future__ import annotations

import signal
import sys
import threading
import traceback
import warnings

import click
from rich.console import Console
from rich.markup import escape

from laya_opt.util.errors import InputError, InputWarning, PassError

PASS_FAILED = 1
BAD_INPUT = 2
INTERRUPTED = 130

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every `finally` and staging cleanup runs."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _os_message(exc: OSError) -> str:
    # `[Errno 13] Permission denied: 'x'` -> `x: permission denied`; the file first, like every other error.
    if exc.filename is None:
        return str(exc.strerror or exc)
    names = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    return f"{names}: {(exc.strerror or str(exc)).lower()}"


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for an exception that reached the command line."""
    if isinstance(exc, InputError):
        return BAD_INPUT, str(exc)
    if isinstance(exc, PassError):
        return PASS_FAILED, str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED, "interrupted; nothing half-written was left behind"
    if isinstance(exc, Terminated):
        return 128 + signal.SIGTERM, "terminated; nothing half-written was left behind"
    if isinstance(exc, OSError):  # paths that cannot be created, written or read
        return BAD_INPUT, _os_message(exc)
    if isinstance(exc, RecursionError):
        return BAD_INPUT, "input nested too deeply"
    text = str(exc).strip().splitlines()
    return PASS_FAILED, f"{type(exc).__name__}: {text[0] if text else 'no message'} (rerun with --debug for details)"


def _show_warning(message, category, filename, lineno, file=None, line=None, _default=warnings.showwarning):
    if issubclass(category, InputWarning):
        stderr.print(f"[bold yellow]warning:[/] {escape(str(message))}", markup=True)
    else:
        _default(message, category, filename, lineno, file, line)


class ContractGroup(click.Group):
    """A click group whose subcommands all get the same exit codes and one-line messages."""

    def invoke(self, ctx: click.Context):
        debug = bool(ctx.params.get("debug"))
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _show_warning
                warnings.simplefilter("always", InputWarning)
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit, BrokenPipeError):
            raise  # usage errors (2), explicit exit codes (run's 3) and a closed pipe are click's to report
        except BaseException as exc:  # noqa: B036 (every outcome gets its code, interrupts included)
            code, message = classify(exc)
            if debug:
                traceback.print_exc()
            stderr.print(f"[bold red]error:[/] {escape(message)}", markup=True)
            sys.exit(code)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
