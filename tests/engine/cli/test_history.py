"""``rocky history`` end to end: a real state file, the real CLI in a subprocess."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rocky_engine import __version__
from rocky_engine.state import ModelExecution, RunRecord, StateStore
from tests.fixtures.projects import Cli, run_rocky

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
RUN_KEYS = {"run_id", "started_at", "duration_ms", "status", "trigger", "models_executed", "models"}
AUDIT_KEYS = {"hostname", "triggering_identity", "config_hash", "idempotency_key", "exit_code"}


def rocky(cwd: Path, *args: str) -> Cli:
    return run_rocky(args, cwd=cwd)


def doc(proc: Cli) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("\n")
    parsed: dict[str, Any] = json.loads(proc.stdout)
    return parsed


def _run(i: int, *, models: tuple[str, ...] = (), **fields: Any) -> RunRecord:
    start = T0 + timedelta(days=i)
    values: dict[str, Any] = {
        "run_id": f"run-202603{i + 1:02d}-080000-000",
        "pipeline": "orders",
        "started_at": start,
        "finished_at": start + timedelta(seconds=90),
        "status": "Success",
        "models_executed": [
            ModelExecution(model_name=m, started_at=start + timedelta(seconds=j), duration_ms=250 + j,
                           rows_affected=None if m == "v_view" else 100 * (j + 1), status="success")
            for j, m in enumerate(models)
        ],
    }
    values.update(fields)
    return RunRecord(**values)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory with a models dir: the store lives at models/.rocky-state.db."""
    (tmp_path / "models").mkdir()
    return tmp_path


def seed(project: Path, records: list[RunRecord]) -> Path:
    path = project / "models" / ".rocky-state.db"
    with StateStore.open(path) as store:
        store.runs.insert_many(records)
    return path


def test_fresh_project_has_no_runs(project: Path) -> None:
    result = doc(rocky(project, "history", "--output", "json"))
    assert result == {"version": __version__, "command": "history", "count": 0, "runs": []}
    assert not (project / "models" / ".rocky-state.db").exists()
    table = rocky(project, "history", "--output", "table")
    assert table.returncode == 0 and "no runs recorded yet" in table.stdout


def test_runs_newest_first_with_contract_shape(project: Path) -> None:
    seed(project, [
        _run(0, models=("stg_orders", "fct_revenue")),
        _run(1, status="PartialFailure", trigger="Schedule", submission_id="sub-1", duration_ms=1234,
             hostname="h1", exit_code=2),
    ])
    result = doc(rocky(project, "history"))  # piped: JSON by default
    assert set(result) == {"version", "command", "count", "runs"} and result["count"] == 2
    newest, oldest = result["runs"]
    assert newest == {
        "run_id": "run-20260302-080000-000",
        "started_at": "2026-03-02T08:00:00.000Z",
        "duration_ms": 1234,
        "status": "PartialFailure",
        "trigger": "Schedule",
        "models_executed": 0,
        "models": [],
        "pipeline": "orders",
        "submission_id": "sub-1",
    }
    assert set(oldest) == RUN_KEYS | {"pipeline"}
    assert oldest["models_executed"] == 2
    # what each model did (the published client's runs[].models)
    assert oldest["models"] == [
        {"model_name": "stg_orders", "duration_ms": 250, "rows_affected": 100, "status": "success"},
        {"model_name": "fct_revenue", "duration_ms": 251, "rows_affected": 200, "status": "success"},
    ]
    assert oldest["duration_ms"] == 90_000  # derived from start and finish
    assert oldest["trigger"] == "Manual"


