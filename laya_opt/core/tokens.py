"""Tokenizer loading: the Rust `tokenizers` file plus the four special tokens the model needs.

Special-token ids always come from the tokenizer files (spec §4), never from encoder/config.json.
The four must be distinct special (added) tokens of tokenizer.json: a `mask_token` of `[CLS]`, or
of an ordinary word, would make every option marker something else, or something user text can
produce, and change every answer silently.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer

from laya_opt.util.errors import ConfigError
from laya_opt.util.jsonio import read_json

SPECIAL_KEYS = ("cls_token", "sep_token", "pad_token", "mask_token")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")   # all a checkpoint's tokenizer/ needs


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
    raise ConfigError(f"{path}: {key} must be a string or an object with 'content', got {value!r}")


def _special_ids(tokenizer: Tokenizer, specials: dict[str, str], source: str) -> dict[str, int]:
    added = tokenizer.get_added_tokens_decoder()
    ids: dict[str, int] = {}
    for key in SPECIAL_KEYS:
        token = specials.get(key)
        if token is None:
            raise ConfigError(f"{source}: missing special token '{key}'")
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise ConfigError(f"{source}: special token {key}={token!r} is not in the vocabulary")
        clash = next((other for other, other_id in ids.items() if other_id == token_id), None)
        if clash is not None:
            raise ConfigError(f"{source}: {key} and {clash} are both {token!r} (id {token_id}); the four special "
                              "tokens must differ")
        if token_id not in added or not added[token_id].special:
            raise ConfigError(f"{source}: {key}={token!r} (id {token_id}) is an ordinary vocabulary entry, not a "
                              "special token of tokenizer.json, so text could produce it")
        ids[key] = token_id
    return ids


def codec_from_tokenizer(tokenizer: Tokenizer, specials: dict[str, str], source: str = "tokenizer") -> TextCodec:
    tokenizer.no_truncation()
    tokenizer.no_padding()
    ids = _special_ids(tokenizer, specials, source)
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
    tok_path, cfg_path = (tokenizer_dir / name for name in TOKENIZER_FILES)
    if not tok_path.is_file():
        raise ConfigError(f"{tok_path}: file not found (a tokenizer folder holds {' and '.join(TOKENIZER_FILES)})")
    raw = read_json(cfg_path, ConfigError)
    if not isinstance(raw, dict):
        raise ConfigError(f"{cfg_path}: expected a JSON object")
    specials = {key: _token_string(raw[key], key, cfg_path) for key in SPECIAL_KEYS if key in raw}
    try:
        tokenizer = Tokenizer.from_file(str(tok_path))
    except Exception as exc:  # the Rust library raises a bare Exception without the file name
        raise ConfigError(f"{tok_path}: not a valid tokenizers file ({exc})") from None
    return codec_from_tokenizer(tokenizer, specials, source=f"{cfg_path} (with {tok_path.name})")
