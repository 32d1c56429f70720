import math

import pytest
from conftest import TINY_AGENT, TINY_ENCODER
from mlx.utils import tree_flatten

from laya_opt.core.config import ARCHITECTURES, architecture, parameter_count, parse_agent_config, parse_encoder_config
from laya_opt.core.model import LayaModel


def count_parameters(model) -> int:
    """Every parameter array's size, the dummy temperature buffer excluded (what the spec §2 formula counts)."""
    return sum(value.size for name, value in tree_flatten(model.parameters()) if name != "temperature")


@pytest.mark.parametrize("name, expected", [("laya-large", 421_293_827), ("laya-multilingual", 321_908_995)])
def test_published_parameter_counts_formula_and_modules(name, expected):
    encoder, agent = architecture(name)
    assert parameter_count(encoder, agent) == expected
    # MLX arrays are lazy: building the modules allocates nothing until evaluated.
    assert count_parameters(LayaModel(encoder, agent)) == expected


def test_tiny_fixture_parameter_count_matches_spec():
    encoder = parse_encoder_config(TINY_ENCODER)
    agent = parse_agent_config(TINY_AGENT, encoder)
    assert parameter_count(encoder, agent) == 185_795
    assert count_parameters(LayaModel(encoder, agent)) == 185_795


def test_layer_types_and_rope_bases_derived_per_kind():
    encoder, _ = architecture("laya-large")
    full = [i for i, kind in enumerate(encoder.layer_types) if kind == "full_attention"]
    assert full == list(range(0, 28, 3)) and len(full) == 10
    assert {encoder.rope_bases[i] for i in full} == {160000.0}
    assert {encoder.rope_bases[i] for i in range(28) if i not in full} == {10000.0}
    multilingual, _ = architecture("laya-multilingual")
    assert set(multilingual.rope_bases) == {160000.0}


def test_rope_parameters_override_and_explicit_layer_types():
    raw = dict(TINY_ENCODER, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
               rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                "full_attention": {"rope_theta": 500.0}})
    encoder = parse_encoder_config(raw)
    assert encoder.layer_types[1] == "full_attention"
    assert encoder.rope_bases == (160000.0, 500.0, 160000.0)
    assert encoder.window == 8


@pytest.mark.parametrize("change, message", [
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "rope_theta": 1e4}}},
     "rope_type: 'linear' is not one of default"),
    ({"hidden_size": 60, "num_attention_heads": 7}, "not divisible"),
    ({"hidden_size": 66, "num_attention_heads": 2}, "must be even"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "length num_hidden_layers=3"),
    ({"layer_types": ["full_attention", "chunked", "full_attention"]}, "layer_types[1]"),
    ({"model_type": "bert"}, "model_type"),
    ({"hidden_activation": "gelu_pytorch_tanh"}, "hidden_activation"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"num_hidden_layers": "3"}, "num_hidden_layers"),
    ({"rope_parameters": {"global": {}}}, "unknown layer kind"),
    ({"norm_eps": 0}, "norm_eps: must be > 0"),
    ({"norm_eps": "small"}, "norm_eps: expected a number, got 'small'"),
    ({"norm_eps": float("nan")}, "norm_eps: expected a finite number"),
    ({"vocab_size": 10 ** 12}, "vocab_size: must be <= 4194304"),
    ({"hidden_size": 1 << 17}, "hidden_size: must be <= 65536"),
    ({"local_rope_theta": 1.0}, "local_rope_theta: must be > 1.0"),
    ({"global_rope_theta": 1e308}, "global_rope_theta: must be <= 1000000000000.0"),
    ({"rope_parameters": {"full_attention": {"rope_theta": 1.0}}}, "full_attention.rope_theta: must be > 1.0"),
    ({"vocab_size": 1 << 22, "hidden_size": 1 << 16, "num_attention_heads": 64}, "more than 17,179,869,184"),
])
def test_encoder_config_errors(change, message):
    with pytest.raises(ValueError) as info:
        parse_encoder_config(dict(TINY_ENCODER, **change))
    assert message in str(info.value)


def test_missing_encoder_key_is_named():
    raw = dict(TINY_ENCODER)
    del raw["intermediate_size"]
    with pytest.raises(ValueError, match="intermediate_size"):
        parse_encoder_config(raw)


@pytest.mark.parametrize("change, message", [
    ({"head_max_len": 128}, "head_max_len"),        # not < max_len
    ({"max_len": 512}, "max_position_embeddings"),  # > 256
    ({"head_max_len": 4}, "4 < head_max_len"),
    ({"temperature": [1.0, 1.0]}, "exactly 3"),
    ({"act_costs": [0.5]}, "act_costs"),
    ({"head_layers": -1}, "head_layers"),
    ({"head_layers": 65}, "head_layers: must be <= 64"),
    ({"act_costs": {"escalate": "high"}}, "act_costs.escalate: expected a number"),
    ({"act_costs": {f"a{i}": 0.5 for i in range(256)}}, "act_costs has 256 entries; at most 255"),
])
def test_agent_config_errors(change, message):
    encoder = parse_encoder_config(TINY_ENCODER)
    with pytest.raises(ValueError) as info:
        parse_agent_config(dict(TINY_AGENT, **change), encoder)
    assert message in str(info.value)


@pytest.mark.parametrize("key", ["encoder", "head_layers"])
def test_agent_config_requires_encoder_and_head_layers(key):
    encoder = parse_encoder_config(TINY_ENCODER)
    raw = dict(TINY_AGENT)
    del raw[key]
    with pytest.raises(ValueError, match=key):
        parse_agent_config(raw, encoder)


def test_unknown_architecture_lists_known():
    with pytest.raises(ValueError) as info:
        architecture("laya-xl")
    for name in ARCHITECTURES:
        assert name in str(info.value)


def test_head_layers_zero_is_legal_and_counted():
    encoder = parse_encoder_config(TINY_ENCODER)
    agent = parse_agent_config(dict(TINY_AGENT, head_layers=0), encoder)
    d = 64
    assert parameter_count(encoder, agent) == 185_795 - (12 * d * d + 13 * d)
    assert count_parameters(LayaModel(encoder, agent)) == parameter_count(encoder, agent)
    assert math.isclose(encoder.head_dim, 64)
