"""benchmarks/drift_to_reference.py: the per-question distance of a parent and a candidate stack to float32."""
from __future__ import annotations

import json

import numpy as np
import pytest
from repo_scripts import load_script

DRIFT = load_script("benchmarks/drift_to_reference.py")


def test_summary_and_change_counts_on_known_values():
    stats = DRIFT.summary(np.array([0.0, 0.1, 0.2, 0.3]))
    assert stats["mean"] == pytest.approx(0.15) and stats["max"] == 0.3 and stats["p50"] == pytest.approx(0.15)


def test_on_the_cpu_the_fused_kernels_fall_back_and_agree_with_their_parent(tmp_path, capsys):
    out = tmp_path / "drift.json"
    assert DRIFT.main(["--parent", "masks_once", "--candidate", "fused_encoder", "--suite", "smoke", "--first", "3",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["questions"] > 0 and result["parent"] == ["masks_once"] and result["candidate"] == ["fused_encoder"]
    assert result["candidate_vs_parent"]["max"] == 0.0   # the fallback is the unfused path
    assert result["candidate_vs_reference"] == result["parent_vs_reference"]
    assert result["parent_vs_reference"]["max"] > 0.0    # float16 against float32 moves something
    assert result["candidate_closer"] == result["parent_closer"] == 0
    assert result["changed_vs_parent"] == {"decisive": 0, "near_tie": 0}
    assert "closer to float32" in capsys.readouterr().out


def test_an_unknown_pass_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as refused:
        DRIFT.main(["--candidate", "no_such_pass", "--suite", "smoke", "--first", "1"])
    assert refused.value.code == 2 and "unknown pass 'no_such_pass'" in capsys.readouterr().err


def test_float32_layers_change_the_rounding_of_float16_and_are_the_reference_in_float32(tmp_path):
    """The rounding change at its largest: on the CPU it moves float16 answers (unlike the fallback kernels); on
    a few questions either side may sit closer to float32 (over `gate`'s 1,120 the variant does, docs/gates.md)."""
    out = tmp_path / "drift.json"
    assert DRIFT.main(["--parent", "", "--candidate", "float32_layers", "--suite", "smoke", "--first", "4",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["candidate_vs_parent"]["max"] > 0.0
    assert result["candidate_closer"] + result["parent_closer"] > 0
    # in float32 the variant is the reference's own arithmetic
    assert DRIFT.main(["--parent", "", "--candidate", "float32_layers", "--suite", "smoke", "--first", "2",
                       "--dtype", "float32", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["candidate_vs_reference"]["max"] < 1e-6
