import json
import struct

import mlx.core as mx
import pytest

from laya_opt.util.errors import CheckpointError
from laya_opt.core.tensorfile import read_header


def write_raw(path, header: dict, data: bytes, length: int | None = None) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_the_header_of_an_mlx_file_reads_like_its_arrays(tmp_path):
    path = tmp_path / "w.safetensors"
    mx.save_safetensors(str(path), {"a": mx.zeros((2, 3), dtype=mx.float16), "b": mx.zeros((4,), dtype=mx.uint32),
                                    "empty": mx.zeros((0,))}, metadata={"format": "pt"})
    header = read_header(path)
    assert {name: (info.dtype, info.shape) for name, info in header.items()} == {
        "a": (mx.float16, (2, 3)), "b": (mx.uint32, (4,)), "empty": (mx.float32, (0,))}


@pytest.mark.parametrize("header, data, message", [
    ({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 12, 16)}, bytes(16), "tensor 'b' at byte 12 leaves a gap"),
    ({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}, bytes(8), "tensor 'b' at byte 4 overlaps"),
    ({"a": entry("F32", [2], 0, 8)}, bytes(4), "truncated: the header describes 8 bytes of tensor data, the file"),
    ({"a": entry("F32", [2], 0, 8)}, bytes(9), "has trailing bytes"),
    ({"a": entry("F32", [3], 0, 8)}, bytes(8), "tensor 'a': 8 bytes for shape (3,) of F32 (12 expected)"),
    ({"a": entry("F64", [1], 0, 8)}, bytes(8), "tensor 'a': unsupported dtype 'F64'"),
    ({"a": entry(["F32"], [1], 0, 4)}, bytes(4), "tensor 'a': unsupported dtype"),
    ({"a": entry("F32", [-1], 0, 4)}, bytes(4), "shape must be a list of non-negative integers"),
    ({"a": entry("F32", [True], 0, 4)}, bytes(4), "shape must be a list of non-negative integers"),
    ({"a": entry("F32", [1], 4, 0)}, bytes(4), "data_offsets must be [begin, end]"),
    ({"a": {"dtype": "F32", "shape": [1]}}, bytes(4), "header entry must have exactly the keys"),
    ({"__metadata__": {"format": 1}}, b"", "__metadata__ must map strings to strings"),
    ([1, 2], b"", "must be a JSON object"),
])
def test_inconsistent_headers_name_the_file_and_tensor(tmp_path, header, data, message):
    path = tmp_path / "w.safetensors"
    write_raw(path, header, data)
    with pytest.raises(CheckpointError) as info:
        read_header(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_length_prefix_duplicates_and_encoding_are_checked(tmp_path):
    path = tmp_path / "w.safetensors"
    write_raw(path, {"a": entry("F32", [1], 0, 4)}, bytes(4), length=10 ** 12)
    with pytest.raises(CheckpointError, match="not a safetensors file .*header length 1,000,000,000,000"):
        read_header(path)
    path.write_bytes(b"\x01")
    with pytest.raises(CheckpointError, match="header length missing"):
        read_header(path)
    text = b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], ' \
           b'"data_offsets": [0, 4]}}'
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(4))
    with pytest.raises(CheckpointError, match="duplicate key 'a'"):
        read_header(path)
    path.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{}" + bytes(4))
    with pytest.raises(CheckpointError, match="header is not UTF-8"):
        read_header(path)
