"""The stand-in trainer: packing, fixed-shape batches, training-only losses and targets, one end-to-end run."""
import itertools
import json
import re
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laya_opt.core.prompt import prepare_request
from laya_opt.core.tokens import load_codec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from laya_opt.suites.synthetic import lexicon  # noqa: E402
from laya_opt.suites.synthetic.generator import generate, iter_training_records  # noqa: E402
from laya_opt.suites.suite_file import QuestionTag, SuiteRecord  # noqa: E402
from standin_data import (NO_FACT, OPTION_TOKENS, batch_arrays, fixed_batches, load_packed, pack,  # noqa: E402
                          save_packed, stop_token_ids)
from train_standin import (FACT_IDS, MatchProbe, fact_token_table, matching_loss, noul_target,  # noqa: E402
                           polarity_loss, smoothed_nll)

QUESTIONS = {
    "product": {"type": "choice", "instructions": "Which product is it?",
                "criteria": {"printer": "cartridge, toner", "router": "wifi, network", "phone": "smartphone"}},
    "mood": {"type": "score", "instructions": "Rate the mood.", "criteria": ["furious", "calm", "happy"]},
    "callback": {"type": "noul", "instructions": "The customer wants a call back."},
}
STATE = "My printer shows a cartridge error, the wifi works. I am calm."


@pytest.fixture(scope="module")
def codec():
    return load_codec(ROOT / "checkpoints" / "tokenizer")


@pytest.fixture(scope="module")
def items(codec):
    prepared = prepare_request(STATE, QUESTIONS, codec, 256, 96)
    labels = {"product": 0, "mood": 1, "callback": 0}
    return [(item, labels[item.qid], None) for item in prepared]


