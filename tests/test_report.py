"""Results directories, the report round trip, and the `run` / `explain` commands end to end."""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from laya_opt.checkpoint import file_sha256
from laya_opt.cli_run import explain, run
from laya_opt.experiment import load_experiment
from laya_opt.pipeline import PipelineError
from laya_opt.report import ReportRow, SpeedupCell, load_results, parse_stage_table, stage_table
from laya_opt.runner import run_experiment
from test_pipeline import write_tiny_suite

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture
def write_experiment(tmp_path, tiny_checkpoint_dir):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl")

    def write(passes, benchmark=None, name="tiny-run"):
        raw = {"name": name, "checkpoint": str(tiny_checkpoint_dir), "suites": [str(suite)],
               "plugins": ["test_pipeline"], "passes": passes, "output_dir": str(tmp_path / "results")}
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
    assert entries(outcome.results_dir) == ["manifest.json", "report.md", "stages.jsonl", "timings.json"]
    loaded = load_results(outcome.results_dir)
    assert loaded.rows == outcome.rows
    assert [row.verdict for row in loaded.rows] == ["accepted", "rejected", "accepted"]
    assert loaded.rows[1].speedups == (SpeedupCell("short-1", None, None, None),)  # rejected: not timed
    assert loaded.rows[2].speedups[0].median > 0
    assert [stage["verdict"] for stage in loaded.stages] == ["accepted", "rejected", "accepted"]
    assert loaded.stages[2]["pass_info"] == {"note": {"text": "kept"}} and loaded.stages[2]["parent"] == 0
    assert any(g["status"] == "FAIL" and g["metric"] == "max_abs_dp" for g in loaded.stages[1]["gates"])
    manifest = loaded.manifest
    assert manifest["checkpoint"]["sha256"] == file_sha256(tiny_checkpoint_dir / "model.safetensors")
    assert manifest["suites"][0]["sha256"] and re.fullmatch(r"[0-9a-f]{64}", manifest["token_sha256"])
    assert manifest["environment"]["versions"]["mlx"] and manifest["resolved"]["passes"][1]["name"] == "note"
    assert manifest["gates_failed"] is True and outcome.exit_code == 3
    assert set(loaded.timings["samples"]) == {"reference", "0:baseline", "2:note"}


def test_results_dir_is_never_overwritten(write_experiment, tmp_path):
    experiment = load_experiment(write_experiment([]))
    first = run_experiment(experiment, bench=False, now=NOW)
    before = (first.results_dir / "report.md").read_text()
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        run_experiment(experiment, bench=False, now=NOW)
    assert entries(tmp_path / "results") == [first.results_dir.name]
    assert (first.results_dir / "report.md").read_text() == before


def test_a_raising_pass_leaves_no_directory(write_experiment, tmp_path):
    experiment = load_experiment(write_experiment([{"name": "note"}, {"name": "explode"}], SMALL_BENCH))
    with pytest.raises(PipelineError, match="'explode' \\(stage 2\\) raised RuntimeError: boom"):
        run_experiment(experiment, now=NOW)
    assert entries(tmp_path / "results") == []


def test_stage_table_round_trips_awkward_cells():
    rows = [ReportRow("0 baseline", "approx", 1.0, 6.46e-4, None, 0.4, (SpeedupCell("w|1", 1.234, 1.1, 1.3),),
                      "accepted"),
            ReportRow("1 a|b", "exact", math.nan, math.nan, 0.0, None, (SpeedupCell("w|1", None, None, None),),
                      "rejected, gates WAIVED")]
    text = "# x\n\n## Stages\n\n" + stage_table(rows, ["w|1"]) + "\n\nmore text\n"
    assert parse_stage_table(text) == rows
    untimed = ReportRow("0 baseline", "approx", 1.0, 6.46e-4, None, 0.4, (), "stopped")
    assert parse_stage_table("## Stages\n\n" + stage_table([untimed], [])) == [untimed]
    with pytest.raises(ValueError, match="no '## Stages' section"):
        parse_stage_table("# nothing here\n")
    with pytest.raises(ValueError, match="cannot read speed-up 'fast'"):
        parse_stage_table(text.replace("1.234× (1.100–1.300)", "fast"))


