"""Latency harness: warmup, synchronised timings in rotating baseline/candidate blocks, paired speed-ups.

Method (spec §12.11-§12.12): every runtime sees the same request indices within a block; the order
of runtimes rotates from block to block (AB, BA, AB, ... for two) so drift and cache warmth do not
favour one side; the speed-up is the median over blocks of median(baseline)/median(candidate) with a
bootstrap interval over blocks. Timers stop after `mx.eval` (`Runtime.execute` synchronises each
batch). Cold time is the first call of a workload on a runtime, before its warmup.
"""
from __future__ import annotations

import gc
import hashlib
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import mlx.core as mx
import numpy as np

from laya_opt.core.checkpoint import MAX_SEED
from laya_opt.util.progress import progress_bar
from laya_opt.core.runtime import Runtime
from laya_opt.util.schema import checked
from laya_opt.util.system import detect_blas, device_facts, environment_switches, package_version

MODES = ("end_to_end", "forward")
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
# Fewer samples than this and the percentile is little more than the slowest sample or two.
TAIL_MIN_SAMPLES = {"p95": 20, "p99": 100}


@dataclass(frozen=True)
@checked
class BenchConfig:
    """Timing settings; read from YAML or keyword arguments by `laya_opt.util.schema.parse`."""

    requests: int = field(default=200, metadata={"min": 1})  # timed requests per workload, runtime and mode
    # untimed requests per workload, runtime and mode, after the cold call
    warmup: int = field(default=10, metadata={"min": 0})
    blocks: int = field(default=10, metadata={"min": 1})    # alternating blocks the timed requests are split into
    forward_only: bool = True    # also time pre-collated batches through runtime.forward
    seed: int = field(default=0, metadata={"min": 0, "max": MAX_SEED})  # bootstrap resampling and mx.random
    bootstrap: int = field(default=BOOTSTRAP_RESAMPLES, metadata={"min": 1})

    def __post_init__(self):
        if self.blocks > self.requests:
            raise ValueError(f"benchmark.blocks ({self.blocks}) cannot exceed benchmark.requests ({self.requests}): "
                             "every block needs at least one timed request")

    @property
    def modes(self) -> tuple[str, ...]:
        return MODES if self.forward_only else MODES[:1]


# ---------------------------------------------------------------------------------------------------------------------
# Statistics


@dataclass(frozen=True)
class Summary:
    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float


def summarize(samples_ms: Sequence[float]) -> Summary:
    values = np.asarray(samples_ms, dtype=np.float64)
    if values.size == 0:
        raise ValueError("cannot summarise zero timing samples")
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return Summary(n=int(values.size), p50_ms=float(p50), p95_ms=float(p95), p99_ms=float(p99),
                   mean_ms=float(values.mean()), min_ms=float(values.min()), max_ms=float(values.max()))


def thin_tails(n: int) -> tuple[str, ...]:
    """The tail percentiles (p95, p99) that `n` samples are too few for."""
    return tuple(name for name, minimum in TAIL_MIN_SAMPLES.items() if n < minimum)


def tail_warning(n: int) -> str | None:
    """A sentence for reports when the tail percentiles rest on too few samples; None when they do not."""
    thin = thin_tails(n)
    if not thin:
        return None
    needs = ", ".join(f"{name} needs >= {TAIL_MIN_SAMPLES[name]}" for name in thin)
    return (f"{' and '.join(thin)} rest on {n} samples ({needs}): read them as the slowest samples, "
            "not as tail percentiles")


@dataclass(frozen=True)
class Speedup:
    median: float        # median over blocks of median(baseline block) / median(candidate block)
    low: float           # bootstrap interval over blocks
    high: float
    blocks: int


