"""Per-unit quantization sensitivity: one layer (or Linear) quantized at a time, ranked by the harm it does."""
import numpy as np
import pytest

import laya_opt as lo
from conftest import write_tiny_checkpoint
from laya_opt.core.decode import answer_probabilities
from laya_opt.fidelity.checker import EvalRequest
from laya_opt.fidelity.sensitivity import layer_sensitivity, sensitivity_table, unit_sensitivity
from laya_opt.passes.registry import get_pass
from laya_opt.core.runtime import load_runtime

REQUESTS = (
    EvalRequest("a", "hello world hello", {
        "pick": {"type": "choice", "instructions": "hello", "criteria": {"A": "hello", "B": "world", "C": "x"}},
        "holds": {"type": "noul", "instructions": "hello there", "labels": {"false": "B", "true": "A"}}}),
    EvalRequest("b", {"notes": "hello hello", "turns": 2}, {
        "rate": {"type": "score", "instructions": "hello hello", "criteria": ["low", "mid", "high", "top"]},
        "pair": {"type": "choice", "instructions": "which", "criteria": ["hello", "world"]}}),
)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return load_runtime(write_tiny_checkpoint(tmp_path_factory.mktemp("sens") / "tiny"), "float32")


def probabilities(runtime):
    rows = []
    for request in REQUESTS:
        prepared = runtime.prepare(request.state, request.questions)
        execution = runtime.execute(prepared)
        rows += [answer_probabilities(item, logits, runtime.calibration)
                 for item, logits in zip(prepared, execution.logits)]
    return rows


def test_layer_sensitivity_ranks_every_layer(runtime):
    rows = layer_sensitivity(runtime, REQUESTS, bits=2, group_size=32)
    assert [row["rank"] for row in rows] == [1, 2, 3]
    assert sorted(row["unit"] for row in rows) == ["encoder.layers.0", "encoder.layers.1", "encoder.layers.2"]
    keys = [(-row["argmax_flips"], -row["max_abs_dp"]) for row in rows]
    assert keys == sorted(keys)
    assert all(row["modules"] == 4 and row["questions"] == 4 for row in rows)
    # Each row is what quantizing that layer alone does.
    worst = rows[0]
    alone = probabilities(lo.apply(runtime, "quantize_encoder", bits=2, group_size=32, include=[worst["unit"]]))
    direct = max(float(np.max(np.abs(a - b))) for a, b in zip(probabilities(runtime), alone))
    assert worst["max_abs_dp"] == pytest.approx(direct, abs=1e-9) and direct > 0
    table = sensitivity_table(rows)
    assert len(table["rows"]) == 3 and table["columns"][:2] == ["rank", "unit"]


def test_linear_sensitivity_and_bad_arguments(runtime):
    rows = layer_sensitivity(runtime, REQUESTS[:1], bits=4, group_size=32, unit="linear")
    assert len(rows) == 12 and all(row["modules"] == 1 for row in rows)
    with pytest.raises(ValueError, match="unit must be one of layer, linear"):
        layer_sensitivity(runtime, REQUESTS, unit="block")
    with pytest.raises(ValueError, match="at least one request"):
        layer_sensitivity(runtime, (), group_size=32)


def test_with_bounds_units_rank_by_their_worst_ratio_to_the_bound(runtime):
    spec = get_pass("quantize_encoder")
    bounds = {"max_abs_dp": 1.0, "max_abs_dlogit": 1e-6}  # the logit bound binds: it decides the order
    rows = unit_sensitivity(runtime, REQUESTS, spec, spec.make_config({"bits": 2, "group_size": 32}), bounds=bounds)
    for row in rows:
        assert row["gate_ratio"] == pytest.approx(max(row["max_abs_dp"] / 1.0, row["max_abs_dlogit"] / 1e-6))
    keys = [(-row["argmax_flips"], -row["gate_ratio"]) for row in rows]
    assert keys == sorted(keys) and sensitivity_table(rows)["columns"][-1] == "worst gate ratio"
    excluded = unit_sensitivity(runtime, REQUESTS, spec, spec.make_config(
        {"bits": 2, "group_size": 32, "exclude": ["encoder.layers.1"]}))
    assert [row["unit"] for row in excluded if row["unit"] == "encoder.layers.1"] == []
