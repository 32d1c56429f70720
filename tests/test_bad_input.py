"""The bad-input battery (issue 14): every class of bad input, under every command that can meet it.

Each case asserts the exit code, that the one `error:` line names the thing (file, key path, tensor
or question), that no traceback is printed, that nothing is left behind and that every input file is
unchanged. For checkpoints the Python API raises the same named error with the same first line.
Hypothesis generates corruptions of a safetensors header and of the stand-in's files, and mutations of
valid questions and experiments, on a small budget (`LAYA_FUZZ_EXAMPLES=500 python -m pytest
tests/test_bad_input.py` for a deeper run).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import mlx.core as mx
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

import laya_opt as lo
from laya_opt.core.checkpoint_write import save_quantized
from laya_opt.cli import main
from laya_opt.util.errors import ExperimentError, InputError, InputWarning, QuestionError
from laya_opt.runs.experiment import parse_experiment
from laya_opt.core.prompt import MAX_QUESTIONS, prepare_request, validate_questions
from laya_opt.util.resources import standin_checkpoint
from laya_opt.runs.runner import preflight
from laya_opt.util.staging import PREFIX

from conftest import TINY_SPECIALS, make_tiny_tokenizer, write_tiny_checkpoint
from fake_passes import QUESTIONS, write_tiny_suite

TESTS = Path(__file__).resolve().parent
STATE = "hello hello"
WO = "encoder.layers.1.attn.Wo"
BUDGET = int(os.environ.get("LAYA_FUZZ_EXAMPLES", "12"))
FUZZ = settings(max_examples=BUDGET, deadline=None, suppress_health_check=list(HealthCheck), derandomize=BUDGET <= 12)


# ---------------------------------------------------------------------------------------------------------------------
# Workspaces: a copy of a tiny checkpoint plus the files each command reads


@pytest.fixture(scope="module")
def bases(tmp_path_factory, tiny_checkpoint_dir):
    root = tmp_path_factory.mktemp("bases")
    quantized = lo.apply(lo.load(tiny_checkpoint_dir), "quantize_encoder", group_size=32)
    return {"dense": tiny_checkpoint_dir, "half": write_tiny_checkpoint(root / "half", dtype="float16"),
            "mlx": write_tiny_checkpoint(root / "mlx", layout="mlx"),
            "quantized": save_quantized(quantized, root / "q8")}


@dataclass
class Workspace:
    root: Path
    state: str = STATE
    passes: list = field(default_factory=list)

    def __post_init__(self):
        self.checkpoint, self.questions, self.suite, self.experiment, self.output = (
            self.root / name for name in ("ckpt", "questions.json", "tiny.jsonl", "experiment.yaml", "results"))

    def write_experiment(self, **changes) -> None:
        raw = {"name": "bad", "checkpoint": str(self.checkpoint), "suites": [str(self.suite)],
               "candidate_dtype": "float32", "plugins": ["fake_passes"], "passes": self.passes,
               "output_dir": str(self.output), **changes}
        self.experiment.write_text(yaml.safe_dump(raw))

    def argv(self, command: str) -> list[str]:
        request = ["--checkpoint", str(self.checkpoint), "--state", self.state, "--questions", str(self.questions)]
        return {"predict": ["predict", *request], "inspect-prompt": ["inspect-prompt", *request],
                "explain": ["explain", str(self.experiment)],
                "run": ["run", str(self.experiment), "--no-bench", "--quiet"],
                "sensitivity": ["sensitivity", "--checkpoint", str(self.checkpoint), "--suite", str(self.suite),
                                "--bits", "8", "--group-size", "32"]}[command]


@pytest.fixture
def workspace(tmp_path, bases):
    def make(base: str = "dense") -> Workspace:
        ws = Workspace(tmp_path / "ws")
        ws.root.mkdir()
        shutil.copytree(bases[base], ws.checkpoint)
        ws.questions.write_text(json.dumps(QUESTIONS))
        write_tiny_suite(ws.suite)
        ws.write_experiment()
        return ws

    return make


def snapshot(root: Path) -> dict[str, str]:
    """Every file and directory under root, with the files' SHA-256: what must not change."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in sorted(root.rglob("*"))}


def cli(*args, env=None):
    return CliRunner(env=env).invoke(main, [str(arg) for arg in args])


def error_line(result) -> str:
    """The one `error:` line of a refused command, after checking there is exactly one and no traceback."""
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def refused(ws: Workspace, command: str, names, code: int = 2, args=(), details=()) -> str:
    """Run one command on the workspace: it must exit `code`, name every fragment of `names` on its error line
    (and `details` below it), and change nothing."""
    before = snapshot(ws.root)
    result = cli(*ws.argv(command), *args)
    assert result.exit_code == code, result.output
    line = error_line(result)
    for name in names:
        assert name in line, result.output
    for detail in details:
        assert detail in result.output
    assert snapshot(ws.root) == before, "files were left behind or inputs changed"
    return line


def api_refused(ws: Workspace, names) -> str:
    before = snapshot(ws.root)
    with pytest.raises(InputError) as info:
        lo.load(ws.checkpoint).predict(STATE, QUESTIONS)
    first = str(info.value).splitlines()[0]
    for name in names:
        assert name in first
    assert snapshot(ws.root) == before
    return first


