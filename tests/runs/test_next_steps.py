"""What a run that rejects a stage tells the user to try next, from the manifest and stage records alone."""
from __future__ import annotations

from laya_opt.runs.next_steps import PLACEHOLDER, next_steps, next_steps_section


def manifest(source="exp/my run.yaml", options=()):
    return {"resolved": {"source": source, "command_options": list(options)},
            "suites": [{"name": "smoke", "records": 9}, {"name": "mine", "records": 3}]}


def record(index, stage, verdict):
    return {"index": index, "stage": stage, "verdict": verdict}


RECORDS = [record(0, "baseline", "accepted"), record(1, "note", "accepted"), record(2, "quantize_encoder", "rejected"),
           record(3, "compile_buckets", "stopped")]


def test_no_failed_stage_no_steps():
    assert next_steps(manifest(), RECORDS[:2]) == [] and next_steps_section(manifest(), RECORDS[:2]) == []


def test_the_steps_name_bisect_explain_and_the_suites_with_the_runs_options():
    options = ("--checkpoint", "ckpt", "--suite", "smoke", "--candidate-dtype", "float32", "--suite", "mine")
    bisect, explain, suites = next_steps(manifest(options=options), RECORDS)
    again = "'exp/my run.yaml' --checkpoint ckpt --suite smoke --candidate-dtype float32 --suite mine"
    assert f"`laya-opt bisect {again}`" in bisect and f"`laya-opt run {again} --bisect`" in bisect
    assert f"`laya-opt explain {again}`" in explain and "stage 2 quantize_encoder is the first that failed" in explain
    assert "The gates ran on smoke (9 records), mine (3 records)" in suites
    # the suite example keeps every other option and drops the run's own --suite choices
    assert "`laya-opt run 'exp/my run.yaml' --checkpoint ckpt --candidate-dtype float32 --suite NAME`" in suites
    assert "`laya-opt suites`" in suites


def test_an_experiment_without_a_file_and_the_report_section():
    section = next_steps_section(manifest(source=None), RECORDS[:3])
    assert section[:2] == ["## Next steps", ""] and section[-1] == "" and len(section) == 6
    assert f"`laya-opt bisect {PLACEHOLDER}`" in section[2] and section[2].startswith("- Find the cause")
