"""Seeded labelled records that word overlap cannot solve: the hard cases.

The standard generator (`laya_opt.suites.synthetic.generator`) labels every question by lexical matching: the answer's
cue word is in the state and in the answer's option text. `laya_opt.suites.lexical_baseline`, which has no
model, scores over 0.9 on that data. Each question built here carries a `phenomenon` tag (suites.PHENOMENA)
saying how it breaks that shortcut:

| type   | phenomenon    | the state has                                              | label                          |
|--------|---------------|------------------------------------------------------------|--------------------------------|
| choice | paraphrase    | one cue of the answer, which no option text contains (the  | the cue's concept              |
|        |               | options show the concept's other cues, its label or a code)|                                |
| choice | distractor    | as paraphrase, plus another offered option's own word, in a| the cue's concept              |
|        |               | sentence saying the message is not about it or that it is  |                                |
|        |               | settled                                                    |                                |
| choice | close         | cues of two offered options, one named the main topic, the | the main topic                 |
|        |               | other a side remark                                        |                                |
| score  | distractor    | the current term and an earlier one that no longer holds   | the current term               |
|        |               | (both offered; ratings: an earlier rating)                 |                                |
| score  | close         | a scale term that is not offered                           | the offered level nearest on   |
|        |               |                                                            | the 7-term scale: unique, with |
|        |               |                                                            | the runner-up one step further |
| noul   | paraphrase    | the fact's sentence or its negation (as standard data)     | holds XOR negated              |
| noul   | absent_fact   | nothing about the fact                                     | false: a fact the state never  |
|        |               |                                                            | mentions does not hold; asked  |
|        |               |                                                            | only as the plain statement    |
| noul   | negation_word | the fact's sentence, with a negation word that does not    | true XOR negated               |
|        |               | negate it ("..., and I am not joking")                     |                                |
| noul   | retracted     | the fact's sentence, taken back ("please disregard ...")   | false XOR negated              |

"negated" means the question asks about the fact's negation (a quarter of the noul questions).

Wordings (`HARD_SPLITS`): `train` uses the training templates and the lexicon's statements (for training
streams); `train_paraphrased` the same templates with the training paraphrases. `validation` uses the
validation templates and paraphrases. `heldout` (the `heldout_hard` suite) uses the held-out state templates
with new instructions and paraphrases. Streams are seeded from (split, seed) alone, apart from the standard
generator's streams.
"""
from __future__ import annotations

import dataclasses
import itertools
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator

from laya_opt.core.prompt import validate_question

from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.generator import _join, _weighted, build_state, noul_definition
from laya_opt.suites.synthetic.hard_templates import HARD_WORDINGS, HELDOUT_HARD, HardWording
from laya_opt.suites.synthetic.paraphrases import PARAPHRASES
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS, TemplateGroup
from laya_opt.suites.synthetic.topic_frames import with_noul_frames

HARD_SPLITS = ("train", "train_paraphrased", "validation", "heldout")
# train_paraphrased: the training wording, its noul questions asked in the training paraphrases
# (train_standin.py --training-paraphrases); it shares the `train` templates.
_TEMPLATES_OF = {"train_paraphrased": "train"}
# (type, phenomenon) pairs, drawn uniformly per question; each needs a family not yet used in the record.
CASES = (("choice", "paraphrase"), ("choice", "distractor"), ("choice", "close"), ("score", "distractor"),
         ("score", "close"), ("noul", "paraphrase"), ("noul", "absent_fact"), ("noul", "negation_word"),
         ("noul", "retracted"))
_FAMILIES = {"choice": ("department", "product"), "score": ("urgency", "mood", "rating"),
             "noul": tuple(sorted(lx.FACTS))}
_SCALES = ("urgency", "mood")                 # score close needs a term scale; a rating has no nearest reading
_KINDS = ("ticket", "email", "chat", "json")
_KIND_WEIGHTS = (0.3, 0.25, 0.3, 0.15)
_LENGTH_WEIGHTS = {"short": 0.5, "medium": 0.3, "long": 0.2}
_NQ_WEIGHTS = (0.3, 0.3, 0.25, 0.15)          # 1..4 questions
_FINAL_PUNCTUATION = re.compile(r"[.。।!！]+$")


@dataclass(frozen=True)
class Wording:
    templates: TemplateGroup         # instructions, noul frames and the state's sentences
    hard: HardWording                # the hard cases' own frames
    statements: dict | None          # fact id -> language -> Paraphrase; None: the lexicon's statements


def wording_for(split: str) -> Wording:
    if split not in HARD_SPLITS:
        raise ValueError(f"unknown hard-case split {split!r}; expected one of {list(HARD_SPLITS)}")
    own = _TEMPLATES_OF.get(split, split)
    templates = HELDOUT_HARD if split == "heldout" else TEMPLATE_GROUPS[own]
    return Wording(templates, HARD_WORDINGS[own], PARAPHRASES.get(split))


@dataclass(frozen=True)
class Case:
    """One hard question and the state sentences it needs (each kept together as one block)."""

    family: str
    question: dict
    label: Any
    phenomenon: str
    blocks: tuple[str, ...]
    plain_fact: bool = False         # the only block is a lexicon fact sentence, unchanged