def bootstrap_median_interval(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                              confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap of the median: resample `values` with replacement `resamples` times."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("cannot bootstrap zero values")
    rng = np.random.default_rng(seed)
    medians = np.median(data[rng.integers(0, data.size, size=(resamples, data.size))], axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def paired_speedup(baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]],
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Speedup:
    """Per-block ratio of medians, paired by block; > 1 means the candidate is faster."""
    if len(baseline_blocks) != len(candidate_blocks) or not baseline_blocks:
        raise ValueError(f"paired blocks needed, got {len(baseline_blocks)} baseline and "
                         f"{len(candidate_blocks)} candidate blocks")
    ratios = [float(np.median(base) / np.median(cand)) for base, cand in zip(baseline_blocks, candidate_blocks)]
    low, high = bootstrap_median_interval(ratios, resamples, seed)
    return Speedup(median=float(np.median(ratios)), low=low, high=high, blocks=len(ratios))


def block_schedule(labels: Sequence[str], blocks: int) -> list[tuple[str, ...]]:
    """Runtime order per block, rotated by one each block: (A, B), (B, A), (A, B), ..."""
    labels = tuple(labels)
    return [labels[b % len(labels):] + labels[: b % len(labels)] for b in range(blocks)]


def block_slices(requests: int, blocks: int) -> list[range]:
    """Timed request indices per block; sizes differ by at most one (the first `extra` blocks get one more)."""
    base, extra = divmod(requests, blocks)
    return [range(b * base + min(b, extra), (b + 1) * base + min(b + 1, extra)) for b in range(blocks)]


# ---------------------------------------------------------------------------------------------------------------------
# Environment and memory


def _memory_function(name: str) -> Callable | None:
    # mlx moved the memory API from mx.metal.* to mx.* (spec §13.21); take whichever exists.
    if hasattr(mx, name):
        return getattr(mx, name)
    metal = getattr(mx, "metal", None)
    return getattr(metal, name, None) if metal is not None else None


def peak_memory_of(call: Callable[[], Any]) -> tuple[Any, int | None]:
    """`call()`'s result and the peak MLX allocation (bytes) while it ran; None when mlx has no memory API."""
    reset, peak = _memory_function("reset_peak_memory"), _memory_function("get_peak_memory")
    if reset is None or peak is None:
        return call(), None
    reset()
    result = call()
    return result, int(peak())


def environment() -> dict:
    """Device, backend, the BLAS behind CPU matmuls and library versions, recorded with every result."""
    facts = device_facts()
    return {
        "device": facts["device"],
        "device_info": facts["device_info"],
        "backend": facts["backend"],
        "blas": detect_blas().to_json(),
        "versions": {"mlx": facts["mlx"], "numpy": np.__version__, "tokenizers": package_version("tokenizers"),
                     "python": sys.version.split()[0], "laya-opt": package_version("laya-opt")},
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        # MLX reads its tuning variables (CUDA graph size and cache, ...) once per process: they change timings.
        "mlx_env": environment_switches(("MLX_",)),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Workload facts


def prepared_digest(prepared_requests: Sequence[Sequence]) -> str:
    """SHA-256 over the int32 token ids, marker positions and qtype of every prepared question, in order."""
    digest = hashlib.sha256()
    for prepared in prepared_requests:
        digest.update(b"R")
        for item in prepared:
            digest.update(b"Q" + np.int32(item.qtype).tobytes())
            digest.update(np.asarray(item.ids, dtype=np.int32).tobytes() + b"|")
            digest.update(np.asarray(item.markers, dtype=np.int32).tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class WorkloadFacts:
    name: str
    requests: int                 # distinct requests in the workload (timed requests cycle through them)
    questions: int                # questions over those requests
    unique_forward_inputs: int    # distinct (ids, markers, qtype) among them
    tokens: int                   # unpadded tokens over those requests
    token_sha256: str


def workload_facts(runtime: Runtime, workload) -> WorkloadFacts:
    prepared = [runtime.prepare(state, questions) for state, questions in workload.requests]
    items = [item for request in prepared for item in request]
    unique = {(item.ids, item.markers, item.qtype) for item in items}
    return WorkloadFacts(name=workload.name, requests=len(prepared), questions=len(items),
                         unique_forward_inputs=len(unique), tokens=sum(item.length for item in items),
                         token_sha256=prepared_digest(prepared))


# ---------------------------------------------------------------------------------------------------------------------
# Timed calls


def end_to_end_call(runtime: Runtime, workload) -> Callable[[int], int]:
    """Request i: prepare -> plan -> forward (synchronised) -> decode; returns the question count."""
    requests = workload.requests

    def call(index: int) -> int:
        state, questions = requests[index % len(requests)]
        return len(runtime.predict(state, questions)["answers"])

    return call


def collated_batches(runtime: Runtime, state: Any, questions: Mapping) -> tuple[list, int]:
    """One request's batches as the runtime plans and collates them, already evaluated (what a forward starts
    from), and its question count."""
    prepared = runtime.prepare(state, questions)
    groups = runtime.plan(prepared) if prepared else []
    batches = [runtime.collate([prepared[i] for i in group]) for group in groups]
    for batch in batches:
        mx.eval(batch.input_ids, batch.attention_mask, batch.marker_pos, batch.marker_mask, batch.qtype)
    return batches, len(prepared)


def forward_call(runtime: Runtime, workload) -> Callable[[int], int]:
    """Request i as pre-collated (and already evaluated) batches through the runtime's own forward."""
    collated = [collated_batches(runtime, state, questions) for state, questions in workload.requests]

    def call(index: int) -> int:
        batches, count = collated[index % len(collated)]
        for batch in batches:
            mx.eval(*runtime.forward(runtime.model, runtime.kernels, batch))
        return count

    return call


CALL_BUILDERS = {"end_to_end": end_to_end_call, "forward": forward_call}


def bench_call(runtime, mode: str, workload) -> Callable[[int], int]:
    """The timed call of `mode`; a peer (laya_opt.timing.peer) builds its own."""
    return runtime.bench_call(mode, workload) if hasattr(runtime, "bench_call") else \
        CALL_BUILDERS[mode](runtime, workload)


def timed_ms(call: Callable[[int], int], index: int) -> tuple[float, int]:
    started = time.perf_counter_ns()
    count = call(index)
    return (time.perf_counter_ns() - started) / 1e6, count


# ---------------------------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Measurement:
    runtime: str                  # label: the baseline's or a stage's
    workload: str
    mode: str                     # end_to_end | forward
    summary: Summary
    cold_ms: float                # first call of this workload on this runtime
    peak_memory_bytes: int | None
    questions_per_s: float        # timed questions / total timed seconds
    speedup: Speedup | None       # vs the baseline (None for the baseline itself)
    block_samples_ms: tuple[tuple[float, ...], ...] = field(repr=False, default=())


@dataclass(frozen=True)
class BenchResult:
    baseline: str
    config: BenchConfig
    workloads: tuple[WorkloadFacts, ...]
    measurements: tuple[Measurement, ...]
    environment: dict
    skipped: tuple[str, ...] = ()   # "<workload> <mode>" cells left out at the deadline

    def samples(self) -> dict:
        """Raw samples: runtime -> workload -> mode -> list of blocks of milliseconds."""
        raw: dict = {}
        for m in self.measurements:
            raw.setdefault(m.runtime, {}).setdefault(m.workload, {})[m.mode] = {
                "blocks_ms": [list(block) for block in m.block_samples_ms], "cold_ms": m.cold_ms}
        return raw


def measure_mode(runtimes: Mapping[str, Runtime], workload, mode: str, config: BenchConfig,
                 advance: Callable[[int], None] = lambda steps: None) -> dict[str, dict]:
    """Cold call, warmup, rotating timed blocks and a peak-memory call, for every runtime on one workload."""
    calls = {label: bench_call(runtime, mode, workload) for label, runtime in runtimes.items()}
    # MLX's peak memory says nothing about a peer
    mlx_memory = {label: not hasattr(runtime, "bench_call") for label, runtime in runtimes.items()}
    cold, failed = {}, {}
    for label, call in list(calls.items()):
        try:  # a runtime that cannot run this cell (e.g. out of memory) is left out of it, with the reason
            cold[label] = timed_ms(call, 0)[0]
        except Exception as exc:  # noqa: BLE001 (any failure of one runtime must not end the benchmark)
            failed[label] = f"{type(exc).__name__}: {exc}"
            del calls[label]
    if not calls:
        return {label: {"error": error} for label, error in failed.items()}
    for label, call in calls.items():
        for index in range(config.warmup):
            call(index)
        advance(config.warmup)
    blocks: dict[str, list[list[float]]] = {label: [] for label in calls}
    questions = dict.fromkeys(calls, 0)
    memory: dict[str, int | None] = {}
    schedule = list(zip(block_schedule(list(calls), config.blocks), block_slices(config.requests, config.blocks)))
    for number, (order, indices) in enumerate(schedule):
        for label in order:
            gc.collect()
            gc.disable()  # a collection inside a timed call would land on whichever runtime is running
            try:
                run_block = lambda label=label: [timed_ms(calls[label], index) for index in indices]  # noqa: E731
                if number == len(schedule) - 1 and mlx_memory[label]:  # the last block's peak, outside the timers
                    samples, memory[label] = peak_memory_of(run_block)
                else:
                    samples = run_block()
            finally:
                gc.enable()
            blocks[label].append([ms for ms, _ in samples])
            questions[label] += sum(count for _, count in samples)
            advance(len(indices))
    return {label: {"blocks": blocks[label], "cold_ms": cold[label], "peak": memory.get(label),
                    "questions": questions[label]} for label in calls} | {label: {"error": error}
                                                                          for label, error in failed.items()}


def benchmark(baseline_label: str, runtimes: Mapping[str, Runtime], workloads: Sequence, config: BenchConfig,
              show_progress: bool = False, deadline: float | None = None,
              check: Callable[[], None] | None = None) -> BenchResult:
    """Time every runtime on every workload and mode; speed-ups are paired against `baseline_label`.

    `deadline` (a time.monotonic() value): (workload, mode) cells not started by then are left out and
    listed in `BenchResult.skipped`, so a run on a lent machine ends with what it measured. `check()` is
    called after every timed block, outside the timers; what it raises ends the benchmark (a sweep's budget).
    """
    if baseline_label not in runtimes:
        raise ValueError(f"baseline {baseline_label!r} is not among the runtimes {list(runtimes)}")
    facts = tuple(workload_facts(runtimes[baseline_label], workload) for workload in workloads)
    measurements, skipped = [], []
    calls_per_mode = len(runtimes) * (config.warmup + config.requests)
    with progress_bar(show_progress) as progress:
        for workload in workloads:
            for mode in config.modes:
                if deadline is not None and time.monotonic() > deadline:
                    skipped.append(f"{workload.name} {mode}")
                    continue
                task = progress.add_task(f"{workload.name} {mode}", total=calls_per_mode)
                def advance(steps, task=task):
                    if check is not None:
                        check()
                    progress.advance(task, steps)

                raw = measure_mode(runtimes, workload, mode, config, advance)
                progress.remove_task(task)
                if "error" in raw[baseline_label]:
                    raise RuntimeError(f"the baseline failed on {workload.name} {mode}: {raw[baseline_label]['error']}")
                base_blocks = raw[baseline_label]["blocks"]
                for label, data in raw.items():
                    if "error" in data:
                        skipped.append(f"{workload.name} {mode} {label}: {data['error']}")
                        continue
                    flat = [ms for block in data["blocks"] for ms in block]
                    measurements.append(Measurement(
                        runtime=label, workload=workload.name, mode=mode, summary=summarize(flat),
                        cold_ms=data["cold_ms"], peak_memory_bytes=data["peak"],
                        questions_per_s=data["questions"] / max(sum(flat) / 1000.0, 1e-12),
                        speedup=None if label == baseline_label else paired_speedup(
                            base_blocks, data["blocks"], config.bootstrap, config.seed),
                        block_samples_ms=tuple(tuple(block) for block in data["blocks"])))
    return BenchResult(baseline=baseline_label, config=config, workloads=facts, measurements=tuple(measurements),
                       environment=environment(), skipped=tuple(skipped))
