"""Quantization helpers (laya_opt/core/quant.py) and the quantized checkpoint format
(laya_opt/core/checkpoint_write.py)."""
import json
import shutil

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import laya_opt as lo
from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.checkpoint_write import build_random_model, save_quantized
from laya_opt.core.config import architecture
from laya_opt.util.errors import CheckpointError
from laya_opt.core.quant import (ACTION_HEAD_REASON, QuantScheme, check_mode_supported, coverage_manifest,
                                 quantization_problems, quantize_modules, select_modules, selector_matches,
                                 weight_modules)
from laya_opt.core.runtime import load_runtime
from laya_opt.passes.quantize_encoder import PASS

from conftest import write_tiny_checkpoint

QUESTIONS = {
    "pick": {"type": "choice", "instructions": "hello", "criteria": {"A": "hello", "B": "world", "C": "hello hello"}},
    "rate": {"type": "score", "instructions": "hello hello", "criteria": ["low", "mid", "high", "top"]},
    "holds": {"type": "noul", "instructions": "hello there", "labels": {"false": "B", "true": "A"}},
}
STATE = {"notes": "hello world hello", "turns": 3}


class Holder(nn.Module):
    def __init__(self, rows: int, width: int):
        super().__init__()
        self.proj = nn.Linear(width, rows, bias=False)


# ----------------------------------------------------------------------------- quantize -> dequantize bound


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), group_size=st.sampled_from([32, 64, 128]),
       bits=st.sampled_from([2, 3, 4, 5, 6, 8]), groups=st.integers(1, 3), rows=st.integers(1, 6),
       magnitude=st.floats(-3, 2), offset=st.floats(-4, 4))
def test_affine_dequantize_error_within_group_scale(seed, group_size, bits, groups, rows, magnitude, offset):
    rng = np.random.default_rng(seed)
    dense = (rng.standard_normal((rows, groups * group_size)) * 10.0 ** magnitude + offset).astype(np.float32)
    holder = Holder(rows, groups * group_size)
    holder.proj.weight = mx.array(dense)
    quantize_modules(holder, {"proj": QuantScheme(bits, group_size)})
    packed = holder.proj
    assert isinstance(packed, nn.QuantizedLinear) and packed.weight.dtype == mx.uint32
    restored = np.array(mx.dequantize(packed.weight, packed.scales, packed.biases, group_size, bits)).reshape(
        rows, groups, group_size)
    scale = np.abs(np.array(packed.scales))[..., None]
    bias = np.array(packed.biases)[..., None]
    per_group = dense.reshape(rows, groups, group_size)
    error = np.abs(restored - per_group)
    eps = 1e-5 * np.abs(per_group).max(axis=-1, keepdims=True) + 1e-30
    # Inside the group's grid [bias, bias + (2^b - 1) * scale] the error is at most half a step. MLX anchors the
    # grid on the group's larger-magnitude edge (so that edge is exact), which can leave the far edge up to one
    # step outside the grid: there the bound is one step.
    low = np.minimum(bias, bias + (2 ** bits - 1) * np.array(packed.scales)[..., None])
    high = np.maximum(bias, bias + (2 ** bits - 1) * np.array(packed.scales)[..., None])
    inside = (per_group >= low) & (per_group <= high)
    assert np.all(error <= scale + eps)
    assert np.all((error <= scale / 2 + eps) | ~inside)
    assert inside.mean() > 0.5  # the grid covers the group: the bound is not vacuous


@settings(max_examples=40, deadline=None)
@given(group_size=st.sampled_from([32, 64, 128]), width=st.integers(1, 400))
def test_width_not_divisible_by_group_is_named(group_size, width):
    holder = Holder(4, width)
    problems = quantization_problems({"proj": holder.proj}, QuantScheme(8, group_size), {"proj": "proj"})
    if width % group_size:
        assert len(problems) == 1
        assert problems[0].startswith("proj: input width") and str(width) in problems[0]
        assert f"group_size {group_size}" in problems[0]
    else:
        assert problems == []


