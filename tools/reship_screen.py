r"""Screen a new stand-in after its gate suite is drawn: does 8-bit change any decisive answer under it?

    laya-opt run experiments/quant_enc8.yaml --no-bench --quiet --allow-failed-gates --json \
        --output-dir WORK/screen > WORK/screen.json
    python tools/reship_screen.py WORK/screen.json

Step 2 of tools/reship_standin.sh draws `gate` again under the new checkpoint; the gates file is still the old
model's until step 3 (47-64 minutes) calibrates it. A decisive change does not depend on the gates file (the
reference decided by a top-two gap of 0.05 or more, and the candidate answered otherwise), so the headline
8-bit run on the new suite tells, in about five minutes, whether the checkpoint can carry the project's promise
that 8-bit is harmless: it cannot if 8-bit changes a decisive answer of it (the frames candidate of 2026-12-07,
found after two hours; checkpoints/laya-tiny/TRAINING.md). Near-tie changes are reported, not judged: their
allowance comes from the new model's own float16 noise, which step 3 measures.

Exit status: 0 when no approximate stage changed a decisive answer, 4 when one did (the screen's verdict), 2 when
the run's outcome cannot be read (a run that failed before gating, or a file that is not its --json outcome).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from laya_opt.fidelity.decisions import OUTCOMES as CHANGES   # every way a decision can change


def screen(outcome_file: Path) -> tuple[int, list[str]]:
    """The exit status and the lines to print for one `laya-opt run --json` outcome."""
    try:
        outcome = json.loads(outcome_file.read_text())
        stages_file = Path(outcome["results_dir"]) / "stages.jsonl"
        records = [json.loads(line) for line in stages_file.read_text().splitlines() if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return 2, [f"error: {outcome_file} is not a readable `laya-opt run --json` outcome with its stages.jsonl: "
                   f"{error}"]
    approximate = [record for record in records if record.get("exact") is False]
    if not approximate:
        return 2, [f"error: {outcome_file}: no approximate stage was gated (stages: "
                   f"{', '.join(str(record.get('stage')) for record in records) or 'none'})"]
    status, lines = 0, []
    for record in approximate:
        split = (record.get("decisions") or {}).get("incremental")
        try:
            decisive = sum(int(split["decisive"][kind]) for kind in CHANGES)
            near = sum(int(split["near_tie"][kind]) for kind in CHANGES)
        except (KeyError, TypeError, ValueError):
            return 2, [f"error: {outcome_file}: stage {record.get('stage')} has no decision counts "
                       f"({record.get('error') or 'not evaluated'})"]
        lines.append(f"{record.get('stage')}: {decisive} decisive answer(s) changed of {split['decisive']['questions']}"
                     f", {near} near tie(s) of {split['near_tie']['questions']} (near ties judged at step 3)")
        if decisive:
            status = 4
    restore = "git checkout checkpoints/laya-tiny laya_opt/suites/data/gate.jsonl"
    lines.append("screen: " + (f"REJECTED: a decisive answer changed; the new checkpoint cannot be the reference "
                               f"(restore the shipped one: {restore})"
                               if status else "passed: no decisive answer changed; go on with step 3"))
    return status, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("outcome", type=Path, help="the file `laya-opt run --json` printed")
    status, lines = screen(parser.parse_args(argv).outcome)
    print("\n".join(lines), file=sys.stderr if status == 2 else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
