"""Per-unit sensitivity: apply a selector-based pass to one encoder layer (or one Linear) at a time and rank.

The baseline is the runtime the pass would be applied to (same dtype, same kernels), so each row isolates
what applying the pass to that unit alone costs. A pass qualifies when it changes the model and its config
selects modules with `include` / `exclude` path selectors (quantize_encoder). `laya-opt sensitivity` shows
the ranking; `laya-opt bisect` builds its exclusion list from it. Rows are plain dicts (JSON-ready), most
harmful first.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

from laya_opt.passes.contract import PassSpec, apply_pass
from laya_opt.core.quant import dense_modules
from laya_opt.passes.registry import get_pass
from laya_opt.core.runtime import Runtime

from laya_opt.fidelity.checker import EvalRequest, evaluate
from laya_opt.fidelity.decisions import compare

UNITS = ("layer", "linear")
QUANTIZE = "quantize_encoder"
SELECTOR_FIELDS = ("include", "exclude")


def sensitivity_units(runtime: Runtime, unit: str) -> list[tuple[str, str]]:
    """(unit name, include selector): one per encoder layer, or one per encoder Linear."""
    if unit == "layer":
        return [(f"encoder.layers.{index}", f"encoder.layers.{index}")
                for index in range(runtime.encoder_config.num_hidden_layers)]
    if unit == "linear":
        return [(path, path) for path in dense_modules(runtime.model) if path.startswith("encoder.layers.")]
    raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")


def selects_units(spec: PassSpec, config: Any) -> bool:
    """Whether the pass changes the model and chooses its modules by include/exclude selectors."""
    names = {field.name for field in dataclasses.fields(config)}
    return "model" in spec.replaces and set(SELECTOR_FIELDS) <= names


def unit_sensitivity(runtime: Runtime, requests: Sequence[EvalRequest], spec: PassSpec, config: Any,
                     unit: str = "layer", bounds: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """Rank units by the decisions that applying the pass to each one alone changes (decisive changes, then
    every change, then right->wrong), then by the max |dp|.

    The pass keeps every setting of `config` but its `include`, which names one unit; units the config
    already excludes are left out. With `bounds` (metric -> the threshold of a `<=` gate), the second key
    is the unit's worst ratio of a drift metric to its bound instead (`gate_ratio`): the gate that binds
    may be on the logits, not on max |dp|.
    """
    if not requests:
        raise ValueError("unit sensitivity needs at least one request")
    if not selects_units(spec, config):
        raise ValueError(f"pass {spec.name} does not select modules by include/exclude: no units to rank")
    units = [(name, dataclasses.replace(config, include=(selector,)))
             for name, selector in sensitivity_units(runtime, unit) if selector not in config.exclude]
    for name, unit_config in units:  # refuse what cannot be applied (widths, a quantized model) before evaluating
        spec.check(runtime.model, unit_config, f"{spec.name} of {name}")
    baseline = evaluate(runtime, requests)
    rows = []
    for name, unit_config in units:
        candidate = apply_pass(spec, runtime, unit_config)
        metrics = compare(baseline, evaluate(candidate, requests)).metrics
        rows.append({"unit": name, "questions": len(baseline.questions),
                     "argmax_flips": int(metrics["argmax_flips"]), "decisive_flips": int(metrics["decisive_flips"]),
                     "near_tie_flips": int(metrics["near_tie_flips"]), "right_to_wrong": int(metrics["right_to_wrong"]),
                     "wrong_to_right": int(metrics["wrong_to_right"]),
                     "argmax_agreement": metrics["argmax_agreement"], "max_abs_dp": metrics["max_abs_dp"],
                     "mean_abs_dp": metrics["mean_abs_dp"], "max_abs_dlogit": metrics.get("max_abs_dlogit"),
                     "kl_logits_max": metrics.get("kl_logits_max"), **unit_facts(spec, unit_config, candidate)})
        if bounds:
            rows[-1]["gate_ratio"] = max(metrics[name] / bound if bound > 0 else math.inf
                                         for name, bound in bounds.items() if name in metrics)
    second = "gate_ratio" if bounds else "max_abs_dp"
    rows.sort(key=lambda row: (-row["decisive_flips"], -row["argmax_flips"], -row["right_to_wrong"], -row[second],
                               row["unit"]))
    return [dict(row, rank=rank) for rank, row in enumerate(rows, start=1)]


def unit_facts(spec: PassSpec, config: Any, candidate: Runtime) -> dict[str, Any]:
    """What the pass reports about one unit: the scheme and the modules it quantized (quantize_encoder)."""
    report = candidate.info.get(spec.name, {})
    coverage = report.get("coverage") or {"rows": []}
    scheme = getattr(config, "scheme", None)
    return {"scheme": scheme.label if scheme is not None else spec.name,
            "modules": sum(row["status"] == "quantized" for row in coverage["rows"])}


def layer_sensitivity(runtime: Runtime, requests: Sequence[EvalRequest], bits: int = 8, group_size: int = 64,
                      unit: str = "layer", mode: str = "affine") -> list[dict[str, Any]]:
    """`unit_sensitivity` of quantize_encoder at one scheme."""
    spec = get_pass(QUANTIZE)
    return unit_sensitivity(runtime, requests, spec,
                            spec.make_config({"bits": bits, "group_size": group_size, "mode": mode}), unit)


def sensitivity_table(rows: Sequence[dict], title: str = "") -> dict:
    """The ranking as a generic table (title, columns, rows of strings) for the console or report.md."""
    def dlogit(row: dict) -> str:
        return "—" if row.get("max_abs_dlogit") is None else f"{row['max_abs_dlogit']:.4g}"

    ratio = any("gate_ratio" in row for row in rows)
    return {"title": title or "sensitivity (one unit at a time vs the runtime without the pass)",
            "columns": ["rank", "unit", "scheme", "modules", "argmax flips", "decisive flips", "r→w / w→r", "max |dp|",
                        "mean |dp|", "max |Δ logit|"] + (["worst gate ratio"] if ratio else []),
            "rows": [[str(row["rank"]), row["unit"], row["scheme"], str(row["modules"]),
                      f"{row['argmax_flips']}/{row['questions']}", str(row["decisive_flips"]),
                      f"{row.get('right_to_wrong', 0)} / {row.get('wrong_to_right', 0)}",
                      f"{row['max_abs_dp']:.4g}", f"{row['mean_abs_dp']:.4g}", dlogit(row)]
                     + ([f"{row['gate_ratio']:.3g}"] if ratio else []) for row in rows]}