# ---------------------------------------------------------------------------------------------------------------------
# Checkpoint mutations


def edit_json(path: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def unsealed(edit: Callable[[Path], None]) -> Callable[[Path], None]:
    """A deliberate edit, manifest.json removed with it: its checksums would otherwise refuse the edit first."""
    def apply(checkpoint: Path) -> None:
        edit(checkpoint)
        (checkpoint / "manifest.json").unlink(missing_ok=True)
    return apply


def rewrite_tensors(checkpoint: Path, edit: Callable[[dict], None]) -> None:
    tensors = dict(mx.load(str(checkpoint / "model.safetensors")))
    edit(tensors)
    mx.save_safetensors(str(checkpoint / "model.safetensors"), tensors, metadata={"format": "pt"})
    (checkpoint / "manifest.json").unlink()


def set_value(name: str, value: float) -> Callable[[dict], None]:
    def edit(tensors):
        flat = tensors[name].astype(mx.float32).reshape(-1)
        flat[0] = value
        tensors[name] = flat.reshape(tensors[name].shape).astype(tensors[name].dtype)
    return edit


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position % len(data)] ^= 0x5A
    path.write_bytes(bytes(data))


def agent(edit):
    return lambda ckpt: edit_json(ckpt / "rl_agent_config.json", edit)


def encoder(edit):
    return lambda ckpt: edit_json(ckpt / "encoder" / "config.json", edit)


def tokenizer_config(edit):
    return lambda ckpt: edit_json(ckpt / "tokenizer" / "tokenizer_config.json", edit)


def quantization(edit):
    return unsealed(lambda ckpt: edit_json(ckpt / "mlx_config.json", lambda meta: edit(meta["quantization"])))


ALL = ("predict", "inspect-prompt", "explain", "run", "sensitivity")
LOADING = ("predict", "run", "sensitivity")   # the commands that read weight values

