"""Check an exact kernel where its error can be seen: on the inputs the kernel it replaces really receives.

End to end, a precision bug in a half-precision kernel can hide in the noise: on the stand-in, one FP16
unit at a logit near 60 moves saturated answers as far as padding does. At the kernel it cannot hide. The
probe records what the parent runtime's kernels receive in a forward over a few requests, calls the
replaced kernel and its replacement on those same inputs, and reports the largest difference in units of
the candidate dtype's epsilon times the reference value (`kernel_rounding_error`). On the CPU, MLX runs
half-precision attention in float32 and rounds once (`laya_opt.model.sdpa`); a kernel that does the
same differs by at most about one such unit, one that computes in the half dtype by several.

Attention outputs are compared on the rows of real tokens only: padded query rows are never read.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.model import AttentionInputs, Kernels
from laya_opt.runtime import Runtime, eager_forward

from .checker import EvalRequest, longest_requests

PROBE_REQUESTS = 2          # the gating suite's longest requests (checker.longest_requests)
EPSILON = {mx.float32: 2.0 ** -23, mx.float16: 2.0 ** -10, mx.bfloat16: 2.0 ** -7}
NEAR_ZERO = 1 / 20          # values below max |reference| / 20 are judged against that, not against themselves


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


def _rows_read(args: tuple, out: mx.array) -> np.ndarray:
    ctx = next((arg for arg in args if isinstance(arg, AttentionInputs)), None)
    if ctx is None:
        return np.ones(out.shape, dtype=bool)
    return np.broadcast_to(np.array(ctx.valid)[:, None, :, None], out.shape)  # [B, H, L, hd]


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
    """The largest error of the child's replaced kernels vs the parent's, in rounding units; None if none changed."""
    fields = [name for name in kernel_fields(parent.kernels)
              if getattr(child.kernels, name) is not getattr(parent.kernels, name)]
    if not fields or child.model is not parent.model or not requests:
        return None
    worst = 0.0
    for name, calls in recorded_inputs(parent, longest_requests(parent, requests, PROBE_REQUESTS), fields).items():
        replaced, replacement = getattr(parent.kernels, name), getattr(child.kernels, name)
        for args in calls:
            reference = replaced(*args)
            worst = max(worst, rounding_error(replacement(*args), reference, _rows_read(args, reference)))
    return worst
