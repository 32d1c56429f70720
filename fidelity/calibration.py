"""Measure what a checkpoint's outputs do without any real change: same-dtype noise and cast drift.

`laya-opt calibrate-gates` calls `measure` and hands the result to `fidelity.gate_derivation`, which
turns it into a gates file. Every same-dtype variant computes exactly the same function as the base
runtime (batch 16, insertion order, eager): only matmul shapes, batch composition or padding differ,
which is all an exact pass may change. Token identity is checked on every variant.

The cast drift is always measured on every request (the decision gates rest on it: near ties, flips,
percentiles). The six same-dtype noise variants may run on a seeded sample (`noise_sample`, the re-run
sample of `fidelity.rerun`): they bound rounding noise, which a few hundred questions already show, and on a
CPU they are where the hours of a half-precision calibration go (six evaluations per dtype).
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.batching import Batch, bucket_for, insertion_order_planner, multiple_buckets, pad_batch
from laya_opt.passes.contract import apply_pass
from laya_opt.passes.registry import get_pass
from laya_opt.core.runtime import Forward, Runtime

from laya_opt.fidelity.checker import EvalRequest, Outputs, evaluate
from laya_opt.fidelity.decisions import reference_near_tie
from laya_opt.fidelity.gate_derivation import CALIBRATED_METRICS, NOISE_SOURCES
from laya_opt.fidelity.metrics import PERCENTILE_METRICS, compare
from laya_opt.fidelity.rerun import check_rerun, sample_indices

PADDING_MULTIPLE = 16                         # the shipped experiments' compile bucket multiple
SORTED_BATCHING = {"max_questions": 16, "token_budget": 4096}   # as in the shipped experiments
HALF_DTYPES = ("float16", "bfloat16")
# The maxima bound exact passes; the percentiles and near-tie flips of the casts set the approximate allowance.
RECORDED = CALIBRATED_METRICS + ("argmax_flips", "decisive_flips", "near_tie_flips") + PERCENTILE_METRICS


def row_split_forward(forward: Forward) -> Forward:
    """Each batch run one row at a time at the batch's padded length: other matmul shapes, same padding."""
    def run_rows(model, kernels, batch: Batch):
        rows = [forward(model, kernels, Batch(batch.input_ids[i:i + 1], batch.attention_mask[i:i + 1],
                                              batch.marker_pos[i:i + 1], batch.marker_mask[i:i + 1],
                                              batch.qtype[i:i + 1])) for i in range(batch.input_ids.shape[0])]
        return mx.concatenate([row[0] for row in rows]), mx.concatenate([row[1] for row in rows])

    run_rows.description = "row split"
    return run_rows


def padded_forward(forward: Forward, multiple: int, pad_id: int, max_len: int) -> Forward:
    """Each batch padded to the next multiple of `multiple` tokens (at most max_len), as compile buckets do."""
    buckets = multiple_buckets(multiple, max_len)

    def run_padded(model, kernels, batch: Batch):
        length = batch.input_ids.shape[1]
        return forward(model, kernels, pad_batch(batch, bucket_for(length, buckets) or length, pad_id))

    run_padded.description = f"padded to a multiple of {multiple}"
    return run_padded


def noise_variants(runtime: Runtime) -> dict[str, Runtime]:
    """One runtime per noise source (gate_derivation.NOISE_SOURCES), each with an identity of its own."""
    sorted_spec = get_pass("length_sorted_batching")
    variants = {
        "run_to_run": runtime,
        "row_split": runtime.replace(forward=row_split_forward(runtime.forward)),
        "batch_1": runtime.replace(planner=insertion_order_planner(1)),
        "batch_4": runtime.replace(planner=insertion_order_planner(4)),
        "length_sorted": apply_pass(sorted_spec, runtime, sorted_spec.make_config(SORTED_BATCHING)),
        "padded_16": runtime.replace(forward=padded_forward(runtime.forward, PADDING_MULTIPLE, runtime.codec.pad_id,
                                                            runtime.agent_config.max_len)),
    }
    return {name: variant.replace(identity=f"{runtime.identity}+noise:{name}") for name, variant in variants.items()}


