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
    assert DRIFT.main(["--parent", "masks_once", "--candidate", "fused_encoder", "--suite", "smoke", "--first", "1",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["questions"] > 0 and result["parent"] == ["masks_once"] and result["candidate"] == ["fused_encoder"]
    assert result["candidate_vs_parent"]["max"] == 0.0   # the fallback is the unfused path
    assert result["candidate_vs_reference"] == result["parent_vs_reference"]
    assert result["parent_vs_reference"]["max"] > 0.0    # float16 against float32 moves something
    assert result["candidate_closer"] == result["parent_closer"] == 0
    assert result["changed_vs_parent"] == {"decisive": 0, "near_tie": 0}
    assert result["paired"]["sign_test"] == {"farther": 0, "closer": 0, "p_farther": 1.0}
    assert len(result["per_question"]["parent"]) == result["questions"]
    printed = capsys.readouterr().out
    assert "closer to float32" in printed and "by swapping each question's pair" in printed


def test_an_unknown_pass_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as refused:
        DRIFT.main(["--candidate", "no_such_pass", "--suite", "smoke", "--first", "1"])
    assert refused.value.code == 2 and "unknown pass 'no_such_pass'" in capsys.readouterr().err


def test_float32_layers_change_the_rounding_of_float16_and_are_the_reference_in_float32(tmp_path):
    """The rounding change at its largest: on the CPU it moves float16 answers (unlike the fallback kernels); on
    a few questions either side may sit closer to float32 (over `gate`'s 1,120 the variant does, docs/gates.md)."""
    out = tmp_path / "drift.json"
    assert DRIFT.main(["--parent", "", "--candidate", "float32_layers", "--suite", "smoke", "--first", "2",
                       "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["candidate_vs_parent"]["max"] > 0.0
    assert result["candidate_closer"] + result["parent_closer"] > 0
    # in float32 the variant is the reference's own arithmetic
    assert DRIFT.main(["--parent", "", "--candidate", "float32_layers", "--suite", "smoke", "--first", "2",
                       "--dtype", "float32", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["candidate_vs_reference"]["max"] < 1e-6


def test_the_paired_test_tells_rounding_differently_from_drifting_farther():
    rng = np.random.default_rng(1)
    parent = rng.lognormal(-8, 1.2, 1120)
    other = rng.lognormal(-8, 1.2, 1120)           # rounds differently: the same distribution, not worse
    same = DRIFT.paired(parent, other)
    assert same["p99_excess"]["p"] > 0.05 and same["sign_test"]["p_farther"] > 0.05
    worse = DRIFT.paired(parent, parent * 1.3)     # every question 30% farther from float32
    assert worse["p99_excess"]["p"] < 0.01 and worse["p99_excess"]["observed"] > worse["p99_excess"]["null_95"]
    assert worse["sign_test"] == {"farther": 1120, "closer": 0, "p_farther": pytest.approx(2.0 ** -1120)}
    identical = DRIFT.paired(parent, parent.copy())
    assert identical["max_excess"] == {"observed": 0.0, "null_95": 0.0, "p": 1.0}
    assert DRIFT.paired(parent, other, seed=3) == DRIFT.paired(parent, other, seed=3)


def test_the_sign_test_on_known_counts():
    assert DRIFT.sign_test_p(0, 0) == 1.0
    assert DRIFT.sign_test_p(3, 0) == pytest.approx(1 / 8)
    assert DRIFT.sign_test_p(2, 2) == pytest.approx(11 / 16)


def test_float32_midlayer_rounds_elsewhere_and_is_the_reference_in_float32(tmp_path):
    out = tmp_path / "drift.json"
    assert DRIFT.main(["--parent", "float32_layers", "--candidate", "float32_midlayer", "--suite", "smoke",
                       "--first", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["candidate_vs_parent"]["max"] > 0.0   # the rounding moved
    assert DRIFT.main(["--parent", "", "--candidate", "float32_midlayer", "--suite", "smoke", "--first", "2",
                       "--dtype", "float32", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["candidate_vs_reference"]["max"] < 1e-6
