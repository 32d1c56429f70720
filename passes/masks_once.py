"""Attention masks built once per forward, in additive form and the compute dtype (exact).

MLX's SDPA takes boolean masks by broadcasting them to [B, H, L, L] and converting them with `where`
in every call, and the reference rebuilds the sliding band mask in every sliding layer: per forward
that is two mask conversions per layer (the H200 kernel profile in docs/kernels.md: 60 copies and 30 selects at
short-50 on the H200). This pass builds the key-padding mask [B, 1, 1, L] and the band mask
[B, 1, L, L] once, as 0 / -inf in the activation dtype, which is exactly what SDPA would have made
of the boolean ones, so the attention arithmetic and its result are unchanged.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mlx.core as mx

from laya_opt.core.model import AttentionInputs, key_padding_mask, sliding_mask
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked

NAME = "masks_once"


@dataclass(frozen=True)
@checked
class MasksOnceConfig:
    """masks_once has no settings."""


def additive(allowed: mx.array, dtype: mx.Dtype) -> mx.array:
    """0 where attention is allowed, -inf elsewhere: what SDPA turns a boolean mask into."""
    return mx.where(allowed, mx.array(0.0, dtype=dtype), mx.array(-float("inf"), dtype=dtype))


def additive_masks(valid: mx.array, window: int, dtype: mx.Dtype) -> AttentionInputs:
    return AttentionInputs(valid=valid, key_mask=additive(key_padding_mask(valid), dtype), window=window,
                           sliding_mask=additive(sliding_mask(valid, window), dtype))


def apply(runtime, config: MasksOnceConfig, data):
    kernels = dataclasses.replace(runtime.kernels, attention_masks=additive_masks)
    return runtime.replace(kernels=kernels), {"masks": "key [B,1,1,L] and band [B,1,L,L], additive, built once"}


PASS = PassSpec(name=NAME, config_type=MasksOnceConfig, apply=apply, exact=True,
                description="attention masks built once per forward, additive in the compute dtype",
                replaces=frozenset({"kernels"}), kernels=frozenset({"attention_masks"}))
