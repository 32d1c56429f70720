"""`laya-opt sweep`: small sweeps on the tiny checkpoint and suite (a few trials each), resume, best.yaml, bad files."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fake_passes import write_tiny_suite
from processes import process_alive, signal_once_marked

from laya_opt.cli import main
from laya_opt.runs import sweep as sweep_module
from laya_opt.runs.sweep import (JOURNAL, TRIALS, BudgetExhausted, budget_check, execute_trial, open_study, report,
                                 run_sweep, sweep_lock, trial_rows)
from laya_opt.runs.sweep_file import load_sweep
from laya_opt.util.errors import ExperimentError, InputError

pytest.importorskip("optuna")

BENCH = {"workloads": ["short-1"], "requests": 2, "warmup": 0, "blocks": 1, "forward_only": False}


@pytest.fixture
def base_file(tmp_path, tiny_checkpoint_dir):
    raw = {"name": "tiny-base", "checkpoint": str(tiny_checkpoint_dir), "candidate_dtype": "float32",
           "suites": [str(write_tiny_suite(tmp_path / "tiny.jsonl"))], "plugins": ["fake_passes"],
           "passes": [{"name": "noisy_scorer", "config": {"scale": 0.0}, "on_fail": "stop"}], "benchmark": BENCH,
           "output_dir": str(tmp_path / "runs")}
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def write_sweep(tmp_path, base_file, **changes):
    raw = {"name": "tiny-sweep", "base": base_file.name,
           "space": {"noisy_scorer.scale": {"type": "categorical", "choices": [5.0, 0.0]}},
           "objectives": ["speedup", "decision_changes"], "sampler": {"kind": "grid", "seed": 0},
           "budget": {"trials": 4}, "output_dir": str(tmp_path / "sweeps"), **changes}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def add_wait_pass(base_file: Path, marker: Path, seconds: float, release: Path | None = None) -> dict:
    """Append the `wait` test pass to the base experiment (it writes `marker`, then sleeps unless `release`
    exists); returns the document."""
    raw = yaml.safe_load(base_file.read_text())
    config = {"marker": str(marker), "seconds": seconds, **({"release": str(release)} if release else {})}
    raw["passes"].append({"name": "wait", "config": config})
    base_file.write_text(yaml.safe_dump(raw))
    return raw


def start_sweep_process(path: Path) -> subprocess.Popen:
    """`laya-opt sweep PATH --quiet` in a process of its own, with fake_passes (the base's plugin) importable."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "laya_opt.cli", "sweep", str(path), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_failing_trial_is_recorded_but_never_best_and_best_yaml_reproduces(tmp_path, base_file):
    sweep = load_sweep(write_sweep(tmp_path, base_file))
    outcome = run_sweep(sweep)
    rows = {row["settings"]["noisy_scorer.scale"]: row for row in outcome.rows}
    assert len(outcome.rows) == 2  # the grid is exhausted after 2 of the 4 allowed trials
    assert rows[5.0]["state"] == "COMPLETE" and not rows[5.0]["passed"] and rows[5.0]["failed_gates"]
    assert rows[0.0]["passed"] and rows[0.0]["decision_changes"] == 0
    assert outcome.frontier["best"] == rows[0.0]["number"] and outcome.frontier["front"] == [rows[0.0]["number"]]
    for name in ("frontier.md", "frontier.json", "frontier.png", "best.yaml"):
        assert (outcome.results_dir / name).is_file(), name
    assert "FAIL" in (outcome.results_dir / "frontier.md").read_text()
    best = yaml.safe_load(outcome.best_yaml.read_text())
    assert best["passes"][0]["config"]["scale"] == 0.0
    result = CliRunner().invoke(main, ["run", str(outcome.best_yaml), "--json", "--output-dir",
                                       str(tmp_path / "again")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    again = json.loads(result.output)
    assert again["stages"][-1]["verdict"] == "accepted"


def test_nothing_passing_still_writes_the_front_with_the_closest_trials(tmp_path, base_file):
    sweep = load_sweep(write_sweep(tmp_path, base_file, space={
        "noisy_scorer.scale": {"type": "categorical", "choices": [5.0]}}))
    outcome = run_sweep(sweep)
    assert outcome.frontier["best"] is None and outcome.best_yaml is None
    assert outcome.frontier["closest_failing"] == [0]
    assert "No trial passed the gates.** The closest trials: 0." in (outcome.results_dir / "frontier.md").read_text()


def test_resume_continues_numbering_and_skips_done_trials(tmp_path, base_file):
    path = write_sweep(tmp_path, base_file, sampler={"kind": "random", "seed": 3}, budget={"trials": 3},
                       space={"noisy_scorer.seed": {"type": "int", "low": 0, "high": 1000}})
    sweep = load_sweep(path)
    run_sweep(sweep, max_trials=1)  # stopped after one trial
    # a trial killed mid-run: RUNNING in the journal, nothing published
    study = open_study(sweep, create=False)
    killed = study.ask()
    killed.suggest_int("noisy_scorer.seed", 0, 1000)
    with pytest.raises(InputError, match="--resume continues it"):
        run_sweep(sweep)  # without --resume the existing study is refused
    outcome = run_sweep(sweep, resume=True)
    rows = outcome.rows
    assert [row["number"] for row in rows] == [0, 1, 2, 3]  # numbering goes on after the killed trial
    assert [row["state"] for row in rows] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    published = sorted(p.name for p in (sweep.results_dir / TRIALS).iterdir() if not p.name.startswith("."))
    assert len(published) == 3 and all(f"t{number:04d}" in " ".join(published) for number in (0, 2, 3))
    assert (sweep.results_dir / JOURNAL).is_file()
    assert run_sweep(sweep, resume=True).rows == tuple(trial_rows(open_study(sweep, create=False)))


def test_resume_refuses_a_study_whose_base_space_or_gates_changed_and_allows_a_new_budget(tmp_path, base_file):
    from laya_opt.runs.sweep import DEFINITION

    path = write_sweep(tmp_path, base_file, budget={"trials": 1})
    run_sweep(load_sweep(path))
    raw = yaml.safe_load(path.read_text())
    raw["budget"] = {"trials": 2, "minutes": 5}       # more time, elsewhere: the same study
    raw["output_dir"] = str(tmp_path / "moved")
    shutil.copytree(tmp_path / "sweeps", tmp_path / "moved")
    path.write_text(yaml.safe_dump(raw))
    assert [row["state"] for row in run_sweep(load_sweep(path), resume=True).rows] == ["COMPLETE", "COMPLETE"]
    base = yaml.safe_load(base_file.read_text())
    for change, named in ((lambda b, s: b.update(batch_size=4), "batch_size"),
                          (lambda b, s: b["passes"][0].update(on_fail="reject"), "passes"),
                          (lambda b, s: s["space"]["noisy_scorer.scale"].update(choices=[5.0, 0.5]), "space"),
                          (lambda b, s: b.update(gates={"cumulative": ["max_abs_dp <= 0.5"]}),
                           "gates")):
        changed_base, changed_sweep = copy.deepcopy(base), copy.deepcopy(raw)
        change(changed_base, changed_sweep)
        base_file.write_text(yaml.safe_dump(changed_base))
        path.write_text(yaml.safe_dump(changed_sweep))
        with pytest.raises(InputError, match=f"--resume: .*: {named} changed since it began; give the sweep another"):
            run_sweep(load_sweep(path), resume=True)
    base_file.write_text(yaml.safe_dump(base))
    path.write_text(yaml.safe_dump(raw))
    sweep = load_sweep(path)
    open_study(sweep, create=False).set_user_attr(DEFINITION, None)   # as a study made before definitions
    notes = []
    run_sweep(sweep, resume=True, say=notes.append)
    assert any("records no definition" in note for note in notes)


def test_illegal_settings_are_pruned_before_any_weight_loads(tmp_path, tiny_checkpoint_dir):
    raw = {"name": "tiny-quant", "checkpoint": str(tiny_checkpoint_dir), "candidate_dtype": "float32",
           "suites": [str(write_tiny_suite(tmp_path / "tiny.jsonl"))],
           "passes": [{"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32}}]}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    sweep = load_sweep(write_sweep(tmp_path, tmp_path / "base.yaml", objectives=["decision_changes"],
                                   space={"quantize_encoder.group_size": {"type": "categorical",
                                                                          "choices": [64]}}))
    outcome = run_sweep(sweep)
    assert [row["state"] for row in outcome.rows] == ["PRUNED"]
    assert "pruned" in outcome.rows[0]["note"]
    assert not [p for p in (sweep.results_dir / TRIALS).iterdir() if not p.name.startswith(".")]


@pytest.mark.parametrize("change, message", [
    ({"space": {"nope.bits": {"type": "categorical", "choices": [8]}}}, "space.nope.bits: unknown pass 'nope'"),
    ({"space": {"noisy_scorer.scale": {"type": "float", "low": 2.0, "high": 1.0}}},
     "space.noisy_scorer.scale: low 2.0 is above high 1.0"),
    ({"space": {"noisy_scorer.volume": {"type": "categorical", "choices": [1]}}},
     "pass noisy_scorer has no setting 'volume'"),
    ({"colour": "red"}, "colour"),
    ({"sampler": {"kind": "annealing"}}, "sampler.kind: unknown sampler 'annealing'"),
    ({"objectives": ["speed"]}, "objectives[0]: unknown objective 'speed'"),
    ({"budget": {}}, "budget: give `trials`, `minutes` or both"),
    ({"space": {"noisy_scorer.scale": {"type": "float", "low": 0.0, "high": 1.0}}}, "a float range has no grid"),
    ({"base": "missing.yaml"}, "base: experiment file"),
])
def test_bad_sweep_files_are_refused_naming_the_key(tmp_path, base_file, change, message):
    path = write_sweep(tmp_path, base_file, **change)
    with pytest.raises(ExperimentError) as caught:
        load_sweep(path)
    assert message in str(caught.value) and str(path) in str(caught.value)
    result = CliRunner().invoke(main, ["sweep", str(path)], catch_exceptions=False)
    assert result.exit_code == 2 and "error:" in result.output
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("options", [["--ray"], ["--ray=auto"], ["--backend", "ray"], ["--ray-address", "auto"]])
def test_ray_backend_without_ray_is_one_error_line(tmp_path, base_file, monkeypatch, options):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if Ray were not installed: import fails
    result = CliRunner().invoke(main, ["sweep", str(write_sweep(tmp_path, base_file)), *options])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "pip install 'laya-opt[ray]'" in lines[0]
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("options, message", [
    (["--ray", "--backend", "optuna"], "--backend optuna: --ray and --ray-address run on Ray"),
    (["--ray=a:1", "--ray-address", "b:2"], "two different clusters"),
    (["--backend", "ray", "--in-process"], "--in-process runs the embedded backend's trials"),
])
def test_contradicting_backend_options_are_refused(tmp_path, base_file, options, message):
    result = CliRunner().invoke(main, ["sweep", str(write_sweep(tmp_path, base_file)), *options])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "sweeps").exists()


def test_budget_check_follows_the_clock():
    assert budget_check(None) is None
    budget_check(time.time() + 60)()  # time left: nothing raised
    with pytest.raises(BudgetExhausted):
        budget_check(time.time() - 1)()


def test_a_trial_started_past_the_deadline_is_cut_before_any_weight_loads(tmp_path, base_file):
    sweep = load_sweep(write_sweep(tmp_path, base_file))
    (sweep.results_dir / TRIALS).mkdir(parents=True)
    payload = execute_trial(sweep, {"noisy_scorer.scale": 0.0}, 0, deadline=time.time() - 1)
    assert payload["cut"] and "cut by the budget" in payload["note"] and "passed" not in payload
    assert not list((sweep.results_dir / TRIALS).iterdir())  # nothing published, no staging left


def test_a_trial_process_that_reaches_no_budget_check_is_killed_and_cut(tmp_path, base_file):
    # The GPU study of 2026-12-06 overran its budget: a trial compiling on a cold GPU reached no check for minutes.
    from laya_opt.runs.trial_process import run_in_child, sweep_files_digest

    marker = tmp_path / "waiting"
    add_wait_pass(base_file, marker, 120.0)
    sweep = load_sweep(write_sweep(tmp_path, base_file))
    trials = sweep.results_dir / TRIALS
    started = time.monotonic()
    payload = run_in_child(sweep, {"noisy_scorer.scale": 0.0}, 0, "t0", deadline=None, say=lambda m: None,
                           digest=sweep_files_digest(sweep.source, sweep.base_path), trials_dir=trials,
                           kill_at=time.time() + 3, cut=sweep_module.cut_payload(sweep, "; killed"))
    assert time.monotonic() - started < 60   # not the wait pass's 120 s
    cut = sweep_module.cut_payload(sweep, "; killed")
    assert payload == {**cut, "note": cut["note"] + "; its output: cut/t0.log"}
    assert "cut by the budget" in payload["note"]
    # What it printed before it was killed, timed, says where its time went.
    log = (sweep.results_dir / "cut" / "t0.log").read_text()
    assert log.startswith("# printed") and "# stderr" in log
    assert re.search(r"^\[ *\d+\.\d\] .*noisy_scorer", log, re.M), log
    if marker.exists():
        assert not process_alive(int(marker.read_text()))
    assert (sorted(p.name for p in trials.iterdir()) if trials.is_dir() else []) == []
    assert not (sweep.results_dir / "crashes").exists()


def test_a_trial_process_cut_at_its_own_budget_check_keeps_its_log(tmp_path, base_file):
    # The GPU study of 2026-12-08 cut trial 0 at a budget check after 8.7 minutes and kept nothing of where they went.
    from laya_opt.runs.trial_process import run_in_child, sweep_files_digest

    marker = tmp_path / "waiting"
    add_wait_pass(base_file, marker, 5.0)   # the deadline passes while it waits, between stages
    sweep = load_sweep(write_sweep(tmp_path, base_file))
    trials = sweep.results_dir / TRIALS
    payload = run_in_child(sweep, {"noisy_scorer.scale": 0.0}, 0, "t0", deadline=time.time() + 3,
                           say=lambda m: None, digest=sweep_files_digest(sweep.source, sweep.base_path),
                           trials_dir=trials, kill_at=None)
    assert payload["cut"] and "cut by the budget" in payload["note"]
    assert payload["note"].endswith("; its output: cut/t0.log")
    log = (sweep.results_dir / "cut" / "t0.log").read_text()
    assert log.startswith("# printed") and "# stderr" in log
    if marker.exists():   # it reached the wait pass (a slow start can pass the deadline before): what came first
        assert re.search(r"^\[ *\d+\.\d\] .*noisy_scorer", log, re.M), log
    assert (sorted(p.name for p in trials.iterdir()) if trials.is_dir() else []) == []


def test_a_trial_running_when_the_budget_runs_out_is_cut_and_resume_runs_it_again(tmp_path, base_file, monkeypatch):
    marker = tmp_path / "waited"
    add_wait_pass(base_file, marker, 0.0)
    space = {"noisy_scorer.scale": {"type": "categorical", "choices": [5.0, 0.0]}}
    path = write_sweep(tmp_path, base_file, space=space, budget={"trials": 4, "minutes": 10})
    start = time.time()
    # the clock jumps past the deadline once the first trial is inside its wait pass (its second stage)
    monkeypatch.setattr(sweep_module, "clock", lambda: start + (3600 if marker.exists() else 0))
    # in this process: the patched clock must reach the trial
    result = CliRunner().invoke(main, ["sweep", str(path), "--in-process"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "1 cut by the budget" in result.output and "trial 0 cut by the budget" in result.output
    assert "no trial finished before the budget ran out" in result.output
    sweep = load_sweep(path)
    rows = trial_rows(open_study(sweep, create=False))
    assert [(row["state"], row["cut"], row["passed"]) for row in rows] == [("FAIL", True, False)]
    assert not [p for p in (sweep.results_dir / TRIALS).iterdir()]  # the cut run published nothing
    frontier = json.loads((sweep.results_dir / "frontier.json").read_text())
    assert frontier["counts"]["cut"] == 1 and frontier["counts"]["passed"] == 0 and frontier["best"] is None
    assert frontier["closest_failing"] == []  # cut is not rejected
    assert "Cut by the budget" in (sweep.results_dir / "frontier.md").read_text()
    assert "cut (budget)" in (sweep.results_dir / "frontier.md").read_text()
    assert "None was judged either: no trial finished" in (sweep.results_dir / "frontier.md").read_text()

    monkeypatch.setattr(sweep_module, "clock", time.time)
    marker.unlink()
    outcome = run_sweep(sweep, resume=True)  # a fresh budget: the cut settings run first, then the rest
    rows = outcome.rows
    assert [(row["number"], row["state"]) for row in rows] == [(0, "FAIL"), (1, "COMPLETE"), (2, "COMPLETE")]
    assert rows[1]["settings"] == rows[0]["settings"]
    assert sorted(row["settings"]["noisy_scorer.scale"] for row in rows[1:]) == [0.0, 5.0]  # each point once
    assert outcome.frontier["counts"]["cut"] == 1 and outcome.frontier["best"] is not None
    assert run_sweep(sweep, resume=True).rows == rows  # nothing left: the grid is done, nothing runs twice


def test_tpe_sees_each_trials_gate_verdict_as_its_constraint(tmp_path, base_file):
    import optuna

    sweep = load_sweep(write_sweep(tmp_path, base_file, sampler={"kind": "tpe", "seed": 0}, budget={"trials": 3}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)   # optuna 5 deprecates constraints_func
        rows = run_sweep(sweep).rows
    frozen = {trial.number: trial for trial in open_study(sweep, create=False).get_trials()}
    assert {row["settings"]["noisy_scorer.scale"] for row in rows} == {0.0, 5.0}
    for row in rows:
        constraint = 0.0 if row["passed"] else 1.0
        assert frozen[row["number"]].user_attrs["constraint"] == [constraint]
        if hasattr(optuna.trial.Trial, "set_constraint"):
            assert frozen[row["number"]].constraints == {"gates": constraint}


def test_a_sweep_killed_mid_trial_resumes_with_every_finished_trial_once(tmp_path, base_file):
    marker, release = tmp_path / "waiting", tmp_path / "released"
    add_wait_pass(base_file, marker, 120.0, release)
    path = write_sweep(tmp_path, base_file)
    sweeping = start_sweep_process(path)
    # killed inside the first trial's wait pass: its reference is done, nothing published
    signal_once_marked(sweeping, marker, 120, "the sweep reaching its first trial's wait pass")
    # the trial ran in a child process of the sweep, which ends itself once the sweep is gone
    trial_pid, deadline = int(marker.read_text()), time.monotonic() + 10
    assert trial_pid != sweeping.pid
    while process_alive(trial_pid):
        assert time.monotonic() < deadline, "the trial's process outlived the killed sweep"
        time.sleep(0.1)
    sweep = load_sweep(path)
    assert [row["state"] for row in trial_rows(open_study(sweep, create=False))] == ["RUNNING"]
    with sweep_lock(sweep.results_dir):   # a sweep holds the study: its RUNNING trial may be running
        assert [row.get("interrupted") for row in report(sweep).rows] == [None]
    stopped = report(sweep)                # no sweep holds it: the trial was interrupted, and says so
    assert [row.get("interrupted") for row in stopped.rows] == [True]
    assert "| 0 | interrupted |" in (sweep.results_dir / "frontier.md").read_text()

    release.touch()  # the resumed trials do not wait (the base is unchanged: --resume refuses a changed one)
    outcome = run_sweep(sweep, resume=True)
    assert [(row["number"], row["state"]) for row in outcome.rows] == [(0, "FAIL"), (1, "COMPLETE"), (2, "COMPLETE")]
    assert outcome.rows[1]["settings"] == outcome.rows[0]["settings"]  # the killed trial's settings, run again
    assert sorted(row["settings"]["noisy_scorer.scale"] for row in outcome.rows[1:]) == [0.0, 5.0]
    left = sorted(p.name for p in (sweep.results_dir / TRIALS).iterdir())
    assert len(left) == 2 and not [name for name in left if name.startswith(".")]  # the killed staging is gone


def test_a_sweep_terminated_mid_trial_exits_143_with_its_trial_ended_and_no_staging_left(tmp_path, base_file):
    # The GPU study of 2026-12-06: `timeout` ended the sweep mid-trial, and the killed trial's staging directory
    # was still there when the sweep had exited saying nothing half-written was left behind.
    marker = tmp_path / "waiting"
    add_wait_pass(base_file, marker, 120.0)
    path = write_sweep(tmp_path, base_file)
    code = signal_once_marked(start_sweep_process(path), marker, 120, "the sweep reaching its first trial's wait pass",
                              signal.SIGTERM)
    assert code == 143
    assert not process_alive(int(marker.read_text()))   # ended by the sweep, not later by its watchdog
    trials = load_sweep(path).results_dir / TRIALS
    assert (sorted(p.name for p in trials.iterdir()) if trials.is_dir() else []) == []
    assert not [p for p in trials.parent.iterdir() if p.name.startswith(".trial-")]


def test_a_trial_that_kills_its_process_is_recorded_as_crashed_and_the_sweep_goes_on(tmp_path, base_file):
    raw = yaml.safe_load(base_file.read_text())
    raw["passes"].append({"name": "crash"})
    base_file.write_text(yaml.safe_dump(raw))
    path = write_sweep(tmp_path, base_file, space={"crash.enabled": {"type": "categorical", "choices": [True, False]}})
    result = CliRunner().invoke(main, ["sweep", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "1 crashed" in result.output and "killed by signal SIGABRT" in result.output
    sweep = load_sweep(path)
    rows = {row["settings"]["crash.enabled"]: row for row in trial_rows(open_study(sweep, create=False))}
    crashed, clean = rows[True], rows[False]
    assert crashed["state"] == "FAIL" and crashed["crashed"] and not crashed["passed"] and crashed["run_dir"] is None
    assert clean["state"] == "COMPLETE" and clean["passed"] and not clean["crashed"]
    log = sweep.results_dir / "crashes" / f"tiny-sweep-t{crashed['number']:04d}.log"
    assert f"crashes/{log.name}" in crashed["note"] and log.is_file()
    assert "# printed" in log.read_text() and "# stderr" in log.read_text()
    assert [p.name for p in (sweep.results_dir / TRIALS).iterdir()] == [Path(clean["run_dir"]).name]  # no staging
    assert not [p for p in sweep.results_dir.iterdir() if p.name.startswith(".trial-")]
    frontier = json.loads((sweep.results_dir / "frontier.json").read_text())
    assert frontier["counts"]["crashed"] == 1 and frontier["best"] == clean["number"]
    assert "Crashed" in (sweep.results_dir / "frontier.md").read_text()
    # The same settings again (a sampler may propose them twice): failed at once, not run again.
    study = open_study(sweep, create=False)
    study.enqueue_trial({"crash.enabled": 0})   # categorical settings are sampled as indices: True
    rows = run_sweep(sweep, resume=True, max_trials=1).rows
    assert rows[-1]["crashed"] and f"same stack as trial {crashed['number']}" in rows[-1]["note"]
    assert len(list((sweep.results_dir / "crashes").iterdir())) == 1


def test_a_trial_process_refuses_a_sweep_file_changed_since_the_sweep_read_it(tmp_path, base_file):
    from laya_opt.runs.trial_process import run_in_child, sweep_files_digest

    path = write_sweep(tmp_path, base_file)
    sweep = load_sweep(path)
    digest = sweep_files_digest(sweep.source, sweep.base_path)
    base_file.write_text(base_file.read_text() + "\n# edited\n")
    payload = run_in_child(sweep, {"noisy_scorer.scale": 0.0}, 0, "t0", deadline=None, say=lambda m: None,
                           digest=digest, trials_dir=sweep.results_dir / TRIALS)
    assert payload["crashed"] and "exited with code 2" in payload["note"] and "changed since the sweep read" in \
        payload["note"]


def test_a_pass_subset_drops_the_disabled_pass_and_best_yaml_leaves_it_out(tmp_path, base_file):
    # noisy_scorer at scale 5 fails its gates: the subset without it (stage 0 alone) is the passing trial.
    sweep = load_sweep(write_sweep(tmp_path, base_file, space={
        "noisy_scorer.enabled": {"type": "categorical", "choices": [True, False]},
        "noisy_scorer.scale": {"type": "categorical", "choices": [5.0]}}))
    outcome = run_sweep(sweep)
    rows = {row["settings"]["noisy_scorer.enabled"]: row for row in outcome.rows}
    assert set(rows) == {True, False} and not rows[True]["passed"] and rows[False]["passed"]
    assert rows[True]["failed_gates"] and not rows[False]["failed_gates"]
    best = yaml.safe_load(outcome.best_yaml.read_text())
    assert outcome.frontier["best"] == rows[False]["number"] and best["passes"] == []


def test_settings_of_a_disabled_pass_change_nothing_so_its_run_is_reused(tmp_path, base_file):
    sweep = load_sweep(write_sweep(tmp_path, base_file, space={
        "noisy_scorer.enabled": {"type": "categorical", "choices": [False, True]},
        "noisy_scorer.scale": {"type": "categorical", "choices": [0.0, 0.5]}}))
    rows = run_sweep(sweep, isolate=False).rows
    assert len(rows) == 4 and all(row["state"] == "COMPLETE" for row in rows)
    off = [row for row in rows if not row["settings"]["noisy_scorer.enabled"]]
    first, second = sorted(off, key=lambda row: row["number"])
    assert second["note"] == f"same stack as trial {first['number']}: its run is reused"
    assert second["run_dir"] == first["run_dir"] and second["speedup"] == first["speedup"]
    runs = sorted(p.name for p in (sweep.results_dir / TRIALS).iterdir())
    assert len(runs) == 3   # two stacks with the pass (scales 0 and 0.5), one without it
    on = [row for row in rows if row["settings"]["noisy_scorer.enabled"]]
    assert len({row["run_dir"] for row in on}) == 2   # enabled, its scale matters


def test_trial_document_drops_disabled_passes_after_applying_the_order(tmp_path, base_file):
    from laya_opt.runs.sweep import trial_document

    sweep = load_sweep(write_sweep(tmp_path, base_file))
    kept = trial_document(sweep, {"noisy_scorer.enabled": True, "noisy_scorer.scale": 0.5}, "t")
    assert [(e["name"], e["config"]["scale"]) for e in kept["passes"]] == [("noisy_scorer", 0.5)]
    assert "enabled" not in kept["passes"][0]["config"]  # not a pass setting: never reaches the config
    assert trial_document(sweep, {"noisy_scorer.enabled": False}, "t")["passes"] == []


@pytest.mark.parametrize("entry", [
    {"type": "categorical", "choices": ["yes", "no"]},
    {"type": "categorical", "choices": [1, 0]},
    {"type": "int", "low": 0, "high": 1},
])
def test_enabled_takes_true_and_false_only(tmp_path, base_file, entry):
    path = write_sweep(tmp_path, base_file, space={"noisy_scorer.enabled": entry})
    with pytest.raises(ExperimentError, match=r"space\.noisy_scorer\.enabled: `enabled` keeps or drops the pass"):
        load_sweep(path)


SHIPPED_SWEEPS = sorted((Path(__file__).resolve().parents[2] / "experiments" / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED_SWEEPS, ids=lambda path: path.name)
def test_every_shipped_sweep_file_loads(path):
    sweep = load_sweep(path)
    assert sweep.params and sweep.base.steps
    assert sweep.sampler != "grid" or sweep.grid_size() >= 1


def test_trials_share_the_stages_an_earlier_trial_evaluated(tmp_path, base_file):
    # The noisy stage is the same runtime in both trials: the second loads it from the stage cache (after its
    # re-run sample), and only the stage whose setting differs is its own.
    raw = yaml.safe_load(base_file.read_text())
    raw["passes"] = [{"name": "noisy_scorer", "config": {"scale": 1e-9}, "on_fail": "stop"},
                     {"name": "note", "config": {"note": "a"}, "on_fail": "stop"}]
    base_file.write_text(yaml.safe_dump(raw))
    sweep = load_sweep(write_sweep(tmp_path, base_file, space={"note.note": {"type": "categorical",
                                                                            "choices": ["a", "b"]}}))
    outcome = run_sweep(sweep)
    kinds = {}
    for row in outcome.rows:
        records = [json.loads(line) for line in (Path(row["run_dir"]) / "stages.jsonl").read_text().splitlines()]
        kinds[row["settings"]["note.note"]] = [r["eval_path"]["kind"] for r in records if r.get("eval_path")]
    first, second = (kinds[row["settings"]["note.note"]] for row in sorted(outcome.rows, key=lambda r: r["number"]))
    assert first == ["reused", "evaluated", "reused"] and second == ["reused", "cached", "reused"]
    assert all(row["passed"] for row in outcome.rows)