def test_scheme_validation_names_the_field():
    with pytest.raises(ValueError, match="bits 7"):
        QuantScheme(7, 64)
    with pytest.raises(ValueError, match="group_size 16"):
        QuantScheme(4, 16, "affine")
    with pytest.raises(ValueError, match="group_size 64 is not supported by mode 'mxfp4'"):
        QuantScheme(4, 64, "mxfp4")
    with pytest.raises(ValueError, match="mode 'int4'"):
        QuantScheme(4, 32, "int4")
    with pytest.raises(ValueError, match="bits True"):
        QuantScheme(True, 64)


# ----------------------------------------------------------------------------- selection


def test_selector_prefix_stops_at_a_dot_and_globs_match_the_whole_path():
    assert selector_matches("encoder.layers.1.attn.Wo", "encoder.layers.1")
    assert not selector_matches("encoder.layers.10.attn.Wo", "encoder.layers.1")
    assert selector_matches("encoder.layers.10.attn.Wo", "encoder.layers.1*")
    assert selector_matches("head.layers.0.linear1", "head.layers.*")
    assert not selector_matches("act_head.layers.0", "head.layers.*")
    assert not selector_matches("scorer.layers.1", "encoder.layers.*")


def test_selection_keeps_heads_and_reports_unmatched_selectors():
    encoder, agent = architecture("tiny")
    model = build_random_model(encoder, agent, seed=0, dtype=mx.float32)
    selection = select_modules(model)
    assert len(selection.selected) == 4 * encoder.num_hidden_layers
    assert all(path.startswith("encoder.layers.") for path in selection.selected)
    assert selection.kept["act_head.layers.0"] == ACTION_HEAD_REASON
    assert selection.kept["scorer.layers.1"] == "not selected"
    assert selection.kept["head.layers.0.self_attn.in_proj"] == "not selected"
    narrowed = select_modules(model, exclude=("encoder.layers.5",))
    assert len(narrowed.selected) == 4 * (encoder.num_hidden_layers - 1)
    assert narrowed.kept["encoder.layers.5.mlp.Wo"] == "excluded by 'encoder.layers.5'"
    with pytest.raises(ValueError, match="include 'encoder.layer.*'"):
        select_modules(model, include=("encoder.layer.*",))
    with pytest.raises(ValueError, match="exclude 'encoder.layers.9'"):
        select_modules(model, exclude=("encoder.layers.9",))


# ----------------------------------------------------------------------------- coverage manifest


@pytest.mark.parametrize("bits,group_size", [(8, 64), (4, 64)])
def test_manifest_of_tiny_covers_every_linear_and_embedding(bits, group_size):
    encoder, agent = architecture("tiny")
    model = build_random_model(encoder, agent, seed=1, dtype=mx.float16)
    selection = select_modules(model)
    quantize_modules(model, {path: QuantScheme(bits, group_size) for path in selection.selected})
    manifest = coverage_manifest(model, mx.float16, selection.kept)
    every = [path for path, module in model.named_modules()
             if isinstance(module, (nn.Linear, nn.Embedding, nn.QuantizedLinear, nn.QuantizedEmbedding))]
    assert sorted(row.path for row in manifest.rows) == sorted(every)
    quantized = [row for row in manifest.rows if row.status == "quantized"]
    assert {row.path for row in quantized} == set(selection.selected)
    for row in quantized:  # packed weight + fp16 scale and bias per group
        out_dim, in_dim = row.shape
        assert row.bytes_before == out_dim * in_dim * 2
        assert row.bytes_after == out_dim * in_dim * bits // 8 + 2 * 2 * out_dim * in_dim // group_size
    kept = [row for row in manifest.rows if row.status == "kept"]
    assert all(row.bytes_before == row.bytes_after for row in kept)
    elements = sum(row.shape[0] * row.shape[1] for row in manifest.rows)
    assert manifest.bits_per_weight_before == 16.0
    assert manifest.bits_per_weight_after == pytest.approx(8 * manifest.weight_bytes_after / elements)
    assert manifest.model_bytes_before - manifest.model_bytes_after == \
        manifest.weight_bytes_before - manifest.weight_bytes_after
    assert json.loads(json.dumps(manifest.to_dict()))["rows"][0]["path"] == manifest.rows[0].path
    assert len(manifest.table()["rows"]) == len(every)


# ----------------------------------------------------------------------------- checkpoint round trip