def mentions(text: str, term: str, lang: str) -> bool:
    """Whole-word, case-insensitive occurrence (CJK: substring), as a word-overlap heuristic would see it."""
    if lang in lx.CJK_LANGUAGES:
        return term in text
    word = r"[\w\u0900-\u0963\u0966-\u097f]"   # Devanagari letters and signs, not the danda
    return re.search(rf"(?<!{word}){re.escape(term.lower())}(?!{word})", text.lower()) is not None


# --- choice ------------------------------------------------------------------------------------------

def _choice_case(rng, w: Wording, lang: str, family: str, phenomenon: str) -> Case | None:
    pool = lx.DEPARTMENTS if family == "department" else lx.PRODUCTS
    gold, other = rng.sample(sorted(pool), 2)
    k = rng.randint(2, 6) if rng.random() < 0.7 else rng.randint(7, 10)
    ids = [gold, other] + rng.sample([c for c in sorted(pool) if c not in (gold, other)], k - 2)
    rng.shuffle(ids)
    concepts = {cid: pool[cid][lang] for cid in ids}
    if phenomenon == "close":
        main, side = rng.choice(concepts[gold].cues), rng.choice(concepts[other].cues)
        blocks = (rng.choice(w.hard.main_side[lang]).format(main=main, side=side),)
        hidden = {}                  # both options show every cue: the options match the state equally
    else:
        cue = rng.choice(concepts[gold].synonyms)
        blocks = (rng.choice(w.templates.slots[family][lang]).format(kw=cue),)
        hidden = {gold: cue}         # the answer's option never shows the word the state uses
        if phenomenon == "distractor":
            frame = rng.choice(w.hard.not_about[lang] + w.hard.settled[lang])
            blocks += (frame.format(kw=rng.choice(concepts[other].cues)),)
    style = rng.choice(("id", "local", "code", "list") if phenomenon == "paraphrase" else ("id", "local", "code"))
    keys = {cid: (cid if style == "id" else concepts[cid].label if style in ("local", "list") else chr(65 + i))
            for i, cid in enumerate(ids)}
    if style == "list":
        criteria: Any = [keys[cid] for cid in ids]
    else:
        framed = rng.random() < 0.5
        criteria = {}
        for cid in ids:
            shown = [c for c in concepts[cid].cues if c not in (keys[cid], hidden.get(cid))]
            words = lx.LIST_JOINER[lang].join(shown)
            # An empty description shows the key alone (a product's label, when its other cue is hidden).
            criteria[keys[cid]] = rng.choice(w.hard.option_description[lang]).format(words=words) if framed and words \
                else words
    question = {"type": "choice", "instructions": rng.choice(w.templates.instructions[family][lang]),
                "criteria": criteria}
    texts = dict(zip(ids, validate_question(family, question).option_texts))
    # Keys and ids can coincide with a cue (es "laptop"): retry rather than leak the answer's word.
    if any(mentions(texts[cid], word, lang) for cid, word in hidden.items()):
        return None
    return Case(family, question, keys[gold], phenomenon, blocks)


# --- score -------------------------------------------------------------------------------------------

def _nearest_levels(rng, gold: int, scale: int) -> tuple[list[int], int]:
    """Offered levels without `gold` whose nearest to it is unique, the runner-up one step further."""
    while True:
        levels = sorted(rng.sample([i for i in range(scale) if i != gold], rng.randint(3, 5)))
        distances = sorted((abs(level - gold), level) for level in levels)
        if distances[1][0] == distances[0][0] + 1:
            return levels, levels.index(distances[0][1])


def _score_case(rng, w: Wording, lang: str, family: str, phenomenon: str) -> Case:
    instructions = rng.choice(w.templates.instructions[family][lang])
    if family == "rating":
        m = rng.randint(3, 7)
        n, before = rng.sample(range(1, m + 1), 2)
        block = _pair(rng, lang, rng.choice(w.hard.rating_before[lang]).format(n=before, m=m),
                      rng.choice(w.templates.slots["rating"][lang]).format(n=n, m=m))
        criteria = [lx.RATING_LEVEL[lang].format(n=i, m=m) for i in range(1, m + 1)]
        return Case(family, {"type": "score", "instructions": instructions, "criteria": criteria}, n - 1,
                    phenomenon, (block,))
    terms = (lx.URGENCY if family == "urgency" else lx.MOOD)[lang]
    gold = rng.randrange(len(terms))
    current = rng.choice(w.templates.slots[family][lang]).format(t=terms[gold])
    if phenomenon == "close":
        levels, label = _nearest_levels(rng, gold, len(terms))
        block = current
    else:
        earlier = rng.choice([i for i in range(len(terms)) if i != gold])
        levels = sorted(rng.sample([i for i in range(len(terms)) if i not in (gold, earlier)], rng.randint(1, 4))
                        + [gold, earlier])
        label = levels.index(gold)
        frames = w.hard.urgency_before if family == "urgency" else w.hard.mood_before
        block = _pair(rng, lang, rng.choice(frames[lang]).format(t=terms[earlier]), current)
    question = {"type": "score", "instructions": instructions, "criteria": [terms[i] for i in levels]}
    return Case(family, question, label, phenomenon, (block,))


