"""Whole-forward `mx.compile` with padded lengths rounded up to shape buckets (spec §12.3, §13.18).

The runtime's forward becomes a `BucketedForward`: each batch is padded (right, PAD id, mask false) to
the smallest bucket >= its length, and one compiled function per (B, padded L, K) runs the model with
the runtime's kernels. The runtime's own batches are collated at the padded shape in numpy
(`padded_shape`), so a steady call adds no padding ops to the device graph. Compilation is per shape:
`shapeless=True` would break the model, whose graph reads shapes into Python (reshapes, `arange`
masks, marker gathers). Longer batches than every bucket
run compiled at their exact length and are counted as fallbacks. The compiled graph captures the
model's arrays and the kernels, so the forward refuses any other model or kernels object: a
parameter-changing pass after compile must be followed by a fresh compile (`captures` orders it).

Buckets are given, planned from a suite or workload length histogram under a padding-waste budget,
or multiples of `multiple` up to `max_len`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.batching import Batch, bucket_for, multiple_buckets, pad_batch, pad_rows, pad_slots
from laya_opt.core.model import Kernels, LayaModel
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked
from laya_opt.core.runtime import eager_forward

NAME = "compile_buckets"


@dataclass(frozen=True)
@checked
class CompileBucketsConfig:
    """Settings of compile_buckets.

    Attributes:
        buckets: explicit padded lengths, strictly increasing; empty: planned from plan_from, or multiples
        batch_buckets: row counts a batch is padded up to (fewer shapes to compile); empty: the exact row count
        slot_buckets: option-slot counts a batch is padded up to; empty: the exact option count
        multiple: with neither buckets nor plan_from, the buckets are the multiples of this up to max_len
        plan_from: a suite or workload name whose length histogram plans the buckets; none: no planning
        max_padding_waste: planning budget, padded tokens over real tokens, in [0, 1)
        max_buckets: planning cap on the number of buckets
    """
    buckets: tuple[int, ...] = ()       # explicit padded lengths, increasing; empty: planned or multiples
    # Row and option-slot counts to pad up to (fewer shapes to compile); empty: the exact B and K.
    batch_buckets: tuple[int, ...] = ()
    slot_buckets: tuple[int, ...] = ()
    multiple: int = field(default=16, metadata={"min": 1})  # neither buckets nor plan_from: multiples up to max_len
    plan_from: str = field(default="none", metadata={"nonempty": True})  # a suite or workload name (data need)
    max_padding_waste: float = field(default=0.10, metadata={"min": 0.0})  # planning budget: padding / tokens
    max_buckets: int = field(default=8, metadata={"min": 1})  # planning cap on the number of buckets

    def __post_init__(self):
        for name in ("buckets", "batch_buckets", "slot_buckets"):
            values = getattr(self, name)
            if any(b < 1 for b in values) or any(a >= b for a, b in zip(values, values[1:])):
                raise ValueError(f"{name} must be strictly increasing positive integers, got {list(values)!r}")
        if self.buckets and self.plan_from != "none":
            raise ValueError(f"give either buckets or plan_from, not both (plan_from={self.plan_from!r})")
        if not self.max_padding_waste < 1.0:
            raise ValueError(f"max_padding_waste must be a number in [0, 1), got {self.max_padding_waste!r}")


# ----------------------------------------------------------------------------- bucket planning


@dataclass(frozen=True)
class BucketPlan:
    buckets: tuple[int, ...]
    waste: float        # bucket padding tokens / bucketed tokens over the histogram
    within_budget: bool


def _check_histogram(histogram: Mapping[int, int]) -> None:
    if not histogram:
        raise ValueError("plan_buckets needs a non-empty length histogram")
    for length, rows in histogram.items():
        if isinstance(length, bool) or not isinstance(length, int) or length < 1 or \
                isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ValueError(f"length histogram entries must be positive integers, got {length!r}: {rows!r}")


def plan_buckets(histogram: Mapping[int, int], max_padding_waste: float, max_buckets: int) -> BucketPlan:
    """Fewest buckets whose rounding waste stays within budget (at most `max_buckets`; else the least waste).

    `histogram` maps a batch length to the rows evaluated at it. The optimal buckets are a subset of the
    lengths that includes the longest; dynamic programming over k buckets minimises padded tokens.
    """
    _check_histogram(histogram)
    # float64 holds token counts exactly (< 2**53) and lets impossible groupings be +inf.
    lengths = np.array(sorted(histogram), dtype=np.float64)
    rows = np.array([histogram[int(length)] for length in lengths], dtype=np.float64)
    count = len(lengths)
    real = float(np.sum(lengths * rows))
    prefix = np.concatenate([[0.0], np.cumsum(rows)])
    # cost[i, j]: rows i..j padded to lengths[j]; inf below the diagonal.
    cost = np.where(np.arange(count)[:, None] <= np.arange(count)[None, :],
                    lengths[None, :] * (prefix[None, 1:] - prefix[:-1, None]), np.inf)
    budget = max_padding_waste + 1e-12  # float slack: a plan exactly at the budget is within it
    best, choices = cost[0], []  # best[j]: fewest padded tokens covering lengths 0..j, last bucket lengths[j]
    waste = float(1.0 - real / best[-1])
    for _ in range(1, min(max_buckets, count)):
        if waste <= budget:
            break
        # One more bucket: previous buckets cover 0..i-1, the new one i..j (i >= 1).
        total = best[:-1, None] + cost[1:, :]
        choices.append(np.argmin(total, axis=0) + 1)
        best = np.min(total, axis=0)
        waste = float(1.0 - real / best[-1])
    edges, end = [int(lengths[-1])], count - 1
    for chosen in reversed(choices):
        end = int(chosen[end]) - 1
        edges.append(int(lengths[end]))
    return BucketPlan(tuple(sorted(edges)), waste, waste <= budget)


def length_histogram(runtime, requests: Sequence[tuple[Any, Mapping]]) -> dict[int, int]:
    """Batch length -> rows, over the batches the runtime's own planner forms for (state, questions) requests."""
    histogram: dict[int, int] = {}
    for state, questions in requests:
        prepared = runtime.prepare(state, questions)
        for group in runtime.plan(prepared) if prepared else ():
            length = max(prepared[index].length for index in group)
            histogram[length] = histogram.get(length, 0) + len(group)
    return histogram


