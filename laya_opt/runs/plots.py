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
    """One panel per workload: the end-to-end latency distribution of every runtime (rows shared)."""
    plt = _pyplot()
    import matplotlib
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    # `orientation` replaced `vert` in matplotlib 3.10
    horizontal = {"orientation": "horizontal"} if tuple(map(int, matplotlib.__version__.split(".")[:2])) >= (3, 10) \
        else {"vert": False}
    labels = [label for label in samples if samples[label]]
    workloads = list(dict.fromkeys(w for label in labels for w in samples[label]))
    figure, axes = plt.subplots(1, len(workloads), figsize=(2.5 + 4 * len(workloads), 1.2 + 0.45 * len(labels)),
                                squeeze=False, sharey=True)
    for axis, workload in zip(axes[0], workloads):
        rows = [(row, samples[label][workload]) for row, label in enumerate(labels, 1) if workload in samples[label]]
        axis.boxplot([data for _, data in rows], positions=[row for row, _ in rows], showfliers=True, **horizontal)
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.xaxis.set_major_formatter(ScalarFormatter())  # 5, 10, 20 rather than 10^0.7
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("ms (log scale)")
        axis.set_title(workload)
    axes[0][0].set_yticks(range(1, len(labels) + 1), labels, fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def speed_fidelity_plot(points: Iterable[tuple[str, str, float, float]], path: Path, title: str) -> None:
    """(label, workload, speed-up, max |dp|) points: right is faster, up is further from the reference.

    Colour names the runtime and the marker the workload, both in legends beside the axes: labels
    written next to points overlap as soon as two runtimes measure alike."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    points = list(points)
    labels = list(dict.fromkeys(label for label, *_ in points))
    workloads = list(dict.fromkeys(workload for _, workload, *_ in points))
    colours = {label: plt.get_cmap("tab20")(index % 20) for index, label in enumerate(labels)}
    markers = {workload: "osD^v<>"[index % 7] for index, workload in enumerate(workloads)}
    figure, axis = plt.subplots(figsize=(10, 5))
    for label, workload, speedup, drift in points:
        axis.scatter(speedup, max(drift, FLOOR), marker=markers[workload], color=colours[label], s=40)
    axis.set_yscale("log")
    axis.axvline(1.0, color="grey", linewidth=0.8)
    axis.set_xlabel("end-to-end p50 speed-up over the baseline")
    axis.set_ylabel("max |dp| vs the FP32 reference (log)")
    runtime_legend = axis.legend([Line2D([], [], marker="o", linestyle="", color=colours[label]) for label in labels],
                                 [label if len(label) <= 40 else label[:39] + "…" for label in labels],
                                 fontsize=7, title="runtime", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axis.add_artist(runtime_legend)
    axis.legend([Line2D([], [], marker=markers[w], linestyle="", color="black") for w in workloads], workloads,
                fontsize=7, title="workload", loc="lower left", bbox_to_anchor=(1.01, 0.0))
    axis.set_title(title)
    figure.tight_layout()
    # the legends sit outside the axes; an added artist is not in the tight box unless named
    figure.savefig(path, dpi=120, bbox_inches="tight", bbox_extra_artists=[runtime_legend])
    plt.close(figure)


def _e2e_samples(samples: Mapping) -> dict:
    return {label: {workload: [ms for block in modes["end_to_end"]["blocks_ms"] for ms in block]
                    for workload, modes in by_workload.items() if "end_to_end" in modes}
            for label, by_workload in samples.items()}


def write_plots(record: Mapping, out_dir: Path) -> list[str]:
    """Plots of a head-to-head record; the names written (none without matplotlib or timed cells).

    Only measured cells are drawn: a run that stopped at its time budget plots what it timed."""
    if not available():
        return []
    written = []
    samples = _e2e_samples(record["bench"]["samples"])
    if any(samples.values()):
        latency_plot(samples, out_dir / LATENCY_PNG, f"{record['experiment']}: end-to-end latency")
        written.append(LATENCY_PNG)
    speedups = {(row["runtime"], row["workload"]): row["speedup"]["median"] if row["speedup"] else 1.0
                for row in record["bench"]["summary"] if row["mode"] == "end_to_end"}  # the baseline has none: 1.0
    points = [(label, workload, speedups[label, workload], drift["max_abs_dp"])
              for label, by_workload in record["answers"].items() for workload, drift in by_workload.items()
              if (label, workload) in speedups]
    if points:
        speed_fidelity_plot(points, out_dir / SPEED_FIDELITY_PNG, f"{record['experiment']}: speed vs fidelity")
        written.append(SPEED_FIDELITY_PNG)
    return written


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