def test_only_the_newest_50(project: Path) -> None:
    seed(project, [_run(i) for i in range(55)])
    runs = doc(rocky(project, "history"))["runs"]
    assert len(runs) == 50
    assert runs[0]["started_at"] == (T0 + timedelta(days=54)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_audit_adds_the_governance_trail(project: Path) -> None:
    seed(project, [
        _run(0, hostname="host-a", triggering_identity="alice", config_hash="c0ffee", idempotency_key="k1",
             exit_code=0),
        _run(1),
    ])
    plain = doc(rocky(project, "history"))["runs"]
    assert not any(AUDIT_KEYS & set(r) for r in plain)
    audited = doc(rocky(project, "history", "--audit"))["runs"]
    assert {k: audited[1][k] for k in AUDIT_KEYS} == {
        "hostname": "host-a", "triggering_identity": "alice", "config_hash": "c0ffee",
        "idempotency_key": "k1", "exit_code": 0,
    }
    assert not AUDIT_KEYS & set(audited[0])  # unknown fields are omitted
    table = rocky(project, "history", "--audit", "-o", "table")
    assert table.returncode == 0
    assert "HOST" in table.stdout and "host-a" in table.stdout and "alice" in table.stdout


def test_model_lists_its_executions(project: Path) -> None:
    seed(project, [
        _run(0, models=("stg_orders", "fct_revenue")),
        _run(1, models=("stg_orders",)),
        _run(2, models=("fct_revenue", "v_view")),
    ])
    result = doc(rocky(project, "history", "--model", "fct_revenue"))
    assert result["command"] == "history" and result["model"] == "fct_revenue"
    assert "runs" not in result
    assert result["executions"] == [
        {"run_id": "run-20260303-080000-000", "started_at": "2026-03-03T08:00:00.000Z",
         "model_name": "fct_revenue", "duration_ms": 250, "rows_affected": 100, "status": "success",
         "sql_hash": ""},
        {"run_id": "run-20260301-080000-000", "started_at": "2026-03-01T08:00:01.000Z",
         "model_name": "fct_revenue", "duration_ms": 251, "rows_affected": 200, "status": "success",
         "sql_hash": ""},
    ]
    view = doc(rocky(project, "history", "--model", "v_view"))["executions"]
    assert set(view[0]) == {"run_id", "started_at", "model_name", "duration_ms", "status", "sql_hash"}
    assert doc(rocky(project, "history", "--model", "nope"))["executions"] == []


@pytest.mark.parametrize(
    ("since", "expected"),
    [
        ("2026-03-02", ["run-20260303-080000-000", "run-20260302-080000-000"]),
        ("2026-03-02T08:00:00Z", ["run-20260303-080000-000", "run-20260302-080000-000"]),
        ("2026-03-02T09:00:01+01:00", ["run-20260303-080000-000"]),
        ("2027-01-01", []),
    ],
)
def test_since(project: Path, since: str, expected: list[str]) -> None:
    seed(project, [_run(0), _run(1), _run(2)])
    runs = doc(rocky(project, "history", "--since", since))["runs"]
    assert [r["run_id"] for r in runs] == expected


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "2026-03-01T08:00:00", "03/01/2026"])
def test_bad_since_is_a_usage_error(project: Path, bad: str) -> None:
    proc = rocky(project, "history", "--since", bad)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == (
        f"error: invalid --since '{bad}': use a date (YYYY-MM-DD, UTC) or an RFC 3339 timestamp such as "
        "2026-03-01T08:00:00Z\n"
    )


def test_reads_while_a_writer_holds_the_lock(project: Path) -> None:
    path = seed(project, [_run(0)])
    with StateStore.open(path):
        runs = doc(rocky(project, "history"))["runs"]
    assert [r["run_id"] for r in runs] == ["run-20260301-080000-000"]


def test_state_path_and_namespace_flags(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "other" / "s.db"
    with StateStore.open(elsewhere) as store:
        store.runs.insert(_run(5))
    with StateStore.open(project / "models" / ".rocky-state" / "tenant_a.db") as store:
        store.runs.insert(_run(6))
    assert [r["run_id"] for r in doc(rocky(project, "--state-path", str(elsewhere), "history"))["runs"]] == [
        "run-20260306-080000-000"
    ]
    assert [r["run_id"] for r in doc(rocky(project, "history", "--state-namespace", "tenant_a"))["runs"]] == [
        "run-20260307-080000-000"
    ]
    bad = rocky(project, "history", "--state-namespace", "a-b")
    assert bad.returncode == 1
    assert "invalid --state-namespace 'a-b': use letters, digits and _ only" in bad.stderr


def test_newer_store_is_refused(project: Path) -> None:
    path = seed(project, [_run(0)])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE metadata SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    proc = rocky(project, "history")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert f"state store at {path} has schema version 999, newer than this engine supports" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_store_is_reported(project: Path) -> None:
    path = project / "models" / ".rocky-state.db"
    path.write_bytes(b"garbage" * 1000)
    proc = rocky(project, "history")
    assert proc.returncode == 1
    assert f"error: state store at {path} is damaged: SQLite cannot " in proc.stderr
    assert "move it aside" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_table_and_markdown_output(project: Path) -> None:
    seed(project, [_run(0, models=("a", "b"))])
    table = rocky(project, "history", "-o", "table")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["RUN", "ID", "STARTED"]
    assert "run-20260301-080000-000" in lines[2] and "1m30s" in lines[2] and "Success" in lines[2]
    md = rocky(project, "history", "-o", "md")
    assert md.stdout.startswith("*Rocky history* · 1 run(s), newest first\n- success `orders` ")
    model = rocky(project, "history", "--model", "a", "-o", "table")
    assert "model a" in model.stdout and "250ms" in model.stdout
