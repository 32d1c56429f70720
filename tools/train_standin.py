r"""Train the laya-tiny stand-in checkpoint on generated typed-decision data, in one process and one schedule.

    python tools/train_standin.py --out checkpoints/laya-tiny --train-records 60000 --hard-fraction 0.5 \
        --batch-size 128 --aux-weight 1.0 --noul-weight 1.0 --replace-prob 0.15 --label-smoothing 0.1 \
        --calib-suite validation --steps 1000000 --max-total-seconds 460 [--lexical-init 1.0] \
        [--init-from CKPT] [--data-cache FILE] [--force] [--resume --max-train-seconds 800]

Which suite serves which purpose (no training decision may read a held-out suite):
- --validation-suite (default `validation`, a third wording with standard and hard cases): the progress
  lines during training, and the number to compare recipes by. --also-validate SUITE (repeatable, e.g.
  `phrasings`) adds a suite's questions to it: the progress lines and --keep-best read them all.
- --calib-suite (default `calib`, training wording; `validation` is allowed): the three temperatures.
- --heldout-suite (default `heldout` and `heldout_hard`, repeatable): reported once, on the saved
  checkpoint, next to the lexical baseline (`laya_opt.suites.lexical_baseline`); never read before.

Deterministic given --seed for the data, the data order, the initialisation and the token replacement,
as long as --steps ends training. GPU kernels may still reduce in a different order from run to run, and
a time limit that ends training first moves its end (the metrics record `stopped_early`).

Steps:
1. Generate the training records (with --hard-fraction, that share of them are hard cases in the
   training wording, `laya_opt.suites.synthetic.hard_cases`) and tokenise them in --workers processes (reusing
   --data-cache when it was built from the same inputs). --varied-topics, --varied-noul-frames and
   --urgency-phrases widen the training templates with `laya_opt.suites.synthetic.topic_frames`, and
   --fact-phrasings with `laya_opt.suites.synthetic.fact_phrasings` (each flag gives another data stream).
2. Build every question's model inputs and targets once (`standin_data.question_arrays`, in --workers
   processes) and move them to the device: one bank per padded length (a multiple of --multiple).
3. Train with one compiled step: the host passes only a bank and a vector of row indices; the step
   gathers the batch, draws the token replacement (--replace-prob) and runs forward, backward, gradient
   clipping and AdamW on the device. The host reads the losses two steps behind, so it never waits for
   the step it has just queued, and evaluates the validation suite every --eval-every steps. One step
   per bank runs first, so that tracing and the device's kernel compilation happen before the clock
   of --max-train-seconds starts. The loss is:
   - the per-question option-marker cross-entropy (with --label-smoothing, smoothed over the
     question's own options);
   - plus the action-head loss (act when the argmax is right, escalate when it is wrong);
   - plus, with --aux-weight, the training-only marker/state matching loss (see MatchProbe);
   - plus, with --noul-weight, the training-only noul polarity loss (see MatchProbe.polarity_logits)
     and fact targets for noul markers (see fact_token_table).
   The learning rate warms up over --warmup of training and then decays (cosine, to 5%) on the larger
   of steps / --steps and time / the time limit, so the schedule completes whichever ends training.
   The time limit is --max-train-seconds, or what --max-total-seconds leaves after preparation and
   compilation, less --report-seconds for steps 4 to 6.
4. Round the weights to float16, the stored dtype. With --keep-best, the weights rounded are those of the
   progress evaluation (every --eval-every steps, and the last step) with the best validation accuracy.
5. Fit the three per-type temperatures on --calib-suite.
6. Save in the upstream layout, reload from disk, and write the validation and held-out accuracy, ECE
   and top-1 probability histogram, with the lexical baseline's accuracy on the same suites, into
   TRAINING.md and training_metrics.json.

Training across calls (--resume): a device call has a time limit, so a run may be split. With --resume,
a call whose --max-total-seconds ends before the schedule does saves the whole training state beside
--out (OUT.state: weights, AdamW moments and step, the device random key, the batches trained and the
training time, and the best weights so far under --keep-best) and exits 0 without a checkpoint; the
same command run again continues from it, and the call that completes the schedule writes the
checkpoint and removes the state. The schedule is then
--steps and --max-train-seconds counted over all calls, and the batch order is a function of (seed,
epoch), so a run split by --max-call-steps trains the same weights as one call (tested on the CPU). A
state saved under other settings (RESUME_KEYS) is refused, naming them.

On a fresh GPU machine, MLX compiles the step's fused kernels on first use (about 310 s on an H200 with
MLX 0.32.4); it keeps them under /tmp/mlx/<version>/ptx (or MLX_PTX_CACHE_DIR), and a run that finds
them there compiles in about 2 s. checkpoints/laya-tiny/TRAINING.md records the stages that made the
shipped checkpoint.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import time
from functools import cache, partial
from pathlib import Path

import laya_opt  # noqa: F401  (first: it picks the BLAS before mlx.core loads)
import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from laya_opt.suites import synthetic
from laya_opt.suites.synthetic import lexicon
from laya_opt.suites.synthetic.generator import iter_training_records, slot_of
from laya_opt.fidelity.checker import evaluate, requests_from_suite
from laya_opt.suites.suite_file import label_index
from laya_opt.suites.synthetic.hard_cases import generate_hard
from laya_opt.suites.synthetic.paraphrases import PARAPHRASES
from laya_opt.suites.synthetic.fact_phrasings import TRAIN as FACT_PHRASINGS
from laya_opt.suites.lexical_baseline import baseline_report
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN, accuracy_table, is_near_tie
from laya_opt.fidelity.suite_report import top1_bins
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import project_tokenizer, standin_checkpoint, suite_path
from laya_opt.core.batching import collate
from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.core.checkpoint_write import save_checkpoint
from laya_opt.core.config import ARCHITECTURES, parse_agent_config, parse_encoder_config
from laya_opt.util.errors import ConfigError, LayaError
from laya_opt.core.decode import calibration_from_tables
from laya_opt.core.model import LayaModel
from laya_opt.core.prompt import prepare_request
from laya_opt.util.markdown import markdown_table
from laya_opt.core.runtime import load_runtime
from laya_opt.core.tokens import load_codec
from standin_data import (NOUL, OPTION_TOKENS, cache_key, load_packed, pack, question_arrays, save_packed,
                          stop_token_ids)

TYPES = ("choice", "score", "noul")
FACT_IDS = tuple(sorted(lexicon.FACTS))


def prepared_questions(records, codec, agent):
    """(record, PreparedQuestion) for every question of every record, in prompt order."""
    for record in records:
        for item in prepare_request(record.state, record.questions, codec, agent.max_len, agent.head_max_len):
            yield record, item


def prepare_records(records, codec, agent):
    """(PreparedQuestion, label index, tags) for every question of every record."""
    return [(item, label_index(item.qid, item.type_name, item.option_keys, record.labels[item.qid]),
             record.tags[item.qid]) for record, item in prepared_questions(records, codec, agent)]


def _state_text(state) -> str:
    return state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)


def noul_target(record, qid: str) -> tuple[int, int, int] | None:
    """(fact-token-table row, state holds, question negated) of a noul question about a lexicon fact.

    The generator names a fact question by the fact's id (plus "_2", ... for repeats); the state
    carries the fact's first-person sentence or its negation (the lexicon's, or under --fact-phrasings one
    of `fact_phrasings.TRAIN`'s), and the question the statement or its negation, in the lexicon's words or
    (hard cases) the training paraphrase's. None unless each is found exactly once and they explain the
    label (then the question gets no noul targets).
    """
    question = record.questions[qid]
    fact_id = slot_of(qid)
    if question.get("type") != "noul" or fact_id not in lexicon.FACTS:
        return None
    lang = record.tags[qid].language
    fact = lexicon.FACTS[fact_id][lang]
    state, asked = _state_text(record.state), question.get("instructions", "")
    said_holds, said_fails = FACT_PHRASINGS[fact_id][lang]
    holds = fact.holds in state or any(sentence in state for sentence in said_holds)
    fails = fact.fails in state or any(sentence in state for sentence in said_fails)
    said = (fact, PARAPHRASES["train_paraphrased"][fact_id][lang])
    plain, negated = any(s.statement in asked for s in said), any(s.negation in asked for s in said)
    if holds == fails or plain == negated:
        return None
    if (holds != negated) != record.labels[qid]:
        return None   # a hard case (a retracted fact sentence): the sentence found is not what holds
    row = lexicon.LANGUAGES.index(lang) * len(FACT_IDS) + FACT_IDS.index(fact_id)
    return row, int(holds), int(negated)


def fact_token_table(codec, stop_ids: np.ndarray) -> np.ndarray:
    """[languages x facts, OPTION_TOKENS] content tokens of each fact's two state sentences that no
    other fact's sentences in that language use (-1 padded): where a marker should look for the fact."""
    table = np.full((len(lexicon.LANGUAGES) * len(FACT_IDS), OPTION_TOKENS), -1, dtype=np.int32)
    stops = set(stop_ids.tolist())
    for li, lang in enumerate(lexicon.LANGUAGES):
        facts = {fid: lexicon.FACTS[fid][lang] for fid in FACT_IDS}
        tokens = {fid: set(codec.encode(f.holds)) | set(codec.encode(f.fails)) for fid, f in facts.items()}
        for fi, fid in enumerate(FACT_IDS):
            others = set().union(*(tokens[o] for o in FACT_IDS if o != fid))
            own = sorted(tokens[fid] - others - stops)[:OPTION_TOKENS]
            table[li * len(FACT_IDS) + fi, :len(own)] = own
    return table


