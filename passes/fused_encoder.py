"""The encoder through fused kernels: fewer, faster launches per layer (exact; CUDA kernels, MLX elsewhere).

Per layer the reference launches LayerNorm, Wqkv, three gathers, two RoPEs, SDPA, a head merge, Wo, an
add, LayerNorm, Wi, GeGLU, Wo and an add. On the H200 the MLX forward is host-bound at small batch
(~5 us of dispatch per op, 15-22 us per cuBLASLt matmul) and MLX's LayerNorm and RoPE kernels run slowly
on [~100, 1024] tensors (docs/kernels.md, the H200 kernel profile). With this pass each layer is: Wqkv,
one qkv+RoPE kernel writing
contiguous q/k/v, SDPA, head merge, Wo, one residual-add+LayerNorm kernel, Wi, one GeGLU kernel, Wo, one
residual-add+LayerNorm kernel (that LayerNorm being the next layer's attention norm, or the final norm).
With `gemm: fused` the encoder's dense Linears run a small-M tensor-core kernel (`laya_opt.core.fused.linear`,
rows <= 512) whose dispatch skips cuBLASLt's per-call heuristic query.

The kernels live in `laya_opt.core.fused`; off CUDA (CPU, Metal) every op takes its plain-MLX fallback, the
reference's own ops in the same order, so the pass is bit-identical there. On CUDA the results differ
from the reference by float rounding only (one reduction order, GeGLU rounded once); the report says
which path each op takes on the device it was applied on.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn

from laya_opt.core import fused
from laya_opt.core.model import AttentionFn, AttentionInputs, ModernBertAttention, geglu, global_attention
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked

NAME = "fused_encoder"


@dataclass(frozen=True)
@checked
class FusedEncoderConfig:
    """Settings of fused_encoder.

    Attributes:
        norms: residual add + LayerNorm in one kernel
        rope: Wqkv output to contiguous q, k, v with RoPE applied, in one kernel
        geglu: gelu(u) * g in one kernel
        gemm: the MLP's dense Linears (and attention's when rope is on) through the small-M tensor-core kernel
    """
    norms: bool = True    # residual add + LayerNorm in one kernel
    rope: bool = True     # Wqkv output -> contiguous q, k, v with RoPE, one kernel
    geglu: bool = True    # gelu(u) * g in one kernel
    # dense Linears of the MLP (and of attention when `rope` is on) through the small-M tensor-core kernel
    gemm: bool = False


def _project(use_gemm: bool):
    def project(linear: nn.Module, x: mx.array) -> mx.array:
        if use_gemm and type(linear) is nn.Linear:  # packed (quantized) Linears keep their own kernel
            return fused.linear(x, linear.weight, _bias(linear))
        return linear(x)

    return project


def _bias(module: nn.Module) -> mx.array | None:
    return module["bias"] if "bias" in module else None


def make_kernels(config: FusedEncoderConfig, kernels):
    project = _project(config.gemm)

    def self_attention(attn: ModernBertAttention, x: mx.array, ctx: AttentionInputs, attend: AttentionFn):
        batch, length, _ = x.shape
        q, k, v = fused.qkv_rope(project(attn.Wqkv, x), attn.heads, attn.head_dim, attn.base)
        out = attend(q, k, v, ctx, attn.head_dim ** -0.5)
        return project(attn.Wo, out.transpose(0, 2, 1, 3).reshape(batch, length, -1))

    add_layer_norm = fused.add_layer_norm if config.norms else fused.add_layer_norm_reference
    gated = fused.geglu if config.geglu else geglu

    def add_norm(x: mx.array, update: mx.array, norm: nn.LayerNorm) -> tuple[mx.array, mx.array]:
        return add_layer_norm(x, update, norm.weight, _bias(norm), norm.eps)

    def mlp(block, x: mx.array) -> mx.array:
        return project(block.Wo, gated(project(block.Wi, x)))

    def encoder_stack(encoder, input_ids: mx.array, attention_mask: mx.array, kernels) -> mx.array:
        x = encoder.embeddings(input_ids)
        ctx = kernels.attention_masks(attention_mask, encoder.window, x.dtype)
        layers = encoder.layers
        normed = x  # layer 0 has no attention norm
        for index, layer in enumerate(layers):
            attend = kernels.sliding_attention if layer.sliding else global_attention
            x, mlp_input = add_norm(x, kernels.self_attention(layer.attn, normed, ctx, attend), layer.mlp_norm)
            # The residual add after the MLP fuses with the next LayerNorm: the next attention norm or the last.
            following = layers[index + 1].attn_norm if index + 1 < len(layers) else encoder.final_norm
            x, normed = add_norm(x, mlp(layer.mlp, mlp_input), following)
        return normed

    changes = {"encoder_stack": encoder_stack}
    if config.rope:
        changes["self_attention"] = self_attention
    return dataclasses.replace(kernels, **changes)


def apply(runtime, config: FusedEncoderConfig, data):
    used = {"norms": ("add_layer_norm",), "rope": ("qkv_rope",), "geglu": ("geglu",), "gemm": ("linear",)}
    paths = {op: {"implementation": fused.implementation(op), "reason": fused.fallback_reason(op)}
             for setting, ops in used.items() if getattr(config, setting) for op in ops}
    report = {"device": str(mx.default_device()), "ops": paths,
              "summary": "fused ops: " + ", ".join(f"{op} {info['implementation']}" for op, info in paths.items())}
    return runtime.replace(kernels=make_kernels(config, runtime.kernels)), report


PASS = PassSpec(name=NAME, config_type=FusedEncoderConfig, apply=apply, exact=True,
                description="encoder layers through fused kernels (add+LayerNorm, qkv+RoPE, GeGLU, small-M GEMM)",
                replaces=frozenset({"kernels"}),
                kernels=frozenset({"encoder_stack", "self_attention"}),
                # its qkv+RoPE self-attention takes over the views of qkv_views (same values, one kernel)
                supersedes=frozenset({"qkv_views"}))
