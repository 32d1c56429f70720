"""Bisect: the first failing pass, the damaged layer named and excluded, the exclusion verified by the gates."""
from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from conftest import write_tiny_checkpoint
from fake_passes import NOISY, write_tiny_suite

from laya_opt.runs.bisect import bisect_experiment, smallest_passing, summary_lines
from laya_opt.cli import main
from laya_opt.runs.experiment import parse_experiment

DAMAGED = 1


def hide_outliers_in_layer(index: int, factor: float = 1000.0):
    """Same function, hostile to quantization: every 8th GeGLU gate channel of one layer is scaled up and the
    matching mlp.Wo input column scaled down, so that column shares its quantization group with weights
    1000 times larger and loses its precision, while the float32 outputs stay as they were."""
    def edit(model):
        mlp = model.encoder.layers[index].mlp
        width = mlp.Wo.weight.shape[1]
        scale = np.ones(width, np.float32)
        scale[::8] = factor
        wi = np.array(mlp.Wi.weight)
        wi[width:] *= scale[:, None]                      # Wi rows: [GELU input | gate]
        mlp.Wi.weight = mx.array(wi)
        mlp.Wo.weight = mx.array(np.array(mlp.Wo.weight) / scale[None, :])
        if "bias" in mlp.Wi:
            bias = np.array(mlp.Wi.bias)
            bias[width:] *= scale
            mlp.Wi.bias = mx.array(bias)

    return edit


@pytest.fixture(scope="module")
def damaged_dir(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("damaged") / "tiny",
                                 edit_model=hide_outliers_in_layer(DAMAGED))


@pytest.fixture(scope="module")
def suite_file(tmp_path_factory):
    return write_tiny_suite(tmp_path_factory.mktemp("suite") / "tiny.jsonl", records=3)


def quantizing(checkpoint, suite, **config):
    return {"name": "quant-tiny", "checkpoint": str(checkpoint), "candidate_dtype": "float32", "suites": [str(suite)],
            "passes": [{"name": "quantize_encoder", "config": {"bits": 8, "group_size": 32, **config}}]}


def test_bisect_names_the_damaged_layer_and_verifies_its_exclusion(damaged_dir, suite_file):
    outcome = bisect_experiment(parse_experiment(quantizing(damaged_dir, suite_file)))
    assert outcome.failing.name == "quantize_encoder" and outcome.failing.index == 1
    assert outcome.ranking[0]["unit"] == f"encoder.layers.{DAMAGED}"
    assert outcome.ranking[0]["argmax_flips"] + outcome.ranking[0]["max_abs_dp"] > \
        max(row["argmax_flips"] + row["max_abs_dp"] for row in outcome.ranking[1:])
    assert outcome.exclude == (f"encoder.layers.{DAMAGED}",) and outcome.fixed
    entry = yaml.safe_load(outcome.snippet)["passes"][0]
    assert entry == {"name": "quantize_encoder", "on_fail": "stop",
                     "config": {"bits": 8, "group_size": 32, "mode": "affine", "include": ["encoder.layers.*"],
                                "exclude": [f"encoder.layers.{DAMAGED}"],
                                "eval_path": "packed", "check_with": "none"}}
    # The snippet, pasted into the experiment, passes every gate.
    pasted = quantizing(damaged_dir, suite_file, exclude=entry["config"]["exclude"])
    assert bisect_experiment(parse_experiment(pasted)).failing is None
    assert any("passes every gate" in line for line in summary_lines(outcome))


def test_a_failing_pass_without_units_is_named_and_not_ranked(tiny_checkpoint_dir, suite_file):
    document = {"name": "noisy", "checkpoint": str(tiny_checkpoint_dir), "candidate_dtype": "float32",
                "suites": [str(suite_file)], "passes": [{"name": "noisy_scorer", "on_fail": "reject"}]}
    outcome = bisect_experiment(parse_experiment(document, extra_passes=(NOISY,)))
    assert outcome.failing.name == "noisy_scorer" and outcome.ranking == () and outcome.exclude is None
    assert "does not select modules" in summary_lines(outcome)[-1]


@pytest.mark.parametrize("units, first_passing, expected", [
    (6, 1, 1), (6, 3, 3), (6, 5, 5), (6, 6, None), (2, 1, 1), (1, 1, None),
])
def test_the_search_finds_the_fewest_exclusions_of_a_monotone_verdict(units, first_passing, expected):
    calls = []

    def passes(count):
        calls.append(count)
        return count >= first_passing

    assert smallest_passing([f"u{i}" for i in range(units)], passes) == expected
    assert len(calls) <= 1 + max(1, units).bit_length()


def test_the_cli_and_run_bisect_print_the_ranking_and_a_verified_snippet(damaged_dir, suite_file, tmp_path):
    path = tmp_path / "quant.yaml"
    path.write_text(yaml.safe_dump(quantizing(damaged_dir, suite_file)))
    done = CliRunner().invoke(main, ["bisect", str(path)])
    assert done.exit_code == 0, done.output
    assert f"encoder.layers.{DAMAGED}" in done.output and "suggested pass entry (verified)" in done.output
    ran = CliRunner().invoke(main, ["run", str(path), "--no-bench", "--bisect", "--output-dir", str(tmp_path / "r")])
    assert ran.exit_code == 3 and f"exclude: [encoder.layers.{DAMAGED}]" in ran.output, ran.output