class MatchProbe(nn.Module):
    """Training-only probe, never saved: from each marker's encoder state, attend over the state tokens.

    Its loss (below) asks the marker to find the state tokens its option shares with the state. A
    from-scratch encoder otherwise sits on a long chance-level plateau before it discovers that
    two-hop lexical match (option tokens -> marker, marker -> same tokens in the state); this dense
    signal teaches the encoder both hops directly, and the decision head then reads the result.
    """

    def __init__(self, dims: int, width: int = 64):
        super().__init__()
        self.width = width
        self.query = nn.Linear(dims, width)
        self.key = nn.Linear(dims, width)
        self.polarity = nn.Linear(dims, 4)

    @staticmethod
    def _markers(encoded: mx.array, marker_pos: mx.array) -> mx.array:
        return mx.take_along_axis(encoded, marker_pos[:, :, None], axis=1)  # [B, K, D]

    def __call__(self, encoded: mx.array, marker_pos: mx.array) -> mx.array:
        markers = self._markers(encoded, marker_pos)
        return (self.query(markers) @ self.key(encoded).swapaxes(1, 2)) / math.sqrt(self.width)  # [B, K, L]

    def polarity_logits(self, encoded: mx.array, marker_pos: mx.array, marker_mask: mx.array) -> mx.array:
        """[B, 2, 2] logits of (state holds, question negated), read from the mean marker state.

        A noul answer is the XOR of those two bits. Asking the encoder to expose each bit at the
        markers gives noul questions a signal of their own; the decision head then learns the XOR.
        """
        markers = self._markers(encoded, marker_pos)
        weights = marker_mask[:, :, None].astype(markers.dtype)
        pooled = (markers * weights).sum(axis=1) / mx.maximum(weights.sum(axis=1), 1)
        return self.polarity(pooled).reshape(-1, 2, 2)


class Trainee(nn.Module):
    def __init__(self, laya: LayaModel, probe: MatchProbe):
        super().__init__()
        self.laya = laya
        self.probe = probe


def matching_loss(scores, ids, option_tokens, marker_mask, state_region, exclusive=None):
    """Mean over markers with a match of -log(probe attention mass on matching state tokens).

    `exclusive[b]` (default: every row) drops the tokens all of row b's options share; rows whose
    markers all point at one target (noul facts) pass False.
    """
    match = (option_tokens[:, :, :, None] == ids[:, None, None, :]).any(axis=2)  # [B, K, L]
    match = match & state_region[:, None, :] & marker_mask[:, :, None]
    # A token found through every option (a shared word) says nothing about which option is meant.
    options = marker_mask.sum(axis=1)[:, None]
    shared = (match.sum(axis=1) == options) & (options > 1)
    if exclusive is not None:
        shared = shared & exclusive[:, None]
    match = match & ~shared[:, None, :]
    has = match.any(axis=-1)
    scores = mx.where(state_region[:, None, :], scores, -1e9)
    nll = mx.logsumexp(scores, axis=-1) - mx.logsumexp(mx.where(match, scores, -1e9), axis=-1)
    return mx.where(has, nll, 0.0).sum() / mx.maximum(has.sum(), 1)


def polarity_loss(logits, bits):
    """Mean cross-entropy of the two noul bits over the rows that have them (bits >= 0)."""
    known = bits >= 0
    nll = nn.losses.cross_entropy(logits, mx.maximum(bits, 0), reduction="none")  # [B, 2]
    return mx.where(known, nll, 0.0).sum() / mx.maximum(known.sum(), 1)


def smoothed_nll(log_probs, labels, marker_mask, smoothing):
    """Per-row cross-entropy with label smoothing `smoothing` (a number, or one per row) spread over the
    question's own options only (padded slots hold MASKED_LOGIT)."""
    nll = -mx.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    if isinstance(smoothing, (int, float)) and smoothing == 0:   # the default: no uniform term in the step
        return nll
    uniform = -mx.where(marker_mask, log_probs, 0.0).sum(axis=1) / mx.maximum(marker_mask.sum(axis=1), 1)
    return (1 - smoothing) * nll + smoothing * uniform


def row_smoothing(standard, qtype, label_smoothing: float, hard_label_smoothing: float | None,
                  hard_types: tuple[str, ...] = TYPES):
    """The label smoothing of each row: --hard-label-smoothing for the hard cases (rows not marked standard) of
    the types in `hard_types`, --label-smoothing for the rest. Hard cases smoothed apart: their training
    wording is learnt to certainty, while held-out hard cases are answered less often right. Run 11 smoothed
    every type's (0.35) and lost choice and score hard cases (heldout_hard 0.894 -> 0.720, 0.983 -> 0.708)
    while noul's overconfidence, the one it was for, eased (0.761 -> 0.826): hence the choice of types."""
    if hard_label_smoothing is None or hard_label_smoothing == label_smoothing or not hard_types:
        return label_smoothing
    hard = standard <= 0
    if set(hard_types) != set(TYPES):   # every type: the step of the earlier runs, with no type test in it
        ids = mx.array([TYPES.index(kind) for kind in hard_types])
        hard = hard & (qtype[:, None] == ids[None, :]).any(axis=1)
    return mx.where(hard, hard_label_smoothing, label_smoothing)


def loss_fn(trainee, arrays, action_weight: float, aux_weight: float, noul_weight: float = 0.0,
            label_smoothing: float = 0.0, hard_label_smoothing: float | None = None,
            hard_types: tuple[str, ...] = TYPES):
    laya, a = trainee.laya, arrays
    encoded = laya.encoder(a["input_ids"], a["attention_mask"])
    logits, action = laya.decide(encoded, a["attention_mask"], a["marker_pos"], a["marker_mask"], a["qtype"])
    labels = a["labels"]
    log_probs = logits - mx.logsumexp(logits, axis=1, keepdims=True)
    smoothing = row_smoothing(a["standard"], a["qtype"], label_smoothing, hard_label_smoothing, hard_types)
    scorer_loss = smoothed_nll(log_probs, labels, a["marker_mask"], smoothing).mean()
    # Action head: 0 = act (answer is right), 1 = escalate (answer is wrong); the target is not differentiated.
    wrong = mx.stop_gradient((mx.argmax(logits, axis=1) != labels).astype(mx.int32))
    action_loss = nn.losses.cross_entropy(action, wrong).mean()
    total = scorer_loss + action_weight * action_loss
    aux = mx.array(0.0)
    if aux_weight:
        aux = matching_loss(trainee.probe(encoded, a["marker_pos"]), a["input_ids"], a["option_tokens"],
                            a["marker_mask"], a["state_region"], exclusive=a["qtype"] != NOUL)
        total = total + aux_weight * aux
    noul = mx.array(0.0)
    if noul_weight:
        noul = polarity_loss(trainee.probe.polarity_logits(encoded, a["marker_pos"], a["marker_mask"]),
                             a["noul_bits"])
        total = total + noul_weight * noul
    return total, scorer_loss, aux, noul