# (id, base checkpoint, mutation, commands, fragments the error line must hold)
CHECKPOINT_CASES = [
    ("missing directory", "dense", lambda c: shutil.rmtree(c), ALL, ["ckpt", "never downloads"]),
    ("a file, not a directory", "dense", lambda c: [shutil.rmtree(c), c.write_text("x")], ALL,
     ["ckpt is a file; a checkpoint is a directory"]),
    ("missing weights file", "dense", lambda c: (c / "model.safetensors").unlink(), ALL,
     ["ckpt", "lacks model.safetensors"]),
    ("truncated weights", "dense", lambda c: truncate(c / "model.safetensors"), ALL,
     ["model.safetensors", "truncated"]),
    ("not a safetensors file", "dense", lambda c: (c / "model.safetensors").write_bytes(b"PK\x03\x04 zip"), ALL,
     ["model.safetensors", "not a safetensors file"]),
    ("missing tensor", "dense", lambda c: rewrite_tensors(c, lambda t: t.pop("scorer.3.bias")), ALL,
     ["model.safetensors", "does not match the model"]),
    ("misshaped tensor", "dense",
     lambda c: rewrite_tensors(c, lambda t: t.update({"type_emb.weight": mx.zeros((4, 64))})),
     ALL, ["model.safetensors", "does not match the model"]),
    ("NaN weight", "dense", lambda c: rewrite_tensors(c, set_value("encoder.layers.0.attn.Wqkv.weight", float("nan"))),
     LOADING, ["model.safetensors", "non-finite weights"]),
    ("Inf weight", "dense", lambda c: rewrite_tensors(c, set_value("type_emb.weight", float("inf"))), LOADING,
     ["model.safetensors", "non-finite weights"]),
    ("Inf quantization scale", "quantized", lambda c: rewrite_tensors(c, set_value(f"{WO}.scales", float("inf"))),
     LOADING, ["model.safetensors", "non-finite weights"]),
    ("one tensor in another 16-bit dtype", "half",
     lambda c: rewrite_tensors(c, lambda t: t.update({"type_emb.weight": t["type_emb.weight"].astype(mx.bfloat16)})),
     ALL, ["model.safetensors", "not float16", "type_emb.weight (bfloat16)"]),
    ("declared dtype disagrees", "mlx",
     unsealed(lambda c: edit_json(c / "mlx_config.json", lambda m: m.update(dtype="float16"))),
     ALL, ["model.safetensors", "not float16, mlx_config.json's dtype"]),
    ("unknown declared dtype", "mlx", lambda c: edit_json(c / "mlx_config.json", lambda m: m.update(dtype="fp8")),
     ALL, ["mlx_config.json", "dtype 'fp8'"]),
    ("top-level bits disagree", "quantized", quantization(lambda q: q.update(bits=4)), ALL,
     ["mlx_config.json", "quantization.bits is 4 but the per-module entries say"]),
    ("quantize_heads disagrees", "quantized", quantization(lambda q: q.update(quantize_heads=True)), ALL,
     ["mlx_config.json", "quantize_heads is true but no head"]),
    ("quantized tensors unlisted", "quantized", quantization(lambda q: q["modules"].pop(WO)), ALL,
     ["mlx_config.json", "quantization metadata does not match the tensors"]),
    ("weights byte flipped", "dense", lambda c: flip_byte(c / "model.safetensors", -100), ALL,
     ["model.safetensors", "does not match", "manifest.json"]),
    ("tokenizer byte flipped", "dense", lambda c: flip_byte(c / "tokenizer" / "tokenizer.json", 40), ALL,
     ["tokenizer.json"]),
    ("manifest lists a missing file", "dense",
     lambda c: edit_json(c / "manifest.json", lambda m: m["sha256"].update({"extra.bin": "0" * 64})), ALL,
     ["manifest.json", "extra.bin"]),
    ("invalid JSON config", "dense", lambda c: (c / "rl_agent_config.json").write_text("{not json"), ALL,
     ["rl_agent_config.json", "invalid JSON"]),
    ("undecodable config", "dense", lambda c: (c / "rl_agent_config.json").write_bytes(b'{"encoder": "caf\xe9"}'), ALL,
     ["rl_agent_config.json", "not UTF-8"]),
    ("duplicate config key", "dense",
     lambda c: (c / "encoder/config.json").write_text((c / "encoder/config.json").read_text().rstrip()[:-1]
                                                       + ', "hidden_size": 128}'), ALL,
     ["encoder/config.json", "duplicate key 'hidden_size'"]),
    ("non-numeric norm_eps", "dense", encoder(lambda e: e.update(norm_eps="small")), ALL,
     ["encoder/config.json", "norm_eps"]),
    ("zero norm_eps", "dense", encoder(lambda e: e.update(norm_eps=0)), ALL,
     ["encoder/config.json", "norm_eps: must be > 0"]),
    ("absurd vocab_size", "dense", encoder(lambda e: e.update(vocab_size=10 ** 12)), ALL,
     ["encoder/config.json", "vocab_size: must be <="]),
    ("absurd sizes together", "dense", encoder(lambda e: e.update(vocab_size=1 << 22, hidden_size=1 << 16)), ALL,
     ["encoder/config.json", "encoder parameters"]),
    ("non-numeric act cost", "dense", agent(lambda a: a.update(act_costs={"escalate": "high"})), ALL,
     ["rl_agent_config.json", "act_costs.escalate"]),
    ("bad temperature bucket", "dense", agent(lambda a: a.update(temperature_by_options={"choice:99": 1.0})), ALL,
     ["rl_agent_config.json", "temperature_by_options key 'choice:99'"]),
    ("head budget above max_len", "dense", agent(lambda a: a.update(head_max_len=500)), ALL,
     ["rl_agent_config.json", "head_max_len"]),
    ("tokenizer smaller vocabulary", "dense", encoder(lambda e: e.update(vocab_size=4)), ALL,
     ["tokenizer.json", "embedding rows"]),
    ("config edited after saving", "dense", agent(lambda a: a.update(act_costs={})), ALL,
     ["rl_agent_config.json", "does not match", "manifest.json"]),
    ("config edited, manifest removed", "dense", unsealed(agent(lambda a: a.update(act_costs={}))), ALL,
     ["model.safetensors does not match the model that encoder/config.json and rl_agent_config.json describe"]),
    ("garbage tokenizer.json", "dense", lambda c: (c / "tokenizer/tokenizer.json").write_text("not json {"), ALL,
     ["tokenizer.json", "not a valid tokenizers file"]),
    ("mask token is [CLS]", "dense", tokenizer_config(lambda t: t.update(mask_token="[CLS]")), ALL,
     ["tokenizer_config.json", "mask_token and cls_token are both '[CLS]'"]),
    ("mask token is a word", "dense", tokenizer_config(lambda t: t.update(mask_token="hello")), ALL,
     ["tokenizer_config.json", "mask_token='hello'", "ordinary vocabulary entry"]),
    ("special token missing", "dense", tokenizer_config(lambda t: t.pop("pad_token")), ALL,
     ["tokenizer_config.json", "pad_token"]),
]


@pytest.mark.parametrize("case", CHECKPOINT_CASES, ids=[case[0] for case in CHECKPOINT_CASES])
def test_a_bad_checkpoint_gets_the_same_named_error_under_every_command(workspace, case):
    _, base, mutate, commands, names = case
    ws = workspace(base)
    mutate(ws.checkpoint)
    expected = api_refused(ws, names)
    for command in commands:
        line = refused(ws, command, names)
        assert expected in line, f"{command} words it differently: {line!r} vs the API's {expected!r}"


def test_weight_values_are_not_read_by_explain_or_inspect_prompt(workspace):
    ws = workspace()
    rewrite_tensors(ws.checkpoint, set_value("type_emb.weight", float("nan")))
    for command in ("explain", "inspect-prompt"):
        assert cli(*ws.argv(command)).exit_code == 0


def test_a_value_that_overflows_the_runtime_dtype_is_named(workspace):
    ws = workspace()
    rewrite_tensors(ws.checkpoint, set_value("type_emb.weight", 1e6))
    refused(ws, "predict", ["model.safetensors", "non-finite weights"], args=["--dtype", "float16"],
            details=["type_emb.weight: finite in the file (largest |value| 1e+06) but out of float16's range",
                     "load it in float32"])
    assert cli(*ws.argv("predict")).exit_code == 0  # float32 holds it


