"""Encoder and agent configurations: parsing, validation, presets and the exact parameter count (spec §2-§3)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

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


def _require_int(raw: dict, key: str, source: str, minimum: int = 1) -> int:
    if key not in raw:
        raise ValueError(f"{source}: missing required key '{key}'")
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{source}: '{key}' must be an integer >= {minimum}, got {value!r}")
    return value


def parse_encoder_config(raw: dict, source: str = "encoder/config.json") -> EncoderConfig:
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected a JSON object")
    model_type = raw.get("model_type", "modernbert")
    if model_type != "modernbert":
        raise ValueError(f"{source}: model_type must be 'modernbert', got {model_type!r}")
    activation = raw.get("hidden_activation", "gelu")
    if activation != "gelu":
        raise ValueError(f"{source}: hidden_activation must be 'gelu' (exact erf), got {activation!r}")
    vocab = _require_int(raw, "vocab_size", source)
    hidden = _require_int(raw, "hidden_size", source)
    inter = _require_int(raw, "intermediate_size", source)
    layers = _require_int(raw, "num_hidden_layers", source)
    heads = _require_int(raw, "num_attention_heads", source)
    if hidden % heads:
        raise ValueError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    if (hidden // heads) % 2:
        raise ValueError(f"{source}: head dim {hidden // heads} must be even for RoPE")
    local = raw.get("local_attention", 128)
    if isinstance(local, bool) or not isinstance(local, int) or local < 2:
        raise ValueError(f"{source}: local_attention must be an integer >= 2, got {local!r}")
    max_pos = raw.get("max_position_embeddings", 8192)
    if isinstance(max_pos, bool) or not isinstance(max_pos, int) or max_pos < 1:
        raise ValueError(f"{source}: max_position_embeddings must be a positive integer, got {max_pos!r}")

    if "layer_types" in raw and raw["layer_types"] is not None:
        types = raw["layer_types"]
        if not isinstance(types, list) or len(types) != layers:
            raise ValueError(f"{source}: layer_types must be a list of length num_hidden_layers={layers}")
        for i, kind in enumerate(types):
            if kind not in LAYER_KINDS:
                raise ValueError(f"{source}: layer_types[{i}] = {kind!r} is not one of {LAYER_KINDS}")
        types = tuple(types)
    else:
        every = raw.get("global_attn_every_n_layers", 3)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"{source}: global_attn_every_n_layers must be a positive integer, got {every!r}")
        types = tuple(LAYER_KINDS[0] if i % every == 0 else LAYER_KINDS[1] for i in range(layers))

    fallback = {
        "full_attention": float(raw.get("global_rope_theta", 160000.0)),
        "sliding_attention": float(raw.get("local_rope_theta", 10000.0)),
    }
    rope_params = raw.get("rope_parameters") or {}
    if not isinstance(rope_params, dict):
        raise ValueError(f"{source}: rope_parameters must be an object")
    bases = dict(fallback)
    for kind, params in rope_params.items():
        if kind not in LAYER_KINDS:
            raise ValueError(f"{source}: rope_parameters has unknown layer kind {kind!r}")
        if not isinstance(params, dict):
            raise ValueError(f"{source}: rope_parameters[{kind!r}] must be an object")
        rope_type = params.get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(f"{source}: rope_parameters[{kind!r}].rope_type {rope_type!r} is not supported "
                             "(only 'default' RoPE)")
        if "rope_theta" in params:
            bases[kind] = float(params["rope_theta"])
    for kind, base in bases.items():
        if not math.isfinite(base) or base <= 1.0:
            raise ValueError(f"{source}: RoPE base for {kind} must be a finite number > 1, got {base!r}")
    return EncoderConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, layer_types=types, rope_bases=tuple(bases[kind] for kind in types),
        local_attention=local, norm_eps=float(raw.get("norm_eps", 1e-5)),
        norm_bias=bool(raw.get("norm_bias", False)), attention_bias=bool(raw.get("attention_bias", False)),
        mlp_bias=bool(raw.get("mlp_bias", False)), max_position_embeddings=max_pos, raw=dict(raw),
    )


def parse_agent_config(raw: dict, encoder: EncoderConfig, source: str = "rl_agent_config.json") -> AgentConfig:
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected a JSON object")
    for key in ("encoder", "head_layers"):
        if key not in raw:
            raise ValueError(f"{source}: missing required key '{key}'")
    head_layers = _require_int(raw, "head_layers", source, minimum=0)
    max_len = raw.get("max_len", 512)
    head_max_len = raw.get("head_max_len", 192)
    for key, value in (("max_len", max_len), ("head_max_len", head_max_len)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{source}: '{key}' must be an integer, got {value!r}")
    if not 4 < head_max_len < max_len <= encoder.max_position_embeddings:
        raise ValueError(f"{source}: need 4 < head_max_len ({head_max_len}) < max_len ({max_len}) <= "
                         f"max_position_embeddings ({encoder.max_position_embeddings})")
    act_costs = raw.get("act_costs", {}) or {}
    if not isinstance(act_costs, dict):
        raise ValueError(f"{source}: act_costs must be an object, got {type(act_costs).__name__}")
    temperature = raw.get("temperature", [1.0, 1.0, 1.0])
    if not isinstance(temperature, (list, tuple)) or len(temperature) != 3:
        raise ValueError(f"{source}: temperature must have exactly 3 entries [choice, score, noul]")
    by_options = raw.get("temperature_by_options", {}) or {}
    if not isinstance(by_options, dict):
        raise ValueError(f"{source}: temperature_by_options must be an object")
    return AgentConfig(encoder=str(raw["encoder"]), head_layers=head_layers, max_len=max_len,
                       head_max_len=head_max_len, act_costs=dict(act_costs), temperature=tuple(temperature),
                       temperature_by_options=dict(by_options), raw=dict(raw))


def read_json(path: Path):
    """Parse a JSON file; a missing file or invalid JSON is an error naming the file."""
    if not path.is_file():
        raise FileNotFoundError(f"Not a complete Laya checkpoint: missing {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON ({exc})") from None


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


def architecture(name: str, vocab_size: int | None = None) -> tuple[EncoderConfig, AgentConfig]:
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}")
    enc_raw, agent_raw = ARCHITECTURES[name]
    enc_raw = dict(enc_raw, **({"vocab_size": vocab_size} if vocab_size else {}))
    encoder = parse_encoder_config(enc_raw, source=f"architecture {name}")
    return encoder, parse_agent_config(dict(agent_raw), encoder, source=f"architecture {name}")


def encoder_config_dict(encoder: EncoderConfig) -> dict:
    """The encoder/config.json content for a config (raw keys preserved when loaded from disk)."""
    if encoder.raw:
        return dict(encoder.raw)
    data = asdict(encoder)
    data.pop("raw")
    return data
