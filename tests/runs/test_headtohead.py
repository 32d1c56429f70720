"""The head-to-head run on the CPU: its record, report and plots, with the upstream peer absent."""
import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from laya_opt.cli import main
from laya_opt.runs.headtohead import answer_drift, load_bench, render_head_to_head
from laya_opt.timing.peer import upstream_problem

EXPERIMENT = """name: h2h-tiny
checkpoint: {checkpoint}
candidate_dtype: float32
batch_size: 8
suites: [{suite}]
passes:
  - {{name: prefix_cache, on_fail: reject}}
  - {{name: masks_once, on_fail: reject}}
  - {{name: noisy_scorer, on_fail: reject}}
plugins: [fake_passes]
"""


def only_result(root):
    """The one results directory a bench wrote under `root`."""
    (directory,) = root.iterdir()
    return directory


def test_answer_drift_compares_argmax_and_probabilities():
    ref = {"answers": {"a": {"type": "choice", "probabilities": {"x": 0.6, "y": 0.4}},
                       "b": {"type": "noul", "noul": 0.7}}}
    same = answer_drift(ref, ref)
    assert same == {"questions": 2, "argmax_agreement": 1.0, "max_abs_dp": 0.0}
    flipped = {"answers": {"a": {"type": "choice", "probabilities": {"x": 0.3, "y": 0.7}},
                           "b": {"type": "noul", "noul": 0.75}}}
    drift = answer_drift(ref, flipped)
    assert drift["argmax_agreement"] == 0.5 and drift["max_abs_dp"] == pytest.approx(0.3)


