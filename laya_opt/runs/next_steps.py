"""What to try when a run rejects a stage: the commands that find the cause, and how to gate on another suite.

Built from the manifest and the stage records alone, like report.md, so the console and report.md say the
same. The commands repeat the run's own command-line overrides (`resolved.command_options`), so they
examine the run that failed, not the file's defaults.
"""
from __future__ import annotations

import shlex
from typing import Mapping, Sequence

FAILED_VERDICTS = ("rejected", "stopped")
PLACEHOLDER = "EXPERIMENT.yaml"   # an experiment built in Python has no file to name


def _command(*words: str) -> str:
    return " ".join(shlex.quote(word) for word in words)


def next_steps(manifest: Mapping, records: Sequence[Mapping]) -> list[str]:
    """One sentence per step, commands in backticks; [] when no stage failed its gates."""
    failed = [record for record in records if record["verdict"] in FAILED_VERDICTS]
    if not failed:
        return []
    resolved = manifest["resolved"]
    target = resolved.get("source") or PLACEHOLDER
    options = list(resolved.get("command_options") or [])
    # The same run without its --suite choice: the base of the "pick another suite" example.
    other = [word for index, word in enumerate(options)
             if word != "--suite" and (index == 0 or options[index - 1] != "--suite")]
    first = failed[0]
    suites = ", ".join(f"{suite['name']} ({suite['records']} records)" for suite in manifest["suites"])
    return [
        f"Find the cause: `{_command('laya-opt', 'bisect', target, *options)}` (or "
        f"`{_command('laya-opt', 'run', target, *options, '--bisect')}`) names the first pass whose addition "
        "fails and, for quantize_encoder, the encoder layers to exclude.",
        f"Read the plan: `{_command('laya-opt', 'explain', target, *options)}` shows every stage's gates and the "
        f"bounds they rest on; stage {first['index']} {first['stage']} is the first that failed.",
        f"The gates ran on {suites}. Gate on another suite with "
        f"`{_command('laya-opt', 'run', target, *other)} --suite NAME` (a bundled suite or a .jsonl path; "
        "`laya-opt suites` lists the bundled ones and what each is for).",
    ]


def next_steps_section(manifest: Mapping, records: Sequence[Mapping]) -> list[str]:
    """report.md's `## Next steps`, or nothing."""
    steps = next_steps(manifest, records)
    return ["## Next steps", "", *(f"- {step}" for step in steps), ""] if steps else []
