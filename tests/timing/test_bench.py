"""Benchmark harness: statistics on synthetic samples, rotating block order, and a tiny real run."""
from __future__ import annotations

from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest

import laya_opt.timing.bench as bench
from laya_opt.timing.bench import (BenchConfig, benchmark, block_schedule, block_slices, bootstrap_median_interval,
                                   environment, paired_speedup, peak_memory_of, prepared_digest, summarize,
                                   workload_facts)
from laya_opt.core.runtime import load_runtime
from fake_passes import QUESTIONS


def test_summary_percentiles_on_known_samples():
    summary = summarize(list(range(1, 101)))
    assert (summary.n, summary.p50_ms, summary.min_ms, summary.max_ms, summary.mean_ms) == (100, 50.5, 1, 100, 50.5)
    assert summary.p95_ms == pytest.approx(95.05) and summary.p99_ms == pytest.approx(99.01)
    with pytest.raises(ValueError, match="zero timing samples"):
        summarize([])


def synthetic_blocks(true_ratio: float, blocks: int = 20, per_block: int = 10, seed: int = 1):
    """Baseline blocks with drifting level; the candidate block is the same level divided by true_ratio."""
    rng = np.random.default_rng(seed)
    baseline, candidate = [], []
    for level in 10.0 + np.cumsum(rng.normal(0, 0.5, blocks)):
        baseline.append(list(level * rng.lognormal(0, 0.03, per_block)))
        candidate.append(list(level / true_ratio * rng.lognormal(0, 0.03, per_block)))
    return baseline, candidate


@pytest.mark.parametrize("true_ratio", [1.0, 2.0, 0.8])
def test_paired_speedup_interval_contains_the_true_ratio(true_ratio):
    baseline, candidate = synthetic_blocks(true_ratio)
    speedup = paired_speedup(baseline, candidate, resamples=2000, seed=0)
    assert speedup.low <= true_ratio <= speedup.high
    assert speedup.high - speedup.low < 0.1 * true_ratio  # pairing removes the drift between blocks
    assert speedup.median == pytest.approx(true_ratio, rel=0.02) and speedup.blocks == 20


def test_paired_speedup_refuses_unpaired_blocks():
    with pytest.raises(ValueError, match="paired blocks needed"):
        paired_speedup([[1.0], [1.0]], [[1.0]])


def test_bootstrap_is_seeded_and_brackets_the_median():
    values = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95]
    assert bootstrap_median_interval(values, seed=3) == bootstrap_median_interval(values, seed=3)
    low, high = bootstrap_median_interval(values, seed=3)
    assert low <= float(np.median(values)) <= high


def test_block_order_alternates_and_slices_cover_every_request():
    assert block_schedule(["A", "B"], 4) == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]
    assert block_schedule(["A", "B", "C"], 3) == [("A", "B", "C"), ("B", "C", "A"), ("C", "A", "B")]
    slices = block_slices(10, 3)
    assert [len(s) for s in slices] == [4, 3, 3] and [i for s in slices for i in s] == list(range(10))


@pytest.mark.parametrize("values, message", [
    ({"requests": 0}, "requests: must be >= 1, got 0"),
    ({"requests": 2, "blocks": 3}, r"benchmark.blocks \(3\) cannot exceed benchmark.requests \(2\)"),
    ({"warmup": -1}, "warmup: must be >= 0"),
    ({"blocks": True}, "blocks: expected an integer, got boolean True"),
])
def test_bench_config_rejects_bad_values(values, message):
    with pytest.raises(ValueError, match=message):
        BenchConfig(**values)  # built in Python: checked like YAML


def test_measure_mode_runs_cold_warmup_then_rotating_blocks(monkeypatch):
    log = []

    def fake_builder(runtime, workload):
        def call(index):
            log.append((runtime, index))
            return 1
        return call

    monkeypatch.setitem(bench.CALL_BUILDERS, "end_to_end", fake_builder)
    config = BenchConfig(requests=4, blocks=2, warmup=1)
    raw = bench.measure_mode({"base": "A", "cand": "B"}, None, "end_to_end", config)
    cold, warmup, timed = log[:2], log[2:4], log[4:]
    assert cold == [("A", 0), ("B", 0)] and warmup == [("A", 0), ("B", 0)]
    assert timed == [("A", 0), ("A", 1), ("B", 0), ("B", 1), ("B", 2), ("B", 3), ("A", 2), ("A", 3)]
    assert [len(block) for block in raw["base"]["blocks"]] == [2, 2] and raw["cand"]["questions"] == 4
    assert isinstance(raw["cand"]["peak"], int)  # read around the last block, without extra calls


