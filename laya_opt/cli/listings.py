"""`laya-opt passes`, `laya-opt experiments`, `laya-opt suites`: what there is to run, from the command line.

Each builds plain data first (what `--json` prints) and draws its tables from that data, so the two outputs
never disagree.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import click

from laya_opt.util.console import output_console, print_table

NO_VALUE = "-"


def _echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


# ---------------------------------------------------------------------------------------------------------------------
# passes


def pass_entry(spec, source: str) -> dict:
    """One pass as plain data: what it is, what it replaces, its config class and every setting."""
    from laya_opt.util.settings_doc import describe_settings

    config = spec.config_type
    return {"name": spec.name, "exact": spec.exact, "description": spec.description,
            "replaces": sorted(spec.replaces), "captures": sorted(spec.captures), "needs": dict(spec.needs),
            "config_class": config.__name__, "config_module": config.__module__, "source": source,
            "settings": [setting.to_json() for setting in describe_settings(config)]}


def passes_listing(names: tuple[str, ...] = (), plugins: tuple[str, ...] = ()) -> list[dict]:
    """Every registered pass (built-ins, entry points, `plugins`), or only `names` (unknown names: UnknownPass)."""
    from laya_opt.passes.registry import build_registry

    registry = build_registry(plugins=plugins)
    chosen = [registry.get(name) for name in names] if names else [registry.passes[n] for n in registry.names]
    return [pass_entry(spec, registry.sources[spec.name]) for spec in chosen]


def _default_text(setting: dict) -> str:
    if setting["required"]:
        return "(required)"
    return json.dumps(setting["default"], ensure_ascii=False)


def print_passes(entries: list[dict], console) -> None:
    for entry in entries:
        parts = ", ".join(entry["replaces"]) + (f"; captures {', '.join(entry['captures'])}"
                                                if entry["captures"] else "")
        console.print(f"[bold]{entry['name']}[/]  {'exact' if entry['exact'] else 'approximate'}  replaces {parts}",
                      highlight=False)
        console.print(f"  {entry['description']}", highlight=False, markup=False)
        console.print(f"  config {entry['config_class']} ({entry['config_module']}); from {entry['source']}",
                      highlight=False, markup=False)
        if entry["settings"]:
            rows = [[s["name"], s["type"] + (f" ({s['constraints']})" if s["constraints"] else ""), _default_text(s),
                     s["description"] or NO_VALUE] for s in entry["settings"]]
            print_table(console, {"columns": ["setting", "type", "default", "meaning"], "rows": rows})
        else:
            console.print("  no settings", highlight=False)
        console.print()


@click.command("passes")
@click.argument("names", nargs=-1)
@click.option("--plugin", "plugins", multiple=True,
              help="Also list the passes of this module (as an experiment's `plugins:` would; repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the passes and their settings as JSON.")
def passes(names: tuple[str, ...], plugins: tuple[str, ...], as_json: bool) -> None:
    """List the passes an experiment can name (or only NAMES): exact or approximate, what each replaces, its
    config class and every setting with its type, default and meaning.

    Example: `laya-opt passes quantize_encoder`; in YAML, `passes: [{name: quantize_encoder, config: {bits: 8}}]`.
    """
    entries = passes_listing(names, plugins)
    if as_json:
        _echo_json(entries)
    else:
        print_passes(entries, output_console())


# ---------------------------------------------------------------------------------------------------------------------
# experiments


def _purpose(path: Path) -> str:
    """The first sentence of the file's opening comment: the shipped experiments say there what they are for."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip()
        if not line.startswith("#") or not text:
            break
        words.append(text)
    return re.split(r"(?<=\.)\s", " ".join(words), maxsplit=1)[0]


def _suite_name(path: Path) -> str:
    from laya_opt.util.resources import suites_dir

    return path.stem if path.parent == suites_dir() else str(path)


