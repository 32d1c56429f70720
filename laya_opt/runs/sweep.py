"""Run a sweep: an Optuna study whose trials are normal gated runs of the base experiment (`runner.run_experiment`).

The study lives in `<output_dir>/<name>/study.journal` (Optuna's journal file storage), each trial's results
directory in `<output_dir>/<name>/trials/<name>-tNNNN-<UTC>/`, published whole by the runner's staging rename.
Trials run one at a time, so timings stay clean, and share the reference cache, so the reference is evaluated once
per suite, and the stage cache (`stagecache`): a stage whose runtime an earlier trial evaluated (same lineage of
passes and settings) loads those outputs and re-runs only its sample. A trial whose settings the pass contracts or
prechecks refuse is pruned before any weight loads; a trial whose gates fail is complete, with `passed: false` and a
violated constraint, and is never the best.

Each trial runs in a child process (`trial_process`; `--in-process` runs it in the sweep's own): a trial whose
process dies (a CUDA fault, an abort, the OOM killer) is recorded FAIL with `crashed` and its stderr kept under
`crashes/`, the sweep goes on, and the same stack is not run again (`stack_key`).

Killed and resumed (`--resume`): a trial left RUNNING in the journal whose results directory was published
(killed between publishing and recording) is recorded from that directory; one without a directory is
marked FAIL and its settings are queued again, so the resumed sweep ends with every trial once. Trial
numbers go on from where the study stopped. A lock file keeps two sweeps off one study.

Budget: `budget.minutes` is a deadline for this invocation. A trial still running when it passes is stopped at
the next stage, evaluated batch or timed block (`run_experiment`'s `check`), nothing of it is published, and
it is recorded FAIL with `cut: true` (neither passed nor rejected); its settings are queued, so `--resume`
with time left runs them again under a new number. A trial in its own process that reaches none of those
checks within CUT_GRACE_S of the deadline is killed and cut the same way, so an invocation ends at most about
that long after its budget.
"""
from __future__ import annotations

import fcntl
import json
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import yaml

from laya_opt.runs.frontier import best_trial, write_frontier
from laya_opt.runs.sweep_file import ENABLED, ORDER, Param, Sweep, base_document
from laya_opt.util.errors import ExperimentError, InputError
from laya_opt.util.schema import to_plain
from laya_opt.util.staging import replace_file

JOURNAL, LOCK, TRIALS, BEST_YAML = "study.journal", ".sweep.lock", "trials", "best.yaml"
DEFINITION = "definition"   # the study's user attribute: `definition(sweep)` when it began
# A trial in its own process that reaches no budget check this long after the deadline (one stage compiling
# for minutes on a cold GPU) is killed, and cut all the same.
CUT_GRACE_S = 30.0
CONSTRAINT = "gates"   # the name of the one constraint: the gates passed (0) or not (1)


