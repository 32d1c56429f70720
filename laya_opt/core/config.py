"""Encoder and agent configurations: parsing, validation, presets and the exact parameter count (spec §2-§3)."""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping

from laya_opt.util.errors import ConfigError, SchemaError
from laya_opt.util.schema import parse

LAYER_KINDS = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class EncoderConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    layer_types: tuple[str, ...]
    rope_bases: tuple[float, ...]  # one per layer, taken from the config by layer kind
    local_attention: int = 128
    norm_eps: float = 1e-5
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    max_position_embeddings: int = 8192
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def window(self) -> int:
        """Sliding half-width w: query i sees keys with |i - j| <= w."""
        return self.local_attention // 2


@dataclass(frozen=True)
class AgentConfig:
    encoder: str
    head_layers: int
    max_len: int = 512
    head_max_len: int = 192
    act_costs: dict = field(default_factory=dict)
    temperature: tuple = (1.0, 1.0, 1.0)
    temperature_by_options: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def action_width(self) -> int:
        return len(self.act_costs) + 1


# ----------------------------------------------------------------------------- the files, as the validator reads them

# Sizes beyond these are typos, not models; the published ones are far inside (spec §2).
LARGE = 1 << 24
MAX_PARAMETERS = 1 << 34   # 17 billion: no Laya encoder comes near, and MLX could not allocate one
MAX_ACTIONS = 256
MAX_ROPE_THETA = 1e12      # far above any published base; 1e308 overflows the float32 angles to NaN


@dataclass(frozen=True)
class RopeParameters:
    rope_type: Literal["default"] = "default"   # scaled RoPE ("linear", ...) is refused
    rope_theta: float | None = field(default=None, metadata={"gt": 1.0, "max": MAX_ROPE_THETA})


@dataclass(frozen=True)
class EncoderFile:
    """encoder/config.json (spec §3.2); keys other than these are ignored, as upstream ignores them."""

    vocab_size: int = field(metadata={"min": 1, "max": 1 << 22})
    hidden_size: int = field(metadata={"min": 2, "max": 1 << 16})
    intermediate_size: int = field(metadata={"min": 1, "max": 1 << 18})
    num_hidden_layers: int = field(metadata={"min": 1, "max": 1024})
    num_attention_heads: int = field(metadata={"min": 1, "max": 1024})
    model_type: Literal["modernbert"] = "modernbert"
    hidden_activation: Literal["gelu"] = "gelu"   # exact erf GELU; tanh approximations are refused
    norm_eps: float = field(default=1e-5, metadata={"gt": 0.0, "max": 0.1})   # 0 divides by zero on flat rows
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    local_attention: int = field(default=128, metadata={"min": 2, "max": LARGE})
    global_attn_every_n_layers: int = field(default=3, metadata={"min": 1})
    global_rope_theta: float = field(default=160000.0, metadata={"gt": 1.0, "max": MAX_ROPE_THETA})
    local_rope_theta: float = field(default=10000.0, metadata={"gt": 1.0, "max": MAX_ROPE_THETA})
    max_position_embeddings: int = field(default=8192, metadata={"min": 1, "max": LARGE})
    layer_types: tuple[Literal["full_attention", "sliding_attention"], ...] | None = None
    rope_parameters: Mapping[str, RopeParameters] | None = None


@dataclass(frozen=True)
class AgentFile:
    """rl_agent_config.json (spec §3.3); training metadata keys are ignored."""

    encoder: Any
    head_layers: int = field(metadata={"min": 0, "max": 64})
    max_len: int = 512
    head_max_len: int = 192
    act_costs: Mapping[str, float] | None = None         # only the count is used (spec §3.3)
    temperature: tuple[Any, ...] = (1.0, 1.0, 1.0)      # entries clamped later (spec §3.3), not refused
    temperature_by_options: Mapping[str, Any] | None = None


