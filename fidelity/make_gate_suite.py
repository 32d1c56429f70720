"""Build the `gate` suite: held-out questions chosen so a gate can see decisions change.

    python -m laya_opt.fidelity.make_gate_suite [--checkpoint standin] [--seed 707] [--out FILE] [--check]

A saturated reference answers almost every question with a wide top-two gap, so a suite drawn at random
holds few near ties (gap < metrics.NEAR_TIE_MARGIN), the questions an approximate pass flips first.
This tool evaluates the FP32 reference on a growing pool of held-out candidates
(`suites.synthetic.gate_pool`), chunk by chunk, until the pool holds `NEAR_TIE_TARGET` near ties; it
keeps every near tie found (at most that many) and a seeded sample of decisive questions up to
`BASE_QUESTIONS`. Long states are not screened (a long question costs several short ones on the CPU):
a seeded `LONG_SHARE` of the suite's questions is drawn from the pool's long records as they come, and
the final evaluation sorts them into near tie and decisive like the rest. Then it adds one-field
variant pairs (`gate_pool.add_variants`). The output depends only
on the seed and the checkpoint, whose digests the header records (`selected_under`). The suite is
evaluated once more as written: the composition printed (type, near tie / decisive, language,
phenomenon, variant) and the near-tie minimum checked are those of the final file.

It lives in `fidelity/` (not `suites/`) because choosing needs the checker, one floor up.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from laya_opt.core.checkpoint import file_sha256, resolve_checkpoint_dir
from laya_opt.core.runtime import load_runtime
from laya_opt.fidelity.checker import Outputs, evaluate, requests_from_suite
from laya_opt.fidelity.metrics import NEAR_TIE_MARGIN, is_near_tie
from laya_opt.suites.suite_file import Suite, SuiteRecord, dump_suite, parse_suite
from laya_opt.suites.synthetic.gate_pool import DEFAULT_SEED, GATE, add_variants, pool_chunks, shipped_states
from laya_opt.util.errors import InputError
from laya_opt.util.resources import STANDIN, checkpoint_path, suites_dir

NEAR_TIE_TARGET = 170       # near ties sought (and kept at most)
MIN_NEAR_TIES = 150         # the final suite must hold at least this many under the reference
BASE_QUESTIONS = 1000       # pool questions kept: the near ties and a decisive sample
VARIANT_COUNT = 120         # one-field variant questions added
MAX_POOL_QUESTIONS = 60000  # the pool stops growing here, near-tie target met or not (run 9: 0.53%, 171 at 32,039)
LONG_SHARE = 0.15           # questions on long states, drawn without screening
BATCH_SIZE = 16             # the reference's batch size (CPU: larger batches pad more and run slower)
DESCRIPTION = ("Default gating suite: held-out wordings (heldout and heldout_hard), new records disjoint from "
               "every other shipped suite, every near tie of the reference found in the pool plus a seeded "
               "decisive sample, and one-field variant pairs (tags variant_of / variant: option order, option "
               "text, type). Chosen under the checkpoint in selected_under; rebuild with "
               "`python -m laya_opt.fidelity.make_gate_suite` when it changes.")


def selected_under(name: str, directory: Path, max_pool_questions: int) -> dict:
    """What the suite was chosen under: the checkpoint's name and the digests of what decides its outputs,
    and the screening limit (the rebuild command needs the same one)."""
    return {"checkpoint": name if name == STANDIN else Path(name).name, "dtype": "float32",
            "near_tie_margin": NEAR_TIE_MARGIN, "max_pool_questions": max_pool_questions,
            "model_sha256": file_sha256(directory / "model.safetensors"),
            "rl_agent_config_sha256": file_sha256(directory / "rl_agent_config.json")}


def _suite(name: str, records: Sequence[SuiteRecord]) -> Suite:
    return Suite(name=name, version=1, path=f"<{name}>", records=tuple(records), sha256="")


def _is_long(record: SuiteRecord) -> bool:
    return next(iter(record.tags.values())).length_class == "long"


@dataclasses.dataclass(frozen=True)
class Pool:
    screened: list[SuiteRecord]    # short and medium states, evaluated
    outputs: Outputs               # the reference on `screened`
    long: list[SuiteRecord]        # long states, not evaluated


def evaluate_pool(runtime, seed: int, taken: frozenset[str], log, max_questions: int = MAX_POOL_QUESTIONS) -> Pool:
    """Chunks of candidates evaluated until NEAR_TIE_TARGET near ties (or `max_questions` questions)."""
    screened, long, questions = [], [], []
    started = time.perf_counter()
    for chunk in pool_chunks(seed, taken):
        long += [record for record in chunk if _is_long(record)]
        chunk = [record for record in chunk if not _is_long(record)]
        outputs = evaluate(runtime, requests_from_suite(_suite("gate-pool", chunk)))
        screened += chunk
        questions += outputs.questions
        near = sum(is_near_tie(q.probabilities) for q in questions)
        log(f"pool: {len(screened)} records, {len(questions)} questions, {near} near ties "
            f"({time.perf_counter() - started:.0f} s)")
        if near >= NEAR_TIE_TARGET or len(questions) >= max_questions:
            break
    return Pool(screened, Outputs(identity=runtime.identity, questions=tuple(questions)), long)


def _keep(records: Sequence[SuiteRecord], kept: set[str]) -> list[SuiteRecord]:
    """The records with only their kept questions, in their own order; empty records go."""
    out = []
    for record in records:
        qids = [qid for qid in record.questions if f"{record.id}/{qid}" in kept]
        if qids:
            out.append(dataclasses.replace(record, questions={q: record.questions[q] for q in qids},
                                           labels={q: record.labels[q] for q in qids},
                                           tags={q: record.tags[q] for q in qids}))
    return out


def choose(pool: Pool, seed: int) -> list[SuiteRecord]:
    """Every near tie (a seeded NEAR_TIE_TARGET of them if more), seeded long questions (LONG_SHARE) and
    seeded decisive questions up to BASE_QUESTIONS, in id order (hard `gate-h-` records, then standard)."""
    rng = random.Random(f"laya-gate/select/{seed}")
    near = [q.key for q in pool.outputs.questions if is_near_tie(q.probabilities)]
    decisive = [q.key for q in pool.outputs.questions if not is_near_tie(q.probabilities)]
    if len(near) > NEAR_TIE_TARGET:
        near = rng.sample(near, NEAR_TIE_TARGET)
    long = [f"{record.id}/{qid}" for record in pool.long for qid in record.questions]
    long = rng.sample(long, min(len(long), round(LONG_SHARE * BASE_QUESTIONS)))
    rest = max(0, BASE_QUESTIONS - len(near) - len(long))
    kept = set(near) | set(long) | set(rng.sample(decisive, min(len(decisive), rest)))
    return sorted(_keep([*pool.screened, *pool.long], kept), key=lambda record: record.id)


# --- Report ---------------------------------------------------------------------------------------------

GROUPS = ("type", "language", "phenomenon", "length_class", "variant")


def composition(outputs: Outputs) -> dict[str, Counter]:
    """Group -> Counter of (value, 'near tie' | 'decisive') over the questions of the final suite."""
    table = {group: Counter() for group in GROUPS}
    for question in outputs.questions:
        kind = "near tie" if is_near_tie(question.probabilities) else "decisive"
        for group in GROUPS:
            table[group][(str(question.tags.get(group) or "-"), kind)] += 1
    return table


def format_composition(table: dict[str, Counter]) -> str:
    lines = [f"{'group':<13}{'value':<15}{'questions':>10}{'near tie':>10}{'decisive':>10}"]
    for group, counts in table.items():
        for value in sorted({value for value, _ in counts}):
            near, decisive = counts[(value, "near tie")], counts[(value, "decisive")]
            lines.append(f"{group:<13}{value:<15}{near + decisive:>10}{near:>10}{decisive:>10}")
    return "\n".join(lines)


# --- Build ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GateBuild:
    data: bytes
    outputs: Outputs          # the reference on the final suite
    build_s: float            # pool generation, evaluation and selection
    evaluate_s: float         # the reference (float32) on the final suite


def build_gate_suite(checkpoint: str, seed: int, data_dir: Path, log=lambda line: None, *,
                     max_pool_questions: int = MAX_POOL_QUESTIONS, min_near_ties: int = MIN_NEAR_TIES) -> GateBuild:
    directory = resolve_checkpoint_dir(checkpoint_path(checkpoint))
    started = time.perf_counter()
    runtime = load_runtime(directory, "float32", batch_size=BATCH_SIZE)
    pool = evaluate_pool(runtime, seed, shipped_states(data_dir), log, max_pool_questions)
    records = add_variants(choose(pool, seed), VARIANT_COUNT, seed)
    data = dump_suite(GATE, records, generator_seed=seed, description=DESCRIPTION,
                      selected_under=selected_under(checkpoint, directory, max_pool_questions))
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    outputs = evaluate(runtime, requests_from_suite(parse_suite(data, f"<{GATE}>")))
    evaluate_s = time.perf_counter() - started
    near = sum(is_near_tie(q.probabilities) for q in outputs.questions)
    if near < min_near_ties or len(outputs.questions) < BASE_QUESTIONS:
        raise InputError(f"checkpoint {checkpoint!r}: the gate suite holds {len(outputs.questions)} questions and "
                         f"{near} near ties (need {BASE_QUESTIONS} and {min_near_ties}); the pool stopped at "
                         f"{len(pool.outputs.questions)} screened questions (max {max_pool_questions})")
    return GateBuild(data, outputs, build_s, evaluate_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build laya_opt/suites/data/gate.jsonl under a reference model")
    parser.add_argument("--checkpoint", default=STANDIN, help="reference checkpoint (default: the bundled stand-in)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=None, help="default: the bundled suites folder's gate.jsonl")
    parser.add_argument("--check", action="store_true", help="compare with the file on disk, write nothing")
    parser.add_argument("--max-pool-questions", type=int, default=MAX_POOL_QUESTIONS,
                        help="stop screening candidates here (the output depends on it)")
    parser.add_argument("--min-near-ties", type=int, default=MIN_NEAR_TIES,
                        help="fail (exit 2) when the final suite holds fewer near ties")
    args = parser.parse_args(argv)
    out = args.out or suites_dir() / f"{GATE}.jsonl"
    try:
        built = build_gate_suite(args.checkpoint, args.seed, suites_dir(),
                                 log=lambda line: print(line, file=sys.stderr, flush=True),
                                 max_pool_questions=args.max_pool_questions, min_near_ties=args.min_near_ties)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    near = sum(is_near_tie(q.probabilities) for q in built.outputs.questions)
    print(format_composition(composition(built.outputs)))
    print(f"{len(built.outputs.questions)} questions, {near} near ties (top-two gap < {NEAR_TIE_MARGIN}); "
          f"built in {built.build_s:.0f} s; the reference (float32) evaluates it in {built.evaluate_s:.0f} s")
    if args.check:
        if not out.is_file() or out.read_bytes() != built.data:
            print(f"stale gate suite: {out}", file=sys.stderr)
            return 1
        return 0
    staging = out.with_name(f".{out.name}.tmp")
    staging.write_bytes(built.data)
    staging.replace(out)   # readers see the old file or the whole new one
    print(f"wrote {out} ({len(built.data)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