@pytest.mark.parametrize("temperature", [[0, 1.0, 1.0], ["hot", 1.0, 1.0]], ids=["zero", "non-numeric"])
def test_clamped_temperatures_print_one_warning_line_naming_file_and_entry(workspace, temperature):
    ws = workspace()
    agent(lambda a: a.update(temperature=temperature))(ws.checkpoint)
    (ws.checkpoint / "manifest.json").unlink()
    for command in ("predict", "explain"):
        result = cli(*ws.argv(command))
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and "rl_agent_config.json: temperatures clamped" in warnings[0]
        assert f"temperature[0] (choice): {temperature[0]!r} ->" in warnings[0]
        assert "RuntimeWarning" not in result.output
    with pytest.warns(InputWarning, match="rl_agent_config.json: temperatures clamped"):
        lo.load(ws.checkpoint)


# ---------------------------------------------------------------------------------------------------------------------
# Questions and states (predict and inspect-prompt)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


QUESTION_CASES = [
    ("duplicate question ids", lambda ws: ws.questions.write_text(
        '{"topic": {"type": "noul", "instructions": "a"}, "topic": {"type": "noul", "instructions": "b"}}'),
     ["questions.json", "duplicate key 'topic'"]),
    ("questions not an object", lambda ws: ws.questions.write_text("[1, 2]"), ["questions.json", "JSON object"]),
    ("undecodable questions", lambda ws: ws.questions.write_bytes(b'{"q": {"type": "noul", "instructions": "\xff"}}'),
     ["questions.json", "not UTF-8"]),
    ("deeply nested questions", lambda ws: ws.questions.write_text('{"q": {"type": "noul", "instructions": '
                                                                  + nested(100_000) + "}}"),
     ["questions.json", "nested more than 64 levels"]),
    ("misspelt field", lambda ws: edit_json(ws.questions, lambda q: q["yes"].update(lables={"true": "A"})),
     ["question 'yes'", "unknown key(s) lables"]),
    ("unknown type", lambda ws: edit_json(ws.questions, lambda q: q["topic"].update(type="ranking")),
     ["question 'topic'", "unknown type 'ranking'"]),
    ("options beyond the head budget", lambda ws: edit_json(
        ws.questions, lambda q: q["topic"].update(criteria=[f"option {i}" for i in range(60)])),
     ["question topic", "head_max_len"]),
    ("too many questions", lambda ws: ws.questions.write_text(json.dumps(
        {f"q{i}": {"type": "noul", "instructions": "x"} for i in range(MAX_QUESTIONS + 1)})),
     ["questions", "more than the 4,096 allowed"]),
    ("missing state file", lambda ws: setattr(ws, "state", f"@{ws.root / 'none.txt'}"), ["--state", "none.txt"]),
    ("undecodable state file", lambda ws: [(ws.root / "s.txt").write_bytes(b"caf\xe9"),
                                           setattr(ws, "state", f"@{ws.root / 's.txt'}")], ["s.txt", "not UTF-8"]),
    ("deeply nested JSON state", lambda ws: [(ws.root / "s.json").write_text(nested(100_000)),
                                             setattr(ws, "state", f"@{ws.root / 's.json'}")],
     ["s.json", "nested more than 64 levels"]),
    ("integer beyond Python's digit limit", lambda ws: ws.questions.write_text(
        '{"q": {"type": "noul", "instructions": ' + "1" * 5000 + "}}"), ["questions.json", "invalid JSON", "digits"]),
    ("state file not a regular file", lambda ws: setattr(ws, "state", "@/dev/null"),
     ["--state", "/dev/null is not a regular file"]),
    ("JSON state with duplicate keys", lambda ws: [(ws.root / "s.json").write_text('{"a": 1, "a": 2}'),
                                                   setattr(ws, "state", f"@{ws.root / 's.json'}")],
     ["s.json", "duplicate key 'a'"]),
    ("oversized state", lambda ws: [(ws.root / "s.txt").write_text("hello " * 200_000),
                                    setattr(ws, "state", f"@{ws.root / 's.txt'}")], ["state", "characters, more than"]),
]


@pytest.mark.parametrize("case", QUESTION_CASES, ids=[case[0] for case in QUESTION_CASES])
def test_a_bad_question_or_state_is_named(workspace, case):
    _, mutate, names = case
    ws = workspace()
    mutate(ws)
    for command in ("predict", "inspect-prompt"):
        refused(ws, command, names)


def test_inline_json_state_errors_name_the_option(workspace):
    ws = workspace()
    for state, name in ((nested(50_000), "nested more than 64 levels"), ('{"a": 1, "a": 2}', "duplicate key"),
                        ("{bad", "invalid JSON")):
        ws.state = state
        refused(ws, "predict", ["--state", name], args=["--json-state"])


def test_the_api_refuses_the_same_requests_with_question_errors(tiny_codec):
    deep: list = []
    for _ in range(200):
        deep = [deep]
    cases = [({"q": {"type": "noul", "instructions": deep}}, STATE, "question 'q': nested more than 64"),
             (QUESTIONS, deep, "state: nested more than 64"),
             (QUESTIONS, "x" * (1 << 21), "state: 2,097,152 characters"),
             ({"q": {"type": "noul", "instructions": "x" * (1 << 19)}}, STATE, "question 'q': instructions and")]
    for questions, state, message in cases:
        with pytest.raises(QuestionError, match=message.replace("(", r"\(")):
            prepare_request(state, questions, tiny_codec, 128, 32)


