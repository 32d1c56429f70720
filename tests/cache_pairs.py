"""Pairs of requests that differ in exactly one field, for the caches' property tests (issue 22, item 5).

A cache whose key misses one thing its output depends on answers the second request of such a pair from
the first one's entry. Each cache's test runs the pair through the cached path, one after the other,
and compares both answers with the uncached path. Texts use the tiny tokenizer's vocabulary (`hello`,
and `x`, an unknown word), so different texts give different token ids.
"""
from __future__ import annotations

import numpy as np
from conftest import TINY_SPECIALS
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from laya_opt.core.tokens import codec_from_tokenizer
from laya_opt.fidelity.checker import EvalRequest

QUESTION_FIELDS = ("type", "option_order", "option_text")

words = st.lists(st.sampled_from(["hello", "x"]), min_size=1, max_size=4).map(" ".join)


@st.composite
def question_pairs(draw) -> tuple[str, dict, dict]:
    """(field, question, the question with that one field changed)."""
    field = draw(st.sampled_from(QUESTION_FIELDS))
    instructions = draw(words)
    texts = draw(st.lists(words, min_size=2, max_size=6, unique=True))
    if field == "type":   # the same instructions and option texts, asked as noul and as choice
        criteria = {"false": texts[0], "true": texts[1]}
        return field, {"type": "noul", "instructions": instructions, "criteria": criteria}, \
            {"type": "choice", "instructions": instructions, "criteria": criteria}
    index = draw(st.integers(0, len(texts) - 1))
    new = draw(words.filter(lambda text: text not in texts))
    changed = texts[::-1] if field == "option_order" else [new if i == index else t for i, t in enumerate(texts)]
    if draw(st.booleans()):   # options as a list (the texts are the keys) or as key -> description
        return field, {"type": "choice", "instructions": instructions, "criteria": texts}, \
            {"type": "choice", "instructions": instructions, "criteria": changed}
    keys = [f"k{i}" for i in range(len(texts))]
    criteria = dict(zip(keys, texts))
    other = dict(reversed(list(criteria.items()))) if field == "option_order" else dict(zip(keys, changed))
    return field, {"type": "choice", "instructions": instructions, "criteria": criteria}, \
        {"type": "choice", "instructions": instructions, "criteria": other}


def question_request(record_id: str, state: str, question: dict) -> EvalRequest:
    return EvalRequest(record_id, state, {"q": question})


@st.composite
def padding_pairs(draw) -> tuple[str, EvalRequest, EvalRequest]:
    """Two requests whose one batch has the same shape [2, L, K] and a different padding pattern:
    the long and the short question change places."""
    short, long = sorted(draw(st.lists(st.integers(0, 12), min_size=2, max_size=2, unique=True)))
    state = draw(words)

    def request(first: int, second: int) -> EvalRequest:
        return EvalRequest("pad", state, {"a": {"type": "noul", "instructions": "hello " * first + "x"},
                                          "b": {"type": "noul", "instructions": "hello " * second + "x"}})

    return "padding", request(long, short), request(short, long)


@st.composite
def request_pairs(draw) -> tuple[str, EvalRequest, EvalRequest]:
    """A one-field question pair or a padding pair, as requests over one state."""
    if draw(st.booleans()):
        return draw(padding_pairs())
    field, base, other = draw(question_pairs())
    state = draw(words)
    return field, question_request("r", state, base), question_request("r", state, other)


def assert_same_execution(reference, candidate, request: EvalRequest, atol: float = 0.0) -> None:
    """The candidate prepares the reference's tokens and returns its logits and action (bitwise, or within atol)."""
    prepared = reference.prepare(request.state, request.questions)
    assert candidate.prepare(request.state, request.questions) == prepared
    want, got = reference.execute(prepared), candidate.execute(prepared)
    for a, b in zip(want.logits + want.action, got.logits + got.action):
        if atol:
            np.testing.assert_allclose(b, a, atol=atol, rtol=0)
        else:
            assert a.tobytes() == b.tobytes()


def codec_with(*words: str):
    """The tiny tokenizer with `words` added to its vocabulary (the rest stay unknown)."""
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5}
    vocab.update({word: 6 + index for index, word in enumerate(words)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["[PAD]", "[CLS]", "[SEP]", "[MASK]"])
    return codec_from_tokenizer(tokenizer, TINY_SPECIALS)


def other_codec():
    """`x` known: the same texts tokenize to other ids than under the tiny tokenizer."""
    return codec_with("x")


def typed_codec():
    """The question types' words known, so a question's header says its type in ids."""
    return codec_with("choice", "noul", "score", "question", ":")
