"""Sampled re-runs: evaluate a seeded sample of the requests again and compare the answers bit for bit.

Determinism is a property of the runtime, not of each question. Re-running every request (what
`checker.evaluate(..., repeat=2)` does) doubles the cost of a stage to measure it; a seeded sample of at most
`DEFAULT_RERUN` requests, prepared and executed again from scratch, catches a runtime that is not run-to-run
identical (a nondeterministic kernel, a preparer with state) at a fraction of that cost. The same comparison
checks that a stage whose outputs were reused (`laya_opt.runs.reuse`) really answers as they say.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from laya_opt.core.runtime import Runtime
from laya_opt.util.errors import InputError
from laya_opt.fidelity import checker
from laya_opt.fidelity.checker import EvalRequest, Outputs, QuestionOutput

DEFAULT_RERUN = 128   # requests re-run per stage: a quarter of the 497-request gate suite
RERUN_SEED = 0        # the sample is a function of the seed and the request count only


def check_rerun(rerun: object) -> int:
    """`rerun` itself when it is a non-negative int (0: nothing is re-run); an InputError naming it otherwise."""
    if isinstance(rerun, bool) or not isinstance(rerun, int) or rerun < 0:
        raise InputError(f"rerun must be a non-negative integer (the number of requests re-run), got {rerun!r}")
    return rerun


def sample_indices(total: int, rerun: int, seed: int = RERUN_SEED) -> tuple[int, ...]:
    """Sorted indices of a seeded sample of min(rerun, total) of `total` requests (every one when rerun >= total)."""
    check_rerun(rerun)
    if rerun >= total:
        return tuple(range(total))
    chosen = np.random.default_rng(seed).choice(total, size=rerun, replace=False)
    return tuple(sorted(int(index) for index in chosen))


def _bits(value: float) -> bytes:
    return np.float64(value).tobytes()  # NaN == NaN and -0.0 != 0.0, as for the arrays


def bit_identical(first: QuestionOutput, second: QuestionOutput) -> bool:
    """Same key, input, raw outputs and decoded answer, compared as bytes."""
    return (first.key == second.key and first.model_input == second.model_input
            and all(getattr(first, name).tobytes() == getattr(second, name).tobytes()
                    for name in ("logits", "action", "probabilities"))
            and _bits(first.act_probability) == _bits(second.act_probability))


@dataclass(frozen=True)
class RerunCheck:
    """A sample of requests evaluated again and compared bit for bit with earlier outputs."""

    requests: int                    # requests re-run
    keys: tuple[str, ...]            # their questions, in request order
    differing: tuple[str, ...]       # the questions whose bits differ, or that one side lacks

    @property
    def identical(self) -> bool:
        return not self.differing

    def describe(self) -> str:
        """E.g. `sample of 128 requests re-run (290 questions), identical`."""
        head = f"sample of {self.requests} requests re-run ({len(self.keys)} questions)"
        if self.identical:
            return f"{head}, identical"
        return f"{head}, {len(self.differing)} differ bit for bit (first {self.differing[0]})"


def rerun_count(total: int, rerun: int) -> int:
    """How many of `total` requests a sample of `rerun` re-runs (for progress bars)."""
    return min(check_rerun(rerun), total)


def rerun_check(runtime: Runtime, requests: Sequence[EvalRequest], outputs: Outputs, rerun: int,
                seed: int = RERUN_SEED, advance: Callable[[int], None] | None = None) -> RerunCheck:
    """Evaluate a seeded sample of `requests` on `runtime` again and compare it with `outputs` bit for bit."""
    chosen = [requests[index] for index in sample_indices(len(requests), rerun, seed)]
    again = checker.evaluate(runtime, chosen, advance=advance)
    earlier = {question.key: question for question in outputs.questions}
    # Keys are `<record_id>/<qid>` (checker._summarize): a question the re-run lost counts as a difference too.
    expected = [f"{request.record_id}/{qid}" for request in chosen for qid in request.questions]
    seen = {question.key for question in again.questions}
    differing = [question.key for question in again.questions
                 if question.key not in earlier or not bit_identical(earlier[question.key], question)]
    differing += [key for key in expected if key not in seen]
    return RerunCheck(requests=len(chosen), keys=again.keys, differing=tuple(differing))


def with_rerun(outputs: Outputs, check: RerunCheck, identity: str | None = None) -> Outputs:
    """`outputs` whose re-run questions say whether they repeated (the rest: not measured), under `identity`."""
    sampled, differing = set(check.keys), set(check.differing)
    questions = tuple(dataclasses.replace(question, deterministic=question.key not in differing)
                      if question.key in sampled else dataclasses.replace(question, deterministic=None)
                      for question in outputs.questions)
    return Outputs(identity=identity or outputs.identity, questions=questions, repeat=1, rerun=check.requests)


def evaluate(runtime: Runtime, requests: Sequence[EvalRequest], rerun: int = DEFAULT_RERUN, seed: int = RERUN_SEED,
             advance: Callable[[int], None] | None = None) -> Outputs:
    """Every request once, then a seeded sample of `rerun` of them again: `deterministic` is measured on the sample.

    `rerun=0` re-runs nothing (determinism not measured: a gate on it fails). `advance(1)` is called per request
    evaluated, the re-run ones included (`rerun_count` of them).
    """
    check_rerun(rerun)
    requests = tuple(requests)
    outputs = checker.evaluate(runtime, requests, advance=advance)
    if not rerun:
        return outputs
    return with_rerun(outputs, rerun_check(runtime, requests, outputs, rerun, seed, advance))
