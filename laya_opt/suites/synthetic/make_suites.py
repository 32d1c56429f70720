"""Regenerate the shipped suites in laya_opt/suites/data/ (deterministic bytes).

    python -m laya_opt.suites.synthetic.make_suites [--out laya_opt/suites/data] [--check]

`--check` compares the files on disk with a fresh build and exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

from laya_opt.util.resources import suites_dir

from laya_opt.suites.synthetic.generator import generate, iter_records, slot_of
from laya_opt.suites.synthetic.hard_cases import CASES, generate_hard
from laya_opt.suites.lexical_baseline import HARD_SUITE_GAP, baseline_report, gaps_to_target
from laya_opt.suites.synthetic.fact_phrasings import PROBE_URGENCY, VALIDATION, with_fact_phrasings
from laya_opt.suites.synthetic.lexicon import FACTS, LANGUAGES
from laya_opt.suites.synthetic.templates import templates_for
from laya_opt.suites.suite_file import QTYPES, SuiteRecord, dump_suite, parse_suite

SEEDS = {"heldout": 101, "calib": 202, "smoke": 303, "duplicated": 404, "validation": 505, "heldout_hard": 606,
         "phrasings": 808}
PHRASED = {"urgency": "urgency_phrasing", **{fact: "fact_phrasing" for fact in FACTS}}   # qid base -> phenomenon
MIN_PER_CASE = 30   # questions per (type, phenomenon) in heldout_hard: enough to read a per-case accuracy


def _renumber(name: str, records) -> list[SuiteRecord]:
    return [dataclasses.replace(r, id=f"{name}-{i:04d}") for i, r in enumerate(records)]


def _take_questions(records, n_questions: int) -> list[SuiteRecord]:
    out, total = [], 0
    for record in records:
        if total >= n_questions:
            break
        out.append(record)
        total += len(record.questions)
    return out


def _check_heldout(records: list[SuiteRecord]) -> None:
    tags = [tag for r in records for tag in r.tags.values()]
    options = Counter(t.options for t in tags if t.type == "choice")
    problems = []
    if len(tags) < 500:
        problems.append(f"{len(tags)} questions < 500")
    if {t.type for t in tags} != set(QTYPES):
        problems.append("missing question types")
    if {t.language for t in tags} != set(LANGUAGES):
        problems.append("missing languages")
    if options[1] < 3 or not all(options[k] for k in (2, 5, 10, 20)):
        problems.append(f"choice option counts {sorted(options.items())}")
    if sum(t.length_class == "long" for t in tags) < 50:
        problems.append("fewer than 50 long questions")
    if problems:
        raise RuntimeError("heldout suite requirements not met: " + "; ".join(problems))


def _check_heldout_hard(records: list[SuiteRecord], data: bytes) -> None:
    tags = [tag for r in records for tag in r.tags.values()]
    cases = Counter((t.type, t.phenomenon) for t in tags)
    problems = [f"{case}: {cases[case]} questions < {MIN_PER_CASE}" for case in CASES if cases[case] < MIN_PER_CASE]
    if len(tags) < 450:
        problems.append(f"{len(tags)} questions < 450")
    if {t.language for t in tags} != set(LANGUAGES):
        problems.append("missing languages")
    gaps = gaps_to_target(baseline_report(parse_suite(data, "<heldout_hard>")))
    problems += [f"lexical baseline only {gap:.3f} below the target ({group})" for group, gap in gaps.items()
                 if gap < HARD_SUITE_GAP]
    if problems:
        raise RuntimeError("heldout_hard suite requirements not met: " + "; ".join(problems))


def _validation(seed: int) -> list[SuiteRecord]:
    """Standard questions in the validation wording, then hard cases in it (tagged by phenomenon)."""
    standard = [dataclasses.replace(r, tags={q: dataclasses.replace(t, phenomenon="standard")
                                             for q, t in r.tags.items()})
                for r in generate("validation", 100, seed)]
    return _renumber("validation", standard + generate_hard("validation", 140, seed))


def _phrasings(seed: int, n_questions: int = 640) -> list[SuiteRecord]:
    """Validation-wording records whose facts and urgencies are all said in free words
    (`fact_phrasings.VALIDATION`, `PROBE_URGENCY`); only the questions about those are kept."""
    group = dataclasses.replace(with_fact_phrasings(templates_for("validation"), VALIDATION, share=1.0),
                                urgency_phrases=PROBE_URGENCY, urgency_phrase_share=1.0)
    out, total = [], 0
    for record in iter_records("validation", seed, group):
        phrased = {qid: PHRASED[slot_of(qid)] for qid in record.questions if slot_of(qid) in PHRASED}
        if not phrased:
            continue
        out.append(SuiteRecord(record.id, record.state, {q: record.questions[q] for q in phrased},
                               {q: record.labels[q] for q in phrased},
                               {q: dataclasses.replace(record.tags[q], phenomenon=p) for q, p in phrased.items()}))
        total += len(phrased)
        if total >= n_questions:
            break
    return _renumber("phrasings", out)


def _duplicated(seed: int) -> list[SuiteRecord]:
    """Base records, then exact repeats: whole records (new ids) and repeated questions in a record."""
    base = _renumber("duplicated", [r for r in generate("heldout", 40, seed) if
                                    next(iter(r.tags.values())).length_class != "long"][:14])
    out = list(base)
    for i, record in enumerate(base):
        rid = f"duplicated-{len(base) + i:04d}"
        qids = list(record.questions)[: 1 + i % 3]
        questions = {q: record.questions[q] for q in qids}
        labels = {q: record.labels[q] for q in qids}
        tags = {q: dataclasses.replace(record.tags[q], duplicate_of=f"{record.id}/{q}") for q in qids}
        if i % 2 == 0:   # the same question asked twice within one request
            first = qids[0]
            questions[f"{first}_again"] = record.questions[first]
            labels[f"{first}_again"] = record.labels[first]
            tags[f"{first}_again"] = dataclasses.replace(record.tags[first], duplicate_of=f"{rid}/{first}")
        out.append(SuiteRecord(rid, record.state, questions, labels, tags))
    return out


def build_suites() -> dict[str, bytes]:
    """Suite name -> file bytes."""
    heldout = _renumber("heldout", generate("heldout", 175, SEEDS["heldout"]))
    _check_heldout(heldout)
    calib = _renumber("calib", _take_questions(generate("calib", 400, SEEDS["calib"]), 400))
    smoke_pool = [r for r in generate("heldout", 80, SEEDS["smoke"])
                  if next(iter(r.tags.values())).length_class != "long"]
    first_per_language = {}
    for record in smoke_pool:   # one record per language first, then fill up to ~30 questions
        first_per_language.setdefault(next(iter(record.tags.values())).language, record)
    ordered = list(first_per_language.values()) + [r for r in smoke_pool if r not in first_per_language.values()]
    smoke = _renumber("smoke", _take_questions(ordered, 30))
    duplicated = _duplicated(SEEDS["duplicated"])
    heldout_hard = _renumber("heldout_hard", generate_hard("heldout", 220, SEEDS["heldout_hard"]))
    specs = {
        "heldout": (heldout, "Held-out labelled questions: held-out templates, all types, 1-20 options, "
                             "8 languages, short/medium/long states (fidelity gates)."),
        "calib": (calib, "Calibration split (training templates, separate stream) for temperature fitting."),
        "smoke": (smoke, "Small mixed held-out sample without long states, for fast checks."),
        "duplicated": (duplicated, "Deliberately repeated questions (duplicate_of) for deduplication tests."),
        "validation": (_validation(SEEDS["validation"]),
                       "Validation split: every training decision (progress lines, recipe comparisons) reads it. "
                       "A third wording, disjoint from the training and held-out templates; standard questions "
                       "and hard cases (tags.phenomenon)."),
        "phrasings": (_phrasings(SEEDS["phrasings"]),
                      "Validation wording whose yes/no facts and urgencies are all said in free words "
                      "(fact_phrasings: imperatives, refusals, what was and was not done), written apart from "
                      "the training phrasings and from freeform; only those questions (tags.phenomenon). "
                      "Training decisions may read it (train_standin.py --also-validate); never trained on."),
        "heldout_hard": (heldout_hard,
                         "Held-out hard cases that word overlap cannot solve (fidelity.hard_cases): paraphrased "
                         "instructions, options and noul statements (no training instruction, frames removed), "
                         "distractor options sharing words with the state, negation words that do not negate, "
                         "retracted and absent facts (label false), close decisions. Reported, never tuned on."),
    }
    built = {name: dump_suite(name, records, generator_seed=SEEDS[name], description=desc)
             for name, (records, desc) in specs.items()}
    _check_heldout_hard(heldout_hard, built["heldout_hard"])
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate laya_opt/suites/data/*.jsonl")
    parser.add_argument("--out", type=Path, default=suites_dir())
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = parser.parse_args(argv)
    suites = build_suites()
    stale = []
    for name, data in suites.items():
        path = args.out / f"{name}.jsonl"
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(str(path))
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        n_records = data.count(b"\n") - 1
        print(f"wrote {path} ({len(data)} bytes, {n_records} records)")
    if stale:
        print("stale suite files: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
