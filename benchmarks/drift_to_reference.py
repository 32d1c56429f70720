"""How far a pass moves a half-precision runtime from the float32 reference, next to how far its parent is.

    python benchmarks/drift_to_reference.py --parent masks_once,qkv_views --candidate fused_encoder \
        [--suite gate] [--dtype float16] [--first N] [--out drift.json]

An exact half-precision kernel that computes in float32 and rounds once differs from the kernels it replaces by
about what the half-precision cast itself does, so the exact same-dtype gates (bounded by the same-dtype noise:
other batch sizes, shapes and padding) reject it even when it sits closer to float32 than its parent
(benchmarks/results/2026-12-06-h100-gpu-stack-fault: fused_encoder on `gate`, max |dp| 0.0111 against the
parent, about the FP16 cast's 0.012). This measures the question a gate for such kernels would ask: per
question, |dp| (the largest probability difference) of the parent and of the candidate against the float32
reference, their distributions (mean, p50, p90, p99, max), how many questions each is closer on, the
candidate-vs-parent drift, and the answers each changes against the reference, decisive (reference top-two gap
at least 0.05) and near tie apart; then whether the candidate's excess over its parent (p99 and max, what the
ref_excess gates read) is more than swapping each question's two distances at random gives, and a sign test
(`paired`), with the per-question distances in the JSON. On the CPU the fused kernels fall back to MLX ops,
so candidate and parent agree: that run checks the plumbing only. Exit 0; the JSON goes to --out.

`--candidate float32_layers` is no pass but the rounding change at its largest, on any device: every encoder
layer computed in float32 from the half-precision weights and rounded once at its output (what a fused layer
kernel that accumulates and chains in float32 does). Measured on the CPU on `gate` (docs/gates.md, "Exact
half-precision kernels"). `float32_midlayer` rounds once per layer too, after the attention's residual add:
with `--parent float32_layers` it is a pair that rounds differently and about as finely, what a correct
fused kernel is to the ops it replaces.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import platform
import sys
import time
from pathlib import Path

import laya_opt as lo  # (first: the BLAS choice before mlx.core loads; the installed layout, not the tree's)
import mlx.core as mx
import numpy as np

from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.decisions import decision_changes
from laya_opt.fidelity.metrics import compare_question
from laya_opt.runs.pipeline import suite_requests
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import suite_path


def summary(values: np.ndarray) -> dict:
    return {"mean": float(values.mean()), "p50": float(np.percentile(values, 50)),
            "p90": float(np.percentile(values, 90)), "p99": float(np.percentile(values, 99)),
            "max": float(values.max())}


def per_question_dp(reference, candidate) -> np.ndarray:
    return np.array([compare_question(r, c).max_abs_dp for r, c in zip(reference.questions, candidate.questions)])


def sign_test_p(farther: int, closer: int) -> float:
    """One-sided exact binomial p-value of the candidate being farther on at least `farther` of the questions
    where the two differ, were farther and closer equally likely (ties left out)."""
    n = farther + closer
    return float(sum(math.comb(n, k) for k in range(farther, n + 1)) / 2 ** n) if n else 1.0


def paired(parent_dp: np.ndarray, candidate_dp: np.ndarray, draws: int = 2000, seed: int = 0) -> dict:
    """Is the candidate farther from float32 than its parent, beyond what rounding differently would give?

    The ref_excess gates compare the candidate's p99 |dp| with its parent's (its max, since 2026-12-07, with
    the larger of the parent's and the dtype cast's: docs/gates.md, "The worst question"). Were the two merely
    rounding differently (neither worse), each question's pair of distances would be exchangeable: swapping
    them at random gives the excess such a pair shows by chance. `null_95`: its 95th percentile; `p`: the
    share of swaps with an excess at least the observed one; the sign test counts questions either way."""
    rng = np.random.default_rng(seed)
    pairs = np.stack([parent_dp, candidate_dp])
    swap = rng.random((draws, len(parent_dp))) < 0.5
    cand = np.where(swap, pairs[0], pairs[1])
    par = np.where(swap, pairs[1], pairs[0])
    out = {}
    for name, stat in (("p99", lambda a: np.percentile(a, 99, axis=-1)), ("max", lambda a: a.max(axis=-1))):
        observed = float(stat(candidate_dp) - stat(parent_dp))
        null = stat(cand) - stat(par)
        out[f"{name}_excess"] = {"observed": observed, "null_95": float(np.percentile(null, 95)),
                                 "p": float(np.mean(null >= observed - 1e-12))}
    farther, closer = int(np.sum(candidate_dp > parent_dp)), int(np.sum(candidate_dp < parent_dp))
    out["sign_test"] = {"farther": farther, "closer": closer, "p_farther": sign_test_p(farther, closer)}
    return out


def changed_answers(reference, candidate) -> dict:
    split = decision_changes(reference, candidate).overall
    return {"decisive": split.decisive.changes, "near_tie": split.near_tie.changes}


def _float32_encoder(runtime, layer_step):
    """The runtime with its encoder layers and final norm computed in float32 from the half-precision weights,
    each layer through `layer_step(layer, x, context, attend, self_attention, half)`, which rounds once."""
    from mlx.utils import tree_map

    from laya_opt.core.model import global_attention

    half = runtime.dtype
    encoder32 = copy.deepcopy(runtime.model.encoder)
    encoder32.update(tree_map(lambda w: w.astype(mx.float32), encoder32.parameters()))

    def stack(encoder, input_ids, attention_mask, kernels):
        x = encoder.embeddings(input_ids).astype(mx.float32)   # as the parent computes them
        context = kernels.attention_masks(attention_mask, encoder.window, mx.float32)
        for layer in encoder32.layers:
            attend = kernels.sliding_attention if layer.sliding else global_attention
            x = layer_step(layer, x, context, attend, kernels.self_attention, half)
        return encoder32.final_norm(x).astype(half)

    return runtime.replace(kernels=dataclasses.replace(runtime.kernels, encoder_stack=stack))


def _rounded(x, half):
    return x.astype(half).astype(mx.float32)


FLOAT32_LAYERS = "float32_layers"


def float32_layers(runtime):
    """Each encoder layer (and the final norm) in float32, rounded to the runtime's dtype once per layer, at its
    output: one rounding where the parent rounds per op."""
    return _float32_encoder(runtime, lambda layer, x, context, attend, self_attention, half:
                            _rounded(layer(x, context, attend, self_attention), half))


FLOAT32_MIDLAYER = "float32_midlayer"


def float32_midlayer(runtime):
    """As `float32_layers`, one rounding per layer, but at another place: after the attention's residual add
    instead of at the layer's output. It rounds differently, not better: a pair with `float32_layers` that
    the ref_excess gates should not tell apart."""
    def step(layer, x, context, attend, self_attention, half):
        normed = layer.attn_norm(x) if "attn_norm" in layer else x
        x = _rounded(x + self_attention(layer.attn, normed, context, attend), half)
        return x + layer.mlp(layer.mlp_norm(x))

    return _float32_encoder(runtime, step)


VARIANTS = {FLOAT32_LAYERS: float32_layers, FLOAT32_MIDLAYER: float32_midlayer}


def build(names: list[str], dtype: str):
    runtime = lo.load(dtype=dtype)
    for name in names:
        runtime = VARIANTS[name](runtime) if name in VARIANTS else lo.apply(runtime, name)
    return runtime


def measure(parent: list[str], candidate: list[str], suite: str, dtype: str, first: int | None) -> dict:
    requests = suite_requests([load_suite(suite_path(suite, "--suite"))])[:first]
    timings, outputs = {}, {}
    for role, runtime in (("reference", lo.load(dtype="float32")), ("parent", build(parent, dtype)),
                          ("candidate", build(parent + candidate, dtype))):
        start = time.perf_counter()
        outputs[role] = evaluate(runtime, requests)
        timings[role] = round(time.perf_counter() - start, 2)
    reference = outputs["reference"]
    parent_dp, candidate_dp = (per_question_dp(reference, outputs[role]) for role in ("parent", "candidate"))
    return {
        "suite": suite, "dtype": dtype, "parent": parent, "candidate": candidate, "questions": len(parent_dp),
        "device": str(mx.default_device()), "mlx": mx.__version__, "python": platform.python_version(),
        "seconds": timings,
        "parent_vs_reference": summary(parent_dp), "candidate_vs_reference": summary(candidate_dp),
        "candidate_vs_parent": summary(per_question_dp(outputs["parent"], outputs["candidate"])),
        "candidate_closer": int(np.sum(candidate_dp < parent_dp)),
        "parent_closer": int(np.sum(parent_dp < candidate_dp)),
        "changed_vs_reference": {role: changed_answers(reference, outputs[role]) for role in ("parent", "candidate")},
        "changed_vs_parent": changed_answers(outputs["parent"], outputs["candidate"]),
        "paired": paired(parent_dp, candidate_dp),
        "per_question": {"parent": parent_dp.tolist(), "candidate": candidate_dp.tolist()},
    }


def table(result: dict) -> str:
    rows = [f"{'|dp| against float32':28} {'mean':>9} {'p50':>9} {'p90':>9} {'p99':>9} {'max':>9}"]
    for key in ("parent_vs_reference", "candidate_vs_reference", "candidate_vs_parent"):
        cells = " ".join(f"{result[key][stat]:9.2e}" for stat in ("mean", "p50", "p90", "p99", "max"))
        rows.append(f"{key:28} {cells}")
    changed = result["changed_vs_reference"]
    rows.append(f"closer to float32: candidate on {result['candidate_closer']}, parent on {result['parent_closer']} "
                f"of {result['questions']} questions; answers changed against float32 (decisive / near tie): "
                f"parent {changed['parent']['decisive']} / {changed['parent']['near_tie']}, candidate "
                f"{changed['candidate']['decisive']} / {changed['candidate']['near_tie']}")
    test = result["paired"]
    for name in ("p99", "max"):
        cell = test[f"{name}_excess"]
        rows.append(f"{name} excess over the parent {cell['observed']:.2e}; by swapping each question's pair: "
                    f"95th percentile {cell['null_95']:.2e}, p = {cell['p']:.3f}")
    rows.append(f"sign test: farther on {test['sign_test']['farther']}, closer on {test['sign_test']['closer']}, "
                f"one-sided p = {test['sign_test']['p_farther']:.3g}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parent", default="masks_once,qkv_views", help="comma-separated passes of the parent")
    parser.add_argument("--candidate", default="fused_encoder", help="comma-separated passes applied on top")
    parser.add_argument("--suite", default="gate")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--first", type=int, default=None, help="only the first N requests of the suite")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)
    split = lambda text: [name for name in text.split(",") if name]
    try:
        result = measure(split(args.parent), split(args.candidate), args.suite, args.dtype, args.first)
    except lo.InputError as exc:
        parser.error(str(exc))
    print(table(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
