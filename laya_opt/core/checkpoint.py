"""Reading checkpoint directories (upstream or laya-mlx layout) with strict binding, quantized ones included (spec §3).

Layout: model.safetensors, rl_agent_config.json, encoder/config.json, tokenizer/{tokenizer.json,
tokenizer_config.json}, optional mlx_config.json (MLX exports, quantization metadata) and optional
manifest.json (per-file SHA-256, which saves write and loads verify).

Loading checks everything it can before reading a weight (`inspect_checkpoint`: configs, tokenizer,
the safetensors header, checksums, then names, shapes and dtypes against a model built from the
configs), then loads and checks that every number is finite. Every problem is a `CheckpointError` or
`ConfigError` naming the file and the tensor, whichever command or API call loads the checkpoint.
Writing (saves, quantized exports, random weights for synthetic checkpoints) is `checkpoint_write`.
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from laya_opt.core.config import AgentConfig, EncoderConfig, parse_agent_config, parse_encoder_config
from laya_opt.core.decode import Calibration, calibration_from_tables
from laya_opt.util.errors import CheckpointError, ConfigError, InputError
from laya_opt.util.jsonio import read_json
from laya_opt.core.model import LayaModel
from laya_opt.core.quant import (HEAD_PREFIXES, QUANTIZED_TYPES, QuantScheme, check_mode_supported, check_scheme,
                                 dense_modules, quantization_problems, quantize_modules, weight_modules)
from laya_opt.core.tensorfile import TensorInfo, read_header
from laya_opt.core.tokens import TextCodec, load_codec

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
REQUIRED_FILES = ("model.safetensors", "rl_agent_config.json", "encoder/config.json")
MANIFEST = "manifest.json"
_SEQUENTIAL = re.compile(r"^(scorer|act_head)\.(\d+)\.")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_SEED = 2 ** 64 - 1   # mx.random.seed takes an unsigned 64-bit integer (a TypeError otherwise)


def parse_dtype(name: str | mx.Dtype) -> mx.Dtype:
    if isinstance(name, mx.Dtype):
        return name
    if name not in DTYPES:
        raise InputError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype: mx.Dtype) -> str:
    return str(dtype).removeprefix("mlx.core.")  # "float16": DTYPES' keys are MLX's own names


def to_mlx_name(name: str) -> str:
    """Upstream -> MLX tensor name (idempotent)."""
    name = name.replace(".in_proj_weight", ".in_proj.weight").replace(".in_proj_bias", ".in_proj.bias")
    return _SEQUENTIAL.sub(r"\1.layers.\2.", name)


def to_upstream_name(name: str) -> str:
    name = name.replace(".in_proj.weight", ".in_proj_weight").replace(".in_proj.bias", ".in_proj_bias")
    return re.sub(r"^(scorer|act_head)\.layers\.(\d+)\.", r"\1.\2.", name)


def map_names(tensors: dict[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    mapped: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, value in tensors.items():
        target = to_mlx_name(name)
        if target in mapped:
            raise CheckpointError(f"{source}: tensors {sources[target]!r} and {name!r} both map to {target!r}")
        mapped[target], sources[target] = value, name
    return mapped


def binding_problems(model: LayaModel, tensors: Mapping[str, Any]) -> list[str]:
    """Every missing, unexpected, misshaped or wrong-kind tensor (arrays or header entries: shape and dtype only)."""
    expected = dict(tree_flatten(model.parameters()))
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    misshaped = sorted(f"{name}: checkpoint {tuple(tensors[name].shape)} vs model {tuple(expected[name].shape)}"
                       for name in set(expected) & set(tensors) if tuple(tensors[name].shape) != expected[name].shape)
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
            problems.append(f"wrong dtype kind: {name} is {dtype_name(tensors[name].dtype)}, model expects "
                            f"{dtype_name(expected[name].dtype)}")
    return problems


def nonfinite_tensors(arrays: Mapping[str, mx.array]) -> dict[str, str]:
    """name -> "N NaN, M Inf" for every floating array holding a non-finite value (one evaluation for all)."""
    names = [name for name, value in arrays.items() if mx.issubdtype(value.dtype, mx.floating) and value.size]
    finite = mx.stack([mx.all(mx.isfinite(arrays[name])) for name in names]).tolist() if names else []
    return {name: f"{int(mx.isnan(arrays[name]).sum())} NaN, {int(mx.isinf(arrays[name]).sum())} Inf"
            for name, ok in zip(names, finite) if not ok}


def _dequantized(model: nn.Module) -> dict[str, mx.array]:
    # Non-affine formats keep their scales as 8-bit codes, which can encode NaN: check the values they give.
    return {f"{path}.scales (as dequantized weights)":
            mx.dequantize(module.weight, module.scales, None, module.group_size, module.bits, mode=module.mode)
            for path, module in weight_modules(model).items()
            if isinstance(module, QUANTIZED_TYPES) and module.mode != "affine"}


def check_finite(model: LayaModel, stored: Mapping[str, mx.array], dtype: mx.Dtype, source: str) -> None:
    """After loading: every weight and quantization scale finite, naming the tensor and what made it non-finite."""
    bad = nonfinite_tensors({**dict(tree_flatten(model.parameters())), **_dequantized(model)})
    if not bad:
        return
    lines = []
    for name, counts in bad.items():
        value = stored.get(name)
        if value is not None and mx.issubdtype(value.dtype, mx.floating) and mx.all(mx.isfinite(value)).item():
            peak = mx.max(mx.abs(value.astype(mx.float32))).item()
            lines.append(f"{name}: finite in the file (largest |value| {peak:.4g}) but out of {dtype_name(dtype)}'s "
                         f"range ({counts}); load it in float32")
        else:
            lines.append(f"{name}: {counts}")
    raise CheckpointError(f"{source}: non-finite weights in {len(lines)} tensor(s):\n  " + "\n  ".join(lines))


@dataclass(frozen=True)
class CheckpointFiles:
    """Everything a checkpoint directory says, validated, with no weight read yet.

    `model` is built from the configs (and the quantization structure of mlx_config.json) with MLX's
    lazy initialisation, so it allocates nothing: enough to check pass settings against (`explain`).
    """

    path: Path
    encoder_config: EncoderConfig
    agent_config: AgentConfig
    mlx_config: dict
    codec: TextCodec
    calibration: Calibration
    tensors: Mapping[str, TensorInfo]   # MLX names
    stored_dtype: mx.Dtype              # the one floating dtype of the stored tensors
    model: LayaModel
    hashes: Mapping[str, str]           # file -> SHA-256 for the files manifest.json lists


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
    calibration: Calibration


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolve_checkpoint_dir(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a file; a checkpoint is a directory")
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist (laya-opt never downloads weights)")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise CheckpointError(f"Not a complete Laya checkpoint: {path} lacks {', '.join(missing)}")
    return path


def read_configs(path: Path) -> tuple[EncoderConfig, AgentConfig, dict]:
    encoder = parse_encoder_config(read_json(path / "encoder/config.json", ConfigError),
                                   source=str(path / "encoder/config.json"))
    agent = parse_agent_config(read_json(path / "rl_agent_config.json", ConfigError), encoder,
                               source=str(path / "rl_agent_config.json"))
    mlx_path = path / "mlx_config.json"
    mlx_config = read_json(mlx_path, ConfigError) if mlx_path.is_file() else {}
    if not isinstance(mlx_config, dict):
        raise ConfigError(f"{mlx_path}: expected a JSON object")
    if "dtype" in mlx_config and mlx_config["dtype"] not in DTYPES:
        raise ConfigError(f"{mlx_path}: dtype {mlx_config['dtype']!r} is not one of {', '.join(DTYPES)}")
    return encoder, agent, mlx_config


def stored_dtype(tensors: Mapping[str, TensorInfo], mlx_config: dict, source: str) -> mx.Dtype:
    """The checkpoint's one floating dtype (mlx_config.json's when it declares one); a tensor in another is an error."""
    floating = {name: info.dtype for name, info in tensors.items() if mx.issubdtype(info.dtype, mx.floating)}
    if not floating:
        return mx.float32
    declared = mlx_config.get("dtype")
    expected = DTYPES[declared] if declared else Counter(floating.values()).most_common(1)[0][0]
    odd = sorted(name for name, dtype in floating.items() if dtype != expected)
    if odd:
        what = "mlx_config.json's dtype" if declared else "the dtype of the other floating tensors"
        listed = ", ".join(f"{name} ({dtype_name(floating[name])})" for name in odd[:5])
        raise CheckpointError(f"{source}: {len(odd)} floating tensor(s) are not {dtype_name(expected)}, {what}: "
                              f"{listed}{' ...' if len(odd) > 5 else ''}")
    return expected


def _manifest_entries(manifest: Any, source: str) -> dict[str, str]:
    entries = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(entries, dict) or not entries or not all(
            isinstance(name, str) and isinstance(digest, str) and _SHA256.match(digest)
            for name, digest in entries.items()):
        raise CheckpointError(f'{source}: expected {{"sha256": {{file: 64 hex digits}}}}; delete it to skip '
                              "checksum verification")
    return entries


def verify_manifest(path: Path) -> dict[str, str]:
    """Check every file manifest.json lists against its SHA-256; returns the hashes computed (none without one)."""
    source = path / MANIFEST
    if not source.is_file():
        return {}
    hashes = {}
    for name, digest in _manifest_entries(read_json(source, CheckpointError), str(source)).items():
        target = path / name
        if ".." in Path(name).parts or not target.is_file():
            raise CheckpointError(f"{source}: lists {name}, which is not a file of the checkpoint")
        hashes[name] = file_sha256(target)
        if hashes[name] != digest:
            raise CheckpointError(f"{target}: SHA-256 {hashes[name][:16]}... does not match {source} "
                                  f"({digest[:16]}...): the file is corrupt or was edited; restore it, or delete "
                                  f"{MANIFEST} to accept the edit")
    return hashes


def inspect_checkpoint(path: str | Path) -> CheckpointFiles:
    """Validate a checkpoint directory without reading a weight (configs, tokenizer, header, binding, checksums)."""
    path = resolve_checkpoint_dir(path)
    encoder, agent, mlx_config = read_configs(path)
    codec = load_codec(path / "tokenizer")
    if codec.vocab_size > encoder.vocab_size:
        raise ConfigError(f"{path / 'tokenizer' / 'tokenizer.json'}: {codec.vocab_size} tokens, but "
                          f"encoder/config.json gives only {encoder.vocab_size} embedding rows (vocab_size)")
    calibration = calibration_from_tables(agent.temperature, agent.temperature_by_options,
                                          source=str(path / "rl_agent_config.json"))
    weights_path = path / "model.safetensors"
    tensors = map_names(read_header(weights_path), str(weights_path))
    # Checksums after each file parsed on its own, before the files are checked against each other: a
    # corrupted config that still parses is then named as itself, not as a tensor it no longer fits.
    hashes = verify_manifest(path)
    dtype = stored_dtype(tensors, mlx_config, str(weights_path))
    model = LayaModel(encoder, agent)
    if mlx_config.get("quantization"):
        # A quantized export: build the packed modules first, then bind strictly.
        apply_quantization_structure(model, mlx_config["quantization"], tensors, source=str(path / "mlx_config.json"))
    problems = binding_problems(model, tensors)
    if problems:
        raise CheckpointError(f"{weights_path} does not match the model that encoder/config.json and "
                              "rl_agent_config.json describe:\n  " + "\n  ".join(problems))
    return CheckpointFiles(path=path, encoder_config=encoder, agent_config=agent, mlx_config=mlx_config, codec=codec,
                           calibration=calibration, tensors=tensors, stored_dtype=dtype, model=model, hashes=hashes)


def load_checkpoint(path: str | Path | CheckpointFiles, dtype: str | mx.Dtype = "float32") -> Checkpoint:
    """Load a checkpoint directory in the upstream or laya-mlx layout; binding is strict, every weight finite.

    `path` may be what `inspect_checkpoint` returned, whose model then receives the weights (once).
    """
    dtype = parse_dtype(dtype)
    files = path if isinstance(path, CheckpointFiles) else inspect_checkpoint(path)
    weights_path = files.path / "model.safetensors"
    try:
        stored = map_names(mx.load(str(weights_path)), str(weights_path))
    except (RuntimeError, ValueError, OSError) as exc:  # the header was valid, so this is an I/O failure
        raise CheckpointError(f"{weights_path}: cannot read safetensors ({exc})") from None
    # Cast floating tensors only; packed quantized weights stay integers.
    files.model.load_weights([(name, value.astype(dtype) if mx.issubdtype(value.dtype, mx.floating) else value)
                              for name, value in stored.items()], strict=True)
    mx.eval(files.model.parameters())
    check_finite(files.model, stored, dtype, str(weights_path))
    return Checkpoint(path=files.path, encoder_config=files.encoder_config, agent_config=files.agent_config,
                      codec=files.codec, model=files.model, dtype=dtype, mlx_config=files.mlx_config,
                      weights_sha256=files.hashes.get("model.safetensors") or file_sha256(weights_path),
                      calibration=files.calibration)


# ----------------------------------------------------------------------------- quantized checkpoints (spec §3.6)


def _check_top_level(quant_meta: Mapping, schemes: Mapping[str, QuantScheme], source: str) -> None:
    """The top level is what a reader of it alone (the port, spec §3.6) applies: it must be what the modules use.

    Writers put the most common per-module scheme on top, so a top-level value that the most modules do
    not share is an edit or a mix-up; so is `quantize_heads` contradicting the modules listed.
    """
    for key in ("bits", "group_size", "mode"):
        counts = Counter(getattr(scheme, key) for scheme in schemes.values())
        if key in quant_meta and counts and counts[quant_meta[key]] != max(counts.values()):
            stated = ", ".join(f"{count} module(s) {value!r}" for value, count in counts.most_common())
            raise CheckpointError(f"{source}: quantization.{key} is {quant_meta[key]!r} but the per-module entries "
                                  f"say {stated}")
    heads = sorted(path for path in schemes if path.startswith(HEAD_PREFIXES))
    quantize_heads = quant_meta.get("quantize_heads")
    if isinstance(quantize_heads, bool) and quantize_heads != bool(heads):
        found = f"{', '.join(heads[:3])}{' ...' if len(heads) > 3 else ''} are quantized" if heads else \
            "no head or scorer module is quantized"
        raise CheckpointError(f"{source}: quantization.quantize_heads is {str(quantize_heads).lower()} but {found}")


def _listed_schemes(quant_meta: Any, tensors: Mapping[str, Any], source: str) -> dict[str, QuantScheme]:
    if not isinstance(quant_meta, Mapping):
        raise CheckpointError(f"{source}: quantization must be an object, got {type(quant_meta).__name__}")
    if not isinstance(quant_meta.get("quantize_heads", False), bool):
        raise CheckpointError(f"{source}: quantization.quantize_heads must be true/false")
    top = {key: quant_meta[key] for key in ("bits", "group_size", "mode") if key in quant_meta}
    modules = quant_meta.get("modules")
    if modules is None:
        # Port exports (§3.6) record only bits and group size: the quantized modules are those with scales.
        modules = {name[: -len(".scales")]: {} for name in tensors if name.endswith(".scales")}
        if not modules:
            raise CheckpointError(f"{source}: quantization is present but no tensor has scales")
    if not isinstance(modules, Mapping):
        raise CheckpointError(f"{source}: quantization.modules must map module path -> scheme")
    schemes = {}
    for path, entry in modules.items():
        if not isinstance(entry, Mapping):
            raise CheckpointError(f"{source}: quantization.modules[{path!r}] must be an object")
        merged = {"mode": "affine", **top, **entry}
        missing = [key for key in ("bits", "group_size") if key not in merged]
        if missing:
            raise CheckpointError(f"{source}: quantization.modules[{path!r}] has no {' or '.join(missing)}")
        try:
            check_scheme(merged["bits"], merged["group_size"], merged["mode"], f"{source}: module {path}")
        except ValueError as exc:
            raise CheckpointError(str(exc)) from None
        schemes[path] = QuantScheme(merged["bits"], merged["group_size"], merged["mode"])
    return schemes


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
        problems.append(f"{path}: packed weight is {dtype_name(packed.dtype)}, expected uint32")
    elif tuple(packed.shape) != (rows, width * scheme.bits // 32):
        problems.append(f"{path}: packed weight shape {tuple(packed.shape)} does not match {scheme.label} "
                        f"for ({rows}, {width}); expected {(rows, width * scheme.bits // 32)}")
    if scales is None:
        problems.append(f"{path}: listed as quantized but there is no {path}.scales tensor")
    elif tuple(scales.shape) != groups:
        problems.append(f"{path}: scales shape {tuple(scales.shape)} is inconsistent with {scheme.label} "
                        f"for ({rows}, {width}); expected {groups}")
    elif (scheme.mode == "affine") != mx.issubdtype(scales.dtype, mx.floating):
        problems.append(f"{path}: scales dtype {dtype_name(scales.dtype)} does not fit mode {scheme.mode!r}")
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
        raise CheckpointError(f"{source}: quantization metadata does not match the tensors:\n  "
                              + "\n  ".join(problems))
    _check_top_level(quant_meta, schemes, source)
    for scheme in set(schemes.values()):
        try:
            check_mode_supported(scheme)
        except ValueError as exc:
            raise CheckpointError(f"{source}: {exc}") from None
    quantize_modules(model, schemes)
