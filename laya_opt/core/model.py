"""The Laya model in MLX: ModernBERT encoder, decision head, scorer and action head (spec §5).

Module and parameter names follow the laya-mlx layout (upstream names with `in_proj.weight` and
`scorer.layers.N`), so a checkpoint binds with `model.load_weights(list(tensors.items()))`.
The computation is split into replaceable kernels (`Kernels`): passes swap the sliding-attention
function or the final head layer without touching weights or subclassing.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import mlx.core as mx
import mlx.nn as nn

from laya_opt.core.config import AgentConfig, EncoderConfig

MASKED_LOGIT = -1e4


def sdpa(q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: mx.array | None = None) -> mx.array:
    """`mx.fast.scaled_dot_product_attention`, with half-precision inputs computed in float32 on the CPU.

    MLX's CPU path keeps the scores and the softmax in the input dtype. On the trained stand-in that moved
    float16 probabilities by up to 0.21 from float32 (smoke suite); upcasting only inside attention
    brought it to 0.009. Other devices use the fused kernel as is.
    """
    if q.dtype in (mx.float16, mx.bfloat16) and mx.default_device().type == mx.DeviceType.cpu:
        out = mx.fast.scaled_dot_product_attention(q.astype(mx.float32), k.astype(mx.float32),
                                                   v.astype(mx.float32), scale=scale, mask=mask)
        return out.astype(q.dtype)
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)


# ----------------------------------------------------------------------------- attention masks


@dataclass(frozen=True)
class AttentionInputs:
    """What an attention kernel may need besides q, k, v; built once per forward by `Kernels.attention_masks`."""

    valid: mx.array        # bool [B, L], True on real tokens
    key_mask: mx.array     # [B, 1, 1, L] valid keys (full layers): bool, or additive in the compute dtype
    window: int            # sliding half-width w
    sliding_mask: mx.array | None = None  # [B, 1, L, L] when built once per forward; None: per layer


def boolean_masks(valid: mx.array, window: int, dtype: mx.Dtype) -> AttentionInputs:
    """The reference: a boolean key mask; sliding layers build their band mask themselves."""
    return AttentionInputs(valid=valid, key_mask=key_padding_mask(valid), window=window)


def key_padding_mask(valid: mx.array) -> mx.array:
    return valid[:, None, None, :]


def sliding_mask(valid: mx.array, window: int) -> mx.array:
    """[B, 1, L, L]: valid key AND (|i - j| <= w OR padded query); padded queries never get an empty row."""
    length = valid.shape[1]
    pos = mx.arange(length)
    band = mx.abs(pos[:, None] - pos[None, :]) <= window
    allowed = band[None] | ~valid[:, :, None]
    return (allowed & valid[:, None, :])[:, None]


def dense_sliding_attention(q: mx.array, k: mx.array, v: mx.array, ctx: AttentionInputs, scale: float) -> mx.array:
    """Reference sliding attention: the dense L x L band mask (the context's, else built here)."""
    mask = ctx.sliding_mask if ctx.sliding_mask is not None else sliding_mask(ctx.valid, ctx.window)
    return sdpa(q, k, v, scale=scale, mask=mask)


def global_attention(q: mx.array, k: mx.array, v: mx.array, ctx: AttentionInputs, scale: float) -> mx.array:
    return sdpa(q, k, v, scale=scale, mask=ctx.key_mask)


AttentionFn = Callable[[mx.array, mx.array, mx.array, AttentionInputs, float], mx.array]

# ----------------------------------------------------------------------------- encoder


class ModernBertAttention(nn.Module):
    def __init__(self, cfg: EncoderConfig, base: float):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.head_dim = cfg.head_dim
        self.base = base
        self.Wqkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=cfg.attention_bias)
        self.Wo = nn.Linear(cfg.hidden_size, cfg.hidden_size, bias=cfg.attention_bias)


