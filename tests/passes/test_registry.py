"""Pass lookup by name: a misspelt name gets the closest known names, with the error type it always had."""
from __future__ import annotations

import pytest
import yaml

import laya_opt as lo
from laya_opt.passes.registry import UnknownPass, did_you_mean, get_pass
from laya_opt.runs.experiment import ExperimentError, load_experiment
from laya_opt.util.errors import InputError


@pytest.mark.parametrize("typo, meant", [("compile_bucket", "compile_buckets"), ("head_prune", "head_prune_final"),
                                         ("quantise_encoder", "quantize_encoder"),
                                         ("local_window", "local_window_attention")])
def test_a_misspelt_pass_name_suggests_the_right_one(typo, meant):
    with pytest.raises(UnknownPass, match=f"unknown pass '{typo}'; did you mean '{meant}'\\? known passes: ") as caught:
        get_pass(typo)
    assert isinstance(caught.value, InputError)


def test_a_name_like_no_pass_gets_no_suggestion():
    with pytest.raises(UnknownPass, match="unknown pass 'zzz'; known passes: cast_dtype, "):
        get_pass("zzz")
    assert did_you_mean("zzz", ["cast_dtype"]) == ""
    assert did_you_mean("mask_once", ["masks_once", "qkv_views"]) == "did you mean 'masks_once'? "


def test_lo_apply_by_a_misspelt_name(tiny_checkpoint_dir):
    with pytest.raises(InputError, match="unknown pass 'compile_bucket'; did you mean 'compile_buckets'\\?"):
        lo.apply(lo.load(tiny_checkpoint_dir), "compile_bucket")


def test_an_experiment_file_with_a_misspelt_pass_name(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump({"name": "typo", "passes": [{"name": "head_prune_finale"}]}))
    with pytest.raises(ExperimentError, match=r"passes\[0\]\.name: unknown pass 'head_prune_finale'; "
                                              r"did you mean 'head_prune_final'\?"):
        load_experiment(path)
