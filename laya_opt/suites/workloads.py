"""Benchmark workloads (spec §11.1, §12.12) built deterministically from the held-out suite.

| name     | requests | questions per request                                              |
|----------|----------|--------------------------------------------------------------------|
| short-1  | 1        | 1 question on a short state                                         |
| short-16 | 1        | 16 distinct short questions on one short state                      |
| short-50 | 1        | 50 distinct short questions on one short state                      |
| long-1   | 1        | 1 question on a state far longer than max_len (256 tokens)          |
| long-10  | 1        | 10 distinct questions on that long state                            |
| mixed    | 1        | 49 distinct short questions + 1 long-prompt question (the held-out  |
|          |          | choice with the most options), last; rows differ a lot in length    |

"Distinct" means no two questions share (type, rendered instructions, rendered options). Questions come
from the suite in file order, those in the state's language first; question ids are q00, q01, ...
Labels are irrelevant for timing, so most questions are not about the workload's state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from laya_opt.util.errors import InputError
from laya_opt.util.resources import is_suite_path, suite_names, suite_path, suites_dir

from laya_opt.suites.suite_file import Suite, SuiteRecord, load_suite, question_key

WORKLOADS = ("short-1", "short-16", "short-50", "long-1", "long-10", "mixed")
SHORT_MAX_OPTIONS = 5


@dataclass(frozen=True)
class Workload:
    name: str
    requests: tuple[tuple[Any, dict[str, dict]], ...]   # (state, questions) pairs
    description: str

    @property
    def n_questions(self) -> int:
        return sum(len(questions) for _, questions in self.requests)


def _language(record: SuiteRecord) -> str:
    return next(iter(record.tags.values())).language


def _first_state(suite: Suite, length_class: str) -> SuiteRecord:
    """First record of the class with a non-list state (list states are left-truncated)."""
    for record in suite.records:
        tag = next(iter(record.tags.values()))
        if tag.length_class == length_class and not isinstance(record.state, list):
            return record
    raise ValueError(f"{suite.path}: no {length_class} record with a string or object state")


def _distinct_questions(suite: Suite, base: SuiteRecord, n: int, short_only: bool,
                        skip: set | None = None) -> list[dict]:
    """The base record's questions first, then the suite's (same language first), deduplicated."""
    pairs = [(base, qid) for qid in base.questions]
    ordered = list(suite.questions())
    lang = _language(base)
    pairs += [p for p in ordered if _language(p[0]) == lang] + [p for p in ordered if _language(p[0]) != lang]
    seen = set(skip or ())
    out: list[dict] = []
    for record, qid in pairs:
        q, tag = record.questions[qid], record.tags[qid]
        if short_only and tag.options > SHORT_MAX_OPTIONS:
            continue
        key = question_key(q)
        if key in seen:
            continue
        seen.add(key)
        out.append(q)
        if len(out) == n:
            return out
    raise ValueError(f"{suite.path}: only {len(out)} distinct questions available, need {n}")


def _longest_prompt_question(suite: Suite) -> dict:
    record, qid = max(suite.questions(), key=lambda p: (p[0].tags[p[1]].options,
                                                        sum(map(len, question_key(p[0].questions[p[1]])[2]))))
    return record.questions[qid]


def _numbered(questions: list[dict]) -> dict[str, dict]:
    return {f"q{i:02d}": q for i, q in enumerate(questions)}


def build_workload(name: str, suite: Suite | None = None) -> Workload:
    """Workload `name` built from `suite` (default: the bundled held-out suite)."""
    if name not in WORKLOADS:
        raise InputError(f"unknown workload {name!r}; known workloads: {', '.join(WORKLOADS)}")
    suite = suite or load_suite(suites_dir() / "heldout.jsonl")
    if name.startswith(("short-", "long-")):
        length_class, n = name.split("-")
        base = _first_state(suite, length_class)
        questions = _distinct_questions(suite, base, int(n), short_only=length_class == "short")
        kind = "short question(s) on short state" if length_class == "short" else \
            "question(s) on long state"
        suffix = "" if length_class == "short" else " (longer than max_len)"
        return Workload(name, ((base.state, _numbered(questions)),), f"{n} distinct {kind} {base.id}{suffix}")
    base = _first_state(suite, "short")
    long_q = _longest_prompt_question(suite)
    questions = _distinct_questions(suite, base, 49, short_only=True, skip={question_key(long_q)})
    return Workload(name, ((base.state, _numbered(questions + [long_q])),),
                    f"49 distinct short questions + 1 long-prompt question ({len(long_q['criteria'])} "
                    f"options, last) on short state {base.id}")


def check_requests_name(name: str, what: str = "requests") -> None:
    """A suite (bundled name or .jsonl path) or a workload name; anything else names the choices."""
    if name in WORKLOADS or (is_suite_path(name) and suite_path(name, what)) or name in suite_names():
        return
    raise InputError(f"{what}: {name!r} is neither a suite ({', '.join(suite_names())}, or a .jsonl path) "
                     f"nor a workload ({', '.join(WORKLOADS)})")


def named_requests(name: str) -> tuple[tuple[Any, dict], ...]:
    """(state, questions) pairs of a suite, else of the workload `name` (what passes may ask for by name)."""
    check_requests_name(name)
    if name in WORKLOADS:
        return build_workload(name).requests
    return tuple((record.state, record.questions) for record in load_suite(suite_path(name)).records)