def _recorded(metrics: Mapping[str, float]) -> dict[str, float]:
    return {name: float(metrics[name]) for name in RECORDED}


def same_dtype_noise(runtime: Runtime, base: Outputs, requests: Sequence[EvalRequest],
                     say: Callable[[str], None]) -> dict[str, dict[str, float]]:
    variants = noise_variants(runtime)
    if tuple(variants) != NOISE_SOURCES:
        raise RuntimeError(f"noise variants {tuple(variants)} do not match the derivation's {NOISE_SOURCES}")
    noise = {}
    for name, variant in variants.items():
        say(f"{runtime.identity}: noise source {name}")
        metrics = compare(base, evaluate(variant, requests)).metrics
        if metrics["token_identity"] != 1.0:
            raise RuntimeError(f"noise source {name} changed the model inputs: it is not a same-function variant")
        noise[name] = _recorded(metrics)
    return noise


def max_abs_logit(outputs: Outputs) -> float:
    return max(float(np.max(np.abs(question.logits))) for question in outputs.questions)


def measure(reference: Runtime, requests: Sequence[EvalRequest], dtypes: Sequence[str] = ("float32",) + HALF_DTYPES,
            say: Callable[[str], None] = lambda message: None, noise_sample: int = 0,
            outputs_of: Callable[[Runtime], Outputs] | None = None) -> dict:
    """Noise per dtype and source, drift per half dtype, the largest |logit|, and how long each dtype took.

    `noise_sample` > 0: the noise variants run on that many requests (a seeded sample; 0: all of them).
    `outputs_of(runtime)`: the reference's and each cast's outputs on every request (default: evaluated here;
    calibrate-gates passes one that reads and fills the caches the runs after it read)."""
    outputs_of = outputs_of or (lambda runtime: evaluate(runtime, requests))
    check_rerun(noise_sample)
    if reference.dtype != mx.float32:
        raise ValueError(f"calibration needs a float32 reference runtime, got {reference.identity}")
    if "float32" not in dtypes:
        raise ValueError("calibration needs float32 among the dtypes (it bounds every exact float32 pass)")
    cast = get_pass("cast_dtype")
    say(f"{reference.identity}: reference")
    reference_outputs = outputs_of(reference)
    sampled = [requests[index] for index in sample_indices(len(requests), noise_sample)] \
        if noise_sample else list(requests)
    measured: dict = {"questions": len(reference_outputs.questions),
                      "near_ties": sum(reference_near_tie(question) for question in reference_outputs.questions),
                      "max_abs_logit": max_abs_logit(reference_outputs),
                      "requests": len(requests), "noise_requests": len(sampled), "noise": {}, "drift": {},
                      "seconds": {}}
    for dtype in dtypes:
        started = time.perf_counter()
        if dtype == "float32":
            runtime, base = reference, reference_outputs
        else:
            runtime = apply_pass(cast, reference, cast.make_config({"dtype": dtype}))
            say(f"{runtime.identity}: cast drift")
            base = outputs_of(runtime)
            measured["drift"][dtype] = _recorded(compare(reference_outputs, base).metrics)
        if len(sampled) < len(requests):   # the variants' base: the same runtime on the same sample
            base = evaluate(runtime, sampled)
        measured["noise"][dtype] = same_dtype_noise(runtime, base, sampled, say)
        measured["seconds"][dtype] = round(time.perf_counter() - started, 1)
    return measured


def noise_table(measured: Mapping) -> dict:
    """The measurements as a generic table: one row per dtype and source (drift rows for the casts)."""
    def cells(values: Mapping) -> list[str]:  # measurements recorded before a metric was have none of it
        return [f"{values[m]:.3g}" if m in values else "—" for m in RECORDED]

    rows = []
    for dtype, sources in measured["noise"].items():
        if dtype in measured["drift"]:
            rows.append([dtype, "cast drift vs float32", *cells(measured["drift"][dtype])])
        rows += [[dtype, source, *cells(values)] for source, values in sources.items()]
    return {"title": f"measured noise and drift ({measured['questions']} questions, max |logit| "
                     f"{measured['max_abs_logit']:.3g})", "columns": ["dtype", "source", *RECORDED], "rows": rows}
