"""Stage records (stages.jsonl) and everything rendered from them: the stage table, report.md, the console.

One source of truth: `stage_record` turns a StageResult into plain data; the table rows, report.md and
`load_results` all read those records, so nothing is ever parsed back from Markdown. A pass report
may carry a one-line `summary` and generic `tables` ({title, columns, rows}); both are shown as they are.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from laya_opt.timing.bench import BenchResult, tail_warning, thin_tails
from laya_opt.runs.decision_table import decision_section
from laya_opt.runs.next_steps import next_steps_section
from laya_opt.runs.pipeline import StageResult
from laya_opt.util.markdown import markdown_table

REFERENCE_LABEL = "reference"
NO_VALUE = "—"
WORST_QUESTIONS = 5
STAGE_TABLE_HEADING = "## Stages"
FIXED_COLUMNS = ("stage", "exact/approx", "argmax agree", "max Δp cum", "max Δp inc", "accuracy", "wall s")
ID_COLUMNS = 2  # stage and exact/approx: kept whole on a narrow console


# ---------------------------------------------------------------------------------------------------------------------
# Plain data


def plain(value: Any) -> Any:
    """JSON-ready data from dataclasses, numpy values, paths and tuples; NaN/inf become strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(item) for item in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _number(value: Any) -> float | None:
    """A metric as recorded: None, a float, or the string form `plain` gives NaN and infinities."""
    return None if value is None else float(value)


def stage_label(stage: StageResult) -> str:
    return f"{stage.index}:{stage.name}"


def gate_rows(stage: StageResult, allow_failed_gates: bool) -> list[dict]:
    rows = []
    for comparison, results in (("incremental", stage.incremental_gates), ("cumulative", stage.cumulative_gates)):
        for result in results:
            status = "skipped" if result.skipped else "over (diagnostic)" if result.exceeded else \
                "pass" if result.passed else "WAIVED" if allow_failed_gates else "FAIL"
            rows.append({"comparison": comparison, "gate": str(result.gate), "metric": result.gate.metric,
                         "op": result.gate.op, "threshold": result.gate.threshold, "measured": result.measured,
                         "noise_floor": result.gate.noise_floor, "derivation": result.gate.derivation,
                         "status": status, "message": result.message})
    return rows


def worst_questions(stage: StageResult) -> list[dict]:
    if stage.cumulative is None:
        return []
    return [{"key": q.key, "type": q.type_name, "tags": plain(q.tags), "max_abs_dp": q.max_abs_dp,
             "reference_argmax": q.reference_argmax, "candidate_argmax": q.candidate_argmax}
            for q in stage.cumulative.worst(WORST_QUESTIONS)]


def measurement_record(m) -> dict:
    return {**plain(m.summary), "cold_ms": m.cold_ms, "peak_memory_bytes": m.peak_memory_bytes,
            "questions_per_s": m.questions_per_s,
            "speedup": None if m.speedup is None else {"median": m.speedup.median, "low": m.speedup.low,
                                                       "high": m.speedup.high, "blocks": m.speedup.blocks}}


def stage_record(stage: StageResult, bench: BenchResult | None, allow_failed_gates: bool,
                 label: Callable[[StageResult], str] = stage_label) -> dict:
    """One stages.jsonl row: everything the table, report.md and later tools need about a stage.

    Its timings are the cells of the runtime `label(stage)` (bench times stage 0 as its `mlx eager` baseline)."""
    timings: dict = {}
    if bench is not None and stage.accepted:
        for m in bench.measurements:
            if m.runtime == label(stage):
                timings.setdefault(m.workload, {})[m.mode] = measurement_record(m)
    reports = {"incremental": stage.incremental, "cumulative": stage.cumulative}
    return plain({
        "index": stage.index, "stage": stage.name, "pass": None if stage.index == 0 else stage.name,
        "config": stage.config, "exact": stage.exact, "on_fail": stage.on_fail, "verdict": stage.verdict,
        "gates_passed": stage.gates_passed, "waived": bool(stage.failed_gates and allow_failed_gates),
        "gates": gate_rows(stage, allow_failed_gates),
        "metrics": {name: None if report is None else report.metrics for name, report in reports.items()},
        "per_type": {name: None if report is None else report.per_type for name, report in reports.items()},
        "decisions": {name: None if report is None or report.decisions is None else report.decisions.summary()
                      for name, report in reports.items()},
        "first_token_mismatch": {name: None if report is None or report.first_token_mismatch is None else
                                 {"key": report.first_token_mismatch, "detail": report.first_token_mismatch_detail}
                                 for name, report in reports.items()},
        "worst": worst_questions(stage), "parent": stage.parent, "applied": stage.applied,
        "identity": stage.identity, "apply_s": stage.apply_s, "evaluate_s": stage.evaluate_s,
        "report": stage.report, "error": stage.error, "timings": timings,
        "eval_path": None if stage.eval_path is None else stage.eval_path.to_json(),
    })


