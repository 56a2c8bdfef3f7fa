"""``rocky tick`` and ``rocky state schedule`` end to end: the real CLI, real ``rocky run`` children."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rocky_sdk.types_generated import tick_schema

from rocky_engine import __version__
from rocky_engine.schedule.spool import spool_dir_of, write_demand
from rocky_engine.schedule.tick_lock import TickLock
from tests.engine.schedule.kit import T0, rocky, tick_json, transformation, write_project

GOOD = {"good.sql": "select 1 as x\n"}
BAD = {"bad.sql": "select no_such_column from no_such_table\n"}


def cron_project(root: Path, models: dict[str, str] = GOOD, schedule: str = 'cron = "0 * * * *"') -> Path:
    body = transformation("models", schedule) + transformation("after_models", 'after = ["models"]')
    return write_project(root, body, models)


@pytest.mark.slow
def test_scheduled_runs_are_recorded_with_trigger_and_submission_id(tmp_path: Path) -> None:
    cron_project(tmp_path)
    code, first = tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")
    assert code == 0 and first["executed"] == []
    code, doc = tick_json(tmp_path, "--now", "2026-05-02T04:00:30Z")
    assert code == 0, doc
    assert [(e["pipeline"], e["source"], e["outcome"], e["exit_code"]) for e in doc["executed"]] == [
        ("models", "cron", "success", 0),
        ("after_models", "after", "success", 0),
    ]
    assert doc["counts"] == {
        "evaluated": 2,
        "due": 2,
        "executed": 2,
        "succeeded": 2,
        "partial": 0,
        "failed": 0,
        "skipped": 0,
    }
    history = json.loads(rocky(tmp_path, "history", "--output", "json").stdout)
    by_submission = {r["submission_id"]: r for r in history["runs"]}
    for executed in doc["executed"]:
        run = by_submission[executed["submission_id"]]
        assert run["trigger"] == "Schedule" and run["pipeline"] == executed["pipeline"]


@pytest.mark.slow
def test_a_failed_scheduled_run_exits_2_and_writes_an_incident(tmp_path: Path) -> None:
    cron_project(tmp_path, BAD)
    tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")
    code, doc = tick_json(tmp_path, "--now", "2026-05-02T04:00:30Z")
    assert code == 2
    [executed] = doc["executed"]
    assert (executed["pipeline"], executed["outcome"], executed["exit_code"]) == ("models", "failure", 1)
    incident = json.loads(Path(executed["incident"]).read_text())
    assert incident["incident_version"] == 1 and incident["exit_code"] == 1
    assert incident["consecutive_failures"] == 1 and incident["submission_id"] == executed["submission_id"]
    # the next tick skips nothing due and exits 0: the problem lives in the JSON, not the exit code
    code, quiet = tick_json(tmp_path, "--now", "2026-05-02T04:01:00Z")
    assert code == 0 and quiet["executed"] == []


def test_tick_json_shape_when_nothing_is_due(tmp_path: Path) -> None:
    cron_project(tmp_path)
    code, doc = tick_json(tmp_path, "--now", "2026-05-02T03:10:00+01:00")
    assert code == 0
    assert list(doc) == [
        "version",
        "command",
        "dry_run",
        "now",
        "duration_ms",
        "tick_in_progress",
        "lock_overridden",
        "evaluated",
        "executed",
        "skipped",
        "counts",
    ]
    assert (doc["version"], doc["command"], doc["dry_run"], doc["now"]) == (
        __version__,
        "tick",
        False,
        "2026-05-02T02:10:00.000Z",
    )
    assert doc["skipped"] == [
        {"pipeline": "models", "source": "cron", "reason": "not_due", "detail": "first sight: anchored"},
        {"pipeline": "after_models", "source": "after", "reason": "not_due", "detail": "waiting on models"},
    ]


def test_dry_run_reports_and_writes_nothing(tmp_path: Path) -> None:
    cron_project(tmp_path)
    tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")
    state = tmp_path / "models" / ".rocky-state.db"
    before = state.read_bytes()
    code, doc = tick_json(tmp_path, "--dry-run", "--now", "2026-05-02T04:00:30Z")
    assert code == 0 and doc["dry_run"] is True and doc["executed"] == []
    assert doc["evaluated"][0] == {
        "pipeline": "models",
        "due": True,
        "due_source": "cron",
        "logical_ts": "2026-05-02T04:00:00.000Z",
        "sources": [{"source": "cron", "reason": "due"}],
    }
    assert state.read_bytes() == before


@pytest.mark.parametrize(
    ("now", "message"),
    [
        (
            "yesterday",
            "error: --now 'yesterday' is not an RFC 3339 timestamp; write it like 2026-05-02T03:00:00Z",
        ),
        ("2026-05-02T03:00:00", "error: --now '2026-05-02T03:00:00' has no UTC offset"),
    ],
)
def test_bad_now_exits_1(tmp_path: Path, now: str, message: str) -> None:
    cron_project(tmp_path)
    proc = rocky(tmp_path, "tick", "--now", now)
    assert proc.returncode == 1 and proc.stdout == ""
    assert message in proc.stderr


def test_after_cycle_and_bad_config_exit_1(tmp_path: Path) -> None:
    write_project(tmp_path, transformation("a", 'after = ["b"]') + transformation("b", 'after = ["a"]'), GOOD)
    proc = rocky(tmp_path, "tick")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "schedule after cycle detected involving: ['a', 'b']" in proc.stderr
    (tmp_path / "rocky.toml").write_text("[pipeline.x\n")
    proc = rocky(tmp_path, "tick")
    assert proc.returncode == 1 and "error:" in proc.stderr and "Traceback" not in proc.stderr


def test_tick_in_progress_skips_with_exit_0(tmp_path: Path) -> None:
    cron_project(tmp_path)
    lock = TickLock(tmp_path / ".rocky")
    assert lock.acquire() == "acquired"
    try:
        code, doc = tick_json(tmp_path)
    finally:
        lock.release()
    assert code == 0 and doc["tick_in_progress"] is True and doc["evaluated"] == []
    # a whole-tick skip names neither a pipeline nor a source (the published shape)
    assert doc["skipped"] == [{"reason": "tick_in_progress"}]
    tick_schema.TickOutput.model_validate(doc)


def test_unreadable_spool_exits_1(tmp_path: Path) -> None:
    cron_project(tmp_path)
    spool = spool_dir_of(tmp_path / ".rocky")
    spool.parent.mkdir()
    spool.symlink_to(tmp_path / "gone")
    code, doc = tick_json(tmp_path, "--now", "2026-05-02T03:10:00Z")
    assert code == 1 and "dangling symlink" in doc["errors"][0]
    # the published shape also reports the unconsumed webhook demand as a pipeline-less skip
    [skip] = [s for s in doc["skipped"] if s["reason"] == "spool_unreadable"]
    assert skip == {"source": "webhook", "reason": "spool_unreadable", "detail": doc["errors"][0]}
    assert doc["counts"]["skipped"] == len(doc["skipped"])
    tick_schema.TickOutput.model_validate(doc)
    proc = rocky(tmp_path, "state", "schedule", "spool")
    assert proc.returncode == 1 and "dangling symlink" in proc.stderr


def test_quiet_tick_imports_neither_duckdb_nor_pyarrow(tmp_path: Path) -> None:
    cron_project(tmp_path)
    code = (
        "import sys\n"
        "from rocky_engine.cli.main import run_cli\n"
        "rc = run_cli(['tick', '--now', '2026-05-02T03:10:00Z', '--output', 'json'])\n"
        "heavy = [m for m in ('duckdb', 'pyarrow', 'httpx', 'starlette', 'rich') if m in sys.modules]\n"
        "sys.stderr.write(f'HEAVY={heavy} RC={rc}\\n')\n"
    )
    for _ in range(2):  # first sight (anchoring, croniter) and a quiet tick
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert "HEAVY=[] RC=0" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_state_schedule_pause_resume_and_spool(tmp_path: Path) -> None:
    cron_project(tmp_path)
    proc = rocky(tmp_path, "state", "schedule", "pause", "models", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["command"], doc["action"], doc["pipeline"], doc["paused"]) == (
        "state",
        "pause",
        "models",
        True,
    )
    _, tick = tick_json(tmp_path, "--now", "2026-05-02T04:00:30Z")
    assert (tick["skipped"][0]["pipeline"], tick["skipped"][0]["reason"]) == ("models", "paused")
    proc = rocky(tmp_path, "state", "schedule", "resume", "models", "--output", "json")
    assert json.loads(proc.stdout)["paused"] is False
    proc = rocky(tmp_path, "state", "schedule", "pause", "nope")
    assert proc.returncode == 1 and "unknown pipeline 'nope'" in proc.stderr

    empty = json.loads(rocky(tmp_path, "state", "schedule", "spool", "--output", "json").stdout)
    assert empty["demands"] == [] and empty["action"] == "spool"
    w = write_demand(
        spool_dir_of(tmp_path / ".rocky"), pipeline="models", body=b"{}", delivery_id="evt-1", now=T0
    )
    listed = json.loads(rocky(tmp_path, "state", "schedule", "spool", "--output", "json").stdout)
    assert listed["demands"] == [
        {
            "demand_uid": w.demand_uid,
            "pipeline": "models",
            "accepted_at": "2026-05-02T03:00:00.000Z",
            "body_sha256": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
            "delivery_id": "evt-1",
        }
    ]
    table = rocky(tmp_path, "state", "schedule", "spool", "--output", "table")
    assert table.stdout.split()[:4] == ["ACCEPTED", "PIPELINE", "DEMAND", "DELIVERY"]