def optuna_module():
    try:
        import optuna
    except ImportError:
        raise InputError("laya-opt sweep needs Optuna: pip install 'laya-opt[sweep]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def ray_modules():
    """(ray, tune, OptunaSearch), or the InputError `--ray` answers with when Ray Tune is not installed."""
    try:
        import ray
        from ray import tune
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:
        raise InputError("--ray needs Ray Tune: pip install 'laya-opt[ray]'") from None
    return ray, tune, OptunaSearch


# ---------------------------------------------------------------------------------------------------------------------
# Settings -> an experiment


def suggest(trial, params: tuple[Param, ...]) -> dict[str, Any]:
    """Sample every parameter; categorical and order parameters are sampled as indices into their choices."""
    settings = {}
    for param in params:
        if param.kind in ("categorical", "order"):
            index = trial.suggest_categorical(param.key, list(range(len(param.choices))))
            settings[param.key] = list(param.choices[index]) if param.kind == ORDER else param.choices[index]
        elif param.kind == "int":
            settings[param.key] = trial.suggest_int(param.key, int(param.low), int(param.high),
                                                    step=int(param.step or 1), log=param.log)
        else:
            settings[param.key] = trial.suggest_float(param.key, param.low, param.high, step=param.step,
                                                      log=param.log)
    return settings


def trial_document(sweep: Sweep, settings: Mapping[str, Any], name: str) -> dict:
    """The base experiment's document with the sweep's overrides and these settings: what best.yaml holds."""
    document = base_document(sweep.base_path, sweep.overrides)
    document.update(name=name, passes=trial_passes(document, settings))
    return document


def trial_passes(document: Mapping[str, Any], settings: Mapping[str, Any]) -> list[dict]:
    """The pass entries of the base `document` with these settings applied, in order, disabled passes dropped."""
    passes = [dict(entry, config=dict(entry.get("config") or {})) for entry in document.get("passes") or []]
    dropped = set()
    for key, value in settings.items():
        if key == ORDER:
            continue
        pass_name, _, setting = key.partition(".")
        if setting == ENABLED:
            if not value:
                dropped.add(pass_name)
            continue
        for entry in passes:
            if entry.get("name") == pass_name:
                entry["config"][setting] = value
    if ORDER in settings:   # the order indexes the base's passes, so it applies before any is dropped
        passes = [passes[index] for index in settings[ORDER]]
    return [entry for entry in passes if entry.get("name") not in dropped]


def trial_experiment(sweep: Sweep, settings: Mapping[str, Any], name: str):
    """The trial's Experiment, checked as `run` checks one before any weight loads (InputError: illegal)."""
    from laya_opt.runs.experiment import parse_experiment
    from laya_opt.runs.runner import preflight

    experiment = parse_experiment(trial_document(sweep, settings, name), sweep.base_path)
    preflight(experiment, output_dir=sweep.results_dir / TRIALS)
    return experiment


# ---------------------------------------------------------------------------------------------------------------------
# A finished run -> the trial's numbers


def _final_record(records) -> Mapping:
    """The stage whose numbers the trial reports: the last accepted one, or the first that failed its gates."""
    failed = [r for r in records if not r.get("gates_passed", True) and not r.get("waived")]
    if failed:
        return failed[0]
    accepted = [r for r in records if r.get("verdict") == "accepted"]
    return accepted[-1] if accepted else records[-1]


def run_metrics(records, sweep: Sweep) -> dict:
    final = _final_record(records)
    cumulative = (final.get("metrics") or {}).get("cumulative") or {}
    cell = ((final.get("timings") or {}).get(sweep.speedup.workload) or {}).get(sweep.speedup.mode) or {}
    speed = (cell.get("speedup") or {}).get("median")
    failed = [f"stage {r['index']} {r['stage']} {g['comparison']}: {g.get('message') or g['gate']}"
              for r in records for g in r.get("gates") or () if g.get("status") == "FAIL"]

    def number(name):
        value = cumulative.get(name)
        return None if value is None or isinstance(value, str) else float(value)

    return {"passed": not failed, "failed_gates": failed, "speedup": None if speed is None else float(speed),
            "decision_changes": number("argmax_flips"), "accuracy_delta": number("accuracy_delta"),
            "max_abs_dp": number("max_abs_dp"), "stage": f"{final['index']} {final['stage']}"}


def objective_values(metrics: Mapping, sweep: Sweep) -> list[float]:
    """The objectives as Optuna minimises/maximises them; a missing value is the worst a direction allows."""
    fallback = {"speedup": 0.0, "decision_changes": math.inf, "accuracy_delta": -1.0, "max_abs_dp": 1.0}
    values = []
    for name in sweep.objectives:
        value = metrics.get(name)
        value = fallback[name] if value is None else value
        values.append(1e9 if value == math.inf else value)
    return values


# ---------------------------------------------------------------------------------------------------------------------
# The study


def trial_name(sweep: Sweep, number: int) -> str:
    return f"{sweep.name}-t{number:04d}"


def create_sampler(sweep: Sweep, done: int = 0):
    """The sweep's sampler; `done` (trials already in the study) moves the seed so a resumed sweep does not replay
    the random draws of its first invocation."""
    optuna = optuna_module()
    if sweep.sampler == "grid":
        return optuna.samplers.GridSampler(sweep.grid(), seed=sweep.seed)
    if sweep.sampler == "random":
        return optuna.samplers.RandomSampler(seed=sweep.seed + done)
    if hasattr(optuna.trial.Trial, "set_constraint"):   # optuna >= 5: TPE reads the constraint note_payload set
        return optuna.samplers.TPESampler(seed=sweep.seed + done)
    return optuna.samplers.TPESampler(seed=sweep.seed + done, constraints_func=lambda trial: trial.user_attrs.get(
        "constraint", [1.0]))


def definition(sweep: Sweep) -> dict:
    """What makes two trials of a study comparable, as plain JSON data: the base experiment as the sweep resolves
    it (checkpoint and suites by name, so that a study carried to another machine still matches), its gates as
    this package states them, the search space, objectives, sampler and seed. Not the budget or the results
    directory: a resumed sweep may get more or less time, elsewhere."""
    base = sweep.base.resolved()
    plain = {
        "checkpoint": Path(base["checkpoint"]).name, "suites": [Path(path).name for path in base["suites"]],
        **{key: base[key] for key in ("reference_dtype", "candidate_dtype", "batch_size", "rerun", "gates",
                                     "benchmark")},
        "passes": [{key: entry[key] for key in ("name", "config", "on_fail")} for entry in base["passes"]],
        "space": [to_plain(param) for param in sweep.params], "objectives": list(sweep.objectives),
        "speedup": to_plain(sweep.speedup), "sampler": sweep.sampler, "seed": sweep.seed,
    }
    return json.loads(json.dumps(plain))    # as the journal gives it back (tuples as lists)


def check_definition(study, sweep: Sweep, say: Callable[[str], None]) -> None:
    """--resume continues a study only under the definition it began with: trials of another base, space or gates
    would share one front without being comparable. A study that recorded none (made by an older laya-opt) is
    resumed as it is, with a note."""
    recorded = study.user_attrs.get(DEFINITION)
    if recorded is None:
        say(f"{sweep.results_dir / JOURNAL}: the study records no definition (made by an older laya-opt); "
            "resuming it unchecked")
        return
    current = definition(sweep)
    changed = [key for key in sorted(set(recorded) | set(current)) if recorded.get(key) != current.get(key)]
    if changed:
        raise InputError(f"--resume: {sweep.source} no longer describes the study in {sweep.results_dir}: "
                         f"{', '.join(changed)} changed since it began; give the sweep another name (or move that "
                         "directory away) to start a new study")


def open_study(sweep: Sweep, create: bool):
    optuna = optuna_module()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(sweep.results_dir / JOURNAL)))
    if create:
        study = optuna.create_study(study_name=sweep.name, storage=storage, sampler=create_sampler(sweep),
                                    directions=sweep.directions)
        study.set_user_attr(DEFINITION, definition(sweep))
        return study
    study = optuna.load_study(study_name=sweep.name, storage=storage, sampler=create_sampler(sweep))
    study.sampler = create_sampler(sweep, len(study.get_trials(deepcopy=False)))
    return study


