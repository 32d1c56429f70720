"""Suite files (schema, strict loading, shipped contents) and benchmark workloads."""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from laya_opt.suites.synthetic import lexicon as lx
from laya_opt.suites.synthetic.generator import generate
from laya_opt.suites.synthetic.hard_cases import CASES as HARD_CASES, generate_hard
from laya_opt.suites.synthetic.hard_templates import HARD_WORDINGS, HELDOUT_HARD
from laya_opt.suites.lexical_baseline import HARD_SUITE_GAP, baseline_report, gaps_to_target
from laya_opt.suites.synthetic.lexicon import LANGUAGES
from laya_opt.suites.synthetic.make_suites import MIN_PER_CASE, build_suites
from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS
from laya_opt.core.prompt import serialize_state

from laya_opt.suites.suite_file import QTYPES, Suite, SuiteError, dump_suite, load_suite, parse_suite, question_key
from laya_opt.util.resources import suites_dir
from laya_opt.suites.workloads import WORKLOADS, build_workload

REPO = Path(__file__).resolve().parents[2]
SUITES_DIR = suites_dir()
SHIPPED = ("heldout", "calib", "smoke", "duplicated", "validation", "phrasings", "heldout_hard")


@pytest.fixture(scope="module")
def suites() -> dict[str, Suite]:
    return {name: load_suite(SUITES_DIR / f"{name}.jsonl") for name in SHIPPED}


# --- Shipped suites ----------------------------------------------------------------------------------

def test_shipped_files_equal_a_fresh_build():
    built = build_suites()
    assert set(built) == set(SHIPPED)
    for name, data in built.items():
        assert (SUITES_DIR / f"{name}.jsonl").read_bytes() == data, f"{name}.jsonl is stale: run make_suites"


def test_every_suite_loads(suites):
    for name, suite in suites.items():
        assert suite.name == name and suite.version == 1
        assert suite.sha256 == hashlib.sha256((SUITES_DIR / f"{name}.jsonl").read_bytes()).hexdigest()
        assert isinstance(suite.generator_seed, int) and suite.description
        pairs = list(suite.questions())
        assert len(pairs) == suite.n_questions > 0
        assert all(qid in record.questions for record, qid in pairs)


def test_heldout_requirements(suites):
    suite = suites["heldout"]
    tags = [r.tags[q] for r, q in suite.questions()]
    assert len(tags) >= 500
    assert {t.type for t in tags} == set(QTYPES)
    assert {t.language for t in tags} == set(LANGUAGES) and len(LANGUAGES) >= 8
    assert {t.length_class for t in tags} == {"short", "medium", "long"}
    options = Counter(t.options for t in tags if t.type == "choice")
    assert options[1] >= 3 and max(options) == 20 and min(options) == 1
    for record, qid in suite.questions():
        if record.tags[qid].options == 1:
            assert record.labels[qid] == list(record.questions[qid]["criteria"])[0]
    assert (SUITES_DIR / "heldout.jsonl").stat().st_size < 2_000_000
    assert all(t.duplicate_of is None for t in tags)


def test_smoke_calib_and_duplicated_sizes(suites):
    assert 25 <= suites["smoke"].n_questions <= 40
    assert all(t.length_class != "long" for r in suites["smoke"].records for t in r.tags.values())
    assert 380 <= suites["calib"].n_questions <= 420
    dup = suites["duplicated"]
    refs = [(r, q, r.tags[q].duplicate_of) for r, q in dup.questions() if r.tags[q].duplicate_of]
    assert len(refs) >= 10
    assert any(ref.startswith(r.id + "/") for r, _, ref in refs)        # repeated within one request
    assert any(not ref.startswith(r.id + "/") for r, _, ref in refs)    # repeated across requests
    by_id = {r.id: r for r in dup.records}
    for record, qid, ref in refs:
        rid, _, rq = ref.partition("/")
        assert by_id[rid].questions[rq] == record.questions[qid] and by_id[rid].state == record.state


def test_heldout_hard_requirements(suites):
    suite = suites["heldout_hard"]
    tags = [r.tags[q] for r, q in suite.questions()]
    cases = Counter((t.type, t.phenomenon) for t in tags)
    assert set(cases) == set(HARD_CASES) and min(cases.values()) >= MIN_PER_CASE
    assert {t.language for t in tags} == set(LANGUAGES) and len(tags) >= 450
    validation = Counter(r.tags[q].phenomenon for r, q in suites["validation"].questions())
    assert validation["standard"] >= 300 and set(validation) == {"standard", *(p for _, p in HARD_CASES)}


