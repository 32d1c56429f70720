"""Results directories, the report round trip, and the `run` / `explain` commands end to end."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from laya_opt.core.checkpoint import file_sha256
from laya_opt.cli import main
from laya_opt.util.errors import InputError
from laya_opt.fidelity.gates import load_gates_file
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.pipeline import PipelineError
from laya_opt.runs.plots import available as plots_available
from fake_passes import write_tiny_suite

from laya_opt.runs.report import SpeedupCell, load_results, render_report
from laya_opt.runs.runner import run_experiment

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture
def write_experiment(tmp_path, tiny_checkpoint_dir):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl")

    def write(passes, benchmark=None, name="tiny-run"):
        # float32 candidates: the tiny random model's near ties must not hinge on half-precision rounding.
        raw = {"name": name, "checkpoint": str(tiny_checkpoint_dir), "suites": [str(suite)],
               "candidate_dtype": "float32", "plugins": ["fake_passes"], "passes": passes,
               "output_dir": str(tmp_path / "results")}
        if benchmark:
            raw["benchmark"] = benchmark
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    return write


NOISY_THEN_NOTE = [{"name": "noisy_scorer", "on_fail": "reject"}, {"name": "note", "config": {"note": "kept"}}]
SMALL_BENCH = {"workloads": ["short-1"], "requests": 2, "blocks": 2, "warmup": 0, "forward_only": False}


def entries(directory):
    return sorted(path.name for path in directory.iterdir()) if directory.exists() else []


def test_run_writes_a_complete_results_dir_that_round_trips(write_experiment, tiny_checkpoint_dir, tmp_path):
    experiment = load_experiment(write_experiment(NOISY_THEN_NOTE, SMALL_BENCH))
    outcome = run_experiment(experiment, now=NOW)
    assert outcome.results_dir == tmp_path / "results" / "tiny-run-20300102T030405Z"
    assert entries(tmp_path / "results") == ["tiny-run-20300102T030405Z"]  # no temp dir left behind
    loaded = load_results(outcome.results_dir)
    plots = loaded.manifest["plots"] or []  # drawn when matplotlib is installed (the dev extra has it)
    assert ("latency.png" in plots) == plots_available()
    assert entries(outcome.results_dir) == sorted(["manifest.json", "report.md", "stages.jsonl", "timings.json",
                                                   *plots])
    assert loaded.rows == outcome.rows
    assert [row.verdict for row in loaded.rows] == ["accepted", "rejected", "accepted"]
    assert loaded.rows[1].speedups == (SpeedupCell("short-1", None, None, None),)  # rejected: not timed
    assert loaded.rows[2].speedups[0].median > 0
    assert [stage["verdict"] for stage in loaded.stages] == ["accepted", "rejected", "accepted"]
    assert loaded.stages[2]["report"] == {"text": "kept"} and loaded.stages[2]["parent"] == 0
    assert any(g["status"] == "FAIL" and g["metric"] == "max_abs_dp" for g in loaded.stages[1]["gates"])
    manifest = loaded.manifest
    assert manifest["checkpoint"]["sha256"] == file_sha256(tiny_checkpoint_dir / "model.safetensors")
    assert manifest["suites"][0]["sha256"] and re.fullmatch(r"[0-9a-f]{64}", manifest["token_sha256"])
    assert manifest["environment"]["versions"]["mlx"] and manifest["resolved"]["passes"][1]["name"] == "note"
    assert manifest["gates_failed"] is True and outcome.exit_code == 3
    assert set(loaded.timings["samples"]) == {"reference", "0:baseline", "2:note"}


def test_two_runs_in_the_same_second_both_keep_their_results(write_experiment, tmp_path):
    experiment = load_experiment(write_experiment([]))
    first = run_experiment(experiment, bench=False, now=NOW)
    before = (first.results_dir / "report.md").read_text()
    second = run_experiment(experiment, bench=False, now=NOW)
    assert entries(tmp_path / "results") == [first.results_dir.name, first.results_dir.name + "-2"]
    assert second.results_dir.name == first.results_dir.name + "-2"
    assert (first.results_dir / "report.md").read_text() == before


def test_a_raising_pass_leaves_no_directory(write_experiment, tmp_path):
    experiment = load_experiment(write_experiment([{"name": "note"}, {"name": "explode"}], SMALL_BENCH))
    with pytest.raises(PipelineError, match="'explode' \\(stage 2\\) raised RuntimeError: boom"):
        run_experiment(experiment, now=NOW)
    assert entries(tmp_path / "results") == []


def test_report_md_is_rendered_from_the_written_records_alone(write_experiment):
    outcome = run_experiment(load_experiment(write_experiment(NOISY_THEN_NOTE, SMALL_BENCH)), now=NOW)
    loaded = load_results(outcome.results_dir)
    assert render_report(loaded.manifest, loaded.stages, loaded.timings) == \
        (outcome.results_dir / "report.md").read_text()
    assert "| 1 noisy_scorer | exact |" in (outcome.results_dir / "report.md").read_text()


def test_the_report_shows_the_noise_floor_and_derivation_of_each_gate(write_experiment):
    outcome = run_experiment(load_experiment(write_experiment([{"name": "note"}])), bench=False, now=NOW)
    record = load_results(outcome.results_dir).stages[1]
    bound = next(g for g in record["gates"] if g["metric"] == "max_abs_dp" and g["comparison"] == "incremental")
    calibrated = next(g for g in load_gates_file("standin").gates["float32"].exact_incremental
                      if g.metric == "max_abs_dp")
    assert (bound["threshold"], bound["noise_floor"], bound["derivation"]) == \
        (calibrated.threshold, calibrated.noise_floor, calibrated.derivation)
    report = (outcome.results_dir / "report.md").read_text()
    assert "| stage | comparison | gate | measured | noise floor | result |" in report
    assert f"| 1 note | incremental | {calibrated} | 0 | {calibrated.noise_floor:.3g} | pass |" in report
    assert f"- `{calibrated}`: {calibrated.derivation}" in report and "Default gates from `standin`" in report
    # The manifest records the dtype the reference's weights are actually in.
    reference = load_results(outcome.results_dir).manifest["reference"]
    assert (reference["dtype"], reference["declared_dtype"]) == ("float32", "float32")


def test_a_reference_loaded_in_another_dtype_than_declared_stops_the_run(write_experiment, monkeypatch):
    import laya_opt.runs.runner

    real = laya_opt.runs.runner.load_checkpoint
    # The audit's bug: the FP32 reference silently loaded in FP16, while every label said float32.
    monkeypatch.setattr(laya_opt.runs.runner, "load_checkpoint", lambda files, dtype: real(files, "float16"))
    with pytest.raises(InputError, match="the reference runtime is float16, but the run declares a float32"):
        run_experiment(load_experiment(write_experiment([{"name": "note"}])), bench=False, now=NOW)


def test_load_results_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing manifest.json"):
        load_results(tmp_path)


# ----------------------------------------------------------------------------------------------------------- CLI


def invoke(command, *args):
    return CliRunner().invoke(command, [str(arg) for arg in args], catch_exceptions=False)


def test_failed_gates_exit_3_unless_waived(write_experiment, tmp_path):
    path = write_experiment([{"name": "noisy_scorer", "on_fail": "reject"}])
    failed = invoke(main, "run", path, "--no-bench", "--quiet", "--output-dir", tmp_path / "strict")
    assert failed.exit_code == 3, failed.output
    assert "FAILED stage 1 noisy_scorer incremental" in failed.output and "gates failed" in failed.output
    waived = invoke(main, "run", path, "--no-bench", "--quiet", "--allow-failed-gates", "--output-dir",
                    tmp_path / "waived")
    assert waived.exit_code == 0, waived.output
    assert "WAIVED stage 1 noisy_scorer" in waived.output
    (results,) = (tmp_path / "waived").iterdir()
    report = (results / "report.md").read_text()
    assert "Failed gates WAIVED by --allow-failed-gates" in report and "| 1 noisy_scorer | exact |" in report
    assert load_results(results).rows[1].verdict == "rejected, gates WAIVED"
    assert any(g["status"] == "WAIVED" for g in load_results(results).stages[1]["gates"])
    strict_report = next((tmp_path / "strict").iterdir()) / "report.md"
    assert "WAIVED" not in strict_report.read_text()


def test_passing_run_exits_0_and_prints_the_table(write_experiment, tmp_path):
    result = invoke(main, "run", write_experiment([{"name": "note"}]), "--no-bench", "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "1 note" in result.output and "accepted" in result.output and "results: " in result.output
    assert "evaluating the reference" in result.output  # progress lines unless --quiet


def test_bad_input_exits_2_with_the_key_path(write_experiment, tmp_path):
    path = write_experiment([{"name": "note", "config": {"note": "fine"}}])
    bad = write_experiment([{"name": "note", "config": {"note": 3}}], name="bad")
    result = CliRunner().invoke(main, ["run", str(bad), "--no-bench"])
    assert result.exit_code == 2
    assert "passes[0].config.note: expected a string, got integer 3" in result.output
    assert "Traceback" not in result.output
    assert CliRunner().invoke(main, ["run", str(tmp_path / "missing.yaml")]).exit_code == 2
    assert CliRunner().invoke(main, ["run", str(path), "--requests", "0"]).exit_code == 2
    ignored = CliRunner().invoke(main, ["run", str(path), "--requests", "5"])  # no benchmark: refused, not ignored
    assert ignored.exit_code == 2 and "no benchmark section" in ignored.output


def test_a_raising_pass_exits_1_without_results(write_experiment, tmp_path):
    result = CliRunner().invoke(main, ["run", str(write_experiment([{"name": "explode"}])), "--no-bench", "--quiet",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 1 and "no results directory was written" in result.output
    assert entries(tmp_path / "out") == []


def test_requests_override_reaches_the_benchmark(write_experiment, tmp_path):
    path = write_experiment([], {**SMALL_BENCH, "requests": 6, "blocks": 3})
    result = invoke(main, "run", path, "--quiet", "--requests", "2", "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    timings = json.loads((next((tmp_path / "out").iterdir()) / "timings.json").read_text())
    assert (timings["config"]["requests"], timings["config"]["blocks"]) == (2, 2)


def test_explain_prints_the_plan(write_experiment):
    result = invoke(main, "explain", write_experiment(NOISY_THEN_NOTE, SMALL_BENCH))
    assert result.exit_code == 0
    assert "1. noisy_scorer  exact  on_fail=reject" in result.output and "2. note  exact  on_fail=stop" in result.output
    assert "benchmark   workloads short-1; end-to-end; 2 timed requests in 2 rotating blocks" in result.output


def test_run_suite_override_replaces_the_experiments_suites(write_experiment, tmp_path):
    path = write_experiment([{"name": "note", "config": {"note": "kept"}}])
    other = write_tiny_suite(tmp_path / "other.jsonl")
    result = CliRunner().invoke(main, ["run", str(path), "--no-bench", "--suite", str(other), "--output-dir",
                                      str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    manifest = json.loads((results_dir / "manifest.json").read_text())
    assert [entry["path"] for entry in manifest["suites"]] == [str(other)]
    missing = CliRunner().invoke(main, ["run", str(path), "--suite", "no-such-suite"])
    assert missing.exit_code == 2 and "--suite no-such-suite" in missing.output
    assert not (tmp_path / "results").exists()


def test_a_quantizing_stage_prints_and_reports_its_coverage(write_experiment, tmp_path):
    path = write_experiment([{"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32}}])
    result = CliRunner().invoke(main, ["run", str(path), "--no-bench", "--candidate-dtype", "float32", "--output-dir",
                                      str(tmp_path / "out")])
    assert result.exit_code in (0, 3), result.output
    assert "stage 1 quantize_encoder: 12 of" in result.output and "bits/weight" in result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    report = (results_dir / "report.md").read_text()
    assert "## Quantization coverage: stage 1 quantize_encoder" in report
    assert "| encoder.layers.0.attn.Wqkv | Linear |" in report and "affine 8-bit g32" in report
    assert "not selected" in report  # kept modules are listed with their reason
