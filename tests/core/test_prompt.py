"""Question validation (§6), rendering (§7.1), mask cleaning (§7.2) and token layout (§7.3)."""
from __future__ import annotations

import datetime
import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from laya_opt.core.prompt import (
         OPTION_TOKEN_CAP,
         QTYPES,
         PreparedQuestion,
         QuestionSpec,
         build_prefix,
         clean_mask_literals,
         prepare_request,
         serialize_state,
         tokenize_state,
         validate_questions,
     )
from laya_opt.core.prompt_roles import render_tokens
from laya_opt.core.tokens import codec_from_tokenizer

from conftest import TINY_SPECIALS, make_tiny_tokenizer

BPE_CORPUS = [
    "the customer reports duplicate billing and requests a refund today",
    "hello world, the agent should escalate billing questions to support",
    "choice question: who should handle this? billing, support, sales",
    "noul question: is the customer angry? yes, the statement holds",
] * 4


@functools.lru_cache(maxsize=None)
def bpe_codec():
    """A byte-level BPE trained in-test; [MASK] has lstrip=True like the ModernBERT tokenizer."""
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(BPE_CORPUS, trainer)
    tokenizer.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=False, special=True)])
    return codec_from_tokenizer(tokenizer, TINY_SPECIALS, source="test-bpe")


@functools.lru_cache(maxsize=None)
def shared_tiny_codec():
    return codec_from_tokenizer(make_tiny_tokenizer(), TINY_SPECIALS)


def choice(criteria, instructions="Who should handle this?", **extra):
    return {"type": "choice", "instructions": instructions, "criteria": criteria, **extra}


def score(criteria, instructions="How urgent is it?", **extra):
    return {"type": "score", "instructions": instructions, "criteria": criteria, **extra}


def noul(instructions="Is the customer angry?", **extra):
    return {"type": "noul", "instructions": instructions, **extra}


def only_spec(definition, qid="q") -> QuestionSpec:
    [spec] = validate_questions({qid: definition})
    return spec


def prepare_one(definition, codec, state="", max_len=128, head_max_len=32, qid="q") -> PreparedQuestion:
    [prepared] = prepare_request(state, {qid: definition}, codec, max_len, head_max_len)
    return prepared


def assert_well_formed(prepared: PreparedQuestion, codec, max_len: int) -> None:
    assert len(prepared.ids) <= max_len
    assert prepared.ids[0] == codec.cls_id
    assert len(prepared.markers) == len(prepared.option_keys)
    assert list(prepared.markers) == sorted(set(prepared.markers))
    assert all(prepared.ids[position] == codec.mask_id for position in prepared.markers)
    assert prepared.ids.count(codec.mask_id) == len(prepared.markers)


# ---------------------------------------------------------------------------------------------------------------------
# §6 validation: one case per rule, each naming the question


