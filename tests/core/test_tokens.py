import json
import re

import pytest
from laya_opt.util.errors import ConfigError
from laya_opt.core.tokens import TOKENIZER_FILES, codec_from_tokenizer, load_codec

from conftest import TINY_SPECIALS, make_tiny_tokenizer


def test_the_tiny_tokenizer_passes_and_its_ids_come_from_the_vocabulary(tiny_codec):
    assert (tiny_codec.cls_id, tiny_codec.sep_id, tiny_codec.pad_id, tiny_codec.mask_id) == (2, 3, 0, 4)


@pytest.mark.parametrize("change, message", [
    ({"mask_token": "[CLS]"}, "mask_token and cls_token are both '[CLS]' (id 2)"),
    ({"pad_token": "[SEP]"}, "pad_token and sep_token are both '[SEP]'"),
    ({"mask_token": "hello"}, "mask_token='hello' (id 5) is an ordinary vocabulary entry"),
    ({"mask_token": "[UNUSED]"}, "special token mask_token='[UNUSED]' is not in the vocabulary"),
    ({"sep_token": None}, "missing special token 'sep_token'"),
])
def test_special_tokens_must_be_distinct_special_entries(change, message):
    specials = {key: value for key, value in dict(TINY_SPECIALS, **change).items() if value is not None}
    with pytest.raises(ConfigError, match="^tok: " + re.escape(message)):
        codec_from_tokenizer(make_tiny_tokenizer(), specials, source="tok")


def test_tokenizer_files_are_named(tmp_path):
    make_tiny_tokenizer().save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(TINY_SPECIALS))
    assert load_codec(tmp_path).mask_id == 4
    assert TOKENIZER_FILES == ("tokenizer.json", "tokenizer_config.json")
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": 7}')
    with pytest.raises(ConfigError, match=r"tokenizer.json: not a valid tokenizers file \("):
        load_codec(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ConfigError, match=r"tokenizer.json: file not found"):
        load_codec(tmp_path)
