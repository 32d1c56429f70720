"""Where a request's time goes: the end-to-end split by phase, and on CUDA the kernel timeline.

Phases of one `predict` (from `Runtime.execute`'s clock): prepare (validation, rendering,
tokenization), plan_collate (batch planning and host->array collation), graph_build (building the
lazy MLX graph, or dispatching a compiled one), dispatch (`mx.async_eval`), forward (waiting for the
device: the synced forward), host_copy (outputs to numpy, scatter to the caller's order), decode
(answers). Medians over timed requests after warmup; phases of one request sum to its wall time.
The host share of a request is prepare + plan_collate + host_copy + decode: what issue 23 bounds at
0.5 ms at short-1 (the device work is graph_build, dispatch and forward).

`host_stages` times those host stages of one request alone, many times each, without running the
forward in the loop (its outputs are computed once): cheap enough for a real-size model on a CPU, and
the numbers do not depend on the weights.

The graph size is the number of MLX primitives one forward hands to `mx.eval` (`graph_nodes`): on CUDA,
MLX's host cost per eval grows with it (it records every node into CUDA graphs on every call). It is
counted from MLX's own graph export, per device: off the GPU, some `mx.fast` ops expand into their
fallback ops, so a CPU count is larger than the same forward's count on CUDA.

The kernel timeline uses CUPTI through `torch.profiler`, which records every CUDA kernel in the
process, MLX's included: kernels per forward, the kernel-time sum against the wall time per forward
(the idle share is what the host costs), and the top kernels by time. It needs torch with CUDA on a
CUDA build of MLX; elsewhere it returns why it was skipped.
"""
from __future__ import annotations

import gc
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.runtime import to_host
from laya_opt.timing.bench import Summary, bench_call, collated_batches, summarize

PHASES = ("prepare", "plan_collate", "graph_build", "dispatch", "forward", "host_copy", "decode")
HOST_PHASES = ("prepare", "plan_collate", "host_copy", "decode")   # a request's host work, the forward left out
HOST_STAGES = ("prepare", "collate", "transfer", "decode")         # the same work as host_stages names it
TOP_KERNELS = 15
GC_EVERY = 100   # host_stages collects garbage between blocks of this many repetitions, never inside one


class PhaseClock:
    """Accumulates the time since the previous tick under the phase named at each tick."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self.last = time.perf_counter()

    def __call__(self, phase: str) -> None:
        now = time.perf_counter()
        self.totals[phase] += now - self.last
        self.last = now


def profile_request(runtime, state: Any, questions: dict) -> dict[str, float]:
    """Seconds per phase of one end-to-end request."""
    clock = PhaseClock()
    prepared = runtime.prepare(state, questions)
    clock("prepare")
    execution = runtime.execute(prepared, clock=clock)
    runtime.decode(execution)
    clock("decode")
    return dict(clock.totals)


def phase_split(runtime, workload, requests: int = 50, warmup: int = 5) -> dict:
    """Median ms per phase and of the total over `requests` end-to-end calls (after `warmup`)."""
    pairs = workload.requests
    for index in range(warmup):
        profile_request(runtime, *pairs[index % len(pairs)])
    samples = [profile_request(runtime, *pairs[index % len(pairs)]) for index in range(requests)]
    totals = [sum(sample.values()) for sample in samples]
    host = summarize([sum(sample.get(phase, 0.0) for phase in HOST_PHASES) * 1e3 for sample in samples])
    return {"requests": requests,
            "phases_ms": {phase: float(np.median([s.get(phase, 0.0) for s in samples]) * 1e3) for phase in PHASES},
            "total_p50_ms": float(np.median(totals) * 1e3),
            # per request, the sum of its host phases (not the sum of the phase medians)
            "host_p50_ms": host.p50_ms, "host_p95_ms": host.p95_ms}


def host_stages(runtime, state: Any, questions: dict, repeats: int = 1000, warmup: int = 50) -> dict[str, Summary]:
    """Milliseconds of each host stage of one request, and of their sum per repetition ("total"), summarized
    (`host_stage_samples` gives the samples)."""
    samples = host_stage_samples(runtime, state, questions, repeats=repeats, warmup=warmup)
    return {name: summarize(values) for name, values in samples.items()}


def host_stage_samples(runtime, state: Any, questions: dict, repeats: int = 1000,
                       warmup: int = 50) -> dict[str, list[float]]:
    """Milliseconds of each host stage of one request, and of their sum per repetition ("total"), per repetition.

    Each repetition runs the stages in a predict call's order, timing each on its own: prepare
    (validation, rendering, tokenization), collate (planning, padding, masks, numpy -> mx arrays),
    transfer (evaluated outputs to numpy, `laya_opt.core.runtime.to_host`) and decode (answers and
    envelope). The forward runs once, before timing; the garbage collector is off while timing, as in
    the latency harness. On a CPU the transfer is a host copy; on a GPU it also reads device memory.
    """
    prepared = runtime.prepare(state, questions)
    if not prepared:
        raise ValueError("host_stages needs a request with at least one question")
    outputs = []
    for group in runtime.plan(prepared):
        batch_outputs = runtime.forward(runtime.model, runtime.kernels, runtime.collate([prepared[i] for i in group]))
        mx.eval(*batch_outputs)
        outputs.append(batch_outputs)
    execution = runtime.execute(prepared)
    stages: dict[str, Callable[[], Any]] = {
        "prepare": lambda: runtime.prepare(state, questions),
        "collate": lambda: [runtime.collate([prepared[i] for i in group]) for group in runtime.plan(prepared)],
        "transfer": lambda: [to_host(batch_outputs) for batch_outputs in outputs],
        "decode": lambda: runtime.decode(execution),
    }
    samples: dict[str, list[float]] = {name: [] for name in (*HOST_STAGES, "total")}
    clock, collecting = time.perf_counter_ns, gc.isenabled()
    try:
        for index in range(warmup + repeats):
            if index % GC_EVERY == 0:  # between blocks: a collection inside a stage would land on that stage
                gc.collect()
                gc.disable()
            times = {}
            for name in HOST_STAGES:
                started = clock()
                stages[name]()
                times[name] = (clock() - started) / 1e6
            if index >= warmup:
                for name, value in times.items():
                    samples[name].append(value)
                samples["total"].append(sum(times.values()))
    finally:
        if collecting:
            gc.enable()
    return samples


_DOT_NODE = re.compile(r'\[label ="([^"]*)", shape=rectangle\]')


def count_graph(outputs: Sequence[mx.array]) -> Counter:
    """Primitives (by name) in the unevaluated graph behind `outputs`, from MLX's DOT export."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "graph.dot"
        mx.export_to_dot(str(path), *outputs)
        return Counter(_DOT_NODE.findall(path.read_text()))


