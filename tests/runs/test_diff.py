"""`laya-opt diff`: comparability statements, config delta, metric and latency deltas with their intervals."""
from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.runs.diff import config_delta, diff_results, flatten
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.report import load_results
from laya_opt.runs.runner import run_experiment

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
BENCH = {"workloads": ["short-1"], "requests": 2, "blocks": 2, "warmup": 0, "forward_only": False}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_checkpoint_dir):
    """The same experiment twice, except for the noisy pass's scale."""
    base = tmp_path_factory.mktemp("diff")
    suite = write_tiny_suite(base / "s.jsonl")
    paths = []
    for scale in (5.0, 0.5):
        raw = {"name": "d", "checkpoint": str(tiny_checkpoint_dir), "suites": [str(suite)],
               "candidate_dtype": "float32", "plugins": ["fake_passes"], "output_dir": str(base / "results"),
               "passes": [{"name": "noisy_scorer", "config": {"scale": scale}, "on_fail": "reject"}, {"name": "note"}],
               "benchmark": BENCH}
        (base / "d.yaml").write_text(yaml.safe_dump(raw))
        paths.append(run_experiment(load_experiment(base / "d.yaml"), now=NOW, history=False).results_dir)
    return [load_results(path) for path in paths]


def test_flatten_and_config_delta_name_key_paths():
    a = {"passes": [{"name": "q", "config": {"bits": 8}}], "suites": ["smoke"]}
    b = {"passes": [{"name": "q", "config": {"bits": 4}}], "suites": ["smoke", "heldout"]}
    assert flatten(a) == {"passes[0].name": "q", "passes[0].config.bits": 8, "suites[0]": "smoke"}
    assert config_delta(a, b) == (("passes[0].config.bits", 8, 4), ("suites[1]", None, "heldout"))


def test_the_same_setup_is_comparable_and_shows_what_changed(two_runs):
    a, b = two_runs
    result = diff_results(a, b)
    assert result.comparable and result.notes == ()
    assert result.config == (("passes[0].config.scale", 5.0, 0.5),)
    assert dict((stage, (va, vb)) for stage, va, vb in result.verdicts)["baseline"] == ("accepted", "accepted")
    deltas = {(m["stage"], m["metric"]): m for m in result.metrics}
    baseline = deltas[("baseline", "max_abs_dp")]
    assert baseline["a"] == baseline["b"] == 0.0 and baseline["delta"] == 0.0
    noisy = deltas[("noisy_scorer", "max_abs_dp")]
    assert noisy["delta"] == pytest.approx(noisy["b"] - noisy["a"]) and noisy["a"] != noisy["b"]
    latency = {(m["runtime"], m["workload"], m["mode"]): m for m in result.latency}
    assert set(latency) >= {("reference", "short-1", "end_to_end"), ("baseline", "short-1", "end_to_end")}
    row = latency[("baseline", "short-1", "end_to_end")]
    recorded = next(m for m in a.timings["summary"] if m["runtime"] == "0:baseline")
    assert row["speedup_a"] == recorded["speedup"] and row["p50_ms_a"] == recorded["p50_ms"]
    assert row["p50_change"] == pytest.approx((row["p50_ms_b"] - row["p50_ms_a"]) / row["p50_ms_a"])
    assert isinstance(row["intervals_overlap"], bool)


@pytest.mark.parametrize("edit, statement", [
    (lambda m: m["checkpoint"].update(sha256="f" * 64), "different checkpoints (weights sha256)"),
    (lambda m: m["suites"][0].update(sha256="e" * 64), "different suites"),
    (lambda m: m.update(token_sha256="d" * 64), "different token tensors"),
    (lambda m: m["environment"].update(device="Device(gpu, 0)"), "different devices: Device(cpu, 0) vs Device(gpu, 0)"),
    (lambda m: m["environment"]["versions"].update(mlx="0.1.0"), "different mlx versions"),
    (lambda m: m["environment"]["blas"].update(library="/x/libblas.so.3"), "different BLAS libraries"),
])
def test_runs_that_measured_different_things_are_called_not_comparable(two_runs, edit, statement):
    a, b = two_runs
    manifest = copy.deepcopy(b.manifest)
    edit(manifest)
    result = diff_results(a, b.__class__(**{**b.__dict__, "manifest": manifest}))
    assert not result.comparable
    assert any(reason.startswith(statement) for reason in result.incomparable), result.incomparable


def test_a_new_source_revision_is_a_note_not_a_reason(two_runs):
    a, b = two_runs
    manifest = copy.deepcopy(b.manifest)
    manifest["git"] = {"revision": "abc123", "dirty": True}
    result = diff_results(a, b.__class__(**{**b.__dict__, "manifest": manifest}))
    assert result.comparable and result.notes and "abc123 (dirty)" in result.notes[0]


def test_the_diff_command_prints_tables_or_json(two_runs, tmp_path):
    a, b = two_runs
    text = CliRunner().invoke(main, ["diff", str(a.path), str(b.path)], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[2].startswith("comparable: same checkpoint")
    assert "passes[0].config.scale" in text.output and "noisy_scorer" in text.output and "speed-up a" in text.output
    data = json.loads(CliRunner().invoke(main, ["diff", str(a.path), str(b.path), "--json"]).output)
    assert data["comparable"] is True and data["config"] == [{"key": "passes[0].config.scale", "a": 5.0, "b": 0.5}]
    missing = CliRunner().invoke(main, ["diff", str(a.path), str(tmp_path)])
    assert missing.exit_code == 2 and "is not a results directory" in missing.output