def test_bench_command_writes_a_complete_record_without_the_peer(tiny_checkpoint_dir, tmp_path):
    from fake_passes import write_tiny_suite

    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=2)
    path = tmp_path / "h2h.yaml"
    path.write_text(EXPERIMENT.format(checkpoint=tiny_checkpoint_dir, suite=suite))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["bench", str(path), "--workload", "short-1", "--requests", "2", "--warmup", "0",
                                       "--blocks", "2", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = only_result(out)  # the bench writes a results directory under --out (it was --out itself)
    record = load_bench(out)
    assert record["peer_note"] == upstream_problem() and record["token_identity"] is None
    assert record["suite_labels"] == "used"  # the tiny checkpoint does not say its weights are random
    assert [s["verdict"] for s in record["stages"]] == ["accepted", "accepted", "accepted", "rejected"]
    (exact_dp,) = [g for g in record["stages"][2]["gates"]  # passing gates keep their measured values
                   if g["kind"] == "incremental" and g["gate"].startswith("max_abs_dp <=")]
    assert exact_dp["measured"] == 0.0 and exact_dp["passed"] is True
    assert not all(g["passed"] for g in record["stages"][3]["gates"])
    timed = {row["runtime"] for row in record["bench"]["summary"]}
    assert timed == {"mlx eager", "1:prefix_cache", "2:masks_once"}  # rejected stages are not timed
    assert {row["mode"] for row in record["bench"]["summary"]} == {"end_to_end", "forward"}
    assert record["answers"]["2:masks_once"]["short-1"]["argmax_agreement"] == 1.0
    assert set(record["profile"]) == {"mlx eager", "2:masks_once"}
    timeline = record["profile"]["mlx eager"]["short-1"]["timeline"]
    assert "skipped" in timeline and record["token_sha256"]["short-1"]
    graph = record["profile"]["mlx eager"]["short-1"]["graph"]
    assert graph["nodes_per_forward"] > 0 and graph["device"].startswith("Device(cpu")
    report = (out / "report.md").read_text()
    assert report == render_head_to_head(record) and "| 2:masks_once |" in report and "upstream: " in report
    assert f"| {graph['nodes_per_forward']} |" in report  # the graph-nodes column of the profile table
    phases = record["profile"]["2:masks_once"]["short-1"]["phases"]  # the host split per profiled cell
    assert f"| {phases['host_p50_ms']:.3f} / {phases['host_p95_ms']:.3f} |" in report and "host p50 / p95 ms" in report
    assert (out / "latency.png").stat().st_size > 0 and (out / "speed_vs_fidelity.png").stat().st_size > 0


def test_bench_can_time_only_the_final_stage_while_gating_every_stage(tiny_checkpoint_dir, tmp_path):
    from fake_passes import write_tiny_suite

    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=2)
    path = tmp_path / "h2h.yaml"
    path.write_text(EXPERIMENT.format(checkpoint=tiny_checkpoint_dir, suite=suite))
    out = tmp_path / "out"
    args = ["bench", str(path), "--workload", "short-1", "--requests", "2", "--warmup", "0", "--blocks", "2",
            "--no-profile", "--time", "final", "--out", str(out)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = only_result(out)
    record = load_bench(out)
    assert [s["verdict"] for s in record["stages"]] == ["accepted", "accepted", "accepted", "rejected"]
    assert {row["runtime"] for row in record["bench"]["summary"]} == {"mlx eager", "2:masks_once"}
    assert set(record["answers"]) == {"mlx eager", "2:masks_once"} and record["timed_stages"] == "final"
    assert "- timed: the final accepted stage only (every stage gated)" in (out / "report.md").read_text()
    refused = CliRunner().invoke(main, args[:-4] + ["--time", "some", "--out", str(tmp_path / "other")])
    assert refused.exit_code == 2 and "'--time'" in refused.output and not (tmp_path / "other").exists()


def test_budget_skips_cells_that_have_not_started(tiny_checkpoint_dir):
    from laya_opt.timing.bench import BenchConfig, benchmark
    from laya_opt.core.runtime import load_runtime

    runtime = load_runtime(tiny_checkpoint_dir)
    workload = SimpleNamespace(name="w", requests=(("hello", {"q": {"type": "noul", "instructions": "hello"}}),))
    result = benchmark("a", {"a": runtime}, [workload], BenchConfig(requests=1, warmup=0, blocks=1), deadline=0.0)
    assert result.measurements == () and result.skipped == ("w end_to_end", "w forward")


def mark_random(checkpoint_dir, tmp_path):
    import shutil

    from laya_opt.util.jsonio import read_json
    from laya_opt.core.synth import RANDOM_WEIGHTS

    copy = tmp_path / "random"
    shutil.copytree(checkpoint_dir, copy)
    (copy / "manifest.json").unlink(missing_ok=True)  # its checksums cover the config we edit
    config = read_json(copy / "rl_agent_config.json")
    config["training"] = {"weights": RANDOM_WEIGHTS}
    (copy / "rl_agent_config.json").write_text(json.dumps(config))
    return copy


def test_random_weights_are_detected_from_the_agent_config(tiny_checkpoint_dir, tmp_path):
    from laya_opt.util.resources import standin_checkpoint
    from laya_opt.core.synth import has_random_weights

    assert not has_random_weights(standin_checkpoint()) and not has_random_weights(tiny_checkpoint_dir)
    assert has_random_weights(mark_random(tiny_checkpoint_dir, tmp_path))
    assert not has_random_weights(tmp_path / "missing")


def test_a_random_checkpoint_is_gated_without_its_suite_labels(tiny_checkpoint_dir, tmp_path):
    """On random weights a label flip is chance, so bench gates on drift only, and says so."""
    from fake_passes import write_tiny_suite

    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=2)
    path = tmp_path / "h2h.yaml"
    path.write_text(EXPERIMENT.format(checkpoint=mark_random(tiny_checkpoint_dir, tmp_path), suite=suite))
    result = CliRunner().invoke(main, ["bench", str(path), "--workload", "short-1", "--requests", "1", "--warmup", "0",
                                       "--blocks", "1", "--no-profile", "--out", str(tmp_path / "out")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = only_result(tmp_path / "out")
    record = load_bench(out)
    assert record["suite_labels"].startswith("ignored: the checkpoint has random weights")
    assert "suite labels ignored" in result.output and "- suite labels: ignored" in (out / "report.md").read_text()
    assert [s["verdict"] for s in record["stages"]] == ["accepted", "accepted", "accepted", "rejected"]


def test_plots_draw_only_the_cells_that_were_timed(tmp_path, monkeypatch):
    from laya_opt.runs import plots
    from laya_opt.runs.plots import available, write_plots

    if not available():
        pytest.skip("matplotlib is not installed")
    answers = {"mlx eager": {"short-1": {"max_abs_dp": 1e-4}, "long-1": {"max_abs_dp": 2e-4}},
               "fast": {"short-1": {"max_abs_dp": 3e-4}, "long-1": {"max_abs_dp": 4e-4}}}
    nothing_timed = {"experiment": "x", "answers": answers, "bench": {"samples": {}, "summary": []}}
    assert write_plots(nothing_timed, tmp_path) == [] and list(tmp_path.iterdir()) == []
    samples = {label: {"short-1": {"end_to_end": {"blocks_ms": [[1.0, 2.0], [1.5]]}}} for label in answers}
    summary = [{"runtime": "mlx eager", "workload": "short-1", "mode": "end_to_end", "speedup": None},
               {"runtime": "fast", "workload": "short-1", "mode": "end_to_end", "speedup": {"median": 2.0}}]
    partial = {"experiment": "x", "answers": answers, "bench": {"samples": samples, "summary": summary}}
    assert write_plots(partial, tmp_path) == ["latency.png", "speed_vs_fidelity.png"]
    assert all((tmp_path / name).stat().st_size > 0 for name in ("latency.png", "speed_vs_fidelity.png"))
    drawn = []
    monkeypatch.setattr(plots, "speed_fidelity_plot", lambda points, path, title: drawn.extend(points))
    write_plots(partial, tmp_path)
    assert drawn == [("mlx eager", "short-1", 1.0, 1e-4), ("fast", "short-1", 2.0, 3e-4)]  # long-1 was never timed