def latency_records(bench: BenchResult) -> list[dict]:
    """Every measurement (the reference included) as plain rows; saved in timings.json, shown in report.md."""
    return [{"runtime": m.runtime, "workload": m.workload, "mode": m.mode, **measurement_record(m)}
            for m in bench.measurements]


# ---------------------------------------------------------------------------------------------------------------------
# The stage table


@dataclass(frozen=True)
class SpeedupCell:
    workload: str
    median: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        return speedup_text(None if self.median is None else dataclasses.asdict(self))


@dataclass(frozen=True)
class ReportRow:
    stage: str                       # "<index> <name>"
    kind: str                        # exact | approx
    argmax_agreement: float | None   # cumulative (vs the reference)
    max_abs_dp: float | None         # cumulative
    max_abs_dp_incremental: float | None
    accuracy: float | None           # candidate accuracy on labelled questions
    speedups: tuple[SpeedupCell, ...]  # end-to-end p50 paired speed-up vs the reference, per workload
    verdict: str                     # accepted | rejected | stopped | error, plus ", gates WAIVED"
    wall_s: float | None = None      # applying and evaluating the stage

    def cells(self) -> list[str]:
        numbers = ((self.argmax_agreement, ".4f"), (self.max_abs_dp, ".2e"), (self.max_abs_dp_incremental, ".2e"),
                   (self.accuracy, ".4f"), (self.wall_s, ".1f"))
        return [self.stage, self.kind, *(format_cell(value, spec) for value, spec in numbers),
                *(cell.text() for cell in self.speedups), self.verdict]


def format_cell(value: float | None, spec: str) -> str:
    if value is None:
        return NO_VALUE
    return "NaN" if math.isnan(value) else format(value, spec)


def speedup_text(speed: Mapping | None, spec: str = ".3f") -> str:
    """A recorded speed-up ({median, low, high}) as `median× (low–high)`."""
    if speed is None:
        return NO_VALUE
    return f"{speed['median']:{spec}}× ({speed['low']:{spec}}–{speed['high']:{spec}})"


def record_metric(record: Mapping, comparison: str, name: str) -> float | None:
    metrics = record["metrics"][comparison]
    return None if metrics is None else _number(metrics.get(name))


def row_from_record(record: Mapping, workloads: Sequence[str]) -> ReportRow:
    speedups = []
    for workload in workloads:
        speedup = record["timings"].get(workload, {}).get("end_to_end", {}).get("speedup")
        speedups.append(SpeedupCell(workload, *((None, None, None) if speedup is None else
                                                (speedup["median"], speedup["low"], speedup["high"]))))
    verdict = record["verdict"] + (", gates WAIVED" if record["waived"] else "")
    return ReportRow(stage=f"{record['index']} {record['stage']}", kind="exact" if record["exact"] else "approx",
                     argmax_agreement=record_metric(record, "cumulative", "argmax_agreement"),
                     max_abs_dp=record_metric(record, "cumulative", "max_abs_dp"),
                     max_abs_dp_incremental=None if record["index"] == 0 else
                     record_metric(record, "incremental", "max_abs_dp"),
                     accuracy=record_metric(record, "cumulative", "accuracy_candidate"),
                     speedups=tuple(speedups), verdict=verdict, wall_s=stage_wall_s(record))


def stage_wall_s(record: Mapping) -> float:
    return (record.get("apply_s") or 0.0) + (record.get("evaluate_s") or 0.0)


def table_header(workloads: Sequence[str]) -> list[str]:
    """The stage table's columns: a speed-up column per timed workload, none when nothing was timed."""
    return [*FIXED_COLUMNS, *(f"{name} p50 speedup" for name in workloads), "verdict"]


