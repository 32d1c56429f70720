"""How a stage's outputs were obtained: evaluated on the whole suite, or reused from the stage it was applied to.

A pass that changed none of the runtime parts its answers depend on (`passes.contract.changed_parts` is
empty: a cast to the dtype the model already has, a pass that is a no-op for this checkpoint) answers
exactly as its parent, so evaluating the suite again would spend minutes to learn nothing. Its stage reuses
the parent's outputs, but only after re-running a seeded sample of the requests on the new runtime and
finding every answer bit-identical (`fidelity.rerun`): a part the comparison cannot see (global state, a
kernel that reads a flag) shows up there, and the run ends with an error naming the stage.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from laya_opt.fidelity.rerun import RerunCheck

EvalKind = Literal["evaluated", "reused", "cached"]   # cached: an earlier run's entry (laya_opt.runs.stagecache)


@dataclass(frozen=True)
class EvalPath:
    kind: EvalKind
    changed: tuple[str, ...] = ()      # the output-determining runtime parts the pass changed (sorted)
    source: int | None = None          # reused: the stage whose outputs were reused (None: the reference)
    rerun: RerunCheck | None = None    # the sample re-run (None: nothing re-run)
    note: str = ""                     # e.g. a stage-cache entry whose sample differed, evaluated in full

    def describe(self) -> str:
        """One line for stages.jsonl, report.md and the console."""
        sample = f"; {self.rerun.describe()}" if self.rerun is not None else "; nothing re-run"
        note = f"; {self.note}" if self.note else ""
        if self.kind == "reused":
            source = "the reference" if self.source is None else f"stage {self.source}"
            return f"reused from {source} (the pass changed no output-determining part{sample}{note})"
        if self.kind == "cached":
            return f"from the stage cache (an earlier run evaluated this runtime{sample}{note})"
        return f"evaluated (changed: {', '.join(self.changed) or 'nothing'}{sample}{note})"

    def to_json(self) -> dict:
        return {"kind": self.kind, "changed": list(self.changed), "source": self.source,
                "rerun_requests": None if self.rerun is None else self.rerun.requests,
                "rerun_questions": None if self.rerun is None else len(self.rerun.keys),
                "rerun_identical": None if self.rerun is None else self.rerun.identical,
                "note": self.note, "summary": self.describe()}


def can_reuse(changed: frozenset[str], rerun: int) -> bool:
    """Reuse needs an empty change set and a sample to check it with (rerun=0 evaluates every stage)."""
    return not changed and rerun > 0


def mismatch_message(index: int, name: str, source: int | None, check: RerunCheck) -> str:
    source_name = "the reference" if source is None else f"stage {source}"
    return (f"stage {index} ({name}): the pass changed no output-determining part, so the outputs of {source_name} "
            f"were to be reused, but its re-run {check.describe()}; the runtime is not deterministic or depends "
            f"on something passes.contract.changed_parts cannot see")
