import pytest

from laya_opt.util.errors import ConfigError, InputError, QuestionError
from laya_opt.util.jsonio import MAX_DEPTH, loads, nesting_depth, read_json, read_text


def test_duplicate_keys_are_errors_at_any_depth():
    with pytest.raises(QuestionError, match=r"^q.json: duplicate key 'a' \(the later value would silently replace"):
        loads('{"a": 1, "a": 2}', "q.json", QuestionError)
    with pytest.raises(InputError, match="duplicate key 'x'"):
        loads('{"outer": [{"x": 1, "x": 1}]}', "f")
    assert loads('{"a": {"a": 1}}', "f") == {"a": {"a": 1}}  # the same key in two objects is fine


def test_nesting_is_bounded_without_recursion_errors():
    assert nesting_depth("text") == 0 and nesting_depth([]) == 1 and nesting_depth({"a": [1, {"b": []}]}) == 4
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f") is not None
    for depth in (MAX_DEPTH + 1, 100_000):  # the second one overflows Python's own parser first
        with pytest.raises(InputError, match=f"^f: nested more than {MAX_DEPTH} levels deep$"):
            loads("[" * depth + "]" * depth, "f")
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    assert nesting_depth(deep, limit=5) == 6  # stops counting past the limit


def test_invalid_json_names_the_source():
    with pytest.raises(ConfigError, match=r"^c.json: invalid JSON \(Expecting"):
        loads("{oops", "c.json", ConfigError)


def test_files_are_named_when_missing_unreadable_oversized_or_not_utf8(tmp_path):
    with pytest.raises(InputError, match=r"none.json: file not found"):
        read_json(tmp_path / "none.json")
    with pytest.raises(InputError, match=r"is a directory"):
        read_text(tmp_path)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{\n"a": "caf\xe9"}')
    with pytest.raises(ConfigError, match=r"latin.json: not UTF-8 text \(line 2, byte 11: invalid continuation"):
        read_json(latin, ConfigError)
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 100 + "1]")
    with pytest.raises(InputError, match=r"big.json: 203 bytes, more than the 64 allowed"):
        read_text(big, max_bytes=64)
