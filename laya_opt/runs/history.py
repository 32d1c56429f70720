"""The run history: one row per `laya-opt run` or `bench` (its `kind`) and one per stage, in an SQLite
database (WAL mode).

Rows are built from what a run writes to its results directory (manifest.json and the stage records),
so the history never holds a number the results directory does not. Appends take SQLite's write lock
(`BEGIN IMMEDIATE`) and wait for it, so runs finishing at the same moment all keep their rows.
The database lives at `<user data dir>/history.sqlite3` (`LAYA_OPT_DATA_DIR` moves it).
"""
from __future__ import annotations

import json
import re
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from laya_opt.util.errors import InputError
from laya_opt.util.resources import user_data_dir

SCHEMA_VERSION = 2  # 2: runs.kind
LOCK_WAIT_S = 60.0
STAGE_METRICS = ("argmax_agreement", "decisive_agreement", "max_abs_dp", "mean_abs_dp", "accuracy_candidate",
                 "ece_candidate")
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_utc TEXT NOT NULL,
    started_utc TEXT NOT NULL,
    experiment TEXT NOT NULL,
    results_dir TEXT NOT NULL,
    exit_code INTEGER NOT NULL,
    gates_failed INTEGER NOT NULL,
    checkpoint_sha256 TEXT,
    token_sha256 TEXT,
    suites TEXT,
    reference_dtype TEXT,
    candidate_dtype TEXT,
    git_revision TEXT,
    git_dirty INTEGER,
    laya_opt_version TEXT,
    mlx_version TEXT,
    device TEXT,
    backend TEXT,
    blas TEXT,
    reference_cache TEXT,
    kind TEXT NOT NULL DEFAULT 'run'
);
CREATE TABLE IF NOT EXISTS stages (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    stage_index INTEGER NOT NULL,
    stage TEXT NOT NULL,
    verdict TEXT NOT NULL,
    exact INTEGER NOT NULL,
    argmax_agreement REAL,
    decisive_agreement REAL,
    max_abs_dp REAL,
    mean_abs_dp REAL,
    accuracy_candidate REAL,
    ece_candidate REAL,
    wall_s REAL,
    latency TEXT,
    PRIMARY KEY (run_id, stage_index)
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs (experiment, started_utc);
CREATE INDEX IF NOT EXISTS stages_by_name ON stages (stage);
"""
RUN_COLUMNS = ("recorded_utc", "started_utc", "experiment", "results_dir", "exit_code", "gates_failed",
               "checkpoint_sha256", "token_sha256", "suites", "reference_dtype", "candidate_dtype", "git_revision",
               "git_dirty", "laya_opt_version", "mlx_version", "device", "backend", "blas", "reference_cache",
               "kind")
STAGE_COLUMNS = ("run_id", "stage_index", "stage", "verdict", "exact", *STAGE_METRICS, "wall_s", "latency")


def history_path() -> Path:
    return user_data_dir() / "history.sqlite3"


def utc_text(moment: datetime) -> str:
    """One sortable form for every timestamp: UTC, seconds, a Z."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_RELATIVE = re.compile(r"^(\d+)([dhm])$")


def parse_since(text: str, now: datetime | None = None) -> str:
    """An ISO date or date-time (UTC unless it says otherwise), or an age such as 7d, 12h, 30m."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[relative.group(2)]
        return utc_text((now or datetime.now(timezone.utc)) - timedelta(**{unit: int(relative.group(1))}))
    try:
        return utc_text(datetime.fromisoformat(text.strip().replace("Z", "+00:00")))
    except ValueError:
        raise InputError(f"--since: {text!r} is neither an ISO date/time (2030-01-02, 2030-01-02T03:04) "
                         "nor an age (7d, 12h, 30m)") from None


# ---------------------------------------------------------------------------------------------------------------------
# Rows from a results directory's contents


def _metric(record: Mapping, name: str) -> float | None:
    metrics = (record.get("metrics") or {}).get("cumulative") or {}
    value = metrics.get(name)
    return None if value is None else float(value)


def _latency(record: Mapping) -> dict:
    """workload -> mode -> the headline timing numbers of one stage."""
    return {workload: {mode: {"n": m["n"], "p50_ms": m["p50_ms"], "p95_ms": m["p95_ms"], "p99_ms": m["p99_ms"],
                              "speedup": m["speedup"]} for mode, m in modes.items()}
            for workload, modes in (record.get("timings") or {}).items()}


def run_row(manifest: Mapping, results_dir: Path, exit_code: int) -> dict:
    environment = manifest["environment"]
    return {
        "recorded_utc": utc_text(datetime.now(timezone.utc)),
        "started_utc": utc_text(datetime.fromisoformat(manifest["started_utc"])),
        "experiment": manifest["experiment"], "results_dir": str(results_dir), "exit_code": exit_code,
        "gates_failed": int(bool(manifest["gates_failed"])), "checkpoint_sha256": manifest["checkpoint"]["sha256"],
        "token_sha256": manifest["token_sha256"],
        "suites": json.dumps([{"name": s["name"], "sha256": s["sha256"]} for s in manifest["suites"]]),
        "reference_dtype": manifest["resolved"]["reference_dtype"],
        "candidate_dtype": manifest["resolved"]["candidate_dtype"],
        "git_revision": manifest["git"]["revision"], "git_dirty": int(bool(manifest["git"]["dirty"])),
        "laya_opt_version": environment["versions"].get("laya-opt"), "mlx_version": environment["versions"]["mlx"],
        "device": environment["device"], "backend": environment.get("backend"),
        "blas": (environment.get("blas") or {}).get("kind"),
        "reference_cache": (manifest.get("reference", {}).get("cache") or {}).get("status"),
        "kind": manifest.get("kind", "run"),  # results written before bench shared the format are runs
    }


def stage_rows(run_id: int, records: Sequence[Mapping]) -> list[dict]:
    return [{"run_id": run_id, "stage_index": r["index"], "stage": r["stage"], "verdict": r["verdict"],
             "exact": int(bool(r["exact"])), **{name: _metric(r, name) for name in STAGE_METRICS},
             "wall_s": (r.get("apply_s") or 0.0) + (r.get("evaluate_s") or 0.0),
             "latency": json.dumps(_latency(r))} for r in records]


# ---------------------------------------------------------------------------------------------------------------------
# The database


def retrying(action: Callable[[], Any]) -> Any:
    """`action()`, again while SQLite says the database is locked or busy, for up to LOCK_WAIT_S.

    The connection's timeout covers waiting for a lock; a few paths (switching a new file to WAL while
    another process opens it, a WAL recovery in progress) answer "locked" at once instead.
    """
    deadline, pause = time.monotonic() + LOCK_WAIT_S, 0.01
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not any(word in str(exc) for word in ("locked", "busy")) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.5)


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection with the schema in place; transactions are opened explicitly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return retrying(lambda: _open(path))
    except sqlite3.DatabaseError as exc:  # not a database, or locked past the wait
        raise InputError(f"history database {path}: {exc}") from None


def _open(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(str(path), timeout=LOCK_WAIT_S, isolation_level=None)
    try:
        if connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # persistent: set once per file
            connection.execute("PRAGMA journal_mode=WAL")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(f"history database {path} has schema {version}, newer than this laya-opt's "
                             f"({SCHEMA_VERSION})")
        if version < SCHEMA_VERSION:
            _write(connection, _create)
    except BaseException:
        connection.close()
        raise
    return connection


def _write(connection: sqlite3.Connection, body: Callable[[sqlite3.Connection], Any]) -> Any:
    """`body(connection)` in one transaction that holds the write lock from its start."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = body(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