def _pair(rng, lang: str, earlier: str, current: str) -> str:
    """The earlier and the current statement as one block, in either order (no "last one wins" shortcut)."""
    return _join(lang, (earlier, current) if rng.random() < 0.5 else (current, earlier))


# --- noul --------------------------------------------------------------------------------------------

def _statements(w: Wording, lang: str, fact_id: str) -> tuple[str, str]:
    if w.statements is None:
        fact = lx.FACTS[fact_id][lang]
        return fact.statement, fact.negation
    paraphrase = w.statements[fact_id][lang]
    return paraphrase.statement, paraphrase.negation


def _noul_case(rng, w: Wording, lang: str, fact_id: str, phenomenon: str) -> Case:
    fact = lx.FACTS[fact_id][lang]
    statement, negation = _statements(w, lang, fact_id)
    negated = phenomenon != "absent_fact" and rng.random() < 0.25
    asked, opposite = (negation, statement) if negated else (statement, negation)
    question = noul_definition(rng, w.templates, lang, asked, opposite)
    if phenomenon == "absent_fact":
        return Case(fact_id, question, False, phenomenon, ())
    if phenomenon == "paraphrase":
        holds = rng.random() < 0.5
        return Case(fact_id, question, holds != negated, phenomenon, (fact.holds if holds else fact.fails,),
                    plain_fact=True)
    if phenomenon == "negation_word":
        sentence = rng.choice(w.hard.fact_keep[lang]).format(s=_FINAL_PUNCTUATION.sub("", fact.holds))
        return Case(fact_id, question, not negated, phenomenon, (sentence,))
    sentence = rng.choice(w.hard.fact_retract[lang]).format(s=fact.holds)
    return Case(fact_id, question, negated, phenomenon, (sentence,))


# --- records -----------------------------------------------------------------------------------------

def _make_case(rng, w: Wording, lang: str, used: set[str]) -> Case | None:
    qtype, phenomenon = rng.choice(CASES)
    families = [f for f in (_SCALES if (qtype, phenomenon) == ("score", "close") else _FAMILIES[qtype])
                if f not in used]
    if not families:
        return None
    family = rng.choice(families)
    if qtype == "choice":
        return _choice_case(rng, w, lang, family, phenomenon)
    if qtype == "score":
        return _score_case(rng, w, lang, family, phenomenon)
    return _noul_case(rng, w, lang, family, phenomenon)


def _make_record(rng: random.Random, w: Wording, rid: str) -> SuiteRecord:
    lang = rng.choice(lx.LANGUAGES)
    kind = _weighted(rng, _KINDS, _KIND_WEIGHTS)
    length = _weighted(rng, _LENGTH_WEIGHTS, _LENGTH_WEIGHTS.values())
    n_questions = _weighted(rng, range(1, 5), _NQ_WEIGHTS)
    cases: list[Case] = []
    for attempt in itertools.count():   # a draw can need a family already used, or be rejected: draw again
        if len(cases) == n_questions or (cases and attempt >= 8 * n_questions):
            break
        case = _make_case(rng, w, lang, {c.family for c in cases})
        if case is not None:
            cases.append(case)
    blocks = [block for case in cases for block in case.blocks]
    if all(case.plain_fact or not case.blocks for case in cases):
        # Lexicon fact sentences are shared with training: a sentence of this wording keeps the state new.
        blocks.append(rng.choice(w.templates.fillers[lang]))
    rng.shuffle(blocks)
    state = build_state(rng, w.templates, lang, kind, blocks, length)
    questions = {case.family: case.question for case in cases}
    tags = {case.family: QuestionTag(type=case.question["type"], language=lang,
                                     options=validate_question(case.family, case.question).option_count,
                                     length_class=length, phenomenon=case.phenomenon) for case in cases}
    return SuiteRecord(rid, state, questions, {case.family: case.label for case in cases}, tags)


def iter_hard_records(split: str, seed: int, varied_noul: bool = False) -> Iterator[SuiteRecord]:
    """Endless stream of hard records of one wording; ids "hard-{split}-00000", ...

    varied_noul (training only): noul questions also in `topic_frames.NOUL_FRAMES` (a different stream), as
    `generator.iter_training_records(varied_noul=True)`."""
    wording = wording_for(split)
    if varied_noul:
        wording = dataclasses.replace(wording, templates=with_noul_frames(wording.templates))
    rng = random.Random(f"laya-fidelity-hard/{split}/{seed}")
    for i in itertools.count():
        yield _make_record(rng, wording, f"hard-{split}-{i:05d}")


def generate_hard(split: str, n_records: int, seed: int, varied_noul: bool = False) -> list[SuiteRecord]:
    if isinstance(n_records, bool) or not isinstance(n_records, int) or n_records < 0:
        raise ValueError(f"n_records must be a non-negative int, got {n_records!r}")
    return list(itertools.islice(iter_hard_records(split, seed, varied_noul), n_records))
