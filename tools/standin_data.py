"""Packed training data for the stand-in: tokenised once, cached as .npz, batched at fixed shapes.

Tokenising ~200k generated questions takes minutes of single-core Python, so the training script
packs them into flat arrays once (and can reuse a cache file keyed by everything that changes the
tokens). `question_arrays` turns packed questions into padded model inputs and targets; the training
script builds them once for all questions and keeps them on the device, one bank per padded length,
so a compiled training step only retraces per bank. `batch_arrays` builds one batch on the host.
"""
from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OPTION_TOKENS = 16  # option tokens kept per marker for the auxiliary matching target
NOUL = 2            # qtype of noul questions (laya_opt.core.prompt.QTYPES)
NO_FACT = -1        # `Packed.fact` / `.state_holds` / `.negated` of a question that is not a known noul fact


@dataclass(frozen=True)
class Packed:
    """Questions as flat arrays: question i owns ids[offsets[i]:offsets[i+1]] and its markers likewise."""

    ids: np.ndarray             # int16, all questions' token ids back to back
    offsets: np.ndarray         # int64 [N + 1]
    markers: np.ndarray         # int16, all questions' marker positions back to back
    marker_offsets: np.ndarray  # int64 [N + 1]
    qtype: np.ndarray           # int8 [N]
    label: np.ndarray           # int16 [N], gold option index
    # noul questions only (NO_FACT elsewhere), for the training-only noul targets:
    fact: np.ndarray            # int16 [N], row of the fact-token table (language x fact) the question asks about
    state_holds: np.ndarray     # int8 [N], 1 when the state states the fact, 0 when it states its negation
    negated: np.ndarray         # int8 [N], 1 when the question asks about the negated statement
    # 0 for hard cases (fidelity.hard_cases): their labels depend on words that are no option's, such as the
    # state's synonym of the answer or a "not", so template-token replacement must leave them alone.
    replaceable: np.ndarray     # int8 [N]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.qtype)


def pack(items, noul=None, replaceable=None) -> Packed:
    """Pack (PreparedQuestion, label index, tags) triples; `noul[i]` is (fact row, state holds, negated)
    for a noul question about a known fact and None otherwise (all None when `noul` is omitted);
    `replaceable[i]` is False for a question whose tokens replacement must not touch (all True by default)."""
    noul = [None] * len(items) if noul is None else list(noul)
    replaceable = [True] * len(items) if replaceable is None else list(replaceable)
    if len(noul) != len(items) or len(replaceable) != len(items):
        raise ValueError(f"{len(noul)} noul targets and {len(replaceable)} replaceable flags "
                         f"for {len(items)} questions")
    targets = np.array([t if t is not None else (NO_FACT,) * 3 for t in noul], dtype=np.int64).reshape(-1, 3)
    ids = [np.asarray(item.ids, dtype=np.int16) for item, _, _ in items]
    markers = [np.asarray(item.markers, dtype=np.int16) for item, _, _ in items]
    return Packed(
        ids=np.concatenate(ids), offsets=np.concatenate([[0], np.cumsum([len(x) for x in ids])]),
        markers=np.concatenate(markers), marker_offsets=np.concatenate([[0], np.cumsum([len(x) for x in markers])]),
        qtype=np.array([item.qtype for item, _, _ in items], dtype=np.int8),
        label=np.array([label for _, label, _ in items], dtype=np.int16),
        fact=targets[:, 0].astype(np.int16), state_holds=targets[:, 1].astype(np.int8),
        negated=targets[:, 2].astype(np.int8), replaceable=np.array(replaceable, dtype=np.int8))


def cache_key(**parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def save_packed(packed: Packed, path: Path, key: str) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, key=np.array(key), **{f: getattr(packed, f) for f in Packed.__dataclass_fields__})
    tmp.replace(path)


def load_packed(path: Path, key: str) -> Packed | None:
    """The cached data, or None when the file is missing or was built from different inputs."""
    if not path.exists():
        return None
    with np.load(path) as data:
        if str(data["key"]) != key or any(f not in data for f in Packed.__dataclass_fields__):
            return None
        return Packed(**{f: data[f] for f in Packed.__dataclass_fields__})