# ---------------------------------------------------------------------------------------------------------------------
# Experiments (explain and run)


EXPERIMENT_CASES = [
    ("duplicate YAML key", lambda ws: ws.experiment.write_text(ws.experiment.read_text() + "name: again\n"),
     ("explain", "run"), ["experiment.yaml", "duplicate key 'name'"]),
    ("selector matching nothing", lambda ws: ws.write_experiment(passes=[
        {"name": "quantize_encoder", "config": {"group_size": 32, "include": ["decoder.*"]}}]),
     ("explain", "run"), ["experiment.yaml: passes[0] (quantize_encoder)", "match no dense"]),
    ("group size wider than the layers", lambda ws: ws.write_experiment(passes=[
        {"name": "quantize_encoder", "config": {"group_size": 128}}]),
     ("explain", "run"), ["passes[0] (quantize_encoder)", "cannot quantize 12 selected module(s)"]),
    ("quantizing a quantized checkpoint", lambda ws: [shutil.rmtree(ws.checkpoint),
                                                      shutil.copytree(ws.bases["quantized"], ws.checkpoint),
                                                      ws.write_experiment(passes=[{"name": "quantize_encoder",
                                                                                   "config": {"group_size": 32}}])],
     ("explain", "run"), ["passes[0] (quantize_encoder)", "already quantized"]),
    ("unknown plan_from", lambda ws: ws.write_experiment(passes=[
        {"name": "compile_buckets", "config": {"plan_from": "nope"}}]),
     ("explain", "run"), ["passes[0].config.plan_from"]),
    ("unknown pass", lambda ws: ws.write_experiment(passes=[{"name": "nope"}]), ("explain", "run"),
     ["passes[0].name", "nope"]),
    ("unknown key", lambda ws: ws.write_experiment(bogus=1), ("explain", "run"), ["(top level): unknown key(s) bogus"]),
    ("benchmark seed beyond 64 bits",
     lambda ws: ws.write_experiment(benchmark={"workloads": ["short-1"], "seed": 2 ** 64}),
     ("explain", "run"), ["benchmark.seed: must be <= 18446744073709551615"]),
    ("missing suite", lambda ws: ws.write_experiment(suites=[str(ws.root / "none.jsonl")]), ("explain", "run"),
     ["suites[0]", "none.jsonl"]),
    ("malformed suite", lambda ws: ws.suite.write_text(ws.suite.read_text() + "{oops\n"), ("explain", "run"),
     ["suites[0]", "tiny.jsonl:5"]),
    ("missing checkpoint", lambda ws: ws.write_experiment(checkpoint=str(ws.root / "none")), ("explain", "run"),
     ["checkpoint: ", "never downloads"]),
    ("output dir under a file", lambda ws: [(ws.root / "file").write_text("x"),
                                            ws.write_experiment(output_dir=str(ws.root / "file" / "out"))],
     ("explain", "run"), ["output directory", "is not a directory"]),
    ("deeply nested YAML", lambda ws: ws.experiment.write_text("name: " + nested(20_000) + "\n"), ("explain", "run"),
     ["experiment.yaml", "nested too deeply"]),
    ("YAML integer beyond the digit limit", lambda ws: ws.experiment.write_text(
        ws.experiment.read_text() + "batch_size: " + "1" * 5000 + "\n"), ("explain", "run"),
     ["experiment.yaml", "invalid YAML", "digits"]),
    ("undecodable experiment", lambda ws: ws.experiment.write_bytes(b"name: caf\xe9\n"), ("explain", "run"),
     ["experiment.yaml", "not UTF-8"]),
]


@pytest.mark.parametrize("case", EXPERIMENT_CASES, ids=[case[0] for case in EXPERIMENT_CASES])
def test_a_bad_experiment_fails_before_any_weight_loads(workspace, bases, monkeypatch, case):
    import laya_opt.runs.runner

    _, mutate, commands, names = case
    ws = workspace()
    ws.bases = bases
    mutate(ws)
    monkeypatch.setattr(laya_opt.runs.runner, "load_checkpoint", lambda *a, **k: pytest.fail("weights were loaded"))
    for command in commands:
        refused(ws, command, names)


@pytest.mark.parametrize("args, names", [
    (["--requests", "5"], ["--requests 5", "no benchmark section"]),
    (["--suite", "no-such-suite"], ["--suite no-such-suite", "bundled suites"]),
    (["--output-dir", "{root}/file/out"], ["output directory", "is not a directory"]),
], ids=["requests without benchmark", "unknown suite", "output dir under a file"])
def test_run_options_are_checked_before_weights(workspace, args, names):
    ws = workspace()
    (ws.root / "file").write_text("x")
    refused(ws, "run", names, args=[arg.format(root=ws.root) for arg in args])


