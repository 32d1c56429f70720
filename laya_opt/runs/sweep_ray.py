"""`laya-opt sweep --ray [ADDRESS]`: the sweep's trials in parallel under Ray Tune, Optuna still the sampler.

The driver (this process) holds the sweep's journal study, as the embedded runner does. Ray Tune's
`OptunaSearch` is given that study's storage, name and the sweep's sampler, so every trial it asks is a row
of the same study, numbered in asking order in the driver as the embedded runner numbers its trials (with
the grid sampler, trial N is the same grid point in both; TPE proposes while trials still run, so its
points can differ); the trial's settings, number and job go to a Ray worker that runs the embedded runner's trial
(`sweep.execute_trial`: a normal gated run published under `trials/<name>-tNNNN-<UTC>/`), and the driver
records what it reports on that study row. The frontier, best.yaml and `--report` are therefore the
embedded run's. The worker runs its trial in a child process, as the embedded runner does
(`sweep.isolated_trial`): a trial whose process dies is recorded as crashed, and one that reaches no budget
check within `CUT_GRACE_S` of the deadline is killed and cut. Each trial holds one whole device:
`{"gpu": 1}` when MLX's default device is a GPU, one CPU otherwise; at most as many trials run at once as the
cluster has devices. Parallel trials share the machine, so their timings are noisier than the embedded
runner's one-at-a-time trials.

Workers share the reference cache (a per-entry lock: the reference is evaluated once) and the run history
(SQLite in WAL mode): the driver's LAYA_OPT_* variables and working directory are handed to every trial.
On a cluster of several machines, the sweep's output_dir (and the cache, for sharing) must be on a
filesystem every node mounts. `--resume` works as it does embedded: RUNNING trials are recovered, queued
settings run first, finished trials are never run again. The budget's deadline is the same wall-clock
instant in every worker; no trial starts after it, and a running one is cut (`sweep.BudgetExhausted`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from laya_opt.runs.sweep import (SweepOutcome, clock, close_cut, create_sampler, earlier_crash, earlier_run,
                                 earlier_worker_failure, fail_and_requeue, isolated_trial, note_payload,
                                 objective_values, opened_sweep, optuna_module, ray_modules, report, suggest, tell,
                                 trial_rows)
from laya_opt.runs.sweep_file import Sweep, load_sweep
from laya_opt.runs.trial_process import sweep_files_digest
from laya_opt.util.errors import InputError
from laya_opt.util.system import mlx_backend

# Keys of a Tune trial's config (beside the Optuna parameters) and of what a worker reports.
NUMBER, SETTINGS, REUSE, PAYLOAD = "laya_trial", "laya_settings", "laya_reuse", "laya_payload"
ENV_PREFIX = "LAYA_OPT_"


def device_resources() -> tuple[dict[str, float], str]:
    """One whole device per trial: a GPU when MLX's default device is one, else one CPU; and Ray's name for it."""
    import mlx.core as mx

    if mx.default_device().type == mx.DeviceType.gpu:
        return {"gpu": 1}, "GPU"
    return {"cpu": 1}, "CPU"


def ray_trial(config: dict, job: dict) -> None:
    """One trial in a Ray worker: the settings the driver asked the study for, run as the embedded runner runs
    them; reports the payload the driver records (and the objectives, which Tune requires in every result)."""
    from ray import tune

    os.environ.update(job["env"])
    os.chdir(job["cwd"])  # Tune starts a trial in its own directory; the sweep's relative paths are the driver's
    if config.get(REUSE):
        payload: dict[str, Any] = {"reused": True}  # the driver copies the earlier trial's record
    else:   # in a child process, as embedded: a crash is a crashed trial, a trial past the deadline is killed
        sweep = dataclasses.replace(load_sweep(job["sweep_file"]), output_dir=Path(job["output_dir"]))
        payload = isolated_trial(sweep, config[SETTINGS], config[NUMBER], deadline=job["deadline"],
                                 digest=job["digest"], say=lambda message: None)
    # as JSON text: Tune flattens nested results before the searcher sees them
    tune.report({**dict(zip(job["metrics"], job["placeholder"])), PAYLOAD: json.dumps(payload)})


try:  # Ray is an optional extra: without it the class below is never used (`ray_modules` says why)
    from ray.tune.search import Searcher
    from ray.tune.search.optuna import OptunaSearch
except ImportError:
    Searcher = OptunaSearch = object


class SweepSearch(OptunaSearch):
    """Ray's OptunaSearch over the sweep's own study (its storage, name and sampler): trials are asked in the
    driver, in order, so their numbers and (for the grid) points are the embedded runner's; the driver then
    records what each worker reports on that study's row, as the embedded objective does."""

    # Tune pickles its searcher with the Tuner and in experiment checkpoints, for Tuner.restore. A sweep does
    # not use that (the journal study is the record; --resume continues it), so the live study stays out.
    LIVE = ("_sweep", "_study", "_say", "_on_complete", "_ot_study", "_ot_trials", "_storage", "_sampler", "_space")

    def __init__(self, sweep: Sweep, study, deadline: float | None, say: Callable[[str], None],
                 on_complete: Callable[[], None]):
        self._sweep, self._study, self._deadline, self._say, self._on_complete = (sweep, study, deadline, say,
                                                                                  on_complete)
        modes = ["max" if direction == "maximize" else "min" for direction in sweep.directions]
        super().__init__(space=self._define, metric=list(sweep.objectives), mode=modes,
                         sampler=create_sampler(sweep, len(study.get_trials(deepcopy=False))),
                         study_name=sweep.name, storage=study._storage)

    def __getstate__(self) -> dict:
        return {**self.__dict__, **dict.fromkeys(self.LIVE)}

    def save(self, checkpoint_path: str) -> None:
        """Nothing to write: the journal study already holds every trial (see LIVE)."""

    def restore(self, checkpoint_path: str) -> None:
        # Only Tuner.restore calls this, and a sweep never restores a Tune experiment: refuse, naming the way.
        raise InputError(f"{checkpoint_path}: a sweep is not restored from a Tune checkpoint; run the same "
                         "`laya-opt sweep SWEEP_FILE --ray` with --resume (the journal study is the record)")

    def _define(self, trial) -> dict:
        """Define-by-run, in the driver: `trial` wraps the asked Optuna trial of the journal study."""
        settings = suggest(trial, self._sweep.params)
        trial.set_user_attr("settings", settings)
        # a stack run before, or one that crashed, is not run again: the worker reports back at once
        reuse = (earlier_run(self._study, self._sweep, settings) is not None
                 or earlier_crash(self._study, self._sweep, settings) is not None)
        return {NUMBER: trial.number, SETTINGS: settings, REUSE: reuse}

    def suggest(self, trial_id: str):
        if self._deadline is not None and clock() >= self._deadline:
            return Searcher.FINISHED  # no trial starts after the deadline
        return super().suggest(trial_id)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._completed_trials:
            return
        optuna = optuna_module()
        study, say = self._study, self._say
        trial = self._ot_trials[trial_id]  # an optuna Trial of the journal study
        payload = json.loads((result or {}).get(PAYLOAD) or "null")
        settings = trial.user_attrs["settings"]
        reuse = bool((payload or {}).get("reused"))
        reused = earlier_run(study, self._sweep, settings) if reuse else None
        crashed = earlier_crash(study, self._sweep, settings) if reuse and reused is None else None
        if reused is not None:
            note_payload(trial, reused[0])
            tell(study, trial.number, reused[1])
        elif crashed is not None:
            self._crash(trial, f"same stack as trial {crashed}, whose process crashed: not run again")
        elif error or payload is None or reuse:
            failed_before = earlier_worker_failure(study, self._sweep, settings, trial.number)
            if failed_before is not None:
                # a second worker lost on one stack: the stack takes its process down (a CUDA fault, an abort)
                self._crash(trial, f"crashed: its Ray worker failed on this stack twice (trials {failed_before} "
                                   f"and {trial.number}); not run again")
            else:
                # the worker raised or died: as for a killed embedded trial, its settings run again (once)
                trial.set_user_attr("worker_failed", True)
                trial.set_user_attr("note", "its Ray worker failed (the error is above); its settings run again")
                fail_and_requeue(study, trial.number, "its Ray worker failed; its settings are queued for --resume",
                                 say)
        elif payload.get("crashed"):   # its trial process died in the worker (the worker lives on)
            self._crash(trial, payload["note"])
        else:
            note_payload(trial, payload)
            if payload.get("pruned"):
                tell(study, trial.number, state=optuna.trial.TrialState.PRUNED)
                say(f"trial {trial.number}: {payload['note']}")
            elif payload.get("cut"):
                close_cut(study, trial.number, say)
            else:
                tell(study, trial.number, objective_values(payload, self._sweep))
        self._completed_trials.add(trial_id)
        self._on_complete()

    def _crash(self, trial, note: str) -> None:
        """Recorded as the embedded runner records a trial whose child process died: FAIL, `crashed`, no queue."""
        trial.set_user_attr("crashed", True)
        trial.set_user_attr("note", note)
        tell(self._study, trial.number, state=optuna_module().trial.TrialState.FAIL)
        self._say(f"trial {trial.number}: {note}")


