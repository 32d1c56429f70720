"""A safetensors header read and checked without loading a tensor: names, dtypes, shapes and byte ranges.

The format is an 8-byte little-endian header length, a JSON header `{name: {"dtype", "shape",
"data_offsets"}, "__metadata__": {str: str}}`, then the tensor bytes. The checks are those of the
format itself: every byte range is `prod(shape) * itemsize` long, the ranges tile the data region with
no gap or overlap, and the data region ends where the file ends. A truncated, padded or hand-edited
file is then refused here, naming the file and the tensor, before MLX reads it.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx

from laya_opt.util.errors import CheckpointError
from laya_opt.util.jsonio import loads

# safetensors dtype code -> (MLX dtype, bytes per element); F64 and the 8-bit floats MLX cannot load.
DTYPES = {"BOOL": (mx.bool_, 1), "U8": (mx.uint8, 1), "I8": (mx.int8, 1), "U16": (mx.uint16, 2),
          "I16": (mx.int16, 2), "U32": (mx.uint32, 4), "I32": (mx.int32, 4), "U64": (mx.uint64, 8),
          "I64": (mx.int64, 8), "F16": (mx.float16, 2), "BF16": (mx.bfloat16, 2), "F32": (mx.float32, 4)}
MAX_HEADER_BYTES = 100 << 20   # the limit the safetensors library itself applies
ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header declares it; `dtype` and `shape` read like an mx.array's."""

    name: str
    dtype: mx.Dtype
    shape: tuple[int, ...]
    begin: int
    end: int


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(path: Path, name: str, entry) -> TensorInfo:
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
        raise CheckpointError(f"{where}: header entry must have exactly the keys {', '.join(sorted(ENTRY_KEYS))}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(code, str) or code not in DTYPES:
        raise CheckpointError(f"{where}: unsupported dtype {code!r}; supported: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(size) for size in shape):
        raise CheckpointError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise CheckpointError(f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, got {offsets!r}")
    dtype, itemsize = DTYPES[code]
    if offsets[1] - offsets[0] != math.prod(shape) * itemsize:
        raise CheckpointError(f"{where}: {offsets[1] - offsets[0]:,} bytes for shape {tuple(shape)} of {code} "
                              f"({math.prod(shape) * itemsize:,} expected)")
    return TensorInfo(name, dtype, tuple(shape), offsets[0], offsets[1])


def read_header(path: str | Path) -> dict[str, TensorInfo]:
    """Every tensor of a safetensors file, by name, in header order; any inconsistency is a CheckpointError."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            length = struct.unpack("<Q", prefix)[0] if len(prefix) == 8 else None
            if length is None or not 2 <= length <= min(MAX_HEADER_BYTES, size - 8):
                raise CheckpointError(f"{path}: not a safetensors file (file of {size:,} bytes, header length "
                                      f"{'missing' if length is None else f'{length:,}'})")
            raw = handle.read(length)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: the safetensors header is not UTF-8 text") from None
    header = loads(text, f"{path} (safetensors header)", CheckpointError, max_depth=3)
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the safetensors header must be a JSON object")
    metadata = header.pop("__metadata__", None) or {}   # MLX writes null when there is none
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise CheckpointError(f"{path}: __metadata__ must map strings to strings")
    tensors = {name: _entry(path, name, entry) for name, entry in header.items()}
    position = 0
    for info in sorted(tensors.values(), key=lambda item: (item.begin, item.end)):
        if info.begin != position:
            problem = "overlaps the previous tensor" if info.begin < position else "leaves a gap before it"
            raise CheckpointError(f"{path}: tensor {info.name!r} at byte {info.begin:,} {problem}")
        position = info.end
    data_bytes = size - 8 - length
    if position != data_bytes:
        state = "truncated" if position > data_bytes else "has trailing bytes"
        raise CheckpointError(f"{path}: {state}: the header describes {position:,} bytes of tensor data, "
                              f"the file holds {data_bytes:,}")
    return tensors
