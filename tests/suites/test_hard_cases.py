"""Hard cases: determinism, what each phenomenon puts in the state and the label, disjoint wordings."""
from __future__ import annotations

import json
import re

import pytest

from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.hard_cases import CASES, HARD_SPLITS, generate_hard, mentions, wording_for
from laya_opt.suites.synthetic.hard_templates import HARD_WORDINGS, HELDOUT_HARD
from laya_opt.suites.synthetic.paraphrases import PARAPHRASES
from laya_opt.suites.suite_file import dump_suite, parse_suite
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS
from laya_opt.core.prompt import serialize_state, validate_question


def _bytes(records) -> bytes:
    return json.dumps([r.to_json() for r in records], ensure_ascii=False).encode("utf-8")


@pytest.fixture(scope="module")
def records():
    return {split: generate_hard(split, 200, 7) for split in HARD_SPLITS}


def _questions(records, qtype: str, phenomenon: str):
    for record in records:
        for qid, tag in record.tags.items():
            if (tag.type, tag.phenomenon) == (qtype, phenomenon):
                yield record, qid, serialize_state(record.state), tag.language


@pytest.mark.parametrize("split", HARD_SPLITS)
def test_streams_are_deterministic_valid_and_cover_every_case(split, records):
    assert _bytes(records[split]) == _bytes(generate_hard(split, 200, 7))
    assert _bytes(generate_hard(split, 20, 8)) != _bytes(records[split][:20])
    suite = parse_suite(dump_suite(split, records[split], generator_seed=7, description="t"))
    assert {(t.type, t.phenomenon) for r in suite.records for t in r.tags.values()} == set(CASES)
    with pytest.raises(ValueError, match="unknown hard-case split"):
        wording_for("calib")


def _concept(pool, lang: str, cue: str) -> str:
    return next(cid for cid in pool if cue in pool[cid][lang].cues)


def _cues_in(text: str, pool, lang: str) -> set[str]:
    return {cid for cid in pool for cue in pool[cid][lang].cues if mentions(text, cue, lang)}


@pytest.mark.parametrize("split", HARD_SPLITS)
def test_choice_cases(split, records):
    for phenomenon in ("paraphrase", "distractor", "close"):
        for record, qid, state, lang in _questions(records[split], "choice", phenomenon):
            pool = lx.DEPARTMENTS if qid == "department" else lx.PRODUCTS
            spec = validate_question(qid, record.questions[qid])
            texts = dict(zip(spec.option_keys, spec.option_texts))
            label = record.labels[qid]
            mentioned = _cues_in(state, pool, lang)
            gold = next(cid for cid in mentioned if _cues_in(texts[label], pool, lang) & {cid})
            stated = [cue for cue in pool[gold][lang].cues if mentions(state, cue, lang)]
            if phenomenon == "close":   # the answer and one other offered option, both with their own words
                assert len(mentioned) == 2 and all(mentions(texts[label], cue, lang) for cue in stated)
                continue
            assert mentioned == {gold} | ({next(iter(mentioned - {gold}))} if phenomenon == "distractor" else set())
            assert not any(mentions(text, cue, lang) for text in texts.values() for cue in stated), (record.id, qid)
            if phenomenon == "distractor":   # another option shares a word with the state
                assert any(set(re.findall(r"\w+", text.lower())) & set(re.findall(r"\w+", state.lower()))
                           for key, text in texts.items() if key != label) or lang in lx.CJK_LANGUAGES


def _terms(qid: str, lang: str):
    return (lx.URGENCY if qid == "urgency" else lx.MOOD)[lang]


@pytest.mark.parametrize("split", HARD_SPLITS)
def test_score_cases(split, records):
    for record, qid, state, lang in _questions(records[split], "score", "close"):
        levels = record.questions[qid]["criteria"]
        terms = _terms(qid, lang)
        stated = [i for i, term in enumerate(terms) if mentions(state, term, lang)]
        assert len(stated) == 1 and terms[stated[0]] not in levels
        distance = sorted(abs(terms.index(level) - stated[0]) for level in levels)
        assert distance[1] == distance[0] + 1     # a unique nearest level, the runner-up one step further
        assert abs(terms.index(levels[record.labels[qid]]) - stated[0]) == distance[0]
    for record, qid, state, lang in _questions(records[split], "score", "distractor"):
        levels = record.questions[qid]["criteria"]
        if qid == "rating":
            assert len(set(re.findall(r"\d+", state)) & {str(i) for i in range(1, len(levels) + 1)}) >= 2
            continue
        assert sum(mentions(state, level, lang) for level in levels) == 2
        assert mentions(state, levels[record.labels[qid]], lang)


