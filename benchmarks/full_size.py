"""Each pass alone, and stacked, against the eager FP16 baseline at the real sizes (run on the GPU).

    python benchmarks/full_size.py --arch laya-large --out DIR [--checkpoint DIR] [--requests 100]

Builds (or reuses, with --checkpoint) a random real-format checkpoint, applies each pass alone to the
same FP16 runtime, then the stack, and times all of them with the shared harness (cold call, warmup,
rotating blocks, mx.eval inside the timer, paired speed-ups with bootstrap intervals). With --profile,
each runtime also gets the phase split and, on CUDA with torch, the kernel timeline of one forward.
One JSON per architecture: environment, token-tensor hashes, summaries, raw samples, pass reports.
This measures speed only (random weights): fidelity is what the gates measure, on the stand-in and in
`laya-opt bench`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import laya_opt as lo  # first: BLAS choice before mlx.core loads
from laya_opt.timing.bench import BenchConfig, benchmark, prepared_digest
from laya_opt.suites.workloads import build_workload
from laya_opt.timing.profile import profile_runtimes
from laya_opt.runs.report import latency_records, plain
from laya_opt.core.synth import write_random_checkpoint

ALONE = (("prefix_cache", {}), ("masks_once", {}), ("qkv_views", {}), ("fused_encoder", {}),
         ("fused_encoder+gemm", {"gemm": True}), ("head_prune_final", {}),
         ("length_sorted_batching", {"max_questions": 64, "token_budget": 65536}),
         ("compile_buckets", {"multiple": 16}))
STACK = (("prefix_cache", {}), ("masks_once", {}), ("qkv_views", {}), ("fused_encoder", {}),
         ("head_prune_final", {}), ("compile_buckets", {"multiple": 16, "slot_buckets": [2, 4, 8, 16, 32]}))


def pass_name(label: str) -> str:
    return label.split("+")[0]


def candidates(base) -> dict:
    runtimes = {"eager": base}
    for label, settings in ALONE:
        runtimes[label] = lo.apply(base, pass_name(label), **settings)
    for label, gemm in (("stack", False), ("stack+gemm", True)):
        stacked = base
        for name, settings in STACK:
            stacked = lo.apply(stacked, name, **({**settings, "gemm": gemm} if name == "fused_encoder" else settings))
        runtimes[label] = stacked
    return runtimes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, help="reuse this checkpoint (else a random one, seed 0)")
    parser.add_argument("--workload", action="append", default=None)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--budget-s", type=float, help="timing cells not started by 75%% of this many seconds are "
                        "skipped, profile entries not started by its end too (a lent machine's call limit)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    workloads = [build_workload(name) for name in (args.workload or ["short-1", "short-50", "long-1"])]
    config = BenchConfig(requests=args.requests, warmup=args.warmup, blocks=args.blocks, forward_only=True)
    started = time.time()
    deadlines = [None, None] if args.budget_s is None else \
        [time.monotonic() + share * args.budget_s for share in (0.75, 1.0)]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or write_random_checkpoint(args.arch, Path(tmp) / args.arch, seed=0, dtype="float16")
        base = lo.load(path, dtype="float16", batch_size=args.batch_size)
        runtimes = candidates(base)
        result = benchmark("eager", runtimes, workloads, config, deadline=deadlines[0])
        profiles = profile_runtimes(runtimes, workloads, requests=30, deadline=deadlines[1]) if args.profile else None
    record = {"arch": args.arch, "dtype": "float16", "batch_size": args.batch_size, "config": plain(config),
              "environment": result.environment,
              "token_sha256": {w.name: prepared_digest([base.prepare(s, q) for s, q in w.requests]) for w in workloads},
              "workloads": [vars(f) for f in result.workloads], "summary": latency_records(result),
              "samples": result.samples(), "reports": {label: plain(dict(r.info)) for label, r in runtimes.items()},
              "skipped_for_time": list(result.skipped), "profile": profiles, "wall_s": round(time.time() - started, 1)}
    target = args.out / f"passes_alone_{args.arch}.json"
    target.write_text(json.dumps(plain(record), indent=1) + "\n")
    for row in record["summary"]:
        speed = row["speedup"]
        print(f"{args.arch:18s} {row['workload']:9s} {row['mode']:10s} {row['runtime']:20s} p50 {row['p50_ms']:8.2f} ms"
              + (f"  x{speed['median']:.3f} ({speed['low']:.3f}-{speed['high']:.3f})" if speed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
