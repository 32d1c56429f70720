"""Check a capturing pass on outputs: what it built must follow the parts it captured.

A pass that `captures` runtime parts (compile captures the model and the kernels) freezes them into
what it builds. If it froze the wrong ones (say the model's default kernels instead of the runtime's),
its outputs still match its parent whenever the earlier passes were exact, so no output gate could
tell. The probe makes the captured parts visible: it perturbs them on the parent (every kernel's output
reweighted, one scorer bias shifted), applies the pass to that probed parent, and compares the two on a
few requests. A pass that honours what it captured reproduces the probed outputs; one that dropped a
part reproduces the unprobed ones, and `capture_max_abs_dlogit` shows the difference.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx

from laya_opt.core.model import Kernels
from laya_opt.passes.contract import PassSpec, apply_pass
from laya_opt.core.runtime import Runtime, clone_model, eager_forward

from laya_opt.fidelity.checker import EvalRequest, evaluate, longest_requests
from laya_opt.fidelity.kernel_probe import kernel_fields
from laya_opt.fidelity.metrics import compare

PROBED_PARTS = frozenset({"model", "kernels"})
PROBE_REQUESTS = 4          # the gating suite's longest requests (checker.longest_requests): several shapes
# Kernel outputs are multiplied by 1 + 0.5 cos(feature index): a uniform scale would vanish in the
# scorer's LayerNorm, a feature-dependent one does not, and it is far outside any exact pass's noise.
KERNEL_WEIGHT = 0.5
BIAS_SHIFT = 1.0            # added to the scorer's hidden bias (changes every option's score differently)


def _feature_weights(width: int, dtype: mx.Dtype) -> mx.array:
    return (1.0 + KERNEL_WEIGHT * mx.cos(mx.arange(width, dtype=mx.float32))).astype(dtype)


def _reweighted(function: Callable) -> Callable:
    def probe(*args, **kwargs):
        out = function(*args, **kwargs)
        if not isinstance(out, mx.array):  # the mask kernel returns masks, which a weight would not perturb
            return out
        return out * _feature_weights(out.shape[-1], out.dtype)

    probe.description = f"probe: {getattr(function, 'description', getattr(function, '__name__', 'kernel'))}, " \
                        "reweighted"
    return probe


def probe_kernels(kernels: Kernels) -> Kernels:
    """Every computing kernel wrapped so that its output features are reweighted (dtype fields stay).

    Kernels that return something other than an array (`attention_masks`) pass their output through.
    """
    return dataclasses.replace(kernels, **{name: _reweighted(getattr(kernels, name))
                                           for name in kernel_fields(kernels)})


def probe_model(model):
    """A clone whose scorer hidden bias is shifted by a fixed pattern; the input model keeps its arrays."""
    clone = clone_model(model)
    layer = clone.scorer.layers[1]
    pattern = mx.cos(mx.arange(layer.bias.shape[0], dtype=mx.float32))  # deterministic, not constant
    layer.bias = layer.bias + (BIAS_SHIFT * pattern).astype(layer.bias.dtype)
    mx.eval(layer.bias)
    return clone


def probed_parent(parent: Runtime, parts: frozenset[str]) -> Runtime:
    changes: dict[str, Any] = {}
    if "kernels" in parts:
        changes["kernels"] = probe_kernels(parent.kernels)
    if "model" in parts:
        changes["model"] = probe_model(parent.model)
    return parent.replace(identity=f"{parent.identity}+probe({','.join(sorted(parts))})", **changes)


def capture_drift(spec: PassSpec, config: Any, data: Mapping[str, Any], parent: Runtime,
                  requests: Sequence[EvalRequest]) -> float | None:
    """max |Δ logit| between the pass applied to a probed parent and that probed parent; None if nothing is probed.

    Logits, not probabilities: on a saturated model the probe hardly moves the answers (on the stand-in in
    float16 a dropped kernel showed as 0.014 in max |dp|, inside the noise, and as a logit shift far outside).

    Parts the probe cannot perturb (anything but model and kernels) are not covered; the value is None
    only when the pass captures none of the probed parts.
    """
    parts = spec.captures & PROBED_PARTS
    if not parts or not requests:
        return None
    probed = probed_parent(parent, parts)
    probe_requests = longest_requests(parent, requests, PROBE_REQUESTS)
    built = apply_pass(spec, probed, config, data)
    # The probed parts computed eagerly: the parent's own forward may itself have captured the unprobed ones.
    expected = probed.replace(forward=eager_forward, identity=f"{probed.identity}+eager")
    return compare(evaluate(expected, probe_requests), evaluate(built, probe_requests)).metrics["max_abs_dlogit"]
