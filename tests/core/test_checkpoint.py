import json
import os
import shutil

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from laya_opt.core.checkpoint import load_checkpoint, map_names, to_mlx_name, to_upstream_name
from laya_opt.core.checkpoint_write import save_checkpoint
from laya_opt.util.errors import CheckpointError, InputError

from conftest import write_tiny_checkpoint


def _forward(model):
    ids = mx.array([[2, 5, 3, 4, 5, 4, 5, 3, 5, 5, 3, 0, 0], [2, 5, 3, 4, 1, 3, 5, 3, 0, 0, 0, 0, 0]], dtype=mx.int32)
    mask = ids != 0
    marker_pos = mx.array([[3, 5], [3, 0]], dtype=mx.int32)
    logits, action = model(ids, mask, marker_pos, marker_pos > 0, mx.array([0, 2], dtype=mx.int32))
    mx.eval(logits, action)
    return np.array(logits), np.array(action)


def _rewrite_weights(path, edit):
    tensors = mx.load(str(path / "model.safetensors"))
    edit(tensors)
    mx.save_safetensors(str(path / "model.safetensors"), tensors)
    (path / "manifest.json").unlink(missing_ok=True)  # a deliberate edit: its checksum would refuse it first


def test_name_mapping_is_idempotent_and_reversible():
    cases = {"head.layers.0.self_attn.in_proj_weight": "head.layers.0.self_attn.in_proj.weight",
             "head.layers.1.self_attn.in_proj_bias": "head.layers.1.self_attn.in_proj.bias",
             "scorer.3.bias": "scorer.layers.3.bias", "act_head.0.weight": "act_head.layers.0.weight",
             "encoder.layers.3.attn.Wqkv.weight": "encoder.layers.3.attn.Wqkv.weight"}
    for upstream, mlx_name in cases.items():
        assert to_mlx_name(upstream) == mlx_name
        assert to_mlx_name(mlx_name) == mlx_name
        assert to_upstream_name(mlx_name) == upstream


def test_two_sources_for_one_target_is_an_error():
    with pytest.raises(ValueError, match="both map to 'scorer.layers.3.bias'"):
        map_names({"scorer.3.bias": mx.zeros(1), "scorer.layers.3.bias": mx.zeros(1)})


def test_upstream_file_uses_pytorch_names(tiny_checkpoint_dir):
    names = set(mx.load(str(tiny_checkpoint_dir / "model.safetensors")))
    assert "head.layers.0.self_attn.in_proj_weight" in names and "scorer.3.weight" in names
    assert "act_head.2.bias" in names and "temperature" in names
    assert "encoder.layers.0.attn_norm.weight" not in names and "encoder.layers.1.attn_norm.weight" in names


