"""Seeded generator of labelled typed-decision records (one state + 1-6 questions about it).

A record's state mentions a few decisive facts ("slots"): a department cue, a product cue, an urgency or
mood term, a rating, a log level, or yes/no facts stated or explicitly negated. Every question asks about
one slot, and its label follows from lexical matching between the state and the question/options.

Splits: `train` and `calib` use the training templates, `heldout` and `validation` their own disjoint
templates (`laya_opt.suites.synthetic.templates`); all share the lexicon (`laya_opt.suites.synthetic.lexicon`).
`laya_opt.suites.synthetic.hard_cases` builds the records no lexical heuristic solves from the same parts.
Only `random.Random` instances seeded from (split, seed) are used, so output depends on nothing but the
arguments.

Truncation-aware layout: long non-list states put every decisive sentence near the start (the runtime
keeps the first tokens); list states (chats) put them in the newest turns (it keeps the last tokens).
"""
from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator

from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.core.prompt import validate_question

from laya_opt.suites.suite_file import QuestionTag, SuiteRecord
from laya_opt.suites.synthetic.templates import TemplateGroup, templates_for
from laya_opt.suites.synthetic.fact_phrasings import with_fact_phrasings
from laya_opt.suites.synthetic.topic_frames import URGENCY_BANDS, varied_group, with_noul_frames, with_urgency_phrases

SPLITS = ("train", "calib", "heldout", "validation")
KINDS = ("ticket", "email", "chat", "json", "log")
MASK_LITERAL = "[MASK]"

_KIND_WEIGHTS = (0.25, 0.20, 0.25, 0.15, 0.15)
_LENGTH_WEIGHTS = {"short": 0.45, "medium": 0.30, "long": 0.25}
_NQ_WEIGHTS = (0.15, 0.20, 0.20, 0.18, 0.14, 0.13)          # 1..6 questions
_MAX_SLOTS = {"short": 4, "medium": 4, "long": 3}           # decisive facts per state
_SLOT_WEIGHTS = {"department": 3.0, "product": 2.0, "urgency": 2.0, "mood": 1.5, "rating": 1.0, "fact": 3.0}
_LOG_SLOTS = ("department", "product", "fact")
# Minimum characters of a long state: comfortably above 256 tokens of the project tokenizer.
_LONG_CHARS = {"zh": 800, "ja": 800}
_LONG_CHARS_DEFAULT = 1600
_CHANNELS = ("web", "app", "portal")
_SERVICES = ("gateway", "worker", "scheduler", "api", "ingest", "notifier")
# Fixed words of the state layouts (JSON keys, chat roles, log parts): no cue term may equal one.
LAYOUT_WORDS = ("role", "content", "user", "assistant", "INFO", "intake", "ID", "session token", "example.com",
                *_CHANNELS, *_SERVICES)


@dataclass(frozen=True)
class Slot:
    kind: str          # department | product | urgency | mood | rating | severity | fact
    value: Any         # concept id | term index | low/high (urgency phrase) | (n, m) | level index | (fact id, holds)
    sentence: str      # decisive state sentence ("" for severity: it is the alert line's level)


def _rng(split: str, seed: int) -> random.Random:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return random.Random(f"laya-fidelity/{split}/{seed}")


def _weighted(rng: random.Random, items, weights):
    return rng.choices(list(items), weights=list(weights), k=1)[0]


def _join(lang: str, sentences) -> str:
    return ("" if lang in lx.CJK_LANGUAGES else " ").join(sentences)


# --- Slots ---------------------------------------------------------------------------------------------

