"""The Runtime: the composed, transformable object that answers requests.

A Runtime is frozen. Passes build a new one with `dataclasses.replace`, swapping one part: the model
(new modules, e.g. quantized), the kernels (attention, final head layer), the forward callable
(compiled), the batch planner (length-sorted) or the preparer (tokenization policy, e.g. a prefix
cache). The fidelity checker's token-identity gate compares what the preparer and planner feed the
model. The FP32 reference is therefore never mutated. `kernel_owners` records which pass installed
each kernel field; `apply_pass` (passes/contract.py) keeps it.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from laya_opt.core.batching import Batch, Planner, check_plan, collate, insertion_order_planner
from laya_opt.core.checkpoint import Checkpoint, dtype_name, load_checkpoint
from laya_opt.core.config import AgentConfig, EncoderConfig
from laya_opt.core.decode import Calibration, decode_answers, envelope
from laya_opt.core.model import DEFAULT_KERNELS, Kernels, LayaModel
from laya_opt.core.prompt import PreparedQuestion, prepare_request
from laya_opt.core.tokens import TextCodec

# preparer(state, questions, codec, max_len, head_max_len) -> prepared questions (tokenization policy).
Preparer = Callable[..., tuple[PreparedQuestion, ...]]
REFERENCE_OWNER = "reference"   # the owner of a kernel field no pass replaced (laya_opt.core.model's default)
# forward(model, kernels, batch) -> (logits float32 [B, K], action float32 [B, A]), not yet evaluated. A forward
# that pads batches to shape buckets may say to which shape with a `padded_shape(rows, length, slots)` attribute:
# `Runtime.collate` then builds each batch at that shape in numpy (laya_opt.core.batching.collate), so no call
# spends device ops on padding, and the forward slices its outputs back to `batch.content_shape`.
Forward = Callable[[LayaModel, Kernels, Batch], tuple[mx.array, mx.array]]


def eager_forward(model: LayaModel, kernels: Kernels, batch: Batch) -> tuple[mx.array, mx.array]:
    return model(batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask, batch.qtype,
                 kernels=kernels)


eager_forward.description = "eager"


@dataclass(frozen=True)
class ModelInput:
    """What reached the model for one question: unpadded ids, marker positions and qtype."""

    ids: tuple[int, ...]
    markers: tuple[int, ...]
    qtype: int


@dataclass(frozen=True)
class Execution:
    """Raw outputs of one request, in the caller's question order."""

    prepared: tuple[PreparedQuestion, ...]
    logits: tuple[np.ndarray, ...]   # float32 per question, length K of its batch (pad slots -1e4)
    action: tuple[np.ndarray, ...]   # float32 [A] per question
    inputs: tuple[ModelInput, ...] | None  # filled when traced


