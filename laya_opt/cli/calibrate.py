"""`laya-opt calibrate-gates`: measure a checkpoint's noise floors on suites and write a gates file."""
from __future__ import annotations

import shlex
from datetime import datetime, timezone
from pathlib import Path

import click

from laya_opt.core.checkpoint import DTYPES
from laya_opt.util.console import output_console, progress_printer, rich_table
from laya_opt.util.errors import InputError, SchemaError
from laya_opt.util.resources import STANDIN
from laya_opt.util.jsonio import read_yaml

DTYPE_CHOICES = tuple(DTYPES)


def command_line(checkpoint: str, suites: tuple[str, ...], dtypes: tuple[str, ...], out_file: Path,
                 name: str | None, measured_file: Path | None, noise_sample: int = 0) -> str:
    """The command that reproduces this run, recorded in the gates file."""
    if measured_file is not None:
        words = ["--from-measurements", str(measured_file)]
    else:
        words = ["--checkpoint", checkpoint] + [word for suite in suites for word in ("--suite", suite)] + \
                [word for dtype in dtypes for word in ("--dtype", dtype)] + \
                (["--noise-sample", str(noise_sample)] if noise_sample else [])
    words += (["--name", name] if name else []) + ["--out", str(out_file)]
    return shlex.join(["laya-opt", "calibrate-gates", *words])


@click.command("calibrate-gates")
@click.option("--checkpoint", default=STANDIN, show_default=True,
              help="Checkpoint directory, or `standin` for the bundled stand-in.")
@click.option("--suite", "suites", multiple=True,
              help="Suite to measure on (repeatable; a bundled suite name or a .jsonl path).")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPE_CHOICES), default=DTYPE_CHOICES,
              show_default=True, help="Candidate dtypes to calibrate (repeatable; float32 is always measured).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=Path("gates.yaml"),
              show_default=True, help="The gates file to write (experiments name it with `gates_file:`).")
@click.option("--noise-sample", type=click.IntRange(min=0), default=0, show_default=True,
              help="Run the six same-dtype noise variants on a seeded sample of this many requests (0: all); the "
                   "cast drift, which the decision gates rest on, always uses every request. On a CPU the variants "
                   "are most of a half-precision calibration's time.")
@click.option("--no-cache", is_flag=True,
              help="Evaluate the float32 reference even if the reference cache holds it, and file no outputs. By "
                   "default the reference comes from (or goes into) the reference cache, and each half-precision "
                   "cast's outputs go into the stage cache, where a run's stage 0 in that dtype on the same suite "
                   "takes them once its re-run sample matches (`laya-opt run --reuse-stages`).")
@click.option("--name", default=None, help="Name recorded in the file (default: the file's stem).")
@click.option("--from-measurements", "measured_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="Measure nothing: derive the thresholds again from the measurements recorded in "
                                 "this gates file (e.g. after the derivation rules changed).")
