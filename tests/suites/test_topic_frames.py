"""The training-only topic frames (train_standin.py --varied-topics): new wording, no answer of their own."""
from __future__ import annotations

import hashlib
import itertools
import json

import pytest
from lexical_terms import lexical_terms

from laya_opt.suites.lexical_baseline import baseline_report
from laya_opt.suites.suite_file import dump_suite, parse_suite
from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.generator import generate, iter_training_records
from laya_opt.suites.synthetic.hard_cases import mentions
from laya_opt.suites.synthetic.hard_templates import HELDOUT_HARD
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS, templates_for
from laya_opt.suites.synthetic.hard_cases import generate_hard
from laya_opt.suites.synthetic.topic_frames import (FRAMES, NOUL_FRAMES, URGENCY_BANDS, URGENCY_PHRASES,
                                                    varied_group, with_noul_frames)
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import suite_names, suite_path

PLACEHOLDER = {"department": "{kw}", "product": "{kw}", "urgency": "{t}", "mood": "{t}", "noul": "{s}"}
# a negation's marker per language, looked for in f" {text} "
NEGATIONS = {"en": " not ", "de": " nicht ", "fr": " pas ", "es": " no ", "ru": " не ", "zh": "不是", "ja": "ません",
             "hi": " नहीं "}


def _frames():
    return [(kind, lang, frame) for kind, table in {**FRAMES, "noul": NOUL_FRAMES}.items()
            for lang, frames in table.items() for frame in frames]



def test_every_frame_holds_its_placeholder_once():
    for kind, lang, frame in _frames():
        assert frame.count(PLACEHOLDER[kind]) == 1 and frame.count("{") == 1, (kind, lang, frame)


def test_frames_repeat_no_held_out_or_validation_template():
    # A frame that held-out data also uses would let training see held-out wording.
    others = set(TEMPLATE_GROUPS["heldout"].all_strings()) | set(TEMPLATE_GROUPS["validation"].all_strings())
    others |= set(HELDOUT_HARD.all_strings())
    assert not {frame for _, _, frame in _frames()} & others


def test_frames_name_no_cue_or_scale_term():
    # A frame that held a cue (or an urgency or mood term) would give a state a second answer.
    for kind, lang, frame in _frames():
        bare = frame.replace(PLACEHOLDER[kind], " ")
        found = [term for term in lexical_terms(lang) if mentions(bare, term, lang)]
        assert not found, (kind, lang, frame, found)


def test_varied_group_keeps_the_training_frames_first_and_other_tables():
    train = templates_for("train")
    varied = varied_group(train)
    for kind in FRAMES:
        for lang in lx.LANGUAGES:
            assert varied.slots[kind][lang] == train.slots[kind][lang] + FRAMES[kind][lang]
    assert varied.slots["rating"] == train.slots["rating"] and varied.fillers == train.fillers
    assert varied.name == train.name


def test_varied_stream_uses_the_frames_and_keeps_each_answer_in_its_cue():
    plain = generate("train", 300, 3)
    varied = list(itertools.islice(iter_training_records(3, varied_topics=True), 300))
    assert [r.to_json() for r in itertools.islice(iter_training_records(3), 300)] == [r.to_json() for r in plain]
    # each frame as its literal parts of more than three characters (a frame without one is not looked for)
    framed = [kept for kind, _, frame in _frames() if kind != "noul"
              if (kept := [part for part in frame.split(PLACEHOLDER[kind]) if len(part.strip(" .。।")) > 3])]

    def framed_states(records) -> int:
        return sum(any(all(part in str(r.state) for part in parts) for parts in framed) for r in records)

    assert framed_states(varied) >= 100 and framed_states(plain) <= framed_states(varied) // 4   # 188 and 0
    # Word matching reads the varied states as well as the plain ones: the frames moved no answer.
    accuracy = [baseline_report(parse_suite(dump_suite(name, records, generator_seed=3, description=name)))
                ["by_type"]["choice"]["accuracy"] for name, records in (("plain", plain), ("varied", varied))]
    assert accuracy[1] >= accuracy[0] - 0.05, accuracy


@pytest.mark.parametrize("kind", sorted(FRAMES))
def test_every_language_has_frames(kind):
    assert set(FRAMES[kind]) == set(lx.LANGUAGES)


def test_noul_frames_repeat_no_training_frame_and_negate_nothing():
    train = templates_for("train").noul_frames
    for lang in lx.LANGUAGES:
        assert not set(NOUL_FRAMES[lang]) & set(train[lang]) and len(NOUL_FRAMES[lang]) >= 6
        assert all(NEGATIONS[lang] not in f" {frame} " for frame in NOUL_FRAMES[lang]), lang