# ----------------------------------------------------------------------------- the compiled forward


def new_stats() -> dict:
    """Counters the forward updates in place (plain, JSON-ready data, filed under the pass's report)."""
    return {"calls": 0, "compiles": 0, "recompiles": 0, "fallbacks": 0, "shape_changes": 0,
            "evaluated_tokens": 0, "real_tokens": 0, "bucket_padding_tokens": 0,
            "padding_waste": 0.0, "bucket_waste": 0.0, "last_shape": None, "shapes": {}}


def _compile_model(model: LayaModel, kernels: Kernels) -> Callable:
    def forward_arrays(input_ids, attention_mask, marker_pos, marker_mask, qtype):
        return model(input_ids, attention_mask, marker_pos, marker_mask, qtype, kernels=kernels)

    return mx.compile(forward_arrays)


def _bucketed(size: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket >= size; size itself when there are no buckets or all are shorter."""
    return (bucket_for(size, buckets) or size) if buckets else size


@dataclass(frozen=True, eq=False)  # identity equality: comparing field-wise would compare whole models
class BucketedForward:
    """A `Runtime.forward` bound to one model and kernels object; compiled functions are cached per shape."""

    model: LayaModel
    kernels: Kernels
    buckets: tuple[int, ...]
    pad_id: int
    batch_buckets: tuple[int, ...] = ()
    slot_buckets: tuple[int, ...] = ()
    stats: dict = field(default_factory=new_stats)
    # Mutable on purpose: the cache fills as new (B, L, K) shapes arrive.
    compiled: dict = field(default_factory=dict, repr=False)

    @property
    def description(self) -> str:
        return f"compiled, buckets={list(self.buckets)}"

    def check_bound(self, model: LayaModel, kernels: Kernels) -> None:
        if model is not self.model:
            raise RuntimeError("compile_buckets: the compiled forward was built for another model object; "
                               "compile must be re-applied after parameter-changing passes")
        if kernels != self.kernels:
            raise RuntimeError("compile_buckets: the compiled forward was built for other kernels; "
                               "compile must be re-applied after kernel-changing passes")

    def padded_shape(self, batch_size: int, length: int, slots: int) -> tuple[int, int, int]:
        """(rows, length, slots) a batch of this content runs at; `Runtime.collate` builds batches at it."""
        return (_bucketed(batch_size, self.batch_buckets), _bucketed(length, self.buckets),
                _bucketed(slots, self.slot_buckets))

    def __call__(self, model: LayaModel, kernels: Kernels, batch: Batch) -> tuple[mx.array, mx.array]:
        self.check_bound(model, kernels)
        batch_size, length, slots = batch.content_shape
        stats = self.stats
        rows, padded, width = self.padded_shape(batch_size, length, slots)
        stats["fallbacks"] += int(bucket_for(length, self.buckets) is None)
        # no-ops for a batch `Runtime.collate` built at this shape; other callers' batches are padded here
        padded_batch = pad_slots(pad_rows(pad_batch(batch, padded, self.pad_id), rows, self.pad_id), width)
        key = f"{rows}x{padded}x{width}"
        compiled = self.compiled.get(key)
        first = compiled is None
        if first:
            compiled = self.compiled[key] = _compile_model(self.model, self.kernels)
        started = time.perf_counter()
        logits, action = compiled(padded_batch.input_ids, padded_batch.attention_mask, padded_batch.marker_pos,
                                  padded_batch.marker_mask, padded_batch.qtype)
        if first:  # a shape's first call runs synchronously, so its time includes compiling the kernels
            mx.eval(logits, action)
        elapsed = time.perf_counter() - started  # steady calls: host time to dispatch the compiled graph
        real = batch.real_tokens if batch.real_tokens is not None else int(batch.attention_mask.sum().item())
        self._record(key, first, elapsed, rows, length, padded, real, batch_size)
        if (rows, width) == (batch_size, slots):
            return logits, action
        return logits[:batch_size, :slots], action[:batch_size]

    def _record(self, key: str, first: bool, elapsed: float, batch_size: int, length: int, padded: int,
                real: int, real_rows: int) -> None:
        stats = self.stats
        if first:
            stats["recompiles"] += int(stats["compiles"] > 0)
            stats["compiles"] += 1
            stats["shapes"][key] = {"first_call_s": elapsed, "calls": 0, "steady_s": 0.0}
        else:
            stats["shapes"][key]["steady_s"] += elapsed
        stats["shapes"][key]["calls"] += 1
        stats["shape_changes"] += int(stats["last_shape"] not in (None, key))
        stats["last_shape"] = key
        stats["calls"] += 1
        stats["evaluated_tokens"] += batch_size * padded
        stats["real_tokens"] += real
        stats["bucket_padding_tokens"] += batch_size * padded - real_rows * length
        stats["padding_waste"] = 1.0 - stats["real_tokens"] / stats["evaluated_tokens"]
        stats["bucket_waste"] = stats["bucket_padding_tokens"] / stats["evaluated_tokens"]


# ----------------------------------------------------------------------------- the pass


def _choose_buckets(runtime, config: CompileBucketsConfig, data) -> tuple[tuple[int, ...], dict]:
    max_len = runtime.agent_config.max_len
    if config.buckets:
        too_long = [bucket for bucket in config.buckets if bucket > max_len]
        if too_long:
            raise ValueError(f"{NAME}.buckets: {too_long} exceed max_len {max_len}")
        return config.buckets, {"source": "given"}
    if config.plan_from != "none":
        histogram = length_histogram(runtime, data["plan_from"])
        if not histogram:
            raise ValueError(f"{NAME}.plan_from: {config.plan_from!r} holds no questions to plan buckets from")
        plan = plan_buckets(histogram, config.max_padding_waste, config.max_buckets)
        return plan.buckets, {"source": f"planned from {config.plan_from}", "planned_waste": plan.waste,
                              "within_budget": plan.within_budget, "histogram_rows": sum(histogram.values())}
    return multiple_buckets(config.multiple, max_len), {"source": f"multiples of {config.multiple}"}


def apply(runtime, config: CompileBucketsConfig, data):
    if runtime.forward is not eager_forward and not isinstance(runtime.forward, BucketedForward):
        raise ValueError(f"{NAME}: the runtime's forward is already replaced "
                         f"({getattr(runtime.forward, 'description', runtime.forward)!r}); compile wraps the model "
                         "call itself and would drop it")
    buckets, facts = _choose_buckets(runtime, config, data)
    forward = BucketedForward(model=runtime.model, kernels=runtime.kernels, buckets=buckets,
                              batch_buckets=config.batch_buckets, slot_buckets=config.slot_buckets,
                              pad_id=runtime.codec.pad_id)
    return runtime.replace(forward=forward), {"buckets": list(buckets), **facts, "stats": forward.stats}


PASS = PassSpec(name=NAME, config_type=CompileBucketsConfig, apply=apply, exact=True,
                description="mx.compile of the whole forward per (B, bucketed L, K) shape",
                replaces=frozenset({"forward"}), captures=frozenset({"model", "kernels"}),
                needs={"plan_from": "requests"})
