"""tools/reship_screen.py: the reship's screen stops a checkpoint under which 8-bit changes a decisive answer."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from laya_opt.cli import main as cli

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("reship_screen", REPO / "tools" / "reship_screen.py")
reship_screen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reship_screen)


@pytest.fixture
def outcome(tiny_checkpoint_dir, tmp_path):
    """A real `laya-opt run --json` outcome of the headline 8-bit experiment (group size 32: the tiny model's MLP
    width is 96) on `smoke`, as the reship runs it."""
    experiment = tmp_path / "quant_enc8.yaml"
    experiment.write_text((REPO / "experiments" / "quant_enc8.yaml").read_text().replace("group_size: 64",
                                                                                          "group_size: 32"))
    result = CliRunner().invoke(cli, ["run", str(experiment), "--no-bench", "--quiet", "--allow-failed-gates",
                                      "--json", "--suite", "smoke", "--checkpoint", str(tiny_checkpoint_dir),
                                      "--output-dir", str(tmp_path / "screen")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    path = tmp_path / "screen.json"
    path.write_text(result.output)
    return path


def rewrite_stage(outcome_file: Path, edit) -> None:
    stages = Path(json.loads(outcome_file.read_text())["results_dir"]) / "stages.jsonl"
    records = [json.loads(line) for line in stages.read_text().splitlines()]
    for record in records:
        if record["exact"] is False:
            edit(record)
    stages.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_no_decisive_change_passes(outcome, capsys):
    assert reship_screen.main([str(outcome)]) == 0
    out = capsys.readouterr().out
    assert "quantize_encoder: 0 decisive answer(s) changed" in out and "screen: passed" in out


@pytest.mark.parametrize("kind", reship_screen.CHANGES)
def test_any_decisive_change_rejects(outcome, capsys, kind):
    def flip(record):
        record["decisions"]["incremental"]["decisive"][kind] = 1
    rewrite_stage(outcome, flip)
    assert reship_screen.main([str(outcome)]) == 4
    out = capsys.readouterr().out
    assert "quantize_encoder: 1 decisive answer(s) changed" in out and "REJECTED" in out


def test_near_tie_changes_are_reported_not_judged(outcome, capsys):
    def flip(record):
        record["decisions"]["incremental"]["near_tie"]["right_to_wrong"] = 3
    rewrite_stage(outcome, flip)
    assert reship_screen.main([str(outcome)]) == 0
    assert "3 near tie(s)" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["empty", "no_results_dir", "exact_only", "not_evaluated", "counts_cut"])
def test_unreadable_outcomes_are_one_named_error(outcome, capsys, case):
    if case == "empty":   # the run failed before printing its outcome (a bad experiment file)
        outcome.write_text("")
    elif case == "no_results_dir":
        outcome.write_text(json.dumps({"results_dir": str(outcome.parent / "missing")}))
    elif case == "exact_only":
        rewrite_stage(outcome, lambda record: record.update(exact=True))
    elif case == "counts_cut":   # a stages.jsonl of another shape: counts without every change kind
        rewrite_stage(outcome, lambda record: record["decisions"]["incremental"]["near_tie"].pop("unlabelled"))
    else:
        rewrite_stage(outcome, lambda record: record.update(decisions=None, error="quantize failed"))
    assert reship_screen.main([str(outcome)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(outcome) in err and len(err.strip().splitlines()) == 1
    if case == "not_evaluated":
        assert "quantize failed" in err
