"""Train the stand-in checkpoint's tokenizer: a 4096-entry BPE on generated `train`-split text.

    python tools/build_tokenizer.py [--out checkpoints/tokenizer] [--seed 1234] [--records 12000]

Deterministic: the corpus comes from `laya_opt.suites.synthetic.generator.iter_training_records(seed)` only,
training runs single-threaded, and the files are written from fixed structures, so two runs give identical bytes.

Design: NFKC normaliser; Metaspace pre-tokeniser ("▁" marks a preceding space and is always prepended,
so `tok(" billing")` and `tok("billing")` give the same pieces, which keeps the leading-space option
pieces of spec §7.3 stable), then punctuation isolated and digits split one by one. CJK text has no
spaces: Han ideographs are split into single characters (as in BERT), kana runs are merged by BPE. Special
tokens `[PAD] [UNK] [CLS] [SEP] [MASK]` get ids 0-4; `[MASK]` has lstrip=True like ModernBERT. No byte
fallback: unseen characters are `[UNK]`.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Iterator

# Single-threaded training: merge ties and counts must not depend on thread scheduling.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

from laya_opt.suites.synthetic.generator import iter_training_records  # noqa: E402
from laya_opt.core.prompt import clean_mask_literals, serialize_state, validate_question  # noqa: E402

HERE = Path(__file__).resolve().parent

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MASK_TOKEN = "[MASK]"
VOCAB_SIZE = 4096
# Han ideographs (CJK unified, extension A, compatibility) become single-character pre-tokens, as in
# BERT's basic tokenizer; otherwise whole space-less CJK sentences would eat the merge budget.
CJK_IDEOGRAPHS = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
DEFAULT_SEED = 1234
DEFAULT_RECORDS = 12000
MAX_LEN = 256
CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "model_max_length": MAX_LEN,
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "mask_token": "[MASK]",
    "unk_token": "[UNK]",
    "clean_up_tokenization_spaces": False,
}


def clean(text: str) -> str:
    """Mask-literal cleaning (spec §7.2) with the project's mask token: user text never contains a marker."""
    return clean_mask_literals(text, MASK_TOKEN)


def training_texts(seed: int, n_records: int) -> Iterator[str]:
    """The pieces the runtime tokenizes: states, question headers and leading-space option texts."""
    for record in itertools.islice(iter_training_records(seed), n_records):
        yield clean(serialize_state(record.state))
        for qid, q in record.questions.items():
            spec = validate_question(qid, q)
            yield clean(spec.header)
            for text in spec.option_texts:
                yield clean(" " + text)


def _chars(*ranges: tuple[int, int]) -> list[str]:
    return [chr(i) for lo, hi in ranges for i in range(lo, hi + 1)]


# Seed alphabet: every letter of the small scripts in use (ASCII, Latin-1 letters, basic Cyrillic,
# Devanagari, kana), so rarer letters of held-out text are not [UNK]. Han ideographs are too many to
# seed: the ones never seen in training stay [UNK].
INITIAL_ALPHABET = _chars((0x21, 0x7E), (0xC0, 0xFF), (0x401, 0x401), (0x410, 0x44F), (0x451, 0x451),
                          (0x900, 0x97F), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x30FC, 0x30FC))


def new_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
        pre_tokenizers.Split(Regex(CJK_IDEOGRAPHS), behavior="isolated"),
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
    ])
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    return tokenizer


def special_tokens() -> list[AddedToken]:
    return [AddedToken(tok, lstrip=(tok == "[MASK]"), rstrip=False, normalized=False, special=True)
            for tok in SPECIALS]


def build_tokenizer(seed: int = DEFAULT_SEED, n_records: int = DEFAULT_RECORDS,
                    vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    tokenizer = new_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=special_tokens(),
                                  initial_alphabet=INITIAL_ALPHABET, show_progress=False)
    tokenizer.train_from_iterator(training_texts(seed, n_records), trainer=trainer)
    for i, tok in enumerate(SPECIALS):
        if tokenizer.token_to_id(tok) != i:
            raise RuntimeError(f"special token {tok} got id {tokenizer.token_to_id(tok)}, expected {i}")
    return tokenizer


def tokenizer_files(seed: int = DEFAULT_SEED, n_records: int = DEFAULT_RECORDS,
                    vocab_size: int = VOCAB_SIZE) -> dict[str, bytes]:
    """File name -> bytes of `tokenizer.json` and `tokenizer_config.json`."""
    tokenizer = build_tokenizer(seed, n_records, vocab_size)
    tokenizer_json = (tokenizer.to_str(pretty=True) + "\n").encode("utf-8")
    # Provenance (ignored by loaders): lets a fast test spot hand edits; a slow test rebuilds.
    build = {"script": "checkpoints/build_tokenizer.py", "seed": seed, "train_records": n_records,
             "vocab_size": vocab_size, "tokenizer_sha256": hashlib.sha256(tokenizer_json).hexdigest()}
    config = {**CONFIG, "laya_opt_build": build}
    return {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode("utf-8"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE.parent / "checkpoints" / "tokenizer")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = parser.parse_args(argv)
    files = tokenizer_files(args.seed, args.records, args.vocab_size)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (args.out / name).write_bytes(data)
    vocab = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8")).get_vocab_size(with_added_tokens=True)
    print(f"wrote {args.out} (vocab {vocab}, seed {args.seed}, {args.records} train records)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