def experiment_entry(path: Path) -> dict:
    """One experiment file as plain data; an invalid file gives its one-line error instead of its plan."""
    from laya_opt.runs.experiment import load_experiment
    from laya_opt.util.errors import InputError

    try:
        experiment = load_experiment(path)
    except InputError as exc:
        return {"file": str(path), "error": str(exc)}
    plan = experiment.benchmark
    return {"file": str(path), "name": experiment.name, "purpose": _purpose(path),
            "passes": [step.name for step in experiment.steps], "suites": [_suite_name(p) for p in experiment.suites],
            "reference_dtype": experiment.reference_dtype, "candidate_dtype": experiment.candidate_dtype,
            "benchmark": None if plan is None else list(plan.workloads), "error": None}


def experiments_listing(directory: Path) -> list[dict]:
    from laya_opt.util.errors import ExperimentError

    if not directory.is_dir():
        problem = "is not a directory" if directory.exists() else "does not exist"
        raise ExperimentError(f"experiments directory {directory} {problem}; run from the repository root "
                              "(it ships experiments/) or name the directory: laya-opt experiments DIR")
    files = sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
    return [experiment_entry(path) for path in files]


@click.command("experiments")
@click.argument("directory", type=click.Path(path_type=Path), default=Path("experiments"))
@click.option("--json", "as_json", is_flag=True, help="Print the experiments as JSON.")
def experiments(directory: Path, as_json: bool) -> None:
    """List the experiment files in DIRECTORY (default: ./experiments): name, passes, suites, dtypes, benchmark
    workloads and the purpose the file's first comment gives. Each file is validated as `run` reads it (keys,
    pass names and settings, suites, gates file; `explain` also checks the checkpoint); invalid ones are
    listed with their error, and the command then exits 2.

    Example: `laya-opt experiments`, then `laya-opt explain experiments/quant_enc8.yaml`.
    """
    from laya_opt.util.errors import ExperimentError

    entries = experiments_listing(directory)
    if as_json:
        _echo_json(entries)
    elif not entries:
        output_console().print(f"no experiment files (*.yaml) in {directory}", highlight=False, markup=False)
    else:
        rows = [[e["file"], e["name"], ", ".join(e["passes"]) or "(stage 0 only)", ", ".join(e["suites"]),
                 f"{e['reference_dtype']} -> {e['candidate_dtype']}", ", ".join(e["benchmark"] or []) or NO_VALUE,
                 e["purpose"] or NO_VALUE] if not e["error"] else [e["file"], "INVALID", e["error"], "", "", "", ""]
                for e in entries]
        print_table(output_console(), {"title": f"{len(entries)} experiment(s) in {directory}", "columns": [
            "file", "name", "passes", "suites", "dtypes", "benchmark", "purpose"], "rows": rows})
    invalid = [e["file"] for e in entries if e["error"]]
    if invalid:
        raise ExperimentError(f"{len(invalid)} of {len(entries)} experiment file(s) are invalid: {', '.join(invalid)}")


# ---------------------------------------------------------------------------------------------------------------------
# suites


def suite_entry(name: str) -> dict:
    from collections import Counter

    from laya_opt.suites.suite_file import load_suite
    from laya_opt.util.resources import suite_path

    suite = load_suite(suite_path(name))
    types = Counter(question["type"] for record in suite.records for question in record.questions.values())
    return {"name": suite.name, "version": suite.version, "records": len(suite.records),
            "questions": suite.n_questions, "by_type": dict(sorted(types.items())),
            "purpose": suite.description, "file": Path(suite.path).name}


def suites_listing() -> list[dict]:
    from laya_opt.util.resources import suite_names

    return [suite_entry(name) for name in suite_names()]


@click.command("suites")
@click.option("--json", "as_json", is_flag=True, help="Print the suites as JSON.")
def suites(as_json: bool) -> None:
    """List the bundled labelled suites: records, questions (by type) and what each is for.

    Gate a run on one with `laya-opt run EXPERIMENT --suite NAME` (or a .jsonl path), or `suites: [NAME]` in YAML.
    """
    entries = suites_listing()
    if as_json:
        _echo_json(entries)
        return
    rows = [[e["name"], e["records"], e["questions"], ", ".join(f"{k} {v}" for k, v in e["by_type"].items()),
             e["purpose"] or NO_VALUE] for e in entries]
    print_table(output_console(), {"title": f"{len(entries)} bundled suite(s)",
                                   "columns": ["suite", "records", "questions", "by type", "purpose"], "rows": rows,
                                   "justify": {1: "right", 2: "right"}})
