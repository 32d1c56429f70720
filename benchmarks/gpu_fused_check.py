"""GPU check of laya_opt.core.fused: each CUDA kernel against its MLX fallback, for accuracy and for speed.

    PYTHONPATH=. python benchmarks/gpu_fused_check.py --out fused_check.json      # on the H200
    python benchmarks/gpu_fused_check.py --cpu-smoke --out /tmp/fused_smoke.json  # plumbing, anywhere

For every op, dtype (float16, bfloat16, float32) and real-model shape it
(a) runs the kernel and the fallback on fresh random-normal inputs and reports max abs error, max relative
    error (|d| / max(|ref|, 1e-3)) and the count of differing elements, plus both paths' max abs error
    against the fallback evaluated in float32 ("truth"); a second kernel run with NaN-filled outputs
    (`init_value`) must match the first, which proves that every output element is written;
(b) times N calls of the kernel and of the fallback, eagerly and inside one `mx.compile`d function, with
    distinct inputs per call (no common-subexpression folding), warmup, and `mx.eval` inside the timer;
(c) writes everything as JSON to --out and prints a compact table.
A failing case is recorded with its error and the run goes on. A time budget (--budget, seconds) stops
new cases once spent (the first call of each kernel pays NVRTC's compile, about a second or more).
--cpu-smoke: tiny shapes on the CPU, the fallback standing in for the kernel, to check the script itself
on a machine without CUDA (its "kernel" numbers are the fallback's).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The float32 "truth" must be float32: MLX's CUDA matmul uses TF32 for float32 unless told otherwise.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

try:
    import laya_opt  # noqa: F401  (first: BLAS choice before mlx.core loads)
    from laya_opt.core import fused
except Exception:  # the package is being refactored: load the module file on its own (mlx only)
    _spec = importlib.util.spec_from_file_location("laya_fused", ROOT / "laya_opt" / "fused.py")
    fused = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fused)

import mlx.core as mx  # noqa: E402

EPS = 1e-5
BASES = (160000.0, 10000.0)  # ModernBERT's global and local RoPE bases
INNER = {1024: 2624, 768: 1152}  # intermediate size by hidden size (English, multilingual)
GPU_SHAPES = ((1, 96, 1024), (50, 112, 1024), (1, 512, 1024), (1, 96, 768), (50, 112, 768), (1, 1024, 768))
SMOKE_SHAPES = ((1, 7, 64), (2, 13, 256))
DTYPES = (mx.float16, mx.bfloat16, mx.float32)
_SEED = [0]


def normal(shape, dtype, scale=1.0, shift=0.0):
    """A fresh draw each call (its own key), never zeros."""
    _SEED[0] += 1
    return (mx.random.normal(shape, key=mx.random.key(_SEED[0])) * scale + shift).astype(dtype)


# ----------------------------------------------------------------------------- cases
# A case: make() -> dict of inputs; kernel(inputs, init) and fallback(inputs) -> tuple of outputs.


def cases(shape, dtype):
    batch, length, dim = shape
    heads, inner = dim // 64, INNER.get(dim, 3 * dim // 2)

    def norm_inputs(add, weight=True, bias=False):
        def make():
            out = {"x": normal(shape, dtype)}
            if add:
                out["residual"] = normal(shape, dtype)
            out["weight"] = normal((dim,), dtype, 0.1, 1.0) if weight else None
            out["bias"] = normal((dim,), dtype, 0.1) if bias else None
            return out
        return make

    first = shape in (GPU_SHAPES[0], SMOKE_SHAPES[0])
    out = []
    for weight, bias, variant in ((True, False, "w"), (True, True, "w+b"), (False, False, "plain")):
        if variant != "w" and not (first and dtype == mx.float16):
            continue  # the model's LayerNorms have a weight and no bias; the other variants once
        out.append(("add_layer_norm", variant, norm_inputs(True, weight, bias),
                    lambda a, init=None: fused.add_layer_norm_cuda(a["x"], a["residual"], a["weight"], a["bias"],
                                                                   EPS, init_value=init),
                    lambda a: fused.add_layer_norm_reference(a["x"], a["residual"], a["weight"], a["bias"], EPS)))
        out.append(("layer_norm", variant, norm_inputs(False, weight, bias),
                    lambda a, init=None: (fused.layer_norm_cuda(a["x"], a["weight"], a["bias"], EPS, init_value=init),),
                    lambda a: (fused.layer_norm_reference(a["x"], a["weight"], a["bias"], EPS),)))
    for base in BASES:  # the base is a runtime input: the second one is checked, not timed again
        out.append(("qkv_rope", f"H={heads} base={base:g}", lambda: {"qkv": normal((batch, length, 3 * dim), dtype)},
                    lambda a, init=None, base=base: fused.qkv_rope_cuda(a["qkv"], heads, 64, base, init_value=init),
                    lambda a, base=base: fused.qkv_rope_reference(a["qkv"], heads, 64, base)))
    out.append(("geglu", f"I={inner}", lambda: {"y": normal((batch, length, 2 * inner), dtype)},
                lambda a, init=None: (fused.geglu_cuda(a["y"], init_value=init),),
                lambda a: (fused.geglu_reference(a["y"]),)))
    if dtype == mx.float32 or batch * length > fused.LINEAR_MAX_ROWS:
        return out  # linear's kernel takes float16/bfloat16 and up to LINEAR_MAX_ROWS rows
    gemms = [("Wqkv", 3 * dim, dim, False, False), ("attn.Wo+res", dim, dim, False, True),
             ("Wi", 2 * inner, dim, False, False), ("mlp.Wo+res", dim, inner, False, True)]
    if first and dtype == mx.float16:
        gemms.append(("Wqkv+bias", 3 * dim, dim, True, False))
    for name, n, k, bias, res in gemms:
        def make(n=n, k=k, bias=bias, res=res):
            return {"x": normal((batch, length, k), dtype), "weight": normal((n, k), dtype, k ** -0.5),
                    "bias": normal((n,), dtype) if bias else None,
                    "residual": normal((batch, length, n), dtype) if res else None}
        out.append(("linear", f"{name} {n}x{k}", make,
                    lambda a, init=None: (fused.linear_cuda(a["x"], a["weight"], a["bias"], a["residual"],
                                                            init_value=init),),
                    lambda a: (fused.linear_reference(a["x"], a["weight"], a["bias"], a["residual"]),)))
    return out


# ----------------------------------------------------------------------------- measurement


def to_f32(outputs):
    """All outputs as one flat float32 vector (float16 and bfloat16 convert exactly)."""
    return mx.concatenate([o.astype(mx.float32).reshape(-1) for o in outputs])


def compare(g, r) -> dict:
    """Statistics computed where the arrays live (on the GPU), only scalars come back."""
    diff = mx.abs(g - r)
    stats = {"max_abs": diff.max(), "max_rel": (diff / mx.maximum(mx.abs(r), 1e-3)).max(),
             "n_diff": (g != r).sum(), "n_nan": mx.isnan(g).sum()}  # NaN != NaN counts as a difference
    mx.eval(stats)
    out = {k: (float(v.item()) if k.startswith("max") else int(v.item())) for k, v in stats.items()}
    out["n_total"] = int(g.size)
    return out


def as_f32(inputs):
    return {k: (v.astype(mx.float32) if v is not None else None) for k, v in inputs.items()}


def accuracy(kernel, fallback, make) -> dict:
    inputs = make()
    mx.eval([v for v in inputs.values() if v is not None])
    ref = to_f32(fallback(inputs))
    truth = to_f32(fallback(as_f32(inputs)))
    result = {"fallback_vs_truth": compare(ref, truth)["max_abs"]}
    start = time.perf_counter()
    outs = kernel(inputs)
    mx.eval(outs)
    result["first_call_s"] = time.perf_counter() - start  # includes NVRTC on a kernel's first use
    got = to_f32(outs)
    result.update(compare(got, ref))
    result["kernel_vs_truth"] = compare(got, truth)["max_abs"]
    poisoned = to_f32(kernel(inputs, float("nan")))
    written = compare(poisoned, got)
    result["unwritten"] = written["n_nan"] - result["n_nan"]  # NaN only where the first run had none
    result["poison_mismatch"] = written["n_diff"]
    return result


def stand_in(fallback):
    """--cpu-smoke's "kernel": the fallback itself (init_value ignored), to run every step of the check."""
    return lambda a, init=None: fallback(a)