@pytest.mark.parametrize("split", HARD_SPLITS)
def test_noul_cases(split, records):
    wording = wording_for(split)
    for phenomenon in ("paraphrase", "absent_fact", "negation_word", "retracted"):
        for record, qid, state, lang in _questions(records[split], "noul", phenomenon):
            fact, label = lx.FACTS[qid][lang], record.labels[qid]
            negated = (wording.statements[qid][lang].negation if wording.statements else fact.negation) in \
                record.questions[qid]["instructions"]
            if phenomenon == "absent_fact":
                assert fact.holds.rstrip("。.।") not in state and fact.fails.rstrip("。.।") not in state
                assert label is False and not negated
            elif phenomenon == "paraphrase":
                assert label == ((fact.holds in state) != negated) and (fact.holds in state) != (fact.fails in state)
            elif phenomenon == "negation_word":
                assert fact.holds not in state and fact.holds.rstrip("。.।!") in state and label == (not negated)
            else:   # JSON states escape the frame's quotes
                retracted = [frame.format(s=fact.holds) for frame in wording.hard.fact_retract[lang]]
                assert any(text in state or json.dumps(text, ensure_ascii=False)[1:-1] in state for text in retracted)
                assert label == negated


def _all_template_strings() -> dict[str, set[str]]:
    out = {name: set(group.all_strings()) for name, group in TEMPLATE_GROUPS.items()}
    out["heldout_hard"] = ({s for table in HELDOUT_HARD.instructions.values() for items in table.values()
                            for s in items} | {s for items in HELDOUT_HARD.noul_frames.values() for s in items})
    for name, wording in HARD_WORDINGS.items():
        out[f"hard/{name}"] = set(wording.all_strings())
    for name, facts in PARAPHRASES.items():
        out[f"paraphrases/{name}"] = {s for per in facts.values() for p in per.values()
                                      for s in (p.statement, p.negation)}
    out["lexicon statements"] = {s for per in lx.FACTS.values() for f in per.values()
                                 for s in (f.statement, f.negation)}
    return out


def test_every_wording_is_disjoint_from_every_other():
    strings = _all_template_strings()
    names = sorted(strings)
    shared = {(a, b): strings[a] & strings[b] for i, a in enumerate(names) for b in names[i + 1:]}
    # heldout_hard reuses the held-out state sentences only; its instructions and frames are its own.
    assert {pair: found for pair, found in shared.items() if found} == {}


@pytest.mark.parametrize("lang", lx.LANGUAGES)
def test_new_wording_names_no_cue_or_scale_term(lang):
    """Frames, instructions and paraphrases must not add a concept's cue or a scale term to a state."""
    texts = [re.sub(r"\{\w+\}", " ", t) for wording in HARD_WORDINGS.values() for field in
             ("option_description", "not_about", "settled", "main_side", "urgency_before", "mood_before",
              "rating_before", "fact_keep", "fact_retract") for t in getattr(wording, field)[lang]]
    texts += [t for table in HELDOUT_HARD.instructions.values() for t in table[lang]]
    texts += [re.sub(r"\{\w+\}", " ", t) for t in HELDOUT_HARD.noul_frames[lang]]
    texts += [s for facts in PARAPHRASES.values() for per in facts.values() for s in (per[lang].statement,
                                                                                       per[lang].negation)]
    terms = [c for pool in (lx.DEPARTMENTS, lx.PRODUCTS) for cid in pool for c in pool[cid][lang].cues]
    terms += [*lx.URGENCY[lang], *lx.MOOD[lang]]
    assert [(term, text) for term in terms for text in texts if mentions(text, term, lang)] == []


def test_paraphrases_keep_the_facts_content_word_for_the_lexical_overlap_a_model_can_learn():
    from laya_opt.suites.lexical_baseline import stems
    for facts in PARAPHRASES.values():
        for fid, per in facts.items():
            for lang, paraphrase in per.items():
                fact = lx.FACTS[fid][lang]
                state_units = set(stems(fact.holds)) | set(stems(fact.fails))
                assert set(stems(paraphrase.statement)) & state_units, (fid, lang, paraphrase.statement)