def sweep_running(directory: Path) -> bool:
    """Whether a sweep holds this study's lock now (a trial it left RUNNING may still be running)."""
    try:
        with sweep_lock(directory):
            return False
    except InputError:
        return True


def mark_interrupted(row: dict) -> dict:
    """A trial left RUNNING by a sweep that is no longer running (killed, terminated): reported as interrupted."""
    if row["state"] != "RUNNING":
        return row
    return {**row, "interrupted": True,
            "note": "its sweep stopped before the trial finished; --resume records it from its published "
                    "results directory or runs its settings again"}


@contextmanager
def sweep_lock(directory: Path) -> Iterator[None]:
    with open(directory / LOCK, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"{directory}: another sweep is running on this study") from None
        yield


def prepare_directory(sweep: Sweep, resume: bool) -> bool:
    """Check the results directory for a fresh sweep or a resume; True when the study must be created."""
    journal = sweep.results_dir / JOURNAL
    if resume:
        if not journal.is_file():
            raise InputError(f"--resume: {journal} does not exist; nothing to resume (run without --resume)")
        return False
    if journal.exists():
        raise InputError(f"{sweep.results_dir}: a sweep named {sweep.name} is already there; --resume continues it, "
                         "or give the sweep another name")
    (sweep.results_dir / TRIALS).mkdir(parents=True, exist_ok=True)
    return True