def timing(fn, make, calls: int, reps: int) -> dict:
    """Microseconds per call, eager and compiled; each eval covers `calls` calls on distinct inputs."""
    sets = [make() for _ in range(calls)]
    keys = [k for k, v in sets[0].items() if v is not None]
    flat = [s[k] for s in sets for k in keys]
    mx.eval(flat)

    def many(*arrays):
        outs = []
        for i in range(calls):
            inputs = {k: None for k in sets[0]}
            inputs.update(zip(keys, arrays[i * len(keys):(i + 1) * len(keys)]))
            outs.extend(fn(inputs))
        return outs

    compiled = mx.compile(many)
    result = {}
    for label, f in (("eager_us", many), ("compiled_us", compiled)):
        for _ in range(2):
            mx.eval(f(*flat))
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            mx.eval(f(*flat))
            samples.append(time.perf_counter() - start)
        result[label] = statistics.median(samples) / calls * 1e6
    return result


def run(args) -> dict:
    smoke = args.cpu_smoke
    if smoke:
        mx.set_default_device(mx.cpu)
    shapes = SMOKE_SHAPES if smoke else GPU_SHAPES
    calls = args.calls or (4 if smoke else 16)
    reps = args.reps or (3 if smoke else 5)
    start = time.perf_counter()
    report = {"mode": "cpu-smoke" if smoke else "gpu", "mlx": mx.__version__, "python": platform.python_version(),
              "device": str(mx.default_device()), "calls_per_eval": calls, "reps": reps,
              "MLX_ENABLE_TF32": os.environ.get("MLX_ENABLE_TF32"),
              "implementation": {op: [fused.implementation(op), fused.fallback_reason(op)] for op in fused.OPS},
              "results": []}
    try:
        report["device_info"] = {k: str(v) for k, v in mx.device_info().items()}
    except Exception:
        pass
    for dtype in DTYPES:
        for shape in shapes:
            for op, variant, make, kernel, fallback in cases(shape, dtype):
                row = {"op": op, "dtype": str(dtype).split(".")[-1], "shape": list(shape), "variant": variant}
                if args.op and op not in args.op:
                    continue
                report["results"].append(row)
                if time.perf_counter() - start > args.budget:
                    row["error"] = "skipped: time budget spent"
                    continue
                if args.verbose:
                    print(f"{time.perf_counter() - start:6.1f}s {row}", file=sys.stderr, flush=True)
                try:
                    if smoke:
                        kernel = stand_in(fallback)
                    row.update(accuracy(kernel, fallback, make))
                    if not variant.endswith(f"base={BASES[1]:g}"):  # a runtime input: same kernel, same speed
                        row.update({f"kernel_{k}": v for k, v in timing(kernel, make, calls, reps).items()})
                        row.update({f"fallback_{k}": v for k, v in timing(fallback, make, calls, reps).items()})
                except Exception as exc:  # one failing op must not stop the run
                    row["error"] = f"{type(exc).__name__}: {exc}".strip()[:500]
                    row["traceback"] = traceback.format_exc()[-2000:]
                mx.clear_cache()
    report["elapsed_s"] = time.perf_counter() - start
    return report


