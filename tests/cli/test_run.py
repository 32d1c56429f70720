"""`laya-opt run`, `explain` and `bisect` options: --checkpoint overrides the file's, checked and named like it."""
from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner
from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.runs.report import load_results


@pytest.fixture
def experiment_file(tmp_path):
    """An experiment whose own checkpoint does not exist: only --checkpoint can make it run."""
    raw = {"name": "tiny-run", "checkpoint": str(tmp_path / "no-checkpoint"),
           "suites": [str(write_tiny_suite(tmp_path / "tiny.jsonl"))], "candidate_dtype": "float32",
           "passes": [{"name": "masks_once"}], "output_dir": str(tmp_path / "results")}
    path = tmp_path / "tiny-run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


def test_run_checkpoint_overrides_the_experiments_and_is_recorded(experiment_file, tiny_checkpoint_dir, tmp_path):
    without = invoke("run", experiment_file, "--no-bench")
    assert without.exit_code == 2 and f"{experiment_file}: checkpoint: checkpoint directory" in without.output
    result = invoke("run", experiment_file, "--no-bench", "--json", "--checkpoint", tiny_checkpoint_dir)
    assert result.exit_code == 0, result.output
    manifest = load_results(json.loads(result.output)["results_dir"]).manifest
    assert manifest["checkpoint"]["path"] == str(tiny_checkpoint_dir)
    assert manifest["resolved"]["checkpoint"] == str(tiny_checkpoint_dir)
    assert manifest["resolved"]["command_options"] == ["--checkpoint", str(tiny_checkpoint_dir)]


def test_rerun_option_overrides_the_file_and_sets_the_sample(experiment_file, tiny_checkpoint_dir):
    result = invoke("run", experiment_file, "--no-bench", "--json", "--checkpoint", tiny_checkpoint_dir,
                    "--rerun", "2")
    assert result.exit_code == 0, result.output
    manifest = load_results(json.loads(result.output)["results_dir"]).manifest
    assert manifest["resolved"]["rerun"] == 2 and manifest["evaluation"]["rerun"] == 2
    assert manifest["resolved"]["command_options"][-2:] == ["--rerun", "2"]
    # Nothing re-run: the default `deterministic` gate has nothing to judge and fails, saying why.
    result = invoke("run", experiment_file, "--no-bench", "--checkpoint", tiny_checkpoint_dir, "--rerun", "0")
    assert result.exit_code == 3
    assert "metric 'deterministic' missing" in result.output and "--rerun 0" in result.output
    plan = invoke("explain", experiment_file, "--checkpoint", tiny_checkpoint_dir, "--rerun", "7")
    assert plan.exit_code == 0 and "re-run      7 requests per stage" in plan.output


@pytest.mark.parametrize("command", ["run", "explain", "bisect"])
def test_a_negative_rerun_option_is_refused_before_anything_runs(experiment_file, tmp_path, command):
    result = invoke(command, experiment_file, "--rerun", "-1")
    assert result.exit_code == 2 and "--rerun" in result.output
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing", "does not exist (laya-opt never downloads weights)"),
    (lambda tmp: (tmp / "weights.bin").write_bytes(b"x") and tmp / "weights.bin",
     "is a file; a checkpoint is a directory"),
    (lambda tmp: (tmp / "empty").mkdir() or tmp / "empty", "Not a complete Laya checkpoint"),
])
@pytest.mark.parametrize("command", ["run", "explain", "bisect"])
def test_a_bad_checkpoint_option_is_named_and_nothing_is_written(experiment_file, tmp_path, make, message, command):
    checkpoint = make(tmp_path)
    result = invoke(command, experiment_file, "--checkpoint", checkpoint)
    assert result.exit_code == 2, result.output
    assert "error: --checkpoint: " in result.output and message in result.output
    assert str(experiment_file) not in result.output  # the option is to blame, not the file
    assert not (tmp_path / "results").exists()


def test_explain_and_run_take_the_same_overrides(experiment_file, tiny_checkpoint_dir):
    plan = invoke("explain", experiment_file, "--checkpoint", tiny_checkpoint_dir, "--candidate-dtype", "float16",
                  "--suite", "smoke")
    assert plan.exit_code == 0, plan.output
    assert f"checkpoint  {tiny_checkpoint_dir}" in plan.output and "candidate float16" in plan.output
    assert "smoke.jsonl" in plan.output


def test_a_misspelt_pass_in_the_experiment_gets_a_suggestion_from_run_and_explain(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump({"name": "typo", "passes": [{"name": "compile_bucket"}]}))
    for command in ("run", "explain", "bisect"):
        result = invoke(command, path)
        assert result.exit_code == 2, result.output
        assert "passes[0].name: unknown pass 'compile_bucket'; did you mean 'compile_buckets'?" in result.output
