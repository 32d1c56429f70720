"""The README's "Add a pass" skeleton, run as written: the pass file, the experiment YAML and the test.

The pass file goes into a temporary folder appended to `laya_opt.passes.__path__`, which is what dropping
it into `passes/` does: discovery finds it and `lo.passes.SmallBatchesConfig` resolves. The stand-in is
swapped for the tiny checkpoint so the check takes seconds (the skeleton itself loads `lo.load()`).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import laya_opt as lo
import laya_opt.passes
import laya_opt.util.resources
from laya_opt.cli import main

ROOT = Path(__file__).resolve().parents[1]


def skeleton_blocks() -> dict[str, str]:
    """The README's add-a-pass code blocks, by the path their first line names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Add a pass"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```(?:python|yaml)\n# (\S+)\n(.*?)```", section, re.S)
    return {path: body for path, body in blocks}


@pytest.fixture
def skeleton_installed(tmp_path, monkeypatch, tiny_checkpoint_dir):
    blocks = skeleton_blocks()
    folder = tmp_path / "extra_passes"
    folder.mkdir()
    (folder / "small_batches.py").write_text(blocks["passes/small_batches.py"], encoding="utf-8")
    monkeypatch.setattr(laya_opt.passes, "__path__", [*laya_opt.passes.__path__, str(folder)])
    monkeypatch.setattr(laya_opt.util.resources, "standin_checkpoint", lambda: Path(tiny_checkpoint_dir))
    monkeypatch.chdir(tmp_path)
    return blocks


def test_the_readme_names_one_file_one_yaml_and_one_test():
    assert sorted(skeleton_blocks()) == ["experiments/small_batches.yaml", "passes/small_batches.py",
                                         "tests/passes/test_small_batches.py"]


def test_the_skeleton_pass_is_discovered_and_its_test_passes(skeleton_installed):
    assert lo.passes.SmallBatchesConfig(max_questions=3).max_questions == 3
    with pytest.raises(lo.SchemaError, match="max_questions: must be >= 1"):
        lo.passes.SmallBatchesConfig(max_questions=0)
    namespace: dict = {}
    exec(compile(skeleton_installed["tests/passes/test_small_batches.py"], "README.md", "exec"), namespace)
    namespace["test_small_batches_is_exact"]()


def test_the_skeleton_experiment_runs(skeleton_installed, tmp_path):
    experiment = tmp_path / "small_batches.yaml"
    experiment.write_text(skeleton_installed["experiments/small_batches.yaml"], encoding="utf-8")
    assert yaml.safe_load(experiment.read_text())["passes"][0]["name"] == "small_batches"
    done = CliRunner().invoke(main, ["run", str(experiment), "--no-bench", "--quiet",
                                     "--output-dir", str(tmp_path / "results")])
    assert done.exit_code == 0, done.output
    assert "small_batches" in done.output and "accepted" in done.output
