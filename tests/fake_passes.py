"""Passes and requests shared by the pipeline, experiment and runner tests (also a plugin: `plugins: [fake_passes]`)."""
from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx

from laya_opt.core.batching import insertion_order_planner
from laya_opt.fidelity.checker import EvalRequest
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord, dump_suite
from laya_opt.passes.contract import PassSpec
from laya_opt.core.runtime import clone_model
from laya_opt.core.tokens import TextCodec
from laya_opt.util.staging import replace_file


@dataclass(frozen=True)
class NoiseConfig:
    scale: float = 5.0
    seed: int = 0


def add_scorer_noise(runtime, config, data):
    """Corrupts outputs on a clone: noise on the scorer's hidden bias changes every option's score."""
    model = clone_model(runtime.model)
    layer = model.scorer.layers[1]
    noise = config.scale * mx.random.normal(layer.bias.shape, key=mx.random.key(config.seed))
    layer.bias = layer.bias + noise.astype(layer.bias.dtype)
    return runtime.replace(model=model), {"scale": config.scale}


NOISY = PassSpec(name="noisy_scorer", config_type=NoiseConfig, apply=add_scorer_noise, exact=True,
                 description="test: adds noise to the scorer bias", replaces=frozenset({"model"}))


@dataclass(frozen=True)
class NoteConfig:
    note: str = "hello"


NOTE = PassSpec(name="note", config_type=NoteConfig,
                apply=lambda runtime, config, data: (runtime, {"text": config.note}),
                exact=True, description="test: changes nothing, reports a note", replaces=frozenset({"planner"}))


@dataclass(frozen=True)
class ReversingCodec(TextCodec):
    """Reverses the ids of every tokenized piece: the model sees the same tokens in another order."""

    def encode(self, text: str) -> list[int]:
        return super().encode(text)[::-1]


@dataclass(frozen=True)
class EmptyConfig:
    pass


def reverse_tokens(runtime, config, data):
    codec = ReversingCodec(**{f.name: getattr(runtime.codec, f.name) for f in dataclasses.fields(runtime.codec)})
    return runtime.replace(codec=codec), {}


REVERSE = PassSpec(name="reverse_tokens", config_type=EmptyConfig, apply=reverse_tokens, exact=True,
                   description="test: permutes token ids before the model", replaces=frozenset({"codec"}))
# The same transform declaring nothing: apply_pass must refuse the undeclared codec change.
SNEAKY = dataclasses.replace(REVERSE, name="sneaky_codec", replaces=frozenset())


def explode(runtime, config, data):
    raise RuntimeError("boom")


EXPLODE = PassSpec(name="explode", config_type=EmptyConfig, apply=explode, exact=True,
                   description="test: raises", replaces=frozenset({"kernels"}),
                   kernels=frozenset({"self_attention"}))


@dataclass(frozen=True)
class GroupConfig:
    group_size: int = 64


def capture_model(runtime, config, data):
    return runtime.replace(forward=lambda model, kernels, batch: runtime.forward(model, kernels, batch)), {}


CAPTURE = PassSpec(name="capture_model", config_type=GroupConfig, apply=capture_model, exact=True,
                   description="test: captures the model in a new forward", replaces=frozenset({"forward"}),
                   captures=frozenset({"model"}))
REPLACE_MODEL = PassSpec(name="replace_model", config_type=NoiseConfig, apply=add_scorer_noise, exact=False,
                         description="test: swaps the model", replaces=frozenset({"model"}))

def failing_forward(model, kernels, batch):
    raise RuntimeError("kernel launch failed")


BROKEN = PassSpec(name="broken_forward", config_type=EmptyConfig,
                  apply=lambda runtime, config, data: (runtime.replace(forward=failing_forward), {}), exact=True,
                  description="test: a forward that raises when it runs", replaces=frozenset({"forward"}))


@dataclass(frozen=True)
class WaitConfig:
    marker: str = ""
    seconds: float = 60.0
    release: str = ""    # a path: once it exists the pass no longer waits (a resumed sweep, same settings)


def wait(runtime, config, data):
    """Writes `marker` (the id of the process applying it), then sleeps: a run to interrupt while it has work in
    progress."""
    # written whole, then renamed: a waiter never reads it half-written
    replace_file(Path(config.marker), lambda partial: partial.write_text(str(os.getpid())))
    if not (config.release and Path(config.release).exists()):
        time.sleep(config.seconds)
    return runtime, {}


WAIT = PassSpec(name="wait", config_type=WaitConfig, apply=wait, exact=True, description="test: waits",
                replaces=frozenset({"kernels"}), kernels=frozenset({"self_attention"}))

def own_view_attention(runtime, config, data):
    from laya_opt.passes.qkv_views import view_self_attention

    return runtime.replace(kernels=dataclasses.replace(runtime.kernels, self_attention=view_self_attention)), {}


