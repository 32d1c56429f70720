r"""How well can temperatures calibrate a checkpoint? ECE per suite under several temperature tables.

    python tools/temperature_bounds.py [--checkpoint standin] [--fit validation] [--suite heldout --suite
        heldout_hard] [--by-type] [--json]

Issue 22 asks for ECE <= 0.05 on every held-out suite. A checkpoint's temperatures are fitted on one suite
(`--calib-suite` of tools/train_standin.py) and one per question type, or per type and option bucket
(`temperature_by_options`, "<type>:<2|3-5|6-10|11+>"). This evaluates the checkpoint once in float32 and then,
from the raw option logits, computes each suite's ECE (max p, 10 bins, as the checker) under:

- T = 1, and the checkpoint's own tables (a check: the latter is what the checker reports);
- per type, and per type and bucket, fitted on `--fit` (lowest ECE there);
- per type, and per type and bucket, fitted on the `--suite`s themselves, minimising their largest ECE: a
  bound on what any temperature table of that shape can do, not a calibration to ship (it sees the test);
- per type, and per type and bucket, fitted on the `--suite`s pooled (lowest ECE over all their questions):
  what a calibration sample drawn like the test suites together would find at best;
- not a temperature table: per type, a monotone map of the T = 1 top-1 probability to the accuracy, fitted on
  `--fit` by isotonic regression (pool adjacent violators). Laya's calibration is temperatures only (a
  checkpoint cannot carry this map), so the row only says whether the limit is the calibration family or the
  fitting data: when the map fitted on `--fit` calibrates the `--suite`s, the shape of one temperature per
  cell is what falls short.

`--by-type` prints, instead, where the calibration error comes from: per suite and question type, the count,
the accuracy and the mean top-1 probability, and the ECE at T = 1 and under the checkpoint's tables. A type
whose accuracy moves from suite to suite while its confidence stays (the run-9 stand-in's noul questions) is
one no table fitted on another suite can calibrate.

The fits are coordinate descent over a log-spaced grid within the clamp range [0.5, 5] (decode's), from
T = 1; each step keeps the best grid value, so no fit is worse than where it started.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

import numpy as np

import laya_opt  # noqa: F401  (first: the BLAS choice before mlx.core loads)
from laya_opt.core.decode import Calibration, calibration_from_tables, option_bucket, probability_rows
from laya_opt.core.prompt import QTYPES
from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import evaluate
from laya_opt.fidelity.metrics import ece
from laya_opt.runs.pipeline import suite_requests
from laya_opt.suites.suite_file import load_suite
from laya_opt.util.errors import InputError, LayaError
from laya_opt.util.resources import checkpoint_path, suite_path

GRID = np.exp(np.linspace(np.log(0.5), np.log(5.0), 25))
ROUNDS = 3


@dataclass(frozen=True)
class Answer:
    type_name: str
    logits: np.ndarray   # float32 [k]
    correct: bool        # no temperature moves the argmax


def suite_answers(runtime, name: str) -> list[Answer]:
    outputs = evaluate(runtime, suite_requests([load_suite(suite_path(name, "--suite"))]))
    answers = [Answer(q.type_name, np.asarray(q.logits, np.float32), q.correct) for q in outputs.questions
               if q.label_index is not None]
    if not answers:
        raise InputError(f"--suite {name}: no labelled question, so no calibration error to measure")
    return answers


def confidences(answers: list[Answer], calibration: Calibration) -> list[float]:
    """Each answer's top-1 probability under `calibration`."""
    return [float(probability_rows(a.type_name, a.logits[None], calibration)[0].max()) for a in answers]


def suite_ece(answers: list[Answer], calibration: Calibration) -> float:
    return ece(confidences(answers, calibration), [a.correct for a in answers])


def table(temperatures: dict[str, float]) -> Calibration:
    """A Calibration from {"<type>" or "<type>:<bucket>": T}; types left out keep 1."""
    return calibration_from_tables([temperatures.get(kind, 1.0) for kind in QTYPES],
                                   {key: value for key, value in temperatures.items() if ":" in key})


def keys_of(answers: list[Answer], by_bucket: bool) -> list[str]:
    return sorted({f"{a.type_name}:{option_bucket(len(a.logits))}" if by_bucket else a.type_name for a in answers})


def fit(objective, keys: list[str]) -> dict[str, float]:
    """Coordinate descent from T = 1 over GRID: the table with the lowest objective it finds."""
    temperatures = {key: 1.0 for key in keys}
    best = objective(table(temperatures))
    for _ in range(ROUNDS):
        for key in keys:
            for value in GRID:
                score = objective(table({**temperatures, key: float(value)}))
                if score < best:
                    best, temperatures = score, {**temperatures, key: float(value)}
    return temperatures


def isotonic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool adjacent violators: the non-decreasing step function of x closest to y in squared error, as the
    blocks' mean x and mean y (np.interp between them maps a new x)."""
    order = np.argsort(x, kind="stable")
    blocks: list[list[float]] = []   # [sum x, sum y, count]
    for xi, yi in zip(x[order], y[order]):
        blocks.append([float(xi), float(yi), 1.0])
        while len(blocks) > 1 and blocks[-2][1] / blocks[-2][2] > blocks[-1][1] / blocks[-1][2]:
            sx, sy, n = blocks.pop()
            blocks[-1] = [blocks[-1][0] + sx, blocks[-1][1] + sy, blocks[-1][2] + n]
    return (np.array([b[0] / b[2] for b in blocks]), np.array([b[1] / b[2] for b in blocks]))


