"""Calibration tables (§3.3) and answer decoding (§9)."""
from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from laya_opt.core.decode import (
         Calibration,
         act_probability,
         answer_probabilities,
         calibration_from_tables,
         decode_answer,
         envelope,
         option_bucket,
         round4,
         temperature_for,
     )
from laya_opt.core.prompt import PreparedQuestion, prepare_request

IDENTITY = Calibration()
ENGLISH_TEMPERATURE = [1.6369030475616455, 1.2514300346374512, 1.983399510383606]
ENGLISH_BUCKETS = {"choice:2": 1.9063563346862793, "choice:3-5": 1.7601518630981445,
                   "choice:6-10": 1.0000158548355103, "choice:11+": 0.10058280825614929,
                   "score:3-5": 1.2514300346374512, "noul:2": 1.983399510383606}


def question(type_name: str, keys, legend=(), qid="q") -> PreparedQuestion:
    keys = tuple(keys)
    return PreparedQuestion(qid=qid, type_name=type_name, qtype=("choice", "score", "noul").index(type_name),
                            ids=tuple(range(10 + len(keys))), markers=tuple(range(5, 5 + len(keys))),
                            option_keys=keys, legend=tuple(legend))


def row(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def reference_softmax(logits, temperature=1.0) -> np.ndarray:
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    exps = np.exp(scaled - scaled.max())
    return exps / exps.sum()


ACTION = row(2.0, -1.0)


def quiet_calibration(temperature, buckets=None) -> Calibration:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # these tables must not need clamping
        return calibration_from_tables(temperature, buckets)


# ---------------------------------------------------------------------------------------------------------------------
# Calibration tables


def test_tables_within_range_are_kept_without_warning():
    calibration = quiet_calibration([1.3, 1.1, 2], {"choice:2": 1.7})
    assert calibration.temperature == (1.3, 1.1, 2.0)
    assert calibration.temperature_by_options == {"choice:2": 1.7}
    assert all(isinstance(value, float) for value in calibration.temperature)


def test_english_choice_11_plus_is_clamped_to_half_with_one_warning():
    with pytest.warns(RuntimeWarning) as record:
        calibration = calibration_from_tables(ENGLISH_TEMPERATURE, ENGLISH_BUCKETS)
    assert len(record) == 1
    message = str(record[0].message)
    assert "temperature_by_options['choice:11+']: 0.10058280825614929 -> 0.5" in message
    assert "choice:2" not in message
    assert calibration.temperature_by_options["choice:11+"] == 0.5
    assert calibration.temperature_by_options["choice:2"] == 1.9063563346862793
    assert calibration.temperature == tuple(ENGLISH_TEMPERATURE)


def test_the_warning_names_the_file_and_a_malformed_table_is_a_config_error():
    from laya_opt.util.errors import ConfigError, InputWarning

    with pytest.warns(InputWarning, match=r"^ckpt/rl_agent_config.json: temperatures clamped .*temperature\[1\] "
                                          r"\(score\): 0 -> 0.5"):
        calibration_from_tables([1.0, 0, 1.0], {}, source="ckpt/rl_agent_config.json")
    with pytest.raises(ConfigError, match=r"^ckpt/rl_agent_config.json: temperature_by_options key 'x'"):
        calibration_from_tables([1.0, 1.0, 1.0], {"x": 1.0}, source="ckpt/rl_agent_config.json")


def test_every_changed_entry_is_listed_in_a_single_warning():
    raw = [float("nan"), 10, "abc"]
    buckets = {"noul:2": float("inf"), "score:11+": 0.1006, "choice:3-5": None, "choice:6-10": True,
               "score:2": -float("inf"), "choice:2": 1.5}
    with pytest.warns(RuntimeWarning) as record:
        calibration = calibration_from_tables(raw, buckets)
    assert len(record) == 1
    message = str(record[0].message)
    for fragment in ["temperature[0]", "nan", "temperature[1]", "10", "temperature[2]", "'abc'",
                     "'noul:2'", "inf", "'score:11+'", "0.1006", "'choice:3-5'", "None", "'choice:6-10'", "True",
                     "'score:2'"]:
        assert fragment in message
    assert "'choice:2'" not in message
    assert calibration.temperature == (1.0, 5.0, 1.0)
    assert calibration.temperature_by_options == {"noul:2": 1.0, "score:11+": 0.5, "choice:3-5": 1.0,
                                                  "choice:6-10": 1.0, "score:2": 1.0, "choice:2": 1.5}


def test_numpy_numbers_are_numbers():
    calibration = quiet_calibration(np.array([1.5, 2.0, 3.0], dtype=np.float64), {"noul:2": np.float32(2.0)})
    assert calibration.temperature == (1.5, 2.0, 3.0)
    assert calibration.temperature_by_options == {"noul:2": 2.0}


def test_default_tables():
    calibration = quiet_calibration((1.0, 1.0, 1.0), None)
    assert calibration == Calibration()


@pytest.mark.parametrize("temperature", [[1.0, 1.0], [1.0] * 4, [], 1.0, "1.0", None, {"choice": 1.0}])
def test_temperature_needs_exactly_three_entries(temperature):
    with pytest.raises(ValueError, match="temperature"):
        calibration_from_tables(temperature, {})


@pytest.mark.parametrize("key", ["choice", "choice:1", "choice:3-4", "multi:2", "choice:2:x", "Choice:2", " noul:2",
                                 "", 2, None])
def test_bad_bucket_keys_are_named(key):
    with pytest.raises(ValueError, match=re.escape(f"key {key!r} must look like")):
        calibration_from_tables([1.0, 1.0, 1.0], {key: 1.0, "choice:2": 1.2})


def test_bad_bucket_key_raises_before_any_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="'bogus'"):
            calibration_from_tables([float("nan"), 1.0, 1.0], {"bogus": 1.0})