def predict_logits(model, items, pad_id, batch_size=128):
    """Uncalibrated logits (length k) per item, batched by length."""
    order = sorted(range(len(items)), key=lambda i: items[i][0].length)
    out = [None] * len(items)
    for start in range(0, len(order), batch_size):
        group = order[start:start + batch_size]
        batch = collate([items[i][0] for i in group], pad_id)
        logits, _ = model(batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask, batch.qtype)
        logits = np.array(logits)
        for row, index in enumerate(group):
            out[index] = logits[row, :len(items[index][0].markers)]
    return out


def softmax(x):
    z = np.exp(x - x.max())
    return z / z.sum()


def fit_temperature(logit_rows, labels) -> float:
    """Minimise NLL over a log-spaced grid in [0.5, 5] (the clamp range): deterministic, no optimiser state."""
    grid = np.exp(np.linspace(math.log(0.5), math.log(5.0), 401))
    nll = [sum(-math.log(max(softmax(row / t)[y], 1e-12)) for row, y in zip(logit_rows, labels)) for t in grid]
    return float(grid[int(np.argmin(nll))])


def progress_accuracy(items, logit_rows) -> tuple[float, dict]:
    """Uncalibrated accuracy overall and per type, for the progress lines during training."""
    hits = [(item.type_name, int(np.argmax(logits)) == label) for (item, label, _), logits in zip(items, logit_rows)]
    return float(np.mean([hit for _, hit in hits])), {
        kind: float(np.mean([hit for name, hit in hits if name == kind])) for kind in TYPES if any(
            name == kind for name, _ in hits)}


def learning_rate(progress: float, peak: float, warmup: float) -> float:
    """Linear warm-up over the first `warmup` of training, then cosine decay to 5% of `peak`.

    `progress` is the larger of steps done / --steps and, under --max-train-seconds, time spent / that
    limit: whichever ends training first also finishes the schedule.
    """
    if progress < warmup:
        return peak * max(progress / warmup, 1e-3)
    done = min(1.0, (progress - warmup) / max(1.0 - warmup, 1e-9))
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * done)))


_BANK_SOURCE: dict = {}


def _bank_rows(index: np.ndarray) -> dict[str, np.ndarray]:
    src = _BANK_SOURCE
    arrays = question_arrays(src["packed"], index, src["pad_id"], src["sep_id"], src["slots"], src["stop_ids"],
                             src["length"], src["fact_tokens"])
    lengths = src["packed"].lengths[index]
    counts = np.diff(src["packed"].marker_offsets)[index]
    return {"input_ids": arrays["input_ids"].astype(np.int16), "lengths": lengths.astype(np.int32),
            "marker_pos": arrays["marker_pos"].astype(np.int16), "counts": counts.astype(np.int32),
            "qtype": arrays["qtype"], "labels": arrays["labels"],
            "option_tokens": arrays["option_tokens"].astype(np.int16), "state_region": arrays["state_region"],
            "noul_bits": arrays["noul_bits"].astype(np.int8), "replace_where": arrays["replace_where"],
            "standard": src["packed"].replaceable[index].astype(np.int8)}   # 0: a hard case