def fmt(value, spec):
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def table(report) -> str:
    head = (f"{'op':15s} {'dtype':8s} {'shape':12s} {'variant':19s} {'max_abs':>8s} {'max_rel':>8s} "
            f"{'n_diff':>15s} {'unwr':>4s} {'k_truth':>8s} {'f_truth':>8s} "
            f"{'k_cmp':>6s} {'f_cmp':>6s} {'k_eag':>6s} {'f_eag':>6s}")
    lines = [head, "-" * len(head)]
    for r in report["results"]:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            lines.append(f"{r['op']:15s} {r['dtype']:8s} {shape:12s} {r['variant']:19s} ERROR {r['error'][:70]}")
            continue
        ndiff = f"{r['n_diff']}/{r['n_total']}" if "n_diff" in r else "-"
        lines.append(f"{r['op']:15s} {r['dtype']:8s} {shape:12s} {r['variant']:19s} "
                     f"{fmt(r.get('max_abs'), '8.2e')} {fmt(r.get('max_rel'), '8.2e')} {ndiff:>15s} "
                     f"{fmt(r.get('unwritten'), '4d')} {fmt(r.get('kernel_vs_truth'), '8.2e')} "
                     f"{fmt(r.get('fallback_vs_truth'), '8.2e')} {fmt(r.get('kernel_compiled_us'), '6.1f')} "
                     f"{fmt(r.get('fallback_compiled_us'), '6.1f')} {fmt(r.get('kernel_eager_us'), '6.1f')} "
                     f"{fmt(r.get('fallback_eager_us'), '6.1f')}")
    lines.append("max_abs/max_rel/n_diff: kernel vs fallback; *_truth: max abs error vs the fallback in float32; "
                 "unwr: outputs left unwritten;\nus per call: k/f = kernel/fallback, cmp = inside mx.compile, "
                 f"eag = eager; elapsed {report['elapsed_s']:.1f} s")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON report path")
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny shapes, fallback as kernel (no GPU needed)")
    parser.add_argument("--calls", type=int, help="op calls per timed eval (default 16, smoke 4)")
    parser.add_argument("--reps", type=int, help="timed evals per measurement, median taken (default 5, smoke 3)")
    parser.add_argument("--verbose", action="store_true", help="one progress line per case on stderr")
    parser.add_argument("--op", action="append", choices=list(fused.OPS), help="only these ops (repeatable)")
    parser.add_argument("--budget", type=float, default=80.0, help="seconds after which new cases are skipped")
    args = parser.parse_args(argv)
    if not args.cpu_smoke and fused.implementation("layer_norm") != "cuda_kernel":
        print(f"no CUDA kernels here ({fused.fallback_reason('layer_norm')}); use --cpu-smoke")
        return 2
    report = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(table(report))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
