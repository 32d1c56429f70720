"""Experiment files: every invalid input fails before any weight is loaded and names its key path."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

import laya_opt.core.checkpoint
from laya_opt.runs.experiment import ExperimentError, explain, load_experiment, parse_experiment
from laya_opt.fidelity.gates import load_gates_file
from laya_opt.passes.registry import UnknownPass, build_registry, get_pass
from fake_passes import CAPTURE, NOISY, REPLACE_MODEL, write_tiny_suite

TEST_PASSES = (NOISY, CAPTURE, REPLACE_MODEL)


@pytest.fixture
def suite_path(tmp_path):
    return write_tiny_suite(tmp_path / "tiny.jsonl")


@pytest.fixture(autouse=True)
def no_weights(monkeypatch):
    # Validation must never reach the checkpoint loader.
    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded during validation")

    monkeypatch.setattr(laya_opt.core.checkpoint, "load_checkpoint", refuse)


def document(suite_path, **changes) -> dict:
    base = {"name": "tiny-run", "checkpoint": "/nonexistent/checkpoint", "suites": [str(suite_path)],
            "passes": [{"name": "noisy_scorer", "config": {"scale": 0.5}, "on_fail": "reject"}]}
    base.update(changes)
    return base


def parse(raw):
    return parse_experiment(raw, extra_passes=TEST_PASSES)


def test_a_valid_document_resolves_defaults(suite_path):
    experiment = parse(document(suite_path))
    assert (experiment.reference_dtype, experiment.candidate_dtype, experiment.batch_size) == ("float32", "float16", 16)
    assert experiment.steps[0].config == NOISY.config_type(scale=0.5)
    assert experiment.steps[0].on_fail == "reject" and experiment.benchmark is None
    assert experiment.output_dir == Path("results")  # relative paths resolve from the working directory
    resolved = experiment.resolved()
    assert resolved["passes"][0]["config"] == {"scale": 0.5, "seed": 0}
    baseline = experiment.pipeline().plan()[0][2]  # stage 0's cumulative gates: the bundled calibration's
    assert baseline == load_gates_file("standin").for_dtype("float16").exact_cumulative
    assert [str(gate) for gate in baseline] == resolved["gates"]["baseline"]["cumulative"]
    assert resolved["gates_file"]["name"] == "standin"
    assert experiment.rerun == resolved["rerun"] == experiment.pipeline().rerun == 128


@pytest.mark.parametrize("rerun", [0, 5])
def test_rerun_reaches_the_pipeline_and_the_manifest(suite_path, rerun):
    experiment = parse(document(suite_path, rerun=rerun))
    assert experiment.pipeline().rerun == experiment.resolved()["rerun"] == rerun


@pytest.mark.parametrize("changes, message", [
    ({"bogus": 1}, r"\(top level\): unknown key\(s\) bogus; known: name, checkpoint"),
    ({"name": 7}, r"name: expected a string, got integer 7"),
    ({"name": "a/b"}, r"name: 'a/b' must be letters"),
    ({"batch_size": "16"}, r"batch_size: expected an integer, got string '16'"),
    ({"batch_size": 0}, r"batch_size: must be >= 1, got 0"),
    ({"rerun": -1}, r"rerun: must be >= 0, got -1"),
    ({"rerun": "all"}, r"rerun: expected an integer, got string 'all'"),
    ({"rerun": 1.5}, r"rerun: expected an integer"),
    ({"candidate_dtype": "float8"}, r"candidate_dtype: 'float8' is not one of float32, float16, bfloat16"),
    ({"suites": "tiny"}, r"suites: expected a list, got string"),
    ({"suites": ["no_such_suite"]}, r"suites\[0\]: suite 'no_such_suite' not found .*; bundled suites: calib"),
    ({"suites": []}, r"suites: must not be empty"),
    ({"passes": [{"name": "nope"}]}, r"passes\[0\]\.name: unknown pass 'nope'; known passes: .*noisy_scorer"),
    ({"passes": [{"name": "noisy_scorer", "confg": {}}]}, r"passes\[0\]: unknown key\(s\) confg"),
    ({"passes": [{"config": {}}]}, r"passes\[0\]\.name: missing"),
    ({"passes": [{"name": "noisy_scorer", "config": {"scale": "big"}}]},
     r"passes\[0\]\.config\.scale: expected a number, got 'big'"),
    ({"passes": [{"name": "noisy_scorer", "config": {"sigma": 1}}]}, r"passes\[0\]\.config: unknown key\(s\) sigma"),
    ({"passes": [{"name": "noisy_scorer", "on_fail": "warn"}]}, r"passes\[0\]\.on_fail: 'warn' is not one of"),
    ({"passes": [{"name": "noisy_scorer", "gates": {"incremental": ["speed >= 2"]}}]},
     r"passes\[0\]\.gates\.incremental\[0\]\.metric: 'speed' is not one of"),
    ({"gates": {"cumulative": [{"metric": "max_abs_dp", "op": "<", "threshold": 1}]}},
     r"gates\.cumulative\[0\]\.op: '<' is not one of"),
    ({"gates": {"final": []}}, r"gates: unknown key\(s\) final; known: incremental, cumulative"),
    ({"gates_file": "nosuch"}, r"gates_file: gates file 'nosuch' not found .*bundled: standin, or `spec`"),
    ({"gates_file": ""}, r"gates_file: must not be empty"),
    ({"plugins": ["no_such_module_for_laya"]}, r"plugins\[0\]: plugin module 'no_such_module_for_laya' not found"),
    ({"benchmark": {"requests": 5}}, r"benchmark\.workloads: missing"),
    ({"benchmark": {"workloads": ["short-1"], "requests": 2, "blocks": 4}},
     r"benchmark: benchmark\.blocks \(4\) cannot exceed benchmark\.requests \(2\)"),
    ({"passes": [{"name": "compile_buckets", "config": {"plan_from": "nowhere"}}]},
     r"passes\[0\]\.config\.plan_from: 'nowhere' is neither a suite"),
    ({"benchmark": {"workloads": ["short-1"], "forward_only": "yes"}}, r"benchmark\.forward_only: expected true/false"),
    ({"benchmark": {"workloads": ["short-1"], "warmup": -1}}, r"benchmark\.warmup: must be >= 0"),
])
def test_invalid_documents_name_the_key_path(suite_path, changes, message):
    with pytest.raises(ExperimentError, match=message):
        parse(document(suite_path, **changes))


def test_unknown_workload_names_the_index(suite_path):
    with pytest.raises(ExperimentError,
                       match=r"benchmark\.workloads\[1\]: unknown workload 'huge-9'; known: .*short-1"):
        parse(document(suite_path, benchmark={"workloads": ["short-1", "huge-9"]}))


def test_capture_then_replace_is_refused_at_parse_time(suite_path):
    raw = document(suite_path, passes=[{"name": "capture_model"}, {"name": "replace_model"}])
    with pytest.raises(ExperimentError, match=r"passes: pass 'replace_model' replaces the model that 'capture_model'"):
        parse(raw)


def test_load_experiment_names_the_file_and_rejects_yaml_tags(tmp_path, suite_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document(suite_path, batch_size=1.5, plugins=["fake_passes"])))
    with pytest.raises(ExperimentError, match=rf"{path}: batch_size: expected an integer, got number 1.5"):
        load_experiment(path)
    path.write_text("name: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ExperimentError, match="invalid YAML"):
        load_experiment(path)
    with pytest.raises(ExperimentError, match="does not exist"):
        load_experiment(tmp_path / "missing.yaml")
    path.write_text("name: a\nbatch_size: 4\nbatch_size: 8\n")
    with pytest.raises(ExperimentError, match="duplicate key 'batch_size'"):
        load_experiment(path)


def test_plugins_register_passes_by_explicit_import(tmp_path, suite_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "laya_plugin_for_test.py").write_text(
        "from fake_passes import NOISY\nPASS = NOISY\n")
    raw = document(suite_path, plugins=["laya_plugin_for_test"])
    experiment = parse_experiment(raw)  # no extra_passes: the plugin is the only source of noisy_scorer
    assert experiment.registry.sources["noisy_scorer"] == "plugin laya_plugin_for_test"
    monkeypatch.delitem(sys.modules, "laya_plugin_for_test")
    with pytest.raises(ExperimentError, match="unknown pass 'noisy_scorer'"):
        parse_experiment(document(suite_path))


def test_registry_lists_known_names_and_refuses_duplicates():
    with pytest.raises(UnknownPass, match="unknown pass 'nope'; known passes: "):
        get_pass("nope")
    clash = NOISY.__class__(**{**NOISY.__dict__, "description": "another"})
    with pytest.raises(ValueError, match="pass 'noisy_scorer' is registered twice"):
        build_registry(extra=(NOISY, clash))


def test_explain_renders_the_plan_without_weights(suite_path):
    raw = document(suite_path, passes=[{"name": "replace_model", "on_fail": "reject"},
                                       {"name": "capture_model", "config": {"group_size": 32}}])
    text = explain(parse(raw))
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "1. replace_model  approximate  on_fail=reject" in line)
    second = next(i for i, line in enumerate(lines) if "2. capture_model  exact  on_fail=stop" in line)
    assert first < second
    assert "replaces={forward} captures={model}" in lines[second]
    assert "config: {'group_size': 32}" in text
    assert "incremental gates: finite == 1, deterministic == 1, token_identity == 1" in text
    assert "[missing: run will fail]" in text and "benchmark   none" in text


def test_entry_points_register_passes(monkeypatch):
    import importlib.metadata

    import laya_opt.passes.registry as registry

    point = importlib.metadata.EntryPoint(name="noisy", value="fake_passes:NOISY", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry.importlib.metadata, "entry_points",
                        lambda group: [point] if group == registry.ENTRY_POINT_GROUP else [])
    built = build_registry()
    assert built.get("noisy_scorer") is NOISY
    assert built.sources["noisy_scorer"] == "entry point noisy = fake_passes:NOISY"


def test_builtin_passes_are_discovered_from_the_package_with_their_configs():
    import laya_opt as lo

    names = build_registry(include_entry_points=False).names
    assert {"cast_dtype", "compile_buckets", "head_prune_final", "length_sorted_batching", "local_window_attention",
            "quantize_encoder"} <= set(names)
    assert lo.passes.CompileBucketsConfig(multiple=8).multiple == 8 and "HeadPruneConfig" in dir(lo.passes)
    with pytest.raises(AttributeError, match="pass configs: .*CompileBucketsConfig"):
        lo.passes.NoSuchConfig


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "experiments").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_every_shipped_experiment_loads_and_explains(path):
    experiment = load_experiment(path)
    text = explain(experiment)
    assert experiment.checkpoint.is_dir() and "[missing" not in text
    assert f"experiment  {experiment.name}" in text and "0. baseline  cast_dtype to" in text
    # Every shipped experiment gates on the committed calibration, and says so.
    assert experiment.gates_file is load_gates_file("standin") and "gates file  standin" in text
    assert "(noise " in text
