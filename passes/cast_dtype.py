"""Cast every floating weight to another dtype: the baseline step that starts every pipeline.

Converting the dtype is a pass like any other (Olive's design): stage 0 of a run applies it to the
FP32 reference to get the FP16 (or BF16) candidate. Packed quantized weights are not floating and stay
as they are. Casting an FP32-loaded model equals loading the checkpoint in the target dtype, since
loading casts the same stored values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import mlx.core as mx
from mlx.utils import tree_map

from laya_opt.core.checkpoint import dtype_name, parse_dtype
from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked
from laya_opt.core.runtime import clone_model

NAME = "cast_dtype"


@dataclass(frozen=True)
@checked
class CastDtypeConfig:
    """Settings of cast_dtype.

    Attributes:
        dtype: the dtype the floating weights, and so the activations, are cast to
    """
    dtype: Literal["float32", "float16", "bfloat16"]


def cast_model(model, dtype: mx.Dtype):
    """A clone of `model` whose floating parameters are `dtype`; the input keeps its arrays."""
    clone = clone_model(model)
    clone.update(tree_map(lambda value: value.astype(dtype) if mx.issubdtype(value.dtype, mx.floating) else value,
                          clone.parameters()))
    mx.eval(clone.parameters())
    return clone


def apply(runtime, config: CastDtypeConfig, data):
    dtype = parse_dtype(config.dtype)
    report = {"from": dtype_name(runtime.dtype), "dtype": config.dtype, "cast": dtype != runtime.dtype}
    if dtype == runtime.dtype:
        return runtime, report
    return runtime.replace(model=cast_model(runtime.model, dtype), dtype=dtype), report


# Exact only when the dtype does not change; the pipeline decides that per step (Step.exact).
PASS = PassSpec(name=NAME, config_type=CastDtypeConfig, apply=apply, exact=False,
                description="casts the floating weights (and so the activations) to another dtype",
                replaces=frozenset({"model", "dtype"}))
