"""tools/temperature_bounds.py: ECE under temperature tables, checked against the checker, on the tiny model."""
from __future__ import annotations

import json

import numpy as np
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
    isotonic = rows[f"per type, isotonic map fitted on {fit} (not a temperature table)"]
    assert isotonic["temperatures"] is None and all(0.0 <= value <= 1.0 for value in isotonic["ece"].values())
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


def test_isotonic_is_the_monotone_fit_that_keeps_each_block_mean():
    xs, ys = tool.isotonic(np.array([0.4, 0.1, 0.3, 0.2]), np.array([1, 1, 1, 0]))
    # sorted by x: 1, 0 violate the order and pool to 0.5 at x 0.15; then 1 and 1
    assert xs.tolist() == pytest.approx([0.15, 0.3, 0.4]) and ys.tolist() == pytest.approx([0.5, 1.0, 1.0])
    rng = np.random.default_rng(0)
    x, y = rng.random(200), rng.random(200) < 0.7
    xs, ys = tool.isotonic(x, y.astype(float))
    assert np.all(np.diff(ys) >= 0) and np.all(np.diff(xs) > 0)   # monotone: no violating pair is left
    assert float(np.interp(x, xs, ys).mean()) == pytest.approx(y.mean(), abs=0.05)


def test_by_type_rows_count_every_question_once_and_match_the_checker(tiny_checkpoint_dir, suites, capsys):
    fit, target = suites
    assert tool.main(["--checkpoint", str(tiny_checkpoint_dir), "--fit", fit, "--suite", target, "--by-type",
                      "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    runtime = load_runtime(tiny_checkpoint_dir, "float32")
    for suite in (fit, target):
        questions = [q for q in evaluate(runtime, suite_requests([load_suite(suite)])).questions
                     if q.label_index is not None]
        mine = [r for r in rows if r["suite"] == suite]
        assert sum(r["n"] for r in mine) == len(questions)
        for r in mine:   # own-table confidence and accuracy are the checker's, type by type
            chosen = [q for q in questions if q.type_name == r["type"]]
            assert r["accuracy"] == pytest.approx(np.mean([q.correct for q in chosen]), abs=1e-4)
            assert r["confidence_own"] == pytest.approx(np.mean([q.probabilities.max() for q in chosen]), abs=1e-4)
            assert r["ece_own"] == pytest.approx(outputs_ece(chosen), abs=1e-4)
            assert 0.0 <= r["ece_t1"] <= 1.0 and 0.0 < r["confidence_t1"] <= 1.0
    assert tool.main(["--checkpoint", str(tiny_checkpoint_dir), "--fit", fit, "--suite", target, "--by-type"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| suite | type | n |") and len(table) == 2 + len(rows)
