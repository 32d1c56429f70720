"""The quantize_encoder pass: selection, checks, input immutability, fidelity and modes."""
import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten

import laya_opt as lo
from laya_opt.core import quant, quant_eval
from laya_opt.core.decode import answer_probabilities
from laya_opt.core.runtime import load_runtime
from laya_opt.passes.quantize_encoder import PASS

from conftest import write_tiny_checkpoint

REQUESTS = (
    ("hello world hello", {
        "pick": {"type": "choice", "instructions": "hello", "criteria": {"A": "hello", "B": "world", "C": "x"}},
        "holds": {"type": "noul", "instructions": "hello there", "labels": {"false": "B", "true": "A"}}}),
    ({"notes": "hello hello", "turns": 2}, {
        "rate": {"type": "score", "instructions": "hello hello", "criteria": ["low", "mid", "high", "top"]},
        "pair": {"type": "choice", "instructions": "which", "criteria": ["hello", "world"]}}),
)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return load_runtime(write_tiny_checkpoint(tmp_path_factory.mktemp("qe") / "tiny"), "float32")


def quantize(runtime, **values):
    return lo.apply(runtime, PASS.make_config({"group_size": 32, **values}))


def probabilities(runtime):
    rows = []
    for state, questions in REQUESTS:
        prepared = runtime.prepare(state, questions)
        execution = runtime.execute(prepared)
        rows += [answer_probabilities(item, logits, runtime.calibration)
                 for item, logits in zip(prepared, execution.logits)]
    return rows


def test_spec_declares_an_approximate_model_pass():
    assert PASS.name == "quantize_encoder" and PASS.exact is False and PASS.replaces == {"model"}


def test_input_runtime_is_unchanged(runtime):
    before = {name: np.array(value) for name, value in tree_flatten(runtime.model.parameters())}
    info_before = dict(runtime.info)
    quantized = quantize(runtime)
    assert quantized.model is not runtime.model
    assert all(type(layer.attn.Wqkv) is nn.Linear and type(layer.mlp.Wo) is nn.Linear
               for layer in runtime.model.encoder.layers)
    after = dict(tree_flatten(runtime.model.parameters()))
    assert set(after) == set(before)
    assert all(np.array_equal(np.array(after[name]), value) for name, value in before.items())
    assert dict(runtime.info) == info_before and runtime.applied == ()
    assert quantized.applied == ("quantize_encoder",) and quantized.identity != runtime.identity


def test_default_selection_is_the_encoder_linears_only(runtime):
    model = quantize(runtime).model
    kinds = {path: type(module) for path, module in quant.weight_modules(model).items()}
    packed = sorted(path for path, kind in kinds.items() if kind is nn.QuantizedLinear)
    assert packed == sorted(f"encoder.layers.{i}.{name}" for i in range(3)
                            for name in ("attn.Wqkv", "attn.Wo", "mlp.Wi", "mlp.Wo"))
    # The substring trap of §13.3: these paths contain "layers." but are not under encoder.layers.
    for path in ("head.layers.0.self_attn.in_proj", "head.layers.0.linear2", "scorer.layers.1", "scorer.layers.3",
                 "act_head.layers.0", "act_head.layers.2"):
        assert kinds[path] is nn.Linear, path
    assert kinds["encoder.embeddings.tok_embeddings"] is nn.Embedding and kinds["type_emb"] is nn.Embedding


def test_explicit_action_head_selection_is_an_error_naming_it(runtime):
    with pytest.raises(ValueError, match=r"act_head.layers.0: input width 68 is not divisible by group_size 32 "
                                         r"\(selected by 'act_head.layers.0'\)"):
        quantize(runtime, include=["encoder.layers.*", "act_head.layers.0"])
    with pytest.raises(ValueError, match="act_head.layers.2: the action head stays dense"):
        quantize(runtime, include=["act_head.layers.2"])


def test_default_selection_that_does_not_fit_the_group_is_an_error(runtime):
    # The fixture's intermediate_size 96 is not a multiple of 64: every mlp.Wo is named, nothing is skipped.
    with pytest.raises(ValueError) as raised:
        lo.apply(runtime, PASS.make_config({}))
    message = str(raised.value)
    assert "cannot quantize 3 selected module(s)" in message
    for index in range(3):
        assert f"encoder.layers.{index}.mlp.Wo: input width 96 is not divisible by group_size 64" in message


def test_include_and_exclude_choose_modules_by_path(runtime):
    model = quantize(runtime, include=["encoder.layers.*", "head.layers.*", "encoder.embeddings.tok_embeddings"],
                     exclude=["encoder.layers.2"]).model
    assert isinstance(model.encoder.embeddings.tok_embeddings, nn.QuantizedEmbedding)
    assert isinstance(model.head.layers[0].linear2, nn.QuantizedLinear)
    assert type(model.encoder.layers[2].attn.Wqkv) is nn.Linear
    assert isinstance(model.encoder.layers[1].attn.Wqkv, nn.QuantizedLinear)


@pytest.mark.parametrize("values,message", [
    ({"bits": 7}, "bits 7"),
    ({"group_size": 16}, "group_size 16"),
    ({"mode": "mxfp4"}, "bits 8 is not supported by mode 'mxfp4'"),
    ({"mode": "mxfp4", "bits": 4}, "group_size 64 is not supported by mode 'mxfp4'; choose one of \\[32\\]"),
    ({"mode": "int8"}, "mode 'int8'"),
    ({"include": []}, "quantize_encoder.include: must not be empty"),
    ({"exclude": [" encoder.layers.0"]}, "exclude: selector"),
    ({"bits": "8"}, "quantize_encoder.bits: expected an integer"),
    ({"sensitivity": True}, "unknown key"),
])
def test_bad_config_is_refused_naming_the_field(values, message):
    with pytest.raises(ValueError, match=message):
        PASS.make_config(values)


