"""fp32 matmul and stand-in forward timings under the BLAS this process preloaded (docs/install.md's table).

One BLAS per process (it is bound when mlx.core loads), so compare by running it once per choice, e.g.:
    for blas in wheel system reference; do python benchmarks/blas_bench.py --blas $blas; done
CPU seconds are given beside wall seconds: on a shared machine they move less with the other load.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

CHOICES = ("wheel", "system", "reference", "default")


def choose(blas: str) -> None:
    """Preload the BLAS asked for (before mlx.core loads); `default` leaves laya_opt's own choice."""
    if blas == "default":
        return
    os.environ["LAYA_OPT_NO_BLAS_PRELOAD"] = "1"  # import laya_opt without its preload ...
    import laya_opt.util.blas as preload

    if blas == "reference":
        return
    del os.environ["LAYA_OPT_NO_BLAS_PRELOAD"]
    found = [c for c in preload.candidates() if c.source.startswith(blas)]
    if not found:
        sys.exit(f"error: no {blas} BLAS here")
    preload._load(found[0].path)  # ... then load the one asked for, as the preload would
    preload.PRELOAD, preload.LOADED = preload.Preload(found[0]), found[0].path


def timed(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `repeats` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return sorted(walls)[repeats // 2], sorted(cpus)[repeats // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blas", choices=CHOICES, default="default")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--forward", type=int, default=8, help="stand-in forwards of 16 questions (0: none)")
    args = parser.parse_args()
    choose(args.blas)

    import laya_opt as lo
    from laya_opt.util import blas
    import mlx.core as mx
    from laya_opt.util.system import detect_blas

    a, b = mx.random.normal((args.size, args.size)), mx.random.normal((args.size, args.size))
    mx.eval(a, b)
    for _ in range(3):
        mx.eval(a @ b)
    wall, cpu = timed(lambda: mx.eval(a @ b), args.repeats)
    info = detect_blas()
    threads = os.environ.get("MKL_NUM_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS") or "default"
    line = (f"{args.blas:9s} {info.name} ({info.source}), threads {threads}: {args.size}^3 matmul "
            f"{wall * 1e3:.1f} ms wall ({2 * args.size ** 3 / wall / 1e9:.0f} GFLOP/s), {cpu * 1e3:.1f} ms CPU")
    if args.forward:
        runtime = lo.load()
        state = "It is a minor issue. Please do not call me back. " * 8
        questions = {f"q{i}": {"type": "noul", "instructions": f"The customer wants a call back ({i})."}
                     for i in range(16)}
        runtime.predict(state, questions)  # warm-up: compile, caches
        wall, cpu = timed(lambda: runtime.predict(state, questions), args.forward)
        line += f"; forward (16 questions) {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU"
    print(line, f"[{blas.LOADED}]", flush=True)


if __name__ == "__main__":
    main()
