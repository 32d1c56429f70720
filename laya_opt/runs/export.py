"""Write the quantized checkpoint an accepted stage produced (the experiment's `export:` or `run --export-*`).

The export holds the stage's model: packed weights, scales and biases with `mlx_config.json` naming every
quantized module (`checkpoint_write.save_quantized`, atomic, refusing an existing directory). Passes that
change only the runtime (a compiled forward, a planner, kernels) have no place in a checkpoint; the
export record names them, so nobody expects their speed from the files alone.
"""
from __future__ import annotations

from laya_opt.core.checkpoint_write import save_quantized
from laya_opt.runs.experiment import ExportPlan
from laya_opt.runs.pipeline import PipelineResult
from laya_opt.core.quant import QUANTIZED_TYPES, weight_modules
from laya_opt.passes.registry import Registry


def export_stage(plan: ExportPlan, result: PipelineResult, registry: Registry) -> dict:
    """{status: written | skipped | failed, summary, ...}; never raises for the stage's own state."""
    stage = next((stage for stage in result.stages if stage.name == plan.stage), None)
    where = {"stage": plan.stage, "path": str(plan.path)}
    if stage is None:
        return {**where, "status": "skipped", "summary": f"stage {plan.stage} was never reached; nothing exported"}
    label = f"stage {stage.index} {stage.name}"
    if not stage.accepted or stage.runtime is None:
        return {**where, "status": "skipped",
                "summary": f"{label} was {stage.verdict}; only an accepted stage is exported"}
    quantized = [path for path, module in weight_modules(stage.runtime.model).items()
                 if isinstance(module, QUANTIZED_TYPES)]
    if not quantized:
        return {**where, "status": "skipped",
                "summary": f"{label} holds no quantized module; export writes quantized checkpoints"}
    runtime_only = [name for name in stage.runtime.applied
                    if name in registry.passes and "model" not in registry.get(name).replaces]
    try:
        save_quantized(stage.runtime, plan.path)
    except (OSError, ValueError) as exc:  # a disk problem, or the path appeared during the run
        return {**where, "status": "failed", "summary": f"{label}: export to {plan.path} failed: {exc}"}
    left_out = f"; not in the files (runtime-only passes): {', '.join(runtime_only)}" if runtime_only else ""
    return {**where, "status": "written", "quantized_modules": len(quantized), "runtime_only_passes": runtime_only,
            "summary": f"{label} written to {plan.path} ({len(quantized)} quantized modules{left_out})"}
