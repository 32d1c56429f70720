"""The gate suite's candidate pool and one-field variants, the variant tags, and the shipped gate.jsonl."""
from __future__ import annotations

import itertools
import json

import pytest

from laya_opt.core.checkpoint import file_sha256
from laya_opt.core.prompt import validate_question
from laya_opt.suites.suite_file import VARIANTS, SuiteError, SuiteRecord, dump_suite, load_suite, parse_suite
from laya_opt.suites.synthetic.gate_pool import (add_variants, pool_chunks, shipped_states, state_key, variant,
                                                 variant_slots)
from laya_opt.util.resources import standin_checkpoint, suites_dir

CHOICE = {"type": "choice", "instructions": "pick", "criteria": {"A": "red", "B": "blue", "C": "green"}}
NOUL = {"type": "noul", "instructions": "holds?", "criteria": {"false": "it fails", "true": "it holds"}}


def test_option_order_reverses_the_options_and_keeps_the_label():
    changed, label = variant(CHOICE, "B", "option_order")
    assert list(changed["criteria"]) == ["C", "B", "A"] and label == "B"
    listed, _ = variant({**CHOICE, "criteria": ["x", "y"]}, "x", "option_order")
    assert listed["criteria"] == ["y", "x"]


def test_option_text_swaps_two_descriptions_that_are_not_the_answer():
    changed, label = variant(CHOICE, "A", "option_text")
    assert label == "A" and changed["criteria"] == {"A": "red", "B": "green", "C": "blue"}
    assert variant({**CHOICE, "criteria": {"A": "red", "B": "blue"}}, "A", "option_text") is None  # one other option


def test_type_asks_a_noul_question_as_a_choice_with_the_same_option_texts():
    changed, label = variant(NOUL, True, "type")
    assert changed["type"] == "choice" and label == "true"
    assert validate_question("q", changed).option_texts == validate_question("q", NOUL).option_texts
    assert variant(NOUL, False, "type")[1] == "false"
    assert variant({**NOUL, "labels": {"false": "N", "true": "Y"}}, True, "type") is None
    assert variant({k: v for k, v in NOUL.items() if k != "criteria"}, True, "type") is None


def test_variants_apply_only_to_their_types_and_an_unknown_kind_is_refused():
    assert variant(NOUL, True, "option_order") is None and variant(CHOICE, "A", "type") is None
    with pytest.raises(ValueError, match="unknown variant 'colour'"):
        variant(CHOICE, "A", "colour")


def record_with(questions: dict, labels: dict) -> SuiteRecord:
    from laya_opt.suites.suite_file import QuestionTag
    tags = {qid: QuestionTag(type=q["type"], language="en", options=validate_question(qid, q).option_count,
                             length_class="short") for qid, q in questions.items()}
    return SuiteRecord("r-1", "a state", questions, labels, tags)


def test_added_variants_are_tagged_valid_and_one_per_original_question():
    records = [record_with({"c": CHOICE, "n": NOUL}, {"c": "A", "n": True})]
    out = add_variants(records, 10, seed=1)
    record = parse_suite(dump_suite("t", out, generator_seed=1, description="")).records[0]
    variants = {qid: tag for qid, tag in record.tags.items() if tag.variant is not None}
    assert {tag.variant_of for tag in variants.values()} == {"c", "n"}   # one each, though c has two kinds
    for qid, tag in variants.items():
        expected, label = variant(record.questions[tag.variant_of], record.labels[tag.variant_of], tag.variant)
        assert record.questions[qid] == expected and record.labels[qid] == label and tag.type == expected["type"]
    assert add_variants(records, 10, seed=1) == out and len(add_variants(records, 1, seed=1)[0].questions) == 3


def test_pool_chunks_are_deterministic_new_and_mixed():
    taken = shipped_states(suites_dir())
    first, second = list(itertools.islice(pool_chunks(5, taken), 2))
    assert [r.id for r in first] == [r.id for r in next(pool_chunks(5, taken))]
    keys = [state_key(r.state) for r in first + second]
    assert len(set(keys)) == len(keys) and not set(keys) & taken
    assert {r.id.split("-")[1] for r in first} == {"s", "h"}
    assert all(tag.phenomenon for r in first for tag in r.tags.values())   # standard records say so
    # A state already taken is skipped.
    assert first[0].id not in {r.id for r in next(pool_chunks(5, taken | {state_key(first[0].state)}))}


@pytest.mark.parametrize("tags, message", [
    ({"variant": "type"}, "variant and variant_of go together"),
    ({"variant": "colour", "variant_of": "c"}, "variant 'colour' not in"),
    ({"variant": "type", "variant_of": "nope"}, "variant_of 'nope' of 'c2' must name an earlier question"),
])
def test_bad_variant_tags_are_refused_with_the_record_and_question(tags, message):
    tag = {"type": "choice", "language": "en", "options": 3, "length_class": "short", "duplicate_of": None}
    record = {"id": "r", "state": "s", "questions": {"c": CHOICE, "c2": CHOICE}, "labels": {"c": "A", "c2": "A"},
              "tags": {"c": tag, "c2": {**tag, **tags}}}
    header = {"suite": "t", "version": 1, "generator_seed": None, "description": ""}
    data = (json.dumps(header) + "\n" + json.dumps(record) + "\n").encode()
    with pytest.raises(SuiteError, match=f"<t>:2: record 'r': .*{message}"):
        parse_suite(data, "<t>")


def test_a_bad_selected_under_header_is_refused():
    header = {"suite": "t", "version": 1, "generator_seed": None, "description": "", "selected_under": []}
    with pytest.raises(SuiteError, match="<t>:1: header: selected_under must be a non-empty object"):
        parse_suite((json.dumps(header) + "\n").encode(), "<t>")


# --- The shipped gate suite ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gate():
    return load_suite(suites_dir() / "gate.jsonl")


def test_the_gate_is_large_held_out_and_disjoint_from_every_other_shipped_suite(gate):
    assert gate.n_questions >= 1000
    assert not {state_key(r.state) for r in gate.records} & shipped_states(suites_dir())
    assert {tag.phenomenon for r in gate.records for tag in r.tags.values()} >= {"standard", "close", "distractor"}
    assert {tag.length_class for r in gate.records for tag in r.tags.values()} == {"short", "medium", "long"}


def test_the_gate_holds_one_field_pairs_of_every_kind(gate):
    pairs = [(r, qid, tag) for r in gate.records for qid, tag in r.tags.items() if tag.variant is not None]
    assert {tag.variant for _, _, tag in pairs} == set(VARIANTS) and len(pairs) >= 100
    for record, qid, tag in pairs:
        assert (record.questions[qid], record.labels[qid]) == variant(record.questions[tag.variant_of],
                                                                      record.labels[tag.variant_of], tag.variant)


def test_the_gate_was_selected_under_the_bundled_standin(gate):
    """Fails when the stand-in changes without a rebuild: `python -m laya_opt.fidelity.make_gate_suite`."""
    under = gate.selected_under
    assert under["checkpoint"] == "standin" and under["dtype"] == "float32"
    assert under["model_sha256"] == file_sha256(standin_checkpoint() / "model.safetensors")
    assert under["rl_agent_config_sha256"] == file_sha256(standin_checkpoint() / "rl_agent_config.json")


def test_variant_slots_cover_the_shipped_pairs_originals(gate):
    slots = {(gate.records[i].id, qid, kind) for i, qid, kind in variant_slots(gate.records)}
    assert all((r.id, tag.variant_of, tag.variant) in slots
               for r in gate.records for tag in r.tags.values() if tag.variant is not None)
