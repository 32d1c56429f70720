"""Calibration: every noise variant computes the same function; measurements feed a gates file that reads back."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from fake_passes import REQUESTS, write_tiny_suite

from laya_opt.cli import main
from laya_opt.fidelity.calibration import measure, noise_table, noise_variants
from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.gate_derivation import CALIBRATED_METRICS, NOISE_SOURCES
from laya_opt.fidelity.gates import default_gates, read_gates_file, spec_gates
from laya_opt.core.runtime import load_runtime


@pytest.fixture(scope="module")
def reference(wide_checkpoint_dir):
    return load_runtime(wide_checkpoint_dir, "float32", batch_size=16)


def test_every_noise_variant_feeds_the_model_the_same_inputs_under_its_own_identity(reference):
    variants = noise_variants(reference)
    assert tuple(variants) == NOISE_SOURCES
    assert len({variant.identity for variant in variants.values()} | {reference.identity}) == len(NOISE_SOURCES) + 1
    base = evaluate(reference, REQUESTS)
    for name, variant in variants.items():
        outputs = evaluate(variant, REQUESTS)
        assert [q.model_input for q in outputs.questions] == [q.model_input for q in base.questions], name
        for a, b in zip(base.questions, outputs.questions):
            np.testing.assert_allclose(a.logits, b.logits, atol=1e-4, err_msg=name)


def test_measure_records_noise_per_source_and_drift_per_half_dtype(reference):
    measured = measure(reference, REQUESTS[:2], dtypes=("float32", "float16"))
    assert set(measured["noise"]) == {"float32", "float16"} and set(measured["drift"]) == {"float16"}
    for sources in measured["noise"].values():
        assert set(sources) == set(NOISE_SOURCES)
        assert all(sources["run_to_run"][metric] == 0.0 for metric in CALIBRATED_METRICS)  # deterministic
    assert measured["drift"]["float16"]["max_abs_dp"] > 0 and measured["max_abs_logit"] > 0
    table = noise_table(measured)
    assert len(table["rows"]) == 2 * len(NOISE_SOURCES) + 1
    with pytest.raises(ValueError, match="float32 reference"):
        measure(load_runtime(reference.info["checkpoint"], "float16"), REQUESTS[:1])
    with pytest.raises(ValueError, match="needs float32 among the dtypes"):
        measure(reference, REQUESTS[:1], dtypes=("float16",))


def test_calibrate_gates_writes_a_gates_file_and_derives_again_from_its_measurements(wide_checkpoint_dir, tmp_path):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=2)
    out = tmp_path / "tiny-gates.yaml"
    done = CliRunner().invoke(main, ["calibrate-gates", "--checkpoint", str(wide_checkpoint_dir), "--suite", str(suite),
                                     "--dtype", "float32", "--out", str(out)])
    assert done.exit_code == 0, done.output
    written = read_gates_file(out)
    assert written.name == "tiny-gates" and set(written.gates) == {"float32"}
    assert written.source["command"].startswith("laya-opt calibrate-gates --checkpoint")
    assert written.measured["suites"][0]["records"] == 2 and "wrote" in done.output
    # float16 was not calibrated: it falls back to the spec's tolerances.
    assert default_gates(True, "float16", "incremental", gates_file=written) == \
        spec_gates().gates["float16"].exact_incremental
    again = tmp_path / "again.yaml"
    rederived = CliRunner().invoke(main, ["calibrate-gates", "--from-measurements", str(out), "--out", str(again)])
    assert rederived.exit_code == 0, rederived.output
    assert yaml.safe_load(again.read_text())["gates"] == yaml.safe_load(out.read_text())["gates"]
    assert read_gates_file(again).source["derived_by"].startswith("laya-opt calibrate-gates --from-measurements")


def test_measure_records_what_the_decision_gates_rest_on(reference):
    measured = measure(reference, REQUESTS[:2], dtypes=("float32", "float16"))
    drift = measured["drift"]["float16"]
    assert {"near_tie_flips", "p99_abs_dp", "p99_abs_dlogit", "p99_kl_logits"} <= set(drift)
    assert 0 <= drift["p99_abs_dp"] <= drift["max_abs_dp"] and 0 <= measured["near_ties"] <= measured["questions"]


def test_a_version_1_gates_file_is_derived_again_as_version_2_with_every_derivation_stated(tmp_path):
    shipped = Path(__file__).with_name("data") / "gates_v1_smoke.yaml"   # the file shipped until 2026-12-06
    assert yaml.safe_load(shipped.read_text())["version"] == 1
    out = tmp_path / "standin-v2.yaml"
    done = CliRunner().invoke(main, ["calibrate-gates", "--from-measurements", str(shipped), "--out", str(out)],
                              terminal_width=250)
    assert done.exit_code == 0, done.output
    written = read_gates_file(out)
    assert yaml.safe_load(out.read_text())["version"] == 2
    approximate = written.gates["float16"].approximate_incremental
    assert [g.metric for g in approximate if not g.diagnostic][3:6] == ["decisive_flips", "near_tie_flips", "mcnemar_p"]
    assert "derived thresholds of standin-v2 (version 2)" in done.output and "near_tie_flips <= 4" in done.output
    # Exact passes keep the bounds the version-1 file held.
    assert written.gates["float16"].exact_incremental == read_gates_file(shipped).gates["float16"].exact_incremental


def test_from_measurements_without_measurements_is_a_named_bad_input(tmp_path):
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: bare\ngates: {}\n")
    done = CliRunner().invoke(main, ["calibrate-gates", "--from-measurements", str(bare), "--out",
                                     str(tmp_path / "x.yaml")])
    assert done.exit_code == 2 and "measured: missing" in done.output and not (tmp_path / "x.yaml").exists()


def test_a_noise_sample_runs_the_variants_on_that_many_requests_and_the_drift_on_all(reference, monkeypatch):
    import laya_opt.fidelity.calibration as calibration
    from laya_opt.fidelity.gate_derivation import derive_gates, derivation_table

    seen = []
    real = calibration.evaluate

    def counting(runtime, requests, *args, **kwargs):
        seen.append((runtime.identity, len(requests)))
        return real(runtime, requests, *args, **kwargs)

    monkeypatch.setattr(calibration, "evaluate", counting)
    measured = measure(reference, REQUESTS, dtypes=("float32", "float16"), noise_sample=1)
    assert (measured["requests"], measured["noise_requests"]) == (len(REQUESTS), 1)
    variants = [count for identity, count in seen if "+noise:" in identity]
    assert len(variants) == 2 * len(NOISE_SOURCES) and set(variants) == {1}
    whole = [count for identity, count in seen if "+noise:" not in identity]
    assert whole.count(len(REQUESTS)) == 2  # the reference and the float16 cast drift: every request
    assert measured["drift"]["float16"]["max_abs_dp"] > 0
    gates = derive_gates(measured, "sampled")
    texts = [row[3] for row in derivation_table(gates)["rows"]]
    assert any(f"on a seeded sample of 1 of {len(REQUESTS)} requests" in text for text in texts)
    with pytest.raises(Exception, match="rerun must be a non-negative integer"):
        measure(reference, REQUESTS, noise_sample=-1)


def test_calibrate_gates_records_the_noise_sample_in_its_command(wide_checkpoint_dir, tmp_path):
    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=3)
    out = tmp_path / "sampled.yaml"
    done = CliRunner().invoke(main, ["calibrate-gates", "--checkpoint", str(wide_checkpoint_dir), "--suite", str(suite),
                                     "--dtype", "float32", "--noise-sample", "1", "--out", str(out)])
    assert done.exit_code == 0, done.output
    written = read_gates_file(out)
    assert "--noise-sample 1" in written.source["command"] and written.measured["noise_requests"] == 1
    refused = CliRunner().invoke(main, ["calibrate-gates", "--suite", str(suite), "--noise-sample", "-2"])
    assert refused.exit_code == 2 and "--noise-sample" in refused.output


def test_a_run_after_calibrate_gates_takes_its_reference_and_casts_from_the_caches(wide_checkpoint_dir, tmp_path,
                                                                                    monkeypatch):
    """A reship calibrates on `gate`, then gates the float16 and bfloat16 casts on it: those runs take the
    calibration's evaluations (checked on their re-run sample) instead of evaluating the suite again."""
    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=3)
    gates = tmp_path / "tiny-gates.yaml"

    def calibrate(*extra):
        done = CliRunner().invoke(main, ["calibrate-gates", "--checkpoint", str(wide_checkpoint_dir), "--suite",
                                         str(suite), "--dtype", "float16", "--noise-sample", "1", "--out", str(gates),
                                         *extra])
        assert done.exit_code == 0, done.output
        return done.output

    def stage_zero(dtype, name, *extra):
        experiment = tmp_path / f"{name}.yaml"
        experiment.write_text(yaml.safe_dump({
            "name": name, "checkpoint": str(wide_checkpoint_dir), "reference_dtype": "float32",
            "candidate_dtype": dtype, "suites": [str(suite)], "gates_file": str(gates), "passes": []}))
        done = CliRunner().invoke(main, ["run", str(experiment), "--no-bench", "--json", "--output-dir",
                                         str(tmp_path / "runs"), *extra])
        assert done.exit_code in (0, 3), done.output
        outcome = json.loads(done.output)
        records = [json.loads(line) for line in
                   (Path(outcome["results_dir"]) / "stages.jsonl").read_text().splitlines()]
        return outcome["reference"]["status"], records[0]["eval_path"]["kind"]

    monkeypatch.setenv("LAYA_OPT_CACHE_DIR", str(tmp_path / "cache-a"))
    calibrate("--no-cache")   # files nothing
    assert stage_zero("float16", "before", "--reuse-stages") == ("computed", "evaluated")
    monkeypatch.setenv("LAYA_OPT_CACHE_DIR", str(tmp_path / "cache-b"))   # only the calibration can fill it
    said = calibrate()
    assert "reference: computed" in said and "float16): filed in the stage cache" in said
    assert "reference: cache hit" in calibrate()   # the first calibration filed it
    assert stage_zero("float16", "fp16", "--reuse-stages") == ("hit", "cached")
    assert stage_zero("float16", "fp16_plain")[1] == "evaluated"           # reuse is asked for, never assumed
    assert stage_zero("bfloat16", "bf16", "--reuse-stages")[1] == "evaluated"  # not calibrated: another key
    refused = CliRunner().invoke(main, ["run", str(tmp_path / "fp16.yaml"), "--no-bench", "--reuse-stages",
                                        "--no-cache"])
    assert refused.exit_code == 2 and "--reuse-stages" in refused.output and "--no-cache" in refused.output
