"""Which kernel evaluates a quantized Linear: MLX's packed `quantized_matmul`, or the very same quantized values
dequantized into a dense matmul, and the check that the two agree within rounding before the dense one is used.

Why: MLX's packed kernel is slow on the CPU backend (28-50x slower than a dense OpenBLAS GEMM on the
stand-in's shapes), which made the 8-bit experiment take ~19 minutes there. The dense path changes no
weight value. A `DequantizedLinear` *is* a `QuantizedLinear` holding the same packed weight, scales and
biases, so coverage manifests, exports (`checkpoint.save_quantized`) and `isinstance` checks still see a
quantized module; only its call differs: `x @ mx.dequantize(weight, scales, biases).T`. It dequantizes on
every call (one pass over the weight, small next to a GEMM over B x L rows) rather than caching a dense
copy, so a later cast or `update` of the packed parameters can never leave a stale dense weight behind.

What may differ is the order in which the same products are summed. `dense_path_check` measures that on
the inputs each quantized Linear really receives and judges it with the project's kernel-rounding bound
(`ROUNDING_BOUND` units per rounding step, as `fidelity.gates.KERNEL_ROUNDING_BOUND`): an output that is a
sum of K products rounds at most K times (each product's dequantization and each addition), each by at
most one unit of epsilon x sum |x_i w_i|. Measured on the stand-in it is far below that; a wrong scale,
group, bit width or layout is off by the size of the output itself, millions of units in float32.
Embedding lookups (QuantizedEmbedding) read rows and do no matmul: they keep their packed call.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_map_with_path

from laya_opt.core.batching import Batch
from laya_opt.core.runtime import Runtime, clone_model, eager_forward

PACKED = "packed"
DENSE = "dense-dequantized"
EVAL_PATH_SETTINGS = ("auto", "packed", "dense")  # the pass setting; auto: dense on the CPU, packed elsewhere
# One rounding of the dtype per rounding step, 2 leaving room below a power of two: the value of
# fidelity.gates.KERNEL_ROUNDING_BOUND, which core (a lower floor) cannot import.
ROUNDING_BOUND = 2.0
PROBE_ROWS, PROBE_LENGTH, PROBE_SEED = 4, 128, 0
CHECK_ROWS = 64  # token rows per recorded call that the (slow) packed kernel recomputes


class DequantizedLinear(nn.QuantizedLinear):
    """A QuantizedLinear evaluated as a dense matmul of its dequantized weight (same values, dense GEMM)."""

    def dense_weight(self) -> mx.array:
        return mx.dequantize(self["weight"], self["scales"], self.get("biases"), group_size=self.group_size,
                             bits=self.bits, mode=self.mode)

    def __call__(self, x: mx.array) -> mx.array:
        x = x @ self.dense_weight().T
        return x + self["bias"] if "bias" in self else x


def _is_linear(module) -> bool:
    return isinstance(module, nn.QuantizedLinear)


def _replace_linears(model: nn.Module, make: Callable[[str, nn.QuantizedLinear], nn.Module]) -> nn.Module:
    """A clone of `model` whose quantized Linears are `make(path, module)`; the input model is untouched."""
    clone = clone_model(model)
    leaves = tree_map_with_path(lambda path, module: make(path, module) if _is_linear(module) else module,
                                clone.leaf_modules(), is_leaf=nn.Module.is_module)
    clone.update_modules(leaves)
    return clone


def _as_class(module: nn.QuantizedLinear, cls: type) -> nn.QuantizedLinear:
    # Same arrays and settings, another call: the subclasses add no state of their own.
    twin = copy.copy(module)
    twin.__class__ = cls
    return twin


def with_eval_path(model: nn.Module, path: str) -> nn.Module:
    """A clone of `model` whose quantized Linears run the `path` kernel (PACKED or DENSE)."""
    classes = {PACKED: nn.QuantizedLinear, DENSE: DequantizedLinear}
    if path not in classes:
        raise ValueError(f"eval path {path!r} is not one of {', '.join(classes)}")
    return _replace_linears(model, lambda _, module: _as_class(module, classes[path]))


def eval_path_of(model: nn.Module) -> str | None:
    """PACKED, DENSE, "mixed", or None when the model holds no quantized Linear: what a benchmark measured."""
    paths = {DENSE if isinstance(module, DequantizedLinear) else PACKED
             for _, module in model.named_modules() if _is_linear(module)}
    return None if not paths else paths.pop() if len(paths) == 1 else "mixed"


def resolve_eval_path(setting: str, device: mx.Device | None = None) -> tuple[str, str]:
    """(PACKED or DENSE, why) for the pass setting `auto`, `packed` or `dense` on `device` (default: MLX's)."""
    if setting not in EVAL_PATH_SETTINGS:
        raise ValueError(f"eval_path {setting!r} is not one of {', '.join(EVAL_PATH_SETTINGS)}")
    device = device or mx.default_device()
    on_cpu = device.type == mx.cpu
    if setting == "packed":
        return PACKED, f"eval_path: packed (asked){'; slow on the CPU backend' if on_cpu else ''}"
    if setting == "dense":
        return DENSE, "eval_path: dense (asked); timings measure dense GEMMs, not the packed kernel"
    if on_cpu:
        return DENSE, ("eval_path: auto on the CPU backend, where MLX's packed quantized matmul is slow; the same "
                       "quantized values are evaluated as dense matmuls (timings are not packed-kernel timings)")
    return PACKED, f"eval_path: auto on {device}: MLX's packed quantized matmul"


# ----------------------------------------------------------------------------- the check against the packed kernel


@dataclass(frozen=True)
class DensePathCheck:
    """How far the dense path is from the packed kernel, on the inputs each quantized Linear received."""

    inputs: str                 # what the forward ran on
    calls: int                  # quantized Linear calls compared
    rows: int                   # token rows compared over all calls
    worst_module: str
    rounding_units: float       # max over outputs of |dense - packed| / (epsilon x sum_i |x_i w_i|) / K
    bound: float                # ROUNDING_BOUND: rounding units per rounding step of a K-term sum

    @property
    def ok(self) -> bool:
        return self.rounding_units <= self.bound

    def as_dict(self) -> dict:
        return {"inputs": self.inputs, "calls": self.calls, "rows": self.rows, "worst_module": self.worst_module,
                "rounding_units": self.rounding_units, "bound": self.bound, "ok": self.ok}


class DensePathMismatch(ValueError):
    """The dense path disagrees with the packed kernel beyond rounding: it must not stand in for it."""


class _RecordingLinear(DequantizedLinear):
    """The dense path, keeping each input it receives (`recorded`: a plain attribute, not a parameter)."""

    def __call__(self, x: mx.array) -> mx.array:
        self.__dict__["recorded"].append(x)
        return super().__call__(x)


def _recording(path: str, module: nn.QuantizedLinear) -> nn.QuantizedLinear:
    twin = _as_class(module, _RecordingLinear)
    object.__setattr__(twin, "recorded", [])
    object.__setattr__(twin, "path", path)
    return twin


def probe_batch(runtime: Runtime, rows: int = PROBE_ROWS, length: int = PROBE_LENGTH) -> Batch:
    """Seeded token rows through the real embeddings, for a check when no questions are given."""
    length = min(length, runtime.agent_config.max_len)
    ids = np.random.default_rng(PROBE_SEED).integers(0, runtime.codec.vocab_size, size=(rows, length))
    slots = np.linspace(1, length - 1, 4).astype(np.int32)
    return Batch(mx.array(ids.astype(np.int32)), mx.ones((rows, length), dtype=mx.bool_),
                 mx.array(np.tile(slots, (rows, 1))), mx.ones((rows, len(slots)), dtype=mx.bool_),
                 mx.zeros((rows,), dtype=mx.int32))


def question_batches(runtime: Runtime, requests: Sequence, count: int) -> list[Batch]:
    """The batches the runtime's own planner forms for the `count` requests with the longest questions."""
    prepared = [runtime.prepare(state, questions) for state, questions in requests]
    ranked = sorted(range(len(prepared)), key=lambda i: -max((item.length for item in prepared[i]), default=0))
    chosen = [item for index in sorted(ranked[:count]) for item in prepared[index]]
    if not chosen:
        raise ValueError("the dense-path check needs at least one question; the requests given prepare to none")
    return [runtime.collate([chosen[i] for i in group]) for group in runtime.plan(chosen)]


def _units(dense: mx.array, packed: mx.array, x: mx.array, module: DequantizedLinear, epsilon: float) -> float:
    # epsilon x sum_i |x_i| |w_i| per output: the size of a rounding of the sum, whatever the order.
    magnitude = np.array((mx.abs(x.astype(mx.float32)) @ mx.abs(module.dense_weight().astype(mx.float32)).T))
    difference = np.abs(np.array(dense.astype(mx.float32), dtype=np.float64)
                        - np.array(packed.astype(mx.float32), dtype=np.float64))
    scale = np.maximum(magnitude.astype(np.float64), np.finfo(np.float32).tiny)
    return float(np.max(difference / (epsilon * scale)))


def _sample_rows(x: mx.array, count: int) -> mx.array:
    # Evenly spaced token rows of the whole input: every sequence and position range is represented.
    rows = x.reshape(-1, x.shape[-1])
    return rows[mx.array(np.unique(np.linspace(0, rows.shape[0] - 1, count).astype(np.int32)))]


def dense_path_check(runtime: Runtime, batches: Sequence[Batch], inputs: str,
                     rows_per_call: int = CHECK_ROWS) -> DensePathCheck:
    """Compare every quantized Linear's dense call with its packed kernel, on inputs a forward feeds it.

    The forward runs the dense path (fast); the slow packed kernel runs only on `rows_per_call` token rows
    of each recorded input (a full packed forward of the 4 x 128 probe took 434 s in float16 on the loaded
    2-core CPU). Each output row depends on its input row alone, so a sample judges the kernel.
    """
    recorder = _replace_linears(runtime.model, _recording)
    epsilon = float(mx.finfo(runtime.dtype).eps)
    worst, worst_module, calls, rows = 0.0, "", 0, 0
    for batch in batches:
        mx.eval(eager_forward(recorder, runtime.kernels, batch))
        for _, module in recorder.named_modules():
            if not isinstance(module, _RecordingLinear):
                continue
            for recorded in module.recorded:
                x = _sample_rows(recorded, rows_per_call)
                packed, dense = nn.QuantizedLinear.__call__(module, x), DequantizedLinear.__call__(module, x)
                units = _units(dense, packed, x, module, epsilon) / x.shape[-1]  # per rounding step
                calls, rows = calls + 1, rows + x.shape[0]
                if units >= worst:
                    worst, worst_module = units, module.path
            module.recorded.clear()
    if not calls:
        raise ValueError("the dense-path check ran no quantized Linear: the model holds none")
    return DensePathCheck(inputs=inputs, calls=calls, rows=rows, worst_module=worst_module, rounding_units=worst,
                          bound=ROUNDING_BOUND)


def require_agreement(check: DensePathCheck) -> None:
    """Refuse the dense path when it is not the packed kernel up to rounding, naming module and numbers."""
    if not check.ok:
        raise DensePathMismatch(
            f"the dense-dequantized path disagrees with MLX's packed quantized matmul at {check.worst_module}: "
            f"{check.rounding_units:.3g} rounding units per rounding step (epsilon x sum |x w| / K), above the "
            f"kernel-rounding bound {check.bound:g}, on {check.inputs}; "
            "evaluate with eval_path: packed")
