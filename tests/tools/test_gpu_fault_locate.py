"""benchmarks/gpu_fault_locate.py on the CPU: the plumbing that finds the first faulting request on a GPU."""
import json

from repo_scripts import load_script as load


def load_script():
    return load("benchmarks/gpu_fault_locate.py")


def test_a_clean_stack_reports_no_fault(tmp_path):
    out = tmp_path / "clean.json"
    assert load_script().main(["--stages", "2", "--suite", "smoke", "--only", "0", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["passes"] == ["masks_once", "qkv_views"] and record["requests"] == 1 and record["fault"] is None
    assert load_script().main(["--stages", "0", "--suite", "smoke", "--first", "2", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["requests"] == 2


def test_the_first_failing_request_is_named_with_its_shape(tmp_path, monkeypatch, capsys):
    script = load_script()
    real = script.evaluate_request
    calls = []

    def faulting(runtime, request):
        calls.append(request.record_id)
        if len(calls) == 2:
            raise RuntimeError("cudaGetLastError() failed: misaligned address")
        return real(runtime, request)

    monkeypatch.setattr(script, "evaluate_request", faulting)
    out = tmp_path / "fault.json"
    assert script.main(["--stages", "0", "--suite", "smoke", "--out", str(out)]) == 3
    fault = json.loads(out.read_text())["fault"]
    assert len(calls) == 2   # it stops at the fault: a CUDA fault poisons the process
    assert fault["index"] == 1 and fault["record_id"] == calls[1] and "misaligned address" in fault["error"]
    assert fault["lengths"] and all(length > 0 for length in fault["lengths"])
    assert '"fault"' in capsys.readouterr().out
