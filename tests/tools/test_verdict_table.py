"""tools/verdict_table.py: one gated run per configuration, rows read back from each run's stages.jsonl."""
import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import verdict_table  # noqa: E402
from fake_passes import write_tiny_suite  # noqa: E402


def test_every_configuration_becomes_a_valid_experiment(tmp_path):
    from laya_opt.runs.experiment import parse_experiment

    names = set()
    for name, settings in verdict_table.CONFIGS.items():
        settings = {key: value for key, value in settings.items() if key != "bisect"}
        document = verdict_table.experiment(name, settings, "standin", "smoke")
        parsed = parse_experiment(document)
        names.add(document["name"])
        if "bits" in settings:
            (step,) = parsed.steps
            assert (step.config.bits, step.config.group_size) == (settings["bits"], settings["group_size"])
            assert tuple(settings.get("exclude", ())) == step.config.exclude and parsed.candidate_dtype == "float32"
        else:
            assert parsed.steps == () and parsed.candidate_dtype == settings["candidate_dtype"]
    assert len(names) == len(verdict_table.CONFIGS)  # one results name per row


def test_rows_come_from_the_runs_and_the_table_shows_their_verdicts(tmp_path):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl")
    out = tmp_path / "out"
    assert verdict_table.main(["--out", str(out), "--suite", str(suite), "--checkpoint", "standin",
                               "--only", "8-bit g64", "--only", "4-bit g64"]) == 0
    rows = json.loads((out / "verdicts.json").read_text())
    assert [r["config"] for r in rows] == ["8-bit g64", "4-bit g64"]
    for r in rows:
        last = [json.loads(line) for line in (Path(r["results_dir"]) / "stages.jsonl").read_text().splitlines()][-1]
        assert r["verdict"] == last["verdict"] and r["stage"] == "1 quantize_encoder"
        assert r["exit_code"] == (0 if r["verdict"] == "accepted" else 3)
        changed = r["decisive_r2w"] + r["decisive_w2r"] + r["near_tie_r2w"] + r["near_tie_w2r"] + r["other_changes"]
        assert changed == last["metrics"]["cumulative"]["decision_changes"]
        assert set(r["failed_gates"]) == {g["gate"] for g in last["gates"] if g["status"] == "FAIL"}
        assert bool(r["failed_gates"]) == (r["verdict"] != "accepted")  # a rejected row names its gates
        document = yaml.safe_load((out / "experiments" / f"{r['config'].replace(' ', '_')}.yaml").read_text())
        assert document["passes"][0]["config"]["bits"] == int(r["config"][0])
    table = (out / "verdicts.md").read_text()
    assert all(f"| {r['config']} | {r['verdict']} |" in table for r in rows)
    assert all(line.count(" | ") == 9 for line in table.splitlines() if line.startswith("| "))  # |Δp| escaped


def test_an_existing_out_directory_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        verdict_table.main(["--out", str(tmp_path)])
    assert "already exists" in capsys.readouterr().err


def test_a_run_that_errors_stops_the_script_with_its_message(tmp_path):
    with pytest.raises(SystemExit, match=r"error: laya-opt run .* exited 2"):
        verdict_table.main(["--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "missing"),
                            "--only", "8-bit g64"])


def test_a_row_names_each_failed_gate_once_and_counts_changes_by_kind(tmp_path):
    metrics = {"labelled": 40, "near_ties": 5, "decisive_right_to_wrong": 2, "decisive_wrong_to_right": 1,
               "near_tie_right_to_wrong": 3, "near_tie_wrong_to_right": 0, "wrong_to_other_wrong": 1,
               "unlabelled_changes": 0, "accuracy_delta": -0.025, "p99_abs_dp": 0.1, "max_abs_dp": 0.4,
               "max_abs_dlogit": 2.0, "kl_logits_max": 0.3}
    gates = [{"comparison": comparison, "gate": gate, "status": status}
             for comparison in ("incremental", "cumulative")
             for gate, status in (("decisive_flips <= 0", "FAIL"), ("finite == 1", "pass"),
                                  ("max_abs_dp <= 0.03 (diagnostic)", "over (diagnostic)"))]
    record = {"index": 1, "stage": "quantize_encoder", "verdict": "stopped", "metrics": {"cumulative": metrics},
              "gates": gates}
    (tmp_path / "stages.jsonl").write_text(json.dumps(record) + "\n")
    r = verdict_table.row("4-bit g64", {"results_dir": str(tmp_path), "exit_code": 3})
    assert r["failed_gates"] == ["decisive_flips <= 0"]  # once, though it failed both comparisons
    assert (r["decisive_r2w"], r["decisive_w2r"], r["near_tie_r2w"], r["near_tie_w2r"], r["other_changes"]) == \
        (2, 1, 3, 0, 1)
    table = verdict_table.markdown([r], "gate", "standin")
    assert "| 4-bit g64 | stopped | 2 / 1 | 3 / 0 | 1 | -0.0250 |" in table and "decisive_flips <= 0 |" in table