def test_noul_frames_reach_both_training_streams_and_leave_the_others_alone():
    train = templates_for("train")
    grown = with_noul_frames(train)
    assert all(grown.noul_frames[lang] == train.noul_frames[lang] + NOUL_FRAMES[lang] for lang in lx.LANGUAGES)
    assert grown.slots == train.slots and grown.instructions == train.instructions
    plain = list(itertools.islice(iter_training_records(4), 300))
    framed = list(itertools.islice(iter_training_records(4, varied_noul=True), 300))
    topics = list(itertools.islice(iter_training_records(4, varied_topics=True), 300))
    # the default and the topic-only streams are unchanged (runs 8 and 9 stay reproducible)
    assert [r.to_json() for r in plain] == [r.to_json() for r in generate("train", 300, 4)]
    both = list(itertools.islice(iter_training_records(4, varied_topics=True, varied_noul=False), 300))
    assert [r.to_json() for r in both] == [r.to_json() for r in topics]

    def noul_in_new_frames(records) -> int:
        new = [frame.split("{s}") for frames in NOUL_FRAMES.values() for frame in frames]
        return sum(1 for r in records for q in r.questions.values() if q["type"] == "noul" and any(
            q["instructions"].startswith(pre) and q["instructions"].replace(" [MASK]", "").endswith(post)
            and (pre or post) for pre, post in new))

    assert noul_in_new_frames(plain) == 0 and noul_in_new_frames(framed) >= 50
    hard = generate_hard("train_paraphrased", 200, 4, varied_noul=True)
    assert noul_in_new_frames(generate_hard("train_paraphrased", 200, 4)) == 0 and noul_in_new_frames(hard) >= 20


def _phrases():
    return [(band, lang, phrase) for band, table in URGENCY_PHRASES.items() for lang, phrases in table.items()
            for phrase in phrases]


def test_urgency_phrases_cover_every_language_and_repeat_no_suite_sentence():
    assert set(URGENCY_PHRASES) == set(URGENCY_BANDS)
    assert all(set(table) == set(lx.LANGUAGES) for table in URGENCY_PHRASES.values())
    # no shipped suite may hold one of them: freeform's tickets say "Not urgent." and "No rush", and training
    # on their own sentences would make freeform a test of memory
    states = [json.dumps(record.state, ensure_ascii=False).lower() for name in suite_names()
              for record in load_suite(suite_path(name, "--suite")).records]
    templates = " ".join(TEMPLATE_GROUPS["heldout"].all_strings() + TEMPLATE_GROUPS["validation"].all_strings()
                         + HELDOUT_HARD.all_strings()).lower()
    for band, lang, phrase in _phrases():
        bare = phrase.lower().rstrip(".。।")
        assert not any(bare in state for state in states) and bare not in templates, (band, lang, phrase)


def test_urgency_phrases_name_no_scale_term_but_a_negated_high_one():
    for band, lang, phrase in _phrases():
        found = [index for index, term in enumerate(lx.URGENCY[lang]) if mentions(phrase, term, lang)]
        found += [term for term in lexical_terms(lang) if term not in lx.URGENCY[lang] and mentions(phrase, term, lang)]
        if band == "high" or NEGATIONS[lang] not in f" {phrase} ":
            assert not found, (band, lang, phrase, found)
        else:   # "not urgent": the high term, negated
            assert set(found) <= set(URGENCY_BANDS["high"]), (band, lang, phrase, found)


def _phrase_questions(records):
    """(band, options as level indices, label) of every urgency question whose state says it by a phrase."""
    out, encoded = [], [(band, json.dumps(phrase, ensure_ascii=False)[1:-1]) for band, _, phrase in _phrases()]
    for record in records:
        state = json.dumps(record.state, ensure_ascii=False)
        bands = {band for band, phrase in encoded if phrase in state}
        for qid, question in record.questions.items():
            if not qid.startswith("urgency") or len(bands) != 1:
                continue
            lang = record.tags[qid].language
            options = [c["level"] if isinstance(c, dict) else c for c in question["criteria"]]
            out.append((next(iter(bands)), [lx.URGENCY[lang].index(o) for o in options], record.labels[qid]))
    return out


def test_urgency_phrases_answer_the_lowest_or_highest_level_offered():
    plain = list(itertools.islice(iter_training_records(5, varied_topics=True), 400))
    phrased = list(itertools.islice(iter_training_records(5, varied_topics=True, urgency_phrases=True), 400))
    assert not _phrase_questions(plain)
    found = _phrase_questions(phrased)
    assert len(found) >= 30 and {band for band, _, _ in found} == {"low", "high"}, len(found)
    for band, levels, label in found:
        in_band = [level for level in levels if level in URGENCY_BANDS[band]]
        assert len(in_band) == 1 and levels == sorted(levels), (band, levels)
        assert label == (0 if band == "low" else len(levels) - 1), (band, levels, label)


@pytest.mark.parametrize("flags, digest", [
    ({}, "ca2be75eeca2b625"),
    ({"varied_topics": True}, "17e63d073809500c"),                          # run 9's standard records
    ({"varied_topics": True, "varied_noul": True}, "0354ee0c67a6d2ba"),     # run 10's
])
def test_earlier_training_streams_are_unchanged(flags, digest):
    # A new option of the generator must not move the draws of the streams the shipped runs trained on.
    records = itertools.islice(iter_training_records(5, **flags), 300)
    text = "".join(json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False) for r in records)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == digest