def published_run(sweep: Sweep, number: int) -> Path | None:
    found = sorted((sweep.results_dir / TRIALS).glob(f"{trial_name(sweep, number)}-*"))
    return found[-1] if found and (found[-1] / "stages.jsonl").is_file() else None


def tell(study, number: int, values=None, state=None) -> None:
    """study.tell outside optimize(): the GridSampler stops the study after the last point with Study.stop(),
    which raises RuntimeError there, after the trial's state is stored (optuna/optuna#5141); that one is no
    failure."""
    try:
        study.tell(number, values, state=state)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise


def recover(study, sweep: Sweep, say: Callable[[str], None]) -> None:
    """Trials a killed sweep left RUNNING: recorded from their published directory, or failed and queued again."""
    optuna = optuna_module()
    from laya_opt.runs.report import load_results

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        directory = published_run(sweep, trial.number)
        storage = study._storage
        if directory is not None:
            payload = run_payload(run_metrics(load_results(directory).records, sweep), directory)
            for key, value in payload.items():
                storage.set_trial_user_attr(trial._trial_id, key, value)
            tell(study, trial.number, objective_values(payload, sweep))
            say(f"trial {trial.number}: recorded from {directory.name} (published before the sweep stopped)")
        else:
            note = "interrupted before its results were published; its settings run again"
            storage.set_trial_user_attr(trial._trial_id, "note", note)
            fail_and_requeue(study, trial.number, note, say)


@dataclass(frozen=True)
class SweepOutcome:
    results_dir: Path
    rows: tuple[dict, ...]
    frontier: dict
    best_yaml: Path | None


def trial_rows(study) -> tuple[dict, ...]:
    rows = []
    for trial in study.get_trials(deepcopy=False):
        if trial.state.name == "WAITING":  # queued settings (of a cut or interrupted trial): not run yet
            continue
        attrs = trial.user_attrs
        rows.append({"number": trial.number, "state": trial.state.name, "settings": attrs.get("settings", {}),
                     "passed": bool(attrs.get("passed")) if trial.state.name == "COMPLETE" else False,
                     **{key: attrs.get(key) for key in ("speedup", "decision_changes", "accuracy_delta",
                                                        "max_abs_dp", "stage", "run_dir", "note")},
                     "failed_gates": list(attrs.get("failed_gates") or ()), "cut": bool(attrs.get("cut")),
                     "crashed": bool(attrs.get("crashed")),
                     "seconds": None if trial.duration is None else trial.duration.total_seconds(),
                     "completed": None if trial.datetime_complete is None else
                     trial.datetime_complete.isoformat(timespec="seconds")})
    return tuple(rows)


def write_best(sweep: Sweep, best: Mapping | None) -> Path | None:
    path = sweep.results_dir / BEST_YAML
    if best is None:
        path.unlink(missing_ok=True)
        return None
    document = trial_document(sweep, best["settings"], f"{sweep.name}-best")
    header = (f"# The best passing trial of sweep {sweep.name} (trial {best['number']}: speed-up "
              f"{best['speedup']:.3f} on {sweep.speedup.workload} {sweep.speedup.mode}, "
              f"{best['decision_changes']:.0f} decision changes).\n# Reproduce: laya-opt run {path}\n")
    text = header + yaml.safe_dump(document, sort_keys=False)
    replace_file(path, lambda partial: partial.write_text(text, encoding="utf-8"))
    return path