INVALID_DEFINITIONS = {
    "definition not a dict": "pick one",
    "definition is a list": ["choice"],
    "type unknown": {"type": "multi", "instructions": "x", "criteria": ["a"]},
    "type missing": {"instructions": "x", "criteria": ["a"]},
    "type not a string": {"type": 0, "instructions": "x", "criteria": ["a"]},
    "instructions missing": {"type": "choice", "criteria": ["a"]},
    "instructions null": {"type": "choice", "instructions": None, "criteria": ["a"]},
    "choice criteria missing": {"type": "choice", "instructions": "x"},
    "choice criteria a string": choice("a, b"),
    "choice criteria a number": choice(3),
    "choice criteria empty dict": choice({}),
    "choice criteria empty list": choice([]),
    "choice label a list": choice([["a"], "b"]),
    "choice label a dict": choice([{"a": 1}, "b"]),
    "choice label a set": choice([{1, 2}]),
    "choice label a bytearray": choice([bytearray(b"a")]),
    "choice label a tuple key": choice({("a", "b"): "x"}),
    "choice label null in list": choice(["a", None]),
    "choice label null dict key": choice({None: "nothing", "a": "x"}),
    "choice labels duplicated": choice(["a", "b", "a"]),
    "choice labels 1 and 1.0 collide": choice([1, 1.0]),
    "choice labels True and 1 collide": choice([True, 1]),
    "choice labels share a str key": choice([1, "1"]),
    "score criteria missing": {"type": "score", "instructions": "x"},
    "score criteria a dict": score({"low": 0, "high": 1}),
    "score criteria a string": score("low"),
    "score criteria a tuple": score(("low", "high")),
    "score criteria empty": score([]),
    "score level null": score(["low", None, "high"]),
    "noul criteria a list": noul(criteria=["yes", "no"]),
    "noul criteria a string": noul(criteria="yes"),
    "noul criteria unknown key": noul(criteria={"maybe": "perhaps"}),
    "noul criteria integer key": noul(criteria={1: "yes"}),
    "noul criteria key repeated across case": noul(criteria={"true": "a", "TRUE": "b"}),
    "noul criteria bool and string keys collide": noul(criteria={True: "a", "true": "b"}),
    "labels on choice": choice(["a", "b"], labels={"false": "B", "true": "A"}),
    "labels on score": score(["low", "high"], labels={"false": "B", "true": "A"}),
    "labels not a dict": noul(labels=["B", "A"]),
    "labels missing true": noul(labels={"false": "B"}),
    "labels extra key": noul(labels={"false": "B", "true": "A", "maybe": "C"}),
    "labels empty dict": noul(labels={}),
    "labels empty string": noul(labels={"false": "", "true": "A"}),
    "labels whitespace only": noul(labels={"false": "B", "true": "   "}),
    "labels non-string": noul(labels={"false": "B", "true": 1}),
    "labels identical": noul(labels={"false": "A", "true": "A"}),
    "labels identical after stripping": noul(labels={"false": " A", "true": "A "}),
}


@pytest.mark.parametrize("definition", INVALID_DEFINITIONS.values(), ids=INVALID_DEFINITIONS.keys())
def test_invalid_question_names_the_question(definition):
    with pytest.raises(ValueError, match="bad_question_7"):
        validate_questions({"ok": choice(["a", "b"]), "bad_question_7": definition})


@pytest.mark.parametrize("questions", [["q"], "q", None, 3, ({"q": {}},)])
def test_questions_must_be_a_dict(questions):
    with pytest.raises(ValueError, match="questions must be a dict"):
        validate_questions(questions)


def test_unknown_type_message_lists_the_three_types():
    with pytest.raises(ValueError) as info:
        validate_questions({"q1": {"type": "boolean", "instructions": "x"}})
    for type_name in QTYPES:
        assert type_name in str(info.value)
    assert "'boolean'" in str(info.value)


def test_prepare_request_validates_before_tokenizing(tiny_codec):
    with pytest.raises(ValueError, match="q2"):
        prepare_request("hello", {"q1": noul(), "q2": score([])}, tiny_codec, 128, 32)


@pytest.mark.parametrize("criteria", [
    {"true": "it holds"}, {"false": "it fails"}, {"TRUE": "x", "False": "y"}, {True: "x", False: "y"}, {}, None,
])
def test_valid_noul_criteria_keys(criteria):
    definition = noul(criteria=criteria) if criteria is not None else noul()
    assert only_spec(definition).option_keys == ("false", "true")


def test_labels_null_is_the_same_as_absent_on_any_type():
    assert only_spec(choice(["a"], labels=None)).option_texts == ("a",)
    assert only_spec(noul(labels=None)).option_texts == only_spec(noul()).option_texts


# ---------------------------------------------------------------------------------------------------------------------
# §7.1 rendering


def test_choice_rendering_zero_and_false_are_real_descriptions():
    spec = only_spec(choice({"zero": 0, "no": False, "plain": None, "empty": "", "text": "billing issues"}))
    assert spec.option_texts == ("zero: 0", "no: false", "plain", "empty", "text: billing issues")
    assert spec.option_keys == ("zero", "no", "plain", "empty", "text")


def test_choice_structured_description_is_compact_json_in_insertion_order():
    spec = only_spec(choice({"d": {"zeta": 1, "alpha": [1, 2.0, None], "ü": "straße"}}))
    assert spec.option_texts == ('d: {"zeta": 1, "alpha": [1, 2.0, null], "ü": "straße"}',)