def top1(answers: list[Answer]) -> np.ndarray:
    return np.array(confidences(answers, table({})))


def isotonic_row(answers: dict[str, list[Answer]], fit_suite: str, suites: list[str]) -> dict:
    """ECE per suite with each answer's T = 1 top-1 probability mapped by its type's map fitted on `fit_suite`."""
    confidence = {name: top1(answers[name]) for name in dict.fromkeys([fit_suite, *suites])}
    fitted = answers[fit_suite]
    maps = {kind: isotonic(confidence[fit_suite][mask], np.array([a.correct for a in fitted])[mask])
            for kind in sorted({a.type_name for a in fitted})
            for mask in [np.array([a.type_name == kind for a in fitted])]}
    scores = {}
    for name in suites:
        mapped = [float(np.interp(c, *maps[a.type_name])) if a.type_name in maps else float(c)
                  for a, c in zip(answers[name], confidence[name])]
        scores[name] = round(ece(mapped, [a.correct for a in answers[name]]), 4)
    return {"table": f"per type, isotonic map fitted on {fit_suite} (not a temperature table)", "temperatures": None,
            "ece": scores}


def bounds(answers: dict[str, list[Answer]], fit_suite: str, targets: list[str],
           own: Calibration) -> list[dict]:
    """One row per temperature table: its name, the table, and the ECE on every suite."""
    everything = [a for name in (fit_suite, *targets) for a in answers[name]]
    pooled = [a for name in targets for a in answers[name]]

    def on_fit(calibration: Calibration) -> float:
        return suite_ece(answers[fit_suite], calibration)

    def worst(calibration: Calibration) -> float:
        return max(suite_ece(answers[name], calibration) for name in targets)

    plans = [("T = 1", {}), ("the checkpoint's", None)]
    for by_bucket, shape in ((False, "per type"), (True, "per type and bucket")):
        keys = keys_of(everything, by_bucket)
        plans.append((f"{shape}, fitted on {fit_suite}", fit(on_fit, keys)))
        plans.append((f"{shape}, best for {' and '.join(targets)} (a bound)", fit(worst, keys)))
        plans.append((f"{shape}, fitted on {' and '.join(targets)} pooled", fit(lambda c: suite_ece(pooled, c), keys)))
    rows = []
    for name, temperatures in plans:
        calibration = own if temperatures is None else table(temperatures)
        rows.append({"table": name, "temperatures": temperatures if temperatures is not None else {
            "per type": list(own.temperature), "by options": dict(own.temperature_by_options)},
            "ece": {suite: round(suite_ece(answers[suite], calibration), 4) for suite in (fit_suite, *targets)}})
    rows.append(isotonic_row(answers, fit_suite, [fit_suite, *targets]))
    return rows


def by_type(answers: dict[str, list[Answer]], own: Calibration) -> list[dict]:
    """One row per suite and question type: n, accuracy, mean top-1 probability and ECE, at T = 1 and own."""
    rows = []
    for name, suite in answers.items():
        for kind in QTYPES:
            chosen = [a for a in suite if a.type_name == kind]
            if not chosen:
                continue
            row = {"suite": name, "type": kind, "n": len(chosen),
                   "accuracy": round(float(np.mean([a.correct for a in chosen])), 4)}
            for label, calibration in (("t1", table({})), ("own", own)):
                confidence = confidences(chosen, calibration)
                row[f"confidence_{label}"] = round(float(np.mean(confidence)), 4)
                row[f"ece_{label}"] = round(ece(confidence, [a.correct for a in chosen]), 4)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default="standin", help="checkpoint directory, or standin (default)")
    parser.add_argument("--fit", default="validation", help="the suite temperatures are fitted on")
    parser.add_argument("--suite", action="append", help="a suite to report (repeat; default heldout, heldout_hard)")
    parser.add_argument("--by-type", action="store_true",
                        help="instead: accuracy, confidence and ECE per suite and question type (T = 1 and own)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    targets = args.suite or ["heldout", "heldout_hard"]
    try:
        runtime = load_runtime(checkpoint_path(args.checkpoint), "float32")
        answers = {name: suite_answers(runtime, name) for name in dict.fromkeys([args.fit, *targets])}
    except (LayaError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.by_type:
        rows = by_type(answers, runtime.calibration)
        if args.json:
            print(json.dumps(rows, indent=1))
            return 0
        print("| suite | type | n | accuracy | confidence T = 1 | ECE T = 1 | confidence (own) | ECE (own) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['suite']} | {r['type']} | {r['n']} | {r['accuracy']:.3f} | {r['confidence_t1']:.3f} | "
                  f"{r['ece_t1']:.3f} | {r['confidence_own']:.3f} | {r['ece_own']:.3f} |")
        return 0
    rows = bounds(answers, args.fit, targets, runtime.calibration)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    suites = [args.fit, *targets]
    print("| temperatures | " + " | ".join(f"ECE {s}" for s in suites) + " |")
    print("|---|" + "---:|" * len(suites))
    for row in rows:
        print(f"| {row['table']} | " + " | ".join(f"{row['ece'][s]:.4f}" for s in suites) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
