"""`laya-opt sweep --backend ray`: the sweep's trials in parallel under Ray Tune, Optuna still the sampler.

Each Ray trial runs the embedded sweep's trial path (`sweep.trial_experiment` and `runner.run_experiment`)
in a worker holding one whole device ({"gpu": 1} on CUDA, one CPU otherwise); the reference cache's
per-entry lock makes the workers share one reference evaluation. Ray Tune's OptunaSearch samples with the
sweep's sampler; every finished trial is then added to the sweep's own journal study, so the frontier,
best.yaml and `--report` are the embedded run's. Parallel trials share the machine, so their timings are
noisier than the embedded runner's one-at-a-time trials. `--resume` is not supported on Ray (a new study
continues numbering after the trials already in the journal).
"""
from __future__ import annotations

from typing import Callable

from laya_opt.runs.sweep import (TRIALS, create_sampler, objective_values, open_study, prepare_directory, report,
                                 run_metrics, suggest, trial_experiment, trial_name)
from laya_opt.runs.sweep_file import Sweep, load_sweep
from laya_opt.util.errors import InputError


def ray_trial(config: dict) -> dict:
    """One trial in a Ray worker: the settings OptunaSearch sampled, run as a normal gated run."""
    from laya_opt.runs.runner import run_experiment

    sweep = load_sweep(config["sweep_file"])
    settings, number = config["settings"], config["number"]
    try:
        experiment = trial_experiment(sweep, settings, trial_name(sweep, number))
    except InputError as exc:
        return {"pruned": str(exc), "settings": settings}
    outcome = run_experiment(experiment, output_dir=sweep.results_dir / TRIALS)
    metrics = run_metrics(outcome.records, sweep)
    return {**metrics, "run_dir": str(outcome.results_dir), "settings": settings,
            "values": objective_values(metrics, sweep)}


def run_sweep_ray(sweep: Sweep, *, resume: bool = False, address: str | None = None,
                  say: Callable[[str], None] = lambda message: None):
    if resume:
        raise InputError("--resume: not supported with --backend ray; resume with the embedded backend")
    import optuna
    import ray
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    import mlx.core as mx

    create = prepare_directory(sweep, resume)
    study = open_study(sweep, create)
    first = len(study.get_trials(deepcopy=False))
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    gpu = mx.default_device().type == mx.DeviceType.gpu
    names = {f"m{index}": name for index, name in enumerate(sweep.objectives)}

    def define(trial):
        suggest(trial, sweep.params)

    search = OptunaSearch(space=define, metric=list(names), mode=[d[:3] for d in sweep.directions],
                          sampler=create_sampler(sweep), seed=sweep.seed)

    def trainable(config):
        settings = config["__settings__"]
        result = ray_trial({"sweep_file": str(sweep.source), "settings": settings, "number": config["__number__"]})
        values = result.get("values") or [0.0] * len(names)
        return {**{key: value for key, value in zip(names, values)}, "payload": result}

    # OptunaSearch hands the sampled parameters; they become settings in the trainable's process
    def with_settings(config):
        fixed = optuna.trial.FixedTrial({key: value for key, value in config.items()})
        settings = suggest(fixed, sweep.params)
        return trainable({"__settings__": settings, "__number__": first + int(tune.get_context().get_trial_id()
                                                                                .split("_")[-1])})

    resources = {"gpu": 1} if gpu else {"cpu": 1}
    tuner = tune.Tuner(tune.with_resources(with_settings, resources),
                       tune_config=tune.TuneConfig(search_alg=search, num_samples=sweep.max_trials or -1,
                                                   time_budget_s=None if sweep.minutes is None else sweep.minutes * 60),
                       run_config=tune.RunConfig(storage_path=str((sweep.results_dir / "ray").resolve()),
                                                 verbose=0))
    results = tuner.fit()
    for result in results:
        payload = (result.metrics or {}).get("payload") or {}
        distributions = {}
        fixed = optuna.trial.FixedTrial(dict(result.config or {}))
        suggest(fixed, sweep.params)
        distributions = fixed.distributions
        attrs = {key: value for key, value in payload.items() if key not in ("values",)}
        if "pruned" in payload:
            trial = optuna.trial.create_trial(params=dict(result.config), distributions=distributions,
                                              state=optuna.trial.TrialState.PRUNED,
                                              user_attrs={"settings": payload["settings"],
                                                          "note": f"pruned: {payload['pruned']}"})
        else:
            attrs["constraint"] = [0.0 if payload.get("passed") else 1.0]
            trial = optuna.trial.create_trial(params=dict(result.config), distributions=distributions,
                                              values=payload["values"], user_attrs=attrs)
        study.add_trial(trial)
    say(f"{len(results)} Ray trials recorded in the study")
    return report(sweep)