def test_choice_list_of_scalar_labels_uses_str_for_text_and_keys():
    spec = only_spec(choice([3, 2.5, True, "x"]))
    assert spec.option_texts == ("3", "2.5", "True", "x")
    assert spec.option_keys == ("3", "2.5", "True", "x")


def test_non_string_instructions_are_json_without_ascii_escaping():
    spec = only_spec(choice(["a"], instructions={"frage": "Ist das grün?", "n": [1, 2]}))
    assert spec.instructions == '{"frage": "Ist das grün?", "n": [1, 2]}'
    assert spec.header == 'choice question: {"frage": "Ist das grün?", "n": [1, 2]}'


def test_instructions_json_uses_str_for_unknown_objects():
    when = datetime.date(2024, 5, 1)
    assert only_spec(noul(instructions={"due": when})).instructions == '{"due": "2024-05-01"}'
    assert only_spec(noul(instructions=7)).instructions == "7"


def test_score_texts_and_legend_keep_raw_values():
    levels = ["low", {"x": 1, "y": "é"}, 3, False]
    spec = only_spec(score(levels))
    assert spec.option_texts == ("level 0: low", 'level 1: {"x": 1, "y": "é"}', "level 2: 3", "level 3: false")
    assert spec.option_keys == ("0", "1", "2", "3")
    assert spec.legend == ("low", {"x": 1, "y": "é"}, 3, False)


def test_noul_defaults():
    spec = only_spec(noul())
    assert spec.option_texts == ("false: no, the statement does not hold", "true: yes, the statement holds")
    assert spec.option_keys == ("false", "true")
    assert spec.legend == ()


def test_noul_criteria_rendering_and_partial_defaults():
    spec = only_spec(noul(criteria={"TRUE": {"reason": "angry"}, False: ""}))
    assert spec.option_texts == ("false: no, the statement does not hold", 'true: {"reason": "angry"}')
    assert only_spec(noul(criteria={"false": 0})).option_texts[0] == "false: 0"


def test_noul_labels_change_only_model_facing_words(tiny_codec):
    plain = only_spec(noul())
    labelled = only_spec(noul(labels={"true": "  A ", "false": "B"}))
    assert labelled.option_texts == ("B: no, the statement does not hold", "A: yes, the statement holds")
    assert labelled.option_keys == plain.option_keys == ("false", "true")
    state = "hello hello"
    [without] = prepare_request(state, {"q": noul()}, tiny_codec, 128, 32)
    [with_labels] = prepare_request(state, {"q": noul(labels={"true": "hello", "false": "B"})}, tiny_codec, 128, 32)
    assert without.option_keys == with_labels.option_keys
    assert without.ids[: without.markers[0]] == with_labels.ids[: with_labels.markers[0]]  # header untouched
    assert without.ids != with_labels.ids                                                 # the label word is seen
    assert without.ids[-3:] == with_labels.ids[-3:]                                       # state untouched


def test_keys_kept_verbatim_as_question_ids():
    specs = validate_questions({"z": noul(), "a": choice(["x"]), "m": score(["lo"])})
    assert [spec.qid for spec in specs] == ["z", "a", "m"]
    assert [spec.qtype for spec in specs] == [2, 0, 1]


# ---------------------------------------------------------------------------------------------------------------------
# State serialisation and mask cleaning (§7.1, §7.2)


@pytest.mark.parametrize("state, text", [
    ("verbatim  text [x]", "verbatim  text [x]"),
    ({"b": 1, "a": "ü"}, '{"b": 1, "a": "ü"}'),
    ([{"role": "user", "content": "привет"}], '[{"role": "user", "content": "привет"}]'),
    (None, "null"),
    (1.0, "1.0"),
    (3, "3"),
    (True, "true"),
    ({"n": [1, 2.5]}, '{"n": [1, 2.5]}'),
    ("", ""),
])
def test_serialize_state(state, text):
    assert serialize_state(state) == text


def test_serialize_state_rejects_unserialisable():
    with pytest.raises(ValueError, match="state is not JSON-serialisable"):
        serialize_state({"when": object()})


@pytest.mark.parametrize("text, mask, cleaned", [
    ("[MASK] hello [MASK]", "[MASK]", "  hello  "),
    ("a[MASK][MASK]b", "[MASK]", "a  b"),
    ("<mask> [MASK]", "<mask>", "  [MASK]"),
    ("no masks", "[MASK]", "no masks"),
    ("abc", "", "abc"),
])
def test_clean_mask_literals(text, mask, cleaned):
    assert clean_mask_literals(text, mask) == cleaned


