"""Encoder-only weight quantization (spec §12.5): `nn.quantize` on a clone of the model, selected by path.

Default targets are the Linears under `encoder.layers.` (Wqkv, attn.Wo, mlp.Wi, mlp.Wo); embeddings,
norms, type embedding, decision head and scorer stay in the candidate dtype unless `include` names
them, and the action head never changes (explicit fp32 contract). Every selected module's input width
is checked against the group size first; nothing is skipped silently. Activations stay in the
candidate dtype: only weights are packed. The report carries the coverage manifest: per module,
quantized (scheme) or kept (why), with bytes and effective bits per weight.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx

from laya_opt.passes.contract import PassSpec
from laya_opt.util.schema import checked
from laya_opt.core.quant import (DEFAULT_INCLUDE, QUANTIZED_TYPES, QuantScheme, check_mode_supported, check_scheme,
                                 check_selectors, coverage_manifest, coverage_summary, dense_modules, quantization_problems,
                                 quantize_modules, select_modules, selector_matches, weight_modules)
from laya_opt.core.runtime import Runtime, clone_model

NAME = "quantize_encoder"


@dataclass(frozen=True)
@checked
class QuantizeEncoderConfig:
    """Settings of quantize_encoder.

    Attributes:
        bits: bits per weight (affine mode: 2 to 8; the fp modes fix it)
        group_size: weights sharing one scale; it must divide every selected module's input width
        mode: affine, mxfp4, mxfp8 or nvfp4
        include: module path prefixes or globs to quantize (replaces the default, the encoder layers' Linears)
        exclude: module path prefixes or globs kept dense, e.g. encoder.layers.0.
    """
    bits: int = 8
    group_size: int = 64
    mode: str = "affine"        # affine | mxfp4 | mxfp8 | nvfp4 (the fp formats fix bits and group size)
    # module path prefixes or globs; replaces the default when given
    include: tuple[str, ...] = field(default=DEFAULT_INCLUDE, metadata={"nonempty": True})
    exclude: tuple[str, ...] = ()

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


def apply(runtime: Runtime, config: QuantizeEncoderConfig, data):
    check_applicable(runtime.model, config)
    model = clone_model(runtime.model)  # quantized in place: the input runtime's model is never touched
    selection = select_modules(model, config.include, config.exclude)
    quantize_modules(model, {path: config.scheme for path in selection.selected})
    mx.eval(model.parameters())
    manifest = coverage_manifest(model, runtime.dtype, selection.kept)
    report = {"scheme": config.scheme.as_dict(), "include": list(config.include), "exclude": list(config.exclude),
              "coverage": manifest.to_dict(), "summary": coverage_summary(manifest), "tables": [manifest.table()]}
    return runtime.replace(model=model), report


PASS = PassSpec(
    name=NAME,
    config_type=QuantizeEncoderConfig,
    apply=apply,
    exact=False,
    description="weight-only group quantization of the encoder Linears (checked group widths, action head dense)",
    replaces=frozenset({"model"}),
    precheck=check_applicable,
)
