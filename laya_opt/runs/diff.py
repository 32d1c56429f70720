"""Two results directories side by side: are they comparable, what changed in the config, what moved.

Everything is read from the results (`report.load_results`), `run` and `bench` results alike: the manifests
say whether the runs measured the same thing (checkpoint, suites, token tensors, reference dtype) on the
same platform (device, backend, BLAS, library versions); the stage records and timings give the metric and
latency deltas, latency with the bootstrap intervals each run recorded. Stages are matched by name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from laya_opt.runs.report import NO_VALUE, REFERENCE_LABEL, LoadedResults, format_cell, record_metric, speedup_text

DIFF_METRICS = ("argmax_agreement", "decisive_agreement", "max_abs_dp", "mean_abs_dp", "js_max", "token_identity",
                "accuracy_candidate", "ece_candidate")
VERSION_KEYS = ("mlx", "numpy", "tokenizers", "python", "laya-opt")


@dataclass(frozen=True)
class ResultsDiff:
    a: Path
    b: Path
    incomparable: tuple[str, ...]                 # why the two runs did not measure the same thing
    notes: tuple[str, ...]                        # differences that leave them comparable (the source revision)
    config: tuple[tuple[str, Any, Any], ...]      # (key path, a, b) of the resolved configs
    verdicts: tuple[tuple[str, str | None, str | None], ...]   # (stage, a, b); None: not in that run
    metrics: tuple[dict, ...]                     # {stage, metric, a, b, delta}
    latency: tuple[dict, ...]                     # {runtime, workload, mode, p50 a/b, delta, speedups, overlap}

    @property
    def comparable(self) -> bool:
        return not self.incomparable

    def to_json(self) -> dict:
        return {"a": str(self.a), "b": str(self.b), "comparable": self.comparable,
                "incomparable": list(self.incomparable), "notes": list(self.notes),
                "config": [{"key": key, "a": a, "b": b} for key, a, b in self.config],
                "verdicts": [{"stage": stage, "a": a, "b": b} for stage, a, b in self.verdicts],
                "metrics": list(self.metrics), "latency": list(self.latency)}


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Nested mappings and lists as {key path: leaf}: `passes[1].config.bits`."""
    if isinstance(value, Mapping):
        items = {}
        for key, item in value.items():
            items.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return items or {path: {}}
    if isinstance(value, (list, tuple)):
        items = {}
        for index, item in enumerate(value):
            items.update(flatten(item, f"{path}[{index}]"))
        return items or {path: []}
    return {path: value}


def config_delta(a: Mapping, b: Mapping) -> tuple[tuple[str, Any, Any], ...]:
    flat_a, flat_b = flatten(a), flatten(b)
    keys = list(flat_a) + [key for key in flat_b if key not in flat_a]
    return tuple((key, flat_a.get(key), flat_b.get(key)) for key in keys if flat_a.get(key) != flat_b.get(key))


def _short(value: Any) -> str:
    return str(value)[:16] + "…" if isinstance(value, str) and len(value) > 16 else str(value)


def _suites(manifest: Mapping) -> list[tuple[str, str]]:
    return [(suite["name"], suite["sha256"]) for suite in manifest["suites"]]


def _workload_hashes(manifest: Mapping) -> dict[str, str]:
    return {workload["name"]: workload["token_sha256"] for workload in manifest.get("workloads") or []}


