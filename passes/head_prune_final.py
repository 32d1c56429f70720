"""Final decision-head layer pruned to the rows that are read: [CLS] and the option markers (spec §12.6).

Only row 0 and the marker rows leave the last head layer. This kernel still computes keys and values for
every token, but queries, attention, out_proj, the residual, norm2 and the FFN only for the R = 1 + K
selected rows. Variant "selected_q" keeps the fused in_proj (projects every row, then gathers Q);
"split_projection" projects Q from the selected rows only and K/V from every row with slices of in_proj.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Sequence

import mlx.core as mx
import mlx.nn as nn

from laya_opt.core.config import EncoderConfig
from laya_opt.core.model import FinalLayerFn, HeadLayer
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked

NAME = "head_prune_final"
VARIANTS = ("selected_q", "split_projection")
# Dense FLOPs per removed row in units of D²: out_proj 2 + linear1 8 + linear2 8, plus Q (2) when split.
SAVED_DENSE_PER_ROW = {"selected_q": 18, "split_projection": 20}


@dataclass(frozen=True)
@checked
class HeadPruneFinalConfig:
    """Settings of head_prune_final.

    Attributes:
        variant: selected_q projects every row with the fused in_proj, then keeps the selected queries;
            split_projection projects queries from the selected rows only
    """
    variant: Literal["selected_q", "split_projection"] = "selected_q"


# ----------------------------------------------------------------------------- the kernels


def _gather_rows(x: mx.array, select: mx.array) -> mx.array:
    return mx.take_along_axis(x, select[:, :, None], axis=1)


def _selected_rows(layer: HeadLayer, h: mx.array, key_mask: mx.array, select: mx.array,
                   q: mx.array, k: mx.array, v: mx.array) -> mx.array:
    """Attention for the selected queries, then residual and FFN on those rows only: [B, R, D]."""
    x = _gather_rows(h, select) + layer.self_attn.attend(q, k, v, key_mask)
    return layer.feed_forward(x)


def selected_q_final_layer(layer: HeadLayer, h: mx.array, key_mask: mx.array, select: mx.array) -> mx.array:
    """Fused in_proj over every row; only the selected rows' queries go on."""
    q, k, v = mx.split(layer.self_attn.in_proj(layer.norm1(h)), 3, axis=-1)
    return _selected_rows(layer, h, key_mask, select, _gather_rows(q, select), k, v)


def split_projection_final_layer(layer: HeadLayer, h: mx.array, key_mask: mx.array, select: mx.array) -> mx.array:
    """Q projected from the selected rows only, K/V from every row; in_proj rows are [q | k | v]."""
    in_proj = layer.self_attn.in_proj
    if not isinstance(in_proj, nn.Linear):
        raise TypeError(f"head_prune_final split_projection needs a dense head in_proj, got {type(in_proj).__name__}")
    dims = h.shape[-1]
    normed = layer.norm1(h)
    weight, bias = in_proj.weight, in_proj.bias
    q = mx.addmm(bias[:dims], _gather_rows(normed, select), weight[:dims].T)
    k, v = mx.split(mx.addmm(bias[dims:], normed, weight[dims:].T), 2, axis=-1)
    return _selected_rows(layer, h, key_mask, select, q, k, v)


FINAL_LAYERS: dict[str, FinalLayerFn] = {"selected_q": selected_q_final_layer,
                                         "split_projection": split_projection_final_layer}


# ----------------------------------------------------------------------------- report


def total_flops(encoder: EncoderConfig, head_layers: int, batch: int, length: int) -> int:
    """§12.1 cost model: dense 2·B·L·A_w plus dense attention 4·B·(N+H)·L²·D."""
    d, i, n = encoder.hidden_size, encoder.intermediate_size, encoder.num_hidden_layers
    per_token_weights = n * (4 * d * d + 3 * d * i) + head_layers * 12 * d * d
    return 2 * batch * length * per_token_weights + 4 * batch * (n + head_layers) * length * length * d


def saved_flops(dims: int, batch: int, length: int, rows: int, variant: str) -> int:
    """§12.6: 18 (fused) or 20 (split) ·B·(L−R)·D² dense plus 4·B·L·(L−R)·D attention FLOPs."""
    if variant not in SAVED_DENSE_PER_ROW:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    removed = max(length - rows, 0)
    return SAVED_DENSE_PER_ROW[variant] * batch * removed * dims * dims + 4 * batch * length * removed * dims


def flop_reduction(encoder: EncoderConfig, head_layers: int, shapes: Sequence[tuple[int, int, int]],
                   variant: str) -> dict:
    """Saved FLOPs over evaluated (B, L, K) shapes (R = 1 + K) as a share of the modelled total."""
    for shape in shapes:
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"flop_reduction needs (B, L, K) shapes with positive sizes, got {shape!r}")
    total = sum(total_flops(encoder, head_layers, b, length) for b, length, _ in shapes)
    saved = (sum(saved_flops(encoder.hidden_size, b, length, 1 + k, variant) for b, length, k in shapes)
             if head_layers else 0)
    return {"variant": variant, "shapes": len(shapes), "saved_flops": saved, "total_flops": total,
            "share": saved / total if total else 0.0}


# ----------------------------------------------------------------------------- the pass


def apply(runtime, config: HeadPruneFinalConfig, data):
    model = runtime.model
    head_layers = len(model.head_layers)
    if config.variant == "split_projection" and head_layers:
        in_proj = model.head_layers[-1].self_attn.in_proj
        if not isinstance(in_proj, nn.Linear):
            raise ValueError(f"{NAME}.variant: split_projection needs a dense final head in_proj, "
                             f"got {type(in_proj).__name__}")
    kernels = dataclasses.replace(runtime.kernels, final_head_layer=FINAL_LAYERS[config.variant])
    max_len = runtime.agent_config.max_len
    report = {"variant": config.variant, "head_layers": head_layers, "pruned": head_layers > 0,
              # A reference point: one request of max_len tokens and 4 options (R = 5, as in §12.6's table).
              "at_max_len_r5": flop_reduction(runtime.encoder_config, head_layers, [(1, max_len, 4)], config.variant)}
    return runtime.replace(kernels=kernels), report


PASS = PassSpec(name=NAME, config_type=HeadPruneFinalConfig, apply=apply, exact=True,
                description="last head layer computes queries, out_proj and FFN only for [CLS] and marker rows",
                replaces=frozenset({"kernels"}), kernels=frozenset({"final_head_layer"}))
