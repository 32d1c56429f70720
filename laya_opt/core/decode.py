"""Calibration tables and answer decoding (spec §3.3, §9)."""
from __future__ import annotations

import bisect
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from laya_opt.util.errors import ConfigError, InputWarning
from laya_opt.core.prompt import QTYPES, PreparedQuestion

TEMP_MIN = 0.5
TEMP_MAX = 5.0
FALLBACK_TEMPERATURE = 1.0   # replaces non-numeric and non-finite table entries
MIN_DIVISOR = 1e-3           # guards a hand-built Calibration; clamped tables never get near it
OPTION_BUCKETS = ("2", "3-5", "6-10", "11+")
BUCKET_TOPS = (2, 5, 10)     # the largest k of each bucket but the last
ENTROPY_FLOOR = 1e-12
ROUND_DIGITS = 4
MODEL_NAME = "laya-rl-agent"


@dataclass(frozen=True)
class Calibration:
    """The clamped temperature tables decoding uses (AgentConfig keeps them as configured)."""

    temperature: tuple[float, float, float] = (1.0, 1.0, 1.0)           # [choice, score, noul]
    temperature_by_options: dict[str, float] = field(default_factory=dict, hash=False)  # "<type>:<size>" -> t


# ---------------------------------------------------------------------------------------------------------------------
# Calibration tables (§3.3)


