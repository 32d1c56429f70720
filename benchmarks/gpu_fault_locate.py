"""Find the first request whose forward faults on the GPU, stage by stage of a pass stack.

    python benchmarks/gpu_fault_locate.py --stages 3 [--suite gate] [--passes a,b,c] [--only INDEX | --first N]
                                          [--out F]

A CUDA fault (e.g. "misaligned address") is sticky: it is reported by whatever CUDA call comes next, often
far from the kernel that made it, and it poisons the process. So this evaluates the suite one request at a
time with the first --stages passes of --passes applied, synchronises after each request, and stops at the
first error, printing (and writing to --out as JSON) the stage count, the request's index, record id and
question lengths. Run it once per stage count in fresh processes (benchmarks/gpu_session.sh `locate`);
`--only INDEX` evaluates that request alone, `--first N` the first N (for compute-sanitizer, which names the
faulting kernel: a fault that needs the requests before it shows only with them).
On a CPU it runs too (nothing faults there): the plumbing's check.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

try:
    import laya_opt as lo  # first: the BLAS choice before mlx.core loads
except ImportError:  # not installed: the checkout (which then needs an editable install for laya_opt.fidelity)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import laya_opt as lo
import mlx.core as mx  # noqa: E402

from laya_opt.fidelity.checker import evaluate_request  # noqa: E402
from laya_opt.runs.pipeline import suite_requests  # noqa: E402
from laya_opt.suites.suite_file import load_suite  # noqa: E402
from laya_opt.util.resources import suite_path  # noqa: E402

# experiments/stack_gpu.yaml's exact passes before compile_buckets, prefix cache left out (the sweep's trial 0)
DEFAULT_PASSES = "masks_once,qkv_views,fused_encoder,head_prune_final"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", type=int, required=True, help="how many of --passes to apply (0: none)")
    parser.add_argument("--passes", default=DEFAULT_PASSES, help="comma-separated pass names, in order")
    parser.add_argument("--suite", default="gate")
    parser.add_argument("--dtype", default="float16")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--only", type=int, default=None, help="evaluate this request index alone")
    chosen.add_argument("--first", type=int, default=None, help="evaluate the first N requests")
    parser.add_argument("--out", type=Path, default=None, help="write the outcome as JSON here")
    args = parser.parse_args(argv)
    names = [name for name in args.passes.split(",") if name][: args.stages]
    runtime = lo.load(dtype=args.dtype)
    for name in names:
        runtime = lo.apply(runtime, name)
    requests = suite_requests([load_suite(suite_path(args.suite, "--suite"))])
    indices = [args.only] if args.only is not None else list(range(len(requests)))[: args.first]
    outcome = {"passes": names, "suite": args.suite, "dtype": args.dtype, "device": str(mx.default_device()),
               "requests": len(indices), "fault": None}
    start = time.perf_counter()
    for index in indices:
        request = requests[index]
        lengths = [item.length for item in runtime.prepare(request.state, request.questions)]
        try:
            evaluate_request(runtime, request)
            mx.synchronize()
        except Exception as exc:  # a device fault surfaces as RuntimeError; anything else is reported alike
            outcome["fault"] = {"index": index, "record_id": request.record_id, "questions": len(request.questions),
                                "state_chars": len(request.state), "lengths": lengths, "error": str(exc),
                                "traceback": traceback.format_exc(limit=12)}
            break
    outcome["seconds"] = round(time.perf_counter() - start, 2)
    text = json.dumps(outcome, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 3 if outcome["fault"] else 0


if __name__ == "__main__":
    sys.exit(main())
