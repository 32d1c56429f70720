"""Collation of prepared questions into model arrays, and batch planners (spec §8).

A planner maps the prepared questions of one request to groups of indices; each group becomes one
forward. The runtime always scatters answers back to the caller's order, so a planner may reorder
freely (the length-sorted pass does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.prompt import PreparedQuestion

# A planner returns groups of question indices; every index appears exactly once.
Planner = Callable[[Sequence[PreparedQuestion]], list[tuple[int, ...]]]


@dataclass(frozen=True)
class Batch:
    input_ids: mx.array       # int32 [B, L], right-padded with the PAD id
    attention_mask: mx.array  # bool [B, L]
    marker_pos: mx.array      # int32 [B, K], 0 in unused slots
    marker_mask: mx.array     # bool [B, K]
    qtype: mx.array           # int32 [B]
    real_tokens: int | None = None  # unpadded tokens, known on the host at collation (None: count the mask)
    # (B, L, K) of the questions before any bucket padding (dummy rows, PAD columns, unmarked slots); None:
    # the batch is not bucket-padded and `shape` is its content's
    content: tuple[int, int, int] | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        batch_size, length = self.input_ids.shape
        return batch_size, length, self.marker_pos.shape[1]

    @property
    def content_shape(self) -> tuple[int, int, int]:
        """(B, L, K) of the questions themselves: what a bucketed forward slices its outputs back to."""
        return self.content or self.shape


# padded_shape(rows, length, slots) -> the (rows, length, slots) a forward pads a batch of that content to
PaddedShape = Callable[[int, int, int], tuple[int, int, int]]


def collate(items: Sequence[PreparedQuestion], pad_id: int, padded_shape: PaddedShape | None = None) -> Batch:
    """Right-pad ids with `pad_id`; K = max(2, most markers); padding is never marked as an option.

    With `padded_shape` the batch is built at the shape a bucketed forward would pad it to, with the
    padding `pad_batch`, `pad_rows` and `pad_slots` add (PAD columns, dummy rows with one valid token,
    unmarked slots), here in numpy: the same arrays without one device op per call to build them.
    """
    if not items:
        raise ValueError("collate needs at least one prepared question")
    count = len(items)
    length = max(len(item.ids) for item in items)
    slots = max(2, max(len(item.markers) for item in items))
    rows, width, slot_width = padded_shape(count, length, slots) if padded_shape else (count, length, slots)
    if rows < count or width < length or slot_width < slots:
        raise ValueError(f"padding cannot shrink a batch: {(count, length, slots)} to {(rows, width, slot_width)}")
    ids = np.empty((rows, width), dtype=np.int32)
    ids.fill(pad_id)  # np.full's value, at half its call overhead
    mask = np.zeros((rows, width), dtype=bool)
    marker_pos = np.zeros((rows, slot_width), dtype=np.int32)
    marker_mask = np.zeros((rows, slot_width), dtype=bool)
    qtype = np.zeros(rows, dtype=np.int32)
    for row, item in enumerate(items):
        ids[row, : len(item.ids)] = item.ids
        mask[row, : len(item.ids)] = True
        marker_pos[row, : len(item.markers)] = item.markers
        marker_mask[row, : len(item.markers)] = True
        qtype[row] = item.qtype
    if rows > count:
        mask[count:, 0] = True  # dummy rows (pad_rows): one valid token keeps their attention rows finite
    content = (count, length, slots)
    return Batch(mx.array(ids), mx.array(mask), mx.array(marker_pos), mx.array(marker_mask), mx.array(qtype),
                 real_tokens=sum(item.length for item in items),
                 content=None if content == (rows, width, slot_width) else content)


def _padding(current: int, target: int, refusal: str) -> int:
    """How much padding takes `current` to `target`; padding cannot shrink a batch."""
    if target < current:
        raise ValueError(refusal)
    return target - current


def multiple_buckets(multiple: int, max_len: int) -> tuple[int, ...]:
    """Every multiple of `multiple` below max_len, then max_len itself (the port's m = 16 policy)."""
    return tuple(range(multiple, max_len, multiple)) + (max_len,)


def bucket_for(length: int, buckets: Sequence[int]) -> int | None:
    """Smallest bucket >= length; None when every bucket is shorter."""
    return next((bucket for bucket in buckets if bucket >= length), None)


def pad_batch(batch: Batch, length: int, pad_id: int) -> Batch:
    """Extend a batch to `length` with padding columns (used by shape buckets)."""
    current = batch.input_ids.shape[1]
    extra = _padding(current, length, f"cannot pad a batch of length {current} down to {length}")
    if not extra:
        return batch
    rows = batch.input_ids.shape[0]
    ids = mx.concatenate([batch.input_ids, mx.full((rows, extra), pad_id, dtype=mx.int32)], axis=1)
    mask = mx.concatenate([batch.attention_mask, mx.zeros((rows, extra), dtype=mx.bool_)], axis=1)
    return Batch(ids, mask, batch.marker_pos, batch.marker_mask, batch.qtype, batch.real_tokens, batch.content_shape)


def pad_rows(batch: Batch, rows: int, pad_id: int) -> Batch:
    """Add dummy rows up to `rows` (batch buckets). Each has one valid token, so its attention rows are
    finite, and no option slot; rows are independent, so the real rows' outputs do not change."""
    current, length, slots = batch.shape
    extra = _padding(current, rows, f"cannot pad a batch of {current} rows down to {rows}")
    if not extra:
        return batch
    mask = mx.zeros((extra, length), dtype=mx.bool_)
    mask[:, 0] = True
    return Batch(mx.concatenate([batch.input_ids, mx.full((extra, length), pad_id, dtype=mx.int32)]),
                 mx.concatenate([batch.attention_mask, mask]),
                 mx.concatenate([batch.marker_pos, mx.zeros((extra, slots), dtype=mx.int32)]),
                 mx.concatenate([batch.marker_mask, mx.zeros((extra, slots), dtype=mx.bool_)]),
                 mx.concatenate([batch.qtype, mx.zeros((extra,), dtype=mx.int32)]), batch.real_tokens,
                 batch.content_shape)


def pad_slots(batch: Batch, slots: int) -> Batch:
    """Add unmarked option slots up to `slots` (slot buckets): their logits are -1e4 and change nothing."""
    rows, _, current = batch.shape
    extra = _padding(current, slots, f"cannot pad {current} option slots down to {slots}")
    if not extra:
        return batch
    return Batch(batch.input_ids, batch.attention_mask,
                 mx.concatenate([batch.marker_pos, mx.zeros((rows, extra), dtype=mx.int32)], axis=1),
                 mx.concatenate([batch.marker_mask, mx.zeros((rows, extra), dtype=mx.bool_)], axis=1),
                 batch.qtype, batch.real_tokens, batch.content_shape)


def insertion_order_planner(batch_size: int = 16) -> Planner:
    """Consecutive chunks of `batch_size` in insertion order (the port's policy)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")

    def plan(items: Sequence[PreparedQuestion]) -> list[tuple[int, ...]]:
        return [tuple(range(start, min(start + batch_size, len(items))))
                for start in range(0, len(items), batch_size)]

    plan.description = f"insertion order, batch_size={batch_size}"
    return plan


def check_plan(groups: Sequence[Sequence[int]], count: int) -> None:
    """A plan must cover every question exactly once; a planner bug must not lose answers."""
    seen = sorted(index for group in groups for index in group)
    if seen != list(range(count)) or any(len(group) == 0 for group in groups):
        raise RuntimeError(f"batch planner returned an invalid plan for {count} questions: {groups!r}")