def split_heads_rope(qkv: mx.array, heads: int, head_dim: int, base: float) -> tuple[mx.array, mx.array, mx.array]:
    """Wqkv's output [B, L, 3D] -> q, k, v [B, H, L, hd], with RoPE on q and k."""
    batch, length, _ = qkv.shape
    qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    # mx.fast.rope computes angles in float32 and casts afterwards (spec §5.4).
    q = mx.fast.rope(q, head_dim, traditional=False, base=base, scale=1.0, offset=0)
    k = mx.fast.rope(k, head_dim, traditional=False, base=base, scale=1.0, offset=0)
    return q, k, v


def reference_self_attention(attn: ModernBertAttention, x: mx.array, ctx: AttentionInputs,
                             attend: AttentionFn) -> mx.array:
    """Wqkv, split into q/k/v [B, H, L, hd], RoPE on q and k, attention, merged heads, Wo."""
    batch, length, _ = x.shape
    q, k, v = split_heads_rope(attn.Wqkv(x), attn.heads, attn.head_dim, attn.base)
    out = attend(q, k, v, ctx, attn.head_dim ** -0.5)
    return attn.Wo(out.transpose(0, 2, 1, 3).reshape(batch, length, -1))


class ModernBertMLP(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.Wi = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=cfg.mlp_bias)
        self.Wo = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def __call__(self, x: mx.array) -> mx.array:
        return self.Wo(geglu(self.Wi(x)))


def geglu(hidden: mx.array) -> mx.array:
    """gelu(u) * g of Wi's output, whose rows are [GELU input u | gate g]."""
    gelu_input, gate = mx.split(hidden, 2, axis=-1)
    return nn.gelu(gelu_input) * gate


class ModernBertLayer(nn.Module):
    def __init__(self, cfg: EncoderConfig, index: int):
        super().__init__()
        self.sliding = cfg.layer_types[index] == "sliding_attention"
        if index > 0:  # layer 0 has no attention norm (identity)
            self.attn_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)
        self.attn = ModernBertAttention(cfg, cfg.rope_bases[index])
        self.mlp_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)
        self.mlp = ModernBertMLP(cfg)

    def __call__(self, x: mx.array, ctx: AttentionInputs, attend: AttentionFn,
                 self_attention: "SelfAttentionFn" = reference_self_attention) -> mx.array:
        normed = self.attn_norm(x) if "attn_norm" in self else x
        x = x + self_attention(self.attn, normed, ctx, attend)
        return x + self.mlp(self.mlp_norm(x))


class Embeddings(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)

    def __call__(self, input_ids: mx.array) -> mx.array:
        return self.norm(self.tok_embeddings(input_ids))


class ModernBertEncoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.window = cfg.window
        self.embeddings = Embeddings(cfg)
        self.layers = [ModernBertLayer(cfg, i) for i in range(cfg.num_hidden_layers)]
        self.final_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps, bias=cfg.norm_bias)

    def __call__(self, input_ids: mx.array, attention_mask: mx.array, kernels: "Kernels | None" = None) -> mx.array:
        kernels = kernels or DEFAULT_KERNELS
        return kernels.encoder_stack(self, input_ids, attention_mask, kernels)


def reference_encoder_stack(encoder: ModernBertEncoder, input_ids: mx.array, attention_mask: mx.array,
                            kernels: "Kernels") -> mx.array:
    """Embeddings, every layer (sliding ones through `kernels.sliding_attention`), final norm: [B, L, D]."""
    x = encoder.embeddings(input_ids)
    ctx = kernels.attention_masks(attention_mask, encoder.window, x.dtype)
    for layer in encoder.layers:
        attend = kernels.sliding_attention if layer.sliding else global_attention
        x = layer(x, ctx, attend, kernels.self_attention)
    return encoder.final_norm(x)


# ----------------------------------------------------------------------------- decision head


