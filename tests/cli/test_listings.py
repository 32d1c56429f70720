"""`laya-opt passes`, `experiments` and `suites`: what there is to run, as tables and as JSON."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.passes import pass_modules
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.resources import suite_names, suite_path

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return CliRunner().invoke(main, [str(arg) for arg in args], catch_exceptions=False)


# ------------------------------------------------------------------------------------------------ passes


def test_passes_json_lists_every_built_in_pass_with_every_setting():
    result = invoke("passes", "--json")
    assert result.exit_code == 0, result.output
    entries = {entry["name"]: entry for entry in json.loads(result.output)}
    specs = {module.PASS.name: module.PASS for module in pass_modules()}
    assert set(specs) <= set(entries)
    for name, spec in specs.items():
        entry = entries[name]
        assert entry["exact"] == spec.exact and entry["replaces"] == sorted(spec.replaces)
        assert entry["config_class"] == spec.config_type.__name__ and entry["source"] == spec.config_type.__module__
        assert [s["name"] for s in entry["settings"]] == [f.name for f in dataclasses.fields(spec.config_type)]
    bits = {s["name"]: s for s in entries["quantize_encoder"]["settings"]}["bits"]
    assert (bits["type"], bits["default"], bits["required"]) == ("int", 8, False) and bits["description"]
    assert entries["cast_dtype"]["settings"][0]["required"] is True


def test_passes_table_for_chosen_names():
    result = invoke("passes", "head_prune_final", "masks_once")
    assert result.exit_code == 0, result.output
    assert "head_prune_final  exact  replaces kernels" in result.output
    assert "HeadPruneFinalConfig" in result.output and "split_projection" in result.output
    assert "masks_once" in result.output and "no settings" in result.output
    assert "quantize_encoder" not in result.output


def test_passes_with_a_plugin_and_the_bad_inputs():
    plugin = json.loads(invoke("passes", "noisy_scorer", "--plugin", "fake_passes", "--json").output)
    assert [(p["name"], p["source"], p["config_class"]) for p in plugin] == \
        [("noisy_scorer", "plugin fake_passes", "NoiseConfig")]
    assert plugin[0]["settings"][0]["description"] == ""  # the test pass documents nothing: shown as such
    typo = invoke("passes", "compile_bucket")
    assert typo.exit_code == 2 and "unknown pass 'compile_bucket'; did you mean 'compile_buckets'?" in typo.output
    missing = invoke("passes", "--plugin", "no_such_module_here")
    assert missing.exit_code == 2 and "plugin module 'no_such_module_here' not found" in missing.output


# ------------------------------------------------------------------------------------------------ experiments


def test_the_shipped_experiments_are_listed_and_valid():
    result = invoke("experiments", ROOT / "experiments", "--json")
    assert result.exit_code == 0, result.output
    entries = {Path(entry["file"]).stem: entry for entry in json.loads(result.output)}
    assert set(entries) == {path.stem for path in (ROOT / "experiments").glob("*.yaml")}
    assert all(entry["error"] is None and entry["purpose"] and entry["suites"] for entry in entries.values())
    assert entries["quant_enc8"]["passes"] == ["quantize_encoder"] and entries["baseline"]["passes"] == []


def test_experiments_from_the_current_directory_with_an_invalid_file(tmp_path, tiny_checkpoint_dir, monkeypatch):
    folder = tmp_path / "experiments"
    folder.mkdir()
    suite = write_tiny_suite(tmp_path / "tiny.jsonl")
    (folder / "good.yaml").write_text("# Good: one pass. More words.\n" + yaml.safe_dump(
        {"name": "good", "checkpoint": str(tiny_checkpoint_dir), "suites": [str(suite)],
         "passes": [{"name": "masks_once"}], "benchmark": {"workloads": ["short-1"]}}))
    (folder / "typo.yaml").write_text(yaml.safe_dump({"name": "typo", "passes": [{"name": "mask_once"}]}))
    monkeypatch.chdir(tmp_path)
    result = invoke("experiments", "--json")
    assert result.exit_code == 2
    good, typo = json.loads(result.output.split("\nerror:")[0])
    assert (good["name"], good["passes"], good["suites"], good["benchmark"], good["purpose"]) == \
        ("good", ["masks_once"], [str(suite)], ["short-1"], "Good: one pass.")
    assert "did you mean 'masks_once'?" in typo["error"] and typo["file"].endswith("typo.yaml")
    assert "1 of 2 experiment file(s) are invalid" in result.output
    table = invoke("experiments")
    assert table.exit_code == 2 and "INVALID" in table.output and "masks_once" in table.output


def test_experiments_in_a_missing_or_empty_directory(tmp_path):
    missing = invoke("experiments", tmp_path / "nowhere")
    assert missing.exit_code == 2 and "does not exist" in missing.output and "laya-opt experiments DIR" in \
        missing.output
    empty = invoke("experiments", tmp_path)
    assert empty.exit_code == 0 and "no experiment files" in empty.output
    assert json.loads(invoke("experiments", tmp_path, "--json").output) == []


# ------------------------------------------------------------------------------------------------ suites


def test_suites_lists_every_bundled_suite_with_its_counts():
    result = invoke("suites", "--json")
    assert result.exit_code == 0, result.output
    entries = {entry["name"]: entry for entry in json.loads(result.output)}
    assert list(entries) == suite_names()
    for name, entry in entries.items():
        suite = load_suite(suite_path(name))
        assert (entry["records"], entry["questions"]) == (len(suite.records), suite.n_questions)
        assert sum(entry["by_type"].values()) == entry["questions"] and entry["purpose"] == suite.description
    table = invoke("suites")
    assert "smoke" in table.output and "records" in table.output and "purpose" in table.output


def test_help_lists_the_listing_commands():
    result = invoke("--help")
    assert all(command in result.output for command in ("passes", "experiments", "suites"))
