"""The public API of `laya_opt/__init__.py`, and the README's Python example, executed as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import laya_opt as lo
import laya_opt.util.resources
from laya_opt.util.errors import InputError, SchemaError

ROOT = Path(__file__).resolve().parents[1]


def readme_python_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_readme_example(capsys) -> str:
    exec(compile(readme_python_example(), "README.md", "exec"), {})
    return capsys.readouterr().out


def test_the_readme_example_runs_as_written_on_a_tiny_checkpoint(tmp_path, monkeypatch, capsys,
                                                                  tiny_checkpoint_dir):
    """The README's block with `lo.load()` giving a tiny random checkpoint: the same calls in 2 s (on the
    stand-in, the twin below, it takes about 35 s on the CPU and runs with -m slow)."""
    monkeypatch.chdir(tmp_path)  # it must not depend on the checkout as working directory
    monkeypatch.setattr(laya_opt.util.resources, "standin_checkpoint", lambda: Path(tiny_checkpoint_dir))
    printed = run_readme_example(capsys)
    assert "'callback'" in printed and "2 compile_buckets accepted max |dp|" in printed
    assert "stack end_to_end p50" in printed


@pytest.mark.slow
def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    printed = run_readme_example(capsys)
    assert "2 compile_buckets accepted max |dp|" in printed and "stack end_to_end p50" in printed


def test_apply_by_config_name_or_spec_gives_the_same_runtime(tiny_checkpoint_dir):
    runtime = lo.load(tiny_checkpoint_dir)
    by_config = lo.apply(runtime, lo.passes.LocalWindowAttentionConfig(block_size=8))
    by_name = lo.apply(runtime, "local_window_attention", block_size=8)
    assert by_config.identity == by_name.identity and by_config.applied == ("local_window_attention",)
    with pytest.raises(TypeError, match="either in the config object or as keywords"):
        lo.apply(runtime, lo.passes.LocalWindowAttentionConfig(), block_size=8)
    with pytest.raises(InputError, match="unknown pass 'nope'"):
        lo.apply(runtime, "nope")
    with pytest.raises(SchemaError, match="local_window_attention.block_size: must be >= 1"):
        lo.apply(runtime, "local_window_attention", block_size=0)
    # settings given where the pass's data goes would otherwise apply the defaults in silence
    with pytest.raises(TypeError, match=r"quantize_encoder's data fields \(check_with\) .* got \['bits'\]; "
                                        r"settings go as keywords"):
        lo.apply(runtime, "quantize_encoder", {"bits": 4})   # before the defaults (g64) are checked
    with pytest.raises(TypeError, match=r"\(it has none\) to their data, got list"):
        lo.apply(runtime, "local_window_attention", [8])
    assert lo.apply(runtime, "local_window_attention", {}, block_size=8).identity == by_name.identity


def test_load_and_load_suite_name_what_is_missing(tmp_path):
    with pytest.raises(lo.CheckpointError, match="never downloads"):
        lo.load(tmp_path / "none")
    with pytest.raises(InputError,
                       match="suite 'nope' not found .*bundled suites: calib, duplicated, freeform, gate, heldout"):
        lo.load_suite("nope")
    assert lo.load_suite("smoke").name == "smoke"


def test_benchmark_needs_runtimes_and_valid_settings(tiny_checkpoint_dir):
    runtime = lo.load(tiny_checkpoint_dir)
    with pytest.raises(InputError, match="at least one runtime"):
        lo.benchmark({})
    with pytest.raises(SchemaError, match="benchmark: unknown key\\(s\\) request"):
        lo.benchmark({"a": runtime}, request=3)


def test_settings_the_model_cannot_take_are_input_errors_before_any_evaluation(tiny_checkpoint_dir, monkeypatch):
    runtime = lo.load(tiny_checkpoint_dir)
    with pytest.raises(InputError, match=r"^quantize_encoder: quantization selector\(s\) match no dense .*'noth"):
        lo.apply(runtime, "quantize_encoder", include=["nothing.*"])
    monkeypatch.setattr("laya_opt.runs.pipeline.evaluate", lambda *a, **k: pytest.fail("evaluated before the check"))
    config = lo.passes.QuantizeEncoderConfig(group_size=128)
    with pytest.raises(InputError, match=r"^stage 1 \(quantize_encoder\): quantize_encoder: cannot quantize 12"):
        lo.run_pipeline(runtime, [config], dtype="float32")


def test_the_readme_shows_the_shipped_quant_enc8_experiment():
    import yaml

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n# experiments/quant_enc8.yaml\n(.*?)```", text, re.S).group(1)
    assert yaml.safe_load(block) == yaml.safe_load((ROOT / "experiments" / "quant_enc8.yaml").read_text())
