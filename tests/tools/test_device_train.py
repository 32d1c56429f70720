"""tools/device_train.sh rehearsed on the CPU: the shell around the trainer that device calls run.

A broken device script costs a lent GPU's minutes, so its paths are checked here with a tiny model: the run
folder (WORK) and the output folder (OUT) are the ones given, the checkpoint, log and kernel-cache archives
land in OUT, and a bad step is refused by name."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest
from repo_scripts import REPO
from test_train_standin import _small_validation

SCRIPT = REPO / "tools" / "device_train.sh"


def run(step: list[str], tmp_path, **env) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHON": sys.executable, "MLX_PTX_CACHE_DIR": str(tmp_path / "ptx"), **env}
    return subprocess.run(["bash", str(SCRIPT), *step], cwd=REPO, env=environment, capture_output=True, text=True,
                          timeout=600)


def test_a_tiny_run_trains_in_its_own_work_folder_and_returns_checkpoint_log_and_cache(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out" / "a"   # OUT a subfolder not made yet: a side-by-side run's
    args = ["train", "60", "--train-records", "60", "--steps", "3", "--batch-size", "8", "--hidden-size", "64",
            "--eval-every", "2", "--heldout-suite", "smoke", "--calib-suite", "smoke", "--workers", "1",
            "--validation-suite", str(_small_validation(tmp_path)), "--max-len", "320", "--head-max-len", "112",
            "--cache-limit-gb", "1"]
    done = run(args, tmp_path, WORK=str(work), OUT=str(out), CALL_SECONDS="500")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "R" / "model.safetensors").is_file() and (work / "pkg" / "laya_opt" / "passes").is_dir()
    assert "step 2:" in (out / "train.log").read_text()
    with tarfile.open(out / "standin.tgz") as archive:
        assert "R/model.safetensors" in archive.getnames()
    assert tarfile.is_tarfile(out / "ptx.tgz")


@pytest.mark.parametrize("step, message", [(["fit"], "unknown step 'fit'"),
                                           (["train"], "training seconds of the whole run")])
def test_a_bad_step_is_named_and_exits_non_zero(tmp_path, step, message):
    done = run(step, tmp_path, OUT=str(tmp_path / "out"))
    assert done.returncode != 0 and message in done.stderr