def test_strict_binding_reports_every_problem_at_once(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "broken"
    shutil.copytree(tiny_checkpoint_dir, path)

    def edit(tensors):
        tensors["type_emb.weight"] = mx.zeros((4, 64))          # wrong shape
        del tensors["scorer.3.bias"]                             # missing
        tensors["encoder.layers.0.attn_norm.weight"] = mx.ones(64)  # unexpected (layer 0 has none)
    _rewrite_weights(path, edit)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "scorer.layers.3.bias" in message and "missing" in message
    assert "encoder.layers.0.attn_norm.weight" in message and "unexpected" in message
    assert "type_emb.weight: checkpoint (4, 64) vs model (3, 64)" in message


def test_missing_temperature_buffer_is_refused(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "notemp"
    shutil.copytree(tiny_checkpoint_dir, path)
    _rewrite_weights(path, lambda tensors: tensors.pop("temperature"))
    with pytest.raises(ValueError, match="temperature"):
        load_checkpoint(path)


def test_integer_tensor_where_float_expected_is_refused(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "intw"
    shutil.copytree(tiny_checkpoint_dir, path)
    _rewrite_weights(path, lambda t: t.__setitem__("type_emb.weight", mx.zeros((3, 64), dtype=mx.int32)))
    with pytest.raises(ValueError, match="wrong dtype kind: type_emb.weight"):
        load_checkpoint(path)


@pytest.mark.parametrize("missing", ["model.safetensors", "rl_agent_config.json", "encoder/config.json",
                                     "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"])
def test_missing_files_are_named(tmp_path, tiny_checkpoint_dir, missing):
    path = tmp_path / "partial"
    shutil.copytree(tiny_checkpoint_dir, path)
    (path / missing).unlink()
    with pytest.raises(InputError, match=missing.split("/")[-1]):
        load_checkpoint(path)


def test_nonexistent_directory_is_not_downloaded(tmp_path):
    with pytest.raises(CheckpointError, match="never downloads"):
        load_checkpoint(tmp_path / "convaiinnovations" / "laya")


def test_corrupt_weights_file_is_named(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint_dir, path)
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="model.safetensors"):
        load_checkpoint(path)


def test_invalid_config_json_is_named(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "badjson"
    shutil.copytree(tiny_checkpoint_dir, path)
    (path / "rl_agent_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="rl_agent_config.json"):
        load_checkpoint(path)


def test_tokenizer_larger_than_vocabulary_is_refused(tmp_path):
    with pytest.raises(ValueError, match="embedding rows"):
        load_checkpoint(write_tiny_checkpoint(tmp_path / "small", encoder_overrides={"vocab_size": 4}))


def save_copy(original, out_dir, tokenizer_dir=None, **kwargs):
    return save_checkpoint(original.model, out_dir, original.encoder_config.raw, original.agent_config.raw,
                           tokenizer_dir or original.path / "tokenizer", **kwargs)


@pytest.mark.parametrize("layout", ["upstream", "mlx"])
def test_save_load_round_trip_is_exact(tmp_path, tiny_checkpoint_dir, layout):
    original = load_checkpoint(tiny_checkpoint_dir)
    out = save_copy(original, tmp_path / f"copy-{layout}", layout=layout)
    reloaded = load_checkpoint(out)
    before, after = dict(tree_flatten(original.model.parameters())), dict(tree_flatten(reloaded.model.parameters()))
    assert before.keys() == after.keys()
    assert all(np.array_equal(np.array(before[k]), np.array(after[k])) for k in before)
    for a, b in zip(_forward(original.model), _forward(reloaded.model)):
        assert np.array_equal(a, b)
    if layout == "mlx":
        meta = json.loads((out / "mlx_config.json").read_text())
        assert meta == {"model_type": "laya", "dtype": "float32"}
        assert "scorer.layers.3.bias" in mx.load(str(out / "model.safetensors"))


def test_save_refuses_existing_directory_and_leaves_nothing(tmp_path, tiny_checkpoint_dir):
    original = load_checkpoint(tiny_checkpoint_dir)
    target = tmp_path / "exists"
    target.mkdir()
    with pytest.raises(FileExistsError):
        save_copy(original, target)
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_load_casts_floats_and_runs(tiny_checkpoint_dir, dtype):
    checkpoint = load_checkpoint(tiny_checkpoint_dir, dtype=dtype)
    assert {v.dtype for _, v in tree_flatten(checkpoint.model.parameters())} == {getattr(mx, dtype)}
    logits, action = _forward(checkpoint.model)
    assert logits.dtype == np.float32 and action.dtype == np.float32
    assert np.isfinite(logits).all() and np.isfinite(action).all()
    reference = _forward(load_checkpoint(tiny_checkpoint_dir).model)
    assert np.abs(logits - reference[0]).max() < 0.1


def test_unknown_dtype_is_refused(tiny_checkpoint_dir):
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        load_checkpoint(tiny_checkpoint_dir, dtype="float64")


def test_weights_hash_identifies_the_file(tmp_path, tiny_checkpoint_dir):
    first = load_checkpoint(tiny_checkpoint_dir).weights_sha256
    other = load_checkpoint(write_tiny_checkpoint(tmp_path / "seed8", seed=8)).weights_sha256
    assert first != other and len(first) == 64


# ----------------------------------------------------------------------------- checks before and after the weights


def test_inspect_reads_no_weight_and_loading_it_uses_the_same_checks(tiny_checkpoint_dir, monkeypatch):
    from laya_opt.core.checkpoint import inspect_checkpoint

    monkeypatch.setattr(mx, "load", lambda *a, **k: pytest.fail("inspect read the weights"))
    files = inspect_checkpoint(tiny_checkpoint_dir)
    assert files.stored_dtype == mx.float32 and "type_emb.weight" in files.tensors
    assert set(files.hashes) == {"model.safetensors", "rl_agent_config.json", "encoder/config.json",
                                 "tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"}
    monkeypatch.undo()
    checkpoint = load_checkpoint(files)  # the inspected skeleton receives the weights
    assert checkpoint.model is files.model and checkpoint.weights_sha256 == files.hashes["model.safetensors"]


def test_every_file_is_checked_against_the_manifest(tmp_path, tiny_checkpoint_dir):
    path = shutil.copytree(tiny_checkpoint_dir, tmp_path / "edited")
    agent = json.loads((path / "rl_agent_config.json").read_text())
    (path / "rl_agent_config.json").write_text(json.dumps(dict(agent, temperature=[1.0, 1.0, 1.0])))
    with pytest.raises(CheckpointError, match=r"rl_agent_config.json: SHA-256 [0-9a-f]{16}\.\.\. does not match "
                                              r".*manifest.json .*delete manifest.json to accept the edit"):
        load_checkpoint(path)
    (path / "manifest.json").write_text('{"sha256": {"model.safetensors": "abc"}}')
    with pytest.raises(CheckpointError, match=r"manifest.json: expected"):
        load_checkpoint(path)
    (path / "manifest.json").unlink()
    assert load_checkpoint(path).agent_config.temperature == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("value, expected", [
    (float("nan"), "type_emb.weight: 1 NaN, 0 Inf"), (float("inf"), "type_emb.weight: 0 NaN, 1 Inf")])
def test_non_finite_weights_are_named(tmp_path, tiny_checkpoint_dir, value, expected):
    path = tmp_path / "nonfinite"
    shutil.copytree(tiny_checkpoint_dir, path)

    def edit(tensors):
        tensors["type_emb.weight"] = mx.concatenate([mx.array([[value]]), tensors["type_emb.weight"][:1, 1:],
                                                     tensors["type_emb.weight"][1:]], axis=None).reshape(3, 64)
    _rewrite_weights(path, edit)
    with pytest.raises(CheckpointError, match=r"safetensors: non-finite weights in 1 tensor\(s\):\n  " + expected):
        load_checkpoint(path)


def test_a_value_beyond_float16_is_named_with_the_remedy(tmp_path, tiny_checkpoint_dir):
    path = tmp_path / "big"
    shutil.copytree(tiny_checkpoint_dir, path)
    _rewrite_weights(path, lambda t: t.update({"scorer.1.bias": t["scorer.1.bias"] + 1e5}))
    assert load_checkpoint(path, "float32")
    with pytest.raises(CheckpointError, match=r"scorer.layers.1.bias: finite in the file \(largest \|value\| 1e\+05\) "
                                              r"but out of float16's range \(0 NaN, 64 Inf\); load it in float32"):
        load_checkpoint(path, "float16")


def test_floating_tensors_share_the_checkpoints_dtype(tmp_path):
    half = write_tiny_checkpoint(tmp_path / "half", dtype="float16")
    _rewrite_weights(half, lambda t: t.update({"scorer.1.bias": t["scorer.1.bias"].astype(mx.bfloat16)}))
    with pytest.raises(CheckpointError, match=r"1 floating tensor\(s\) are not float16, the dtype of the other "
                                              r"floating tensors: scorer.layers.1.bias \(bfloat16\)"):
        load_checkpoint(half)
    exported = write_tiny_checkpoint(tmp_path / "mlx", layout="mlx")
    meta = json.loads((exported / "mlx_config.json").read_text())
    (exported / "mlx_config.json").write_text(json.dumps(dict(meta, dtype="bfloat16")))
    (exported / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match=r"are not bfloat16, mlx_config.json's dtype"):
        load_checkpoint(exported)


def test_saving_copies_only_the_named_tokenizer_files_with_normal_permissions(tmp_path, tiny_checkpoint_dir):
    original = load_checkpoint(tiny_checkpoint_dir)
    tokenizer = shutil.copytree(tiny_checkpoint_dir / "tokenizer", tmp_path / "tok")
    (tokenizer / "vocab-notes.txt").write_text("extra")
    everything = save_copy(original, tmp_path / "all", tokenizer_dir=tokenizer)
    assert (everything / "tokenizer" / "vocab-notes.txt").is_file()  # exports copy all of tokenizer/ (spec §3.6)
    previous = os.umask(0o022)
    try:
        needed = save_checkpoint(original.model, tmp_path / "needed", original.encoder_config.raw,
                                 original.agent_config.raw, tokenizer,
                                 tokenizer_files=("tokenizer.json", "tokenizer_config.json"))
    finally:
        os.umask(previous)
    assert sorted(p.name for p in (needed / "tokenizer").iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    assert oct(needed.stat().st_mode & 0o777) == "0o755"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all", "needed", "tok"]  # no staging dir left
