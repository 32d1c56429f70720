"""MLX's CUDA graph settings against the host-bound short-1 forward (run on the GPU).

    python benchmarks/gpu_env_sweep.py --checkpoint DIR --out FILE [--setting OPS:CACHE|off ...] [--rounds 2]

MLX's CUDA backend records kernels into CUDA graphs of at most `MLX_MAX_OPS_PER_BUFFER` nodes (20 by
default) and keeps `MLX_CUDA_GRAPH_CACHE_SIZE` instantiated graphs (100), clearing them all when that
is exceeded. A 28-layer forward is ~400 kernels, so ~20 graph updates and launches per call; several
runtimes and shapes in one process can overflow the cache. `off` launches every kernel directly
(`MLX_USE_CUDA_GRAPHS=0`: the setting that avoids the graph fault of benchmarks/results/
2026-12-06-h100-gpu-stack-fault, whose cost at short-1 is what this measures). All are read once per
process, so each setting runs in its own child process; settings rotate round by round (the host's speed
regime drifts within seconds), and the summary gives each setting's median over rounds of its p50s. Each
child times the FP16 eager runtime and the stack of `full_size.STACK` with the shared harness.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_SETTINGS = ("20:100", "60:100", "120:400", "off")
GRAPHS_OFF = "off"
SET_HERE = ("MLX_USE_CUDA_GRAPHS", "MLX_MAX_OPS_PER_BUFFER", "MLX_CUDA_GRAPH_CACHE_SIZE")  # never inherited


def setting_env(setting: str) -> dict[str, str]:
    """The environment variables of one setting: `off`, or OPS:CACHE (graph size, graph cache entries)."""
    if setting == GRAPHS_OFF:
        return {"MLX_USE_CUDA_GRAPHS": "0"}
    ops, sep, cache = setting.partition(":")
    if not (sep and ops.isdigit() and cache.isdigit() and int(ops) > 0 and int(cache) > 0):
        raise ValueError(f"setting {setting!r} is not OPS:CACHE (two positive integers) or {GRAPHS_OFF!r}")
    return {"MLX_MAX_OPS_PER_BUFFER": ops, "MLX_CUDA_GRAPH_CACHE_SIZE": cache}


def checked_setting(setting: str) -> str:
    """--setting's type: refused by argparse (exit 2, before any child runs) unless `setting_env` takes it."""
    try:
        setting_env(setting)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return setting


def child(args) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import laya_opt as lo  # first: BLAS choice before mlx.core loads
    from full_size import STACK
    from laya_opt.timing.bench import BenchConfig, benchmark
    from laya_opt.suites.workloads import build_workload
    from laya_opt.runs.report import latency_records

    base = lo.load(args.checkpoint, dtype="float16", batch_size=64)
    stack = base
    for name, settings in STACK:
        stack = lo.apply(stack, name, **settings)
    workloads = [build_workload(name) for name in args.workload]
    config = BenchConfig(requests=args.requests, warmup=args.warmup, blocks=args.blocks, forward_only=True)
    result = benchmark("eager", {"eager": base, "stack": stack}, workloads, config)
    print(json.dumps({"rows": [{key: row[key] for key in ("workload", "mode", "runtime", "p50_ms", "p95_ms", "n")}
                               for row in latency_records(result)],
                      "environment": result.environment}))
    return 0


def parent(args) -> int:
    settings = args.setting or list(DEFAULT_SETTINGS)
    deadline = time.monotonic() + args.budget_s
    runs = []
    for round_index in range(args.rounds):
        for setting in settings:
            if time.monotonic() > deadline:
                print(f"budget spent: round {round_index} {setting} not run", flush=True)
                continue
            env = {**{k: v for k, v in os.environ.items() if k not in SET_HERE}, **setting_env(setting)}
            started = time.monotonic()
            command = [sys.executable, __file__, "--child", "--checkpoint", str(args.checkpoint),
                       "--requests", str(args.requests), "--warmup", str(args.warmup), "--blocks", str(args.blocks)]
            command += [part for name in args.workload for part in ("--workload", name)]
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=max(10.0, deadline + 60 - time.monotonic()))
            if done.returncode != 0:
                print(f"{setting} round {round_index} failed:\n{done.stderr[-2000:]}", flush=True)
                continue
            record = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append({"setting": setting, "round": round_index, "wall_s": round(time.monotonic() - started, 1),
                         **record})
            for row in record["rows"]:
                print(f"{setting:8s} r{round_index} {row['workload']:9s} {row['mode']:12s} {row['runtime']:6s} "
                      f"p50 {row['p50_ms']:7.2f} ms", flush=True)
    summary = {}
    for run in runs:
        for row in run["rows"]:
            summary.setdefault(f"{run['setting']} {row['workload']} {row['mode']} {row['runtime']}", []).append(
                row["p50_ms"])
    medians = {key: round(statistics.median(values), 3) for key, values in summary.items()}
    args.out.write_text(json.dumps({"settings": settings, "runs": runs, "median_p50_ms": medians}, indent=1) + "\n")
    for key, value in sorted(medians.items()):
        print(f"{key:48s} median p50 {value:7.2f} ms over {len(summary[key])} rounds")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--setting", action="append", type=checked_setting,
                        help="OPS:CACHE, or off for no CUDA graphs (repeatable)")
    parser.add_argument("--workload", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--budget-s", type=float, default=400)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.workload = args.workload or ["short-1", "long-1", "short-50"]
    if args.child:
        return child(args)
    if args.out is None:
        parser.error("--out is required")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
