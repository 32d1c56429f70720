"""`laya-opt sweep SWEEP.yaml`: search pass settings and orders for the fastest stack that passes the gates."""
from __future__ import annotations

import json

import click

from laya_opt.util.console import output_console


def progress_line(rows, sweep, elapsed_s: float) -> str:
    from laya_opt.runs.frontier import best_trial

    done = [row for row in rows if row["state"] in ("COMPLETE", "PRUNED")]
    passed = sum(bool(row["passed"]) for row in rows)
    best = best_trial(rows)
    total = f"/{sweep.max_trials}" if sweep.max_trials else ""
    left = "" if sweep.minutes is None else f", {max(0.0, sweep.minutes * 60 - elapsed_s) / 60:.1f} min left"
    best_text = "none passed yet" if best is None else (
        f"best trial {best['number']}: speed-up {best['speedup']:.3f}, {best['decision_changes']:.0f} changes")
    finished = [row for row in rows if row.get("completed")]  # Ray trials finish out of number order
    last = max(finished, key=lambda row: (row["completed"], row["number"])) if finished else None
    last_text = "" if last is None else f"trial {last['number']} " + (
        "cut by the budget" if last.get("cut") else "pruned" if last["state"] == "PRUNED" else
        "pass" if last["passed"] else "FAIL")
    return f"[bold]{len(done)}{total}[/] trials ({passed} passed{left}); {last_text}; {best_text}"


@click.command("sweep")
@click.argument("sweep_file", type=click.Path(dir_okay=False, exists=True))
@click.option("--resume", is_flag=True,
              help="Continue the study in the sweep's results directory (after a kill); refused if the base, "
                   "space or gates changed since the study began.")
@click.option("--report", "report_only", is_flag=True,
              help="Only (re)write frontier.md/.json/.png and best.yaml from the study as it is.")
@click.option("--ray", "ray", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Run the trials in parallel under Ray Tune, one device per trial: a local Ray instance, or the "
                   "cluster at ADDRESS (put --ray after SWEEP_FILE, or write --ray=ADDRESS). "
                   "pip install 'laya-opt[ray]'.")
@click.option("--backend", type=click.Choice(["optuna", "ray"]), default=None,
              help="optuna (default): trials one at a time from this process; ray: as --ray.")
@click.option("--in-process", is_flag=True,
              help="Run each trial in this process instead of a child process of its own (no crash isolation: a "
                   "trial that kills its process ends the sweep; saves the child's start-up, about 1-1.5 s a "
                   "trial on a CPU).")
@click.option("--ray-address", default=None, help="With --backend ray: the cluster to join (as --ray ADDRESS).")
@click.option("--quiet", is_flag=True, help="No progress lines; the summary is still printed.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome (best trial, front, counts) as JSON.")
def sweep(sweep_file: str, resume: bool, report_only: bool, ray: str | None, backend: str | None,
          ray_address: str | None, in_process: bool, quiet: bool, as_json: bool) -> None:
    """Run SWEEP_FILE: an Optuna study over the pass settings, pass subsets (PASS.enabled) and orders of a base
    experiment.

    Every trial is a normal gated run of the base experiment (the code path of `laya-opt run`), published
    whole under <output_dir>/<name>/trials/; trials share the reference cache, and a stage an earlier trial
    evaluated is loaded and checked on a re-run sample (the stage cache). Illegal settings are pruned before
    any weight loads. A trial whose gates fail is recorded but is never the best. The study is an
    Optuna journal file (<output_dir>/<name>/study.journal): a killed sweep continues with --resume. At the
    end (and with --report) frontier.md, frontier.json and frontier.png hold the Pareto front of speed-up
    against decision changes among passing trials and a table of every trial with its verdict, and
    best.yaml is a runnable experiment reproducing the best passing trial. Budget: the file's
    `budget: {trials, minutes}`; minutes count per invocation, and a trial still running when they run out
    is cut (recorded, not judged; --resume runs it again; a trial's process that reaches no budget check
    within 30 s of the deadline is killed, its output kept under cut/). Each trial runs in a child
    process: one whose process dies (a CUDA fault, an abort, the OOM killer) is recorded as crashed,
    its output kept under crashes/, and the sweep goes on. With --ray the trials run in parallel under Ray
    Tune, Optuna still the sampler, into the same study and files. docs/sweeps.md describes the file.
    """
    from laya_opt.runs.sweep import check_backend, choose_backend, outcome_json, report, run_sweep
    from laya_opt.runs.sweep_file import load_sweep

    backend, address = choose_backend(ray, backend, ray_address)
    if in_process and backend == "ray":
        raise click.UsageError("--in-process runs the embedded backend's trials in this process; under Ray every "
                               "trial runs in a worker process anyway")
    check_backend(backend)
    plan = load_sweep(sweep_file)
    console = output_console()
    quiet = quiet or as_json
    say = (lambda message: None) if quiet else (lambda message: console.print(f"[dim]· {message}[/]",
                                                                            highlight=False, soft_wrap=True))
    on_trial = None if quiet else (lambda rows, plan, elapsed: console.print(progress_line(rows, plan, elapsed),
                                                                            highlight=False))
    if report_only:
        outcome = report(plan)
    elif backend == "ray":
        from laya_opt.runs.sweep_ray import run_sweep_ray

        outcome = run_sweep_ray(plan, resume=resume, address=address, say=say, on_trial=on_trial)
    else:
        outcome = run_sweep(plan, resume=resume, say=say, on_trial=on_trial, isolate=not in_process)
    if as_json:
        click.echo(json.dumps(outcome_json(outcome), indent=2))
        return
    counts = outcome.frontier["counts"]
    cut = f", {counts['cut']} cut by the budget" if counts.get("cut") else ""
    cut += f", {counts['crashed']} crashed" if counts.get("crashed") else ""
    console.print(f"{counts['trials']} trials: {counts['complete']} run, {counts['passed']} passed, "
                  f"{counts['pruned']} pruned{cut}; front: {outcome.frontier['front'] or 'empty'}", highlight=False)
    if outcome.best_yaml is not None:
        console.print(f"[green]best: trial {outcome.frontier['best']}[/] -> {outcome.best_yaml}", highlight=False)
    elif not counts["complete"] and counts.get("cut"):
        console.print("[red]no trial finished before the budget ran out[/]; --resume (with minutes to spare) runs "
                      "the cut trials' settings again", highlight=False)
    else:
        console.print(f"[red]no trial passed[/]; closest: {outcome.frontier['closest_failing']}", highlight=False)
    console.print(f"frontier: {outcome.results_dir / 'frontier.md'}", highlight=False)