def test_mask_literals_never_become_markers(tiny_codec):
    prepared = prepare_one(noul(instructions="[MASK] true?"), tiny_codec, state="[MASK] hello [MASK]")
    assert prepared.ids.count(tiny_codec.mask_id) == 2
    assert_well_formed(prepared, tiny_codec, 128)


def test_mask_literals_in_options_are_cleaned(tiny_codec):
    prepared = prepare_one(choice({"[MASK]": "[MASK] hello", "b": None}, instructions="x [MASK]"), tiny_codec,
                           state={"k": "[MASK]"})
    assert prepared.option_keys == ("[MASK]", "b")  # the answer key keeps the label as given
    assert prepared.ids.count(tiny_codec.mask_id) == 2
    assert_well_formed(prepared, tiny_codec, 128)


# ---------------------------------------------------------------------------------------------------------------------
# §7.3 layout and truncation


def test_budget_validation(tiny_codec):
    for max_len, head_max_len in [(128, 4), (32, 32), (32, 64), (128, 3.5), (128.0, 32), (128, True)]:
        with pytest.raises(ValueError, match="head_max_len|max_len"):
            prepare_request("", {"q": noul()}, tiny_codec, max_len, head_max_len)
    assert prepare_request("", {}, tiny_codec, 6, 5) == ()


class CountingCodec:
    """Delegates to a real codec and counts encode calls."""

    def __init__(self, codec):
        self._codec = codec
        self.calls: list[str] = []

    def __getattr__(self, name):
        return getattr(self._codec, name)

    def encode(self, text):
        self.calls.append(text)
        return self._codec.encode(text)


def test_empty_questions_tokenize_nothing(tiny_codec):
    counting = CountingCodec(tiny_codec)
    assert prepare_request("hello " * 10, {}, counting, 128, 32) == ()
    assert counting.calls == []


def test_state_is_tokenized_once_per_request(tiny_codec):
    counting = CountingCodec(tiny_codec)
    state = "hello state"
    prepare_request(state, {f"q{i}": noul() for i in range(5)}, counting, 128, 32)
    assert counting.calls.count(state) == 1


def test_layout_of_one_choice_question(tiny_codec):
    prepared = prepare_one(choice(["hello", "b"], instructions="hello"), tiny_codec, state="hello hello")
    c, s, m, h, u = tiny_codec.cls_id, tiny_codec.sep_id, tiny_codec.mask_id, 5, 1
    # [CLS] choice question : hello [SEP] [MASK] hello [MASK] b [SEP] hello hello [SEP]
    assert prepared.ids == (c, u, u, u, h, s, m, h, m, u, s, h, h, s)
    assert prepared.markers == (6, 8)
    assert prepared.qtype == 0 and prepared.type_name == "choice" and prepared.qid == "q"


def test_one_option_with_long_state_fills_exactly_max_len(tiny_codec):
    prepared = prepare_one(choice(["only"]), tiny_codec, state="hello " * 1000, max_len=128)
    assert len(prepared.ids) == 128
    assert prepared.ids[-1] == tiny_codec.sep_id
    assert prepared.ids[-2] == 5
    assert_well_formed(prepared, tiny_codec, 128)


def state_slice(prepared: PreparedQuestion, spec: QuestionSpec, codec, head_max_len: int) -> tuple[int, ...]:
    prefix = build_prefix(spec, codec, head_max_len)
    assert prepared.ids[: len(prefix.ids)] == prefix.ids
    return prepared.ids[len(prefix.ids): -1]


@pytest.mark.parametrize("codec_factory", [shared_tiny_codec, bpe_codec], ids=["wordlevel", "bpe"])
def test_non_list_state_keeps_its_start(codec_factory):
    codec = codec_factory()
    state = {"first": "billing " * 5, "filler": "hello " * 400, "last": "refund"}
    definition = noul()
    prepared = prepare_one(definition, codec, state=state, max_len=96)
    state_ids = codec.encode(json.dumps(state, ensure_ascii=False))
    kept = state_slice(prepared, only_spec(definition), codec, 32)
    assert len(prepared.ids) == 96
    assert kept == tuple(state_ids[: len(kept)])


