"""Run one sweep trial in a child process, so a trial that kills its process does not end the sweep.

A stack can take its process down with it: a CUDA fault ("misaligned address" ends the process), an abort in a
native library, the kernel's OOM killer. Run in the sweep's own process, such a trial loses the sweep; run here,
it is a trial that crashed. The parent:

- writes the job (the sweep file's path and the SHA-256 of it and of its base experiment as the sweep read them,
  the settings, the trial number and the deadline) to a file and starts `python -m laya_opt.runs.trial_child
  JOB RESULT` with the parent's import path (plugins the base experiment names by module resolve as they do in
  the sweep). The child reads the sweep file again (a parsed experiment holds plugin functions, which do not
  pickle) and refuses to run when either file changed since the sweep read it (`trial_child`, the child's side);
- relays each line the child prints as a progress message (`say`), and keeps them, timed, and its stderr;
- returns the payload the child wrote (`sweep.execute_trial`'s; a cut one's note names its log, below), or, when
  the child ended without one, a crash payload: `{"crashed": True, "note": ...}` naming the exit code or signal
  and the last line of its stderr. Its printed lines (seconds since it started) and its stderr are kept as
  `crashes/<trial name>.log` under the sweep's results directory, or as `cut/<trial name>.log` for a child cut
  by the budget (killed at `kill_at`, or stopped at one of its own budget checks), so a trial that never
  finished still says where its time went; the staging directory the dead trial was building is removed.

An interrupted sweep (Ctrl-C, SIGTERM) kills the child and removes its staging directory before it exits. The
child ends itself when the parent dies (it watches its parent id), so a sweep killed mid-trial leaves no trial
running on: `--resume` finds the trial RUNNING in the journal, as it does without a child.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from laya_opt.util import staging

CRASHES = "crashes"
CUT_LOGS = "cut"


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code} without a result"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output on stderr"


def _keep_log(target: Path, printed: list[str], stderr: str) -> Path:
    target.parent.mkdir(exist_ok=True)
    target.write_text("# printed (seconds since the trial's process started)\n" + "".join(printed)
                      + "# stderr\n" + stderr, encoding="utf-8")
    return target


def _remove_dead_staging(trials_dir: Path) -> None:
    """The staging directory a dead trial was building (its owner lock went with its process)."""
    if trials_dir.is_dir():
        staging.sweep(trials_dir)


def sweep_files_digest(source: Path, base: Path) -> str:
    """SHA-256 over the sweep file and its base experiment: what a child must find unchanged."""
    digest = hashlib.sha256()
    for path in (source, base):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def run_in_child(sweep, settings: Mapping[str, Any], number: int, name: str, *, deadline: float | None,
                 say: Callable[[str], None], digest: str, trials_dir: Path, kill_at: float | None = None,
                 cut: Mapping[str, Any] | None = None) -> dict:
    """`sweep.execute_trial(sweep, settings, number, deadline=deadline)` in a child process; see the module.
    `digest`: `sweep_files_digest` of the sweep's files when the sweep read them; `trials_dir`: where the trial
    publishes its run (and stages it); `kill_at` (wall-clock seconds): a child still running then is killed, for
    a child that reaches none of the deadline's checks in time, and `cut` (the sweep's cut payload) returned."""
    sweep.results_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".trial-", dir=sweep.results_dir) as work:
        job, result, stderr_path = Path(work) / "job.json", Path(work) / "payload.json", Path(work) / "stderr.log"
        job.write_text(json.dumps({"source": str(sweep.source), "digest": digest, "settings": dict(settings),
                                   "number": number, "deadline": deadline,
                                   "output_dir": str(sweep.output_dir.resolve())}), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if isinstance(p, str) and p),
               "PYTHONUNBUFFERED": "1"}
        with open(stderr_path, "wb") as stderr:
            child = subprocess.Popen([sys.executable, "-m", "laya_opt.runs.trial_child", str(job), str(result)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, env=env,
                                     text=True, encoding="utf-8", errors="replace")
            timer = None if kill_at is None else threading.Timer(max(0.0, kill_at - time.time()), child.kill)
            started, printed = time.monotonic(), []
            try:
                if timer is not None:
                    timer.start()
                for line in child.stdout:
                    printed.append(f"[{time.monotonic() - started:8.1f}] {line}")
                    say(line.rstrip("\n"))
                code = child.wait()
            finally:   # an interrupt of the sweep (Ctrl-C, SIGTERM) ends the trial too, and removes its staging
                if timer is not None:
                    timer.cancel()
                if child.poll() is None:
                    child.kill()
                    child.wait()
                    _remove_dead_staging(trials_dir)
        stderr_text = stderr_path.read_text(encoding="utf-8", errors="replace")

        def with_cut_log(payload: Mapping[str, Any]) -> dict:
            # a cut trial's stage times are what the next call's budget is planned from
            log = _keep_log(sweep.results_dir / CUT_LOGS / f"{name}.log", printed, stderr_text)
            return {**payload, "note": f"{payload.get('note', 'cut')}; its output: {CUT_LOGS}/{log.name}"}

        if result.is_file():   # finished, or cut at one of its own budget checks
            payload = json.loads(result.read_text(encoding="utf-8"))
            return with_cut_log(payload) if payload.get("cut") else payload
        if kill_at is not None and code == -signal.SIGKILL and time.time() >= kill_at:
            _remove_dead_staging(trials_dir)
            return with_cut_log(cut or {"cut": True})
        log = _keep_log(sweep.results_dir / CRASHES / f"{name}.log", printed, stderr_text)
        _remove_dead_staging(trials_dir)
        return {"crashed": True,
                "note": f"crashed: the trial's process {_describe_exit(code)} ({_last_line(stderr_text)}); "
                        f"its output: {CRASHES}/{log.name}"}
