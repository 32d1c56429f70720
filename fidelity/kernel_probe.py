"""Check an exact kernel where its error can be seen: on the inputs the kernel it replaces really receives.

End to end, a precision bug in a half-precision kernel can hide in the noise: on the stand-in, one FP16
unit at a logit near 60 moves saturated answers as far as padding does. At the kernel it cannot hide. The
probe records what the parent runtime's kernels receive in a forward over a few requests, calls the
replaced kernel and its replacement on those same inputs, and reports the largest difference in units of
the candidate dtype's epsilon times the reference value (`kernel_rounding_error`). On the CPU, MLX runs
half-precision attention in float32 and rounds once (`laya_opt.core.model.sdpa`); a kernel that does the
same differs by at most about one such unit, one that computes in the half dtype by several.

Outputs are compared on the rows of real tokens only (attention [B, H, L, hd], layer and stack outputs
[B, L, D]): padded rows are never read. Kernels that return masks are judged through those that read them.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.checkpoint import DTYPES
from laya_opt.core.model import AttentionInputs, Kernels
from laya_opt.core.runtime import Runtime, eager_forward

from laya_opt.fidelity import gate_derivation
from laya_opt.fidelity.checker import EvalRequest, longest_requests

PROBE_REQUESTS = 2          # the gating suite's longest requests (checker.longest_requests)
EPSILON = {DTYPES[name]: value for name, value in gate_derivation.EPSILON.items()}
NEAR_ZERO = 1 / 20          # values below max |reference| / 20 are judged against that, not against themselves
# The whole encoder stack is 28 layers of kernels: a replacement that rounds once where the reference
# rounds twice (a fused GeGLU) differs by one rounding per layer, amplified through the layers after it,
# which no one-rounding bound describes. Its replacements are judged end to end by the output gates.
COMPOSITE_KERNELS = frozenset({"encoder_stack"})
# Kernels that chain several rounded steps (norms, GEMMs, attention, MLP) are allowed a rounding per
# step they may round differently at: on a GPU a GEMM's accumulation order depends on its row count, and
# the pruned head (fewer rows) differed from the full one by 2.66 and 2.74 units on an H200
# (benchmarks/results/2026-12-01-h200-lease2). Their error is divided by this before the gate sees it.
ROUNDING_STEPS = {"final_head_layer": 2, "self_attention": 2}


def kernel_fields(kernels: Kernels) -> list[str]:
    return [spec.name for spec in dataclasses.fields(kernels)
            if callable(getattr(kernels, spec.name)) and not isinstance(getattr(kernels, spec.name), mx.Dtype)]


def recorded_inputs(runtime: Runtime, requests: Sequence[EvalRequest], fields: Sequence[str]
                    ) -> dict[str, list[tuple]]:
    """The arguments each named kernel of the runtime receives in an eager forward over the requests."""
    calls: dict[str, list[tuple]] = {name: [] for name in fields}

    def recorder(name: str, function: Callable) -> Callable:
        def record(*args):
            calls[name].append(args)
            return function(*args)

        return record

    kernels = dataclasses.replace(runtime.kernels, **{name: recorder(name, getattr(runtime.kernels, name))
                                                      for name in fields})
    recording = runtime.replace(kernels=kernels, forward=eager_forward)
    for request in requests:
        prepared = recording.prepare(request.state, request.questions)
        if prepared:
            recording.execute(prepared)
    return calls


def _valid_tokens(args: tuple, out: mx.array) -> mx.array | None:
    """The [B, L] real-token mask of a kernel's call: from its AttentionInputs, else its boolean mask argument."""
    ctx = next((arg for arg in args if isinstance(arg, AttentionInputs)), None)
    if ctx is not None:
        return ctx.valid
    return next((arg for arg in args if isinstance(arg, mx.array) and arg.dtype == mx.bool_ and arg.ndim == 2
                 and out.ndim >= 2 and tuple(arg.shape) == tuple(out.shape[:2])), None)


def _rows_read(args: tuple, out: mx.array) -> np.ndarray:
    valid = _valid_tokens(args, out)
    if valid is None:
        return np.ones(out.shape, dtype=bool)
    valid = np.array(valid)
    if out.ndim == 4:  # attention: [B, H, L, hd]
        return np.broadcast_to(valid[:, None, :, None], out.shape)
    return np.broadcast_to(valid.reshape(valid.shape + (1,) * (out.ndim - 2)), out.shape)  # [B, L, ...]


def rounding_error(candidate: mx.array, reference: mx.array, rows: np.ndarray) -> float:
    """max |candidate - reference| / (epsilon x max(|reference|, max |reference| / 20)) over the rows read."""
    epsilon = EPSILON.get(reference.dtype, EPSILON[mx.float32])
    a, b = (np.array(x.astype(mx.float32), dtype=np.float64)[rows] for x in (candidate, reference))
    if b.size == 0:
        return 0.0
    scale = np.maximum(np.abs(b), NEAR_ZERO * float(np.max(np.abs(b))))
    scale[scale == 0] = 1.0
    return float(np.max(np.abs(a - b) / (epsilon * scale)))


def kernel_rounding_error(parent: Runtime, child: Runtime, requests: Sequence[EvalRequest]) -> float | None:
    """The largest error of the child's replaced kernels vs the parent's, in rounding units per rounding step
    (`ROUNDING_STEPS`, 1 for a single-step kernel); None if none changed (or the model did: nothing comparable).
    0.0 when only kernels judged elsewhere changed (COMPOSITE_KERNELS, masks): the gate on this metric must not
    fail such a pass by omission."""
    changed = [name for name in kernel_fields(parent.kernels)
               if getattr(child.kernels, name) is not getattr(parent.kernels, name)]
    if not changed or child.model is not parent.model or not requests:
        return None
    fields = [name for name in changed if name not in COMPOSITE_KERNELS]
    if not fields:
        return 0.0
    worst = 0.0
    for name, calls in recorded_inputs(parent, longest_requests(parent, requests, PROBE_REQUESTS), fields).items():
        replaced, replacement = getattr(parent.kernels, name), getattr(child.kernels, name)
        for args in calls:
            reference = replaced(*args)
            if not isinstance(reference, mx.array):  # masks: judged through the kernels that read them
                continue
            error = rounding_error(replacement(*args), reference, _rows_read(args, reference))
            worst = max(worst, error / ROUNDING_STEPS.get(name, 1))
    return worst
