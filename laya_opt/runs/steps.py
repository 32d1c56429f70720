"""Pipeline steps and their gates: a Step is one pass with its config, failure policy and gate overrides.

`stage_gates` is the one place the exactness chain turns into gates (`Pipeline.run` and `explain` call it):
defaults from the gates file for the step's comparison and kind, then the pipeline's and the step's overrides.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from laya_opt.fidelity.gates import Gate, GatesFile, common_gates, default_gates, load_gates_file
from laya_opt.passes.contract import PassSpec
from laya_opt.passes.registry import get_pass
from laya_opt.util.schema import checked

OnFail = Literal["reject", "stop"]
ON_FAIL_CHOICES = ("reject", "stop")
BASELINE = "baseline"


# ---------------------------------------------------------------------------------------------------------------------
# Gates


@dataclass(frozen=True)
@checked
class GateSet:
    """Gate overrides for one comparison each; None keeps `fidelity.gates.default_gates`.

    An override replaces the default gate on the same (metric, op) and adds gates on new metrics.
    """

    incremental: tuple[Gate, ...] | None = None
    cumulative: tuple[Gate, ...] | None = None


def merge_gates(base: Sequence[Gate], overrides: Sequence[Gate] | None) -> tuple[Gate, ...]:
    """Overrides replace the gate on the same (metric, op); the measured noise floor of the metric stays shown."""
    if not overrides:
        return tuple(base)
    keyed = {(gate.metric, gate.op): gate for gate in base}
    for gate in overrides:
        replaced = keyed.get((gate.metric, gate.op))
        keyed[(gate.metric, gate.op)] = dataclasses.replace(
            gate, noise_floor=replaced.noise_floor if gate.noise_floor is None and replaced else gate.noise_floor,
            derivation=gate.derivation or "set by the experiment")
    return tuple(keyed.values())


def step_defaults(comparison: str, step: "Step", exact: bool, candidate_dtype: str, gates_file: GatesFile
                  ) -> tuple[Gate, ...]:
    """The default gates of a step in one comparison (`fidelity.gates.default_gates`, stage 0 aside)."""
    if is_cast_baseline(step):
        # Stage 0 is the cast whose drift the calibration measured. Both of its comparisons are against the
        # reference, so both get the drift envelope of the candidate dtype: the cumulative bound of an exact stack.
        envelope = default_gates(True, candidate_dtype, "cumulative", gates_file=gates_file)
        if comparison == "cumulative":
            return envelope
        return merge_gates(common_gates("incremental"), envelope)
    return default_gates(exact, candidate_dtype, comparison, captures=bool(step.spec.captures),
                         replaces_kernels="kernels" in step.spec.replaces,
                         compiles="forward" in step.spec.replaces, gates_file=gates_file)


def resolve_gates(comparison: str, step: "Step", exact: bool, candidate_dtype: str, gates_file: GatesFile,
                  *layers: GateSet) -> tuple[Gate, ...]:
    """Defaults for the step in this comparison, then each override layer in order (pipeline, then step)."""
    gates = step_defaults(comparison, step, exact, candidate_dtype, gates_file)
    for layer in layers:
        gates = merge_gates(gates, getattr(layer, comparison))
    return gates


# ---------------------------------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class Step:
    spec: PassSpec
    config: Any                      # an instance of spec.config_type
    on_fail: OnFail = "stop"
    gates: GateSet = GateSet()
    label: str = ""                  # stage name; the pass name when empty
    exact: bool | None = None        # None: the pass's own declaration

    def __post_init__(self):
        if self.on_fail not in ON_FAIL_CHOICES:
            raise ValueError(f"pass {self.spec.name}: on_fail must be one of {ON_FAIL_CHOICES}, got {self.on_fail!r}")
        if not isinstance(self.config, self.spec.config_type):
            raise TypeError(f"pass {self.spec.name}: config must be a {self.spec.config_type.__name__}, "
                            f"got {type(self.config).__name__}")

    @property
    def name(self) -> str:
        return self.label or self.spec.name

    @property
    def is_exact(self) -> bool:
        return self.spec.exact if self.exact is None else self.exact


def as_step(item: Step | PassSpec | tuple | Any) -> Step:
    """A Step, a PassSpec, a config instance, or (spec, config[, on_fail[, gates]]) with config a mapping."""
    if isinstance(item, Step):
        return item
    if isinstance(item, PassSpec):
        item = (item,)
    if not isinstance(item, tuple):
        from laya_opt.passes.registry import build_registry

        return Step(build_registry().for_config(item), item)
    if not 1 <= len(item) <= 4 or not isinstance(item[0], PassSpec):
        raise TypeError(f"a pipeline step must be a Step, a PassSpec, a pass config or (PassSpec, config, on_fail), "
                        f"got {item!r}")
    spec, config, rest = item[0], item[1] if len(item) > 1 else None, item[2:]
    if config is None or isinstance(config, Mapping):
        config = spec.make_config(config or {})
    return Step(spec, config, *rest)


def is_cast_baseline(step: Step) -> bool:
    """Stage 0 casting to another dtype: not exact, yet it keeps the exact chain (its drift is the envelope)."""
    return step.label == BASELINE and step.spec.name == "cast_dtype" and not step.is_exact


def keeps_exact_chain(step: Step) -> bool:
    return step.is_exact or is_cast_baseline(step)


def baseline_step(candidate_dtype: str, reference_dtype: str) -> Step:
    """Stage 0: cast the reference to the candidate dtype; exact only when the dtype stays."""
    spec = get_pass("cast_dtype")
    return Step(spec, spec.make_config({"dtype": candidate_dtype}), on_fail="stop", label=BASELINE,
                exact=candidate_dtype == reference_dtype)


def stage_gates(step: Step, chain_exact: bool, candidate_dtype: str, pipeline_gates: GateSet,
                gates_file: GatesFile | str | None = None) -> tuple[tuple[Gate, ...], tuple[Gate, ...]]:
    """(incremental, cumulative) gates of one step; `chain_exact`: every accepted stage before it kept the exact
    chain (was exact, or was the stage-0 cast, whose drift the exact cumulative bound includes).

    The one place the exactness chain turns into gates: `Pipeline.run` and `explain` both call it.
    `gates_file` holds the defaults (None: the bundled stand-in calibration).
    """
    table = load_gates_file(gates_file)
    return (resolve_gates("incremental", step, step.is_exact, candidate_dtype, table, pipeline_gates, step.gates),
            resolve_gates("cumulative", step, chain_exact and keeps_exact_chain(step), candidate_dtype, table,
                          pipeline_gates, step.gates))
