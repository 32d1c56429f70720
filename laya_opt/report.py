"""The stage table and report.md of a run: render them, write the per-stage records, read them back."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .bench import BenchResult
from .experiment import Experiment
from .pipeline import PipelineResult, StageResult
from .quantization import coverage_summary, stage_coverage

REFERENCE_LABEL = "reference"
NO_VALUE = "—"
WORST_QUESTIONS = 5
STAGE_TABLE_HEADING = "## Stages"
FIXED_COLUMNS = ("stage", "exact/approx", "argmax agree", "max Δp cum", "max Δp inc", "accuracy")
SPEEDUP_PATTERN = re.compile(r"^([0-9.]+)× \(([0-9.]+)–([0-9.]+)\)$")


# ---------------------------------------------------------------------------------------------------------------------
# Stage table rows (what report.md and the console show; parsed back by load_results)


def _rounded(value: float | None, spec: str) -> float | None:
    # Rows hold exactly what the table prints, so parsing the table gives equal rows; NaN is the
    # math.nan singleton so that equal rows compare equal (tuples compare identity first).
    if value is None:
        return None
    return math.nan if math.isnan(value) else float(format(value, spec))


def _cell(value: float | None, spec: str) -> str:
    if value is None:
        return NO_VALUE
    return "NaN" if math.isnan(value) else format(value, spec)


def _parse_cell(text: str) -> float | None:
    if text == NO_VALUE:
        return None
    return math.nan if text == "NaN" else float(text)


@dataclass(frozen=True)
class SpeedupCell:
    workload: str
    median: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        if self.median is None:
            return NO_VALUE
        return f"{self.median:.3f}× ({self.low:.3f}–{self.high:.3f})"


@dataclass(frozen=True)
class ReportRow:
    stage: str                       # "<index> <name>"
    kind: str                        # exact | approx
    argmax_agreement: float | None   # cumulative (vs the reference), 4 decimals
    max_abs_dp: float | None         # cumulative, 3 significant digits
    max_abs_dp_incremental: float | None
    accuracy: float | None           # candidate accuracy on labelled questions
    speedups: tuple[SpeedupCell, ...]  # end-to-end p50 paired speed-up vs the reference, per workload
    verdict: str                     # accepted | rejected | stopped | error, plus ", gates WAIVED"

    def cells(self) -> list[str]:
        return [self.stage, self.kind, _cell(self.argmax_agreement, ".4f"), _cell(self.max_abs_dp, ".2e"),
                _cell(self.max_abs_dp_incremental, ".2e"), _cell(self.accuracy, ".4f"),
                *(cell.text() for cell in self.speedups), self.verdict]


def verdict_text(stage: StageResult, allow_failed_gates: bool) -> str:
    if stage.failed_gates and allow_failed_gates:
        return f"{stage.verdict}, gates WAIVED"
    return stage.verdict


def stage_row(stage: StageResult, bench: BenchResult | None, workloads: Sequence[str],
              allow_failed_gates: bool) -> ReportRow:
    cumulative, incremental = stage.cumulative, stage.incremental
    speedups = []
    for workload in workloads:
        speedup = None
        if bench is not None and stage.accepted:
            speedup = bench.get(stage_label(stage), workload, "end_to_end").speedup
        speedups.append(SpeedupCell(workload, *((None, None, None) if speedup is None else
                                                (_rounded(speedup.median, ".3f"), _rounded(speedup.low, ".3f"),
                                                 _rounded(speedup.high, ".3f")))))
    return ReportRow(
        stage=f"{stage.index} {stage.name}", kind="exact" if stage.exact else "approx",
        argmax_agreement=_rounded(cumulative.metrics.get("argmax_agreement"), ".4f") if cumulative else None,
        max_abs_dp=_rounded(cumulative.metrics.get("max_abs_dp"), ".2e") if cumulative else None,
        max_abs_dp_incremental=_rounded(incremental.metrics.get("max_abs_dp"), ".2e") if incremental else None,
        accuracy=_rounded(cumulative.metrics.get("accuracy_candidate"), ".4f") if cumulative else None,
        speedups=tuple(speedups), verdict=verdict_text(stage, allow_failed_gates))


def stage_label(stage: StageResult) -> str:
    return f"{stage.index}:{stage.name}"


def table_header(workloads: Sequence[str]) -> list[str]:
    speedup_columns = [f"{name} p50 speedup" for name in workloads] or ["p50 speedup"]
    return [*FIXED_COLUMNS, *speedup_columns, "verdict"]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _split_row(line: str) -> list[str]:
    cells, current, chars = [], "", iter(line.strip()[1:-1])
    for char in chars:
        if char == "\\":
            current += next(chars, "")
        elif char == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += char
    cells.append(current.strip())
    return cells


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    align = align or "l" * len(header)
    lines = ["| " + " | ".join(_escape(cell) for cell in header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(_escape(str(cell)) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def stage_table(rows: Sequence[ReportRow], workloads: Sequence[str]) -> str:
    header = table_header(workloads)
    cells = [row.cells() if workloads else row.cells()[:-1] + [NO_VALUE, row.verdict] for row in rows]
    return markdown_table(header, cells, "ll" + "r" * (len(header) - 3) + "l")


def parse_stage_table(text: str) -> list[ReportRow]:
    """Read the stage table of a report.md back into rows."""
    lines = text.splitlines()
    try:
        start = lines.index(STAGE_TABLE_HEADING) + 1
    except ValueError:
        raise ValueError(f"report has no '{STAGE_TABLE_HEADING}' section") from None
    table = []
    for line in lines[start:]:
        if line.startswith("|"):
            table.append(_split_row(line))
        elif table:
            break
    if len(table) < 2:
        raise ValueError("the stage table is empty")
    header, body = table[0], table[2:]
    speedup_columns = header[len(FIXED_COLUMNS):-1]
    workloads = [name[: -len(" p50 speedup")] for name in speedup_columns if name != "p50 speedup"]
    rows = []
    for number, cells in enumerate(body, start=1):
        if len(cells) != len(header):
            raise ValueError(f"stage table row {number} has {len(cells)} cells, the header {len(header)}")
        speedups = []
        for workload, text_cell in zip(workloads, cells[len(FIXED_COLUMNS):-1]):
            match = SPEEDUP_PATTERN.match(text_cell)
            if text_cell != NO_VALUE and not match:
                raise ValueError(f"stage table row {number}: cannot read speed-up {text_cell!r}")
            speedups.append(SpeedupCell(workload, *((None, None, None) if not match else map(float, match.groups()))))
        rows.append(ReportRow(stage=cells[0], kind=cells[1], argmax_agreement=_parse_cell(cells[2]),
                              max_abs_dp=_parse_cell(cells[3]), max_abs_dp_incremental=_parse_cell(cells[4]),
                              accuracy=_parse_cell(cells[5]), speedups=tuple(speedups), verdict=cells[-1]))
    return rows


def console_table(rows: Sequence[ReportRow], workloads: Sequence[str], title: str = ""):
    """The same table for the rich console."""
    from rich.table import Table

    table = Table(title=title or None)
    header = table_header(workloads)
    for index, name in enumerate(header):
        table.add_column(name, justify="right" if 1 < index < len(header) - 1 else "left")
    for row in rows:
        cells = row.cells() if workloads else row.cells()[:-1] + [NO_VALUE, row.verdict]
        style = "red" if row.verdict.startswith(("rejected", "stopped", "error")) else None
        table.add_row(*cells, style=style)
    return table


# ---------------------------------------------------------------------------------------------------------------------
# Plain-data conversion


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


def gate_rows(stage: StageResult, allow_failed_gates: bool) -> list[dict]:
    rows = []
    for comparison, results in (("incremental", stage.incremental_gates), ("cumulative", stage.cumulative_gates)):
        for result in results:
            status = "skipped" if result.skipped else "pass" if result.passed else \
                "WAIVED" if allow_failed_gates else "FAIL"
            rows.append({"comparison": comparison, "gate": str(result.gate), "metric": result.gate.metric,
                         "op": result.gate.op, "threshold": result.gate.threshold, "measured": result.measured,
                         "status": status, "message": result.message})
    return rows


def worst_questions(stage: StageResult, count: int = WORST_QUESTIONS) -> list[dict]:
    if stage.cumulative is None:
        return []
    return [{"key": q.key, "type": q.type_name, "tags": plain(q.tags), "max_abs_dp": q.max_abs_dp,
             "reference_argmax": q.reference_argmax, "candidate_argmax": q.candidate_argmax}
            for q in stage.cumulative.worst(count)]


def stage_record(stage: StageResult, bench: BenchResult | None, allow_failed_gates: bool) -> dict:
    """One stages.jsonl row."""
    timings = {}
    if bench is not None and stage.accepted:
        for m in bench.measurements:
            if m.runtime == stage_label(stage):
                timings.setdefault(m.workload, {})[m.mode] = {
                    **plain(m.summary), "cold_ms": m.cold_ms, "peak_memory_bytes": m.peak_memory_bytes,
                    "questions_per_s": m.questions_per_s,
                    "speedup": None if m.speedup is None else {
                        "median": m.speedup.median, "low": m.speedup.low, "high": m.speedup.high,
                        "blocks": m.speedup.blocks}}
    reports = {"incremental": stage.incremental, "cumulative": stage.cumulative}
    return plain({
        "index": stage.index, "stage": stage.name, "pass": None if stage.index == 0 else stage.name,
        "config": stage.config, "exact": stage.exact, "on_fail": stage.on_fail, "verdict": stage.verdict,
        "gates_passed": stage.gates_passed, "waived": bool(stage.failed_gates and allow_failed_gates),
        "gates": gate_rows(stage, allow_failed_gates),
        "metrics": {name: None if report is None else report.metrics for name, report in reports.items()},
        "per_type": {name: None if report is None else report.per_type for name, report in reports.items()},
        "first_token_mismatch": {name: None if report is None or report.first_token_mismatch is None else
                                 {"key": report.first_token_mismatch, "detail": report.first_token_mismatch_detail}
                                 for name, report in reports.items()},
        "worst": worst_questions(stage), "parent": stage.parent, "applied": stage.applied,
        "identity": stage.identity, "apply_s": stage.apply_s, "evaluate_s": stage.evaluate_s,
        "pass_info": stage.pass_info, "error": stage.error, "timings": timings,
    })


# ---------------------------------------------------------------------------------------------------------------------
# report.md


def _latency_section(bench: BenchResult) -> list[str]:
    header = ["runtime", "workload", "mode", "n", "p50 ms", "p95 ms", "p99 ms", "q/s", "cold ms", "peak MiB",
              "speedup p50 (95% CI)"]
    rows = []
    for m in bench.measurements:
        peak = NO_VALUE if m.peak_memory_bytes is None else f"{m.peak_memory_bytes / 2**20:.1f}"
        speed = NO_VALUE if m.speedup is None else \
            f"{m.speedup.median:.3f}× ({m.speedup.low:.3f}–{m.speedup.high:.3f})"
        rows.append([m.runtime, m.workload, m.mode, m.summary.n, f"{m.summary.p50_ms:.3f}", f"{m.summary.p95_ms:.3f}",
                     f"{m.summary.p99_ms:.3f}", f"{m.questions_per_s:.1f}", f"{m.cold_ms:.3f}", peak, speed])
    facts = [[f.name, f.requests, f.questions, f.unique_forward_inputs, f.tokens, f.token_sha256[:16]]
             for f in bench.workloads]
    config = bench.config
    return ["## Latency", "",
            f"Baseline `{bench.baseline}` (eager reference dtype). {config.requests} timed requests per workload, "
            f"runtime and mode in {config.blocks} rotating blocks after {config.warmup} warmup requests; speed-up = "
            f"median over blocks of median(baseline)/median(stage), {config.bootstrap}-resample bootstrap 95% "
            "interval; cold = first call of the workload on that runtime.", "",
            markdown_table(header, rows, "lll" + "r" * 8), "",
            markdown_table(["workload", "requests", "questions", "unique forward inputs", "tokens", "token sha256"],
                           facts, "lrrrrl"), ""]


def render_report(experiment: Experiment, result: PipelineResult, bench: BenchResult | None,
                  rows: Sequence[ReportRow], manifest: dict, allow_failed_gates: bool) -> str:
    workloads = list(experiment.benchmark.workloads) if bench is not None and experiment.benchmark else []
    waived = [stage for stage in result.stages if stage.failed_gates] if allow_failed_gates else []
    lines = [f"# {experiment.name}", "",
             f"- checkpoint: `{manifest['checkpoint']['path']}` (sha256 {manifest['checkpoint']['sha256'][:16]})",
             f"- reference {experiment.reference_dtype}, candidate {experiment.candidate_dtype}, "
             f"batch_size {experiment.batch_size}",
             f"- suites: {', '.join(s['name'] for s in manifest['suites'])}; "
             f"token sha256 {manifest['token_sha256'][:16]}",
             f"- git {manifest['git']['revision'] or 'unknown'}{' (dirty)' if manifest['git']['dirty'] else ''}; "
             f"device {manifest['environment']['device']}; mlx {manifest['environment']['versions']['mlx']}",
             f"- started {manifest['started_utc']}", ""]
    if waived:
        lines += [f"**Failed gates WAIVED by --allow-failed-gates** in stage(s): "
                  f"{', '.join(f'{s.index} {s.name}' for s in waived)}.", ""]
    lines += [STAGE_TABLE_HEADING, "", stage_table(rows, workloads), "",
              "argmax agree, max Δp cum and accuracy compare each stage with the "
              f"{experiment.reference_dtype} reference; max Δp inc with the previous accepted stage.", ""]
    gate_cells = [[f"{stage.index} {stage.name}", row["comparison"], row["gate"],
                   NO_VALUE if row["measured"] is None else f"{row['measured']:.6g}", row["status"]]
                  for stage in result.stages for row in gate_rows(stage, allow_failed_gates)]
    lines += ["## Gates", "", markdown_table(["stage", "comparison", "gate", "measured", "result"], gate_cells,
                                             "lllrl"), ""]
    mismatches = [(stage, stage.cumulative) for stage in result.stages
                  if stage.cumulative is not None and stage.cumulative.first_token_mismatch]
    if mismatches:
        lines += ["## Token identity", ""]
        lines += [f"- stage {stage.index} {stage.name}: first differing question {report.first_token_mismatch}: "
                  f"{report.first_token_mismatch_detail}" for stage, report in mismatches]
        lines.append("")
    # Worst questions of the final accepted stage and of every stage that failed a gate (stages.jsonl has all).
    final = {stage.index for stage in result.accepted_stages[-1:]}
    shown = [stage for stage in result.stages if stage.failed_gates or stage.index in final]
    worst = [[f"{stage.index} {stage.name}", q["key"], q["type"], json.dumps(q["tags"], ensure_ascii=False),
              f"{q['max_abs_dp']:.3e}", f"{q['reference_argmax']} → {q['candidate_argmax']}"]
             for stage in shown for q in worst_questions(stage)]
    if worst:
        lines += ["## Worst questions (vs the reference; final stage and failed stages)", "",
                  markdown_table(["stage", "question", "type", "tags", "max Δp", "argmax"], worst, "llllrl"), ""]
    for stage in result.stages:
        manifest = stage_coverage(stage.pass_info)
        if manifest is not None:
            lines += [f"## Quantization coverage: stage {stage.index} {stage.name}", ""]
            cells = [[row.path, row.kind, f"{row.shape[0]}x{row.shape[1]}", row.status, row.detail,
                      f"{row.bytes_before:,}", f"{row.bytes_after:,}"] for row in manifest.rows]
            lines += [coverage_summary(manifest), "",
                      markdown_table(["module", "kind", "shape", "status", "scheme / reason", "bytes before",
                                      "bytes after"], cells, "llrllrr"), ""]
    if bench is not None:
        lines += _latency_section(bench)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# Reading results back


@dataclass(frozen=True)
class LoadedResults:
    path: Path
    manifest: dict
    stages: tuple[dict, ...]          # stages.jsonl
    rows: tuple[ReportRow, ...]       # the stage table of report.md
    timings: dict


def load_results(path: str | Path) -> LoadedResults:
    path = Path(path)
    for name in ("manifest.json", "stages.jsonl", "report.md", "timings.json"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a results directory: missing {name}")
    stages = tuple(json.loads(line) for line in (path / "stages.jsonl").read_text(encoding="utf-8").splitlines()
                   if line.strip())
    return LoadedResults(path=path, manifest=json.loads((path / "manifest.json").read_text(encoding="utf-8")),
                         stages=stages, rows=tuple(parse_stage_table((path / "report.md").read_text(encoding="utf-8"))),
                         timings=json.loads((path / "timings.json").read_text(encoding="utf-8")))
