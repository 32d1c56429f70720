"""Facts said in free words: the training table (--fact-phrasings), the validation table and the `phrasings`
suite built from it. Each phrase carries its fact and polarity and nothing else, the two tables share no
sentence, and no shipped suite but `phrasings` holds one of them."""
import hashlib
import itertools
import json

import pytest
from lexical_terms import lexical_terms

from laya_opt.suites.lexical_baseline import baseline_report
from laya_opt.suites.suite_file import load_suite
from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.fact_phrasings import PROBE_URGENCY, TRAIN, VALIDATION, _states
from laya_opt.suites.synthetic.generator import generate, iter_training_records, slot_of
from laya_opt.suites.synthetic.hard_cases import mentions
from laya_opt.suites.synthetic.hard_templates import HELDOUT_HARD
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS
from laya_opt.suites.synthetic.topic_frames import URGENCY_BANDS, URGENCY_PHRASES
from laya_opt.util.resources import suite_names, suite_path

TABLES = {"train": TRAIN, "validation": VALIDATION}


def _sentences(table):
    """(fact, lang, holds, sentence) of every sentence of a table."""
    return [(fact, lang, side == 0, sentence) for fact, langs in table.items() for lang, sides in langs.items()
            for side, sentences in enumerate(sides) for sentence in sentences]



def _bare(sentence: str) -> str:
    return sentence.lower().rstrip(".。।!?？ ")


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_fact_language_and_polarity_has_a_phrase(name):
    table = TABLES[name]
    assert set(table) == set(lx.FACTS)
    for fact, langs in table.items():
        assert set(langs) == set(lx.LANGUAGES), (name, fact)
        for lang, (holds, fails) in langs.items():
            assert len(holds) >= 2 and len(fails) >= 2, (name, fact, lang)
            assert len(set(holds + fails)) == len(holds + fails), (name, fact, lang)


def test_the_two_tables_share_no_sentence_and_repeat_no_lexicon_sentence():
    train = {_bare(s) for *_, s in _sentences(TRAIN)}
    validation = {_bare(s) for *_, s in _sentences(VALIDATION)}
    assert not train & validation
    lexicon = {_bare(x) for fact in lx.FACTS.values() for f in fact.values()
               for x in (f.statement, f.negation, f.holds, f.fails)}
    assert not (train | validation) & lexicon


@pytest.mark.parametrize("name", sorted(TABLES))
def test_phrases_name_no_cue_or_scale_term(name):
    # a phrase naming a department, product, urgency or mood term would give a state a second answer
    for fact, lang, holds, sentence in _sentences(TABLES[name]):
        found = [term for term in lexical_terms(lang) if mentions(sentence, term, lang)]
        assert not found, (name, fact, lang, sentence, found)
    for band, table in PROBE_URGENCY.items():
        for lang, phrases in table.items():
            for phrase in phrases:
                found = [term for term in lexical_terms(lang) if mentions(phrase, term, lang)]
                assert not found, (band, lang, phrase, found)


def _shipped_states(but: str = "") -> list[str]:
    return [json.dumps(record.state, ensure_ascii=False).lower() for name in suite_names() if name != but
            for record in load_suite(suite_path(name, "--suite")).records]


def test_no_shipped_suite_holds_a_training_phrase_and_only_phrasings_a_validation_one():
    # `freeform` above all: training on its sentences would make it a test of memory
    everywhere, elsewhere = _shipped_states(), _shipped_states(but="phrasings")
    templates = " ".join(TEMPLATE_GROUPS["heldout"].all_strings() + TEMPLATE_GROUPS["validation"].all_strings()
                         + TEMPLATE_GROUPS["train"].all_strings() + HELDOUT_HARD.all_strings()).lower()
    for fact, lang, holds, sentence in _sentences(TRAIN):
        assert not any(_bare(sentence) in state for state in everywhere), (fact, lang, sentence)
    probes = [s for *_, s in _sentences(VALIDATION)] + [p for table in PROBE_URGENCY.values()
                                                        for phrases in table.values() for p in phrases]
    for sentence in probes + [s for *_, s in _sentences(TRAIN)]:
        assert _bare(sentence) not in templates, sentence
    for sentence in probes:
        assert not any(_bare(sentence) in state for state in elsewhere), sentence
    training_urgency = {_bare(p) for table in URGENCY_PHRASES.values() for phrases in table.values() for p in phrases}
    assert not training_urgency & {_bare(p) for table in PROBE_URGENCY.values() for phrases in table.values()
                                   for p in phrases}


@pytest.mark.parametrize("row, problem", [
    ("en=Ring me.|Call me. Ring me not.", "bad row"),             # no || between the sides
    ("en=Ring me. || ", "bad row"),                               # a side without a sentence
    ("xx=Ring me. || Do not ring me.", "bad row"),                # not a language
])
def test_a_bad_row_is_refused_naming_the_table_and_line(row, problem):
    with pytest.raises(ValueError, match=rf"'t/callback' line 1: {problem}"):
        _states(row, "t/callback")