def run_trials(tune, sweep: Sweep, study, count: int | None, devices: int, resources: dict, deadline: float | None,
               say: Callable[[str], None], progress: Callable[[], None] | None) -> None:
    """Up to `count` trials (None: until the deadline) under Tune, at most one per device at a time."""
    job = {"sweep_file": str(sweep.source.resolve()), "output_dir": str(sweep.output_dir.resolve()),
           "digest": sweep_files_digest(sweep.source, sweep.base_path),
           "cwd": os.getcwd(), "deadline": deadline, "metrics": list(sweep.objectives),
           "placeholder": [0.0] * len(sweep.objectives),
           "env": {key: value for key, value in os.environ.items() if key.startswith(ENV_PREFIX)}}
    search = SweepSearch(sweep, study, deadline, say, progress or (lambda: None))
    # Tune's console table repeats the progress lines (its legacy reporter honours verbose=0); its own
    # bookkeeping goes in a hidden scratch directory, removed at the end (the study is the record).
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    scratch = Path(tempfile.mkdtemp(prefix=".ray-", dir=sweep.results_dir)).resolve()
    try:
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(ray_trial, job=job), resources),
            tune_config=tune.TuneConfig(search_alg=search, num_samples=-1 if count is None else count,
                                        max_concurrent_trials=devices, reuse_actors=True),
            run_config=tune.RunConfig(name="sweep", storage_path=str(scratch), verbose=0))
        for result in tuner.fit():
            if result.error is not None:
                say(f"a Ray trial failed: {type(result.error).__name__}: {result.error}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_sweep_ray(sweep: Sweep, *, resume: bool = False, address: str | None = None,
                  say: Callable[[str], None] = lambda message: None,
                  on_trial: Callable[[tuple[dict, ...], Sweep, float], None] | None = None,
                  max_trials: int | None = None) -> SweepOutcome:
    """Run (or resume) the sweep's trials on Ray (a local instance, or the cluster at `address`), then write
    the frontier and best.yaml. A Ray already initialised in this process (a test's) is used as it is."""
    ray, tune, _ = ray_modules()  # a clear error before anything is written when Ray is missing
    optuna_module()
    resources, device = device_resources()
    owned = not ray.is_initialized()
    if owned:  # joined before the sweep's directory is touched: a wrong address leaves nothing behind
        local = {"include_dashboard": False}
        if device == "GPU" and mlx_backend() == "metal":
            local["num_gpus"] = 1  # Ray detects CUDA GPUs only; a Mac's one GPU is declared here
        try:
            ray.init(address=address, log_to_driver=False, logging_level="warning", **({} if address else local))
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"--ray {address or '(local)'}: cannot start or join Ray: {exc}") from None
    try:
        devices = int(ray.cluster_resources().get(device, 0))
        if devices < 1:
            raise InputError(f"--ray: the Ray cluster has no {device} for a trial ({device} is MLX's default "
                             "device here; a Mac's GPU is declared with `ray start --num-gpus=1`)")
        with opened_sweep(sweep, resume, say, max_trials) as (study, count, started, deadline):
            if count == 0:
                say("nothing left to run")
            else:
                say(f"Ray: {devices} {device} worker(s), one trial per {device}")
                run_trials(tune, sweep, study, count, devices, resources, deadline, say,
                           None if on_trial is None else lambda: on_trial(trial_rows(study), sweep,
                                                                          clock() - started))
    finally:
        if owned:
            ray.shutdown()
    return report(sweep)
