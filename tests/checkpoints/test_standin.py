"""The shipped stand-in checkpoint loads strictly and reproduces its recorded held-out accuracy."""
import json
from pathlib import Path

import pytest

from laya_opt.fidelity.checker import evaluate, requests_from_suite
from laya_opt.fidelity.metrics import accuracy
from laya_opt.suites.suite_file import load_suite
from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.config import architecture, parameter_count
from laya_opt.core.runtime import load_runtime

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "checkpoints" / "laya-tiny"


def test_standin_is_the_standin_architecture_in_upstream_layout():
    checkpoint = load_checkpoint(STANDIN, dtype="float32")
    encoder, agent = architecture("standin")
    assert parameter_count(checkpoint.encoder_config, checkpoint.agent_config) == parameter_count(encoder, agent)
    assert checkpoint.encoder_config.head_dim == 64 and checkpoint.encoder_config.num_hidden_layers >= 6
    assert set(checkpoint.encoder_config.layer_types) == {"full_attention", "sliding_attention"}
    assert len(checkpoint.agent_config.act_costs) == 1 and checkpoint.agent_config.head_layers == 2
    assert (STANDIN / "model.safetensors").stat().st_size <= 25 * 2**20


def test_standin_reproduces_its_recorded_smoke_accuracy():
    recorded = json.loads((STANDIN / "training_metrics.json").read_text())["smoke_calibrated"]["overall"]
    suite = load_suite(ROOT / "laya_opt" / "suites" / "data" / "smoke.jsonl")
    outputs = evaluate(load_runtime(STANDIN, dtype="float32", batch_size=32), requests_from_suite(suite))
    assert len(outputs.questions) == recorded["n"]
    assert accuracy(outputs.questions) == pytest.approx(recorded["accuracy"], abs=1e-9)


@pytest.mark.slow
def test_standin_reproduces_its_recorded_heldout_accuracy():
    recorded = json.loads((STANDIN / "training_metrics.json").read_text())["heldout_calibrated"]["overall"]
    suite = load_suite(ROOT / "laya_opt" / "suites" / "data" / "heldout.jsonl")
    outputs = evaluate(load_runtime(STANDIN, dtype="float32", batch_size=32), requests_from_suite(suite))
    assert len(outputs.questions) == recorded["n"]
    assert accuracy(outputs.questions) == pytest.approx(recorded["accuracy"], abs=0.01)
