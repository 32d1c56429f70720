"""Checkpoint directories: load (upstream or laya-mlx layout) with strict binding, save, quantized exports (spec §3).

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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from .config import AgentConfig, EncoderConfig, encoder_config_dict, parse_agent_config, parse_encoder_config, read_json
from .model import LayaModel
from .quant import (HEAD_PREFIXES, QUANTIZED_TYPES, QuantScheme, check_mode_supported, check_scheme, dense_modules,
                    quantization_problems, quantize_modules, weight_modules)
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
        # A quantized export: build the packed modules first, then bind strictly.
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


# ----------------------------------------------------------------------------- quantized checkpoints (spec §3.6)


def quantization_metadata(model: nn.Module) -> dict:
    """The `quantization` entry of mlx_config.json: the most common scheme on top, every module listed."""
    modules = {path: {"bits": m.bits, "group_size": m.group_size, "mode": m.mode}
               for path, m in weight_modules(model).items() if isinstance(m, QUANTIZED_TYPES)}
    if not modules:
        raise ValueError("the model has no quantized modules; save it with checkpoint.save_checkpoint instead")
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


def _listed_schemes(quant_meta: Any, tensors: Mapping[str, mx.array], source: str) -> dict[str, QuantScheme]:
    if not isinstance(quant_meta, Mapping):
        raise ValueError(f"{source}: quantization must be an object, got {type(quant_meta).__name__}")
    if not isinstance(quant_meta.get("quantize_heads", False), bool):
        raise ValueError(f"{source}: quantization.quantize_heads must be true/false")
    top = {key: quant_meta[key] for key in ("bits", "group_size", "mode") if key in quant_meta}
    modules = quant_meta.get("modules")
    if modules is None:
        # Port exports (§3.6) record only bits and group size: the quantized modules are those with scales.
        modules = {name[: -len(".scales")]: {} for name in tensors if name.endswith(".scales")}
        if not modules:
            raise ValueError(f"{source}: quantization is present but no tensor has scales")
    if not isinstance(modules, Mapping):
        raise ValueError(f"{source}: quantization.modules must map module path -> scheme")
    schemes = {}
    for path, entry in modules.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{source}: quantization.modules[{path!r}] must be an object")
        merged = {"mode": "affine", **top, **entry}
        missing = [key for key in ("bits", "group_size") if key not in merged]
        if missing:
            raise ValueError(f"{source}: quantization.modules[{path!r}] has no {' or '.join(missing)}")
        check_scheme(merged["bits"], merged["group_size"], merged["mode"], f"{source}: module {path}")
        schemes[path] = QuantScheme(merged["bits"], merged["group_size"], merged["mode"])
    return schemes


def _dtype_text(dtype: mx.Dtype) -> str:
    return str(dtype).removeprefix("mlx.core.")


def _tensor_problems(path: str, module: nn.Module, scheme: QuantScheme, tensors: Mapping[str, mx.array]) -> list[str]:
    rows, width = module.weight.shape
    problems = quantization_problems({path: module}, scheme, {path: "quantization.modules"})
    if problems:
        return problems
    packed, scales, biases = (tensors.get(f"{path}.{name}") for name in ("weight", "scales", "biases"))
    groups = (rows, width // scheme.group_size)
    if packed is None:
        problems.append(f"{path}: listed as quantized but there is no {path}.weight tensor")
    elif packed.dtype != mx.uint32:
        problems.append(f"{path}: packed weight is {_dtype_text(packed.dtype)}, expected uint32")
    elif tuple(packed.shape) != (rows, width * scheme.bits // 32):
        problems.append(f"{path}: packed weight shape {tuple(packed.shape)} does not match {scheme.label} "
                        f"for ({rows}, {width}); expected {(rows, width * scheme.bits // 32)}")
    if scales is None:
        problems.append(f"{path}: listed as quantized but there is no {path}.scales tensor")
    elif tuple(scales.shape) != groups:
        problems.append(f"{path}: scales shape {tuple(scales.shape)} is inconsistent with {scheme.label} "
                        f"for ({rows}, {width}); expected {groups}")
    elif (scheme.mode == "affine") != mx.issubdtype(scales.dtype, mx.floating):
        problems.append(f"{path}: scales dtype {_dtype_text(scales.dtype)} does not fit mode {scheme.mode!r}")
    if scheme.mode == "affine" and biases is None:
        problems.append(f"{path}: affine mode needs a {path}.biases tensor")
    elif scheme.mode == "affine" and tuple(biases.shape) != groups:
        problems.append(f"{path}: biases shape {tuple(biases.shape)} is inconsistent with {scheme.label}; "
                        f"expected {groups}")
    elif scheme.mode != "affine" and biases is not None:
        problems.append(f"{path}: mode {scheme.mode!r} has no biases but {path}.biases is present")
    return problems


def apply_quantization_structure(model: nn.Module, quant_meta: Any, tensors: Mapping[str, mx.array],
                                 source: str) -> None:
    """Turn the listed modules of a freshly built dense model into quantized ones before strict binding.

    Every listed module must have consistent packed weight / scales / biases tensors, and every
    quantized tensor set must belong to a listed module; all problems are reported at once.
    """
    schemes = _listed_schemes(quant_meta, tensors, source)
    candidates = dense_modules(model)
    problems = []
    for path, scheme in schemes.items():
        if path not in candidates:
            problems.append(f"{path}: listed in quantization.modules but the model has no Linear or Embedding there")
        else:
            problems += _tensor_problems(path, candidates[path], scheme, tensors)
    for name, value in tensors.items():
        module_path, _, leaf = name.rpartition(".")
        packed = leaf == "weight" and value.dtype == mx.uint32
        if (leaf in ("scales", "biases") or packed) and module_path not in schemes:
            problems.append(f"{module_path}: has quantized tensor {name} but quantization.modules does not list it")
    if problems:
        raise ValueError(f"{source}: quantization metadata does not match the tensors:\n  " + "\n  ".join(problems))
    for scheme in set(schemes.values()):
        check_mode_supported(scheme)
    quantize_modules(model, schemes)
