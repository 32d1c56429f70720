"""tools/reship_standin.sh refuses what it cannot ship before it touches the bundled checkpoint."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "reship_standin.sh"
MODEL = REPO / "checkpoints" / "laya-tiny" / "model.safetensors"


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)   # the test's python and laya-opt first on PATH
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{bindir}:/usr/bin:/bin"})


@pytest.mark.parametrize("case", ["missing", "not_a_checkpoint", "work_exists", "unloadable", "from_without_work",
                                  "from_another_checkpoint", "from_no_step", "other_checkout"])
def test_bad_input_is_one_error_and_the_bundled_checkpoint_is_untouched(tmp_path, case):
    before = hashlib.sha256(MODEL.read_bytes()).hexdigest()
    work = tmp_path / "work"
    new = tmp_path / "new"
    new.mkdir()
    if case == "missing":
        result = run()
        expected = "usage: reship_standin.sh NEW_CHECKPOINT WORK_DIR"
    elif case == "not_a_checkpoint":
        result = run(str(new), str(work))
        expected = "is not a checkpoint"
    elif case == "work_exists":
        for name in ("model.safetensors", "rl_agent_config.json"):
            (new / name).write_bytes((MODEL.parent / name).read_bytes())
        work.mkdir()
        result = run(str(new), str(work))
        expected = "exists; give a new directory"
    elif case.startswith("from_"):   # going on from a later step: only in an earlier call's work dir, with its
        for name in ("model.safetensors", "rl_agent_config.json"):   # checkpoint in place
            (new / name).write_bytes((MODEL.parent / name).read_bytes())
        if case == "from_another_checkpoint":
            (new / "rl_agent_config.json").write_text("{}")
        if case != "from_without_work":
            work.mkdir()
        result = run(str(new), str(work), "7" if case == "from_no_step" else "4")
        expected = {"from_without_work": "is not one", "from_another_checkpoint": "needs step 1 done with it",
                    "from_no_step": "FROM_STEP must be 1 to 5"}[case]
    elif case == "other_checkout":   # run from a second checkout while this python's laya_opt is REPO's: every step
        shutil.copytree(MODEL.parent, new, dirs_exist_ok=True)   # would measure REPO's stand-in, not the new one
        checkout = tmp_path / "checkout"
        (checkout / "checkpoints" / "laya-tiny").mkdir(parents=True)
        (checkout / "pyproject.toml").write_text("")
        result = run(str(new), str(work), cwd=checkout)
        expected = "uses the stand-in at"
        assert not any((checkout / "checkpoints" / "laya-tiny").iterdir())
    else:   # the files are there but do not load (a truncated weights file)
        (new / "model.safetensors").write_bytes(MODEL.read_bytes()[:1000])
        (new / "rl_agent_config.json").write_bytes((MODEL.parent / "rl_agent_config.json").read_bytes())
        result = run(str(new), str(work))
        expected = "does not load"
    assert result.returncode != 0 and expected in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1   # one line, no traceback
    assert work.exists() == (case in ("work_exists", "from_another_checkpoint", "from_no_step"))  # nothing made
    assert hashlib.sha256(MODEL.read_bytes()).hexdigest() == before