def test_pack_round_trips_and_a_stale_cache_is_ignored(items, tmp_path):
    packed = pack(items)
    assert len(packed) == 3 and list(packed.lengths) == [item.length for item, _, _ in items]
    path = tmp_path / "data.npz"
    save_packed(packed, path, key="k1")
    again = load_packed(path, key="k1")
    for field in ("ids", "offsets", "markers", "marker_offsets", "qtype", "label", "fact", "state_holds", "negated",
                  "replaceable"):
        assert np.array_equal(getattr(again, field), getattr(packed, field))
    assert (packed.fact == NO_FACT).all() and (packed.negated == NO_FACT).all()
    assert load_packed(path, key="other") is None and load_packed(tmp_path / "missing.npz", key="k1") is None
    assert [p.name for p in tmp_path.iterdir()] == ["data.npz"]  # no temp file left behind


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=400), st.integers(1, 32), st.integers(0, 9))
def test_fixed_batches_have_one_shape_and_never_repeat_a_question(lengths, batch_size, seed):
    lengths = np.array(lengths)
    batches = list(fixed_batches(lengths, batch_size, np.random.default_rng(seed)))
    assert all(len(b) == batch_size for b in batches)
    seen = np.concatenate(batches) if batches else np.array([], dtype=int)
    assert len(set(seen.tolist())) == len(seen)
    # Only each 50-batch window's ragged tail is dropped.
    assert len(seen) >= len(lengths) - (batch_size - 1) * -(-len(lengths) // (batch_size * 50))


def test_stop_tokens_are_marks_punctuation_and_digits_not_words(codec):
    vocab = codec.tokenizer.get_vocab()
    stops = set(stop_token_ids(vocab).tolist())
    assert {vocab["\u2581"], vocab[":"], vocab["."], vocab["7"]} <= stops
    assert vocab["\u2581urgent"] not in stops and vocab["\u2581card"] not in stops


def test_batch_arrays_mark_the_state_and_each_options_content_tokens(items, codec):
    packed = pack(items)
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    arrays = batch_arrays(packed, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops)
    assert arrays["input_ids"].shape[1] % 16 == 0 and arrays["marker_pos"].shape == (3, 4)
    state_ids = codec.encode(STATE)
    for row, (item, label, _) in enumerate(items):
        ids = arrays["input_ids"][row]
        region = np.flatnonzero(arrays["state_region"][row])
        assert list(ids[region]) == state_ids  # the state's tokens, exactly
        assert arrays["marker_mask"][row].sum() == len(item.markers) and arrays["labels"][row] == label
        for k in range(len(item.markers)):
            kept = [t for t in arrays["option_tokens"][row, k] if t >= 0]
            assert len(kept) <= OPTION_TOKENS and not set(kept) & set(stops.tolist())
            end = item.markers[k + 1] if k + 1 < len(item.markers) else region[0] - 1
            assert set(kept) <= set(item.ids[item.markers[k] + 1:end])
        assert (arrays["option_tokens"][row, len(item.markers):] == -1).all()
    product = next(row for row, (item, _, _) in enumerate(items) if item.qid == "product")
    printer = arrays["option_tokens"][product, 0]
    assert codec.encode(" printer")[-1] in printer.tolist()


def _loss(scores, ids, options, marker_mask, region, exclusive=None):
    return matching_loss(mx.array(scores, dtype=mx.float32), mx.array(ids), mx.array(options),
                         mx.array(marker_mask), mx.array(region),
                         exclusive=None if exclusive is None else mx.array(exclusive)).item()


def test_matching_loss_rewards_attention_on_matching_state_tokens():
    ids = np.array([[2, 10, 3, 4, 11, 4, 12, 3, 50, 11, 51, 3]])   # state = positions 8..10, "11" matches option 0
    options = np.array([[[11, -1], [12, -1]]])
    marker_mask = np.array([[True, True]])
    region = np.zeros((1, 12), dtype=bool)
    region[0, 8:11] = True
    on_match = np.zeros((1, 2, 12))
    on_match[0, 0, 9] = 20.0
    off_match = np.zeros((1, 2, 12))
    off_match[0, 0, 8] = 20.0
    assert _loss(on_match, ids, options, marker_mask, region) < 1e-6
    assert _loss(off_match, ids, options, marker_mask, region) > 10
    # Scores outside the state region do not count, whatever they are.
    noisy = on_match.copy()
    noisy[0, 0, 4] = 100.0
    assert _loss(noisy, ids, options, marker_mask, region) < 1e-6


def _shared_word_case():
    """State = positions 7..8; token 11 is both options' only word and sits at position 7."""
    region = np.zeros((1, 10), dtype=bool)
    region[0, 7:9] = True
    return (np.array([[2, 3, 4, 11, 4, 11, 3, 11, 60, 3]]), region, np.array([[[11, -1], [11, -1]]]),
            np.zeros((1, 2, 10)))


def test_matching_loss_ignores_tokens_every_option_shares_and_questions_without_matches():
    ids, region, shared, scores = _shared_word_case()
    assert _loss(scores, ids, shared, np.array([[True, True]]), region) == 0.0
    # A padded (masked) marker slot never contributes, even when its tokens would match.
    padded = np.array([[[60, -1], [11, -1]]])
    with_pad = _loss(scores, ids, padded, np.array([[True, False]]), region)
    assert with_pad == pytest.approx(np.log(2.0), abs=1e-5)


def test_match_probe_scores_every_marker_against_every_position():
    probe = MatchProbe(dims=32, width=8)
    encoded = mx.random.normal((2, 12, 32))
    scores = probe(encoded, mx.array([[3, 5, 0], [4, 0, 0]]))
    assert scores.shape == (2, 3, 12)



def _noul_record(lang: str, fact_id: str, holds: bool, negated: bool, qid: str | None = None) -> SuiteRecord:
    fact = lexicon.FACTS[fact_id][lang]
    qid = qid or fact_id
    question = {"type": "noul", "instructions": f"True or false: {fact.negation if negated else fact.statement}"}
    return SuiteRecord("r", f"Hello. {fact.holds if holds else fact.fails} Thanks.", {qid: question},
                       {qid: holds != negated}, {qid: QuestionTag("noul", lang, 2, "short")})


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("holds", [True, False])
@pytest.mark.parametrize("negated", [True, False])
def test_noul_target_reads_the_state_polarity_and_the_question_negation(lang, holds, negated):
    fact_id = FACT_IDS[3]
    row, state_holds, question_negated = noul_target(_noul_record(lang, fact_id, holds, negated), fact_id)
    assert (state_holds, question_negated) == (int(holds), int(negated))
    assert row == lexicon.LANGUAGES.index(lang) * len(FACT_IDS) + 3
    # A repeated question ("<fact>_2") names the same fact.
    again = noul_target(_noul_record(lang, fact_id, holds, negated, qid=f"{fact_id}_2"), f"{fact_id}_2")
    assert again == (row, state_holds, question_negated)


def test_noul_target_is_none_for_other_questions_and_unfound_facts():
    record = _noul_record("en", FACT_IDS[0], True, False)
    unrelated = SuiteRecord("r", "Nothing to see.", record.questions, record.labels, record.tags)
    assert noul_target(unrelated, FACT_IDS[0]) is None          # the state states neither sentence
    choice = SuiteRecord("r", record.state, {"x": {"type": "choice", "instructions": "?", "criteria": ["a", "b"]}},
                         {"x": "a"}, {"x": QuestionTag("choice", "en", 2, "short")})
    assert noul_target(choice, "x") is None


@pytest.mark.parametrize("phrased", [False, True])
def test_every_generated_noul_question_gets_its_targets_and_they_explain_the_label(phrased):
    # with --fact-phrasings half the facts are said in free words: the polarity targets read those too
    records = (list(itertools.islice(iter_training_records(5, fact_phrasings=True), 300)) if phrased
               else generate("train", 300, seed=5))
    noul = [(r, q) for r in records for q, spec in r.questions.items() if spec["type"] == "noul"]
    assert len(noul) > 50
    for record, qid in noul:
        target = noul_target(record, qid)
        assert target is not None, (record.id, qid)
        assert (bool(target[1]) != bool(target[2])) == record.labels[qid]  # the label is the XOR of the bits


def test_fact_token_table_holds_each_facts_own_words(codec):
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    table = fact_token_table(codec, stops)
    assert table.shape == (len(lexicon.LANGUAGES) * len(FACT_IDS), OPTION_TOKENS)
    assert ((table >= 0).sum(axis=1) > 0).all()                 # every fact has words of its own
    en = lexicon.LANGUAGES.index("en")
    for fi, fid in enumerate(FACT_IDS):
        own = set(table[en * len(FACT_IDS) + fi][table[en * len(FACT_IDS) + fi] >= 0].tolist())
        fact = lexicon.FACTS[fid]["en"]
        assert own <= set(codec.encode(fact.holds)) | set(codec.encode(fact.fails))
        others = [lexicon.FACTS[o]["en"] for o in FACT_IDS if o != fid]
        assert not own & set().union(*(set(codec.encode(f.holds)) | set(codec.encode(f.fails)) for f in others))
        assert not own & set(stops.tolist())


def test_batch_arrays_point_noul_markers_at_their_fact_and_carry_the_bits(codec):
    record = _noul_record("en", FACT_IDS[2], holds=False, negated=True)
    item = prepare_request(record.state, record.questions, codec, 256, 96)[0]
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    table = fact_token_table(codec, stops)
    packed = pack([(item, 1, None)], [noul_target(record, item.qid)])
    arrays = batch_arrays(packed, np.arange(1), codec.pad_id, codec.sep_id, slots=3, stop_ids=stops,
                          fact_tokens=table)
    row = noul_target(record, item.qid)[0]
    assert (arrays["option_tokens"][0, :2] == table[row]).all() and (arrays["option_tokens"][0, 2] == -1).all()
    assert arrays["noul_bits"].tolist() == [[0, 1]]
    # Without a table the markers keep their own option words.
    plain = batch_arrays(packed, np.arange(1), codec.pad_id, codec.sep_id, slots=3, stop_ids=stops)
    assert not (plain["option_tokens"][0, :2] == table[row]).all()


def test_replacement_keeps_option_words_stop_tokens_and_noul_questions(items, codec):
    packed = pack(items)
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    pool = np.array([4000, 4001])
    clean = batch_arrays(packed, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops)
    noisy = batch_arrays(packed, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops,
                         replace_prob=1.0, replace_pool=pool, rng=np.random.default_rng(0))
    for row, (item, _, _) in enumerate(items):
        before, after = clean["input_ids"][row], noisy["input_ids"][row]
        changed = np.flatnonzero(before != after)
        if item.type_name == "noul":
            assert changed.size == 0
            continue
        assert changed.size > 0 and set(after[changed].tolist()) <= {4000, 4001}
        options = set(before[item.markers[0]:np.flatnonzero(clean["state_region"][row])[0]].tolist())
        assert not set(before[changed].tolist()) & (options | set(stops.tolist()))
        assert changed.min() > 0 and (changed < item.markers[0] - 1).any() and clean["state_region"][row][changed].any()
        # The option region, the markers and every special token stay as they were.
        assert all(before[j] == after[j] for j in range(item.markers[0] - 1, item.markers[-1] + 1))
    product = next(row for row, (item, _, _) in enumerate(items) if item.qid == "product")
    cartridge = codec.encode(" cartridge")[-1]
    assert cartridge in noisy["input_ids"][product][clean["state_region"][product]].tolist()


def test_replacement_leaves_questions_packed_as_not_replaceable_alone(items, codec):
    stops = stop_token_ids(codec.tokenizer.get_vocab())
    kept = pack(items, replaceable=[False] * len(items))
    clean = batch_arrays(kept, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops)
    noisy = batch_arrays(kept, np.arange(3), codec.pad_id, codec.sep_id, slots=4, stop_ids=stops,
                         replace_prob=1.0, replace_pool=np.array([4000, 4001]), rng=np.random.default_rng(0))
    assert (clean["input_ids"] == noisy["input_ids"]).all()
    assert pack(items).replaceable.tolist() == [1, 1, 1]


def test_label_smoothing_per_row_spreads_over_each_questions_own_options():
    logits = mx.array([[2.0, 0.0, -1e4], [1.0, 3.0, 0.0]])   # row 0 has two options, row 1 three
    log_probs = logits - mx.logsumexp(logits, axis=1, keepdims=True)
    labels, mask = mx.array([0, 1]), mx.array([[True, True, False], [True, True, True]])
    lp = np.array(log_probs)
    plain = -lp[[0, 1], [0, 1]]
    uniform = np.array([-(lp[0, 0] + lp[0, 1]) / 2, -lp[1].sum() / 3])
    assert np.allclose(np.array(smoothed_nll(log_probs, labels, mask, 0.0)), plain)
    both = np.array(smoothed_nll(log_probs, labels, mask, 0.1))
    assert np.allclose(both, 0.9 * plain + 0.1 * uniform)
    # one smoothing per row (--hard-label-smoothing: hard rows apart from standard ones)
    per_row = np.array(smoothed_nll(log_probs, labels, mask, mx.array([0.0, 0.3])))
    assert np.allclose(per_row, [plain[0], 0.7 * plain[1] + 0.3 * uniform[1]])


def test_hard_label_smoothing_reaches_the_hard_rows_of_the_named_types_only():
    from train_standin import row_smoothing
    standard = mx.array([1, 0, 0, 0, 1])     # rows 1-3 are hard cases
    qtype = mx.array([2, 0, 1, 2, 0])        # choice 0, score 1, noul 2
    every = np.array(row_smoothing(standard, qtype, 0.01, 0.3))
    assert np.allclose(every, [0.01, 0.3, 0.3, 0.3, 0.01])
    assert np.allclose(np.array(row_smoothing(standard, qtype, 0.01, 0.3, ("noul",))), [0.01, 0.01, 0.01, 0.3, 0.01])
    assert np.allclose(np.array(row_smoothing(standard, qtype, 0.0, 0.3, ("choice", "score"))), [0, 0.3, 0.3, 0, 0])
    # nothing apart: the plain number, so the default step keeps no uniform term
    assert row_smoothing(standard, qtype, 0.0, None) == 0.0 and row_smoothing(standard, qtype, 0.1, 0.1) == 0.1


def test_hard_smoothing_types_are_named_types_each_once(capsys):
    from train_standin import main, question_types
    assert question_types("noul") == ("noul",) and question_types("noul, choice") == ("choice", "noul")
    for bad in ("nol", "noul,noul", ",", "choice,yesno"):
        with pytest.raises(SystemExit):
            main(["--hard-smoothing-types", bad])
        error = capsys.readouterr().err
        assert "--hard-smoothing-types" in error
    assert "unknown: yesno" in error   # the last one names what it does not know


def test_polarity_loss_averages_the_known_bits_only():
    logits = mx.array([[[4.0, -4.0], [-4.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])
    right = polarity_loss(logits, mx.array([[0, 1], [-1, -1]])).item()
    wrong = polarity_loss(logits, mx.array([[1, 0], [-1, -1]])).item()
    assert right < 1e-3 and wrong > 7
    assert polarity_loss(logits, mx.array([[-1, -1], [-1, -1]])).item() == 0.0
    assert polarity_loss(logits, mx.array([[-1, -1], [0, 1]])).item() == pytest.approx(np.log(2.0), abs=1e-5)


def test_matching_loss_keeps_shared_targets_of_rows_marked_not_exclusive():
    ids, region, shared, scores = _shared_word_case()
    scores[0, :, 7] = 20.0
    both = np.array([[True, True]])
    assert _loss(scores, ids, shared, both, region, exclusive=[True]) == 0.0   # dropped as a shared word
    assert _loss(scores, ids, shared, both, region, exclusive=[False]) < 1e-6  # a noul fact: both markers look there


def test_match_probe_polarity_reads_the_mean_of_the_real_markers():
    probe = MatchProbe(dims=8, width=4)
    encoded = mx.random.normal((1, 6, 8))
    logits = probe.polarity_logits(encoded, mx.array([[2, 4, 0]]), mx.array([[True, True, False]]))
    expected = probe.polarity((encoded[0, 2] + encoded[0, 4]) / 2).reshape(2, 2)
    assert logits.shape == (1, 2, 2) and mx.allclose(logits[0], expected, atol=1e-5).item()


@pytest.mark.parametrize("split", ["train", "train_paraphrased"])
def test_noul_targets_of_hard_cases_are_absent_or_explain_the_label(split):
    # train_paraphrased (--training-paraphrases) states the facts in the training paraphrases: the polarity
    # targets must find them there too, or those questions lose the noul loss.
    from laya_opt.suites.synthetic.hard_cases import generate_hard
    records = generate_hard(split, 300, seed=5)
    noul = [(r, q) for r in records for q, spec in r.questions.items() if spec["type"] == "noul"]
    kinds = {r.tags[q].phenomenon for r, q in noul}
    assert {"absent_fact", "retracted", "negation_word", "paraphrase"} <= kinds
    for record, qid in noul:
        target = noul_target(record, qid)
        if record.tags[qid].phenomenon in ("absent_fact", "retracted", "negation_word"):
            assert target is None, (record.id, qid)   # no sentence found, or one that does not say what holds
        else:
            assert (bool(target[1]) != bool(target[2])) == record.labels[qid], (record.id, qid)


def _small_validation(tmp_path) -> Path:
    from laya_opt.suites.suite_file import dump_suite, load_suite
    from laya_opt.util.resources import suite_path
    records = load_suite(suite_path("validation")).records
    path = tmp_path / "validation_small.jsonl"
    path.write_bytes(dump_suite("validation_small", records[:4] + records[-4:], generator_seed=None, description="t"))
    return path


@pytest.mark.parametrize("suites, heldout_n", [
    (["--heldout-suite", "smoke", "--calib-suite", "smoke"], 30),
    pytest.param([], 558, marks=pytest.mark.slow),  # the shipped recipe's suites
])
def test_training_script_runs_end_to_end_and_writes_a_loadable_checkpoint(tmp_path, capsys, monkeypatch, suites,
                                                                          heldout_n):
    import train_standin
    from laya_opt.core.checkpoint import load_checkpoint
    from train_standin import main

    splits = []
    real = train_standin.generate_hard
    varied = []
    real_records = train_standin.iter_training_records
    monkeypatch.setattr(train_standin, "iter_training_records", lambda seed, **flags: varied.append(flags) or
                        real_records(seed, **flags))
    hard_flags = []
    monkeypatch.setattr(train_standin, "generate_hard", lambda split, n, seed, **flags: splits.append(split) or
                        hard_flags.append(flags) or real(split, n, seed, **flags))
    out, cache = tmp_path / "ck", tmp_path / "data.npz"
    validation = ["--validation-suite", _small_validation(tmp_path), "--also-validate", _small_phrasings(tmp_path),
                  "--keep-best"] if suites else []
    args = ["--out", out, "--data-cache", cache, "--train-records", "60", "--steps", "3", "--batch-size", "8",
            "--hidden-size", "64", "--aux-weight", "1", "--noul-weight", "1", "--replace-prob", "0.15",
            "--hard-fraction", "0.25", "--training-paraphrases", "--varied-topics", "--varied-noul-frames",
            "--urgency-phrases", "--fact-phrasings", "--eval-every", "2",
            "--label-smoothing", "0.03", "--hard-label-smoothing", "0.1", "--hard-smoothing-types", "noul",
            "--max-len", "320", "--head-max-len", "112", *suites, *validation]
    assert main([str(a) for a in args]) == 0
    assert splits == ["train_paraphrased"]   # the hard cases state their facts in the training paraphrases
    # the standard records state their topics in the varied frames and some urgencies in phrases; both streams
    # frame noul in NOUL_FRAMES
    assert varied == [{"varied_topics": True, "varied_noul": True, "urgency_phrases": True, "fact_phrasings": True}]
    assert hard_flags == [{"varied_noul": True}]
    printed = capsys.readouterr().out
    assert "step 2:" in printed and "noul loss" in printed and "validation accuracy" in printed
    assert "held-out accuracy" in printed and "lexical baseline" in printed
    checkpoint = load_checkpoint(out, dtype="float32")
    assert checkpoint.encoder_config.hidden_size == 64
    # The token budgets given are the checkpoint's, and the training data were cut to them.
    assert (checkpoint.agent_config.max_len, checkpoint.agent_config.head_max_len) == (320, 112)
    with np.load(cache) as data:
        assert 256 < int(np.diff(data["offsets"]).max()) <= 320
    metrics = json.loads((out / "training_metrics.json").read_text())
    assert metrics["steps"] == 3 and metrics["noul_weight"] == 1.0 and metrics["hard_fraction"] == 0.25
    assert metrics["training_paraphrases"] is True and metrics["varied_topics"] is True
    assert metrics["varied_noul_frames"] is True and metrics["urgency_phrases"] is True
    assert metrics["fact_phrasings"] is True
    if suites:   # the second validation suite is read by the progress lines, and reported with that role
        also = str(_small_phrasings(tmp_path))
        assert list(metrics["also_validated"]) == [also] and metrics["also_validated"][also]["overall"]["n"] == 6
        assert re.search(r"validation accuracy \S+ \(.*; \S*validation_small\S* [0-9.]+, \S*phrasings_small\S* "
                         r"[0-9.]+\)", printed)
        report = (out / "TRAINING.md").read_text()
        assert f"| {also} | validation |" in report
        assert re.search(r"weights kept \(--keep-best\): step \d+, validation accuracy [0-9.]+ \(over the "
                         r"questions of \S*validation_small\S*, \S*phrasings_small\S*\)", report)
    assert (metrics["label_smoothing"], metrics["hard_label_smoothing"]) == (0.03, 0.1)
    assert metrics["hard_smoothing_types"] == ["noul"]
    assert json.loads((out / "rl_agent_config.json").read_text())["training"]["hard_smoothing_types"] == ["noul"]
    assert metrics["heldout_calibrated"]["overall"]["n"] == heldout_n and metrics["smoke_calibrated"]["overall"]["n"]
    assert list(metrics["reported"]) == metrics["heldout_suites"] and metrics["validation_calibrated"]["lexical"]
    assert (out / "TRAINING.md").read_text().startswith("# laya-tiny") and cache.exists()
    with np.load(cache) as data:   # the hard cases (a quarter of the records) are kept from token replacement
        assert set(data["replaceable"].tolist()) == {0, 1}
    # An existing output directory is never replaced without --force.
    with pytest.raises(SystemExit) as refused:
        main([str(a) for a in args])
    assert refused.value.code == 2 and (out / "model.safetensors").exists()


def test_a_run_split_over_calls_with_resume_trains_the_same_weights_as_one_call(tmp_path, capsys, monkeypatch):
    """--resume: the first call saves its state and no checkpoint, the same command continues it, and the
    weights equal those of one uninterrupted call (same batches, learning rates, AdamW moments and random key)."""
    import train_standin
    from mlx.utils import tree_flatten
    from train_standin import main

    lines = []   # (step, steps taken in this call) of each progress line
    report = train_standin.report_progress
    monkeypatch.setattr(train_standin, "report_progress",
                        lambda step, *args: lines.append((step, args[-1])) or report(step, *args))

    from laya_opt.core.checkpoint import load_checkpoint
    cache, validation = tmp_path / "data.npz", _small_validation(tmp_path)
    common = ["--data-cache", cache, "--train-records", "60", "--steps", "6", "--batch-size", "8",
              "--hidden-size", "64", "--aux-weight", "1", "--noul-weight", "1", "--replace-prob", "0.15",
              "--hard-fraction", "0.25", "--eval-every", "100", "--heldout-suite", "smoke", "--calib-suite", "smoke",
              "--validation-suite", validation, "--workers", "1"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert main([str(a) for a in ["--out", whole, *common]]) == 0
    lines.clear()
    snapshot = tmp_path / "snapshot"
    resumable = [str(a) for a in ["--out", split, *common, "--resume", "--max-call-steps", "2",
                                  "--snapshot", snapshot]]
    assert main(resumable) == 0
    state = split.with_name("split.state")
    assert not split.exists() and json.loads((state / "state.json").read_text())["calls"] == 1
    # The snapshot holds the state's weights, rounded to float16, as a checkpoint that loads.
    saved = mx.load(str(state / "state.safetensors"))
    snapped = load_checkpoint(snapshot, dtype="float32").model
    for name, value in tree_flatten(snapped.parameters()):
        expected = saved[f"model.laya.{name}"].astype(mx.float16).astype(mx.float32)
        assert mx.array_equal(value, expected).item(), name
    assert "run the same command again to continue" in capsys.readouterr().out
    calls = 1
    while not split.exists() and calls < 6:
        assert main(resumable) == 0
        calls += 1
    assert split.exists() and not state.exists()
    metrics = json.loads((split / "training_metrics.json").read_text())
    whole_metrics = json.loads((whole / "training_metrics.json").read_text())
    assert metrics["calls"] == calls >= 2 and metrics["steps"] == whole_metrics["steps"]
    # what decides whether two runs fit on one GPU side by side: the log and the metrics say it
    assert metrics["peak_memory_gib_last_call"] > 0 and "GiB" in capsys.readouterr().out
    a, b = mx.load(str(whole / "model.safetensors")), mx.load(str(split / "model.safetensors"))
    assert a.keys() == b.keys() and all(mx.array_equal(a[k], b[k]).item() for k in a)
    # a resumed call's rate counts its own steps (run 8's second call printed 248 steps/s from all of them)
    resumed = [(step, here) for step, here in lines if step > 2]
    assert resumed and all(here <= 2 for _, here in resumed)


def test_resume_refuses_a_state_saved_with_other_settings(tmp_path, capsys):
    from train_standin import main
    common = ["--data-cache", tmp_path / "data.npz", "--train-records", "60", "--steps", "6", "--batch-size", "8",
              "--hidden-size", "64", "--eval-every", "100", "--heldout-suite", "smoke", "--calib-suite", "smoke",
              "--validation-suite", _small_validation(tmp_path), "--workers", "1", "--resume", "--max-call-steps", "1"]
    out = tmp_path / "ck"
    assert main([str(a) for a in ["--out", out, *common]]) == 0
    with pytest.raises(SystemExit) as refused:
        main([str(a) for a in ["--out", out, *common, "--lr", "0.002"]])
    assert "--lr 0.001 (now 0.002)" in str(refused.value.code) and not out.exists()
    with pytest.raises(SystemExit) as refused:
        main([str(a) for a in ["--out", out, *common[:-3], "--max-call-steps", "1"]])
    assert refused.value.code == 2 and "--max-call-steps needs --resume" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        main([str(a) for a in ["--out", out, *common[:-3], "--snapshot", tmp_path / "snap"]])
    assert refused.value.code == 2 and "--snapshot needs --resume" in capsys.readouterr().err


def test_init_from_keeps_the_trained_weights_and_refuses_another_shape(tmp_path, capsys):
    """--init-from starts from a checkpoint's weights: --lexical-init (device_train.sh's recipe passes 1.0)
    must not overwrite its learnt queries and keys, and a checkpoint of another width or token budget is
    refused before any data is prepared."""
    from mlx.utils import tree_flatten
    from train_standin import main

    from laya_opt.core.checkpoint import load_checkpoint
    common = ["--data-cache", tmp_path / "data.npz", "--train-records", "60", "--batch-size", "8", "--workers", "1",
              "--hidden-size", "64", "--eval-every", "100", "--heldout-suite", "smoke", "--calib-suite", "smoke",
              "--validation-suite", _small_validation(tmp_path)]
    first, second = tmp_path / "first", tmp_path / "second"
    assert main([str(a) for a in ["--out", first, *common, "--steps", "3"]]) == 0   # random Q/K, no identity
    capsys.readouterr()
    assert main([str(a) for a in ["--out", second, *common, "--steps", "1", "--lr", "1e-9", "--lexical-init", "1.0",
                                  "--init-from", first]]) == 0
    assert "--lexical-init is not applied" in capsys.readouterr().out
    before = dict(tree_flatten(load_checkpoint(first, dtype="float32").model.parameters()))
    after = dict(tree_flatten(load_checkpoint(second, dtype="float32").model.parameters()))
    assert before.keys() == after.keys()
    for name, value in before.items():   # one step at lr 1e-9: the float16 checkpoint holds the same weights
        assert np.allclose(np.array(after[name]), np.array(value), atol=1e-3), name
    recorded = json.loads((second / "rl_agent_config.json").read_text())["training"]
    assert recorded["lexical_init"] == 0.0 and recorded["init_from"] == str(first)

    for extra, message in ((["--hidden-size", "128"], "hidden_size 64 (this run: 128)"),
                           (["--max-len", "320", "--head-max-len", "112"], "max_len 256 (this run: 320)")):
        out = tmp_path / f"refused{len(extra)}"
        with pytest.raises(SystemExit) as refused:
            main([str(a) for a in ["--out", out, *common, "--steps", "1", "--init-from", first, *extra]])
        assert refused.value.code == 2 and message in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit) as refused:
        main([str(a) for a in ["--out", tmp_path / "x", *common, "--init-from", tmp_path / "no_such_checkpoint"]])
    assert refused.value.code == 2 and "no_such_checkpoint" in capsys.readouterr().err


@pytest.mark.parametrize("budgets, message", [
    (["--max-len", "600"], "max_position_embeddings (512)"),
    (["--max-len", "256", "--head-max-len", "256"], "need 4 < head_max_len (256) < max_len (256)"),
])
def test_training_script_refuses_token_budgets_the_model_cannot_hold(tmp_path, capsys, budgets, message):
    from train_standin import main
    with pytest.raises(SystemExit) as refused:
        main(["--out", str(tmp_path / "ck"), *budgets])
    error = capsys.readouterr().err
    assert refused.value.code == 2 and "--max-len/--head-max-len" in error and message in error
    assert not (tmp_path / "ck").exists()


def _small_phrasings(tmp_path) -> Path:
    """The first records of `phrasings` holding six questions, as a suite file of its own."""
    from laya_opt.suites.suite_file import dump_suite, load_suite
    from laya_opt.util.resources import suite_path
    path = tmp_path / "phrasings_small.jsonl"
    if not path.exists():
        records, total = [], 0
        for record in load_suite(suite_path("phrasings")).records:
            if total + len(record.questions) <= 6:
                records.append(record)
                total += len(record.questions)
        assert total == 6
        path.write_bytes(dump_suite("phrasings_small", records, generator_seed=None, description="t"))
    return path


@pytest.mark.parametrize("flags", [["--also-validate", "heldout_hard"], ["--also-validate", "validation"],
                                   ["--also-validate", "phrasings", "--also-validate", "phrasings"]])
def test_also_validate_refuses_a_held_out_or_repeated_suite(tmp_path, capsys, flags):
    from train_standin import main
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "ck"), *flags])
    error = capsys.readouterr().err
    assert "held-out suite" in error if "heldout_hard" in flags else "name each validation suite once" in error