def test_bucket_table_must_be_a_dict():
    with pytest.raises(ValueError, match="temperature_by_options"):
        calibration_from_tables([1.0, 1.0, 1.0], [("choice:2", 1.0)])


@pytest.mark.parametrize("k, bucket", [(0, "2"), (1, "2"), (2, "2"), (3, "3-5"), (5, "3-5"), (6, "6-10"),
                                       (10, "6-10"), (11, "11+"), (77, "11+")])
def test_option_buckets(k, bucket):
    assert option_bucket(k) == bucket


def test_temperature_for_uses_bucket_then_type():
    calibration = quiet_calibration([1.3, 1.1, 2.0], {"choice:2": 1.7, "score:11+": 4.0})
    assert temperature_for(calibration, "choice", 1) == 1.7
    assert temperature_for(calibration, "choice", 2) == 1.7
    assert temperature_for(calibration, "choice", 3) == 1.3
    assert temperature_for(calibration, "score", 2) == 1.1
    assert temperature_for(calibration, "score", 11) == 4.0
    assert temperature_for(calibration, "noul", 2) == 2.0
    with pytest.raises(ValueError, match="'multi'"):
        temperature_for(calibration, "multi", 2)


# ---------------------------------------------------------------------------------------------------------------------
# Rounding


@pytest.mark.parametrize("value, rounded", [(0.12345, 0.1235), (0.00005, 0.0001), (0.03125, 0.0312),
                                            (0.09375, 0.0938), (np.float32(0.5), 0.5), (1.0, 1.0),
                                            (np.float32(0.03125), 0.0312)])
def test_round4_is_python_round_on_binary64(value, rounded):
    assert round4(value) == rounded
    assert type(round4(value)) is float


def test_exact_ties_in_decoded_probabilities_round_to_even():
    keys = [f"o{i}" for i in range(32)]
    answer = decode_answer(question("choice", keys), np.zeros(32, dtype=np.float32), ACTION, IDENTITY)
    assert set(answer["probabilities"].values()) == {0.0312}  # exactly 1/32: half-up would give 0.0313
    assert answer["choice"] == "o0"                           # first argmax on ties
    assert answer["confidence"] == 0.0


# ---------------------------------------------------------------------------------------------------------------------
# Probabilities and fields