@pytest.mark.parametrize("args, name", [
    (["--candidate-dtype", "float64"], "'float64' is not one of"), (["--requests", "0"], "--requests"),
], ids=["dtype", "requests"])
def test_usage_errors_exit_2_without_a_traceback(workspace, args, name):
    ws = workspace()
    before = snapshot(ws.root)
    result = cli(*ws.argv("run"), *args)
    assert result.exit_code == 2 and name in result.output and "Traceback" not in result.output
    assert snapshot(ws.root) == before


# ---------------------------------------------------------------------------------------------------------------------
# make-checkpoint


@pytest.fixture
def tokenizer_dir(tmp_path):
    path = tmp_path / "tok"
    path.mkdir()
    make_tiny_tokenizer().save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps(TINY_SPECIALS))
    return path


def make_checkpoint(tokenizer, out, *extra):
    return cli("make-checkpoint", "--arch", "tiny", "--random", "--tokenizer", tokenizer, *extra, out)


@pytest.mark.parametrize("setup, extra, code, name", [
    (lambda root, tok: None, ["--seed", "-5"], 2, "--seed"),
    (lambda root, tok: None, ["--seed", "x"], 2, "--seed"),
    (lambda root, tok: (root / "out").mkdir(), [], 2, "already exists"),
    (lambda root, tok: (root / "out").parent.joinpath("blocker").write_text("x"), ["--dtype", "float32"], 2, None),
    (lambda root, tok: (tok / "tokenizer.json").write_text("garbage"), [], 2, "tokenizer.json"),
    (lambda root, tok: (tok / "tokenizer.json").unlink(), [], 2, "tokenizer.json: file not found"),
    (lambda root, tok: edit_json(tok / "tokenizer_config.json", lambda t: t.update(mask_token="[CLS]")), [], 2,
     "mask_token and cls_token"),
], ids=["negative seed", "non-integer seed", "existing output", "output under a file", "garbage tokenizer",
        "missing tokenizer", "mask is [CLS]"])
def test_make_checkpoint_refuses_bad_options_cleanly(tmp_path, tokenizer_dir, setup, extra, code, name):
    root = tmp_path
    setup(root, tokenizer_dir)
    out = root / "blocker" / "made" if name is None else root / "out"
    before = snapshot(root)
    result = make_checkpoint(tokenizer_dir, out, *extra)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert (name or str(root / "blocker")) in result.output
    assert snapshot(root) == before


