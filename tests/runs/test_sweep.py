"""`laya-opt sweep`: small sweeps on the tiny checkpoint and suite (a few trials each), resume, best.yaml, bad files."""
from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.runs.sweep import JOURNAL, TRIALS, open_study, run_sweep, trial_rows
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
    assert "No trial passed" in (outcome.results_dir / "frontier.md").read_text()


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


def test_ray_backend_without_ray_is_a_clear_error(tmp_path, base_file):
    try:
        import ray  # noqa: F401
        pytest.skip("Ray is installed")
    except ImportError:
        pass
    result = CliRunner().invoke(main, ["sweep", str(write_sweep(tmp_path, base_file)), "--backend", "ray"])
    assert result.exit_code == 2 and "pip install 'laya-opt[ray]'" in result.output


@pytest.mark.slow
def test_ray_sweep_records_every_trial_in_the_study(tmp_path, base_file):
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'laya-opt[ray]')")
    from laya_opt.runs.sweep_ray import run_sweep_ray

    outcome = run_sweep_ray(load_sweep(write_sweep(tmp_path, base_file)))
    assert len(outcome.rows) == 2 and outcome.frontier["best"] is not None