def stage_table(rows: Sequence[ReportRow], workloads: Sequence[str]) -> str:
    header = table_header(workloads)
    return markdown_table(header, [row.cells() for row in rows], "ll" + "r" * (len(header) - 3) + "l")


def console_table(rows: Sequence[ReportRow], workloads: Sequence[str], title: str = "") -> dict:
    """The same table as {title, columns, rows, justify} for `console.print_table` (stage names stay whole)."""
    header = table_header(workloads)
    return {"title": title or None, "columns": header, "rows": [row.cells() for row in rows],
            "justify": {index: "right" for index in range(2, len(header) - 1)}}


def row_styles(rows: Sequence[ReportRow]) -> list[str | None]:
    return ["red" if row.verdict.startswith(("rejected", "stopped", "error")) else None for row in rows]


# ---------------------------------------------------------------------------------------------------------------------
# report.md


def _latency_section(latency: Sequence[Mapping], workloads: Sequence[Mapping], config: Mapping) -> list[str]:
    header = ["runtime", "workload", "mode", "n", "p50 ms", "p95 ms", "p99 ms", "q/s", "cold ms", "peak MiB",
              "speedup p50 (95% CI)"]
    rows = []
    for m in latency:
        peak = NO_VALUE if m["peak_memory_bytes"] is None else f"{m['peak_memory_bytes'] / 2**20:.1f}"
        thin = thin_tails(m["n"])
        tails = [f"{m[f'{name}_ms']:.3f}" + (" *" if name in thin else "") for name in ("p95", "p99")]
        rows.append([m["runtime"], m["workload"], m["mode"], m["n"], f"{m['p50_ms']:.3f}", *tails,
                     f"{m['questions_per_s']:.1f}", f"{m['cold_ms']:.3f}", peak, speedup_text(m["speedup"])])
    warning = tail_warning(min(m["n"] for m in latency)) if latency else None
    facts = [[f["name"], f["requests"], f["questions"], f["unique_forward_inputs"], f["tokens"],
              f["token_sha256"][:16]] for f in workloads]
    return ["## Latency", "",
            f"Baseline `{REFERENCE_LABEL}` (eager reference dtype). {config['requests']} timed requests per workload, "
            f"runtime and mode in {config['blocks']} rotating blocks after {config['warmup']} warmup requests; "
            f"speed-up = median over blocks of median(baseline)/median(stage), {config['bootstrap']}-resample "
            "bootstrap 95% interval; cold = first call of the workload on that runtime.", "",
            markdown_table(header, rows, "lll" + "r" * 8), "",
            *([f"**Few samples (cells marked \\*):** {warning}.", ""] if warning else []),
            markdown_table(["workload", "requests", "questions", "unique forward inputs", "tokens", "token sha256"],
                           facts, "lrrrrl"), ""]


def _pass_report_sections(record: Mapping) -> list[str]:
    report = record.get("report") or {}
    tables = report.get("tables") or []
    if not report.get("summary") and not tables:
        return []
    lines = []
    for table in tables or [{"title": record["stage"], "columns": [], "rows": []}]:
        lines += [f"## {table['title']}: stage {record['index']} {record['stage']}", ""]
        if report.get("summary"):
            lines += [report["summary"], ""]
        if table["columns"]:
            lines += [markdown_table(table["columns"], table["rows"]), ""]
    return lines


def failed_gate_count(record: Mapping) -> int:
    return sum(gate["status"] in ("FAIL", "WAIVED") for gate in record["gates"])


def best_rejected(records: Sequence[Mapping]) -> Mapping | None:
    """When no pass was accepted, the failed stage closest to passing: fewest failed gates, then the
    smallest cumulative max |dp|; None when a pass was accepted or nothing failed."""
    if any(r["verdict"] == "accepted" and r["index"] > 0 for r in records):
        return None
    failed = [r for r in records if r["verdict"] in ("rejected", "stopped")]

    def distance(record: Mapping) -> tuple:
        drift = record_metric(record, "cumulative", "max_abs_dp")
        return failed_gate_count(record), math.inf if drift is None or math.isnan(drift) else drift, record["index"]

    return min(failed, key=distance) if failed else None