# Installs self_attention without declaring that it supersedes qkv_views: stacked after it, refused.
GREEDY = PassSpec(name="greedy_attention", config_type=EmptyConfig, apply=own_view_attention, exact=True,
                  description="test: takes self_attention without superseding anyone", replaces=frozenset({"kernels"}),
                  kernels=frozenset({"self_attention"}))

def abort_process(runtime, config, data):
    """Ends its process as a native fault does (SIGABRT): no exception, no cleanup."""
    os.abort()


CRASH = PassSpec(name="crash", config_type=EmptyConfig, apply=abort_process, exact=True,
                 description="test: kills its process when applied", replaces=frozenset({"forward"}))


@dataclass(frozen=True)
class RoundOnceConfig:
    skew: float = 0.0   # the stack's output times (1 + skew): a kernel that is wrong, not just rounded otherwise
    place: str = "output"   # where each layer rounds: "output", or "midlayer" (after the attention's residual add)


def round_once(runtime, config, data):
    """Every encoder layer in float32 from the half-precision weights, rounded once per layer
    (benchmarks/drift_to_reference.py `float32_layers`: what a fused kernel that chains in float32 does;
    `float32_midlayer` with place "midlayer": the same rounding elsewhere, no worse)."""
    from repo_scripts import load_script

    drift = load_script("benchmarks/drift_to_reference.py")
    child = (drift.float32_midlayer if config.place == "midlayer" else drift.float32_layers)(runtime)
    if not config.skew:
        return child, {}
    stack = child.kernels.encoder_stack

    def skewed(encoder, input_ids, attention_mask, kernels):
        out = stack(encoder, input_ids, attention_mask, kernels)
        return (out * (1.0 + config.skew)).astype(out.dtype)

    return child.replace(kernels=dataclasses.replace(child.kernels, encoder_stack=skewed)), {}


ROUND_ONCE = PassSpec(name="round_once", config_type=RoundOnceConfig, apply=round_once, exact=True,
                      description="test: the encoder stack in float32, rounded once per layer",
                      replaces=frozenset({"kernels"}), kernels=frozenset({"encoder_stack"}))

PASSES = (NOISY, NOTE, REVERSE, SNEAKY, EXPLODE, CAPTURE, REPLACE_MODEL, BROKEN, WAIT, GREEDY, CRASH, ROUND_ONCE)


# ----------------------------------------------------------------------------------------------- mutations


def _swap_bias(runtime):
    layer = runtime.model.scorer.layers[1]
    layer.bias = layer.bias + 1.0


def _write_in_place(runtime):
    bias = runtime.model.scorer.layers[1].bias
    bias[0] = 100.0  # keeps the Python object: only the value check can see it


def _set_field(runtime):
    object.__setattr__(runtime, "planner", insertion_order_planner(1))


def _write_info(runtime):
    runtime.info["written"] = True


MUTATIONS = {"module attribute": _swap_bias, "array in place": _write_in_place, "runtime field": _set_field,
             "info entry": _write_info}


def mutating_spec(mutate) -> PassSpec:
    def apply(runtime, config, data):
        mutate(runtime)
        return runtime.replace(), {}

    return PassSpec(name="mutator", config_type=EmptyConfig, apply=apply, exact=True,
                    description="test: mutates its input", replaces=frozenset({"model"}))


# ----------------------------------------------------------------------------------------------- requests and suites

QUESTIONS = {
    "topic": {"type": "choice", "instructions": "pick hello", "criteria": ["a", "b", "c"]},
    "level": {"type": "score", "instructions": "rate hello", "criteria": ["low", "mid", "high"]},
    "yes": {"type": "noul", "instructions": "hello hello"},
}
LABELS = {"topic": "a", "level": 1, "yes": True}
# States start "hello hello x": reversing a piece's ids changes them (all other words map to [UNK]).
REQUESTS = tuple(EvalRequest(f"r{i}", "hello hello x " + "hello world " * (3 * i), QUESTIONS, labels=LABELS)
                 for i in range(4))


def write_suite_file(path, records, name: str = "tiny", description: str = "test suite"):
    path.write_bytes(dump_suite(name, records, generator_seed=None, description=description))
    return path


def write_tiny_suite(path, name: str = "tiny", records: int = 3):
    """A labelled suite file in the fidelity format, built from REQUESTS-like records."""
    tags = {qid: QuestionTag(type=q["type"], language="en", options=len(q.get("criteria") or (0, 0)),
                             length_class="short") for qid, q in QUESTIONS.items()}
    rows = [SuiteRecord(id=f"r{i}", state=REQUESTS[i % len(REQUESTS)].state, questions=QUESTIONS,
                        labels=dict(LABELS), tags=tags) for i in range(records)]
    return write_suite_file(path, rows, name, "tiny test suite")
