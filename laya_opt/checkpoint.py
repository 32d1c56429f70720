"""Checkpoint directories: load (upstream or laya-mlx layout) with strict binding, save (spec §3).

Layout: model.safetensors, rl_agent_config.json, encoder/config.json, tokenizer/{tokenizer.json,
tokenizer_config.json}, optional mlx_config.json (MLX exports, quantization metadata).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from .config import AgentConfig, EncoderConfig, parse_agent_config, parse_encoder_config, read_json
from .model import LayaModel
from .tokens import TextCodec, load_codec

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
REQUIRED_FILES = ("model.safetensors", "rl_agent_config.json", "encoder/config.json")
_SEQUENTIAL = re.compile(r"^(scorer|act_head)\.(\d+)\.")


def parse_dtype(name: str | mx.Dtype) -> mx.Dtype:
    if isinstance(name, mx.Dtype):
        return name
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype: mx.Dtype) -> str:
    return {value: key for key, value in DTYPES.items()}[dtype]


def to_mlx_name(name: str) -> str:
    """Upstream -> MLX tensor name (idempotent)."""
    name = name.replace(".in_proj_weight", ".in_proj.weight").replace(".in_proj_bias", ".in_proj.bias")
    return _SEQUENTIAL.sub(r"\1.layers.\2.", name)


def to_upstream_name(name: str) -> str:
    name = name.replace(".in_proj.weight", ".in_proj_weight").replace(".in_proj.bias", ".in_proj_bias")
    return re.sub(r"^(scorer|act_head)\.layers\.(\d+)\.", r"\1.\2.", name)


def map_names(tensors: dict[str, mx.array]) -> dict[str, mx.array]:
    mapped: dict[str, mx.array] = {}
    sources: dict[str, str] = {}
    for name, value in tensors.items():
        target = to_mlx_name(name)
        if target in mapped:
            raise ValueError(f"tensors {sources[target]!r} and {name!r} both map to {target!r}")
        mapped[target], sources[target] = value, name
    return mapped


def bind_strict(model: LayaModel, tensors: dict[str, mx.array], dtype: mx.Dtype, source: str) -> None:
    """Check names and shapes against the model, report every problem at once, then load."""
    expected = dict(tree_flatten(model.parameters()))
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    misshaped = sorted(f"{name}: checkpoint {tuple(tensors[name].shape)} vs model {tuple(expected[name].shape)}"
                       for name in set(expected) & set(tensors) if tensors[name].shape != expected[name].shape)
    problems = []
    if missing:
        problems.append("missing tensors: " + ", ".join(missing))
    if unexpected:
        problems.append("unexpected tensors: " + ", ".join(unexpected))
    if misshaped:
        problems.append("wrong shapes: " + "; ".join(misshaped))
    for name in sorted(set(expected) & set(tensors)):
        want_float = mx.issubdtype(expected[name].dtype, mx.floating)
        if want_float != mx.issubdtype(tensors[name].dtype, mx.floating):
            problems.append(f"wrong dtype kind: {name} is {tensors[name].dtype}, model expects {expected[name].dtype}")
    if problems:
        raise ValueError(f"{source} does not match the model:\n  " + "\n  ".join(problems))
    # Cast floating tensors only; packed quantized weights stay integers.
    cast = [(name, value.astype(dtype) if mx.issubdtype(value.dtype, mx.floating) else value)
            for name, value in tensors.items()]
    model.load_weights(cast, strict=True)
    mx.eval(model.parameters())


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    encoder_config: EncoderConfig
    agent_config: AgentConfig
    codec: TextCodec
    model: LayaModel
    dtype: mx.Dtype
    weights_sha256: str
    mlx_config: dict


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolve_checkpoint_dir(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory {path} does not exist (laya-opt never downloads weights)")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise FileNotFoundError(f"Not a complete Laya checkpoint: {path} lacks {', '.join(missing)}")
    return path


def read_configs(path: Path) -> tuple[EncoderConfig, AgentConfig, dict]:
    encoder = parse_encoder_config(read_json(path / "encoder/config.json"), source=str(path / "encoder/config.json"))
    agent = parse_agent_config(read_json(path / "rl_agent_config.json"), encoder,
                               source=str(path / "rl_agent_config.json"))
    mlx_config = read_json(path / "mlx_config.json") if (path / "mlx_config.json").is_file() else {}
    return encoder, agent, mlx_config


def load_checkpoint(path: str | Path, dtype: str | mx.Dtype = "float32") -> Checkpoint:
    """Load a checkpoint directory in the upstream or laya-mlx layout; binding is strict."""
    path = resolve_checkpoint_dir(path)
    dtype = parse_dtype(dtype)
    encoder, agent, mlx_config = read_configs(path)
    codec = load_codec(path / "tokenizer")
    if codec.vocab_size > encoder.vocab_size:
        raise ValueError(f"{path}: tokenizer has {codec.vocab_size} tokens but the encoder only "
                         f"{encoder.vocab_size} embedding rows")
    weights_path = path / "model.safetensors"
    try:
        tensors = mx.load(str(weights_path))
    except Exception as exc:  # corrupt or truncated file: name it
        raise ValueError(f"{weights_path}: cannot read safetensors ({exc})") from None
    tensors = map_names(tensors)
    model = LayaModel(encoder, agent)
    if mlx_config.get("quantization"):
        from .quantization import apply_quantization_structure  # quantized export: build packed modules first

        apply_quantization_structure(model, mlx_config["quantization"], tensors, source=str(path / "mlx_config.json"))
    bind_strict(model, tensors, dtype, source=str(weights_path))
    return Checkpoint(path=path, encoder_config=encoder, agent_config=agent, codec=codec, model=model,
                      dtype=dtype, weights_sha256=file_sha256(weights_path), mlx_config=mlx_config)


def build_random_model(encoder: EncoderConfig, agent: AgentConfig, seed: int, dtype: mx.Dtype) -> LayaModel:
    """Deterministic random weights with realistic scales (LayerNorm weights near 1)."""
    mx.random.seed(seed)
    model = LayaModel(encoder, agent)
    params = []
    for name, value in tree_flatten(model.parameters()):
        if name == "temperature":
            params.append((name, mx.ones((3,), dtype=dtype)))
        elif name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight") \
                or name == "scorer.layers.0.weight":
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


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_checkpoint(model: LayaModel, out_dir: str | Path, encoder_raw: dict, agent_raw: dict,
                    tokenizer_dir: str | Path, dtype: str | mx.Dtype | None = None,
                    layout: str = "upstream", mlx_config: dict | None = None) -> Path:
    """Write a complete checkpoint directory atomically (temp dir, then rename); refuses an existing one.

    `layout="upstream"` writes PyTorch names (`in_proj_weight`, `scorer.0.*`); `"mlx"` writes MLX names
    plus `mlx_config.json`. Floating tensors are cast to `dtype` (default: as they are).
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
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        mx.save_safetensors(str(staging / "model.safetensors"), tensors, metadata={"format": "pt"})
        _write_json(staging / "rl_agent_config.json", agent_raw)
        _write_json(staging / "encoder" / "config.json", encoder_raw)
        shutil.copytree(Path(tokenizer_dir), staging / "tokenizer")
        if layout == "mlx":
            stored = next((v.dtype for v in tensors.values() if mx.issubdtype(v.dtype, mx.floating)), mx.float32)
            _write_json(staging / "mlx_config.json", dict(mlx_config or {}, model_type="laya",
                                                          dtype=dtype_name(stored)))
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def save_like(checkpoint: Checkpoint, model: LayaModel, out_dir: str | Path, **kwargs) -> Path:
    """Save `model` with the configs and tokenizer of the checkpoint it came from."""
    return save_checkpoint(model, out_dir, checkpoint.encoder_config.raw, checkpoint.agent_config.raw,
                           checkpoint.path / "tokenizer", **kwargs)
