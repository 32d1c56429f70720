"""benchmarks/eval_profile.py: where a suite's evaluation spends its time, per request and batched."""
import json

import pytest

from repo_scripts import load_script


def test_phases_add_up_and_the_batched_path_matches_the_per_request_one(tmp_path, capsys):
    out = tmp_path / "profile.json"
    assert load_script("benchmarks/eval_profile.py").main(["--suite", "smoke", "--requests", "3", "--dtype",
                                                           "float32", "--profile", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["requests"] == 3 and record["questions"] >= 3 and record["suite"] == "smoke"
    runs = {(run["path"], run["pass"]): run for run in record["runs"]}
    assert set(runs) == {("per request", "cold"), ("per request", "warm"), ("batched", "cold"),
                         ("batched", "warm"), ("per request", "profiled")}
    for label in ("cold", "warm"):
        single = runs[("per request", label)]
        phases = sum(value for key, value in single.items() if key not in ("dtype", "path", "pass", "total"))
        assert {"prepare", "plan_collate", "graph_build", "dispatch", "forward", "host_copy"} <= set(single)
        assert phases == pytest.approx(single["total"], rel=0.05, abs=0.05)
        batched = runs[("batched", label)]
        assert batched["batches"] >= 1 and batched["max_logit_difference_to_per_request"] < 1e-3
    assert "execute" in runs[("per request", "profiled")]["top"]
    assert "per request, warm" in capsys.readouterr().out


@pytest.mark.parametrize("options", [["--requests", "-1"], ["--batch-size", "0"]])
def test_bad_counts_are_refused(options, capsys):
    with pytest.raises(SystemExit) as refused:
        load_script("benchmarks/eval_profile.py").main(options)
    assert refused.value.code == 2 and "--requests must be" in capsys.readouterr().err


def test_the_per_request_batch_shapes_are_counted_and_the_mlx_variables_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("MLX_CUDA_SDPA_CACHE_SIZE", "8")
    script = load_script("benchmarks/eval_profile.py")
    for batch_size in (64, 1):
        out = tmp_path / f"b{batch_size}.json"
        assert script.main(["--suite", "smoke", "--requests", "2", "--dtype", "float32", "--batch-size",
                            str(batch_size), "--out", str(out)]) == 0
        record = json.loads(out.read_text())
        # one batch per request at 64 rows; one per question at 1 row, each its own (1, length)
        expected = record["requests"] if batch_size == 64 else record["questions"]
        assert record["shapes"]["batches"] == expected and 1 <= record["shapes"]["distinct"] <= expected
        assert record["mlx_env"]["MLX_CUDA_SDPA_CACHE_SIZE"] == "8"
    assert record["questions"] > record["requests"]   # smoke's requests hold several questions
