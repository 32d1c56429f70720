import json

import pytest
from click.testing import CliRunner

from laya_opt.core.checkpoint import load_checkpoint
from laya_opt.cli import main

from conftest import TINY_SPECIALS, make_tiny_tokenizer

QUESTIONS = {
    "topic": {"type": "choice", "instructions": "hello?", "criteria": {"a": "first", "b": "second"}},
    "level": {"type": "score", "instructions": "hello", "criteria": ["low", "mid", "high"]},
    "yes": {"type": "noul", "instructions": "hello", "labels": {"false": "B", "true": "A"}},
}


@pytest.fixture
def questions_file(tmp_path):
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(QUESTIONS))
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_help_lists_every_command():
    result = invoke("--help")
    for command in ("predict", "inspect-prompt", "make-checkpoint", "run", "explain", "calibrate-gates", "bisect",
                    "sensitivity"):
        assert command in result.output


def test_predict_json_and_table(tiny_checkpoint_dir, questions_file):
    result = invoke("predict", "--checkpoint", tiny_checkpoint_dir, "--state", "hello hello", "--questions",
                    questions_file, "--json")
    assert result.exit_code == 0, result.output
    envelope = json.loads(result.output)
    assert list(envelope["answers"]) == ["topic", "level", "yes"]
    assert envelope["answers"]["topic"]["choice"] in {"a", "b"}
    table = invoke("predict", "--checkpoint", tiny_checkpoint_dir, "--state", "hello", "--questions", questions_file)
    assert table.exit_code == 0 and "topic" in table.output and "noul" in table.output


def test_predict_reads_state_files_and_json(tiny_checkpoint_dir, questions_file, tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps([{"role": "user", "content": "hello"}]))
    result = invoke("predict", "--checkpoint", tiny_checkpoint_dir, "--state", f"@{state}", "--questions",
                    questions_file, "--json", "--batch-size", "1", "--dtype", "float16")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["usage"]["input_tokens"] > 0


@pytest.mark.parametrize("args, message", [
    (["--state", "@/nonexistent/state.txt"], "state file"),
    (["--state", "{bad", "--json-state"], "--state: invalid JSON"),
    (["--state", "x", "--checkpoint", "/nonexistent/ckpt"], "never downloads"),
])
def test_predict_bad_input_exits_nonzero_with_a_named_error(tiny_checkpoint_dir, questions_file, args, message):
    checkpoint = [] if "--checkpoint" in args else ["--checkpoint", str(tiny_checkpoint_dir)]
    result = CliRunner().invoke(main, ["predict", "--questions", str(questions_file), *checkpoint, *args])
    assert result.exit_code == 2
    assert message in result.output


def test_predict_invalid_question_names_it(tiny_checkpoint_dir, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"q7": {"type": "ranking", "instructions": "x"}}))
    result = CliRunner().invoke(main, ["predict", "--checkpoint", str(tiny_checkpoint_dir), "--state", "x",
                                       "--questions", str(path)])
    assert result.exit_code == 2 and "q7" in result.output and "choice" in result.output


def test_questions_file_must_be_an_object(tiny_checkpoint_dir, tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    result = CliRunner().invoke(main, ["predict", "--checkpoint", str(tiny_checkpoint_dir), "--state", "x",
                                       "--questions", str(path)])
    assert result.exit_code == 2 and "JSON object" in result.output


def test_inspect_prompt_shows_markers(tiny_checkpoint_dir, questions_file):
    result = invoke("inspect-prompt", "--checkpoint", tiny_checkpoint_dir, "--state", "hello [MASK] hello",
                    "--questions", questions_file, "--json", "--question", "yes")
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.output)
    assert shown["qid"] == "yes" and shown["qtype"] == 2 and len(shown["markers"]) == 2
    assert [shown["tokens"][p] for p in shown["markers"]] == ["[MASK]", "[MASK]"]
    assert shown["tokens"].count("[MASK]") == 2          # the state's literal was cleaned
    text = invoke("inspect-prompt", "--checkpoint", tiny_checkpoint_dir, "--state", "hello", "--questions",
                  questions_file)
    assert "markers at" in text.output
    missing = CliRunner().invoke(main, ["inspect-prompt", "--checkpoint", str(tiny_checkpoint_dir), "--state", "x",
                                        "--questions", str(questions_file), "--question", "nope"])
    assert missing.exit_code == 2 and "nope" in missing.output


