"""Full-size speed of every pass, alone and stacked, against the eager FP16 baseline (run on the GPU).

    python benchmarks/full_size.py --arch laya-large --arch laya-multilingual --out benchmarks/results

Builds a random real-format checkpoint per architecture (`laya-opt make-checkpoint` weights: the
published sizes, random values, so fidelity is not the point here; the gates measure it on the
stand-in), applies each pass to the same FP16 runtime, and times all runtimes with the shared
harness: cold call, warmup, rotating blocks, mx.eval inside the timer, paired speed-ups with
bootstrap intervals. One JSON per architecture: environment, token-tensor hashes, raw samples.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import laya_opt as lo  # first: BLAS choice before mlx.core loads
from laya_opt.bench import BenchConfig, benchmark, prepared_digest
from laya_opt.fidelity.workloads import build_workload
from laya_opt.runtime import load_runtime
from laya_opt.synth import write_random_checkpoint

EXACT = (("compile_buckets", {"multiple": 16}), ("length_sorted_batching", {"max_questions": 64, "token_budget": 65536}),
         ("head_prune_final", {"variant": "selected_q"}), ("local_window_attention", {"block_size": 64}))
QUANT = (("q8", {"bits": 8, "group_size": 64}), ("q4", {"bits": 4, "group_size": 64}))


def apply_pass(runtime, name, settings):
    return lo.apply(runtime, name, **settings)


def candidates(base) -> dict:
    runtimes = {"eager": base}
    for name, settings in EXACT:
        runtimes[name] = apply_pass(base, name, settings)
    stacked = base
    for name, settings in EXACT[1:] + EXACT[:1]:  # compile last: it captures model and kernels
        stacked = apply_pass(stacked, name, settings)
    runtimes["stack_exact"] = stacked
    for label, settings in QUANT:
        runtimes[label] = apply_pass(base, "quantize_encoder", settings)
    return runtimes


def summary_rows(result) -> list[dict]:
    return [{"runtime": m.runtime, "workload": m.workload, "mode": m.mode, "n": m.summary.n,
             "p50_ms": m.summary.p50_ms, "p95_ms": m.summary.p95_ms, "p99_ms": m.summary.p99_ms,
             "cold_ms": m.cold_ms, "peak_memory_bytes": m.peak_memory_bytes,
             "questions_per_s": m.questions_per_s,
             "speedup": None if m.speedup is None else [m.speedup.median, m.speedup.low, m.speedup.high]}
            for m in result.measurements]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", action="append", default=None)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    workloads = [build_workload(name) for name in (args.workload or ["short-1", "short-50", "long-1"])]
    config = BenchConfig(requests=args.requests, warmup=args.warmup, blocks=args.blocks, forward_only=False)
    for arch in args.arch:
        started = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            path = write_random_checkpoint(arch, Path(tmp) / arch, seed=0, dtype="float16")
            base = load_runtime(path, dtype="float16", batch_size=args.batch_size)
            runtimes = candidates(base)
            result = benchmark("eager", runtimes, workloads, config)
        hashes = {w.name: prepared_digest([base.prepare(s, q) for s, q in w.requests]) for w in workloads}
        record = {"arch": arch, "dtype": "float16", "batch_size": args.batch_size, "config": vars(config),
                  "environment": result.environment, "token_sha256": hashes,
                  "workloads": [vars(f) for f in result.workloads], "rows": summary_rows(result),
                  "samples": result.samples(), "pass_info": {k: _plain(r.info) for k, r in runtimes.items()},
                  "wall_s": round(time.time() - started, 1)}
        target = args.out / f"full_size_{arch}.json"
        target.write_text(json.dumps(record, indent=1, default=str) + "\n")
        for row in record["rows"]:
            speed = row["speedup"]
            print(f"{arch:18s} {row['workload']:9s} {row['runtime']:24s} p50 {row['p50_ms']:8.2f} ms  "
                  f"p95 {row['p95_ms']:8.2f}  " + (f"x{speed[0]:.3f} ({speed[1]:.3f}-{speed[2]:.3f})" if speed else ""),
                  flush=True)
    return 0


def _plain(info) -> dict:
    return json.loads(json.dumps(dict(info), default=str))


if __name__ == "__main__":
    sys.exit(main())