def test_load_results_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing manifest.json"):
        load_results(tmp_path)


# ----------------------------------------------------------------------------------------------------------- CLI


def invoke(command, *args):
    return CliRunner().invoke(command, [str(arg) for arg in args], catch_exceptions=False)


def test_failed_gates_exit_3_unless_waived(write_experiment, tmp_path):
    path = write_experiment([{"name": "noisy_scorer", "on_fail": "reject"}])
    failed = invoke(run, path, "--no-bench", "--quiet", "--output-dir", tmp_path / "strict")
    assert failed.exit_code == 3, failed.output
    assert "FAILED stage 1 noisy_scorer incremental" in failed.output and "gates failed" in failed.output
    waived = invoke(run, path, "--no-bench", "--quiet", "--allow-failed-gates", "--output-dir", tmp_path / "waived")
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
    result = invoke(run, write_experiment([{"name": "note"}]), "--no-bench", "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "1 note" in result.output and "accepted" in result.output and "results: " in result.output
    assert "evaluating the reference" in result.output  # progress lines unless --quiet


def test_bad_input_exits_2_with_the_key_path(write_experiment, tmp_path):
    path = write_experiment([{"name": "note", "config": {"note": 3}}])
    result = CliRunner().invoke(run, [str(path), "--no-bench"])
    assert result.exit_code == 2
    assert "passes[0].config.note: expected a string, got 3" in result.output and "Traceback" not in result.output
    assert CliRunner().invoke(run, [str(tmp_path / "missing.yaml")]).exit_code == 2
    assert CliRunner().invoke(run, [str(path), "--requests", "0"]).exit_code == 2


def test_a_raising_pass_exits_1_without_results(write_experiment, tmp_path):
    result = CliRunner().invoke(run, [str(write_experiment([{"name": "explode"}])), "--no-bench", "--quiet",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 1 and "no results directory was written" in result.output
    assert entries(tmp_path / "out") == []


def test_requests_override_reaches_the_benchmark(write_experiment, tmp_path):
    path = write_experiment([], {**SMALL_BENCH, "requests": 6, "blocks": 3})
    result = invoke(run, path, "--quiet", "--requests", "2", "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    timings = json.loads((next((tmp_path / "out").iterdir()) / "timings.json").read_text())
    assert (timings["config"]["requests"], timings["config"]["blocks"]) == (2, 2)


def test_explain_prints_the_plan(write_experiment):
    result = invoke(explain, write_experiment(NOISY_THEN_NOTE, SMALL_BENCH))
    assert result.exit_code == 0
    assert "1. noisy_scorer  exact  on_fail=reject" in result.output and "2. note  exact  on_fail=stop" in result.output
    assert "benchmark   workloads short-1; end-to-end; 2 timed requests in 2 rotating blocks" in result.output


def test_run_suite_override_replaces_the_experiments_suites(write_experiment, tmp_path):
    path = write_experiment([{"name": "note", "config": {"note": "kept"}}])
    other = write_tiny_suite(tmp_path / "other.jsonl")
    result = CliRunner().invoke(run, [str(path), "--no-bench", "--suite", str(other), "--output-dir",
                                      str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    manifest = json.loads((results_dir / "manifest.json").read_text())
    assert [entry["path"] for entry in manifest["suites"]] == [str(other)]
    missing = CliRunner().invoke(run, [str(path), "--suite", "no-such-suite"])
    assert missing.exit_code == 2 and "--suite no-such-suite" in missing.output
    assert not (tmp_path / "results").exists()


def test_a_quantizing_stage_prints_and_reports_its_coverage(write_experiment, tmp_path):
    path = write_experiment([{"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32}}])
    result = CliRunner().invoke(run, [str(path), "--no-bench", "--candidate-dtype", "float32", "--output-dir",
                                      str(tmp_path / "out")])
    assert result.exit_code in (0, 3), result.output
    assert "coverage, stage 1 quantize_encoder:" in result.output and "bits/weight" in result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    report = (results_dir / "report.md").read_text()
    assert "## Quantization coverage: stage 1 quantize_encoder" in report
    assert "| encoder.layers.0.attn.Wqkv | Linear |" in report and "affine 8-bit g32" in report
    assert "not selected" in report  # kept modules are listed with their reason
