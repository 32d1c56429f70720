"""Question validation, prompt rendering and piecewise tokenization (spec §6-§7).

The role of each position, shown by `inspect-prompt`, is `laya_opt.core.prompt_roles`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from laya_opt.util.errors import QuestionError
from laya_opt.util.jsonio import check_depth

if TYPE_CHECKING:
    from laya_opt.core.tokens import TextCodec

QTYPES = ("choice", "score", "noul")
QUESTION_FIELDS = ("type", "instructions", "criteria", "labels")

OPTION_TOKEN_CAP = 48          # option text tokens kept per option, marker excluded (§7.3 step 2)
HEAD_OPTION_SLACK = 16         # below this many spare head tokens the options are squeezed (step 4)
MIN_OPTION_TOKENS = 4          # squeezed option length, marker included (step 4)
INSTRUCTION_FLOOR = 8          # header tokens always kept, even when options overflow (step 5)

NOUL_KEYS = ("false", "true")  # slot order: 0 false, 1 true
NOUL_DEFAULT_DESCRIPTIONS = {"false": "no, the statement does not hold", "true": "yes, the statement holds"}
# Labels that would render as Python reprs; JSON never produces tuple/frozenset, so rejecting them costs nothing.
STRUCTURED_LABEL_TYPES = (list, tuple, dict, set, frozenset, bytearray)

# Request limits: far beyond what the token budgets keep (max_len is at most a few thousand tokens), low
# enough that a runaway input fails at once with a message instead of tokenizing for minutes.
MAX_QUESTIONS = 4096           # per request
MAX_STATE_CHARS = 1 << 20      # the serialised state
MAX_QUESTION_CHARS = 1 << 18   # instructions plus option texts of one question, rendered


@dataclass(frozen=True)
class PreparedQuestion:
    """Everything the model and the decoder need for one question; ids are unpadded."""

    qid: str
    type_name: str          # "choice" | "score" | "noul"
    qtype: int              # 0 choice, 1 score, 2 noul
    ids: tuple[int, ...]    # [CLS] header [SEP] [MASK] opt ... [SEP] state [SEP], <= max_len
    markers: tuple[int, ...]  # position of each option marker in ids, one per option
    option_keys: tuple[str, ...]  # answer keys: str(label) (choice), "0".."k-1" (score), ("false", "true") (noul)
    legend: tuple = ()      # score only: raw criterion values, level 0 first

    @property
    def length(self) -> int:
        return len(self.ids)

    @property
    def option_count(self) -> int:
        return len(self.option_keys)


@dataclass(frozen=True)
class QuestionSpec:
    """A validated question with its model-facing texts rendered (§7.1), before mask cleaning and tokenization."""

    qid: str
    type_name: str
    qtype: int
    instructions: str               # rendered instructions (JSON text when the caller gave a non-string)
    option_texts: tuple[str, ...]   # model-facing option texts, one per marker, slot order
    option_keys: tuple[str, ...]    # answer keys, same order as option_texts
    legend: tuple = ()              # score only: raw level values, level 0 first

    @property
    def header(self) -> str:
        return f"{self.type_name} question: {self.instructions}"

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """What makes two questions the same to the model: type, rendered instructions and options."""
        return self.type_name, self.instructions, self.option_texts

    @property
    def option_count(self) -> int:
        return len(self.option_texts)


@dataclass(frozen=True)
class QuestionPrefix:
    """`[CLS] header [SEP] [MASK] opt_0 ... [MASK] opt_k-1 [SEP]`: depends only on the question and head budget."""

    ids: tuple[int, ...]
    markers: tuple[int, ...]


@dataclass(frozen=True)
class StateTokens:
    """The request state tokenized once; `keep_end` is true for list (conversation) states."""

    ids: tuple[int, ...]
    keep_end: bool

    def kept(self, room: int) -> tuple[int, ...]:
        # Slicing with len - room (not -room) so that room = 0 keeps nothing (§13 pitfall 8).
        if self.keep_end:
            return self.ids[max(0, len(self.ids) - room):]
        return self.ids[:room]


# ---------------------------------------------------------------------------------------------------------------------
# Text rendering (§7.1, §7.2)


def _json_text(value: Any) -> str:
    # ", "/": " are json's defaults without indent; spelled out because the spec pins them.
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def render_value(value: Any) -> str:
    """A criterion or instruction value as model-facing text: strings verbatim, anything else compact JSON."""
    return value if isinstance(value, str) else _json_text(value)


def serialize_state(state: Any) -> str:
    """State text (§7.1): a str verbatim, anything else json.dumps with default separators and no key sorting."""
    check_depth(state, "state", QuestionError)  # a str is depth 0
    try:
        text = state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise QuestionError(f"state is not JSON-serialisable: {exc}") from None
    if len(text) > MAX_STATE_CHARS:
        raise QuestionError(f"state: {len(text):,} characters, more than the {MAX_STATE_CHARS:,} allowed")
    return text


def clean_mask_literals(text: str, mask_token: str) -> str:
    """Replace every literal mask string by one space so user text can never create a marker (§7.2)."""
    if not mask_token:
        return text  # "".replace("", " ") would interleave spaces everywhere
    return text.replace(mask_token, " ")


# ---------------------------------------------------------------------------------------------------------------------
# Validation (§6)


def _fail(qid: Any, message: str) -> QuestionError:
    return QuestionError(f"question {qid!r}: {message}")


def _render_for(qid: Any, what: str, value: Any) -> str:
    try:
        return render_value(value)
    except (TypeError, ValueError) as exc:  # e.g. non-string dict keys inside a tuple key, circular references
        raise _fail(qid, f"{what} is not JSON-serialisable ({exc})") from None


def _render_instructions(qid: Any, definition: Mapping) -> str:
    instructions = definition.get("instructions")
    if instructions is None:
        raise _fail(qid, "'instructions' is missing")
    return _render_for(qid, "instructions", instructions)


def _check_type(qid: Any, definition: Mapping) -> str:
    type_name = definition.get("type")
    if not isinstance(type_name, str) or type_name not in QTYPES:
        raise _fail(qid, f"unknown type {type_name!r}; expected one of {', '.join(QTYPES)}")
    return type_name


def _is_duplicate(label: Any, hashed: set, unhashable: list) -> bool:
    # Python equality, so 1, 1.0 and True collide; set lookup is that equality for hashable labels.
    try:
        if label in hashed:
            return True
        hashed.add(label)
        return False
    except TypeError:
        if any(label == other for other in unhashable):
            return True
        unhashable.append(label)
        return False


def _check_choice_labels(qid: Any, labels: list) -> None:
    hashed: set = set()
    unhashable: list = []
    keys: dict[str, Any] = {}
    for label in labels:
        if label is None:
            raise _fail(qid, "choice label is null")
        if isinstance(label, STRUCTURED_LABEL_TYPES):
            raise _fail(qid, f"choice label {label!r} is structured ({type(label).__name__}); use a scalar")
        if _is_duplicate(label, hashed, unhashable):
            raise _fail(qid, f"duplicate choice label {label!r}")
        key = str(label)
        if key in keys:  # distinct values such as 1 and "1" would share one answer key
            raise _fail(qid, f"choice labels {keys[key]!r} and {label!r} share the answer key {key!r}")
        keys[key] = label


def _choice_text(qid: Any, label: Any, description: Any) -> str:
    # 0 and False are real descriptions; only None and "" mean "label only".
    if description is None or (isinstance(description, str) and description == ""):
        return str(label)
    return f"{label}: {_render_for(qid, f'description of choice {label!r}', description)}"


def _choice_options(qid: Any, criteria: Any, _labels: Any) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
    if isinstance(criteria, Mapping):
        pairs = list(criteria.items())
    elif isinstance(criteria, list):
        pairs = [(label, None) for label in criteria]
    else:
        raise _fail(qid, f"choice criteria must be a non-empty dict or list, got {type(criteria).__name__}")
    if not pairs:
        raise _fail(qid, "choice criteria are empty")
    _check_choice_labels(qid, [label for label, _ in pairs])
    texts = tuple(_choice_text(qid, label, description) for label, description in pairs)
    return texts, tuple(str(label) for label, _ in pairs), ()


def _score_options(qid: Any, criteria: Any, _labels: Any) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
    if not isinstance(criteria, list):
        raise _fail(qid, "score criteria must be a non-empty list of level descriptions, "
                         f"got {type(criteria).__name__}")
    if not criteria:
        raise _fail(qid, "score criteria are empty")
    for level, value in enumerate(criteria):
        if value is None:
            raise _fail(qid, f"score level {level} is null")
    texts = tuple(f"level {level}: {_render_for(qid, f'score level {level}', value)}"
                  for level, value in enumerate(criteria))
    return texts, tuple(str(level) for level in range(len(criteria))), tuple(criteria)


def _noul_key(key: Any) -> str | None:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, str) and key.lower() in NOUL_KEYS:
        return key.lower()
    return None


def _noul_mapping(qid: Any, table: Mapping, field_name: str) -> dict[str, Any]:
    """Normalise true/false keys (case-insensitive, Python bools); unknown or repeated keys are errors."""
    normalised: dict[str, Any] = {}
    for key, value in table.items():
        slot = _noul_key(key)
        if slot is None:
            raise _fail(qid, f"noul {field_name} key {key!r} is not 'false' or 'true'")
        if slot in normalised:
            raise _fail(qid, f"noul {field_name} repeat the key {slot!r}")
        normalised[slot] = value
    return normalised


def _noul_words(qid: Any, labels: Any) -> dict[str, str]:
    if labels is None:
        return {key: key for key in NOUL_KEYS}
    if not isinstance(labels, Mapping):
        raise _fail(qid, f"noul labels must be a dict with keys false and true, got {type(labels).__name__}")
    words = _noul_mapping(qid, labels, "labels")
    if set(words) != set(NOUL_KEYS):
        raise _fail(qid, f"noul labels must have exactly the keys false and true, got {sorted(words)}")
    for slot, word in words.items():
        if not isinstance(word, str) or not word.strip():
            raise _fail(qid, f"noul label for {slot} must be a non-empty string, got {word!r}")
    stripped = {slot: word.strip() for slot, word in words.items()}
    if stripped["false"] == stripped["true"]:
        raise _fail(qid, f"noul labels must differ, both are {stripped['true']!r}")
    return stripped


def _noul_options(qid: Any, criteria: Any, labels: Any) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
    if criteria is None:
        descriptions: dict[str, Any] = {}
    elif isinstance(criteria, Mapping):
        descriptions = _noul_mapping(qid, criteria, "criteria")
    else:
        raise _fail(qid, f"noul criteria must be a dict with keys false/true or absent, got {type(criteria).__name__}")
    words = _noul_words(qid, labels)
    texts = tuple(f"{words[slot]}: {_noul_description(qid, slot, descriptions.get(slot))}" for slot in NOUL_KEYS)
    return texts, NOUL_KEYS, ()


def _noul_description(qid: Any, slot: str, value: Any) -> str:
    if value is None or (isinstance(value, str) and value == ""):
        return NOUL_DEFAULT_DESCRIPTIONS[slot]
    return _render_for(qid, f"noul {slot} description", value)


_OPTION_BUILDERS = {"choice": _choice_options, "score": _score_options, "noul": _noul_options}


def validate_question(qid: Any, definition: Any) -> QuestionSpec:
    """Validate one question definition (§6) and render its texts (§7.1)."""
    if not isinstance(definition, Mapping):
        raise _fail(qid, f"definition must be a dict, got {type(definition).__name__}")
    check_depth(definition, f"question {qid!r}", QuestionError)
    unknown = [str(key) for key in definition if key not in QUESTION_FIELDS]
    if unknown:  # a misspelt field (e.g. "lables") would otherwise change the answer silently
        raise _fail(qid, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(QUESTION_FIELDS)}")
    type_name = _check_type(qid, definition)
    instructions = _render_instructions(qid, definition)
    labels = definition.get("labels")
    if labels is not None and type_name != "noul":
        raise _fail(qid, f"'labels' is only allowed on noul questions, not {type_name}")
    texts, keys, legend = _OPTION_BUILDERS[type_name](qid, definition.get("criteria"), labels)
    size = len(instructions) + sum(map(len, texts))
    if size > MAX_QUESTION_CHARS:
        raise _fail(qid, f"instructions and options render to {size:,} characters, more than the "
                         f"{MAX_QUESTION_CHARS:,} allowed")
    return QuestionSpec(qid=qid, type_name=type_name, qtype=QTYPES.index(type_name), instructions=instructions,
                        option_texts=texts, option_keys=keys, legend=legend)


def validate_questions(questions: Any) -> list[QuestionSpec]:
    """Validate an ordered mapping question id -> definition; the caller's order is kept."""
    if not isinstance(questions, Mapping):
        raise QuestionError(f"questions must be a dict of question id -> definition, got {type(questions).__name__}")
    if len(questions) > MAX_QUESTIONS:
        raise QuestionError(f"questions: {len(questions):,} in one request, more than the {MAX_QUESTIONS:,} allowed")
    return [validate_question(qid, definition) for qid, definition in questions.items()]