def test_the_lexical_heuristic_is_far_below_the_target_on_heldout_hard_only(suites):
    """The margin is measured here, by the baseline script, on the shipped files: overall and per type."""
    gaps = gaps_to_target(baseline_report(suites["heldout_hard"]))
    assert set(gaps) == {"all", *QTYPES} and min(gaps.values()) >= HARD_SUITE_GAP, gaps
    # The same measure on `heldout` shows why the hard suite exists: there the heuristic beats the target.
    assert gaps_to_target(baseline_report(suites["heldout"]))["all"] < 0


def _strings_of(state) -> list[str]:
    """The text a state holds: the string, an object's values, or each turn's content."""
    if isinstance(state, str):
        return [state]
    if isinstance(state, list):
        return [turn["content"] for turn in state]
    values = [v for value in state.values() for v in (value if isinstance(value, list) else [value])]
    return [v for v in values if isinstance(v, str)]


def _pieces(strings, min_chars: int = 3) -> set[str]:
    """Template text between slots, spaces kept (a log line's " | " is a piece of its layout)."""
    return {p for text in strings for p in re.split(r"\{\w+\}", text) if len(p) >= min_chars and p.strip()}


@pytest.fixture(scope="module")
def training_sample():
    """States and instructions of the stand-in's own training stream (seed 0), standard and hard cases."""
    records = generate("train", 4000, 0) + generate_hard("train", 1000, 0)
    states = {serialize_state(r.state) for r in records}
    texts = "\n".join(s for r in records for s in _strings_of(r.state))
    instructions = {q["instructions"] for r in records for q in r.questions.values()}
    return states, texts, instructions


@pytest.mark.parametrize("name, group, hard", [("heldout_hard", "heldout", "heldout"),
                                               ("validation", "validation", "validation")])
def test_no_state_of_the_new_suites_is_a_training_state(suites, training_sample, name, group, hard):
    train_states, train_text, _ = training_sample
    # Template text between slots that the training stream never writes (short pieces such as "out of" it does).
    own = {piece for piece in _pieces(TEMPLATE_GROUPS[group].all_strings() + HARD_WORDINGS[hard].all_strings())
           if piece not in train_text}
    for record in suites[name].records:
        assert serialize_state(record.state) not in train_states, record.id
        # So it cannot equal any training state: each state has a sentence training never writes.
        assert any(piece in text for text in _strings_of(record.state) for piece in own), record.id


NOUL_FRAMES = sorted({f for group in (*TEMPLATE_GROUPS.values(), HELDOUT_HARD) for items in group.noul_frames.values()
                      for f in items}, key=len, reverse=True)


def instruction_core(text: str) -> str:
    """The instruction with any group's noul frame (and a trailing mask literal) removed."""
    text = text.removesuffix(" [MASK]")
    for frame in NOUL_FRAMES:
        prefix, _, suffix = frame.partition("{s}")
        if frame != "{s}" and text.startswith(prefix) and text.endswith(suffix):
            return text[len(prefix):len(text) - len(suffix)]
    return text


def _training_cores(sample_instructions) -> set[str]:
    # Every training instruction is a training-group instruction or a frame around a lexicon statement.
    train = TEMPLATE_GROUPS["train"]
    cores = {s for table in train.instructions.values() for items in table.values() for s in items}
    cores |= {s for per in lx.FACTS.values() for f in per.values() for s in (f.statement, f.negation)}
    return cores | {instruction_core(text) for text in sample_instructions}


def test_no_heldout_hard_instruction_is_a_training_instruction_once_frames_are_removed(suites, training_sample):
    training = _training_cores(training_sample[2])
    hard = {instruction_core(q["instructions"]) for r in suites["heldout_hard"].records for q in r.questions.values()}
    assert not hard & training
    # The check is not vacuous: it finds the audit's result, every held-out noul instruction is a training one.
    noul = [instruction_core(q["instructions"]) for r in suites["heldout"].records for q in r.questions.values()
            if q["type"] == "noul"]
    assert len(noul) > 150 and set(noul) <= training


def test_validation_shares_no_state_or_instruction_with_the_held_out_suites(suites):
    held_out = [r for name in ("heldout", "heldout_hard", "smoke", "duplicated") for r in suites[name].records]
    states = {serialize_state(r.state) for r in held_out}
    instructions = {q["instructions"] for r in held_out for q in r.questions.values()}
    for record in suites["validation"].records:
        assert serialize_state(record.state) not in states, record.id
        assert not {q["instructions"] for q in record.questions.values()} & instructions, record.id