def test_peak_memory_falls_back_to_none_without_the_api(monkeypatch):
    result, peak = peak_memory_of(lambda: mx.zeros((1024,)) + 1)
    assert isinstance(peak, int) and result.shape == (1024,)
    monkeypatch.setattr(bench, "_memory_function", lambda name: None)
    assert peak_memory_of(lambda: "done") == ("done", None)


def test_environment_records_device_and_versions():
    env = environment()
    assert env["device"].startswith("Device(") and env["versions"]["python"]
    assert env["versions"]["mlx"] and env["versions"]["numpy"] and env["versions"]["tokenizers"]


def test_real_benchmark_on_a_tiny_checkpoint(tiny_checkpoint_dir):
    reference = load_runtime(tiny_checkpoint_dir, "float32")
    candidate = load_runtime(tiny_checkpoint_dir, "float32", batch_size=1)
    state = "hello hello x"
    workload = SimpleNamespace(name="tiny", requests=((state, QUESTIONS), (state, QUESTIONS)))
    config = BenchConfig(requests=4, blocks=2, warmup=1, forward_only=True, bootstrap=200)
    result = benchmark("reference", {"reference": reference, "small": candidate}, [workload], config)
    assert len(result.measurements) == 4  # 2 runtimes x 2 modes
    for measurement in result.measurements:
        assert measurement.summary.n == 4 and measurement.cold_ms > 0 and measurement.questions_per_s > 0
        assert (measurement.speedup is None) == (measurement.runtime == "reference")
    assert [m.speedup.blocks for m in result.measurements if m.runtime == "small"] == [2, 2]
    facts = result.workloads[0]
    assert (facts.requests, facts.questions, facts.unique_forward_inputs) == (2, 6, 3)
    assert result.samples()["small"]["tiny"]["end_to_end"]["blocks_ms"][1]


def test_token_hash_follows_the_token_tensors(tiny_checkpoint_dir):
    runtime = load_runtime(tiny_checkpoint_dir, "float32")
    same = workload_facts(runtime, SimpleNamespace(name="a", requests=(("hello x", QUESTIONS),)))
    again = workload_facts(runtime, SimpleNamespace(name="b", requests=(("hello x", QUESTIONS),)))
    other = workload_facts(runtime, SimpleNamespace(name="c", requests=(("x hello", QUESTIONS),)))
    assert same.token_sha256 == again.token_sha256 != other.token_sha256
    prepared = runtime.prepare("hello", QUESTIONS)
    moved = [prepared[0].__class__(**{**prepared[0].__dict__, "markers": prepared[0].markers[:-1] + (1,)})]
    assert prepared_digest([prepared[:1]]) != prepared_digest([moved])


def test_a_runtime_that_fails_a_cell_is_left_out_with_its_reason(tiny_checkpoint_dir):
    from fake_passes import failing_forward

    runtime = load_runtime(tiny_checkpoint_dir)
    workload = SimpleNamespace(name="w", requests=(("hello", QUESTIONS),))
    broken = runtime.replace(forward=failing_forward)
    result = benchmark("ok", {"ok": runtime, "broken": broken}, [workload], BenchConfig(requests=2, warmup=0, blocks=1))
    assert {m.runtime for m in result.measurements} == {"ok"}
    assert result.skipped == ("w end_to_end broken: RuntimeError: kernel launch failed",
                              "w forward broken: RuntimeError: kernel launch failed")
    with pytest.raises(RuntimeError, match="the baseline failed on w end_to_end"):
        benchmark("broken", {"broken": broken}, [workload], BenchConfig(requests=1, warmup=0, blocks=1))