@pytest.mark.parametrize("codec_factory", [shared_tiny_codec, bpe_codec], ids=["wordlevel", "bpe"])
def test_list_state_keeps_its_end(codec_factory):
    codec = codec_factory()
    state = [{"role": "user", "content": "hello " * 400}, {"role": "user", "content": "refund today"}]
    definition = noul()
    prepared = prepare_one(definition, codec, state=state, max_len=96)
    state_ids = codec.encode(json.dumps(state, ensure_ascii=False))
    kept = state_slice(prepared, only_spec(definition), codec, 32)
    assert len(prepared.ids) == 96
    assert 0 < len(kept) < len(state_ids)
    assert kept == tuple(state_ids[-len(kept):])


@pytest.mark.parametrize("state", [["hello"] * 50, "hello " * 50], ids=["list", "string"])
def test_room_zero_keeps_no_state(tiny_codec, state):
    definition = choice(["a"], instructions="hello " * 100)   # header fills the head budget
    prefix = build_prefix(only_spec(definition), tiny_codec, 32)
    max_len = len(prefix.ids) + 1                              # room = max_len - len(prefix) - 1 = 0
    prepared = prepare_one(definition, tiny_codec, state=state, max_len=max_len)
    assert prepared.ids == prefix.ids + (tiny_codec.sep_id,)
    assert_well_formed(prepared, tiny_codec, max_len)


def test_prefix_filling_max_len_drops_the_final_sep(tiny_codec):
    definition = choice(["a"], instructions="hello " * 100)
    prefix = build_prefix(only_spec(definition), tiny_codec, 32)
    prepared = prepare_one(definition, tiny_codec, state=["hello"] * 5, max_len=len(prefix.ids))
    assert prepared.ids == prefix.ids


def test_tokenize_state_room_edges(tiny_codec):
    tokens = tokenize_state(["hello"] * 4, tiny_codec)
    assert tokens.keep_end
    assert tokens.kept(0) == ()
    assert tokens.kept(2) == tokens.ids[-2:]
    assert tokens.kept(100) == tokens.ids
    assert tokenize_state({"a": 1}, tiny_codec).kept(0) == ()
    assert not tokenize_state("hello", tiny_codec).keep_end


@pytest.mark.parametrize("state", ["", None, {}, []], ids=["empty-str", "none", "empty-dict", "empty-list"])
def test_empty_and_trivial_states(tiny_codec, state):
    definition = noul()
    prepared = prepare_one(definition, tiny_codec, state=state)
    prefix = build_prefix(only_spec(definition), tiny_codec, 32)
    expected_state = tuple(tiny_codec.encode(serialize_state(state)))
    assert prepared.ids == prefix.ids + expected_state + (tiny_codec.sep_id,)
    assert_well_formed(prepared, tiny_codec, 128)


def test_single_option(tiny_codec):
    prepared = prepare_one(choice(["only"]), tiny_codec, state="hello")
    assert prepared.option_keys == ("only",)
    assert len(prepared.markers) == 1
    assert_well_formed(prepared, tiny_codec, 128)


def test_twenty_options(tiny_codec):
    labels = ["billing"] + [f"department_{i}" for i in range(19)]
    prepared = prepare_one(choice(labels), tiny_codec, state="hello " * 600, max_len=512, head_max_len=192)
    assert prepared.option_keys == tuple(labels)
    assert len(prepared.ids) == 512
    assert_well_formed(prepared, tiny_codec, 512)


def test_option_text_capped_at_48_tokens(tiny_codec):
    prepared = prepare_one(choice({"a": "hello " * 100, "b": None}), tiny_codec, max_len=512, head_max_len=192)
    first, second = prepared.markers
    assert second - first == 1 + OPTION_TOKEN_CAP  # marker + "a" + ":" + 46 hellos
    assert prepared.ids[first + 1: second] == (1, 1) + (5,) * 46