def report(sweep: Sweep) -> SweepOutcome:
    """frontier.json/.md/.png and best.yaml from the study as it is (`laya-opt sweep --report`)."""
    if not (sweep.results_dir / JOURNAL).is_file():
        raise InputError(f"--report: {sweep.results_dir / JOURNAL} does not exist; run the sweep first")
    rows = trial_rows(open_study(sweep, create=False))
    if not sweep_running(sweep.results_dir):
        rows = tuple(mark_interrupted(row) for row in rows)
    meta = {"objectives": list(sweep.objectives), "sampler": sweep.sampler, "seed": sweep.seed,
            "speedup_label": f"p50 {sweep.speedup.mode} on {sweep.speedup.workload}",
            "base": str(sweep.base_path), "source": str(sweep.source)}
    frontier = write_frontier(sweep.results_dir, sweep.name, rows, meta)
    return SweepOutcome(sweep.results_dir, rows, frontier, write_best(sweep, best_trial(rows)))


class BudgetExhausted(BaseException):
    """The sweep's minutes ran out while a trial was running. A BaseException, as KeyboardInterrupt is, so the
    pipeline's and the benchmark's `except Exception` (a stage or runtime that raises is a failed stage or
    a left-out cell) stop the run instead of recording a verdict."""


class TrialCrashed(BaseException):
    """Raised out of the embedded objective for a trial whose process died (`trial_process`): as with TrialCut,
    Optuna leaves it RUNNING and `run_sweep` records it FAIL, with its note, and goes on to the next trial."""

    def __init__(self, number: int, note: str):
        super().__init__(number, note)
        self.number, self.note = number, note


class TrialCut(BaseException):
    """Raised out of the embedded objective for a trial the budget cut: Optuna leaves the trial RUNNING for
    `run_sweep` to close with `close_cut` (an Exception would be logged as a failed trial with a traceback)."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def clock() -> float:
    """The budget's clock: wall-clock seconds, so Ray workers in other processes share the deadline (a module
    function, so tests can move it)."""
    return time.time()


def budget_check(deadline: float | None) -> Callable[[], None] | None:
    """`run_experiment`'s check for a deadline in `clock()` seconds."""
    if deadline is None:
        return None

    def check() -> None:
        if clock() >= deadline:
            raise BudgetExhausted

    return check


RECORDED = ("passed", "failed_gates", "speedup", "decision_changes", "accuracy_delta", "max_abs_dp", "stage",
            "run_dir", "constraint", "note", "cut", "crashed")


def execute_trial(sweep: Sweep, settings: Mapping[str, Any], number: int, *, deadline: float | None = None,
                  say: Callable[[str], None] = lambda message: None) -> dict:
    """Run one trial's settings as a normal gated run (both backends): what the study records for it.

    {"note": "pruned: ...", "pruned": True} when the contracts or prechecks refuse the settings (before any
    weight loads); {"note": ..., "cut": True} when the deadline passed mid-run (nothing published); else the
    run's metrics, run_dir and constraint."""
    from laya_opt.runs.runner import run_experiment

    try:
        experiment = trial_experiment(sweep, settings, trial_name(sweep, number))
    except InputError as exc:
        return {"pruned": True, "note": f"pruned: {exc}"}
    try:
        outcome = run_experiment(experiment, output_dir=sweep.results_dir / TRIALS, say=say,
                                 check=budget_check(deadline), share_stages=True)
    except BudgetExhausted:
        return cut_payload(sweep)
    return run_payload(run_metrics(outcome.records, sweep), outcome.results_dir)


