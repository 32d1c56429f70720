"""Synthetic data generator and project tokenizer: determinism, split disjointness, label semantics."""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from repo_scripts import load_script

from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.generator import LAYOUT_WORDS, SPLITS, _stream, generate, iter_training_records
from laya_opt.suites.suite_file import dump_suite, parse_suite
from laya_opt.core.prompt import render_value as render_instructions, validate_question
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS

REPO = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO / "checkpoints" / "tokenizer"
MAX_LEN = 256
CUE_BUDGET = 150   # state tokens kept even under a full head: 256 - (96 + 3) - 1 = 156, minus slack


build_tokenizer = load_script("tools/build_tokenizer.py")


def _bytes(records) -> bytes:
    return json.dumps([r.to_json() for r in records], ensure_ascii=False).encode("utf-8")


def _state_text(state) -> str:
    return build_tokenizer.serialize_state(state)


@pytest.fixture(scope="module")
def train_sample():
    return generate("train", 4000, 11)


@pytest.fixture(scope="module")
def heldout_sample():
    return generate("heldout", 600, 11)


@pytest.fixture(scope="module")
def codec():
    from laya_opt.core.tokens import load_codec
    return load_codec(TOKENIZER_DIR)


# --- Determinism -------------------------------------------------------------------------------------

@pytest.mark.parametrize("split", SPLITS)
def test_same_seed_same_bytes(split):
    assert _bytes(generate(split, 80, 5)) == _bytes(generate(split, 80, 5))


@pytest.mark.parametrize("split", SPLITS)
def test_different_seeds_differ(split):
    assert _bytes(generate(split, 20, 5)) != _bytes(generate(split, 20, 6))


def test_splits_are_different_streams():
    assert _bytes(generate("train", 20, 5)) != _bytes(generate("calib", 20, 5))