def test_squeeze_to_minimum_option_tokens(tiny_codec):
    labels = {f"opt{i}": "hello hello hello hello" for i in range(20)}
    prepared = prepare_one(choice(labels, instructions="hello " * 50), tiny_codec, max_len=256, head_max_len=64)
    gaps = {later - earlier for earlier, later in zip(prepared.markers, prepared.markers[1:])}
    assert gaps == {4}                     # per = max(4, (64 - 16) // 20) = 4, marker included
    assert prepared.markers[0] == 1 + 8 + 1  # header cut to the 8-token floor
    assert_well_formed(prepared, tiny_codec, 256)


def test_squeeze_shares_the_head_budget(tiny_codec):
    labels = {f"opt{i}": "hello " * 40 for i in range(10)}
    prepared = prepare_one(choice(labels, instructions="hello " * 50), tiny_codec, max_len=512, head_max_len=192)
    gaps = {later - earlier for earlier, later in zip(prepared.markers, prepared.markers[1:])}
    assert gaps == {(192 - 16) // 10}
    options_end = prepared.ids.index(tiny_codec.sep_id, prepared.markers[-1])
    assert options_end - prepared.markers[-1] == (192 - 16) // 10
    assert prepared.markers[0] - 2 == 192 - 10 * 17  # header gets what the squeezed options leave


def test_markers_lost_to_the_budget_is_an_error(tiny_codec):
    labels = [f"opt{i}" for i in range(30)]
    with pytest.raises(ValueError, match=r"^question crowded options exceed head_max_len=32$"):
        prepare_request("hello", {"fine": noul(), "crowded": choice(labels)}, tiny_codec, 64, 32)


def test_caller_order_and_one_marker_per_option(tiny_codec):
    questions = {"z": noul(), "a": choice(["x", "y", "w"]), "m": score(["lo", "mid", "hi", "max"])}
    prepared = prepare_request({"text": "hello"}, questions, tiny_codec, 128, 32)
    assert [item.qid for item in prepared] == ["z", "a", "m"]
    assert [len(item.markers) for item in prepared] == [2, 3, 4]
    for item in prepared:
        assert_well_formed(item, tiny_codec, 128)


def test_tokenization_is_piecewise():
    codec = bpe_codec()
    state = "the customer reports duplicate billing"
    definition = choice({"billing ": None, "sales": None}, instructions="who should handle this? ")
    prepared = prepare_one(definition, codec, state=state, max_len=128, head_max_len=64)
    expected = ([codec.cls_id] + codec.encode("choice question: who should handle this? ") + [codec.sep_id]
                + [codec.mask_id] + codec.encode(" billing ") + [codec.mask_id] + codec.encode(" sales")
                + [codec.sep_id] + codec.encode(state) + [codec.sep_id])
    assert list(prepared.ids) == expected
    # The joined string loses the space before the lstrip=True [MASK] and so tokenizes differently.
    joined = ("[CLS]choice question: who should handle this? [SEP][MASK] billing [MASK] sales[SEP]" + state + "[SEP]")
    assert codec.encode(joined) != expected
    # And a piece without the leading space would be different tokens too.
    assert codec.encode(" sales") != codec.encode("sales")


# ---------------------------------------------------------------------------------------------------------------------
# render_tokens


def test_render_tokens_roles(tiny_codec):
    prepared = prepare_one(choice(["hello", "b"], instructions="hello"), tiny_codec, state="hello hello")
    rows = render_tokens(prepared, tiny_codec)
    assert [row.role for row in rows] == ["cls", "header", "header", "header", "header", "sep", "marker", "option",
                                          "marker", "option", "sep", "state", "state", "sep"]
    assert [row.index for row in rows] == list(range(len(prepared.ids)))
    assert rows[6] == (6, tiny_codec.mask_id, "[MASK]", "marker")
    assert rows[4].token == "hello"


def test_render_tokens_when_final_sep_is_cut(tiny_codec):
    definition = choice(["a"], instructions="hello " * 100)
    prefix = build_prefix(only_spec(definition), tiny_codec, 32)
    prepared = prepare_one(definition, tiny_codec, state="hello", max_len=len(prefix.ids))
    roles = [row.role for row in render_tokens(prepared, tiny_codec)]
    assert roles[-1] == "sep" and roles[-2] == "option" and "state" not in roles


# ---------------------------------------------------------------------------------------------------------------------
# Property tests

# Word-sized pieces (including a literal mask string) joined into short texts.
TEXT_PIECES = list("ab :?!éü\n") + ["hello ", "[MASK]", "billing ", "[SEP]"]
TEXT = st.lists(st.sampled_from(TEXT_PIECES), max_size=12).map("".join)
DESCRIPTION = st.one_of(st.none(), st.just(""), TEXT, st.integers(-5, 5), st.booleans(),
                        st.dictionaries(st.sampled_from(["k", "é"]), TEXT, max_size=2))
CHOICE_LABELS = st.lists(st.one_of(TEXT, st.integers(0, 50)), min_size=1, max_size=25, unique_by=str)
CHOICE_QUESTION = CHOICE_LABELS.flatmap(lambda labels: st.builds(
    lambda descriptions, instructions: choice(dict(zip(labels, descriptions)), instructions),
    st.lists(DESCRIPTION, min_size=len(labels), max_size=len(labels)), TEXT))
CHOICE_LIST_QUESTION = st.builds(choice, CHOICE_LABELS, TEXT)
SCORE_QUESTION = st.builds(score, st.lists(st.one_of(TEXT, st.integers(), DESCRIPTION.filter(lambda v: v is not None)),
                                           min_size=1, max_size=12), TEXT)
NOUL_WORDS = st.lists(st.sampled_from(["A", "B", "yes", "no", "hello", " x "]), min_size=2, max_size=2,
                      unique_by=str.strip)
NOUL_QUESTION = st.builds(
    lambda instructions, criteria, words: noul(instructions, criteria=criteria,
                                               labels=None if words is None else dict(zip(("false", "true"), words))),
    st.one_of(TEXT, st.dictionaries(st.just("x"), TEXT, max_size=1)),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["true", "FALSE", "True"]), DESCRIPTION, max_size=1)),
    st.one_of(st.none(), NOUL_WORDS))