def test_choice_fields_and_values():
    prepared = question("choice", ["billing", "sales", "support"])
    logits = row(2.0, 0.5, -1.0)
    calibration = quiet_calibration([1.5, 1.0, 1.0])
    answer = decode_answer(prepared, logits, ACTION, calibration)
    assert list(answer) == ["type", "choice", "probabilities", "confidence", "answer_confidence", "action"]
    p = reference_softmax(logits, 1.5)
    assert answer["type"] == "choice" and answer["choice"] == "billing"
    assert list(answer["probabilities"]) == ["billing", "sales", "support"]
    assert answer["probabilities"] == pytest.approx(dict(zip(prepared.option_keys, p)), abs=6e-5)
    entropy = -(p * np.log(p)).sum()
    assert answer["confidence"] == pytest.approx(1 - entropy / math.log(3), abs=6e-5)
    assert answer["answer_confidence"] == pytest.approx(p.max(), abs=6e-5)
    assert answer["action"] == {"act_probability": round(float(reference_softmax(ACTION)[0]), 4)}


def test_score_fields_and_values():
    legend = ("low", {"detail": "mid"}, 3)
    prepared = question("score", ["0", "1", "2"], legend=legend)
    logits = row(0.1, 1.2, -0.3)
    answer = decode_answer(prepared, logits, ACTION, IDENTITY)
    assert list(answer) == ["type", "score", "legend", "probabilities", "confidence", "answer_confidence", "action"]
    p = reference_softmax(logits)
    assert answer["score"] == pytest.approx(float((np.arange(3) * p).sum()), abs=6e-5)
    assert answer["legend"] == {"0": "low", "1": {"detail": "mid"}, "2": 3}
    assert list(answer["probabilities"]) == ["0", "1", "2"]
    assert answer["answer_confidence"] == pytest.approx(p.max(), abs=6e-5)


def test_noul_fields_and_confidence():
    prepared = question("noul", ["false", "true"])
    logits = row(0.3, -1.1)
    answer = decode_answer(prepared, logits, ACTION, quiet_calibration([1.0, 1.0, 2.0]))
    assert list(answer) == ["type", "noul", "confidence", "answer_confidence", "action"]
    p = reference_softmax(logits, 2.0)
    assert answer["noul"] == pytest.approx(p[1], abs=6e-5)
    assert answer["confidence"] == pytest.approx(max(p[1], 1 - p[1]), abs=6e-5)
    assert answer["answer_confidence"] == pytest.approx(p.max(), abs=6e-5)


def test_two_level_score_is_in_unit_interval():
    answer = decode_answer(question("score", ["0", "1"], legend=("low", "high")), row(-3.0, 4.0), ACTION, IDENTITY)
    assert 0.0 <= answer["score"] <= 1.0 and answer["score"] > 0.99


def test_single_option_choice():
    answer = decode_answer(question("choice", ["only"]), row(-7.25, -1e4), ACTION, IDENTITY)
    assert answer["choice"] == "only"
    assert answer["probabilities"] == {"only": 1.0}
    assert answer["confidence"] == 1.0
    assert answer["answer_confidence"] == 1.0


def test_padding_slots_are_ignored():
    prepared = question("choice", ["a", "b", "c"])
    unpadded = decode_answer(prepared, row(1.0, 2.0, 0.5), ACTION, IDENTITY)
    padded = decode_answer(prepared, row(1.0, 2.0, 0.5, -1e4, float("nan"), float("inf"), 99.0), ACTION, IDENTITY)
    assert padded == unpadded
    assert list(padded["probabilities"]) == ["a", "b", "c"]


def test_temperature_buckets_change_probabilities():
    prepared = question("choice", ["a", "b"])
    logits = row(1.0, 0.0)
    calibration = quiet_calibration([1.0, 1.0, 1.0], {"choice:2": 4.0})
    p = answer_probabilities(prepared, logits, calibration)
    np.testing.assert_allclose(p, reference_softmax(logits, 4.0), atol=1e-6)
    wide = answer_probabilities(question("choice", ["a", "b", "c"]), row(1.0, 0.0, 0.0), calibration)
    np.testing.assert_allclose(wide, reference_softmax([1.0, 0.0, 0.0], 1.0), atol=1e-6)


def test_answer_probabilities_are_the_float32_softmax_widened():
    prepared = question("choice", ["a", "b", "c"])
    logits = row(0.123, -2.5, 1.75)
    p = answer_probabilities(prepared, logits, quiet_calibration([1.3, 1.0, 1.0]))
    assert p.dtype == np.float64
    scaled = logits / np.float32(1.3)
    exps = np.exp(scaled - scaled.max())
    expected32 = exps / exps.sum()
    assert expected32.dtype == np.float32
    np.testing.assert_array_equal(p, expected32.astype(np.float64))
    assert p.sum() == pytest.approx(1.0, abs=1e-6)


