"""benchmarks/cpu_op_costs.py: one encoder layer's ops timed alone on the CPU, with their shares."""
import json

import pytest

from repo_scripts import load_script


def test_every_op_is_timed_n_times_and_the_shares_cover_the_layer(tmp_path, capsys):
    out = tmp_path / "ops.json"
    assert load_script("benchmarks/cpu_op_costs.py").main(["--length", "32", "--calls", "2", "--blocks", "2",
                                                           "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["length"] == 32 and record["numpy_exp_p50_ms"] > 0
    names = set(record["ops"])
    assert {"matmul Wqkv", "attention (mx.fast sdpa)", "GeGLU (erf GELU x gate)", "  exp alone, same size"} <= names
    assert all(op["n"] == 4 and 0 < op["p50_ms"] <= op["p95_ms"] for op in record["ops"].values())
    printed = capsys.readouterr().out
    shares = [int(line.split()[-1].rstrip("%")) for line in printed.splitlines() if line.endswith("%")]
    assert len(shares) == 7 and 95 <= sum(shares) <= 105   # the layer's ops; the indented parts have no share


@pytest.mark.parametrize("flag", ["--length", "--calls", "--blocks"])
def test_a_non_positive_count_is_refused_naming_the_flags(flag, capsys):
    with pytest.raises(SystemExit) as refused:
        load_script("benchmarks/cpu_op_costs.py").main([flag, "0"])
    assert refused.value.code == 2 and "must be positive" in capsys.readouterr().err
