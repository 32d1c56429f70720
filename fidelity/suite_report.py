"""What a checkpoint's accuracy on each suite means: next to the lexical baseline, with calibration and
how saturated its answers are.

    python -m laya_opt.fidelity.suite_report [--checkpoint standin] [--suite NAME ...] [--json | --markdown]

Per suite, evaluated in FP32 by the fidelity checker (the gates' own metrics):
- accuracy, overall and by type (and by type/phenomenon where the suite tags them), next to
  `lexical_baseline`'s on the same questions; and overall next to the heuristic reading only what the
  model's input keeps (`lexical_baseline.predict_visible`: the token budgets cut long states and many
  options, and the tokenizer drops characters it lacks), which tells a weak model from a short budget;
- ECE (`metrics.outputs_ece`), overall and by type;
- the top-1 probability distribution (TOP1_EDGES bins). Saturated answers (p >= 0.99) hide drift: a
  pass can move the logits a lot without moving a saturated probability;
- the decisive/near-tie split: near ties are questions whose top-two gap is under
  `metrics.NEAR_TIE_MARGIN`, where any numerical path may flip the answer (the agreement gates count
  those flips apart).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from laya_opt.util.errors import InputError
from laya_opt.util.markdown import markdown_table
from laya_opt.util.resources import checkpoint_path, suite_names, suite_path
from laya_opt.core.runtime import load_runtime

from laya_opt.fidelity.checker import QuestionOutput, evaluate, requests_from_suite
from laya_opt.suites.lexical_baseline import accuracy_by, baseline_report, case_of, predict_visible
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN, accuracy, outputs_ece, top_two_margin
from laya_opt.suites.suite_file import Suite, load_suite

TOP1_EDGES = (0.0, 0.5, 0.7, 0.9, 0.99, 1.0)   # bins [a, b), the last one closed: 0.99-1.00 is "saturated"


def top1_bins(confidences: Sequence[float]) -> list[dict]:
    """Share of questions per top-1 probability bin."""
    values = np.asarray(confidences, dtype=np.float64)
    index = np.clip(np.searchsorted(TOP1_EDGES, values, side="right") - 1, 0, len(TOP1_EDGES) - 2)
    return [{"bin": f"{lo:.2f}-{hi:.2f}", "share": float(np.mean(index == i))}
            for i, (lo, hi) in enumerate(zip(TOP1_EDGES, TOP1_EDGES[1:]))]


def model_report(questions: Sequence[QuestionOutput]) -> dict:
    margins = [top_two_margin(q.probabilities) for q in questions]
    near = [q for q, m in zip(questions, margins) if m < NEAR_TIE_MARGIN]
    decisive = [q for q, m in zip(questions, margins) if m >= NEAR_TIE_MARGIN]
    report = {
        "overall": {"accuracy": accuracy(questions), "n": len(questions)},
        # ECE per type too: one type can carry a suite's whole calibration error (run 9's noul questions)
        "by_type": {kind: {**row, "ece": outputs_ece([q for q in questions if q.type_name == kind])}
                    for kind, row in accuracy_by(questions, lambda q: q.type_name).items()},
        "ece": outputs_ece(questions),
        "top1": top1_bins([q.answer_confidence for q in questions]),
        "decisive": {"n": len(decisive), "accuracy": accuracy(decisive) if decisive else None},
        "near_tie": {"n": len(near), "accuracy": accuracy(near) if near else None},
    }
    by_case = accuracy_by(questions, lambda q: case_of(q.type_name, q.tags))
    if by_case:
        report["by_case"] = by_case
    return report


def suite_report(runtime, suite: Suite) -> dict:
    """The model's report next to the heuristic's twice: on the whole records (`lexical`, the target's
    floor) and on what the model's token budgets and tokenizer keep of them (`lexical_on_input`)."""
    outputs = evaluate(runtime, requests_from_suite(suite))
    config = runtime.agent_config
    on_input = predict_visible(suite, runtime.codec, config.max_len, config.head_max_len)
    return {"suite": suite.name, "n": suite.n_questions, "model": model_report(outputs.labelled()),
            "lexical": baseline_report(suite), "lexical_on_input": baseline_report(suite, on_input)}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def markdown(reports: Sequence[dict]) -> str:
    """The README tables: one row per suite, then per type, the top-1 bins and the hard cases."""
    summary = markdown_table(
        ["suite", "n", "stand-in", "lexical", "margin", "lexical on the model's input", "ECE", "decisive (acc)",
         "near tie (acc)"],
        [[r["suite"], r["n"], _pct(r["model"]["overall"]["accuracy"]), _pct(r["lexical"]["overall"]["accuracy"]),
          f"{r['model']['overall']['accuracy'] - r['lexical']['overall']['accuracy']:+.3f}",
          _pct(r["lexical_on_input"]["overall"]["accuracy"]), _pct(r["model"]["ece"]),
          f"{r['model']['decisive']['n']} ({_pct(r['model']['decisive']['accuracy'])})",
          f"{r['model']['near_tie']['n']} ({_pct(r['model']['near_tie']['accuracy'])})"] for r in reports],
        "lrrrrrrrr")
    types = sorted({t for r in reports for t in r["model"]["by_type"]})
    by_type = markdown_table(
        ["suite", *(f"{t}: stand-in / lexical" for t in types)],
        [[r["suite"], *(f"{_pct(r['model']['by_type'][t]['accuracy'])} / {_pct(r['lexical']['by_type'][t]['accuracy'])}"
                        if t in r["model"]["by_type"] else "—" for t in types)] for r in reports],
        "l" + "r" * len(types))
    ece_by_type = markdown_table(
        ["suite", "ECE", *(f"{t} ECE" for t in types)],
        [[r["suite"], _pct(r["model"]["ece"]),
          *(_pct(r["model"]["by_type"].get(t, {}).get("ece")) for t in types)] for r in reports],
        "l" + "r" * (len(types) + 1))
    bins = [b["bin"] for b in reports[0]["model"]["top1"]]
    top1 = markdown_table(["suite", *(f"p {b}" for b in bins)],
                          [[r["suite"], *(f"{b['share']:.2f}" for b in r["model"]["top1"])] for r in reports],
                          "l" + "r" * len(bins))
    parts = [summary, "", by_type, "", "Calibration error (ECE) by type:", "", ece_by_type, "",
             "Share of questions by top-1 probability:", "", top1]
    for r in reports:
        if "by_case" in r["model"]:
            cases = r["model"]["by_case"]
            parts += ["", f"`{r['suite']}` by case:", "", markdown_table(
                ["type/phenomenon", "n", "stand-in", "lexical"],
                [[case, row["n"], _pct(row["accuracy"]), _pct(r["lexical"]["by_case"][case]["accuracy"])]
                 for case, row in cases.items()], "lrrr")]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m laya_opt.fidelity.suite_report",
        description="Accuracy of a checkpoint (FP32) on each suite next to the lexical baseline, with ECE, "
                    "the top-1 probability distribution and the decisive/near-tie split.")
    parser.add_argument("--checkpoint", default="standin", help="checkpoint directory, or standin (default)")
    parser.add_argument("--suite", action="append", help="bundled suite name or .jsonl path; repeat for several "
                                                         "(default: every bundled suite)")
    parser.add_argument("--batch-size", type=int, default=64)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the reports as JSON")
    output.add_argument("--markdown", action="store_true", help="print the README tables (the default output)")
    args = parser.parse_args(argv)
    try:   # bad suites or checkpoints: one line, exit 2, before anything is evaluated
        suites = [load_suite(suite_path(name, "--suite")) for name in args.suite or suite_names()]
        runtime = load_runtime(checkpoint_path(args.checkpoint), "float32", batch_size=args.batch_size)
    except InputError as exc:
        parser.error(str(exc))
    reports = [suite_report(runtime, suite) for suite in suites]
    print(json.dumps(reports, indent=2) if args.json else markdown(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
