"""The decision-change table of a run, rendered from stages.jsonl records (report.md and the console).

Per stage and comparison: questions and near ties gated, decisions changed right->wrong and wrong->right
(decisive and near tie apart), other changes (wrong->other wrong, unlabelled), McNemar's one-sided p and the
95% upper bound on the change rate (fidelity.decisions), then the drift diagnostics (p99 and max |dp|, max
|Δ logit|, max KL). Records written before decisions were recorded have none and are left out.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from laya_opt.util.markdown import markdown_table

NO_VALUE = "—"
COLUMNS = ("stage", "vs", "questions", "near ties", "r→w decisive", "w→r decisive", "r→w near-tie", "w→r near-tie",
           "other changes", "McNemar p", "rate < (95%)", "p99 |Δp|", "max |Δp|", "max |Δlogit|", "max KL")
TYPE_COLUMNS = ("stage", "type", "questions", "near ties", "r→w", "w→r", "other changes", "McNemar p",
                "rate < (95%)")
COMPARISON_LABELS = {"cumulative": "reference", "incremental": "previous"}


def _cell(value: Any, spec: str) -> str:
    return NO_VALUE if value is None else format(float(value), spec)


def _other(split: Mapping) -> int:
    return sum(split[kind]["wrong_to_other_wrong"] + split[kind]["unlabelled"] for kind in ("decisive", "near_tie"))


def _comparisons(record: Mapping) -> list[tuple[str, Mapping]]:
    """(comparison, decisions) of a record; the incremental one only where it differs from the cumulative."""
    decisions = record.get("decisions") or {}
    shown = [("cumulative", decisions.get("cumulative"))]
    if record.get("parent") is not None:
        shown.append(("incremental", decisions.get("incremental")))
    return [(name, value) for name, value in shown if value]


def decision_rows(records: Sequence[Mapping]) -> list[list[str]]:
    rows = []
    for record in records:
        for comparison, split in _comparisons(record):
            metrics = (record.get("metrics") or {}).get(comparison) or {}
            decisive, near = split["decisive"], split["near_tie"]
            rows.append([f"{record['index']} {record['stage']}", COMPARISON_LABELS[comparison],
                         str(decisive["questions"] + near["questions"]), str(near["questions"]),
                         str(decisive["right_to_wrong"]), str(decisive["wrong_to_right"]),
                         str(near["right_to_wrong"]), str(near["wrong_to_right"]), str(_other(split)),
                         _cell(split["mcnemar_p"], ".3g"), _cell(split["change_rate_upper"], ".3g"),
                         _cell(metrics.get("p99_abs_dp"), ".3g"), _cell(metrics.get("max_abs_dp"), ".3g"),
                         _cell(metrics.get("max_abs_dlogit"), ".3g"), _cell(metrics.get("kl_logits_max"), ".3g")])
    return rows


def type_rows(records: Sequence[Mapping]) -> list[list[str]]:
    """Per question type, against the reference."""
    rows = []
    for record in records:
        split = (record.get("decisions") or {}).get("cumulative")
        for qtype, by_type in ((split or {}).get("by_type") or {}).items():
            decisive, near = by_type["decisive"], by_type["near_tie"]
            rows.append([f"{record['index']} {record['stage']}", qtype, str(decisive["questions"] + near["questions"]),
                         str(near["questions"]), str(decisive["right_to_wrong"] + near["right_to_wrong"]),
                         str(decisive["wrong_to_right"] + near["wrong_to_right"]), str(_other(by_type)),
                         _cell(by_type["mcnemar_p"], ".3g"), _cell(by_type["change_rate_upper"], ".3g")])
    return rows


SHOWN_CHANGES = 10


def proof_lines(records: Sequence[Mapping]) -> list[str]:
    """What each stage proves against the reference, one sentence each, naming the first changed questions."""
    lines = []
    for record in records:
        split = (record.get("decisions") or {}).get("cumulative")
        if not split:
            continue
        changed = split.get("changed") or []
        named = "" if not changed else f" ({', '.join(changed[:SHOWN_CHANGES])}" + \
            (f" and {len(changed) - SHOWN_CHANGES} more)" if len(changed) > SHOWN_CHANGES else ")")
        lines.append(f"stage {record['index']} {record['stage']}: {split['proof']}{named}")
    return lines


def console_decision_table(records: Sequence[Mapping]) -> dict | None:
    """The table for the console (rich_table's {title, columns, rows}); None when no record holds decisions."""
    rows = decision_rows(records)
    if not rows:
        return None
    return {"title": "decision changes (r→w: right→wrong; rate <: 95% upper bound on the change rate)",
            "columns": list(COLUMNS), "rows": rows, "justify": {index: "right" for index in range(2, len(COLUMNS))}}


def decision_section(records: Sequence[Mapping]) -> list[str]:
    """report.md's "Decision changes" section; empty when no record holds decisions."""
    rows = decision_rows(records)
    if not rows:
        return []
    lines = ["## Decision changes", "",
             "Approximate passes are judged by the decisions they change: none where the reference decided by a "
             "top-two gap of at least 0.05, near-tie changes within the calibrated allowance, and no significant "
             "loss (McNemar's exact one-sided test of right→wrong against wrong→right, p ≥ 0.05). \"rate <\" is the "
             "one-sided 95% Clopper-Pearson upper bound on the rate of changed decisions. The drift columns are "
             "diagnostics.", "",
             markdown_table(list(COLUMNS), rows, "ll" + "r" * (len(COLUMNS) - 2)), ""]
    lines += [f"- {line}" for line in proof_lines(records)] + [""]
    by_type = type_rows(records)
    if by_type:
        lines += ["By question type (vs the reference):", "",
                  markdown_table(list(TYPE_COLUMNS), by_type, "ll" + "r" * (len(TYPE_COLUMNS) - 2)), ""]
    return lines
