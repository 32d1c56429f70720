"""`laya-opt sweep --ray`: a local Ray instance with 2 workers runs a 4-trial grid sweep on the tiny checkpoint and
suite, and writes the study, trial directories and frontier the embedded runner writes for the same grid and seed."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("optuna")
ray = pytest.importorskip("ray", reason="Ray Tune is an optional extra (pip install 'laya-opt[ray]')")
pytest.importorskip("ray.tune", reason="Ray Tune is an optional extra (pip install 'laya-opt[ray]')")

from fake_passes import write_tiny_suite  # noqa: E402

from laya_opt.runs.history import history_path  # noqa: E402
from laya_opt.runs.sweep import JOURNAL, TRIALS, open_study, run_sweep  # noqa: E402
from laya_opt.runs.sweep_file import load_sweep  # noqa: E402
from laya_opt.runs.sweep_ray import PAYLOAD, SweepSearch, run_sweep_ray  # noqa: E402

# As in experiments/sweeps/quant_grid.yaml, with the smallest benchmark that still times short-1 end to end.
BENCH = {"workloads": ["short-1"], "requests": 2, "warmup": 0, "blocks": 1, "forward_only": False}
# Two trials run and two are pruned before any weight loads (excluding every module leaves nothing to
# quantize): each verdict, at half the cost of four runs. The rejected trial adds noise to the scorer (the
# test pass `noisy_scorer`, scale 5), which changes decisive answers on any checkpoint. The tiny checkpoint
# and suite keep the test near 30 s; on the stand-in and smoke it took two minutes of the suite's five.
SPACE = {"noisy_scorer.scale": {"type": "categorical", "choices": [0.0, 5.0]},
         "quantize_encoder.exclude": {"type": "categorical", "choices": [[], ["encoder."]]}}
TESTS_DIR = str(Path(__file__).resolve().parents[1])   # fake_passes, the base's plugin, for the Ray workers
# Timings differ between the runners (parallel trials, one BLAS thread each): everything else must not.
COMPARED = ("state", "settings", "passed", "decision_changes", "accuracy_delta", "failed_gates", "cut")


@pytest.fixture(scope="module")
def local_ray():
    path = os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning",
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


def write_sweep(tmp_path, checkpoint, name, **changes):
    base = {"name": "quant", "checkpoint": str(checkpoint), "candidate_dtype": "float32",
            "suites": [str(write_tiny_suite(tmp_path / "tiny.jsonl"))], "plugins": ["fake_passes"],
            "passes": [{"name": "noisy_scorer", "config": {"scale": 0.0}, "on_fail": "stop"},
                       {"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32, "eval_path": "auto"},
                        "on_fail": "stop"}],
            "benchmark": BENCH}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    raw = {"name": name, "base": "base.yaml", "space": SPACE, "objectives": ["speedup", "decision_changes"],
           "sampler": {"kind": "grid", "seed": 0}, "budget": {"trials": 4}, "output_dir": str(tmp_path / "sweeps"),
           **changes}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_sweep(path)


def compared(rows):
    return {row["number"]: {key: row.get(key) for key in COMPARED} for row in rows}


def history_runs() -> int:
    with sqlite3.connect(history_path()) as connection:
        return connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def test_a_ray_sweep_writes_the_study_and_frontier_of_the_embedded_runner_and_resumes(tmp_path, tiny_checkpoint_dir,
                                                                                     local_ray):
    import mlx.core as mx

    if mx.default_device().type != mx.DeviceType.cpu:
        pytest.skip("this test's 2 Ray workers are CPUs; MLX's default device here is a GPU")
    started = time.monotonic()
    embedded = run_sweep(write_sweep(tmp_path, tiny_checkpoint_dir, "embedded"))
    embedded_s = time.monotonic() - started
    sweep = write_sweep(tmp_path, tiny_checkpoint_dir, "on-ray")
    started = time.monotonic()
    first = run_sweep_ray(sweep, max_trials=2)  # stopped after two trials (one per worker) ...
    assert [row["number"] for row in first.rows] == [0, 1]
    outcome = run_sweep_ray(sweep, resume=True)  # ... and resumed: the other two, none again
    ray_s = time.monotonic() - started
    print(f"4 trials: embedded {embedded_s:.1f} s, Ray (2 workers, 2 invocations) {ray_s:.1f} s")

    assert sorted(row["state"] for row in embedded.rows) == ["COMPLETE", "COMPLETE", "PRUNED", "PRUNED"]
    assert sorted(bool(row["failed_gates"]) for row in embedded.rows if row["state"] == "COMPLETE") == [False, True]
    assert compared(outcome.rows) == compared(embedded.rows)  # same numbers, settings, verdicts, changes
    for key in ("front", "best", "closest_failing", "counts"):
        assert outcome.frontier[key] == embedded.frontier[key], key
    assert outcome.frontier["best"] is not None
    assert (yaml.safe_load(outcome.best_yaml.read_text())["passes"]
            == yaml.safe_load(embedded.best_yaml.read_text())["passes"])
    for name in ("frontier.md", "frontier.json", "frontier.png", JOURNAL):
        assert (outcome.results_dir / name).is_file(), name
    assert "on-ray" in json.loads((outcome.results_dir / "frontier.json").read_text())["sweep"]

    run = [row["number"] for row in outcome.rows if row["state"] == "COMPLETE"]
    published = sorted(path.name for path in (outcome.results_dir / TRIALS).iterdir())
    assert [name.rsplit("-", 1)[0] for name in published] == [f"on-ray-t{n:04d}" for n in run]
    assert not [path for path in outcome.results_dir.iterdir() if path.name.startswith(".ray")]  # Tune's scratch
    for row in (row for row in outcome.rows if row["run_dir"]):
        manifest = json.loads((outcome.results_dir / TRIALS / row["run_dir"].rsplit("/", 1)[-1]
                               / "manifest.json").read_text())
        # the workers found the reference the embedded run cached (one BLAS thread here and there: one key)
        assert manifest["reference"]["cache"]["status"] == "hit", row["number"]
    assert history_runs() == 4  # every run of both runners, two of them written from Ray workers


def test_the_search_records_pruned_cut_and_failed_worker_trials_like_the_embedded_runner(tmp_path, tiny_checkpoint_dir):
    # the driver's side alone (no cluster): what a worker reports becomes the study row
    sweep = write_sweep(tmp_path, tiny_checkpoint_dir, "recorded", space={
        "quantize_encoder.bits": {"type": "categorical", "choices": [8, 4, 5]}}, budget={"trials": 3})
    (sweep.results_dir / TRIALS).mkdir(parents=True)
    study = open_study(sweep, create=True)
    search = SweepSearch(sweep, study, deadline=None, say=lambda message: None, on_complete=lambda: None)
    configs = [search.suggest(f"t{index}") for index in range(3)]
    assert [config["laya_trial"] for config in configs] == [0, 1, 2]  # numbers from the study, in asking order
    assert sorted(config["laya_settings"]["quantize_encoder.bits"] for config in configs) == [4, 5, 8]
    search.on_trial_complete("t0", {PAYLOAD: json.dumps({"pruned": True, "note": "pruned: no"})})
    search.on_trial_complete("t1", {PAYLOAD: json.dumps({"cut": True, "note": "cut by the budget"})})
    search.on_trial_complete("t2", None, error=True)
    trials = study.get_trials(deepcopy=False)
    assert [trial.state.name for trial in trials] == ["PRUNED", "FAIL", "FAIL", "WAITING", "WAITING"]
    assert trials[1].user_attrs["cut"] and not trials[2].user_attrs.get("cut")
    assert "Ray worker failed" in trials[2].user_attrs["note"]
    queued = [trial.system_attrs["fixed_params"] for trial in trials[3:]]
    assert queued == [trials[1].params, trials[2].params]  # their settings queued for --resume

    # The requeued settings lose their worker again: the stack takes its process down, so it is recorded as
    # crashed and not queued a third time; a sampler proposing it later gets the crash at once.
    search.suggest("t3")   # trial 1's cut settings, queued first
    again = search.suggest("t4")
    assert again["laya_settings"] == configs[2]["laya_settings"] and again["laya_trial"] == 4
    search.on_trial_complete("t4", None, error=True)
    rows = study.get_trials(deepcopy=False)
    assert rows[4].state.name == "FAIL" and rows[4].user_attrs["crashed"]
    assert "failed on this stack twice (trials 2 and 4)" in rows[4].user_attrs["note"]
    assert not [row for row in rows if row.state.name == "WAITING"]   # nothing queued again
    study.enqueue_trial(trials[2].params)
    proposed = search.suggest("t5")
    assert proposed["laya_reuse"] and proposed["laya_settings"] == configs[2]["laya_settings"]
    search.on_trial_complete("t5", {PAYLOAD: json.dumps({"reused": True})})
    last = study.get_trials(deepcopy=False)[-1]
    assert last.state.name == "FAIL" and "whose process crashed: not run again" in last.user_attrs["note"]

    later = SweepSearch(sweep, study, deadline=time.time() - 1, say=lambda message: None, on_complete=lambda: None)
    assert later.suggest("t3") == "FINISHED"  # no trial starts after the deadline


def test_a_tune_checkpoint_restore_is_refused_naming_resume():
    from laya_opt.util.errors import InputError

    with pytest.raises(InputError, match="run the same `laya-opt sweep SWEEP_FILE --ray` with --resume"):
        SweepSearch.restore(None, "ckpt")  # Tuner.restore's path; the journal study is the record


def test_the_search_records_a_trial_whose_process_crashed_as_the_embedded_runner(tmp_path, tiny_checkpoint_dir):
    sweep = write_sweep(tmp_path, tiny_checkpoint_dir, "crashed", budget={"trials": 2})
    (sweep.results_dir / TRIALS).mkdir(parents=True)
    study = open_study(sweep, create=True)
    search = SweepSearch(sweep, study, deadline=None, say=lambda message: None, on_complete=lambda: None)
    search.suggest("t0")
    note = "crashed: the trial's process killed by signal SIGABRT (boom); its output: crashes/crashed-t0000.log"
    search.on_trial_complete("t0", {PAYLOAD: json.dumps({"crashed": True, "note": note})})
    rows = study.get_trials(deepcopy=False)
    assert [row.state.name for row in rows] == ["FAIL"]   # recorded, not queued: the worker lived on
    assert rows[0].user_attrs["crashed"] and rows[0].user_attrs["note"] == note


def test_a_ray_trial_runs_in_a_child_process_that_is_killed_past_the_deadline(tmp_path, tiny_checkpoint_dir,
                                                                            monkeypatch):
    # ray_trial alone (no cluster): the trial's process sits in a pass with no budget check (the `wait` test
    # pass, 120 s); it is killed CUT_GRACE_S (0 here) after the deadline and the trial reported cut.
    from laya_opt.runs import sweep as sweep_module
    from laya_opt.runs.sweep_ray import NUMBER, SETTINGS, ray_trial
    from laya_opt.runs.trial_process import sweep_files_digest

    marker = tmp_path / "waiting"
    base = {"name": "waits", "checkpoint": str(tiny_checkpoint_dir), "candidate_dtype": "float32",
            "suites": [str(write_tiny_suite(tmp_path / "tiny.jsonl"))], "plugins": ["fake_passes"],
            "passes": [{"name": "noisy_scorer", "config": {"scale": 0.0}, "on_fail": "stop"},
                       {"name": "wait", "config": {"marker": str(marker), "seconds": 120.0}}], "benchmark": BENCH}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    path = tmp_path / "waits.yaml"
    path.write_text(yaml.safe_dump({
        "name": "waits", "base": "base.yaml",
        "space": {"noisy_scorer.scale": {"type": "categorical", "choices": [0.0]}},
        "objectives": ["speedup", "decision_changes"], "sampler": {"kind": "grid", "seed": 0},
        "budget": {"trials": 1}, "output_dir": str(tmp_path / "sweeps")}))
    sweep = load_sweep(path)
    monkeypatch.chdir(tmp_path)   # ray_trial moves to the driver's directory
    monkeypatch.setattr(sweep_module, "CUT_GRACE_S", 0.0)
    reported = []
    monkeypatch.setattr(ray.tune, "report", reported.append)
    job = {"sweep_file": str(path), "output_dir": str(sweep.output_dir), "cwd": str(tmp_path),
           "digest": sweep_files_digest(sweep.source, sweep.base_path), "deadline": time.time() + 10,
           "metrics": ["speedup", "decision_changes"], "placeholder": [0.0, 0.0], "env": {}}
    started = time.monotonic()
    ray_trial({NUMBER: 0, SETTINGS: {"noisy_scorer.scale": 0.0}}, job)
    assert time.monotonic() - started < 60   # not the wait pass's 120 s
    payload = json.loads(reported[0][PAYLOAD])
    assert payload["cut"] and "cut by the budget" in payload["note"]
    if marker.exists():   # the wait pass had started: only the kill could stop it
        assert "its process was killed" in payload["note"]
        assert (sweep.results_dir / "cut" / "waits-t0000.log").is_file()
    trials = sweep.results_dir / TRIALS
    assert (sorted(p.name for p in trials.iterdir()) if trials.is_dir() else []) == []   # nothing published
