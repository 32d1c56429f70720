"""The suite report: top-1 bins, the decisive/near-tie split, the README tables, the command on the stand-in."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from laya_opt.fidelity.checker import question_output
from laya_opt.suites.lexical_baseline import baseline_report
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN, outputs_ece
from laya_opt.fidelity.suite_report import TOP1_EDGES, main, markdown, model_report, top1_bins, top_two_margin
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import suite_path

STANDIN = Path(__file__).resolve().parents[2] / "checkpoints" / "laya-tiny"


def _question(key, type_name, probabilities, label_index, phenomenon=None):
    tags = {"type": type_name, **({"phenomenon": phenomenon} if phenomenon else {})}
    return question_output(key, type_name, np.array(probabilities), 0.5, label_index=label_index, tags=tags)


def test_top_two_margin_and_top1_bins():
    assert top_two_margin(np.array([0.2, 0.7, 0.1])) == pytest.approx(0.5)
    assert top_two_margin(np.array([1.0])) == 1.0
    bins = top1_bins([0.3, 0.5, 0.95, 0.99, 1.0])
    assert [b["bin"] for b in bins] == [f"{a:.2f}-{b:.2f}" for a, b in zip(TOP1_EDGES, TOP1_EDGES[1:])]
    assert [b["share"] for b in bins] == [0.2, 0.2, 0.0, 0.2, 0.4]   # 0.99 and 1.0 are saturated


def test_model_report_splits_decisive_answers_from_near_ties():
    gap = NEAR_TIE_MARGIN / 2
    questions = [
        _question("r/a", "choice", [0.5 + gap / 2, 0.5 - gap / 2], 1, "close"),   # near tie, wrong
        _question("r/b", "choice", [0.1, 0.9], 1, "close"),                       # decisive, right
        _question("r/c", "noul", [0.995, 0.005], 0),                              # decisive, right, saturated
        _question("r/d", "score", [0.2, 0.7, 0.1], 0),                            # decisive, wrong
    ]
    report = model_report(questions)
    assert report["overall"] == {"accuracy": 0.5, "n": 4}
    assert report["near_tie"] == {"n": 1, "accuracy": 0.0} and report["decisive"] == {"n": 3, "accuracy": 2 / 3}
    assert report["ece"] == outputs_ece(questions)
    assert report["by_type"]["choice"] == {"accuracy": 0.5, "n": 2, "ece": outputs_ece(questions[:2])}
    assert report["by_type"]["noul"]["ece"] == outputs_ece(questions[2:3])
    assert report["by_case"] == {"choice/close": {"accuracy": 0.5, "n": 2}}
    assert report["top1"][-1]["share"] == 0.25


def _fake(name: str, accuracy: float, lexical: float) -> dict:
    by_type = {"noul": {"accuracy": accuracy, "n": 10, "ece": 0.25}}
    return {"suite": name, "n": 10,
            "model": {"overall": {"accuracy": accuracy, "n": 10}, "by_type": by_type, "ece": 0.1,
                      "top1": top1_bins([0.6] * 10), "decisive": {"n": 9, "accuracy": accuracy},
                      "near_tie": {"n": 1, "accuracy": None}},
            "lexical": {"overall": {"accuracy": lexical, "n": 10}, "by_type": {"noul": {"accuracy": lexical, "n": 10}}},
            "lexical_on_input": {"overall": {"accuracy": lexical / 2, "n": 10}}}


def test_markdown_puts_the_baseline_and_the_margin_next_to_the_model():
    text = markdown([_fake("alpha", 0.9, 0.4), _fake("beta", 0.5, 0.6)])
    assert "| alpha | 10 | 0.900 | 0.400 | +0.500 | 0.200 | 0.100 | 9 (0.900) | 1 (—) |" in text
    assert "| beta | 10 | 0.500 | 0.600 | -0.100 |" in text
    assert "| alpha | 0.900 / 0.400 |" in text and "| alpha | 0.00 | 1.00 | 0.00 | 0.00 | 0.00 |" in text
    assert "| suite | ECE | noul ECE |" in text and "| alpha | 0.100 | 0.250 |" in text
    older = _fake("gamma", 0.5, 0.6)   # a report written before the per-type ECE: shown as missing
    del older["model"]["by_type"]["noul"]["ece"]
    assert "| gamma | 0.100 | — |" in markdown([older])


def test_command_on_the_standin_and_a_bad_suite(capsys):
    assert main(["--checkpoint", str(STANDIN), "--suite", "smoke", "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    recorded = json.loads((STANDIN / "training_metrics.json").read_text())["smoke_calibrated"]["overall"]
    assert report["n"] == recorded["n"]
    assert report["model"]["overall"]["accuracy"] == pytest.approx(recorded["accuracy"])
    assert report["lexical"] == json.loads(json.dumps(baseline_report(load_suite(suite_path("smoke")))))
    assert report["model"]["decisive"]["n"] + report["model"]["near_tie"]["n"] == report["n"]
    # smoke's inputs fit the stand-in's budgets but for one question, and the heuristic on them loses it
    assert report["lexical_on_input"]["overall"] == {"accuracy": pytest.approx(28 / 30), "n": 30}
    assert report["lexical"]["overall"]["accuracy"] == pytest.approx(29 / 30)
    with pytest.raises(SystemExit) as refused:
        main(["--suite", "no-such-suite"])
    assert refused.value.code == 2 and "bundled suites" in capsys.readouterr().err
