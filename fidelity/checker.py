"""Run a Runtime over evaluation requests and keep, per question, everything the fidelity metrics compare.

The checker records what reached the model (the traced `ModelInput`) and what came out (calibrated,
unrounded probabilities, the predicted option, score expectation, act probability). Non-finite outputs
are recorded rather than raised, so the `finite` gate fails visibly instead of the checker crashing.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from laya_opt.core.decode import act_probability, answer_probabilities
from laya_opt.core.prompt import PreparedQuestion
from laya_opt.core.runtime import Execution, ModelInput, Runtime
from laya_opt.suites.suite_file import NOUL_TRUE, label_index


@dataclass(frozen=True)
class EvalRequest:
    """One state with its questions; `labels` and `tags` map question id -> label / tag dict."""

    record_id: str
    state: Any
    questions: Mapping
    labels: Mapping | None = None
    tags: Mapping | None = None


@dataclass(frozen=True, eq=False)  # holds numpy arrays: compare fields, not objects
class QuestionOutput:
    key: str                         # "<record_id>/<qid>"
    type_name: str                   # choice | score | noul
    k: int                           # option count
    probabilities: np.ndarray        # float64 [k], calibrated and unrounded; NaN when not finite
    argmax: int                      # predicted option; -1 when not finite
    p_true: float | None             # noul only: P(true)
    score_expectation: float | None  # score only: sum of i * p_i
    act_probability: float           # NaN when not finite
    model_input: ModelInput | None   # exactly what the model saw
    finite: bool
    logits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # raw float32 [k]
    action: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # raw float32 [A]
    label: Any = None                # as given by the suite
    label_index: int | None = None   # the option the label names
    tags: Mapping = field(default_factory=dict)
    deterministic: bool | None = None  # None when evaluated once

    @property
    def answer_confidence(self) -> float:
        """max p (for noul the probability of the predicted class): the quantity ECE is computed on."""
        return float(np.max(self.probabilities))  # NaN when the probabilities are

    @property
    def correct(self) -> bool:
        """The predicted option is the labelled one (False when unlabelled or not finite)."""
        return self.argmax == self.label_index


@dataclass(frozen=True, eq=False)  # holds numpy arrays: compare fields, not objects
class Outputs:
    """The checker's record of one runtime over one request list, in request then question order."""

    identity: str
    questions: tuple[QuestionOutput, ...]
    repeat: int = 1                  # every request evaluated this many times
    rerun: int = 0                   # requests of a seeded sample evaluated again (fidelity.rerun)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(question.key for question in self.questions)

    @property
    def finite(self) -> bool:
        return all(question.finite for question in self.questions)

    @property
    def deterministic(self) -> bool | None:
        """None when not measured (repeat < 2 and nothing re-run); with a re-run sample, its questions decide."""
        if self.repeat >= 2:
            return all(question.deterministic for question in self.questions)
        if self.rerun:
            return all(question.deterministic is not False for question in self.questions)
        return None

    def labelled(self) -> tuple[QuestionOutput, ...]:
        return tuple(question for question in self.questions if question.label_index is not None)


# ---------------------------------------------------------------------------------------------------------------------
# Per-question summaries


def predicted_index(type_name: str, probabilities: np.ndarray) -> int:
    """argmax; noul predicts true when P(true) >= 0.5 (a tie is 'true', unlike np.argmax)."""
    if type_name == "noul":
        return NOUL_TRUE if probabilities[NOUL_TRUE] >= 0.5 else 0
    return int(np.argmax(probabilities))


def question_output(key: str, type_name: str, probabilities: np.ndarray, act_prob: float,
                    model_input: ModelInput | None = None, **extra) -> QuestionOutput:
    """Derive argmax, P(true), score expectation and finiteness from the probabilities."""
    p = np.asarray(probabilities, dtype=np.float64)
    p_finite = bool(np.all(np.isfinite(p)))
    if not p_finite:
        p = np.full(p.shape, np.nan)
    act_prob = float(act_prob) if np.isfinite(act_prob) else float("nan")
    return QuestionOutput(
        key=key, type_name=type_name, k=int(p.shape[0]), probabilities=p,
        argmax=predicted_index(type_name, p) if p_finite else -1,
        p_true=float(p[NOUL_TRUE]) if type_name == "noul" else None,
        score_expectation=float(np.sum(np.arange(p.shape[0]) * p)) if type_name == "score" else None,
        act_probability=act_prob, model_input=model_input, finite=p_finite and not np.isnan(act_prob), **extra)