def test_make_checkpoint_tiny_round_trips_through_the_strict_loader(tmp_path):
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    make_tiny_tokenizer().save(str(tokenizer / "tokenizer.json"))
    (tokenizer / "tokenizer_config.json").write_text(json.dumps(TINY_SPECIALS))
    out = tmp_path / "made"
    result = invoke("make-checkpoint", "--arch", "tiny", "--random", "--seed", 3, "--tokenizer", tokenizer, out)
    assert result.exit_code == 0, result.output
    assert "2,104,835 parameters" in result.output
    checkpoint = load_checkpoint(out, dtype="float16")
    encoder = json.loads((out / "encoder" / "config.json").read_text())
    assert encoder["pad_token_id"] == checkpoint.codec.pad_id < encoder["vocab_size"]
    again = CliRunner().invoke(main, ["make-checkpoint", "--arch", "tiny", "--random", "--tokenizer",
                                      str(tokenizer), str(out)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_run_candidate_dtype_override_is_validated(tmp_path):
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: e\npasses: []\n")
    bad = CliRunner().invoke(main, ["run", str(experiment), "--candidate-dtype", "float64"])
    assert bad.exit_code == 2 and "float64" in bad.output
    assert "--candidate-dtype" in invoke("run", "--help").output


def test_sensitivity_ranks_every_encoder_layer(tiny_checkpoint_dir, tmp_path):
    from fake_passes import write_tiny_suite

    suite = write_tiny_suite(tmp_path / "tiny.jsonl", records=2)
    args = ["sensitivity", "--checkpoint", tiny_checkpoint_dir, "--suite", suite, "--bits", "4", "--group-size", "32"]
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["rank"] for row in rows] == [1, 2, 3]
    assert sorted(row["unit"] for row in rows) == [f"encoder.layers.{i}" for i in range(3)]
    table = invoke(*args)
    assert table.exit_code == 0 and "encoder.layers.0" in table.output and "argmax flips" in table.output
    missing = CliRunner().invoke(main, ["sensitivity", "--suite", "nope"])
    assert missing.exit_code == 2 and "nope" in missing.output


@pytest.mark.slow
def test_sensitivity_ranks_every_encoder_layer_of_the_standin():
    result = CliRunner().invoke(main, ["sensitivity", "--suite", "smoke", "--bits", "4", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["rank"] for row in rows] == list(range(1, 7))
    assert sorted(row["unit"] for row in rows) == [f"encoder.layers.{i}" for i in range(6)]


@pytest.mark.parametrize("name, state, department, level, callback", [
    ("questions.json", "My parcel never arrived and the courier does not answer. It is a minor issue. "
     "Please do not call me back.", "shipping", 0, False),
    # The stand-in is a 7M-parameter model of synthetic tickets: it sends "I was charged twice on invoice
    # 4411" to shipping (0.75), so the billing example names its cue words plainly.
    ("questions.json", "Please refund the double payment on my invoice. This is critical. Please call me back.",
     "billing", 2, True),
    ("fragen.json", "Ich kann mich nicht anmelden, das Passwort geht nicht. Das ist ernst. "
     "Bitte rufen Sie mich nicht zurück.", "account", 1, False),
])
def test_readme_examples_answer_every_question_on_the_standin(name, state, department, level, callback):
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / name
    result = invoke("predict", "--state", state, "--questions", path, "--json", "--dtype", "float32")
    assert result.exit_code == 0, result.output
    answers = json.loads(result.output)["answers"]
    assert list(answers) == list(json.loads(path.read_text()))
    by_type = {answer["type"]: answer for answer in answers.values()}
    # The cue words pick each answer: "courier" / "payment, invoice" / "Passwort", "minor" / "critical" / "ernst",
    # and the stated (or negated) call-back request.
    assert by_type["choice"]["choice"] == department and by_type["choice"]["probabilities"][department] > 0.5
    assert abs(by_type["score"]["score"] - level) < 0.5
    assert (by_type["noul"]["noul"] > 0.5) == callback