def host_banks(train, codec, slots: int, stop_ids, fact_tokens, multiple: int, workers: int) -> list[dict]:
    """All training questions as arrays, one bank per padded length (a multiple of `multiple`): token ids,
    lengths, markers, labels, the auxiliary targets and where token replacement may act. Built in forked
    workers before the process touches the device; `mx.array` of each moves it there."""
    padded = -(-train.lengths // multiple) * multiple
    banks = []
    for length in sorted(set(padded.tolist())):
        members = np.flatnonzero(padded == length)
        _BANK_SOURCE.update(packed=train, pad_id=codec.pad_id, sep_id=codec.sep_id, slots=slots,
                            stop_ids=stop_ids, length=int(length), fact_tokens=fact_tokens)
        chunks = np.array_split(members, max(1, len(members) // 2048))
        parts = list(_pool_map(_bank_rows, chunks, workers))
        banks.append({key: np.concatenate([part[key] for part in parts]) for key in parts[0]})
    return banks


def _pool_map(fn, items, workers: int):
    """map(fn, items) in `workers` forked processes (in order); in this process for workers <= 1."""
    if workers <= 1 or len(items) < 2:
        return map(fn, items)
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(min(workers, len(items))) as pool:
        return pool.map(fn, items, chunksize=1)


def gather_batch(bank: dict, index: mx.array, replace_prob: float, replace_pool: mx.array) -> dict:
    """One batch's model inputs and targets from a device bank (inside the compiled step)."""
    ids = bank["input_ids"][index].astype(mx.int32)
    if replace_prob:
        hit = bank["replace_where"][index] & (mx.random.uniform(shape=ids.shape) < replace_prob)
        ids = mx.where(hit, replace_pool[mx.random.randint(0, replace_pool.size, ids.shape)], ids)
    length, slots = ids.shape[1], bank["marker_pos"].shape[1]
    return {
        "input_ids": ids, "attention_mask": mx.arange(length)[None, :] < bank["lengths"][index][:, None],
        "marker_pos": bank["marker_pos"][index].astype(mx.int32),
        "marker_mask": mx.arange(slots)[None, :] < bank["counts"][index][:, None],
        "qtype": bank["qtype"][index], "labels": bank["labels"][index],
        "option_tokens": bank["option_tokens"][index].astype(mx.int32),
        "state_region": bank["state_region"][index], "noul_bits": bank["noul_bits"][index].astype(mx.int32),
        "standard": bank["standard"][index],
    }


def batch_plan(bank_sizes: list[int], batch_size: int, seed: int, skip: int = 0):
    """(bank, row indices) of one fixed-shape batch after another, epoch after epoch: each epoch shuffles
    every bank, cuts it into full batches (a bank's ragged tail waits for the next epoch's shuffle) and
    visits all batches in random order. Epoch e's order depends on (seed, e) alone, so a resumed run
    continues the same sequence by skipping the `skip` batches it has already trained on."""
    per_epoch = sum(size // batch_size for size in bank_sizes)
    if not per_epoch:
        raise ValueError(f"no bank holds a full batch of {batch_size} questions")
    epoch, position = divmod(skip, per_epoch)
    while True:
        rng = np.random.default_rng([seed, epoch])
        plan = []
        for bank, size in enumerate(bank_sizes):
            order = rng.permutation(size).astype(np.int32)
            plan += [(bank, order[i:i + batch_size]) for i in range(0, size - batch_size + 1, batch_size)]
        for i in rng.permutation(len(plan))[position:]:
            yield plan[i]
        epoch, position = epoch + 1, 0


# What a resumed run must share with the run that saved the state: everything that changes the data,
# the model's shape or the schedule. (The per-call limit --max-total-seconds may differ.)
RESUME_KEYS = ("seed", "steps", "batch_size", "train_records", "hidden_size", "lr", "action_weight", "aux_weight",
               "noul_weight", "replace_prob", "hard_fraction", "label_smoothing", "hard_label_smoothing",
               "hard_smoothing_types", "warmup",
               "multiple", "max_train_seconds", "init_from", "attention", "lexical_init", "calib_suite",
               "validation_suite", "also_validate", "keep_best", "training_paraphrases", "varied_topics",
               "varied_noul_frames", "urgency_phrases", "fact_phrasings", "max_len", "head_max_len", "ema")


def state_dir(out: Path) -> Path:
    """Where an unfinished run keeps its training state (beside --out, so --out is only ever a checkpoint)."""
    return out.with_name(out.name + ".state")


def resume_fingerprint(args) -> dict:
    return {key: str(getattr(args, key)) for key in RESUME_KEYS}


def save_state(directory: Path, trainee, optimizer, fingerprint: dict, step: int, batches: int,
               train_seconds: float, calls: int, best: "Best | None" = None, ema: dict | None = None) -> None:
    """The whole training state (weights, AdamW moments and step, the device random key, the batch count
    and the training time so far, under --keep-best the best weights so far, under --ema the averaged
    weights), written beside `directory` and renamed into place."""
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    arrays = {f"model.{k}": v for k, v in tree_flatten(trainee.parameters())}
    arrays |= {f"optimizer.{k}": v for k, v in tree_flatten(optimizer.state)}
    if best is not None and best.weights:
        arrays |= {f"best.{k}": v for k, v in best.weights.items()}
    if ema is not None:
        arrays |= {f"ema.{k}": v for k, v in ema.items()}
    mx.save_safetensors(str(tmp / "state.safetensors"), arrays)
    high, low = (int(x) for x in mx.random.state[0].tolist())   # the key mx.random.seed((high << 32) | low) sets
    (tmp / "state.json").write_text(json.dumps({"fingerprint": fingerprint, "step": step, "batches": batches,
                                                "calls": calls, "train_seconds": train_seconds,
                                                "random_key": [high, low],
                                                "best": None if best is None or not best.weights else
                                                {"step": best.step, "accuracy": best.accuracy}}, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def load_state(directory: Path, trainee, optimizer, fingerprint: dict, ema: dict | None = None) -> dict:
    """Put a saved training state back into `trainee`, `optimizer`, `ema` (--ema's averaged weights) and the
    device random key, in place (the compiled step holds these containers); returns state.json. A state from
    other settings is refused."""
    meta = json.loads((directory / "state.json").read_text())
    changed = {k: (meta["fingerprint"].get(k), v) for k, v in fingerprint.items() if meta["fingerprint"].get(k) != v}
    if changed:
        raise SystemExit(f"{directory} was saved with other settings; cannot resume: " + ", ".join(
            f"--{k.replace('_', '-')} {old} (now {new})" for k, (old, new) in changed.items()))
    arrays = mx.load(str(directory / "state.safetensors"))
    model = {k[len("model."):]: v for k, v in arrays.items() if k.startswith("model.")}
    meta["best_weights"] = {k[len("best."):]: v for k, v in arrays.items() if k.startswith("best.")}
    saved = {k[len("optimizer."):]: v for k, v in arrays.items() if k.startswith("optimizer.")}
    expected = {k for k, _ in tree_flatten(optimizer.state)}
    averaged = {k[len("ema."):]: v for k, v in arrays.items() if k.startswith("ema.")}
    if set(model) != {k for k, _ in tree_flatten(trainee.parameters())} or set(saved) != expected or \
            set(averaged) != set(ema or {}):
        raise SystemExit(f"{directory}: the saved arrays do not match this model, optimizer and --ema")
    if ema is not None:
        ema.update(averaged)
    set_weights(trainee, model)
    for key, value in tree_unflatten(list(saved.items())).items():
        optimizer.state[key] = value
    high, low = meta["random_key"]
    mx.random.seed((high << 32) | low)
    mx.eval(trainee.parameters(), optimizer.state, mx.random.state, ema or {})
    return meta


def set_weights(module, weights: dict) -> None:
    """Put flat weights (name -> array, as tree_flatten gives them) into `module`."""
    module.update(tree_unflatten(list(weights.items())))


def peak_memory_gib() -> float:
    """The most memory MLX's arrays have held on its device in this process, in GiB (its buffer cache, up to
    --cache-limit-gb, comes on top): what decides whether two runs fit on one GPU side by side."""
    return mx.get_peak_memory() / 2**30


def report_progress(step: int, recent: list, model, validation: dict, pad_id: int, elapsed: float,
                    steps_here: int) -> float:
    """Print one progress line (losses since the last one, the accuracy on the validation questions, and the rate
    of the `steps_here` steps taken in the `elapsed` seconds of this call); returns that accuracy.
    `validation`: suite name -> prepared questions; with more than one suite, each one's accuracy is printed too,
    and the one returned is over all of their questions."""
    items = [item for suite in validation.values() for item in suite]
    logit_rows = predict_logits(model, items, pad_id)
    overall, by_type = progress_accuracy(items, logit_rows)
    mean = np.array(mx.stack(recent)).mean(axis=0)
    types = ", ".join(f"{kind} {value:.3f}" for kind, value in by_type.items())
    if len(validation) > 1:
        bounds = np.cumsum([0, *(len(suite) for suite in validation.values())])
        types += "; " + ", ".join(f"{name} {progress_accuracy(suite, logit_rows[lo:hi])[0]:.3f}" for
                                  (name, suite), lo, hi in zip(validation.items(), bounds, bounds[1:]))
    print(f"step {step}: scorer loss {mean[0]:.4f}, match loss {mean[1]:.4f}, noul loss {mean[2]:.4f}, "
          f"validation accuracy {overall:.4f} ({types}), {elapsed:.0f}s, "
          f"{steps_here / max(elapsed, 1e-9):.1f} steps/s, peak memory {peak_memory_gib():.1f} GiB", flush=True)
    return overall


@dataclasses.dataclass
class Best:
    """--keep-best: the model weights of the progress evaluation with the highest validation accuracy (a
    later one wins a tie: it has the lower learning rate behind it). MLX arrays are immutable, so holding
    the evaluated step's arrays is a snapshot; no copy is made."""
    step: int = -1
    accuracy: float = -1.0
    weights: dict = dataclasses.field(default_factory=dict)

    def consider(self, step: int, accuracy: float, model) -> None:
        if accuracy >= self.accuracy:
            self.step, self.accuracy, self.weights = step, accuracy, dict(tree_flatten(model.parameters()))


GROUPINGS = ("type", "language", "options", "length_class")


def suite_report(runtime, name: str) -> dict:
    """Accuracy overall and per group, and ECE, measured by the fidelity checker (the gates' metrics), and
    the lexical baseline's accuracy on the same questions."""
    suite = load_suite(suite_path(name))
    outputs = evaluate(runtime, requests_from_suite(suite))
    groupings = GROUPINGS + (("phenomenon",) if any(q.tags.get("phenomenon") for q in outputs.questions) else ())
    rows = accuracy_table(outputs, by=groupings)
    report = {"overall": {"accuracy": round(rows[0].accuracy, 4), "n": rows[0].count}, "ece": round(rows[0].ece, 4)}
    for key in groupings:
        report[f"by_{key}"] = {r.value: {"accuracy": round(r.accuracy, 4), "n": r.count} for r in rows
                               if r.grouping == key}
    lexical = baseline_report(suite)
    report["lexical"] = {"overall": round(lexical["overall"]["accuracy"], 4),
                         "by_type": {k: round(v["accuracy"], 4) for k, v in lexical["by_type"].items()}}
    # How saturated the answers are (the share per top-1 probability bin) and how many are near ties.
    report["top1"] = {b["bin"]: round(b["share"], 4) for b in top1_bins([q.answer_confidence
                                                                         for q in outputs.questions])}
    report["near_ties"] = sum(is_near_tie(q.probabilities) for q in outputs.questions)
    return report


def _table(title: str, rows: dict) -> list[str]:
    return [markdown_table([title, "accuracy", "n"], [[key, f"{value['accuracy']:.4f}", value["n"]]
                                                      for key, value in rows.items()], "lrr"), ""]


def training_report(metrics: dict, command: str) -> str:
    after, before = metrics["heldout_calibrated"], metrics["heldout_uncalibrated"]
    lines = [
        "# laya-tiny: how this stand-in checkpoint was trained", "",
        "Generated by `tools/train_standin.py`; numbers below are measured on the saved float16 weights",
        f"reloaded from disk in float32 (held-out suite `{metrics.get('heldout_suite', 'heldout')}`; ECE is",
        "`laya_opt.fidelity.metrics.ece`, the one the gates read).", "",
        f"- command: `{command}`",
        f"- device: {metrics['device']}, mlx {metrics['mlx']}, Python {metrics['python']}",
        f"- training time: {metrics['train_seconds']} s ({metrics['steps']} steps of {metrics['batch_size']} "
        f"questions, {metrics.get('steps_per_second', '?')} steps/s, {metrics['train_questions']} training "
        f"questions); {metrics.get('calls', 1)} call(s), the last one {metrics['total_seconds']} s in all",
        f"- fitted temperatures [choice, score, noul]: {metrics['temperatures']}",
        *([f"- weights averaged (--ema {metrics['ema']:g}): the exponential moving average is what was evaluated, "
           "kept and saved"] if metrics.get("ema") else []),
        *([f"- weights kept (--keep-best): step {metrics['kept_step']}, validation accuracy "
           f"{metrics['kept_validation_accuracy']}"
           + (f" (over the questions of {', '.join([metrics['validation_suite'], *metrics['also_validated']])})"
              if metrics.get("also_validated") else "")]
          if metrics.get("kept_validation_accuracy") is not None else []),
        f"- held-out accuracy: **{after['overall']['accuracy']:.4f}** (n = {after['overall']['n']})",
        f"- held-out ECE (max p, 10 bins): {before['ece']:.4f} before temperature fitting, {after['ece']:.4f} after",
        f"- calibration-split ECE: {metrics['calib_ece_before']:.4f} before, {metrics['calib_ece_after']:.4f} after",
        "",
    ]
    suites = {metrics["validation_suite"]: metrics["validation_calibrated"], **metrics.get("also_validated", {}),
              **metrics["reported"]}
    roles = {name: "held-out" for name in metrics["reported"]}
    roles.update({name: "validation" for name in (metrics["validation_suite"], *metrics.get("also_validated", {}))})
    if "smoke" not in suites:
        suites["smoke"], roles["smoke"] = metrics["smoke_calibrated"], "smoke"
    lines += [markdown_table(["suite", "role", "accuracy", "lexical baseline", "ECE", "n"],
                             [[name, roles[name],
                               f"{r['overall']['accuracy']:.4f}", f"{r['lexical']['overall']:.4f}", f"{r['ece']:.4f}",
                               r["overall"]["n"]] for name, r in suites.items()], "llrrrr"), ""]
    bins = list(next(iter(suites.values()))["top1"])
    lines += ["Share of answers per top-1 probability bin, and the near ties (top-two gap under "
              f"{NEAR_TIE_MARGIN}):", "",
              markdown_table(["suite", *[f"p {b}" for b in bins], "near ties"],
                             [[name, *[f"{r['top1'][b]:.2f}" for b in bins], r["near_ties"]]
                              for name, r in suites.items()], "l" + "r" * (len(bins) + 1)), ""]
    for name, r in suites.items():
        if "by_phenomenon" in r:
            lines += _table(f"{name} by phenomenon", r["by_phenomenon"])
    lines += [f"Held-out suite `{metrics.get('heldout_suite', 'heldout')}`:", ""]
    for key in GROUPINGS:
        lines += _table(f"by {key}", after[f"by_{key}"])
    return "\n".join(lines)


def plain_attention(q, k, v, *, scale, mask=None):
    """Attention from plain ops (same math as mx.fast.scaled_dot_product_attention), for --attention plain."""
    scores = (q * scale) @ k.swapaxes(-1, -2)
    if mask is not None:
        scores = mx.where(mask, scores, mx.array(-1e9, dtype=scores.dtype))
    return mx.softmax(scores, axis=-1, precise=True) @ v


def lexical_init(model, scale: float) -> None:
    """Give full-attention layers identity query/key blocks so identical tokens attend to each other.

    A pretrained encoder starts with lexical matching; a from-scratch one sits on a long plateau
    before it finds it (measured: chance-level loss for 5,000+ steps). This prior removes the plateau.
    """
    dims = model.encoder_config.hidden_size
    eye = scale * mx.eye(dims)
    for layer in model.encoder.layers:
        if not layer.sliding:
            weight = layer.attn.Wqkv.weight
            layer.attn.Wqkv.weight = mx.concatenate([eye, eye, weight[2 * dims:]], axis=0)
    mx.eval(model.parameters())


def _prepare_chunk(records):
    return list(prepared_questions(records, _BANK_SOURCE["codec"], _BANK_SOURCE["agent"]))


def load_training_data(args, codec, agent, tokenizer_dir: Path):
    """Packed training questions, from --data-cache when it was built from the same inputs."""
    tokenizer_hash = hashlib.sha256((tokenizer_dir / "tokenizer.json").read_bytes()).hexdigest()
    sources = ("generator.py", "lexicon.py", "templates.py", "hard_cases.py", "hard_templates.py", "paraphrases.py",
               "topic_frames.py", "fact_phrasings.py")
    key = cache_key(seed=args.seed, records=args.train_records, tokenizer=tokenizer_hash, layout=3,
                    max_len=agent.max_len, head_max_len=agent.head_max_len, hard_fraction=args.hard_fraction,
                    paraphrased=args.training_paraphrases, varied_topics=args.varied_topics,
                    varied_noul=args.varied_noul_frames, urgency_phrases=args.urgency_phrases,
                    fact_phrasings=args.fact_phrasings,
                    generator=hashlib.sha256(b"".join((Path(synthetic.__file__).parent / f).read_bytes()
                                                      for f in sources)).hexdigest())
    if args.data_cache and (cached := load_packed(args.data_cache, key)) is not None:
        return cached
    n_hard = round(args.hard_fraction * args.train_records)
    hard_split = "train_paraphrased" if args.training_paraphrases else "train"
    records = generate_hard(hard_split, n_hard, args.seed, varied_noul=args.varied_noul_frames)
    for record in iter_training_records(args.seed, varied_topics=args.varied_topics,
                                        varied_noul=args.varied_noul_frames, urgency_phrases=args.urgency_phrases,
                                        fact_phrasings=args.fact_phrasings):
        if len(records) >= args.train_records:
            break
        records.append(record)
    chunks = [records[i:i + 500] for i in range(0, len(records), 500)]
    _BANK_SOURCE.update(codec=codec, agent=agent)
    pairs = [pair for part in _pool_map(_prepare_chunk, chunks, args.workers) for pair in part]
    packed = pack([(item, label_index(item.qid, item.type_name, item.option_keys, record.labels[item.qid]), None)
                   for record, item in pairs],
                  [noul_target(record, item.qid) for record, item in pairs],
                  [record.tags[item.qid].phenomenon is None for record, item in pairs])
    if args.data_cache:
        save_packed(packed, args.data_cache, key)
    return packed


def ema_decay(text: str) -> float:
    """--ema: 0 (off) or a decay in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value == 0.0 or 0.0 < value < 1.0):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (off) or a decay between 0 and 1, e.g. 0.999")
    return value


def average_into(ema: dict, weights: dict, decay: float) -> None:
    """--ema, once per step: each averaged weight moves (1 - decay) of the way to the step's weight, in place."""
    for name, value in weights.items():
        ema[name] = decay * ema[name] + (1.0 - decay) * value


def question_types(text: str) -> tuple[str, ...]:
    """--hard-smoothing-types: a comma-separated list of question types, each named once, in TYPES' order."""
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in named if name not in TYPES]
    if unknown or not named or len(set(named)) != len(named):
        raise argparse.ArgumentTypeError(f"{text!r}: give question types among {', '.join(TYPES)}, comma-separated, "
                                         f"each once" + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return tuple(kind for kind in TYPES if kind in named)


def main(argv=None) -> int:
    # The whole docstring: the recipe, which suite serves which decision, and the steps.
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=standin_checkpoint())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-records", type=int, default=30000)
    parser.add_argument("--data-cache", type=Path, help="reuse/write the tokenised training data here (.npz)")
    parser.add_argument("--hidden-size", type=int, default=256,
                        help="encoder width D (head_dim 64, so D/64 heads; FFN 2.5 D)")
    parser.add_argument("--max-len", type=int,
                        help="the checkpoint's token budget max_len (default: the standin architecture's, 256); "
                             "training, validation and the reports read the questions within it")
    parser.add_argument("--head-max-len", type=int,
                        help="the checkpoint's question-and-options budget head_max_len (default: the standin "
                             "architecture's, 96)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--action-weight", type=float, default=0.2)
    parser.add_argument("--aux-weight", type=float, default=0.0,
                        help="weight of the training-only marker/state matching loss (0: off)")
    parser.add_argument("--noul-weight", type=float, default=0.0,
                        help="weight of the training-only noul polarity loss and fact matching (0: off)")
    parser.add_argument("--replace-prob", type=float, default=0.0,
                        help="probability of replacing each template token of a choice/score question "
                             "by a random token (0: off)")
    parser.add_argument("--hard-fraction", type=float, default=0.0,
                        help="share of the training records that are hard cases in the training wording "
                             "(laya_opt.suites.synthetic.hard_cases; 0: none)")
    parser.add_argument("--training-paraphrases", action="store_true",
                        help="hard-case noul questions state their fact in the training paraphrases "
                             "(paraphrases._TRAINING, split train_paraphrased) instead of the lexicon's sentence")
    parser.add_argument("--varied-topics", action="store_true",
                        help="standard training states also state topics, urgencies and moods in the frames of "
                             "laya_opt.suites.synthetic.topic_frames (cue words among other words)")
    parser.add_argument("--varied-noul-frames", action="store_true",
                        help="noul questions (standard and hard) are also framed in topic_frames.NOUL_FRAMES "
                             "(the training templates have two frames)")
    parser.add_argument("--urgency-phrases", action="store_true",
                        help="standard training states also say how urgent they are without a scale term, in the "
                             "low and high phrases of topic_frames.URGENCY_PHRASES (\"no hurry\", \"right now\")")
    parser.add_argument("--fact-phrasings", action="store_true",
                        help="standard training states also say half of their yes/no facts in free words, from "
                             "fact_phrasings.TRAIN (\"Ring me when you can.\", \"Write to me instead of phoning.\")")
    parser.add_argument("--label-smoothing", type=float, default=0.0,
                        help="label smoothing of the option cross-entropy, over each question's own options")
    parser.add_argument("--hard-label-smoothing", type=float, default=None,
                        help="label smoothing of the hard-case questions (default: --label-smoothing's)")
    parser.add_argument("--hard-smoothing-types", type=question_types, default=TYPES, metavar="TYPES",
                        help="the question types whose hard cases take --hard-label-smoothing, comma-separated "
                             "(default: choice,score,noul); the others' take --label-smoothing")
    parser.add_argument("--ema", type=ema_decay, default=0.0, metavar="DECAY",
                        help="keep an exponential moving average of the weights (each step moves it 1 - DECAY of "
                             "the way); the progress evaluations, --keep-best and the checkpoint use it (0: off)")
    parser.add_argument("--warmup", type=float, default=0.05, help="share of training spent warming up the lr")
    parser.add_argument("--multiple", type=int, default=64,
                        help="questions are padded to a multiple of this: one device bank and one trace each")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes that tokenise the training data and build the device banks")
    parser.add_argument("--eval-every", type=int, default=500, help="steps between validation-accuracy prints")
    parser.add_argument("--max-train-seconds", type=float, default=0.0,
                        help="train for at most this long after compilation (0: no limit); the learning-rate "
                             "schedule runs on the larger of steps / --steps and time / this limit, so it "
                             "completes either way; the metrics record which one ended training")
    parser.add_argument("--max-total-seconds", type=float, default=0.0,
                        help="end the whole run (data, compilation, training, saving, reports) within this "
                             "long: training stops --report-seconds before it (0: no limit)")
    parser.add_argument("--report-seconds", type=float, default=90.0,
                        help="time kept for saving and the final reports under --max-total-seconds")
    parser.add_argument("--init-from", type=Path, help="start from this checkpoint's weights instead of random")
    parser.add_argument("--attention", choices=["fast", "plain"], default="fast",
                        help="train with mx.fast attention or the same math from plain ops")
    parser.add_argument("--lexical-init", type=float, default=0.0,
                        help="scale of identity Q/K blocks in full-attention layers at init (0: off)")
    parser.add_argument("--cache-limit-gb", type=float, default=8.0, help="MLX buffer cache limit")
    parser.add_argument("--force", action="store_true", help="replace an existing --out directory")
    parser.add_argument("--max-call-steps", type=int, default=0,
                        help="with --resume: end this call after this many steps (a call of known length)")
    parser.add_argument("--keep-best", action="store_true",
                        help="save the weights of the progress evaluation (every --eval-every steps, and the last "
                             "step) with the highest validation accuracy (over --also-validate's questions too), "
                             "not the last weights; the "
                             "metrics name the step kept")
    parser.add_argument("--resume", action="store_true",
                        help="train across calls: continue from OUT.state when it exists, and when this call's "
                             "--max-total-seconds ends before the schedule (--steps / --max-train-seconds, "
                             "counted over all calls) save the state there and exit 0 without a checkpoint; "
                             "the same command run again continues")
    parser.add_argument("--snapshot", type=Path,
                        help="with --resume: a call that saves its state also writes the weights so far here, as a "
                             "float16 checkpoint with untrained temperatures (replacing it): small enough to copy "
                             "off the machine, so a lost machine loses only the AdamW state; --init-from continues")
    parser.add_argument("--prepare-data-only", action="store_true",
                        help="write the tokenised training data to --data-cache and stop (no training)")
    parser.add_argument("--validation-suite", default="validation",
                        help="suite every training decision reads: the progress lines and recipe comparisons")
    parser.add_argument("--also-validate", action="append", default=[], metavar="SUITE",
                        help="another suite whose questions join the validation questions (the progress lines "
                             "and --keep-best), e.g. phrasings; repeatable, never a held-out suite")
    parser.add_argument("--heldout-suite", action="append",
                        help="suite the saved checkpoint is reported on, and never read before; repeatable, "
                             "the first one heads TRAINING.md (default: heldout and heldout_hard)")
    parser.add_argument("--calib-suite", default="calib", help="suite the temperatures are fitted on")
    args = parser.parse_args(argv)
    heldout_suites = args.heldout_suite or ["heldout", "heldout_hard"]
    # (flag, suite) of every validation suite: checked here, prepared with the calibration split below
    validation_suites = (("--validation-suite", args.validation_suite),
                         *(("--also-validate", name) for name in args.also_validate))
    for flag, name in validation_suites:
        if name in heldout_suites:
            parser.error(f"{flag} {name} is a held-out suite: held-out suites are only reported")
    if len({args.validation_suite, *args.also_validate}) != 1 + len(args.also_validate):
        parser.error("--also-validate: name each validation suite once, and not the --validation-suite")
    if not 0.0 <= args.hard_fraction < 1.0:
        parser.error("--hard-fraction must be in [0, 1)")
    if args.prepare_data_only and not args.data_cache:
        parser.error("--prepare-data-only needs --data-cache")
    if args.out.exists() and not args.force and not args.prepare_data_only:
        parser.error(f"{args.out} exists (use --force to replace it)")
    if args.max_call_steps and not args.resume:
        parser.error("--max-call-steps needs --resume (a call that ends early must save its state)")
    if args.snapshot and not args.resume:
        parser.error("--snapshot needs --resume (it is written when a call saves its state)")
    if args.hidden_size % 64:
        parser.error("--hidden-size must be a multiple of 64 (head_dim 64)")
    if args.init_from and args.lexical_init:
        # The identity Q/K blocks are a prior for random weights; on trained ones they would overwrite the
        # full-attention layers' learnt queries and keys (device_train.sh's recipe passes --lexical-init 1.0).
        print("--init-from: starting from trained weights, so --lexical-init is not applied", flush=True)
        args.lexical_init = 0.0

    started = time.time()
    fingerprint = resume_fingerprint(args)
    tokenizer_dir = project_tokenizer()
    codec = load_codec(tokenizer_dir)
    encoder_raw, agent_raw = (dict(part) for part in ARCHITECTURES["standin"])
    encoder_raw.update(vocab_size=codec.vocab_size, pad_token_id=codec.pad_id, cls_token_id=codec.cls_id,
                       sep_token_id=codec.sep_id, bos_token_id=codec.cls_id, eos_token_id=codec.sep_id,
                       architectures=["ModernBertModel"], hidden_size=args.hidden_size,
                       intermediate_size=args.hidden_size * 5 // 2, num_attention_heads=args.hidden_size // 64)
    encoder = parse_encoder_config(encoder_raw)
    agent_raw.update({key: value for key, value in (("max_len", args.max_len), ("head_max_len", args.head_max_len))
                      if value is not None})
    try:
        agent = parse_agent_config(agent_raw, encoder)
    except ConfigError as error:   # e.g. head_max_len >= max_len, or max_len beyond the position table
        parser.error(f"--max-len/--head-max-len: {error}")
    initial = None
    if args.init_from:   # before the data: a checkpoint of another shape fails now, not after minutes of work
        try:
            initial = load_checkpoint(args.init_from, dtype="float32")
        except (LayaError, OSError) as error:
            parser.error(f"--init-from {args.init_from}: {error}")
        mismatched = [f"{name} {have} (this run: {want})" for name, have, want in (
            ("hidden_size", initial.encoder_config.hidden_size, encoder.hidden_size),
            ("max_len", initial.agent_config.max_len, agent.max_len),
            ("head_max_len", initial.agent_config.head_max_len, agent.head_max_len)) if have != want]
        if mismatched:
            parser.error(f"--init-from {args.init_from} has {', '.join(mismatched)}: give the same "
                         "--hidden-size, --max-len and --head-max-len")

    for name in heldout_suites:   # a bad name fails before training, not after; nothing else is read from them
        suite_path(name, "--heldout-suite")
    train = load_training_data(args, codec, agent, tokenizer_dir)
    if args.prepare_data_only:
        print(f"{len(train)} training questions in {args.data_cache} ({time.time() - started:.1f}s)", flush=True)
        return 0
    slots = max(2, int(np.diff(train.marker_offsets).max()))
    stop_ids = stop_token_ids(codec.tokenizer.get_vocab())
    fact_tokens = fact_token_table(codec, stop_ids) if args.noul_weight else None
    built = time.time()
    banks = host_banks(train, codec, slots, stop_ids, fact_tokens, args.multiple, args.workers)
    print(f"{len(banks)} banks (lengths {', '.join(str(b['input_ids'].shape[1]) for b in banks)}; questions "
          f"{', '.join(str(len(b['labels'])) for b in banks)}) built in {time.time() - built:.1f}s", flush=True)
    calib = prepare_records(load_suite(suite_path(args.calib_suite, "--calib-suite")).records, codec, agent)
    validation = {name: prepare_records(load_suite(suite_path(name, flag)).records, codec, agent)
                  for flag, name in validation_suites}
    print(f"prepared {len(train)} training / {len(calib)} calibration / "
          f"{sum(map(len, validation.values()))} validation questions "
          f"in {time.time() - started:.1f}s on {mx.default_device()}", flush=True)

    if args.attention == "plain":
        mx.fast.scaled_dot_product_attention = plain_attention
    mx.set_cache_limit(int(args.cache_limit_gb * 2**30))  # many padded shapes: keep the buffer cache bounded
    mx.random.seed(args.seed)
    if initial is not None:
        model = initial.model
    else:
        model = LayaModel(encoder, agent)
    trainee = Trainee(model, MatchProbe(args.hidden_size))
    mx.eval(trainee.parameters())
    if args.lexical_init:
        lexical_init(model, args.lexical_init)
    optimizer = optim.AdamW(learning_rate=learning_rate(0.0, args.lr, args.warmup), weight_decay=0.01)
    value_and_grad = nn.value_and_grad(trainee, loss_fn)
    state = [trainee.state, optimizer.state]

    # The training questions live on the device, one bank per padded length (a multiple of --multiple),
    # so a step takes only an index vector from the host. The compiled step (gather, token replacement,
    # forward, backward, clipping, update) retraces once per bank; its random state is part of its state.
    specials = {codec.pad_id, codec.cls_id, codec.sep_id, codec.mask_id, codec.tokenizer.token_to_id("[UNK]")}
    replace_pool = mx.array(np.array(sorted(set(range(codec.vocab_size)) - set(stop_ids.tolist()) - specials)))
    banks = [{key: mx.array(value) for key, value in bank.items()} for bank in banks]
    mx.eval(banks)
    # --ema: the averaged weights, a flat dict the compiled step updates in place (part of its state).
    ema = dict(tree_flatten(model.parameters())) if args.ema else None
    state = [trainee.state, optimizer.state, mx.random.state] + ([ema] if ema is not None else [])

    @partial(mx.compile, inputs=state, outputs=state)
    def train_step(bank, index):
        arrays = gather_batch(bank, index, args.replace_prob, replace_pool)
        (_, scorer_loss, aux, noul), grads = value_and_grad(trainee, arrays, args.action_weight, args.aux_weight,
                                                            args.noul_weight, args.label_smoothing,
                                                            args.hard_label_smoothing, args.hard_smoothing_types)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        optimizer.update(trainee, grads)
        if ema is not None:
            average_into(ema, dict(tree_flatten(model.parameters())), args.ema)
        return mx.stack([scorer_loss, aux, noul])

    rng = np.random.default_rng(args.seed)
    sizes = [len(b["labels"]) for b in banks]
    # First one step on each bank (at the warm-up's first learning rate), so that tracing and the
    # device's kernel compilation are done before the clock of --max-train-seconds starts.
    compiling = time.time()
    step, recent, pending, stopped_early = 0, [], [], False
    best = Best() if args.keep_best else None

    def progress_line(since: float, steps_since: int) -> None:
        """The progress line of the current step (`steps_since`: the steps taken since `since`, for the rate);
        under --keep-best its weights may become the kept ones. Under --ema the averaged weights are the ones
        evaluated (and kept); the trained ones are put back after."""
        trained = None
        if ema is not None:
            trained = dict(tree_flatten(model.parameters()))
            set_weights(model, ema)
        accuracy = report_progress(step, recent, model, validation, codec.pad_id, time.time() - since, steps_since)
        if best is not None:
            best.consider(step, accuracy, model)
        if trained is not None:
            set_weights(model, trained)

    for which, size in enumerate(sizes):
        if size >= args.batch_size and step < args.steps:
            recent.append(train_step(banks[which], mx.array(rng.permutation(size)[:args.batch_size].astype(np.int32))))
            mx.eval(state, recent[-1])
            step += 1
            if step % args.eval_every == 0:
                progress_line(compiling, step)
                recent = []
    print(f"compiled the step for {step} banks in {time.time() - compiling:.1f}s", flush=True)
    batches, prior_seconds, calls = 0, 0.0, 1
    saved = state_dir(args.out)
    if args.resume and saved.exists():   # the state replaces what the compiling steps did
        meta = load_state(saved, trainee, optimizer, fingerprint, ema)
        step, batches, prior_seconds, calls = meta["step"], meta["batches"], meta["train_seconds"], meta["calls"] + 1
        recent = []
        print(f"resumed from {saved}: step {step}, {prior_seconds:.0f}s trained in {calls - 1} call(s)", flush=True)
        if args.keep_best:   # the compiling steps' evaluations were of weights the state replaced
            best = Best(**meta["best"], weights=meta["best_weights"]) if meta["best"] else Best()
    plan = batch_plan(sizes, args.batch_size, args.seed, skip=batches)
    start = batches   # a resumed call's rate counts its own steps only (batches - start)
    train_started = time.time()
    # The schedule runs over --steps and --max-train-seconds (the training time of all calls together
    # under --resume); --max-total-seconds bounds this call. Without --resume a call is the whole run,
    # so its time limit also ends the schedule.
    schedule_seconds, call_limit = args.max_train_seconds, 0.0
    if args.max_total_seconds:   # what is left of this call's time, less what saving and reporting take
        call_limit = args.max_total_seconds - args.report_seconds - (train_started - started)
        if call_limit <= 0:
            raise SystemExit(f"--max-total-seconds {args.max_total_seconds}: no time left to train after "
                             f"{train_started - started:.0f}s of preparation")
        if not args.resume:
            schedule_seconds = min(schedule_seconds, call_limit) if schedule_seconds else call_limit
        print(f"training for at most {call_limit:.0f}s in this call", flush=True)
    progress, finished = 0.0, False
    while True:
        elapsed = time.time() - train_started
        progress = step / args.steps
        if schedule_seconds:
            progress = max(progress, (prior_seconds + elapsed) / schedule_seconds)
        if progress >= 1.0:
            stopped_early, finished = step < args.steps, True
            break
        if (call_limit and elapsed >= call_limit) or (args.max_call_steps and batches - start >= args.max_call_steps):
            break
        optimizer.learning_rate = learning_rate(progress, args.lr, args.warmup)
        which, index = next(plan)
        losses = train_step(banks[which], mx.array(index))
        mx.async_eval(state, losses)
        recent.append(losses)
        pending.append(losses)
        if len(pending) > 2:   # keep two steps queued on the device: no host round trip per step
            mx.eval(pending.pop(0))
        step, batches = step + 1, batches + 1
        if step % args.eval_every == 0:
            progress_line(train_started, batches - start)
            recent = []
    mx.eval(state)
    train_seconds = prior_seconds + time.time() - train_started   # the progress line below is not training
    if recent:
        progress_line(train_started, batches - start)
    if not finished:   # only under --resume: this call's time is spent before the schedule's end
        save_state(saved, trainee, optimizer, fingerprint, step, batches, train_seconds, calls, best, ema)
        if args.snapshot:
            shutil.rmtree(args.snapshot, ignore_errors=True)
            save_checkpoint(model, args.snapshot, encoder_raw, agent_raw, tokenizer_dir, dtype="float16")
        print(f"training state saved in {saved} after {step} steps and {train_seconds:.0f}s of training "
              f"(schedule {progress:.1%} done); run the same command again to continue", flush=True)
        return 0

    # The model holds the trained weights of the last step; under --ema those evaluated (and kept) were averages.
    if best is not None and (best.step != step or ema is not None):
        set_weights(model, best.weights)
    elif ema is not None:
        set_weights(model, ema)
    if ema is not None:
        print(f"saved the averaged weights (--ema {args.ema:g}) of step {step if best is None else best.step}",
              flush=True)
    if best is not None and best.step != step:
        print(f"kept the weights of step {best.step} (validation accuracy {best.accuracy:.4f}), "
              f"not those of the last step {step}", flush=True)
    # The stored weights are float16; fit and report on exactly those values.
    model.update(nn.utils.tree_map(lambda w: w.astype(mx.float16).astype(mx.float32), model.parameters()))
    calib_logits = predict_logits(model, calib, codec.pad_id)
    temperatures = [fit_temperature([row for (it, _, _), row in zip(calib, calib_logits) if it.type_name == kind],
                                    [y for (it, y, _), _row in zip(calib, calib_logits) if it.type_name == kind])
                    for kind in TYPES]
    agent_raw.update(temperature=temperatures, temperature_by_options={}, amp_dtype="fp32",
                     training={"script": "tools/train_standin.py", "seed": args.seed, "steps": args.steps,
                               "batch_size": args.batch_size, "train_records": args.train_records, "lr": args.lr,
                               "attention": args.attention, "aux_weight": args.aux_weight,
                               "noul_weight": args.noul_weight, "replace_prob": args.replace_prob,
                               "hidden_size": args.hidden_size, "lexical_init": args.lexical_init,
                               "hard_fraction": args.hard_fraction, "label_smoothing": args.label_smoothing,
                               "hard_label_smoothing": args.hard_label_smoothing,
                               "hard_smoothing_types": list(args.hard_smoothing_types),
                               "training_paraphrases": args.training_paraphrases,
                               "varied_topics": args.varied_topics, "varied_noul_frames": args.varied_noul_frames,
                               "urgency_phrases": args.urgency_phrases, "ema": args.ema,
                               "init_from": str(args.init_from) if args.init_from else None,
                               "trained_steps": step})
    if args.out.exists():
        shutil.rmtree(args.out)
    save_checkpoint(model, args.out, encoder_raw, agent_raw, tokenizer_dir, dtype="float16")
    shutil.rmtree(saved, ignore_errors=True)   # the run is complete: its resumable state is spent

    # Reported on the saved files, reloaded in float32, by the fidelity checker; `uncalibrated` has T = 1.
    reloaded = load_runtime(args.out, "float32", batch_size=128)
    uncalibrated = reloaded.replace(calibration=calibration_from_tables())
    runtimes = {"calibrated": reloaded, "uncalibrated": uncalibrated}

    @cache   # one evaluation per (runtime, suite): the calibration and held-out suites may be one suite
    def report_on(which: str, name: str) -> dict:
        return suite_report(runtimes[which], name)

    primary = heldout_suites[0]
    before, after = report_on("uncalibrated", primary), report_on("calibrated", primary)
    reported = {name: report_on("calibrated", name) for name in heldout_suites}
    validation_after = report_on("calibrated", args.validation_suite)
    also_validated = {name: report_on("calibrated", name) for name in args.also_validate}
    # The small smoke suite too, so a fast test can check that the saved checkpoint reproduces it.
    smoke_after = report_on("calibrated", "smoke")
    metrics = {
        "seed": args.seed, "steps": step, "planned_steps": args.steps, "stopped_early": stopped_early,
        "heldout_suite": primary, "heldout_suites": heldout_suites, "validation_suite": args.validation_suite,
        "calib_suite": args.calib_suite, "batch_size": args.batch_size, "train_questions": len(train),
        "hidden_size": args.hidden_size, "lr": args.lr, "aux_weight": args.aux_weight,
        "noul_weight": args.noul_weight, "replace_prob": args.replace_prob, "hard_fraction": args.hard_fraction,
        "training_paraphrases": args.training_paraphrases, "varied_topics": args.varied_topics,
        "varied_noul_frames": args.varied_noul_frames, "urgency_phrases": args.urgency_phrases,
        "fact_phrasings": args.fact_phrasings, "label_smoothing": args.label_smoothing,
        "hard_label_smoothing": args.hard_label_smoothing,
        "hard_smoothing_types": list(args.hard_smoothing_types), "ema": args.ema,
        "warmup": args.warmup, "multiple": args.multiple,
        "max_len": agent.max_len, "head_max_len": agent.head_max_len,
        "steps_per_second": round(step / max(train_seconds, 1e-9), 2),
        "peak_memory_gib_last_call": round(peak_memory_gib(), 2),
        "device": str(mx.default_device()), "mlx": mx.__version__, "python": platform.python_version(),
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - started, 1), "calls": calls,
        "temperatures": [round(t, 4) for t in temperatures],
        "kept_step": best.step if best is not None else step,
        "kept_validation_accuracy": round(best.accuracy, 4) if best is not None else None,
        "heldout_uncalibrated": before, "heldout_calibrated": after, "smoke_calibrated": smoke_after,
        "validation_calibrated": validation_after, "also_validated": also_validated, "reported": reported,
        "calib_ece_before": report_on("uncalibrated", args.calib_suite)["ece"],
        "calib_ece_after": report_on("calibrated", args.calib_suite)["ece"],
    }
    (args.out / "training_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (args.out / "TRAINING.md").write_text(training_report(metrics, " ".join(sys.argv)))
    print(json.dumps({k: metrics[k] for k in ("train_seconds", "temperatures")}), flush=True)
    print(f"validation accuracy {validation_after['overall']['accuracy']} "
          f"(lexical baseline {validation_after['lexical']['overall']})", flush=True)
    for name, report in reported.items():
        ece = f"{before['ece']} -> {after['ece']}" if name == primary else report["ece"]
        print(f"held-out accuracy on {name} {report['overall']['accuracy']} (lexical baseline "
              f"{report['lexical']['overall']}), ECE {ece}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
