"""Kernels are named parts: each pass declares the kernel fields it installs, the runtime records their owners,
and taking over another pass's field is declared (`supersedes`) or refused, at plan time and at apply time."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fake_passes import GREEDY, EmptyConfig, write_tiny_suite

import laya_opt.core.checkpoint
import laya_opt.core.runtime
from laya_opt.cli import main
from laya_opt.core.model import KERNEL_FIELDS, Kernels
from laya_opt.core.runtime import load_runtime
from laya_opt.passes import pass_modules
from laya_opt.passes.contract import PassSpec, apply_pass, check_order, kernel_ownership_lines
from laya_opt.passes.registry import get_pass
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.pipeline import Pipeline
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.errors import PassError, PlanError

STACK_GPU = Path(__file__).resolve().parents[2] / "experiments" / "stack_gpu.yaml"
TINY_CONFIGS = {"local_window_attention": {"block_size": 8}}  # the tiny model's window is 4
KERNEL_PASSES = [module.PASS for module in pass_modules() if "kernels" in module.PASS.replaces]
QKV, FUSED = get_pass("qkv_views"), get_pass("fused_encoder")
UNDECLARED = "pass 'greedy_attention' replaces the kernel field 'self_attention' that pass 'qkv_views' installed"


@pytest.fixture(scope="module")
def reference(tiny_checkpoint_dir):
    return load_runtime(tiny_checkpoint_dir, "float32", batch_size=2)


def apply(spec, runtime, **settings):
    return apply_pass(spec, runtime, spec.make_config({**TINY_CONFIGS.get(spec.name, {}), **settings}))


def owned_by(runtime, name: str) -> set[str]:
    return {field for field in KERNEL_FIELDS if runtime.kernel_owner(field) == name}


@pytest.mark.parametrize("spec", KERNEL_PASSES, ids=lambda spec: spec.name)
def test_every_built_in_kernel_pass_installs_exactly_the_fields_it_declares(reference, spec):
    assert spec.kernels  # the contract requires it of a pass that replaces kernels
    child = apply(spec, reference)
    assert owned_by(child, spec.name) == set(spec.kernels)
    assert child.kernel_owners == {field: (spec.name,) for field in spec.kernels}
    assert reference.kernel_owners == {} and owned_by(reference, "reference") == set(KERNEL_FIELDS)


def test_a_declared_override_is_recorded_in_order(reference):
    stacked = apply(FUSED, apply(QKV, reference))
    assert stacked.kernel_owners == {"self_attention": ("qkv_views", "fused_encoder"),
                                     "encoder_stack": ("fused_encoder",)}
    assert stacked.kernel_owner("self_attention") == "fused_encoder"
    assert stacked.kernel_owner("sliding_attention") == "reference"
    # A setting that leaves a declared field alone leaves its owner alone too: the record is what was installed.
    no_rope = apply(FUSED, apply(QKV, reference), rope=False)
    assert no_rope.kernel_owner("self_attention") == "qkv_views"
    assert no_rope.kernel_owner("encoder_stack") == "fused_encoder"


def test_an_undeclared_override_is_refused_when_applied(reference):
    with pytest.raises(PassError, match=UNDECLARED):
        apply_pass(GREEDY, apply(QKV, reference), EmptyConfig())
    planted = dataclasses.replace(FUSED, supersedes=frozenset())  # fused_encoder without its declaration
    with pytest.raises(PassError, match="pass 'fused_encoder' replaces the kernel field 'self_attention' that pass "
                                        "'qkv_views' installed; declare supersedes=\\{'qkv_views'\\}"):
        apply(planted, apply(QKV, reference))
    # Over the reference, or over its own earlier kernel, a pass needs no declaration.
    assert apply_pass(GREEDY, reference, EmptyConfig()).kernel_owner("self_attention") == "greedy_attention"
    window = get_pass("local_window_attention")
    twice = apply(window, apply(window, reference), block_size=16)
    assert twice.kernel_owners == {"sliding_attention": ("local_window_attention", "local_window_attention")}
    # Installing the very kernel that is there already changes nothing, and records nothing.
    assert apply(QKV, apply(QKV, reference)).kernel_owners == {"self_attention": ("qkv_views",)}


def test_a_kernel_change_the_pass_did_not_declare_is_refused(reference):
    liar = dataclasses.replace(GREEDY, name="liar", kernels=frozenset({"sliding_attention"}))
    with pytest.raises(PassError, match="pass 'liar' changed the kernel field self_attention without declaring it "
                                        "in kernels \\(sliding_attention\\)"):
        apply_pass(liar, reference, EmptyConfig())


def test_the_order_check_refuses_an_undeclared_override_in_either_order():
    check_order([QKV, FUSED, get_pass("compile_buckets")])
    with pytest.raises(PlanError, match=UNDECLARED):
        check_order([QKV, GREEDY])
    with pytest.raises(PlanError, match="pass 'qkv_views' replaces the kernel field 'self_attention' that pass "
                                        "'fused_encoder' installed"):
        check_order([FUSED, QKV])  # supersedes is one way: the views would silently undo the fused kernel


@pytest.mark.parametrize("changes, error, message", [
    ({"kernels": frozenset({"attention"})}, ValueError, "unknown kernel field 'attention'; known: encoder_stack"),
    ({"kernels": frozenset()}, ValueError, "a pass that replaces kernels names the fields it installs"),
    ({"replaces": frozenset({"model"})}, ValueError, "a pass that replaces kernels names the fields it installs"),
    ({"kernels": "self_attention"}, TypeError, "kernels must be a set of names, not the string 'self_attention'"),
    ({"supersedes": "qkv_views"}, TypeError, "supersedes must be a set of names"),
    ({"supersedes": frozenset({"greedy_attention"})}, ValueError, "supersedes names itself or 'reference'"),
    ({"supersedes": frozenset({"reference"})}, ValueError, "supersedes names itself or 'reference'"),
])
def test_bad_kernel_declarations_are_refused_when_the_spec_is_built(changes, error, message):
    with pytest.raises(error, match=message):
        dataclasses.replace(GREEDY, **changes)
    with pytest.raises(ValueError, match="supersedes \\['qkv_views'\\] but installs no kernel field"):
        dataclasses.replace(GREEDY, replaces=frozenset({"model"}), kernels=frozenset(), supersedes={"qkv_views"})


def test_declarations_accept_any_collection_of_names():
    spec = dataclasses.replace(GREEDY, kernels=["self_attention"], supersedes=("qkv_views",))
    assert spec.kernels == frozenset({"self_attention"}) and spec.supersedes == frozenset({"qkv_views"})
    assert set(KERNEL_FIELDS) == {field.name for field in dataclasses.fields(Kernels)}


def test_the_shipped_gpu_stack_runs_and_its_owners_are_recorded(reference, tmp_path):
    steps = load_experiment(STACK_GPU).steps
    suite = load_suite(write_tiny_suite(tmp_path / "tiny.jsonl", records=2))
    result = Pipeline(steps, candidate_dtype="float32").run(reference, suite)
    assert [stage.verdict for stage in result.stages] == ["accepted"] * (len(steps) + 1)
    final = result.final_runtime
    assert {field: final.kernel_owner(field) for field in KERNEL_FIELDS} == {
        "encoder_stack": "fused_encoder", "self_attention": "fused_encoder", "sliding_attention": "reference",
        "attention_masks": "masks_once", "final_head_layer": "head_prune_final", "action_dtype": "reference"}
    assert final.kernel_owners["self_attention"] == ("qkv_views", "fused_encoder")


def test_explain_shows_the_owner_of_every_kernel_per_stage():
    result = CliRunner().invoke(main, ["explain", str(STACK_GPU)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("kernel owners after each stage")) + 1:]
    assert table[0].split() == ["stage", *KERNEL_FIELDS]
    rows = {row.split()[1]: row for row in table[1:8]}
    assert list(rows) == ["cast_dtype", "prefix_cache", "masks_once", "qkv_views", "fused_encoder",
                          "head_prune_final", "compile_buckets"]
    assert rows["fused_encoder"].split()[2:] == ["fused_encoder*", "fused_encoder*", "over", "qkv_views", "reference",
                                                "masks_once", "reference", "reference"]
    assert rows["compile_buckets"].split()[2:] == ["fused_encoder", "fused_encoder", "reference", "masks_once",
                                                  "head_prune_final", "reference"]
    assert kernel_ownership_lines([QKV])[2].split() == ["0.", "qkv_views", "reference", "qkv_views*", "reference",
                                                        "reference", "reference", "reference"]


@pytest.mark.parametrize("command", ["explain", "run"])
def test_run_and_explain_refuse_an_undeclared_override_before_loading_weights(command, tiny_checkpoint_dir, tmp_path,
                                                                               monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded before the order check")

    monkeypatch.setattr(laya_opt.core.checkpoint, "load_checkpoint", refuse)
    monkeypatch.setattr(laya_opt.core.runtime, "load_checkpoint", refuse)
    experiment, output = tmp_path / "experiment.yaml", tmp_path / "results"
    experiment.write_text(yaml.safe_dump({
        "name": "greedy", "checkpoint": str(tiny_checkpoint_dir),
        "suites": [str(write_tiny_suite(tmp_path / "t.jsonl"))],
        "plugins": ["fake_passes"], "output_dir": str(output),
        "passes": [{"name": "qkv_views"}, {"name": "greedy_attention"}]}))
    argv = [command, str(experiment)] + (["--no-bench", "--quiet"] if command == "run" else [])
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert "passes: " + UNDECLARED in result.output and "supersedes={'qkv_views'}" in result.output
    assert not output.exists()


def test_a_spec_without_kernel_fields_keeps_working_for_other_parts(reference):
    note = PassSpec(name="planner_only", config_type=EmptyConfig, apply=lambda runtime, config, data: (runtime, {}),
                    exact=True, description="test", replaces=frozenset({"planner"}))
    assert apply_pass(note, reference, EmptyConfig()).kernel_owners == {}
