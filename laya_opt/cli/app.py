"""`laya-opt` command line: predict, inspect-prompt, make-checkpoint, run, explain, ..."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from laya_opt.cli import bench as cli_bench
from laya_opt.cli import bisect as cli_bisect
from laya_opt.cli import calibrate as cli_calibrate
from laya_opt.cli import diff as cli_diff
from laya_opt.cli import doctor as cli_doctor
from laya_opt.cli import history as cli_history
from laya_opt.cli import listings as cli_listings
from laya_opt.cli import run as cli_run
from laya_opt.cli import sweep as cli_sweep
from laya_opt.util.version import VERSION as __version__
from laya_opt.core.checkpoint import DTYPES, MAX_SEED
from laya_opt.cli.contract import ContractGroup
from laya_opt.core.config import ARCHITECTURES
from laya_opt.util.console import output_console, print_table
from laya_opt.util.errors import QuestionError
from laya_opt.util.jsonio import loads, read_json, read_text
from laya_opt.util.resources import STANDIN, checkpoint_path, project_tokenizer


def read_state(value: str, as_json: bool):
    """`--state TEXT`, or `@path` to read a file; JSON-parse it with --json-state or a .json file."""
    source = "--state"
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            problem = "is not a regular file" if path.exists() else "does not exist"
            raise QuestionError(f"--state: state file {path} {problem}")
        text, source = read_text(path, QuestionError), str(path)
        as_json = as_json or path.suffix == ".json"
    else:
        text = value
    return loads(text, source, QuestionError) if as_json else text


def read_questions(path: Path) -> dict:
    questions = read_json(path, QuestionError)
    if not isinstance(questions, dict):
        raise QuestionError(f"{path}: expected a JSON object mapping question id -> definition")
    return questions


def answer_summary(answer: dict) -> tuple[str, str]:
    kind = answer["type"]
    if kind == "choice":
        top = sorted(answer["probabilities"].items(), key=lambda item: -item[1])[:3]
        return str(answer["choice"]), ", ".join(f"{label} {p:.4f}" for label, p in top)
    if kind == "score":
        probs = ", ".join(f"{level} {p:.4f}" for level, p in answer["probabilities"].items())
        return f"{answer['score']:.4f}", probs
    return f"P(true) {answer['noul']:.4f}", ""


def answers_table(result: dict) -> Table:
    table = Table(title=f"{len(result['answers'])} answers, {result['usage']['input_tokens']} input tokens")
    for column in ("question", "type", "answer", "confidence", "answer_confidence", "act_probability", "probabilities"):
        table.add_column(column)
    for qid, answer in result["answers"].items():
        value, probs = answer_summary(answer)
        table.add_row(qid, answer["type"], value, f"{answer['confidence']:.4f}", f"{answer['answer_confidence']:.4f}",
                      f"{answer['action']['act_probability']:.4f}", probs)
    return table


checkpoint_option = click.option(
    "--checkpoint", "checkpoint", default=STANDIN, show_default=True, callback=lambda ctx, param, value:
    checkpoint_path(value), help="Checkpoint directory (upstream or laya-mlx layout); `standin` is the bundled one.")
state_option = click.option("--state", "state", required=True, help="State text, or @FILE to read it from a file.")
json_state_option = click.option("--json-state", is_flag=True, help="Parse the state as JSON (dict or turn list).")
questions_option = click.option("--questions", "questions_file", required=True,
                                type=click.Path(path_type=Path, exists=True, dir_okay=False),
                                help="JSON file: question id -> definition (spec §6).")
dtype_option = click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="float32", show_default=True,
                            help="Weights and activations dtype.")


@click.group(cls=ContractGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="laya-opt")
@click.option("--debug", is_flag=True, help="Print the Python traceback of an error, not just its one-line message.")
def main(debug):
    """laya-opt: make the Laya decision model fast without making it wrong.

    Run the baseline runtime (predict, inspect-prompt), build checkpoints (make-checkpoint), run
    fidelity-gated optimization experiments (run, explain), measure the noise the gates rest on
    (calibrate-gates), find why a stack fails (bisect, sensitivity), search pass settings for the fastest
    stack that passes (sweep), time stacks head to head against the upstream runtime (bench, plot), compare
    and list runs (diff, history) and check the machine (doctor).
    List what there is to run: passes (with every setting), experiments, suites.

    Exit codes, for every command: 0 success; 2 bad input (one line naming the file, key path, tensor
    or question); 3 a gate failed (run); 1 a pass raised (named) or an unexpected error; 130 interrupted.
    """


@main.command()
@checkpoint_option
@state_option
@json_state_option
@questions_option
@dtype_option
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True,
              help="Questions per forward pass (insertion order).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON response envelope instead of a table.")
def predict(checkpoint, state, json_state, questions_file, dtype, batch_size, as_json):
    """Answer typed questions about a state with one forward pass per batch."""
    from laya_opt.core.runtime import load_runtime

    questions = read_questions(questions_file)
    runtime = load_runtime(checkpoint, dtype=dtype, batch_size=batch_size)
    result = runtime.predict(read_state(state, json_state), questions)
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        output_console().print(answers_table(result))


@main.command("inspect-prompt")
@checkpoint_option
@state_option
@json_state_option
@questions_option
@click.option("--question", "only", multiple=True, help="Only show these question ids (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print ids, markers and tokens as JSON.")
def inspect_prompt(checkpoint, state, json_state, questions_file, only, as_json):
    """Show the exact token sequence each question feeds the model, with option markers."""
    from laya_opt.core.checkpoint import inspect_checkpoint
    from laya_opt.core.prompt import prepare_request
    from laya_opt.core.prompt_roles import render_tokens

    files = inspect_checkpoint(checkpoint)  # checked like every load, but no weight is read
    agent, codec = files.agent_config, files.codec
    prepared = prepare_request(read_state(state, json_state), read_questions(questions_file), codec,
                               agent.max_len, agent.head_max_len)
    unknown = set(only) - {item.qid for item in prepared}
    if unknown:
        raise QuestionError(f"--question: unknown question id(s) {', '.join(sorted(unknown))}")
    selected = [item for item in prepared if not only or item.qid in only]
    if as_json:
        click.echo(json.dumps([{"qid": item.qid, "type": item.type_name, "qtype": item.qtype, "ids": list(item.ids),
                                "markers": list(item.markers), "options": list(item.option_keys),
                                "tokens": [row[2] for row in render_tokens(item, codec)]}
                               for item in selected], ensure_ascii=False, indent=2))
        return
    styles = {"cls": "bold magenta", "sep": "bold magenta", "marker": "bold yellow", "header": "cyan",
              "option": "green", "state": ""}
    console = output_console()
    for item in selected:
        console.rule(f"{item.qid} ({item.type_name}, qtype {item.qtype}): {item.length} tokens, "
                     f"markers at {list(item.markers)}")
        line = [f"[{styles[role]}]{token}[/]" if styles[role] else token
                for _, _, token, role in render_tokens(item, codec)]
        console.print(" ".join(line), markup=True, highlight=False)


@main.command("make-checkpoint")
@click.option("--arch", type=click.Choice(list(ARCHITECTURES)), required=True,
              help="Published sizes (spec §2), the small test architecture (tiny) or the stand-in's (standin).")
@click.option("--random", "random_weights", is_flag=True, required=True,
              help="Random weights (the only source: nothing is downloaded).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the random weights.")
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="float16", show_default=True)
@click.option("--tokenizer", "tokenizer_dir", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Tokenizer folder to ship (default: the project's bundled BPE tokenizer).")
@click.argument("out_dir", type=click.Path(path_type=Path))
def make_checkpoint(arch, random_weights, seed, dtype, tokenizer_dir, out_dir):
    """Write a complete upstream-layout checkpoint with random weights at a real size (never committed)."""
    from laya_opt.core.checkpoint import load_checkpoint
    from laya_opt.core.config import parameter_count
    from laya_opt.core.synth import write_random_checkpoint

    path = write_random_checkpoint(arch, out_dir, seed=seed, dtype=dtype,
                                   tokenizer_dir=tokenizer_dir or project_tokenizer())
    loaded = load_checkpoint(path, dtype=dtype)
    total = parameter_count(loaded.encoder_config, loaded.agent_config)
    output_console().print(f"wrote {path} ({arch}, {dtype}, seed {seed}): {total:,} parameters, "
                           f"{(path / 'model.safetensors').stat().st_size:,} bytes of weights; strict load OK")


@main.command()
@checkpoint_option
@click.option("--suite", default="smoke", show_default=True, help="A bundled suite name or a .jsonl path.")
@click.option("--bits", type=click.IntRange(min=2, max=8), default=4, show_default=True)
@click.option("--group-size", type=int, default=64, show_default=True)
@click.option("--mode", default="affine", show_default=True, help="affine, mxfp4, mxfp8 or nvfp4.")
@click.option("--unit", type=click.Choice(["layer", "linear"]), default="layer", show_default=True,
              help="Quantize one encoder layer, or one Linear, at a time.")
@dtype_option
@click.option("--json", "as_json", is_flag=True, help="Print the ranking as JSON.")
def sensitivity(checkpoint, suite, bits, group_size, mode, unit, dtype, as_json):
    """Rank encoder layers by the argmax flips and drift that quantizing each one alone causes.

    This is the ranking `laya-opt bisect` computes for a failing quantize_encoder stage (one function,
    fidelity/sensitivity.py); bisect goes on to a verified `exclude:` list.
    """
    from laya_opt.fidelity.checker import requests_from_suite
    from laya_opt.fidelity.sensitivity import layer_sensitivity, sensitivity_table
    from laya_opt.suites.suite_file import load_suite
    from laya_opt.util.resources import suite_path
    from laya_opt.core.runtime import load_runtime

    requests = requests_from_suite(load_suite(suite_path(suite, "--suite")))
    rows = layer_sensitivity(load_runtime(checkpoint, dtype=dtype), requests, bits=bits, group_size=group_size,
                             unit=unit, mode=mode)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        print_table(output_console(), sensitivity_table(rows))


for command in (cli_run.run, cli_run.explain, cli_bench.bench, cli_bench.plot, cli_doctor.doctor,
                cli_history.history, cli_diff.diff, cli_calibrate.calibrate_gates, cli_bisect.bisect,
                cli_listings.passes, cli_listings.experiments, cli_listings.suites, cli_sweep.sweep):
    main.add_command(command)

if __name__ == "__main__":
    sys.exit(main())
