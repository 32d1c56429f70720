"""Train the laya-tiny stand-in checkpoint from scratch on generated typed-decision data.

    python checkpoints/train_standin.py --out checkpoints/laya-tiny [--seed 0] [--steps 3000]

Deterministic given --seed (data order, initialisation); GPU kernels may still reduce in a
different order run to run. Steps: train the scorer on the per-question option-marker
cross-entropy (plus an auxiliary action-head loss: act when the argmax is right, escalate when
it is wrong), round the weights to float16 (the stored dtype), fit the three per-type
temperatures on the calibration split, save in the upstream layout, reload from disk and report
held-out accuracy and ECE into TRAINING.md and training_metrics.json.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import laya_opt  # noqa: E402,F401  (first: it picks the BLAS before mlx.core loads)
import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import mlx.optimizers as optim  # noqa: E402
import numpy as np  # noqa: E402

from fidelity.generator import iter_training_records  # noqa: E402
from fidelity.suites import load_suite  # noqa: E402
from laya_opt.batching import collate  # noqa: E402
from laya_opt.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from laya_opt.config import ARCHITECTURES, parse_agent_config, parse_encoder_config  # noqa: E402
from laya_opt.decode import calibration_from_tables  # noqa: E402
from laya_opt.model import LayaModel  # noqa: E402
from laya_opt.prompt import prepare_request  # noqa: E402
from laya_opt.tokens import load_codec  # noqa: E402

TYPES = ("choice", "score", "noul")


def label_index(prepared, label) -> int:
    if prepared.type_name == "choice":
        return prepared.option_keys.index(str(label))
    if prepared.type_name == "score":
        return int(label)
    return 1 if label else 0


def prepare_records(records, codec, agent):
    """(PreparedQuestion, label index, tags) for every question of every record."""
    items = []
    for record in records:
        prepared = prepare_request(record.state, record.questions, codec, agent.max_len, agent.head_max_len)
        for item in prepared:
            items.append((item, label_index(item, record.labels[item.qid]), record.tags[item.qid]))
    return items


def batches_by_length(items, batch_size: int, rng: np.random.Generator):
    """Shuffle, then sort windows of 50 batches by length so padding stays small."""
    order = rng.permutation(len(items))
    window = batch_size * 50
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window], key=lambda i: items[i][0].length)
        groups = [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        for g in rng.permutation(len(groups)):
            yield groups[g]


def to_batch(items, indices, pad_id):
    batch = collate([items[i][0] for i in indices], pad_id, pad_to_multiple=16)
    labels = mx.array([items[i][1] for i in indices], dtype=mx.int32)
    return batch, labels


def loss_fn(model, batch, labels, action_weight):
    logits, action = model(batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask, batch.qtype)
    picked = mx.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    scorer_loss = (mx.logsumexp(logits, axis=1) - picked).mean()
    # Action head: 0 = act (answer is right), 1 = escalate (answer is wrong); the target is not differentiated.
    wrong = mx.stop_gradient((mx.argmax(logits, axis=1) != labels).astype(mx.int32))
    action_loss = nn.losses.cross_entropy(action, wrong).mean()
    return scorer_loss + action_weight * action_loss, scorer_loss


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


def ece(confidences, correct, bins=10) -> float:
    confidences, correct = np.asarray(confidences), np.asarray(correct, dtype=float)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (confidences > lo) & (confidences <= hi) if lo > 0 else (confidences >= lo) & (confidences <= hi)
        if inside.any():
            total += inside.mean() * abs(confidences[inside].mean() - correct[inside].mean())
    return float(total)


def score(items, logit_rows, temperatures=(1.0, 1.0, 1.0)):
    """Accuracy overall / per type / language / option count, and ECE on max p."""
    rows = []
    for (item, label, tags), logits in zip(items, logit_rows):
        probs = softmax(logits / temperatures[item.qtype])
        rows.append((tags, int(np.argmax(probs)) == label, float(probs.max())))
    def acc(selected):
        return {"accuracy": round(float(np.mean([c for _, c, _ in selected])), 4), "n": len(selected)}
    report = {"overall": acc(rows), "ece": round(ece([p for *_, p in rows], [c for _, c, _ in rows]), 4)}
    for key in ("type", "language", "options", "length_class"):
        values = sorted({str(getattr(t, key)) for t, _, _ in rows}, key=lambda v: (len(v), v))
        report[f"by_{key}"] = {v: acc([r for r in rows if str(getattr(r[0], key)) == v]) for v in values}
    return report


def _table(title: str, rows: dict) -> list[str]:
    lines = [f"| {title} | accuracy | n |", "|---|---:|---:|"]
    return lines + [f"| {key} | {value['accuracy']:.4f} | {value['n']} |" for key, value in rows.items()] + [""]


def training_report(metrics: dict, command: str) -> str:
    after, before = metrics["heldout_calibrated"], metrics["heldout_uncalibrated"]
    lines = [
        "# laya-tiny: how this stand-in checkpoint was trained", "",
        "Generated by `checkpoints/train_standin.py`; numbers below are measured on the saved float16 weights",
        "reloaded from disk in float32 (held-out suite `fidelity/suites/heldout.jsonl`).", "",
        f"- command: `{command}`",
        f"- device: {metrics['device']}, mlx {metrics['mlx']}, Python {metrics['python']}",
        f"- training time: {metrics['train_seconds']} s ({metrics['steps']} steps of {metrics['batch_size']} "
        f"questions, {metrics['train_questions']} training questions); total {metrics['total_seconds']} s",
        f"- fitted temperatures [choice, score, noul]: {metrics['temperatures']}",
        f"- held-out accuracy: **{after['overall']['accuracy']:.4f}** (n = {after['overall']['n']})",
        f"- held-out ECE (max p, 10 bins): {before['ece']:.4f} before temperature fitting, {after['ece']:.4f} after",
        f"- calibration-split ECE: {metrics['calib_ece_before']:.4f} before, {metrics['calib_ece_after']:.4f} after",
        "",
    ]
    for key in ("type", "language", "options", "length_class"):
        lines += _table(f"by {key}", after[f"by_{key}"])
    return "\n".join(lines)


def plain_attention(q, k, v, *, scale, mask=None):
    """Attention from plain ops (same math as mx.fast.scaled_dot_product_attention), for --attention plain."""
    scores = (q * scale) @ k.swapaxes(-1, -2)
    if mask is not None:
        scores = mx.where(mask, scores, mx.array(-1e9, dtype=scores.dtype))
    return mx.softmax(scores, axis=-1, precise=True) @ v


def curriculum(items, max_options: int, max_length: int):
    """Indices of the easy questions (few options, short prompts) used for the first training phase."""
    return [i for i, (item, _, _) in enumerate(items) if len(item.markers) <= max_options and item.length <= max_length]


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "checkpoints" / "laya-tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-records", type=int, default=30000)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--action-weight", type=float, default=0.2)
    parser.add_argument("--eval-every", type=int, default=500, help="steps between calibration-accuracy prints")
    parser.add_argument("--attention", choices=["fast", "plain"], default="fast",
                        help="train with mx.fast attention or the same math from plain ops")
    parser.add_argument("--easy-fraction", type=float, default=0.0,
                        help="fraction of steps trained on easy questions first (<= 4 options, <= 128 tokens)")
    parser.add_argument("--lexical-init", type=float, default=0.0,
                        help="scale of identity Q/K blocks in full-attention layers at init (0: off)")
    parser.add_argument("--cache-limit-gb", type=float, default=8.0, help="MLX buffer cache limit")
    parser.add_argument("--force", action="store_true", help="replace an existing --out directory")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.force:
        parser.error(f"{args.out} exists (use --force to replace it)")

    started = time.time()
    tokenizer_dir = ROOT / "checkpoints" / "tokenizer"
    codec = load_codec(tokenizer_dir)
    encoder_raw, agent_raw = (dict(part) for part in ARCHITECTURES["tiny"])
    encoder_raw.update(vocab_size=codec.vocab_size, pad_token_id=codec.pad_id, cls_token_id=codec.cls_id,
                       sep_token_id=codec.sep_id, bos_token_id=codec.cls_id, eos_token_id=codec.sep_id,
                       architectures=["ModernBertModel"])
    encoder = parse_encoder_config(encoder_raw)
    agent = parse_agent_config(agent_raw, encoder)

    records = []
    for record in iter_training_records(args.seed):
        records.append(record)
        if len(records) >= args.train_records:
            break
    train = prepare_records(records, codec, agent)
    suites = ROOT / "fidelity" / "suites"
    calib = prepare_records(load_suite(suites / "calib.jsonl").records, codec, agent)
    heldout = prepare_records(load_suite(suites / "heldout.jsonl").records, codec, agent)
    print(f"prepared {len(train)} training / {len(calib)} calibration / {len(heldout)} held-out questions "
          f"in {time.time() - started:.1f}s on {mx.default_device()}", flush=True)

    if args.attention == "plain":
        mx.fast.scaled_dot_product_attention = plain_attention
    mx.set_cache_limit(int(args.cache_limit_gb * 2**30))  # many padded shapes: keep the buffer cache bounded
    easy_steps = int(args.easy_fraction * args.steps)
    easy = [train[i] for i in curriculum(train, 4, 128)]
    mx.random.seed(args.seed)
    model = LayaModel(encoder, agent)
    mx.eval(model.parameters())
    if args.lexical_init:
        lexical_init(model, args.lexical_init)
    warmup = max(1, args.steps // 20)
    schedule = optim.join_schedules([optim.linear_schedule(1e-6, args.lr, warmup),
                                     optim.cosine_decay(args.lr, args.steps - warmup, args.lr * 0.05)], [warmup])
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=0.01)
    step_fn = nn.value_and_grad(model, loss_fn)
    rng = np.random.default_rng(args.seed)
    step, train_started, recent = 0, time.time(), []
    while step < args.steps:
        pool = easy if step < easy_steps else train
        for indices in batches_by_length(pool, args.batch_size, rng):
            if pool is easy and step >= easy_steps:
                break
            batch, labels = to_batch(pool, indices, codec.pad_id)
            (loss, scorer_loss), grads = step_fn(model, batch, labels, args.action_weight)
            grads, _ = optim.clip_grad_norm(grads, 1.0)
            optimizer.update(model, grads)
            mx.eval(model.parameters(), optimizer.state, scorer_loss)
            recent.append(scorer_loss.item())
            step += 1
            if step % args.eval_every == 0 or step == args.steps:
                calib_acc = score(calib, predict_logits(model, calib, codec.pad_id))["overall"]["accuracy"]
                print(f"step {step}: scorer loss {np.mean(recent):.4f}, calib accuracy {calib_acc:.4f}, "
                      f"{time.time() - train_started:.0f}s", flush=True)
                recent = []
            if step >= args.steps:
                break
    train_seconds = time.time() - train_started

    # The stored weights are float16; fit and report on exactly those values.
    model.update(nn.utils.tree_map(lambda w: w.astype(mx.float16).astype(mx.float32), model.parameters()))
    calib_logits = predict_logits(model, calib, codec.pad_id)
    temperatures = [fit_temperature([l for (it, _, _), l in zip(calib, calib_logits) if it.type_name == kind],
                                    [y for (it, y, _), l in zip(calib, calib_logits) if it.type_name == kind])
                    for kind in TYPES]
    agent_raw.update(temperature=temperatures, temperature_by_options={}, amp_dtype="fp32",
                     training={"script": "checkpoints/train_standin.py", "seed": args.seed, "steps": args.steps,
                               "batch_size": args.batch_size, "train_records": args.train_records, "lr": args.lr,
                               "attention": args.attention, "easy_fraction": args.easy_fraction,
                               "lexical_init": args.lexical_init})
    if args.out.exists():
        shutil.rmtree(args.out)
    save_checkpoint(model, args.out, encoder_raw, agent_raw, tokenizer_dir, dtype="float16")

    reloaded = load_checkpoint(args.out, dtype="float32")
    calibration = calibration_from_tables(reloaded.agent_config.temperature)
    held_logits = predict_logits(reloaded.model, heldout, codec.pad_id)
    before = score(heldout, held_logits)
    after = score(heldout, held_logits, calibration.temperature)
    metrics = {
        "seed": args.seed, "steps": args.steps, "batch_size": args.batch_size, "train_questions": len(train),
        "device": str(mx.default_device()), "mlx": mx.__version__, "python": platform.python_version(),
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - started, 1),
        "temperatures": [round(t, 4) for t in temperatures],
        "heldout_uncalibrated": before, "heldout_calibrated": after,
        "calib_ece_before": score(calib, calib_logits)["ece"],
        "calib_ece_after": score(calib, calib_logits, temperatures)["ece"],
    }
    (args.out / "training_metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (args.out / "TRAINING.md").write_text(training_report(metrics, " ".join(sys.argv)))
    print(json.dumps({k: metrics[k] for k in ("train_seconds", "temperatures")}), flush=True)
    print(f"held-out accuracy {after['overall']['accuracy']}, ECE {before['ece']} -> {after['ece']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
