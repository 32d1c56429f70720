"""tools/temperature_bounds.py: ECE under temperature tables, checked against the checker, on the tiny model."""
from __future__ import annotations

import json

import pytest
from fake_passes import write_tiny_suite
from repo_scripts import load_script

from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.metrics import outputs_ece
from laya_opt.runs.pipeline import suite_requests
from laya_opt.suites.suite_file import load_suite

tool = load_script("tools/temperature_bounds.py")


@pytest.fixture
def suites(tmp_path):
    return str(write_tiny_suite(tmp_path / "fit.jsonl", records=4)), str(write_tiny_suite(tmp_path / "a.jsonl",
                                                                                             name="a", records=3))


def test_the_tables_ece_matches_the_checker_and_no_fit_is_worse_than_t_1(tiny_checkpoint_dir, suites, capsys):
    fit, target = suites
    assert tool.main(["--checkpoint", str(tiny_checkpoint_dir), "--fit", fit, "--suite", target, "--json"]) == 0
    rows = {row["table"]: row for row in json.loads(capsys.readouterr().out)}
    runtime = load_runtime(tiny_checkpoint_dir, "float32")
    for suite in (fit, target):   # the checkpoint's own tables: what the checker reports
        checked = outputs_ece(evaluate(runtime, suite_requests([load_suite(suite)])).questions)
        assert rows["the checkpoint's"]["ece"][suite] == pytest.approx(checked, abs=1e-4)
    one = rows["T = 1"]["ece"]
    for shape in ("per type", "per type and bucket"):
        assert rows[f"{shape}, fitted on {fit}"]["ece"][fit] <= one[fit]
        assert rows[f"{shape}, best for {target} (a bound)"]["ece"][target] <= one[target]
        # With one target the pooled fit minimises the same ECE as the bound: never worse than T = 1.
        assert rows[f"{shape}, fitted on {target} pooled"]["ece"][target] <= one[target]
    assert set(rows[f"per type and bucket, fitted on {fit}"]["temperatures"]) <= {
        f"{kind}:{bucket}" for kind in ("choice", "score", "noul") for bucket in ("2", "3-5", "6-10", "11+")}


def test_bad_input_is_named_and_exits_2(tiny_checkpoint_dir, suites, tmp_path, capsys):
    fit, _ = suites
    assert tool.main(["--checkpoint", str(tiny_checkpoint_dir), "--fit", fit, "--suite", "no_such_suite"]) == 2
    assert "no_such_suite" in capsys.readouterr().err
    assert tool.main(["--checkpoint", str(tmp_path / "missing"), "--fit", fit]) == 2
    assert "missing" in capsys.readouterr().err


def test_the_default_checkpoint_is_the_bundled_stand_in(monkeypatch):
    seen = []
    monkeypatch.setattr(tool, "load_runtime", lambda path, dtype: seen.append(path) or (_ for _ in ()).throw(
        OSError("stop here")))
    assert tool.main(["--fit", "smoke"]) == 2
    assert seen and (seen[0] / "model.safetensors").is_file()
