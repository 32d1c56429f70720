"""Config classes: one naming rule (the pass name in CamelCase + "Config", old names kept as aliases), every
setting documented."""
from __future__ import annotations

import pytest

import laya_opt as lo
from laya_opt.passes import OLD_CONFIG_NAMES, config_class_name, pass_modules
from laya_opt.util.settings_doc import attribute_docs, describe_settings


@pytest.mark.parametrize("module", pass_modules(), ids=lambda module: module.PASS.name)
def test_every_built_in_config_class_is_named_after_its_pass(module):
    spec = module.PASS
    assert spec.config_type.__name__ == config_class_name(spec.name)
    assert getattr(lo.passes, config_class_name(spec.name)) is spec.config_type


def test_the_rule_on_known_names():
    assert config_class_name("head_prune_final") == "HeadPruneFinalConfig"
    assert config_class_name("length_sorted_batching") == "LengthSortedBatchingConfig"
    assert config_class_name("qkv_views") == "QkvViewsConfig"


@pytest.mark.parametrize("old, pass_name", sorted(OLD_CONFIG_NAMES.items()))
def test_the_old_names_still_build_the_same_config(old, pass_name):
    config_type = getattr(lo.passes, old)
    assert config_type.__name__ == config_class_name(pass_name) and old in dir(lo.passes)
    assert config_type is lo.passes.__getattr__(config_class_name(pass_name))


def test_an_unknown_config_name_lists_the_known_ones():
    with pytest.raises(AttributeError, match="HeadPruneFinalConfig"):
        lo.passes.HeadPrunConfig  # noqa: B018


@pytest.mark.parametrize("module", pass_modules(), ids=lambda module: module.PASS.name)
def test_every_setting_of_every_built_in_pass_says_what_it_does(module):
    """`laya-opt passes` shows these; a new setting without a line in `Attributes:` fails here."""
    config_type = module.PASS.config_type
    fields = [setting.name for setting in describe_settings(config_type)]
    assert [name for name in fields if not describe_settings(config_type)[fields.index(name)].description] == []
    assert set(attribute_docs(config_type)) <= set(fields)  # no description of a setting that does not exist
