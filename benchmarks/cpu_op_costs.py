"""Where a stand-in forward's CPU time goes: one encoder layer's ops at the stand-in's shapes, timed alone.

    python benchmarks/cpu_op_costs.py [--length 256] [--calls 30] [--blocks 5] [--out FILE.json]

MLX's CPU backend computes exp and erf one element at a time (on 2026-12-07's 2-core x86 machine, with
MLX 0.32.4, about 17 ns an element, against numpy's vectorised exp at under 2 ns), so on the CPU the GELU
and the attention softmax cost more than the matmuls around them. This prints each op's p50 / p95 per call
(alternating blocks, n = blocks x calls, synchronised inside the timer) and the share of one layer's sum,
so that a claim about what dominates the CPU forward has a command behind it. The shapes: one sequence of
`--length` tokens, the stand-in's width D = 256, 4 heads of 64, GeGLU input 2 x 640.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import laya_opt  # noqa: F401  (first: the BLAS choice is made before mlx.core loads)
import mlx.core as mx
import mlx.nn as nn
import numpy as np

from laya_opt.timing.bench import summarize
from laya_opt.util import blas

WIDTH, HEADS, HEAD_DIM, INTERMEDIATE = 256, 4, 64, 640


def layer_ops(length: int) -> dict:
    """name -> a call that evaluates one op of an encoder layer (its inputs made and evaluated beforehand)."""
    x = mx.random.normal((1, length, WIDTH))
    wqkv, wo = mx.random.normal((WIDTH, 3 * WIDTH)), mx.random.normal((WIDTH, WIDTH))
    wi, wo2 = mx.random.normal((WIDTH, 2 * INTERMEDIATE)), mx.random.normal((INTERMEDIATE, WIDTH))
    hidden = mx.random.normal((1, length, 2 * INTERMEDIATE))
    inner = mx.random.normal((1, length, INTERMEDIATE))
    q = mx.random.normal((1, HEADS, length, HEAD_DIM))
    scores = mx.random.normal((1, HEADS, length, length))
    gamma = mx.ones((WIDTH,))
    mx.eval(x, wqkv, wo, wi, wo2, hidden, inner, q, scores, gamma)

    def geglu():
        u, g = mx.split(hidden, 2, axis=-1)
        return nn.gelu(u) * g

    # Indented names are a part of the op above them, timed alone: not added into the layer's sum.
    return {
        "matmul Wqkv": lambda: x @ wqkv,
        "matmul attn Wo": lambda: x @ wo,
        "matmul mlp Wi": lambda: x @ wi,
        "matmul mlp Wo": lambda: inner @ wo2,
        "attention (mx.fast sdpa)": lambda: mx.fast.scaled_dot_product_attention(q, q, q, scale=HEAD_DIM ** -0.5),
        "  its softmax alone": lambda: mx.softmax(scores, axis=-1),
        "GeGLU (erf GELU x gate)": geglu,
        "  exp alone, same size": lambda: mx.exp(inner),
        "layer norm x2": lambda: [mx.fast.layer_norm(x, gamma, None, 1e-5) for _ in range(2)],
    }


def time_ops(ops: dict, calls: int, blocks: int) -> dict:
    samples = {name: [] for name in ops}
    for fn in ops.values():  # warm-up
        for _ in range(3):
            mx.eval(fn())
    for block in range(blocks):
        order = list(ops) if block % 2 == 0 else list(reversed(ops))  # alternate the order between blocks
        for name in order:
            for _ in range(calls):
                started = time.perf_counter()
                mx.eval(ops[name]())
                samples[name].append((time.perf_counter() - started) * 1e3)
    return {name: summarize(values) for name, values in samples.items()}


def numpy_exp_ms(length: int, calls: int) -> float:
    values = np.random.default_rng(0).standard_normal((1, length, INTERMEDIATE)).astype(np.float32)  # as `inner`
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        np.exp(values)
        times.append((time.perf_counter() - started) * 1e3)
    return float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=256, help="tokens in the one sequence (default 256)")
    parser.add_argument("--calls", type=int, default=30, help="calls per op per block (default 30)")
    parser.add_argument("--blocks", type=int, default=5, help="alternating blocks (default 5)")
    parser.add_argument("--out", help="also write the table as JSON here")
    args = parser.parse_args(argv)
    if args.length < 1 or args.calls < 1 or args.blocks < 1:
        parser.error("--length, --calls and --blocks must be positive")
    if mx.default_device().type != mx.DeviceType.cpu:
        sys.exit("error: this measures MLX's CPU backend; the default device here is "
                 f"{mx.default_device()} (run with MLX's CPU build)")

    table = time_ops(layer_ops(args.length), args.calls, args.blocks)
    layer = sum(s.p50_ms for name, s in table.items() if not name.startswith("  "))
    print(f"MLX {mx.__version__}, {platform.machine()}, BLAS {blas.LOADED or 'MLX built-in'}; "
          f"one sequence of {args.length} tokens, n = {args.blocks * args.calls} per op")
    print(f"{'op':30} {'p50 ms':>8} {'p95 ms':>8} {'share':>6}")
    for name, s in table.items():
        share = "" if name.startswith("  ") else f"{s.p50_ms / layer:6.0%}"
        print(f"{name:30} {s.p50_ms:8.2f} {s.p95_ms:8.2f} {share:>6}")
    numpy_ms = numpy_exp_ms(args.length, args.calls * args.blocks)
    print(f"{'  numpy exp, same size':30} {numpy_ms:8.2f}")
    if args.out:
        record = {"mlx": mx.__version__, "machine": platform.machine(), "blas": blas.LOADED, "length": args.length,
                  "ops": {name: {"n": s.n, "p50_ms": s.p50_ms, "p95_ms": s.p95_ms} for name, s in table.items()},
                  "numpy_exp_p50_ms": numpy_ms}
        with open(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