def cut_payload(sweep: Sweep, detail: str = "") -> dict:
    """What the study records for a trial the budget stopped (nothing of it published)."""
    minutes = "" if sweep.minutes is None else f" ({sweep.minutes:g} min)"
    return {"cut": True, "note": f"cut by the budget{minutes} before it finished{detail}; its settings are queued "
                                 "for --resume"}


def run_payload(metrics: Mapping[str, Any], directory: Path) -> dict:
    """What the study records for a finished run: its metrics, its directory and the gate verdict as TPE's
    constraint (0: feasible)."""
    return {**metrics, "run_dir": str(directory), "constraint": [0.0 if metrics["passed"] else 1.0]}


def note_payload(trial, payload: Mapping[str, Any]) -> None:
    """The payload's recorded keys as the trial's user attributes (an optuna Trial, in its objective or asked)."""
    for key in RECORDED:
        if key in payload:
            trial.set_user_attr(key, payload[key])
    if "constraint" in payload and hasattr(trial, "set_constraint"):   # optuna >= 5 (constraints_func before)
        trial.set_constraint(CONSTRAINT, payload["constraint"][0])


def stack_key(document: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """What a trial runs: its passes in order with their configs (`document`: the sweep's base document).
    Settings that differ only where they change nothing (those of a disabled pass, the place of a disabled pass
    in an order) give the same key."""
    return json.dumps(trial_passes(document, settings), sort_keys=True)


def same_stack_trials(study, sweep: Sweep, settings: Mapping[str, Any], state) -> Iterator[Any]:
    """The trials in `state` whose recorded settings run the same stack as `settings`, in number order."""
    document = base_document(sweep.base_path, sweep.overrides)   # read once per lookup
    wanted = stack_key(document, settings)
    for earlier in study.get_trials(deepcopy=False, states=(state,)):
        recorded = earlier.user_attrs.get("settings")
        if recorded is not None and (recorded == settings or stack_key(document, recorded) == wanted):
            yield earlier


def earlier_run(study, sweep: Sweep, settings: Mapping[str, Any]) -> tuple[dict, list[float]] | None:
    """(payload, values) of a finished trial that ran the same stack: a sampler may propose a point twice, and
    settings of a disabled pass change nothing (`stack_key`)."""
    for earlier in same_stack_trials(study, sweep, settings, optuna_module().trial.TrialState.COMPLETE):
        payload = {key: earlier.user_attrs.get(key) for key in RECORDED if key not in ("note", "cut")}
        same = "settings" if earlier.user_attrs.get("settings") == settings else "stack"
        payload["note"] = f"same {same} as trial {earlier.number}: its run is reused"
        return payload, list(earlier.values)
    return None


def earlier_crash(study, sweep: Sweep, settings: Mapping[str, Any]) -> int | None:
    """The number of a trial that ran the same stack and whose process crashed: a crash is not run again."""
    return _first_failed(study, sweep, settings, "crashed")


def earlier_worker_failure(study, sweep: Sweep, settings: Mapping[str, Any], number: int) -> int | None:
    """The number of another trial that ran the same stack and lost its Ray worker (recorded `worker_failed`)."""
    return _first_failed(study, sweep, settings, "worker_failed", besides=number)


def _first_failed(study, sweep: Sweep, settings: Mapping[str, Any], flag: str, besides: int | None = None
                  ) -> int | None:
    failed = optuna_module().trial.TrialState.FAIL
    return next((earlier.number for earlier in same_stack_trials(study, sweep, settings, failed)
                 if earlier.user_attrs.get(flag) and earlier.number != besides), None)


def fail_and_requeue(study, number: int, message: str, say: Callable[[str], None]) -> None:
    """A trial that did not finish (cut by the budget, killed, or its Ray worker failed): FAIL, never passed or
    rejected, and its settings queued so the next trial (or --resume) runs them again."""
    optuna = optuna_module()
    trial = next(trial for trial in study.get_trials(deepcopy=False) if trial.number == number)
    tell(study, number, state=optuna.trial.TrialState.FAIL)
    study.enqueue_trial(dict(trial.params))
    say(f"trial {number}: {message}")


def close_cut(study, number: int, say: Callable[[str], None]) -> None:
    """A trial the budget cut."""
    fail_and_requeue(study, number, "cut by the budget; its settings are queued (--resume runs them again)", say)


def isolated_trial(sweep: Sweep, settings: Mapping[str, Any], number: int, *, deadline: float | None, digest: str,
                   say: Callable[[str], None]) -> dict:
    """`execute_trial` in a child process (`trial_process`): a trial that kills its process is recorded as crashed,
    and one that reaches no budget check within CUT_GRACE_S of the deadline is killed and cut. The embedded
    runner's trials and Ray's both run here. `digest`: `sweep_files_digest` as the sweep's driver read them."""
    from laya_opt.runs.trial_process import run_in_child

    return run_in_child(sweep, settings, number, trial_name(sweep, number), deadline=deadline, say=say,
                        digest=digest, trials_dir=sweep.results_dir / TRIALS,
                        kill_at=None if deadline is None else deadline + CUT_GRACE_S,
                        cut=cut_payload(sweep, "; its process was killed, having reached no budget check since "
                                               "the deadline"))


def make_objective(sweep: Sweep, say: Callable[[str], None], deadline: float | None = None, isolate: bool = True):
    """The embedded objective; `isolate` runs each trial in a child process (`trial_process`)."""
    from laya_opt.runs.trial_process import sweep_files_digest

    optuna = optuna_module()
    digest = sweep_files_digest(sweep.source, sweep.base_path) if isolate else ""

    def objective(trial):
        settings = suggest(trial, sweep.params)
        trial.set_user_attr("settings", settings)
        reused = earlier_run(trial.study, sweep, settings)
        if reused is not None:
            note_payload(trial, reused[0])
            return reused[1]
        crashed = earlier_crash(trial.study, sweep, settings)
        if crashed is not None:
            payload = {"crashed": True, "note": f"same stack as trial {crashed}, whose process crashed: not run again"}
        elif isolate:
            payload = isolated_trial(sweep, settings, trial.number, deadline=deadline, digest=digest, say=say)
        else:
            payload = execute_trial(sweep, settings, trial.number, deadline=deadline, say=say)
        note_payload(trial, payload)
        if payload.get("crashed"):
            raise TrialCrashed(trial.number, payload["note"])
        if payload.get("pruned"):
            say(f"trial {trial.number}: {payload['note']}")
            raise optuna.TrialPruned(payload["note"])
        if payload.get("cut"):
            raise TrialCut(trial.number)
        return objective_values(payload, sweep)

    return objective


def remaining_trials(study, sweep: Sweep) -> int | None:
    if sweep.max_trials is None:
        return None
    optuna = optuna_module()
    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                        optuna.trial.TrialState.PRUNED)))
    return max(0, sweep.max_trials - done)