def test_new_suites_tokenize_as_well_as_heldout(suites):
    from laya_opt.core.tokens import load_codec
    codec = load_codec(REPO / "checkpoints" / "tokenizer")
    unk = codec.tokenizer.token_to_id("[UNK]")

    def unknown_share(suite) -> float:
        ids = [i for r in suite.records for text in (serialize_state(r.state),
                                                     *(q["instructions"] for q in r.questions.values()))
               for i in codec.encode(text)]
        return ids.count(unk) / len(ids)

    assert unknown_share(suites["validation"]) <= unknown_share(suites["heldout"])
    assert unknown_share(suites["heldout_hard"]) <= unknown_share(suites["heldout"])


def test_dump_suite_round_trip(tmp_path):
    records = generate("calib", 5, 1)
    data = dump_suite("x", records, generator_seed=1, description="d")
    (tmp_path / "x.jsonl").write_bytes(data)
    again = load_suite(tmp_path / "x.jsonl")
    assert again == parse_suite(data, tmp_path / "x.jsonl") and again.records[0].to_json() == records[0].to_json()


# --- Strict loading: every error names file and line -------------------------------------------------

def _lines() -> list[dict]:
    records = generate("heldout", 40, 2)
    choice = next(r for r in records if any(q["type"] == "choice" and len(q["criteria"]) > 1
                                            for q in r.questions.values()))
    score = next(r for r in records if any(q["type"] == "score" for q in r.questions.values()))
    noul = next(r for r in records if any(q["type"] == "noul" for q in r.questions.values()))
    header = {"suite": "t", "version": 1, "generator_seed": 2, "description": "d"}
    picked = []
    for record in [choice, score, noul] + records:
        if record not in picked and len(picked) < 3:
            picked.append(record)
    out = [header] + [json.loads(json.dumps(r.to_json(), ensure_ascii=False)) for r in picked]
    for obj in out[1:]:
        obj["tags"] = {q: dict(t) for q, t in obj["tags"].items()}
    return out


def _qid(obj: dict, qtype: str) -> str:
    return next(q for q, d in obj["questions"].items() if d["type"] == qtype)


def _line_of(lines: list[dict], qtype: str) -> int:
    return next(i for i, obj in enumerate(lines) if i and any(d["type"] == qtype for d in obj["questions"].values()))


def _mutate_question(qtype: str, fn):
    def mutate(lines):
        i = _line_of(lines, qtype)
        fn(lines[i], _qid(lines[i], qtype))
        return i + 1
    return mutate


CASES = {
    "header missing key": (lambda L: L[0].pop("description") and 1, "missing key"),
    "header unknown key": (lambda L: L[0].update(extra=1) or 1, "unknown key"),
    "header bad version": (lambda L: L[0].update(version=2) or 1, "version"),
    "record missing key": (lambda L: L[1].pop("tags") and 2, "missing key"),
    "record unknown key": (lambda L: L[1].update(note="x") or 2, "unknown key"),
    "record id not a string": (lambda L: L[1].update(id=7) or 2, "record id"),
    "duplicate record id": (lambda L: L[2].update(id=L[1]["id"]) or 3, "duplicate record id"),
    "state wrong type": (lambda L: L[1].update(state=3.5) or 2, "state must be"),
    "questions not an object": (lambda L: L[1].update(questions=[1]) or 2, "questions must be"),
    "labels keys mismatch": (lambda L: L[1]["labels"].update(extra=1) or 2, "labels keys"),
    "tags keys mismatch": (lambda L: L[1]["tags"].pop(next(iter(L[1]["tags"]))) and 2, "tags keys"),
    "unknown question type": (_mutate_question("choice", lambda o, q: o["questions"][q].update(type="rank")),
                              "unknown type"),
    "unknown question key": (_mutate_question("score", lambda o, q: o["questions"][q].update(hint="x")),
                             "unknown key"),
    "missing instructions": (_mutate_question("noul", lambda o, q: o["questions"][q].pop("instructions")),
                             "'instructions' is missing"),
    "empty choice criteria": (_mutate_question("choice", lambda o, q: o["questions"][q].update(criteria=[])),
                              "empty"),
    "choice label not an option": (_mutate_question("choice", lambda o, q: o["labels"].update({q: "nope"})),
                                   "not one of its options"),
    "score label out of range": (_mutate_question("score", lambda o, q: o["labels"].update({q: 99})),
                                 "level index"),
    "score label is a bool": (_mutate_question("score", lambda o, q: o["labels"].update({q: True})),
                              "level index"),
    "noul label not bool": (_mutate_question("noul", lambda o, q: o["labels"].update({q: 1})), "must be a bool"),
    "noul labels not distinct": (_mutate_question("noul", lambda o, q: o["questions"][q].update(
        labels={"false": "A", "true": "A"})), "noul labels must differ"),
    "noul criteria bad key": (_mutate_question("noul", lambda o, q: o["questions"][q].update(
        criteria={"maybe": "x"})), "noul criteria key 'maybe' is not 'false' or 'true'"),
    "score criteria with null": (_mutate_question("score", lambda o, q: o["questions"][q]["criteria"].append(None)),
                                 "null"),
    "tag type mismatch": (_mutate_question("score", lambda o, q: o["tags"][q].update(type="noul")), "does not match"),
    "tag options wrong": (_mutate_question("choice", lambda o, q: o["tags"][q].update(options=99)), "options"),
    "tag unknown language": (_mutate_question("noul", lambda o, q: o["tags"][q].update(language="xx")),
                             "unknown language"),
    "tag bad length class": (_mutate_question("noul", lambda o, q: o["tags"][q].update(length_class="huge")),
                             "length_class"),
    "tag missing key": (_mutate_question("noul", lambda o, q: o["tags"][q].pop("duplicate_of")), "missing key"),
    "tag unknown phenomenon": (_mutate_question("noul", lambda o, q: o["tags"][q].update(phenomenon="tricky")),
                               "phenomenon 'tricky' not in"),
    "duplicate_of names nothing": (_mutate_question("noul", lambda o, q: o["tags"][q].update(
        duplicate_of="nowhere/x")), "names no earlier question"),
    "duplicate_of differs": (lambda L: L[2]["tags"][next(iter(L[2]["tags"]))].update(
        duplicate_of=f"{L[1]['id']}/{next(iter(L[1]['questions']))}") or 3, "differ"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_errors_name_file_and_line(tmp_path, case):
    mutate, message = CASES[case]
    lines = _lines()
    line = mutate(lines)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(obj, ensure_ascii=False) for obj in lines) + "\n", encoding="utf-8")
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    assert info.value.line == line and isinstance(info.value, ValueError)


