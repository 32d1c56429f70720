"""The lexical baseline: its rules on hand-made questions, its report on a small suite, its command line."""
from __future__ import annotations

import json

import pytest

from laya_opt.suites.lexical_baseline import (MIN_SHARED, TARGET_ACCURACY, baseline_report, gaps_to_target,
                                              has_negation, main, predict_option, predict_suite, predict_visible,
                                              stems, visible_question)
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord, dump_suite, parse_suite
from laya_opt.core.prompt import prepare_request, validate_question
from laya_opt.core.tokens import load_codec
from laya_opt.util.resources import project_tokenizer


def _answer(state: str, question: dict) -> int:
    return predict_option(state, validate_question("q", question))


def _choice(criteria) -> dict:
    return {"type": "choice", "instructions": "Which team?", "criteria": criteria}


def _noul(instructions: str) -> dict:
    return {"type": "noul", "instructions": instructions}


def test_units_fold_case_and_inflection_and_split_cjk_runs():
    assert stems("Invoices INVOICE") == ("invoi", "invoi")
    assert stems("我要退款") == ("我", "要", "退", "款", "我要", "要退", "退款")
    assert stems("मुझे रिफंड चाहिए") == ("मुझे", "रिफंड", "चाहिए")   # vowel signs stay inside the word


def test_choice_picks_the_option_whose_own_words_are_in_the_state():
    criteria = {"billing": "invoice, payment", "shipping": "delivery, courier"}
    assert _answer("My courier never came.", _choice(criteria)) == 1
    assert _answer("The invoice is wrong.", _choice(criteria)) == 0


def test_words_every_option_shares_say_nothing_and_ties_go_to_the_earliest_option():
    framed = {"a": "requests about invoices", "b": "requests about deliveries"}
    assert _answer("I have requests about my deliveries.", _choice(framed)) == 1
    assert _answer("Nothing relevant here.", _choice(["billing", "shipping", "account"])) == 0


def test_a_word_found_in_every_clause_weighs_less_than_a_word_found_once():
    state = "I am in town. I am in the office. I am in doubt. I am furious."
    question = {"type": "score", "instructions": "Mood?", "criteria": ["in person", "furious"]}
    assert _answer(state, question) == 1   # one match each: "in" (three clauses) weighs a third of "furious"


def test_score_reads_the_level_text_and_repeated_numbers():
    rating = {"type": "score", "instructions": "Rating?", "criteria": ["1 out of 3", "2 out of 3", "3 out of 3"]}
    assert _answer("My score: 3 out of 3.", rating) == 2
    assert _answer("My score: 2 out of 3.", rating) == 1   # one 3 in the state is not "3 out of 3"


def test_noul_compares_negation_of_the_matching_clause_and_claim():
    state = "Hello there. I am not asking for a refund. My card is blocked."
    assert _answer(state, _noul("True or false: The customer asks for a refund.")) == 0
    assert _answer(state, _noul("True or false: The customer does not ask for a refund.")) == 1
    assert _answer(state, _noul("The customer's card is blocked.")) == 1


def test_noul_says_false_when_no_clause_shares_enough_words():
    assert MIN_SHARED >= 2
    assert _answer("Hello there. My card is blocked.", _noul("The customer attached a screenshot.")) == 0


def test_negation_cues_in_several_languages_and_none_in_plain_text():
    for text in ("I don't know", "Ich möchte keine Rückerstattung", "Je ne demande pas", "No quiero",
                 "Я не прошу", "我不要求退款", "返金は求めていません", "मुझे रिफंड नहीं चाहिए"):
        assert has_negation(text), text
    for text in ("I want a refund", "Ich möchte eine Rückerstattung", "我要求退款", "返金をお願いします"):
        assert not has_negation(text), text


def _suite():
    state = "The invoice is wrong. I am not asking for a refund."
    questions = {"department": _choice({"billing": "invoice", "shipping": "courier"}),
                 "refund": _noul("The customer asks for a refund."),
                 "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["minor", "critical"]}}
    labels = {"department": "shipping", "refund": False, "urgency": 1}   # the heuristic is right on the noul only
    tags = {qid: QuestionTag(type=q["type"], language="en", options=2, length_class="short",
                             phenomenon="distractor" if qid == "department" else None)
            for qid, q in questions.items()}
    record = SuiteRecord("r1", state, questions, labels, tags)
    return dump_suite("tiny", [record], generator_seed=None, description="hand-made")


def test_report_by_type_and_by_tagged_case():
    report = baseline_report(parse_suite(_suite()))
    assert report["overall"] == {"accuracy": pytest.approx(1 / 3), "n": 3}
    assert report["by_type"] == {"choice": {"accuracy": 0.0, "n": 1}, "noul": {"accuracy": 1.0, "n": 1},
                                 "score": {"accuracy": 0.0, "n": 1}}
    assert report["by_case"] == {"choice/distractor": {"accuracy": 0.0, "n": 1}}
    gaps = gaps_to_target(report)
    assert gaps["all"] == pytest.approx(TARGET_ACCURACY - 1 / 3) and gaps["noul"] == pytest.approx(TARGET_ACCURACY - 1)


def test_command_line_json_and_bad_suite(tmp_path, capsys):
    path = tmp_path / "tiny.jsonl"
    path.write_bytes(_suite())
    assert main(["--suite", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["n"] == 3
    assert main(["--suite", str(path)]) == 0
    assert "lexical baseline on tiny: accuracy 0.3333" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["--suite", "no-such-suite"])
    assert refused.value.code == 2 and "bundled suites" in capsys.readouterr().err


@pytest.fixture(scope="module")
def codec():
    return load_codec(project_tokenizer())


def _visible(codec, state, question, max_len, head_max_len):
    [item] = prepare_request(state, {"q": question}, codec, max_len, head_max_len)
    return visible_question(item, validate_question("q", question), codec)


def test_the_model_input_decodes_to_the_question_when_the_budgets_hold_it(codec):
    question = _choice({"billing": "invoice payment", "shipping": "courier parcel"})
    state, visible = _visible(codec, "The courier lost my parcel.", question, 256, 96)
    assert state == "The courier lost my parcel." and visible.instructions == "Which team?"
    assert visible.option_texts == validate_question("q", question).option_texts
    # and the heuristic answers as on the record; a suite's answers agree question by question
    assert predict_option(state, visible) == _answer("The courier lost my parcel.", question) == 1
    suite = parse_suite(_suite())
    assert [a.predicted for a in predict_visible(suite, codec, 256, 96)] == [a.predicted for a in predict_suite(suite)]


def test_what_the_budgets_cut_the_heuristic_cannot_read(codec):
    # The decisive sentence sits after 60 filler sentences: max_len 128 cuts it off, 1024 keeps it.
    long_state = "We wrote about the weather. " * 60 + "The courier lost my parcel."
    question = _choice({"billing": "invoice payment", "shipping": "courier parcel"})
    for max_len, expected in ((1024, 1), (128, 0)):   # cut: no option matches and the earliest wins
        state, visible = _visible(codec, long_state, question, max_len, 96)
        assert ("courier" in state) == (max_len == 1024)
        assert predict_option(state, visible) == expected
    # Twenty options in a 40-token head budget keep 4 tokens each: the marker and 3 of the description's.
    options = {f"team{i}": f"alpha beta gamma delta epsilon zeta word{i}" for i in range(20)}
    _, visible = _visible(codec, "Nothing here.", _choice(options), 256, 100)
    assert all("word" not in text and len(text) < len(f" team{i}: alpha beta gamma delta")
               for i, text in enumerate(visible.option_texts))
