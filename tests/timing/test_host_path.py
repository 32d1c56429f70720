"""benchmarks/host_path.py: the per-stage host table of one request, on the stand-in (the tool itself)."""
import importlib.util
import json
import sys
from pathlib import Path

from laya_opt.timing.profile import HOST_STAGES

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("host_path", ROOT / "benchmarks" / "host_path.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script
    spec.loader.exec_module(script)
    return script


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