def calibrate_gates(checkpoint: str, suites: tuple[str, ...], dtypes: tuple[str, ...], noise_sample: int,
                    no_cache: bool, out_file: Path, name: str | None, measured_file: Path | None) -> None:
    """Measure FP32 run-to-run and batch-composition noise, half-precision noise and the FP16/BF16-vs-FP32
    drift on the suites, and write a gates file whose every threshold states its derivation.

    Exact passes get 2 x the largest same-dtype noise (a floor of one rounding where outputs are
    bit-identical); cross-dtype comparisons 2 x the cast drift. Approximate passes are judged by the
    decisions they change: none decisive, near-tie changes no more than an exact test (5%) can tell from
    the number the FP16 cast flips on the suite (9 where it flips 3), no significant loss (McNemar, 5%);
    their drift is a diagnostic bounded by 2 x the p99 of the FP16 cast's per-question drift. Calibrate on
    the suite that gates. Every threshold is printed with its derivation. See docs/gates.md and
    fidelity/gate_derivation.py. On a 2-core CPU, float16 and bfloat16 are slow: the
    stand-in takes about 20 minutes on `smoke` and hours on `calib`.
    """
    from laya_opt.timing.bench import environment
    from laya_opt.core.checkpoint import file_sha256, resolve_checkpoint_dir
    from laya_opt.fidelity.calibration import measure, noise_table
    from laya_opt.fidelity.gate_derivation import derivation_table, derive_gates
    from laya_opt.fidelity.gates import dump_gates_file, read_gates_file
    from laya_opt.suites.suite_file import load_suite
    from laya_opt.runs.pipeline import suite_requests
    from laya_opt.util.resources import checkpoint_path, suite_path
    from laya_opt.core.runtime import load_runtime

    console = output_console()
    command = command_line(checkpoint, suites, dtypes, out_file, name, measured_file, noise_sample)
    if measured_file is not None:
        # Only the measurements are read: the file's gates may follow rules that have changed since.
        recorded = read_yaml(measured_file, SchemaError)
        if not isinstance(recorded, dict) or not isinstance(recorded.get("measured"), dict):
            raise SchemaError(f"{measured_file}: measured: missing (not a gates file written by calibrate-gates)")
        measured = recorded["measured"]
        source = dict(recorded.get("source") or {}, derived_by=command)
        description = str(recorded.get("description", ""))
    else:
        if not suites:
            raise InputError("--suite: name at least one suite to measure on (or give --from-measurements)")
        directory = resolve_checkpoint_dir(checkpoint_path(checkpoint))
        loaded = [load_suite(suite_path(value, f"--suite {value}")) for value in suites]
        reference, requests = load_runtime(directory, "float32"), suite_requests(loaded)
        say = progress_printer(console)
        measured = measure(reference, requests, dtypes=("float32",) + tuple(d for d in dtypes if d != "float32"),
                           say=say, noise_sample=noise_sample,
                           outputs_of=None if no_cache else filed_outputs(reference, requests, directory, say))
        measured["suites"] = [{"name": s.name, "sha256": s.sha256, "records": len(s.records)} for s in loaded]
        env = environment()
        source = {"checkpoint": str(checkpoint), "checkpoint_sha256": file_sha256(directory / "model.safetensors"),
                  "device": env["device"], "mlx": env["versions"]["mlx"], "command": command,
                  "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        description = f"calibrated on {', '.join(suites)} ({env['device']})"
    gates = derive_gates(measured, name or out_file.stem, description, source)
    # Written beside the target and renamed once it reads back through the schema: never a half-written file.
    partial = out_file.with_name(f".{out_file.name}.partial")
    measured_by = f" from the measurements of `{source['command']}`" if measured_file and source.get("command") else ""
    partial.write_text(dump_gates_file(gates, header=f"Written by `{command}`{measured_by}; thresholds and their "
                                                     "derivations: docs/gates.md, fidelity/gate_derivation.py"),
                       encoding="utf-8")
    try:
        read_gates_file(partial)
    except Exception:
        partial.unlink()
        raise
    partial.replace(out_file)
    console.print(rich_table(noise_table(measured)))
    console.print(rich_table(derivation_table(gates), id_columns=2))
    console.print(f"wrote {out_file}", highlight=False, soft_wrap=True)


def filed_outputs(reference, requests, directory: Path, say=lambda message: None):
    """`measure`'s outputs_of, sharing its two full-suite evaluations with the runs that follow it (a reship's
    verdict table gates the float16 and bfloat16 casts on the suite just calibrated): the reference's from the
    reference cache, computed and filed on a miss, as a run's; a cast's always evaluated (a calibration trusts
    no entry it cannot check), then filed in the stage cache under the key of a run's stage 0 in that dtype."""
    from laya_opt.fidelity.checker import evaluate
    from laya_opt.runs.refcache import cached_reference
    from laya_opt.runs.runner import reference_cache_key
    from laya_opt.runs.stagecache import StageCache

    key = reference_cache_key(reference, requests, directory)
    stages = StageCache(key)

    def outputs_of(runtime):
        def compute():
            return evaluate(runtime, requests)
        if runtime is reference:
            found = cached_reference(key, compute)
            say(f"reference: {found.describe()}")
            return found.outputs
        outputs = stages.replace(stages.key(runtime), compute)
        say(f"{runtime.identity}: filed in the stage cache for `laya-opt run --reuse-stages`")
        return outputs
    return outputs_of
