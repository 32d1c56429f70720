"""The candidate pool of the `gate` suite, and the one-field variants that make caches show their keys.

The pool is held-out data only: records of the `heldout` wording (`generator.generate`) and of the
`heldout_hard` wording (`hard_cases.generate_hard`), from their own seed, alternating in chunks so a
prefix of the pool is a mix of both. Records whose state appears in any other shipped suite are
dropped, so the gate is disjoint from every suite beside it. Choosing which pool questions enter the
gate needs the reference model, so that step lives one floor up (`laya_opt.fidelity.make_gate_suite`).

A variant repeats one question of a record with exactly one field changed (`VARIANTS`), as a further
question of the same record (same state), tagged `variant_of` (the original's id) and `variant`. A
cache whose key misses that field answers both with one entry, and one of the two flips:

- `option_order`: a choice question's options reversed (the label, an option key, is unchanged);
- `option_text`: the descriptions of two options that are not the answer exchanged (label unchanged);
- `type`: a noul question with both descriptions asked as a choice between the keys `false` and
  `true` (same instructions and option texts; the label is the matching key).
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

from laya_opt.suites.suite_file import VARIANTS, SuiteRecord, load_suite
from laya_opt.suites.synthetic.generator import iter_records
from laya_opt.suites.synthetic.hard_cases import iter_hard_records

GATE = "gate"
DEFAULT_SEED = 707          # not a seed of make_suites.SEEDS: new records, not a shipped suite's
CHUNK_RECORDS = 100         # records per wording per pool chunk
_SUFFIX = {"option_order": "reordered", "option_text": "retexted", "type": "as_choice"}


def state_key(state) -> str:
    """A state's identity across suites (canonical JSON: dict key order does not matter)."""
    return json.dumps(state, sort_keys=True, ensure_ascii=False)


def shipped_states(data_dir: Path, exclude: str = GATE) -> frozenset[str]:
    """Every state of the suites in `data_dir` except `exclude` (the gate itself)."""
    return frozenset(state_key(record.state) for path in sorted(data_dir.glob("*.jsonl")) if path.stem != exclude
                     for record in load_suite(path).records)


def _standard(record: SuiteRecord) -> SuiteRecord:
    """A standard record with `phenomenon: standard` on its tags (as the validation suite's), for reports."""
    return dataclasses.replace(record, tags={qid: dataclasses.replace(tag, phenomenon="standard")
                                             for qid, tag in record.tags.items()})


def pool_chunks(seed: int, taken: frozenset[str]) -> Iterator[list[SuiteRecord]]:
    """Endless chunks of candidate records: `CHUNK_RECORDS` standard, then as many hard ones, per chunk.

    Ids are `gate-s-NNNNN` / `gate-h-NNNNN` by stream position (stable whatever is kept). Records whose
    state is in `taken`, or repeats an earlier candidate's, are skipped.
    """
    streams = (("s", map(_standard, iter_records("heldout", seed))), ("h", iter_hard_records("heldout", seed)))
    seen = set(taken)
    for start in itertools.count(0, CHUNK_RECORDS):
        chunk = []
        for prefix, stream in streams:
            for offset, record in enumerate(itertools.islice(stream, CHUNK_RECORDS)):
                key = state_key(record.state)
                if key not in seen:
                    seen.add(key)
                    chunk.append(dataclasses.replace(record, id=f"{GATE}-{prefix}-{start + offset:05d}"))
        yield chunk


# --- Variants ------------------------------------------------------------------------------------------

def _reordered(question: dict) -> dict | None:
    criteria = question.get("criteria")
    if question["type"] != "choice" or not isinstance(criteria, (list, dict)) or len(criteria) < 2:
        return None
    flipped = list(reversed(criteria)) if isinstance(criteria, list) else dict(reversed(list(criteria.items())))
    return {**question, "criteria": flipped}


def _retexted(question: dict, label) -> dict | None:
    criteria = question.get("criteria")
    if question["type"] != "choice" or not isinstance(criteria, dict):
        return None
    others = [key for key in criteria if key != label and criteria[key] != criteria.get(label)]
    pair = next(((a, b) for a, b in itertools.combinations(others, 2) if criteria[a] != criteria[b]), None)
    if pair is None:
        return None
    a, b = pair
    return {**question, "criteria": {**criteria, a: criteria[b], b: criteria[a]}}


def _as_choice(question: dict, label) -> tuple[dict, str] | None:
    criteria = question.get("criteria")
    if question["type"] != "noul" or "labels" in question or not isinstance(criteria, dict) \
            or set(criteria) != {"false", "true"}:
        return None
    return {**question, "type": "choice", "criteria": {"false": criteria["false"], "true": criteria["true"]}}, \
        "true" if label else "false"


def variant(question: dict, label, kind: str) -> tuple[dict, object] | None:
    """(definition, label) of `question` with the one field `kind` changed; None when it does not apply."""
    if kind == "option_order":
        changed = _reordered(question)
        return None if changed is None else (changed, label)
    if kind == "option_text":
        changed = _retexted(question, label)
        return None if changed is None else (changed, label)
    if kind == "type":
        return _as_choice(question, label)
    raise ValueError(f"unknown variant {kind!r}; expected one of {list(VARIANTS)}")


def variant_slots(records: Sequence[SuiteRecord]) -> list[tuple[int, str, str]]:
    """(record index, qid, variant) for every variant that applies, in suite order."""
    return [(index, qid, kind) for index, record in enumerate(records) for qid, question in record.questions.items()
            for kind in VARIANTS if variant(question, record.labels[qid], kind) is not None]


def add_variants(records: Sequence[SuiteRecord], count: int, seed: int) -> list[SuiteRecord]:
    """`records` with up to `count` variants added, drawn evenly over the variant kinds (seeded)."""
    rng = random.Random(f"laya-gate/variants/{seed}")
    slots = variant_slots(records)
    by_kind = {kind: [slot for slot in slots if slot[2] == kind] for kind in VARIANTS}
    for kind_slots in by_kind.values():
        rng.shuffle(kind_slots)
    chosen: set[tuple[int, str, str]] = set()
    used: set[tuple[int, str]] = set()   # one variant per original question: pairs stay one-field pairs
    for kind in itertools.cycle(VARIANTS):
        if len(chosen) >= count or not any(by_kind.values()):
            break
        while by_kind[kind]:
            slot = by_kind[kind].pop()
            if slot[:2] not in used:
                chosen.add(slot)
                used.add(slot[:2])
                break
    out = list(records)
    for index, qid, kind in sorted(chosen):
        record = out[index]
        definition, label = variant(record.questions[qid], record.labels[qid], kind)
        new_qid = f"{qid}_{_SUFFIX[kind]}"
        tag = dataclasses.replace(record.tags[qid], type=definition["type"], variant_of=qid, variant=kind)
        out[index] = dataclasses.replace(record, questions={**record.questions, new_qid: definition},
                                         labels={**record.labels, new_qid: label}, tags={**record.tags, new_qid: tag})
    return out
