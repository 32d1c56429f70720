"""Tokenizer loading: the Rust `tokenizers` file plus the four special tokens the model needs.

Special-token ids always come from the tokenizer files (spec §4), never from encoder/config.json.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer

from .config import read_json

SPECIAL_KEYS = ("cls_token", "sep_token", "pad_token", "mask_token")


@dataclass(frozen=True)
class TextCodec:
    """A tokenizer with its special ids; encodes raw pieces without adding, truncating or padding."""

    tokenizer: Tokenizer
    cls_id: int
    sep_id: int
    pad_id: int
    mask_id: int
    mask_token: str
    vocab_size: int
    # A Rust tokenizer shared between threads can raise "Already borrowed": serialise calls.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def encode(self, text: str) -> list[int]:
        with self._lock:
            return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Each text encoded on its own, in one call (the Rust side batches them); same ids as `encode`."""
        with self._lock:
            return [encoding.ids for encoding in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode_tokens(self, ids) -> list[str]:
        with self._lock:
            return [self.tokenizer.id_to_token(int(i)) or f"<{int(i)}>" for i in ids]


def _token_string(value, key: str, path: Path) -> str:
    # tokenizer_config.json stores plain strings or AddedToken-like objects with "content".
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ValueError(f"{path}: {key} must be a string or an object with 'content', got {value!r}")


def codec_from_tokenizer(tokenizer: Tokenizer, specials: dict[str, str], source: str = "tokenizer") -> TextCodec:
    tokenizer.no_truncation()
    tokenizer.no_padding()
    ids = {}
    for key in SPECIAL_KEYS:
        token = specials.get(key)
        if token is None:
            raise ValueError(f"{source}: missing special token '{key}'")
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{source}: special token {key}={token!r} is not in the vocabulary")
        ids[key] = token_id
    return TextCodec(
        tokenizer=tokenizer,
        cls_id=ids["cls_token"],
        sep_id=ids["sep_token"],
        pad_id=ids["pad_token"],
        mask_id=ids["mask_token"],
        mask_token=specials["mask_token"],
        vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
    )


def load_codec(tokenizer_dir: str | Path) -> TextCodec:
    """Load `tokenizer.json` + `tokenizer_config.json` from a checkpoint's tokenizer/ folder."""
    tokenizer_dir = Path(tokenizer_dir)
    tok_path = tokenizer_dir / "tokenizer.json"
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    if not tok_path.is_file():
        raise FileNotFoundError(f"Not a complete Laya checkpoint: missing {tok_path}")
    raw = read_json(cfg_path)
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_path}: expected a JSON object")
    specials = {key: _token_string(raw[key], key, cfg_path) for key in SPECIAL_KEYS if key in raw}
    return codec_from_tokenizer(Tokenizer.from_file(str(tok_path)), specials, source=str(cfg_path))
