"""Encoder-only weight quantization (spec §12.5): `nn.quantize` on a clone of the model, selected by path.

Default targets are the Linears under `encoder.layers.` (Wqkv, attn.Wo, mlp.Wi, mlp.Wo); embeddings,
norms, type embedding, decision head and scorer stay in the candidate dtype unless `include` names
them, and the action head never changes (explicit fp32 contract). Every selected module's input width
is checked against the group size first; nothing is skipped silently. Activations stay in the
candidate dtype: only weights are packed. The report carries the coverage manifest: per module,
quantized (scheme) or kept (why), with bytes and effective bits per weight.

`eval_path` picks the kernel the quantized Linears are evaluated with (`laya_opt.core.quant_eval`): MLX's
packed quantized matmul, or the same quantized values dequantized into dense matmuls, which is what `auto`
picks on the CPU backend, where the packed kernel is slow. The weights, the manifest and an export are the
same either way. Before the dense path is used it is checked against the packed kernel on a few inputs
(`check_with`'s longest requests, or a seeded probe batch) and refused beyond the kernel-rounding bound;
the report's `eval_path` says which path was measured, why, and what the check found.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import mlx.core as mx

from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked
from laya_opt.core.quant import (DEFAULT_INCLUDE, QUANTIZED_TYPES, QuantScheme, check_mode_supported, check_scheme,
                                 check_selectors, coverage_manifest, coverage_summary, dense_modules,
                                 quantization_problems, quantize_modules, select_modules, selector_matches,
                                 weight_modules)
from laya_opt.core.quant_eval import (DENSE, dense_path_check, probe_batch, question_batches, require_agreement,
                                      resolve_eval_path, with_eval_path)
from laya_opt.core.runtime import Runtime, clone_model

NAME = "quantize_encoder"
CHECK_REQUESTS = 2  # the dense path is checked on this many of `check_with`'s longest requests


@dataclass(frozen=True)
@checked
class QuantizeEncoderConfig:
    """Settings of quantize_encoder.

    Attributes:
        bits: bits per weight (affine mode: 2 to 8; the fp modes fix it)
        group_size: weights sharing one scale; it must divide every selected module's input width
        mode: affine, mxfp4, mxfp8 or nvfp4
        include: module path prefixes or globs to quantize (replaces the default, the encoder layers' Linears)
        exclude: module path prefixes or globs kept dense, e.g. encoder.layers.0 (a prefix matches whole path
            parts: encoder.layers.1 is not encoder.layers.10)
        eval_path: packed (MLX's packed kernel), dense (the same quantized values, dequantized into dense
            matmuls, checked against the packed kernel first) or auto (dense on the CPU backend, packed elsewhere)
        check_with: a suite or workload whose longest requests check the dense path; none: a seeded probe batch
    """
    bits: int = 8
    group_size: int = 64
    mode: str = "affine"        # affine | mxfp4 | mxfp8 | nvfp4 (the fp formats fix bits and group size)
    # module path prefixes or globs; replaces the default when given
    include: tuple[str, ...] = field(default=DEFAULT_INCLUDE, metadata={"nonempty": True})
    exclude: tuple[str, ...] = ()
    # auto: dense-dequantized matmuls on the CPU backend (fast), MLX's packed kernel elsewhere. The default
    # keeps the real packed modules (what `lo.apply` always returned); the shipped experiments say auto.
    eval_path: Literal["auto", "packed", "dense"] = "packed"
    # a suite or workload whose longest requests check the dense path (data need); none: a seeded probe batch
    check_with: str = field(default="none", metadata={"nonempty": True})

    def __post_init__(self):
        check_scheme(self.bits, self.group_size, self.mode, where="scheme")
        check_selectors(self.include, "include")
        check_selectors(self.exclude, "exclude")

    @property
    def scheme(self) -> QuantScheme:
        return QuantScheme(self.bits, self.group_size, self.mode)


def check_applicable(model, config: QuantizeEncoderConfig) -> None:
    """Everything that can be checked without quantizing: selectors match, widths fit, nothing is packed yet.

    `explain` and the runner call this before any reference evaluation, so a bad recipe fails in seconds.
    """
    check_mode_supported(config.scheme)
    packed = [path for path, module in weight_modules(model).items()
              if isinstance(module, QUANTIZED_TYPES) and any(selector_matches(path, s) for s in config.include)]
    if packed:
        raise ValueError(f"{NAME}: the model is already quantized at {', '.join(packed[:3])}"
                         f"{' ...' if len(packed) > 3 else ''}; quantize the dense checkpoint instead")
    selection = select_modules(model, config.include, config.exclude)
    candidates = dense_modules(model)
    problems = quantization_problems({path: candidates[path] for path in selection.selected}, config.scheme,
                                     selection.selected)
    if problems:
        raise ValueError(f"{NAME}: cannot quantize {len(problems)} selected module(s) at {config.scheme.label}:\n  "
                         + "\n  ".join(problems))


def evaluation_path(packed: Runtime, config: QuantizeEncoderConfig, data) -> tuple[Runtime, dict]:
    """The runtime whose quantized Linears run the configured path, and the report entry saying which and why.

    The dense path is used only after it matched the packed kernel within rounding (DensePathMismatch otherwise).
    """
    path, why = resolve_eval_path(config.eval_path)
    if path != DENSE:
        return packed, {"path": path, "why": why, "check": None}
    if config.check_with != "none":
        batches = question_batches(packed, data["check_with"], CHECK_REQUESTS)
        inputs = f"the {CHECK_REQUESTS} longest requests of {config.check_with!r}"
    else:
        batches, inputs = [probe_batch(packed)], "a seeded probe batch (check_with: none)"
    check = dense_path_check(packed, batches, inputs)
    require_agreement(check)
    return packed.replace(model=with_eval_path(packed.model, DENSE)), {"path": path, "why": why,
                                                                        "check": check.as_dict()}


def kernel_note(path: str) -> str:
    """What the stage's measurements are of: never let a dense-path timing pass for packed-kernel speed."""
    if path == DENSE:
        return ("kernel: dense-dequantized matmuls (same quantized values; timed as dense GEMMs, "
                "not packed-kernel speed)")
    return "kernel: packed (MLX quantized matmul)"


def apply(runtime: Runtime, config: QuantizeEncoderConfig, data):
    check_applicable(runtime.model, config)
    model = clone_model(runtime.model)  # quantized in place: the input runtime's model is never touched
    selection = select_modules(model, config.include, config.exclude)
    quantize_modules(model, {path: config.scheme for path in selection.selected})
    mx.eval(model.parameters())
    manifest = coverage_manifest(model, runtime.dtype, selection.kept)
    child, eval_path = evaluation_path(runtime.replace(model=model), config, data)
    report = {"scheme": config.scheme.as_dict(), "include": list(config.include), "exclude": list(config.exclude),
              "coverage": manifest.to_dict(),
              "summary": f"{coverage_summary(manifest)}; {kernel_note(eval_path['path'])}",
              "eval_path": eval_path, "tables": [manifest.table()]}
    return child, report


PASS = PassSpec(
    name=NAME,
    config_type=QuantizeEncoderConfig,
    apply=apply,
    exact=False,
    description="weight-only group quantization of the encoder Linears (checked group widths, action head dense)",
    replaces=frozenset({"model"}),
    precheck=check_applicable,
    needs={"check_with": "requests"},
)
