"""The child's side of `trial_process`: `python -m laya_opt.runs.trial_child JOB RESULT` runs one sweep trial.

It reads the sweep file named in JOB again (its results go to the parent's output_dir), refuses (exit 2, one
line on stderr) when the sweep file or its base experiment changed since the sweep read them, runs
`sweep.execute_trial`, printing its progress messages one per line for the parent to relay, and writes the
payload to RESULT whole (a rename). It ends itself as soon as its parent is gone, so a trial never outlives a
killed sweep.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path

PARENT_POLL_SECONDS = 0.5


def _exit_with_parent(parent: int) -> None:
    """End this process as soon as its parent is gone (re-parented processes see another parent id)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(argv: list[str] | None = None) -> int:
    job, result = (Path(arg) for arg in (argv if argv is not None else sys.argv[1:]))
    _exit_with_parent(os.getppid())
    from laya_opt.runs.sweep import execute_trial
    from laya_opt.runs.sweep_file import load_sweep
    from laya_opt.runs.trial_process import sweep_files_digest
    from laya_opt.util.staging import replace_file

    spec = json.loads(job.read_text(encoding="utf-8"))
    # the parent's output_dir: a Ray worker's sweep, or a caller's, may have set it apart from the file
    sweep = dataclasses.replace(load_sweep(spec["source"]), output_dir=Path(spec["output_dir"]))
    if sweep_files_digest(sweep.source, sweep.base_path) != spec["digest"]:
        print(f"error: {sweep.source} or its base experiment {sweep.base_path} changed since the sweep read them; "
              "rerun the sweep (--resume keeps its finished trials)", file=sys.stderr)
        return 2
    payload = execute_trial(sweep, spec["settings"], spec["number"], deadline=spec["deadline"],
                            say=lambda message: print(message, flush=True))
    # the parent reads a whole payload or none
    replace_file(result, lambda partial: partial.write_text(json.dumps(payload), encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