def test_unrounded_answers_match_raw_probabilities():
    prepared = question("score", ["0", "1", "2", "3"], legend=("a", "b", "c", "d"))
    logits = row(0.11, 0.37, -0.2, 0.9)
    raw = decode_answer(prepared, logits, ACTION, IDENTITY, rounded=False)
    p = answer_probabilities(prepared, logits, IDENTITY)
    assert list(raw["probabilities"].values()) == list(p)
    assert raw["action"]["act_probability"] == act_probability(ACTION)
    rounded = decode_answer(prepared, logits, ACTION, IDENTITY)
    assert rounded["probabilities"] == {key: round(value, 4) for key, value in raw["probabilities"].items()}
    assert rounded["score"] == round(raw["score"], 4)


def test_act_probability():
    assert act_probability(row(0.0, 0.0)) == 0.5
    assert act_probability(row(4000.0, -4000.0)) == 1.0  # saturated head, as shipped
    assert act_probability(row(1.0, 3.0)) == pytest.approx(reference_softmax([1.0, 3.0])[0], abs=1e-7)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_logits_name_the_question(bad):
    prepared = question("choice", ["a", "b"], qid="ticket_42")
    with pytest.raises(FloatingPointError, match="ticket_42"):
        decode_answer(prepared, row(0.0, bad), ACTION, IDENTITY)
    with pytest.raises(FloatingPointError, match="ticket_42"):
        answer_probabilities(prepared, row(bad, 0.0, 0.0), IDENTITY)
    with pytest.raises(FloatingPointError, match="ticket_42"):
        decode_answer(prepared, row(0.0, 1.0), row(bad, 0.0), IDENTITY)


def test_short_logits_row_names_the_question():
    with pytest.raises(ValueError, match="ticket_7"):
        decode_answer(question("choice", ["a", "b", "c"], qid="ticket_7"), row(1.0, 2.0), ACTION, IDENTITY)


# ---------------------------------------------------------------------------------------------------------------------
# Envelope and a prepared request end to end


def test_envelope_usage_counts_unpadded_ids(tiny_codec):
    questions = {"topic": {"type": "choice", "instructions": "x", "criteria": ["a", "b", "c"]},
                 "level": {"type": "score", "instructions": "x", "criteria": ["low", "high"]},
                 "yes": {"type": "noul", "instructions": "x"}}
    prepared = prepare_request("hello " * 5, questions, tiny_codec, 128, 32)
    calibration = quiet_calibration([1.3, 1.1, 2.0], {"choice:2": 1.7})
    answers = {item.qid: decode_answer(item, np.linspace(-1, 1, 4, dtype=np.float32), ACTION, calibration)
               for item in prepared}
    body = envelope(answers, prepared)
    assert list(body) == ["model", "answers", "usage"]
    assert body["model"] == "laya-rl-agent"
    assert list(body["answers"]) == ["topic", "level", "yes"]
    assert body["usage"] == {"input_tokens": sum(len(item.ids) for item in prepared), "output_tokens": 0}
    assert 0.0 <= body["answers"]["yes"]["noul"] <= 1.0
    assert 0.0 <= body["answers"]["level"]["score"] <= 1.0
    assert body["answers"]["level"]["legend"] == {"0": "low", "1": "high"}


def test_empty_envelope():
    assert envelope({}, ()) == {"model": "laya-rl-agent", "answers": {}, "usage": {"input_tokens": 0,
                                                                                   "output_tokens": 0}}


# ---------------------------------------------------------------------------------------------------------------------
# Batched decoding: the same bits as one question at a time

from hypothesis import given, settings, strategies as st  # noqa: E402

from laya_opt.core.decode import decode_answers  # noqa: E402


