"""Run a sweep: an Optuna study whose trials are normal gated runs of the base experiment (`runner.run_experiment`).

The study lives in `<output_dir>/<name>/study.journal` (Optuna's journal file storage), each trial's results
directory in `<output_dir>/<name>/trials/<name>-tNNNN-<UTC>/`, published whole by the runner's staging rename.
Trials run one at a time, so timings stay clean, and share the reference cache, so the reference is
evaluated once per suite. A trial whose settings the pass contracts or prechecks refuse is pruned before
any weight loads; a trial whose gates fail is complete, with `passed: false` and a violated constraint,
and is never the best.

Killed and resumed (`--resume`): a trial left RUNNING in the journal whose results directory was published
(killed between publishing and recording) is recorded from that directory; one without a directory is
marked FAIL and its settings are queued again, so the resumed sweep ends with every trial once. Trial
numbers go on from where the study stopped. A lock file keeps two sweeps off one study.
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
from laya_opt.runs.sweep_file import ORDER, Param, Sweep, base_document
from laya_opt.util.errors import ExperimentError, InputError
from laya_opt.util.staging import replace_file

JOURNAL, LOCK, TRIALS, BEST_YAML = "study.journal", ".sweep.lock", "trials", "best.yaml"


def optuna_module():
    try:
        import optuna
    except ImportError:
        raise InputError("laya-opt sweep needs Optuna: pip install 'laya-opt[sweep]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


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
    passes = [dict(entry, config=dict(entry.get("config") or {})) for entry in document.get("passes") or []]
    for key, value in settings.items():
        if key == ORDER:
            continue
        pass_name, _, setting = key.partition(".")
        for entry in passes:
            if entry.get("name") == pass_name:
                entry["config"][setting] = value
    if ORDER in settings:
        passes = [passes[index] for index in settings[ORDER]]
    document.update(name=name, passes=passes)
    return document


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
    return optuna.samplers.TPESampler(seed=sweep.seed + done, constraints_func=lambda trial: trial.user_attrs.get(
        "constraint", [1.0]))


def open_study(sweep: Sweep, create: bool):
    optuna = optuna_module()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(sweep.results_dir / JOURNAL)))
    if create:
        return optuna.create_study(study_name=sweep.name, storage=storage, sampler=create_sampler(sweep),
                                   directions=sweep.directions)
    study = optuna.load_study(study_name=sweep.name, storage=storage, sampler=create_sampler(sweep))
    study.sampler = create_sampler(sweep, len(study.get_trials(deepcopy=False)))
    return study


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


def recover(study, sweep: Sweep, say: Callable[[str], None]) -> None:
    """Trials a killed sweep left RUNNING: recorded from their published directory, or failed and queued again."""
    optuna = optuna_module()
    from laya_opt.runs.report import load_results

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        directory = published_run(sweep, trial.number)
        storage = study._storage
        if directory is not None:
            metrics = run_metrics(load_results(directory).records, sweep)
            for key, value in {**metrics, "run_dir": str(directory), "constraint": [0.0 if metrics["passed"]
                                                                                     else 1.0]}.items():
                storage.set_trial_user_attr(trial._trial_id, key, value)
            study.tell(trial.number, objective_values(metrics, sweep))
            say(f"trial {trial.number}: recorded from {directory.name} (published before the sweep stopped)")
        else:
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            study.enqueue_trial(dict(trial.params))
            say(f"trial {trial.number}: interrupted before its results were published; its settings run again")


@dataclass(frozen=True)
class SweepOutcome:
    results_dir: Path
    rows: tuple[dict, ...]
    frontier: dict
    best_yaml: Path | None


def trial_rows(study) -> tuple[dict, ...]:
    rows = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        rows.append({"number": trial.number, "state": trial.state.name, "settings": attrs.get("settings", {}),
                     "passed": bool(attrs.get("passed")) if trial.state.name == "COMPLETE" else False,
                     **{key: attrs.get(key) for key in ("speedup", "decision_changes", "accuracy_delta",
                                                        "max_abs_dp", "stage", "run_dir", "note")},
                     "failed_gates": list(attrs.get("failed_gates") or ()),
                     "seconds": None if trial.duration is None else trial.duration.total_seconds()})
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
    meta = {"objectives": list(sweep.objectives), "sampler": sweep.sampler, "seed": sweep.seed,
            "speedup_label": f"p50 {sweep.speedup.mode} on {sweep.speedup.workload}",
            "base": str(sweep.base_path), "source": str(sweep.source)}
    frontier = write_frontier(sweep.results_dir, sweep.name, rows, meta)
    return SweepOutcome(sweep.results_dir, rows, frontier, write_best(sweep, best_trial(rows)))


def make_objective(sweep: Sweep, say: Callable[[str], None]):
    optuna = optuna_module()
    from laya_opt.runs.runner import run_experiment

    def objective(trial):
        settings = suggest(trial, sweep.params)
        trial.set_user_attr("settings", settings)
        try:
            experiment = trial_experiment(sweep, settings, trial_name(sweep, trial.number))
        except InputError as exc:
            trial.set_user_attr("note", f"pruned: {exc}")
            say(f"trial {trial.number}: pruned before any weight loaded ({exc})")
            raise optuna.TrialPruned(str(exc)) from None
        for earlier in trial.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if earlier.user_attrs.get("settings") == settings:  # a sampler may propose a point twice
                for key in ("passed", "failed_gates", "speedup", "decision_changes", "accuracy_delta", "max_abs_dp",
                            "stage", "run_dir", "constraint"):
                    trial.set_user_attr(key, earlier.user_attrs.get(key))
                trial.set_user_attr("note", f"same settings as trial {earlier.number}: its run is reused")
                return list(earlier.values)
        outcome = run_experiment(experiment, output_dir=sweep.results_dir / TRIALS, say=say)
        metrics = run_metrics(outcome.records, sweep)
        for key, value in {**metrics, "run_dir": str(outcome.results_dir),
                           "constraint": [0.0 if metrics["passed"] else 1.0]}.items():
            trial.set_user_attr(key, value)
        return objective_values(metrics, sweep)

    return objective


def remaining_trials(study, sweep: Sweep) -> int | None:
    if sweep.max_trials is None:
        return None
    optuna = optuna_module()
    done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                        optuna.trial.TrialState.PRUNED)))
    return max(0, sweep.max_trials - done)


def run_sweep(sweep: Sweep, *, resume: bool = False, say: Callable[[str], None] = lambda message: None,
              on_trial: Callable[[tuple[dict, ...], Sweep, float], None] | None = None,
              max_trials: int | None = None) -> SweepOutcome:
    """Run (or resume) the sweep in this process, one trial at a time, then write the frontier and best.yaml.

    `max_trials` caps the trials of this invocation (tests; a partial run then `--resume`)."""
    optuna_module()  # a clear error before anything is written when Optuna is missing
    create = prepare_directory(sweep, resume)
    started = time.monotonic()
    deadline = None if sweep.minutes is None else started + sweep.minutes * 60
    with sweep_lock(sweep.results_dir):
        study = open_study(sweep, create)
        if not create:
            recover(study, sweep, say)
        remaining = remaining_trials(study, sweep)
        if max_trials is not None:
            remaining = max_trials if remaining is None else min(remaining, max_trials)
        callbacks = [] if on_trial is None else [
            lambda study, trial: on_trial(trial_rows(study), sweep, time.monotonic() - started)]
        if sweep.sampler == "grid" and create_sampler(sweep).is_exhausted(study):
            say("the grid is exhausted; nothing left to run")
        elif remaining != 0:
            study.optimize(make_objective(sweep, say), n_trials=remaining,
                           timeout=None if deadline is None else max(0.0, deadline - time.monotonic()),
                           callbacks=callbacks, catch=())
    return report(sweep)


def outcome_json(outcome: SweepOutcome) -> dict:
    return json.loads(json.dumps({"results_dir": str(outcome.results_dir), "best": outcome.frontier["best"],
                                  "front": outcome.frontier["front"], "counts": outcome.frontier["counts"],
                                  "best_yaml": None if outcome.best_yaml is None else str(outcome.best_yaml)}))


def check_backend(backend: str) -> None:
    if backend == "ray":
        try:
            import ray  # noqa: F401
            from ray import tune  # noqa: F401
        except ImportError:
            raise InputError("--backend ray needs Ray Tune: pip install 'laya-opt[ray]'") from None
    elif backend != "optuna":
        raise ExperimentError(f"--backend: unknown backend {backend!r}")