def best_rejected_line(record: Mapping) -> str:
    """One sentence naming the closest failed stage and its headline numbers."""
    numbers = ", ".join(f"{label} {format_cell(record_metric(record, 'cumulative', name), spec)}"
                        for label, name, spec in (("argmax agree", "argmax_agreement", ".4f"),
                                                  ("max Δp cum", "max_abs_dp", ".3g"),
                                                  ("accuracy", "accuracy_candidate", ".4f")))
    return (f"No candidate passed its gates; the closest was stage {record['index']} {record['stage']} "
            f"({record['verdict']}, {failed_gate_count(record)} failed gate(s)): {numbers}")


def _best_rejected_section(records: Sequence[Mapping]) -> list[str]:
    best = best_rejected(records)
    if best is None:
        return []
    failing = [[g["comparison"], g["gate"], _measured(g), g["status"]]
               for g in best["gates"] if g["status"] in ("FAIL", "WAIVED")]
    return ["## No candidate passed", "", best_rejected_line(best) + ". Its failing gates:", "",
            markdown_table(["comparison", "gate", "measured", "result"], failing, "llrl"), "",
            "Every stage's numbers are in the tables below and in stages.jsonl.", ""]


def _evaluation_section(manifest: Mapping, records: Sequence[Mapping]) -> list[str]:
    """How each stage's outputs were obtained: evaluated, or reused from its parent after a sample re-run."""
    paths = [(r, r.get("eval_path")) for r in records]
    if not any(path for _, path in paths):  # results written before evaluation paths were recorded
        return []
    rerun = (manifest.get("evaluation") or {}).get("rerun")
    lines = ["## Evaluation", "",
             "Each stage is evaluated once on the suite"
             + (f"; a seeded sample of {rerun} requests is evaluated again and compared bit for bit (the "
                "`deterministic` gate)" if rerun else "")
             + ". A stage whose pass changed no output-determining part reuses its parent's outputs once that "
               "sample re-runs identical.", ""]
    lines += [f"- stage {r['index']} {r['stage']}: {path['summary'] if path else 'not evaluated'}"
              for r, path in paths]
    return lines + [""]


def _measured(gate_row: Mapping) -> str:
    return NO_VALUE if gate_row["measured"] is None else f"{_number(gate_row['measured']):.6g}"


def _platform(environment: Mapping) -> str:
    blas = environment.get("blas")
    if not blas:  # results written before the backend and BLAS were recorded
        return ""
    return f" (backend {environment['backend']}, BLAS {blas['name']}{', SLOW' if blas['slow'] else ''})"


def _run_facts(manifest: Mapping) -> list[str]:
    """Header lines about how the run was made: the reference cache and the export, when recorded."""
    facts = {"reference": manifest["reference"].get("cache"), "export": manifest.get("export")}
    return [f"- {name}: {fact['summary']}" for name, fact in facts.items() if fact]


