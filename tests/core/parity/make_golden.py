#!/usr/bin/env python3
"""Build independent golden parity fixtures for laya-opt (spec LAYA_SPEC.md §3, §5, §11.6, §13, §14).

What it does
------------
For each tiny configuration below it

1. draws random FP32 weights with NumPy (fixed seed, realistic scales) under the UPSTREAM tensor names (§3.4),
2. writes a complete upstream-layout checkpoint directory
   (``model.safetensors``, ``rl_agent_config.json``, ``encoder/config.json``, ``tokenizer/tokenizer.json`` +
   ``tokenizer/tokenizer_config.json``),
3. builds a reference model in PyTorch from the *written* files: Hugging Face ``transformers.ModernBertModel``
   (``attn_implementation="eager"``) for the encoder, ``nn.TransformerEncoder`` of
   ``nn.TransformerEncoderLayer(D, max(1, D // 64), 4D, dropout=0, relu, batch_first, norm_first)`` for the decision
   head, and a small hand-written type-embedding / marker-gather / scorer / action-feature / action-head block
   (§5.5–5.6), loading the safetensors file with ``strict=True``,
4. tokenizes a batch of synthetic prompts with the written ``tokenizer.json`` and runs the reference in FP32,
5. cross-checks the whole forward against an independent float64 NumPy implementation (and runs a few HF behaviour
   probes: sliding-mask semantics, padding invariance, eager vs sdpa, TransformerEncoderLayer fast path vs slow path,
   batch vs single row),
6. saves inputs and expected outputs to ``cases.npz`` and writes ``manifest.json``.

Output layout (``--out``, default ``tests/core/parity/golden`` next to this file)::

    manifest.json                       versions, tolerances, measured cross-check diffs, file sha256s
    <name>/checkpoint/                  upstream checkpoint directory (load this)
        model.safetensors               float32, upstream names
        rl_agent_config.json
        encoder/config.json
        tokenizer/tokenizer.json
        tokenizer/tokenizer_config.json
    <name>/cases.npz                    input_ids i32 [B,L], attention_mask bool, marker_pos i32 [B,K],
                                        marker_mask bool, qtype i32 [B], logits f32 [B,K], action f32 [B,A],
                                        encoder_hidden f32 [B,L,D] (final_norm output),
                                        head_hidden f32 [B,L,D] (after the last head layer, before the gather;
                                        equals encoder_hidden + type_emb[qtype] when head_layers = 0)
                                        -- hidden states are ZEROED on padded positions: compare valid tokens only.
    <name>/tensor_names.txt             "name dtype shape" per tensor, sorted

Checkpoints: ``small`` (D 128, 2 heads, N 4 = full/sliding/sliding/full, window 16, thetas 160000/10000, 2 head
layers, legacy transformers-4 style config keys) and ``rope160k`` (N 3, layer_types sliding/full/sliding written
explicitly, both thetas 160000 via transformers-5 ``rope_parameters``, head_layers 0).

How to run (needs torch + transformers; the MLX tests that consume the output do not)::

    python3.11 -m venv .venv-parity
    .venv-parity/bin/pip install torch==2.13.0   # CPU wheel (torch-2.13.0+cpu)
    .venv-parity/bin/pip install transformers safetensors numpy tokenizers
    .venv-parity/bin/python tests/core/parity/make_golden.py            # rewrites tests/core/parity/golden/

Versions used to produce the committed files: Python 3.11.7, torch 2.13.0+cpu, transformers 5.24.0,
tokenizers 0.23.3, safetensors 0.8.0, numpy 2.4.6 (the exact versions are also recorded in manifest.json).
Output is byte-for-byte reproducible for a given set of versions (fixed seeds, one torch thread, fixed zip
timestamps in the npz files): ``make_golden.py --out /tmp/g && diff -r /tmp/g tests/core/parity/golden``.
Size: about 5.4 MB in total, almost all of it the two FP32 ``model.safetensors`` files (875,523 + 376,323 params x 4 B);
D = 128 with hd 64 (two heads) cannot fit 2 MB in FP32.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import platform
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import safetensors
import safetensors.numpy
import safetensors.torch
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import nn
from transformers import ModernBertConfig, ModernBertModel

# --------------------------------------------------------------------------------------------------------------------
# Fixture definitions
# --------------------------------------------------------------------------------------------------------------------

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
TOKENIZER_CONFIG = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]"}
NEG_MASKED = -1e4
ACT_HIDDEN = 256

TOLERANCES = {
    # allclose semantics: |actual - expected| <= atol + rtol * |expected|; hidden states on valid tokens only
    "encoder_hidden": {"atol": 2e-5, "rtol": 2e-5, "where": "attention_mask tokens only"},
    "head_hidden": {"atol": 2e-5, "rtol": 2e-5, "where": "attention_mask tokens only"},
    "logits": {"atol": 3e-5, "rtol": 3e-5, "where": "all slots (masked slots are exactly -1e4)"},
    "action": {"atol": 3e-5, "rtol": 3e-5, "where": "all"},
    "runtime_dtype": "float32",
    "source": "LAYA_SPEC.md §11.6 (FP32)",
}


@dataclass(frozen=True)
class Row:
    valid_len: int
    n_markers: int
    qtype: int


@dataclass(frozen=True)
class Fixture:
    name: str
    seed: int
    vocab: int
    hidden: int
    heads: int
    inter: int
    layers: int
    local_attention: int
    global_theta: float
    local_theta: float
    head_layers: int
    max_len: int
    head_max_len: int
    max_pos: int
    config_style: str  # "legacy" (transformers-4 keys) or "v5" (layer_types + rope_parameters)
    layer_types: tuple[str, ...] | None
    rows: tuple[Row, ...]
    agent_extra: dict = field(default_factory=dict)


FIXTURES = [
    Fixture(
        name="small", seed=20240607, vocab=128, hidden=128, heads=2, inter=96, layers=4, local_attention=16,
        global_theta=160000.0, local_theta=10000.0, head_layers=2, max_len=128, head_max_len=32, max_pos=256,
        config_style="legacy", layer_types=None,  # global_attn_every_n_layers=3 -> full, sliding, sliding, full
        rows=(Row(64, 8, 0), Row(41, 3, 1), Row(13, 1, 2), Row(52, 5, 0)),
        agent_extra={"temperature": [1.3, 1.1, 2.0], "temperature_by_options": {"choice:2": 1.7}},
    ),
    Fixture(
        name="rope160k", seed=160000, vocab=128, hidden=128, heads=2, inter=96, layers=3, local_attention=16,
        global_theta=160000.0, local_theta=160000.0, head_layers=0, max_len=128, head_max_len=32, max_pos=256,
        config_style="v5", layer_types=("sliding_attention", "full_attention", "sliding_attention"),
        rows=(Row(57, 2, 1), Row(30, 6, 0), Row(13, 1, 2), Row(45, 4, 2)),
        agent_extra={"temperature": [1.0, 1.0, 1.0], "temperature_by_options": {}},
    ),
]


# --------------------------------------------------------------------------------------------------------------------
# Checkpoint writing
# --------------------------------------------------------------------------------------------------------------------


def vocab_words(v: int) -> list[str]:
    words = SPECIALS + ["hello"] + [f"w{i}" for i in range(6, v)]
    assert len(words) == v
    return words


def make_tokenizer(v: int) -> Tokenizer:
    vocab = {w: i for i, w in enumerate(vocab_words(v))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[PAD]", "[CLS]", "[SEP]", "[MASK]"])
    return tok


def encoder_config_dict(fx: Fixture) -> dict:
    """encoder/config.json content; special-token ids valid for the tiny vocab (§13.22)."""
    ids = {"pad_token_id": PAD_ID, "cls_token_id": CLS_ID, "sep_token_id": SEP_ID, "bos_token_id": CLS_ID,
           "eos_token_id": SEP_ID}
    if fx.config_style == "legacy":
        # Keys as written by transformers 4.4x for ModernBERT (the published checkpoints): no layer_types /
        # rope_parameters; RoPE bases from global_/local_rope_theta; pattern from global_attn_every_n_layers.
        # position_embedding_type is a dead key of the upstream file: ModernBERT has no position embeddings.
        cfg = {
            "architectures": ["ModernBertModel"], "model_type": "modernbert",
            "vocab_size": fx.vocab, "hidden_size": fx.hidden, "intermediate_size": fx.inter,
            "num_hidden_layers": fx.layers, "num_attention_heads": fx.heads,
            "hidden_activation": "gelu", "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False,
            "mlp_bias": False, "local_attention": fx.local_attention, "global_attn_every_n_layers": 3,
            "global_rope_theta": fx.global_theta, "local_rope_theta": fx.local_theta,
            "max_position_embeddings": fx.max_pos, "attention_dropout": 0.0, "embedding_dropout": 0.0,
            "mlp_dropout": 0.0, "initializer_range": 0.02, "initializer_cutoff_factor": 2.0,
            "classifier_pooling": "cls", "classifier_activation": "gelu", "classifier_bias": False,
            "classifier_dropout": 0.0, "decoder_bias": True, "deterministic_flash_attn": False,
            "sparse_prediction": False, "sparse_pred_ignore_index": -100, "position_embedding_type": "absolute",
            "torch_dtype": "float32", **ids,
        }
        return cfg
    # transformers-5 layout: exactly what ModernBertConfig.to_dict() writes (layer_types + rope_parameters). The
    # stale global_attn_every_n_layers=3 is kept on purpose: layer_types must take precedence over it.
    c = ModernBertConfig(
        vocab_size=fx.vocab, hidden_size=fx.hidden, intermediate_size=fx.inter, num_hidden_layers=fx.layers,
        num_attention_heads=fx.heads, hidden_activation="gelu", max_position_embeddings=fx.max_pos, norm_eps=1e-5,
        norm_bias=False, attention_bias=False, mlp_bias=False, local_attention=fx.local_attention,
        layer_types=list(fx.layer_types),
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": fx.global_theta},
                         "sliding_attention": {"rope_type": "default", "rope_theta": fx.local_theta}},
        global_attn_every_n_layers=3, architectures=["ModernBertModel"], **ids,
    )
    cfg = c.to_dict()
    for junk in ("id2label", "label2id", "_name_or_path", "output_attentions", "output_hidden_states",
                 "return_dict", "chunk_size_feed_forward", "problem_type", "is_encoder_decoder"):
        cfg.pop(junk, None)
    return cfg


def make_weights(fx: Fixture) -> dict[str, np.ndarray]:
    """Random FP32 weights, upstream names (§3.4). Scales chosen so attention is far from uniform and logits ~O(1)."""
    rng = np.random.default_rng(fx.seed)
    D, inter, V, A = fx.hidden, fx.inter, fx.vocab, 2

    def n(shape, std, mean=0.0):
        return (mean + std * rng.standard_normal(shape)).astype(np.float32)

    w: dict[str, np.ndarray] = {}
    w["encoder.embeddings.tok_embeddings.weight"] = n((V, D), 1.0)
    w["encoder.embeddings.norm.weight"] = n((D,), 0.1, 1.0)
    for i in range(fx.layers):
        p = f"encoder.layers.{i}."
        if i > 0:
            w[p + "attn_norm.weight"] = n((D,), 0.1, 1.0)
        w[p + "attn.Wqkv.weight"] = n((3 * D, D), 0.12)
        w[p + "attn.Wo.weight"] = n((D, D), 0.06)
        w[p + "mlp_norm.weight"] = n((D,), 0.1, 1.0)
        w[p + "mlp.Wi.weight"] = n((2 * inter, D), 0.1)
        w[p + "mlp.Wo.weight"] = n((D, inter), 0.08)
    w["encoder.final_norm.weight"] = n((D,), 0.1, 1.0)
    for j in range(fx.head_layers):
        p = f"head.layers.{j}."
        w[p + "self_attn.in_proj_weight"] = n((3 * D, D), 0.12)
        w[p + "self_attn.in_proj_bias"] = n((3 * D,), 0.05)
        w[p + "self_attn.out_proj.weight"] = n((D, D), 0.06)
        w[p + "self_attn.out_proj.bias"] = n((D,), 0.05)
        w[p + "linear1.weight"] = n((4 * D, D), 0.08)
        w[p + "linear1.bias"] = n((4 * D,), 0.05)
        w[p + "linear2.weight"] = n((D, 4 * D), 0.04)
        w[p + "linear2.bias"] = n((D,), 0.05)
        w[p + "norm1.weight"] = n((D,), 0.1, 1.0)
        w[p + "norm1.bias"] = n((D,), 0.05)
        w[p + "norm2.weight"] = n((D,), 0.1, 1.0)
        w[p + "norm2.bias"] = n((D,), 0.05)
    w["type_emb.weight"] = n((3, D), 0.5)
    w["scorer.0.weight"] = n((D,), 0.1, 1.0)
    w["scorer.0.bias"] = n((D,), 0.05)
    w["scorer.1.weight"] = n((D, D), 0.1)
    w["scorer.1.bias"] = n((D,), 0.05)
    w["scorer.3.weight"] = n((1, D), 0.2)
    w["scorer.3.bias"] = n((1,), 0.05)
    a0 = n((ACT_HIDDEN, D + 4), 0.06)
    a0[:, D:] = n((ACT_HIDDEN, 4), 0.7)  # make the 4 action features matter well beyond the tolerance
    w["act_head.0.weight"] = a0
    w["act_head.0.bias"] = n((ACT_HIDDEN,), 0.05)
    w["act_head.2.weight"] = n((A, ACT_HIDDEN), 0.1)
    w["act_head.2.bias"] = n((A,), 0.05)
    w["temperature"] = np.ones((3,), np.float32)
    return w


def write_checkpoint(fx: Fixture, ckpt: Path, weights: dict[str, np.ndarray]) -> None:
    (ckpt / "encoder").mkdir(parents=True)
    (ckpt / "tokenizer").mkdir(parents=True)
    safetensors.numpy.save_file(weights, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    agent = {
        "encoder": f"test/tiny-{fx.name}", "head_layers": fx.head_layers, "max_len": fx.max_len,
        "head_max_len": fx.head_max_len, "act_costs": {"escalate": 0.5}, **fx.agent_extra,
        "amp_dtype": "bf16", "model_name": f"laya-golden-{fx.name}",
    }
    dump_json(ckpt / "rl_agent_config.json", agent)
    dump_json(ckpt / "encoder" / "config.json", encoder_config_dict(fx))
    tok = make_tokenizer(fx.vocab)
    (ckpt / "tokenizer" / "tokenizer.json").write_text(tok.to_str(pretty=True) + "\n", encoding="utf-8")
    dump_json(ckpt / "tokenizer" / "tokenizer_config.json", TOKENIZER_CONFIG)


def dump_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------------


def make_row_text(rng: np.random.Generator, row: Row, words: list[str], with_unk: bool) -> str:
    """'[CLS] head [SEP] ([MASK] opt)*k [SEP] state [SEP]' (§7.3 layout), exactly row.valid_len tokens."""
    content = words[5:]  # 'hello', 'w6' ... (never a special)

    def pick(n):
        return [content[int(t)] for t in rng.integers(0, len(content), size=n)]

    opt_lens = [int(x) for x in rng.integers(1, 4, size=row.n_markers)]
    fixed = 1 + 1 + sum(1 + o for o in opt_lens) + 1 + 1  # CLS, SEP after head, options, SEP, final SEP
    head_len = int(min(5, max(1, row.valid_len - fixed - 2)))
    state_len = row.valid_len - fixed - head_len
    while state_len < 0:  # shrink options until it fits
        k = int(np.argmax(opt_lens))
        assert opt_lens[k] > 1, "row too short for its markers"
        opt_lens[k] -= 1
        state_len += 1
    head = pick(head_len)
    if with_unk:
        head[0] = "zzz"  # out of vocabulary -> [UNK]
    parts = ["[CLS]", *head, "[SEP]"]
    for o in opt_lens:
        parts += ["[MASK]", *pick(o)]
    parts += ["[SEP]", *pick(state_len), "[SEP]"]
    return " ".join(parts)


def make_inputs(fx: Fixture, tok: Tokenizer) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(fx.seed + 1)
    words = vocab_words(fx.vocab)
    B = len(fx.rows)
    L = max(r.valid_len for r in fx.rows)
    K = max(2, max(r.n_markers for r in fx.rows))
    input_ids = np.full((B, L), PAD_ID, np.int32)
    attention_mask = np.zeros((B, L), bool)
    marker_pos = np.zeros((B, K), np.int32)
    marker_mask = np.zeros((B, K), bool)
    qtype = np.array([r.qtype for r in fx.rows], np.int32)
    for b, row in enumerate(fx.rows):
        text = make_row_text(rng, row, words, with_unk=(b == 1))
        ids = tok.encode(text, add_special_tokens=False).ids
        assert len(ids) == row.valid_len, (len(ids), row)
        assert ids[0] == CLS_ID and ids[-1] == SEP_ID
        assert " ".join(words[i] if i != UNK_ID else "zzz" for i in ids) == text
        pos = [i for i, t in enumerate(ids) if t == MASK_ID]
        assert len(pos) == row.n_markers
        input_ids[b, : row.valid_len] = ids
        attention_mask[b, : row.valid_len] = True
        marker_pos[b, : len(pos)] = pos
        marker_mask[b, : len(pos)] = True
    assert (input_ids < fx.vocab).all()
    assert (input_ids == UNK_ID).any(), "expected one [UNK] token"
    return {"input_ids": input_ids, "attention_mask": attention_mask, "marker_pos": marker_pos,
            "marker_mask": marker_mask, "qtype": qtype}


# --------------------------------------------------------------------------------------------------------------------
# Torch reference (HF ModernBertModel + nn.TransformerEncoderLayer + hand-written §5.5-5.6)
# --------------------------------------------------------------------------------------------------------------------


class TorchLaya(nn.Module):
    def __init__(self, enc_cfg: ModernBertConfig, head_layers: int, n_actions: int):
        super().__init__()
        D = enc_cfg.hidden_size
        self.encoder = ModernBertModel(enc_cfg)
        if head_layers > 0:
            layer = nn.TransformerEncoderLayer(
                d_model=D, nhead=max(1, D // 64), dim_feedforward=4 * D, dropout=0.0, activation="relu",
                batch_first=True, norm_first=True)
            self.head = nn.TransformerEncoder(layer, num_layers=head_layers, enable_nested_tensor=False)
        else:
            self.head = None
        self.type_emb = nn.Embedding(3, D)
        self.scorer = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.GELU(), nn.Linear(D, 1))
        self.act_head = nn.Sequential(nn.Linear(D + 4, ACT_HIDDEN), nn.GELU(), nn.Linear(ACT_HIDDEN, n_actions))
        self.register_buffer("temperature", torch.ones(3))

    @torch.no_grad()
    def forward(self, input_ids, attention_mask, marker_pos, marker_mask, qtype):
        am = attention_mask.bool()
        enc = self.encoder(input_ids=input_ids.long(), attention_mask=am.long()).last_hidden_state
        h = enc + self.type_emb(qtype.long())[:, None, :]
        if self.head is not None:
            for layer in self.head.layers:  # no final norm
                h = layer(h, src_key_padding_mask=~am)
        D = h.shape[-1]
        pos = marker_pos.long().clamp(min=0)
        m = torch.gather(h, 1, pos[..., None].expand(-1, -1, D))
        logit = self.scorer(m).squeeze(-1).float()
        logits = torch.where(marker_mask.bool(), logit, torch.full_like(logit, NEG_MASKED))
        p = torch.softmax(logits, dim=-1)
        k = marker_mask.sum(-1).clamp(min=2).float()
        entropy = -(p * torch.log(p.clamp(min=1e-9))).sum(-1) / torch.log(k)
        top = torch.topk(p, 2, dim=-1).values
        feats = torch.stack([top[:, 0], top[:, 0] - top[:, 1], entropy, k / 255.0], dim=-1)
        pooled = torch.cat([h[:, 0].float(), feats], dim=-1)
        action = self.act_head(pooled).float()
        return {"logits": logits, "action": action, "encoder_hidden": enc, "head_hidden": h}


def build_torch_model(fx: Fixture, ckpt: Path, attn: str = "eager") -> TorchLaya:
    cfg = ModernBertConfig.from_pretrained(str(ckpt / "encoder"), attn_implementation=attn)
    model = TorchLaya(cfg, fx.head_layers, 2)
    model.eval()
    assert model.encoder.config._attn_implementation == attn, model.encoder.config._attn_implementation
    state = safetensors.torch.load_file(str(ckpt / "model.safetensors"))
    expected = set(model.state_dict().keys())
    assert set(state) == expected, (sorted(set(state) - expected), sorted(expected - set(state)))
    model.load_state_dict(state, strict=True)
    return model


def to_torch(inputs):
    return {k: torch.from_numpy(v) for k, v in inputs.items()}


def np_out(out, am):
    res = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in out.items()}
    for k in ("encoder_hidden", "head_hidden"):
        res[k] = np.where(am[..., None], res[k], np.float32(0.0))  # padded positions zeroed (not meaningful)
    return res


# --------------------------------------------------------------------------------------------------------------------
# Independent float64 NumPy forward (cross-check)
# --------------------------------------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_gelu(x, tanh=False):
    if tanh:  # approximation; only used by the mutation-sensitivity probe
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_ln(x, w, b=None, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * w
    return y + b if b is not None else y


def np_softmax(x, axis=-1):
    x = x - x.max(axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis, keepdims=True)


def np_rope(x, base, traditional=False):  # x [B, H, L, hd], rotate-half (traditional: interleaved pairs)
    L, hd = x.shape[-2], x.shape[-1]
    inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(L, dtype=np.float64)[:, None] * inv[None, :]
    if traditional:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x1 * np.cos(ang) - x2 * np.sin(ang)
        out[..., 1::2] = x1 * np.sin(ang) + x2 * np.cos(ang)
        return out
    cos = np.concatenate([np.cos(ang)] * 2, -1)
    sin = np.concatenate([np.sin(ang)] * 2, -1)
    rot = np.concatenate([-x[..., hd // 2:], x[..., : hd // 2]], -1)
    return x * cos + rot * sin


def np_forward(fx: Fixture, enc_cfg: dict, w: dict[str, np.ndarray], inp: dict[str, np.ndarray],
               mut: dict | None = None) -> dict:
    """Written from the spec (§5), not from HF code. float64 throughout. `mut` injects known implementation bugs
    (used only to show the goldens detect them)."""
    mut = mut or {}
    W = {k: v.astype(np.float64) for k, v in w.items()}
    D, H, N = fx.hidden, fx.heads, fx.layers
    hd = D // H
    ids, valid = inp["input_ids"], inp["attention_mask"]
    B, L = ids.shape
    # layer kinds / bases from the config dict, per §3.2
    if enc_cfg.get("layer_types") and not mut.get("ignore_layer_types"):
        kinds = list(enc_cfg["layer_types"])
    else:
        every = enc_cfg.get("global_attn_every_n_layers", 3)
        kinds = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(N)]
    rp = {} if mut.get("ignore_rope_parameters") else (enc_cfg.get("rope_parameters") or {})
    bases = {"full_attention": rp.get("full_attention", {}).get("rope_theta",
                                                                enc_cfg.get("global_rope_theta", 160000.0)),
             "sliding_attention": rp.get("sliding_attention", {}).get("rope_theta",
                                                                      enc_cfg.get("local_rope_theta", 10000.0))}
    w_half = enc_cfg["local_attention"] // 2 + mut.get("window_delta", 0)
    if mut.get("swap_thetas"):
        bases = {"full_attention": bases["sliding_attention"], "sliding_attention": bases["full_attention"]}
    i_idx = np.arange(L)[:, None]
    j_idx = np.arange(L)[None, :]
    band = np.abs(i_idx - j_idx) <= w_half
    full_allowed = np.broadcast_to(valid[:, None, None, :], (B, 1, L, L))
    slide_allowed = valid[:, None, None, :] & (band[None, None] | ~valid[:, None, :, None])

    x = np_ln(W["encoder.embeddings.tok_embeddings.weight"][ids], W["encoder.embeddings.norm.weight"])
    for i in range(N):
        p = f"encoder.layers.{i}."
        a = x if i == 0 else np_ln(x, W[p + "attn_norm.weight"])
        qkv = (a @ W[p + "attn.Wqkv.weight"].T).reshape(B, L, 3, H, hd)
        q, k, v = (qkv[:, :, t].transpose(0, 2, 1, 3) for t in range(3))
        trad = mut.get("rope_traditional", False)
        q, k = np_rope(q, bases[kinds[i]], trad), np_rope(k, bases[kinds[i]], trad)
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        allowed = full_allowed if kinds[i] == "full_attention" else slide_allowed
        s = np.where(allowed, s, -np.inf)
        o = (np_softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, L, D)
        x = x + o @ W[p + "attn.Wo.weight"].T
        m = np_ln(x, W[p + "mlp_norm.weight"])
        ug = m @ W[p + "mlp.Wi.weight"].T
        u, g = ug[..., : fx.inter], ug[..., fx.inter:]
        if mut.get("swap_geglu"):
            u, g = g, u
        x = x + (np_gelu(u, mut.get("gelu_tanh", False)) * g) @ W[p + "mlp.Wo.weight"].T
    enc = np_ln(x, W["encoder.final_norm.weight"])

    h = enc + W["type_emb.weight"][inp["qtype"]][:, None, :]
    nh = max(1, D // 64)
    hh = D // nh
    key_ok = np.broadcast_to(valid[:, None, None, :], (B, 1, L, L))
    for j in range(fx.head_layers):
        p = f"head.layers.{j}."
        a = np_ln(h, W[p + "norm1.weight"], W[p + "norm1.bias"])
        qkv = a @ W[p + "self_attn.in_proj_weight"].T + W[p + "self_attn.in_proj_bias"]
        q, k, v = (qkv[..., t * D:(t + 1) * D].reshape(B, L, nh, hh).transpose(0, 2, 1, 3) for t in range(3))
        s = np.where(key_ok, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hh), -np.inf)
        o = (np_softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, L, D)
        h = h + o @ W[p + "self_attn.out_proj.weight"].T + W[p + "self_attn.out_proj.bias"]
        f = np_ln(h, W[p + "norm2.weight"], W[p + "norm2.bias"])
        f = f @ W[p + "linear1.weight"].T + W[p + "linear1.bias"]
        f = np_gelu(f) if mut.get("head_gelu") else np.maximum(f, 0.0)
        h = h + f @ W[p + "linear2.weight"].T + W[p + "linear2.bias"]

    pos = np.maximum(inp["marker_pos"], 0)
    m = np.take_along_axis(h, pos[..., None].astype(np.int64), axis=1)
    z = np_ln(m, W["scorer.0.weight"], W["scorer.0.bias"])
    z = np_gelu(z @ W["scorer.1.weight"].T + W["scorer.1.bias"], mut.get("gelu_tanh", False))
    logit = (z @ W["scorer.3.weight"].T + W["scorer.3.bias"])[..., 0]
    logits = np.where(inp["marker_mask"], logit, NEG_MASKED)
    pr = np_softmax(logits)
    kk = np.maximum(inp["marker_mask"].sum(-1), 2).astype(np.float64)
    if mut.get("k_from_slots"):
        kk = np.full_like(kk, inp["marker_mask"].shape[1])
    ent = -(pr * np.log(np.maximum(pr, 1e-9))).sum(-1) / np.log(kk)
    srt = -np.sort(-pr, axis=-1)
    feats = np.stack([srt[:, 0], srt[:, 0] - srt[:, 1], ent, kk / 255.0], -1)
    pooled = np.concatenate([h[:, 0], feats], -1)
    a1 = np_gelu(pooled @ W["act_head.0.weight"].T + W["act_head.0.bias"], mut.get("gelu_tanh", False))
    action = a1 @ W["act_head.2.weight"].T + W["act_head.2.bias"]
    return {"logits": logits, "action": action, "encoder_hidden": enc, "head_hidden": h}


# --------------------------------------------------------------------------------------------------------------------
# Probes of HF behaviour
# --------------------------------------------------------------------------------------------------------------------


def maxdiff(a, b, valid=None):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if valid is not None:
        a, b = a[valid], b[valid]
    return float(np.max(np.abs(a - b)))


def allclose_margin(actual, expected, atol, rtol, valid=None):
    """max over elements of |a-e| / (atol + rtol|e|): < 1 passes."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if valid is not None:
        a, e = a[valid], e[valid]
    return float(np.max(np.abs(a - e) / (atol + rtol * np.abs(e))))