@pytest.fixture(scope="module")
def quantized_dir(tmp_path_factory):
    """An 8-bit g32 quantized tiny checkpoint (encoder layers + token embeddings) and its source runtime."""
    root = tmp_path_factory.mktemp("quant")
    runtime = load_runtime(write_tiny_checkpoint(root / "dense"), "float32")
    config = PASS.make_config({"group_size": 32, "include": ["encoder.layers.*", "encoder.embeddings.tok_embeddings"]})
    quantized = lo.apply(runtime, config)
    return save_quantized(quantized, root / "q8"), quantized


def _outputs(runtime):
    execution = runtime.execute(runtime.prepare(STATE, QUESTIONS))
    return execution.logits + execution.action


def _assert_bit_identical(first, second):
    assert all(a.tobytes() == b.tobytes() for a, b in zip(_outputs(first), _outputs(second)))


def test_save_load_round_trip_is_bit_identical(quantized_dir):
    path, quantized = quantized_dir
    meta = json.loads((path / "mlx_config.json").read_text())
    assert meta["model_type"] == "laya" and meta["dtype"] == "float32"
    assert meta["quantization"]["bits"] == 8 and meta["quantization"]["group_size"] == 32
    assert meta["quantization"]["quantize_heads"] is False
    assert set(meta["quantization"]["modules"]) == {row["path"] for row in
                                                    quantized.info["quantize_encoder"]["coverage"]["rows"]
                                                    if row["status"] == "quantized"}
    tensors = mx.load(str(path / "model.safetensors"))
    assert tensors["encoder.layers.0.attn.Wqkv.weight"].dtype == mx.uint32
    assert tensors["encoder.embeddings.tok_embeddings.weight"].dtype == mx.uint32
    loaded = load_runtime(path, "float32")
    assert isinstance(loaded.model.encoder.embeddings.tok_embeddings, nn.QuantizedEmbedding)
    assert loaded.model.encoder.layers[2].mlp.Wo.weight.dtype == mx.uint32  # never cast to float
    _assert_bit_identical(quantized, loaded)


def test_round_trip_of_mixed_schemes_and_fp_mode(tmp_path):
    runtime = load_runtime(write_tiny_checkpoint(tmp_path / "dense"), "float32")
    first = lo.apply(runtime, PASS.make_config({"group_size": 32, "include": ["encoder.layers.0"]}))
    mixed = lo.apply(first, PASS.make_config({"bits": 8, "group_size": 32, "mode": "mxfp8",
                                                "include": ["encoder.layers.1", "head.layers.*"]}))
    path = save_quantized(mixed, tmp_path / "mixed")
    meta = json.loads((path / "mlx_config.json").read_text())["quantization"]
    assert meta["mode"] == "mxfp8" and meta["quantize_heads"] is True  # 8 of 12 modules
    assert meta["modules"]["encoder.layers.0.mlp.Wo"] == {"bits": 8, "group_size": 32, "mode": "affine"}
    assert "encoder.layers.1.attn.Wqkv.biases" not in mx.load(str(path / "model.safetensors"))
    _assert_bit_identical(mixed, load_runtime(path, "float32"))


def test_port_metadata_without_module_list_loads_from_the_scales(quantized_dir, tmp_path):
    path, quantized = quantized_dir
    copy = _edit_meta(path, tmp_path, lambda q: [q.pop("modules"), q.pop("mode")])
    _assert_bit_identical(quantized, load_runtime(copy, "float32"))


def test_saving_a_dense_model_is_refused(tiny_checkpoint_dir, tmp_path):
    with pytest.raises(ValueError, match="no quantized modules"):
        save_quantized(load_runtime(tiny_checkpoint_dir), tmp_path / "dense")


def _edit_meta(path, tmp_path, edit):
    copy = shutil.copytree(path, tmp_path / "edited")
    meta = json.loads((copy / "mlx_config.json").read_text())
    edit(meta["quantization"])
    (copy / "mlx_config.json").write_text(json.dumps(meta))
    (copy / "manifest.json").unlink()  # a deliberate edit: its checksum would refuse it first
    return copy


def _edit_tensors(path, tmp_path, edit):
    copy = shutil.copytree(path, tmp_path / "edited")
    tensors = dict(mx.load(str(copy / "model.safetensors")))
    edit(tensors)
    mx.save_safetensors(str(copy / "model.safetensors"), tensors)
    (copy / "manifest.json").unlink()
    return copy


