"""Writing checkpoint directories: random weights for synthetic ones, a model saved atomically with its
manifest, and quantized exports with their metadata (spec §3.6).

The reading side (layout, strict binding, checksums, the quantized structure rebuilt before binding)
is `laya_opt.core.checkpoint`; both share its names (`to_upstream_name`, `MANIFEST`, `file_sha256`).
Every write goes through a staging directory, so a failure never leaves a half-written checkpoint.
"""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from laya_opt.core.checkpoint import MANIFEST, MAX_SEED, dtype_name, file_sha256, parse_dtype, to_upstream_name
from laya_opt.core.config import AgentConfig, EncoderConfig, encoder_config_dict
from laya_opt.core.model import LayaModel
from laya_opt.core.quant import HEAD_PREFIXES, QUANTIZED_TYPES, weight_modules
from laya_opt.util.errors import InputError
from laya_opt.util.staging import publish, staging_dir
from laya_opt.util.jsonio import write_json


def build_random_model(encoder: EncoderConfig, agent: AgentConfig, seed: int, dtype: mx.Dtype) -> LayaModel:
    """Deterministic random weights with realistic scales (LayerNorm weights near 1)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    mx.random.seed(seed)
    model = LayaModel(encoder, agent)
    params = []
    for name, value in tree_flatten(model.parameters()):
        if name == "temperature":
            params.append((name, mx.ones((3,), dtype=dtype)))
        elif name.endswith(("norm.weight", "norm1.weight", "norm2.weight")) or name == "scorer.layers.0.weight":
            params.append((name, (1.0 + 0.05 * mx.random.normal(value.shape)).astype(dtype)))
        elif name.endswith(".bias"):
            params.append((name, (0.02 * mx.random.normal(value.shape)).astype(dtype)))
        else:
            std = 0.02 if "embeddings" in name else 1.0 / (value.shape[-1] ** 0.5)
            params.append((name, (std * mx.random.normal(value.shape)).astype(dtype)))
    model.load_weights(params, strict=True)
    mx.eval(model.parameters())
    return model


# ----------------------------------------------------------------------------- saving


def write_manifest(directory: Path) -> None:
    """manifest.json: the SHA-256 of every file in `directory`, which every load verifies."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith("."))
    write_json(directory / MANIFEST, {"sha256": {p.relative_to(directory).as_posix(): file_sha256(p)
                                                  for p in files}})


def save_checkpoint(model: LayaModel, out_dir: str | Path, encoder_raw: dict, agent_raw: dict,
                    tokenizer_dir: str | Path, dtype: str | mx.Dtype | None = None,
                    layout: str = "upstream", mlx_config: dict | None = None,
                    tokenizer_files: tuple[str, ...] | None = None) -> Path:
    """Write a complete checkpoint directory atomically (staging dir, then rename); refuses an existing one.

    `layout="upstream"` writes PyTorch names (`in_proj_weight`, `scorer.0.*`); `"mlx"` writes MLX names
    plus `mlx_config.json`. Floating tensors are cast to `dtype` (default: as they are). The tokenizer
    folder is copied whole (as exports do, spec §3.6) or only `tokenizer_files`. A manifest.json of
    SHA-256 sums goes with it, so a later corruption or edit is refused at load.
    """
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"output directory {out_dir} already exists")
    if layout not in ("upstream", "mlx"):
        raise ValueError(f"layout must be 'upstream' or 'mlx', got {layout!r}")
    target = parse_dtype(dtype) if dtype is not None else None
    tensors = {}
    for name, value in tree_flatten(model.parameters()):
        if target is not None and mx.issubdtype(value.dtype, mx.floating):
            value = value.astype(target)
        tensors[to_upstream_name(name) if layout == "upstream" else name] = value
    if layout == "upstream" and any(name.endswith((".scales", ".biases")) for name in tensors):
        raise ValueError("a quantized model can only be saved in the mlx layout (with mlx_config.json)")
    tokenizer_dir = Path(tokenizer_dir)
    names = tokenizer_files if tokenizer_files is not None else sorted(
        p.name for p in tokenizer_dir.iterdir() if p.is_file())
    with staging_dir(out_dir.parent, out_dir.name) as staging:
        mx.save_safetensors(str(staging / "model.safetensors"), tensors, metadata={"format": "pt"})
        write_json(staging / "rl_agent_config.json", agent_raw)
        write_json(staging / "encoder" / "config.json", encoder_raw)
        (staging / "tokenizer").mkdir()
        for name in names:
            shutil.copyfile(tokenizer_dir / name, staging / "tokenizer" / name)
        if layout == "mlx":
            stored = next((v.dtype for v in tensors.values() if mx.issubdtype(v.dtype, mx.floating)), mx.float32)
            write_json(staging / "mlx_config.json", dict(mlx_config or {}, model_type="laya",
                                                          dtype=dtype_name(stored)))
        write_manifest(staging)
        publish(staging, out_dir)
    return out_dir


# ----------------------------------------------------------------------------- quantized checkpoints (spec §3.6)


def quantization_metadata(model: nn.Module) -> dict:
    """The `quantization` entry of mlx_config.json: the most common scheme on top, every module listed."""
    modules = {path: {"bits": m.bits, "group_size": m.group_size, "mode": m.mode}
               for path, m in weight_modules(model).items() if isinstance(m, QUANTIZED_TYPES)}
    if not modules:
        raise ValueError("the model has no quantized modules; save it with checkpoint_write.save_checkpoint instead")
    common = Counter(tuple(entry.values()) for entry in modules.values()).most_common(1)[0][0]
    return {"bits": common[0], "group_size": common[1], "mode": common[2],
            "quantize_heads": any(path.startswith(HEAD_PREFIXES) for path in modules), "modules": modules}


def save_quantized(runtime_or_model, out_dir: str | Path, *, tokenizer_dir: str | Path | None = None,
                   encoder_raw: dict | None = None, agent_raw: dict | None = None, dtype=None) -> Path:
    """Write a quantized runtime (or model) as an MLX-layout checkpoint with its quantization metadata.

    Packed uint32 weights, scales and biases go into model.safetensors unchanged; floating tensors are
    cast to `dtype` if given. A runtime brings its tokenizer from `info["checkpoint"]`; a bare model
    needs `tokenizer_dir`.
    """
    model = getattr(runtime_or_model, "model", runtime_or_model)
    if tokenizer_dir is None:
        source = getattr(runtime_or_model, "info", {}).get("checkpoint")
        if source is None:
            raise ValueError("save_quantized: pass tokenizer_dir (the model carries no checkpoint path)")
        tokenizer_dir = Path(source) / "tokenizer"
    if not Path(tokenizer_dir).is_dir():
        raise FileNotFoundError(f"save_quantized: tokenizer directory {tokenizer_dir} does not exist")
    encoder_raw = encoder_raw if encoder_raw is not None else encoder_config_dict(model.encoder_config)
    agent_raw = agent_raw if agent_raw is not None else dict(model.agent_config.raw)
    if not agent_raw:
        raise ValueError("save_quantized: the agent config has no raw mapping; pass agent_raw")
    return save_checkpoint(model, out_dir, encoder_raw, agent_raw, tokenizer_dir, dtype=dtype, layout="mlx",
                           mlx_config={"quantization": quantization_metadata(model)})