def graph_nodes(runtime, workload, top: int = 8) -> dict:
    """The graph of the first request's steady-state forward (after one call per batch): primitives per forward
    (every batch of the request) and the most frequent ones. A fused elementwise chain (`mx.compile`) counts
    as one `Compiled...` node."""
    totals: Counter = Counter()
    for batch in collated_batches(runtime, *workload.requests[0])[0]:
        mx.eval(*runtime.forward(runtime.model, runtime.kernels, batch))  # a shape's first call may compile and sync
        outputs = runtime.forward(runtime.model, runtime.kernels, batch)
        totals += count_graph([out for out in outputs if isinstance(out, mx.array)])
        mx.eval(*outputs)
    return {"nodes_per_forward": sum(totals.values()), "device": str(mx.default_device()),
            "top": [{"primitive": name[:80], "count": count} for name, count in totals.most_common(top)]}


def cuda_profiler_problem() -> str | None:
    """Why no kernel timeline can be taken here (None when it can)."""
    if mx.default_device().type != mx.DeviceType.gpu or not (hasattr(mx, "cuda") and mx.cuda.is_available()):
        return f"the default device is {mx.default_device()}, not MLX's CUDA backend"
    try:
        import torch
    except ImportError:
        return "torch is not installed (CUPTI through torch.profiler records the kernels)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def kernel_timeline(call: Callable[[], None], forwards: int = 20, warmup: int = 3) -> dict:
    """Profile `forwards` calls of `call` (one synchronised forward each) with CUPTI."""
    problem = cuda_profiler_problem()
    if problem:
        return {"skipped": problem}
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        call()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        started = time.perf_counter()
        for _ in range(forwards):
            call()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - started) / forwards
    by_name: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            by_name[event.name].append(event.time_range.elapsed_us())
    busy_us = sum(sum(times) for times in by_name.values()) / forwards
    kernels = sum(len(times) for times in by_name.values()) / forwards
    top = sorted(by_name.items(), key=lambda item: -sum(item[1]))[:TOP_KERNELS]
    return {"forwards": forwards, "kernels_per_forward": kernels, "kernel_ms_per_forward": busy_us / 1e3,
            "wall_ms_per_forward": wall * 1e3, "idle_share": max(0.0, 1.0 - busy_us / 1e3 / (wall * 1e3)),
            "top_kernels": [{"name": name[:160], "calls_per_forward": len(times) / forwards,
                             "us_per_forward": sum(times) / forwards, "mean_us": sum(times) / len(times)}
                            for name, times in top]}


def profile_runtimes(runtimes: dict, workloads: Sequence, requests: int = 50, deadline: float | None = None) -> dict:
    """Phase split and kernel timeline of every (runtime, workload); peers give what they can.

    `deadline` (a time.monotonic() value): pairs not started by then are left out of the result."""
    out: dict = {}
    for label, runtime in runtimes.items():
        for workload in workloads:
            if deadline is not None and time.monotonic() > deadline:
                return out
            phases = runtime.phase_split(workload, requests) if hasattr(runtime, "phase_split") else \
                phase_split(runtime, workload, requests)
            forward = bench_call(runtime, "forward", workload)  # one synchronised forward of the first request
            # A peer (upstream torch) has no MLX graph to count.
            graph = ({"skipped": "not an MLX runtime"} if hasattr(runtime, "bench_call")
                     else graph_nodes(runtime, workload))
            out.setdefault(label, {})[workload.name] = {
                "phases": phases, "timeline": kernel_timeline(lambda: forward(0)), "graph": graph}
    return out