class HeadAttention(nn.Module):
    """torch.nn.MultiheadAttention with a fused, biased in_proj (batch_first)."""

    def __init__(self, dims: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj = nn.Linear(dims, 3 * dims, bias=True)
        self.out_proj = nn.Linear(dims, dims, bias=True)

    def split_heads(self, x: mx.array) -> mx.array:
        batch, length, dims = x.shape
        return x.reshape(batch, length, self.heads, dims // self.heads).transpose(0, 2, 1, 3)

    def merge_heads(self, x: mx.array) -> mx.array:
        batch, _, length, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(batch, length, -1)

    def attend(self, q: mx.array, k: mx.array, v: mx.array, key_mask: mx.array) -> mx.array:
        scale = (q.shape[-1] // self.heads) ** -0.5
        out = sdpa(self.split_heads(q), self.split_heads(k), self.split_heads(v), scale=scale, mask=key_mask)
        return self.out_proj(self.merge_heads(out))

    def __call__(self, x: mx.array, key_mask: mx.array) -> mx.array:
        q, k, v = mx.split(self.in_proj(x), 3, axis=-1)
        return self.attend(q, k, v, key_mask)


class HeadLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer(norm_first=True, activation=relu, dim_feedforward=4D), dropout off."""

    def __init__(self, dims: int):
        super().__init__()
        self.self_attn = HeadAttention(dims, max(1, dims // 64))
        self.linear1 = nn.Linear(dims, 4 * dims)
        self.linear2 = nn.Linear(4 * dims, dims)
        self.norm1 = nn.LayerNorm(dims, eps=1e-5)
        self.norm2 = nn.LayerNorm(dims, eps=1e-5)

    def feed_forward(self, x: mx.array) -> mx.array:
        return x + self.linear2(nn.relu(self.linear1(self.norm2(x))))

    def __call__(self, x: mx.array, key_mask: mx.array) -> mx.array:
        x = x + self.self_attn(self.norm1(x), key_mask)
        return self.feed_forward(x)


class DecisionHead(nn.Module):
    def __init__(self, dims: int, layers: int):
        super().__init__()
        self.layers = [HeadLayer(dims) for _ in range(layers)]


def full_final_layer(layer: HeadLayer, h: mx.array, key_mask: mx.array, select: mx.array) -> mx.array:
    """Reference last head layer: every row, then gather the selected rows [B, R, D]."""
    return mx.take_along_axis(layer(h, key_mask), select[:, :, None], axis=1)


FinalLayerFn = Callable[[HeadLayer, mx.array, mx.array, mx.array], mx.array]
MaskFn = Callable[[mx.array, int, mx.Dtype], AttentionInputs]
SelfAttentionFn = Callable[[ModernBertAttention, mx.array, AttentionInputs, AttentionFn], mx.array]
EncoderStackFn = Callable[[ModernBertEncoder, mx.array, mx.array, "Kernels"], mx.array]


@dataclass(frozen=True)
class Kernels:
    """Replaceable computation of the forward pass (weights live in the model, not here).

    From coarse to fine: the whole encoder stack (norms and residuals included), the self-attention
    block of a layer, the attention itself for sliding layers, how the masks are built, the final head
    layer. A replacement must read the same weights and keep every finer kernel it does not replace.
    """

    encoder_stack: EncoderStackFn = reference_encoder_stack
    self_attention: SelfAttentionFn = reference_self_attention
    sliding_attention: AttentionFn = dense_sliding_attention
    attention_masks: MaskFn = boolean_masks
    final_head_layer: FinalLayerFn = full_final_layer
    action_dtype: mx.Dtype = mx.float32  # explicit, never read from a (possibly packed) weight


DEFAULT_KERNELS = Kernels()
KERNEL_FIELDS = tuple(kernel.name for kernel in dataclasses.fields(Kernels))

# ----------------------------------------------------------------------------- model


def _linear_as(layer: nn.Linear, x: mx.array, dtype: mx.Dtype) -> mx.array:
    if "scales" in layer:
        raise TypeError("the action head must stay dense: its input width D+4 cannot be group-quantized")
    out = x.astype(dtype) @ layer.weight.astype(dtype).T
    return out + layer.bias.astype(dtype) if "bias" in layer else out


def action_features(logits: mx.array, marker_mask: mx.array) -> mx.array:
    """[top1, top1 - top2, entropy / log k, k / 255] from the uncalibrated float32 logits (spec §5.6)."""
    probs = mx.softmax(logits, axis=-1)
    k = mx.maximum(marker_mask.sum(axis=-1), 2).astype(mx.float32)
    entropy = -(probs * mx.log(mx.maximum(probs, 1e-9))).sum(axis=-1) / mx.log(k)
    top = mx.sort(probs, axis=-1)[:, -2:]
    top1, top2 = top[:, 1], top[:, 0]
    return mx.stack([top1, top1 - top2, entropy, k / 255.0], axis=-1)


class LayaModel(nn.Module):
    def __init__(self, encoder: EncoderConfig, agent: AgentConfig):
        super().__init__()
        dims = encoder.hidden_size
        self.encoder_config = encoder
        self.agent_config = agent
        self.encoder = ModernBertEncoder(encoder)
        if agent.head_layers > 0:
            self.head = DecisionHead(dims, agent.head_layers)
        self.type_emb = nn.Embedding(3, dims)
        self.scorer = nn.Sequential(nn.LayerNorm(dims, eps=1e-5), nn.Linear(dims, dims), nn.GELU(),
                                    nn.Linear(dims, 1))
        self.act_head = nn.Sequential(nn.Linear(dims + 4, 256), nn.GELU(), nn.Linear(256, agent.action_width))
        self.temperature = mx.ones((3,))  # dummy buffer that strict loading requires; never used

    @property
    def head_layers(self) -> list[HeadLayer]:
        return self.head.layers if "head" in self else []

    def head_states(self, encoded: mx.array, attention_mask: mx.array, qtype: mx.array) -> mx.array:
        """Type embedding plus all but the last head layer, from encoder states [B, L, D]."""
        h = encoded + self.type_emb(qtype)[:, None, :]  # added to every position, padding included
        key_mask = key_padding_mask(attention_mask)
        for layer in self.head_layers[:-1]:
            h = layer(h, key_mask)
        return h

    def __call__(self, input_ids: mx.array, attention_mask: mx.array, marker_pos: mx.array,
                 marker_mask: mx.array, qtype: mx.array,
                 kernels: Kernels = DEFAULT_KERNELS) -> tuple[mx.array, mx.array]:
        encoded = self.encoder(input_ids, attention_mask, kernels)
        return self.decide(encoded, attention_mask, marker_pos, marker_mask, qtype, kernels)

    def decide(self, encoded: mx.array, attention_mask: mx.array, marker_pos: mx.array,
               marker_mask: mx.array, qtype: mx.array,
               kernels: Kernels = DEFAULT_KERNELS) -> tuple[mx.array, mx.array]:
        """Decision head, scorer and action head on encoder states: (logits [B, K], action [B, A])."""
        h = self.head_states(encoded, attention_mask, qtype)
        # Row 0 ([CLS]) and the marker rows are the only rows read after the head.
        select = mx.concatenate([mx.zeros((marker_pos.shape[0], 1), dtype=marker_pos.dtype),
                                 mx.maximum(marker_pos, 0)], axis=1)
        if self.head_layers:
            picked = kernels.final_head_layer(self.head_layers[-1], h, key_padding_mask(attention_mask), select)
        else:
            picked = mx.take_along_axis(h, select[:, :, None], axis=1)
        cls, markers = picked[:, 0], picked[:, 1:]
        scores = self.scorer(markers).squeeze(-1).astype(mx.float32)
        logits = mx.where(marker_mask, scores, MASKED_LOGIT)
        pooled = mx.concatenate([cls.astype(mx.float32), action_features(logits, marker_mask)], axis=-1)
        first, _, last = self.act_head.layers
        hidden = nn.gelu(_linear_as(first, pooled, kernels.action_dtype))
        action = _linear_as(last, hidden, kernels.action_dtype).astype(mx.float32)
        return logits, action
