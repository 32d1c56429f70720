"""make_gate_suite: which pool questions are kept, the composition report, bad input."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from laya_opt.fidelity import make_gate_suite as mg
from laya_opt.fidelity.checker import Outputs, question_output
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord


def record(rid: str, n: int, length: str = "short") -> SuiteRecord:
    questions = {f"q{i}": {"type": "noul", "instructions": f"holds {i}?"} for i in range(n)}
    tags = {qid: QuestionTag(type="noul", language="en", options=2, length_class=length) for qid in questions}
    return SuiteRecord(rid, f"state {rid}", questions, {qid: True for qid in questions}, tags)


def outputs_for(records, near: set[str]) -> Outputs:
    rows = []
    for r in records:
        for qid, tag in r.tags.items():
            key = f"{r.id}/{qid}"
            p = np.array([0.49, 0.51]) if key in near else np.array([0.1, 0.9])
            rows.append(question_output(key, "noul", p, 0.5, tags=tag.to_json()))
    return Outputs(identity="test", questions=tuple(rows))


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(mg, "BASE_QUESTIONS", 20)
    monkeypatch.setattr(mg, "NEAR_TIE_TARGET", 3)
    monkeypatch.setattr(mg, "LONG_SHARE", 0.25)


def test_choose_keeps_the_near_ties_long_questions_and_a_decisive_sample(small):
    screened = [record(f"gate-s-{i:05d}", 4) for i in range(10)]
    long = [record(f"gate-h-{i:05d}", 2, "long") for i in range(10)]
    near = {"gate-s-00001/q2", "gate-s-00007/q0"}
    pool = mg.Pool(screened, outputs_for(screened, near), long)
    chosen = mg.choose(pool, seed=3)
    keys = {f"{r.id}/{q}" for r in chosen for q in r.questions}
    assert near <= keys and len(keys) == 20
    assert sum(r.tags[q].length_class == "long" for r in chosen for q in r.questions) == 5
    assert [r.id for r in chosen] == sorted(r.id for r in chosen) and mg.choose(pool, seed=3) == chosen
    assert mg.choose(pool, seed=4) != chosen


def test_choose_caps_the_near_ties_at_the_target(small):
    screened = [record(f"gate-s-{i:05d}", 4) for i in range(10)]
    near = {f"gate-s-{i:05d}/q0" for i in range(8)}
    chosen = mg.choose(mg.Pool(screened, outputs_for(screened, near), []), seed=3)
    assert len(near & {f"{r.id}/{q}" for r in chosen for q in r.questions}) == 3


def test_the_composition_splits_every_group_by_near_tie_and_decisive():
    records = [record("a", 3), dataclasses.replace(record("b", 1, "long"))]
    table = mg.composition(outputs_for(records, {"a/q1"}))
    assert table["type"][("noul", "near tie")] == 1 and table["type"][("noul", "decisive")] == 3
    assert table["length_class"][("long", "decisive")] == 1 and table["variant"][("-", "decisive")] == 3
    text = mg.format_composition(table)
    assert "type         noul                    4         1         3" in text


def test_a_missing_checkpoint_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert mg.main(["--checkpoint", str(missing), "--out", str(tmp_path / "gate.jsonl")]) == 2
    assert str(missing) in capsys.readouterr().err and not (tmp_path / "gate.jsonl").exists()


def test_nan_margins_count_as_decisive():
    assert not mg.is_near_tie(np.array([np.nan, np.nan])) and mg.is_near_tie(np.array([0.5, 0.5]))


@pytest.mark.slow
def test_the_shipped_gate_equals_a_fresh_build_under_the_bundled_standin():
    """Minutes on a CPU: screens the pool again with the stand-in and compares the bytes."""
    from laya_opt.suites.suite_file import load_suite
    from laya_opt.util.resources import suites_dir

    under = load_suite(suites_dir() / "gate.jsonl").selected_under
    assert mg.main(["--check", "--max-pool-questions", str(under["max_pool_questions"]), "--min-near-ties", "0"]) == 0
