"""The run history: rows from results, filters, concurrent appends from several processes, the command."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from fake_passes import write_tiny_suite

from laya_opt.cli import main
from laya_opt.util.errors import InputError
from laya_opt.runs.experiment import load_experiment
from laya_opt.runs.history import HistoryFilter, append_run, history_path, parse_since, query, retrying
from laya_opt.runs.report import load_results
from laya_opt.runs.runner import run_experiment

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_checkpoint_dir):
    """One finished run of a two-pass experiment (read back from disk), shared by the tests."""
    base = tmp_path_factory.mktemp("history")
    raw = {"name": "hist", "checkpoint": str(tiny_checkpoint_dir), "suites": [str(write_tiny_suite(base / "s.jsonl"))],
           "candidate_dtype": "float32", "plugins": ["fake_passes"], "output_dir": str(base / "results"),
           "passes": [{"name": "noisy_scorer", "on_fail": "reject"}, {"name": "note"}],
           "benchmark": {"workloads": ["short-1"], "requests": 2, "blocks": 2, "warmup": 0, "forward_only": False}}
    (base / "hist.yaml").write_text(yaml.safe_dump(raw))
    outcome = run_experiment(load_experiment(base / "hist.yaml"), now=NOW, history=False)
    return load_results(outcome.results_dir)


def test_a_run_is_recorded_with_hashes_and_per_stage_headlines(results, tmp_path):
    db = tmp_path / "h.sqlite3"
    run_id = append_run(results.manifest, results.stages, results.path, exit_code=3, path=db)
    rows = query(db)
    assert [row["stage"] for row in rows] == ["baseline", "noisy_scorer", "note"]
    assert {row["run_id"] for row in rows} == {run_id}
    first = rows[0]
    assert first["checkpoint_sha256"] == results.manifest["checkpoint"]["sha256"]
    assert first["token_sha256"] == results.manifest["token_sha256"] and first["exit_code"] == 3
    assert first["started_utc"] == "2030-01-02T03:04:05Z" and first["experiment"] == "hist"
    assert first["backend"] == results.manifest["environment"]["backend"]
    assert first["reference_cache"] == results.manifest["reference"]["cache"]["status"] != "off"
    assert rows[1]["verdict"] == "rejected" and rows[1]["max_abs_dp"] > 0.0
    assert rows[0]["argmax_agreement"] == results.stages[0]["metrics"]["cumulative"]["argmax_agreement"]
    speedup = rows[2]["latency"]["short-1"]["end_to_end"]["speedup"]
    assert speedup == results.stages[2]["timings"]["short-1"]["end_to_end"]["speedup"]
    assert rows[1]["latency"] == {}  # a rejected stage is not timed
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_filters_select_by_experiment_stage_checkpoint_and_time(results, tmp_path):
    db = tmp_path / "h.sqlite3"
    older = {**results.manifest, "started_utc": "2029-06-01T00:00:00+00:00", "experiment": "other"}
    first = append_run(older, results.stages, results.path, 0, path=db)
    second = append_run(results.manifest, results.stages, results.path, 3, path=db)
    assert [row["run_id"] for row in query(db)][:1] == [second]  # newest first
    assert {row["run_id"] for row in query(db, HistoryFilter(experiment="other"))} == {first}
    assert [row["stage"] for row in query(db, HistoryFilter(stage="note"))] == ["note", "note"]
    prefix = results.manifest["checkpoint"]["sha256"][:8]
    assert len(query(db, HistoryFilter(checkpoint=prefix))) == 6 and query(db, HistoryFilter(checkpoint="zz")) == []
    assert {row["run_id"] for row in query(db, HistoryFilter(since=parse_since("2030-01-01")))} == {second}
    assert {row["run_id"] for row in query(db, HistoryFilter(limit=1))} == {second}


def test_since_reads_dates_times_and_ages():
    assert parse_since("2030-01-02") == "2030-01-02T00:00:00Z"
    assert parse_since("2030-01-02T05:04:05+02:00") == "2030-01-02T03:04:05Z"
    assert parse_since("7d", now=NOW) == "2029-12-26T03:04:05Z"
    assert parse_since("90m", now=NOW) == "2030-01-02T01:34:05Z"
    with pytest.raises(InputError, match="--since: 'last week'"):
        parse_since("last week")


APPENDER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from laya_opt.runs.history import append_run
    manifest, stages = json.loads(Path(sys.argv[1]).read_text())
    for _ in range(int(sys.argv[3])):
        append_run(manifest, stages, Path("results"), 0, path=Path(sys.argv[2]))
""")