def grid_left(study, sweep: Sweep) -> int:
    """Grid points no finished trial took (the GridSampler's view: a FAIL takes its point), plus the queued
    trials (a cut or interrupted trial's settings), which run before any new point."""
    optuna = optuna_module()
    visited, waiting = set(), 0
    for trial in study.get_trials(deepcopy=False):
        if trial.state == optuna.trial.TrialState.WAITING:
            waiting += 1
        elif trial.state.is_finished() and "grid_id" in trial.system_attrs:
            visited.add(trial.system_attrs["grid_id"])
    return sweep.grid_size() - len(visited) + waiting


def trials_to_run(study, sweep: Sweep, max_trials: int | None = None) -> int | None:
    """How many trials this invocation may start: the trial budget left, capped by `max_trials` and, for the
    grid, by the points left; None: no count (a minutes-only budget decides)."""
    remaining = remaining_trials(study, sweep)
    if max_trials is not None:
        remaining = max_trials if remaining is None else min(remaining, max_trials)
    if sweep.sampler == "grid":
        left = grid_left(study, sweep)
        remaining = left if remaining is None else min(remaining, left)
    return remaining


@contextmanager
def opened_sweep(sweep: Sweep, resume: bool, say: Callable[[str], None],
                 max_trials: int | None) -> Iterator[tuple[Any, int | None, float, float | None]]:
    """What both backends do before their first trial: prepare the directory, hold its lock, open the study (on
    --resume, recover the trials a killed run left) and start the budget's clock. Yields (study, trials to run or
    None for no cap, start time, deadline or None)."""
    create = prepare_directory(sweep, resume)
    started = clock()
    deadline = None if sweep.minutes is None else started + sweep.minutes * 60
    with sweep_lock(sweep.results_dir):
        study = open_study(sweep, create)
        if not create:
            check_definition(study, sweep, say)
            recover(study, sweep, say)
        yield study, trials_to_run(study, sweep, max_trials), started, deadline


