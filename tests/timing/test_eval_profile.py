"""benchmarks/eval_profile.py: where a suite's evaluation spends its time, per request and batched."""
import json

import numpy as np
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


@pytest.mark.parametrize("options, message", [
    (["--requests", "-1"], "--requests must be"), (["--batch-size", "0"], "--requests must be"),
    (["--pass", "masks_once", "--pass", "nope"], "--pass: unknown pass 'nope'")])
def test_bad_options_are_refused(options, message, capsys):
    with pytest.raises(SystemExit) as refused:
        load_script("benchmarks/eval_profile.py").main(options)
    assert refused.value.code == 2 and message in capsys.readouterr().err


def test_passes_are_applied_to_the_runtime_that_is_timed(tmp_path, monkeypatch):
    import laya_opt

    script = load_script("benchmarks/eval_profile.py")
    applied = []
    real = laya_opt.apply
    monkeypatch.setattr(laya_opt, "apply", lambda runtime, name: applied.append(name) or real(runtime, name))
    out, plain = tmp_path / "stack.json", tmp_path / "plain.npz"
    stacked = tmp_path / "stack.npz"
    assert script.main(["--suite", "smoke", "--requests", "2", "--dtype", "float32", "--save-logits",
                        str(plain)]) == 0
    assert applied == []
    assert script.main(["--suite", "smoke", "--requests", "2", "--dtype", "float32", "--pass", "masks_once",
                        "--pass", "qkv_views", "--out", str(out), "--save-logits", str(stacked)]) == 0
    assert applied == ["masks_once", "qkv_views"]
    assert json.loads(out.read_text())["passes"] == ["masks_once", "qkv_views"]
    a, b = np.load(plain)["float32"], np.load(stacked)["float32"]
    assert a.shape == b.shape and np.max(np.abs(a - b)) < 1e-4   # exact passes: the same answers


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


def test_the_cache_replay_counts_builds_cold_and_warm():
    lru_misses = load_script("benchmarks/eval_profile.py").lru_misses
    assert lru_misses([1, 2, 3], 3) == [3, 0]            # everything kept: the warm pass builds nothing
    assert lru_misses([1, 2, 3], 2) == [3, 3]            # a scan longer than the cache misses every time
    assert lru_misses([1, 2, 1, 3, 1], 2) == [3, 2]      # the recently used key stays


def test_attention_keys_tell_boolean_masks_from_the_two_additive_layouts():
    import laya_opt
    from laya_opt.core.runtime import load_runtime
    from laya_opt.fidelity.checker import requests_from_suite
    from laya_opt.suites.suite_file import load_suite
    from laya_opt.util.resources import checkpoint_path, suite_path

    script = load_script("benchmarks/eval_profile.py")
    requests = requests_from_suite(load_suite(suite_path("smoke", "--suite")))[:2]
    plain = load_runtime(checkpoint_path("standin"), "float32")
    masked = laya_opt.apply(plain, "masks_once")
    before, after = script.attention_keys(plain, requests), script.attention_keys(masked, requests)
    assert len(before) == len(after) == 2                          # one forward per request
    assert {key[3] for forward in before for key in forward} == {"boolean"}
    layouts = {key[3] for forward in after for key in forward}
    rows, length = after[0][0][0][0], after[0][0][0][2]
    assert {(rows, 1, 1, length), (rows, 1, length, length)} <= layouts   # the key mask and the band mask
    assert all(len(b) < len(a) for a, b in zip(after, before))
    estimate = script.key_estimate(masked, requests)
    assert estimate["distinct_keys"] == len({key for forward in after for key in forward})
    assert estimate["builds_cold"] == estimate["distinct_keys"] and estimate["builds_warm"] == 0


def test_a_dtype_that_raises_is_recorded_and_the_exit_status_is_1(tmp_path, monkeypatch):
    script = load_script("benchmarks/eval_profile.py")

    def thrashing(runtime, dtype, requests, profile, runs):
        raise RuntimeError("Cache thrashing is happening")

    monkeypatch.setattr(script, "time_dtype", thrashing)
    out = tmp_path / "failed.json"
    assert script.main(["--suite", "smoke", "--requests", "1", "--dtype", "float32", "--out", str(out)]) == 1
    record = json.loads(out.read_text())
    assert record["runs"] == [{"dtype": "float32", "error": "Cache thrashing is happening"}]
    assert record["attention_keys"]["forwards"] == 1