@dataclass(frozen=True)
class Runtime:
    model: LayaModel
    codec: TextCodec
    encoder_config: EncoderConfig
    agent_config: AgentConfig
    calibration: Calibration
    dtype: mx.Dtype
    identity: str                     # checkpoint hash + dtype; passes append their names
    kernels: Kernels = DEFAULT_KERNELS
    preparer: Preparer = prepare_request
    planner: Planner = field(default_factory=insertion_order_planner)
    forward: Forward = eager_forward
    applied: tuple[str, ...] = ()     # names of the passes applied, in order
    info: Mapping[str, Any] = field(default_factory=dict)  # free-form facts passes leave for reports
    # kernel field -> the passes that installed it, in order (the last one owns it); absent: the reference
    kernel_owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def replace(self, **changes) -> "Runtime":
        return dataclasses.replace(self, **changes)

    def kernel_owner(self, name: str) -> str:
        """The pass whose kernel sits in field `name` of `kernels`, or `reference`."""
        installed = self.kernel_owners.get(name, ())
        return installed[-1] if installed else REFERENCE_OWNER

    # ------------------------------------------------------------------ data path

    def prepare(self, state: Any, questions: Mapping) -> tuple[PreparedQuestion, ...]:
        return self.preparer(state, questions, self.codec, self.agent_config.max_len,
                             self.agent_config.head_max_len)

    def collate(self, items: Sequence[PreparedQuestion]) -> Batch:
        return collate(items, self.codec.pad_id, getattr(self.forward, "padded_shape", None))

    def plan(self, prepared: Sequence[PreparedQuestion]) -> list[tuple[int, ...]]:
        groups = self.planner(prepared)
        check_plan(groups, len(prepared))
        return groups

    def execute(self, prepared: Sequence[PreparedQuestion], trace: bool = False,
                clock: Callable[[str], None] | None = None) -> Execution:
        """Plan, collate, run and synchronise each batch; scatter rows back to the caller's order.

        Batches are pipelined: batch i+1 is collated and dispatched (`mx.async_eval`) before batch i's
        outputs are copied to the host, so host work overlaps the device. `clock(phase)` is called after
        each phase (plan_collate, graph_build, dispatch, forward, host_copy) for the profiler.
        """
        tick = clock or (lambda phase: None)
        count = len(prepared)
        logits: list[np.ndarray | None] = [None] * count
        action: list[np.ndarray | None] = [None] * count
        inputs: list[ModelInput | None] = [None] * count

        def finish(group, batch, outputs) -> None:
            mx.eval(*outputs)
            tick("forward")
            logits_np, action_np = to_host(outputs)
            fed = model_inputs(batch) if trace else None
            for row, index in enumerate(group):
                logits[index], action[index] = logits_np[row], action_np[row]
                if trace:
                    inputs[index] = fed[row]
            tick("host_copy")

        pending = None
        for group in self.plan(prepared):
            batch = self.collate([prepared[i] for i in group])
            tick("plan_collate")
            outputs = self.forward(self.model, self.kernels, batch)
            tick("graph_build")
            mx.async_eval(*outputs)
            tick("dispatch")
            if pending is not None:
                finish(*pending)
            pending = (group, batch, outputs)
        if pending is not None:
            finish(*pending)
        return Execution(prepared=tuple(prepared), logits=tuple(logits), action=tuple(action),
                         inputs=tuple(inputs) if trace else None)

    def decode(self, execution: Execution) -> dict:
        try:
            decoded = decode_answers(execution.prepared, execution.logits, execution.action, self.calibration)
            answers = {item.qid: answer for item, answer in zip(execution.prepared, decoded)}
        except FloatingPointError as exc:  # weights are checked finite at load: the activations overflowed
            advice = "; retry in float32" if self.dtype != mx.float32 else ", from finite weights"
            raise FloatingPointError(f"{exc} in {dtype_name(self.dtype)}{advice}") from None
        return envelope(answers, execution.prepared)

    def predict(self, state: Any, questions: Mapping) -> dict:
        """End to end: prepare -> plan -> forward -> decode; answers keep the caller's order."""
        prepared = self.prepare(state, questions)
        if not prepared:
            return envelope({}, prepared)
        return self.decode(self.execute(prepared))


def to_host(outputs: tuple[mx.array, mx.array]) -> tuple[np.ndarray, np.ndarray]:
    """One batch's evaluated (logits, action) as numpy: the device-to-host transfer of a predict call."""
    return np.array(outputs[0]), np.array(outputs[1])


def model_inputs(batch: Batch) -> list[ModelInput]:
    """Strip padding from a collated batch: exactly what the model saw per row."""
    ids, mask = np.array(batch.input_ids), np.array(batch.attention_mask)
    markers, marker_mask, qtype = np.array(batch.marker_pos), np.array(batch.marker_mask), np.array(batch.qtype)
    return [ModelInput(ids=tuple(int(t) for t in ids[row][mask[row]]),
                       markers=tuple(int(p) for p in markers[row][marker_mask[row]]),
                       qtype=int(qtype[row])) for row in range(ids.shape[0])]


def runtime_from_checkpoint(checkpoint: Checkpoint, batch_size: int = 16) -> Runtime:
    agent = checkpoint.agent_config
    return Runtime(model=checkpoint.model, codec=checkpoint.codec, encoder_config=checkpoint.encoder_config,
                   agent_config=agent, calibration=checkpoint.calibration,
                   dtype=checkpoint.dtype, identity=f"{checkpoint.weights_sha256[:16]}:{dtype_name(checkpoint.dtype)}",
                   planner=insertion_order_planner(batch_size), info={"checkpoint": str(checkpoint.path)})


def load_runtime(path, dtype: str | mx.Dtype = "float32", batch_size: int = 16) -> Runtime:
    return runtime_from_checkpoint(load_checkpoint(path, dtype), batch_size)


def clone_model(model: nn.Module) -> nn.Module:
    """A structurally independent copy of the module tree that shares the (immutable) weight arrays.

    Passes that replace modules in place (e.g. `nn.quantize`) work on a clone, so their input
    runtime keeps its model untouched.
    """
    if isinstance(model, nn.Module):
        clone = copy.copy(model)
        dict.clear(clone)
        for key, value in model.items():
            clone[key] = clone_model(value)
        return clone
    if isinstance(model, list):
        return [clone_model(value) for value in model]
    if isinstance(model, dict):
        return {key: clone_model(value) for key, value in model.items()}
    return model