def test_make_checkpoint_copies_only_the_tokenizer_files_with_normal_permissions(tmp_path, tokenizer_dir):
    (tokenizer_dir / "training-corpus.txt").write_text("not needed")
    (tokenizer_dir / "notes").mkdir()
    previous = os.umask(0o022)
    try:
        result = make_checkpoint(tokenizer_dir, tmp_path / "made", "--seed", "3")
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    made = tmp_path / "made"
    assert sorted(p.name for p in (made / "tokenizer").iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    assert {oct(p.stat().st_mode & 0o777) for p in (made, made / "tokenizer", made / "encoder")} == {"0o755"}
    assert oct((made / "model.safetensors").stat().st_mode & 0o777) == "0o644"
    assert not list(tmp_path.glob(f"{PREFIX}*"))


def test_an_interrupted_save_leaves_nothing(tmp_path, tokenizer_dir, monkeypatch):
    import laya_opt.core.checkpoint

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(laya_opt.core.checkpoint.mx, "save_safetensors", interrupted)
    before = snapshot(tmp_path)
    result = make_checkpoint(tokenizer_dir, tmp_path / "new" / "made")
    assert result.exit_code == 130 and "interrupted" in error_line(result)
    assert snapshot(tmp_path) == before  # neither the staging dir nor the parent it created


# ---------------------------------------------------------------------------------------------------------------------
# Interrupts, leftovers, the other exit codes


def test_ctrl_c_during_a_run_exits_130_and_leaves_nothing(workspace, monkeypatch):
    from laya_opt.runs.pipeline import Pipeline

    def interrupted(self, *args, **kwargs):
        assert list(ws.output.glob(f"{PREFIX}*")), "the staging dir exists while the pipeline runs"
        raise KeyboardInterrupt

    ws = workspace()
    monkeypatch.setattr(Pipeline, "run", interrupted)
    refused(ws, "run", ["interrupted"], code=130)
    assert not ws.output.exists()


@pytest.mark.parametrize("signum, code, word",
                         [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
                         ids=["TERM", "INT"])
def test_a_signal_during_a_run_exits_with_its_code_and_leaves_nothing(workspace, signum, code, word):
    ws = workspace()
    marker = ws.root.parent / "waiting"
    ws.passes = [{"name": "wait", "config": {"marker": str(marker)}}]
    ws.write_experiment()
    before = snapshot(ws.root)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    # A background job inherits an ignored SIGINT, and Python then leaves it ignored: restore the default.
    process = subprocess.Popen([sys.executable, "-m", "laya_opt.cli", *ws.argv("run")], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), process.communicate(timeout=30)[0]
        assert list(ws.output.glob(f"{PREFIX}*"))
        process.send_signal(signum)
        output = process.communicate(timeout=60)[0]
    finally:
        process.kill()
    assert process.returncode == code, output
    assert f"error: {word}" in output and "Traceback" not in output
    assert snapshot(ws.root) == before


def test_a_killed_runs_staging_dir_is_swept_by_the_next_run(workspace):
    ws = workspace()
    ws.output.mkdir()
    stale = ws.output / f"{PREFIX}bad-20300101T000000Z-abc"
    stale.mkdir()
    (stale / ".owner").write_text("")           # nobody holds its lock: the owner died
    (stale / "manifest.json").write_text("{}")  # half-written results
    live = ws.output / f"{PREFIX}other-run"
    live.mkdir()
    import fcntl

    with open(live / ".owner", "w") as owner:   # another run, still alive
        fcntl.flock(owner, fcntl.LOCK_EX)
        result = cli(*ws.argv("run"))
        assert result.exit_code == 0, result.output
    assert not stale.exists() and live.exists()
    (results,) = [p for p in ws.output.iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in results.iterdir()) == ["manifest.json", "report.md", "stages.jsonl", "timings.json"]
    assert oct(results.stat().st_mode & 0o777) == oct(0o777 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_raising_pass_exits_1_naming_it_and_leaves_no_output_root(workspace):
    ws = workspace()
    ws.passes = [{"name": "explode"}]
    ws.write_experiment()
    line = refused(ws, "run", ["pass 'explode' (stage 1) raised RuntimeError: boom"], code=1)
    assert "no results directory was written" in line


def test_a_plugin_that_fails_to_import_exits_1_naming_it(workspace, monkeypatch):
    ws = workspace()
    (ws.root.parent / "broken_plugin.py").write_text("raise RuntimeError('half-installed')\n")
    monkeypatch.syspath_prepend(str(ws.root.parent))
    ws.write_experiment(plugins=["broken_plugin"])
    for command in ("explain", "run"):
        refused(ws, command, ["plugins[0]: importing plugin 'broken_plugin' raised RuntimeError: half-installed"],
                code=1)


def test_an_unexpected_error_is_one_line_unless_debug(workspace, monkeypatch):
    import laya_opt.core.runtime

    def broken(*args, **kwargs):
        raise TypeError("something internal\nsecond line")

    ws = workspace()
    monkeypatch.setattr(laya_opt.core.runtime, "load_checkpoint", broken)
    line = refused(ws, "predict", ["TypeError: something internal", "--debug"], code=1)
    assert "second line" not in line
    debug = cli("--debug", *ws.argv("predict"))
    assert debug.exit_code == 1 and "Traceback" in debug.output and "error: TypeError" in debug.output


def test_debug_shows_the_traceback_of_bad_input_too(workspace):
    ws = workspace()
    truncate(ws.checkpoint / "model.safetensors")
    result = cli("--debug", *ws.argv("predict"))
    assert result.exit_code == 2 and "Traceback" in result.output and "CheckpointError" in result.output


def test_an_unreadable_path_is_named_not_errno(workspace, monkeypatch):
    import laya_opt.core.runtime

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/ckpt/model.safetensors")

    ws = workspace()
    monkeypatch.setattr(laya_opt.core.runtime, "load_checkpoint", denied)
    line = refused(ws, "predict", ["/data/ckpt/model.safetensors: permission denied"])
    assert "Errno" not in line


# ---------------------------------------------------------------------------------------------------------------------
# Generated inputs (hypothesis, bounded)


def _answers(checkpoint: Path):
    return lo.load(checkpoint).predict(STATE, QUESTIONS)["answers"]


@pytest.fixture(scope="module")
def fuzz_base(tmp_path_factory, tiny_checkpoint_dir):
    """The tiny checkpoint without its manifest, so that the header checks themselves are what is fuzzed."""
    root = tmp_path_factory.mktemp("fuzz")
    base = shutil.copytree(tiny_checkpoint_dir, root / "base")
    (base / "manifest.json").unlink()
    return base, _answers(base)


def _header_bounds(path: Path) -> int:
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def _load_or_refuse(checkpoint: Path, expected, file_name: str) -> None:
    """A corrupted checkpoint is refused with an InputError naming the file, or gives exactly the same answers."""
    try:
        answers = _answers(checkpoint)
    except InputError as exc:
        assert file_name in str(exc).splitlines()[0], str(exc)
        return
    assert answers == expected


# An edit XORs a byte (mostly invalid UTF-8) or writes a character that keeps the header JSON-like.
JSON_BYTES = st.sampled_from(b'0123456789,:[]{}" eFUIB').map(lambda byte: -byte)
HEADER_EDITS = st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(1, 255) | JSON_BYTES), min_size=1, max_size=4)


@FUZZ
@given(edits=HEADER_EDITS, cut=st.one_of(st.none(), st.integers(0, 10 ** 6)))
def test_random_byte_corruptions_of_a_safetensors_header_never_crash_or_change_an_answer(fuzz_base, tmp_path_factory,
                                                                                         edits, cut):
    base, expected = fuzz_base
    checkpoint = shutil.copytree(base, tmp_path_factory.mktemp("h") / "ckpt")
    weights = checkpoint / "model.safetensors"
    data = bytearray(weights.read_bytes())
    end = _header_bounds(weights)
    for position, byte in edits:
        data[position % end] = -byte if byte < 0 else data[position % end] ^ byte
    if cut is not None:
        data = data[: cut % len(data)]
    weights.write_bytes(bytes(data))
    _load_or_refuse(checkpoint, expected, "model.safetensors")


JSON_SCALARS = st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=8)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