def comparability(a: Mapping, b: Mapping) -> tuple[list[str], list[str]]:
    """(reasons the runs are not comparable, notes), each a plain sentence."""
    problems, notes = [], []

    def differ(what: str, value_a: Any, value_b: Any, short: bool = True) -> None:
        if value_a != value_b:
            shown = (_short(value_a), _short(value_b)) if short else (value_a, value_b)
            problems.append(f"different {what}: {shown[0]} vs {shown[1]}")

    differ("checkpoints (weights sha256)", a["checkpoint"]["sha256"], b["checkpoint"]["sha256"])
    if _suites(a) != _suites(b):
        problems.append("different suites: " + " vs ".join(
            ", ".join(f"{name} (sha256 {_short(sha)})" for name, sha in _suites(m)) or "none" for m in (a, b)))
    differ("token tensors (token sha256)", a["token_sha256"], b["token_sha256"])
    differ("reference dtypes", a["resolved"]["reference_dtype"], b["resolved"]["reference_dtype"], False)
    env_a, env_b = a["environment"], b["environment"]
    differ("devices", env_a["device"], env_b["device"], False)
    differ("backends", env_a.get("backend"), env_b.get("backend"), False)
    differ("BLAS libraries", (env_a.get("blas") or {}).get("library"), (env_b.get("blas") or {}).get("library"), False)
    for name in VERSION_KEYS:
        differ(f"{name} versions", env_a["versions"].get(name), env_b["versions"].get(name), False)
    hashes_a, hashes_b = _workload_hashes(a), _workload_hashes(b)
    for name in sorted(set(hashes_a) & set(hashes_b)):
        differ(f"tokens for workload {name}", hashes_a[name], hashes_b[name])
    git_a, git_b = a["git"], b["git"]
    if (git_a["revision"], git_a["dirty"]) != (git_b["revision"], git_b["dirty"]):
        notes.append("source revision " + " vs ".join(f"{_short(g['revision'])}{' (dirty)' if g['dirty'] else ''}"
                                                      for g in (git_a, git_b)))
    return problems, notes


def stage_keys(records: Sequence[Mapping]) -> dict[str, Mapping]:
    """Stage name -> record; a name used again gets `#2`, `#3`, ..."""
    keyed: dict[str, Mapping] = {}
    for record in records:
        name, number = record["stage"], 2
        while name in keyed:
            name, number = f"{record['stage']}#{number}", number + 1
        keyed[name] = record
    return keyed


def metric_deltas(stages_a: Mapping[str, Mapping], stages_b: Mapping[str, Mapping]) -> list[dict]:
    rows = []
    for stage in [name for name in stages_a if name in stages_b]:
        for metric in DIFF_METRICS:
            value_a, value_b = (record_metric(stages[stage], "cumulative", metric) for stages in (stages_a, stages_b))
            if value_a is None and value_b is None:
                continue
            delta = None if value_a is None or value_b is None else value_b - value_a
            rows.append({"stage": stage, "metric": metric, "a": value_a, "b": value_b, "delta": delta})
    return rows


def _runtime_names(results: LoadedResults) -> dict[str, str]:
    """Timing label (`reference`, `<index>:<name>`, a bench's `mlx eager`) -> the stage key used for matching."""
    names = {REFERENCE_LABEL: REFERENCE_LABEL}
    baseline_stage = results.timings.get("baseline_stage")  # a bench times stage 0 under its baseline's label
    for key, record in stage_keys(results.stages).items():
        names[f"{record['index']}:{record['stage']}"] = key
        if record["index"] == baseline_stage:
            names[results.timings["baseline"]] = key
    return names


def _timings(results: LoadedResults) -> dict[tuple[str, str, str], Mapping]:
    names = _runtime_names(results)
    return {(names.get(m["runtime"], m["runtime"]), m["workload"], m["mode"]): m
            for m in results.timings.get("summary") or []}


def _overlap(speed_a: Mapping | None, speed_b: Mapping | None) -> bool | None:
    if speed_a is None or speed_b is None:
        return None
    return speed_a["low"] <= speed_b["high"] and speed_b["low"] <= speed_a["high"]


def latency_deltas(a: LoadedResults, b: LoadedResults) -> list[dict]:
    timings_a, timings_b = _timings(a), _timings(b)
    rows = []
    for key in [key for key in timings_a if key in timings_b]:
        m_a, m_b = timings_a[key], timings_b[key]
        change = (m_b["p50_ms"] - m_a["p50_ms"]) / m_a["p50_ms"] if m_a["p50_ms"] else math.nan
        rows.append({"runtime": key[0], "workload": key[1], "mode": key[2], "p50_ms_a": m_a["p50_ms"],
                     "p50_ms_b": m_b["p50_ms"], "p50_change": change, "n_a": m_a["n"], "n_b": m_b["n"],
                     "speedup_a": m_a["speedup"], "speedup_b": m_b["speedup"],
                     "intervals_overlap": _overlap(m_a["speedup"], m_b["speedup"])})
    return rows


