"""Synthetic calibration measurements: every source, dtype and metric has its own known value."""
from __future__ import annotations

from laya_opt.fidelity.gate_derivation import CALIBRATED_METRICS, NOISE_SOURCES

# float32: every source measurably noisy, each a different size; float16: bit-identical except padding;
# bfloat16: bit-identical everywhere. Metric values differ by metric so a mix-up shows.
SCALE = {"max_abs_dp": 1.0, "max_abs_dlogit": 10.0, "kl_logits_max": 1e-3}
FLOAT32_NOISE = {"run_to_run": 0.0, "row_split": 1e-4, "batch_1": 3e-4, "batch_4": 2e-4, "length_sorted": 2.5e-4,
                 "padded_16": 5e-4}
FLOAT16_NOISE = dict.fromkeys(NOISE_SOURCES, 0.0) | {"padded_16": 8e-3}
DRIFT = {"float16": 0.013, "bfloat16": 0.12}
MAX_ABS_LOGIT = 40.0


def source_metrics(value: float) -> dict[str, float]:
    return {metric: value * SCALE[metric] for metric in CALIBRATED_METRICS} | {"argmax_flips": 0.0,
                                                                             "decisive_flips": 0.0}


def measured(dtypes=("float32", "float16", "bfloat16")) -> dict:
    noise_by_dtype = {"float32": FLOAT32_NOISE, "float16": FLOAT16_NOISE,
                      "bfloat16": dict.fromkeys(NOISE_SOURCES, 0.0)}
    return {"questions": 12, "max_abs_logit": MAX_ABS_LOGIT,
            "noise": {dtype: {source: source_metrics(value) for source, value in noise_by_dtype[dtype].items()}
                      for dtype in dtypes},
            "drift": {dtype: source_metrics(DRIFT[dtype]) for dtype in dtypes if dtype != "float32"}}
