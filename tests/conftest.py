"""Shared fixtures: a tiny WordLevel tokenizer (spec §14) and helpers to build tiny checkpoints."""
from __future__ import annotations

import os

# The suite runs in one worker process per core (pyproject addopts, pytest-xdist). OpenBLAS's own thread
# pool per process would oversubscribe the cores: on the 2-core CI machine, 2 workers with 2 BLAS threads
# each took 3m40 (1m47 of it in the kernel), with 1 thread each 2m50. Set before laya_opt loads the BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")  # the same for MKL, the `cpu` extra's BLAS on x86-64 Linux

import pytest  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402

from laya_opt.core.tokens import TextCodec, codec_from_tokenizer  # noqa: E402

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


# ----------------------------------------------------------------------------- tiny checkpoints

TINY_ENCODER = {
    "model_type": "modernbert", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 3, "num_attention_heads": 1, "local_attention": 16, "max_position_embeddings": 256,
    "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
    "hidden_activation": "gelu", "norm_eps": 1e-5,
    "pad_token_id": 0, "cls_token_id": 2, "sep_token_id": 3, "bos_token_id": 2, "eos_token_id": 3,
}
TINY_AGENT = {
    "encoder": "test/tiny", "head_layers": 1, "max_len": 128, "head_max_len": 32,
    "act_costs": {"escalate": 0.5}, "temperature": [1.3, 1.1, 2.0], "temperature_by_options": {"choice:2": 1.7},
}


def write_tiny_checkpoint(out_dir, encoder_overrides=None, agent_overrides=None, seed: int = 7,
                          dtype: str = "float32", layout: str = "upstream", edit_model=None):
    """Write the spec §14 tiny random checkpoint (overridable; `edit_model(model)` changes weights) and return
    its path."""
    import json
    import tempfile
    from pathlib import Path

    from laya_opt.core.checkpoint import parse_dtype
    from laya_opt.core.checkpoint_write import build_random_model, save_checkpoint
    from laya_opt.core.config import parse_agent_config, parse_encoder_config

    encoder_raw = dict(TINY_ENCODER, **(encoder_overrides or {}))
    agent_raw = dict(TINY_AGENT, **(agent_overrides or {}))
    encoder = parse_encoder_config(encoder_raw)
    agent = parse_agent_config(agent_raw, encoder)
    model = build_random_model(encoder, agent, seed=seed, dtype=parse_dtype(dtype))
    if edit_model is not None:
        edit_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir = Path(tmp) / "tokenizer"
        tok_dir.mkdir()
        make_tiny_tokenizer().save(str(tok_dir / "tokenizer.json"))
        (tok_dir / "tokenizer_config.json").write_text(json.dumps(TINY_SPECIALS))
        return save_checkpoint(model, out_dir, encoder_raw, agent_raw, tok_dir, layout=layout)


@pytest.fixture(scope="session")
def tiny_checkpoint_dir(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny")


@pytest.fixture(scope="module")
def reference(tiny_checkpoint_dir):
    """The tiny checkpoint as a float32 runtime, shared by a module's reference-cache tests (a module whose tests
    may mutate it defines its own, per test)."""
    from laya_opt.core.runtime import load_runtime

    return load_runtime(tiny_checkpoint_dir, "float32")


@pytest.fixture(scope="module")
def platform():
    """The machine facts a reference-cache key holds (measured once per test module)."""
    from laya_opt.timing.bench import environment

    return environment()


@pytest.fixture(scope="session")
def wide_checkpoint_dir(tmp_path_factory):
    """Two heads, a sliding window (w = 4) narrower than the sequences, two head layers."""
    return write_tiny_checkpoint(tmp_path_factory.mktemp("wide") / "ckpt",
                                 encoder_overrides={"hidden_size": 128, "num_attention_heads": 2,
                                                    "local_attention": 8},
                                 agent_overrides={"head_layers": 2})


def _point_user_dirs(patch, base) -> None:
    patch.setenv("LAYA_OPT_CACHE_DIR", str(base / "cache"))
    patch.setenv("LAYA_OPT_DATA_DIR", str(base / "data"))


@pytest.fixture(scope="session", autouse=True)
def session_user_dirs(tmp_path_factory):
    """The reference cache and run history of module- and session-scoped fixtures: never the user's."""
    with pytest.MonkeyPatch.context() as patch:
        base = tmp_path_factory.mktemp("session-user")
        _point_user_dirs(patch, base)
        yield base


@pytest.fixture(autouse=True)
def private_user_dirs(tmp_path_factory, monkeypatch):
    """Every test gets its own reference cache and run history."""
    base = tmp_path_factory.mktemp("user")
    _point_user_dirs(monkeypatch, base)
    return base