@FUZZ
@given(data=st.data())
def test_random_edits_of_header_entries_never_crash_or_change_an_answer(fuzz_base, tmp_path_factory, data):
    base, expected = fuzz_base
    checkpoint = shutil.copytree(base, tmp_path_factory.mktemp("e") / "ckpt")
    weights = checkpoint / "model.safetensors"
    raw = weights.read_bytes()
    end = _header_bounds(weights)
    header = json.loads(raw[8:end])
    name = data.draw(st.sampled_from(sorted(header)))
    key = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "extra", None]))
    if key is None:
        header.pop(name)
    elif isinstance(header[name], dict):
        header[name][key] = data.draw(JSON_VALUES | st.sampled_from(["F16", "BF16", "F64", "U32", "I64"]))
    else:
        header[name] = data.draw(JSON_VALUES)
    text = json.dumps(header).encode()
    weights.write_bytes(len(text).to_bytes(8, "little") + text + raw[end:])
    _load_or_refuse(checkpoint, expected, "model.safetensors")


STANDIN_FILES = ("model.safetensors", "rl_agent_config.json", "encoder/config.json", "tokenizer/tokenizer.json",
                 "tokenizer/tokenizer_config.json", "manifest.json")


@pytest.fixture(scope="module")
def standin_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("standin")
    path = shutil.copytree(standin_checkpoint(), root / "standin",
                           ignore=shutil.ignore_patterns("logs", "*.md", "training_metrics.json"))
    (root / "questions.json").write_text(json.dumps(QUESTIONS))
    return path, lo.load(path).predict(STATE, QUESTIONS), root / "questions.json"


@settings(FUZZ, max_examples=max(1, BUDGET * 2 // 3))
@given(target=st.sampled_from(STANDIN_FILES), position=st.integers(0, 10 ** 8), mask=st.integers(1, 255),
       truncate_instead=st.booleans())
def test_corruptions_of_the_standin_never_crash_or_silently_change_an_answer(standin_copy, target, position, mask,
                                                                             truncate_instead):
    path, expected, questions = standin_copy
    original = (path / target).read_bytes()
    try:
        data = bytearray(original)
        if truncate_instead:
            data = data[: position % len(data)]
        else:
            data[position % len(data)] ^= mask
        (path / target).write_bytes(bytes(data))
        try:
            answers = lo.load(path).predict(STATE, QUESTIONS)
        except InputError as exc:
            assert Path(target).name in str(exc).splitlines()[0], str(exc)
        else:
            assert answers == expected
        result = cli("predict", "--checkpoint", path, "--state", STATE, "--questions", questions)
        assert "Traceback" not in result.output and result.exit_code in (0, 2), result.output
    finally:
        (path / target).write_bytes(original)


QUESTION_MUTATIONS = st.sampled_from(["drop", "retype", "rename", "add", "replace"])


@FUZZ
@given(qid=st.sampled_from(sorted(QUESTIONS)), mutation=QUESTION_MUTATIONS, key=st.text(max_size=8),
       value=JSON_VALUES)
def test_random_mutations_of_valid_questions_are_answered_or_refused_by_name(tiny_codec, qid, mutation, key, value):
    questions = json.loads(json.dumps(QUESTIONS))
    definition = questions[qid]
    field_name = sorted(definition)[len(key) % len(definition)]
    if mutation == "drop":
        definition.pop(field_name)
    elif mutation == "retype":
        definition["type"] = value
    elif mutation == "rename":
        definition[key or "x"] = definition.pop(field_name)
    elif mutation == "add":
        definition[key] = value
    else:
        definition[field_name] = value
    try:
        specs = validate_questions(questions)
    except QuestionError as exc:
        assert f"question {qid!r}" in str(exc)
        return
    prepared = prepare_request(STATE, questions, tiny_codec, 128, 32) if specs else ()
    assert [item.qid for item in prepared] == list(questions)


@FUZZ
@given(path=st.sampled_from(["name", "batch_size", "suites", "passes", "gates", "benchmark", "reference_dtype",
                             "passes.0.config", "passes.0.on_fail", "benchmark.requests", "gates.cumulative"]),
       value=JSON_VALUES)
def test_random_mutations_of_valid_experiments_are_refused_by_key_path_before_weights(tmp_path_factory,
                                                                                     tiny_checkpoint_dir, path, value):
    root = tmp_path_factory.mktemp("x")
    document = {"name": "fuzz", "checkpoint": str(tiny_checkpoint_dir),
                "suites": [str(write_tiny_suite(root / "tiny.jsonl"))],
                "passes": [{"name": "compile_buckets", "config": {"multiple": 8}}],
                "gates": {"cumulative": ["max_abs_dp <= 0.1"]},
                "benchmark": {"workloads": ["short-1"], "requests": 2, "blocks": 2}, "output_dir": str(root / "out")}
    *parents, leaf = path.split(".")
    target = document
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[leaf] = value
    source = root / "fuzz.yaml"
    try:
        preflight(parse_experiment(document, source))
    except ExperimentError as exc:
        assert str(exc).startswith(f"{source}: ") and path.split(".")[0] in str(exc), str(exc)
        return
    assert not (root / "out").exists()
