"""The pipeline's verdict on approximate passes: a changed decisive answer rejects, drift alone does not."""
from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np
import pytest
from fake_passes import REQUESTS

from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import evaluate
from laya_opt.passes.contract import PassSpec
from laya_opt.runs.decision_table import console_decision_table, decision_section
from laya_opt.runs.pipeline import Pipeline
from laya_opt.runs.report import stage_record


@dataclass(frozen=True)
class NudgeConfig:
    boost: float = 0.0      # added to every row's winning logit: probabilities move, no decision changes
    swap_row: int = -1      # in batches of `length` tokens, this row's top two logits swap places
    length: int = 0


def _nudged(forward, config: NudgeConfig):
    def run(model, kernels, batch):
        logits, action = forward(model, kernels, batch)
        values, valid = np.array(logits, dtype=np.float32), np.array(batch.marker_mask)
        for row in range(values.shape[0]):
            options = np.flatnonzero(valid[row])
            order = options[np.argsort(-values[row, options], kind="stable")]
            values[row, order[0]] += config.boost
            if row == config.swap_row and batch.input_ids.shape[1] == config.length:
                values[row, order[0]], values[row, order[1]] = values[row, order[1]], values[row, order[0]]
        return mx.array(values).astype(logits.dtype), action

    return run


NUDGE = PassSpec(name="nudge_logits", config_type=NudgeConfig, exact=False, replaces=frozenset({"forward"}),
                 description="test: an approximate pass that moves logits, and changes one answer when told",
                 apply=lambda runtime, config, data: (runtime.replace(forward=_nudged(runtime.forward, config)), {}))
SCORE_ROW = 1   # each request's questions are batched together: topic, level (score), yes


@pytest.fixture
def reference(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32")


def _first_batch_length(runtime) -> int:
    lengths = []

    def recording(model, kernels, batch):
        lengths.append(batch.input_ids.shape[1])
        return runtime.forward(model, kernels, batch)

    evaluate(runtime.replace(forward=recording), REQUESTS[:1])
    return lengths[0]


def _run(reference, config: NudgeConfig):
    return Pipeline([(NUDGE, config, "reject")], candidate_dtype="float32").run(reference, REQUESTS)


def test_an_approximate_pass_that_changes_one_decisive_answer_is_rejected(reference):
    stage = _run(reference, NudgeConfig(swap_row=SCORE_ROW, length=_first_batch_length(reference))).stages[1]
    assert stage.verdict == "rejected"
    decisions = stage.cumulative.decisions
    assert decisions.overall.decisive.changes == 1 and decisions.overall.near_tie.changes == 0
    assert decisions.changed_keys == ("r0/level",)
    assert {result.gate.metric for _, result in stage.failed_gates} == {"decisive_flips"}
    text = "\n".join(decision_section([stage_record(stage, None, allow_failed_gates=False)]))
    assert "1 decision(s) changed in 12 questions: the change rate is below 0.339 at 95% (r0/level)" in text


def test_an_approximate_pass_that_changes_nothing_is_accepted_however_far_it_drifts(reference):
    stage = _run(reference, NudgeConfig(boost=0.5)).stages[1]
    assert stage.verdict == "accepted" and stage.cumulative.decisions.overall.total.changes == 0
    exceeded = [result for result in stage.cumulative_gates if result.exceeded]
    assert exceeded and all(result.gate.diagnostic and result.passed for result in exceeded)
    record = stage_record(stage, None, allow_failed_gates=False)
    assert any(gate["status"] == "over (diagnostic)" for gate in record["gates"])
    text = "\n".join(decision_section([record]))
    assert "## Decision changes" in text and \
        "no decision changed in 12 questions: the change rate is below 0.221 at 95%" in text
    table = console_decision_table([record])
    # The tiny model's four `topic` answers are near ties (see fake_passes.REQUESTS); nothing changed.
    assert [row[:9] for row in table["rows"]] == [["1 nudge_logits", "reference", "12", "4"] + ["0"] * 5,
                                                  ["1 nudge_logits", "previous", "12", "4"] + ["0"] * 5]
    # Results written before decisions were recorded: no table, no error.
    old = {key: value for key, value in record.items() if key != "decisions"}
    assert console_decision_table([old]) is None and decision_section([old]) == []

