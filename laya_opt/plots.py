"""PNG plots next to report.md: latency distributions, and speed against fidelity per stage or runtime.

matplotlib is optional (`pip install laya-opt[plots]`); without it nothing is drawn and the caller's
report says so. Inputs are plain data read from results: a head-to-head record, or a run's timings.json
and stages.jsonl.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Iterable, Mapping

LATENCY_PNG = "latency.png"
SPEED_FIDELITY_PNG = "speed_vs_fidelity.png"
FLOOR = 1e-7  # max |dp| of exactly 0 still needs a place on a log axis


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    return plt


def latency_plot(samples: Mapping[str, Mapping[str, list[float]]], path: Path, title: str) -> None:
    """One panel per workload: the end-to-end latency distribution of every runtime."""
    plt = _pyplot()
    import matplotlib

    # `orientation` replaced `vert` in matplotlib 3.10
    horizontal = {"orientation": "horizontal"} if tuple(map(int, matplotlib.__version__.split(".")[:2])) >= (3, 10) \
        else {"vert": False}
    workloads = list(dict.fromkeys(w for by_workload in samples.values() for w in by_workload))
    figure, axes = plt.subplots(1, len(workloads), figsize=(5 * len(workloads), 4.5), squeeze=False)
    for axis, workload in zip(axes[0], workloads):
        labels = [label for label in samples if workload in samples[label]]
        axis.boxplot([samples[label][workload] for label in labels], showfliers=True, **horizontal)
        axis.set_yticks(range(1, len(labels) + 1), labels, fontsize=8)
        axis.set_xscale("log")
        axis.set_xlabel("end-to-end latency, ms (log)")
        axis.set_title(workload)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def speed_fidelity_plot(points: Iterable[tuple[str, str, float, float]], path: Path, title: str) -> None:
    """(label, workload, speed-up, max |dp|) points: right is faster, up is further from the reference."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 5))
    markers = {}
    for label, workload, speedup, drift in points:
        marker = markers.setdefault(workload, "osD^v<>"[len(markers) % 7])
        axis.scatter(speedup, max(drift, FLOOR), marker=marker, label=workload)
        axis.annotate(label, (speedup, max(drift, FLOOR)), fontsize=7, xytext=(3, 3), textcoords="offset points")
    axis.set_yscale("log")
    axis.axvline(1.0, color="grey", linewidth=0.8)
    axis.set_xlabel("end-to-end p50 speed-up over the baseline")
    axis.set_ylabel("max |dp| vs the FP32 reference (log)")
    unique = dict(zip(*reversed(axis.get_legend_handles_labels())))  # one legend entry per workload
    axis.legend(unique.values(), unique.keys(), fontsize=8)
    axis.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _e2e_samples(samples: Mapping) -> dict:
    return {label: {workload: [ms for block in modes["end_to_end"]["blocks_ms"] for ms in block]
                    for workload, modes in by_workload.items() if "end_to_end" in modes}
            for label, by_workload in samples.items()}


def write_plots(record: Mapping, out_dir: Path) -> list[str]:
    """Plots of a head-to-head record; the names written (none without matplotlib)."""
    if not available():
        return []
    latency_plot(_e2e_samples(record["bench"]["samples"]), out_dir / LATENCY_PNG,
                 f"{record['experiment']}: end-to-end latency")
    speedups = {(row["runtime"], row["workload"]): row["speedup"]["median"]
                for row in record["bench"]["summary"] if row["mode"] == "end_to_end" and row["speedup"]}
    points = [(label, workload, speedups.get((label, workload), 1.0), drift["max_abs_dp"])
              for label, by_workload in record["answers"].items() for workload, drift in by_workload.items()]
    speed_fidelity_plot(points, out_dir / SPEED_FIDELITY_PNG, f"{record['experiment']}: speed vs fidelity")
    return [LATENCY_PNG, SPEED_FIDELITY_PNG]


def write_run_plots(records: list[Mapping], timings: Mapping, out_dir: Path) -> list[str]:
    """Plots of an experiment run (stages.jsonl records and timings.json); none without matplotlib or timings."""
    if not available() or not timings.get("samples"):
        return []
    latency_plot(_e2e_samples(timings["samples"]), out_dir / LATENCY_PNG, "end-to-end latency per stage")
    points = []
    for record in records:
        drift = (record["metrics"]["cumulative"] or {}).get("max_abs_dp")
        for workload, modes in record["timings"].items():
            speedup = modes.get("end_to_end", {}).get("speedup")
            if speedup and drift is not None:
                points.append((f"{record['index']} {record['stage']}", workload, speedup["median"], float(drift)))
    if points:
        speed_fidelity_plot(points, out_dir / SPEED_FIDELITY_PNG, "speed vs fidelity per stage")
        return [LATENCY_PNG, SPEED_FIDELITY_PNG]
    return [LATENCY_PNG]