def _summarize(key: str, prepared: PreparedQuestion, logits_row: np.ndarray, action_row: np.ndarray,
               model_input: ModelInput | None, runtime: Runtime, label: Any, tags: Mapping,
               deterministic: bool | None) -> QuestionOutput:
    logits = np.asarray(logits_row, dtype=np.float32)[: prepared.option_count]
    action = np.asarray(action_row, dtype=np.float32)
    # decode raises on non-finite rows; the checker records them instead so the finite gate can fail.
    probabilities = (answer_probabilities(prepared, logits_row, runtime.calibration)
                     if np.all(np.isfinite(logits)) else np.full(prepared.option_count, np.nan))
    act_prob = act_probability(action, prepared.qid) if np.all(np.isfinite(action)) else float("nan")
    return question_output(key, prepared.type_name, probabilities, act_prob, model_input, logits=logits,
                           action=action, label=label,
                           label_index=label_index(key, prepared.type_name, prepared.option_keys, label),
                           tags=dict(tags), deterministic=deterministic)


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation


def _bit_identical(first: Execution, second: Execution) -> list[bool]:
    # Byte comparison: NaN == NaN and -0.0 != 0.0, which is what "bit-identical" means.
    return [a.tobytes() == b.tobytes() and c.tobytes() == d.tobytes() and x == y
            for a, b, c, d, x, y in zip(first.logits, second.logits, first.action, second.action,
                                        first.inputs, second.inputs)]


def _question_mapping(request: EvalRequest, name: str) -> Mapping:
    value = getattr(request, name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"request {request.record_id}: {name} must map question id -> value, "
                         f"got {type(value).__name__}")
    unknown = [qid for qid in value if qid not in request.questions]
    if unknown:
        raise ValueError(f"request {request.record_id}: {name} for unknown question(s) {unknown}")
    return value


def evaluate_request(runtime: Runtime, request: EvalRequest, repeat: int = 1) -> list[QuestionOutput]:
    labels, tags = _question_mapping(request, "labels"), _question_mapping(request, "tags")
    try:
        prepared = runtime.prepare(request.state, request.questions)
    except ValueError as exc:
        raise ValueError(f"request {request.record_id}: {exc}") from exc
    if not prepared:
        return []
    execution = runtime.execute(prepared, trace=True)
    same = [True] * len(prepared)
    for _ in range(repeat - 1):
        same = [a and b for a, b in zip(same, _bit_identical(execution, runtime.execute(prepared, trace=True)))]
    return [_summarize(f"{request.record_id}/{item.qid}", item, logits, action, model_input, runtime,
                       labels.get(item.qid), tags.get(item.qid) or {}, same[index] if repeat > 1 else None)
            for index, (item, logits, action, model_input)
            in enumerate(zip(prepared, execution.logits, execution.action, execution.inputs))]


def longest_requests(runtime: Runtime, requests: Sequence[EvalRequest], count: int) -> tuple[EvalRequest, ...]:
    """The `count` requests whose longest prepared question is longest (suite order among equals).

    Probes run on these: length-dependent kernels (windows with a `min_length`, bucket padding) act there.
    """
    def longest(request: EvalRequest) -> int:
        return max((item.length for item in runtime.prepare(request.state, request.questions)), default=0)

    ranked = sorted(range(len(requests)), key=lambda index: -longest(requests[index]))
    return tuple(requests[index] for index in sorted(ranked[:count]))


def evaluate(runtime: Runtime, requests: Sequence[EvalRequest], repeat: int = 1,
             advance: Callable[[int], None] | None = None) -> Outputs:
    """Every question of every request; `repeat=2` also records whether reruns were bit-identical.

    `advance(1)` is called after each request (a progress bar's hook).
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    questions: list[QuestionOutput] = []
    seen: set[str] = set()
    for request in requests:
        if not isinstance(request, EvalRequest):
            raise TypeError(f"evaluate needs EvalRequest items, got {type(request).__name__}")
        for output in evaluate_request(runtime, request, repeat):
            if output.key in seen:
                raise ValueError(f"duplicate question key {output.key!r}: record ids must be unique")
            seen.add(output.key)
            questions.append(output)
        if advance is not None:
            advance(1)
    return Outputs(identity=runtime.identity, questions=tuple(questions), repeat=repeat)


# ---------------------------------------------------------------------------------------------------------------------
# Request sources


def requests_from_suite(suite) -> tuple[EvalRequest, ...]:
    """One request per record id (records sharing an id must share the state); suite order is kept."""
    grouped: dict[str, dict] = {}
    for record in suite.records:
        record_id = str(record.id)
        group = grouped.setdefault(record_id, {"state": record.state, "questions": {}, "labels": {}, "tags": {}})
        if group["state"] != record.state:
            raise ValueError(f"suite {suite.name}: records with id {record_id!r} have different states")
        for qid, definition in record.questions.items():
            if qid in group["questions"]:
                raise ValueError(f"suite {suite.name}: record {record_id!r} repeats question {qid!r}")
            group["questions"][qid] = definition
        group["labels"].update(record.labels or {})
        # Suite tags are QuestionTag objects; outputs and reports carry plain mappings.
        group["tags"].update({qid: tag.to_json() if hasattr(tag, "to_json") else dict(tag)
                              for qid, tag in (record.tags or {}).items()})
    return tuple(EvalRequest(record_id=record_id, state=group["state"], questions=group["questions"],
                             labels=group["labels"], tags=group["tags"])
                 for record_id, group in grouped.items())