def run_sweep(sweep: Sweep, *, resume: bool = False, say: Callable[[str], None] = lambda message: None,
              on_trial: Callable[[tuple[dict, ...], Sweep, float], None] | None = None,
              max_trials: int | None = None, isolate: bool = True) -> SweepOutcome:
    """Run (or resume) the sweep from this process, one trial at a time, then write the frontier and best.yaml.

    `max_trials` caps the trials of this invocation (tests; a partial run then `--resume`). `isolate` (the
    default) runs each trial in a child process, so a trial that crashes its process is recorded FAIL with
    `crashed` and the sweep goes on; without it trials run in this process (`laya-opt sweep --in-process`)."""
    optuna_module()  # a clear error before anything is written when Optuna is missing
    with opened_sweep(sweep, resume, say, max_trials) as (study, count, started, deadline):
        if count == 0:
            say("nothing left to run: " + ("the grid is exhausted" if sweep.sampler == "grid" and
                                          grid_left(study, sweep) == 0 else "the trial budget is spent"))
        objective = make_objective(sweep, say, deadline, isolate)
        done = 0
        # One optimize() per trial: the deadline is checked before each, and a cut trial ends the invocation.
        while count is None or done < count:
            if deadline is not None and clock() >= deadline:
                say(f"budget: {sweep.minutes:g} min spent; --resume continues")
                break
            try:
                study.optimize(objective, n_trials=1, catch=())
            except TrialCut as cut:
                close_cut(study, cut.number, say)
                break
            except TrialCrashed as crash:   # recorded, never queued again: the same settings would crash again
                tell(study, crash.number, state=optuna_module().trial.TrialState.FAIL)
                say(f"trial {crash.number}: {crash.note}")
            finally:
                if on_trial is not None:
                    on_trial(trial_rows(study), sweep, clock() - started)
            done += 1
    return report(sweep)


def outcome_json(outcome: SweepOutcome) -> dict:
    return json.loads(json.dumps({"results_dir": str(outcome.results_dir), "best": outcome.frontier["best"],
                                  "front": outcome.frontier["front"], "counts": outcome.frontier["counts"],
                                  "best_yaml": None if outcome.best_yaml is None else str(outcome.best_yaml)}))


def choose_backend(ray: str | None, backend: str | None, ray_address: str | None) -> tuple[str, str | None]:
    """(backend, Ray address or None for a local instance) from `--ray [ADDRESS]`, `--backend`, `--ray-address`."""
    if ray is not None or ray_address is not None:
        if backend == "optuna":
            raise InputError("--backend optuna: --ray and --ray-address run on Ray; give one or the other")
        if ray and ray_address and ray != ray_address:
            raise InputError(f"--ray {ray} and --ray-address {ray_address}: two different clusters")
        return "ray", ray or ray_address or None
    return backend or "optuna", None


def check_backend(backend: str) -> None:
    if backend == "ray":
        ray_modules()
    elif backend != "optuna":
        raise ExperimentError(f"--backend: unknown backend {backend!r}")
