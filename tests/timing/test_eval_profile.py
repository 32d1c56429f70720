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


def test_contiguous_attention_routes_the_model_through_copies_with_the_same_outputs(tmp_path, monkeypatch):
    import mlx.core as mx
    import numpy as np

    from laya_opt.core import model

    script = load_script("benchmarks/eval_profile.py")
    monkeypatch.setattr(model, "sdpa", model.sdpa)   # restored after the test
    plain = tmp_path / "plain.npz"
    assert script.main(["--suite", "smoke", "--requests", "3", "--dtype", "float32", "--save-logits",
                        str(plain)]) == 0
    script.contiguous_attention()
    assert model.sdpa.__module__ == "eval_profile"
    q, k = mx.random.normal((1, 2, 5, 8)), mx.random.normal((1, 2, 5, 8))
    v = mx.random.normal((1, 5, 2, 8)).transpose(0, 2, 1, 3)   # a transposed view, as the model's v
    assert mx.allclose(model.sdpa(q, k, v, scale=0.3), mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3))
    copied = tmp_path / "copied.npz"
    assert script.main(["--suite", "smoke", "--requests", "3", "--dtype", "float32", "--save-logits",
                        str(copied)]) == 0
    a, b = np.load(plain)["float32"], np.load(copied)["float32"]
    assert a.shape == b.shape and a.size > 3 and np.max(np.abs(a - b)) < 1e-4