def _read(cls: type, raw: Any, source: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    known = {f.name for f in dataclasses.fields(cls)}
    try:
        return parse(cls, {key: value for key, value in raw.items() if key in known}, source)
    except SchemaError as exc:
        raise ConfigError(str(exc).replace(f"{source}.", f"{source}: ", 1)) from None


def parse_encoder_config(raw: dict, source: str = "encoder/config.json") -> EncoderConfig:
    file = _read(EncoderFile, raw, source)
    if file.hidden_size % file.num_attention_heads:
        raise ConfigError(f"{source}: hidden_size {file.hidden_size} is not divisible by num_attention_heads "
                          f"{file.num_attention_heads}")
    if (file.hidden_size // file.num_attention_heads) % 2:
        raise ConfigError(f"{source}: head dim {file.hidden_size // file.num_attention_heads} must be even for RoPE")
    size = file.vocab_size * file.hidden_size + file.num_hidden_layers * (
        4 * file.hidden_size ** 2 + 3 * file.hidden_size * file.intermediate_size)
    if size > MAX_PARAMETERS:
        raise ConfigError(f"{source}: vocab_size, hidden_size, intermediate_size and num_hidden_layers give "
                          f"{size:,} encoder parameters, more than {MAX_PARAMETERS:,}")
    layers = file.num_hidden_layers
    if file.layer_types is not None:
        if len(file.layer_types) != layers:
            raise ConfigError(f"{source}: layer_types must be a list of length num_hidden_layers={layers}")
        types = file.layer_types
    else:
        every = file.global_attn_every_n_layers
        types = tuple(LAYER_KINDS[0] if i % every == 0 else LAYER_KINDS[1] for i in range(layers))
    bases = {"full_attention": file.global_rope_theta, "sliding_attention": file.local_rope_theta}
    for kind, params in (file.rope_parameters or {}).items():
        if kind not in LAYER_KINDS:
            raise ConfigError(f"{source}: rope_parameters has unknown layer kind {kind!r}")
        if params.rope_theta is not None:
            bases[kind] = params.rope_theta
    return EncoderConfig(
        vocab_size=file.vocab_size, hidden_size=file.hidden_size, intermediate_size=file.intermediate_size,
        num_hidden_layers=layers, num_attention_heads=file.num_attention_heads, layer_types=types,
        rope_bases=tuple(bases[kind] for kind in types), local_attention=file.local_attention,
        norm_eps=file.norm_eps, norm_bias=file.norm_bias, attention_bias=file.attention_bias,
        mlp_bias=file.mlp_bias, max_position_embeddings=file.max_position_embeddings, raw=dict(raw))


def parse_agent_config(raw: dict, encoder: EncoderConfig, source: str = "rl_agent_config.json") -> AgentConfig:
    file = _read(AgentFile, raw, source)
    if not 4 < file.head_max_len < file.max_len <= encoder.max_position_embeddings:
        raise ConfigError(f"{source}: need 4 < head_max_len ({file.head_max_len}) < max_len ({file.max_len}) <= "
                          f"max_position_embeddings ({encoder.max_position_embeddings})")
    if len(file.temperature) != 3:
        raise ConfigError(f"{source}: temperature must have exactly 3 entries [choice, score, noul]")
    if len(file.act_costs or {}) >= MAX_ACTIONS:
        raise ConfigError(f"{source}: act_costs has {len(file.act_costs)} entries; at most {MAX_ACTIONS - 1}")
    return AgentConfig(encoder=str(file.encoder), head_layers=file.head_layers, max_len=file.max_len,
                       head_max_len=file.head_max_len, act_costs=dict(file.act_costs or {}),
                       temperature=file.temperature, temperature_by_options=dict(file.temperature_by_options or {}),
                       raw=dict(raw))


def parameter_count(encoder: EncoderConfig, agent: AgentConfig) -> int:
    """Spec §2 formula (biases of the optional *_bias flags included), temperature buffer excluded."""
    d, i, n, v = encoder.hidden_size, encoder.intermediate_size, encoder.num_hidden_layers, encoder.vocab_size
    total = v * d + n * (4 * d * d + 3 * d * i) + (2 * n + 1) * d
    if encoder.attention_bias:
        total += n * (3 * d + d)
    if encoder.mlp_bias:
        total += n * (2 * i + d)
    if encoder.norm_bias:
        total += (2 * n + 1) * d
    total += agent.head_layers * (12 * d * d + 13 * d) + 3 * d + (d * d + 4 * d + 1)
    total += 256 * d + 1280 + 257 * agent.action_width
    return total


# Published sizes (spec §2) and the stand-in's; `make-checkpoint` and the parameter-count test use these.
_MODERNBERT = {"model_type": "modernbert", "local_attention": 128, "global_attn_every_n_layers": 3,
               "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "max_position_embeddings": 8192,
               "hidden_activation": "gelu", "norm_eps": 1e-5}
_AGENT = {"head_layers": 2, "act_costs": {"escalate": 0.5}}
ARCHITECTURES = {
    "laya-large": (
        dict(_MODERNBERT, vocab_size=50368, hidden_size=1024, intermediate_size=2624, num_hidden_layers=28,
             num_attention_heads=16),
        dict(_AGENT, encoder="answerdotai/ModernBERT-large", max_len=512, head_max_len=192),
    ),
    "laya-multilingual": (
        dict(_MODERNBERT, vocab_size=256000, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
             num_attention_heads=12, local_rope_theta=160000.0),
        dict(_AGENT, encoder="jhu-clsp/mmBERT-base", max_len=1024, head_max_len=256),
    ),
    "tiny": (
        dict(_MODERNBERT, vocab_size=4096, hidden_size=128, intermediate_size=320, num_hidden_layers=6,
             num_attention_heads=2, local_attention=32, max_position_embeddings=512),
        dict(_AGENT, encoder="laya-opt/tiny-standin", max_len=256, head_max_len=96),
    ),
    # The shipped stand-in (checkpoints/laya-tiny): tiny's structure at D = 256 (4 heads of 64). At
    # D = 128 (2 heads) training stayed on the chance plateau far longer (checkpoints/laya-tiny/TRAINING.md).
    "standin": (
        dict(_MODERNBERT, vocab_size=4096, hidden_size=256, intermediate_size=640, num_hidden_layers=6,
             num_attention_heads=4, local_attention=32, max_position_embeddings=512),
        dict(_AGENT, encoder="laya-opt/tiny-standin", max_len=256, head_max_len=96),
    ),
}


def architecture(name: str) -> tuple[EncoderConfig, AgentConfig]:
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    enc_raw, agent_raw = ARCHITECTURES[name]
    encoder = parse_encoder_config(enc_raw, source=f"architecture {name}")
    return encoder, parse_agent_config(dict(agent_raw), encoder, source=f"architecture {name}")


def encoder_config_dict(encoder: EncoderConfig) -> dict:
    """The encoder/config.json content for a config (raw keys preserved when loaded from disk)."""
    if encoder.raw:
        return dict(encoder.raw)
    data = asdict(encoder)
    data.pop("raw")
    return data