def test_training_script_refuses_a_held_out_suite_for_validation(tmp_path, capsys):
    from train_standin import main
    with pytest.raises(SystemExit) as refused:
        main(["--out", str(tmp_path / "ck"), "--validation-suite", "heldout_hard"])
    assert refused.value.code == 2 and "held-out suites are only reported" in capsys.readouterr().err
    assert not (tmp_path / "ck").exists()


def test_keep_best_saves_the_best_evaluated_weights_across_resumed_calls(tmp_path, monkeypatch, capsys):
    """--keep-best: the checkpoint holds the weights of the evaluation with the best validation accuracy
    (a scripted sequence here, best at step 5), carried through the saved state from call to call. The first
    call's compiling steps (one per bank) are steps 1-3, so the first state saved is step 4's."""
    import train_standin
    from mlx.utils import tree_flatten

    from laya_opt.core.checkpoint import load_checkpoint
    scripted = {1: 0.5, 2: 0.6, 3: 0.6, 4: 0.7, 5: 0.9, 6: 0.9 - 1e-6}
    real = train_standin.report_progress
    monkeypatch.setattr(train_standin, "report_progress",
                        lambda step, *args: (real(step, *args), scripted[step])[1])
    out = tmp_path / "ck"
    args = [str(a) for a in ["--out", out, "--data-cache", tmp_path / "data.npz", "--train-records", "60",
                             "--steps", "6", "--batch-size", "8", "--hidden-size", "64", "--eval-every", "1",
                             "--heldout-suite", "smoke", "--calib-suite", "smoke", "--validation-suite",
                             _small_validation(tmp_path), "--workers", "1", "--resume", "--max-call-steps", "1",
                             "--keep-best"]]
    state, weights_at = out.with_name("ck.state"), {}
    for _ in range(8):
        assert train_standin.main(args) == 0
        if out.exists():
            break
        meta = json.loads((state / "state.json").read_text())
        saved = mx.load(str(state / "state.safetensors"))
        weights_at[meta["step"]] = {k[len("model.laya."):]: v for k, v in saved.items() if k.startswith("model.laya.")}
        if meta["step"] >= 5:
            assert meta["best"] == {"step": 5, "accuracy": 0.9}
            assert all(mx.array_equal(saved[f"best.{k}"], v).item() for k, v in weights_at[5].items())
    assert out.exists() and 5 in weights_at
    metrics = json.loads((out / "training_metrics.json").read_text())
    assert metrics["kept_step"] == 5 and metrics["kept_validation_accuracy"] == 0.9 and metrics["steps"] == 6
    assert "kept the weights of step 5" in capsys.readouterr().out
    assert "weights kept (--keep-best): step 5" in (out / "TRAINING.md").read_text()
    kept = load_checkpoint(out, dtype="float32").model
    for name, value in tree_flatten(kept.parameters()):
        assert mx.array_equal(value, weights_at[5][name].astype(mx.float16).astype(mx.float32)).item(), name


