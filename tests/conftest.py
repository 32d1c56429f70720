"""Shared fixtures: a tiny WordLevel tokenizer (spec §14) and helpers to build tiny checkpoints."""
from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from laya_opt.tokens import TextCodec, codec_from_tokenizer

TINY_SPECIALS = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]"}


def make_tiny_tokenizer() -> Tokenizer:
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(["[PAD]", "[CLS]", "[SEP]", "[MASK]"])
    return tokenizer


@pytest.fixture
def tiny_codec() -> TextCodec:
    return codec_from_tokenizer(make_tiny_tokenizer(), TINY_SPECIALS)
