"""Labelled evaluation suites: a JSONL file with a header line and one record per line.

Line 1: `{"suite": name, "version": 1, "generator_seed": int|null, "description": str[, "selected_under": {...}]}`
(`selected_under`: a suite chosen with a reference model records that model's checkpoint digests).
Then one record per line::

    {"id": str, "state": str | dict | [{"role": str, "content": str}, ...],
     "questions": {qid: definition (spec §6)},
     "labels": {qid: label},   # choice: option label (str); score: level index (int); noul: bool
     "tags": {qid: {"type", "language", "options", "length_class", "duplicate_of"[, "phenomenon"]}}}

`phenomenon` (optional, one of PHENOMENA) names what makes a question hard (`laya_opt.suites.synthetic.hard_cases`).
`variant_of` and `variant` (optional, together) mark a question that repeats an earlier question of the
same record with one field changed (`variant`, one of VARIANTS; `suites.synthetic.gate_pool`).

`load_suite` validates strictly; every problem is a `SuiteError` naming the file and 1-based line.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from laya_opt.util import errors
from laya_opt.util.jsonio import loads
from laya_opt.core.prompt import QTYPES, QuestionSpec, validate_question  # noqa: F401 (QTYPES re-exported)

from laya_opt.suites.synthetic.lexicon import LANGUAGES

SUITE_VERSION = 1
LENGTH_CLASSES = ("short", "medium", "long")
HEADER_KEYS = ("suite", "version", "generator_seed", "description")
OPTIONAL_HEADER_KEYS = ("selected_under",)   # written only when set: suites without it keep their bytes
RECORD_KEYS = ("id", "state", "questions", "labels", "tags")
TAG_KEYS = ("type", "language", "options", "length_class", "duplicate_of")
OPTIONAL_TAG_KEYS = ("phenomenon", "variant_of", "variant")   # written only when set: other suites keep their bytes
NOUL_TRUE = 1  # noul slot order is [false, true]
PHENOMENA = ("standard", "paraphrase", "distractor", "close", "absent_fact", "negation_word", "retracted",
             "fact_phrasing", "urgency_phrasing")
VARIANTS = ("option_order", "option_text", "type")   # the one field a variant question changes


class SuiteError(errors.SuiteError):
    """A malformed suite file; the message starts with `path:line:`."""

    def __init__(self, path: str | Path, line: int, message: str):
        self.path = str(path)
        self.line = line
        super().__init__(f"{path}:{line}: {message}")


@dataclass(frozen=True)
class QuestionTag:
    type: str
    language: str
    options: int
    length_class: str
    duplicate_of: str | None = None
    phenomenon: str | None = None
    variant_of: str | None = None    # the qid (same record) this question repeats with one field changed
    variant: str | None = None       # which field: one of VARIANTS

    def to_json(self) -> dict:
        out = {"type": self.type, "language": self.language, "options": self.options,
               "length_class": self.length_class, "duplicate_of": self.duplicate_of}
        out.update({key: getattr(self, key) for key in OPTIONAL_TAG_KEYS if getattr(self, key) is not None})
        return out


@dataclass(frozen=True)
class SuiteRecord:
    """One state with its labelled questions. Treat the dicts as read-only."""

    id: str
    state: Any
    questions: dict[str, dict]
    labels: dict[str, Any]
    tags: dict[str, QuestionTag]

    def to_json(self) -> dict:
        return {"id": self.id, "state": self.state, "questions": self.questions, "labels": self.labels,
                "tags": {qid: tag.to_json() for qid, tag in self.tags.items()}}


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    path: str
    records: tuple[SuiteRecord, ...]
    sha256: str
    generator_seed: int | None = None
    description: str = ""
    selected_under: dict | None = None   # the reference checkpoint a model-selected suite was chosen under

    def questions(self) -> Iterator[tuple[SuiteRecord, str]]:
        """Every (record, qid) pair in file order."""
        for record in self.records:
            for qid in record.questions:
                yield record, qid

    @property
    def n_questions(self) -> int:
        return sum(len(r.questions) for r in self.records)


def question_key(question: dict) -> tuple[str, str, tuple[str, ...]]:
    """Identity of a question for distinctness, by the one question schema (laya_opt.core.prompt, spec §6-§7.1)."""
    return validate_question("?", question).key


# --- Validation --------------------------------------------------------------------------------------

def _exact_keys(obj: Any, keys: Sequence[str], what: str, optional: Sequence[str] = ()) -> str | None:
    if not isinstance(obj, dict):
        return f"{what} must be a JSON object, got {type(obj).__name__}"
    missing = [k for k in keys if k not in obj]
    unknown = [k for k in obj if k not in keys and k not in optional]
    if missing:
        return f"{what} is missing key(s) {missing}"
    if unknown:
        return f"{what} has unknown key(s) {unknown}"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_state(state: Any) -> str | None:
    if isinstance(state, (str, dict)):
        return None
    if isinstance(state, list):
        for i, turn in enumerate(state):
            if (not isinstance(turn, dict) or set(turn) != {"role", "content"}
                    or not isinstance(turn["role"], str) or not isinstance(turn["content"], str)):
                return f"state turn {i} must be {{'role': str, 'content': str}}"
        return None
    return f"state must be a string, an object or a list of turns, got {type(state).__name__}"


def validate_label(spec: QuestionSpec, label: Any) -> str | None:
    """A choice label names an option key (str), a score label a level index, a noul label is a bool."""
    if spec.type_name == "choice":
        if not isinstance(label, str) or label not in spec.option_keys:
            return f"label of {spec.qid!r} ({label!r}) is not one of its options"
    elif spec.type_name == "score":
        if not _is_int(label) or not 0 <= label < spec.option_count:
            return f"score label of {spec.qid!r} ({label!r}) is not a level index in [0, {spec.option_count - 1}]"
    elif not isinstance(label, bool):
        return f"noul label of {spec.qid!r} must be a bool, got {label!r}"
    return None


def validate_tag(spec: QuestionSpec, tag: Any) -> str | None:
    qid = spec.qid
    problem = _exact_keys(tag, TAG_KEYS, f"tags of {qid!r}", OPTIONAL_TAG_KEYS)
    if problem:
        return problem
    if "phenomenon" in tag and tag["phenomenon"] not in PHENOMENA:
        return f"tags of {qid!r}: phenomenon {tag['phenomenon']!r} not in {list(PHENOMENA)}"
    if ("variant" in tag) != ("variant_of" in tag):
        return f"tags of {qid!r}: variant and variant_of go together"
    if "variant" in tag and tag["variant"] not in VARIANTS:
        return f"tags of {qid!r}: variant {tag['variant']!r} not in {list(VARIANTS)}"
    if tag["type"] != spec.type_name:
        return f"tags of {qid!r}: type {tag['type']!r} does not match the question type {spec.type_name!r}"
    if tag["language"] not in LANGUAGES:
        return f"tags of {qid!r}: unknown language {tag['language']!r}; known {list(LANGUAGES)}"
    k = spec.option_count
    if not _is_int(tag["options"]) or tag["options"] != k:
        return f"tags of {qid!r}: options {tag['options']!r} but the question has {k}"
    if tag["length_class"] not in LENGTH_CLASSES:
        return f"tags of {qid!r}: length_class {tag['length_class']!r} not in {list(LENGTH_CLASSES)}"
    dup = tag["duplicate_of"]
    if dup is not None and (not isinstance(dup, str) or dup.count("/") < 1):
        return f"tags of {qid!r}: duplicate_of must be null or '<record id>/<qid>'"
    return None


def _validate_header(obj: Any) -> str | None:
    problem = _exact_keys(obj, HEADER_KEYS, "header", OPTIONAL_HEADER_KEYS)
    if problem:
        return problem
    if not isinstance(obj["suite"], str) or not obj["suite"]:
        return "header: suite must be a non-empty string"
    if not _is_int(obj["version"]) or obj["version"] != SUITE_VERSION:
        return f"header: unsupported version {obj['version']!r} (expected {SUITE_VERSION})"
    if obj["generator_seed"] is not None and not _is_int(obj["generator_seed"]):
        return "header: generator_seed must be an integer or null"
    if not isinstance(obj["description"], str):
        return "header: description must be a string"
    if "selected_under" in obj and not (isinstance(obj["selected_under"], dict) and obj["selected_under"]):
        return "header: selected_under must be a non-empty object"
    return None


def _validate_record(obj: Any, seen: dict[str, SuiteRecord]) -> tuple[SuiteRecord | None, str | None]:
    problem = _exact_keys(obj, RECORD_KEYS, "record")
    if problem:
        return None, problem
    rid = obj["id"]
    if not isinstance(rid, str) or not rid or "/" in rid:
        return None, "record id must be a non-empty string without '/'"
    if rid in seen:
        return None, f"duplicate record id {rid!r}"
    problem = validate_state(obj["state"])
    if problem:
        return None, f"record {rid!r}: {problem}"
    questions, labels, tags = obj["questions"], obj["labels"], obj["tags"]
    for name, value in (("questions", questions), ("labels", labels), ("tags", tags)):
        if not isinstance(value, dict):
            return None, f"record {rid!r}: {name} must be an object"
    if not questions:
        return None, f"record {rid!r}: no questions"
    for name, value in (("labels", labels), ("tags", tags)):
        if list(value) != list(questions):
            return None, (f"record {rid!r}: {name} keys {list(value)} do not match the question ids "
                          f"{list(questions)}")
    parsed_tags = {}
    for qid, q in questions.items():
        if not qid:
            return None, f"record {rid!r}: empty question id"
        try:
            spec = validate_question(qid, q)
        except ValueError as exc:
            return None, f"record {rid!r}: {exc}"
        problem = validate_label(spec, labels[qid]) or validate_tag(spec, tags[qid])
        if problem:
            return None, f"record {rid!r}: {problem}"
        parsed_tags[qid] = QuestionTag(**tags[qid])
    record = SuiteRecord(rid, obj["state"], questions, labels, parsed_tags)
    problem = _check_variants(record)
    if problem:
        return None, f"record {rid!r}: {problem}"
    for qid, tag in parsed_tags.items():
        if tag.duplicate_of is not None:
            problem = _check_duplicate(record, qid, tag.duplicate_of, seen)
            if problem:
                return None, f"record {rid!r}: {problem}"
    return record, None


def _check_variants(record: SuiteRecord) -> str | None:
    """variant_of names an earlier question of the same record."""
    order = list(record.questions)
    for qid, tag in record.tags.items():
        if tag.variant_of is not None and (tag.variant_of not in record.questions
                                           or order.index(tag.variant_of) >= order.index(qid)):
            return f"variant_of {tag.variant_of!r} of {qid!r} must name an earlier question of the record"
    return None


def _check_duplicate(record: SuiteRecord, qid: str, ref: str, seen: dict[str, SuiteRecord]) -> str | None:
    """duplicate_of must point at an earlier question with the same state, definition and label."""
    ref_rid, _, ref_qid = ref.partition("/")
    if ref_rid == record.id:
        order = list(record.questions)
        if ref_qid not in record.questions or order.index(ref_qid) >= order.index(qid):
            return f"duplicate_of {ref!r} of {qid!r} must name an earlier question"
        target = record
    else:
        target = seen.get(ref_rid)
        if target is None or ref_qid not in target.questions:
            return f"duplicate_of {ref!r} of {qid!r} names no earlier question"
    if (target.state != record.state or target.questions[ref_qid] != record.questions[qid]
            or target.labels[ref_qid] != record.labels[qid]):
        return f"duplicate_of {ref!r} of {qid!r}: state, definition or label differ from the original"
    return None


def parse_suite(data: bytes, path: str | Path = "<suite>") -> Suite:
    """Parse and validate suite bytes; `path` only names the source in error messages."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SuiteError(path, line, f"invalid UTF-8 ({exc.reason})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise SuiteError(path, 1, "empty file: expected a header line")
    header = None
    records: dict[str, SuiteRecord] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            raise SuiteError(path, lineno, "empty line")
        try:
            obj = loads(line, "record" if lineno > 1 else "header")
        except errors.InputError as exc:
            raise SuiteError(path, lineno, str(exc)) from None
        if lineno == 1:
            problem = _validate_header(obj)
            if problem:
                raise SuiteError(path, lineno, problem)
            header = obj
            continue
        record, problem = _validate_record(obj, records)
        if problem:
            raise SuiteError(path, lineno, problem)
        records[record.id] = record
    if not records:
        raise SuiteError(path, len(lines), "suite has no records")
    return Suite(name=header["suite"], version=header["version"], path=str(path),
                 records=tuple(records.values()), sha256=hashlib.sha256(data).hexdigest(),
                 generator_seed=header["generator_seed"], description=header["description"],
                 selected_under=header.get("selected_under"))