def test_a_table_missing_a_language_is_refused():
    with pytest.raises(ValueError, match="languages"):
        _states("en=Ring me. || Do not ring me.", "t/callback")


def _phrased_facts(records, table):
    """(fact, holds by the phrase, label of the question on the fact's plain statement) per phrased question."""
    out = []
    for record in records:
        state = json.dumps(record.state, ensure_ascii=False)
        for qid, question in record.questions.items():
            fact_id = slot_of(qid)
            if question["type"] != "noul" or fact_id not in table:
                continue
            lang = record.tags[qid].language
            sides = [side for side, sentences in enumerate(table[fact_id][lang])
                     if any(json.dumps(s, ensure_ascii=False)[1:-1] in state for s in sentences)]
            if len(sides) != 1:
                continue
            fact = lx.FACTS[fact_id][lang]
            negated = question["instructions"].replace(" [MASK]", "").endswith(fact.negation)
            out.append((fact_id, sides[0] == 0, record.labels[qid] != negated))
    return out


def test_the_training_stream_states_about_half_its_facts_in_free_words_and_keeps_their_labels():
    plain = list(itertools.islice(iter_training_records(6, varied_topics=True), 400))
    phrased = list(itertools.islice(iter_training_records(6, varied_topics=True, fact_phrasings=True), 400))
    assert not _phrased_facts(plain, TRAIN)
    found = _phrased_facts(phrased, TRAIN)
    # every fact, both polarities; the label follows the phrase's polarity (negated questions flipped back)
    assert len(found) >= 100 and {fact for fact, _, _ in found} == set(lx.FACTS), len(found)
    assert {holds for _, holds, _ in found} == {True, False}
    assert all(holds == label for _, holds, label in found)
    standard = sum(1 for r in phrased for q, t in r.tags.items() if slot_of(q) in lx.FACTS)
    assert 0.3 < len(found) / standard < 0.7, (len(found), standard)


@pytest.mark.parametrize("flags, digest", [
    ({"varied_topics": True, "varied_noul": True, "urgency_phrases": True}, "b9b2a0a7e34197c7"),   # runs 11, 12
])
def test_the_streams_of_earlier_runs_are_unchanged(flags, digest):
    records = itertools.islice(iter_training_records(5, **flags), 300)
    text = "".join(json.dumps(r.to_json(), sort_keys=True, ensure_ascii=False) for r in records)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == digest


def test_phrasings_states_every_question_in_validation_words_and_only_those():
    suite = load_suite(suite_path("phrasings"))
    tags = [(record, qid, tag) for record in suite.records for qid, tag in record.tags.items()]
    assert len(tags) >= 600 and {tag.language for _, _, tag in tags} == set(lx.LANGUAGES)
    assert {tag.phenomenon for _, _, tag in tags} == {"fact_phrasing", "urgency_phrasing"}
    facts = _phrased_facts(suite.records, VALIDATION)
    fact_questions = [t for _, _, t in tags if t.phenomenon == "fact_phrasing"]
    assert len(facts) == len(fact_questions) and all(holds == label for _, holds, label in facts)
    assert {fact for fact, _, _ in facts} == set(lx.FACTS) and {h for _, h, _ in facts} == {True, False}
    assert not _phrased_facts(suite.records, TRAIN)
    for record, qid, tag in tags:   # urgencies: a probe phrase of one band, answered by that end of the scale
        if tag.phenomenon != "urgency_phrasing":
            continue
        state = json.dumps(record.state, ensure_ascii=False)
        bands = [band for band, table in PROBE_URGENCY.items()
                 if any(json.dumps(p, ensure_ascii=False)[1:-1] in state for p in table[tag.language])]
        options = [c["level"] if isinstance(c, dict) else c for c in record.questions[qid]["criteria"]]
        levels = [lx.URGENCY[tag.language].index(o) for o in options]
        assert len(bands) == 1 and len([x for x in levels if x in URGENCY_BANDS[bands[0]]]) == 1, record.id
        assert record.labels[qid] == (0 if bands[0] == "low" else len(levels) - 1), record.id


def test_phrasings_is_not_solved_by_word_matching():
    # the point of the suite: the lexicon's sentences are not in its states
    report = baseline_report(load_suite(suite_path("phrasings")))
    assert report["by_type"]["noul"]["accuracy"] < 0.75, report["by_type"]


def test_the_validation_stream_is_unchanged_by_the_new_group_fields():
    # `validation` is built from the same split without phrasings: its records must not move
    shipped = load_suite(suite_path("validation")).records[:100]
    fresh = generate("validation", 100, 505)
    assert [r.state for r in fresh] == [r.state for r in shipped]
