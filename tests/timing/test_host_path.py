"""benchmarks/host_path.py: the per-stage host table of one request, on the stand-in (the tool itself)."""
import json
from pathlib import Path

import pytest

from repo_scripts import load_script as load

from laya_opt.timing.profile import HOST_STAGES

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    return load("benchmarks/host_path.py")


def test_host_path_prints_and_writes_every_stage_of_both_runtimes(tmp_path, capsys):
    out = tmp_path / "host.json"
    assert load_script().main(["--repeats", "5", "--warmup", "1", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["arch"] == "standin" and record["workload"] == "short-1" and record["experiment"] == "stack_gpu.yaml"
    assert set(record["stages_ms"]) == {"eager", "stack_gpu"}
    for summaries in record["stages_ms"].values():
        assert set(summaries) == {*HOST_STAGES, "total"}
        assert all(s["n"] == 5 and 0 < s["p50_ms"] <= s["p95_ms"] for s in summaries.values())
    assert record["environment"]["versions"]["mlx"] and record["environment"]["device"]
    printed = capsys.readouterr().out
    assert "standin, short-1: 1 question(s)" in printed and "prepare p50/p95 ms" in printed
    assert printed.count("stack_gpu ") == 1 and "transfer: a host copy on a CPU" in printed


def test_host_path_names_a_device_read_off_the_cpu(monkeypatch, capsys):
    # The footnote follows the backend: a CUDA run measured a device-to-host read, not a host copy.
    script = load_script()
    real = script.environment
    monkeypatch.setattr(script, "environment", lambda: {**real(), "backend": "cuda"})
    assert script.main(["--repeats", "2", "--warmup", "0"]) == 0
    printed = capsys.readouterr().out
    assert "transfer: a device-to-host read" in printed and "host copy" not in printed


def test_host_path_alternates_the_runtimes_block_by_block(tmp_path, monkeypatch):
    # 7 repetitions in 3 blocks (3, 2, 2): eager leads in blocks 0 and 2, the stack in block 1; the warm-up
    # runs once per runtime, before its first block; every repetition lands in the summaries.
    script = load_script()
    calls = []

    def recorded(runtime, state, questions, repeats, warmup):
        calls.append((runtime, repeats, warmup))
        return {name: [0.001 * (len(calls) + i) for i in range(repeats)] for name in (*HOST_STAGES, "total")}

    monkeypatch.setattr(script, "host_stage_samples", recorded)
    out = tmp_path / "host.json"
    assert script.main(["--repeats", "7", "--warmup", "4", "--blocks", "3", "--json", str(out)]) == 0
    eager = calls[0][0]
    order = ["eager" if runtime is eager else "stack" for runtime, _, _ in calls]
    assert order == ["eager", "stack", "stack", "eager", "eager", "stack"]
    assert [(repeats, warmup) for _, repeats, warmup in calls] == [(3, 4), (3, 4), (2, 0), (2, 0), (2, 0), (2, 0)]
    record = json.loads(out.read_text())
    assert record["blocks"] == 3
    assert all(s["n"] == 7 for stages in record["stages_ms"].values() for s in stages.values())
    with pytest.raises(SystemExit) as refused:
        script.main(["--repeats", "2", "--blocks", "3"])
    assert refused.value.code == 2