def _pick_slot_kinds(rng: random.Random, kind: str, length: str, n_questions: int) -> list[str]:
    cap = _MAX_SLOTS[length]
    chosen: list[str] = ["severity"] if kind == "log" else []
    allowed = _LOG_SLOTS if kind == "log" else tuple(_SLOT_WEIGHTS)
    target = rng.randint(max(1, (n_questions + 1) // 2), max(1, min(n_questions, cap)))
    target = max(target, len(chosen))
    while len(chosen) < target:
        options = [s for s in allowed if s == "fact" and chosen.count("fact") < 3 or s not in chosen]
        if not options:
            break
        chosen.append(_weighted(rng, options, [_SLOT_WEIGHTS[s] for s in options]))
    return chosen


def _make_slots(rng: random.Random, tg: TemplateGroup, lang: str, kinds: list[str]) -> list[Slot]:
    slots: list[Slot] = []
    facts = rng.sample(sorted(lx.FACTS), 3)
    for kind in kinds:
        if kind in ("department", "product"):
            pool = lx.DEPARTMENTS if kind == "department" else lx.PRODUCTS
            cid = rng.choice(sorted(pool))
            cue = rng.choice(pool[cid][lang].cues)
            slots.append(Slot(kind, cid, rng.choice(tg.slots[kind][lang]).format(kw=cue)))
        # the draw happens only when the group has phrases, so every other stream stays as it was
        elif kind == "urgency" and tg.urgency_phrases and rng.random() < tg.urgency_phrase_share:
            band = rng.choice(sorted(tg.urgency_phrases))
            slots.append(Slot(kind, band, rng.choice(tg.urgency_phrases[band][lang])))
        elif kind in ("urgency", "mood"):
            terms = lx.URGENCY if kind == "urgency" else lx.MOOD
            idx = rng.randrange(7)
            slots.append(Slot(kind, idx, rng.choice(tg.slots[kind][lang]).format(t=terms[lang][idx])))
        elif kind == "rating":
            m = rng.randint(3, 7)
            n = rng.randint(1, m)
            slots.append(Slot(kind, (n, m), rng.choice(tg.slots["rating"][lang]).format(n=n, m=m)))
        elif kind == "severity":
            slots.append(Slot(kind, rng.randrange(len(lx.LOG_LEVELS)), ""))
        else:
            fact = lx.FACTS[facts.pop()][lang]
            holds = rng.random() < 0.5
            sentence = fact.holds if holds else fact.fails
            # drawn only when the group has phrasings, so every other stream stays as it was
            if tg.fact_phrasings and rng.random() < tg.fact_phrasing_share:
                sentence = rng.choice(tg.fact_phrasings[fact.id][lang][0 if holds else 1])
            slots.append(Slot("fact", (fact.id, holds), sentence))
    return slots


# --- Questions -----------------------------------------------------------------------------------------

def _option_count(rng: random.Random, available: int) -> int:
    r = rng.random()
    lo, hi = (1, 1) if r < 0.03 else (2, 5) if r < 0.50 else (6, 10) if r < 0.78 else (11, 20)
    hi = min(hi, available)
    return rng.randint(min(lo, hi), hi)


def _instructions(rng: random.Random, text: str) -> str:
    # The runtime replaces mask literals in user text by a space; exercise it now and then.
    return f"{text} {MASK_LITERAL}" if rng.random() < 0.03 else text


def _choice_question(rng, tg, lang, slot: Slot, exclude: set[str]) -> tuple[dict, str]:
    pool = lx.DEPARTMENTS if slot.kind == "department" else lx.PRODUCTS
    candidates = [cid for cid in sorted(pool) if cid != slot.value and cid not in exclude]
    k = _option_count(rng, len(candidates) + 1)
    ids = rng.sample(candidates, k - 1) + [slot.value]
    rng.shuffle(ids)
    concepts = [pool[cid][lang] for cid in ids]
    style = _weighted(rng, ("id", "local", "code", "list"), (3, 3, 2 if k <= 8 else 0, 2))
    q: dict[str, Any] = {"type": "choice",
                         "instructions": _instructions(rng, rng.choice(tg.instructions[slot.kind][lang]))}
    if style == "list":
        keys = [c.label for c in concepts]
        q["criteria"] = keys
    else:
        keys = ([c.id for c in concepts] if style == "id" else [c.label for c in concepts] if style == "local"
                else [chr(ord("A") + i) for i in range(k)])
        framed = k <= 6 and rng.random() < 0.4
        criteria = {}
        for key, concept in zip(keys, concepts):
            words = lx.LIST_JOINER[lang].join(w for w in (*concept.synonyms, concept.label) if w != key)
            criteria[key] = rng.choice(lx.DESCRIPTION_FRAMES[lang]).format(words=words) if framed else words
        q["criteria"] = criteria
    return q, keys[ids.index(slot.value)]


def _scale_question(rng, tg, lang, family: str, terms, gold: int, others=None) -> tuple[dict, int]:
    """A score question on `terms` whose answer is level `gold`; the other options come from `others`."""
    others = [i for i in range(len(terms)) if i != gold] if others is None else others
    k = rng.randint(3, min(7, len(others) + 1))
    levels = sorted(rng.sample(others, k - 1) + [gold])
    as_dict = rng.random() < 0.05   # structured level descriptions are rendered as JSON
    criteria = [{"level": terms[i]} if as_dict else terms[i] for i in levels]
    q = {"type": "score", "instructions": _instructions(rng, rng.choice(tg.instructions[family][lang])),
         "criteria": criteria}
    return q, levels.index(gold)


def _rating_question(rng, tg, lang, n: int, m: int) -> tuple[dict, int]:
    criteria = [lx.RATING_LEVEL[lang].format(n=i, m=m) for i in range(1, m + 1)]
    q = {"type": "score", "instructions": _instructions(rng, rng.choice(tg.instructions["rating"][lang])),
         "criteria": criteria}
    return q, n - 1


def _noul_question(rng, tg, lang, fact_id: str, holds: bool) -> tuple[dict, bool]:
    fact = lx.FACTS[fact_id][lang]
    negated = rng.random() < 0.25        # ask about the negated statement: the label flips
    statement, opposite = (fact.negation, fact.statement) if negated else (fact.statement, fact.negation)
    return noul_definition(rng, tg, lang, statement, opposite), holds != negated


def noul_definition(rng: random.Random, tg: TemplateGroup, lang: str, statement: str, opposite: str) -> dict:
    """A noul question about `statement` in one of the group's frames, with or without descriptions/labels."""
    q: dict[str, Any] = {"type": "noul",
                         "instructions": _instructions(rng, rng.choice(tg.noul_frames[lang]).format(s=statement))}
    r = rng.random()
    if r >= 0.45:
        q["criteria"] = ({"false": opposite, "true": statement} if r < 0.75 else
                         {"true": statement} if r < 0.87 else {"false": opposite})
    if rng.random() < 0.3:
        q["labels"] = rng.choice(({"false": "B", "true": "A"}, {"false": "N", "true": "Y"}))
    return q


def _question_for(rng, tg, lang, slot: Slot, exclude: set[str]) -> tuple[dict, Any]:
    if slot.kind in ("department", "product"):
        return _choice_question(rng, tg, lang, slot, exclude if slot.kind == "department" else set())
    if slot.kind == "urgency" and slot.value in URGENCY_BANDS:
        # a phrase: one level of its band is offered, the rest outside it, so it answers the lowest or highest
        band = URGENCY_BANDS[slot.value]
        return _scale_question(rng, tg, lang, "urgency", lx.URGENCY[lang], rng.choice(band),
                               [i for i in range(len(lx.URGENCY[lang])) if i not in band])
    if slot.kind == "urgency":
        return _scale_question(rng, tg, lang, "urgency", lx.URGENCY[lang], slot.value)
    if slot.kind == "mood":
        return _scale_question(rng, tg, lang, "mood", lx.MOOD[lang], slot.value)
    if slot.kind == "severity":
        return _scale_question(rng, tg, lang, "severity", lx.LOG_LEVELS, slot.value)
    if slot.kind == "rating":
        return _rating_question(rng, tg, lang, *slot.value)
    return _noul_question(rng, tg, lang, *slot.value)


def slot_of(qid: str) -> str:
    """The slot a generated question id asks about: "refund_2" (a second question on it) -> "refund"."""
    return re.sub(r"_\d+$", "", qid)


def _qid_base(slot: Slot) -> str:
    return slot.value[0] if slot.kind == "fact" else slot.kind


def _make_questions(rng, tg, lang, slots: list[Slot], n_questions: int, exclude: set[str]):
    """One question per slot, then extra questions on random slots; no two identical definitions."""
    plan = list(slots)
    while len(plan) < n_questions:
        plan.append(rng.choice(slots))
    rng.shuffle(plan)
    questions: dict[str, dict] = {}
    labels: dict[str, Any] = {}
    seen: set[str] = set()
    for slot in plan:
        for _ in range(8):
            q, label = _question_for(rng, tg, lang, slot, exclude)
            key = repr(q)
            if key not in seen:
                break
        else:
            continue
        seen.add(key)
        base = _qid_base(slot)
        qid = base if base not in questions else next(f"{base}_{i}" for i in itertools.count(2)
                                                      if f"{base}_{i}" not in questions)
        questions[qid], labels[qid] = q, label
    return questions, labels


# --- States --------------------------------------------------------------------------------------------

def _fillers(rng, tg, lang, length: str, used_chars: int) -> list[str]:
    pool = tg.fillers[lang]
    if length == "short":
        return [rng.choice(pool)] if rng.random() < 0.4 else []
    if length == "medium":
        return rng.sample(pool, rng.randint(2, 4))
    target = _LONG_CHARS.get(lang, _LONG_CHARS_DEFAULT) + rng.randint(0, 400)
    out: list[str] = []
    total = used_chars
    while total < target:
        out.append(rng.choice([s for s in pool if not out or s != out[-1]]))
        total += len(out[-1]) + 1
    return out


def _maybe_mask(rng, sentences: list[str], start: int) -> None:
    """Insert a literal "[MASK]" (a redacted id) at a random position >= start, now and then."""
    if rng.random() < 0.06:
        sentences.insert(rng.randint(start, len(sentences)), f"ID: {MASK_LITERAL}")


def _prose(rng, tg, lang, decisive: list[str], length: str) -> str:
    """Filler before (at most one sentence), decisive sentences, filler after."""
    fill = _fillers(rng, tg, lang, length, sum(len(s) + 1 for s in decisive))
    before = [fill.pop()] if fill and rng.random() < 0.4 else []
    sentences = before + decisive + fill
    _maybe_mask(rng, sentences, len(before) + len(decisive))
    return _join(lang, sentences)


def _ticket(rng, tg, lang, decisive, length) -> str:
    num = rng.randint(1000, 99999)
    body = _prose(rng, tg, lang, decisive, length)
    if tg.name == "train":
        return f"{tg.case_word[lang][0]} #{num} ({rng.choice(_CHANNELS)})\n{body}"
    return f"[{tg.case_word[lang][0]} {num}] {body}"


def _email(rng, tg, lang, decisive, length) -> str:
    name = rng.choice(lx.NAMES[lang])
    body = _prose(rng, tg, lang, decisive, length)
    greeting, closing = rng.choice(tg.greetings[lang]), rng.choice(tg.closings[lang])
    if tg.name == "train":
        return f"{greeting}\n\n{body}\n\n{closing}\n{name}"
    return f"{name} <user{rng.randint(10, 999)}@example.com>\n{greeting}\n{body}\n{closing}"


def _chat(rng, tg, lang, decisive, length) -> list[dict]:
    """Filler exchanges first, the decisive sentences in the newest user turn(s)."""
    say = tg.assistant[lang]
    turns: list[dict] = []
    if rng.random() < 0.5:
        turns.append({"role": "assistant", "content": say[0]})
    pairs = {"short": rng.randint(0, 1), "medium": rng.randint(1, 2)}.get(length, 0)
    target = _LONG_CHARS.get(lang, _LONG_CHARS_DEFAULT) + rng.randint(0, 400) if length == "long" else 0
    done = 0
    while done < pairs or sum(len(t["content"]) + 32 for t in turns) < target:
        fill = rng.sample(tg.fillers[lang], rng.randint(1, 2) if length == "long" else 1)
        _maybe_mask(rng, fill, 0)
        turns.append({"role": "user", "content": _join(lang, fill)})
        turns.append({"role": "assistant", "content": rng.choice(say[1:] or say)})
        done += 1
    if len(decisive) >= 2 and rng.random() < 0.3:
        cut = rng.randint(1, len(decisive) - 1)
        turns.append({"role": "user", "content": _join(lang, decisive[:cut])})
        turns.append({"role": "assistant", "content": rng.choice(say[1:] or say)})
        decisive = decisive[cut:]
    turns.append({"role": "user", "content": _join(lang, decisive)})
    return turns


def _json_record(rng, tg, lang, decisive, length) -> dict:
    k_id, k_channel, k_subject, k_message, k_history = tg.json_keys
    num = rng.randint(1000, 99999)
    rest = decisive[1:] + ([rng.choice(tg.fillers[lang])] if rng.random() < 0.5 else [])
    _maybe_mask(rng, rest, len(decisive) - 1)
    record: dict[str, Any] = {k_id: f"T-{num}" if tg.name == "train" else num,
                              k_channel: rng.choice(_CHANNELS), k_subject: decisive[0],
                              k_message: _join(lang, rest)}
    if length != "short":
        record[k_history] = _fillers(rng, tg, lang, length, sum(len(s) for s in decisive))
    return record


def _log(rng, tg, lang, decisive, length, severity: int, alert: str) -> str:
    clock = [rng.randint(0, 22), rng.randint(0, 59), 0]   # hour, minute, seconds elapsed

    def line(level: str, msg: str) -> str:
        clock[2] += rng.randint(1, 9)
        ts = f"{clock[0]:02d}:{clock[1] + clock[2] // 60:02d}:{clock[2] % 60:02d}"
        return tg.log_line.format(ts=ts, level=level, svc=rng.choice(_SERVICES), msg=msg)

    def filler() -> str:
        return line("INFO", rng.choice(tg.log_filler).format(n=rng.randint(2, 9999)))

    # Log lines are token-heavy: a filler line precedes the alert only when few decisive lines follow it.
    n_before = rng.randint(0, 1) if len(decisive) < 2 else 0
    if length == "long":
        target, n_after = _LONG_CHARS.get(lang, _LONG_CHARS_DEFAULT) + rng.randint(0, 400), 0
    else:
        target = 0
        n_after = rng.randint(3, 5) if length == "medium" else rng.randint(0, 1)
    lines = [filler() for _ in range(n_before)]
    lines.append(line(lx.LOG_LEVELS[severity], alert))
    lines.extend(line("INFO", f"intake: {sentence}") for sentence in decisive)
    if rng.random() < 0.06:
        lines.append(line("INFO", f"session token={MASK_LITERAL}"))
    lines.extend(filler() for _ in range(n_after))
    while sum(len(x) + 1 for x in lines) < target:
        lines.append(filler())
    return "\n".join(lines)


def build_state(rng: random.Random, tg: TemplateGroup, lang: str, kind: str, decisive: list[str], length: str):
    """A ticket, email, chat or JSON state around the decisive sentences (logs need a severity: `_log`)."""
    builder = {"ticket": _ticket, "email": _email, "chat": _chat, "json": _json_record}[kind]
    return builder(rng, tg, lang, decisive, length)


# --- Records -------------------------------------------------------------------------------------------

def _make_record(rng: random.Random, split: str, rid: str,
                 tg: TemplateGroup | None = None) -> tuple[SuiteRecord, tuple[str, ...]]:
    """One record plus its decisive sentences (for truncation checks in tests); `tg` overrides the split's."""
    tg = tg or templates_for(split)
    lang = rng.choice(lx.LANGUAGES)
    kind = _weighted(rng, KINDS, _KIND_WEIGHTS)
    length = _weighted(rng, _LENGTH_WEIGHTS, _LENGTH_WEIGHTS.values())
    n_questions = _weighted(rng, range(1, 7), _NQ_WEIGHTS)
    slots = _make_slots(rng, tg, lang, _pick_slot_kinds(rng, kind, length, n_questions))

    decisive = [s.sentence for s in slots if s.sentence]
    exclude: set[str] = set()
    dept = next((s for s in slots if s.kind == "department"), None)
    if dept is not None and rng.random() < 0.2 and length != "long":
        # A second department cue whose concept is never offered as an option.
        other = rng.choice([cid for cid in sorted(lx.DEPARTMENTS) if cid != dept.value])
        exclude.add(other)
        cue = rng.choice(lx.DEPARTMENTS[other][lang].cues)
        decisive.append(rng.choice(tg.slots["department"][lang]).format(kw=cue))
    rng.shuffle(decisive)

    questions, labels = _make_questions(rng, tg, lang, slots, n_questions, exclude)

    if kind == "log":
        severity = next(s.value for s in slots if s.kind == "severity")
        alert = decisive.pop(0) if dept is not None and decisive else lx.GENERIC_ALERT[lang]
        state: Any = _log(rng, tg, lang, decisive, length, severity, alert)
        cues = (alert, *decisive)
    else:
        if not decisive:
            decisive = [rng.choice(tg.fillers[lang])]
        state = build_state(rng, tg, lang, kind, decisive, length)
        cues = tuple(decisive)

    tags = {qid: QuestionTag(type=q["type"], language=lang, options=validate_question(qid, q).option_count,
                             length_class=length, duplicate_of=None)
            for qid, q in questions.items()}
    return SuiteRecord(rid, state, questions, labels, tags), cues


def _stream(split: str, seed: int, tg: TemplateGroup | None = None) -> Iterator[tuple[SuiteRecord, tuple[str, ...]]]:
    rng = _rng(split, seed)
    for i in itertools.count():
        yield _make_record(rng, split, f"{split}-{i:05d}", tg)


def generate(split: str, n_records: int, seed: int) -> list[SuiteRecord]:
    """The first `n_records` records of the (split, seed) stream; ids `"{split}-00000"`, ..."""
    if isinstance(n_records, bool) or not isinstance(n_records, int) or n_records < 0:
        raise ValueError(f"n_records must be a non-negative int, got {n_records!r}")
    return [record for record, _ in itertools.islice(_stream(split, seed), n_records)]


def iter_records(split: str, seed: int, tg: TemplateGroup | None = None) -> Iterator[SuiteRecord]:
    """Endless stream of `split` records; its first n equal `generate(split, n, seed)`. `tg` overrides the
    split's templates (the `phrasings` suite: the validation group with its phrasings)."""
    for record, _ in _stream(split, seed, tg):
        yield record


def iter_training_records(seed: int, varied_topics: bool = False, varied_noul: bool = False,
                          urgency_phrases: bool = False, fact_phrasings: bool = False) -> Iterator[SuiteRecord]:
    """Endless stream of `train` records; its first n equal `generate("train", n, seed)`.

    varied_topics: state topics, urgencies and moods also in `topic_frames.FRAMES`; varied_noul: frame noul
    questions also in `topic_frames.NOUL_FRAMES`; urgency_phrases: state some urgencies by
    `topic_frames.URGENCY_PHRASES`; fact_phrasings: state some facts by `fact_phrasings.TRAIN` (each a
    different stream).
    """
    tg = templates_for("train")
    tg = varied_group(tg) if varied_topics else tg
    tg = with_noul_frames(tg) if varied_noul else tg
    tg = with_urgency_phrases(tg) if urgency_phrases else tg
    tg = with_fact_phrasings(tg) if fact_phrasings else tg
    for record, _ in _stream("train", seed, tg):
        yield record