def _create(connection: sqlite3.Connection) -> None:
    """The tables (another process may be creating them too: IF NOT EXISTS)."""
    for statement in filter(str.strip, SCHEMA.split(";")):
        connection.execute(statement)
    columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
    if "kind" not in columns:  # a schema-1 database: its runs were all `run`s
        connection.execute("ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'run'")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def append_run(manifest: Mapping, records: Sequence[Mapping], results_dir: Path, exit_code: int,
               path: Path | None = None) -> int:
    """Append one run and its stages in one transaction; returns the run's id."""
    row = run_row(manifest, results_dir, exit_code)

    def insert(connection: sqlite3.Connection) -> int:
        cursor = connection.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES "
                                    f"({', '.join('?' * len(RUN_COLUMNS))})", [row[c] for c in RUN_COLUMNS])
        run_id = int(cursor.lastrowid)
        connection.executemany(f"INSERT INTO stages ({', '.join(STAGE_COLUMNS)}) VALUES "
                               f"({', '.join('?' * len(STAGE_COLUMNS))})",
                               [[stage[c] for c in STAGE_COLUMNS] for stage in stage_rows(run_id, records)])
        return run_id

    with closing(connect(path or history_path())) as connection:
        return retrying(lambda: _write(connection, insert))


@dataclass(frozen=True)
class HistoryFilter:
    experiment: str | None = None
    stage: str | None = None
    checkpoint: str | None = None     # a prefix of the checkpoint's SHA-256
    since: str | None = None          # utc_text form
    kind: str | None = None           # "run" or "bench"
    limit: int = 50                   # runs, newest first


def query(path: Path | None = None, where: HistoryFilter = HistoryFilter()) -> list[dict[str, Any]]:
    """One dict per (run, stage), newest run first, stages in order; latency decoded."""
    path = path or history_path()
    if not path.is_file():
        return []
    conditions, values = [], []
    for clause, value in (("r.experiment = ?", where.experiment), ("s.stage = ?", where.stage),
                          ("r.checkpoint_sha256 LIKE ? || '%'", where.checkpoint), ("r.started_utc >= ?", where.since),
                          ("r.kind = ?", where.kind)):
        if value is not None:
            conditions.append(clause)
            values.append(value)
    condition = " AND ".join(conditions) or "1"
    with closing(connect(path)) as connection:
        connection.row_factory = sqlite3.Row
        # the newest `limit` runs that have a matching stage, then those stages
        rows = connection.execute(
            f"SELECT r.id AS run_id, r.*, s.* FROM runs r JOIN stages s ON s.run_id = r.id "
            f"WHERE {condition} AND r.id IN (SELECT r.id FROM runs r JOIN stages s ON s.run_id = r.id "
            f"WHERE {condition} GROUP BY r.id ORDER BY r.started_utc DESC, r.id DESC LIMIT ?) "
            f"ORDER BY r.started_utc DESC, r.id DESC, s.stage_index", [*values, *values, where.limit]).fetchall()
    entries = [{key: row[key] for key in row.keys() if key != "id"} for row in rows]
    for entry in entries:
        entry["latency"] = json.loads(entry["latency"] or "{}")
        entry["suites"] = json.loads(entry["suites"] or "[]")
    return entries
