"""Where the evaluation of a suite spends its time on this machine.

The GPU study (issue 24) cuts its first trial in every device call: on one H100 a stage's evaluation of `gate`
(961 requests, 1,120 questions) took 79-163 s in float16 against 22 s for the float32 reference, with the kernel
cache warm. The checker evaluates one request (one record) per `execute`, so a suite is about a thousand small
forwards. This script times that path phase by phase (prepare, then `Runtime.execute`'s own clock: plan and
collate, graph build, dispatch, forward, host copy), per dtype, cold (the first pass over new shapes) and warm,
and the same questions in one cross-request `execute` (the runtime planner's batches), whose outputs it compares
with the per-request ones. `--profile` adds cProfile's top functions of a warm per-request pass; `--pass NAME`
(repeatable) times a stack of passes instead of the plain runtime.

It also estimates, on any machine, what cuDNN would see: on CUDA, MLX 0.32 runs float16 and bfloat16 attention
on cuDNN, which builds an execution graph for each new key (the shapes and strides of q, k, v and the mask),
keeps the last `MLX_CUDA_SDPA_CACHE_SIZE` (default 256) and raises "Cache thrashing" once it has missed more
than twice that in one process; float32 attention never uses cuDNN (`MLX_CUDA_USE_CUDNN_SDPA=0` turns it off
for every dtype). The keys are counted from attention's input shapes and mask layouts, the builds by replaying
them through a cache of that size, twice (the cold and the warm pass). A dtype whose run raises is recorded
with its error and the exit status is 1. The `MLX_*` variables of the run are recorded too.

    python benchmarks/eval_profile.py --suite gate --dtype float32 --dtype float16 [--requests N] [--profile]

Prints a table and writes it, with the versions and the device, to --out (JSON) when given.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time
from collections import OrderedDict, defaultdict

import laya_opt  # first: it loads the fast BLAS before MLX, on a CPU
import mlx.core as mx
import numpy as np

from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import requests_from_suite
from laya_opt.passes.registry import build_registry
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.errors import LayaError
from laya_opt.util.resources import checkpoint_path, suite_path
from laya_opt.util.system import environment_switches

DEFAULT_SDPA_CACHE = 256   # MLX 0.32's MLX_CUDA_SDPA_CACHE_SIZE when unset (its CUDA attention source)


def per_request_pass(runtime, requests) -> tuple[dict, list]:
    """Seconds per phase over the requests, evaluated one request per execute as the checker does."""
    phases: dict[str, float] = defaultdict(float)
    logits = []
    last = [0.0]

    def tick(phase: str) -> None:
        now = time.perf_counter()
        phases[phase] += now - last[0]
        last[0] = now

    start = time.perf_counter()
    for request in requests:
        last[0] = time.perf_counter()
        prepared = runtime.prepare(request.state, request.questions)
        tick("prepare")
        logits.extend(runtime.execute(prepared, trace=True, clock=tick).logits)
    phases["total"] = time.perf_counter() - start
    return dict(phases), logits


def attention_keys(runtime, requests) -> list[tuple]:
    """Each per-request batch's attention calls as cuDNN's graph cache tells them apart, estimated from shapes:
    MLX turns a boolean mask into a contiguous additive one of the full [B, H, Lq, Lk] shape, while an additive
    mask keeps its own broadcast layout (so [B, 1, 1, L] and [B, 1, L, L] masks are two keys). The forwards are
    built lazily and never evaluated."""
    calls, forwards = [], []
    real = mx.fast.scaled_dot_product_attention

    def spy(q, k, v, *, scale, mask=None, **options):
        layout = None if mask is None else ("boolean" if mask.dtype == mx.bool_ else tuple(mask.shape))
        calls.append((tuple(q.shape), tuple(k.shape), tuple(v.shape), layout))
        return real(q, k, v, scale=scale, mask=mask, **options)

    mx.fast.scaled_dot_product_attention = spy
    try:
        for request in requests:
            prepared = runtime.prepare(request.state, request.questions)
            for group in runtime.plan(prepared):
                runtime.forward(runtime.model, runtime.kernels, runtime.collate([prepared[i] for i in group]))
                forwards.append(tuple(dict.fromkeys(calls)))
                calls.clear()
    finally:
        mx.fast.scaled_dot_product_attention = real
    return forwards


def lru_misses(keys: list, capacity: int) -> list[int]:
    """Misses of a least-recently-used cache of `capacity` (as MLX's) over two passes of `keys`: [cold, warm]."""
    cache: OrderedDict = OrderedDict()
    misses = [0, 0]
    for index, key in enumerate(keys + keys):
        if key in cache:
            cache.move_to_end(key)
            continue
        misses[index >= len(keys)] += 1
        cache[key] = None
        if len(cache) > capacity:
            cache.popitem(last=False)
    return misses


def estimate_from(forwards: list[tuple]) -> dict:
    """The attention keys of `attention_keys`'s forwards and the cuDNN graph builds they imply at this run's cache
    size; MLX raises "Cache thrashing" once a cache has missed more than twice its size in a process."""
    keys = [key for forward in forwards for key in forward]
    capacity = int(os.environ.get("MLX_CUDA_SDPA_CACHE_SIZE", DEFAULT_SDPA_CACHE))
    cold, warm = lru_misses(keys, capacity)
    return {"forwards": len(forwards), "keys_per_forward": sorted({len(forward) for forward in forwards}),
            "distinct_keys": len(set(keys)), "cache_size": capacity, "builds_cold": cold, "builds_warm": warm,
            "thrashing_limit": 2 * capacity}


def key_estimate(runtime, requests) -> dict:
    return estimate_from(attention_keys(runtime, requests))


def batched_pass(runtime, requests) -> tuple[dict, list]:
    """The same questions prepared per request, then run in one execute (the planner's batches)."""
    start = time.perf_counter()
    prepared = [item for request in requests for item in runtime.prepare(request.state, request.questions)]
    prepare = time.perf_counter() - start
    execution = runtime.execute(prepared, trace=True)
    return {"prepare": prepare, "total": time.perf_counter() - start,
            "batches": len(runtime.plan(prepared))}, list(execution.logits)


def max_difference(single: list, batched: list) -> float:
    """Over each question's options: a batch pads its rows' logits to its widest question."""
    return max((float(np.max(np.abs(x.astype(np.float64) - y[:len(x)].astype(np.float64))))
                for x, y in zip(single, batched)), default=0.0)


def profile_top(runtime, requests, rows: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    per_request_pass(runtime, requests)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(rows)
    return text.getvalue()


def time_dtype(runtime, dtype: str, requests, profile: bool, runs: list) -> np.ndarray:
    """Per request cold and warm, batched cold and warm, and cProfile when asked: rows appended to `runs`; returns
    the per-request logits, flattened in suite order."""
    for label in ("cold", "warm"):
        phases, single = per_request_pass(runtime, requests)
        runs.append({"dtype": dtype, "path": "per request", "pass": label, **phases})
        print(f"{dtype} per request, {label}: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    for label in ("cold", "warm"):
        phases, batched = batched_pass(runtime, requests)
        difference = max_difference(single, batched)
        runs.append({"dtype": dtype, "path": "batched", "pass": label, **phases,
                     "max_logit_difference_to_per_request": difference})
        print(f"{dtype} batched, {label}: prepare {phases['prepare']:.2f} s, total {phases['total']:.2f} s in "
              f"{phases['batches']} batches; max |logit difference| to per request {difference:.3g}")
    if profile:
        top = profile_top(runtime, requests)
        runs.append({"dtype": dtype, "path": "per request", "pass": "profiled", "top": top})
        print(top)
    return np.concatenate([row.astype(np.float32).ravel() for row in single])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="standin")
    parser.add_argument("--suite", default="gate")
    parser.add_argument("--dtype", action="append", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--requests", type=int, default=0, help="the first N requests (default: all)")
    parser.add_argument("--batch-size", type=int, default=64, help="as the experiments' batch_size")
    parser.add_argument("--profile", action="store_true", help="cProfile a warm per-request pass")
    parser.add_argument("--pass", dest="passes", action="append", default=[], metavar="NAME",
                        help="apply this pass, with its default settings, to each dtype's runtime (repeat, in order)")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--save-logits", help="write each dtype's per-request logits (flattened, suite order) to "
                                              "this .npz, to compare two runs' outputs")
    args = parser.parse_args(argv)
    if args.requests < 0 or args.batch_size < 1:
        parser.error("--requests must be 0 (all) or more and --batch-size positive")
    registry = build_registry()
    for name in args.passes:   # before minutes of loading and evaluating
        try:
            registry.get(name)
        except LayaError as exc:
            parser.error(f"--pass: {exc}")
    requests = requests_from_suite(load_suite(suite_path(args.suite, "--suite")))
    if args.requests:
        requests = requests[:args.requests]
    questions = sum(len(request.questions) for request in requests)
    result = {"device": str(mx.default_device()), "mlx": mx.__version__, "suite": args.suite,
              "requests": len(requests), "questions": questions, "batch_size": args.batch_size,
              "passes": args.passes,
              "mlx_env": environment_switches(("MLX_",)),
              "runs": []}
    print(f"{result['device']}, mlx {result['mlx']}: {args.suite}, {len(requests)} requests, {questions} questions"
          + (f", passes {', '.join(args.passes)}" if args.passes else ""))
    saved, failed = {}, False
    for dtype in args.dtype or ["float32", "float16"]:
        runtime = load_runtime(checkpoint_path(args.checkpoint), dtype, batch_size=args.batch_size)
        for name in args.passes:
            runtime = laya_opt.apply(runtime, name)
        if "shapes" not in result:
            forwards = attention_keys(runtime, requests)
            # (rows, length) of each batch: the encoder's first attention call's q is [B, H, L, D]
            shapes = [(forward[0][0][0], forward[0][0][2]) for forward in forwards]
            result["shapes"] = {"batches": len(shapes), "distinct": len(set(shapes))}
            result["attention_keys"] = estimate = estimate_from(forwards)
            print(f"per request: {len(shapes)} batches of {len(set(shapes))} distinct shapes (rows, length); "
                  f"attention keys (estimated): {estimate['keys_per_forward']} per forward, "
                  f"{estimate['distinct_keys']} distinct, cuDNN graph builds with a cache of {estimate['cache_size']}: "
                  f"{estimate['builds_cold']} cold, {estimate['builds_warm']} warm "
                  f"(MLX stops past {estimate['thrashing_limit']})")
        try:
            saved[dtype] = time_dtype(runtime, dtype, requests, args.profile, result["runs"])
        except RuntimeError as exc:   # e.g. MLX's "Cache thrashing is happening": recorded, the next dtype runs
            failed = True
            result["runs"].append({"dtype": dtype, "error": str(exc)})
            print(f"{dtype}: raised RuntimeError: {exc}")
    if args.save_logits:
        np.savez(args.save_logits, **saved)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