def probe_hf(fx: Fixture, ckpt: Path, model: TorchLaya, inputs, ref) -> dict:
    from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

    report: dict = {}
    enc = model.encoder
    cfg = enc.config
    am = inputs["attention_mask"]
    B, L = am.shape
    w = fx.local_attention // 2

    # config as parsed by HF
    report["hf_layer_types"] = list(cfg.layer_types)
    report["hf_rope_parameters"] = cfg.rope_parameters
    report["hf_sliding_window_attr"] = cfg.sliding_window
    report["hf_attn_implementation"] = cfg._attn_implementation
    for kind in set(cfg.layer_types):
        base = fx.global_theta if kind == "full_attention" else fx.local_theta
        inv = getattr(enc.rotary_emb, f"{kind}_inv_freq").numpy()
        want = 1.0 / base ** (np.arange(0, cfg.hidden_size // cfg.num_attention_heads, 2)
                              / (cfg.hidden_size // cfg.num_attention_heads))
        assert np.allclose(inv, want, rtol=1e-6), kind
    expect_kinds = list(fx.layer_types) if fx.layer_types else [
        "full_attention" if i % 3 == 0 else "sliding_attention" for i in range(fx.layers)]
    assert list(cfg.layer_types) == expect_kinds, cfg.layer_types

    # module structure
    assert isinstance(enc.layers[0].attn_norm, nn.Identity)
    assert all(isinstance(enc.layers[i].attn_norm, nn.LayerNorm) for i in range(1, fx.layers))
    names = list(enc.state_dict().keys())
    assert not any("position" in n or "pooler" in n or "head" in n or "bias" in n for n in names), names
    report["hf_encoder_state_dict_names"] = names
    report["hf_nonpersistent_buffers"] = sorted(n for n, _ in enc.named_buffers() if n not in names)
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    act = enc.layers[0].mlp.act(x)
    report["hf_gelu_vs_erf_maxdiff_f64"] = float((act - 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))).abs().max())

    # masks HF builds for eager attention
    emb = torch.zeros(B, L, cfg.hidden_size)
    amt = torch.from_numpy(am).long()
    fm = create_bidirectional_mask(config=cfg, inputs_embeds=emb, attention_mask=amt)
    sm = create_bidirectional_sliding_window_mask(config=cfg, inputs_embeds=emb, attention_mask=amt)
    fm_ok = (fm == 0).numpy()
    sm_ok = (sm == 0).numpy()
    ii, jj = np.arange(L)[:, None], np.arange(L)[None, :]
    want_full = np.broadcast_to(am[:, None, None, :], (B, 1, L, L))
    want_slide_hf = am[:, None, None, :] & (np.abs(ii - jj) <= w)[None, None]
    report["hf_full_mask_matches_valid_keys"] = bool((fm_ok == want_full).all())
    report["hf_sliding_mask_is_abs_le_w_inclusive_and_valid_key"] = bool((sm_ok == want_slide_hf).all())
    report["hf_mask_dtype_and_fill"] = f"{fm.dtype}, masked = {float(fm.min()):.6g} (finfo.min additive)"
    fully_masked = ~sm_ok.any(-1)  # [B, 1, L]
    report["hf_sliding_fully_masked_query_rows"] = int(fully_masked.sum())
    report["hf_sliding_fully_masked_rows_are_padded_queries"] = bool((fully_masked <= ~am[:, None, :]).all())
    # interior query sees exactly 2w+1 keys
    b_full = int(np.argmax(am.sum(1)))
    report["hf_sliding_keys_for_interior_query"] = int(sm_ok[b_full, 0, L // 2].sum())

    t_in = to_torch(inputs)
    # padding invariance: put junk ids in padded positions
    junk = inputs["input_ids"].copy()
    rng = np.random.default_rng(123)
    junk[~am] = rng.integers(5, fx.vocab, size=int((~am).sum()))
    out_j = np_out(model(**{**t_in, "input_ids": torch.from_numpy(junk)}), am)
    report["padding_junk_ids_maxdiff_valid"] = {k: maxdiff(out_j[k], ref[k], am if "hidden" in k else None)
                                                for k in ref}
    # batch vs single row (unpadded, K = max(2, n))
    single = {k: 0.0 for k in ref}
    for b, row in enumerate(fx.rows):
        Lb, Kb = row.valid_len, max(2, row.n_markers)
        one = {"input_ids": inputs["input_ids"][b:b + 1, :Lb], "attention_mask": am[b:b + 1, :Lb],
               "marker_pos": inputs["marker_pos"][b:b + 1, :Kb], "marker_mask": inputs["marker_mask"][b:b + 1, :Kb],
               "qtype": inputs["qtype"][b:b + 1]}
        o = np_out(model(**to_torch(one)), one["attention_mask"])
        single["encoder_hidden"] = max(single["encoder_hidden"],
                                       maxdiff(o["encoder_hidden"][0], ref["encoder_hidden"][b, :Lb]))
        single["head_hidden"] = max(single["head_hidden"], maxdiff(o["head_hidden"][0], ref["head_hidden"][b, :Lb]))
        n = row.n_markers
        single["logits"] = max(single["logits"], maxdiff(o["logits"][0, :n], ref["logits"][b, :n]))
        single["action"] = max(single["action"], maxdiff(o["action"][0], ref["action"][b]))
    report["batch_vs_single_row_unpadded_maxdiff"] = single
    # eager vs sdpa
    sdpa = build_torch_model(fx, ckpt, attn="sdpa")
    out_s = np_out(sdpa(**t_in), am)
    report["eager_vs_sdpa_maxdiff_valid"] = {k: maxdiff(out_s[k], ref[k], am if "hidden" in k else None) for k in ref}
    # TransformerEncoderLayer fast path (torch._transformer_encoder_layer_fwd) vs python path
    if fx.head_layers:
        torch.backends.mha.set_fastpath_enabled(True)
        try:
            out_f = np_out(model(**t_in), am)
        finally:
            torch.backends.mha.set_fastpath_enabled(False)
        report["head_fastpath_vs_slowpath_maxdiff_valid"] = {
            k: maxdiff(out_f[k], ref[k], am if "hidden" in k else None) for k in ref}
    # attention sharpness (valid queries only)
    with torch.no_grad():
        att = enc(input_ids=t_in["input_ids"].long(), attention_mask=amt, output_attentions=True).attentions
    stats = []
    for li, a in enumerate(att):
        a = a.numpy()  # [B, H, L, L]
        vq = np.broadcast_to(am[:, None, :], a.shape[:3])
        nkeys = np.maximum((a > 0).sum(-1), 2)
        ent = -(a * np.log(np.maximum(a, 1e-30))).sum(-1) / np.log(nkeys)
        stats.append({"layer": li, "kind": cfg.layer_types[li], "mean_max_prob": round(float(a.max(-1)[vq].mean()), 4),
                      "mean_normalised_entropy": round(float(ent[vq].mean()), 4)})
    report["encoder_attention_sharpness"] = stats
    return report


# --------------------------------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------------------------------


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed equivalent with fixed zip timestamps (byte-reproducible)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def param_count_formula(fx: Fixture) -> int:
    V, D, inter, N, Hh, A = fx.vocab, fx.hidden, fx.inter, fx.layers, fx.head_layers, 2
    return (V * D + N * (4 * D * D + 3 * D * inter) + (2 * N + 1) * D + Hh * (12 * D * D + 13 * D) + 3 * D
            + (D * D + 4 * D + 1) + (256 * D + 1280 + 257 * A))


def build_one(fx: Fixture, root: Path) -> dict:
    base = root / fx.name
    ckpt = base / "checkpoint"
    weights = make_weights(fx)
    n_params = sum(int(v.size) for k, v in weights.items() if k != "temperature")
    assert n_params == param_count_formula(fx), (n_params, param_count_formula(fx))
    write_checkpoint(fx, ckpt, weights)
    (base / "tensor_names.txt").write_text(
        "".join(f"{k} {weights[k].dtype} {list(weights[k].shape)}\n" for k in sorted(weights)), encoding="utf-8")

    tok = Tokenizer.from_file(str(ckpt / "tokenizer" / "tokenizer.json"))
    assert tok.get_vocab_size() == fx.vocab
    inputs = make_inputs(fx, tok)

    model = build_torch_model(fx, ckpt)
    ref = np_out(model(**to_torch(inputs)), inputs["attention_mask"])
    am = inputs["attention_mask"]
    assert all(np.isfinite(v).all() for v in ref.values())
    assert (ref["logits"][~inputs["marker_mask"]] == np.float32(NEG_MASKED)).all()

    enc_cfg = json.loads((ckpt / "encoder" / "config.json").read_text())
    ref64 = np_forward(fx, enc_cfg, weights, inputs)
    cross = {}
    for k in ref:
        valid = am if "hidden" in k else None
        tol = TOLERANCES[k]
        cross[k] = {"max_abs_diff": maxdiff(ref[k], ref64[k], valid),
                    "allclose_margin": allclose_margin(ref[k], ref64[k], tol["atol"], tol["rtol"], valid)}
        assert cross[k]["allclose_margin"] < 0.5, (fx.name, k, cross[k])

    probes = probe_hf(fx, ckpt, model, inputs, ref)

    # Each known bug must move at least one output far outside the tolerance (margin >> 1).
    mutations = {"window_minus_1": {"window_delta": -1}, "window_plus_1": {"window_delta": 1},
                 "rope_traditional": {"rope_traditional": True}, "gelu_tanh": {"gelu_tanh": True},
                 "swap_geglu_halves": {"swap_geglu": True}, "k_from_slot_count": {"k_from_slots": True}}
    if fx.local_theta != fx.global_theta:
        mutations["swap_rope_thetas"] = {"swap_thetas": True}
    if fx.config_style == "v5":
        mutations["ignore_rope_parameters"] = {"ignore_rope_parameters": True}
        mutations["ignore_layer_types"] = {"ignore_layer_types": True}
    if fx.head_layers:
        mutations["head_ffn_gelu_instead_of_relu"] = {"head_gelu": True}
    sensitivity = {}
    for mname, mut in mutations.items():
        bad = np_forward(fx, enc_cfg, weights, inputs, mut)
        sensitivity[mname] = {k: round(allclose_margin(bad[k], ref[k], TOLERANCES[k]["atol"], TOLERANCES[k]["rtol"],
                                                       am if "hidden" in k else None), 1) for k in ref}
        assert max(sensitivity[mname].values()) > 10, (mname, sensitivity[mname])

    cases = {**inputs, "logits": ref["logits"].astype(np.float32), "action": ref["action"].astype(np.float32),
             "encoder_hidden": ref["encoder_hidden"].astype(np.float32),
             "head_hidden": ref["head_hidden"].astype(np.float32)}
    save_npz(base / "cases.npz", cases)

    files = sorted(p for p in base.rglob("*") if p.is_file())
    mk = inputs["marker_mask"].sum(1)
    return {
        "seed": fx.seed,
        "dims": {"V": fx.vocab, "D": fx.hidden, "heads": fx.heads, "hd": fx.hidden // fx.heads, "I": fx.inter,
                 "N": fx.layers, "Hh": fx.head_layers, "head_heads": max(1, fx.hidden // 64), "A": 2,
                 "local_attention": fx.local_attention, "w": fx.local_attention // 2,
                 "layer_types": probes["hf_layer_types"],
                 "rope_theta": {"full_attention": fx.global_theta, "sliding_attention": fx.local_theta},
                 "encoder_config_style": fx.config_style},
        "parameters_excluding_temperature": n_params,
        "batch": {"B": int(am.shape[0]), "L": int(am.shape[1]), "K": int(inputs["marker_pos"].shape[1]),
                  "valid_lengths": [int(x) for x in am.sum(1)], "markers_per_row": [int(x) for x in mk],
                  "qtype": [int(x) for x in inputs["qtype"]]},
        "output_ranges": {k: [float(np.min(sel)), float(np.max(sel))] for k, sel in (
            ("encoder_hidden", ref["encoder_hidden"][am]), ("head_hidden", ref["head_hidden"][am]),
            ("logits", ref["logits"][inputs["marker_mask"]]), ("action", ref["action"]))},
        "crosscheck_torch_fp32_vs_numpy_fp64": cross,
        "mutation_sensitivity_allclose_margin": sensitivity,
        "hf_probes": probes,
        "files": {str(p.relative_to(root)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "golden")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.backends.mha.set_fastpath_enabled(False)  # reference = python path of TransformerEncoderLayer
    root: Path = args.out
    root.mkdir(parents=True, exist_ok=True)
    for fx in FIXTURES:  # only remove what this script owns
        if (root / fx.name).exists():
            shutil.rmtree(root / fx.name)
    manifest = {
        "generator": "tests/core/parity/make_golden.py",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "safetensors": safetensors.__version__, "numpy": np.__version__},
        "reference": {"encoder": "transformers.ModernBertModel, attn_implementation='eager', FP32",
                      "head": "torch.nn.TransformerEncoderLayer(d_model=D, nhead=max(1, D//64), dim_feedforward=4D, "
                              "dropout=0, activation='relu', batch_first=True, norm_first=True), python path "
                              "(mha fastpath disabled), src_key_padding_mask = ~attention_mask",
                      "output_block": "hand-written torch per LAYA_SPEC §5.5-5.6 (exact GELU, -1e4 masked logits, "
                                      "features [top1, top1-top2, entropy/log k, k/255] from uncalibrated logits)"},
        "tolerances": TOLERANCES,
        "notes": [
            "Hidden states in cases.npz are zeroed on padded positions; compare tokens where attention_mask is true.",
            "Outputs are pre-temperature; the temperature tables in rl_agent_config.json do not affect them.",
            "Weights are float32 in model.safetensors; load with runtime dtype float32 for these tolerances.",
            "Token ids come from tokenizer/tokenizer.json (WordLevel); pad 0, unk 1, cls 2, sep 3, mask 4.",
        ],
        "checkpoints": {},
    }
    for fx in FIXTURES:
        manifest["checkpoints"][fx.name] = build_one(fx, root)
    dump_json(root / "manifest.json", manifest)
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    print(json.dumps({n: {"crosscheck": c["crosscheck_torch_fp32_vs_numpy_fp64"]} for n, c in
                      manifest["checkpoints"].items()}, indent=1))
    print(f"wrote {root} ({total} bytes)")


if __name__ == "__main__":
    sys.exit(main())