def kind_notes(a: LoadedResults, b: LoadedResults) -> list[str]:
    """What a run/bench pair should keep in mind: the kinds, and speed-ups measured against other baselines."""
    kinds = [results.manifest.get("kind", "run") for results in (a, b)]
    notes = [] if kinds[0] == kinds[1] else [f"kinds {kinds[0]} vs {kinds[1]}"]
    baselines = [results.timings.get("baseline", REFERENCE_LABEL) for results in (a, b)]
    if baselines[0] != baselines[1]:
        notes.append(f"speed-ups are against different baselines: {baselines[0]} vs {baselines[1]}")
    return notes


def diff_results(a: LoadedResults, b: LoadedResults) -> ResultsDiff:
    problems, notes = comparability(a.manifest, b.manifest)
    notes += kind_notes(a, b)
    stages_a, stages_b = stage_keys(a.stages), stage_keys(b.stages)
    names = list(stages_a) + [name for name in stages_b if name not in stages_a]
    verdicts = tuple((name, stages_a[name]["verdict"] if name in stages_a else None,
                      stages_b[name]["verdict"] if name in stages_b else None) for name in names)
    return ResultsDiff(a=a.path, b=b.path, incomparable=tuple(problems), notes=tuple(notes),
                       config=config_delta(a.manifest["resolved"], b.manifest["resolved"]), verdicts=verdicts,
                       metrics=tuple(metric_deltas(stages_a, stages_b)), latency=tuple(latency_deltas(a, b)))


# ---------------------------------------------------------------------------------------------------------------------
# Tables ({title, columns, rows}: console.rich_table renders them)


def diff_tables(diff: ResultsDiff) -> list[dict]:
    tables = []
    if diff.config:
        tables.append({"title": "resolved config (a → b)", "columns": ["key", "a", "b"],
                       "rows": [[key, NO_VALUE if a is None else a, NO_VALUE if b is None else b]
                                for key, a, b in diff.config]})
    tables.append({"title": "verdicts", "columns": ["stage", "a", "b"],
                   "rows": [[stage, a or "(absent)", b or "(absent)"] for stage, a, b in diff.verdicts]})
    if diff.metrics:
        tables.append({"title": "fidelity vs each run's reference (cumulative)",
                       "columns": ["stage", "metric", "a", "b", "Δ (b − a)"],
                       "rows": [[m["stage"], m["metric"], format_cell(m["a"], ".4g"), format_cell(m["b"], ".4g"),
                                 format_cell(m["delta"], "+.3g")] for m in diff.metrics]})
    if diff.latency:
        tables.append({"title": "latency (p50; speed-up vs each run's reference, bootstrap 95% interval)",
                       "columns": ["runtime", "workload", "mode", "p50 ms a", "p50 ms b", "Δ p50", "speed-up a",
                                   "speed-up b", "intervals overlap"],
                       "rows": [[m["runtime"], m["workload"], m["mode"], f"{m['p50_ms_a']:.3f} (n {m['n_a']})",
                                 f"{m['p50_ms_b']:.3f} (n {m['n_b']})",
                                 format_cell(m["p50_change"] * 100, "+.1f") + "%", speedup_text(m["speedup_a"]),
                                 speedup_text(m["speedup_b"]),
                                 NO_VALUE if m["intervals_overlap"] is None else
                                 "yes (no clear change)" if m["intervals_overlap"] else "no"]
                                for m in diff.latency]})
    return tables


def verdict_lines(diff: ResultsDiff) -> list[str]:
    """The plain statement that leads the output."""
    if diff.comparable:
        lines = ["comparable: same checkpoint, suites, token tensors, reference dtype, device, backend, BLAS and "
                 "library versions"]
    else:
        lines = ["NOT COMPARABLE: the deltas below compare different things"] + \
            [f"  - {reason}" for reason in diff.incomparable]
    if not diff.config:
        lines.append("resolved config: identical")
    return lines + [f"note: {note}" for note in diff.notes]
