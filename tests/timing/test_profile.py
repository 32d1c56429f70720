"""The profiler: phases of a request add up to its wall time; the kernel timeline says why it is skipped."""
from types import SimpleNamespace

import pytest
from fake_passes import QUESTIONS

import laya_opt as lo
import gc

from laya_opt.timing import profile as profile_module
from laya_opt.timing.profile import (HOST_PHASES, HOST_STAGES, PHASES, PhaseClock, cuda_profiler_problem, host_stages,
                                     kernel_timeline, phase_split, profile_request)


@pytest.fixture(scope="module")
def runtime(tiny_checkpoint_dir):
    return lo.load(tiny_checkpoint_dir, batch_size=2)  # two batches per request: the pipelined path


def test_a_request_is_split_into_every_phase(runtime):
    phases = profile_request(runtime, "hello " * 20, QUESTIONS)
    assert set(phases) == set(PHASES) and all(seconds >= 0 for seconds in phases.values())
    assert phases["prepare"] > 0 and phases["forward"] > 0


def test_phase_split_medians_and_total(runtime):
    workload = SimpleNamespace(name="tiny", requests=(("hello x", QUESTIONS), ("hello " * 40, QUESTIONS)))
    split = phase_split(runtime, workload, requests=6, warmup=1)
    assert split["requests"] == 6 and set(split["phases_ms"]) == set(PHASES)
    assert 0 < sum(split["phases_ms"].values()) <= split["total_p50_ms"] * 3
    assert 0 < split["host_p50_ms"] <= split["host_p95_ms"]
    assert split["host_p50_ms"] < split["total_p50_ms"]  # the forward's phases are not host work


def test_host_phases_are_the_phases_without_the_device():
    assert set(HOST_PHASES) == set(PHASES) - {"graph_build", "dispatch", "forward"}