def render_report(manifest: Mapping, records: Sequence[Mapping], timings: Mapping) -> str:
    """report.md from manifest.json, stages.jsonl and timings.json contents: nothing else is read."""
    resolved = manifest["resolved"]
    workloads = [f["name"] for f in manifest["workloads"]]
    rows = [row_from_record(record, workloads) for record in records]
    waived = [record for record in records if record["waived"]]
    lines = [f"# {manifest['experiment']}", "",
             f"- checkpoint: `{manifest['checkpoint']['path']}` (sha256 {manifest['checkpoint']['sha256'][:16]})",
             f"- reference {resolved['reference_dtype']}, candidate {resolved['candidate_dtype']}, "
             f"batch_size {resolved['batch_size']}",
             f"- suites: {', '.join(s['name'] for s in manifest['suites'])}; "
             f"token sha256 {manifest['token_sha256'][:16]}",
             f"- git {manifest['git']['revision'] or 'unknown'}{' (dirty)' if manifest['git']['dirty'] else ''}; "
             f"device {manifest['environment']['device']}{_platform(manifest['environment'])}; "
             f"mlx {manifest['environment']['versions']['mlx']}",
             f"- started {manifest['started_utc']}", *_run_facts(manifest), ""]
    if waived:
        names = ", ".join(f"{r['index']} {r['stage']}" for r in waived)
        lines += [f"**Failed gates WAIVED by --allow-failed-gates** in stage(s): {names}.", ""]
    lines += _best_rejected_section(records) + next_steps_section(manifest, records)
    lines += [STAGE_TABLE_HEADING, "", stage_table(rows, workloads), "",
              "argmax agree, max Δp cum and accuracy compare each stage with the "
              f"{resolved['reference_dtype']} reference; max Δp inc with the previous accepted stage.", ""]
    lines += decision_section(records) + _evaluation_section(manifest, records)
    gate_cells = [[f"{r['index']} {r['stage']}", g["comparison"], g["gate"], _measured(g),
                   NO_VALUE if g.get("noise_floor") is None else f"{_number(g['noise_floor']):.3g}", g["status"]]
                  for r in records for g in r["gates"]]
    gates_file = resolved.get("gates_file") or {}
    lines += ["## Gates", "",
              f"Default gates from `{gates_file.get('name', '?')}`"
              + (f" ({gates_file['description']})" if gates_file.get("description") else "")
              + "; noise floor = the measured noise (same dtype) or cast drift (vs the reference) the threshold "
                "rests on.", "",
              markdown_table(["stage", "comparison", "gate", "measured", "noise floor", "result"], gate_cells,
                             "lllrrl"), "", "Derivations:", ""]
    derivations = dict.fromkeys(f"- `{g['gate']}`: {g['derivation']}" for r in records for g in r["gates"]
                                if g.get("derivation"))
    lines += list(derivations) + [""]
    errors = [r for r in records if r["error"]]
    if errors:
        lines += ["## Errors", ""] + [f"- stage {r['index']} {r['stage']}: {r['error']}" for r in errors] + [""]
    mismatches = [r for r in records if r["first_token_mismatch"]["cumulative"]]
    if mismatches:
        lines += ["## Token identity", ""]
        for r in mismatches:
            first = r["first_token_mismatch"]["cumulative"]
            lines.append(f"- stage {r['index']} {r['stage']}: first differing question {first['key']}: "
                         f"{first['detail']}")
        lines.append("")
    # Worst questions of the final accepted stage and of every stage that failed a gate (stages.jsonl has all).
    accepted = [r["index"] for r in records if r["verdict"] == "accepted"]
    shown = [r for r in records if not r["gates_passed"] or r["index"] in accepted[-1:]]
    worst = [[f"{r['index']} {r['stage']}", q["key"], q["type"], json.dumps(q["tags"], ensure_ascii=False),
              f"{_number(q['max_abs_dp']):.3e}", f"{q['reference_argmax']} → {q['candidate_argmax']}"]
             for r in shown for q in r["worst"]]
    if worst:
        lines += ["## Worst questions (vs the reference; final stage and failed stages)", "",
                  markdown_table(["stage", "question", "type", "tags", "max Δp", "argmax"], worst, "llllrl"), ""]
    for record in records:
        lines += _pass_report_sections(record)
    if manifest.get("benchmark_skipped"):
        lines += ["## Latency", "", f"Benchmark skipped: {manifest['benchmark_skipped']}; no speed-up is claimed.", ""]
    if timings.get("summary"):
        lines += _latency_section(timings["summary"], manifest["workloads"], timings["config"])
        plots = manifest.get("plots")
        lines += [f"Plots: {', '.join(f'`{name}`' for name in plots)}." if plots else
                  "Plots: not drawn (matplotlib is not installed: `pip install laya-opt[plots]`).", ""]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# Reading results back


@dataclass(frozen=True)
class LoadedResults:
    path: Path
    manifest: dict
    stages: tuple[dict, ...]          # stages.jsonl
    rows: tuple[ReportRow, ...]       # the stage table, rebuilt from the records
    timings: dict


RESULT_FILES = ("manifest.json", "stages.jsonl", "report.md", "timings.json")


def load_results(path: str | Path) -> LoadedResults:
    path = Path(path)
    for name in RESULT_FILES:
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a results directory: missing {name}")
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    stages = tuple(json.loads(line) for line in (path / "stages.jsonl").read_text(encoding="utf-8").splitlines()
                   if line.strip())
    workloads = [f["name"] for f in manifest["workloads"]]
    return LoadedResults(path=path, manifest=manifest, stages=stages,
                         rows=tuple(row_from_record(record, workloads) for record in stages),
                         timings=json.loads((path / "timings.json").read_text(encoding="utf-8")))
