"""`laya-opt doctor`: what this machine runs laya-opt on, and what to fix (nothing is timed)."""
from __future__ import annotations

import json
import sys

import click

from laya_opt.util.console import output_console

GIB = 2 ** 30


def _bytes(value: int | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def _packages(groups: dict) -> list[str]:
    lines = []
    for group, members in groups.items():
        listed = ", ".join(f"{name} {version or 'NOT INSTALLED'}" for name, version in members.items())
        lines.append(f"{'required' if group == 'required' else f'extra [{group}]'}: {listed}")
    return lines


def report_lines(report: dict) -> list[str]:
    blas = report["blas"]
    memory = report["memory"]
    device_memory = report["device_info"].get("memory_size")
    peers = ", ".join(f"{name} {version or 'not installed'}" for name, version in report["peers"].items())
    backends = ", ".join(f"{name} {version}" for name, version in report["mlx_backends"].items())
    preload = report["blas_preload"]
    lines = [f"laya-opt   {report['laya-opt']} (python {report['python']}, {report['platform']})",
             f"mlx        {report['mlx']}, backend {report['backend']}, default device {report['device']}"
             + "".join(f", {key} {value}" for key, value in report["device_info"].items() if key != "memory_size")
             + (f"; backend wheel {backends}" if backends else ""),
             f"blas       {blas['name']}{' (SLOW)' if blas['slow'] else ''}: {blas['library'] or 'no library'}"
             + (f", from {blas['source']}" if blas.get("source") else ""),
             f"           {blas['evidence']}",
             *[f"           not loaded: {f['path']} ({f['source']}): {f['error']}" for f in preload["failures"]],
             *([f"           preload skipped: {preload['skipped']}"] if preload["skipped"] else []),
             f"memory     RAM {_bytes(memory['total_bytes'])} total, {_bytes(memory['available_bytes'])} available"
             + (f"; device {_bytes(int(device_memory))}" if device_memory else ""),
             *[f"packages   {line}" for line in _packages(report["packages"])],
             f"peers      {peers} (the upstream PyTorch package; looked up, never imported)",
             "switches   " + (", ".join(f"{name}={value}" for name, value in report["switches"].items())
                              or "none (MLX's and laya-opt's defaults)")]
    if report["problems"]:
        lines += [""] + [f"PROBLEM    {problem}" for problem in report["problems"]]
    else:
        lines += ["", "no problems found"]
    return lines


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor(as_json: bool) -> None:
    """Report the MLX version and backend, the BLAS behind MLX's CPU matmuls, memory, installed packages, and the
    MLX_* and LAYA_* variables in effect (they change kernels, cache sizes and the stage cache's key).

    The BLAS is read from the loaded libraries and symbols, without timing anything, with where it came
    from (the mkl wheel of the `cpu` extra, the system, LAYA_OPT_BLAS) and any library that failed to load;
    when MLX uses the slow reference BLAS bundled with the Linux wheel, the fix is printed (`pip install
    "laya-opt[cpu]"`). Exits 1 when a problem was found, 0 otherwise.
    """
    import mlx.core  # noqa: F401  (after laya_opt: the BLAS preload must come first; its libraries must be mapped)

    from laya_opt.util.system import doctor_report

    report = doctor_report()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        console = output_console()
        for line in report_lines(report):
            style = "bold red" if line.startswith("PROBLEM") else None
            console.print(line, style=style, highlight=False, soft_wrap=True, markup=False)
    sys.exit(1 if report["problems"] else 0)
