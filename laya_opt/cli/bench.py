"""`laya-opt bench`: the head-to-head run (MLX eager, every accepted stage, upstream), and `laya-opt plot`."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from laya_opt.util.console import output_console, progress_printer

LEGACY_RECORD = "head_to_head.json"


@click.command("bench")
@click.argument("experiment_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--arch", type=click.Choice(["laya-large", "laya-multilingual", "tiny", "standin"]), default=None,
              help="Time a random checkpoint of this architecture at its real size, made for the run "
                   "(upstream layout, float16); default: the experiment's checkpoint.")
@click.option("--checkpoint", type=click.Path(file_okay=False, exists=True), default=None,
              help="Time this checkpoint directory instead of the experiment's.")
@click.option("--workload", "workloads", multiple=True, default=("short-1", "short-50", "long-1"), show_default=True)
@click.option("--requests", type=click.IntRange(min=1), default=200, show_default=True,
              help="Timed requests per runtime, workload and mode.")
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True)
@click.option("--blocks", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--peer", type=click.Choice(["upstream", "none"]), default="upstream", show_default=True,
              help="Also time the upstream PyTorch runtime (eager and compile backends) when it is installed.")
@click.option("--profile/--no-profile", default=True, show_default=True,
              help="Phase split and (on CUDA, with torch) the kernel timeline of the baseline, the final stage "
                   "and upstream compile.")
@click.option("--budget-s", type=click.FloatRange(min=1), default=None,
              help="Wall-clock budget: timing cells not started by 85% of it are skipped (and listed), profile "
                   "entries not started by its end too, so a run on a lent machine ends with what it measured.")
@click.option("--time", "timed_stages", type=click.Choice(["stages", "final"]), default="stages", show_default=True,
              help="Time every accepted stage, or only the final one (the stack) next to the baseline and "
                   "upstream: half the runtimes, for a complete run within a lent machine's call limit. "
                   "Every stage is gated either way.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Results root: each bench writes a new directory <experiment>-<UTC time>[-N] in it, never "
                   "over an earlier one.")
@click.option("--no-cache", is_flag=True,
              help="Evaluate the reference even when the reference cache holds its outputs (always so with --arch).")
def bench(experiment_file, arch, checkpoint, workloads, requests, warmup, blocks, peer, profile, budget_s,
          timed_stages, out_dir, no_cache):
    """Time the MLX eager baseline, the accepted stages of EXPERIMENT_FILE and the upstream runtime in one run.

    Every stage is gated; --time stages (the default) times every accepted one, --time final only the last.

    Answers are compared with the FP32 reference side by side with the speed; upstream's token ids are
    checked against laya-opt's. Writes a results directory like `run`'s (kind "bench" in manifest.json;
    `diff`, `history` and `plot` read it): stages.jsonl holds every stage's gates with their measured
    values, timings.json the raw samples, every runtime's answer drift and the per-cell profile, plus
    report.md and (with matplotlib) plots. Checked before any weight is read; a failed or interrupted
    bench leaves nothing behind.
    """
    import dataclasses

    from laya_opt.timing.bench import BenchConfig
    from laya_opt.runs.experiment import load_experiment
    from laya_opt.runs.headtohead import HeadToHead, run_head_to_head
    from laya_opt.core.synth import write_random_checkpoint

    console = output_console()
    experiment = load_experiment(Path(experiment_file))
    config = BenchConfig(requests=requests, warmup=warmup, blocks=min(blocks, requests), forward_only=True)
    with tempfile.TemporaryDirectory(prefix="laya-bench-") as scratch:
        path = Path(checkpoint) if checkpoint else experiment.checkpoint
        if arch:
            console.print(f"· writing a random {arch} checkpoint", highlight=False)
            path = write_random_checkpoint(arch, Path(scratch) / arch, seed=0, dtype="float16")
        plan = HeadToHead(experiment=dataclasses.replace(experiment, checkpoint=path), checkpoint=path,
                          workloads=tuple(workloads), bench=config, peer=peer == "upstream", profile=profile,
                          budget_s=budget_s, timed_stages=timed_stages, arch=arch)
        # a random checkpoint lives in a scratch dir for this run only: a cache entry for it would never be hit
        outcome = run_head_to_head(plan, out_dir, say=progress_printer(console), cache=not (no_cache or arch))
    console.print((outcome.results_dir / "report.md").read_text(), highlight=False, markup=False)
    console.print(f"results: {outcome.results_dir}", highlight=False, soft_wrap=True)
    if outcome.history:
        console.print(f"history: {outcome.history}", style="dim", highlight=False, soft_wrap=True)


@click.command("plot")
@click.argument("results_dir", type=click.Path(file_okay=False, exists=True))
def plot(results_dir):
    """Draw (or redraw) the PNG plots of a results directory: a `run` or a `bench` result."""
    from laya_opt.runs.plots import available, write_plots, write_run_plots
    from laya_opt.runs.report import load_results

    if not available():
        raise click.ClickException("matplotlib is not installed: pip install laya-opt[plots]")
    directory = Path(results_dir)
    if (directory / LEGACY_RECORD).is_file():  # a bench result written before bench used the shared format
        written = write_plots(json.loads((directory / LEGACY_RECORD).read_text()), directory)
    else:
        from laya_opt.runs.headtohead import bench_view
        from laya_opt.util.errors import InputError

        try:
            loaded = load_results(directory)
        except FileNotFoundError as exc:
            raise InputError(str(exc)) from None
        if loaded.manifest.get("kind") == "bench":
            written = write_plots(bench_view(loaded.manifest, loaded.stages, loaded.timings), directory)
        else:
            written = write_run_plots(list(loaded.stages), loaded.timings, directory)
    output_console().print(f"wrote {', '.join(written) or 'nothing'} in {directory}", highlight=False)