def test_an_unsupported_mode_names_mode_device_and_version(runtime, monkeypatch):
    def no_fp_formats(weight, group_size=None, bits=None, mode="affine", **kwargs):
        raise ValueError(f"[quantize] unknown mode {mode}")

    quant._probe.cache_clear()
    monkeypatch.setattr(mx, "quantize", no_fp_formats)
    try:
        with pytest.raises(ValueError, match=rf"mode 'mxfp8' .* not supported by MLX {mx.__version__} on "):
            quantize(runtime, bits=8, mode="mxfp8")
    finally:
        monkeypatch.undo()
        quant._probe.cache_clear()


def test_manifest_goes_into_info_and_renders(runtime):
    quantized = quantize(runtime, bits=4)
    report = quantized.info["quantize_encoder"]
    assert report["scheme"] == {"bits": 4, "group_size": 32, "mode": "affine"}
    rows = report["coverage"]["rows"]
    assert sum(row["status"] == "quantized" for row in rows) == 12
    assert {row["detail"] for row in rows if row["path"].startswith("act_head.")} == {quant.ACTION_HEAD_REASON}
    assert report["coverage"]["bits_per_weight_after"] < report["coverage"]["bits_per_weight_before"] == 32.0
    json.dumps(report)  # plain data for the stage report
    (table,) = report["tables"]
    assert len(table["rows"]) == len(rows) and table["columns"][0] == "module"
    assert report["summary"].startswith("12 of ") and "bits/weight" in report["summary"]


def test_quantized_outputs_drift_by_bits(runtime):
    reference = probabilities(runtime)
    drift = {}
    for bits in (8, 4, 2):
        candidate = probabilities(quantize(runtime, bits=bits))
        drift[bits] = max(float(np.max(np.abs(a - b))) for a, b in zip(reference, candidate))
        assert all(np.all(np.isfinite(p)) for p in candidate)
    assert 0.0 < drift[8] < 0.01
    assert drift[8] < drift[4] < drift[2]


@pytest.mark.parametrize("mode,bits", [("mxfp8", 8), ("mxfp4", 4)])
def test_fp_modes_run_and_are_recorded(runtime, mode, bits):
    quantized = quantize(runtime, bits=bits, mode=mode)
    layer = quantized.model.encoder.layers[0].attn.Wqkv
    assert layer.mode == mode and "biases" not in layer and layer.scales.dtype == mx.uint8
    assert all(np.all(np.isfinite(p)) for p in probabilities(quantized))


# ----------------------------------------------------------------------------- eval_path (issue 22 item 6)


def test_default_eval_path_keeps_the_packed_kernel(runtime):
    quantized = quantize(runtime)
    report = quantized.info["quantize_encoder"]
    assert report["eval_path"] == {"path": "packed", "why": "eval_path: packed (asked); slow on the CPU backend",
                                   "check": None}
    assert report["summary"].endswith("; kernel: packed (MLX quantized matmul)")


def test_auto_on_the_cpu_evaluates_dense_dequantized_after_checking_it(runtime):
    packed, dense = quantize(runtime), quantize(runtime, eval_path="auto")
    report = dense.info["quantize_encoder"]["eval_path"]
    assert report["path"] == "dense-dequantized" and "CPU backend" in report["why"]
    assert report["check"]["ok"] and report["check"]["calls"] == 12
    assert dense.info["quantize_encoder"]["summary"].endswith(
        "; kernel: dense-dequantized matmuls (same quantized values; timed as dense GEMMs, not packed-kernel speed)")
    assert report["check"]["inputs"] == "a seeded probe batch (check_with: none)"
    assert {type(m) for m in quant.weight_modules(dense.model).values() if isinstance(m, nn.QuantizedLinear)} == \
        {quant_eval.DequantizedLinear}
    # the same weights, the same coverage manifest: only the kernel differs
    assert dense.info["quantize_encoder"]["coverage"] == packed.info["quantize_encoder"]["coverage"]
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(probabilities(dense), probabilities(packed)))
    assert worst < 1e-5


def test_check_with_names_the_requests_it_checked_on(runtime):
    config = PASS.make_config({"group_size": 32, "eval_path": "dense", "check_with": "mine"})
    dense = lo.apply(runtime, config, data={"check_with": REQUESTS})
    check = dense.info["quantize_encoder"]["eval_path"]["check"]
    assert check["inputs"] == "the 2 longest requests of 'mine'" and check["ok"]
    assert lo.apply(runtime, config.__class__(group_size=32, check_with="mine"),  # packed: nothing to check
                    data={"check_with": REQUESTS}).info["quantize_encoder"]["eval_path"]["check"] is None


def test_a_dense_path_that_disagrees_with_the_packed_kernel_is_refused(runtime, monkeypatch):
    original = quant_eval.DequantizedLinear.dense_weight
    monkeypatch.setattr(quant_eval.DequantizedLinear, "dense_weight", lambda self: original(self) * (1 + 2 ** -10))
    with pytest.raises(quant_eval.DensePathMismatch, match="evaluate with eval_path: packed"):
        quantize(runtime, eval_path="auto")


@pytest.mark.parametrize("values, message", [
    ({"eval_path": "fast"}, "eval_path"),
    ({"check_with": ""}, "check_with"),
])
def test_bad_eval_settings_name_the_key(values, message):
    with pytest.raises(lo.InputError, match=message):
        PASS.make_config({"group_size": 32, **values})
