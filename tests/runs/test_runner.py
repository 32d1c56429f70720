"""Around the pipeline: the reference cache in a run, nothing lost when nothing passes, exports, the console."""
from __future__ import annotations

import inspect
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fake_passes import NOISY, NOTE, REQUESTS, write_tiny_suite

from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.cli import main
from laya_opt.util.errors import ExperimentError
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.pipeline import Pipeline
from laya_opt.runs.report import load_results
from laya_opt.runs.runner import run_experiment


NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
SMALL_BENCH = {"workloads": ["short-1"], "requests": 2, "blocks": 2, "warmup": 0, "forward_only": False}
QUANTIZE = {"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32}}


@pytest.fixture
def write_experiment(tmp_path, tiny_checkpoint_dir):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl")

    def write(passes, name="tiny-run", **extra):
        raw = {"name": name, "checkpoint": str(tiny_checkpoint_dir), "suites": [str(suite)],
               "candidate_dtype": "float32", "plugins": ["fake_passes"], "passes": passes,
               "output_dir": str(tmp_path / "results"), **extra}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    return write


def fidelity(rows):
    """What a stage measured, without its wall time."""
    return [(row.stage, row.verdict, row.argmax_agreement, row.max_abs_dp, row.max_abs_dp_incremental, row.accuracy)
            for row in rows]


def invoke(*args):
    return CliRunner().invoke(main, ["run", *(str(arg) for arg in args)], catch_exceptions=False)


# ------------------------------------------------------------------------------------------------ reference cache


def test_the_second_run_hits_the_reference_cache_and_its_report_says_so(write_experiment):
    experiment = load_experiment(write_experiment([{"name": "note"}]))
    first = run_experiment(experiment, bench=False, now=NOW)
    second = run_experiment(experiment, bench=False, now=NOW)
    assert (first.reference_cache.status, second.reference_cache.status) == ("computed", "hit")
    assert fidelity(second.rows) == fidelity(first.rows)
    key = second.reference_cache.key.digest
    report = (second.results_dir / "report.md").read_text()
    assert f"- reference: cache hit (key {key[:12]}…" in report
    assert "- reference: computed in" in (first.results_dir / "report.md").read_text()
    manifest = load_results(second.results_dir).manifest
    assert manifest["reference"]["cache"]["status"] == "hit" and manifest["reference"]["cache"]["key"] == key
    assert set(manifest["reference"]["cache"]["components"]) >= {"checkpoint", "requests", "tokens", "dtype", "mlx",
                                                                  "backend", "device", "blas", "source"}
    off = run_experiment(experiment, bench=False, now=NOW, cache=False)
    assert off.reference_cache.status == "off" and fidelity(off.rows) == fidelity(first.rows)


def test_run_no_cache_and_the_console_line(write_experiment, tmp_path):
    path = write_experiment([])
    first = invoke(path, "--no-bench", "--output-dir", tmp_path / "out")
    second = invoke(path, "--no-bench", "--output-dir", tmp_path / "out")
    off = invoke(path, "--no-bench", "--no-cache", "--output-dir", tmp_path / "out")
    assert "reference: computed in" in first.output and "reference: cache hit (key" in second.output
    assert "computed in" in off.output and "(cache off)" in off.output


# ------------------------------------------------------------------------------------------------ nothing passes


def test_a_run_where_every_candidate_fails_keeps_its_results_and_names_the_closest(write_experiment, tmp_path):
    path = write_experiment([{"name": "noisy_scorer", "config": {"scale": 5.0}, "on_fail": "reject"},
                             {"name": "noisy_scorer", "config": {"scale": 0.5}, "on_fail": "reject"}],
                            benchmark=SMALL_BENCH)
    result = invoke(path, "--output-dir", tmp_path / "out")
    assert result.exit_code == 3, result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    loaded = load_results(results_dir)
    assert [s["verdict"] for s in loaded.stages] == ["accepted", "rejected", "rejected"]
    drift = [s["metrics"]["cumulative"]["max_abs_dp"] for s in loaded.stages[1:]]
    closest = 1 + drift.index(min(drift))
    report = (results_dir / "report.md").read_text()
    assert "## No candidate passed" in report
    assert f"the closest was stage {closest} noisy_scorer (rejected" in report
    assert f"No candidate passed its gates; the closest was stage {closest}" in result.output
    assert "| incremental | max_abs_dp" in report.split("## No candidate passed")[1].split("## Stages")[0]
    # Nothing accepted: nothing is timed (the reference against its own no-op cast printed "speed-ups" before).
    assert json.loads((results_dir / "timings.json").read_text())["samples"] == {}
    assert "benchmark skipped: no candidate stage was accepted" in result.output
    assert "Benchmark skipped: no candidate stage was accepted" in report
    assert "speedup" not in report and "speedup" not in result.output and "×" not in result.output
    assert load_results(results_dir).manifest["benchmark_skipped"].startswith("no candidate stage was accepted")


def test_a_run_with_an_accepted_pass_is_still_timed(write_experiment, tmp_path):
    path = write_experiment([{"name": "note"}, {"name": "noisy_scorer", "config": {"scale": 5.0}, "on_fail": "reject"}],
                            benchmark=SMALL_BENCH)
    result = invoke(path, "--json", "--output-dir", tmp_path / "out")
    data = json.loads(result.output)
    assert data["benchmark_skipped"] is None and [row["verdict"] for row in data["stages"]][1] == "accepted"
    results_dir = Path(data["results_dir"])
    assert set(json.loads((results_dir / "timings.json").read_text())["samples"]) == {"reference", "0:baseline",
                                                                                       "1:note"}
    assert "short-1 p50 speedup" in (results_dir / "report.md").read_text()


def test_a_rejected_stage_prints_and_reports_what_to_try_next(write_experiment, tmp_path, tiny_checkpoint_dir):
    path = write_experiment([{"name": "noisy_scorer", "config": {"scale": 5.0}, "on_fail": "reject"}])
    result = invoke(path, "--no-bench", "--output-dir", tmp_path / "out", "--checkpoint", tiny_checkpoint_dir)
    assert result.exit_code == 3, result.output
    again = f"{path} --checkpoint {tiny_checkpoint_dir}"
    (results_dir,) = (tmp_path / "out").iterdir()
    report = (results_dir / "report.md").read_text()
    for text in (result.output, report):
        assert f"`laya-opt bisect {again}`" in text and f"`laya-opt run {again} --bisect`" in text
        assert f"`laya-opt explain {again}`" in text and "stage 1 noisy_scorer is the first that failed" in text
        assert "The gates ran on tiny" in text and f"`laya-opt run {again} --suite NAME`" in text
    assert "next steps:" in result.output and "## Next steps" in report
    passing = invoke(write_experiment([{"name": "note"}], name="ok"), "--no-bench", "--output-dir", tmp_path / "ok")
    assert passing.exit_code == 0 and "next steps" not in passing.output
    assert "## Next steps" not in (next((tmp_path / "ok").iterdir()) / "report.md").read_text()


def test_a_stopped_baseline_is_written_too(write_experiment, tmp_path):
    path = write_experiment([{"name": "note"}], gates={"cumulative": ["max_abs_dp <= -1"]})
    result = invoke(path, "--no-bench", "--output-dir", tmp_path / "out")
    assert result.exit_code == 3
    (results_dir,) = (tmp_path / "out").iterdir()
    assert "the closest was stage 0 baseline (stopped" in (results_dir / "report.md").read_text()


# ------------------------------------------------------------------------------------------------ export


def test_an_accepted_quantizing_stage_is_exported_and_loads(write_experiment, tmp_path):
    target = tmp_path / "exports" / "enc8"
    path = write_experiment([QUANTIZE, {"name": "note"}], export={"stage": "quantize_encoder", "path": str(target)},
                            gates={"cumulative": ["max_abs_dp <= 1", "argmax_agreement >= 0"],
                                   "incremental": ["max_abs_dp <= 1", "argmax_agreement >= 0"]})
    plan = CliRunner().invoke(main, ["explain", str(path)])
    assert f"export      stage quantize_encoder -> {target}" in plan.output
    outcome = run_experiment(load_experiment(path), bench=False, now=NOW)
    assert outcome.export["status"] == "written", outcome.export
    loaded = load_checkpoint(target, "float32")
    assert loaded.mlx_config["quantization"]["bits"] == 8 and len(loaded.mlx_config["quantization"]["modules"]) == 12
    manifest = load_results(outcome.results_dir).manifest
    assert manifest["export"]["path"] == str(target) and manifest["resolved"]["export"]["stage"] == "quantize_encoder"
    assert f"- export: stage 1 quantize_encoder written to {target}" in (outcome.results_dir / "report.md").read_text()
    again = CliRunner().invoke(main, ["run", str(path), "--no-bench"])  # refuses before any weight is loaded
    assert again.exit_code == 2 and "export.path" in again.output and "already exists" in again.output


def test_export_from_the_command_line_and_its_refusals(write_experiment, tmp_path):
    path = write_experiment([QUANTIZE], gates={"cumulative": ["max_abs_dp <= -1"]})
    skipped = invoke(path, "--no-bench", "--export-stage", "quantize_encoder", "--export-dir", tmp_path / "e")
    assert skipped.exit_code == 3 and "export skipped" in skipped.output and not (tmp_path / "e").exists()
    alone = CliRunner().invoke(main, ["run", str(path), "--export-stage", "quantize_encoder"])
    assert alone.exit_code == 2 and "--export-stage and --export-dir go together" in alone.output
    unknown = CliRunner().invoke(main, ["run", str(path), "--export-stage", "nope",
                                        "--export-dir", str(tmp_path / "e")])
    assert unknown.exit_code == 2 and "--export-stage: no stage is named 'nope'; stages: baseline, quantize_encoder" \
        in unknown.output
    with pytest.raises(ExperimentError, match="export.stage: no stage is named 'compile'"):
        load_experiment(write_experiment([QUANTIZE], name="bad", export={"stage": "compile", "path": "x"}))


def test_a_stage_without_quantized_modules_is_not_exported(write_experiment, tmp_path):
    path = write_experiment([{"name": "note"}], export={"stage": "note", "path": str(tmp_path / "e")})
    outcome = run_experiment(load_experiment(path), bench=False, now=NOW)
    assert outcome.export["status"] == "skipped" and "no quantized module" in outcome.export["summary"]
    assert outcome.exit_code == 0 and not (tmp_path / "e").exists()


# ------------------------------------------------------------------------------------------------ the console


def test_stage_wall_times_progress_lines_and_the_manifest_platform(write_experiment, tmp_path):
    result = invoke(write_experiment([{"name": "note"}]), "--no-bench", "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "stage 1 note: accepted in " in result.output and "(apply " in result.output
    assert "wall s" in result.output
    quiet = invoke(write_experiment([{"name": "note"}]), "--no-bench", "--quiet", "--output-dir", tmp_path / "q")
    assert "stage 1 note: accepted in" not in quiet.output and "evaluating" not in quiet.output
    (results_dir,) = (tmp_path / "out").iterdir()
    environment = load_results(results_dir).manifest["environment"]
    assert environment["backend"] in ("cpu", "metal", "cuda") and environment["device"]
    assert environment["blas"]["kind"] and "library" in environment["blas"]
    assert "| stage | exact/approx | argmax agree | max Δp cum | max Δp inc | accuracy | wall s |" in \
        (results_dir / "report.md").read_text()


def test_thin_latency_tails_are_flagged_in_the_console_and_report(write_experiment, tmp_path):
    result = invoke(write_experiment([], benchmark=SMALL_BENCH), "--output-dir", tmp_path / "out")
    assert "warning: latency p95 and p99 rest on 2 samples (p95 needs >= 20, p99 needs >= 100)" in result.output
    (results_dir,) = (tmp_path / "out").iterdir()
    report = (results_dir / "report.md").read_text()
    assert "**Few samples (cells marked \\*):** p95 and p99 rest on 2 samples" in report
    latency_rows = [line for line in report.splitlines() if line.startswith("| reference | short-1 |")]
    assert latency_rows and latency_rows[0].count(" *") == 2


def test_run_json_prints_the_outcome(write_experiment, tmp_path):
    result = invoke(write_experiment([{"name": "note"}]), "--no-bench", "--json", "--output-dir", tmp_path / "out")
    data = json.loads(result.output)
    assert data["exit_code"] == 0 and data["reference"]["status"] == "computed"
    assert [row["stage"] for row in data["stages"]] == ["0 baseline", "1 note"] and data["stages"][1]["wall_s"] >= 0


def test_the_pipeline_tracks_every_evaluation_one_step_per_request(tiny_checkpoint_dir):
    from contextlib import contextmanager

    from laya_opt.core.runtime import load_runtime

    seen = []

    @contextmanager
    def track(description, total):
        steps = []
        yield steps.append
        seen.append((description, total, sum(steps)))

    Pipeline([NOTE, (NOISY, {}, "reject")], candidate_dtype="float32", rerun=3).run(
        load_runtime(tiny_checkpoint_dir), REQUESTS, track=track)
    count = len(REQUESTS)
    # Reused stages (the float32 cast, the no-op note) run the re-run sample only; an evaluated one, all plus it.
    assert seen == [("reference", count, count), ("stage 0 baseline", 3, 3), ("stage 1 note", 3, 3),
                    ("stage 2 noisy_scorer", count + 3, count + 3)]


# ------------------------------------------------------------------------------------------------ check (a budget)


class Stop(BaseException):
    """What a sweep's budget raises (a BaseException: no `except Exception` turns it into a verdict)."""


@pytest.mark.parametrize("where", ["checked_say", "evaluate", "measure_mode"])
def test_a_raising_check_abandons_the_run_between_stages_batches_or_timed_blocks(write_experiment, tmp_path, where):
    bench = {"workloads": ["short-1"], "requests": 2, "warmup": 0, "blocks": 2, "forward_only": False}
    experiment = load_experiment(write_experiment([{"name": "note"}], benchmark=bench))
    calls = []

    def check():
        callers = {frame.function for frame in inspect.stack()[1:6]}
        calls.append(callers)
        if where in callers and (where != "checked_say" or len(calls) > 3):  # a message past the first stage
            raise Stop

    with pytest.raises(Stop):
        run_experiment(experiment, output_dir=tmp_path / "out", check=check)
    assert any(where in callers for callers in calls)
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []  # nothing published, no staging left
