"""The profiler: phases of a request add up to its wall time; the kernel timeline says why it is skipped."""
from types import SimpleNamespace

import pytest
from fake_passes import QUESTIONS

import laya_opt as lo
from laya_opt.profile import PHASES, PhaseClock, cuda_profiler_problem, kernel_timeline, phase_split, profile_request


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