def fixed_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator):
    """Index arrays of exactly `batch_size` questions: shuffle, sort windows of 50 batches by length
    (little padding), drop each window's ragged tail, visit the batches in random order."""
    order = rng.permutation(len(lengths))
    window = batch_size * 50
    for start in range(0, len(order), window):
        chunk = order[start:start + window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        groups = [chunk[i:i + batch_size] for i in range(0, len(chunk) - batch_size + 1, batch_size)]
        for g in rng.permutation(len(groups)):
            yield groups[g]


def stop_token_ids(vocab: dict[str, int]) -> np.ndarray:
    """Tokens that carry no content for matching: the word-start mark alone, punctuation, digits."""
    def empty(token: str) -> bool:
        core = token.replace("\u2581", "")
        return all(unicodedata.category(ch)[0] in "PNSZ" for ch in core)
    return np.array(sorted(i for t, i in vocab.items() if empty(t)), dtype=np.int32)


def question_arrays(packed: Packed, index: np.ndarray, pad_id: int, sep_id: int, slots: int,
                    stop_ids: np.ndarray, length: int, fact_tokens: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Padded model inputs plus labels and the auxiliary targets' raw material for the questions `index`,
    every row padded to `length`; no replacement yet: `replace_where[b, j]` marks the tokens that
    template-token replacement may replace (see `batch_arrays`).

    The training script computes these once for all training questions and keeps them on the device;
    `batch_arrays` computes them per batch.
    """
    lengths = packed.lengths[index]
    if len(index) and lengths.max() > length:
        raise ValueError(f"a question of {lengths.max()} tokens does not fit length {length}")
    rows = len(index)
    ids = np.full((rows, length), pad_id, dtype=np.int32)
    marker_pos = np.zeros((rows, slots), dtype=np.int32)
    option_tokens = np.full((rows, slots, OPTION_TOKENS), -1, dtype=np.int32)
    state_region = np.zeros((rows, length), dtype=bool)
    replace_where = np.zeros((rows, length), dtype=bool)
    stop_set = np.zeros(int(max(stop_ids.max(initial=0), packed.ids.max(initial=0))) + 2, dtype=bool)
    stop_set[stop_ids] = True
    for row, q in enumerate(index):
        seq = packed.ids[packed.offsets[q]:packed.offsets[q + 1]].astype(np.int32)
        marks = packed.markers[packed.marker_offsets[q]:packed.marker_offsets[q + 1]].astype(np.int32)
        ids[row, :len(seq)] = seq
        marker_pos[row, :len(marks)] = marks
        seps = np.flatnonzero(seq[marks[-1]:] == sep_id)
        options_end = marks[-1] + (int(seps[0]) if len(seps) else len(seq))
        state_region[row, options_end + 1:len(seq) - 1] = True
        is_stop = stop_set[seq]
        for k, (begin, end) in enumerate(zip(marks, list(marks[1:]) + [options_end])):
            content = seq[begin + 1:end]
            content = content[~is_stop[begin + 1:end]][:OPTION_TOKENS]
            option_tokens[row, k, :len(content)] = content
        fact = int(packed.fact[q])
        if fact != NO_FACT and fact_tokens is not None:
            option_tokens[row, :len(marks)] = fact_tokens[fact][:OPTION_TOKENS]
        if packed.qtype[q] != NOUL and packed.replaceable[q]:
            # Instruction tokens (between [CLS] and the [SEP] before the first marker) and state tokens.
            where = state_region[row, :len(seq)].copy()
            where[1:marks[0] - 1] = True
            where &= ~is_stop & ~np.isin(seq, seq[marks[0]:options_end])
            replace_where[row, :len(seq)] = where
    counts = np.diff(packed.marker_offsets)[index]
    return {
        "input_ids": ids, "attention_mask": np.arange(length)[None, :] < lengths[:, None],
        "marker_pos": marker_pos, "marker_mask": np.arange(slots)[None, :] < counts[:, None],
        "qtype": packed.qtype[index].astype(np.int32), "labels": packed.label[index].astype(np.int32),
        "option_tokens": option_tokens, "state_region": state_region,
        "noul_bits": np.stack([packed.state_holds[index], packed.negated[index]], axis=1).astype(np.int32),
        "replace_where": replace_where,
    }


def batch_arrays(packed: Packed, index: np.ndarray, pad_id: int, sep_id: int, slots: int,
                 stop_ids: np.ndarray, multiple: int = 16, fact_tokens: np.ndarray | None = None,
                 replace_prob: float = 0.0, replace_pool: np.ndarray | None = None,
                 rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
    """Padded model inputs plus labels and the auxiliary targets' raw material for one batch.

    - `option_tokens[b, k]` holds up to OPTION_TOKENS content tokens of option k (-1 elsewhere). For a
      noul question about a known fact, every marker holds instead the fact's own tokens
      (`fact_tokens[fact]`): its options say only "yes"/"no", so the marker's match is the fact.
    - `state_region[b, j]` marks the state's tokens (after the options' [SEP], before the final one).
    - `noul_bits[b]` is (state holds, question negated), or (-1, -1) for other questions.
    - With `replace_prob`, each instruction or state token of a choice/score question that is no
      option's content token and no stop token is replaced, with that probability, by a random token
      of `replace_pool`. The labels follow from the option words alone, so this keeps them true while
      the template words the model could memorise become noise. Questions packed as not
      `replaceable` (hard cases) are left alone. (The training script draws the same replacement on
      the device, from `question_arrays`' `replace_where`.)
    """
    lengths = packed.lengths[index]
    length = int(-(-lengths.max() // multiple) * multiple)
    arrays = question_arrays(packed, index, pad_id, sep_id, slots, stop_ids, length, fact_tokens)
    where = arrays.pop("replace_where")
    if replace_prob:
        where &= rng.random(where.shape) < replace_prob
        arrays["input_ids"][where] = rng.choice(replace_pool, size=int(where.sum()))
    return arrays