QUESTIONS = st.dictionaries(st.text(alphabet="qxyz0123", min_size=1, max_size=4),
                            st.one_of(CHOICE_QUESTION, CHOICE_LIST_QUESTION, SCORE_QUESTION, NOUL_QUESTION),
                            min_size=1, max_size=6)
STATES = st.one_of(TEXT, st.lists(TEXT, max_size=4), st.dictionaries(TEXT, TEXT, max_size=3), st.none(),
                   st.builds(lambda n: "hello " * n, st.integers(0, 300)))
CODECS = st.sampled_from([shared_tiny_codec, bpe_codec])
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(questions=QUESTIONS, state=STATES, head_max_len=st.integers(5, 96), extra=st.integers(0, 64),
       codec_factory=CODECS)
def test_valid_questions_always_fit_a_sufficient_budget(questions, state, head_max_len, extra, codec_factory):
    codec = codec_factory()
    most_options = max(len(spec.option_keys) for spec in validate_questions(questions))
    # prefix <= 3 + max(8 + 4k, 8 + head_max_len): every marker then survives.
    max_len = 11 + max(4 * most_options, head_max_len) + extra
    prepared = prepare_request(state, questions, codec, max_len, head_max_len)
    assert [item.qid for item in prepared] == list(questions)
    for item, spec in zip(prepared, validate_questions(questions)):
        assert item.option_keys == spec.option_keys
        assert_well_formed(item, codec, max_len)


@PROPERTY_SETTINGS
@given(questions=QUESTIONS, state=STATES, head_max_len=st.integers(5, 64), extra=st.integers(1, 96),
       codec_factory=CODECS)
def test_any_budget_renders_or_names_the_question(questions, state, head_max_len, extra, codec_factory):
    codec = codec_factory()
    max_len = head_max_len + extra
    try:
        prepared = prepare_request(state, questions, codec, max_len, head_max_len)
    except ValueError as error:
        assert f"options exceed head_max_len={head_max_len}" in str(error)
        assert any(str(error) == f"question {qid} options exceed head_max_len={head_max_len}" for qid in questions)
        return
    assert [item.qid for item in prepared] == list(questions)
    for item in prepared:
        assert_well_formed(item, codec, max_len)
        roles = [row.role for row in render_tokens(item, codec)]
        assert roles.count("marker") == len(item.markers)
