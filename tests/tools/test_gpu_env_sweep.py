"""benchmarks/gpu_env_sweep.py on the CPU: each setting's child gets exactly its MLX CUDA graph variables."""
import json
import subprocess

import pytest
from repo_scripts import load_script as load


def load_script():
    return load("benchmarks/gpu_env_sweep.py")


def test_settings_name_their_variables_and_bad_ones_are_refused():
    script = load_script()
    assert script.setting_env("off") == {"MLX_USE_CUDA_GRAPHS": "0"}
    assert script.setting_env("60:100") == {"MLX_MAX_OPS_PER_BUFFER": "60", "MLX_CUDA_GRAPH_CACHE_SIZE": "100"}
    for bad in ("60", "60:", ":100", "0:100", "a:b", "on", "60:100:3"):
        with pytest.raises(ValueError, match="OPS:CACHE"):
            script.setting_env(bad)


def test_a_bad_setting_fails_before_any_child_runs(tmp_path, capsys, monkeypatch):
    script = load_script()
    monkeypatch.setattr(script.subprocess, "run", lambda *a, **k: pytest.fail("a child ran"))
    with pytest.raises(SystemExit) as stop:
        script.main(["--checkpoint", str(tmp_path), "--out", str(tmp_path / "o.json"), "--setting", "60"])
    assert stop.value.code == 2 and "'60' is not OPS:CACHE" in capsys.readouterr().err


def test_each_child_sees_its_setting_and_nothing_inherited(tmp_path, monkeypatch):
    script = load_script()
    # the caller's own graph settings (e.g. gpu_session.sh run with graphs off) must not leak into a setting
    monkeypatch.setenv("MLX_USE_CUDA_GRAPHS", "0")
    monkeypatch.setenv("MLX_MAX_OPS_PER_BUFFER", "7")
    seen = []

    def child(command, env, **kwargs):
        seen.append({key: env.get(key) for key in script.SET_HERE})
        row = {"workload": "short-1", "mode": "forward", "runtime": "stack", "p50_ms": float(len(seen)),
               "p95_ms": 1.0, "n": 2}
        return subprocess.CompletedProcess(command, 0, json.dumps({"rows": [row], "environment": {}}) + "\n", "")

    monkeypatch.setattr(script.subprocess, "run", child)
    out = tmp_path / "sweep.json"
    assert script.main(["--checkpoint", str(tmp_path), "--out", str(out), "--setting", "60:100",
                        "--setting", "off", "--rounds", "2", "--workload", "short-1"]) == 0
    graphs = {"MLX_USE_CUDA_GRAPHS": None, "MLX_MAX_OPS_PER_BUFFER": "60", "MLX_CUDA_GRAPH_CACHE_SIZE": "100"}
    off = {"MLX_USE_CUDA_GRAPHS": "0", "MLX_MAX_OPS_PER_BUFFER": None, "MLX_CUDA_GRAPH_CACHE_SIZE": None}
    assert seen == [graphs, off, graphs, off]   # rotated round by round
    record = json.loads(out.read_text())
    assert record["settings"] == ["60:100", "off"]
    assert record["median_p50_ms"] == {"60:100 short-1 forward stack": 2.0, "off short-1 forward stack": 3.0}
