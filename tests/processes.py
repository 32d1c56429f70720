"""Helpers for tests that kill a child process at a chosen point (fault tests: SIGKILL mid-computation)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def signal_once_marked(process: subprocess.Popen, marker: Path, timeout: float, waiting_for: str,
                       sig: int = signal.SIGKILL) -> int:
    """Send `sig` to `process` as soon as it creates `marker`; fail (with its stderr) if it exits first or takes
    longer than `timeout` seconds. Returns its exit code; the process is killed (if it lingers past 60 s) and
    reaped either way."""
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else "the process exited"
            assert time.monotonic() < deadline, f"{waiting_for} never happened"
            time.sleep(0.05)
        os.kill(process.pid, sig)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
    finally:
        process.kill()
        process.communicate(timeout=60)
    return process.returncode


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped by its new parent, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")
