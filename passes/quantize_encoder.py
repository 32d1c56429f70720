"""Encoder-only weight quantization (spec §12.5): `nn.quantize` on a clone of the model, selected by path.

Default targets are the Linears under `encoder.layers.` (Wqkv, attn.Wo, mlp.Wi, mlp.Wo); embeddings,
norms, type embedding, decision head and scorer stay in the candidate dtype unless `include` names
them, and the action head never changes (explicit fp32 contract). Every selected module's input width
is checked against the group size first; nothing is skipped silently. Activations stay in the
candidate dtype: only weights are packed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import mlx.core as mx

from laya_opt.passes_api import PassSpec
from laya_opt.quantization import (DEFAULT_INCLUDE, CoverageManifest, QuantScheme, check_mode_supported,
                                   check_scheme, check_selectors, coverage_manifest, coverage_table, dense_modules,
                                   quantization_problems, quantize_modules, select_modules)
from laya_opt.runtime import Runtime, clone_model

NAME = "quantize_encoder"
SENSITIVITY_UNITS = ("layer", "linear")


@dataclass(frozen=True)
class QuantizeEncoderConfig:
    bits: int = 8
    group_size: int = 64
    mode: str = "affine"        # affine | mxfp4 | mxfp8 | nvfp4 (the fp formats fix bits and group size)
    include: tuple[str, ...] = DEFAULT_INCLUDE  # module path prefixes or globs; replaces the default when given
    exclude: tuple[str, ...] = ()

    def __post_init__(self):
        check_scheme(self.bits, self.group_size, self.mode, where="scheme")
        if not self.include:
            raise ValueError("include must name at least one module path or glob")
        check_selectors(self.include, "include")
        check_selectors(self.exclude, "exclude")

    @property
    def scheme(self) -> QuantScheme:
        return QuantScheme(self.bits, self.group_size, self.mode)


def quantized_model(model, config: QuantizeEncoderConfig):
    """A quantized clone of `model` and the selection that built it; the input model is never touched."""
    check_mode_supported(config.scheme)
    clone = clone_model(model)
    selection = select_modules(clone, config.include, config.exclude)
    candidates = dense_modules(clone)
    problems = quantization_problems({path: candidates[path] for path in selection.selected}, config.scheme,
                                     selection.selected)
    if problems:
        raise ValueError(f"{NAME}: cannot quantize {len(problems)} selected module(s) at {config.scheme.label}:\n  "
                         + "\n  ".join(problems))
    quantize_modules(clone, {path: config.scheme for path in selection.selected})
    mx.eval(clone.parameters())
    return clone, selection


def apply(runtime: Runtime, config: QuantizeEncoderConfig) -> Runtime:
    model, selection = quantized_model(runtime.model, config)
    manifest = coverage_manifest(model, runtime.dtype, selection.kept)
    report = {"scheme": config.scheme.as_dict(), "include": list(config.include), "exclude": list(config.exclude),
              "coverage": manifest.to_dict()}
    # A quantized model is a separate model identity (spec §12.5): the scheme and selection are part of it.
    selectors = ",".join(config.include) + (f"-{','.join(config.exclude)}" if config.exclude else "")
    return runtime.replace(model=model, identity=f"{runtime.identity}+{NAME}({config.scheme.label}:{selectors})",
                           applied=runtime.applied + (NAME,), info={**runtime.info, NAME: report})


PASS = PassSpec(
    name=NAME,
    config_type=QuantizeEncoderConfig,
    apply=apply,
    exact=False,
    description="weight-only group quantization of the encoder Linears (checked group widths, action head dense)",
    replaces=frozenset({"model"}),
)


def coverage_of(runtime: Runtime):
    """The coverage manifest of a runtime this pass produced, as a rich Table."""
    if NAME not in runtime.info:
        raise ValueError(f"runtime {runtime.identity} was not produced by {NAME}")
    return coverage_table(CoverageManifest.from_dict(runtime.info[NAME]["coverage"]))


# ----------------------------------------------------------------------------- sensitivity


def sensitivity_units(runtime: Runtime, unit: str) -> list[tuple[str, str]]:
    """(unit name, include selector): one per encoder layer, or one per encoder Linear."""
    if unit == "layer":
        return [(f"encoder.layers.{index}", f"encoder.layers.{index}")
                for index in range(runtime.encoder_config.num_hidden_layers)]
    if unit == "linear":
        return [(path, path) for path in dense_modules(runtime.model) if path.startswith("encoder.layers.")]
    raise ValueError(f"unit must be one of {', '.join(SENSITIVITY_UNITS)}, got {unit!r}")


def _eval_requests(requests: Sequence[Any]):
    from fidelity.checker import EvalRequest

    converted = []
    for index, request in enumerate(requests):
        if isinstance(request, EvalRequest):
            converted.append(request)
        elif isinstance(request, (tuple, list)) and len(request) == 2:
            converted.append(EvalRequest(record_id=f"request#{index}", state=request[0], questions=request[1]))
        else:
            raise ValueError(f"request {index}: expected an EvalRequest or a (state, questions) pair, "
                             f"got {type(request).__name__}")
    if not converted:
        raise ValueError("layer_sensitivity needs at least one request")
    return converted


def layer_sensitivity(reference_runtime: Runtime, requests: Sequence[Any], bits: int = 8, group_size: int = 64,
                      unit: str = "layer", mode: str = "affine") -> list[dict]:
    """Quantize one encoder layer (or one Linear) at a time and rank units by argmax flips, then max |dp|.

    The reference is the unquantized candidate (same dtype, same kernels), so each row isolates what
    quantizing that unit alone costs. Rows are plain dicts (JSON-ready), most harmful first.
    """
    from fidelity.checker import evaluate
    from fidelity.metrics import compare

    eval_requests = _eval_requests(requests)
    units = sensitivity_units(reference_runtime, unit)
    baseline = evaluate(reference_runtime, eval_requests)
    rows = []
    for name, selector in units:
        config = QuantizeEncoderConfig(bits=bits, group_size=group_size, mode=mode, include=(selector,))
        candidate = apply(reference_runtime, config)
        metrics = compare(baseline, evaluate(candidate, eval_requests)).metrics
        coverage = candidate.info[NAME]["coverage"]
        rows.append({"unit": name, "scheme": config.scheme.label,
                     "modules": sum(row["status"] == "quantized" for row in coverage["rows"]),
                     "questions": len(baseline.questions), "argmax_flips": int(metrics["argmax_flips"]),
                     "argmax_agreement": metrics["argmax_agreement"], "max_abs_dp": metrics["max_abs_dp"],
                     "mean_abs_dp": metrics["mean_abs_dp"]})
    rows.sort(key=lambda row: (-row["argmax_flips"], -row["max_abs_dp"], row["unit"]))
    return [dict(row, rank=rank) for rank, row in enumerate(rows, start=1)]


def sensitivity_table(rows: Sequence[dict]):
    from rich.table import Table

    table = Table(title="quantization sensitivity (one unit at a time vs the unquantized candidate)")
    for name in ("rank", "unit", "scheme", "modules", "argmax flips", "agreement", "max |dp|", "mean |dp|"):
        table.add_column(name, justify="left" if name in ("unit", "scheme") else "right")
    for row in rows:
        table.add_row(str(row["rank"]), row["unit"], row["scheme"], str(row["modules"]),
                      f"{row['argmax_flips']}/{row['questions']}", f"{row['argmax_agreement']:.4f}",
                      f"{row['max_abs_dp']:.4g}", f"{row['mean_abs_dp']:.4g}")
    return table