def test_concurrent_runs_from_several_processes_lose_no_rows(results, tmp_path):
    data = tmp_path / "run.json"
    data.write_text(json.dumps([results.manifest, list(results.stages)]))
    db, processes, each = tmp_path / "shared.sqlite3", 4, 15
    workers = [subprocess.Popen([sys.executable, "-c", APPENDER, str(data), str(db), str(each)],
                                stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    for worker in workers:
        _, errors = worker.communicate(timeout=120)
        assert worker.returncode == 0, errors
    rows = query(db, HistoryFilter(limit=10_000))
    runs = {row["run_id"] for row in rows}
    assert len(runs) == processes * each and len(rows) == processes * each * len(results.stages)


def test_every_run_appends_to_the_default_history(results, tiny_checkpoint_dir, tmp_path):
    experiment = load_experiment(results.manifest["resolved"]["source"])
    outcome = run_experiment(experiment, bench=False, output_dir=tmp_path / "out", now=NOW)
    assert outcome.history.startswith("run ") and history_path().is_file()
    assert {row["results_dir"] for row in query()} == {str(outcome.results_dir)}


def test_the_history_command_prints_whole_ids_or_json(results):
    append_run(results.manifest, results.stages, results.path, 3)
    table = CliRunner().invoke(main, ["history", "--stage", "noisy_scorer"], catch_exceptions=False)
    assert table.exit_code == 0, table.output
    assert "1 noisy_scorer" in table.output and "rejected" in table.output and "1 run(s)" in table.output
    as_json = json.loads(CliRunner().invoke(main, ["history", "--json"]).output)
    assert [row["stage"] for row in as_json] == ["baseline", "noisy_scorer", "note"]
    empty = CliRunner().invoke(main, ["history", "--experiment", "nothing"])
    assert empty.exit_code == 0 and "no runs recorded that match" in empty.output
    bad = CliRunner().invoke(main, ["history", "--since", "soon"])
    assert bad.exit_code == 2 and "--since: 'soon'" in bad.output


def test_a_damaged_database_is_named_and_costs_a_run_only_its_history_row(results, tmp_path, monkeypatch):
    db = tmp_path / "broken.sqlite3"
    db.write_bytes(b"this is not an sqlite database" * 100)
    with pytest.raises(InputError, match="history database .*broken.sqlite3"):
        query(db)
    result = CliRunner().invoke(main, ["history", "--db", str(db)])
    assert result.exit_code == 2 and "broken.sqlite3" in result.output
    monkeypatch.setenv("LAYA_OPT_DATA_DIR", str(tmp_path / "as-file"))
    (tmp_path / "as-file").write_text("a file where the data folder should be")
    experiment = load_experiment(results.manifest["resolved"]["source"])
    outcome = run_experiment(experiment, bench=False, output_dir=tmp_path / "out", now=NOW)
    assert outcome.results_dir.is_dir() and outcome.history.startswith("not recorded in the run history")


def test_locked_answers_are_retried_and_other_errors_are_not():
    answers = [sqlite3.OperationalError("database is locked"), sqlite3.OperationalError("database is busy"), 7]

    def action():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retrying(action) == 7 and answers == []
    calls = []

    def broken():
        calls.append(1)
        raise sqlite3.OperationalError("no such table: runs")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        retrying(broken)
    assert len(calls) == 1


def test_a_schema_1_database_gains_the_kind_column_and_its_runs_read_as_runs(results, tmp_path):
    from laya_opt.runs.history import SCHEMA

    db = tmp_path / "old.sqlite3"
    old_schema = SCHEMA.replace(",\n    kind TEXT NOT NULL DEFAULT 'run'", "")
    assert old_schema != SCHEMA
    with sqlite3.connect(db) as connection:
        connection.executescript(old_schema + "PRAGMA user_version = 1;")
        connection.execute("INSERT INTO runs (recorded_utc, started_utc, experiment, results_dir, exit_code, "
                           "gates_failed) VALUES ('2029-01-01T00:00:00Z', '2029-01-01T00:00:00Z', 'old', 'r', 0, 0)")
        connection.execute("INSERT INTO stages (run_id, stage_index, stage, verdict, exact) "
                           "VALUES (1, 0, 'baseline', 'accepted', 1)")
    append_run({**results.manifest, "kind": "bench"}, results.stages, results.path, 0, path=db)
    kinds = {row["experiment"]: row["kind"] for row in query(db)}
    assert kinds == {"old": "run", "hist": "bench"}
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 2
