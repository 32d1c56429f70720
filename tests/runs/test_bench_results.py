"""`bench` writes the results format `run` writes: fresh directories, kind, history, diff, plot, no half output."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.runs.diff import diff_results
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.headtohead import load_bench
from laya_opt.runs.history import HistoryFilter, query
from laya_opt.runs.report import RESULT_FILES, load_results
from laya_opt.runs.runner import run_experiment
from laya_opt.util.errors import InputError

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
QUICK = ["--workload", "short-1", "--requests", "2", "--warmup", "0", "--blocks", "2", "--peer", "none"]


def write_experiment(base, checkpoint, **overrides) -> str:
    raw = {"name": "shared", "checkpoint": str(checkpoint), "suites": [str(write_tiny_suite(base / "s.jsonl"))],
           "candidate_dtype": "float32", "batch_size": 8, "plugins": ["fake_passes"],
           "output_dir": str(base / "runs"),
           "passes": [{"name": "masks_once", "on_fail": "reject"}, {"name": "noisy_scorer", "on_fail": "reject"}],
           "benchmark": {"workloads": ["short-1"], "requests": 2, "blocks": 2, "warmup": 0, "forward_only": True},
           **overrides}
    path = base / "shared.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def bench(experiment: str, root, *extra: str):
    return CliRunner().invoke(main, ["bench", experiment, *QUICK, *extra, "--out", str(root)])


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_checkpoint_dir):
    """Two benches into one root (one profiled) and a run of the same experiment."""
    base = tmp_path_factory.mktemp("bench-results")
    experiment = write_experiment(base, tiny_checkpoint_dir)
    outputs = [bench(experiment, base / "benches", "--no-profile"), bench(experiment, base / "benches")]
    for output in outputs:
        assert output.exit_code == 0, output.output
    assert "reference: computed" in outputs[0].output and "reference: cache hit" in outputs[1].output  # one cache
    benches = sorted((base / "benches").iterdir(), key=lambda path: (len(path.name), path.name))
    run = run_experiment(load_experiment(experiment), now=NOW, history=False).results_dir
    return {"benches": benches, "run": run, "outputs": outputs, "experiment": experiment, "base": base}


def test_two_benches_into_one_root_leave_two_complete_result_directories(results):
    first, second = results["benches"]
    assert first.name.startswith("shared-20") and second.name.startswith("shared-20") and first != second
    for directory in (first, second):
        assert {path.name for path in directory.iterdir()} >= set(RESULT_FILES)
        assert not any(path.name.startswith(".") for path in directory.parent.iterdir())  # no staging left
        manifest = json.loads((directory / "manifest.json").read_text())
        assert manifest["kind"] == "bench"
        assert f"results: {directory}" in "".join(output.output for output in results["outputs"])
    assert json.loads((results["run"] / "manifest.json").read_text())["kind"] == "run"


def test_the_shared_format_keeps_every_gate_measured_and_the_per_cell_profile(results):
    directory = results["benches"][1]
    stages = load_results(directory).stages
    assert [s["verdict"] for s in stages] == ["accepted", "accepted", "rejected"]
    (exact,) = [g for g in stages[1]["gates"] if g["comparison"] == "incremental" and g["gate"].startswith(
        "max_abs_dp <=")]
    assert exact["measured"] == 0.0 and exact["status"] == "pass"  # passing gates keep their measured values
    assert set(stages[0]["timings"]["short-1"]) == {"end_to_end", "forward"}  # stage 0 is the mlx eager baseline
    assert stages[2]["timings"] == {}  # a rejected stage is not timed
    timings = json.loads((directory / "timings.json").read_text())
    assert timings["baseline"] == "mlx eager" and timings["baseline_stage"] == 0
    assert set(timings["profile"]) == {"mlx eager", "1:masks_once"}
    assert set(timings["profile"]["1:masks_once"]["short-1"]) >= {"phases", "timeline"}
    assert timings["answers"]["1:masks_once"]["short-1"]["argmax_agreement"] == 1.0
    assert json.loads((results["benches"][0] / "timings.json").read_text())["profile"] is None  # --no-profile
    record = load_bench(directory)
    assert record["stages"][2]["failed_gates"] and not all(g["passed"] for g in record["stages"][2]["gates"])
    assert (directory / "report.md").read_text().startswith("# Head to head: shared")


def test_diff_compares_a_bench_with_a_run_and_two_benches(results):
    first, second = (load_results(path) for path in results["benches"])
    run = load_results(results["run"])
    mixed = diff_results(second, run)
    assert mixed.comparable, mixed.incomparable  # same checkpoint, suites, tokens and platform
    assert "kinds bench vs run" in mixed.notes
    assert "speed-ups are against different baselines: mlx eager vs reference" in mixed.notes
    latency = {(m["runtime"], m["workload"], m["mode"]) for m in mixed.latency}
    # the bench's `mlx eager` is stage 0, the run's `0:baseline`: both match as the baseline stage
    assert ("baseline", "short-1", "end_to_end") in latency and ("masks_once", "short-1", "end_to_end") in latency
    assert {stage for stage, a, b in mixed.verdicts if a == b} == {"baseline", "masks_once", "noisy_scorer"}
    benches = diff_results(first, second)
    assert benches.comparable and not benches.notes and benches.config == ()
    assert {m["runtime"] for m in benches.latency} == {"baseline", "masks_once"}
    shown = CliRunner().invoke(main, ["diff", str(second.path), str(run.path)])
    assert shown.exit_code == 0, shown.output
    assert "note: kinds bench vs run" in shown.output and "comparable:" in shown.output


def test_plot_reads_a_bench_directory(results, tmp_path):
    from laya_opt.runs.plots import available

    if not available():
        pytest.skip("matplotlib is not installed")
    directory = results["benches"][1]
    for name in ("latency.png", "speed_vs_fidelity.png"):
        (directory / name).unlink()
    drawn = CliRunner().invoke(main, ["plot", str(directory)])
    assert drawn.exit_code == 0, drawn.output
    assert "latency.png, speed_vs_fidelity.png" in drawn.output
    assert (directory / "latency.png").stat().st_size > 0
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = CliRunner().invoke(main, ["plot", str(empty)])
    assert refused.exit_code == 2 and "not a results directory" in refused.output


def test_load_bench_refuses_a_run_result(results):
    with pytest.raises(InputError, match="not a bench result"):
        load_bench(results["run"])


def test_history_lists_bench_runs_with_their_kind(tiny_checkpoint_dir, tmp_path):
    experiment = write_experiment(tmp_path, tiny_checkpoint_dir)
    assert bench(experiment, tmp_path / "out", "--no-profile").exit_code == 0
    run_experiment(load_experiment(experiment), bench=False, now=NOW)
    rows = query()
    assert {(row["kind"], row["stage"]) for row in rows} >= {("bench", "masks_once"), ("run", "masks_once")}
    assert {row["kind"] for row in query(where=HistoryFilter(kind="bench"))} == {"bench"}
    (bench_dir,) = (tmp_path / "out").iterdir()
    assert {row["results_dir"] for row in rows if row["kind"] == "bench"} == {str(bench_dir)}
    shown = CliRunner().invoke(main, ["history", "--kind", "bench"])
    assert shown.exit_code == 0 and "bench" in shown.output and "1 run(s)" in shown.output
    assert "kind" in CliRunner().invoke(main, ["history"]).output


def test_a_crash_mid_bench_leaves_no_directory(tiny_checkpoint_dir, tmp_path, monkeypatch):
    from laya_opt.runs import headtohead

    def broken(*args, **kwargs):
        raise RuntimeError("timing harness broke")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    experiment = write_experiment(tmp_path, tiny_checkpoint_dir)
    timing = headtohead.benchmark
    monkeypatch.setattr(headtohead, "benchmark", broken)
    crashed = bench(experiment, tmp_path / "out")
    assert crashed.exit_code == 1 and "timing harness broke" in crashed.output
    assert not (tmp_path / "out").exists()  # the root it created is gone with the staging dir
    (tmp_path / "kept").mkdir()
    monkeypatch.setattr(headtohead, "benchmark", timing)
    monkeypatch.setattr(headtohead, "profile_runtimes", interrupted)  # Ctrl-C after the timing
    stopped = bench(experiment, tmp_path / "kept")
    assert stopped.exit_code == 130 and list((tmp_path / "kept").iterdir()) == []
    assert query() == []  # nothing reached the history either


@pytest.mark.parametrize("args, named", [
    (["bench", "{missing}", "--out", "{out}"], "does not exist"),
    (["bench", "{experiment}", "--peer", "torch", "--out", "{out}"], "'--peer'"),
    (["bench", "{experiment}", "--workload", "huge-9", "--out", "{out}"], "unknown workload 'huge-9'"),
    (["bench", "{bad_suite}", "--out", "{out}"], "suites[0]"),
])
def test_bad_input_exits_2_with_nothing_written(tiny_checkpoint_dir, tmp_path, args, named):
    experiment = write_experiment(tmp_path, tiny_checkpoint_dir)
    bad = tmp_path / "bad"
    bad.mkdir()
    bad_suite = write_experiment(bad, tiny_checkpoint_dir, suites=[str(tmp_path / "no-such-suite.jsonl")])
    values = {"missing": str(tmp_path / "missing.yaml"), "experiment": experiment, "bad_suite": bad_suite,
              "out": str(tmp_path / "out")}
    result = CliRunner().invoke(main, [arg.format(**values) for arg in args])
    assert result.exit_code == 2 and named in result.output, result.output
    assert not (tmp_path / "out").exists() and query() == []


def test_plot_still_reads_a_bench_directory_of_the_old_format(tmp_path):
    """benchmarks/results/ holds bench output from before the shared format: head_to_head.json alone."""
    from laya_opt.runs.plots import available

    if not available():
        pytest.skip("matplotlib is not installed")
    samples = {"mlx eager": {"short-1": {"end_to_end": {"blocks_ms": [[1.0, 2.0]]}}}}
    record = {"experiment": "old", "answers": {"mlx eager": {"short-1": {"max_abs_dp": 0.0}}},
              "bench": {"samples": samples, "summary": [{"runtime": "mlx eager", "workload": "short-1",
                                                         "mode": "end_to_end", "speedup": None}]}}
    (tmp_path / "head_to_head.json").write_text(json.dumps(record))
    drawn = CliRunner().invoke(main, ["plot", str(tmp_path)])
    assert drawn.exit_code == 0 and "latency.png" in drawn.output and (tmp_path / "latency.png").is_file()
