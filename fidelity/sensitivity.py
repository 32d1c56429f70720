"""Per-unit quantization sensitivity: quantize one encoder layer (or one Linear) at a time and rank the units.

The baseline is the unquantized runtime (same dtype, same kernels), so each row isolates what
quantizing that unit alone costs. Rows are plain dicts (JSON-ready), most harmful first.
"""
from __future__ import annotations

from typing import Any, Sequence

from laya_opt.passes_api import apply_pass
from laya_opt.quant import dense_modules
from laya_opt.registry import get_pass
from laya_opt.runtime import Runtime

from .checker import EvalRequest, evaluate
from .metrics import compare

UNITS = ("layer", "linear")
QUANTIZE = "quantize_encoder"


def sensitivity_units(runtime: Runtime, unit: str) -> list[tuple[str, str]]:
    """(unit name, include selector): one per encoder layer, or one per encoder Linear."""
    if unit == "layer":
        return [(f"encoder.layers.{index}", f"encoder.layers.{index}")
                for index in range(runtime.encoder_config.num_hidden_layers)]
    if unit == "linear":
        return [(path, path) for path in dense_modules(runtime.model) if path.startswith("encoder.layers.")]
    raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")


def layer_sensitivity(runtime: Runtime, requests: Sequence[EvalRequest], bits: int = 8, group_size: int = 64,
                      unit: str = "layer", mode: str = "affine") -> list[dict[str, Any]]:
    """Rank units by the argmax flips, then the max |dp|, that quantizing each one alone causes."""
    if not requests:
        raise ValueError("layer_sensitivity needs at least one request")
    spec = get_pass(QUANTIZE)
    units = [(name, spec.make_config({"bits": bits, "group_size": group_size, "mode": mode, "include": [selector]}))
             for name, selector in sensitivity_units(runtime, unit)]
    for name, config in units:  # refuse what cannot be quantized (widths, a quantized model) before evaluating
        spec.check(runtime.model, config, f"{QUANTIZE} of {name}")
    baseline = evaluate(runtime, requests)
    rows = []
    for name, config in units:
        candidate = apply_pass(spec, runtime, config)
        metrics = compare(baseline, evaluate(candidate, requests)).metrics
        coverage = candidate.info[QUANTIZE]["coverage"]
        rows.append({"unit": name, "scheme": config.scheme.label,
                     "modules": sum(row["status"] == "quantized" for row in coverage["rows"]),
                     "questions": len(baseline.questions), "argmax_flips": int(metrics["argmax_flips"]),
                     "argmax_agreement": metrics["argmax_agreement"], "max_abs_dp": metrics["max_abs_dp"],
                     "mean_abs_dp": metrics["mean_abs_dp"]})
    rows.sort(key=lambda row: (-row["argmax_flips"], -row["max_abs_dp"], row["unit"]))
    return [dict(row, rank=rank) for rank, row in enumerate(rows, start=1)]


def sensitivity_table(rows: Sequence[dict]) -> dict:
    """The ranking as a generic table (title, columns, rows of strings) for the console or report.md."""
    return {"title": "quantization sensitivity (one unit at a time vs the unquantized candidate)",
            "columns": ["rank", "unit", "scheme", "modules", "argmax flips", "agreement", "max |dp|", "mean |dp|"],
            "rows": [[str(row["rank"]), row["unit"], row["scheme"], str(row["modules"]),
                      f"{row['argmax_flips']}/{row['questions']}", f"{row['argmax_agreement']:.4f}",
                      f"{row['max_abs_dp']:.4g}", f"{row['mean_abs_dp']:.4g}"] for row in rows]}