# ---------------------------------------------------------------------------------------------------------------------
# Token layout (§7.3)


def check_budgets(max_len: Any, head_max_len: Any) -> None:
    for name, value in (("max_len", max_len), ("head_max_len", head_max_len)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 4 < head_max_len < max_len:
        raise ValueError(f"need 4 < head_max_len < max_len, got head_max_len={head_max_len}, max_len={max_len}")


def prefix_texts(spec: QuestionSpec, mask_token: str) -> tuple[str, tuple[str, ...]]:
    """The pieces a question prefix tokenizes, each separately (§7.3 steps 1-2): header, then " " + option."""
    header = f"{spec.type_name} question: {clean_mask_literals(spec.instructions, mask_token)}"
    return header, tuple(" " + clean_mask_literals(text, mask_token) for text in spec.option_texts)


def _option_pieces(option_texts: tuple[str, ...], codec: TextCodec, head_max_len: int) -> list[list[int]]:
    pieces = [[codec.mask_id] + codec.encode(text)[:OPTION_TOKEN_CAP] for text in option_texts]
    if head_max_len - sum(map(len, pieces)) < HEAD_OPTION_SLACK:
        per_option = max(MIN_OPTION_TOKENS, (head_max_len - HEAD_OPTION_SLACK) // max(1, len(pieces)))
        pieces = [piece[:per_option] for piece in pieces]
    return pieces


def build_prefix(spec: QuestionSpec, codec: TextCodec, head_max_len: int) -> QuestionPrefix:
    """Steps 1-6 of §7.3; the result depends only on the question, the codec and head_max_len (cacheable)."""
    header, option_texts = prefix_texts(spec, codec.mask_token)
    header_ids = codec.encode(header)
    pieces = _option_pieces(option_texts, codec, head_max_len)
    option_budget = head_max_len - sum(map(len, pieces))
    ids = [codec.cls_id] + header_ids[: max(INSTRUCTION_FLOOR, option_budget)] + [codec.sep_id]
    markers = []
    for piece in pieces:
        markers.append(len(ids))
        ids.extend(piece)
    ids.append(codec.sep_id)
    return QuestionPrefix(ids=tuple(ids), markers=tuple(markers))


def tokenize_state(state: Any, codec: TextCodec) -> StateTokens:
    """Serialise, clean and tokenize the state once per request (§7.5); list states are conversations."""
    text = clean_mask_literals(serialize_state(state), codec.mask_token)
    return StateTokens(ids=tuple(codec.encode(text)), keep_end=isinstance(state, (list, tuple)))


def assemble_question(spec: QuestionSpec, prefix: QuestionPrefix, state: StateTokens, codec: TextCodec, max_len: int,
                      head_max_len: int) -> PreparedQuestion:
    """Steps 7-10 of §7.3: fit the state into the room left, cut to max_len, require every marker to survive."""
    room = max(0, max_len - len(prefix.ids) - 1)
    ids = (prefix.ids + state.kept(room) + (codec.sep_id,))[:max_len]
    markers = tuple(position for position in prefix.markers if position < max_len)
    if len(markers) < spec.option_count:
        raise QuestionError(f"question {spec.qid} options exceed head_max_len={head_max_len}")
    return PreparedQuestion(qid=spec.qid, type_name=spec.type_name, qtype=spec.qtype, ids=ids, markers=markers,
                            option_keys=spec.option_keys, legend=spec.legend)


def build_prefixes(specs: Sequence[QuestionSpec], codec: TextCodec, head_max_len: int) -> list[QuestionPrefix]:
    return [build_prefix(spec, codec, head_max_len) for spec in specs]


# prefixes(specs, codec, head_max_len) -> one QuestionPrefix per spec (a cache may replace it, spec §7.5)
PrefixFn = Callable[[Sequence[QuestionSpec], "TextCodec", int], list[QuestionPrefix]]


def prepare_request(state: Any, questions: Any, codec: TextCodec, max_len: int, head_max_len: int,
                    prefixes: PrefixFn = build_prefixes) -> tuple[PreparedQuestion, ...]:
    """Validate, render and tokenize every question of one request, in the caller's order (§6-§7)."""
    check_budgets(max_len, head_max_len)
    specs = validate_questions(questions)
    if not specs:
        return ()  # an empty request tokenizes nothing
    state_tokens = tokenize_state(state, codec)
    return tuple(assemble_question(spec, prefix, state_tokens, codec, max_len, head_max_len)
                 for spec, prefix in zip(specs, prefixes(specs, codec, head_max_len)))
