"""q, k and v taken from the fused Wqkv output as views instead of gathers (exact).

The reference indexes the transposed [3, B, H, L, hd] tensor with bare integers (`qkv[0]`), which
MLX lowers to a Gather kernel over a strided view: three per layer, 84 per forward of the English
model, 0.85 ms of GPU at short-1 and 6 ms at short-50 on the H200 (docs/kernels.md, the H200 kernel
profile). `qkv[0, ...]` is a
Slice, a view that runs no kernel; RoPE and SDPA take strided inputs as they are. Same values.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mlx.core as mx

from laya_opt.core.model import AttentionFn, AttentionInputs, ModernBertAttention
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked

NAME = "qkv_views"


@dataclass(frozen=True)
@checked
class QkvViewsConfig:
    """qkv_views has no settings."""


def view_self_attention(attn: ModernBertAttention, x: mx.array, ctx: AttentionInputs,
                        attend: AttentionFn) -> mx.array:
    batch, length, _ = x.shape
    qkv = attn.Wqkv(x).reshape(batch, length, 3, attn.heads, attn.head_dim).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0, ...], qkv[1, ...], qkv[2, ...]  # Slice (a view), where qkv[0] would Gather
    q = mx.fast.rope(q, attn.head_dim, traditional=False, base=attn.base, scale=1.0, offset=0)
    k = mx.fast.rope(k, attn.head_dim, traditional=False, base=attn.base, scale=1.0, offset=0)
    out = attend(q, k, v, ctx, attn.head_dim ** -0.5)
    return attn.Wo(out.transpose(0, 2, 1, 3).reshape(batch, length, -1))


def apply(runtime, config: QkvViewsConfig, data):
    kernels = dataclasses.replace(runtime.kernels, self_attention=view_self_attention)
    layers = runtime.encoder_config.num_hidden_layers
    return runtime.replace(kernels=kernels), {"gathers_removed_per_forward": 3 * layers}


PASS = PassSpec(name=NAME, config_type=QkvViewsConfig, apply=apply, exact=True,
                description="q/k/v split from Wqkv as views (no Gather kernels)",
                replaces=frozenset({"kernels"}), kernels=frozenset({"self_attention"}))