def test_ema_averages_each_step_survives_resume_and_is_what_the_checkpoint_holds(tmp_path, capsys):
    """--ema DECAY: the compiled step moves the averaged weights (1 - DECAY) of the way to each step's weights;
    the state carries them from call to call, --keep-best keeps averages, and the checkpoint holds them: a run
    split over calls with --keep-best (its one evaluation, the last step, is the best) saves what one call
    without it saves."""
    from train_standin import main

    common = ["--data-cache", tmp_path / "data.npz", "--train-records", "60", "--steps", "6", "--batch-size", "8",
              "--hidden-size", "64", "--eval-every", "100", "--heldout-suite", "smoke", "--calib-suite", "smoke",
              "--validation-suite", _small_validation(tmp_path), "--workers", "1", "--ema", "0.5"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert main([str(a) for a in ["--out", whole, *common]]) == 0
    assert "saved the averaged weights (--ema 0.5) of step 6" in capsys.readouterr().out
    resumable = [str(a) for a in ["--out", split, *common, "--keep-best", "--resume", "--max-call-steps", "1"]]
    state, saved = split.with_name("split.state"), {}
    for _ in range(8):
        assert main(resumable) == 0
        if split.exists():
            break
        meta = json.loads((state / "state.json").read_text())
        saved[meta["step"]] = mx.load(str(state / "state.safetensors"))
        if len(saved) == 1:   # a state saved with one decay does not continue with another
            with pytest.raises(SystemExit) as refused:
                main([*resumable, "--ema", "0.9"])
            assert "--ema 0.5 (now 0.9)" in str(refused.value.code)
    # two states a step apart: the average moved half way to the new step's trained weights
    step = next(s for s in sorted(saved) if s + 1 in saved)
    before, after = saved[step], saved[step + 1]
    averaged = [k for k in after if k.startswith("ema.")]
    assert averaged and {f"ema.{k[len('model.laya.'):]}" for k in after if k.startswith("model.laya.")} == set(averaged)
    for key in averaged:
        trained = after[f"model.laya.{key[len('ema.'):]}"]
        assert np.allclose(np.array(after[key]), 0.5 * np.array(before[key]) + 0.5 * np.array(trained), atol=1e-6), key
    assert not all(mx.array_equal(after[k], after[f"model.laya.{k[len('ema.'):]}"]).item() for k in averaged)
    a, b = mx.load(str(whole / "model.safetensors")), mx.load(str(split / "model.safetensors"))
    assert a.keys() == b.keys() and all(mx.array_equal(a[k], b[k]).item() for k in a)
    record = json.loads((whole / "rl_agent_config.json").read_text())["training"]
    assert record["ema"] == 0.5 and json.loads((whole / "training_metrics.json").read_text())["ema"] == 0.5
    assert "weights averaged (--ema 0.5)" in (whole / "TRAINING.md").read_text()


@pytest.mark.parametrize("value", ["1", "1.5", "-0.1", "nan", "often"])
def test_ema_takes_zero_or_a_decay_between_zero_and_one(value, capsys):
    from train_standin import main
    with pytest.raises(SystemExit) as refused:
        main(["--ema", value, "--steps", "1"])
    assert refused.value.code == 2 and "--ema" in capsys.readouterr().err