@pytest.mark.parametrize("raw,line,message", [
    (b"", 1, "empty file"),
    (b'{"suite": "t", "version": 1, "generator_seed": 1, "description": ""}\n', 1, "no records"),
    (b'{"suite": "t", "version": 1, "generator_seed": 1, "description": ""}\n{not json\n', 2, "invalid JSON"),
    (b'{"suite": "t", "version": 1, "generator_seed": 1, "description": ""}\n\n', 2, "empty line"),
    (b'{"suite": "t", "suite": "u", "version": 1, "generator_seed": 1, "description": ""}\n', 1, "duplicate key"),
    (b'{"suite": "t", "version": 1, "generator_seed": 1, "description": ""}\n\xff\n', 2, "UTF-8"),
    (b'[1, 2]\n', 1, "header must be"),
])
def test_raw_file_errors(tmp_path, raw, line, message):
    path = tmp_path / "raw.jsonl"
    path.write_bytes(raw)
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_valid_mutation_baseline_loads(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text("\n".join(json.dumps(o, ensure_ascii=False) for o in _lines()) + "\n", encoding="utf-8")
    assert load_suite(path).n_questions >= 3
    assert parse_suite(path.read_bytes(), path).sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# --- Workloads ---------------------------------------------------------------------------------------

EXPECTED = {"short-1": 1, "short-16": 16, "short-50": 50, "long-1": 1, "long-10": 10, "mixed": 50}


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_counts_and_distinctness(name):
    workload = build_workload(name)
    assert workload.name == name and len(workload.requests) == 1
    assert workload.n_questions == EXPECTED[name]
    state, questions = workload.requests[0]
    keys = [question_key(q) for q in questions.values()]
    assert len(set(keys)) == len(keys)
    assert list(questions) == [f"q{i:02d}" for i in range(len(questions))]
    assert workload == build_workload(name)
    assert not isinstance(state, list)


def test_workload_shapes():
    from laya_opt.core.tokens import load_codec
    codec = load_codec(REPO / "checkpoints" / "tokenizer")

    def state_tokens(state):
        return len(codec.encode(state if isinstance(state, str) else json.dumps(state, ensure_ascii=False)))

    assert state_tokens(build_workload("long-1").requests[0][0]) > 256
    assert state_tokens(build_workload("short-50").requests[0][0]) < 128
    mixed = list(build_workload("mixed").requests[0][1].values())
    n_options = [len(q["criteria"]) if q["type"] != "noul" else 2 for q in mixed]
    assert n_options[-1] == 20 and max(n_options[:-1]) <= 5


def test_unknown_workload_lists_known_names():
    with pytest.raises(ValueError) as info:
        build_workload("huge-9")
    for name in WORKLOADS:
        assert name in str(info.value)