def test_host_stages_times_each_stage_of_the_runtime_and_their_total(runtime, monkeypatch):
    calls = {"prepare": 0, "collate": 0, "to_host": 0, "decode": 0}
    counted = lo.load(runtime.info["checkpoint"], batch_size=2)

    def counting(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    for name in ("prepare", "collate", "decode"):
        object.__setattr__(counted, name, counting(name, getattr(counted, name)))
    monkeypatch.setattr(profile_module, "to_host", counting("to_host", profile_module.to_host))
    summaries = host_stages(counted, "hello " * 20, QUESTIONS, repeats=7, warmup=2)
    assert set(summaries) == {*HOST_STAGES, "total"} and all(s.n == 7 for s in summaries.values())
    # batch_size=2 and 3 questions: two batches collated and transferred per repetition
    assert calls["to_host"] == 2 * 9 and calls["decode"] == 9
    assert calls["prepare"] >= 9 and calls["collate"] >= 2 * 9  # and the setup's
    # the total is each repetition's sum, so it dominates every stage sample by sample
    assert all(summaries["total"].p50_ms >= summaries[name].p50_ms > 0 for name in HOST_STAGES)
    assert gc.isenabled()


def test_host_stages_refuses_a_request_without_questions(runtime):
    with pytest.raises(ValueError, match="at least one question"):
        host_stages(runtime, "hello", {}, repeats=1, warmup=0)


def test_clock_accumulates_under_the_phase_named():
    clock = PhaseClock()
    clock("a")
    clock("b")
    clock("a")
    assert set(clock.totals) == {"a", "b"} and clock.totals["a"] >= 0


def test_kernel_timeline_is_skipped_off_cuda_with_the_reason():
    problem = cuda_profiler_problem()
    assert problem and "not MLX's CUDA backend" in problem  # this machine has no GPU
    assert kernel_timeline(lambda: None) == {"skipped": problem}


class FakePeer:
    """What laya_opt.timing.peer.UpstreamPeer gives the harness: its own timed calls and phase split, no MLX."""

    def __init__(self):
        self.calls = []

    def bench_call(self, mode, workload):
        def call(index):
            self.calls.append((mode, index))
            return len(workload.requests[index % len(workload.requests)][1])
        return call

    def phase_split(self, workload, requests=50):
        return {"note": "upstream runs as one call; no phase split"}


def test_a_peer_is_timed_and_profiled_through_its_own_calls(runtime):
    """The GPU head to head's path on the CPU: a peer's calls are timed in every mode, its peak memory is not
    MLX's to measure, and the profiler takes the peer's phase split and forward call."""
    from laya_opt.timing.bench import BenchConfig, benchmark
    from laya_opt.timing.profile import profile_runtimes

    peer = FakePeer()
    workload = SimpleNamespace(name="tiny", requests=(("hello x", QUESTIONS), ("hello " * 9, QUESTIONS)))
    result = benchmark("mlx", {"mlx": runtime, "peer": peer}, [workload],
                       BenchConfig(requests=4, blocks=2, warmup=1, bootstrap=50))
    timed = {(m.runtime, m.mode): m for m in result.measurements}
    assert set(timed) == {(label, mode) for label in ("mlx", "peer") for mode in ("end_to_end", "forward")}
    assert timed["peer", "forward"].peak_memory_bytes is None and timed["peer", "forward"].speedup is not None
    assert timed["peer", "forward"].questions_per_s > 0
    # per mode: a cold call, 1 warm-up and 4 timed requests, in block order
    assert [index for mode, index in peer.calls if mode == "forward"] == [0, 0, 0, 1, 2, 3]
    peer.calls.clear()
    profiles = profile_runtimes({"mlx": runtime, "peer": peer}, [workload], requests=2)
    assert profiles["peer"]["tiny"]["phases"] == peer.phase_split(workload)
    assert profiles["peer"]["tiny"]["timeline"] == {"skipped": cuda_profiler_problem()} and peer.calls == []
    assert set(profiles["mlx"]["tiny"]["phases"]["phases_ms"]) == set(PHASES)
    assert profiles["peer"]["tiny"]["graph"] == {"skipped": "not an MLX runtime"}
    assert profiles["mlx"]["tiny"]["graph"]["nodes_per_forward"] > 0


def test_count_graph_counts_each_unevaluated_primitive_once():
    import mlx.core as mx

    from laya_opt.timing.profile import count_graph

    x = mx.ones((2, 3))
    mx.eval(x)  # an evaluated input is a leaf, not a node
    assert count_graph([mx.exp(mx.exp(mx.exp(x)))]) == {"Exp": 3}
    shared = mx.exp(x)
    assert count_graph([shared + 1, shared * 2])["Exp"] == 1  # a node two outputs share counts once


def test_graph_nodes_counts_a_forward_and_sees_compiled_fusion(runtime):
    from laya_opt.timing.profile import graph_nodes

    workload = SimpleNamespace(name="tiny", requests=(("hello " * 20, QUESTIONS),))
    eager = graph_nodes(runtime, workload)
    assert eager["nodes_per_forward"] > 50 and eager["device"].startswith("Device(cpu")
    assert sum(entry["count"] for entry in eager["top"]) <= eager["nodes_per_forward"]
    assert "Matmul" in {entry["primitive"] for entry in eager["top"]} or any(
        "Matmul" in entry["primitive"] or "AddMM" in entry["primitive"] for entry in eager["top"])
    compiled = graph_nodes(lo.apply(runtime, lo.passes.CompileBucketsConfig(multiple=16)), workload, top=1000)
    assert 0 < compiled["nodes_per_forward"] < eager["nodes_per_forward"]  # fusion: fewer, larger nodes
    fused = sum(entry["count"] for entry in compiled["top"] if entry["primitive"].startswith("Compiled"))
    assert fused > sum(entry["count"] for entry in graph_nodes(runtime, workload, top=1000)["top"]
                       if entry["primitive"].startswith("Compiled"))