def test_iter_training_records_is_the_train_stream():
    streamed = list(itertools.islice(iter_training_records(9), 50))
    assert _bytes(streamed) == _bytes(generate("train", 50, 9))
    assert [r.id for r in streamed[:2]] == ["train-00000", "train-00001"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown split"):
        generate("test", 1, 0)
    with pytest.raises(ValueError, match="n_records"):
        generate("train", -1, 0)
    with pytest.raises(TypeError):
        generate("train", 1, "0")


# --- Held-out vs training ----------------------------------------------------------------------------

def test_template_groups_are_disjoint():
    train, heldout = (set(TEMPLATE_GROUPS[g].all_strings()) for g in ("train", "heldout"))
    assert not train & heldout


def test_heldout_states_and_instructions_never_in_train(train_sample, heldout_sample):
    train_states = {_state_text(r.state) for r in train_sample}
    train_instr = {render_instructions(q["instructions"]) for r in train_sample for q in r.questions.values()}
    for record in heldout_sample:
        assert _state_text(record.state) not in train_states, record.id
        for qid, q in record.questions.items():
            assert render_instructions(q["instructions"]) not in train_instr, (record.id, qid)


def test_heldout_only_sentences_never_appear_in_train_text(train_sample):
    text = "\n".join(_state_text(r.state) for r in train_sample)
    text += "\n".join(render_instructions(q["instructions"]) for r in train_sample for q in r.questions.values())
    group = TEMPLATE_GROUPS["heldout"]
    for lang in lx.LANGUAGES:
        for sentence in (*group.fillers[lang], *group.assistant[lang], *group.noul_frames[lang],
                         *(t for table in group.instructions.values() for t in table[lang])):
            probe = sentence.split("{")[0] if "{" in sentence else sentence
            if len(probe) >= 4:
                assert probe not in text, (lang, sentence)


# --- Label semantics: every label is recoverable by lexical matching ---------------------------------

_WORD = r"[\w\u0900-\u0963\u0966-\u097F]"   # Devanagari letters and marks, not the danda


@functools.lru_cache(maxsize=None)
def _pattern(term: str) -> re.Pattern:
    return re.compile(rf"(?<!{_WORD}){re.escape(term)}(?!{_WORD})", re.IGNORECASE)


def occurs(term: str, text: str, lang: str) -> bool:
    """Whole-word occurrence (CJK: substring), case-insensitive."""
    if lang in lx.CJK_LANGUAGES:
        return term in text
    return term.lower() in text.lower() and _pattern(term).search(text) is not None


def _lexicon_texts(lang: str) -> list[str]:
    """Every non-cue text a state, question or option can contain, in one language."""
    texts = list(LAYOUT_WORDS) + [lx.GENERIC_ALERT[lang], lx.RATING_LEVEL[lang], *lx.NAMES[lang],
                                  *lx.DESCRIPTION_FRAMES[lang]]
    for group in TEMPLATE_GROUPS.values():
        texts += [*group.json_keys, *group.log_filler, group.log_line]
        for table in (*group.instructions.values(), *group.slots.values(), group.noul_frames, group.fillers,
                      group.assistant, group.greetings, group.closings, group.case_word):
            texts += [re.sub(r"\{\w+\}", " ", t) for t in table[lang]]
    for fact in lx.FACTS.values():
        f = fact[lang]
        texts += [f.statement, f.negation, f.holds, f.fails]
    return texts


@pytest.mark.parametrize("lang", lx.LANGUAGES)
def test_cue_terms_are_unambiguous(lang):
    """No cue term occurs in another concept's cues, in a scale, in a template or in a fact sentence."""
    concepts = [(f"department:{c}", lx.DEPARTMENTS[c][lang].cues) for c in lx.DEPARTMENTS]
    concepts += [(f"product:{c}", lx.PRODUCTS[c][lang].cues) for c in lx.PRODUCTS]
    scales = [("urgency", lx.URGENCY[lang]), ("mood", lx.MOOD[lang]), ("log", lx.LOG_LEVELS)]
    texts = _lexicon_texts(lang)
    problems = []
    for name, cues in concepts:
        others = [c for other, cs in concepts if other != name for c in cs] + [t for _, s in scales for t in s]
        for cue in cues:
            problems += [(name, cue, t) for t in others + texts if occurs(cue, t, lang) or occurs(t, cue, lang)]
    for name, terms in scales:
        for term in terms:
            problems += [(name, term, o) for o in terms if o != term and occurs(term, o, lang)]
            if name != "log":
                problems += [(name, term, t) for t in texts if occurs(term, t, lang)]
    assert not problems


def _concept_of(option: str, pool, lang: str):
    scores = [(sum(occurs(c, option, lang) for c in (*pool[cid][lang].cues, cid)), cid) for cid in sorted(pool)]
    best = max(scores)
    assert best[0] > 0, option
    return best[1]


def _check_record(record) -> None:
    lang = next(iter(record.tags.values())).language
    state = _state_text(record.state)
    for qid, q in record.questions.items():
        label = record.labels[qid]
        family = re.sub(r"_\d+$", "", qid)
        texts = validate_question('?', q).option_texts
        if family in ("department", "product"):
            pool = lx.DEPARTMENTS if family == "department" else lx.PRODUCTS
            keys = list(q["criteria"])
            for key, text in zip(keys, texts):
                cid = _concept_of(text, pool, lang)
                mentioned = any(occurs(c, state, lang) for c in pool[cid][lang].cues)
                assert mentioned == (key == label), (record.id, qid, text)
        elif family in ("urgency", "mood", "severity"):
            for i, level in enumerate(q["criteria"]):
                term = level["level"] if isinstance(level, dict) else level
                assert occurs(term, state, lang) == (i == label), (record.id, qid, term)
        elif family == "rating":
            m = len(q["criteria"])
            assert re.search(rf"{label + 1}\D[^\n]*{m}|{m}\D[^\n]*{label + 1}", state), (record.id, qid)
        else:
            fact = lx.FACTS[family][lang]
            holds = fact.holds in state
            assert holds != (fact.fails in state), (record.id, qid)
            negated = fact.negation in q["instructions"]
            assert label == (holds != negated), (record.id, qid)


@pytest.mark.parametrize("split", SPLITS)
def test_labels_follow_from_lexical_cues(split):
    for record in generate(split, 500, 3):
        _check_record(record)


@pytest.mark.parametrize("split", SPLITS)
def test_records_pass_suite_validation(split):
    records = generate(split, 300, 4)
    suite = parse_suite(dump_suite(split, records, generator_seed=4, description="t"), f"<{split}>")
    assert suite.n_questions == sum(len(r.questions) for r in records)
    assert all(1 <= len(r.questions) <= 6 for r in records)


def test_coverage_of_types_languages_lengths_and_options(train_sample):
    tags = [t for r in train_sample for t in r.tags.values()]
    assert {t.language for t in tags} == set(lx.LANGUAGES)
    assert {t.length_class for t in tags} == {"short", "medium", "long"}
    choice = Counter(t.options for t in tags if t.type == "choice")
    assert set(choice) == set(range(1, 21))
    assert {t.options for t in tags if t.type == "score"} == set(range(3, 8))
    states = Counter(type(r.state).__name__ for r in train_sample)
    assert states["str"] and states["list"] and states["dict"]
    assert any(isinstance(r.state, str) and " INFO " in r.state for r in train_sample)      # logs
    nouls = [q for r in train_sample for q in r.questions.values() if q["type"] == "noul"]
    assert any("criteria" in q for q in nouls) and any("criteria" not in q for q in nouls)
    assert any("labels" in q for q in nouls)
    choices = [q for r in train_sample for q in r.questions.values() if q["type"] == "choice"]
    assert any(isinstance(q["criteria"], list) for q in choices)
    assert any(isinstance(q["criteria"], dict) for q in choices)
    assert any("[MASK]" in _state_text(r.state) for r in train_sample)
    assert any("[MASK]" in q["instructions"] for q in choices)


def test_chat_turns_end_with_the_user():
    for record in generate("train", 400, 8):
        if isinstance(record.state, list):
            assert record.state[-1]["role"] == "user"


# --- Tokenizer ---------------------------------------------------------------------------------------

def test_tokenizer_build_is_deterministic():
    first = build_tokenizer.tokenizer_files(seed=3, n_records=300, vocab_size=1200)
    second = build_tokenizer.tokenizer_files(seed=3, n_records=300, vocab_size=1200)
    assert first == second
    other = build_tokenizer.tokenizer_files(seed=4, n_records=300, vocab_size=1200)
    assert other["tokenizer.json"] != first["tokenizer.json"]


def test_shipped_tokenizer_provenance():
    config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
    build = config["laya_opt_build"]
    assert (build["seed"], build["train_records"], build["vocab_size"]) == (
        build_tokenizer.DEFAULT_SEED, build_tokenizer.DEFAULT_RECORDS, build_tokenizer.VOCAB_SIZE)
    assert hashlib.sha256((TOKENIZER_DIR / "tokenizer.json").read_bytes()).hexdigest() == build["tokenizer_sha256"]


@pytest.mark.slow   # ~6-15 s: full rebuild (python -m pytest -m slow)
def test_shipped_tokenizer_matches_a_fresh_build():
    files = build_tokenizer.tokenizer_files()
    for name, data in files.items():
        assert (TOKENIZER_DIR / name).read_bytes() == data, name


def test_shipped_tokenizer_specials(codec):
    assert codec.vocab_size == 4096
    tok = codec.tokenizer
    assert [tok.token_to_id(t) for t in build_tokenizer.SPECIALS] == [0, 1, 2, 3, 4]
    assert (codec.pad_id, codec.cls_id, codec.sep_id, codec.mask_id) == (0, 2, 3, 4)
    config = json.loads((TOKENIZER_DIR / "tokenizer_config.json").read_text())
    assert {config[k] for k in ("cls_token", "sep_token", "pad_token", "mask_token", "unk_token")} == \
        set(build_tokenizer.SPECIALS)
    added = {t["content"]: t for t in json.loads((TOKENIZER_DIR / "tokenizer.json").read_text())["added_tokens"]}
    assert added["[MASK]"]["lstrip"] is True and added["[MASK]"]["special"] is True
    assert codec.encode("hello [MASK]").count(4) == 1
    assert codec.encode("hello [MASK]")[-1] == 4


def test_option_pieces_round_trip(codec, heldout_sample):
    unk = codec.tokenizer.token_to_id("[UNK]")
    checked = 0
    for record in generate("train", 200, 2) + heldout_sample[:200]:
        for q in record.questions.values():
            for text in validate_question('?', q).option_texts:
                if "[MASK]" in text:
                    continue
                ids = codec.encode(" " + text)
                assert ids == codec.encode(" " + text) == codec.encode(text)
                if unk not in ids:
                    assert codec.tokenizer.decode(ids) == unicodedata.normalize("NFKC", text)
                    checked += 1
    assert checked > 1000


def test_long_states_exceed_max_len_and_cues_survive_truncation(codec):
    for split in ("train", "heldout", "validation"):
        for record, cues in itertools.islice(_stream(split, 21), 400):
            text = build_tokenizer.clean(_state_text(record.state))
            length = next(iter(record.tags.values())).length_class
            if length == "long":
                assert len(codec.encode(text)) > MAX_LEN, record.id
            for cue in cues:
                if isinstance(record.state, list):   # left truncation keeps the newest turns
                    kept = text[text.rindex(cue):]
                else:                                # right truncation keeps the start
                    kept = text[: text.index(cue) + len(cue)]
                assert len(codec.encode(kept)) <= CUE_BUDGET, (record.id, cue)