def _clamp_temperature(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
        return FALLBACK_TEMPERATURE
    value = float(raw)
    if not math.isfinite(value):
        return FALLBACK_TEMPERATURE
    return min(TEMP_MAX, max(TEMP_MIN, value))


def _was_changed(raw: Any, clamped: float) -> bool:
    # NaN != NaN, and non-numbers never equal a float here, so both count as changed.
    return isinstance(raw, bool) or not isinstance(raw, numbers.Real) or not raw == clamped


def _check_bucket_key(key: Any) -> None:
    parts = key.split(":") if isinstance(key, str) else []
    if len(parts) != 2 or parts[0] not in QTYPES or parts[1] not in OPTION_BUCKETS:
        raise ConfigError(f"temperature_by_options key {key!r} must look like '<type>:<size>' with type in "
                         f"{', '.join(QTYPES)} and size in {', '.join(OPTION_BUCKETS)}")


def _per_type_entries(temperature: Any) -> list:
    if isinstance(temperature, (str, bytes, Mapping)) or not isinstance(temperature, (Sequence, np.ndarray)):
        raise ConfigError(f"temperature must be a list of 3 numbers [choice, score, noul], got {temperature!r}")
    entries = list(temperature)
    if len(entries) != len(QTYPES):
        raise ConfigError(f"temperature must have exactly 3 entries [choice, score, noul], got {len(entries)}")
    return entries


def calibration_from_tables(temperature: Any = (1.0, 1.0, 1.0), temperature_by_options: Any = None,
                            source: str = "") -> Calibration:
    """Validate and clamp both tables to [0.5, 5.0]; one InputWarning (a RuntimeWarning) lists every entry
    that changed, after `source` (the file the tables came from); a malformed table is a ConfigError."""
    where = f"{source}: " if source else ""
    try:
        entries = _per_type_entries(temperature)
        raw_buckets = {} if temperature_by_options is None else temperature_by_options
        if not isinstance(raw_buckets, Mapping):
            raise ConfigError(f"temperature_by_options must be a dict, got {type(raw_buckets).__name__}")
        for key in raw_buckets:
            _check_bucket_key(key)  # all keys checked before any warning is emitted
    except ConfigError as exc:
        raise ConfigError(f"{where}{exc}") from None
    per_type = tuple(_clamp_temperature(raw) for raw in entries)
    buckets = {key: _clamp_temperature(raw) for key, raw in raw_buckets.items()}
    changes = [f"temperature[{index}] ({QTYPES[index]}): {raw!r} -> {value}"
               for index, (raw, value) in enumerate(zip(entries, per_type)) if _was_changed(raw, value)]
    changes += [f"temperature_by_options[{key!r}]: {raw!r} -> {buckets[key]}"
                for key, raw in raw_buckets.items() if _was_changed(raw, buckets[key])]
    if changes:
        warnings.warn(f"{where}temperatures clamped to [{TEMP_MIN}, {TEMP_MAX}] (non-numeric or non-finite -> "
                      f"{FALLBACK_TEMPERATURE}, spec §3.3): " + "; ".join(changes), InputWarning, stacklevel=2)
    return Calibration(temperature=per_type, temperature_by_options=buckets)


def option_bucket(k: int) -> str:
    """Size bucket of §9: 2 (k <= 2), 3-5, 6-10, 11+."""
    return OPTION_BUCKETS[bisect.bisect_left(BUCKET_TOPS, k)]  # the first bucket whose largest k is >= k


def temperature_for(calibration: Calibration, type_name: str, k: int) -> float:
    """The bucket override if present, else the per-type temperature."""
    if type_name not in QTYPES:
        raise ValueError(f"unknown question type {type_name!r}; expected one of {', '.join(QTYPES)}")
    bucket = f"{type_name}:{option_bucket(k)}"
    if bucket in calibration.temperature_by_options:
        return calibration.temperature_by_options[bucket]
    return calibration.temperature[QTYPES.index(type_name)]


# ---------------------------------------------------------------------------------------------------------------------
# Probabilities (float32 on the host, like upstream)
#
# Every step works on rows: one question is a batch of one. `decode_answers` runs each step once per group
# of questions that share a type and an option count, instead of once per question (at short-50 the
# per-question numpy calls were most of the decode time). The results are the same bits: the same float32
# operations on the same values, and numpy reduces each contiguous row of a 2-D array exactly as it
# reduces that row alone (tests/test_decode.py holds batches against one-at-a-time decoding).


def _softmax_rows(values: np.ndarray) -> np.ndarray:
    # copy=False: float32 input (the usual case) is used as is; the values, and so the bits, are the same
    shifted = values.astype(np.float32, copy=False) - values.max(axis=1, keepdims=True).astype(np.float32, copy=False)
    exps = np.exp(shifted, dtype=np.float32)
    return exps / exps.sum(axis=1, keepdims=True, dtype=np.float32)


def _real_logits(prepared: PreparedQuestion, logits_row: Any) -> np.ndarray:
    """The first k logits as float32; slots past k are padding (-1e4) and are never read."""
    row = np.asarray(logits_row, dtype=np.float32)
    k = prepared.option_count
    if row.ndim != 1 or row.shape[0] < k:
        raise ValueError(f"question {prepared.qid}: need a 1-D logits row with at least {k} slots, "
                         f"got shape {row.shape}")
    if k == 0:
        raise ValueError(f"question {prepared.qid}: has no options to decode")
    logits = row[:k]
    if not np.all(np.isfinite(logits)):
        raise FloatingPointError(f"question {prepared.qid}: non-finite logits {logits.tolist()}")
    return logits


def _action_row(action_row: Any, qid: Any = None) -> np.ndarray:
    row = np.asarray(action_row, dtype=np.float32)
    where = f"question {qid}: " if qid is not None else ""
    if row.ndim != 1 or row.shape[0] < 1:
        raise ValueError(f"{where}need a 1-D action row, got shape {row.shape}")
    if not np.all(np.isfinite(row)):
        raise FloatingPointError(f"{where}non-finite action logits {row.tolist()}")
    return row


def probability_rows(type_name: str, logits: np.ndarray, calibration: Calibration) -> np.ndarray:
    """Calibrated float32 probabilities of [n, k] logits of one type and option count."""
    temperature = temperature_for(calibration, type_name, logits.shape[1])
    return _softmax_rows(logits / np.float32(max(MIN_DIVISOR, temperature)))


def answer_probabilities(prepared: PreparedQuestion, logits_row: Any, calibration: Calibration) -> np.ndarray:
    """Calibrated option probabilities, un-rounded: the float32 softmax widened exactly to float64."""
    logits = _real_logits(prepared, logits_row)[None]
    return probability_rows(prepared.type_name, logits, calibration)[0].astype(np.float64)


def act_probability(action_row: Any, qid: Any = None) -> float:
    """softmax(action)[0], the probability of answering rather than escalating (reported, never gated on)."""
    return float(_softmax_rows(_action_row(action_row, qid)[None])[0, 0])


def _entropy_confidence_rows(p: np.ndarray) -> np.ndarray:
    """clip(1 - H(p)/log k, 0, 1) per row, for choice and score; 1.0 when k < 2."""
    if p.shape[1] < 2:
        return np.ones(p.shape[0], dtype=np.float32)
    log_p = np.log(np.clip(p, np.float32(ENTROPY_FLOOR), np.float32(1.0)))
    entropy = -(p * log_p).sum(axis=1, dtype=np.float32)
    return np.clip(np.float32(1.0) - entropy / np.float32(math.log(p.shape[1])), 0.0, 1.0)


# ---------------------------------------------------------------------------------------------------------------------
# Public answer fields (§9)


def round4(value: Any) -> float:
    """Python round on the binary64 value: ties to even on the exact binary fraction (round(0.03125, 4) = 0.0312)."""
    return round(float(value), ROUND_DIGITS)


@dataclass(frozen=True)
class _Group:
    """The float32 results for questions of one type and option count, one entry per question, as Python
    numbers (`tolist` widens float32 exactly, as `float()` does, and rounding Python floats is cheaper)."""

    p: list[list[float]]     # [n][k] calibrated probabilities
    act: list[float]         # act probability
    confidence: list[float]  # entropy confidence (choice, score) or max(p_true, 1 - p_true) (noul)
    best: list[int]          # argmax
    top: list[float]         # max p
    level: list[float] | None  # expected level (score)


def _group_results(type_name: str, logits: np.ndarray, actions: np.ndarray, calibration: Calibration) -> _Group:
    p = probability_rows(type_name, logits, calibration)
    if type_name == "noul":
        confidence = np.maximum(p[:, 1], np.float32(1.0) - p[:, 1])
    else:
        confidence = _entropy_confidence_rows(p)
    level = ((np.arange(p.shape[1], dtype=np.float32) * p).sum(axis=1, dtype=np.float32)
             if type_name == "score" else None)
    rows = p.tolist()
    # Python's max of the widened floats is numpy's float32 max, and list.index finds its first
    # occurrence as argmax does (p is finite: the logits were checked); cheaper than two numpy calls
    top = [max(row) for row in rows]
    return _Group(p=rows, act=_softmax_rows(actions)[:, 0].tolist(), confidence=confidence.tolist(),
                  best=[row.index(value) for row, value in zip(rows, top)], top=top,
                  level=None if level is None else level.tolist())


def _answer(prepared: PreparedQuestion, group: _Group, row: int, finish) -> dict:
    p = group.p[row]
    answer: dict[str, Any] = {"type": prepared.type_name}
    if prepared.type_name == "choice":
        if prepared.option_count == 1:
            probabilities = {prepared.option_keys[0]: 1.0}  # softmax of one logit, stated exactly
        else:
            probabilities = {key: finish(value) for key, value in zip(prepared.option_keys, p)}
        answer.update(choice=prepared.option_keys[group.best[row]], probabilities=probabilities,
                      confidence=finish(group.confidence[row]))
    elif prepared.type_name == "score":
        answer.update(score=finish(group.level[row]),
                      legend={str(level): value for level, value in enumerate(prepared.legend)},
                      probabilities={key: finish(value) for key, value in zip(prepared.option_keys, p)},
                      confidence=finish(group.confidence[row]))
    else:
        answer.update(noul=finish(p[1]), confidence=finish(group.confidence[row]))
    answer["answer_confidence"] = finish(group.top[row])
    answer["action"] = {"act_probability": finish(group.act[row])}
    return answer


def _check_inputs(prepared: Sequence[PreparedQuestion], logits_rows: Sequence, action_rows: Sequence) -> None:
    """Raise what one-at-a-time decoding raises first, in the caller's order (the batch found a problem)."""
    for item, logits_row, action_row in zip(prepared, logits_rows, action_rows):
        if item.type_name not in QTYPES:
            raise ValueError(f"question {item.qid}: unknown type {item.type_name!r}")
        _real_logits(item, logits_row)
        _action_row(action_row, item.qid)


def decode_answers(prepared: Sequence[PreparedQuestion], logits_rows: Sequence, action_rows: Sequence,
                   calibration: Calibration, *, rounded: bool = True) -> list[dict]:
    """The public answer of every question (§9 field order), computed per group of one type and option count.

    `rounded=False` keeps full float values for fidelity tools. A malformed or non-finite row raises the
    error that names its question, as decoding the questions one at a time would.
    """
    if not len(prepared) == len(logits_rows) == len(action_rows):
        raise ValueError(f"decode needs one logits and one action row per question: {len(prepared)} questions, "
                         f"{len(logits_rows)} logits rows, {len(action_rows)} action rows")
    finish = round4 if rounded else float
    groups: dict[tuple[str, int], list[int]] = {}
    for index, item in enumerate(prepared):
        groups.setdefault((item.type_name, item.option_count), []).append(index)
    answers: list[dict | None] = [None] * len(prepared)
    for (type_name, k), members in groups.items():
        logits = [np.asarray(logits_rows[index], dtype=np.float32) for index in members]
        actions = [np.asarray(action_rows[index], dtype=np.float32) for index in members]
        usable = (type_name in QTYPES and k > 0 and all(r.ndim == 1 and r.shape[0] >= k for r in logits)
                  and all(a.ndim == 1 and a.shape == actions[0].shape and a.shape[0] >= 1 for a in actions))
        if usable:  # contiguous [n, k] and [n, A] (one question: a reshaped copy, cheaper than stack)
            logits_k = (logits[0][:k].reshape(1, k).copy() if len(members) == 1 else
                        np.stack([r[:k] for r in logits]))
            action_k = actions[0].reshape(1, -1) if len(members) == 1 else np.stack(actions)
            usable = bool(np.isfinite(logits_k).all() and np.isfinite(action_k).all())
        if not usable:
            _check_inputs(prepared, logits_rows, action_rows)
            raise AssertionError("decode_answers: a group was refused that no question check refuses")
        group = _group_results(type_name, logits_k, action_k, calibration)
        for row, index in enumerate(members):
            answers[index] = _answer(prepared[index], group, row, finish)
    return answers


def decode_answer(prepared: PreparedQuestion, logits_row: Any, action_row: Any, calibration: Calibration,
                  *, rounded: bool = True) -> dict:
    """One public answer with the field order of §9; `rounded=False` keeps full float values for fidelity tools."""
    return decode_answers([prepared], [logits_row], [action_row], calibration, rounded=rounded)[0]


def envelope(answers: Mapping, prepared: Sequence[PreparedQuestion]) -> dict:
    """The response body: answers in the caller's order and unpadded input-token usage."""
    return {"model": MODEL_NAME, "answers": dict(answers),
            "usage": {"input_tokens": sum(len(item.ids) for item in prepared), "output_tokens": 0}}
