import signal

import pytest

from laya_opt.cli.contract import Terminated, classify
from laya_opt.util.errors import CheckpointError, PassError, QuestionError
from laya_opt.runs.pipeline import PipelineError


@pytest.mark.parametrize("exc, code, message", [
    (CheckpointError("ckpt/model.safetensors: truncated"), 2, "ckpt/model.safetensors: truncated"),
    (QuestionError("question 'q': unknown type"), 2, "question 'q': unknown type"),
    (PassError("pass 'x' mutated its input"), 1, "pass 'x' mutated its input"),
    (PipelineError("pass 'x' (stage 1) raised RuntimeError: boom", None), 1, "pass 'x' (stage 1) raised"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (Terminated(), 128 + signal.SIGTERM, "terminated"),
    (PermissionError(13, "Permission denied", "/data/x"), 2, "/data/x: permission denied"),
    (IsADirectoryError(21, "Is a directory", "/data/y"), 2, "/data/y: is a directory"),
    (FileExistsError("output directory out already exists"), 2, "output directory out already exists"),
    (RecursionError("maximum recursion depth exceeded"), 2, "nested too deeply"),
    (ValueError("internal\ndetails"), 1, "ValueError: internal (rerun with --debug for details)"),
])
def test_every_exception_gets_its_exit_code_and_one_line(exc, code, message):
    got_code, got_message = classify(exc)
    assert got_code == code and message in got_message and "\n" not in got_message.split(message)[0]
    assert "Errno" not in got_message
