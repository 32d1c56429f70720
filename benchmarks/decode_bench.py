"""Batched decode (`decode_answers`) against decoding one question at a time, on the CPU.

    python benchmarks/decode_bench.py [--old-source OLD_DECODE.py] [--blocks 10] [--calls 30]

Decode is host work, so the CPU measures it. The stand-in answers the short-1, short-16 and short-50
workloads once; then the two decoders run on those outputs in alternating blocks (n = blocks x calls per
decoder), after checking that they return identical answers. `--old-source` times a decode.py of an
earlier revision (`git show REV:laya_opt/core/decode.py > old.py`; `laya_opt/decode.py` before the re-layout)
instead of `decode_answer` in a loop.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import laya_opt as lo  # first: BLAS choice before mlx.core loads
from laya_opt.timing.bench import summarize
from laya_opt.core.decode import decode_answer, decode_answers
from laya_opt.suites.workloads import build_workload


def one_at_a_time(source: str | None):
    module = sys.modules[__name__]
    if source:
        spec = importlib.util.spec_from_file_location("laya_opt.decode_old", source)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    single = module.decode_answer if source else decode_answer
    return lambda prepared, logits, action, calibration: [single(p, row_logits, a, calibration)
                                                           for p, row_logits, a in zip(prepared, logits, action)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-source")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args(argv)
    runtime = lo.load("standin", dtype="float32")
    decoders = {"one at a time": one_at_a_time(args.old_source), "batched": decode_answers}
    for name in ("short-1", "short-16", "short-50"):
        state, questions = build_workload(name).requests[0]
        execution = runtime.execute(runtime.prepare(state, questions))
        inputs = (execution.prepared, execution.logits, execution.action, runtime.calibration)
        outputs = [decoder(*inputs) for decoder in decoders.values()]
        if outputs[0] != outputs[1]:
            raise SystemExit(f"{name}: the decoders disagree")
        times = {label: [] for label in decoders}
        for _ in range(args.blocks):
            for label, decoder in decoders.items():
                for _ in range(args.calls):
                    started = time.perf_counter()
                    decoder(*inputs)
                    times[label].append(time.perf_counter() - started)
        summaries = {label: summarize([seconds * 1e3 for seconds in xs]) for label, xs in times.items()}
        print(f"{name:9s} {len(execution.prepared):3d} questions: " + "; ".join(
            f"{label} p50 {s.p50_ms:.3f} p95 {s.p95_ms:.3f} ms (n {s.n})" for label, s in summaries.items()),
            flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
