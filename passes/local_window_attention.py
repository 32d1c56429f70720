"""Exact banded attention for the sliding layers (spec §12.7).

Queries are cut into blocks of `block_size`; each block attends with the fused SDPA kernel to its own
key slice [start - w, end + w) instead of the whole sequence, under a small exact mask (|i - j| <= w,
valid keys). All blocks run in one SDPA call: the blocks are folded into the batch axis and the key
slices are gathered from K/V padded by w on both sides, so every slice has the same width b + 2w.
RoPE is already applied by the caller at absolute positions, so slicing K/V changes nothing.
Global layers and head layers keep their dense path; only `Kernels.sliding_attention` is replaced.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import mlx.core as mx

from laya_opt.core.model import AttentionFn, AttentionInputs, dense_sliding_attention, sdpa
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked

NAME = "local_window_attention"


@dataclass(frozen=True)
@checked
class LocalWindowAttentionConfig:
    """Settings of local_window_attention.

    Attributes:
        block_size: queries per block; a block reads block_size + 2 x window keys
        min_length: sequences shorter than this keep the dense band mask (the banded path can lose when short)
    """
    block_size: int = field(default=64, metadata={"min": 1})  # queries per block; a block reads block_size + 2w keys
    # sequences shorter than this keep the dense band mask (banded can lose when short)
    min_length: int = field(default=0, metadata={"min": 0})


# ----------------------------------------------------------------------------- the kernel


def block_masks(valid: mx.array, window: int, block_size: int, blocks: int) -> tuple[mx.array, mx.array]:
    """Per block: key positions in padded coordinates [blocks, b + 2w] and the mask [B * blocks, 1, b, b + 2w].

    Padded coordinates shift every key by w, so block n's slice starts at n * b and query offset i sees key
    offset j iff 0 <= j - i <= 2w: the same band for every block.
    """
    batch, length = valid.shape
    span = block_size + 2 * window
    padded_keys = blocks * block_size + 2 * window
    key_index = mx.arange(blocks)[:, None] * block_size + mx.arange(span)[None, :]
    key_valid = mx.concatenate([mx.zeros((batch, window), dtype=mx.bool_), valid,
                                mx.zeros((batch, padded_keys - window - length), dtype=mx.bool_)], axis=1)
    key_valid = mx.take(key_valid, key_index.reshape(-1), axis=1).reshape(batch, blocks, 1, span)
    query_valid = mx.concatenate([valid, mx.zeros((batch, blocks * block_size - length), dtype=mx.bool_)], axis=1)
    query_valid = query_valid.reshape(batch, blocks, block_size, 1)
    offset = mx.arange(span)[None, :] - mx.arange(block_size)[:, None]
    band = (offset >= 0) & (offset <= 2 * window)
    # Padded queries see every valid key of their slice (as the dense mask gives them every valid key).
    allowed = key_valid & (band | ~query_valid)
    # A padded query whose slice holds no valid key attends to slice key 0 so that it stays finite.
    empty = ~allowed.any(axis=-1, keepdims=True)
    allowed = allowed | (empty & (mx.arange(span) == 0))
    return key_index, allowed.reshape(batch * blocks, 1, block_size, span)


def _fold_blocks(x: mx.array, blocks: int, block_size: int) -> mx.array:
    """[B, H, blocks * b, hd] -> [B * blocks, H, b, hd]."""
    batch, heads, _, head_dim = x.shape
    x = x.reshape(batch, heads, blocks, block_size, head_dim).transpose(0, 2, 1, 3, 4)
    return x.reshape(batch * blocks, heads, block_size, head_dim)


def banded_attention(q: mx.array, k: mx.array, v: mx.array, valid: mx.array, window: int,
                     block_size: int, scale: float) -> mx.array:
    """Sliding attention over query blocks and their key slices; rows of valid queries equal the dense band."""
    batch, heads, length, head_dim = q.shape
    blocks = -(-length // block_size)
    key_index, mask = block_masks(valid, window, block_size, blocks)
    span = key_index.shape[1]
    tail = blocks * block_size + window - length
    key_pad = (0, 0), (0, 0), (window, tail), (0, 0)

    def slices(x: mx.array) -> mx.array:
        x = mx.take(mx.pad(x, key_pad), key_index.reshape(-1), axis=2)
        x = x.reshape(batch, heads, blocks, span, head_dim).transpose(0, 2, 1, 3, 4)
        return x.reshape(batch * blocks, heads, span, head_dim)

    queries = mx.pad(q, ((0, 0), (0, 0), (0, blocks * block_size - length), (0, 0)))
    out = sdpa(_fold_blocks(queries, blocks, block_size), slices(k), slices(v), scale=scale, mask=mask)
    out = out.reshape(batch, blocks, heads, block_size, head_dim).transpose(0, 2, 1, 3, 4)
    return out.reshape(batch, heads, blocks * block_size, head_dim)[:, :, :length]


def make_local_window_attention(config: LocalWindowAttentionConfig) -> AttentionFn:
    """A `Kernels.sliding_attention` that uses the banded kernel from `min_length` tokens on."""

    def local_window_attention(q: mx.array, k: mx.array, v: mx.array, ctx: AttentionInputs,
                               scale: float) -> mx.array:
        if q.shape[2] < config.min_length:
            return dense_sliding_attention(q, k, v, ctx, scale)
        return banded_attention(q, k, v, ctx.valid, ctx.window, config.block_size, scale)

    local_window_attention.description = (f"banded sliding attention, block_size={config.block_size}, "
                                           f"min_length={config.min_length}")
    return local_window_attention


# ----------------------------------------------------------------------------- report


def attention_pairs(length: int, window: int, block_size: int, min_length: int = 0) -> dict:
    """Query-key pairs of one sliding layer and row: dense L², valid band pairs, pairs the kernel computes."""
    if length < 1 or window < 0 or block_size < 1:
        raise ValueError(f"attention_pairs needs length >= 1, window >= 0, block_size >= 1; "
                         f"got {length}, {window}, {block_size}")
    dense = length * length
    # §12.7: L(2r+1) - r(r+1) once L > r; below that every row sees the whole sequence.
    valid = length * (2 * window + 1) - window * (window + 1) if length > window else dense
    banded = length >= min_length
    computed = -(-length // block_size) * block_size * (block_size + 2 * window) if banded else dense
    return {"length": length, "dense_pairs": dense, "valid_pairs": valid, "computed_pairs": computed,
            "banded": banded, "ideal_reduction": 1.0 - valid / dense, "computed_reduction": 1.0 - computed / dense}


# ----------------------------------------------------------------------------- the pass


def apply(runtime, config: LocalWindowAttentionConfig, data):
    encoder = runtime.encoder_config
    sliding_layers = sum(kind == "sliding_attention" for kind in encoder.layer_types)
    kernels = dataclasses.replace(runtime.kernels, sliding_attention=make_local_window_attention(config))
    max_len = runtime.agent_config.max_len
    report = {"block_size": config.block_size, "min_length": config.min_length, "window": encoder.window,
              "sliding_layers": sliding_layers, "at_max_len": attention_pairs(max_len, encoder.window,
                                                                             config.block_size, config.min_length)}
    return runtime.replace(kernels=kernels), report


PASS = PassSpec(name=NAME, config_type=LocalWindowAttentionConfig, apply=apply, exact=True,
                description="sliding layers attend per query block to their key slice only (banded, exact)",
                replaces=frozenset({"kernels"}), kernels=frozenset({"sliding_attention"}))