def load_suite(path: str | Path) -> Suite:
    path = Path(path)
    return parse_suite(path.read_bytes(), path)


def dump_suite(name: str, records: Sequence[SuiteRecord], *, generator_seed: int | None,
               description: str, selected_under: dict | None = None) -> bytes:
    """Serialise a suite (deterministic bytes) and validate it by parsing it back."""
    header = {"suite": name, "version": SUITE_VERSION, "generator_seed": generator_seed,
              "description": description}
    if selected_under is not None:
        header["selected_under"] = selected_under
    lines = [json.dumps(header, ensure_ascii=False)]
    lines.extend(json.dumps(record.to_json(), ensure_ascii=False) for record in records)
    data = ("\n".join(lines) + "\n").encode("utf-8")
    parse_suite(data, f"<{name}>")
    return data


def label_index(key: str, type_name: str, option_keys: Sequence[str], label: Any) -> int | None:
    """The option a suite label names: choice label string, score level, noul bool."""
    if label is None:
        return None
    if type_name == "noul":
        if not isinstance(label, bool):
            raise ValueError(f"question {key}: noul label must be true/false, got {label!r}")
        return NOUL_TRUE if label else 0
    if type_name == "score":
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(option_keys):
            raise ValueError(f"question {key}: score label must be a level in 0..{len(option_keys) - 1}, "
                             f"got {label!r}")
        return label
    if str(label) not in option_keys:
        raise ValueError(f"question {key}: choice label {label!r} is not one of {list(option_keys)}")
    return option_keys.index(str(label))