def one_at_a_time(prepared, logits_row, action_row, calibration, rounded):
    """The decoder as it was before batching: 1-D float32 numpy on one question (the independent reference)."""
    def softmax(values):
        exps = np.exp(values - np.max(values), dtype=np.float32)
        return exps / np.sum(exps, dtype=np.float32)

    finish = round4 if rounded else float
    k = prepared.option_count
    temperature = np.float32(max(1e-3, temperature_for(calibration, prepared.type_name, k)))
    p = softmax(np.asarray(logits_row, dtype=np.float32)[:k] / temperature)
    if k < 2:
        confidence = 1.0
    else:
        entropy = -np.sum(p * np.log(np.clip(p, np.float32(1e-12), np.float32(1.0))), dtype=np.float32)
        confidence = float(np.clip(np.float32(1.0) - entropy / np.float32(math.log(k)), 0.0, 1.0))
    answer = {"type": prepared.type_name}
    if prepared.type_name == "choice":
        probabilities = ({prepared.option_keys[0]: 1.0} if k == 1 else
                         {key: finish(value) for key, value in zip(prepared.option_keys, p)})
        answer.update(choice=prepared.option_keys[int(np.argmax(p))], probabilities=probabilities,
                      confidence=finish(confidence))
    elif prepared.type_name == "score":
        answer.update(score=finish(np.sum(np.arange(k, dtype=np.float32) * p, dtype=np.float32)),
                      legend={str(i): value for i, value in enumerate(prepared.legend)},
                      probabilities={key: finish(value) for key, value in zip(prepared.option_keys, p)},
                      confidence=finish(confidence))
    else:
        answer.update(noul=finish(p[1]), confidence=finish(max(p[1], np.float32(1.0) - p[1])))
    answer["answer_confidence"] = finish(np.max(p))
    answer["action"] = {"act_probability": finish(softmax(np.asarray(action_row, dtype=np.float32))[0])}
    return answer


def generated_question(index, type_name, k):
    if type_name == "noul":
        return question("noul", ["false", "true"], qid=f"q{index}")
    keys = [str(level) for level in range(k)] if type_name == "score" else [f"o{j}" for j in range(k)]
    return question(type_name, keys, legend=tuple(f"l{j}" for j in range(k)) if type_name == "score" else (),
                    qid=f"q{index}")


questions_strategy = st.lists(st.tuples(st.sampled_from(["choice", "score", "noul"]), st.integers(1, 24)),
                              min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(questions_strategy, st.integers(0, 2 ** 31 - 1), st.floats(0.5, 5.0), st.booleans(),
       st.sampled_from([1.0, 8.0, 60.0]))
def test_a_batch_decodes_to_the_same_bits_as_one_question_at_a_time(kinds, seed, temperature, rounded, scale):
    rng = np.random.default_rng(seed)
    prepared = [generated_question(i, t, 2 if t == "noul" else k) for i, (t, k) in enumerate(kinds)]
    slots = max(item.option_count for item in prepared) + int(rng.integers(0, 4))
    logits = []
    for item in prepared:
        values = (rng.standard_normal(slots) * scale).astype(np.float32)
        values[item.option_count:] = -1e4   # padding slots, never read
        logits.append(values)
    actions = [rng.standard_normal(2).astype(np.float32) * np.float32(scale) for _ in prepared]
    calibration = quiet_calibration([temperature, 1.25, 1.9], {"choice:11+": 0.75})
    batch = decode_answers(prepared, logits, actions, calibration, rounded=rounded)
    assert batch == [one_at_a_time(item, logit, action, calibration, rounded)
                     for item, logit, action in zip(prepared, logits, actions)]


def test_a_batch_names_the_first_bad_question_in_the_callers_order():
    prepared = [question("choice", ["a", "b"], qid=f"q{i}") for i in range(4)] + [question("noul", ["f", "t"], qid="n")]
    logits = [row(1.0, 2.0) for _ in prepared]
    actions = [ACTION for _ in prepared]
    logits[3] = row(1.0, float("nan"))
    with pytest.raises(FloatingPointError, match="question q3: non-finite logits"):
        decode_answers(prepared, logits, actions, IDENTITY)
    actions[1] = row(float("inf"), 0.0)
    with pytest.raises(FloatingPointError, match="question q1: non-finite action logits"):
        decode_answers(prepared, logits, actions, IDENTITY)
    with pytest.raises(ValueError, match="question q0: need a 1-D logits row with at least 2 slots"):
        decode_answers(prepared, [row(1.0)] + logits[1:], actions, IDENTITY)
    with pytest.raises(ValueError, match="one logits and one action row per question"):
        decode_answers(prepared, logits[:2], actions, IDENTITY)