WO = "encoder.layers.1.attn.Wo"


@pytest.mark.parametrize("edit,message", [
    (lambda q: q["modules"].pop(WO), f"{WO}: has quantized tensor {WO}.(weight|scales|biases) but quantization"),
    (lambda q: q["modules"].update({"head.layers.0.linear1": {}}), "head.layers.0.linear1: packed weight is float32"),
    (lambda q: q["modules"][WO].update(bits=4), rf"{WO}: packed weight shape \(64, 16\) does not match"),
    (lambda q: q["modules"][WO].update(group_size=64), rf"{WO}: scales shape \(64, 2\) is inconsistent"),
    (lambda q: q["modules"][WO].update(mode="mxfp8"), f"{WO}: scales dtype float32 does not fit mode 'mxfp8'"),
    (lambda q: q["modules"][WO].update(bits=7), f"module {WO}: bits 7"),
    (lambda q: q["modules"].update({"encoder.layers.7.attn.Wo": {}}), "encoder.layers.7.attn.Wo: listed .* no Linear"),
    (lambda q: q["modules"].update({"act_head.layers.2": {}}), "act_head.layers.2: the action head stays dense"),
    (lambda q: q.update(quantize_heads="yes"), "quantize_heads must be true/false"),
    (lambda q: q.update(bits=4), r"quantization.bits is 4 but the per-module entries say 13 module\(s\) 8"),
    (lambda q: q.update(group_size=64), "quantization.group_size is 64 but"),
    (lambda q: q.update(quantize_heads=True), "quantize_heads is true but no head or scorer module is quantized"),
])
def test_metadata_that_does_not_match_the_tensors_is_refused(quantized_dir, tmp_path, edit, message):
    with pytest.raises(ValueError, match=message):
        load_checkpoint(_edit_meta(quantized_dir[0], tmp_path, edit))


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.pop(f"{WO}.scales"), f"{WO}: listed as quantized but there is no {WO}.scales tensor"),
    (lambda t: t.pop(f"{WO}.biases"), f"{WO}: affine mode needs a {WO}.biases tensor"),
    (lambda t: t.update({f"{WO}.weight": t[f"{WO}.weight"].astype(mx.float32)}),
     f"{WO}: packed weight is float32, expected uint32"),
    (lambda t: t.update({f"{WO}.scales": t[f"{WO}.scales"][:, :1]}), rf"{WO}: scales shape \(64, 1\)"),
])
def test_tensors_that_do_not_match_the_metadata_are_refused(quantized_dir, tmp_path, edit, message):
    with pytest.raises(ValueError, match=message):
        load_checkpoint(_edit_tensors(quantized_dir[0], tmp_path, edit))


def test_weight_modules_are_listed_in_model_order(tiny_checkpoint_dir):
    paths = list(weight_modules(load_checkpoint(tiny_checkpoint_dir).model))
    assert paths[0] == "encoder.embeddings.tok_embeddings"
    assert paths[1:3] == ["encoder.layers.0.attn.Wqkv", "encoder.layers.0.attn.Wo"]
    assert paths[-2:] == ["act_head.layers.0", "act_head.layers.2"]


def test_a_nan_code_in_mxfp4_scales_is_named(tiny_checkpoint_dir, tmp_path):
    try:
        check_mode_supported(QuantScheme(4, 32, "mxfp4"))
    except ValueError as exc:
        pytest.skip(str(exc))
    quantized = lo.apply(load_runtime(tiny_checkpoint_dir), "quantize_encoder", bits=4, group_size=32, mode="mxfp4")
    path = save_quantized(quantized, tmp_path / "mxfp4")
    assert load_checkpoint(path).model.encoder.layers[1].attn.Wo.mode == "mxfp4"

    def nan_code(tensors):  # E8M0 scale code 255 is NaN
        scales = tensors[f"{WO}.scales"].reshape(-1)
        tensors[f"{WO}.scales"] = mx.concatenate([mx.array([255], dtype=mx.uint8), scales[1:]]).reshape(64, 2)
    with pytest.raises(CheckpointError, match=rf"non-finite weights in 1 tensor\(s\):\n  {WO}.scales \(as dequantized"):
        load_checkpoint(_edit_tensors(path, tmp_path, nan_code))
