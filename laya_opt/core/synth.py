"""Random real-format checkpoints at published sizes, for speed work at true scale (never committed)."""
from __future__ import annotations

from pathlib import Path

from laya_opt.core.checkpoint import parse_dtype
from laya_opt.core.checkpoint_write import build_random_model, save_checkpoint
from laya_opt.core.config import ARCHITECTURES, parse_agent_config, parse_encoder_config
from laya_opt.util.errors import ConfigError, InputError
from laya_opt.util.jsonio import read_json
from laya_opt.util.resources import project_tokenizer
from laya_opt.util.staging import check_creatable
from laya_opt.core.tokens import TOKENIZER_FILES, load_codec


RANDOM_WEIGHTS = "random"  # rl_agent_config.json training.weights of a checkpoint this module wrote


def has_random_weights(checkpoint_dir: str | Path) -> bool:
    """Whether the checkpoint says its weights are random (its suite labels then measure nothing)."""
    try:
        raw = read_json(Path(checkpoint_dir) / "rl_agent_config.json")
    except (InputError, OSError):
        return False
    training = raw.get("training") if isinstance(raw, dict) else None
    return isinstance(training, dict) and training.get("weights") == RANDOM_WEIGHTS


def write_random_checkpoint(arch: str, out_dir: str | Path, seed: int = 0, dtype: str = "float16",
                            tokenizer_dir: str | Path | None = None) -> Path:
    """A complete upstream-layout checkpoint with random weights; the tokenizer defaults to the project's.

    Only the tokenizer files a checkpoint needs are copied from `tokenizer_dir`.
    """
    if arch not in ARCHITECTURES:
        raise InputError(f"unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"output directory {out_dir} already exists")
    check_creatable(out_dir.parent, "output directory")
    tokenizer_dir = tokenizer_dir or project_tokenizer()
    codec = load_codec(tokenizer_dir)
    encoder_raw, agent_raw = (dict(part) for part in ARCHITECTURES[arch])
    if codec.vocab_size > encoder_raw["vocab_size"]:
        raise ConfigError(f"tokenizer {tokenizer_dir} has {codec.vocab_size} tokens, more than the "
                         f"{arch} vocabulary of {encoder_raw['vocab_size']}")
    # Hugging Face builds the encoder from these ids: they must exist in this vocabulary (spec §13.22).
    encoder_raw.update(pad_token_id=codec.pad_id, cls_token_id=codec.cls_id, sep_token_id=codec.sep_id,
                       bos_token_id=codec.cls_id, eos_token_id=codec.sep_id, architectures=["ModernBertModel"])
    agent_raw.update(temperature=[1.0, 1.0, 1.0], temperature_by_options={}, amp_dtype="bf16",
                     training={"source": f"laya-opt make-checkpoint --arch {arch} --random --seed {seed}",
                               "weights": RANDOM_WEIGHTS})
    encoder = parse_encoder_config(encoder_raw)
    agent = parse_agent_config(agent_raw, encoder)
    model = build_random_model(encoder, agent, seed=seed, dtype=parse_dtype(dtype))
    return save_checkpoint(model, out_dir, encoder_raw, agent_raw, tokenizer_dir, tokenizer_files=TOKENIZER_FILES)
